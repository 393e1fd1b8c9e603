"""Follow a log file that log4j2 rolls by renaming (kafka-request.log -> kafka-request.log.1).

The position is (inode, byte offset of the next unread line), so a restart finds its place
in the current file or in the file it was renamed to. Only whole lines are returned, of any
length up to `max_line_bytes` (a follower FETCH line of a session of tens of thousands of
partitions runs to tens of MB); a longer one is skipped, counted and shown by its start.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from pathlib import Path
from typing import Any, BinaryIO

log = logging.getLogger(__name__)
MAX_READ = 4 << 20  # bytes read per call: lines this size or smaller come in batches
MAX_LINE_BYTES = 256 << 20  # `replmon collect --max-line-bytes`'s default
TOO_LONG = "skipped: line longer than --max-line-bytes"


class FileTail:
    def __init__(self, path: str | Path, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self.path = Path(path)
        self.max_line_bytes = max_line_bytes
        self.counts: Counter = Counter()
        self._f: BinaryIO | None = None
        self.inode: int | None = None
        self.offset = 0
        self.rotations = 0
        self.behind = False  # the last read stopped at MAX_READ, not at the end of the file

    def position(self) -> dict:
        return {"inode": self.inode, "offset": self.offset}

    def open_at(self, position: dict[str, Any] | None, at_end: bool = False) -> None:
        """Start at a checkpointed position, else at the start (or end) of the current file."""
        if position and position.get("inode") is not None:
            for candidate in [self.path, *sorted(self.path.parent.glob(self.path.name + ".*"))]:
                try:
                    if os.stat(candidate).st_ino == position["inode"]:
                        self._open(candidate, position["offset"])
                        return
                except FileNotFoundError:
                    continue
            log.warning(
                "%s: the checkpointed file (inode %s) is gone; starting at the current "
                "file's start: lines written in between are lost",
                self.path,
                position["inode"],
            )
        if self.path.exists():
            self._open(self.path, self.path.stat().st_size if at_end else 0)

    def _open(self, path: Path, offset: int) -> None:
        if self._f:
            self._f.close()
        f = self._f = open(path, "rb")  # noqa: SIM115 - held open between polls; _open and close() close it
        stat = os.fstat(f.fileno())
        self.inode = stat.st_ino
        self.offset = offset if offset <= stat.st_size else 0
        f.seek(self.offset)

    def read_lines(self) -> list[str]:
        """Whole lines written since the last call, across a rotation."""
        if self._f is None:
            if not self.path.exists():
                return []
            self._open(self.path, 0)
        lines = self._read_whole_lines()
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return lines
        if st.st_ino != self.inode:  # rolled: the old file is complete, go to the new
            while more := self._read_whole_lines(final=True):
                lines += more
            self.rotations += 1
            self._open(self.path, 0)
            lines += self._read_whole_lines()
        elif st.st_size < self.offset:  # truncated in place (copytruncate)
            log.warning("%s was truncated; reading it from the start", self.path)
            self._open(self.path, 0)
            lines += self._read_whole_lines()
        return lines

    def _read_whole_lines(self, final: bool = False) -> list[str]:
        if self._f is None:  # no file yet
            return []
        self._f.seek(self.offset)
        data = self._f.read(MAX_READ)
        self.behind = len(data) == MAX_READ
        if not data:
            return []
        end = data.rfind(b"\n")
        if end < 0:
            return self._long_line(data, final)
        chunk = data[: end + 1]
        self.offset += len(chunk)
        lines = chunk.decode("utf-8", errors="replace").splitlines()
        if len(chunk) > self.max_line_bytes:
            lines = [x for x in lines if len(x) <= self.max_line_bytes or self._too_long(len(x) + 1, x)]
        return lines

    def _long_line(self, data: bytes, final: bool) -> list[str]:
        """The line at the offset, longer than one read: read on to its end. One still being
        written waits (the offset stays); one over max_line_bytes is skipped and counted."""
        assert self._f is not None
        kept, length = [data], len(data)
        while True:
            more = self._f.read(MAX_READ)
            if not more:
                if not final:
                    return []
                end = -1  # a rolled file's last line, without its newline
                break
            end = more.find(b"\n")
            piece = more if end < 0 else more[: end + 1]
            length += len(piece)
            if length <= self.max_line_bytes + 1:
                kept.append(piece)
            if end >= 0:
                break
        self.offset += length
        if length > self.max_line_bytes + 1:  # + 1: the newline is not the line's
            self._too_long(length, kept[0][:300].decode("utf-8", errors="replace"))
            return []
        return b"".join(kept).decode("utf-8", errors="replace").splitlines()

    def _too_long(self, length: int, start: str) -> bool:
        """Count and show a skipped line; False, for the filter above."""
        self.counts[TOO_LONG] += 1
        log.warning(
            "%s: a line of %d bytes is longer than --max-line-bytes %d, skipped (%d so far); "
            "it starts: %.300s",
            self.path,
            length,
            self.max_line_bytes,
            self.counts[TOO_LONG],
            start,
        )
        return False

    def close(self) -> None:
        if self._f:
            self._f.close()
            self._f = None
