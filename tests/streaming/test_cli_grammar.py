"""`replmon`'s one grammar (docs/cli.md): its tables match what `--help` shows, both ways; every
subcommand has --config and --verbose; old spellings warn and still work; usage and config
errors exit 2 with `replmon <command>: `. In-process, through the parser: no subprocess."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest

from replmon.streaming.cli import build_parser, main
from replmon.streaming.cli_flags import old_spellings, parse_duration_ms

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
    assert main(["simulate", "--scenario", "scale", "--scale-duration", "1500ms", "--output", "x"]) == 2
    assert capsys.readouterr().err.startswith("replmon simulate: --scale-duration takes whole seconds")


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


# --- durations: one syntax, one parser ---------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "ms", "why"),
    [
        ("500ms", 500, "milliseconds"),
        ("30s", 30_000, "seconds"),
        ("5m", 300_000, "minutes: m is not ms"),
        ("2h", 7_200_000, "hours"),
        ("1d", 86_400_000, "days"),
        ("1h30m", 5_400_000, "parts add up"),
        ("1m5ms", 60_005, "ms after m is milliseconds, not minutes then s"),
        ("1.5s", 1_500, "a decimal number"),
        (" 2s ", 2_000, "surrounding spaces are ignored"),
        ("0s", 0, "zero is a duration; a flag that needs more says so"),
    ],
)
def test_a_duration_is_a_number_and_a_unit(text, ms, why):
    assert parse_duration_ms(text) == ms, why


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("1500", "a bare number: its unit would be a guess"),
        ("", "nothing"),
        ("5 s", "a space inside"),
        ("5sec", "not a unit"),
        ("-5s", "negative"),
        ("s", "a unit without a number"),
        ("5S", "units are lower case, as Kafka's own"),
    ],
)
def test_what_is_not_a_duration_is_refused(text, why):
    with pytest.raises(ValueError, match="is not a duration like 500ms, 30s, 5m, 2h"):
        parse_duration_ms(text)
    assert why


REQUIRED = {
    "replmon collect": ["--cluster", "c", "--bootstrap", "b:1"],
    "replmon silence add": ["--for", "1h"],
    "replmon safe-to-stop": ["--broker", "1"],
}


def test_no_flag_names_a_unit_and_every_duration_flag_refuses_a_bare_number(capsys):
    durations = 0
    for command, parser in commands().items():
        for action in parser._actions:
            for flag in action.option_strings:
                if action.help != argparse.SUPPRESS:
                    assert not re.search(r"-(ms|s|sec|secs|seconds)$", flag), f"{command} {flag}"
            shown = action.help != argparse.SUPPRESS  # not an old spelling
            if shown and action.metavar == "DURATION":
                required = REQUIRED.get(command, [])
                with pytest.raises(SystemExit):
                    parser.parse_args([*required, action.option_strings[0], "1500"])
                assert "is not a duration" in capsys.readouterr().err, f"{command} {action.option_strings}"
                args = parser.parse_args([*required, action.option_strings[0], "1500ms"])
                assert getattr(args, action.dest) in (1500, "1500ms")  # replay parses it later
                durations += 1
    assert durations == 14, (
        "every DURATION flag: collect 6, replay 4, simulate 1, silence add 1, safe-to-stop 2"
    )


@pytest.mark.parametrize(
    ("argv", "dest", "value", "old", "new"),
    [
        (["collect", "--hold-ms", "1500"], "hold", 1500, "--hold-ms", "--hold"),
        (
            ["collect", "--heartbeat-ms", "250"],
            "heartbeat_interval",
            250,
            "--heartbeat-ms",
            "--heartbeat-interval",
        ),
        (
            ["collect", "--metadata-ms", "2000"],
            "metadata_interval",
            2000,
            "--metadata-ms",
            "--metadata-interval",
        ),
        (
            ["collect", "--publish-timeout-s", "8"],
            "publish_timeout",
            8000,
            "--publish-timeout-s",
            "--publish-timeout",
        ),
        (
            ["collect", "--publish-timeout-s", "0.5"],
            "publish_timeout",
            500,
            "--publish-timeout-s",
            "--publish-timeout",
        ),
        (
            ["collect", "--compact-resolution-ms", "2500"],
            "compact_resolution",
            2500,
            "--compact-resolution-ms",
            "--compact-resolution",
        ),
        (
            ["simulate", "--scale-seconds", "60"],
            "scale_duration",
            60_000,
            "--scale-seconds",
            "--scale-duration",
        ),
        (["simulate", "--start-ms", "1767225600000"], "start", 1767225600000, "--start-ms", "--start"),
        (["run", "--quiet"], "no_timeline", True, "--quiet", "--no-timeline"),
    ],
)
def test_an_old_flag_with_a_unit_gives_the_new_ones_value(argv, dest, value, old, new, capsys):
    args = build_parser().parse_args([*argv, *REQUIRED.get(f"replmon {argv[0]}", [])])
    assert getattr(args, dest) == value
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"replmon {argv[0]}: {old} is deprecated, use {new} ")


def test_the_new_duration_flags_take_durations():
    args = build_parser().parse_args(
        [
            "collect",
            *REQUIRED["replmon collect"],
            "--hold",
            "2s",
            "--publish-timeout",
            "1m",
            "--compact-resolution",
            "2500ms",
        ]
    )
    assert (args.hold, args.publish_timeout, args.compact_resolution) == (2000, 60_000, 2500)
    sim = build_parser().parse_args(["simulate", "--start", "2026-01-01T00:00:10Z", "--scale-duration", "2m"])
    assert (sim.start, sim.scale_duration) == (1767225610000, 120_000)


# --- one meaning per flag ------------------------------------------------------------------------
def test_create_topic_is_a_switch_everywhere_and_its_old_count_still_works(capsys):
    parser = build_parser()
    base = ["collect", "--cluster", "c", "--bootstrap", "b:1"]
    for argv in (["simulate", "--create-topic"], [*base, "--create-topic"]):
        args = parser.parse_args(argv)
        assert args.create_topic is True
    assert capsys.readouterr().err == ""
    given = parser.parse_args([*base, "--create-topic", "--partitions", "6"])
    assert (given.create_topic, given.partitions) == (True, 6)
    old = parser.parse_args([*base, "--create-topic", "6"])
    assert (old.create_topic, old.partitions) == (True, 6)
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(
        "replmon collect: --create-topic 6 is deprecated, use --create-topic --partitions 6"
    )
    assert parser.parse_args(base).create_topic is False


def test_cluster_is_the_cluster_the_command_is_about_everywhere():
    helps = {
        command: parser._option_string_actions["--cluster"].help
        for command, parser in commands().items()
        if "--cluster" in parser._option_string_actions
    }
    assert set(helps) == {
        "replmon replay",
        "replmon simulate",
        "replmon collect",
        "replmon silence add",
        "replmon safe-to-stop",
    }
    for command, text in helps.items():
        assert text.startswith("the cluster this command is about: "), command


def test_run_and_replay_take_the_metrics_topic(monkeypatch):
    from replmon.streaming.replay_cmd import with_metrics_topic
    from replmon.streaming.settings import load_settings

    monkeypatch.setenv("REPLMON_KAFKA__SUBSCRIBE_PATTERN", "replmon\\..*")
    monkeypatch.setenv("REPLMON_KAFKA__SUBSCRIBE", "")
    settings = load_settings(None)
    for command in ("run", "replay"):
        args = build_parser().parse_args(
            [command, "--metrics-topic", "fetches", "--metrics-bootstrap", "m:1"]
        )
        kafka = with_metrics_topic(settings, args.metrics_bootstrap, args.metrics_topic).kafka
        assert (kafka.bootstrap_servers, kafka.subscribe, kafka.subscribe_pattern) == ("m:1", "fetches", None)
    assert with_metrics_topic(settings, None, None).kafka.subscribe_pattern == "replmon\\..*"


# --- collect reads the settings model -----------------------------------------------------------
def test_collect_takes_its_settings_from_the_file_and_the_environment_and_flags_win(tmp_path, monkeypatch):
    from replmon.streaming.collect.cli import collect_settings
    from replmon.streaming.settings import load_settings

    config = tmp_path / "replmon.toml"
    config.write_text(
        '[collect]\nhold_ms = 2500\nstate_dir = "/var/lib/c"\nexclude_topics = ["a"]\ncompact = false\n'
    )
    monkeypatch.setenv("REPLMON_COLLECT__PUBLISH_TIMEOUT_MS", "9000")
    monkeypatch.setenv("REPLMON_COLLECT__HEARTBEAT_INTERVAL_MS", "700")
    base = ["collect", "--cluster", "c", "--bootstrap", "b:1"]
    section = load_settings(str(config)).collect
    plain = collect_settings(build_parser().parse_args(base), section)
    assert (plain.hold_ms, plain.state_dir, plain.exclude_topics, plain.compact) == (
        2500,
        "/var/lib/c",
        ["a"],
        False,
    )
    assert (plain.publish_timeout_ms, plain.heartbeat_interval_ms) == (9000, 700)
    assert (plain.metadata_interval_ms, plain.max_held) == (1000, 1_000_000)  # the model's defaults
    flags = build_parser().parse_args(
        [*base, "--hold", "1s", "--heartbeat-interval", "3s", "--exclude-topic", "b", "--state-dir", "s"]
    )
    given = collect_settings(flags, section)
    assert (given.hold_ms, given.heartbeat_interval_ms, given.exclude_topics, given.state_dir) == (
        1000,
        3000,
        ["b"],
        "s",
    )
    assert given.publish_timeout_ms == 9000  # not given as a flag: the environment's


@pytest.mark.parametrize(
    ("flags", "setting", "want"),
    [
        ([], None, True),  # the default: session form
        (["--no-session-form"], None, False),
        (["--session-form"], None, True),  # still accepted
        (["--session-form"], "false", True),  # the flag wins over the file
        ([], "false", False),
        (["--no-compact"], None, True),  # compaction and session form are separate settings
    ],
)
def test_collect_publishes_session_form_unless_told_not_to(tmp_path, flags, setting, want):
    from replmon.streaming.collect.cli import collect_settings
    from replmon.streaming.settings import load_settings

    config = tmp_path / "replmon.toml"
    config.write_text(f"[collect]\nsession_form = {setting}\n" if setting else "")
    args = build_parser().parse_args(["collect", "--cluster", "c", "--bootstrap", "b:1", *flags])
    assert collect_settings(args, load_settings(str(config)).collect).session_form is want


def test_session_form_and_no_session_form_together_are_a_usage_error(capsys):
    assert (
        main(["collect", "--cluster", "c", "--bootstrap", "b:1", "--session-form", "--no-session-form"]) == 2
    )
    assert "not allowed with argument" in capsys.readouterr().err


def test_a_bad_collect_flag_or_setting_exits_2_naming_it(tmp_path, monkeypatch, capsys):
    base = ["collect", "--cluster", "c", "--bootstrap", "b:1", "--request-log", "1=x"]
    assert main([*base, "--publish-timeout", "0s"]) == 2
    assert capsys.readouterr().err.startswith("replmon collect: --publish-timeout: must be greater")
    monkeypatch.setenv("REPLMON_COLLECT__MAX_HELD", "0")
    assert main(base) == 2
    assert "collect.max_held" in capsys.readouterr().err


# --- the docs name every setting section ---------------------------------------------------------
SETTINGS_HEADING = "What each subcommand takes from the settings"


def test_the_settings_sections_table_is_the_settings_model():
    from replmon.streaming.settings import Settings

    rows = [c for c in doc_table(SETTINGS_HEADING) if not c[0].startswith(("`replmon ", "`collect."))]
    named = {name for cells in rows for name in re.findall(r"`([a-z_]+)`", cells[0])}
    fields = set(Settings.model_fields)
    assert named == fields, f"only in docs/cli.md {named - fields}, only in the model {fields - named}"


def test_the_collect_settings_table_is_the_collect_model_with_its_defaults():
    from replmon.streaming.settings import Collect

    rows = [c for c in doc_table(SETTINGS_HEADING) if c[0].startswith("`collect.")]
    listed = {cells[0].strip("`").removeprefix("collect."): cells[2] for cells in rows}
    assert set(listed) == set(Collect.model_fields)
    for name, field in Collect.model_fields.items():
        if field.default is not None and field.default_factory is None:
            assert listed[name] == f"`{json.dumps(field.default)}`", name
    flags = {cells[0].strip("`").removeprefix("collect."): cells[1].split()[0].strip("`") for cells in rows}
    parser = commands()["replmon collect"]
    for name, flag in flags.items():
        assert flag in parser._option_string_actions, f"collect.{name}: {flag}"
