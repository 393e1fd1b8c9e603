"""The SparkSession: local mode by default, settings applied before the JVM starts."""
from __future__ import annotations

import logging
import os
import sys

from pyspark.sql import SparkSession

from replmon.streaming import console
from replmon.streaming.settings import SparkConf

log = logging.getLogger(__name__)


def build_session(conf: SparkConf, app_name: str = "replmon") -> SparkSession:
    """Create (or return) the session. Driver memory and jars only take effect when this call
    starts the JVM, so call it before anything else touches Spark."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    # Python workers run this same interpreter, where replmon is installed: no path edits.
    builder = (SparkSession.builder.master(conf.master).appName(app_name)
               .config("spark.driver.memory", conf.driver_memory)
               .config("spark.sql.shuffle.partitions", str(conf.shuffle_partitions))
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.streaming.noDataMicroBatches.enabled", "true")
               .config("spark.sql.execution.arrow.maxRecordsPerBatch", "100000"))
    if conf.jars:
        builder = builder.config("spark.jars", ",".join(conf.jars))
    java_options = console.spark_java_options()
    if java_options:
        builder = builder.config("spark.driver.extraJavaOptions", java_options)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(console.spark_log_level())
    log.info("spark %s session on %s", spark.version, conf.master)
    return spark
