"""The catalog: which notes exist, their type, title, timestamps and file identity
(mtime + size + content hash). Derived state in TinyDB, sharded by a hash of the URI so
that recording one note rewrites one small shard, not the whole catalog."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .state import StateStore

if TYPE_CHECKING:
    from tinydb.table import Table

SHARDS = 64


@dataclass
class CatalogEntry:
    uri: str
    memory_type: str
    title: str
    created_at: str
    updated_at: str
    mtime_ns: int
    size: int
    sha: str = ""  # content hash: the index compares it to what it has indexed
    error: str | None = None
    superseded: bool = False  # a review kept another note over this one (valid_until set)
    # What other notes and questions may call this note by (engine.names): its aliases
    # (other names, the path a file was imported from) and kind (person, company…).
    aliases: list = field(default_factory=list)
    kind: str = ""


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:20]


def shard_of(uri: str) -> str:
    return f"catalog-{int(hashlib.sha1(uri.encode('utf-8')).hexdigest()[:6], 16) % SHARDS:02d}"


class CatalogStore:
    def __init__(self, state: StateStore):
        self.state = state

    def _table(self, shard: str) -> Table:
        return self.state.db(shard).table("notes")

    def load(self) -> dict[str, CatalogEntry]:
        out: dict[str, CatalogEntry] = {}
        folder = self.state.folder
        if not folder.is_dir():
            return out
        for path in sorted(folder.glob("catalog-*.json")):
            # The raw rows, not TinyDB Documents: at 100k notes the wrappers cost a second.
            data = self.state.db(path.stem).storage.read() or {}
            for row in (data.get("notes") or {}).values():
                if "kind" not in row:
                    continue  # a row from before aliases and kinds: re-derived from the file
                try:
                    entry = CatalogEntry(**row)
                except TypeError:
                    continue  # a row from an older layout: it is re-derived from the file
                out[entry.uri] = entry
        return out

    def replace(self, before: dict[str, CatalogEntry], after: dict[str, CatalogEntry]) -> None:
        """Write only the shards whose rows changed."""
        dirty: dict[str, list[CatalogEntry]] = {}
        for uri in set(before) | set(after):
            if before.get(uri) != after.get(uri):
                dirty.setdefault(shard_of(uri), [])
        for entry in after.values():
            if shard_of(entry.uri) in dirty:
                dirty[shard_of(entry.uri)].append(entry)
        for shard, rows in dirty.items():
            table = self._table(shard)
            table.truncate()
            if rows:
                table.insert_multiple(dict(e.__dict__) for e in rows)  # asdict() deep-copies: slow

    # put/drop edit the shard's raw rows (read, change, write) rather than through a TinyDB
    # table: a table caches its next row id, which goes stale when another process (the
    # CLI next to the app) has written the same shard. Callers hold the vault lock.
    def _rows(self, shard: str) -> tuple:
        storage = self.state.db(shard).storage
        data = storage.read() or {}
        return storage, data, data.setdefault("notes", {})

    def put(self, entry: CatalogEntry) -> None:
        storage, data, rows = self._rows(shard_of(entry.uri))
        key = next((k for k, row in rows.items() if row.get("uri") == entry.uri), None)
        if key is None:
            key = str(max((int(k) for k in rows if k.isdigit()), default=0) + 1)
        rows[key] = dict(entry.__dict__)
        storage.write(data)

    def drop(self, uri: str) -> None:
        storage, data, rows = self._rows(shard_of(uri))
        keys = [k for k, row in rows.items() if row.get("uri") == uri]
        if keys:
            for k in keys:
                del rows[k]
            storage.write(data)
