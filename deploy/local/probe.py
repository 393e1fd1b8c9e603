"""Readiness probe for the local Kafka cluster, used by services.sh.

    python probe.py --bootstrap 127.0.0.1:19092 --brokers 3 --timeout 90 \
        --pids 123,456,789

Waits until the cluster answers a metadata request that lists at least
--brokers live brokers. Exit codes: 0 ready, 1 timed out, 2 a watched pid
died (a broker crashed while starting), 3 kafka-python is not importable,
4 the probe itself is broken.
The last error seen is printed on failure so services.sh can show it.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import time


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (started by us, not yet reaped) counts as dead.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--brokers", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=90.0)
    ap.add_argument("--pids", default="")
    args = ap.parse_args()

    logging.disable(logging.CRITICAL)  # kafka-python logs every refused connect
    try:
        from kafka.admin import KafkaAdminClient
        from kafka.errors import KafkaConfigurationError, KafkaError
    except ImportError as e:  # pragma: no cover - depends on the interpreter
        print(f"kafka-python is not importable by {sys.executable}: {e}")
        return 3

    # Keys differ between kafka-python 2.x and 3.x; pass only known ones.
    wanted = {
        "bootstrap_servers": args.bootstrap,
        "client_id": "replmon-services-probe",
        "request_timeout_ms": 5000,
        "bootstrap_timeout_ms": 2000,  # 3.x
        "api_version_auto_timeout_ms": 2000,  # 2.x
        "reconnect_backoff_max_ms": 500,
    }
    config = {k: v for k, v in wanted.items() if k in KafkaAdminClient.DEFAULT_CONFIG}

    pids = [int(p) for p in args.pids.split(",") if p]
    deadline = time.monotonic() + args.timeout
    last_error = "no attempt made"
    while True:
        dead = [p for p in pids if not _alive(p)]
        if dead:
            print(f"kafka process(es) {dead} exited while starting")
            return 2
        client = None
        try:
            client = KafkaAdminClient(**config)
            try:
                cluster = client.describe_cluster()
            except (
                KeyError
            ) as e:  # Kafka 2.8-3.6 answer DescribeCluster v0, which kafka-python 3.0.12 misreads
                if e.args != ("endpoint_type",):
                    raise
                cluster = client._manager.run(client._get_cluster_metadata, [])  # its own fallback
            brokers = [b for b in cluster.get("brokers", []) if not b.get("is_fenced", False)]
            client.list_topics()
            if len(brokers) >= args.brokers:
                # 'broker_id' in kafka-python 3.x, 'node_id' in 2.x
                ids = sorted(b.get("broker_id", b.get("node_id")) for b in brokers)
                print(f"ready: brokers {ids}")
                return 0
            last_error = f"{len(brokers)} of {args.brokers} brokers registered"
        except KafkaConfigurationError as e:
            print(f"probe error: {type(e).__name__}: {e}")
            return 4
        except (KafkaError, OSError) as e:  # refused, not yet a controller, ...
            last_error = f"{type(e).__name__}: {e}"
        finally:
            if client is not None:
                with contextlib.suppress(Exception):  # closing a half-open client is best effort
                    client.close()
        if time.monotonic() >= deadline:
            print(f"not ready after {args.timeout:.0f}s; last error: {last_error}")
            return 1
        time.sleep(0.5)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:  # noqa: BLE001 - a bug in the probe, not 'not ready'
        import traceback

        traceback.print_exc()
        print("probe error: see the traceback above")
        sys.exit(4)
