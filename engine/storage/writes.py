"""What a unit of work stages for a note write, a delete, a supersede, a link or an unlink
(docs/DESIGN.md, "Units of work"): the implementation behind ``Vault.write_note``,
``Vault.link`` and the rest, each called inside the vault's open transaction."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import ValidationError

from ..errors import LinkError, MemlinkError, NoteNotFound, SchemaError
from ..model.blocks import LinkLine, render_links_block, set_links_block
from ..model.lineranges import check_ranges, correct_ranges, format_ranges
from ..model.links import LinkType, StoredLink, merge_link, new_link_id
from ..model.merge import is_edit, merge_fields
from ..model.notes import (
    Note,
    new_body,
    now_iso,
    parse_note,
    parse_timestamp,
    rebuild_body,
    render_note_body,
    serialize_note,
    split_frontmatter,
)
from ..model.uris import normalize_uri, uri_dir
from .jsonl import read_jsonl
from .linkindex import home
from .sidecars import LinkOp, PutLink, RemoveLegacy, RemoveLink

if TYPE_CHECKING:
    from .transaction import Transaction
    from .vault import Vault

LinkSpec = tuple[str, str, "LinkType | str", dict]  # (from_uri, to_uri, link_type, {weight, t_field, …})
# The links a person wrote, changed or removed (engine.review.linkwrite: `memlink link` and
# `unlink`, the app, the MCP link tools), a record a line: what extraction, ingest and the
# dream write never changes a person's link nor links again a pair the person unlinked,
# and a sync never removes a person's link (docs/DESIGN.md, "Units of work"). No file
# says who wrote a link, so this one does.
PERSON_LINKS = ".memlink/review/person-links.jsonl"


class PersonLinks(NamedTuple):
    ids: set[str]  # the links a person wrote or changed
    removed: set[tuple[str, str]]  # (from, to): pairs a person unlinked and has not linked since


def person_links(vault: Vault) -> PersonLinks:
    """What ``PERSON_LINKS`` says, in order, without the records of actions undone since
    (a line that cannot be read is left out)."""
    records = read_jsonl(vault.root / PERSON_LINKS, strict=False)
    undone = {r["undone"] for r in records if isinstance(r.get("undone"), str)}
    out = PersonLinks(set(), set())
    for record in records:
        if record.get("action") in undone:
            continue
        pair = (str(record.get("from")), str(record.get("to")))
        if isinstance(record.get("link"), str):
            out.ids.add(record["link"])
            out.removed.discard(pair)
        elif record.get("removed") is True:
            out.removed.add(pair)
    return out


# -- notes -----------------------------------------------------------------------------------
def write_note(vault: Vault, tx: Transaction, memory_type: str, fields: dict[str, Any], *, uri: str | None,
               created_at: str | None, updated_at: str | None, replace: bool, body: str | None) -> Note:
    schema = vault.schema(memory_type)
    if uri is None:
        plain = {k: v for k, v in fields.items() if not is_edit(v)}
        uri = schema.note_uri(schema.validate_fields(plain, complete=False))
    uri = normalize_uri(uri)
    present = (tx.text(uri) is not None) if tx.staged(uri) else vault.path(uri).exists()
    old = vault.read_note(uri) if present else None
    if old is not None and old.memory_type != memory_type:
        raise SchemaError(f"{uri} is a {old.memory_type} note, not a {memory_type}")
    merged = merge_fields(schema, None if replace else (old.fields if old else None), fields)
    merged = schema.validate_fields(merged, complete=True)
    if old is not None and merged == old.fields and updated_at is None and (body is None or body == old.body):
        return old  # nothing to change: no write, updated_at untouched (replays are no-ops)
    stamp = now_iso()
    created = old.created_at if old else parse_timestamp(created_at or stamp, "created_at")
    updated = parse_timestamp(updated_at or stamp, "updated_at")
    view = render_note_body(schema, merged, created, updated)
    base = body if body is not None else old.body if old is not None else None
    if base is None:
        new = new_body(view)
    else:  # the text a person typed under the frontmatter survives
        old_view = render_note_body(schema, old.fields, old.created_at, old.updated_at) if old else ""
        new = rebuild_body(base, old_view, view)
    note = Note(uri=uri, memory_type=memory_type, fields=merged, created_at=created, updated_at=updated, body=new,
                extra=old.extra if old else {})
    tx.put_text(uri, serialize_note(note, schema, vault.read_text(uri) if old is not None else None), note)
    if old is not None:
        tx.link_ops(_range_corrections(vault, old, note))
        if vault.config.obsidian.links_block and note.title(schema) != old.title(schema):
            # the notes linking here show its title in their Links blocks
            tx.links_touched(l.from_uri for l in vault.links.of(uri, "backlinks"))
    return note


def delete_note(vault: Vault, tx: Transaction, uri: str) -> int:
    if not vault.exists(uri):
        raise NoteNotFound(f"no note at {uri}")
    tx.delete(uri)
    links = [*vault.links.of(uri), *(l for l in vault.links.legacy_into(uri) if l.from_uri != uri)]
    tx.link_ops([op for link in links for op in remove_ops(link)])
    return len(links)


def supersede(vault: Vault, tx: Transaction, old_uri: str, new_uri: str, day: str) -> Note:
    note = vault.read_note(old_uri)
    note.extra = {**note.extra, "valid_until": day, "superseded_by": normalize_uri(new_uri)}
    tx.put_text(old_uri, serialize_note(note, vault.schema(note.memory_type), vault.read_text(old_uri)), note)
    return note


def _range_corrections(vault: Vault, old: Note, new: Note) -> list[LinkOp]:
    """Links pointing into ``new`` follow their passage or are removed (docs/DESIGN.md,
    "Vault format": `t_line_ranges`); a person's link whose passage is gone points at the
    whole field instead (unless the pair has such a link already)."""
    ops: list[LinkOp] = []
    into = vault.links.of(new.uri, "backlinks")
    keys = {link.key for link in into}
    persons: set[str] | None = None
    for link in into:
        if not link.t_line_ranges:
            continue
        fixed = correct_ranges(link.t_line_ranges, old.field_text(link.t_field), new.field_text(link.t_field), vault.matcher)
        if fixed is None:
            persons = person_links(vault).ids if persons is None else persons
            whole = (link.from_uri, link.to_uri, link.t_field, "")
            if link.id in persons and whole not in keys:
                keys.add(whole)
                ops += put_ops(link.model_copy(update={"t_line_ranges": None}))
            else:
                ops += remove_ops(link)
        elif fixed != link.t_line_ranges:
            ops += put_ops(link.model_copy(update={"t_line_ranges": fixed}))
    return ops


# -- links -----------------------------------------------------------------------------------
def put_ops(link: StoredLink) -> list[LinkOp]:
    """A link's two records: in its from-note's folder and in its to-note's."""
    return [PutLink(folder=uri_dir(link.from_uri), link=link.as_direction("links")),
            PutLink(folder=uri_dir(link.to_uri), link=link.as_direction("backlinks"))]


