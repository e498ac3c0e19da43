"""Notes on disk: YAML frontmatter (memory_type, created_at, updated_at, fields) + body.

The body's generated view is rendered from the memory type's content_template into a
delimited block; text a person types above or below it belongs to them and survives every
write (``rebuild_body``). A second generated block lists the note's outgoing links as
wikilinks (engine.model.blocks); the links themselves live in the folder's `.relations.json`.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import yaml

from ..errors import NoteError, SchemaError
from .blocks import VIEW_OPEN, links_span, view_block, view_span, view_text, visible_text
from .frontmatter import load_frontmatter
from .schema import MemoryTypeSchema, TypeRegistry

FRONT = "---"
TOP_KEYS = ("memory_type", "created_at", "updated_at", "fields")


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()


def parse_timestamp(value: Any, where: str) -> str:
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):  # (YAML reads `2026-01-10` as a day)
        value = dt.datetime(value.year, value.month, value.day)
    if isinstance(value, dt.datetime):
        stamp = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return stamp.isoformat()
    if value is None:
        raise NoteError(f"{where} is missing: add it to the frontmatter, e.g. {where.rpartition(' ')[2]}: "
                        f"'{now_iso()}'")
    if isinstance(value, str):
        try:
            stamp = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            if stamp.tzinfo is None:
                stamp = stamp.replace(tzinfo=dt.UTC)
            return stamp.isoformat()
    raise NoteError(f"{where}: not an ISO 8601 timestamp: {value!r}")


@dataclass
class Note:
    uri: str
    memory_type: str
    fields: dict[str, Any]
    created_at: str
    updated_at: str
    body: str
    extra: dict[str, Any] = field(default_factory=dict)  # unknown frontmatter keys, kept as-is

    def title(self, schema: MemoryTypeSchema) -> str:
        return str(self.fields.get(schema.title_field) or self.uri)

    def field_text(self, name: str) -> str:
        """A field's value as text lines: the coordinate system of t_line_ranges."""
        value = self.fields.get(name)
        if value is None:
            return ""
        if isinstance(value, list):
            return "\n".join(str(v) for v in value)
        return str(value)

    def superseded(self, whole: bool = True) -> list[str]:
        """What a review kept another note over, as a person reads it: the whole note
        (``superseded_by`` and ``valid_until`` in its frontmatter; left out with
        ``whole=False``) and each claim of it (``superseded_claims``: a field's lines).
        Entries edited into another shape are left out: this says what is known, and
        `memlink show` lists the frontmatter."""
        out = []
        claims = self.extra.get("superseded_claims")
        whole_note = [{**self.extra, "field": None}] if whole and isinstance(self.extra.get("superseded_by"), str) else []
        for claim in whole_note + (claims if isinstance(claims, list) else []):
            if not isinstance(claim, dict) or not isinstance(by := claim.get("superseded_by"), str):
                continue
            field, lines, until = claim.get("field"), claim.get("lines"), claim.get("valid_until")
            if field is None:
                what = "this note"
            elif isinstance(lines, str) and lines:
                what = f"{field} {'line' if lines.isdigit() else 'lines'} {lines}"
            else:
                what = str(field)
            out.append(f"{what}: superseded by {by}" + (f" (valid until {until})" if isinstance(until, str) else ""))
        return out

    @property
    def text(self) -> str:
        """The body as derived readers see it: without the generated Links block and the
        view's marker lines (engine.model.blocks.visible_text). Anchors (``match_text``) are
        looked for here. A body that shows no view (a note written by hand or by another
        tool, its words only in the frontmatter's ``content``) is read with that text after
        it: search, recall, chat and anchors see what the note says."""
        shown = visible_text(self.body)
        content = self.fields.get("content")
        if VIEW_OPEN in self.body or not isinstance(content, str) or not content.strip() or content.strip() in shown:
            return shown
        return f"{shown.rstrip()}\n\n{content.strip()}\n" if shown.strip() else f"{content.strip()}\n"


