"""bench/broker_cost.py's reading of /proc, of rolling files and of request-log lines, and its
medians and ratios (no brokers: the bench itself runs them)."""

from __future__ import annotations

import pytest

from bench.broker_cost import cpu_ticks, grown_bytes, kinds, line_kind, summarize

# /proc/<pid>/stat of a JVM whose command name holds a space and a parenthesis: utime 1500,
# stime 250 (fields 14 and 15).
STAT = "4242 (java (x) y) S 1 4242 4242 0 -1 4194560 9 0 0 0 1500 250 0 0 20 0 61 0 100 2 3\n"


def test_cpu_ticks_counts_from_the_closing_parenthesis():
    assert cpu_ticks(STAT) == 1750


@pytest.mark.parametrize(
    "first, samples, want, why",
    [
        ({1: 100}, [{1: 150}, {1: 400}], 300, "one file grows"),
        (
            {1: 100},
            [{1: 900, 2: 50}, {1: 900, 2: 300}],
            1100,
            "rolled: renamed (same inode), a new file from 0",
        ),
        (
            {1: 100, 3: 500},
            [{1: 200, 3: 500}, {1: 200, 2: 40}],
            140,
            "the oldest file deleted, counted to its last size",
        ),
        ({}, [{}], 0, "no request log (off)"),
    ],
)
def test_grown_bytes(first, samples, want, why):
    assert grown_bytes(first, samples) == want, why


def _line(api: str, key: int, client: str) -> str:
    return (
        f'[1] Completed request:{{"isForwarded":false,"requestHeader":{{"requestApiKey":{key},'
        f'"requestApiVersion":18,"correlationId":5,"clientId":"{client}","requestApiKeyName":"{api}"}}}}'
    )


@pytest.mark.parametrize(
    "line, want",
    [
        (_line("FETCH", 1, "broker-2-fetcher-0"), "follower FETCH"),
        (_line("FETCH", 1, "raft-client-3"), "raft FETCH"),
        (_line("FETCH", 1, "consumer-g-1"), "consumer FETCH"),
        (_line("PRODUCE", 0, "producer-1"), "PRODUCE"),
        ("[1] other text", "?"),
    ],
)
def test_line_kind(line, want):
    assert line_kind(line) == want


def test_kinds_counts_lines_and_bytes_with_their_newline():
    a, b = _line("PRODUCE", 0, "p") + "\n", _line("FETCH", 1, "broker-1-fetcher-0")
    got = kinds([a, a, b])
    assert got == {
        "PRODUCE": {"lines": 2, "bytes": 2 * len(a)},
        "follower FETCH": {"lines": 1, "bytes": len(b) + 1},
    }


def _run(config: str, partitions: int, rps: float, cpu_per_1k: float, log_bps: float) -> dict:
    figures = dict.fromkeys(
        (
            "mb_per_s",
            "broker_cpu_s",
            "broker_cpu_pct",
            "broker_cpu_s_per_mb",
            "producer_cpu_pct",
            "request_log_bytes_per_record",
        ),
        1.0,
    )
    return {
        "config": config,
        "partitions": partitions,
        "records_per_s": rps,
        "broker_cpu_s_per_1k_records": cpu_per_1k,
        "request_log_bytes_per_s": log_bps,
        "wall_s": 10.0,
        "kinds": {"PRODUCE": {"lines": 20, "bytes": 2000}},
        **figures,
    }


def test_summarize_gives_medians_spreads_and_ratios_to_off():
    runs = [
        _run("off", 6, 1000, 0.10, 0),
        _run("off", 6, 1200, 0.12, 0),
        _run("off", 6, 800, 0.30, 0),
        _run("on", 6, 600, 0.20, 5000),
        _run("on", 6, 900, 0.18, 7000),
        _run("on", 6, 700, 0.24, 6000),
        _run("on", 600, 100, 1.0, 9000),  # no `off` at 600 partitions: no ratio
    ]
    s = summarize(runs)
    on = s["6"]["on"]
    assert on["records_per_s"] == {"median": 700, "min": 600, "max": 900, "n": 3}
    assert on["vs_off"]["records_per_s"] == pytest.approx(700 / 1000)
    assert on["vs_off"]["broker_cpu_s_per_1k_records"] == pytest.approx(0.20 / 0.12)
    assert on["kinds"]["PRODUCE"] == {"lines_per_s": 2.0, "bytes_per_line": 100.0}
    assert "vs_off" not in s["6"]["off"] and "vs_off" not in s["600"]["on"]
    assert list(s) == ["6", "600"]
