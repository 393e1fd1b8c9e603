"""Settings: environment (REPLMON_*, nested with __), a .env file, and an optional TOML file.

Strict and frozen: an unknown key or a bad value fails before Spark starts, with a message
that names the setting. Secrets are SecretStr and never printed.

Every default is stated once (tests/test_config_once.py fails otherwise):
- replmon's own defaults are stated here, as settings. The engine's frozen `MonitorConfig`
  (state/monitor_config.py) has no defaults: `Settings.monitor_config()` fills each of its fields from
  the setting of the same name in one of ENGINE_SECTIONS, and `monitor_config(**changes)` gives
  tests and benches the defaults without reading the environment. A new engine field is one line
  in MonitorConfig plus its setting here, in one of those sections; nothing else changes.
- Kafka's own defaults (replica.lag.time.max.ms, ...) are stated with their provenance in
  state/partition.py (KAFKA_DEFAULTS); the `rules` section takes them from there.
- A sink's knobs are stated by its own settings model in sinks/ (sinks never import this
  module); a section here that exposes one takes its default from there (`stated_by`), and the
  sink is built from the section by field name (`sink_settings`), not by a hand copy.
- The side processes' settings (the Grafana publisher, the annotation consumer) are their sink
  models too, read from their own environment prefixes (REPLMON_GRAFANA__*, REPLMON_ANNOTATIONS__*)
  by this module's loaders, `load_grafana_settings` and `load_annotation_settings`: nothing else
  reads the environment, and the loaders state no field of their own.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar, cast

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)
from pydantic_settings import SettingsError as PydanticSettingsError

from replmon.sinks.alertmanager import AlertmanagerSettings
from replmon.sinks.redis_sink import RedisSinkSettings
from replmon.state.monitor import MonitorConfig
from replmon.state.partition import KAFKA_DEFAULTS
from replmon.streaming.collect.tail import MAX_LINE_BYTES
from replmon.streaming.contract import METRICS_TOPIC
from replmon.streaming.kafka_security import MANAGED as KAFKA_SOURCE_MANAGED
from replmon.streaming.kafka_security import option_problems

if TYPE_CHECKING:
    from replmon.sinks.grafana import GrafanaSettings
    from replmon.sinks.grafana_annotation_consumer import AnnotationConsumerSettings

log = logging.getLogger(__name__)

_toml_file: ContextVar[str | None] = ContextVar("replmon_toml_file", default=None)


def stated_by(model: type[BaseModel], name: str, **constraints: Any) -> Any:
    """A setting whose default a sink's own settings model states (sinks never import this
    module, so the one statement is there): that default, with this section's constraints."""
    return Field(default=model.model_fields[name].default, **constraints)


M = TypeVar("M", bound=BaseModel)


def sink_settings(model: type[M], section: BaseModel, **extra: Any) -> M:
    """A sink's settings model built from a settings section: every field the two share, by
    name (the sink's own defaults for the rest), plus `extra`."""
    shared = {
        name: getattr(section, name) for name in model.model_fields if name in type(section).model_fields
    }
    return model(**shared, **extra)


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class KafkaClient(_Section):
    """How replmon connects to a Kafka cluster: the settings `kafka` (the metrics topic's
    cluster) and `monitored` (the cluster `replmon collect` watches) share, stated once."""

    # Where these settings live, for messages; what `options` may not set (name -> where instead).
    SETTING: ClassVar[str]
    MANAGED: ClassVar[Mapping[str, str]]
    # The startup checks: the cluster must answer a metadata request within this (`replmon run`:
    # streaming/preflight.py; `replmon collect`: streaming/collect/connect.py).
    startup_timeout_ms: int = Field(default=30_000, ge=100)
    # Any Kafka client option (security.protocol, sasl.jaas.config, ssl.truststore.location,
    # ...) by its dotted Kafka name (streaming/kafka_security.py). Values are secrets: never logged.
    options: dict[str, SecretStr] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _options_apply(self):
        problems = option_problems(self.plain_options(), f"{self.SETTING}.options", self.MANAGED)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def plain_options(self) -> dict[str, str]:
        """The options with their values revealed: for a Kafka client only, never a message."""
        return {k: v.get_secret_value() for k, v in self.options.items()}


