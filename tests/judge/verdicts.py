"""What replmon said, as the judge's cases read it (Redis), and how they print their figures."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from replmon.streaming.collect.requestlog import BadLine, log_time_ms
from replmon.streaming.settings import Alerts, Stream
from tests.judge.cluster import wait_for
from tests.judge.pipeline import CLUSTER, Pipeline, describe


def firing(alerts: list[dict], name: str, topic: str | None, partition=None, replica=None) -> list[dict]:
    """The firing transitions of `name` (topic None: not a partition alert, e.g. BrokerUnavailable)."""
    return [
        a
        for a in alerts
        if a["name"] == name
        and a["status"] == "firing"
        and a.get("cluster") == CLUSTER
        and (a.get("topic") or None) == topic
        and partition in (None, a.get("partition"))
        and replica in (None, a.get("replica"))
    ]


def firing_now(pipeline: Pipeline, names: tuple[str, ...], topic: str) -> list[dict]:
    """Alerts open now (Redis' firing hash), of these names, about the topic or a broker."""
    raw = pipeline.redis.hgetall(f"{pipeline.prefix}:alerts:firing:{CLUSTER}")
    return [
        a for a in map(json.loads, raw.values()) if a["name"] in names and a.get("topic") in (topic, None)
    ]


def leaders_as_described(pipeline: Pipeline, admin, topic: str, described: dict | None = None) -> dict | None:
    """describe_topics' partitions (or `described`, an answer already in hand while nothing
    can change them) when replmon reports each one's leader, leader epoch and ISR the same;
    None otherwise (or while the Admin API does not answer)."""
    try:
        now = described or describe(admin, topic)
    except Exception:  # noqa: BLE001 - a stopped broker: ask again
        return None
    for p, v in now.items():
        h = pipeline.partition(topic, p)
        seen = (int(h.get("leader", -9)), int(h.get("leader_epoch", -9)), pipeline.isr(topic, p))
        if seen != (v["leader"], v["leader_epoch"], v["isr"]):
            return None
    return now


def report(label: str, rows: list[str]) -> None:
    print(f"\n[judge] {label}")
    for r in rows:
        print(f"[judge]   {r}")


# How far past a moment replmon's event time goes before every notification about what happened
# before it is made: every alert is held alerts.group_wait_ms, and the cluster step decides up to
# the newest event less stream.reorder_tolerance_ms (the judged run keeps both defaults).
NOTIFIED_WITHIN_MS = Alerts().group_wait_ms + Stream().reorder_tolerance_ms


def notified_since(pipeline: Pipeline, am, since_ms: int, wall_ms: int):
    """What reached on-call since a fault: the notified firing transitions on replmon's Redis
    on-call stream that started at or after since_ms (event time), and the notifications the
    real Alertmanager sent since wall_ms. Read once replmon got past the moment: its clock is
    NOTIFIED_WITHIN_MS past now, one more micro-batch has written (so the one that crossed it
    has also posted to Alertmanager), and Alertmanager has sent a marker alert posted after
    that (JudgeAlertmanager.sync)."""
    from tests.judge.oncall import redis_notified

    called_ms = int(time.time() * 1000)
    until_ms = called_ms + NOTIFIED_WITHIN_MS
    crossed = wait_for(
        f"replmon's cluster clock past {until_ms}",
        lambda: pipeline.check_alive() or ((c := pipeline.clock()) > until_ms and c),
        120,
        0.5,
    )
    wait_for("replmon's next micro-batch", lambda: pipeline.clock() > crossed, 60, 0.5)
    am.sync()
    report("on-call read", [f"{int(time.time() * 1000) - called_ms} ms after the fault's checks"])
    return redis_notified(pipeline, since_ms), am.notifications(wall_ms, CLUSTER)


def last_counts(pipeline: Pipeline, alert_id: str) -> dict:
    """The counts on the newest transition of a root alert (they grow on its updates)."""
    records = [a for a in pipeline.alerts() if a["alert_id"] == alert_id]
    return json.loads(records[-1]["counts"]) if records and records[-1].get("counts") else {}


def describe_pages(redis: list[dict], am: list[dict]) -> str:
    pages = sum(1 for r in redis if r.get("severity") == "critical")
    return (
        f"notified {len(redis)} ({pages} pages): "
        + ", ".join(f"{r['name']}[{r.get('cause')}] broker {r.get('broker')}" for r in redis)
        + f"; Alertmanager notifications {len(am)}: "
        + ", ".join("+".join(sorted(a["alertname"] for a in n["alerts"])) for n in am)
    )


def late_quarantined(pipeline: Pipeline, since_ms: int) -> list[dict]:
    """The events replmon quarantined as late (behind their partition's time by more than
    stream.reorder_tolerance_ms), of event time since `since_ms`."""
    return [
        q
        for _, q in pipeline.redis.xrange(f"{pipeline.prefix}:quarantine")
        if q.get("reason", "").startswith("late") and int(q.get("ts") or 0) >= since_ms
    ]


_TOTAL_TIME = re.compile(r'"totalTimeMs":([0-9.]+)')
_FOLLOWER_FETCH = re.compile(r'"requestApiKey":1,.*"clientId":"[^"]*fetcher')


def stopped_lines(log: Path, paused_ms: int, resumed_ms: int) -> tuple[int, int, int, int, int]:
    """The pause as a broker's request log (and its rolled files) shows it: lines logged before
    it, during it (its middle, 500 ms in from each end), after it, and those logged after it
    that took more than half the pause (requests the stopped broker held: its parked fetches),
    and how many of those are followers' fetches."""
    before = during = after = held = held_fetches = 0
    for f in [*log.parent.glob(log.name + ".*"), log]:
        for line in f.read_text(errors="replace").splitlines():
            try:
                at = log_time_ms(line)
            except BadLine:
                continue
            if at < paused_ms:
                before += 1
            elif paused_ms + 500 <= at <= resumed_ms - 500:
                during += 1
            elif at >= resumed_ms - 500:
                after += 1
                total = _TOTAL_TIME.search(line)
                if total and float(total.group(1)) > (resumed_ms - paused_ms) / 2:
                    held += 1
                    held_fetches += bool(_FOLLOWER_FETCH.search(line))
    return before, during, after, held, held_fetches


def replaced_leaders_fetches(pipeline: Pipeline) -> list[dict]:
    """The fetches of the metrics topic published after a metadata event of their partition
    with a newer leader epoch: a replaced leader's view of a follower, such as the fetches a
    stopped broker held across the stop and logged when it ran again (a partition's events
    share a record key, so they are in publishing order in one topic partition)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=pipeline.services["kafka_bootstrap"].split(","),
        enable_auto_commit=False,
        isolation_level="read_committed",
        consumer_timeout_ms=5000,
    )
    out: list[dict] = []
    epochs: dict[tuple, int] = {}
    try:
        topic = pipeline.metrics_topic
        parts = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        end = consumer.end_offsets(parts)
        while any(consumer.position(tp) < end[tp] for tp in parts):
            batch = consumer.poll(timeout_ms=2000)
            if not batch:
                break
            for records in batch.values():
                for r in records:
                    ev = json.loads(r.value)
                    key = (ev.get("topic"), ev.get("partition"))
                    if ev.get("type") == "metadata":
                        epochs[key] = max(epochs.get(key, -1), ev["leader_epoch"])
                    elif ev.get("type") == "fetch" and ev.get("leader_epoch", -1) < epochs.get(key, -1):
                        out.append(ev)
    finally:
        consumer.close()
    return out


def pause_in_request_log(
    pipeline: Pipeline, log: Path, paused_ms: int, resumed_ms: int, fenced: bool = False
) -> str:
    """The pause as the stopped broker's request log shows it (its lines stopped and resumed;
    the requests it held across the pause, logged after it with read times from before it, are
    reported, not required: a follower's fetch is parked at its leader most of the time, but
    under the judge's bursts it may be answered at once and the next one not yet read when the
    broker stops, which one run of the long-session case showed), and how many events the live
    monitor quarantined as late through it, once its clock has passed the resume. When the
    controller `fenced` it, none may be late: its partitions have new leaders, and a replaced
    leader's held fetch changes nothing (docs/events.md, "Order, skew and lateness"); when its
    log shows followers' fetches held, they must have reached replmon after the fence (else the
    check shows nothing). A leader kept through a pause longer than stream.lateness_ms still
    has its held fetches quarantined as late (docs/real-cluster.md)."""
    before, during, after, held, held_fetches = stopped_lines(log, paused_ms, resumed_ms)
    assert before and after and not during, (
        f"the broker's request log does not show the pause: {before} lines before, {during} "
        f"during, {after} after"
    )
    wait_for(
        "replmon's clock to pass the resume",
        lambda: pipeline.check_alive() or pipeline.clock() >= resumed_ms + 5000,
        120,
        1.0,
    )
    late = late_quarantined(pipeline, paused_ms - 60_000)
    replaced = replaced_leaders_fetches(pipeline) if fenced else []
    if fenced:
        if held_fetches:  # they went through replmon: the case shows what it should
            assert replaced, f"{held_fetches} fetches held across the pause, none published after the fence"
        assert not late, f"{len(late)} events quarantined as late through the pause:" + "".join(
            f"\n    {q.get('reason')}: {q.get('raw')}" for q in late[:10]
        )
    return (
        f"request log of the paused broker: {before} lines before, {during} during, {after} after, "
        f"{held} of them held across the pause ({held_fetches} followers' fetches); a replaced "
        f"leader's fetches published after the fence: {len(replaced)}; events quarantined as "
        f"late: {len(late)}" + "".join(f"\n    {q.get('reason')}: {q.get('raw')}" for q in late[:5])
    )
