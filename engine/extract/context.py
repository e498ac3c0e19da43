"""What an extraction sees: the input text, and the existing pages it may touch or link
to, each under a page id (1–99) with its fields and links."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..model.links import StoredLink
from ..model.notes import Note
from .pageids import PageIdMap

if TYPE_CHECKING:
    from ..storage.vault import Vault


@dataclass
class ExtractContext:
    kind: str  # "session" | "resource" | "dream"
    text: str  # the conversation (user/assistant lines) or the resource's text
    when: dt.date  # the day the input happened, for relative dates
    pages: PageIdMap = field(default_factory=PageIdMap)
    notes: dict[int, Note] = field(default_factory=dict)  # existing pages by page id
    links: list[StoredLink] = field(default_factory=list)  # links among the existing pages
    source_page: int | None = None  # the imported resource's own page, when there is one
    user_lines: list[str] = field(default_factory=list)  # what the user said (sessions)
    line_days: list[dt.date] = field(default_factory=list)  # the day each of them was said (a session of many days)
    said_on: dict[int, dt.date] = field(default_factory=dict)  # a new page's day, when not ``when`` (of its line)
    known_names: dict[str, str] = field(default_factory=dict)  # entity title/alias (lower) -> uri
    base: str | None = None  # the imported file's folder in its tree, for its relative references
    common_words: set[str] = field(default_factory=set)  # words the input writes in lower case
    # The vault's link types for the prompt: (name, what it means), from its link-type
    # table (docs/DESIGN.md, "Link types"); the built-ins until prefetch fills it.
    link_types: list[tuple[str, str]] = field(default_factory=list)
    # Whether ``when`` is the input's own day: an imported file whose name and frontmatter
    # give none is read with no "today" (its relative dates are not the day of import).
    day_known: bool = True

    def add(self, note: Note) -> int:
        page_id = self.pages.get_or_assign(note.uri)
        self.notes[page_id] = note
        return page_id

    def page_of(self, uri: str) -> int | None:
        for pid, note in self.notes.items():
            if note.uri == uri:
                return pid
        return None

    def collect_links(self, vault: Vault) -> None:
        """Add the stored links that join two of the context's pages."""
        for note in list(self.notes.values()):
            for link in vault.links.of(note.uri, "links"):
                if self.page_of(link.to_uri) is not None:
                    self.links.append(link)