class KafkaSource(KafkaClient):
    """The metrics topic's cluster: where `replmon run` reads and `replmon collect` writes."""

    SETTING = "kafka"
    MANAGED = KAFKA_SOURCE_MANAGED
    bootstrap_servers: str | None = None
    subscribe: str | None = METRICS_TOPIC
    subscribe_pattern: str | None = None
    starting_offsets: str = "earliest"
    starting_timestamp_ms: int | None = None
    max_offsets_per_trigger: int | None = Field(default=1_000_000, ge=1)
    fail_on_data_loss: bool = True

    @model_validator(mode="after")
    def _one_subscription(self):
        if self.subscribe_pattern and self.subscribe and self.subscribe != METRICS_TOPIC:
            raise ValueError("give kafka.subscribe or kafka.subscribe_pattern, not both")
        return self


class MonitoredKafka(KafkaClient):
    """The cluster `replmon collect` watches (its Admin API; `--bootstrap` gives its address)."""

    SETTING = "monitored"
    MANAGED = {"bootstrap.servers": "give replmon collect --bootstrap instead"}


class RedisOut(_Section):
    """Where alerts and metrics go (see sinks/redis_client.py and sinks/redis_sink.py)."""

    url: str | None = None  # redis://host:port/db, or rediss:// for TLS; no password
    username: str | None = None  # ACL user
    password: SecretStr | None = None
    ssl_ca_certs: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    prefix: str = stated_by(RedisSinkSettings, "prefix")
    alerts_maxlen: int = stated_by(RedisSinkSettings, "alerts_maxlen", ge=100)
    series_maxlen: int = stated_by(RedisSinkSettings, "series_maxlen", ge=10)
    quarantine_maxlen: int = stated_by(RedisSinkSettings, "quarantine_maxlen", ge=100)
    retries: int = stated_by(RedisSinkSettings, "retries", ge=0)


class AlertmanagerOut(_Section):
    """Where notified alerts are posted (sinks/alertmanager.py); off unless url is set."""

    url: str | None = None  # http://host:9093
    resend_interval_s: float = stated_by(AlertmanagerSettings, "resend_interval_s", gt=0)
    generator_url: str = stated_by(AlertmanagerSettings, "generator_url")

    @field_validator("url")
    @classmethod
    def _http(cls, url: str | None) -> str | None:
        if url is not None and not url.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return url


class SparkConf(_Section):
    # local[N], spark://host:7077, k8s://https://..., yarn. None: spark-submit's --master when
    # launched by it, else local[2].
    master: str | None = None
    shuffle_partitions: int = Field(default=2, ge=1)
    driver_memory: str = "4g"
    jars: list[str] = Field(default_factory=list)
    checkpoint_dir: str | None = None  # default: <output_dir>/_checkpoint
    trigger_interval: str | None = None  # e.g. "5 seconds"; None: as fast as possible
    max_files_per_trigger: int | None = Field(default=None, ge=1)
    # "hdfs": Spark's default in-memory map, snapshotted to the checkpoint. "rocksdb": state on
    # the executors' local disk, only changes uploaded: for state larger than executor memory
    # (docs/deploy.md). A checkpoint keeps the provider it was started with.
    state_store: Literal["hdfs", "rocksdb"] = "hdfs"
    executor_memory: str | None = None  # spark.executor.memory on a cluster
    # Extra Spark properties, set as they are (e.g. spark.cores.max, spark.archives).
    conf: dict[str, str] = Field(default_factory=dict)


class Supervise(_Section):
    """How `replmon run` keeps the query alive and says that it is (streaming/supervise.py)."""

    restart_backoff_initial_s: float = Field(default=1.0, gt=0)
    restart_backoff_max_s: float = Field(default=60.0, gt=0)
    # Restarts in a row without a completed batch before replmon gives up (exit 1); 0: never.
    max_restarts: int = Field(default=0, ge=0)
    heartbeat_interval_s: float = Field(default=10.0, gt=0)
    # MonitorLagging fires when no batch completed for this long (the query stopped or hangs)...
    stalled_after_s: float = Field(default=120.0, gt=0)
    # ...or when the newest event of the last batch with input is this far behind the wall clock
    # (0: never; a replay of old files is always behind).
    max_event_lag_s: float = Field(default=300.0, ge=0)


