"""Dream, lint and review: `dream`, `lint`, `review`, `undo`, `check`."""

from __future__ import annotations

import argparse
import sys

from engine import MemlinkError
from engine.lint.report import CATEGORIES
from engine.model.text import counted
from engine.storage.atomic import disk_full

from .wiring import (
    EXIT_BUSY,
    EXIT_PARTIAL,
    EXIT_PROBLEMS,
    UsageError,
    open_vault,
    printable_path,
    progress,
    provider,
    say,
    say_json,
)


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    s = sub.add_parser("dream", parents=[common],
                       help="find questions in what changed and write reports (cron-friendly)")
    s.add_argument("--dry-run", action="store_true", help="only list the topics found")
    s.add_argument("--json", action="store_true")
    s.add_argument("--provider", choices=["rules", "ollama"], help="default: Ollama when it runs, else rules")
    s.add_argument("--wait", type=float, default=0.0,
                   help="seconds to wait if another dream is running (default: exit 4)")
    s.add_argument("--budget", type=_seconds, metavar="SECONDS",
                   help="start no topic after this many seconds and cut a model call still waiting then; "
                        "the rest wait for the next run "
                        "(default: dream.budget_seconds in memlink.yaml, 600)")
    s.set_defaults(func=cmd_dream)

    s = sub.add_parser("ask", parents=[common], help="file a research question for the next dream; prints its uri")
    s.add_argument("question", help="the question, in words")
    s.add_argument("--requirement", help="what a good answer covers (kept with the question)")
    s.set_defaults(func=cmd_ask)

    s = sub.add_parser("lint", parents=[common], help="lint the vault, write dashboards/ (exit 3 when errors exist)")
    s.add_argument("--json", action="store_true")
    s.add_argument("--fix", action="store_true", help="safe repairs only (one-sided links, links to missing notes)")
    s.add_argument("--full", action="store_true", help="look at everything again, not only what changed since the last run")
    s.add_argument("--all", action="store_true",
                   help=f"list every finding (default: the first {SHOWN} errors and warnings of each check; "
                        "freshness, provenance, low weight, orphans and open questions one line each)")
    s.add_argument("--check", action="append", choices=CATEGORIES, metavar="NAME",
                   help="list every finding of this check (repeatable)")
    s.set_defaults(func=cmd_lint)

    s = sub.add_parser("review", parents=[common], help="resolve a contradiction between notes A and B")
    s.add_argument("a", metavar="A", help="one note of the contradiction (a uri)")
    s.add_argument("b", metavar="B", help="the other note (a uri)")
    s.add_argument("--action", required=True, choices=["keep-a", "keep-b", "merge", "dismiss", "research"],
                   help="keep A (B superseded), keep B, merge into A (--text), dismiss (the link becomes related_to), "
                   "or file a research question")
    s.add_argument("--text", help="the merged text (for --action merge: it replaces A's, and A is the note kept)")
    s.add_argument("--dry-run", action="store_true", help="print what the action would change; write nothing")
    s.set_defaults(func=cmd_review)

    s = sub.add_parser("undo", parents=[common], help="reverse the last action: a review, a link written, updated or removed, a "
                       "move, the notes an ingest --prune removed or the links a sync removed, an MCP write but ask")
    s.set_defaults(func=cmd_undo)

    s = sub.add_parser("check", parents=[common], help="consistency checks (exit 3 when errors are found)")
    s.add_argument("--json", action="store_true")
    s.add_argument("--fix", action="store_true",
                   help="first move bad link entries to .relations.rejected.jsonl beside their sidecar, then safe repairs")
    s.add_argument("--full", action="store_true", help="look at everything again, not only what changed since the last run")
    s.set_defaults(func=cmd_check)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds: {text!r}")
    return value


def cmd_dream(args: argparse.Namespace) -> int:
    """Exit 0 when every topic started was answered, EXIT_PARTIAL (5) when some topic
    failed, 1 (by `run`) when the dream could not run, 4 when another dream runs."""
    from engine.dream import DreamBusy, dream

    vault = open_vault(args, read_only=args.dry_run)
    llm = None
    if args.provider != "rules":
        chosen = provider(vault, force=args.provider)
        if args.provider == "ollama" and not chosen.health.ok:
            raise MemlinkError(chosen.health.summary)
        llm = chosen.llm
    try:
        report = dream(vault, provider=llm, dry_run=args.dry_run, wait=args.wait, budget=args.budget,
                       progress=None if args.json else progress("dreaming"))
    except DreamBusy as exc:
        say(f"memlink: busy: {exc}", file=sys.stderr)
        return EXIT_BUSY
    vault.close()
    if args.json:
        say_json(report.to_json())
        return EXIT_PARTIAL if report.failed else 0
    say(f"dream ({report.provider}{', dry run' if report.dry_run else ''}): {counted(len(report.topics), 'topic')}, "
        f"{counted(len(report.written), 'report')} written, {len(report.skipped)} skipped")
    for topic in report.topics:
        say(f"  ? [{topic['kind']}] {topic['question']}")
    for uri in report.written:
        say(f"  + {printable_path(uri)}")
    for question in report.no_report:
        say(f"  - no report: {question}")
    for question in report.nothing_yet:
        say(f"  - nothing known yet (the question stays open): {question}")
    for why in report.skipped:
        say(f"  ! {why}")
    if report.fallback:
        say(f"  ! model: {report.fallback}")
    if report.failed:
        say(f"{counted(len(report.failed), 'topic')} failed; they are offered again next run", file=sys.stderr)
        return EXIT_PARTIAL
    return 0


