"""Each indexed note's body as indexed, for snippets (docs/DESIGN.md, "Search"): one
SQLite table beside the keyword index, `.memlink/index/texts.sqlite`. A search reads the
fifteen-odd bodies it shows in one query, a tenth of a millisecond at 100k notes, where
loading them from tantivy's compressed document store cost three times as much.

Writes wait in memory (``pending``) until ``flush``, which the search index calls at its
checkpoints before it records what is indexed; each write deletes and adds, so replaying
one after a crash changes nothing. ``count`` (kept in the same transactions) lets the
search index see a store that is missing or behind, and rebuild."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from ..atomic import remove_file

_SCHEMA = """
CREATE TABLE IF NOT EXISTS texts(uri TEXT PRIMARY KEY, body TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO meta VALUES ('count', 0);
"""


class TextStore:
    def __init__(self, path: Path | None):
        """The store at ``path``, or in memory when None (a read-only vault). Raises
        sqlite3.DatabaseError when the file is not a readable store."""
        self.path = path
        self.pending: dict[str, str | None] = {}  # None: removed, not yet flushed
        self._lock = threading.Lock()
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(":memory:" if path is None else str(path), check_same_thread=False, isolation_level=None)
        try:
            if path is not None:
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")  # derived state: a lost tail is indexed again
            db.executescript(_SCHEMA)
        except BaseException:
            db.close()
            raise
        self._db = db

    @classmethod
    def wipe(cls, path: Path | None) -> TextStore:
        if path is not None:
            for suffix in ("", "-wal", "-shm"):
                remove_file(Path(f"{path}{suffix}"))
        return cls(path)

    def put(self, uri: str, body: str) -> None:
        self.pending[uri] = body

    def remove(self, uri: str) -> None:
        self.pending[uri] = None

    def flush(self) -> None:
        """Write what waits, in one transaction."""
        if not self.pending:
            return
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                change = 0
                for uri, body in self.pending.items():
                    change -= db.execute("DELETE FROM texts WHERE uri = ?", (uri,)).rowcount
                    if body is not None:
                        db.execute("INSERT INTO texts VALUES (?, ?)", (uri, body))
                        change += 1
                db.execute("UPDATE meta SET value = value + ? WHERE key = 'count'", (change,))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            self.pending.clear()

    def count(self) -> int:
        """How many bodies the store holds (written ones: not those waiting)."""
        with self._lock:
            return int(self._db.execute("SELECT value FROM meta WHERE key = 'count'").fetchone()[0])

    def texts(self, uris: list[str]) -> dict[str, str]:
        """The bodies of these notes (those waiting first); a note not held is left out."""
        out: dict[str, str] = {}
        stored = []
        for uri in dict.fromkeys(uris):
            if uri in self.pending:
                body = self.pending[uri]
                if body is not None:
                    out[uri] = body
            else:
                stored.append(uri)
        with self._lock:
            for i in range(0, len(stored), 500):  # under SQLite's bound-parameter limit
                part = stored[i : i + 500]
                out.update(self._db.execute(
                    f"SELECT uri, body FROM texts WHERE uri IN ({','.join('?' * len(part))})", part))  # noqa: S608
        return out

    def close(self) -> None:
        with self._lock:
            self._db.close()
