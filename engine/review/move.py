"""Moving or renaming a note: `memlink mv`, the app's `M`, the MCP `move` tool
(docs/DESIGN.md, "Units of work": moves).

The file goes to its new path and every link into or out of it is retargeted on both
sides, with its id, anchor (``match_text``) and line ranges kept: a target change touches
link metadata only. All in one unit of work, logged as a review action so `memlink undo`
puts the files back byte for byte. A note already moved by hand (the old path gone, the
new one there) gets its links retargeted the same way.

Wikilinks and markdown links a person wrote in the text of the linking notes are their
words: they are reported (``MoveResult.mentions``), and rewritten only when asked
(``rewrite_text``)."""

from __future__ import annotations

import os
import posixpath
import re
import unicodedata
import urllib.parse
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from ..errors import MemlinkError, NoteNotFound, UriError
from ..model.blocks import VIEW_OPEN, links_span, visible_text
from ..model.imported import edited_since_import
from ..model.links import Direction, StoredLink
from ..model.notes import parse_note, rebuild_body, render_note_body, serialize_note, split_body
from ..model.text import MARKDOWN_LINK, NOT_A_NOTE, counted, mask_code
from ..model.uris import normalize_uri, uri_dir
from ..storage.render import href
from ..storage.sidecars import LinkOp, PutLink, RemoveLink, owner_of
from ..storage.walk import check_note_target
from ..storage.writes import PERSON_LINKS, new_link, person_links, put_ops, remove_ops
from .actions import log_action

if TYPE_CHECKING:
    from ..storage.transaction import Transaction
    from ..storage.vault import Vault

NOT_IN_A_WIKILINK = "#^|[]"  # (what a name written into a [[wikilink]] cannot hold)
# [[target#anchor|alias]] and ![[…]]: the target is group 2.
WIKILINK = re.compile(r"(!?\[\[)([^\[\]|#\n]+)([^\[\]\n]*\]\])")


class MoveError(MemlinkError):
    """A move that cannot be done (the message says why; nothing was changed)."""


@dataclass
class Mention:
    """A wikilink or markdown link in a note's own text that names the moved note by its old
    path or name."""

    uri: str
    line: int  # 1-based, in the note file
    text: str  # the link as written


@dataclass
class MoveResult:
    old: str
    new: str
    links: int  # link records retargeted (each link counted once)
    moved_file: bool  # False: the file was moved by hand already; only the links followed
    mentions: list[Mention] = field(default_factory=list)
    rewritten: list[str] = field(default_factory=list)  # notes whose links were rewritten (rewrite_text)
    imported: dict[str, str] = field(default_factory=dict)  # imported pages not rewritten: uri -> the file of their text
    left: list[str] = field(default_factory=list)  # notes not rewritten: a field YAML quoted or folded holds the link
    fields: list[str] = field(default_factory=list)  # notes whose superseded_by or source_uris named the old path
    action: str = ""  # the id of the undoable action it was logged as

    def to_json(self) -> dict:
        """What the CLI's --json and the MCP tool say of the move."""
        return {"old": self.old, "new": self.new, "links": self.links, "moved_file": self.moved_file,
                "mentions": [vars(m) for m in self.mentions], "rewritten": self.rewritten, "imported": self.imported,
                "left": self.left}

    def message(self) -> str:
        what = "moved" if self.moved_file else "relinked (moved by hand)"
        out = f"{what} {self.old} -> {self.new}; {self.links} link{'s' * (self.links != 1)} retargeted"
        if self.rewritten:
            out += f"; links rewritten in the text of {counted(len(self.rewritten), 'note')}"
        if self.left:
            out += f"; {counted(len(self.left), 'note')} left as written (a field holds the link as YAML quotes or folds it)"
        if self.fields:
            out += f"; superseded_by or source_uris updated in {len(self.fields)} note{'s' * (len(self.fields) != 1)}"
        return out


def target_uri(vault: Vault, old: str, new: str) -> str:
    """Where ``old`` goes: ``new`` itself, or inside it when it names a folder (an existing
    one, or written with a trailing ``/``)."""
    old = normalize_uri(old)
    folder = new.strip().endswith("/")
    try:
        new = normalize_uri(new)
    except UriError as exc:
        raise MoveError(f"cannot move {old}: {exc} (a note moves within the vault); nothing was moved") from None
    if folder or vault.path(new).is_dir():
        new = f"{new}/{PurePosixPath(old).name}"
    try:
        return check_note_target(new)
    except UriError as exc:
        raise MoveError(f"cannot move {old} to {exc}; nothing was moved") from None