class Rules(_Section):
    # Kafka's own defaults, stated with their provenance in state/partition.py.
    replica_lag_time_max_ms: int = Field(default=KAFKA_DEFAULTS.replica_lag_time_max_ms, ge=1)
    min_insync_replicas: int = Field(default=KAFKA_DEFAULTS.min_insync_replicas, ge=1)
    rule_set: Literal["current", "v0_8", "v0_9_to_0_10_1", "v0_10_2_to_2_0"] = Field(
        default=KAFKA_DEFAULTS.rule_set  # type: ignore[arg-type]  # "current": a str in state/partition.py
    )
    replica_lag_max_messages: int = Field(default=KAFKA_DEFAULTS.replica_lag_max_messages, ge=1)
    num_replica_fetchers: int = Field(default=1, ge=1)  # Kafka's num.replica.fetchers (ReplicaFetcherStalled)


class Alerts(_Section):
    imminent_fraction: float = Field(default=0.5, gt=0, lt=1)
    hw_stall_ms: int = Field(default=10000, ge=1)
    flap_count: int = Field(default=3, ge=2)
    flap_window_ms: int = Field(default=600000, ge=1)
    telemetry_gap_ms: int = Field(default=30000, ge=1)
    stuck_after_ms: int = Field(default=3000, ge=1)
    caught_up_grace_ms: int = Field(default=2000, ge=0)
    # The compaction resolution of a source that does not state one on its heartbeats (the
    # simulator, files, a collector older than the field; 0: it sends every event). `replmon
    # collect` states its own, which is used for its cluster instead (a warning says so when
    # this disagrees). Above 1 s a partition's sources may send nothing for that long (at most
    # L/4) plus a parked fetch, so its silences (leader silent, replica stuck, fetcher stalled)
    # count from stuck_after_ms plus that, and a follower below the LEO counts as caught up
    # within caught_up_grace_ms plus that (state/monitor.py quiet_after_ms, caught_up_grace_ms;
    # docs/events.md).
    compaction_resolution_ms: int = Field(default=0, ge=0)
    # How that source compacts: "fixed", at compaction_resolution_ms for every partition; "lag",
    # at `replmon collect`'s default for each partition's L (L/8 up to 1 s, and L/10 up to 3 s
    # above L = 10 s: state/monitor.py resolution_ms). A collector states its own scheme too.
    compaction_scheme: Literal["fixed", "lag"] = "fixed"
    # Every alert is held this long (event time) so that a root cause found meanwhile claims it
    # (state/cluster.py); a broker's silence is decided stuck_after_ms after its last activity.
    group_wait_ms: int = Field(default=5000, ge=0)