def split_frontmatter(text: str) -> tuple[str | None, str | None]:
    """(frontmatter, body). Frontmatter is None when the file does not start with '---'
    (after a byte order mark, which some Windows editors write); body is None when the
    frontmatter is never closed."""
    lines = text.removeprefix("\ufeff").split("\n")
    if not lines or lines[0].strip() != FRONT:
        return None, text
    for i in range(1, len(lines)):
        if lines[i].rstrip() == FRONT:
            return "\n".join(lines[1:i]), "\n".join(lines[i + 1 :])
    return "\n".join(lines[1:]), None


def split_body(text: str) -> str:
    """The body of a note file: what follows the closing '---' of its frontmatter."""
    return split_frontmatter(text)[1] or ""


def _own_page(uri: str) -> str:
    """What a page written by hand in the vault needs in its frontmatter to be read."""
    title = uri.rsplit("/", 1)[-1].removesuffix(".md")
    if not (re.fullmatch(r"[^\W\d][\w .'-]*", title) and yaml.safe_load(title) == title):
        title = json.dumps(title, ensure_ascii=False)  # ("Meeting: Q3", "2024", "yes": quoted, as YAML reads them)
    return (f"a page of your own: `memory_type: source`, `created_at: {dt.date.today().isoformat()}` and "
            f"`fields: {{title: {title}}}`")


def parse_note(text: str, uri: str, types: TypeRegistry) -> Note:
    """Parse and validate a note file. Raises NoteError / SchemaError with the note's path."""
    front, body = split_frontmatter(text)
    if front is None:
        raise NoteError(f"{uri}: no YAML frontmatter (the file must start with '---'; {_own_page(uri)})")
    if body is None:
        raise NoteError(f"{uri}: frontmatter is not closed with '---'")
    try:
        meta = load_frontmatter(front) or {}
    except yaml.YAMLError as exc:
        raise NoteError(f"{uri}: frontmatter is not valid YAML: {exc}") from exc
    if not isinstance(meta, dict):
        raise NoteError(f"{uri}: frontmatter must be a mapping")
    mtype = meta.get("memory_type")
    if not isinstance(mtype, str):
        raise NoteError(f"{uri}: frontmatter has no memory_type ({_own_page(uri)})")
    try:
        schema = types.get(mtype)
        fields = schema.validate_fields(meta.get("fields") or {}, complete=True)
    except SchemaError as exc:
        raise NoteError(f"{uri}: {exc}") from exc
    created = parse_timestamp(meta.get("created_at"), f"{uri}: created_at")
    updated = parse_timestamp(meta.get("updated_at", created), f"{uri}: updated_at")
    extra = {k: v for k, v in meta.items() if k not in TOP_KEYS}
    return Note(uri=uri, memory_type=mtype, fields=fields, created_at=created, updated_at=updated, body=body, extra=extra)


if TYPE_CHECKING:
    _Dumper = yaml.SafeDumper
else:  # the C dumper when libyaml is there
    _Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _NoteDumper(_Dumper):
    """Multi-line text as YAML block literals, so notes stay pleasant to edit in vim."""


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_NoteDumper.add_representer(str, _str_representer)


def serialize_note(note: Note, schema: MemoryTypeSchema, before: str | None = None) -> str:
    """The note file's text. ``before``: the file's text now; a person's comments in its
    frontmatter (``# …``), and the order of its keys, are kept (``_keep_comments``)."""
    ordered = {f.name: note.fields[f.name] for f in schema.fields if f.name in note.fields}
    meta: dict[str, Any] = {
        "memory_type": note.memory_type,
        "created_at": note.created_at,
        "updated_at": note.updated_at,
        "fields": ordered,
    }
    meta.update(note.extra)
    old_head = split_frontmatter(before)[0] if before is not None else None
    head = _keep_comments(old_head, meta) if old_head is not None and "#" in old_head else None
    if head is None:
        head = yaml.dump(meta, Dumper=_NoteDumper, allow_unicode=True, sort_keys=False, width=100)
    body = note.body if note.body.endswith("\n") else note.body + "\n"
    return f"{FRONT}\n{head}{FRONT}\n{body}"