def remove_ops(link: StoredLink) -> list[LinkOp]:
    """Removing a link on both sides (a legacy entry: its one target)."""
    if link.legacy:
        from_uri = link.from_uri if link.from_uri.endswith(".md") else None
        return [RemoveLegacy(folder=home(link.from_uri), entry_id=link.id, from_uri=from_uri, to_uri=link.to_uri)]
    return [RemoveLink(folder=uri_dir(link.from_uri), id=link.id, direction="links"),
            RemoveLink(folder=uri_dir(link.to_uri), id=link.id, direction="backlinks")]


def link_many(vault: Vault, tx: Transaction, specs: list[LinkSpec], *, persons: PersonLinks | None = None
              ) -> list[StoredLink]:
    """Each link merged with an existing one of the same key (engine.model.links.merge_link),
    written on both sides; a legacy entry for the same pair gives way to it. With
    ``persons`` (``person_links``: the machine's writes, extraction, ingest and the dream), a
    pair with a person's link is left as it is (whatever its field and lines; a found
    contradiction or newer version is still said), and a pair the person unlinked is not
    linked again."""
    ops: list[LinkOp] = []
    planned: dict[tuple, StoredLink] = {}
    order: list[tuple] = []
    theirs: dict[str, set[str]] = {}  # from-note -> the notes it has a person's link to
    table = vault.config.link_table()
    news = (table.role("conflict"), table.role("supersedes"))  # (not a view of the pair: news about it)
    for from_uri, to_uri, link_type, spec in specs:
        if persons is not None:
            pair = (normalize_uri(from_uri), normalize_uri(to_uri))
            if pair[0] not in theirs:  # (a vault no person linked by hand reads nothing more)
                theirs[pair[0]] = {l.to_uri for l in vault.links.of(pair[0], "links")
                                   if l.id in persons.ids} if persons.ids else set()
            if pair in persons.removed or (pair[1] in theirs[pair[0]] and table.require(link_type) not in news):
                continue  # the person's say on this pair stands
        candidate = new_link(vault, from_uri, to_uri, link_type, **spec)
        existing = planned.get(candidate.key) or existing_link(vault, candidate.key)
        merged = merge_link(existing, candidate.model_copy(update={"id": existing.id, "created_at": existing.created_at})
                            if existing else candidate)
        planned[merged.key] = merged
        order.append(merged.key)
        for old in vault.links.of(merged.from_uri, "links"):
            if old.legacy and old.to_uri == merged.to_uri:
                ops += remove_ops(old)
    for merged in planned.values():
        ops += put_ops(merged)
    tx.link_ops(ops)
    return [planned[k].as_direction("links") for k in order]


