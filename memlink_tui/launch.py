"""The `memlink` command's first step: for the commands that walk the whole vault
first (search, lint), begin that walk in a second process before anything heavy is
imported, then hand over to the command line (memlink_tui.cli). Imports only the
standard library and engine.walk (docs/DESIGN.md, "Vault format": the walk in a second
process)."""

from __future__ import annotations

import os
import sys

WALK_FIRST = ("search", "lint")  # commands that call Vault.prefetch_walk before their first sync


def walk_first(argv: list[str]) -> None:
    """Begin the walk of the vault this command will open, if it is one that walks first.
    A guess from the arguments (argparse is not loaded yet): when it is wrong, the vault
    does not take the walk (another folder, a write since), and it ends with the process."""
    vault, command, i = None, None, 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-h", "--help", "--fix", "--"):  # (lint --fix writes before it walks)
            return
        if arg == "--vault" and i + 1 < len(argv):
            vault, i = argv[i + 1], i + 2
            continue
        if arg.startswith("--vault="):
            vault = arg.split("=", 1)[1]
        elif command is None and not arg.startswith("-"):
            command = arg
        i += 1
    if command not in WALK_FIRST:
        return
    if vault is None:
        from .paths import default_vault

        vault = str(default_vault())
    from engine.walk import walk_early

    walk_early(os.path.expanduser(vault))


def main(argv: list[str] | None = None) -> int:
    walk_first(sys.argv[1:] if argv is None else argv)
    from .cli import main as cli_main

    return cli_main(argv, process=True)
