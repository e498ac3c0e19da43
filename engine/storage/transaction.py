"""A vault's unit of work: note writes and deletes, link changes, restored sidecars and
log records gathered while a ``with vault.transaction() as tx:`` block runs, committed
through the journal as one atomic step when it ends (nothing when it raises).

The transaction keeps the journal operations it will commit plus an overlay of what they
change (note texts; the links of each note a link operation touches, never a copy of a
whole folder's sidecar), which the vault's reads consult, so code inside the block sees
its own staged writes. See docs/DESIGN.md, "Units of work".
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ..errors import SidecarError
from ..model.files import NOTE_BYTES, read_bounded
from ..model.links import SIDECAR, Sidecar, StoredLink, dump_rows
from .journal import AppendRecords, DeleteFile, WriteFile, WriteSidecar, file_hash, log_path
from .linkindex import home
from .sidecars import SIDECAR_LOG, LinkOp, PutLink, RemoveLink, apply_raw, folder_text, op_row, owner_of, read_folder, sidecar_rel

if TYPE_CHECKING:
    from ..model.notes import Note
    from .vault import Vault

View = tuple[str, str, str]  # (folder, owner note, direction): one note's side of a folder's sidecar

__all__ = ["LinkChange", "LinkOp", "Transaction", "sidecar_rel", "text_hash"]


def text_hash(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode("utf-8")).hexdigest()


def _is_sidecar(rel: str) -> bool:
    return rel == SIDECAR or rel.endswith("/" + SIDECAR)


@dataclass(frozen=True)
class LinkChange:
    """One link record a transaction changes: as on disk (``before``) and as staged."""

    folder: str
    id: str
    direction: str
    before: StoredLink | None
    after: StoredLink | None


def _last_put(links: list[StoredLink]) -> list[StoredLink]:
    """Links put one after another into one note's records, as they end up: a later put
    replaces an earlier one with its id or key."""
    ids: set[str] = set()
    keys: set[tuple] = set()
    out = []
    for link in reversed(links):
        if link.id not in ids and link.key not in keys:
            out.append(link)
        ids.add(link.id)
        keys.add(link.key)
    return out[::-1]


class Transaction:
    """Staged changes of one unit of work. Open it with ``Vault.transaction()``; the
    vault's own write methods join the open transaction of their thread."""

    def __init__(self, vault: Vault) -> None:
        self.vault = vault
        self._files: dict[str, WriteFile | DeleteFile] = {}  # by uri; keeps the first `before`
        self._texts: dict[str, str | None] = {}  # staged note texts (None: deleted)
        self._notes: dict[str, Note | None] = {}  # parsed notes for the catalog (None: parse the file)
        self._restores: dict[str, WriteSidecar] = {}  # whole sidecars put back (undo)
        self._restored: dict[str, str | None] = {}  # sidecar texts put back whole, by folder
        self._link_ops: list[LinkOp] = []
        # Staged links of each note a link operation touched (lists are replaced, never
        # changed in place, so a savepoint's shallow copy keeps the old ones).
        self._views: dict[View, list[StoredLink]] = {}
        self._records: dict[str, list[dict[str, Any]]] = {}  # log -> records to append
        self._events: list[tuple[str, str]] = []
        # Notes whose Links block may be stale: written, or their outgoing links changed
        # (``settle`` regenerates the block from the staged links; docs/DESIGN.md, "Vault
        # format": the body).
        self._stale: set[str] = set()
        self._pinned: frozenset[str] = frozenset()  # notes put back whole (undo): their text is kept as it was
        self._settling = False

    # -- staging ------------------------------------------------------------------------
    def put_text(self, uri: str, text: str, note: Note | None = None) -> None:
        """Stage a note file's new text (``note``: the parsed note, for the catalog)."""
        first = self._files.get(uri)
        before = first.before if first is not None else file_hash(self.vault.path(uri))
        self._files[uri] = WriteFile(uri=uri, text=text, before=before)
        self._texts[uri] = text
        self._notes[uri] = note
        self._events.append(("changed", uri))
        if not self._settling:
            self._stale = self._stale | {uri}

    def delete(self, uri: str) -> None:
        first = self._files.get(uri)
        before = first.before if first is not None else file_hash(self.vault.path(uri))
        self._files[uri] = DeleteFile(uri=uri, before=before)
        self._texts[uri] = None
        self._notes.pop(uri, None)
        self._events.append(("deleted", uri))

    def restore_sidecar(self, folder: str, text: str | None) -> None:
        """Put a folder's whole sidecar back as ``text`` (None: no sidecar; its link log
        goes too). Link changes staged earlier for the folder are overwritten by it."""
        first = self._restores.get(folder)
        if first is None:
            where = self.vault.resolve.folder(folder)
            first = WriteSidecar(folder=folder, text=None, before=file_hash(where / SIDECAR),
                                 log_before=file_hash(where / SIDECAR_LOG))
        self._restores[folder] = first.model_copy(update={"text": text})
        self._link_ops = [op for op in self._link_ops if op.folder != folder]
        owners = {k[1] for k in self._views if k[0] == folder and k[2] == "links"}
        owners |= {owner_of(l) for l in self.vault.links.folder(folder).links if l.direction == "links"}
        views = {k: v for k, v in self._views.items() if k[0] != folder}
        for link in Sidecar.parse(text or "", sidecar_rel(folder), folder).all_links(folder):
            key = (folder, owner_of(link), link.direction)
            views[key] = [*views.get(key, []), link]
            if link.direction == "links":
                owners.add(owner_of(link))
        self.links_touched(owners)
        self._views = views
        self._restored = {**self._restored, folder: text}

    def restore(self, rel: str, text: str | None) -> None:
        """Put a vault file (a note or a sidecar) back as ``text`` (None: no file)."""
        if _is_sidecar(rel):
            self.restore_sidecar(rel[: -len(SIDECAR)].rstrip("/"), text)
        elif text is not None:
            self.put_text(rel, text)
            self._pinned = self._pinned | {rel}  # byte for byte: its Links block is not regenerated
        elif self.text_after(rel) is not None:
            self.delete(rel)

    def link_ops(self, ops: list[LinkOp]) -> None:
        """Stage link changes; the staged links of each note they touch follow them."""
        touched: set[str] = set()  # notes whose outgoing links change: their Links block follows
        self._prefetch(ops)
        i = 0
        while i < len(ops):
            op = ops[i]
            if isinstance(op, PutLink):
                # A run of puts into one note's records is staged at once (a moved hub's
                # thousand backlinks: one pass over its list, not one per put).
                key = (op.folder, owner_of(op.link), op.link.direction)
                end = i + 1
                while end < len(ops) and isinstance(nxt := ops[end], PutLink) and \
                        (nxt.folder, owner_of(nxt.link), nxt.link.direction) == key:
                    end += 1
                run = _last_put([o.link for o in ops[i:end]])  # type: ignore[union-attr]
                ids, keys = {l.id for l in run}, {l.key for l in run}
                kept = [l for l in self._view(key) if l.legacy or (l.id not in ids and l.key not in keys)]
                self._views[key] = [*kept, *run]
                if key[2] == "links":
                    touched.add(key[1])
                self._link_ops.extend(ops[i:end])
                i = end
                continue
            if isinstance(op, RemoveLink):  # a run of removals from one folder's side: at once, too
                end = i + 1
                while end < len(ops) and isinstance(nxt := ops[end], RemoveLink) and \
                        (nxt.folder, nxt.direction) == (op.folder, op.direction):
                    end += 1
                ids = {o.id for o in ops[i:end]}  # type: ignore[union-attr]
                for owner in self._owners(op.folder, ids, op.direction):
                    key = (op.folder, owner, op.direction)
                    self._views[key] = [l for l in self._view(key) if l.legacy or l.id not in ids]
                    if op.direction == "links":
                        touched.add(owner)
                self._link_ops.extend(ops[i:end])
                i = end
                continue
            i += 1  # a legacy entry's target
            key = (op.folder, op.from_uri or op.folder, "links")
            self._views[key] = [l for l in self._view(key)
                                if not (l.legacy and l.id == (op.entry_id or "legacy") and l.to_uri == op.to_uri)]
            touched.add(key[1])
            self._link_ops.append(op)
        self.links_touched(touched)

    def _prefetch(self, ops: list[LinkOp]) -> None:
        """The records on disk of the notes ``ops`` put links for, read in one query per
        direction instead of one per note."""
        wanted: dict[str, set[str]] = {}
        for op in ops:
            if isinstance(op, PutLink):
                key = (op.folder, owner_of(op.link), op.link.direction)
                if key not in self._views and op.folder not in self._restored and op.folder == home(key[1]):
                    wanted.setdefault(key[2], set()).add(key[1])
        for direction, owners in wanted.items():
            if len(owners) > 1:
                found = self.vault.links.of_many(sorted(owners), direction, as_staged=False)
                for owner, links in found.items():
                    self._views[(home(owner), owner, direction)] = links

    def links_touched(self, uris: Iterable[str]) -> None:
        """Mark notes whose Links block may no longer say what their links are (their
        outgoing links changed, or a note they link to changed its title): ``settle``
        regenerates it."""
        fresh = {u for u in uris if u.endswith(".md")} - self._stale - self._pinned
        if fresh:
            self._stale = self._stale | fresh

    def settle(self) -> None:
        """Regenerate the Links block of every note marked stale, from the links staged
        here (``Vault.refresh_links_blocks``): what commits is each note with the block
        its links give. Called before the journal operations or a file's final text are
        read; each note is rewritten once however many links of it changed."""
        if self._settling:
            return
        self._settling = True
        try:
            while self._stale:
                uris, self._stale = sorted(self._stale - self._pinned), set()
                self.vault.refresh_links_blocks(uris)
        finally:
            self._settling = False

    def _view(self, key: View) -> list[StoredLink]:
        """A note's staged links in a folder, as on disk until this transaction changed them."""
        staged = self._views.get(key)
        if staged is not None:
            return staged
        if key[0] in self._restored:
            return []
        return self.vault.links.of(key[1], key[2], as_staged=False)

    def _owners(self, folder: str, link_ids: set[str], direction: str) -> set[str]:
        """The notes whose records in ``folder`` hold any of ``link_ids``, staged or on disk."""
        owners = {k[1] for k, links in self._views.items()
                  if k[0] == folder and k[2] == direction and any(l.id in link_ids for l in links)}
        if folder not in self._restored:
            owners |= {owner_of(found) for found in self.vault.links.records(folder, link_ids, direction).values()}
        return owners

    def append(self, log: str, record: dict[str, Any] | BaseModel) -> dict[str, Any]:
        """Stage a record for an append-only log (a vault-relative path ``log_path``
        allows). The record gets an ``id`` if it has none: a replay of the journal uses it
        to append the record once. Returns the record as it will be written."""
        log_path(self.vault.root, log)  # refused now, not at commit, when not such a log
        row = record.model_dump(mode="json") if isinstance(record, BaseModel) else dict(record)
        row.setdefault("id", uuid.uuid4().hex)
        self._records.setdefault(log, []).append(row)
        return row

    # -- reading through the overlay -------------------------------------------------------
    def staged(self, uri: str) -> bool:
        return uri in self._texts

    def text(self, uri: str) -> str | None:
        """A staged note text (None: staged as deleted). Only for ``staged`` uris."""
        return self._texts[uri]

    def created(self, uri: str) -> bool:
        """Whether this transaction writes ``uri`` where there was no file."""
        first = self._files.get(uri)
        return isinstance(first, WriteFile) and first.before is None

    def note_links(self, folder: str, uri: str, direction: str) -> list[StoredLink] | None:
        """A note's staged links (None: this transaction did not touch them)."""
        key = (folder, uri, direction)
        if key in self._views:
            return list(self._views[key])
        return [] if folder in self._restored else None

    def entries(self, folder: str, link_ids: Iterable[str], direction: str) -> dict[str, StoredLink]:
        """The records with these ids and this direction in a folder once this transaction
        commits, by id (read in one query)."""
        wanted = set(link_ids)
        out: dict[str, StoredLink] = {}
        staged: set[str] = set()  # owners whose records here this transaction staged
        for (f, owner, d), links in self._views.items():
            if f == folder and d == direction:
                staged.add(owner)
                out.update((l.id, l) for l in links if l.id in wanted and not l.legacy)
        if folder not in self._restored:
            for link_id, found in self.vault.links.records(folder, wanted - set(out), direction).items():
                if owner_of(found) not in staged:  # (else staged away)
                    out[link_id] = found
        return out

    def link_changes(self) -> list[LinkChange]:
        """Every link record this transaction changes, by (folder, id, direction). A record
        that moves from one note to another of the same folder (a rename) is one change:
        the entry it was under the old note, the entry it is under the new one."""
        out: dict[tuple[str, str, str], LinkChange] = {}
        keys = set(self._views)
        for folder in self._restored:
            keys |= {(folder, owner_of(l), l.direction) for l in self.vault.links.folder(folder).links}
        on_disk: dict[str, dict[str, list[StoredLink]]] = {}  # direction -> owner -> records (one query each)
        for direction in ("links", "backlinks"):
            owners = sorted({k[1] for k in keys if k[2] == direction})
            on_disk[direction] = self.vault.links.of_many(owners, direction, as_staged=False) if owners else {}
        for key in sorted(keys):
            before = {(l.id, l.to_uri if l.legacy else ""): l for l in on_disk[key[2]][key[1]]}
            after = {(l.id, l.to_uri if l.legacy else ""): l for l in self._views.get(key, [])}
            for ident in sorted(set(before) | set(after)):
                was, now = before.get(ident), after.get(ident)
                if was == now:
                    continue
                seen = out.get((key[0], ident[0], key[2]))
                if seen is not None:  # (the other owner's half of the same record)
                    was, now = seen.before or was, seen.after or now
                out[(key[0], ident[0], key[2])] = LinkChange(key[0], ident[0], key[2], was, now)
        return [out[k] for k in sorted(out)]

    def text_after(self, rel: str) -> str | None:
        """What a vault file (a note or a sidecar) will hold once this transaction commits
        (a sidecar with a link log: its list with the log applied, as one text)."""
        self.settle()
        if _is_sidecar(rel):
            folder = rel[: -len(SIDECAR)].rstrip("/")
            ops = [op for op in self._link_ops if op.folder == folder]
            lines = None  # (the entries as read: written as they were, as a link write does)
            if folder in self._restored:
                if not ops:
                    return self._restored[folder]
                rows = Sidecar.parse(self._restored[folder] or "", rel, folder)
                raw: list = [*(l.model_dump(mode="json") for l in rows.entries), *rows.legacy]
            else:
                path = self.vault.resolve.folder(folder)
                if not ops:
                    return folder_text(self.vault.root, path, folder)
                files = read_folder(self.vault.root, path, folder, lines=True)
                if files.broken:
                    raise SidecarError(files.broken)
                raw, lines = files.rows, files.lines
            for op in ops:
                apply_raw(raw, op_row(op))
            return dump_rows(raw, lines) if raw else None
        if rel in self._texts:
            return self._texts[rel]
        try:
            return read_bounded(self.vault.root / rel, NOTE_BYTES).decode("utf-8")
        except FileNotFoundError:
            return None

    # -- savepoints: a joined block that raises leaves nothing staged ----------------------
    def mark(self) -> tuple:
        return (dict(self._files), dict(self._texts), dict(self._notes), dict(self._restores), list(self._link_ops),
                dict(self._views), dict(self._restored), {k: list(v) for k, v in self._records.items()}, list(self._events),
                self._stale, self._pinned)

    def rollback(self, mark: tuple) -> None:
        (self._files, self._texts, self._notes, self._restores, self._link_ops, self._views, self._restored,
         self._records, self._events, self._stale, self._pinned) = mark

    # -- what the vault commits ------------------------------------------------------------
    def ops(self) -> list:
        """The journal operations, in the order they must be applied: files, restored
        sidecars, then link changes on top of them, then log records. Stale Links
        blocks are regenerated first (``settle``)."""
        self.settle()
        ops: list = [*self._files.values(), *self._restores.values(), *self._link_ops]
        ops += [AppendRecords(log=log, records=rows) for log, rows in self._records.items() if rows]
        return ops

    def written(self) -> list[tuple[str, Note | None]]:
        """Notes written (with their parsed note when known) and deleted (None text)."""
        return [(uri, self._notes.get(uri)) for uri, text in self._texts.items() if text is not None]

    def deleted(self) -> list[str]:
        return [uri for uri, text in self._texts.items() if text is None]

    def events(self) -> list[tuple[str, str]]:
        """Each touched note once, with its last event, in the order last touched."""
        order: dict[str, str] = {}
        for event, uri in self._events:
            order.pop(uri, None)
            order[uri] = event
        return [(event, uri) for uri, event in order.items()]