def new_link(vault: Vault, from_uri: str, to_uri: str, link_type: LinkType | str, *, weight: float = 1.0,
             t_field: str | None = None, t_line_ranges: str | None = None, match_text: str | None = None,
             description: str = "", created_at: str | None = None) -> StoredLink:
    """A link as asked for, checked: both notes exist and may link, a type this vault
    declares, a field of the target, line ranges inside it."""
    from_uri, to_uri = normalize_uri(from_uri), normalize_uri(to_uri)
    if from_uri == to_uri:
        raise LinkError(f"a note cannot link to itself ({from_uri})")
    link_type = vault.config.link_table().require(link_type)  # this vault's types only
    _link_end(vault, from_uri, "from")
    dst = _link_end(vault, to_uri, "to")
    dst_schema = vault.schema(dst.memory_type)
    t_field = t_field or dst_schema.text_field
    if t_field not in dst_schema.field_names:
        raise LinkError(f"t_field {t_field!r} is not a field of {to_uri} ({dst.memory_type})")
    if t_line_ranges is not None:
        t_line_ranges = format_ranges(check_ranges(t_line_ranges, dst.field_text(t_field)))
    if match_text is not None and not match_text.strip():
        match_text = None
    try:
        return StoredLink(id=new_link_id(), from_uri=from_uri, to_uri=to_uri, direction="links", link_type=link_type,
                          weight=weight, t_field=t_field, t_line_ranges=t_line_ranges, match_text=match_text,
                          description=description or "",
                          created_at=parse_timestamp(created_at, "created_at") if created_at else now_iso())
    except ValidationError as exc:
        first = exc.errors()[0]
        raise LinkError(f"invalid link: {first['loc'][0]}: {first['msg']}") from exc


def existing_link(vault: Vault, key: tuple) -> StoredLink | None:
    """The link with this key (same pair, field and line ranges), from either side."""
    for uri, direction in ((key[0], "links"), (key[1], "backlinks")):
        for entry in vault.links.of(uri, direction):
            if entry.key == key and not entry.legacy:
                return entry.as_direction("links")
    return None


def _link_end(vault: Vault, uri: str, end: str) -> Note:
    try:
        note = vault.read_note(uri)
    except NoteNotFound:
        raise LinkError(f"cannot link: the {end} note {uri} does not exist") from None
    if not vault.schema(note.memory_type).link_enabled:
        raise LinkError(f"cannot link: memory type {note.memory_type!r} has linking disabled ({uri})")
    return note


