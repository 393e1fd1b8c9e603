"""One line of Kafka's request log (`kafka.request.logger` at DEBUG) as a record.

A line is `[<date>] Completed request:{json}` with more text after the JSON on some versions;
the date is epoch milliseconds with replmon's log4j2 fragment (deploy/kafka/), or Kafka's stock
`yyyy-MM-dd HH:mm:ss,SSS` in a given time zone. Times inside the JSON are durations in ms:
the line is logged when the response has been sent, so the request arrived `totalTimeMs`
before the log time and was taken off the request queue `requestQueueTimeMs` after arrival.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo

MARKER = "Completed request:"
_FOLLOWER_CLIENT = re.compile(r"^broker-(\d+)-fetcher-(\d+)$")
_EPOCH_MS = re.compile(r"^\[(\d+)\]")
_STOCK = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")


# Request versions whose JSON this reader was checked against, per API it reads: FETCH and
# PRODUCE against request logs recorded from real brokers of each Kafka version
# (tests/collect/data/, docs/real-cluster.md's support table), BROKER_HEARTBEAT against 4.3.1's.
# A line of another version is still read the same way, and counted and shown once as a
# warning (BrokerLog), so that a new Kafka release is noticed rather than trusted.
TESTED_VERSIONS: dict[str, frozenset[int]] = {
    "FETCH": frozenset({12, 13, 15, 16, 17, 18}),
    "PRODUCE": frozenset({9, 10, 11, 12, 13}),
    "BROKER_HEARTBEAT": frozenset({0, 1, 2}),
}


class BadLine(ValueError):
    """A line that names itself a completed request but cannot be read; the reason says why."""


@dataclass(frozen=True)
class Request:
    log_ms: int  # when the broker logged it (response sent)
    api: str  # requestApiKeyName: FETCH, PRODUCE, ...
    body: dict  # the whole JSON object

    @property
    def version(self) -> int | None:
        """requestApiVersion, None when the header has none."""
        v = (self.body.get("requestHeader") or {}).get("requestApiVersion")
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    def untested_version(self) -> str | None:
        """'FETCH v19' when this is a request of an API replmon reads, at a version it was not
        checked against (TESTED_VERSIONS), else None."""
        tested = TESTED_VERSIONS.get(self.api)
        if tested is None or self.version in tested:
            return None
        return f"{self.api} v{self.version if self.version is not None else '?'}"

    @property
    def arrival_ms(self) -> float:
        return self.log_ms - float(self.body.get("totalTimeMs", 0.0))

    @property
    def read_ms(self) -> int:
        """When the broker started handling it: arrival plus time on the request queue
        (Kafka's fetchTimeMs is taken at the start of the read, docs/kafka-rules.md §1.2)."""
        return round(self.arrival_ms + float(self.body.get("requestQueueTimeMs", 0.0)))

    @property
    def local_done_ms(self) -> int:
        """End of the local (in-handler) work: for a PRODUCE, after the leader's append."""
        return round(
            self.arrival_ms
            + float(self.body.get("requestQueueTimeMs", 0.0))
            + float(self.body.get("localTimeMs", 0.0))
        )

    @property
    def parked_ms(self) -> float:
        """Time the request spent in purgatory (remoteTimeMs)."""
        return float(self.body.get("remoteTimeMs", 0.0))


def log_time_ms(line: str, tz: tzinfo = UTC) -> int:
    m = _EPOCH_MS.match(line)
    if m:
        return int(m.group(1))
    m = _STOCK.match(line)
    if m:
        dt = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=tz)
        return round(dt.timestamp() * 1000)
    raise BadLine("no [epoch-ms] or [yyyy-MM-dd HH:mm:ss,SSS] date at the start of the line")


def parse_line(line: str, tz: tzinfo = UTC) -> Request | None:
    """The request on this line, None for lines that are not `Completed request:` lines
    (other loggers, continuation lines). Raises BadLine for a damaged request line."""
    at = line.find(MARKER)
    if at < 0:
        return None
    log_ms = log_time_ms(line, tz)
    try:
        body, _ = json.JSONDecoder().raw_decode(line, at + len(MARKER))
    except ValueError as e:
        raise BadLine(f"the request JSON does not parse: {e}") from None
    if not isinstance(body, dict):
        raise BadLine("the request JSON is not an object")
    header = body.get("requestHeader") or {}
    return Request(log_ms=log_ms, api=str(header.get("requestApiKeyName", "")), body=body)


def follower_of(req: Request) -> tuple[int, str] | None:
    """(follower broker id, fetcher client id) when this is a replica fetch from a broker's
    replica fetcher thread (FETCH v15+: replicaState.replicaId >= 0; older: replicaId),
    else None (consumers, KRaft controller fetches `raft-client-N`)."""
    if req.api != "FETCH":
        return None
    client = str((req.body.get("requestHeader") or {}).get("clientId", ""))
    if not _FOLLOWER_CLIENT.match(client):
        return None
    request = req.body.get("request") or {}
    replica = (request.get("replicaState") or {}).get("replicaId", request.get("replicaId", -1))
    if not isinstance(replica, int) or replica < 0:
        return None
    return replica, client
