"""Grafana panels and variables, one small function each, over shared defaults.

Every query goes to the Redis data source (plugin `redis-datasource`) and names its key through
sinks.keys, with Grafana variables ('$cluster', '$topic', '$partition', '$replica') as key parts.
Metric series are Redis Streams whose entry ids are event times in ms: the plugin's XRANGE
turns the id into the `$time` field and restricts it to the dashboard's time range.
Panels carry no id or gridPos: dashboards.build lays them out.
"""

from __future__ import annotations

from typing import Any

from replmon.sinks.grafana_annotations import TAG as ANNOTATION_TAG  # what the annotation consumer tags
from replmon.sinks.keys import DATASOURCE_PLUGIN, DATASOURCE_UID, Keys

DATASOURCE = {"type": DATASOURCE_PLUGIN, "uid": DATASOURCE_UID}
GRAFANA = {"type": "grafana", "uid": "-- Grafana --"}  # Grafana's own annotations store
REPLICA_DASHBOARD = "replmon-replica"

# Grafana variable references, spliced into keys as key parts.
CLUSTER, TOPIC, PARTITION, REPLICA = "$cluster", "$topic", "$partition", "$replica"
BROKER, HOSTED = "$broker", "$hosted"  # HOSTED is a 'topic:partition' member, already escaped

# Live panels: the plugin's streaming mode runs the query every STREAM_INTERVAL_MS on Grafana's
# server and pushes the result to open panels over Grafana Live (docs/grafana.md).
STREAM_INTERVAL_MS = 2_000


# --- targets (the plugin's query model: pkg/types.go queryModel) --------------------------
def command(name: str, key: str, ref: str = "A", **fields) -> dict:
    """A 'Redis' query: one command on one key."""
    return {
        "datasource": DATASOURCE,
        "refId": ref,
        "type": "command",
        "command": name,
        "keyName": key,
        "query": "",
        **fields,
    }


def cli(query: str, ref: str = "A", **fields) -> dict:
    """A command line, for commands the query editor lacks (HVALS); one row per reply item."""
    return {"datasource": DATASOURCE, "refId": ref, "type": "cli", "query": query, "cli": False, **fields}


def live(target: dict[str, Any], data_type: str = "DataFrame") -> dict:
    """The target in the plugin's streaming mode: 'DataFrame' replaces the result each time
    (tables, counts), 'TimeSeries' appends each value at the time it was read."""
    return {
        **target,
        "streaming": True,
        "streamingInterval": STREAM_INTERVAL_MS,
        "streamingCapacity": 1_000,
        "streamingDataType": data_type,
    }


# --- annotations (written by `replmon grafana-annotations`, sinks/grafana_annotation_consumer.py)
def annotation_query(name: str, tags: list[str], color: str = "orange") -> dict:
    """Grafana's own annotations whose tags include all of `tags` (variables are interpolated)."""
    return {
        "name": name,
        "datasource": GRAFANA,
        "enable": True,
        "hide": False,
        "iconColor": color,
        "target": {"type": "tags", "tags": [ANNOTATION_TAG, *tags], "matchAny": False, "limit": 500},
    }


def partition_link() -> list[dict]:
    """A data link from an alert row to the partition view of its partition and follower."""
    return [
        {
            "title": "Open partition ${__data.fields.topic}-${__data.fields.partition}",
            "url": f"/d/{REPLICA_DASHBOARD}?var-cluster=${{__data.fields.cluster}}"
            "&var-topic=${__data.fields.topic}&var-partition=${__data.fields.partition}"
            "&var-replica=${__data.fields.replica}&${__url_time_range}",
            "targetBlank": False,
        }
    ]


# --- panel skeletons ----------------------------------------------------------------------
def _panel(kind: str, title: str, description: str, targets: list[dict], **extra) -> dict:
    return {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "targets": targets,
        **extra,
    }


def _only(*names: str) -> dict:
    """Keep the time field and the named stream fields (an XRANGE returns all of them)."""
    return {"id": "filterFieldsByName", "options": {"include": {"names": ["$time", *names]}}}


def _rename(**names: str) -> dict:
    return {"id": "organize", "options": {"renameByName": names, "excludeByName": {}, "indexByName": {}}}


