"""Notes and links: `show`, `links`, `link`, `unlink`, `mv`, `graph-query`."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from engine import LinkError, LinkType, Vault
from engine.model.linktypes import builtin_table
from engine.model.text import counted
from engine.model.yamlio import plain
from engine.storage.render import link_problems

from .wiring import UsageError, line_ranges, notice, open_vault, positive, printable_path, say, say_json, weight

if TYPE_CHECKING:
    from engine.model.links import StoredLink


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    # Link types are the vault's (memlink.yaml may declare more than the built-ins), so
    # they are checked once the vault is open, not by argparse.
    type_help = f"a link type of the vault ({', '.join(builtin_table().names())}, or one memlink.yaml declares)"

    s = sub.add_parser("show", parents=[common], help="a note: frontmatter, rendered body, links, backlinks")
    s.add_argument("uri", help="the note, e.g. entities/caroline.md")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_show)

    s = sub.add_parser("links", parents=[common], help="a note's links and/or backlinks")
    s.add_argument("uri", help="the note, e.g. entities/caroline.md")
    s.add_argument("--direction", choices=["links", "backlinks", "both"], default="both",
                   help="its links, the links to it, or both (default)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_links)

    s = sub.add_parser("link", parents=[common], help="link two notes (written on both sides); a pair linked already "
                       "is refused unless --update")
    s.add_argument("from_uri", metavar="FROM", help="the note the link goes from")
    s.add_argument("to_uri", metavar="TO", help="the note the link goes to")
    s.add_argument("--type", dest="link_type", metavar="TYPE", help=type_help + " (needed for a new link)")
    s.add_argument("--update", action="store_true",
                   help="change the link FROM -> TO has: only the options given, the rest kept; `memlink undo` reverts it")
    s.add_argument("--id", dest="link_id", metavar="LINK_ID",
                   help="with --update: the link to change, when the pair has several (`memlink links --json` lists ids)")
    s.add_argument("--weight", type=weight, help="0 to 1 (a new link: 1.0)")
    s.add_argument("--match-text", help="words of FROM's text the link hangs on (with --update, \"\" removes them)")
    s.add_argument("--description", help="one line on what the link means")
    s.add_argument("--t-field", help="the field of TO the link points into (default: its text field)")
    s.add_argument("--t-lines", type=line_ranges, help="line range(s) in the target field, e.g. 3-5 or 3-5,8")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_link)

    s = sub.add_parser("unlink", parents=[common], help="remove links FROM -> TO (both sides)")
    s.add_argument("from_uri", metavar="FROM", help="the note the link goes from")
    s.add_argument("to_uri", metavar="TO", help="the note the link goes to")
    s.add_argument("--type", dest="link_type", metavar="TYPE", help=type_help)
    s.set_defaults(func=cmd_unlink)

    s = sub.add_parser("mv", parents=[common], help="move or rename a note; every link into and out of it follows "
                       "(both sides, one unit of work, `memlink undo` reverts it), and so do the superseded_by and "
                       "source_uris that reviews and the dream wrote naming it")
    s.add_argument("old", metavar="OLD", help="the note's path (or where it was, when the file was moved by hand)")
    s.add_argument("new", metavar="NEW", help="its new path, or a folder to move it into")
    s.add_argument("--rewrite-wikilinks", action="store_true",
                   help="also rewrite the [[wikilinks]] and markdown links in the linking notes' text that lead to OLD "
                   "(default: list them; an imported page whose file is there keeps its file's text)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_mv)

    s = sub.add_parser("graph-query", parents=[common], help="notes linked to a note, by type, direction and depth")
    s.add_argument("uri", help="the note to start from")
    s.add_argument("--type", action="append", dest="types", metavar="T", help=type_help + "; repeatable")
    s.add_argument("--direction", choices=["in", "out", "both"], default="both",
                   help="follow links into the note, out of it, or both (default)")
    s.add_argument("--depth", type=positive, default=1, help="how many hops (default 1)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_graph_query)


def _link_dict(link: StoredLink) -> dict[str, Any]:
    return link.model_dump(mode="json")


def _print_links(links: list[StoredLink], heading: str) -> None:
    print(f"{heading} ({len(links)})")
    for link in links:
        other = link.to_uri if link.direction == "links" else link.from_uri
        arrow = "->" if link.direction == "links" else "<-"
        extra = f"  [{link.t_field}:{link.t_line_ranges}]" if link.t_line_ranges else ""
        legacy = "  (legacy entry)" if link.legacy else ""
        say(f"  {arrow} {link.link_type.value:<13} {link.weight:.2f}  {printable_path(other)}{extra}{legacy}")
        if link.description:
            say(f"       {link.description}")


def cmd_show(args: argparse.Namespace) -> int:
    vault = open_vault(args)
    if args.json:
        from engine.storage.render import note_data

        data = note_data(vault, args.uri)
        _say_link_problems(data["link_problems"])
        say_json(data)
        return 0
    note = vault.read_note(args.uri)
    rendered = vault.render_note(note.uri)
    links = vault.links.of(note.uri, "links")
    backlinks = vault.links.of(note.uri, "backlinks")
    _say_link_problems(link_problems(vault, note.uri))
    say(f"{printable_path(note.uri)}  ({note.memory_type})  created {note.created_at}  updated {note.updated_at}")
    for line in note.superseded():  # (a review kept another note over it, or over a claim of it)
        say(f"  {line}")
    for k, v in note.fields.items():
        if k != "content":
            say(f"  {k}: {_value(v)}")
    if note.extra:  # its other keys: an imported page's aliases, tags and properties as Obsidian reads them
        say("  frontmatter:")
        for k, v in note.extra.items():
            say(f"    {k}: {_value(v)}")
    print()
    say(rendered.text.rstrip())
    print()
    _print_links(links, "links")
    _print_links(backlinks, "backlinks")
    return 0


def _value(value: object) -> str:
    """A field's value as a person reads it: text as it is, anything else as JSON (a date
    as its text, as `show --json` gives it)."""
    return value if isinstance(value, str) else json.dumps(plain(value), ensure_ascii=False)


def _say_link_problems(why: str | None) -> None:
    """A note on stderr when a note's links may be incomplete (``engine.storage.render.link_problems``)."""
    if why:
        notice(f"{why} — `memlink check --fix` sets bad entries aside")


