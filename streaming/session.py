"""The SparkSession: local mode by default, settings applied before the JVM starts.

On a cluster (`spark.master` spark://, k8s://, yarn), replmon's own code is shipped to the
executors as a zip (streaming/ship.py), and the Kafka connector jars in `spark.jars` are served
to them by the driver. Under spark-submit, its --master and --conf stand unless the settings
name a master."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from pyspark.sql import SparkSession

from replmon.streaming import console
from replmon.streaming.settings import SettingsError, SparkConf

log = logging.getLogger(__name__)
# A development convenience that only exists in a replmon checkout, found from the working
# directory (installed code never guesses where its source lives).
CHECKOUT_JARS = Path("deploy") / "local" / "jars"  # where deploy/local/fetch-jars.sh puts them


def build_session(conf: SparkConf, app_name: str = "replmon") -> SparkSession:
    """Create (or return) the session. Driver memory and jars only take effect when this call
    starts the JVM, so call it before anything else touches Spark."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    # Python workers run this same interpreter, where replmon is installed: no path edits.
    master = conf.master or (None if launched_by_spark_submit() else LOCAL_MASTER)
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    builder = (
        builder.config("spark.driver.memory", conf.driver_memory)
        .config("spark.sql.shuffle.partitions", str(conf.shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.streaming.noDataMicroBatches.enabled", "true")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "100000")
    )
    if conf.jars:
        builder = builder.config("spark.jars", ",".join(conf.jars))
    if conf.state_store == "rocksdb":
        builder = builder.config("spark.sql.streaming.stateStore.providerClass", ROCKSDB_PROVIDER)
    if conf.executor_memory:
        builder = builder.config("spark.executor.memory", conf.executor_memory)
    for key, value in conf.conf.items():
        builder = builder.config(key, value)
    for key, options in java_options(conf.conf).items():
        builder = builder.config(key, options)
    with jvm_ignores_sigterm():
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(console.spark_log_level())
    actual = spark.sparkContext.master
    if actual and not actual.startswith("local"):
        ship_code(spark)
    log.info("spark %s session on %s (state store %s)", spark.version, actual, conf.state_store)
    return spark


# Spark compiles a stage's rows into one Java method; the parse stage's (the typed from_json,
# the contract checks, the bucket) is past HotSpot's 8,000-byte limit for JIT compilation, so by
# default it runs in the bytecode interpreter: a profile of the monitor at 20,000 partitions had
# 28% of the JVM's CPU samples in that one interpreted method. This flag lets HotSpot compile it.
COMPILE_HUGE_METHODS = "-XX:-DontCompileHugeMethods"


def java_options(conf: dict[str, str]) -> dict[str, str]:
    """spark.driver.extraJavaOptions and spark.executor.extraJavaOptions: the options given in
    the settings' `spark.conf`, then the JIT flag and (the driver's) the quiet log configuration."""
    out = {}
    for role, extra in (("driver", console.spark_java_options()), ("executor", None)):
        key = f"spark.{role}.extraJavaOptions"
        out[key] = " ".join(o for o in (conf.get(key), COMPILE_HUGE_METHODS, extra) if o)
    return out


@contextlib.contextmanager
def jvm_ignores_sigterm() -> Iterator[None]:
    """The JVM this starts ignores SIGTERM, as pyspark already has it ignore SIGINT: a stop sent
    to replmon's whole process group (systemd's default KillMode, `kill -- -PGID`) is then
    replmon's to carry out (streaming/signals.py: the query stops, then the process exits and
    the JVM with it, its stdin closed), not the JVM's shutdown hook's, which would end the query
    from under it and print Spark's errors. HotSpot leaves a signal ignored at its start
    ignored. SIGKILL still ends everything. Best effort: a pyspark that launches its JVM some
    other way is left as it is."""
    from pyspark import java_gateway

    popen = getattr(java_gateway, "Popen", None)
    if popen is None or os.name != "posix":
        yield
        return

    def popen_ignoring_sigterm(*args, **kwargs):
        inner = kwargs.get("preexec_fn")

        def preexec() -> None:
            if inner is not None:
                inner()
            signal.signal(signal.SIGTERM, signal.SIG_IGN)

        kwargs["preexec_fn"] = preexec
        return popen(*args, **kwargs)

    vars(java_gateway)["Popen"] = popen_ignoring_sigterm
    try:
        yield
    finally:
        vars(java_gateway)["Popen"] = popen


LOCAL_MASTER = "local[2]"
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def launched_by_spark_submit() -> bool:
    """spark-submit starts the JVM first and hands the Python driver its gateway."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def ship_code(spark: SparkSession) -> Path:
    """Add replmon's code to every executor's Python path (once per session)."""
    from replmon.streaming.ship import code_zip

    path = code_zip(Path(tempfile.gettempdir()))
    sc = spark.sparkContext
    if path.name not in (sc._python_includes or ()):
        sc.addPyFile(str(path))
        log.info("shipping replmon's code to the executors as %s", path)
    return path


def local_kafka_jars() -> list[str]:
    """spark.jars for a Kafka input when none are set: pyspark ships no Kafka source, and jars
    must be on the session before it starts. Uses what deploy/local/fetch-jars.sh fetched, when
    run from a checkout."""
    if connector_installed():
        return []
    jars = sorted(str(p.resolve()) for p in CHECKOUT_JARS.glob("*.jar"))
    if not jars:
        raise SettingsError(
            "replmon: reading Kafka needs Spark's Kafka connector jars: set spark.jars (e.g. "
            "REPLMON_SPARK__JARS='[\"/path/spark-sql-kafka-0-10_2.13-X.jar\", ...]'), or run "
            f"deploy/local/fetch-jars.sh in a checkout and run replmon from there ({CHECKOUT_JARS})"
        )
    log.info("spark.jars not set: using the Kafka connector jars in %s", CHECKOUT_JARS.resolve())
    return jars


def connector_installed() -> bool:
    """The Kafka connector is already in pyspark's own jars folder (replmon's image puts it
    there: deploy/docker/Dockerfile), so it is on every classpath without spark.jars."""
    from pyspark.find_spark_home import _find_spark_home

    return any((Path(_find_spark_home()) / "jars").glob("spark-sql-kafka-0-10_*.jar"))
