"""Running the real query over JSON-lines input, for tests."""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path

from replmon.streaming.bridge import OutputRouter
from replmon.streaming.cluster_state import ClusterStepRunner
from replmon.streaming.query import start_query
from replmon.streaming.settings import Settings
from replmon.streaming.sources import file_source

QUERY_TIMEOUT_S = 300.0  # no test query should run this long: a hung query fails, not CI


def await_end(query, timeout_s: float = QUERY_TIMEOUT_S) -> None:
    """Wait for a bounded (availableNow) query to end; stop it and fail after `timeout_s`.
    Raises the query's error if it failed."""
    if not query.awaitTermination(timeout_s):
        query.stop()
        raise AssertionError(f"query {query.name} did not end within {timeout_s:.0f} s")


def process_all_available(query, timeout_s: float = QUERY_TIMEOUT_S) -> None:
    """query.processAllAvailable() (which has no timeout of its own), bounded: the query is
    stopped and the test fails after `timeout_s`."""
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            query.processAllAvailable()
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            errors.append(exc)

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    waiter.join(timeout_s)
    if waiter.is_alive():
        query.stop()
        raise AssertionError(f"query {query.name} did not process its input within {timeout_s:.0f} s")
    if errors:
        raise errors[0]


def write_events(
    folder: Path, events: list[dict], name: str = "part-00000.jsonl", raw_lines: list[str] = ()
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(e) for e in events] + list(raw_lines)
    (folder / name).write_text("\n".join(lines) + "\n")
    return folder


def run_once(session, input_dir: Path, out_dir: Path, **settings) -> dict[str, list[dict]]:
    """One availableNow run of the real query; returns every output record by kind."""
    cfg = Settings(input_path=str(input_dir), output_dir=str(out_dir), **settings)
    router = OutputRouter(
        str(out_dir), cluster_step=ClusterStepRunner(cfg.monitor_config(), cfg.checkpoint_dir)
    )
    spark = session
    source = file_source(spark, str(input_dir))
    query = start_query(spark, source, cfg, router, once=True, name=f"test_{uuid.uuid4().hex[:8]}")
    try:
        await_end(query)
        assert query.exception() is None
    finally:
        query.stop()
    router.flush()  # as `replmon run --once` does at the end of its input
    return read_outputs(out_dir)


def read_outputs(out_dir: Path) -> dict[str, list[dict]]:
    result = {}
    for kind in ("alerts", "partition_status", "replica_status", "series_point", "quarantine"):
        rows = []
        for f in sorted((out_dir / kind).glob("*.jsonl")) if (out_dir / kind).exists() else []:
            rows += [json.loads(line) for line in f.read_text().splitlines() if line]
        result[kind] = rows
    return result


def transition_key(a) -> tuple:
    """One alert transition, as counted when a run must write each exactly once: its firing and
    its resolve."""
    return (a["alert_id"], a["status"], a["name"])


def exactly_once(a) -> bool:
    """Whether a record is one of those: a root's `updated` records (its cause or counts moved,
    state/cluster.py) are progress, stamped when the cluster step saw the change, which depends
    on how the input was cut into micro-batches; they are not counted."""
    return a["status"] != "updated"
