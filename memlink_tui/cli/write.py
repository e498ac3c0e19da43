"""The write path: `commit`, `ingest`, `import-chat`. Each exits 0 when everything landed,
EXIT_PARTIAL (5) when some files or turns failed (what landed is whole; the rest is named
on stderr and retried by a re-run) and EXIT_ERROR (1) when it could not run at all."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from engine import MemlinkError
from engine.model.text import counted

from .wiring import EXIT_PARTIAL, UsageError, notice, open_vault, printable_path, progress, say, say_json

# engine.sessions.chat_exports.FORMATS, spelled out: the CLI starts without loading the importer.
CHAT_FORMATS = ("jsonl", "chatgpt", "claude", "whatsapp", "telegram")

if TYPE_CHECKING:
    from engine import Vault
    from engine.extract.batch import BatchResult
    from engine.extract.inputs import Extractor
    from engine.extract.updater import RunReport
    from engine.llm import Health


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    s = sub.add_parser("commit", parents=[common], help="extract memories from a chat session's new turns")
    s.add_argument("session", nargs="?", help="session id (sessions/<id>.jsonl)")
    s.add_argument("--all", action="store_true", dest="every",
                   help="every chat session with turns not committed yet (imported chats too), one at a time")
    s.add_argument("--turn", metavar="MESSAGE_ID",
                   help="only the turn holding this message (the question's id, as `memlink chat --json` gives it); "
                        "a later commit of the whole chat session skips it")
    s.add_argument("--provider", choices=["rules", "ollama"],
                   help="default: llm.provider of memlink.yaml (rules: when the model's answers do not fit)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_commit)

    s = sub.add_parser("ingest", parents=[common], help="import text, markdown, PDF, HTML, DOCX and CSV files and folders "
                       "as sources, link their references, extract memories")
    s.add_argument("paths", nargs="*", type=Path, metavar="PATH", help="files or folders (walked recursively)")
    s.add_argument("--inbox", action="store_true",
                   help="also import the files in the ingest.inbox folder (memlink.yaml); each one imported moves to its done/")
    s.add_argument("--no-wiki", action="store_true", help="keep the files as sources only; extract nothing")
    s.add_argument("--dry-run", action="store_true", help="show what would change (new, changed, deleted, renamed "
                   "files) and write nothing")
    s.add_argument("--prune", action="store_true", help="move a renamed file's note to its new path; remove the notes "
                   "of files no longer in a folder given, but those edited in the vault (undo with `memlink undo`)")
    s.add_argument("--provider", choices=["rules", "ollama"], help="default: llm.provider of memlink.yaml")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_ingest)

    s = sub.add_parser("import-chat", parents=[common],
                       help="import a chat transcript (JSONL, a ChatGPT or Claude export, a WhatsApp or Telegram chat) as "
                            "chat sessions and turn memories")
    s.add_argument("file", type=Path, help="the transcript or export file")
    s.add_argument("--format", choices=CHAT_FORMATS, default=None, dest="fmt",
                   help="jsonl (records {session, id, role, content, ts}; ts ISO or as exports write it, \"1:56 pm on 8 May, "
                   "2023\": the day its memories are dated), chatgpt or claude (their conversations.json), whatsapp "
                   "(\"Export chat\" .txt) or telegram (Telegram Desktop's result.json): a chat session a day; "
                   "default: told by the file's shape")
    s.add_argument("--me", metavar="NAME", help="WhatsApp or Telegram: the sender whose memory this is (the user; the "
                   "others answer); default: the account's owner (a whole Telegram export), else who was the user when the "
                   "chat was imported before, else the other person of a chat between two named after one (\"WhatsApp Chat "
                   "with Ana\"), else the first sender")
    s.add_argument("--dates", choices=("day-first", "month-first"),
                   help="WhatsApp: how its dates are written (31/12 or 12/31), when no day in the file is above 12 to "
                   "say; default: a 12-hour clock month first unless its dates are written with dots (31.12.), else day first")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_import_chat)

    s = sub.add_parser("obsidian", parents=[common],
                       help="regenerate every note's generated blocks: the delimited view and the Links block of "
                            "[[wikilinks]] (after turning obsidian.links_block on or off, or an upgrade)")
    s.add_argument("--dry-run", action="store_true", help="say what would change; write nothing")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_obsidian)


def cmd_obsidian(args: argparse.Namespace) -> int:
    from engine.storage.obsidian import regenerate

    vault = open_vault(args)
    result = regenerate(vault, dry_run=args.dry_run)
    state = "on" if vault.config.obsidian.links_block else "off (blocks removed)"
    if args.json:
        say_json({"notes": result.notes, "rewritten": result.rewritten, "views": result.views,
                  "skipped": result.skipped, "links_block": vault.config.obsidian.links_block,
                  "dry_run": args.dry_run})
    else:
        say(f"{'would rewrite' if args.dry_run else 'regenerated'}: {result.summary()}; Links block {state}")
        for uri in result.skipped:
            say(f"  ! {printable_path(uri)}: does not parse; left as it is (memlink check says why)")
    return 0


def _print_report(report: RunReport, heading: str) -> None:
    """A run's report; what came from notes or imported files is data, printed through say."""
    say(f"{heading}: {report.summary()}  [provider: {report.provider}]")
    for uri in report.created:
        say(f"  + {printable_path(uri)}")
    for change in report.changed:
        fields = ", ".join(k for k in change["after"] if change["before"].get(k) != change["after"].get(k))
        say(f"  ~ {printable_path(change['uri'])}" + (f"  ({fields})" if fields else ""))
    for link in report.links_added:
        relation = link.get("relation") or ""
        named = relation and relation != "referenced in the text"
        shown = f"{link['type']} · {relation}" if named else link["type"]
        say(f"  -> {printable_path(link['from'])} -[{shown}]-> {printable_path(link['to'])}")
    for ref in report.unresolved:
        say(f"  ! reference to a missing note: {ref}")
    for ref in report.missing_files:
        say(f"  ! reference to a missing file: {ref}")
    for ref in report.ambiguous:
        say(f"  ! ambiguous reference: {ref}")
    for problem in report.problems:
        say(f"  ! {problem}")


