"""A healthy partition's status goes out when its health changes and at the refresh; between,
its moving offsets go out as series points (docs/outputs.md, `series_point`)."""

from __future__ import annotations

from itertools import pairwise

from replmon.state.bucket import Bucket
from replmon.streaming.settings import monitor_config
from tests.state.test_monitor import T0, L, ev, meta, steady


def per_second(events, cfg, seconds, start=T0):
    """Feed `events` (tuples in event-time order) a second at a time from `start`; each
    second's (partition statuses, series points)."""
    bucket, alerts, quarantine, out = Bucket(0, 1), [], [], []
    for s in range(seconds):
        lo, hi = start + s * 1000, start + (s + 1) * 1000
        bucket.process([e for e in events if lo <= e[1] < hi], cfg, alerts, quarantine)
        bucket.advance(cfg, alerts)
        partitions: list = []
        points: list = []
        bucket.statuses(cfg, partitions, [], points=points)
        out.append((partitions, points))
    assert alerts == []
    return out


CFG = monitor_config(replica_lag_time_max_ms=L, status_refresh_ms=10_000, series_interval_ms=5000)
EVERY_STATUS = monitor_config(replica_lag_time_max_ms=L, status_refresh_ms=10_000, series_interval_ms=0)


def test_a_busy_healthy_partition_sends_points_between_its_statuses():
    # Appends of 10 messages every 100 ms from +100, both followers fetching at the LEO 1 and
    # 2 ms after each: healthy throughout. Statuses at +0 s (the first) and +10 s (the refresh);
    # with series_interval_ms 0, every other second, points.
    out = per_second([meta(T0), *steady(T0 + 100, T0 + 20_000)], EVERY_STATUS, 20)
    assert [s for s, (statuses, _) in enumerate(out) if statuses] == [0, 10]
    assert [s for s, (_, points) in enumerate(out) if points] == [*range(1, 10), *range(11, 20)]
    # Second 1: the last append is at +1900, the 19th: LEO 190; follower 2 fetches it at +1901
    # and follower 3 at +1902, the partition's time; both at the LEO, so the HW is 190 too, each
    # caught up at its own fetch (lag = the time since: 1 ms and 0 ms).
    ts = T0 + 1902
    key = {"cluster": "c1", "topic": "t", "partition": 0}
    assert out[1][1] == [
        {**key, "replica": None, "ts": ts, "hw": 190, "leader_leo": 190, "hw_stalled_ms": 0, "isr_size": 3},
        {**key, "replica": 2, "ts": ts, "lag_ms": 1, "lag_messages": 0, "leo": 190},
        {**key, "replica": 3, "ts": ts, "lag_ms": 0, "lag_messages": 0, "leo": 190},
    ]


def test_a_busy_healthy_partitions_points_go_out_once_per_series_interval():
    # The same busy, healthy partition with stream.series_interval_ms 5 s: one
    # point per 5 s period of its cluster's clock (at a phase of its own), never two in a period,
    # and none where its status went out.
    out = per_second([meta(T0), *steady(T0 + 100, T0 + 30_000)], CFG, 30)
    statuses = [s for s, (st, _) in enumerate(out) if st]
    pointed = [s for s, (_, points) in enumerate(out) if points]
    assert statuses == [0, 10, 20]
    assert len(pointed) >= 3 and not set(pointed) & set(statuses), pointed
    assert {s % 5 for s in pointed} == {pointed[0] % 5}, pointed  # the same phase every period
    assert all(b - a in (5, 10) for a, b in pairwise(pointed)), pointed
    assert all(len(points) == 3 for _, points in out if points)  # the partition and 2 followers


