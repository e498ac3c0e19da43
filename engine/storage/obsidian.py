"""Regenerate every note's generated blocks (docs/DESIGN.md, "Vault format": the body):
after turning ``obsidian.links_block`` on or off in ``memlink.yaml``, or after an upgrade
from notes without blocks. ``memlink obsidian`` runs it.

- **The view**: a note whose body holds its view without the markers (an older note)
  gets them around it; every other byte stays. A body where the view rendered from the
  note's fields cannot be found (edited, or written by another template) is left as it
  is: its next field write keeps all of it under a new delimited view
  (``engine.model.notes.rebuild_body``), and a bulk command should not do that to every note.
- **The Links block**: written from the note's outgoing links in the sidecars (or
  removed, when turned off), as every write does it.

Notes are rewritten only when their text changes, ``BATCH`` notes per unit of work (so a
journal stays small and a kill loses at most one batch, which the next run redoes).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import MemlinkError
from ..model.blocks import view_span
from ..model.notes import parse_note, rebuild_body, render_note_body
from ..model.uris import uri_dir

if TYPE_CHECKING:
    from .vault import Vault

BATCH = 500


@dataclass
class Regenerated:
    notes: int = 0  # notes looked at
    rewritten: list[str] = field(default_factory=list)  # notes whose text changed (or would, in a dry run)
    views: int = 0  # of which: the view got its markers
    skipped: list[str] = field(default_factory=list)  # notes that do not parse: left alone
    unreadable: dict[str, str] = field(default_factory=dict)  # folder -> why its link files cannot be read: its notes left alone
    symlinks: list[str] = field(default_factory=list)  # notes that are symbolic links: never written through, left alone

    def summary(self) -> str:
        return (f"{self.notes} notes: {len(self.rewritten)} rewritten ({self.views} views delimited)"
                + (f"; {len(self.skipped)} that do not parse left alone" if self.skipped else "")
                + (f"; {len(self.symlinks)} that are symbolic links left alone" if self.symlinks else "")
                + "".join(f"; the notes in {folder or 'the vault folder'} left alone: {why}"
                          for folder, why in sorted(self.unreadable.items())))


class _DryRun(Exception):
    pass


def regenerate(vault: Vault, *, dry_run: bool = False, batch: int = BATCH) -> Regenerated:
    """Bring every note's view markers and Links block in line (see the module doc)."""
    out = Regenerated()
    entries = sorted(vault.catalog.uris())
    # A folder whose link files cannot be read shows no links: its notes' Links blocks are
    # left as they are, not emptied.
    for folder in sorted({uri_dir(uri) for uri in entries}):
        why = vault.links.folder(folder, records=False).problem(folder)
        if why:
            out.unreadable[folder] = why
    entries = [uri for uri in entries if uri_dir(uri) not in out.unreadable]
    for start in range(0, len(entries), batch):
        chunk = entries[start : start + batch]
        try:
            with vault.transaction() as tx:
                before: dict[str, str] = {}
                for uri in chunk:
                    if os.path.islink(vault.path(uri)):
                        out.symlinks.append(uri)
                        continue
                    try:
                        text = vault.read_text(uri)
                        note = parse_note(text, uri, vault.types)
                    except (OSError, UnicodeDecodeError, MemlinkError):
                        out.skipped.append(uri)
                        continue
                    out.notes += 1
                    before[uri] = text
                    if view_span(note.body) is None:
                        schema = vault.schema(note.memory_type)
                        view = render_note_body(schema, note.fields, note.created_at, note.updated_at).strip("\n")
                        if view and view in note.body:
                            body = rebuild_body(note.body, view, view)
                            head = text[: len(text) - len(note.body)]
                            new = head + body if head.endswith("\n") else f"{head}\n{body}"
                            tx.put_text(uri, new, parse_note(new, uri, vault.types))
                            out.views += 1
                tx.links_touched(before)
                changed = [uri for uri, text in before.items() if tx.text_after(uri) != text]
                out.rewritten += changed
                if dry_run:
                    raise _DryRun
        except _DryRun:
            continue
    return out