class Stream(_Section):
    # Python calls per micro-batch: each costs a fixed overhead (measured: 16 instead of 64 cut a
    # 100k-event batch from 2.7 to 2.0 s on 2 cores); keep it a few times the cluster's cores.
    # Unset, a run continuing a checkpoint takes the count it was written with
    # (streaming/checkpoint.py).
    buckets: int = Field(default=16, ge=1, le=4096)
    lateness_ms: int = Field(default=10000, ge=0)  # per partition, behind its cluster's clock
    # Spark's watermark is one for all clusters: rows further behind the newest event of ANY
    # cluster are dropped before replmon sees them. It only drives event-time timeouts here
    # (replmon keeps time per cluster itself), so it is set far back by default.
    watermark_delay_ms: int = Field(default=86_400_000, ge=0)
    reorder_tolerance_ms: int = Field(default=1000, ge=0)
    max_future_ms: int = Field(default=3_600_000, ge=0)
    # A record (Kafka value or file line) larger than this is quarantined unread.
    max_record_bytes: int = Field(default=1 << 20, ge=256, le=64 << 20)
    status_interval_ms: int = Field(default=1000, ge=0)
    # A healthy partition (full ISR, every follower caught up at the leader's LEO, HW at the LEO,
    # no open alert) whose status says what its last one said, but for the times, is sent again
    # once per this much event time, at a phase of its own (0: every status_interval_ms, as any
    # other partition). The cluster's newest event time (Redis cluster series) says the monitor
    # is alive meanwhile. 30 min: the refreshes are status records in proportion to partitions,
    # not to change (3 per partition per period): at 5 min they were 1,000 a second at 100,000
    # partitions and took a batch from 1.5 s to 2.8 s; at 60 s, at 40,000 partitions, a quarter
    # of every batch in the Redis sink (docs/performance.md). Above evict_after_ms, an idle
    # partition's session reads are taken by its eviction check in between (docs/outputs.md).
    status_refresh_ms: int = Field(default=1_800_000, ge=0)
    # Meanwhile, when its offsets move, such a partition's HW, LEOs and lags go out as series
    # points at most once per this much event time (by its cluster's clock, at a phase of its
    # own), and the last offsets within one period after they stopped moving (0: with every
    # status_interval_ms). Dashboards read these series; a point every second of every busy
    # partition was as many output rows as input events at 30,000 partitions. 15 s, as a
    # Prometheus scrape: at 5 s, 20,000 busy partitions' points were 12,000 a second and most
    # of every batch's Redis sink, which runs between the Spark job and the next batch
    # (docs/performance.md).
    series_interval_ms: int = Field(default=15_000, ge=0)
    # A partition with no event for this long (event time) is dropped from the state and its
    # open alerts resolve; above alerts.telemetry_gap_ms, so TelemetryMissing fires first.
    evict_after_ms: int = Field(default=600_000, ge=1)
    # Append where each call of the stateful step spends its time (JSON lines) to files in this
    # folder; bench/throughput.py reads them. Off (None) in normal runs.
    profile_dir: str | None = None


class Collect(_Section):
    """`replmon collect`'s own settings: each flag of the same name overrides one (a duration
    flag, `--hold 2s`, its `_ms` setting, `hold_ms`); docs/cli.md lists them."""

    state_dir: str = "replmon-collect-state"  # the checkpoint folder
    # How long events wait to be released in event-time order.
    hold_ms: int = Field(default=1500, ge=0)
    # How long the release waits for a stopped leader's parked requests; 0: off (docs/real-cluster.md).
    silent_hold_ms: int = Field(default=0, ge=0)
    heartbeat_interval_ms: int = Field(default=1000, ge=1)
    metadata_interval_ms: int = Field(default=1000, ge=1)  # the Admin API poll
    # Give up (exit 3) when the metrics topic takes nothing for this long.
    publish_timeout_ms: int = Field(default=60_000, ge=1)
    max_line_bytes: int = Field(default=MAX_LINE_BYTES, ge=1)
    compact: bool = True  # lossless compaction of caught-up fetches and appends
    # None: by each partition's replica.lag.time.max.ms L, L/8 up to 1 s and L/10 up to 3 s above
    # L = 10 s (1 s at 10 s, 3 s at Kafka's default 30 s: state/monitor.py resolution_ms).
    compact_resolution_ms: int | None = Field(default=None, ge=1)
    # Publish fetch sessions' reads as `session` events, a partition's own fetches on change.
    session_form: bool = True
    max_held: int = Field(default=1_000_000, ge=1)  # events waiting for release
    log_timezone: str = "UTC"  # of the request log's dates when they are not epoch ms
    exclude_topics: list[str] = Field(default_factory=list)
    include_internal: bool = False  # also __* topics
    create_topic: bool = False  # create the metrics topic when it is missing...
    partitions: int = Field(default=3, ge=1)  # ...with this many partitions