def _series(title: str, description: str, key: str, fields: dict[str, str], unit: str, **extra) -> dict:
    """A time series panel over one series stream; `fields` maps stream field -> legend."""
    return _panel(
        "timeseries",
        title,
        description,
        [command("xrange", key)],
        transformations=[_only(*fields), _rename(**fields)],
        fieldConfig={
            "defaults": {
                "unit": unit,
                "min": 0,
                "custom": {"lineInterpolation": "stepAfter", "spanNulls": True},
            },
            "overrides": [],
        },
        options={
            "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
            "tooltip": {"mode": "multi", "sort": "none"},
        },
        **extra,
    )


def _count(title: str, description: str, target: dict[str, Any], red_from: int | None = 1) -> dict:
    """A stat panel: one count, red from `red_from` (None: a plain count, never red)."""
    steps: list[dict[str, str | int | None]] = [{"color": "green", "value": None}]
    if red_from is not None:
        steps.append({"color": "red", "value": red_from})
    return _panel(
        "stat",
        title,
        description,
        [target],
        fieldConfig={
            "defaults": {
                "unit": "none",
                "decimals": 0,
                "noValue": "0",
                "thresholds": {"mode": "absolute", "steps": steps},
            },
            "overrides": [],
        },
        options={
            "colorMode": "background",
            "graphMode": "none",
            "justifyMode": "center",
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "textMode": "value",
        },
    )


def _table(title: str, description: str, targets: list[dict], transformations: list[dict], **extra) -> dict:
    return _panel(
        "table",
        title,
        description,
        targets,
        transformations=transformations,
        options={"showHeader": True, "cellHeight": "sm"},
        **extra,
    )


def _hide(*names: str) -> dict:
    return {
        "id": "organize",
        "options": {"excludeByName": dict.fromkeys(names, True), "renameByName": {}, "indexByName": {}},
    }


# --- variables ----------------------------------------------------------------------------
def variable(name: str, label: str, key: str, multi: bool = False, numeric: bool = False) -> dict:
    """A query variable fed by an index set (SMEMBERS)."""
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DATASOURCE,
        "query": f"smembers {key}",
        "refresh": 1,
        "sort": 3 if numeric else 1,
        "multi": multi,
        "includeAll": multi,
        "hide": 0,
        "regex": "",
        "skipUrlSync": False,
        "current": {},
        "options": [],
    }


def cluster_variable(keys: Keys) -> dict:
    return variable("cluster", "Cluster", keys.clusters())


def topic_variable(keys: Keys) -> dict:
    return variable("topic", "Topic", keys.topics(CLUSTER))


def partition_variable(keys: Keys) -> dict:
    return variable("partition", "Partition", keys.topic_partitions(CLUSTER, TOPIC), numeric=True)


def replica_variable(keys: Keys) -> dict:
    return variable("replica", "Follower", keys.replicas(CLUSTER, TOPIC, PARTITION), multi=True, numeric=True)


def broker_variable(keys: Keys) -> dict:
    return variable("broker", "Broker", keys.brokers(CLUSTER), numeric=True)


def hosted_variable(keys: Keys) -> dict:
    return variable("hosted", "Follower of", keys.broker_followers(CLUSTER, BROKER), multi=True)


# --- overview panels ----------------------------------------------------------------------
def firing_alerts_count(keys: Keys) -> dict:
    return _count(
        "Firing alerts",
        "Alerts of this cluster firing now.",
        live(command("hlen", keys.alerts_firing_in(CLUSTER))),
    )


def under_replicated_count(keys: Keys) -> dict:
    return _count(
        "Under-replicated partitions",
        "Partitions whose ISR is smaller than the replica set.",
        live(command("scard", keys.under_replicated(CLUSTER))),
    )


def under_min_isr_count(keys: Keys) -> dict:
    return _count(
        "Under min ISR",
        "Partitions whose ISR is below min.insync.replicas: acks=all producers get NotEnoughReplicas.",
        live(command("scard", keys.under_min_isr(CLUSTER))),
    )


def out_of_sync_count(keys: Keys) -> dict:
    return _count(
        "Out-of-sync followers",
        "Followers outside the ISR.",
        live(command("scard", keys.out_of_sync(CLUSTER))),
    )


def quarantine_count(keys: Keys) -> dict:
    return _count(
        "Quarantined records",
        "Input records set aside since the start (all clusters).",
        live(command("get", keys.quarantine_count())),
        red_from=1,
    )


