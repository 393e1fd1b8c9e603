"""Fetch sessions (KIP-227) carry idle followers' progress (docs/events.md, `session`).

A follower fetches all the partitions it follows from one leader through one fetch session
per fetcher thread. Each request names only the partitions whose fetch state changed, and the
leader reads every partition of the session on each fetch (FetchSession.scala): a caught-up
follower of an idle partition advances its `lastCaughtUpTimeMs` on every read without being
named. A `session` event says when a session last read; a partition whose follower the
session carries takes that read as its own fetch, at the offset it last fetched, when something
asks: an event of the partition, a deadline of its own, a status, a check of its fetcher.

So a session event costs one entry in a small table per bucket, not a write per partition, and
what each partition derives from it is what a fetch event per read would have told it:

* a follower is carried while its last accepted fetch named the session, it is in the ISR, and
  it is at the leader LEO (`carries`); an append, an election, an error or a fetch that names
  no session ends that (the collector then sends the partition's own fetches);
* a read is taken as `PartitionLeader.fetch` of the follower's own offset at the read's time,
  so lcu, the last fetch and its leader LEO (the next fetch's previous-fetch credit) are what
  Kafka's leader records;
* the table keeps, per session, the reads that a partition may still ask for (those within the
  reorder tolerance of the cluster's settled time, and the newest one before them): a deadline
  takes the newest read at or before its own time (`advance`).

Pure: time is an argument, nothing here reads a clock.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from replmon.state.replica import ReplicaState

if TYPE_CHECKING:
    from replmon.state.alerts import Alerts

NO_SESSION = 0  # FetchRequest's INVALID_SESSION_ID: a fetch outside any session
# Why a `session` event is not one (docs/events.md): the parser's contract checks
# (streaming/parse.py, streaming/validate.py) and the engine use these words.
NOT_A_SESSION = "session_id of a session must be at least 1 (0 is no fetch session)"
NO_LEADER = "leader of a session must be at least 0"
OWN_LEADER = "a session's replica is its own leader"


@dataclass(slots=True)
class SessionTable:
    """One cluster's fetch sessions as a bucket knows them: (follower, leader, session id) ->
    the times of its recent reads, oldest first."""

    reads: dict[tuple[int, int, int], list[int]] = field(default_factory=dict)
    # per session, the read whose silence the bucket has woken the partitions for (`silent`)
    noticed: dict[tuple[int, int, int], int] = field(default_factory=dict)
    # the sessions heard from again after a noticed silence in this batch, with the read's
    # time (the bucket wakes their partitions at it in the same call: not stored)
    resumed: list[tuple[tuple[int, int, int], int]] = field(default_factory=list)

    def read(self, replica: int, leader: int, session_id: int, ts: int) -> str | None:
        """Record a session's read at `ts`; the reason it is refused, else None."""
        if session_id == NO_SESSION:
            return NOT_A_SESSION
        if leader < 0:
            return NO_LEADER
        if replica == leader:
            return OWN_LEADER
        key = (replica, leader, session_id)
        times = self.reads.setdefault(key, [])
        if times and ts <= times[-1]:
            return (
                f"stale session: session {session_id} of replica {replica} from leader {leader} "
                f"read at {ts}, not after its last read at {times[-1]} (a duplicate or out of order)"
            )
        if times and self.noticed.get(key) == times[-1]:
            self.resumed.append((key, ts))
        times.append(ts)
        return None

    def last_read(self, replica: int, leader: int, session_id: int, at_ms: int) -> int | None:
        """The session's newest read at or before `at_ms`, or None."""
        times = self.reads.get((replica, leader, session_id))
        if not times:
            return None
        i = bisect_right(times, at_ms)
        return times[i - 1] if i else None

    def covers(self, watch, now: int, gap_ms: int) -> bool:
        """Whether a session that carries one of the partition's followers has read within
        `gap_ms` of `now` or after it, and its silence is yet to be noticed (`silent`): that
        wakes the partition, which then needs no silence check of its own
        (alerts.telemetry_gap_ms)."""
        p = watch.leader
        if p.leader < 0:
            return False
        reads = self.reads
        noticed = self.noticed
        for r, st in p.followers.items():
            if carries(watch, r, st):
                key = (r, p.leader, st.session_id)
                times = reads.get(key)
                if times and times[-1] + gap_ms + 1 > now and noticed.get(key) != times[-1]:
                    return True
        return False

    def silent(self, at_ms: int, gap_ms: int) -> list[tuple[tuple[int, int, int], int]]:
        """The sessions silent for longer than `gap_ms` at `at_ms` not noticed yet, with the
        moment each fell silent (its last read + gap + 1), now noticed: the partitions they
        carry take that moment as a deadline (Bucket.advance)."""
        out = []
        noticed = self.noticed
        for key, times in self.reads.items():
            last = times[-1]
            if last + gap_ms + 1 <= at_ms and noticed.get(key) != last:
                noticed[key] = last
                out.append((key, last + gap_ms + 1))
        return out

    def prune(self, keep_from_ms: int, forget_before_ms: int) -> None:
        """Forget the reads no partition can ask for any more: those before `keep_from_ms`
        but the newest of them; and the sessions silent since before `forget_before_ms` (a
        partition they carried is evicted by then: stream.evict_after_ms)."""
        for key in [k for k, times in self.reads.items() if times[-1] < forget_before_ms]:
            del self.reads[key]
            self.noticed.pop(key, None)
        for times in self.reads.values():
            i = bisect_right(times, keep_from_ms - 1)
            if i > 1:
                del times[: i - 1]

    def to_rows(self) -> list[tuple[Any, ...]]:
        """(key, reads) per session, and the noticed read of one whose silence was noticed."""
        noticed = self.noticed
        return [
            (key, list(times), noticed[key]) if key in noticed else (key, list(times))
            for key, times in self.reads.items()
        ]

    @classmethod
    def from_rows(cls, rows) -> SessionTable:
        table = cls({tuple(row[0]): list(row[1]) for row in rows})
        table.noticed = {tuple(row[0]): row[2] for row in rows if len(row) > 2}
        return table