class Gate(_Section):
    """The rolling-restart gate (state/restart_gate.py, `replmon safe-to-stop`)."""

    # A follower Kafka still lists in the ISR but not caught up for more than this share of
    # replica.lag.time.max.ms counts as out of the effective ISR: it is the next to be dropped.
    lag_share: float = Field(default=0.5, gt=0, le=1)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="REPLMON_", env_nested_delimiter="__", env_file=".env", extra="forbid", frozen=True
    )

    input_path: str | None = None  # file or folder of JSON lines (instead of Kafka)
    output_dir: str = "replmon-out"
    write_files: bool = True
    kafka: KafkaSource = KafkaSource()
    monitored: MonitoredKafka = MonitoredKafka()
    redis: RedisOut = RedisOut()
    alertmanager: AlertmanagerOut = AlertmanagerOut()
    spark: SparkConf = SparkConf()
    supervise: Supervise = Supervise()
    rules: Rules = Rules()
    alerts: Alerts = Alerts()
    stream: Stream = Stream()
    collect: Collect = Collect()
    gate: Gate = Gate()

    @classmethod
    def settings_customise_sources(
        cls, settings_cls, init_settings, env_settings, dotenv_settings, file_secret_settings
    ):
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings, dotenv_settings]
        toml = _toml_file.get() or os.environ.get("REPLMON_CONFIG")
        if toml:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=Path(toml)))
        return tuple(sources)

    @model_validator(mode="after")
    def _evict_after_the_telemetry_gap(self) -> Settings:
        if self.stream.evict_after_ms <= self.alerts.telemetry_gap_ms:
            raise ValueError(
                f"stream.evict_after_ms ({self.stream.evict_after_ms}) must be above "
                f"alerts.telemetry_gap_ms ({self.alerts.telemetry_gap_ms}), or a "
                f"silent partition would be dropped before TelemetryMissing fires"
            )
        return self

    def monitor_config(self) -> MonitorConfig:
        """The engine's frozen config: each field is the setting of the same name."""
        return MonitorConfig(
            **{name: getattr(getattr(self, section), name) for name, section in ENGINE_SETTINGS.items()}
        )

    @property
    def checkpoint_dir(self) -> str:
        return self.spark.checkpoint_dir or str(Path(self.output_dir) / "_checkpoint")


# The sections whose settings the engine reads: every MonitorConfig field is the setting of the
# same name in exactly one of them (checked below, on import, and by tests/test_config_once.py).
ENGINE_SECTIONS = ("rules", "alerts", "stream", "gate")


def _section_model(section: str) -> type[BaseModel]:
    return cast(type[BaseModel], Settings.model_fields[section].annotation)  # every section is a model


def _engine_settings() -> dict[str, str]:
    """MonitorConfig field -> the section that states it."""
    homes: dict[str, list[str]] = {f.name: [] for f in dataclasses.fields(MonitorConfig)}
    for section in ENGINE_SECTIONS:
        for name in _section_model(section).model_fields:
            homes.get(name, []).append(section)
    wrong = {name: where for name, where in homes.items() if len(where) != 1}
    if wrong:
        raise TypeError(
            "each MonitorConfig field must be a setting in exactly one of "
            f"{', '.join(ENGINE_SECTIONS)}: {wrong}"
        )
    return {name: where[0] for name, where in homes.items()}


ENGINE_SETTINGS = _engine_settings()


def monitor_config(**changes) -> MonitorConfig:
    """The engine config of the default settings, with `changes` (MonitorConfig field names,
    validated as the settings validate them). Reads no environment and no file: for tests and
    benches; a run takes `load_settings().monitor_config()`."""
    unknown = sorted(set(changes) - set(ENGINE_SETTINGS))
    if unknown:
        raise TypeError(f"not MonitorConfig fields: {', '.join(unknown)}")
    sections: dict[str, Any] = {
        section: _section_model(section).model_validate(
            {name: value for name, value in changes.items() if ENGINE_SETTINGS[name] == section}
        )
        for section in ENGINE_SECTIONS
    }
    return Settings.model_construct(**sections).monitor_config()


class SettingsError(SystemExit):
    """A bad setting: exits non-zero with a message naming the setting."""