def _alert_rows(*filters: dict[str, Any]) -> list[dict]:
    """Transformations: the firing hash's JSON values as columns, optionally filtered."""
    extract = {"id": "extractFields", "options": {"source": "Value", "format": "json", "replace": True}}
    order = {
        "id": "organize",
        "options": {
            "excludeByName": {"alert_id": True, "ts": True},
            "indexByName": {"severity": 0, "name": 1, "subject": 2, "started_ms": 3, "reason": 4},
            "renameByName": {"started_ms": "started"},
        },
    }
    return [extract, *filters, order]


def _alert_columns() -> dict:
    """Started as a date; the subject links to the partition view; the label columns stay in
    the data (the link reads them) but are hidden."""
    hidden = [
        {"matcher": {"id": "byName", "options": name}, "properties": [{"id": "custom.hidden", "value": True}]}
        for name in ("cluster", "topic", "partition", "replica")
    ]
    return {
        "defaults": {},
        "overrides": [
            {
                "matcher": {"id": "byName", "options": "started"},
                "properties": [{"id": "unit", "value": "dateTimeAsIso"}],
            },
            {
                "matcher": {"id": "byName", "options": "subject"},
                "properties": [{"id": "links", "value": partition_link()}],
            },
            *hidden,
        ],
    }


def _equal(field: str, value: str) -> dict:
    return {"fieldName": field, "config": {"id": "equal", "options": {"value": value}}}


def _keep_rows(match: str, *conditions: dict[str, Any]) -> dict:
    """Keep the rows matching all/any of the conditions (variables are interpolated)."""
    return {
        "id": "filterByValue",
        "options": {"type": "include", "match": match, "filters": list(conditions)},
    }


def firing_alerts_table(keys: Keys) -> dict:
    return _table(
        "Firing alerts",
        "One row per firing alert of this cluster; the subject opens the partition view.",
        [live(cli(f"hvals {keys.alerts_firing_in(CLUSTER)}"))],
        _alert_rows(),
        fieldConfig=_alert_columns(),
    )


def alert_transitions_table(keys: Keys) -> dict:
    return _table(
        "Alert transitions",
        "Every firing and resolve written in the time range, newest "
        "first (time = when the sink wrote it; ts = event time).",
        [command("xrevrange", keys.alerts_stream(), count=500)],
        [_hide("$streamId", "alert_id", "topic", "partition", "replica")],
    )


def cluster_counts(keys: Keys) -> dict:
    return _series(
        "Cluster replication health",
        "Counts after each micro-batch, at its newest event time.",
        keys.cluster_series(CLUSTER),
        {
            "under_replicated": "under-replicated",
            "under_min_isr": "under min ISR",
            "out_of_sync_replicas": "out-of-sync followers",
            "firing_alerts": "firing alerts",
        },
        "none",
    )


def under_replicated_table(keys: Keys) -> dict:
    return _table(
        "Under-replicated partitions",
        "topic:partition",
        [live(command("smembers", keys.under_replicated(CLUSTER)))],
        [],
    )


def quarantine_table(keys: Keys) -> dict:
    return _table(
        "Quarantined records",
        "The newest records set aside, with the reason.",
        [command("xrevrange", keys.quarantine_stream(), count=100)],
        [_hide("$streamId", "id")],
    )


# --- partition and follower panels --------------------------------------------------------
def partition_state_table(keys: Keys) -> dict:
    return _table(
        "Partition state",
        "The latest partition_status.",
        [command("hgetall", keys.partition(CLUSTER, TOPIC, PARTITION))],
        [],
    )


def high_watermark_vs_leader_leo(keys: Keys) -> dict:
    return _series(
        "High watermark vs leader LEO",
        "The gap is what acks=all producers and read_committed consumers wait for.",
        keys.partition_series(CLUSTER, TOPIC, PARTITION),
        {"hw": "high watermark", "leader_leo": "leader LEO"},
        "none",
    )


def isr_size(keys: Keys) -> dict:
    return _series(
        "ISR size",
        "Size of the derived committed ISR.",
        keys.partition_series(CLUSTER, TOPIC, PARTITION),
        {"isr_size": "ISR size"},
        "none",
    )


def high_watermark_stalled(keys: Keys) -> dict:
    return _series(
        "High watermark stalled",
        "How long the HW has not moved while below the leader LEO.",
        keys.partition_series(CLUSTER, TOPIC, PARTITION),
        {"hw_stalled_ms": "HW stalled"},
        "ms",
    )