def _print_unfinished(result: BatchResult) -> None:
    """What did not land, on stderr: files with nothing written, sources written but
    still pending (their memories and links were not), and why the model was given up."""
    for failure in result.failed:
        say(f"memlink: error: {failure['error']} (nothing was written for it)", file=sys.stderr)
    for item in result.pending:
        say(f"memlink: error: {printable_path(item['path'])}: {item['error']}. Written: the source note {item['source']}, "
            f"marked pending; not written: its memories and links. The next ingest, commit or dream retries it",
            file=sys.stderr)
    if result.fallback:
        say(f"memlink: model: {result.fallback}", file=sys.stderr)


def _retry_pending(vault: Vault, extractor: Extractor, quiet: bool) -> bool:
    """Finish the sources an earlier ingest left pending; False when some are still pending."""
    from engine.extract.batch import pending_sources, retry_pending

    if not pending_sources(vault):
        return True
    result = retry_pending(vault, extractor)
    finished = [r for r in result.files if r.source_uri not in {p["source"] for p in result.pending}]
    if not quiet:
        for r in finished:
            _print_report(r.report, f"{printable_path(r.path)} (pending import, finished)")
    _print_unfinished(result)
    return not result.pending


def _extractor(vault: Vault, force: str | None) -> tuple[Extractor, Health]:
    """The extractor for the vault's provider, or the one asked for: asked for Ollama when
    it does not answer, the command stops rather than fall back."""
    from engine.extract.inputs import choose_extractor

    extractor, health = choose_extractor(vault, force)
    if force == "ollama" and not health.ok:
        raise MemlinkError(health.summary)
    return extractor, health


def cmd_commit(args: argparse.Namespace) -> int:
    from engine.extract.loop import ExtractionRejected
    from engine.index import SearchIndex
    from engine.llm import LLMError
    from engine.sessions.commit import commit_session, commit_turn

    if (args.session is None) == (not args.every) or (args.every and args.turn):
        raise UsageError("commit takes a SESSION (optionally with --turn) or --all")
    vault = open_vault(args)
    extractor, health = _extractor(vault, args.provider)
    if not args.json:
        say(f"provider: {health.provider} — {health.summary}", file=sys.stderr)
    SearchIndex.for_vault(vault)  # (its sync walks the vault: the one walk of the command)
    retried = _retry_pending(vault, extractor, args.json)
    if args.every:
        code = _commit_all(vault, extractor, args.json, rules=health.provider == "rules")
        return code if retried else EXIT_PARTIAL
    try:
        if args.turn is None:
            report, what = commit_session(vault, args.session, extractor), f"session {args.session}"
        else:
            report, what = commit_turn(vault, args.session, args.turn, extractor), f"session {args.session} turn {args.turn}"
    except (LLMError, ExtractionRejected) as exc:
        if health.provider == "rules":
            raise
        raise MemlinkError(f"{exc} (`--provider rules` saves these turns with the rules)") from None
    vault.close()
    for line in vault.warnings:  # e.g. a bad line of the session's log, left out
        notice(line)
    if args.json:
        say_json(report.to_json() if report else None)
    elif report is None:
        say(f"{what}: nothing new to commit")
    else:
        _print_report(report, what)
    return 0 if retried else EXIT_PARTIAL


