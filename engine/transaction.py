"""A vault's unit of work: note writes and deletes, link changes, restored sidecars and
log records gathered while a ``with vault.transaction() as tx:`` block runs, committed
through the journal as one atomic step when it ends (nothing when it raises).

The transaction keeps the journal operations it will commit plus an overlay of what they
change (note texts, sidecar states), which the vault's reads consult, so code inside the
block sees its own staged writes. See docs/DESIGN.md, "Units of work".
"""

from __future__ import annotations

import hashlib
import uuid
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from .journal import (
    AppendRecords,
    DeleteFile,
    PutLink,
    RemoveLegacy,
    RemoveLink,
    WriteFile,
    WriteSidecar,
    apply_sidecar_op,
    file_hash,
    log_path,
)
from .links import SIDECAR, Sidecar, StoredLink

if TYPE_CHECKING:
    from .notes import Note
    from .vault import Vault

LinkOp = PutLink | RemoveLink | RemoveLegacy


def text_hash(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode("utf-8")).hexdigest()


def sidecar_rel(folder: str) -> str:
    """A folder's sidecar as a vault-relative path."""
    return f"{folder}/{SIDECAR}" if folder else SIDECAR


class Transaction:
    """Staged changes of one unit of work. Open it with ``Vault.transaction()``; the
    vault's own write methods join the open transaction of their thread."""

    def __init__(self, vault: Vault) -> None:
        self.vault = vault
        self._files: dict[str, WriteFile | DeleteFile] = {}  # by uri; keeps the first `before`
        self._texts: dict[str, str | None] = {}  # staged note texts (None: deleted)
        self._notes: dict[str, Note | None] = {}  # parsed notes for the catalog (None: parse the file)
        self._restores: dict[str, WriteSidecar] = {}  # whole sidecars put back (undo)
        self._link_ops: list[LinkOp] = []
        self._sidecars: dict[str, Sidecar] = {}  # staged sidecar states by folder
        self._restored: dict[str, str | None] = {}  # sidecar texts put back whole, by folder
        self._changed: set[str] = set()  # folders whose staged sidecar link ops changed
        self._owned: set[str] = set()  # staged sidecars this savepoint may change in place
        self._records: dict[str, list[dict[str, Any]]] = {}  # log -> records to append
        self._events: list[tuple[str, str]] = []

    # -- staging ------------------------------------------------------------------------
    def put_text(self, uri: str, text: str, note: Note | None = None) -> None:
        """Stage a note file's new text (``note``: the parsed note, for the catalog)."""
        first = self._files.get(uri)
        before = first.before if first is not None else file_hash(self.vault.path(uri))
        self._files[uri] = WriteFile(uri=uri, text=text, before=before)
        self._texts[uri] = text
        self._notes[uri] = note
        self._events.append(("changed", uri))

    def delete(self, uri: str) -> None:
        first = self._files.get(uri)
        before = first.before if first is not None else file_hash(self.vault.path(uri))
        self._files[uri] = DeleteFile(uri=uri, before=before)
        self._texts[uri] = None
        self._notes.pop(uri, None)
        self._events.append(("deleted", uri))

    def restore_sidecar(self, folder: str, text: str | None) -> None:
        """Put a folder's whole sidecar back as ``text`` (None: no sidecar). Link changes
        staged earlier for the folder are overwritten by it."""
        first = self._restores.get(folder)
        before = first.before if first is not None else file_hash(self.vault.resolve.folder(folder) / SIDECAR)
        self._restores[folder] = WriteSidecar(folder=folder, text=text, before=before)
        self._link_ops = [op for op in self._link_ops if op.folder != folder]
        self._sidecars[folder] = Sidecar.parse(text or "", sidecar_rel(folder), folder)
        self._owned.add(folder)
        self._restored[folder] = text
        self._changed.discard(folder)

    def restore(self, rel: str, text: str | None) -> None:
        """Put a vault file (a note or a sidecar) back as ``text`` (None: no file)."""
        if rel == SIDECAR or rel.endswith("/" + SIDECAR):
            self.restore_sidecar(rel[: -len(SIDECAR)].rstrip("/"), text)
        elif text is not None:
            self.put_text(rel, text)
        elif self.text_after(rel) is not None:
            self.delete(rel)

    def link_ops(self, ops: list[LinkOp]) -> None:
        """Stage link changes; each folder's staged sidecar follows them."""
        for op in ops:
            car = self._sidecars.get(op.folder)
            if car is None:
                car = self.vault.sidecars.read(self.vault.root, op.folder)  # a copy of the parsed file
            elif op.folder not in self._owned:
                car = car.copy()  # copy on write, once per folder and savepoint: a mark keeps the old one
            self._sidecars[op.folder] = car
            self._owned.add(op.folder)
            if apply_sidecar_op(car, op):
                self._changed.add(op.folder)
            self._link_ops.append(op)

    def append(self, log: str, record: dict[str, Any] | BaseModel) -> dict[str, Any]:
        """Stage a record for an append-only log (a vault-relative path under
        ``.memlink/``). The record gets an ``id`` if it has none: a replay of the journal
        uses it to append the record once. Returns the record as it will be written."""
        log_path(self.vault.root, log)  # refused now, not at commit, when outside .memlink/
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

    def sidecar(self, folder: str) -> Sidecar | None:
        """A folder's staged sidecar (None: not touched by this transaction)."""
        return self._sidecars.get(folder)

    def note_links(self, folder: str, uri: str, direction: str) -> list[StoredLink] | None:
        car = self._sidecars.get(folder)
        if car is None:
            return None
        return [l for l in car.all_links(folder)
                if l.direction == direction and (l.from_uri if direction == "links" else l.to_uri) == uri]

    def text_after(self, rel: str) -> str | None:
        """What a vault file (a note or a sidecar) will hold once this transaction commits."""
        if rel == SIDECAR or rel.endswith("/" + SIDECAR):
            folder = rel[: -len(SIDECAR)].rstrip("/")
            car = self._sidecars.get(folder)
            if folder in self._changed and car is not None:  # what the journal's apply will write
                return car.dump() if car.entries or car.legacy else None
            if folder in self._restored:
                return self._restored[folder]
        elif rel in self._texts:
            return self._texts[rel]
        try:
            return (self.vault.root / rel).read_text(encoding="utf-8")
        except FileNotFoundError:
            return None

    # -- savepoints: a joined block that raises leaves nothing staged ----------------------
    def mark(self) -> tuple:
        self._owned = set()  # from here on a staged sidecar is copied before it changes
        return (dict(self._files), dict(self._texts), dict(self._notes), dict(self._restores), list(self._link_ops),
                dict(self._sidecars), dict(self._restored), set(self._changed),
                {k: list(v) for k, v in self._records.items()}, list(self._events))

    def rollback(self, mark: tuple) -> None:
        (self._files, self._texts, self._notes, self._restores, self._link_ops, self._sidecars, self._restored,
         self._changed, self._records, self._events) = mark
        self._owned = set()

    # -- what the vault commits ------------------------------------------------------------
    def ops(self) -> list:
        """The journal operations, in the order they must be applied: files, restored
        sidecars, then link changes on top of them, then log records."""
        ops: list = [*self._files.values(), *self._restores.values(), *self._link_ops]
        ops += [AppendRecords(log=log, records=rows) for log, rows in self._records.items() if rows]
        return ops

    @property
    def links_changed(self) -> bool:
        return bool(self._link_ops or self._restores)

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
