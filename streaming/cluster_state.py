"""The cluster step on the driver, its state kept with the query's checkpoint.

foreachBatch is at-least-once: a batch may run again after a crash, with the same id. The step's
state after batch N is written to `<checkpoint>/cluster-step/<N>.json` (atomically) before any
output of batch N, and batch N always starts from the newest state of a batch *before* N, so a
replayed batch decides exactly what it decided the first time, and a restart continues where the
committed batches left off. A checkpoint on a remote file system (hdfs://, s3a://) keeps the
step's state in memory only (a restart then starts it afresh: held alerts of the last
group_wait may be decided again without their root).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from replmon.state.cluster import ClusterStep, cluster_config

log = logging.getLogger(__name__)
KEEP = 8  # states kept: a replay goes back one batch, a few more cost nothing


class ClusterStepRunner:
    def __init__(self, cfg, checkpoint_dir: str | None) -> None:
        self.cfg = cluster_config(cfg)
        self.folder: Path | None = None
        if checkpoint_dir and "://" not in checkpoint_dir:
            self.folder = Path(checkpoint_dir) / "cluster-step"
        elif checkpoint_dir:
            log.warning(
                "checkpoint %s is remote: the cluster step's state is kept in memory only", checkpoint_dir
            )
        self._memory: dict[int, dict] = {}
        self.last_batch = -1

    def run(self, batch_id: int, alerts: list[dict], activity: list[dict], flush: bool = False) -> list[dict]:
        """The alert records of batch `batch_id`, decided (state/cluster.py)."""
        step = ClusterStep.from_doc(self.cfg, self._load(batch_id))
        out = step.step(alerts, activity, flush=flush)
        self._save(batch_id, step.to_doc())
        self.last_batch = max(self.last_batch, batch_id)
        return out

    def next_batch(self) -> int:
        """The id after every batch this step has a state of (a restarted run that processed
        no new batch still flushes what the last one held)."""
        return max([self.last_batch, *self._ids()]) + 1

    def _ids(self) -> list[int]:
        if self.folder is None:
            return sorted(self._memory)
        if not self.folder.is_dir():
            return []
        return sorted(int(p.stem) for p in self.folder.glob("*.json") if p.stem.isdigit())

    def _load(self, batch_id: int) -> dict | None:
        before = [i for i in self._ids() if i < batch_id]
        if not before:
            return None
        if self.folder is None:
            return self._memory[before[-1]]
        return json.loads((self.folder / f"{before[-1]}.json").read_text())

    def _save(self, batch_id: int, doc: dict) -> None:
        if self.folder is None:
            self._memory[batch_id] = doc
            for old in sorted(self._memory)[:-KEEP]:
                del self._memory[old]
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.folder / f".{batch_id}.json.tmp"
        tmp.write_text(json.dumps(doc, separators=(",", ":")))
        os.replace(tmp, self.folder / f"{batch_id}.json")
        for old in self._ids()[:-KEEP]:
            (self.folder / f"{old}.json").unlink(missing_ok=True)