def move_note(vault: Vault, old: str, new: str, *, rewrite_text: bool = False) -> MoveResult:
    """Move (or rename) the note at ``old`` to ``new`` and retarget every link into and
    out of it on both sides, in one undoable unit of work. Refused, nothing changed: a
    target that exists, a path outside the vault, a missing note. When ``old`` is gone
    and ``new`` is there (moved by hand), only the links follow."""
    old = normalize_uri(old)
    new = target_uri(vault, old, new)
    if old == new:
        raise MoveError(f"{old} is already at that path; nothing was moved")
    if rewrite_text and (bad := sorted(set(new[:-3]) & set(NOT_IN_A_WIKILINK))):
        raise MoveError(f"cannot rewrite [[wikilinks]] to {new}: a wikilink cannot hold {' '.join(map(repr, bad))} "
                        "(Obsidian reads # as a heading, ^ as a block, | as an alias, ] as the link's end); choose "
                        "another name, or move without rewriting; nothing was moved")
    with vault.transaction() as tx:
        if tx.ops():
            raise MoveError("a move runs in its own unit of work")
        has_old, has_new = vault.exists(old), vault.exists(new)
        if has_old and has_new:
            raise MoveError(f"cannot move {old} to {new}: {new} exists already; nothing was moved")
        if not has_old and not has_new:
            raise NoteNotFound(f"no note at {old} (nor at {new}); nothing was moved")
        # The note's own records are in its folder's sidecar: one that cannot be read would
        # hide its links, and the notes linking to it would be left pointing at nothing.
        for folder in dict.fromkeys((uri_dir(old), uri_dir(new))):
            problem = vault.links.folder(folder, records=False).problem(folder)
            if problem:
                raise MoveError(f"cannot move {old}: {problem}; nothing was moved")
        if has_old:
            _move_file(vault, tx, old, new)
        elif vault.links.of(new):
            raise MoveError(f"no note at {old}, and {new} has links of its own: not a note moved by hand; nothing was changed")
        links = retarget(vault, tx, old, new)
        result = MoveResult(old, new, len(links), has_old)
        result.fields = _renamed_in_fields(vault, tx, sorted({u for l in links for u in (l.from_uri, l.to_uri)} - {new}),
                                           old, new)
        sources = sorted({l.from_uri for l in links if l.to_uri == new})
        paths = _Paths(vault, old, new) if sources else None  # (every note's path read once, only when there are links to read)
        result.mentions = mentions(vault, sources, paths) if paths else []
        if paths and rewrite_text and result.mentions:
            uris = sorted({m.uri for m in result.mentions})
            result.imported = {u: f for u in uris if (f := _imported_from(vault, u))}
            result.rewritten = _rewrite(vault, tx, [u for u in uris if u not in result.imported], paths, result.left)
        result.action = log_action(vault, tx, "move", old, new, result.message())
        for a, b in sorted(person_links(vault).removed):  # (a pair the person unlinked stays unlinked where it went)
            if old in (a, b):
                tx.append(PERSON_LINKS, {"removed": True, "from": new if a == old else a, "to": new if b == old else b,
                                         "action": result.action})
    return result


def _renamed_in_fields(vault: Vault, tx: Transaction, uris: list[str], old: str, new: str) -> list[str]:
    """The notes among ``uris`` (those linked to the moved note: a review and the dream
    link what they name) whose fields memlink wrote with ``old`` in them name ``new``: a
    superseded note's ``superseded_by`` (also in ``superseded_claims``), a report's
    ``source_uris``. Returns them."""
    done = []
    for uri in uris:
        try:
            note = vault.read_note(uri)
        except MemlinkError:
            continue  # (a note that does not parse is not rewritten: check names it)
        claims, sources = note.extra.get("superseded_claims"), note.fields.get("source_uris")
        claims = claims if isinstance(claims, list) else []
        sources = sources if isinstance(sources, list) else []
        claimed = any(isinstance(c, dict) and c.get("superseded_by") == old for c in claims)
        if not (claimed or note.extra.get("superseded_by") == old or old in sources):
            continue
        if claimed:
            note.extra = {**note.extra, "superseded_claims": [
                {**c, "superseded_by": new} if isinstance(c, dict) and c.get("superseded_by") == old else c for c in claims]}
        if note.extra.get("superseded_by") == old:
            note.extra = {**note.extra, "superseded_by": new}
        schema = vault.schema(note.memory_type)
        if old in sources:  # (a report's view shows its sources: the view follows, as a field write's does)
            view = render_note_body(schema, note.fields, note.created_at, note.updated_at)
            note.fields = {**note.fields, "source_uris": [new if s == old else s for s in sources]}
            note.body = rebuild_body(note.body, view, render_note_body(schema, note.fields, note.created_at, note.updated_at))
        tx.put_text(uri, serialize_note(note, schema, vault.read_text(uri)), note)
        done.append(uri)
    return done


