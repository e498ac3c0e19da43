"""What every `memlink` command shares, in one place: the --vault option, opening the
vault, choosing the LLM provider, syncing the search index, progress bars, printing data
safely, the exit codes and the one error handler. Group modules import from here and
never open a vault or pick a provider themselves."""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from engine import LinkError, MemlinkError, Vault
from engine.errors import DiskFull
from engine.model.lineranges import parse_ranges
from engine.model.text import printable, printable_json, printable_path
from engine.storage.atomic import disk_full

from ..paths import default_vault

if TYPE_CHECKING:
    from engine.index import SearchIndex, SyncReport
    from engine.llm.registry import Selection
    from engine.model.config import LLMConfig, VaultConfig

EXIT_ERROR = 1
EXIT_USAGE = 2  # argparse's own exit code for a bad command line
EXIT_PROBLEMS = 3
EXIT_BUSY = 4
# The command ran, but some of its items (files, turns, topics) failed; what did land is
# whole. EXIT_ERROR is for a command that could not run at all.
EXIT_PARTIAL = 5
EXIT_INTERRUPTED = 130

Handler = Callable[[argparse.Namespace], int]
Progress = Callable[[int, int], None]

VAULT_HELP = "vault folder (default: $MEMLINK_VAULT or the per-user data dir)"
JSON_HELP = "print the result as JSON (for scripts)"  # a bare --json's help (the reference leaves it out)


def vault_parent() -> argparse.ArgumentParser:
    """The parent parser giving every subcommand --vault. SUPPRESS keeps a subcommand's
    missing --vault from erasing one given before the command name."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--vault", type=Path, default=argparse.SUPPRESS, help=VAULT_HELP)
    return common


def positive(text: str) -> int:
    """An argparse type: a whole number of 1 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return value


def weight(text: str) -> float:
    """An argparse type: a link's weight, a number from 0 to 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"a weight is from 0 to 1, not {text}")
    return value


def line_ranges(text: str) -> str:
    """An argparse type: line ranges as a link's ``t_line_ranges`` takes them ("3-5,8")."""
    try:
        parse_ranges(text)
    except LinkError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def vault_path(args: argparse.Namespace) -> Path:
    """The folder --vault names, else the default vault."""
    return args.vault or default_vault()


def open_vault(args: argparse.Namespace | Path, *, read_only: bool = False) -> Vault:
    """The vault of --vault (or the default one), or the vault at a given path;
    ``read_only`` writes nothing at all (a dry run)."""
    return Vault.open(args if isinstance(args, Path) else vault_path(args), read_only=read_only)


def init_vault(args: argparse.Namespace) -> Vault:
    """A new empty vault at --vault (or the default place)."""
    return Vault.init(vault_path(args), name=args.name)


def settings(vault: Vault | None) -> VaultConfig:
    """The vault's settings, or the defaults when no vault could be opened (doctor)."""
    from engine.model.config import VaultConfig

    return vault.config if vault is not None else VaultConfig.model_validate({"name": "defaults"})


def provider(vault: Vault | None, *, force: str | None = None) -> Selection:
    """The provider for this vault's llm settings (the defaults when there is no vault);
    ``force`` overrides llm.provider. The engine's registry checks each configuration once
    per process, so a command that needs the provider twice sees the same answer."""
    from engine.llm.registry import selection

    config: LLMConfig = settings(vault).llm
    if force is not None:
        config = config.model_copy(update={"provider": force})
    return selection(config)


def say(text: str, file: TextIO | None = None) -> None:
    """Print one line that may hold note, chat or model text: that text is data, so its
    terminal control sequences are dropped."""
    print(printable(text), file=file)


def say_json(data: Any, indent: int | None = 2) -> None:
    """Print data as JSON for scripts: every character kept, those a terminal would act on
    written as \\u escapes (JSON already escapes the C0 controls)."""
    print(printable_json(json.dumps(data, ensure_ascii=False, indent=indent)))


def notice(text: str) -> None:
    """A side note on stderr (the index was rebuilt, a model is missing...)."""
    say(f"memlink: note: {text}", file=sys.stderr)


def progress(label: str) -> Progress | None:
    """A progress callback drawing a bar on stderr when it is a terminal."""
    if not sys.stderr.isatty():
        return None
    from rich.progress import Progress as Bar

    state: dict[str, Any] = {}

    def update(done: int, total: int) -> None:
        if "bar" not in state:
            state["bar"] = Bar(transient=True)
            state["bar"].start()
            state["task"] = state["bar"].add_task(label, total=total)
        state["bar"].update(state["task"], completed=done, total=total)
        if done >= total:
            state.pop("bar").stop()

    return update


def synced_index(vault: Vault, quiet: bool = False, full: bool = False) -> tuple[SearchIndex, SyncReport]:
    """The vault's search index brought up to date (a bar unless ``quiet``), and the sync report."""
    from engine.index import SearchIndex  # (numpy, hnswlib, tantivy: only the commands that search load them)

    bar = None if quiet else progress("indexing")
    if full:
        index = SearchIndex.for_vault(vault, bar)
        report = index.sync(progress=bar, full=True)
    else:  # opening the index syncs it: once per process, not twice (a walk of the whole vault)
        index, report = SearchIndex.synced(vault, bar)
    for line in report.notices:
        notice(line)
    return index, report


class UsageError(MemlinkError):
    """A bad command line that argparse could not see (e.g. a link type the vault does not
    declare: the choices are known only once the vault is open). Exits 2, like argparse."""


def run(handler: Handler, args: argparse.Namespace) -> int:
    """Run one command: any error becomes one line on stderr and a non-zero exit code."""
    try:
        return handler(args)
    except UsageError as exc:
        say(f"memlink: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except DiskFull as exc:  # recorded, not yet applied: its own words say so
        say(f"memlink: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except MemlinkError as exc:
        full = disk_full(exc.__cause__) if exc.__cause__ is not None else None  # an engine error over ENOSPC
        say(f"memlink: error: {full or exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # e.g. `memlink search … | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:  # a folder that cannot be created, a full disk...
        full = disk_full(exc)
        if full:
            say(f"memlink: error: {full}", file=sys.stderr)
            return EXIT_ERROR
        where = f": {printable_path(exc.filename)}" if exc.filename else ""
        say(f"memlink: error: {exc.strerror or exc}{where}", file=sys.stderr)
        return EXIT_ERROR
    except (ValueError, RuntimeError, UnicodeError, sqlite3.Error) as exc:  # last resort: one line, not a traceback
        full = disk_full(exc)  # tantivy reports a full disk as a ValueError
        if full:
            say(f"memlink: error: {full}", file=sys.stderr)
            return EXIT_ERROR
        say(f"memlink: error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", file=sys.stderr)
        return EXIT_ERROR
