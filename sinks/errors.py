"""Exceptions the sinks raise. A raised sink error fails the Spark micro-batch, which then
replays; every write is idempotent, so the replay is safe."""

from __future__ import annotations


class SinkError(Exception):
    """Base class of every sink failure."""


class SinkUnavailable(SinkError):
    """The store could not be reached within the bounded retries; the batch must be replayed."""


class SinkAuthError(SinkError):
    """The store rejected the credentials or the user lacks a permission; retrying cannot help."""


class SinkWriteError(SinkError):
    """The store refused a write (wrong key type, out of memory, a malformed record)."""
