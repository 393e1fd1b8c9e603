"""The cluster step on the driver, its state kept with the query's checkpoint.

foreachBatch is at-least-once: a batch may run again after a crash, with the same id. The step's
state after batch N is written to `<checkpoint>/cluster-step/<N>.json` (atomically) before any
output of batch N, and batch N always starts from the newest state of a batch *before* N, so a
replayed batch decides exactly what it decided the first time, and a restart continues where the
committed batches left off. The runner keeps the step of the batch it ran last: the next batch
starts from it without reading the state back (at 20,000 partitions, reading it back was a
quarter of the driver's work per batch). A checkpoint on a remote file system (hdfs://, s3a://, abfs://)
is written through Spark's own Hadoop file system client (the JVM's, with the session's Hadoop
configuration: the same credentials Spark writes the checkpoint with); with no session at hand
(tests of the bridge alone) such a state is kept in memory only.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from replmon.state.alerts import AlertRecord
from replmon.state.cluster import ClusterStep, cluster_config
from replmon.streaming.checkpoint import local_path

log = logging.getLogger(__name__)
KEEP = 8  # states kept: a replay goes back one batch, a few more cost nothing


class LocalFolder:
    """The step's state files in a folder of this machine."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def names(self) -> list[str]:
        return [p.name for p in self.folder.iterdir()] if self.folder.is_dir() else []

    def read(self, name: str) -> bytes:
        return (self.folder / name).read_bytes()

    def write(self, name: str, data: bytes) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.folder / f".{name}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, self.folder / name)

    def delete(self, name: str) -> None:
        (self.folder / name).unlink(missing_ok=True)


class HadoopFolder:
    """The step's state files in a folder of any file system the Spark session's Hadoop
    configuration reaches (hdfs://, s3a://, abfs://, file://), through the JVM's client."""

    def __init__(self, spark, uri: str) -> None:
        jvm = spark.sparkContext._jvm
        self._jvm = jvm
        self.path = jvm.org.apache.hadoop.fs.Path(uri)
        self.fs = self.path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())

    def _child(self, name: str):
        return self._jvm.org.apache.hadoop.fs.Path(self.path, name)

    def names(self) -> list[str]:
        if not self.fs.exists(self.path):
            return []
        return [status.getPath().getName() for status in self.fs.listStatus(self.path)]

    def read(self, name: str) -> bytes:
        stream = self.fs.open(self._child(name))
        try:
            return bytes(self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
        finally:
            stream.close()

    def write(self, name: str, data: bytes) -> None:
        # Written whole under a temporary name, then renamed: a reader never sees half a state
        # (an object store's PUT is whole at close; HDFS's rename is atomic). A replayed batch
        # writes its state again: the same document.
        tmp, final = self._child(f".{name}.tmp"), self._child(name)
        out = self.fs.create(tmp, True)
        try:
            out.write(bytearray(data))
        finally:
            out.close()
        if self.fs.exists(final):
            self.fs.delete(final, False)
        if not self.fs.rename(tmp, final):
            raise OSError(f"could not rename {tmp.toString()} to {final.toString()}")

    def delete(self, name: str) -> None:
        self.fs.delete(self._child(name), False)


def state_folder(checkpoint_dir: str | None, spark=None) -> LocalFolder | HadoopFolder | None:
    """Where the step's state goes: `<checkpoint>/cluster-step`, None when there is no
    checkpoint (or a remote one and no Spark session to reach it with)."""
    if not checkpoint_dir:
        return None
    local = local_path(checkpoint_dir)
    if local is not None:
        return LocalFolder(local / "cluster-step")
    if spark is None:
        log.warning(
            "checkpoint %s is remote and no Spark session reaches it: the cluster step's state is kept "
            "in memory only",
            checkpoint_dir,
        )
        return None
    return HadoopFolder(spark, checkpoint_dir.rstrip("/") + "/cluster-step")


class ClusterStepRunner:
    def __init__(self, cfg, checkpoint_dir: str | None, spark=None) -> None:
        self.cfg = cluster_config(cfg)
        self.folder = state_folder(checkpoint_dir, spark)
        self._memory: dict[int, dict] = {}
        self.last_batch = -1
        self._step: ClusterStep | None = None
        self._verdicts: list[dict] | None = None
        self._live: int | None = None  # the batch whose state self._step is, unchanged since

    def run(
        self,
        batch_id: int,
        alerts: list[AlertRecord],
        activity: list[dict],
        flush: bool = False,
        statuses: tuple[list[dict], list[dict]] = ([], []),
    ) -> list[AlertRecord]:
        """The alert records of batch `batch_id`, decided (state/cluster.py). The restart gate's
        verdicts after it are `self.verdicts`."""
        before = [i for i in self._ids() if i < batch_id]
        if self._step is not None and before and self._live == before[-1]:
            step = self._step  # the state this batch starts from, as the last batch left it
        else:
            step = ClusterStep.from_doc(self.cfg, self._load(before))
        self._live = None  # (a step that fails part way leaves a state no batch starts from)
        out = step.step(alerts, activity, flush=flush, statuses=statuses)
        self._step, self._verdicts = step, None
        self._save(batch_id, step.to_doc())
        self._live = batch_id
        self.last_batch = max(self.last_batch, batch_id)
        return out

    @property
    def verdicts(self) -> list[dict]:
        """The restart gate's verdicts after the last batch run, computed when first asked for
        (a scan of every partition per broker: only a run with a Redis sink asks)."""
        if self._verdicts is None:
            self._verdicts = self._step.restart_verdicts() if self._step is not None else []
        return self._verdicts

    def next_batch(self) -> int:
        """The id after every batch this step has a state of (a restarted run that processed
        no new batch still flushes what the last one held)."""
        return max([self.last_batch, *self._ids()]) + 1

    def _ids(self) -> list[int]:
        if self.folder is None:
            return sorted(self._memory)
        stems = (n[: -len(".json")] for n in self.folder.names() if n.endswith(".json"))
        return sorted(int(stem) for stem in stems if stem.isdigit())

    def _load(self, before: list[int]) -> dict | None:
        """The newest state of the batches `before` (ids in order), None if there is none."""
        if not before:
            return None
        if self.folder is None:
            return self._memory[before[-1]]
        return json.loads(self.folder.read(f"{before[-1]}.json"))

    def _save(self, batch_id: int, doc: dict) -> None:
        if self.folder is None:
            self._memory[batch_id] = doc
            for old in sorted(self._memory)[:-KEEP]:
                del self._memory[old]
            return
        self.folder.write(f"{batch_id}.json", json.dumps(doc, separators=(",", ":")).encode())
        for old in self._ids()[:-KEEP]:
            self.folder.delete(f"{old}.json")