def cmd_ask(args: argparse.Namespace) -> int:
    from engine.dream import ask

    if not args.question.strip():
        raise UsageError('the question is empty: say it in words, e.g. memlink ask "Which tea should I try next?"')
    vault = open_vault(args)
    uri = ask(vault, args.question, args.requirement)
    vault.close()
    say(uri)
    return 0


SHOWN = 20  # errors and warnings listed per check by `memlink lint` (--all: every one)


def cmd_lint(args: argparse.Namespace) -> int:
    from engine.lint.report import GROUPED, fix, lint, rank, write_dashboards

    vault = open_vault(args)
    fixed = fix(vault) if args.fix else []
    report = lint(vault, full=args.full)
    with report:
        # A read-only vault, or one on a full disk, is still linted; its dashboards are not
        # written (said below).
        unwritten, written = (vault.read_only_reason if vault.read_only else None), []
        if unwritten is None:
            try:
                written = write_dashboards(vault, report)
            except OSError as exc:
                if disk_full(exc) is None:
                    raise
                unwritten = "the disk is full"
        if args.json:
            say_json({"errors": report.errors, "counts": report.counts, "fixed": fixed, "dashboards": written,
                      "findings": [f.as_dict() for f in report.findings]})
            return EXIT_PROBLEMS if report.errors else 0
        for line in fixed:
            say(f"fixed: {printable_path(line)}")
        # Errors first, then contradictions, then other warnings; a 100k-note vault has tens
        # of thousands: the first SHOWN of each check, and how many more. Grouped checks are
        # one line each unless asked for (--all, --check).
        asked = set(args.check or ())
        listed, more, groups = [], [], []
        for check in sorted(report.counts):
            if asked and check not in asked:
                continue
            expanded = args.all or check in asked
            if check in GROUPED and not expanded:
                continue
            total = report.counts[check] if expanded else report.serious.get(check, 0)
            rows = [f for f in report.page([check], None if expanded else SHOWN) if expanded or f.severity != "info"]
            listed += rows
            if total > len(rows):
                more.append(f"{total - len(rows)} more {check}")
        if not asked and not args.all:
            groups = report.groups()
        for f in sorted(listed, key=rank):  # (each page is in order)
            other = f" <-> {f.other}" if f.other else ""
            say(printable_path(f"{f.severity:<7} {f.check:<15} {f.uri}{other}: {f.text}"))
        for g in groups:
            say(f"{g.worst:<7} {g.check:<15} {g.text} (`memlink lint --check {g.check}` lists them)")
        if more:
            say(f"… and {', '.join(more)}: `memlink lint --all` lists every one")
        counts = ", ".join(f"{k} {v}" for k, v in sorted(report.counts.items()))
        where = f"dashboards not written: {unwritten}" if unwritten else f"dashboards in {vault.root / 'dashboards'}"
        say(f"{report.errors} errors; {counts or 'nothing to report'}; {where}")
        return EXIT_PROBLEMS if report.errors else 0


def cmd_review(args: argparse.Namespace) -> int:
    from engine.review.actions import preview, review

    if args.action == "merge" and not (args.text or "").strip():
        raise UsageError("--action merge needs --text: the merged text that note A keeps")
    if args.action != "merge" and args.text is not None:
        raise UsageError(f"--text is the merged text: --action {args.action} takes none")
    vault = open_vault(args)
    if args.dry_run:
        plan = preview(vault, args.a, args.b, args.action, text=args.text)
        vault.close()
        for line in plan.lines():
            say(line)
        return 0
    result = review(vault, args.a, args.b, args.action, text=args.text)
    vault.close()
    say(result.message)
    return 0


def cmd_undo(args: argparse.Namespace) -> int:
    from engine.review.actions import undo

    vault = open_vault(args)
    say(undo(vault))
    vault.close()
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from engine.lint.memo import check
    from engine.lint.report import fix

    vault = open_vault(args)
    fixed = fix(vault) if args.fix else []
    problems = check(vault, full=args.full)
    errors = [p for p in problems if p.severity == "error"]
    if args.json:
        rows = [p.as_dict() for p in problems]
        say_json({"fixed": fixed, "findings": rows} if args.fix else rows)
    else:
        for line in fixed:
            say(f"fixed: {printable_path(line)}")
        notes = len(vault.catalog)
        links = vault.links.stats(top=0)[0]  # (the check just brought every folder in step)
        for p in problems:
            say(printable_path(f"{p.severity:<7} {p.code:<20} {p.uri}: {p.message}"))
        print(f"{counted(notes, 'note')}, {counted(links, 'link')}: {counted(len(errors), 'error')}, "
              f"{counted(len(problems) - len(errors), 'warning')}")
    return EXIT_PROBLEMS if errors else 0