def _commit_all(vault: Vault, extractor: Extractor, as_json: bool, *, rules: bool) -> int:
    from engine.sessions.commit import commit_all

    result = commit_all(vault, extractor, progress=None if as_json else progress("committing sessions"))
    vault.close()
    for line in vault.warnings:
        notice(line)
    for session, why in result.failed:
        say(f"memlink: error: session {session}: {why} (nothing was written for it)", file=sys.stderr)
    if result.failed and not rules:
        notice("`memlink commit --all --provider rules` saves what the model could not")
    total = result.total()
    if as_json:
        say_json({"sessions": [{"session": s, **r.to_json()} for s, r in result.committed],
                  "failed": [{"session": s, "error": why} for s, why in result.failed],
                  "unchanged": result.unchanged, "total": total})
    else:
        for session, report in result.committed:
            _print_report(report, f"session {session}")
        say(f"sessions committed: {total['sessions']} (notes created: {total['created']}, changed: {total['changed']}, "
            f"links added: {total['links_added']}); with nothing new: {result.unchanged}; failed: {len(result.failed)}")
    return EXIT_PARTIAL if result.failed else 0


def cmd_ingest(args: argparse.Namespace) -> int:
    from engine.extract.batch import ingest_batch
    from engine.extract.inbox import import_inbox

    if not args.paths and not args.inbox:
        raise UsageError("ingest needs files or folders to import, or --inbox")
    vault = open_vault(args)
    extractor, health = _extractor(vault, args.provider)
    if not args.json and not args.dry_run:
        say(f"provider: {health.provider} — {health.summary}", file=sys.stderr)
    moved: list[str] = []
    if args.inbox:
        if args.dry_run or args.prune:
            raise UsageError("--inbox imports the inbox folder; --dry-run and --prune go with files or folders")
        result, moved = import_inbox(vault, wiki=not args.no_wiki, extractor=extractor)
        if args.paths:
            result.extend(ingest_batch(vault, args.paths, wiki=not args.no_wiki, extractor=extractor))
    else:
        result = ingest_batch(vault, args.paths, wiki=not args.no_wiki, extractor=extractor, dry_run=args.dry_run,
                              prune=args.prune, progress=None if args.json or args.dry_run else progress("importing"))
    vault.close()
    for name in moved:
        notice(f"inbox: {printable_path(name)} imported, moved to done/")
    _print_unfinished(result)
    code = EXIT_PARTIAL if result.failed or result.pending else 0
    if args.json:
        say_json(result.to_json())
        return code
    if args.dry_run:
        _print_dry_run(result)
        return code
    for r in result.files:
        if not r.skipped:
            _print_report(r.report, printable_path(r.path))
    for skip in result.skipped:
        say(f"{printable_path(skip['path'])}: skipped, {skip['why']}")
    _print_sync(result, "")
    if line := result.model_line():
        say(line)
    imported = sum(1 for r in result.files if not r.skipped) - len(result.pending)
    page_links = len(result.page_links())
    others = len(result.links_added) - page_links
    print(f"{imported} files imported, {len(result.pending)} pending, "
          f"{len(result.skipped)} skipped, {len(result.failed)} failed; "
          f"{page_links} links between pages" + (f" (+{others} from extracted notes)" if others else "") +
          (f", {len(result.links_removed)} removed" if result.links_removed else "") +
          f", {len(result.unresolved)} unresolved references"
          + (f", {len(result.missing_files)} to missing files" if result.missing_files else "")
          + (f", {len(result.ambiguous)} ambiguous" if result.ambiguous else "")
          + (f", {len(result.by_alias)} matched by an alias only" if result.by_alias else "")
          + f", {result.attachments} attachment links ({len(result.copied)} files copied)" + f" ({result.seconds:.1f}s)")
    return code


