"""The pieces of `replmon`'s one command-line grammar (docs/cli.md) that every subcommand shares.

The flags every subcommand has (`--config`, `--verbose`), the one syntax of a duration, the old
spellings that still work for one release with a warning, and the error a subcommand raises for a
usage or config problem (exit 2, `replmon <command>: ...`). It imports nothing of replmon's, so
that every subcommand's module can declare its flags with it.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from typing import Any

_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_PART = r"(\d+(?:\.\d+)?)(ms|s|m|h|d)"  # "ms" before "m": 5ms is five milliseconds


def parse_duration_ms(text: str) -> int:
    """A duration as every flag takes it: a number and a unit, ms, s, m, h or d, or several
    (`500ms`, `30s`, `1.5h`, `1h30m`) -> milliseconds. A bare number is refused (ValueError): its
    unit would be a guess."""
    t = (text or "").strip()
    if not re.fullmatch(f"(?:{_PART})+", t):
        raise ValueError(f"{text!r} is not a duration like 500ms, 30s, 5m, 2h or 1h30m")
    return round(sum(float(n) * _UNIT_MS[u] for n, u in re.findall(_PART, t)))


def duration(text: str) -> int:
    """argparse type of a DURATION flag: its value in milliseconds (a usage error, exit 2,
    names the flag when the text is not a duration)."""
    try:
        return parse_duration_ms(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def duration_text(text: str) -> str:
    """argparse type of a DURATION flag whose text is parsed later (replay's window): checked
    at parse time all the same, so that a bare number is a usage error like everywhere."""
    duration(text)
    return text


def in_unit(unit: str) -> Callable[[str], int]:
    """argparse type of an old flag that took a bare number in `unit` (`--hold-ms 1500`,
    `--publish-timeout-s 60`): the milliseconds the new DURATION flag gives for it."""

    def convert(text: str) -> int:
        return duration(f"{text.strip()}{unit}")

    return convert


class UsageError(Exception):
    """A usage or config problem found after parsing: `replmon <command>: <message>`, exit 2."""


def add_common(parser: argparse.ArgumentParser, *, inherited: bool = False) -> None:
    """`--config` and `--verbose`, on every subcommand. `inherited`: the parser is a nested action
    (`silence add`) whose group (`silence`) has them too; a value given before the action stays."""
    default = argparse.SUPPRESS if inherited else None
    parser.add_argument(
        "--config",
        metavar="FILE",
        default=default,
        help="TOML settings file (also REPLMON_CONFIG); docs/cli.md says what each subcommand reads of it",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        default=argparse.SUPPRESS if inherited else False,
        help="show Spark's, py4j's and replmon's log lines (default: quiet)",
    )


class _OldSpelling(argparse.Action):
    """An old spelling of a flag: warns once on stderr, then does what the new flag does."""

    def __init__(self, option_strings, dest, *, new: argparse.Action, **kwargs):
        super().__init__(option_strings, dest, **kwargs)
        self.new = new

    def __call__(self, parser, namespace, values, option_string=None):
        new = self.new.option_strings[0]
        print(
            f"{parser.prog}: {option_string} is deprecated, use {new} "
            "(the old spelling goes in the next release)",
            file=sys.stderr,
        )
        self.new(parser, namespace, values, new)


def old_spelling(
    parser: argparse.ArgumentParser, old: str, new: str, type: Callable[[str], Any] | None = None
) -> None:
    """Accept `old` as `new` for one release, with a deprecation warning; --help shows only `new`.
    `type`: how the old flag's value reads when it differs from the new one's (a unit)."""
    action = parser._option_string_actions[new]
    same = {k: getattr(action, k) for k in ("nargs", "const", "type", "choices", "metavar")}
    if type is not None:
        same["type"] = type
    parser.add_argument(
        old,
        action=_OldSpelling,
        new=action,
        dest=action.dest,
        default=argparse.SUPPRESS,
        help=argparse.SUPPRESS,
        **{k: v for k, v in same.items() if v is not None},
    )


def old_spellings(parser: argparse.ArgumentParser) -> dict[str, str]:
    """The old spellings a parser still accepts: old -> new (`--create-topic N` -> `--create-topic
    --partitions N` for a switch that once took a value)."""
    found = {
        a.option_strings[0]: a.new.option_strings[0] for a in parser._actions if isinstance(a, _OldSpelling)
    }
    for a in parser._actions:
        if isinstance(a, SwitchOrOldValue):
            flag = a.option_strings[0]
            found[f"{flag} N"] = f"{flag} {a.old_flag} N"
    return found


class SwitchOrOldValue(argparse.Action):
    """A switch (`--create-topic`) that once took a value (`--create-topic 6`): the value is
    still accepted for one release, with a warning that names the flag it belongs to now
    (`old_dest`, e.g. `--partitions`). --help shows the switch (SwitchFormatter)."""

    def __init__(self, option_strings, dest, *, old_flag: str, old_dest: str, old_type=int, **kwargs):
        super().__init__(option_strings, dest, nargs="?", const=True, default=False, **kwargs)
        self.old_flag, self.old_dest, self.old_type = old_flag, old_dest, old_type

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, True)
        if values is None or values is True:
            return
        try:
            value = self.old_type(values)
        except ValueError:
            raise argparse.ArgumentError(self, f"takes no value (the count is {self.old_flag})") from None
        print(
            f"{parser.prog}: {option_string} {values} is deprecated, use {option_string} "
            f"{self.old_flag} {values} (the old form goes in the next release)",
            file=sys.stderr,
        )
        setattr(namespace, self.old_dest, value)


class SwitchFormatter(argparse.HelpFormatter):
    """Shows a SwitchOrOldValue as the switch it is: `--create-topic`, not `--create-topic [X]`."""

    def _format_args(self, action, default_metavar):
        if isinstance(action, SwitchOrOldValue):
            return ""
        return super()._format_args(action, default_metavar)

    def _format_action_invocation(self, action):
        if isinstance(action, SwitchOrOldValue):
            return ", ".join(action.option_strings)
        return super()._format_action_invocation(action)
