"""What an import wrote into a source note, kept as a hash in its ``imported`` key: a
source note whose text, title, names, tags or properties no longer hash to it was edited
in the vault (engine.extract.batch leaves such a note as it is)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from .notes import Note
from .yamlio import plain

OBSIDIAN_KEYS = ("folder", "aliases", "tags", "properties")  # a source note's top-level keys its file decides
IMPORTED_KEY = "imported"  # the SHA-256 of what was imported (``imported_sha``)


def text_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def imported_sha(content: str, title: object, keys: dict[str, Any]) -> str:
    """The ``imported`` hash: what the import wrote that a person may edit in the vault (in
    Obsidian's properties panel too): the text, the title, and the keys its file decides."""
    said = {"content": content, "title": title, **{k: keys.get(k) for k in OBSIDIAN_KEYS}}
    return text_sha(json.dumps(plain(said), sort_keys=True, ensure_ascii=False))


def note_sha(note: Note) -> str:
    """The ``imported`` hash of what the note holds now."""
    return imported_sha(str(note.fields.get("content") or ""), note.fields.get("title"), note.extra)


def as_imported(note: Note) -> bool:
    """Whether the note holds what its import wrote, by its ``imported`` hash (one of the
    text alone: a note imported before the keys were counted). A note without the hash is
    not a source note's import."""
    imported = note.extra.get(IMPORTED_KEY)
    return isinstance(imported, str) and imported in (note_sha(note), text_sha(str(note.fields.get("content") or "")))