def _print_sync(result: BatchResult, would: str) -> None:
    """What a re-ingest found besides new files: references matched only by an alias, notes
    a person edited (left alone), files deleted or renamed since the last import."""
    if not would:
        for uri in result.changed:
            say(f"  ~ {printable_path(uri)}: its file changed since the last import; updated")
    for hit in result.by_alias:
        say(f"  ~ {printable_path(hit['file'])}:{hit['line']}: {hit['ref']} matched {printable_path(hit['to'])} by an "
            f"alias only (Obsidian does not resolve it)")
    for link in result.links_removed:
        say(f"  - {printable_path(link['from'])} -> {printable_path(link['to'])}: its file no longer states it; removed "
            "(`memlink undo` puts it back)")
    for link in result.links_kept_for_you:
        say(f"  ~ {printable_path(link['from'])} -> {printable_path(link['to'])}: its file no longer states it; kept, "
            "as a person changed it (`memlink unlink` removes it)")
    gone = {item["source"] for item in result.deleted}
    for item in result.edited:
        if item["source"] not in gone:
            say(f"  ! {printable_path(item['path'])}: {printable_path(item['source'])} was edited in the vault since "
                f"its import; {would or ''}left as it is")
    for item in result.renamed:
        say(f"  > {printable_path(item['from'])} -> {printable_path(item['to'])}: the same text under a new path"
            + ("; its note moved, links kept" if item.get("moved") else "" if would else
               "; its note stays where it is until --prune moves it"))
    for item in result.relinked:
        say(f"  > {printable_path(item['from'])} -> {printable_path(item['to'])}: its note was moved in the vault; "
            + ("its links would follow it" if would else "its links followed it (`memlink undo` takes them back)"))
    pruned, kept = set(result.pruned), {item["source"] for item in result.edited}
    for item in result.deleted:
        what = (f"{would}removed" if item["source"] in pruned else f"{would}kept (edited)" if item["source"] in kept
                else f"{would}kept (--prune removes it)")
        say(f"  - {printable_path(item['path'])}: no longer in the folder; {printable_path(item['source'])} {what}")
    if result.pruned_links:
        undo = "" if would else " (`memlink undo` puts them back)"
        say(f"  - {would}removed with those notes: their {counted(len(result.pruned_links), 'link')} to notes that stay{undo}")
        for link in result.pruned_links:
            say(f"      {printable_path(link['from'])} -[{link['type']}]-> {printable_path(link['to'])}")


def _print_dry_run(result: BatchResult) -> None:
    """What an ingest would change; nothing was written."""
    changed = set(result.changed)
    for r in result.files:
        say(f"  {'~' if r.source_uri in changed else '+'} {printable_path(r.path)} -> {printable_path(r.source_uri or '')}")
    for uri in result.copied:
        say(f"  + {printable_path(uri)} (attachment)")
    _print_sync(result, "would be ")
    print(f"dry run, nothing written: {len(result.files) - len(changed)} new, {len(changed)} changed, "
          f"{len(result.skipped)} unchanged or skipped, {len(result.edited)} edited in the vault, "
          f"{len(result.deleted)} deleted, {len(result.renamed)} renamed, {len(result.copied)} attachments to copy")


def cmd_import_chat(args: argparse.Namespace) -> int:
    from engine.sessions.importer import import_chat, turn_extractor

    vault = open_vault(args)
    extractor = turn_extractor(vault)
    report = import_chat(vault, args.file, extractor, progress=None if args.json else progress("extracting turns"),
                         fmt=args.fmt, me=args.me, dates=args.dates)
    for line in vault.warnings:  # e.g. a bad line of a session's log, left out
        notice(line)
    if args.json:
        say_json(report.to_json())
    else:
        fmt = f" ({report.format})" if report.format != "jsonl" else ""
        print(f"{counted(report.sessions, 'chat session')}{fmt}, {counted(report.events_added, 'new message')}, "
              f"{counted(report.turns, 'turn')}: "
              f"{report.extracted} extracted for recall, {report.already} already known, {len(report.failed)} failed "
              f"[provider: {report.provider}]")
        if report.extracted:
            say("  notes and links come from `memlink commit --all` (or ctrl+s in the app's chat pane)")
        if line := report.model_line():
            say(f"  {line}")
        for line in report.left_out_lines():  # kinds named by the export (a role, a content type): data
            say(f"  {line}")
        for failure in report.failed:
            say(f"  ! {failure}")
        if line := report.undated_line():  # (the time stamps are data: printable)
            say(f"  ! {line}")
        if report.fallback:
            say(f"  ! model: {report.fallback}")
    return EXIT_PARTIAL if report.failed else 0
