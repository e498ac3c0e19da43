"""The `memlink` command line. Errors: one line on stderr, non-zero exit.

One module per command group; each has ``register(sub, common)``, which adds its
subcommands and binds each to its handler with ``set_defaults(func=...)``, so a new
command is a change to one group module. What the commands share (opening the vault, the
LLM provider, the index, progress, printing, exit codes, the error handler) is in
``wiring``."""

from __future__ import annotations

import argparse
import atexit
import gc
import os
import sys
import threading
from pathlib import Path
from typing import NoReturn

from . import app, chat, dream, export, notes, search, write
from .wiring import EXIT_ERROR, EXIT_PROBLEMS, EXIT_USAGE, JSON_HELP, VAULT_HELP, run, vault_parent

__all__ = ["EXIT_ERROR", "EXIT_PROBLEMS", "EXIT_USAGE", "GROUPS", "main", "parser"]

GROUPS = (app, chat, notes, search, write, dream, export)

# The order `memlink --help` lists the commands in (the order people learn them in, not
# by group). A command missing here is listed after these, in registration order.
HELP_ORDER = ("app", "init", "demo", "chat", "show", "links", "link", "unlink", "search", "graph-query", "reindex",
              "commit", "ingest", "import-chat", "recall", "dream", "ask", "lint", "review", "undo", "obsidian", "doctor",
              "check", "mcp", "export", "backup", "restore")


class _Parser(argparse.ArgumentParser):
    """argparse with memlink's errors: one line on stderr, `memlink: error: …` and where the
    command's options are told (argparse would print the whole usage first), exit 2. Its
    commands' parsers are of this class too (``add_subparsers``)."""

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("memlink").strip()
        self.exit(2, f"memlink: error: {message} (see `memlink {command + ' ' if command else ''}--help`)\n")


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="memlink", description="Offline personal memory workstation.")
    p.add_argument("--version", action="version", version=f"memlink {_version()}")
    p.add_argument("--vault", type=Path, help=VAULT_HELP)
    p.set_defaults(func=app.cmd_app)  # no command: open the app
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    common = vault_parent()
    for group in GROUPS:
        group.register(sub, common)
    _describe(sub)
    _list_in_order(sub)
    return p


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("memlink")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "(not installed)"


def _describe(sub: argparse._SubParsersAction) -> None:
    """Each command's `--help` opens with its line from the command list, and every
    --json means the same; a group module gives the rest of the help itself."""
    for action in sub._choices_actions:
        command = sub.choices[action.dest]
        if not command.description and action.help:
            command.description = action.help[0].upper() + action.help[1:] + "."
        for option in command._actions:
            if option.help is None and option.option_strings == ["--json"]:
                option.help = JSON_HELP


def _list_in_order(sub: argparse._SubParsersAction) -> None:
    """Sort the help listing and the 'choose from' list by HELP_ORDER (a stable sort)."""
    rank = {name: i for i, name in enumerate(HELP_ORDER)}
    sub._choices_actions.sort(key=lambda action: rank.get(action.dest, len(rank)))
    ordered = sorted(sub.choices.items(), key=lambda item: rank.get(item[0], len(rank)))
    sub.choices.clear()
    sub.choices.update(ordered)


# A one-shot command at 100k notes makes millions of objects that live until it exits
# (catalog stamps, link records, findings); at CPython's default threshold (700) the
# collector walks them again and again: 6-8 % of a lint, a search process. The app and
# the MCP server live on (`demo` opens the app), and keep the defaults (docs/DESIGN.md,
# "Checks": what a run costs).
ONE_SHOT_GC = (100_000, 50, 100)
LONG_LIVED = (app.cmd_app, app.cmd_demo, app.cmd_mcp)
APP = (app.cmd_app, app.cmd_demo)  # after the app quits, its workers still busy are not waited for


def main(argv: list[str] | None = None, *, process: bool = False) -> int:
    """Run one command. ``process``: this is the `memlink` process itself (its entry
    point, memlink_tui.launch), which a one-shot command then ends at once."""
    args = parser().parse_args(argv)
    if args.func not in LONG_LIVED:
        gc.set_threshold(*ONE_SHOT_GC)
    code = run(args.func, args)
    if process and (args.func not in LONG_LIVED or args.func in APP):
        end_now(code, wait=args.func not in APP)
    return code


def end_now(code: int, wait: bool = True) -> None:
    """End a one-shot command's process without freeing its objects one by one: what
    it wrote is committed and closed, its output is flushed here, and exit handlers run.
    Freeing the millions of stamps, records and
    findings a command at 100k notes holds took 60 ms of a 0.9 s lint. With ``wait``,
    only with no other thread left that the usual exit would wait for (one still working
    finishes the usual way; a daemon thread, as search's vector route, is not waited for
    either way); the app passes False: the user quit, and its workers' writes are
    journaled units of work."""
    if wait and any(not t.daemon and t is not threading.current_thread() for t in threading.enumerate()):
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # (a reader that went away: as the usual exit)
            pass
        except OSError:  # output that could not be written (a full disk): as CPython's exit says so
            code = code or 120
    atexit._run_exitfuncs()
    os._exit(code)


if __name__ == "__main__":
    raise SystemExit(main())
