"""Each indexed note's title and body as indexed, for the hits a search shows
(docs/DESIGN.md, "Search"): one SQLite table beside the keyword index,
`.memlink/index/texts.sqlite`. A search reads the fifteen-odd hits it shows in one query,
a tenth of a millisecond at 100k notes, where loading the bodies from tantivy's
compressed document store cost three times as much (and the titles from the catalog
another query).

Writes wait in memory (``pending``) until ``flush``, which the search index calls at its
checkpoints before it records what is indexed; each write deletes and adds, so replaying
one after a crash changes nothing. Each flush leaves a new ``token`` in the store, and the
search index records it with what it indexed: a store missing, behind (a flush lost, one
made by a process that could not open the file) or another's does not show that token,
and the index is rebuilt. A store found damaged while in use (``broken``) answers from
what waits in memory only: snippets then read the notes, and the index is rebuilt at its
next sync."""

from __future__ import annotations

import logging
import sqlite3
import threading
import uuid
from pathlib import Path

from ..atomic import remove_file

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS texts(uri TEXT PRIMARY KEY, title TEXT NOT NULL, body TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT OR IGNORE INTO meta VALUES ('token', '');
"""


class TextStore:
    def __init__(self, path: Path | None):
        """The store at ``path``, or in memory when None (a read-only vault). Raises
        sqlite3.DatabaseError when the file is not a readable store."""
        self.path = path
        self.pending: dict[str, tuple[str, str] | None] = {}  # (title, body); None: removed, not yet flushed
        self.broken: str | None = None  # why the store could not be read or written, once it failed
        self._lock = threading.Lock()
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        self._open: sqlite3.Connection | None = self._connect()

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(":memory:" if self.path is None else str(self.path), timeout=30, check_same_thread=False,
                             isolation_level=None)
        try:
            if self.path is not None:
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")  # derived state: a lost flush shows in the token
            if db.execute("SELECT count(*) FROM sqlite_master WHERE name IN ('texts', 'meta')").fetchone()[0] < 2:
                db.executescript(_SCHEMA)  # (only when new: opening a store writes nothing)
        except BaseException:
            db.close()
            raise
        return db

    @property
    def _db(self) -> sqlite3.Connection:
        """The connection (opened again after ``close``)."""
        if self._open is None:
            self._open = self._connect()
        return self._open

    def close(self) -> None:
        """Let the file go: the last connection to close folds SQLite's write-ahead log
        back and removes it with its index, so `.memlink/` holds still once the vault is
        closed (a store in memory is kept: it is the only copy)."""
        with self._lock:
            if self._open is not None and self.path is not None:
                self._open.close()
                self._open = None

    @classmethod
    def wipe(cls, path: Path | None) -> TextStore:
        if path is not None:
            for suffix in ("", "-wal", "-shm"):
                remove_file(Path(f"{path}{suffix}"))
        return cls(path)

    def put(self, uri: str, title: str, body: str) -> None:
        self.pending[uri] = (title, body)

    def remove(self, uri: str) -> None:
        self.pending[uri] = None

    def flush(self) -> None:
        """Write what waits, in one transaction, with a new token. A store that is damaged
        keeps what waits in memory (``broken``); one that cannot be written now (a full
        disk) raises sqlite3.OperationalError and keeps it too."""
        if not self.pending or self.broken:
            return
        with self._lock:
            db = self._db
            try:
                db.execute("BEGIN IMMEDIATE")
                try:
                    for uri, held in self.pending.items():
                        db.execute("DELETE FROM texts WHERE uri = ?", (uri,))
                        if held is not None:
                            db.execute("INSERT INTO texts VALUES (?, ?, ?)", (uri, *held))
                    db.execute("UPDATE meta SET value = ? WHERE key = 'token'", (uuid.uuid4().hex,))
                    db.execute("COMMIT")
                except BaseException:
                    if db.in_transaction:
                        db.execute("ROLLBACK")
                    raise
            except sqlite3.OperationalError:
                raise
            except sqlite3.DatabaseError as exc:
                self._broke(exc)
                return
            self.pending.clear()

    def token(self) -> str | None:
        """The mark of the last flush (None: the store is broken, or holds none)."""
        if self.broken:
            return None
        with self._lock:
            try:
                row = self._db.execute("SELECT value FROM meta WHERE key = 'token'").fetchone()
            except sqlite3.OperationalError:
                raise
            except sqlite3.DatabaseError as exc:
                self._broke(exc)
                return None
        return (row[0] or None) if row else None

    def _broke(self, exc: Exception) -> None:
        self.broken = str(exc)
        log.warning("note texts %s unreadable (%s): snippets read the notes until the index is rebuilt", self.path, exc)

    def texts(self, uris: list[str]) -> dict[str, tuple[str, str]]:
        """The (title, body) of these notes (those waiting first); a note not held is left
        out."""
        out: dict[str, tuple[str, str]] = {}
        stored = []
        for uri in dict.fromkeys(uris):
            if uri in self.pending:
                held = self.pending[uri]
                if held is not None:
                    out[uri] = held
            else:
                stored.append(uri)
        if self.broken:
            return out
        with self._lock:
            try:
                for i in range(0, len(stored), 500):  # under SQLite's bound-parameter limit
                    part = stored[i : i + 500]
                    for uri, title, body in self._db.execute(
                            f"SELECT uri, title, body FROM texts WHERE uri IN ({','.join('?' * len(part))})", part):  # noqa: S608
                        out[uri] = (title, body)
            except sqlite3.OperationalError as exc:  # (not read now: those snippets read the notes)
                log.warning("note texts %s not read (%s)", self.path, exc)
            except sqlite3.DatabaseError as exc:
                self._broke(exc)
        return out