def _move_file(vault: Vault, tx: Transaction, old: str, new: str) -> None:
    text = vault.read_text(old)
    try:
        parse_note(text, old, vault.types)  # (what is wrong with the note is named at its own path)
        note = parse_note(text, new, vault.types)
    except MemlinkError as exc:
        raise MoveError(f"cannot move {old}: {exc}; nothing was moved") from None
    tx.put_text(new, text, note)
    tx.delete(old)


def retarget(vault: Vault, tx: Transaction, old: str, new: str) -> list[StoredLink]:
    """Stage every link into or out of ``old`` as the same link of ``new`` (id, type,
    anchor, line ranges kept), on both sides. Returns the links as retargeted."""
    moved: dict[str, StoredLink] = {}
    gone: list[LinkOp] = []  # the moved note's own records, from its old folder
    others: list[LinkOp] = []  # the other side: the same record (same id) rewritten in place
    here: list[LinkOp] = []  # the moved note's records, in its new folder
    legacy: list[LinkOp] = []  # old-format entries into or out of it: each becomes a two-sided link of the new path
    swap = lambda uri: new if uri == old else uri  # noqa: E731
    entries = [*vault.links.of(old), *(l for l in vault.links.legacy_into(old) if l.from_uri != old)]
    linked = {(l.from_uri, l.to_uri, l.link_type) for l in entries if not l.legacy}
    for entry in entries:
        if entry.legacy:
            if not entry.from_uri.endswith(".md"):  # (a folder's entry: no note to hold its record)
                raise MoveError(f"{old} is named by an old-format link entry of the folder {entry.from_uri or '(root)'}; "
                                "nothing was moved")
            if (entry.from_uri, entry.to_uri, entry.link_type) in linked:  # (the pair's link says it: it moves itself)
                legacy += remove_ops(entry)
                continue
            link = new_link(vault, swap(entry.from_uri), swap(entry.to_uri), entry.link_type, weight=entry.weight,
                            description=entry.description, created_at=entry.created_at)
            moved[link.id] = link
            legacy += remove_ops(entry) + put_ops(link)
            continue
        link = entry.as_direction("links")
        if link.id in moved:
            continue
        ends = {"from_uri": new if link.from_uri == old else link.from_uri, "to_uri": new if link.to_uri == old else link.to_uri}
        moved[link.id] = link.model_copy(update=ends)
        mine: Direction = "links" if link.from_uri == old else "backlinks"
        theirs: Direction = "backlinks" if mine == "links" else "links"
        gone.append(RemoveLink(folder=uri_dir(old), id=link.id, direction=mine))
        other = moved[link.id].as_direction(theirs)
        others.append(PutLink(folder=uri_dir(owner_of(other)), link=other))
        here.append(PutLink(folder=uri_dir(new), link=moved[link.id].as_direction(mine)))
    # Grouped so each note's records are staged in runs (engine.storage.transaction).
    by_side = lambda op: op.direction if isinstance(op, RemoveLink) else op.link.direction
    tx.link_ops(sorted(gone, key=by_side) + others + sorted(here, key=by_side) + legacy)
    return list(moved.values())


def _key(text: str) -> str:
    """A path or a wikilink's target as Obsidian compares them: in any case or Unicode
    form, without .md or slashes around it."""
    return unicodedata.normalize("NFC", text.strip().strip("/")).casefold().removesuffix(".md")


