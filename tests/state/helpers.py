"""Small builders shared by the state/ tests (times are offsets from T)."""

from replmon.state.partition import PartitionConfig, PartitionLeader

T = 1_000_000


def make(
    *,
    replicas=(1, 2, 3),
    isr=(1, 2, 3),
    leo=100,
    hw=100,
    mode="immediate",
    lag=10000,
    min_isr=1,
    rule_set="current",
    lag_messages=4000,
    **kw,
) -> PartitionLeader:
    """A partition led by broker 1, just after makeLeader (epoch 5) at T."""
    config = PartitionConfig(
        replica_lag_time_max_ms=lag,
        min_insync_replicas=min_isr,
        alter_partition=mode,
        rule_set=rule_set,
        replica_lag_max_messages=lag_messages,
    )
    return PartitionLeader(
        config=config,
        now_ms=T,
        leader=1,
        leader_epoch=5,
        replicas=replicas,
        isr=isr,
        leader_leo=leo,
        hw=hw,
        **kw,
    )


def play(p: PartitionLeader, steps) -> list:
    """Apply steps like ("fetch", dt, replica, offset[, kwargs]); returns each step's result."""
    results = []
    for op, *args in steps:
        if op == "fetch":
            dt, replica, offset, *kw = args
            results.append(p.fetch(T + dt, replica, offset, **(kw[0] if kw else {})))
        elif op == "append":
            dt, leo = args
            results.append(p.append(T + dt, leo))
        elif op == "tick":
            results.append(p.isr_expiration(T + args[0]))
        elif op == "answer":
            dt, result, *error = args
            results.append(p.alter_partition_response(T + dt, result, error[0] if error else None))
        elif op == "controller":
            dt, kw = args
            results.append(p.controller_update(T + dt, **kw))
        elif op == "broker":
            replica, kw = args
            results.append(p.set_broker_state(replica, **kw))
        else:
            raise ValueError(op)
    return results
