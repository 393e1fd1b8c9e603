"""`replmon`'s one grammar (docs/cli.md): its tables match what `--help` shows, both ways; every
subcommand has --config and --verbose; old spellings warn and still work; usage and config
errors exit 2 with `replmon <command>: `. In-process, through the parser: no subprocess."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from replmon.streaming.cli import build_parser, main
from replmon.streaming.cli_flags import old_spellings

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def commands() -> dict[str, argparse.ArgumentParser]:
    """Every command the parser knows, `replmon run` to `replmon dashboards build`."""
    found = {}

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found[f"{path} {name}"] = sub
                    walk(sub, f"{path} {name}")

    walk(build_parser(), "replmon")
    return found


def shown_by_help(command: str, capsys) -> set[str]:
    """The arguments and flags `replmon ... --help` lists, as written there ('--output DIR')."""
    assert main([*command.split()[1:], "--help"]) == 0
    text = capsys.readouterr().out
    shown = set()
    for line in text.splitlines():
        m = re.match(r"^  (\S.*?)(?:\s{2,}|$)", line)  # an argument's own line, not help text
        if m:
            shown.update(m.group(1).split(", "))
    return shown - {"-h", "--help"}


def doc_table(heading: str) -> list[list[str]]:
    """The rows of the table under `## heading` in docs/cli.md, as lists of cells."""
    section = DOC.read_text().split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows]


def documented(heading: str) -> dict[str, str]:
    return {cells[0].strip("`"): cells[1] for cells in doc_table(heading)}


def test_the_flags_table_is_what_help_shows_both_ways(capsys):
    table = documented("Flags")
    assert sorted(table) == sorted(commands()), "one row per command"
    for command in commands():
        listed, shown = set(re.findall(r"`([^`]+)`", table[command])), shown_by_help(command, capsys)
        assert listed == shown, (
            f"{command}: only in docs/cli.md {listed - shown}, only in --help {shown - listed}"
        )


def test_every_command_has_config_and_verbose():
    for command, parser in commands().items():
        flags = set(parser._option_string_actions)
        assert {"--config", "--verbose"} <= flags, command


def test_config_and_verbose_are_taken_before_or_after_an_action():
    parser = build_parser()
    before = parser.parse_args(["silence", "--verbose", "--config", "a.toml", "--redis-url", "r", "list"])
    after = parser.parse_args(["silence", "list", "--verbose", "--config", "a.toml", "--redis-url", "r"])
    neither = parser.parse_args(["silence", "list"])
    assert (before.verbose, before.config, before.redis_url) == (True, "a.toml", "r")
    assert (after.verbose, after.config, after.redis_url) == (True, "a.toml", "r")
    assert (neither.verbose, neither.config, neither.redis_url) == (False, None, None)


def test_the_exit_codes_table_has_every_subcommand():
    top_level = {" ".join(c.split()[:2]) for c in commands()}
    assert set(documented("Exit codes")) == top_level


def test_the_old_spellings_table_is_what_the_parser_accepts():
    accepted = {
        (command, old, new) for command, p in commands().items() for old, new in old_spellings(p).items()
    }
    listed = {(c.strip("`"), old.strip("`"), new.strip("`")) for c, old, new in doc_table("Old spellings")}
    assert listed == accepted


@pytest.mark.parametrize(
    ("argv", "dest", "value"),
    [
        (["run", "--kafka-bootstrap", "k:9092"], "metrics_bootstrap", "k:9092"),
        (["replay", "--kafka-bootstrap", "k:9092"], "metrics_bootstrap", "k:9092"),
        (["simulate", "--bootstrap", "k:9092"], "metrics_bootstrap", "k:9092"),
        (["simulate", "--topic", "t"], "metrics_topic", "t"),
        (["simulate", "--out", "sim"], "output", Path("sim")),  # the new flag's type applies
        (["dashboards", "build", "--prefix", "p"], "redis_prefix", "p"),
        (["dashboards", "build", "--out", "o"], "output", Path("o")),
        (["dashboards", "publish", "--dir", "d"], "input", Path("d")),
    ],
)
def test_an_old_spelling_warns_in_one_line_and_does_what_the_new_one_does(argv, dest, value, capsys):
    args = build_parser().parse_args(argv)
    assert getattr(args, dest) == value
    (line,) = capsys.readouterr().err.splitlines()
    command = "replmon " + " ".join(a for a in argv if not a.startswith("-") and a != argv[-1])
    assert line.startswith(f"{command}: {argv[-2]} is deprecated, use --")


def test_a_usage_error_exits_2_naming_the_command(capsys):
    assert main(["collect", "--cluster", "c"]) == 2
    assert (
        "replmon collect: error: the following arguments are required: --bootstrap" in capsys.readouterr().err
    )
    assert main(["simulate", "--scenario", "nope", "--output", "x"]) == 2
    assert capsys.readouterr().err.startswith("replmon simulate: --scenario: unknown 'nope'")


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--input", "in", "--once"],
        ["replay", "--input", "in"],
        ["collect", "--cluster", "c", "--bootstrap", "b:1", "--request-log", "1=x"],
        ["simulate", "--to", "kafka"],
        ["silence", "list"],
        ["dashboards", "build", "--print"],
    ],
)
def test_an_unknown_variable_exits_2_naming_the_command(argv, monkeypatch, capsys):
    # Every subcommand that reads the settings refuses a misspelt REPLMON_* variable, before it
    # touches Spark, Kafka or Redis.
    monkeypatch.setenv("REPLMON_STREM__LATENESS_MS", "5000")
    assert main(argv) == 2
    err = capsys.readouterr().err
    command = "replmon " + " ".join(a for a in argv[:2] if not a.startswith("-"))
    assert err.startswith(f"{command}: unknown REPLMON_* environment variables"), err
    assert "did you mean REPLMON_STREAM__LATENESS_MS" in err


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        ("replmon conformance", ["conformance", "x.jsonl"]),
        ("replmon services", ["services", "status"]),
        ("replmon dashboards publish", ["dashboards", "publish"]),
        ("replmon simulate", ["simulate", "--output", "sim"]),
    ],
)
def test_a_config_file_is_checked_even_where_nothing_in_it_applies(command, argv, tmp_path, capsys):
    bad = tmp_path / "replmon.toml"
    bad.write_text("[rules]\nreplica_lag_time_max = 1\n")  # misspelt
    assert main([*argv, "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{command}: invalid settings"), err
    assert "rules.replica_lag_time_max" in err
    assert main([*argv, "--config", str(tmp_path / "missing.toml")]) == 2
    assert "settings file not found" in capsys.readouterr().err


def test_collect_publishes_where_run_reads_unless_told_otherwise(tmp_path, monkeypatch):
    from replmon.streaming.collect.cli import metrics_destination
    from replmon.streaming.settings import load_settings

    for name in ("REPLMON_CONFIG", "REPLMON_KAFKA__BOOTSTRAP_SERVERS", "REPLMON_KAFKA__SUBSCRIBE"):
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "replmon.toml"
    config.write_text('[kafka]\nbootstrap_servers = "metrics:9092"\nsubscribe = "fetches"\n')
    parser = build_parser()
    base = ["collect", "--cluster", "c", "--bootstrap", "monitored:9092", "--request-log", "1=x"]
    from_settings = parser.parse_args(base)
    assert metrics_destination(from_settings, load_settings(str(config))) == ("metrics:9092", "fetches")
    flags = parser.parse_args([*base, "--metrics-bootstrap", "m:1", "--metrics-topic", "t"])
    assert metrics_destination(flags, load_settings(str(config))) == ("m:1", "t")
    # no settings: the monitored cluster itself, the default topic (as before the settings applied)
    assert metrics_destination(from_settings, load_settings(None)) == (
        "monitored:9092",
        "replmon.fetch-metrics",
    )