def follower_lag_time(keys: Keys) -> dict:
    return _series(
        "Follower $replica: time since caught up",
        "ts − lastCaughtUpTimeMs; Kafka drops the follower from the ISR past replica.lag.time.max.ms.",
        keys.replica_series(CLUSTER, TOPIC, PARTITION, REPLICA),
        {"lag_ms": "lag"},
        "ms",
        repeat="replica",
        repeatDirection="h",
        maxPerRow=4,
    )


def follower_lag_messages(keys: Keys) -> dict:
    return _series(
        "Follower $replica: messages behind",
        "leader LEO − follower LEO.",
        keys.replica_series(CLUSTER, TOPIC, PARTITION, REPLICA),
        {"lag_messages": "messages behind"},
        "none",
        repeat="replica",
        repeatDirection="h",
        maxPerRow=4,
    )


def follower_state_table(keys: Keys) -> dict:
    return _table(
        "Follower $replica state",
        "The latest replica_status.",
        [command("hgetall", keys.replica(CLUSTER, TOPIC, PARTITION, REPLICA))],
        [],
        repeat="replica",
        repeatDirection="h",
        maxPerRow=4,
    )


# --- broker panels ------------------------------------------------------------------------
def broker_followers_count(keys: Keys) -> dict:
    return _count(
        "Followers hosted",
        "Partitions with a follower on this broker.",
        live(command("scard", keys.broker_followers(CLUSTER, BROKER))),
        red_from=None,
    )


def broker_out_of_sync_count(keys: Keys) -> dict:
    return _count(
        "Out of the ISR",
        "Followers on this broker that are out of the ISR.",
        live(command("scard", keys.broker_out_of_sync(CLUSTER, BROKER))),
    )


def broker_out_of_sync_table(keys: Keys) -> dict:
    return _table(
        "Followers out of the ISR on broker $broker",
        "topic:partition",
        [live(command("smembers", keys.broker_out_of_sync(CLUSTER, BROKER)))],
        [],
    )


def restart_gate_table(keys: Keys) -> dict:
    """The restart gate's verdict for this broker (`replmon safe-to-stop` reads the same hash)."""
    return _table(
        "Safe to stop broker $broker?",
        "What stopping this broker now would do: verdict (safe, not_safe, unknown), the answer "
        "line, and the reasons by class with counts and the first partitions (docs/cli.md). "
        "clock_ms is the cluster's event time it was computed at.",
        [live(command("hgetall", keys.restart_gate(CLUSTER, BROKER)))],
        [
            {
                "id": "organize",
                "options": {
                    "excludeByName": {"cluster": True, "broker": True},
                    "indexByName": {"verdict": 0, "summary": 1, "reasons": 2, "clock_ms": 3},
                    "renameByName": {},
                },
            }
        ],
    )


def broker_alerts_table(keys: Keys) -> dict:
    """Firing alerts that name this broker: as the follower (replica) or as the broker."""
    return _table(
        "Firing alerts on broker $broker",
        "Alerts of this cluster naming broker $broker as "
        "the follower or the broker; the subject opens the partition view.",
        [live(cli(f"hvals {keys.alerts_firing_in(CLUSTER)}"))],
        _alert_rows(_keep_rows("any", _equal("replica", BROKER), _equal("broker", BROKER))),
        fieldConfig=_alert_columns(),
    )


def stalled_fetchers_table(keys: Keys) -> dict:
    """ReplicaFetcherStalled: one follower broker (`broker`) stopped fetching from one leader
    broker (`leader`); the row has the fetcher id and the partitions."""
    return _table(
        "Stalled fetchers of broker $broker",
        "Fetcher threads of this broker (as follower "
        "or leader) that stopped fetching all their partitions at once (ReplicaFetcherStalled).",
        [live(cli(f"hvals {keys.alerts_firing_in(CLUSTER)}"))],
        _alert_rows(
            _keep_rows("all", _equal("name", "ReplicaFetcherStalled")),
            _keep_rows("any", _equal("broker", BROKER), _equal("leader", BROKER)),
        ),
        fieldConfig=_alert_columns(),
    )


def hosted_follower_lag(keys: Keys) -> dict:
    return _series(
        "$hosted on broker $broker: time since caught up",
        "ts − lastCaughtUpTimeMs of the follower of $hosted on this broker.",
        keys.hosted_replica_series(CLUSTER, HOSTED, BROKER),
        {"lag_ms": "lag"},
        "ms",
        repeat="hosted",
        repeatDirection="h",
        maxPerRow=3,
    )
