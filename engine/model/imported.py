"""What an import wrote into a source note, and whether a person changed it since: the
note's ``imported`` hash (engine.extract.batch writes it; a move asks it before rewriting
the page's wikilinks)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from .blocks import view_span, view_text
from .notes import Note, render_note_body
from .schema import MemoryTypeSchema
from .yamlio import plain

OBSIDIAN_KEYS = ("folder", "aliases", "tags", "properties")  # a source note's top-level keys its file decides
IMPORTED_KEY = "imported"  # the SHA-256 of what was imported (``imported_sha``): a note that differs was edited


def text_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def imported_sha(content: str, title: object, keys: dict[str, Any]) -> str:
    """The ``imported`` hash: what the import wrote that a person may edit in the vault (in
    Obsidian's properties panel too): the text, the title, and the keys its file decides."""
    said = {"content": content, "title": title, **{k: keys.get(k) for k in OBSIDIAN_KEYS}}
    return text_sha(json.dumps(plain(said), sort_keys=True, ensure_ascii=False))


def edited_since_import(note: Note, schema: MemoryTypeSchema) -> bool:
    """Whether a person changed what was imported into a source note in the vault: its
    text, title, names, tags or properties are no longer those imported (its ``imported``
    hash; an edit through memlink, the app, MCP or Obsidian's properties), or its view no
    longer reads as its fields render (an edit in Obsidian)."""
    imported = note.extra.get(IMPORTED_KEY)
    content = str(note.fields.get("content") or "")
    # (A hash of the text alone: a note imported before the keys were counted.)
    if isinstance(imported, str) and imported not in (imported_sha(content, note.fields.get("title"), note.extra),
                                                      text_sha(content)):
        return True
    span = view_span(note.body)
    if span is None:
        return True
    view = render_note_body(schema, note.fields, note.created_at, note.updated_at)
    return span[2].strip("\n") != view_text(view)