def unlink(vault: Vault, tx: Transaction, from_uri: str, to_uri: str, link_type: LinkType | str | None,
           link_id: str | None) -> int:
    from_uri, to_uri = normalize_uri(from_uri), normalize_uri(to_uri)
    if link_type is not None:
        try:
            link_type = LinkType(link_type)
        except ValueError:
            raise LinkError(f"unknown link type {link_type!r}") from None
    targets = [l for l in vault.links.of(from_uri, "links")
               if l.to_uri == to_uri and (link_type is None or l.link_type == link_type) and (link_id is None or l.id == link_id)]
    if not targets:
        what = f"{link_type.value} link" if link_type else "link"
        raise LinkError(f"no {what} from {from_uri} to {to_uri}")
    tx.link_ops([op for link in targets for op in remove_ops(link)])
    return len(targets)


# -- the Links block -----------------------------------------------------------------------------
def refresh_links_blocks(vault: Vault, tx: Transaction, uris: Iterable[str]) -> list[str]:
    """Regenerate the Links block of these notes from their outgoing links as staged
    (docs/DESIGN.md, "Vault format": the body); with ``obsidian.links_block`` off, remove
    it. A note whose block is already right is not written; a note that is not there or
    does not parse is left alone. Returns the notes rewritten."""
    rewritten: list[str] = []
    on = vault.config.obsidian.links_block
    uris = list(dict.fromkeys(normalize_uri(u) for u in uris))
    outgoing = vault.links.of_many(uris, "links") if on else {}  # (a moved hub's thousand linking notes: one read)
    targets = {l.to_uri for links in outgoing.values() for l in links if not tx.staged(l.to_uri)}
    titles = {u: e.title for u, e in vault.catalog.entries(targets).items()}
    for uri in uris:
        try:
            text = tx.text(uri) if tx.staged(uri) else vault.read_text(uri)
        except (OSError, UnicodeDecodeError, MemlinkError):
            continue
        if text is None:
            continue
        # A note written with CRLF line ends keeps them: the block is made in LF, as every
        # note's, and the whole text goes back to CRLF (a file that mixes the two stays as read).
        crlf = "\r\n" in text and text.count("\n") == text.count("\r\n")
        if crlf:
            text = text.replace("\r\n", "\n")
        front, body = split_frontmatter(text)
        if front is None or body is None:
            continue
        # A note made here has the links staged here, if any (the link index is not asked).
        fresh = tx.created(uri) and tx.note_links(uri_dir(uri), uri, "links") is None
        block = _links_block(vault, outgoing[uri], titles) if on and not fresh else None
        new = set_links_block(body, block)
        if new == body:
            continue
        head = text[: len(text) - len(body)]
        new_text = head + new if head.endswith("\n") else f"{head}\n{new}"
        if crlf:
            new_text = new_text.replace("\n", "\r\n")
        try:
            note = parse_note(new_text, uri, vault.types)
        except MemlinkError:
            continue  # a note that does not parse is the person's to fix; it keeps its text
        tx.put_text(uri, new_text, note)
        rewritten.append(uri)
    return rewritten


def _links_block(vault: Vault, links: list[StoredLink], titles: dict[str, str]) -> str | None:
    """The Links block of a note with these outgoing links, strongest first, each with
    the title of the note it points at (``titles`` keeps them)."""
    links = sorted(links, key=lambda l: (-l.weight, l.to_uri, l.link_type.value, l.id))
    rows = []
    for link in links:
        if link.to_uri not in titles:
            try:
                titles[link.to_uri] = vault.title(vault.read_note(link.to_uri))
            except MemlinkError:
                titles[link.to_uri] = PurePosixPath(link.to_uri).stem
        rows.append(LinkLine(link.to_uri, titles[link.to_uri], link.link_type.value, link.weight, link.description))
    return render_links_block(rows)