class _Paths:
    """Which note a wikilink's target leads to, as Obsidian resolves it, before the move
    and after: a relative path from the linking note's folder (``[[../Garden/Tomatoes]]``),
    its path from the vault's root, else the end of a path (``[[Garden/Tomatoes]]``,
    ``[[tomatoes]]``) — the note in the linking note's folder, else the one with the
    fewest folders; several as near: none, the link left as written."""

    def __init__(self, vault: Vault, old: str, new: str) -> None:
        self.old, self.new = old, new
        self.by_name: dict[str, list[str]] = defaultdict(list)
        for uri in {*vault.catalog.uris(), *vault.catalog.errors(), old, new}:  # (a page that is no note: Obsidian's all the same)
            self.by_name[_key(uri).rsplit("/", 1)[-1]].append(uri)

    def _leads_to(self, target: str, folder: str, moved: bool) -> str | None:
        relative = target.strip().startswith(("./", "../"))
        if relative:  # (from the linking note's folder: that path, never the end of another)
            target = posixpath.normpath(posixpath.join(folder, target.strip()))
            if target.startswith(".."):
                return None
        want = _key(target)
        gone = self.old if moved else self.new  # (the note is at one of its two paths)
        found = [u for u in self.by_name.get(want.rsplit("/", 1)[-1], ()) if u != gone]
        exact = [u for u in found if _key(u) == want]
        if exact or relative:
            return exact[0] if len(exact) == 1 else None
        ends = [u for u in found if _key(u).endswith("/" + want)]
        here = [u for u in ends if uri_dir(u) == folder]
        if len(here) == 1:
            return here[0]
        shortest = [u for u in ends if u.count("/") == min(e.count("/") for e in ends)]
        return shortest[0] if len(shortest) == 1 else None

    def leads_to_new(self, target: str, folder: str) -> bool:
        """Whether the target, written in a note of ``folder``, leads to the note after the move."""
        return self._leads_to(target, folder, moved=True) == self.new

    def stale(self, target: str, linking: str) -> bool:
        """Whether the target led ``linking`` to the note before the move and does not after."""
        folder = uri_dir(linking)
        return (self._leads_to(target, folder, moved=False) == self.old
                and self._leads_to(target, folder, moved=True) != self.new)


def _outside_links_block(text: str) -> list[tuple[int, int]]:
    """Spans of ``text`` a person wrote: all of it but the generated Links block."""
    span = links_span(text)
    return [(0, len(text))] if span is None else [(0, span[0]), (span[1], len(text))]


def _note_path(m: re.Match[str]) -> str | None:
    """A markdown link's destination as a path (%-escapes decoded, its #place left off);
    None for a web address or a place in the same page."""
    dest = m[2] or m[3]
    return None if NOT_A_NOTE.match(dest) else urllib.parse.unquote(dest.split("#", 1)[0]) or None


def _stale(text: str, spans: list[tuple[int, int]], linking: str, paths: _Paths) -> list[re.Match[str]]:
    """The wikilinks and markdown links within ``spans`` of ``text`` that led ``linking``
    to the moved note and no longer do, in the text's order (found where the text's code
    is blanked out: a link in code is an example, not a link)."""
    masked = mask_code(text)
    found = [m for start, end in spans for pattern in (WIKILINK, MARKDOWN_LINK) for m in pattern.finditer(masked, start, end)
             if (p := m.group(2) if m.re is WIKILINK else _note_path(m)) and paths.stale(p, linking)]
    return sorted(found, key=lambda m: m.start())


def _relinked(text: str, linking: str, paths: _Paths, pointed: Callable[[str, re.Match[str], str], str]) -> str:
    """``text`` with its stale links (``_stale``, outside a generated Links block) pointed
    at the new path."""
    out = text
    for m in reversed(_stale(text, _outside_links_block(text), linking, paths)):
        out = out[:m.start()] + pointed(text, m, linking) + out[m.end():]
    return out


