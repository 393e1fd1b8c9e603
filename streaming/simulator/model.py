"""The cluster simulation: a discrete-event model of produce, follower fetches and the controller.

Pure: no I/O and no wall clock; time is the model's own and only moves forward, and every random
choice comes from one seeded `random.Random`, so a seed gives the same events every time.

What happens, in Kafka's terms:
* Producers write one batch per partition per `batch_interval_ms` to the leader (one `append`).
* Each follower fetches each partition with its LEO as `fetch_offset`. The leader reads
  `leader_leo` just before the read and hands the fetch to the rules engine (the truth); the
  `fetch` event is emitted then, at arrival. A follower at the LEO is parked up to
  replica.fetch.wait.max.ms or until the next append; the response brings at most
  `fetch_max_records`, and the follower's next fetch arrives an RTT (plus its append time) later.
* Every broker runs `isr-expiration` every L/2 from its start for the partitions it leads.
* The controller fences a broker broker.session.timeout.ms after it went silent, removes it from
  every ISR and elects new leaders (higher leader epoch); followers that had records the new
  leader lacks get a diverging-epoch answer and truncate.
* Every change of ISR, leader or assignment is reported as `metadata` after a propagation delay.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Callable, Iterator
from typing import Any

from replmon.state.partition import PartitionConfig

from . import events as ev
from .cluster import ClusterSpec, Fetcher, PartitionSim, assignment
from .truth import ELECTION, FENCED, REASSIGNMENT, PartitionTruth

DEFAULT_START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
FIRST_BROKER_EPOCH = 100
UNFENCE_DELAY_MS = (500, 1500)  # a restarted broker catches up metadata, then is unfenced
# What a metadata event reports, taken when it is published: leader, epoch, replicas, ISR, adding.
MetadataSnapshot = tuple[int, int, tuple[int, ...], tuple[int, ...], tuple[int, ...]]


class Simulation:
    """Run with `run()` (yields events in ts order), then read `truth_records()`."""

    def __init__(self, spec: ClusterSpec, *, seed: int = 0, start_ms: int = DEFAULT_START_MS) -> None:
        self.spec = spec
        self.start_ms = start_ms
        self.end_ms = start_ms + spec.duration_ms
        self.now = start_ms
        self.rng = random.Random(seed)
        self.cluster = spec.name
        self.config = PartitionConfig(
            replica_lag_time_max_ms=spec.replica_lag_time_max_ms,
            min_insync_replicas=spec.min_insync_replicas,
            alter_partition="immediate",
            rule_set=spec.rule_set,
        )
        self._queue: list[tuple[int, int, Callable[..., None], tuple]] = []
        self._seq = itertools.count()
        self._out: list[ev.Event] = []
        all_brokers = spec.brokers + spec.spare_brokers
        self.broker_epoch = {b: FIRST_BROKER_EPOCH + 2 * i for i, b in enumerate(all_brokers)}
        self.alive = dict.fromkeys(all_brokers, True)
        self.fenced = dict.fromkeys(all_brokers, False)
        self._tick_gen = dict.fromkeys(all_brokers, 0)
        self.partitions: dict[tuple[str, int], PartitionSim] = {}
        for t, topic in enumerate(spec.topics):
            for p in range(topic.partitions):
                replicas = assignment(t, p, spec.brokers, topic.replication_factor)
                truth = PartitionTruth(self.cluster, topic.name, p, self.config)
                self.partitions[(topic.name, p)] = PartitionSim(
                    topic=topic, partition=p, replicas=replicas, leader=replicas[0], truth=truth
                )

    # ---- the clock --------------------------------------------------------------------------------

    def at(self, t: int, action: Callable[..., None], *args: Any) -> None:
        heapq.heappush(self._queue, (t, next(self._seq), action, args))

    def at_offset(self, offset_ms: int, action: Callable[..., None], *args: Any) -> None:
        self.at(self.start_ms + offset_ms, action, *args)

    def run(self) -> Iterator[ev.Event]:
        self._start()
        queue = self._queue
        while queue and queue[0][0] <= self.end_ms:
            t, _, action, args = heapq.heappop(queue)
            self.now = t
            action(*args)
            if self._out:
                out, self._out = self._out, []
                yield from out

    def truth_records(self) -> list[dict]:
        records = [f.describe(self.cluster, self.start_ms) for f in self.spec.faults]
        for ps in self.partitions.values():
            records.extend(ps.truth.finish(self.end_ms))
        return records

    def _rtt(self) -> int:
        return self.rng.randint(*self.spec.rtt_ms)

    def _emit(self, event: ev.Event) -> None:
        self._out.append(event)

    # ---- start ------------------------------------------------------------------------------------

    def _start(self) -> None:
        for b, epoch in self.broker_epoch.items():
            self._emit(ev.broker(self.now, self.cluster, broker_id=b, state="running", broker_epoch=epoch))
        for ps in self.partitions.values():
            for r in ps.replicas:
                ps.add_replica_log(r)
            ps.start_epoch(0)
            ps.truth.elect(
                self.now,
                leader=ps.leader,
                leader_epoch=0,
                replicas=ps.replicas,
                isr=ps.replicas,
                leader_leo=0,
                hw=0,
                broker_epochs=self.broker_epoch,
                reason=None,
            )
            ps.metadata_ms = self.now
            self._emit_metadata(ps, self._snapshot(ps))
            self._sync_fetchers(ps)
            self.at(self.now + self.rng.randrange(ps.topic.batch_interval_ms), self._produce, ps)
        half = self.spec.replica_lag_time_max_ms // 2
        for b in self.spec.brokers + self.spec.spare_brokers:  # brokers started at some phase before us
            self.at(self.now + self.rng.randrange(half), self._isr_expiration, b, self._tick_gen[b])
        self._heartbeat()
        for fault in self.spec.faults:
            fault.install(self)

    def _heartbeat(self) -> None:
        self._emit(ev.heartbeat(self.now, self.cluster))
        self.at(self.now + self.spec.heartbeat_interval_ms, self._heartbeat)

    # ---- produce ----------------------------------------------------------------------------------

    def _produce(self, ps: PartitionSim) -> None:
        interval = ps.topic.batch_interval_ms
        self.at(self.now + self.rng.randint(interval * 4 // 5, interval * 6 // 5), self._produce, ps)
        self._append(ps, round(ps.topic.produce_rate * interval / 1000 * self.rng.uniform(0.5, 1.5)))

    def burst(self, topic: str, partition: int, messages: int, over_ms: int) -> None:
        ps = self.partitions[(topic, partition)]
        chunks = max(1, over_ms // ps.topic.batch_interval_ms)
        for i in range(chunks):
            self.at(self.now + i * over_ms // chunks, self._append, ps, messages // chunks)

    def _append(self, ps: PartitionSim, records: int, wake: bool = True) -> None:
        if records <= 0 or not self._leader_alive(ps):
            return
        if self.spec.producer_acks_all and ps.truth.live.under_min_isr:  # NotEnoughReplicas: nothing appended
            return
        leo = ps.leo[ps.leader] = ps.leo[ps.leader] + records
        ps.last_epoch[ps.leader] = ps.leader_epoch
        ps.truth.append(self.now, leo)
        self._emit(ev.append(self.now, self.cluster, ps.name, ps.partition, leader_leo=leo))
        if not wake:
            return
        parked, ps.parked = ps.parked, {}
        for replica, (gen, offset, _) in parked.items():  # DelayedFetch completes: min.bytes reached
            self._respond(ps, replica, gen, offset, leo)

    # ---- follower fetches -------------------------------------------------------------------------

    def _leader_alive(self, ps: PartitionSim) -> bool:
        return ps.leader >= 0 and self.alive[ps.leader] and not ps.truth.frozen

    def _should_fetch(self, ps: PartitionSim, replica: int) -> bool:
        f = ps.fetchers[replica]
        return (
            replica in ps.replicas
            and replica != ps.leader
            and self._leader_alive(ps)
            and self.alive[replica]
            and not self.fenced[replica]
            and not f.paused
        )

    def _sync_fetchers(self, ps: PartitionSim, restart: bool = False) -> None:
        """Start or stop each follower's fetcher as the cluster now requires (restart: new leader)."""
        for replica, f in ps.fetchers.items():
            should = self._should_fetch(ps, replica)
            if f.running and (restart or not should):
                f.gen += 1
                f.running = False
                ps.parked.pop(replica, None)
            if should and not f.running:
                f.gen += 1
                f.running = True
                self.at(self.now + self._rtt(), self._fetch, ps, replica, f.gen)

    def _fetch(self, ps: PartitionSim, replica: int, gen: int) -> None:
        """The leader first processes a follower's fetch: this is the observation."""
        if ps.fetchers[replica].gen != gen:
            return
        offset, leader_leo = ps.leo[replica], ps.leo[ps.leader]
        epoch = ps.last_epoch[replica]
        end = ps.end_offset_for(epoch) if epoch >= 0 else offset
        common = dict(
            replica=replica,
            fetch_offset=offset,
            leader_leo=leader_leo,
            leader_epoch=ps.leader_epoch,
            broker_epoch=self.broker_epoch[replica],
        )
        if end < offset:  # the follower has records of `epoch` the leader lacks: diverging epoch, truncate
            ps.truth.fetch(
                self.now,
                replica,
                offset,
                broker_epoch=self.broker_epoch[replica],
                log_start_offset=0,
                diverging_epoch=epoch,
            )
            self._emit(
                ev.fetch(
                    self.now,
                    self.cluster,
                    ps.name,
                    ps.partition,
                    **common,
                    leader_hw=ps.truth.live.hw,
                    diverging_epoch=epoch,
                )
            )
            ps.truncate(replica, end)
            self.at(self.now + self._rtt(), self._fetch, ps, replica, gen)
            return
        isr_before = ps.truth.live.isr
        outcome = ps.truth.fetch(
            self.now, replica, offset, broker_epoch=self.broker_epoch[replica], log_start_offset=0
        )
        self._emit(
            ev.fetch(self.now, self.cluster, ps.name, ps.partition, **common, leader_hw=outcome.response_hw)
        )
        if ps.truth.live.isr != isr_before:
            self._isr_changed(ps)
        if leader_leo > offset:
            self._respond(ps, replica, gen, offset, leader_leo)
        else:  # parked (DelayedFetch) until an append or replica.fetch.wait.max.ms
            request = next(self._seq)
            ps.parked[replica] = (gen, offset, request)
            self.at(
                self.now + self.spec.replica_fetch_wait_max_ms, self._fetch_wait_expired, ps, replica, request
            )

    def _fetch_wait_expired(self, ps: PartitionSim, replica: int, request: int) -> None:
        parked = ps.parked.get(replica)
        if parked is not None and parked[2] == request:
            del ps.parked[replica]
            self._respond(ps, replica, parked[0], parked[1], parked[1])

    def _respond(self, ps: PartitionSim, replica: int, gen: int, offset: int, upto: int) -> None:
        """The response leaves with records [offset, upto), capped; the follower appends them and
        fetches again."""
        f: Fetcher = ps.fetchers[replica]
        if f.gen != gen:
            return
        if f.throughput is None:
            throughput, cap = self.spec.follower_throughput, self.spec.fetch_max_records
        else:  # throttled: about 100 ms of its throughput per fetch
            throughput, cap = f.throughput, max(1, int(f.throughput / 10))
        records = min(upto - offset, cap)
        ps.receive(replica, records, ps.truth.live.hw)
        busy_ms = round(records * 1000 / throughput)
        self.at(self.now + self._rtt() + busy_ms, self._fetch, ps, replica, gen)

    # ---- the leader's isr-expiration and metadata -------------------------------------------------

    def _isr_expiration(self, broker: int, gen: int) -> None:
        if gen != self._tick_gen[broker]:
            return
        self.at(self.now + self.spec.replica_lag_time_max_ms // 2, self._isr_expiration, broker, gen)
        for ps in self.partitions.values():
            if ps.leader == broker and not ps.truth.frozen and ps.truth.isr_expiration(self.now):
                self._isr_changed(ps)

    def _isr_changed(self, ps: PartitionSim) -> None:
        self._publish_metadata(ps, self.rng.randint(*self.spec.metadata_delay_ms))
        if ps.reassignment is not None and ps.reassignment[0] in ps.truth.live.isr:
            self.at(
                self.now + self.rng.randint(*self.spec.metadata_delay_ms), self._complete_reassignment, ps
            )

    def _snapshot(self, ps: PartitionSim) -> MetadataSnapshot:
        e = ps.truth.live
        return (ps.leader, ps.leader_epoch, ps.replicas, e.isr, ps.adding)

    def _publish_metadata(self, ps: PartitionSim, delay_ms: int) -> None:
        """Report the current state after delay_ms; reports of one partition never overtake each other."""
        ps.metadata_ms = max(self.now + delay_ms, ps.metadata_ms)
        self.at(ps.metadata_ms, self._emit_metadata, ps, self._snapshot(ps))

    def _emit_metadata(self, ps: PartitionSim, snapshot: MetadataSnapshot) -> None:
        leader, epoch, replicas, isr, adding = snapshot
        e = ps.truth.live
        hw = e.hw if e.leader == leader else ps.follower_hw.get(leader, 0)
        self._emit(
            ev.metadata(
                self.now,
                self.cluster,
                ps.name,
                ps.partition,
                leader=leader,
                leader_epoch=epoch,
                replicas=replicas,
                isr=isr,
                adding_replicas=adding,
                leader_leo=ps.leo.get(leader, 0),
                hw=hw,
                min_insync_replicas=self.config.min_insync_replicas,
                replica_lag_time_max_ms=self.config.replica_lag_time_max_ms,
            )
        )

    # ---- fault operations (faults.ClusterOps) -----------------------------------------------------

    def pause_fetcher(self, topic: str, partition: int, replica: int) -> None:
        ps = self.partitions[(topic, partition)]
        ps.fetchers[replica].paused = True
        self._sync_fetchers(ps)

    def resume_fetcher(self, topic: str, partition: int, replica: int) -> None:
        ps = self.partitions[(topic, partition)]
        ps.fetchers[replica].paused = False
        self._sync_fetchers(ps)

    def throttle_fetcher(self, topic: str, partition: int, replica: int, throughput: float | None) -> None:
        self.partitions[(topic, partition)].fetchers[replica].throughput = throughput

    def reassign(self, topic: str, partition: int, add: int, remove: int | None, throughput: float) -> None:
        ps = self.partitions[(topic, partition)]
        if add in ps.replicas or remove == ps.leader or (remove is not None and remove not in ps.replicas):
            raise ValueError(
                f"reassignment of {topic}-{partition}: cannot add {add} / remove {remove} "
                f"(replicas {list(ps.replicas)}, leader {ps.leader})"
            )
        self.at(
            self.now + self.rng.randint(*self.spec.metadata_delay_ms),
            self._start_reassignment,
            ps,
            add,
            remove,
            throughput,
        )

    def _start_reassignment(self, ps: PartitionSim, add: int, remove: int | None, throughput: float) -> None:
        ps.replicas += (add,)
        ps.adding = (add,)
        ps.reassignment = (add, remove)
        ps.add_replica_log(add)
        ps.fetchers[add].throughput = throughput  # a replication quota throttles the catch-up
        e = ps.truth.live
        ps.truth.controller_update(
            self.now,
            REASSIGNMENT,
            isr=e.isr,
            leader_epoch=e.leader_epoch,
            replicas=ps.replicas,
            adding_replicas=ps.adding,
        )
        self._publish_metadata(ps, 0)
        self._sync_fetchers(ps)

    def _complete_reassignment(self, ps: PartitionSim) -> None:
        if ps.reassignment is None:  # already completed by an earlier expansion
            return
        add, remove = ps.reassignment
        ps.reassignment = None
        ps.replicas = tuple(r for r in ps.replicas if r != remove)
        ps.adding = ()
        ps.fetchers[add].throughput = None
        e = ps.truth.live
        ps.truth.controller_update(
            self.now,
            REASSIGNMENT,
            isr=tuple(r for r in e.isr if r != remove),
            leader_epoch=e.leader_epoch,
            replicas=ps.replicas,
            adding_replicas=(),
        )
        self._publish_metadata(ps, 0)
        self._sync_fetchers(ps)

    def crash_broker(self, broker: int, unreplicated_batch: bool = True) -> None:
        """The broker dies; with unreplicated_batch, each partition it leads has just appended a batch
        that no follower fetched (it is truncated when the broker comes back as a follower)."""
        for ps in self.partitions.values():
            if unreplicated_batch and broker == ps.leader:
                self._append(
                    ps, max(1, round(ps.topic.produce_rate * ps.topic.batch_interval_ms / 1000)), wake=False
                )
        self.alive[broker] = False
        self._tick_gen[broker] += 1
        for ps in self.partitions.values():
            if broker == ps.leader:
                ps.truth.leader_lost(self.now)
                ps.parked.clear()
            if broker in ps.replicas:
                self._sync_fetchers(ps)
        fence_at = (
            self.now + self.spec.broker_session_timeout_ms + self.rng.randint(*self.spec.metadata_delay_ms)
        )
        self.at(fence_at, self._fence, broker, self.broker_epoch[broker])

    def _fence(self, broker: int, epoch: int) -> None:
        """The controller fences a broker that missed its session: out of every ISR, new leaders elected."""
        if self.fenced[broker] or self.broker_epoch[broker] != epoch:
            return
        self.fenced[broker] = True
        self._emit(ev.broker(self.now, self.cluster, broker_id=broker, state="fenced", broker_epoch=epoch))
        for ps in self.partitions.values():
            ps.truth.set_broker_state(broker, fenced=True)
        for ps in self.partitions.values():
            if broker == ps.leader:
                self._elect(ps)
            elif broker in ps.truth.live.isr:
                e = ps.truth.live
                ps.truth.controller_update(
                    self.now, FENCED, isr=tuple(r for r in e.isr if r != broker), leader_epoch=e.leader_epoch
                )
                self._publish_metadata(ps, 0)

    def _elect(self, ps: PartitionSim) -> None:
        """The controller elects the first live ISR member (in assignment order) with a new leader epoch."""
        old = ps.leader
        isr = tuple(r for r in ps.truth.live.isr if r != old)
        candidates = [r for r in ps.replicas if r in isr and self.alive[r] and not self.fenced[r]]
        if not candidates:
            raise NotImplementedError(
                f"{ps.name}-{ps.partition}: no live ISR member to elect (offline partition)"
            )
        ps.leader = candidates[0]
        ps.start_epoch(ps.leader_epoch + 1)
        leo = ps.leo[ps.leader]
        ps.truth.elect(
            self.now,
            leader=ps.leader,
            leader_epoch=ps.leader_epoch,
            replicas=ps.replicas,
            isr=isr,
            leader_leo=leo,
            hw=min(ps.follower_hw[ps.leader], leo),
            broker_epochs=self.broker_epoch,
            fenced=[b for b in ps.replicas if self.fenced[b]],
            adding_replicas=ps.adding,
            reason=ELECTION,
        )
        self._publish_metadata(ps, 0)
        self._sync_fetchers(ps, restart=True)

    def restart_broker(self, broker: int) -> None:
        if not self.fenced[broker]:  # the new registration fences the old incarnation first
            self._fence(broker, self.broker_epoch[broker])
        self.alive[broker] = True
        self.broker_epoch[broker] = max(self.broker_epoch.values()) + 2
        self.at(self.now + self.rng.randint(*UNFENCE_DELAY_MS), self._unfence, broker)

    def _unfence(self, broker: int) -> None:
        self.fenced[broker] = False
        epoch = self.broker_epoch[broker]
        self._emit(ev.broker(self.now, self.cluster, broker_id=broker, state="running", broker_epoch=epoch))
        for ps in self.partitions.values():
            ps.truth.set_broker_state(broker, fenced=False, broker_epoch=epoch)
            if broker in ps.replicas:
                self._sync_fetchers(ps)
        self._tick_gen[broker] += 1
        self.at(self.now, self._isr_expiration, broker, self._tick_gen[broker])


def simulate(
    spec: ClusterSpec, *, seed: int = 0, start_ms: int = DEFAULT_START_MS
) -> tuple[list[ev.Event], list[dict]]:
    """Run a simulation to the end: (events in ts order, truth records)."""
    sim = Simulation(spec, seed=seed, start_ms=start_ms)
    events = list(sim.run())
    return events, sim.truth_records()
