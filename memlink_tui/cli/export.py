"""Export and backup: `export`, `backup`, `restore` (docs/DESIGN.md, "Export and backup")."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..paths import data_dir
from .wiring import EXIT_PARTIAL, EXIT_PROBLEMS, UsageError, notice, open_vault, printable_path, say, say_json


def default_backup_dir() -> Path:
    """Where `memlink backup` writes without --to: the per-user data folder's backups/
    (~/.local/share/memlink/backups; $MEMLINK_HOME moves it)."""
    return data_dir() / "backups"


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    s = sub.add_parser("export", parents=[common],
                       help="copy the vault without its derived state to a new folder (--markdown: plain markdown)")
    s.add_argument("dest", type=Path, metavar="DEST", help="a new or empty folder outside the vault")
    s.add_argument("--markdown", action="store_true",
                   help="instead of a vault, every note as plain markdown with its links and backlinks (readable anywhere)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_export)

    s = sub.add_parser("backup", parents=[common], help="write a dated .tar.gz of the vault (with a manifest); prints its path")
    s.add_argument("--to", type=Path, metavar="DIR",
                   help=f"the folder for the archive (default: {default_backup_dir()})")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_backup)

    s = sub.add_parser("restore", help="check a backup against its manifest, unpack it to a new folder, run check")
    s.add_argument("archive", type=Path, metavar="ARCHIVE", help="the backup archive (.tar.gz) to restore")
    s.add_argument("dest", type=Path, metavar="DEST", help="a new or empty folder for the restored vault")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_restore)


def _left_out(skipped: list[tuple[str, str]], warnings: list[str]) -> None:
    for line in warnings:
        notice(line)
    for place, why in skipped:
        notice(f"left out {place}: {why}")


def cmd_export(args: argparse.Namespace) -> int:
    from engine.export import export_markdown, export_vault, failed

    vault = open_vault(args)
    report = export_markdown(vault, args.dest) if args.markdown else export_vault(vault, args.dest)
    vault.close()
    done = EXIT_PARTIAL if failed(report.skipped) else 0  # (what could not be read is named; the rest landed)
    if args.json:
        say_json(report.to_json())
        return done
    _left_out(report.skipped, report.warnings)
    if args.markdown:
        say(f"exported {report.notes} notes as markdown ({report.links} links) to {report.dest}; start at README.md")
    else:
        folded = f"; link logs folded into {len(report.folded)} sidecars" if report.folded else ""
        say(f"exported {report.files} files ({report.notes} notes, {report.links} links; {report.bytes} bytes) to "
            f"{report.dest}{folded}")
    return done


def cmd_backup(args: argparse.Namespace) -> int:
    from engine.export import backup_vault, failed

    vault = open_vault(args)
    report = backup_vault(vault, args.to or default_backup_dir())
    vault.close()
    done = EXIT_PARTIAL if failed(report.skipped) else 0
    if args.json:
        say_json(report.to_json())
        return done
    _left_out(report.skipped, report.warnings)
    say(report.path)
    print(f"{report.files} files, {report.bytes} bytes; sha256 {report.sha256}", file=sys.stderr)
    return done


def cmd_restore(args: argparse.Namespace) -> int:
    from engine.export import restore_archive
    from engine.lint.memo import check

    if getattr(args, "vault", None) is not None:  # (the global option, given before the command name)
        raise UsageError(f"restore unpacks into DEST, a new or empty folder, and opens no vault: --vault {args.vault} "
                         "is not used (give that folder as DEST, or leave --vault out)")
    report = restore_archive(args.archive, args.dest)
    vault = open_vault(Path(report.dest))
    problems = check(vault)
    vault.close()
    errors = [p for p in problems if p.severity == "error"]
    if args.json:
        say_json({**report.to_json(), "check": [p.as_dict() for p in problems]})
        return EXIT_PROBLEMS if errors else 0
    say(f"restored {report.files} files of vault {report.vault!r} (backed up {report.created_at}) to {report.dest}; "
        "every file matches the manifest")
    for p in problems:
        say(printable_path(f"{p.severity:<7} {p.code:<20} {p.uri}: {p.message}"))
    say(f"memlink check: {len(errors)} errors, {len(problems) - len(errors)} warnings")
    if errors:
        return EXIT_PROBLEMS
    return 0