# Kafka: FetchSession's incremental fetch: a partition not named in a request is still read.
def carries(watch, replica: int, state: ReplicaState) -> bool:
    """Whether the follower's session carries its progress: its last accepted fetch named the
    session, and it has stayed in the ISR at the leader LEO since."""
    p = watch.leader
    return state.session_id != NO_SESSION and state.leo == p.leader_leo and replica in p.isr


def sync(table: SessionTable, watch, at_ms: int) -> bool:
    """Take into the partition the reads its followers' sessions made up to `at_ms` (each
    follower's newest one, as a fetch of its own offset); returns whether one was taken."""
    p = watch.leader
    if p.leader < 0 or not table.reads:
        return False
    taken = False
    for r, st in p.followers.items():
        if not carries(watch, r, st):
            continue
        t = table.last_read(r, p.leader, st.session_id, at_ms)
        if t is None or t <= st.last_fetch_ms:
            continue
        if p.fetch(t, r, st.leo, broker_epoch=st.broker_epoch).accepted:
            taken = True
            if t > watch.last_event_ms:
                watch.last_event_ms = t
        else:  # an older incarnation's session (a stale broker epoch): it carries nothing more
            st.session_id = NO_SESSION
    if taken:
        watch.dirty = True
    return taken


def advance(table: SessionTable, watch, t: int, out: Alerts, cfg, roots: dict[Any, Any]) -> None:
    """`watch.advance_to(t)`, each deadline on the way, and `t` itself (what the caller then
    evaluates), taken with the reads made up to it."""
    while watch.deadline_ms <= t:
        d = watch.deadline_ms
        sync(table, watch, d)
        watch.advance_to(d, out, cfg, roots, table)
    sync(table, watch, t)
    watch.advance_to(t, out, cfg, roots, table)


def join(state: ReplicaState | None, session_id: int | None) -> None:
    """An explicit fetch of the follower: it names the session that carries it from now on,
    or none."""
    if state is not None:
        state.session_id = session_id or NO_SESSION


def restates(watch, replica: int, session_id: int | None, fetch_offset: int, ts: int) -> bool:
    """Whether an explicit fetch repeats a read the follower's session already gave the
    partition (the collector sends a partition's last session read before it changes): not a
    stale fetch, just nothing new."""
    st = watch.leader.followers.get(replica)
    return (
        st is not None
        and session_id is not None
        and session_id != NO_SESSION
        and session_id == st.session_id
        and fetch_offset == st.leo
        and ts <= st.last_fetch_ms
    )


def advance_watch(table: SessionTable, watch, t: int, out: Alerts, cfg, roots: dict[Any, Any]) -> None:
    """`watch.advance_to(t)`; with fetch sessions, each deadline takes its followers' session
    reads up to its own time first (`advance`)."""
    if table.reads:
        advance(table, watch, t, out, cfg, roots)
    else:
        watch.advance_to(t, out, cfg, roots)