def cmd_links(args: argparse.Namespace) -> int:
    vault = open_vault(args)
    vault.read_note(args.uri)  # a clear error for a missing note
    links = vault.links.of(args.uri, args.direction)
    _say_link_problems(link_problems(vault, args.uri))
    if args.json:
        say_json([_link_dict(link) for link in links])
    else:
        if args.direction in ("links", "both"):
            _print_links([link for link in links if link.direction == "links"], "links")
        if args.direction in ("backlinks", "both"):
            _print_links([link for link in links if link.direction == "backlinks"], "backlinks")
    return 0


def cmd_link(args: argparse.Namespace) -> int:
    from engine.review.linkwrite import write_link

    if args.link_id and not args.update:
        raise UsageError("--id names the link to change: give it with --update")
    vault = open_vault(args)
    link = write_link(vault, args.from_uri, args.to_uri, link_type(vault, args.link_type) if args.link_type else None,
                      update=args.update, weight=args.weight, t_field=args.t_field, t_line_ranges=args.t_lines,
                      match_text=args.match_text, description=args.description, link_id=args.link_id)
    if args.json:
        say_json(_link_dict(link))
    else:
        verb = "updated" if args.update else "linked"
        say(f"{verb} {printable_path(link.from_uri)} -[{link.link_type.value} {link.weight:.2f}]-> "
            f"{printable_path(link.to_uri)}  ({link.id})")
    return 0


def link_type(vault: Vault, name: str) -> LinkType:
    """A --type value as one of the vault's link types; any other is a usage error."""
    try:
        return vault.config.link_table().require(name)
    except LinkError as exc:
        raise UsageError(str(exc)) from None


def cmd_unlink(args: argparse.Namespace) -> int:
    from engine.review.linkwrite import remove_link

    vault = open_vault(args)
    chosen = link_type(vault, args.link_type) if args.link_type else None
    n = remove_link(vault, args.from_uri, args.to_uri, chosen)
    say(f"removed {n} link{'s' if n != 1 else ''} from {args.from_uri} to {args.to_uri}")
    return 0


def cmd_mv(args: argparse.Namespace) -> int:
    from engine.review.move import move_note

    vault = open_vault(args)
    result = move_note(vault, args.old, args.new, rewrite_text=args.rewrite_wikilinks)
    vault.close()
    if args.json:
        say_json(result.to_json())
        return 0
    say(result.message())
    if result.mentions and not result.rewritten and not result.imported:
        say(f"{counted(len(result.mentions), 'link')} in note text still name{'s' * (len(result.mentions) == 1)} "
            f"{printable_path(result.old)} "
            "(rerun with --rewrite-wikilinks to rewrite them, or edit them):")
        for m in result.mentions:
            say(f"  {printable_path(m.uri)}:{m.line}: {m.text}")
    if result.imported:
        one = len(result.imported) == 1
        say(f"{counted(len(result.imported), 'imported page')} still name{'s' * one} {printable_path(result.old)}: "
            f"the file {'it was' if one else 'each was'} imported from decides its text (change the link there; the "
            "next `memlink ingest` brings it):")
        for m in result.mentions:
            if m.uri in result.imported:
                say(f"  {printable_path(m.uri)}:{m.line}: {m.text}  (from {printable_path(result.imported[m.uri])})")
    if result.left:
        say("left as written, to edit by hand:")
        for m in result.mentions:
            if m.uri in result.left:
                say(f"  {printable_path(m.uri)}:{m.line}: {m.text}")
    return 0


def cmd_graph_query(args: argparse.Namespace) -> int:
    from engine.graph import LinkGraph

    vault = open_vault(args)
    uri = vault.read_note(args.uri).uri  # a clear error for a missing note
    graph = LinkGraph.for_vault(vault)
    types = {link_type(vault, t) for t in args.types} if args.types else None
    rows = graph.neighbourhood(uri, types, args.direction, max(1, args.depth))
    titles = {u: e.title for u, e in vault.catalog.entries(s.dst for _hop, s in rows).items()}
    if args.json:
        say_json([
            {"uri": s.dst, "title": titles.get(s.dst, s.dst), "depth": hop,
             "from": s.src, "direction": "out" if s.direction == "links" else "in",
             "link_type": s.link.link_type.value, "weight": s.link.weight, "description": s.link.description}
            for hop, s in rows
        ])
        return 0
    if not rows:
        print("no linked notes")
    for hop, s in rows:
        arrow = "->" if s.direction == "links" else "<-"
        title = titles.get(s.dst, s.dst)
        say(f"{'  ' * (hop - 1)}{arrow} {s.link.link_type.value:<13} {s.link.weight:.2f}  {title}  ({printable_path(s.dst)})")
    return 0