def _keep_comments(old_head: str, meta: dict[str, Any]) -> str | None:
    """``meta`` written over the frontmatter ``old_head`` by a round-trip YAML editor: its
    comments and key order stay, values change where ``meta`` changes them. None when the
    result would not read back as ``meta`` (then the plain dump is written)."""
    from io import StringIO

    from ruamel.yaml import YAML  # (only for a note whose frontmatter holds a comment)
    from ruamel.yaml.comments import CommentedMap

    editor = YAML()
    editor.width = 100
    try:
        doc = editor.load(old_head)
    except Exception:  # noqa: BLE001 (any reader error: the plain dump is written)
        return None
    if not isinstance(doc, CommentedMap):
        return None
    _update(doc, meta)
    out = StringIO()
    editor.dump(doc, out)
    text = out.getvalue()
    try:
        same = load_frontmatter(text) == meta
    except yaml.YAMLError:
        same = False
    return text if same else None


def _update(target: Any, data: dict[str, Any]) -> None:
    """Make the round-trip mapping ``target`` hold ``data``, keeping what is unchanged and
    the comments around it."""
    for key in [k for k in target if k not in data]:
        _delete(target, key)
    for key, value in data.items():
        old = target.get(key)
        if isinstance(value, dict) and isinstance(old, dict):
            _update(old, value)
        elif isinstance(value, list) and isinstance(old, list) and len(old) == len(value):
            for i, item in enumerate(value):  # item by item: a comment on an item stays on its line
                if old[i] != item or not isinstance(old[i], type(item)):
                    old[i] = item
        elif key not in target or old != value or not isinstance(old, type(value)):
            target[key] = value  # (1 == True and 1 == 1.0: a value of another type is written anew)


def _delete(target: Any, key: Any) -> None:
    """Remove ``key``; the comment lines the YAML editor keeps after it (a person's, about
    what follows) go to the key before it."""
    keys = list(target)
    after = target.ca.items.get(key, [None] * 4)
    del target[key]
    at = keys.index(key)
    if len(after) > 2 and after[2] is not None and at > 0:
        _append_comment(target, keys[at - 1], after[2])


def _append_comment(target: Any, key: Any, token: Any) -> None:
    """Put the comment ``token`` after ``key``'s value (the last line it takes)."""
    value = target[key]
    if isinstance(value, dict) and value:
        _append_comment(value, list(value)[-1], token)
    elif isinstance(value, list) and value and hasattr(value, "ca"):  # (a round-trip list: its items' comments)
        slot = value.ca.items.setdefault(len(value) - 1, [None, None, None, None])
        if slot[0] is None:
            slot[0] = token
    else:
        slot = target.ca.items.setdefault(key, [None, None, None, None])
        if slot[2] is None:
            slot[2] = token


def render_note_body(schema: MemoryTypeSchema, fields: dict[str, Any], created_at: str, updated_at: str) -> str:
    return schema.render_body(fields, {"created_at": created_at, "updated_at": updated_at})


def new_body(view: str) -> str:
    """A new note's body: just its delimited view (engine.model.blocks)."""
    return view_block(view) + "\n"


_SLOT = "memlink-text-field-7c41"  # (view_edit: where a view shows its text field)


