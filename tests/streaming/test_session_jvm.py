"""The JVM the session starts: the options it runs with."""

from replmon.streaming.session import COMPILE_HUGE_METHODS, java_options


def test_the_jvm_compiles_huge_methods(spark):
    """The parse stage's generated method is past HotSpot's size limit for the JIT: without the
    flag it runs interpreted (streaming/session.py)."""
    bean = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    assert "-XX:-DontCompileHugeMethods" in list(bean.getInputArguments())


def test_java_options_given_in_the_settings_are_kept():
    options = java_options(
        {"spark.driver.extraJavaOptions": "-Dreplmon.a=1", "spark.executor.extraJavaOptions": "-Xss4m"}
    )
    assert options["spark.driver.extraJavaOptions"].split()[:2] == ["-Dreplmon.a=1", COMPILE_HUGE_METHODS]
    assert options["spark.executor.extraJavaOptions"] == f"-Xss4m {COMPILE_HUGE_METHODS}"
    assert java_options({})["spark.executor.extraJavaOptions"] == COMPILE_HUGE_METHODS