def _strings(value: object) -> list[str]:
    """Every string in ``value`` (a note's fields)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    return []


def mentions(vault: Vault, uris: list[str], paths: _Paths) -> list[Mention]:
    """Wikilinks and markdown links in the text of ``uris`` that led to the moved note and
    no longer do, each where a person reads it: in the note's view, not again in the field
    it shows."""
    out: list[Mention] = []
    for uri in uris:
        try:
            text = vault.read_text(uri)
        except MemlinkError:
            continue
        body = split_body(text)
        shown = len(text) - len(body) if VIEW_OPEN in body else 0  # (a view shows its fields: the body is enough)
        spans = [(max(start, shown), max(end, shown)) for start, end in _outside_links_block(text)]
        out += [Mention(uri, text.count("\n", 0, m.start()) + 1, text[m.start():m.end()])
                for m in _stale(text, spans, uri, paths)]
    return out


def _imported_from(vault: Vault, uri: str) -> str:
    """The file an imported page's text comes from, when it is still there and the page
    holds what it imported ("" if not): the next sync brings its text, so memlink leaves
    it as its file says. (A page a person edited in the vault is theirs: a sync leaves it.)"""
    try:
        note = vault.read_note(uri)
    except MemlinkError:
        return ""
    origin = note.fields.get("origin") if note.memory_type == "source" else None
    if not (isinstance(origin, str) and origin and os.path.isfile(origin)):
        return ""
    return "" if edited_since_import(note, vault.schema("source")) else origin


def _repointed(text: str, m: re.Match[str], linking: str, paths: _Paths) -> str:
    """A stale markdown link of ``text`` (found at ``m``) pointed at the new path the way it
    was written: relative to the linking note's folder when it was (``./``, ``../``, or a
    path that leads there from that folder); from the vault's root when it was (``/``, or
    the whole path); else as many of the new path's last parts as it had, when they lead
    there. With .md when it had it; in <…> or %-escaped as it was; its text, #place and
    title kept."""
    dest = m[2] or m[3]
    path, sep, place = dest.partition("#")
    written = urllib.parse.unquote(path)
    target = paths.new if written.casefold().endswith(".md") else paths.new[:-3]
    folder = uri_dir(linking)
    if written.startswith("/"):
        target = "/" + target
    elif written.startswith(("./", "../")) or (folder and _key(posixpath.join(folder, written)) == _key(paths.old)):
        relative = posixpath.relpath(target, folder or ".")
        if not relative.startswith("../") and (written.startswith("./") or not paths.leads_to_new(relative, folder)):
            relative = "./" + relative  # (as written, or where the path alone would lead elsewhere)
        target = relative
    elif _key(written) != _key(paths.old):  # (the end of a path: as many parts, when they lead to the note)
        tail = "/".join(target.split("/")[-(written.strip("/").count("/") + 1):])
        target = tail if paths.leads_to_new(tail, folder) else target
    group = 2 if m[2] is not None else 3
    target = target.replace("%", "%25") if group == 2 and not set(target) & set("<>") else href(target)
    return text[m.start():m.start(group)] + target + sep + place + text[m.end(group):m.end()]


def _rewrite(vault: Vault, tx: Transaction, uris: list[str], paths: _Paths, left: list[str]) -> list[str]:
    """Point the stale links in the text of ``uris`` at the new path: a wikilink written
    without .md (which Obsidian resolves whatever other notes are called), a markdown link
    as it was written (``_repointed``). A plain wikilink, which showed its target's name,
    shows the new name, as Obsidian's own rename does, not the path. A note whose text
    would not read back rewritten, or whose fields would still hold an old link (YAML
    quoted or folded it), is left as it is and added to ``left``."""
    new = paths.new
    target = new[:-3]
    shown = PurePosixPath(target).name

    def pointed(text: str, m: re.Match[str], linking: str) -> str:
        if m.re is MARKDOWN_LINK:
            return _repointed(text, m, linking, paths)
        opening, rest = text[m.start(1):m.end(1)], text[m.start(3):m.end(3)]  # (``m`` matched the text with its code blanked)
        if rest == "]]" and opening == "[[":  # (a plain link: an embed's |… is its size, an anchor shows itself)
            rest = f"|{shown}]]"
        return opening + target + rest

    done = []
    for uri in uris:
        text = vault.read_text(uri)
        new_text = _relinked(text, uri, paths, pointed)
        if new_text == text:
            continue
        try:
            note = parse_note(new_text, uri, vault.types)
        except MemlinkError:
            left.append(uri)  # (a link inside a quoted YAML string: the new path would not read back)
            continue
        if any(_stale(value, [(0, len(value))], uri, paths) for value in _strings(note.fields)):
            # A field YAML quoted or folded still holds the old link: its view, drawn from
            # it again at the next write, would bring that link back. The person edits it.
            left.append(uri)
            continue
        tx.put_text(uri, new_text, note)
        shown_now = visible_text(note.body)
        for link in vault.links.of(uri, "links"):  # (a link that hung on "Tomatoes" hangs on "Tomato plants")
            if link.to_uri == new and link.match_text and link.match_text not in shown_now and shown in shown_now:
                tx.link_ops(put_ops(link.model_copy(update={"match_text": shown})))
        done.append(uri)
    return done


def moved_to(vault: Vault, missing: str) -> str | None:
    """Where a note that is gone was probably moved by hand: the one note elsewhere with
    no links of its own yet and the content hash ``missing`` had when its file went,
    else its file name. ``memlink check --fix`` keeps the links of such a note and names
    the move instead of deleting them."""
    found: list[str] = []
    if (sha := vault.catalog.last_sha(missing)) is not None:
        found = [u for u, s in vault.catalog.shas().items() if s == sha and u != missing]
    if not found:
        name = PurePosixPath(missing).name
        found = [u for u in vault.catalog.uris() if PurePosixPath(u).name == name and u != missing]
    if len(found) != 1 or vault.links.of(found[0]):
        return None
    return found[0]