def test_the_last_offsets_go_out_within_a_series_interval_after_they_stop_moving():
    # Appends until +7.3 s (LEO 730), then the followers go on fetching at the LEO with no
    # appends: the offsets stop moving between two points. The last point, within one period
    # after, says the final offsets; nothing goes out after it (the refresh is a minute here).
    cfg = monitor_config(replica_lag_time_max_ms=L, status_refresh_ms=60_000, series_interval_ms=5000)
    events = [meta(T0), *steady(T0 + 100, T0 + 7_400), *steady(T0 + 7_400, T0 + 20_000, leo0=730, per_step=0)]
    out = per_second(sorted(events, key=lambda e: e[1]), cfg, 20)
    assert [s for s, (statuses, _) in enumerate(out) if statuses] == [0]
    pointed = [s for s, (_, points) in enumerate(out) if points]
    last = out[pointed[-1]][1]
    assert len(pointed) >= 2 and 7 <= pointed[-1] <= 7 + 5, pointed
    assert [p["hw"] for p in last if p["replica"] is None] == [730]
    assert [p["leo"] for p in last if p["replica"] is not None] == [730, 730]


def test_an_idle_healthy_partition_sends_no_points():
    # No appends: the offsets do not move, so between the refreshes nothing goes out at all.
    out = per_second([meta(T0), *steady(T0 + 100, T0 + 30_000, per_step=0)], CFG, 30)
    assert [s for s, (statuses, _) in enumerate(out) if statuses] == [0, 10, 20]
    assert [s for s, (_, points) in enumerate(out) if points] == []


def test_partitions_first_seen_together_spread_their_refreshes():
    # 200 idle, healthy partitions, all first seen in the same second (as at a monitor's start).
    # Each repeats its status once per 10 s, at a point of the period of its own: never all in
    # the same batch (with one refresh time for all, 200 would go out in second 10, and again in
    # second 20: the micro-batch that writes them is the slow one).
    events = []
    for p in range(200):
        events.append(meta(T0, partition=p))
        for t in range(T0 + 100, T0 + 25_000, 500):
            events += [
                ev("fetch", t + 1, replica=r, partition=p, fetch_offset=0, leader_leo=0) for r in (2, 3)
            ]
    events.sort(key=lambda e: e[1])
    out = per_second(events, CFG, 25)
    sent: dict[int, list[int]] = {}
    for s, (statuses, points) in enumerate(out):
        assert points == []
        for status in statuses:
            sent.setdefault(status["partition"], []).append(s)
    assert sorted(sent) == list(range(200))
    for p, seconds in sent.items():
        first, *again = seconds
        assert first == 0 and again, (p, seconds)
        assert 1 <= again[0] <= 10 and all(b - a == 10 for a, b in pairwise(again)), (p, seconds)
    per_s = [len(statuses) for statuses, _ in out[1:]]
    assert max(per_s) <= 60, per_s  # 20 a second on average


def test_points_give_the_values_the_status_records_give():
    # Points are read from the partition's state, records built from it: at every second of a
    # run where follower 3 first keeps up, then fetches 30 messages behind (lag, HW held), then
    # stops (HW stalled), both say the same HW, LEOs, lags and ISR size.
    from replmon.state.status_records import series_points

    cfg = monitor_config(replica_lag_time_max_ms=L)
    events = [meta(T0), *steady(T0 + 100, T0 + 5_000), *steady(T0 + 5_000, T0 + 9_000, leo0=490, slow=30)]
    events += steady(T0 + 9_000, T0 + 20_000, leo0=890, stop=T0 + 12_000)
    bucket, alerts = Bucket(0, 1), []
    checked = 0
    for s in range(20):
        bucket.process([e for e in events if T0 + s * 1000 <= e[1] < T0 + (s + 1) * 1000], cfg, alerts, [])
        bucket.advance(cfg, alerts)
        watch = bucket.partitions[("c1", "t", 0)]
        status, rows = watch.partition_status(), watch.replica_statuses(cfg)
        partition_point, *replica_points = series_points(watch)
        for f in ("cluster", "topic", "partition", "ts", "hw", "leader_leo", "hw_stalled_ms"):
            assert partition_point[f] == status[f], (s, f)
        assert partition_point["isr_size"] == len(status["isr"])
        assert [p["replica"] for p in replica_points] == [r["replica"] for r in rows] == [2, 3]
        for point, row in zip(replica_points, rows, strict=True):
            for f in ("ts", "lag_ms", "lag_messages", "leo"):
                assert point[f] == row[f], (s, f)
        checked += status["hw_stalled_ms"] > 0 and rows[1]["lag_messages"] > 0
    assert checked  # the run reached a stalled HW with follower 3 behind
