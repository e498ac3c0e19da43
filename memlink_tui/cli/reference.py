"""The command line reference as markdown, from the parser itself: the README holds its
output, and a test keeps the two in step (`python -m memlink_tui.cli.reference` prints it).

One table row a command, in the order `memlink --help` lists them: its synopsis (the
arguments it takes), what it does, and each option with its help. ``--vault``, which
every command takes, is said once above the table. A default that depends on the machine
(the per-user data folder) is printed as on Linux, so the text is the same everywhere."""

from __future__ import annotations

import argparse
import re

from ..paths import data_dir
from .wiring import JSON_HELP

# What the machine's per-user data folder is shown as (`memlink backup --to`'s default).
DATA_DIR_SHOWN = "~/.local/share/memlink"


def _cell(text: str) -> str:
    """Text for a table cell: one line, no stray pipe, the machine's data folder as on Linux."""
    return " ".join(text.replace(str(data_dir()), DATA_DIR_SHOWN).split()).replace("|", "\\|")


def _help(text: str | None) -> str:
    """A help text for markdown: a record's shape (`{session, id, …}`) as code."""
    return re.sub(r"\{[^{}]*\}", lambda m: f"`{m.group(0)}`", text or "")


def _value(action: argparse.Action) -> str:
    """How an argument's value is written: its choices, else its metavar, else its name."""
    if action.choices is not None:
        return "|".join(str(c) for c in action.choices)
    return action.metavar if isinstance(action.metavar, str) else action.dest.upper()


def _positional(action: argparse.Action) -> str:
    name = _value(action)
    if action.nargs == "?":
        return f"[{name}]"
    if action.nargs == "+":
        return f"{name}…"
    if action.nargs == "*":
        return f"[{name}…]"
    return name


def _option(action: argparse.Action) -> str:
    flag = max(action.option_strings, key=len)  # the long form
    shown = flag if action.nargs == 0 else f"{flag} {_value(action)}"
    said = action.help and action.help not in (argparse.SUPPRESS, JSON_HELP)  # (--json: the same everywhere)
    return f"`{shown}`" + (f": {_help(action.help)}" if said else "")


def _subcommands(p: argparse.ArgumentParser) -> argparse._SubParsersAction:
    return next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))


def _own(p: argparse.ArgumentParser) -> list[argparse.Action]:
    """A parser's arguments but -h and --vault (said once for all)."""
    return [a for a in p._actions if not isinstance(a, argparse._HelpAction) and a.dest != "vault"]


def reference(p: argparse.ArgumentParser | None = None) -> str:
    if p is None:
        from . import parser

        p = parser()
    sub = _subcommands(p)
    vault = next(a for a in p._actions if a.dest == "vault")
    without = [name for name, command in sub.choices.items() if not any(a.dest == "vault" for a in command._actions)]
    but = f" but {', '.join(f'`{name}`' for name in without)}" if without else ""
    lines = [_cell(f"`memlink [--vault VAULT] COMMAND …`: every command{but} takes `--vault VAULT`, the "
                   f"{vault.help}. With no command, `memlink` opens the app; `memlink --version` prints its version."),
             "", "| command | what it does | options |", "|---|---|---|"]
    helps = {choice.dest: _help(choice.help) for choice in sub._choices_actions}
    for name, command in sub.choices.items():
        actions = _own(command)
        synopsis = " ".join(["memlink", name] + [_positional(a) for a in actions if not a.option_strings])
        options = "; ".join(_option(a) for a in actions if a.option_strings)
        lines.append(f"| `{_cell(synopsis)}` | {_cell(helps.get(name, ''))} | {_cell(options)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(reference())
