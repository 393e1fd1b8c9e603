"""The pieces of `replmon`'s one command-line grammar (docs/cli.md) that every subcommand shares.

The flags every subcommand has (`--config`, `--verbose`), the old spellings that still work for
one release with a warning, and the error a subcommand raises for a usage or config problem
(exit 2, `replmon <command>: ...`). It imports nothing of replmon's, so that every subcommand's
module can declare its flags with it.
"""

from __future__ import annotations

import argparse
import sys


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


def old_spelling(parser: argparse.ArgumentParser, old: str, new: str) -> None:
    """Accept `old` as `new` for one release, with a deprecation warning; --help shows only `new`."""
    action = parser._option_string_actions[new]
    same = {k: getattr(action, k) for k in ("nargs", "const", "type", "choices", "metavar")}
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
    """The old spellings a parser still accepts: old -> new."""
    return {
        a.option_strings[0]: a.new.option_strings[0] for a in parser._actions if isinstance(a, _OldSpelling)
    }