def view_edit(note: Note, was: Note, schema: MemoryTypeSchema) -> dict[str, str] | None:
    """The fields a person changed where the note's view shows them (in an editor, the
    visible text is what one edits): its title in the view's ``# `` heading, its text field
    where its text is shown. ``was``, the note before the edit, showed its view as its
    fields render it. {} when there is nothing to read back (the view as rendered, or
    edited before, or its markers gone: then what is typed stays as typed,
    ``rebuild_body``); None when the view was changed where it shows no field a person
    writes (a generated line, a date): no field says what was meant."""
    span, before = view_span(note.body), view_span(was.body)
    rendered = view_text(render_note_body(schema, was.fields, was.created_at, was.updated_at))
    if span is None or before is None or before[2].strip("\n") != rendered:
        return {}
    shown = span[2].strip("\n")
    if shown == rendered:
        return {}
    fields, out = dict(was.fields), {}
    title = str(fields.get(schema.title_field) or "")
    was_head, _, _ = rendered.partition("\n")
    head, _, _ = shown.partition("\n")
    if title and was_head == f"# {title}" and head.startswith("# ") and head != was_head:
        new_title = head[2:].strip()
        if not new_title or view_text(new_title) != new_title:
            return None
        fields[schema.title_field] = out[schema.title_field] = new_title
        rendered = view_text(render_note_body(schema, fields, was.created_at, was.updated_at))
        if shown == rendered:
            return out
    text = str(fields.get(schema.text_field) or "").strip("\n")
    if schema.text_field in out or not text or view_text(text) != text:
        return None  # (a text the view shows escaped is not read back)
    # Where the text sits in the view: rendered with a mark in its place (the text itself
    # may be words the view's other lines hold too: "tea" under "Green tea").
    slot = view_text(render_note_body(schema, fields | {schema.text_field: _SLOT}, was.created_at, was.updated_at))
    if slot.count(_SLOT) != 1:
        return None
    front, back = slot.split(_SLOT)
    if not (shown.startswith(front) and shown.endswith(back) and len(shown) >= len(front) + len(back)):
        return None
    new = shown[len(front): len(shown) - len(back)].strip("\n")
    if not new.strip() or view_text(new) != new:
        return None
    return out | {schema.text_field: new}


def rebuild_body(old_body: str, old_view: str, new_view: str) -> str:
    """A note's new body: its generated view replaced by ``new_view``, and everything a
    person wrote around it, above or below, kept byte for byte (docs/DESIGN.md, "Vault
    format": the body). The view is the delimited block (``<!-- memlink:view -->`` …
    ``<!-- /memlink:view -->``, engine.model.blocks). Text someone typed inside the block (it
    no longer reads as ``old_view``) is kept right under the new block. A body without
    the markers (an older note, or markers deleted by hand) has ``old_view``, the view
    rendered from the old fields, looked up as text and wrapped in the markers; when it is
    not there either, what the body holds cannot be told apart from generated text, so
    all of it is kept, under the new view: a write never loses what a person typed. The
    Links block is left where it is (it is regenerated from the sidecars on its own)."""
    block = view_block(new_view)
    span = view_span(old_body)
    if span is not None:
        start, end, inner = span
        edited = inner.strip("\n")
        if edited and edited not in (view_text(old_view), view_text(new_view)):
            block = f"{block}\n\n{edited}"
        body = old_body[:start] + block + old_body[end:]
    else:
        view = view_text(old_view)
        at = old_body.find(view) if view else -1
        links = links_span(old_body)
        if at >= 0 and links is not None and at < links[1] and at + len(view) > links[0]:
            at = -1  # the view's text only inside the Links block: not the view
        if at < 0:
            kept = old_body.strip("\n")
            body = block if not kept else f"{block}\n\n{kept}"
        else:
            body = old_body[:at] + block + old_body[at + len(view) :]
    return body if body.endswith("\n") else body + "\n"


# A source note whose memories and links have not landed yet carries this frontmatter key
# (docs/DESIGN.md, "Units of work"): it lives in the vault, so deleting `.memlink/` keeps
# it, `memlink check` reports it and the next ingest, commit or dream finishes the file.
PENDING_KEY = "extraction"
PENDING = "pending"


def is_pending(note: Note) -> bool:
    """Whether a source note's extraction has not finished (see ``PENDING_KEY``)."""
    return note.extra.get(PENDING_KEY) == PENDING
