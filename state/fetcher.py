"""ReplicaFetcherStalled: one follower broker's fetcher thread for one leader broker stopped.

A follower broker F runs `num.replica.fetchers` threads per leader broker L; each carries every
partition of L whose fetcher id is k, in one FETCH request per round (docs/kafka-rules.md §6.5). When the
thread stalls, all those partitions stop fetching from L at once while F goes on elsewhere.

Decided per bucket when one of the group's replicas goes out of sync (L after its last fetch,
later than the controller fences a dead broker), from the partitions of the group (F, L, k)
the bucket holds: all of them (at least two) have had no accepted fetch from F for longer than
`stuck_after_ms`, their leader still reports (events within that time), and F is registered.
The alert starts at the group's last fetch + the stuck time + 1 ms; since one FETCH request
serves the whole group, every bucket sees the same last fetch time and derives the same id, and
`root_cause.merge_root_alerts` folds the shares (a bucket holding a single partition of the
group cannot tell it from a one-partition fault and adds no share).
"""

from __future__ import annotations

from typing import NamedTuple

from replmon.state.alert_rules import FETCHER_STALLED
from replmon.state.alerts import alert_id

_INT_MIN = -(1 << 31)


def java_string_hash(s: str) -> int:
    """Java's String.hashCode: h = 31*h + char over UTF-16 code units, 32-bit wrapping."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= (1 << 31) else h


def _int32(n: int) -> int:
    n &= 0xFFFFFFFF
    return n - (1 << 32) if n >= (1 << 31) else n


# AbstractFetcherManager.getFetcherId: Utils.abs(31 * topic.hashCode() + partition) % num.replica.fetchers,
# wrapping int arithmetic, Utils.abs(Integer.MIN_VALUE) = 0.
def fetcher_id(topic: str, partition: int, num_replica_fetchers: int) -> int:
    n = _int32(31 * java_string_hash(topic) + partition)
    return (0 if n == _INT_MIN else abs(n)) % num_replica_fetchers


class FetcherRoot(NamedTuple):
    """An ongoing fetcher stall: the id of its alert and since when."""

    alert_id: str
    since_ms: int


FetcherKey = tuple[str, int, int, int]  # ("fetcher", follower, leader, fetcher id)


def fetcher_key(follower: int, leader: int, fetcher: int) -> FetcherKey:
    return ("fetcher", follower, leader, fetcher)


def fetcher_subject(cluster: str, follower: int, leader: int, fetcher: int) -> str:
    return f"{cluster}/fetcher/{follower}/{leader}/{fetcher}"


def parse_fetcher_subject(subject: str) -> FetcherKey:
    follower, leader, fetcher = subject.rsplit("/", 3)[1:]
    return fetcher_key(int(follower), int(leader), int(fetcher))


def fetcher_root(cluster: str, follower: int, leader: int, fetcher: int, since_ms: int) -> FetcherRoot:
    return FetcherRoot(
        alert_id(FETCHER_STALLED, fetcher_subject(cluster, follower, leader, fetcher), since_ms), since_ms
    )


class Member(NamedTuple):
    """One partition of a fetcher group, as the check needs it."""

    name: str  # topic-partition
    last_fetch_ms: int  # the follower's last accepted fetch (ReplicaState.leo_update_ms)
    last_event_ms: int  # anything from the partition's leader


# The thread of the group has stopped: every member (at least two) stuck, the leader still
# reporting, the follower broker registered (not fenced, not shutting down). Returns the
# stall's start time, or None.
def stalled_since(
    members: list[Member], now_ms: int, stuck_after_ms: int, follower_registered: bool
) -> int | None:
    if len(members) < 2 or not follower_registered:
        return None
    last = max(m.last_fetch_ms for m in members)
    if now_ms - last <= stuck_after_ms:
        return None
    if any(now_ms - m.last_event_ms > stuck_after_ms for m in members):
        return None  # the leader is silent too: not this thread's doing
    return last + stuck_after_ms + 1
