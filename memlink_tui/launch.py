"""The `memlink` command's entry point (the console script): the command line
(memlink_tui.cli), run as a process."""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    from .cli import main as cli_main

    return cli_main(argv, process=True)