def load_settings(config_file: str | None = None, **overrides) -> Settings:
    config_file = config_file or os.environ.get("REPLMON_CONFIG")
    if config_file and not Path(config_file).is_file():
        raise SettingsError(f"replmon: settings file not found: {config_file}")
    from replmon.streaming.environment import unknown_variables

    unknown = unknown_variables(os.environ, Settings)
    if unknown:
        raise SettingsError(
            "replmon: unknown REPLMON_* environment variables\n" + "\n".join(f"  {line}" for line in unknown)
        )
    token = _toml_file.set(config_file)
    try:
        return Settings(**overrides)
    except PydanticSettingsError as exc:  # e.g. a list setting that is not JSON
        raise SettingsError(f"replmon: invalid settings\n  {exc}") from None
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            name = ".".join(str(x) for x in err["loc"]) or "(settings)"
            lines.append(f"  {name}: {err['msg']}")
        raise SettingsError("replmon: invalid settings\n" + "\n".join(lines)) from None
    finally:
        _toml_file.reset(token)


# --- the side processes' settings --------------------------------------------------------------
def from_environment(model: type[M], prefix: str, old_prefix: str | None = None, **given: Any) -> M:
    """`model` (a sink's settings model, which states every field and default) filled from the
    environment variables `prefix` + field name (upper case), then `given`. A variable under
    `old_prefix` (the flat names of an earlier release) still counts, with a warning naming the
    new one, unless the new one is set too. pydantic's ValidationError (a ValueError) names a bad
    setting."""
    reader = type(
        f"{model.__name__}FromEnvironment",
        (BaseSettings, model),
        {"model_config": SettingsConfigDict(env_prefix=prefix, frozen=True, extra="forbid")},
    )
    if old_prefix is not None:
        given = {**old_names(model, prefix, old_prefix), **given}
    return model.model_validate(dict(reader(**given)))


def old_names(model: type[BaseModel], prefix: str, old_prefix: str) -> dict[str, str]:
    """The settings given only under their old flat names (`REPLMON_GRAFANA_URL`), each with a
    warning on stderr naming its new one (`REPLMON_GRAFANA__URL`); never a value."""
    environ = {name.upper(): value for name, value in os.environ.items()}
    found = {}
    for field in model.model_fields:
        old, new = f"{old_prefix}{field}".upper(), f"{prefix}{field}".upper()
        if old in environ and new not in environ:
            log.warning("%s is deprecated, use %s (the old name goes in the next release)", old, new)
            found[field] = environ[old]
    return found


# The side processes' environment prefixes: nested with __ as every setting's; the flat ones
# of an earlier release still work, with a warning (streaming/environment.py knows both).
GRAFANA_PREFIX = "REPLMON_GRAFANA__"
ANNOTATIONS_PREFIX = "REPLMON_ANNOTATIONS__"
OLD_PREFIXES = {GRAFANA_PREFIX: "REPLMON_GRAFANA_", ANNOTATIONS_PREFIX: "REPLMON_ANNOTATIONS_"}


def load_grafana_settings() -> GrafanaSettings:
    """Where Grafana is and how to reach it: REPLMON_GRAFANA__* (docs/grafana.md)."""
    from replmon.sinks.grafana import GrafanaSettings

    return from_environment(GrafanaSettings, GRAFANA_PREFIX, OLD_PREFIXES[GRAFANA_PREFIX])


def load_annotation_settings(redis: RedisOut | None = None) -> AnnotationConsumerSettings:
    """The annotation consumer's settings: REPLMON_ANNOTATIONS__* (docs/grafana.md). `redis`: a
    settings file's redis section; when it names a url, its url, username, password and prefix
    replace the consumer's own (`replmon grafana-annotations --config`)."""
    from replmon.sinks.grafana_annotation_consumer import AnnotationConsumerSettings

    given: dict[str, Any] = {}
    if redis is not None and redis.url is not None:
        given = dict(
            redis_url=redis.url,
            redis_username=redis.username,
            redis_password=redis.password,
            key_prefix=redis.prefix,
        )
    return from_environment(
        AnnotationConsumerSettings, ANNOTATIONS_PREFIX, OLD_PREFIXES[ANNOTATIONS_PREFIX], **given
    )
