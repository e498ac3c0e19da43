"""Search and recall: `search`, `recall`, `reindex`."""

from __future__ import annotations

import argparse
from pathlib import Path

from engine import MemlinkError
from engine.llm.fence import one_line
from engine.model.text import counted, shown_text, snippet, tokenize

from .wiring import UsageError, notice, open_vault, positive, printable_path, say, say_json, synced_index


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    s = sub.add_parser("search", parents=[common], help="hybrid search: vectors + keywords + the link graph")
    s.add_argument("query", help="what to look for, in words")
    s.add_argument("--k", type=positive, default=10, help="number of results (default 10)")
    s.add_argument("--type", action="append", dest="types", metavar="T", help="only this memory type (repeatable)")
    s.add_argument("--no-graph", action="store_true", help="no propagation over links")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_search)

    s = sub.add_parser("reindex", parents=[common], help="bring the search indexes (--full rebuilds them) and the link index up to date")
    s.add_argument("--full", action="store_true", help="rebuild from scratch")
    s.set_defaults(func=cmd_reindex)

    s = sub.add_parser("recall", parents=[common], help="recall past chat turns relevant to a question")
    s.add_argument("query", nargs="?", help="the question (or --batch)")
    s.add_argument("--session", help="only turns of this chat session")
    s.add_argument("--k", type=positive, default=5, help="number of turns (default 5)")
    s.add_argument("--messages", type=positive, metavar="N",
                   help="instead of --k: the best turns and windows of turns holding at most N messages in all")
    s.add_argument("--batch", type=Path, help="a file with one question per line; answers one JSON line each")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_recall)


def cmd_search(args: argparse.Namespace) -> int:
    vault = open_vault(args)
    from engine.retrieve.search import search  # (numpy, hnswlib, tantivy: only the commands that search load them)

    index, _report = synced_index(vault, quiet=args.json)
    types = set(args.types) if args.types else None
    for t in types or ():
        vault.schema(t)  # unknown type -> clear error
    hits = search(vault, args.query, k=args.k, types=types, use_graph=not args.no_graph, index=index, log=True)
    vault.close()
    if args.json:
        say_json([h.to_json() for h in hits])
        return 0
    if not hits:
        print("no results")
    elif hits[0].weak:
        print("weak matches: the notes hold too few of the question's words; these are only close in meaning")
    for i, h in enumerate(hits, 1):
        say(f"{i:>2}. {h.score:.3f}  {one_line(h.title)}  ({h.memory_type} · {printable_path(h.uri)}"
            f"{f' · {h.supersession}' if h.supersession else ''})")
        say(f"      found by: {h.route}")
        if h.snippet:  # (its links as the words they show, as the app underlines them; --json keeps them)
            say(f"      {shown_text(h.snippet)}")
        for e in h.evidence:
            say(f"      ↳ derived: {one_line(e.title)}  ({e.memory_type} · {printable_path(e.uri)})")
    return 0


def cmd_reindex(args: argparse.Namespace) -> int:
    vault = open_vault(args)
    index, report = synced_index(vault, full=args.full)
    if index.unwritten:  # (searches go on in memory; a reindex is for the files)
        raise MemlinkError(index.unwritten)
    why = f" ({report.reason})" if report.rebuilt else ""
    print(f"indexed {counted(index.status()['notes_indexed'], 'note')}, {counted(len(index.vectors), 'chunk')}: "
          f"{report.added} added, "
          f"{report.updated} updated, {report.removed} removed in {report.seconds:.2f}s"
          f"{' — rebuilt' + why if report.rebuilt else ''}")
    folders = len(vault.links.folders())  # (the sync brought every folder it walked in step)
    links = vault.links.stats(top=0)[0]
    print(f"link index: {links} link{'s' if links != 1 else ''} in {folders} folder{'s' if folders != 1 else ''}")
    vault.close()
    return 0


def cmd_recall(args: argparse.Namespace) -> int:
    from engine.sessions.log import session_uri
    from engine.sessions.recall import TurnMemory, said

    if not args.query and not args.batch:
        raise UsageError("give a question, or --batch FILE")
    vault = open_vault(args)
    if args.session and not vault.exists(session_uri(args.session)):
        raise MemlinkError(f"no session {args.session!r} (looked for {session_uri(args.session)})")
    memory = TurnMemory.for_vault(vault)
    for line in vault.warnings:  # e.g. a bad line of a session log, left out
        notice(line)
    if args.batch:
        for line in args.batch.read_text(encoding="utf-8").splitlines():
            if line.strip():
                hits = memory.recall(line.strip(), k=args.k, messages=args.messages, session=args.session)
                say_json({"query": line.strip(), "hits": [h.to_json() for h in hits]}, indent=None)
        return 0
    hits = memory.recall(args.query, k=args.k, messages=args.messages, session=args.session)
    if args.json:
        say_json([h.to_json() for h in hits])
        return 0
    if not hits:
        print("nothing relevant recalled")
    asked = set(tokenize(args.query))
    for i, (h, words) in enumerate(zip(hits, said(vault, hits), strict=True), 1):
        day = f"  said {h.day()}" if h.when else ""
        say(f"{i}. {h.score:.3f}  {h.session}{day}  [{', '.join(h.sources)}]  found by: {'; '.join(h.routes)}")
        say(f"   {one_line(h.summary)}")
        for who, text in words:  # (a long message: the part holding the question's words)
            say(f"   {one_line(who)}: {one_line(text if len(text) <= 200 else snippet(text, asked, width=200))}")
        for t in h.triples[:3]:
            say(f"   ({t['subject']} — {t['predicate']} — {t['object']})")
    return 0
