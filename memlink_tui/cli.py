"""The `memlink` command line. Errors: one line on stderr, non-zero exit."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from engine import LinkType, MemlinkError, Vault
from engine.text import printable

from .paths import copy_sample_vault, default_vault

EXIT_ERROR = 1
EXIT_PROBLEMS = 3


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return value


def _parser() -> argparse.ArgumentParser:
    vault_help = "vault folder (default: $MEMLINK_VAULT or the per-user data dir)"
    p = argparse.ArgumentParser(prog="memlink", description="Offline personal memory workstation.")
    p.add_argument("--vault", type=Path, help=vault_help)
    # Subcommands accept --vault too; SUPPRESS keeps them from erasing one given earlier.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--vault", type=Path, default=argparse.SUPPRESS, help=vault_help)
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    sub.add_parser("app", parents=[common], help="open the app (the default command)")
    s = sub.add_parser("init", parents=[common], help="create an empty vault at --vault")
    s.add_argument("--name", help="a display name for the vault")
    s = sub.add_parser("demo", parents=[common], help="copy the sample vault to a fresh folder and open it")
    s.add_argument("--no-app", action="store_true", help="only make the copy and print its path")

    s = sub.add_parser("show", parents=[common], help="a note: frontmatter, rendered body, links, backlinks")
    s.add_argument("uri")
    s.add_argument("--json", action="store_true")

    s = sub.add_parser("links", parents=[common], help="a note's links and/or backlinks")
    s.add_argument("uri")
    s.add_argument("--direction", choices=["links", "backlinks", "both"], default="both")
    s.add_argument("--json", action="store_true")

    s = sub.add_parser("link", parents=[common], help="link two notes (written on both sides)")
    s.add_argument("from_uri", metavar="FROM")
    s.add_argument("to_uri", metavar="TO")
    s.add_argument("--type", required=True, choices=[t.value for t in LinkType], dest="link_type")
    s.add_argument("--weight", type=float, default=1.0)
    s.add_argument("--match-text")
    s.add_argument("--description", default="")
    s.add_argument("--t-field")
    s.add_argument("--t-lines", help="line range(s) in the target field, e.g. 3-5 or 3-5,8")
    s.add_argument("--json", action="store_true")

    s = sub.add_parser("unlink", parents=[common], help="remove links FROM -> TO (both sides)")
    s.add_argument("from_uri", metavar="FROM")
    s.add_argument("to_uri", metavar="TO")
    s.add_argument("--type", choices=[t.value for t in LinkType], dest="link_type")

    s = sub.add_parser("search", parents=[common], help="hybrid search: vectors + keywords + the link graph")
    s.add_argument("query")
    s.add_argument("--k", type=_positive, default=10, help="number of results (default 10)")
    s.add_argument("--type", action="append", dest="types", metavar="T", help="only this memory type (repeatable)")
    s.add_argument("--no-graph", action="store_true", help="no propagation over links")
    s.add_argument("--json", action="store_true")

    s = sub.add_parser("graph-query", parents=[common], help="notes linked to a note, by type, direction and depth")
    s.add_argument("uri")
    s.add_argument("--type", action="append", dest="types", choices=[t.value for t in LinkType], metavar="T")
    s.add_argument("--direction", choices=["in", "out", "both"], default="both")
    s.add_argument("--depth", type=_positive, default=1)
    s.add_argument("--json", action="store_true")

    s = sub.add_parser("reindex", parents=[common], help="bring the search indexes up to date (--full rebuilds)")
    s.add_argument("--full", action="store_true", help="rebuild from scratch")

    s = sub.add_parser("commit", parents=[common], help="extract memories from a chat session's new turns")
    s.add_argument("session", help="session id (sessions/<id>.jsonl)")
    s.add_argument("--json", action="store_true")

    s = sub.add_parser("ingest", parents=[common], help="import text/markdown files and folders as sources, link their "
                       "references, extract memories")
    s.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="files or folders (walked recursively)")
    s.add_argument("--no-wiki", action="store_true", help="keep the files as sources only; extract nothing")
    s.add_argument("--json", action="store_true")

    s = sub.add_parser("import-chat", parents=[common], help="import a chat transcript (JSONL) as sessions and turn memories")
    s.add_argument("file", type=Path)
    s.add_argument("--json", action="store_true")

    s = sub.add_parser("recall", parents=[common], help="recall past chat turns relevant to a question")
    s.add_argument("query", nargs="?")
    s.add_argument("--session")
    s.add_argument("--k", type=_positive, default=5)
    s.add_argument("--batch", type=Path, help="a file with one question per line; answers one JSON line each")
    s.add_argument("--json", action="store_true")

    s = sub.add_parser("dream", parents=[common], help="find questions in what changed and write reports (cron-friendly)")
    s.add_argument("--dry-run", action="store_true", help="only list the topics found")
    s.add_argument("--json", action="store_true")
    s.add_argument("--provider", choices=["rules", "ollama"], help="default: Ollama when it runs, else rules")
    s.add_argument("--wait", type=float, default=0.0, help="seconds to wait if another dream is running (default: exit 4)")

    s = sub.add_parser("lint", parents=[common], help="lint the vault, write dashboards/ (exit 3 when errors exist)")
    s.add_argument("--json", action="store_true")
    s.add_argument("--fix", action="store_true", help="safe repairs only (one-sided links, links to missing notes)")

    s = sub.add_parser("review", parents=[common], help="resolve a contradiction between notes A and B")
    s.add_argument("a", metavar="A")
    s.add_argument("b", metavar="B")
    s.add_argument("--action", required=True, choices=["keep-a", "keep-b", "merge", "dismiss", "research"])
    s.add_argument("--text", help="the merged text (for --action merge)")

    sub.add_parser("undo", parents=[common], help="reverse the last review action")

    sub.add_parser("doctor", parents=[common], help="check dependencies, embedding model, Ollama and the vault; print fixes")

    s = sub.add_parser("check", parents=[common], help="consistency checks (exit 3 when errors are found)")
    s.add_argument("--json", action="store_true")
    return p


def _link_dict(link) -> dict:
    return link.model_dump(mode="json")


def _print_links(links, heading: str) -> None:
    print(f"{heading} ({len(links)})")
    for l in links:
        other = l.to_uri if l.direction == "links" else l.from_uri
        arrow = "->" if l.direction == "links" else "<-"
        extra = f"  [{l.t_field}:{l.t_line_ranges}]" if l.t_line_ranges else ""
        legacy = "  (legacy entry)" if l.legacy else ""
        print(f"  {arrow} {l.link_type.value:<13} {l.weight:.2f}  {other}{extra}{legacy}")
        if l.description:
            print(f"       {l.description}")


def _open(args) -> Vault:
    return Vault.open(args.vault or default_vault())


def _run_app(vault_path: Path) -> int:
    from .app import MemlinkApp  # textual is imported only when the app runs

    path = Path(vault_path).expanduser()
    if not (path / "memlink.yaml").exists() and (not path.exists() or (path.is_dir() and not any(path.iterdir()))):
        MemlinkApp(None, vault_path=path).run()  # first run: offer to create a vault or open the demo
        return 0
    vault = Vault.open(path)
    MemlinkApp(vault).run()
    return 0


def cmd_show(args) -> int:
    vault = _open(args)
    note = vault.read_note(args.uri)
    rendered = vault.render_note(note.uri)
    links = vault.get_file_links(note.uri, "links")
    backlinks = vault.get_file_links(note.uri, "backlinks")
    if args.json:
        print(json.dumps({
            "uri": note.uri,
            "memory_type": note.memory_type,
            "title": vault.title(note),
            "created_at": note.created_at,
            "updated_at": note.updated_at,
            "fields": note.fields,
            "body": note.body,
            "rendered": rendered.text,
            "missing_match_text": [l.id for l in rendered.missing],
            "links": [_link_dict(l) for l in links],
            "backlinks": [_link_dict(l) for l in backlinks],
        }, ensure_ascii=False, indent=2))
        return 0
    print(f"{note.uri}  ({note.memory_type})  created {note.created_at}  updated {note.updated_at}")
    for k, v in note.fields.items():
        if k != "content":
            print(f"  {k}: {v}")
    print()
    print(rendered.text.rstrip())
    print()
    _print_links(links, "links")
    _print_links(backlinks, "backlinks")
    return 0


def cmd_links(args) -> int:
    vault = _open(args)
    vault.read_note(args.uri)  # a clear error for a missing note
    links = vault.get_file_links(args.uri, args.direction)
    if args.json:
        print(json.dumps([_link_dict(l) for l in links], ensure_ascii=False, indent=2))
    else:
        if args.direction in ("links", "both"):
            _print_links([l for l in links if l.direction == "links"], "links")
        if args.direction in ("backlinks", "both"):
            _print_links([l for l in links if l.direction == "backlinks"], "backlinks")
    return 0


def cmd_link(args) -> int:
    vault = _open(args)
    link = vault.link(
        args.from_uri,
        args.to_uri,
        args.link_type,
        weight=args.weight,
        t_field=args.t_field,
        t_line_ranges=args.t_lines,
        match_text=args.match_text,
        description=args.description,
    )
    if args.json:
        print(json.dumps(_link_dict(link), ensure_ascii=False, indent=2))
    else:
        print(f"linked {link.from_uri} -[{link.link_type.value} {link.weight:.2f}]-> {link.to_uri}  ({link.id})")
    return 0


def cmd_unlink(args) -> int:
    vault = _open(args)
    n = vault.unlink(args.from_uri, args.to_uri, args.link_type)
    print(f"removed {n} link{'s' if n != 1 else ''} from {args.from_uri} to {args.to_uri}")
    return 0


def cmd_check(args) -> int:
    vault = _open(args)
    problems = vault.check()
    errors = [p for p in problems if p.severity == "error"]
    if args.json:
        print(json.dumps([p.__dict__ for p in problems], ensure_ascii=False, indent=2))
    else:
        notes = len(vault.list_notes())
        links = sum(1 for _ in vault.all_links())
        for p in problems:
            print(f"{p.severity:<7} {p.code:<20} {p.uri}: {p.message}")
        print(f"{notes} notes, {links} links: {len(errors)} errors, {len(problems) - len(errors)} warnings")
    return EXIT_PROBLEMS if errors else 0


def _synced_index(vault: Vault, quiet: bool):
    from engine.index import SearchIndex

    index = SearchIndex.for_vault(vault)
    report = index.sync(progress=None if quiet else _progress("indexing"))
    for notice in report.notices:
        print(f"memlink: note: {notice}", file=sys.stderr)
    return index


def _progress(label: str):
    """A progress callback drawing a bar on stderr when it is a terminal."""
    if not sys.stderr.isatty():
        return None
    from rich.progress import Progress

    state: dict = {}

    def update(done: int, total: int) -> None:
        if "bar" not in state:
            state["bar"] = Progress(transient=True)
            state["bar"].start()
            state["task"] = state["bar"].add_task(label, total=total)
        state["bar"].update(state["task"], completed=done, total=total)
        if done >= total:
            state.pop("bar").stop()

    return update


def cmd_search(args) -> int:
    from engine.search import search

    vault = _open(args)
    index = _synced_index(vault, quiet=args.json)
    types = set(args.types) if args.types else None
    for t in types or ():
        vault.schema(t)  # unknown type -> clear error
    hits = search(vault, args.query, k=args.k, types=types, use_graph=not args.no_graph, index=index, log=True)
    vault.close()
    if args.json:
        print(json.dumps([h.to_json() for h in hits], ensure_ascii=False, indent=2))
        return 0
    if not hits:
        print("no results")
    elif hits[0].weak:
        print("weak matches: the notes hold too few of the question's words; these are only close in meaning")
    for i, h in enumerate(hits, 1):  # note text is data: printed without its control sequences
        print(printable(f"{i:>2}. {h.score:.3f}  {h.title}  ({h.memory_type} · {h.uri})"))
        print(printable(f"      found by: {h.route}"))
        if h.snippet:
            print(printable(f"      {h.snippet}"))
        for e in h.evidence:
            print(printable(f"      ↳ derived: {e.title}  ({e.memory_type} · {e.uri})"))
    return 0


def cmd_graph_query(args) -> int:
    from engine.graph import LinkGraph

    vault = _open(args)
    vault.read_note(args.uri)
    graph = LinkGraph.for_vault(vault)
    types = {LinkType(t) for t in args.types} if args.types else None
    rows = graph.neighbourhood(vault.read_note(args.uri).uri, types, args.direction, max(1, args.depth))
    catalog = vault.catalog()
    if args.json:
        print(json.dumps([
            {"uri": s.dst, "title": catalog[s.dst].title if s.dst in catalog else s.dst, "depth": hop,
             "from": s.src, "direction": "out" if s.direction == "links" else "in",
             "link_type": s.link.link_type.value, "weight": s.link.weight, "description": s.link.description}
            for hop, s in rows
        ], ensure_ascii=False, indent=2))
        return 0
    if not rows:
        print("no linked notes")
    for hop, s in rows:
        arrow = "->" if s.direction == "links" else "<-"
        title = catalog[s.dst].title if s.dst in catalog else s.dst
        print(f"{'  ' * (hop - 1)}{arrow} {s.link.link_type.value:<13} {s.link.weight:.2f}  {title}  ({s.dst})")
    return 0


def cmd_reindex(args) -> int:
    from engine.index import SearchIndex

    vault = _open(args)
    index = SearchIndex.for_vault(vault)
    report = index.sync(progress=_progress("indexing"), full=args.full)
    for notice in report.notices:
        print(f"memlink: note: {notice}", file=sys.stderr)
    why = f" ({report.reason})" if report.rebuilt else ""
    print(f"indexed {len(index.indexed)} notes, {len(index.vectors)} chunks: {report.added} added, "
          f"{report.updated} updated, {report.removed} removed in {report.seconds:.2f}s"
          f"{' — rebuilt' + why if report.rebuilt else ''}")
    vault.close()
    return 0


def _print_report(report, heading: str) -> None:
    """A run's report; what came from notes or imported files is printed without its
    terminal control sequences."""
    def say(text: str) -> None:
        print(printable(text))

    say(f"{heading}: {report.summary()}  [provider: {report.provider}]")
    for uri in report.created:
        say(f"  + {uri}")
    for change in report.changed:
        fields = ", ".join(k for k in change["after"] if change["before"].get(k) != change["after"].get(k))
        say(f"  ~ {change['uri']}  ({fields})")
    for link in report.links_added:
        relation = link.get("relation") or ""
        shown = f"{link['type']} · {relation}" if relation and relation != "referenced in the text" else link["type"]
        say(f"  -> {link['from']} -[{shown}]-> {link['to']}")
    for ref in report.unresolved:
        say(f"  ! reference to a missing note: {ref}" if "(ambiguous:" not in ref else f"  ! ambiguous reference: {ref}")
    for problem in report.problems:
        say(f"  ! {problem}")


def cmd_commit(args) -> int:
    from engine.extract.inputs import choose_extractor, commit_session

    vault = _open(args)
    extractor, health = choose_extractor(vault)
    if not args.json:
        print(f"provider: {health.provider} — {health.detail}", file=sys.stderr)
    report = commit_session(vault, args.session, extractor)
    vault.close()
    if args.json:
        print(json.dumps(report.to_json() if report else None, ensure_ascii=False, indent=2))
    elif report is None:
        print(f"session {args.session}: nothing new to commit")
    else:
        _print_report(report, f"session {args.session}")
    return 0


def cmd_ingest(args) -> int:
    from engine.extract.batch import ingest_batch
    from engine.extract.inputs import choose_extractor

    vault = _open(args)
    extractor, health = choose_extractor(vault)
    if not args.json:
        print(f"provider: {health.provider} — {health.detail}", file=sys.stderr)
    result = ingest_batch(vault, args.paths, wiki=not args.no_wiki, extractor=extractor,
                          progress=None if args.json else _progress("importing"))
    vault.close()
    for failure in result.failed:
        print(printable(f"memlink: error: {failure['error']}"), file=sys.stderr)
    if args.json:
        print(json.dumps(result.to_json(), ensure_ascii=False, indent=2))
        return EXIT_ERROR if result.failed else 0
    for r in result.files:
        if not r.skipped:
            _print_report(r.report, r.path)
    for skip in result.skipped:
        print(printable(f"{skip['path']}: skipped, {skip['why']}"))
    imported = sum(1 for r in result.files if not r.skipped)
    page_links = len(result.page_links())
    others = len(result.links_added) - page_links
    print(f"{imported} files imported, {len(result.skipped)} skipped, {len(result.failed)} failed; "
          f"{page_links} links between pages" + (f" (+{others} from extracted notes)" if others else "") +
          f", {len(result.unresolved)} unresolved references"
          + (f", {len(result.ambiguous)} ambiguous" if result.ambiguous else "") + f" ({result.seconds:.1f}s)")
    return EXIT_ERROR if result.failed else 0


def cmd_import_chat(args) -> int:
    from engine.sessions.importer import import_chat, turn_extractor

    vault = _open(args)
    extractor = turn_extractor(vault)
    report = import_chat(vault, args.file, extractor, progress=None if args.json else _progress("extracting turns"))
    if args.json:
        print(json.dumps(report.to_json(), ensure_ascii=False, indent=2))
    else:
        print(f"{report.sessions} session(s), {report.events_added} new events, {report.turns} turns: "
              f"{report.extracted} extracted, {report.already} already known, {len(report.failed)} failed "
              f"[provider: {report.provider}]")
        for failure in report.failed:
            print(f"  ! {failure}")
    return 0


def cmd_recall(args) -> int:
    from engine.sessions.recall import TurnMemory

    vault = _open(args)
    memory = TurnMemory.for_vault(vault)
    if args.batch:
        for line in args.batch.read_text(encoding="utf-8").splitlines():
            if line.strip():
                hits = memory.recall(line.strip(), k=args.k, session=args.session)
                print(json.dumps({"query": line.strip(), "hits": [h.to_json() for h in hits]}, ensure_ascii=False))
        return 0
    if not args.query:
        raise MemlinkError("give a question, or --batch FILE")
    hits = memory.recall(args.query, k=args.k, session=args.session)
    if args.json:
        print(json.dumps([h.to_json() for h in hits], ensure_ascii=False, indent=2))
        return 0
    if not hits:
        print("nothing relevant recalled")
    from engine.text import printable

    for i, h in enumerate(hits, 1):  # chat text is data: no escape sequence reaches the terminal
        print(printable(f"{i}. {h.score:.3f}  {h.session}  [{', '.join(h.sources)}]  found by: {'; '.join(h.routes)}"))
        print(printable(f"   {h.summary}"))
        print(printable(f"   Q: {h.question[:200]}"))
        print(printable(f"   A: {h.answer[:200]}"))
        for t in h.triples[:3]:
            print(printable(f"   ({t['subject']} — {t['predicate']} — {t['object']})"))
    return 0


EXIT_BUSY = 4


def cmd_dream(args) -> int:
    from engine.dream import DreamBusy, dream
    from engine.llm.select import provider_status

    vault = _open(args)
    provider = None
    if args.provider != "rules":
        candidate, health = provider_status(vault.config.llm if args.provider is None else
                                            vault.config.llm.model_copy(update={"provider": "ollama"}))
        if args.provider == "ollama" and not health.ok:
            raise MemlinkError(health.detail)
        provider = candidate if health.ok else None
    try:
        report = dream(vault, provider=provider, dry_run=args.dry_run, wait=args.wait,
                       progress=None if args.json else _progress("dreaming"))
    except DreamBusy as exc:
        print(f"memlink: busy: {exc}", file=sys.stderr)
        return EXIT_BUSY
    vault.close()
    if args.json:
        print(json.dumps(report.to_json(), ensure_ascii=False, indent=2))
        return 0
    print(f"dream ({report.provider}{', dry run' if report.dry_run else ''}): {len(report.topics)} topic(s), "
          f"{len(report.written)} report(s) written, {len(report.skipped)} skipped")
    for topic in report.topics:
        print(f"  ? [{topic['kind']}] {topic['question']}")
    for uri in report.written:
        print(f"  + {uri}")
    for why in report.skipped:
        print(f"  ! {why}")
    return 0


def cmd_lint(args) -> int:
    from engine.lint import fix, lint, write_dashboards

    vault = _open(args)
    fixed = fix(vault) if args.fix else []
    report = lint(vault)
    written = write_dashboards(vault, report)
    if args.json:
        print(json.dumps({"errors": report.errors, "counts": report.counts, "fixed": fixed, "dashboards": written,
                          "findings": [f.__dict__ for f in report.findings]}, ensure_ascii=False, indent=2))
    else:
        for line in fixed:
            print(f"fixed: {line}")
        for f in report.findings:
            if f.severity != "info":
                other = f" <-> {f.other}" if f.other else ""
                print(f"{f.severity:<7} {f.check:<15} {f.uri}{other}: {f.text}")
        counts = ", ".join(f"{k} {v}" for k, v in sorted(report.counts.items()))
        print(f"{report.errors} errors; {counts or 'nothing to report'}; dashboards in {vault.root / 'dashboards'}")
    return EXIT_PROBLEMS if report.errors else 0


def cmd_review(args) -> int:
    from engine.review import review

    vault = _open(args)
    result = review(vault, args.a, args.b, args.action, text=args.text)
    vault.close()
    print(result.message)
    return 0


def cmd_undo(args) -> int:
    from engine.review import undo

    vault = _open(args)
    print(undo(vault))
    vault.close()
    return 0


def cmd_doctor(args) -> int:
    import importlib

    from engine.config import VaultConfig
    from engine.embed import load_embedder
    from engine.llm.select import provider_status

    bad = 0

    def line(ok: bool, what: str, detail: str) -> None:
        nonlocal bad
        bad += 0 if ok else 1
        print(f"{'ok ' if ok else 'FIX'}  {what:<16} {detail}")

    for module in ("textual", "pydantic", "yaml", "jinja2", "tinydb", "networkx", "numpy", "hnswlib", "tantivy", "model2vec", "ollama"):
        try:
            mod = importlib.import_module(module)
            line(True, module, getattr(mod, "__version__", "installed"))
        except ImportError as exc:
            line(False, module, f"missing ({exc}); run ./dev test or pip install -e . to install it")
    try:
        vault = _open(args)
        config = vault.config
    except MemlinkError as exc:
        vault, config = None, VaultConfig(name="defaults")  # still check the model and Ollama
        line(False, "vault", f"{exc}; or open a copy of the demo with `memlink demo`")
    choice = load_embedder(config.embedding.model)
    line(choice.notice is None, "embedding model", choice.notice or f"{choice.embedder.name} ({choice.embedder.dims} dims)")
    _provider, health = provider_status(config.llm)
    line(health.ok, "LLM provider", f"{health.provider}: {health.detail}")
    if vault is None:
        return EXIT_PROBLEMS
    problems = vault.check()
    errors = sum(1 for p in problems if p.severity == "error")
    line(errors == 0, "vault", f"{vault.root}: {len(vault.list_notes())} notes, {errors} errors, "
         f"{len(problems) - errors} warnings" + ("; run `memlink check` for details" if problems else ""))
    for warning in vault.warnings:
        line(False, "vault", warning)
    return EXIT_PROBLEMS if bad else 0


def cmd_init(args) -> int:
    target = args.vault or default_vault()
    vault = Vault.init(target, name=args.name)
    print(f"created an empty vault at {vault.root}")
    return 0


def cmd_demo(args) -> int:
    try:
        target = copy_sample_vault(args.vault)
    except FileExistsError as exc:
        raise MemlinkError(str(exc)) from None
    print(f"sample vault copied to {target}", file=sys.stderr if not args.no_app else sys.stdout)
    if args.no_app:
        return 0
    return _run_app(target)


def cmd_app(args) -> int:
    return _run_app(args.vault or default_vault())


COMMANDS = {
    None: cmd_app,
    "app": cmd_app,
    "init": cmd_init,
    "demo": cmd_demo,
    "show": cmd_show,
    "links": cmd_links,
    "link": cmd_link,
    "unlink": cmd_unlink,
    "check": cmd_check,
    "doctor": cmd_doctor,
    "commit": cmd_commit,
    "lint": cmd_lint,
    "dream": cmd_dream,
    "review": cmd_review,
    "undo": cmd_undo,
    "import-chat": cmd_import_chat,
    "recall": cmd_recall,
    "ingest": cmd_ingest,
    "search": cmd_search,
    "graph-query": cmd_graph_query,
    "reindex": cmd_reindex,
}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except MemlinkError as exc:
        print(f"memlink: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. `memlink search … | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:  # a folder that cannot be created, a read-only vault...
        where = f": {exc.filename}" if exc.filename else ""
        print(f"memlink: error: {exc.strerror or exc}{where}", file=sys.stderr)
        return EXIT_ERROR
    except (ValueError, RuntimeError, UnicodeError) as exc:  # last resort: one line, not a traceback
        print(f"memlink: error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    raise SystemExit(main())
