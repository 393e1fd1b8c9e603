"""Where events come from: JSON-lines files, or Kafka topics. Both give (value, seq); the
value is the record's bytes (Kafka) or the line as Spark read it (files), unchecked."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from replmon.streaming.settings import KafkaSource


def file_source(spark: SparkSession, path: str, max_files_per_trigger: int | None = None) -> DataFrame:
    """A file or a folder of JSON-lines files. Spark's streaming file source has no line number,
    so `seq` is 0 and events are ordered by event time (and type on ties: see stateful.py)."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"replmon: input path does not exist: {path}")
    reader = spark.readStream.format("text")
    if max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", max_files_per_trigger)
    if p.is_dir():
        reader = reader.option("recursiveFileLookup", "true")
        df = reader.load(str(p.resolve()))
    else:
        # A streaming file source watches a folder ("Option 'basePath' must be a directory"):
        # watch the file's folder for that one name.
        df = reader.option("pathGlobFilter", _glob_literal(p.name)).load(str(p.resolve().parent))
    return df.select("value", F.lit(0).cast("long").alias("seq"))


def _glob_literal(name: str) -> str:
    """A file name as a glob that matches only itself."""
    return "".join(f"[{c}]" if c in "*?[]{}\\" else c for c in name)


def kafka_options(conf: KafkaSource) -> dict[str, str]:
    """Options for Spark's Kafka source. Values of `conf.options` are secrets: never log them."""
    if not conf.bootstrap_servers:
        raise ValueError("kafka.bootstrap_servers is not set")
    opts = {
        "kafka.bootstrap.servers": conf.bootstrap_servers,
        "failOnDataLoss": str(conf.fail_on_data_loss).lower(),
        "includeHeaders": "false",
    }
    if conf.subscribe_pattern:
        opts["subscribePattern"] = conf.subscribe_pattern
    elif conf.subscribe:
        opts["subscribe"] = conf.subscribe
    else:
        raise ValueError("kafka.subscribe or kafka.subscribe_pattern must be set")
    if conf.starting_timestamp_ms is not None:
        opts["startingTimestamp"] = str(conf.starting_timestamp_ms)
    else:
        opts["startingOffsets"] = conf.starting_offsets
    if conf.max_offsets_per_trigger:
        opts["maxOffsetsPerTrigger"] = str(conf.max_offsets_per_trigger)
    for name, value in conf.options.items():
        key = name if name.startswith("kafka.") else f"kafka.{name}"
        opts[key] = value.get_secret_value()
    return opts


def kafka_source(spark: SparkSession, conf: KafkaSource) -> DataFrame:
    """The metrics topic(s). Records are keyed by cluster/topic/partition, so the Kafka offset
    orders the events of one monitored partition."""
    reader = spark.readStream.format("kafka")
    for key, value in kafka_options(conf).items():
        reader = reader.option(key, value)
    df = reader.load()
    seq = F.col("partition").cast("long") * F.lit(1 << 40) + F.col("offset")
    # The value stays bytes: parse.py turns it into text only once it is known to be valid.
    return df.select(F.col("value"), seq.alias("seq"))
