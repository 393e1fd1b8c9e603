"""Silences: "broker 3 is in maintenance for 30 min", an alert id, or any label matcher.

Stored in Redis (one hash, `<prefix>:silences`, id -> JSON), so the running query, every other
consumer and `replmon silence list` see the same ones. A silence holds between `starts_ms` and
`ends_ms` of the wall clock, as Alertmanager's do: it applies to alerts as they are sent, not to
the event time of replayed history. A silenced transition is still written everywhere (files,
the Redis alert stream) with `silenced_by` naming the silences and `notify` false, so it is
recorded and marked, not notified. Expired silences are dropped when read.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import redis

from replmon.sinks.alertmanager import LABELS
from replmon.sinks.alertmanager import alert_labels as _labels
from replmon.sinks.keys import Keys
from replmon.state.alerts import AlertRecord, derived

log = logging.getLogger(__name__)

# what a matcher may name: the Alertmanager sink's labels, and the cause, which Alertmanager
# carries as an annotation (it may change during an episode, and its labels may not)
MATCHABLE = (*LABELS, "cause")


class SilenceError(ValueError):
    """A silence that cannot be stored: no matcher, an unknown label, a bad duration."""


@dataclass(frozen=True)
class Silence:
    silence_id: str
    matchers: dict  # label -> exact value (all must match)
    starts_ms: int
    ends_ms: int
    created_by: str = ""
    comment: str = ""

    def is_active(self, now_ms: int) -> bool:
        return self.starts_ms <= now_ms < self.ends_ms


def alert_labels(alert: Mapping) -> dict[str, str]:
    """The labels of an alert record a matcher is compared with (values as strings)."""
    labels = _labels(alert)
    if alert.get("cause") not in (None, ""):
        labels["cause"] = str(alert["cause"])
    return labels


def matches(silence: Silence, alert: Mapping) -> bool:
    labels = alert_labels(alert)
    return all(labels.get(k) == str(v) for k, v in silence.matchers.items())


def apply_silences(
    alerts: Sequence[AlertRecord], silences: list[Silence], now_ms: int
) -> tuple[list[AlertRecord], int]:
    """The alerts, each one an active silence matches replaced by a new record that names the
    silences (`silenced_by`) and is not notified (`notify` false); the others are the same
    objects. With it, how many notified transitions were held back."""
    active = [s for s in silences if s.is_active(now_ms)]
    if not active:
        return list(alerts), 0
    out: list[AlertRecord] = []
    held = 0
    for alert in alerts:
        ids = [s.silence_id for s in active if matches(s, alert)]
        if not ids:
            out.append(alert)
        elif alert.get("notify"):
            held += 1
            out.append(derived(alert, silenced_by=ids, notify=False))
        else:
            out.append(derived(alert, silenced_by=ids))
    return out, held


def new_silence(
    matchers: Mapping[str, object], duration_ms: int, now_ms: int, created_by: str = "", comment: str = ""
) -> Silence:
    if not matchers:
        raise SilenceError("a silence needs at least one matcher (e.g. --broker 3 or --alert-id ID)")
    unknown = sorted(set(matchers) - set(MATCHABLE))
    if unknown:
        raise SilenceError(f"unknown label(s) {unknown}; a matcher may name {', '.join(MATCHABLE)}")
    if duration_ms <= 0:
        raise SilenceError(f"a silence must last a positive time, got {duration_ms} ms")
    clean = {k: str(v) for k, v in sorted(matchers.items())}
    digest = hashlib.sha1(json.dumps([clean, now_ms, created_by]).encode()).hexdigest()[:12]
    return Silence(digest, clean, now_ms, now_ms + duration_ms, created_by, comment)


class SilenceStore:
    """The silences in Redis (see the module doc)."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self._client = client
        self._key = Keys(prefix).silences()

    def add(self, silence: Silence) -> Silence:
        self._client.hset(self._key, silence.silence_id, json.dumps(asdict(silence)))
        log.info("silence %s added: %s until %d", silence.silence_id, silence.matchers, silence.ends_ms)
        return silence

    def all(self) -> list[Silence]:
        raw = self._client.hgetall(self._key)
        out = []
        for value in raw.values():
            try:
                out.append(Silence(**json.loads(value)))
            except (TypeError, ValueError) as exc:  # a hand-edited entry: skip it, say so
                log.warning("ignoring an unreadable silence in %s: %s", self._key, exc)
        return sorted(out, key=lambda s: (s.ends_ms, s.silence_id))

    def active(self, now_ms: int) -> list[Silence]:
        """The silences in force now; expired ones are removed from Redis."""
        silences = self.all()
        expired = [s.silence_id for s in silences if s.ends_ms <= now_ms]
        if expired:
            self._client.hdel(self._key, *expired)
        return [s for s in silences if s.is_active(now_ms)]

    def expire(self, silence_id: str) -> bool:
        """End a silence now. False if there was none with that id."""
        return bool(self._client.hdel(self._key, silence_id))
