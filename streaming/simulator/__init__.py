"""A deterministic, seeded simulator of a Kafka cluster's replication, for replmon.

It writes the events of `docs/events.md` as a real cluster would produce them (follower fetches
as the partition leader first processed them, appends, metadata, broker states, heartbeats) and,
alongside, the truth: what each simulated leader decided, computed by the rules engine in
`state/` fed with exactly those fetches. See `docs/simulator.md`.

Modules: `events` (the contract's records), `model` (the cluster and its clock), `faults`
(scheduled failures), `truth` (the leaders' decisions), `scenarios` (named set-ups), `scale`
(a fast steady-state generator for benchmarks), `writers` (files, Kafka) and `cli`.
"""
