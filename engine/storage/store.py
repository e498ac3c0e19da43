"""The one derived database: `.memlink/index.sqlite` (docs/DESIGN.md, "Derived state").

Everything memlink derives from the vault's files, other than the search libraries' own
files, is a table here: the catalog (notes and their names), the link index (each
sidecar record, each folder's state), the checks' memo, the search indexes' bookkeeping
(what each indexes, their vector labels), the turn index and the ingest registry. One
connection policy, one schema version, one rule for damage and for a database of another
version: it is deleted and rebuilt from the files. One change feed, ``changes(seq, kind,
key)``, says what was written; every in-process cache follows it.

A read-only vault keeps the database in memory (a copy of the file when there is one)
and never writes to disk."""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from .atomic import full_disk_cause

log = logging.getLogger(__name__)
T = TypeVar("T")

STATE_DIR = ".memlink"  # a vault's derived state (and its lock, journal, logs)
DB_FILE = "index.sqlite"  # in `.memlink/`
# PRAGMA user_version: a database of another version is dropped and derived again. It
# covers what the tables mean too (the search files' layout, what the checks find), so a
# change to either is a new version.
SCHEMA_VERSION = 8
# The feed keeps this many changes. A reader further behind (a lint a long time after
# the last one) sees "everything changed" and starts over, which is always right.
FEED_KEEP = 10_000
EVERYTHING = "*"  # a change's key when too much changed to list (a rebuild, a bulk write)
# A key's number, in SQL: ``x = {KEY_ID}`` binds the key; ``x IN {KEY_IDS}`` formats the
# ``IN ({})`` of ``Store.rows_in``.
KEY_ID = "(SELECT id FROM keys WHERE key = ?)"
KEY_IDS = "(SELECT id FROM keys WHERE key IN ({}))"

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE changes (seq INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, key TEXT NOT NULL);
-- every path (or turn id) the tables below name, by number: stored once however many rows name it;
-- with how many link records it owns (``links`` below, kept by its triggers: a search's walk asks it
-- of every note one hop reaches)
CREATE TABLE keys (id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, links INTEGER NOT NULL DEFAULT 0);

-- the catalog: one row a note file (by its path's number), and what the note is called
CREATE TABLE notes (id INTEGER PRIMARY KEY, memory_type TEXT NOT NULL, title TEXT NOT NULL,
    created_at TEXT NOT NULL, updated_at TEXT NOT NULL, mtime_ns INTEGER NOT NULL, size INTEGER NOT NULL,
    sha TEXT NOT NULL, error TEXT, superseded INTEGER NOT NULL, aliases TEXT NOT NULL, kind TEXT NOT NULL,
    pending INTEGER NOT NULL);
CREATE TABLE names (key TEXT NOT NULL, uri INTEGER NOT NULL);
CREATE INDEX names_key ON names (key);
CREATE INDEX names_uri ON names (uri);
-- the content hash of each note whose file went: a note moved by hand is found by it
CREATE TABLE gone (id INTEGER PRIMARY KEY, sha TEXT NOT NULL);

-- the link index: every sidecar record (side 0 a link's record in its from-note's folder, 1
-- its backlink record in its to-note's folder), and each folder's files as last read
CREATE TABLE folders (folder TEXT PRIMARY KEY, stamp TEXT NOT NULL, broken TEXT, aside TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE links (folder INTEGER NOT NULL, id TEXT NOT NULL, side INTEGER NOT NULL, from_id INTEGER NOT NULL,
    to_id INTEGER NOT NULL, link_type TEXT NOT NULL, weight REAL NOT NULL, t_field TEXT, t_line_ranges TEXT,
    match_text TEXT, description TEXT NOT NULL, created_at TEXT NOT NULL, legacy INTEGER NOT NULL, stray INTEGER NOT NULL);
CREATE INDEX links_folder ON links (folder, id);
CREATE INDEX links_from ON links (from_id, link_type) WHERE side = 0;  -- (by type too: a search's grouping reads one)
CREATE INDEX links_to ON links (to_id) WHERE side = 1;
CREATE INDEX links_legacy ON links (to_id) WHERE legacy = 1;
CREATE INDEX links_anchored ON links (from_id) WHERE side = 0 AND match_text IS NOT NULL;  -- (a search's snippets)
CREATE TRIGGER links_owned AFTER INSERT ON links BEGIN
    UPDATE keys SET links = links + 1 WHERE id = CASE NEW.side WHEN 0 THEN NEW.from_id ELSE NEW.to_id END; END;
CREATE TRIGGER links_gone AFTER DELETE ON links BEGIN
    UPDATE keys SET links = links - 1 WHERE id = CASE OLD.side WHEN 0 THEN OLD.from_id ELSE OLD.to_id END; END;

-- the checks' memo: the last run's findings, and what each note was checked at
CREATE TABLE findings (source TEXT NOT NULL, category TEXT NOT NULL, rank INTEGER NOT NULL, uri INTEGER NOT NULL,
    message TEXT NOT NULL, other INTEGER, code TEXT NOT NULL, scoped INTEGER NOT NULL);
CREATE INDEX findings_uri ON findings (uri);
CREATE INDEX findings_order ON findings (category, rank, uri);
CREATE TABLE checked (uri INTEGER PRIMARY KEY, state TEXT NOT NULL, audited INTEGER NOT NULL);
CREATE INDEX checked_audited ON checked (uri) WHERE audited = 1;

-- the search indexes: what each holds, and its vectors' labels
CREATE TABLE indexed (space TEXT NOT NULL, key INTEGER NOT NULL, sha TEXT NOT NULL, PRIMARY KEY (space, key)) WITHOUT ROWID;
CREATE TABLE vectors (space TEXT NOT NULL, label INTEGER NOT NULL, key INTEGER NOT NULL, part INTEGER NOT NULL,
    PRIMARY KEY (space, label)) WITHOUT ROWID;
CREATE INDEX vectors_key ON vectors (space, key);

-- the turn index: each turn memory as recall shows it, and the term graph of its triples
CREATE TABLE turns (id TEXT PRIMARY KEY, session TEXT NOT NULL, hash TEXT NOT NULL, near TEXT NOT NULL, doc TEXT NOT NULL)
    WITHOUT ROWID;
CREATE INDEX turns_session ON turns (session);
CREATE TABLE turn_sessions (session TEXT PRIMARY KEY, stamp TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE mentions (turn TEXT NOT NULL, term TEXT NOT NULL, text TEXT NOT NULL, PRIMARY KEY (turn, term)) WITHOUT ROWID;
CREATE INDEX mentions_term ON mentions (term);
CREATE TABLE relates (turn TEXT NOT NULL, a TEXT NOT NULL, b TEXT NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY (turn, a, b)) WITHOUT ROWID;
CREATE INDEX relates_a ON relates (a);
CREATE INDEX relates_b ON relates (b);
CREATE TABLE terms (id TEXT PRIMARY KEY, text TEXT NOT NULL, turns INTEGER NOT NULL, community TEXT NOT NULL) WITHOUT ROWID;
CREATE INDEX terms_community ON terms (community);
CREATE TABLE term_keys (key TEXT NOT NULL, term TEXT NOT NULL, PRIMARY KEY (key, term)) WITHOUT ROWID;

-- imported files (ingest) and committed sessions
CREATE TABLE ingested (sha TEXT PRIMARY KEY, uri TEXT NOT NULL, path TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE commits (session TEXT PRIMARY KEY, last_id TEXT NOT NULL) WITHOUT ROWID;
"""


class StoreBusy(sqlite3.OperationalError):
    """The database cannot be used now (another process holds it past the timeout, the
    disk is full): derived state, so the caller goes on without this write."""


@dataclass(frozen=True)
class Since:
    """What the feed says changed since a reader's mark: ``everything`` (the database was
    rebuilt, the reader fell behind the feed, or a change said so) or these keys by kind."""

    mark: tuple[str, int]
    everything: bool = False
    keys: dict[str, set[str]] = field(default_factory=dict)

    def of(self, kind: str) -> set[str]:
        return self.keys.get(kind, set())

    def any(self, *kinds: str) -> bool:
        return self.everything or any(self.keys.get(k) for k in kinds)


class Store:
    """The vault's derived database. One connection per store, shared by the process's
    threads under a lock; other processes see each committed write. A rollback journal,
    not WAL: nothing is left beside the file between writes."""

    def __init__(self, path: Path | None, *, timeout: float = 30.0) -> None:
        self.path = path  # None: in memory
        self.timeout = timeout
        self._lock = threading.RLock()
        self._db: sqlite3.Connection | None = None
        self._generation = ""  # the open database's (meta 'generation'): a new one is another database
        self._moved = False  # the file could not be written (a full disk): in memory until ``close``

    # -- the connection ------------------------------------------------------------------------
    def keep_in_memory(self) -> None:
        """From now on the database lives in this process only (a read-only vault), seeded
        from the file when there is one."""
        with self._lock:
            seed, self.path = self.path, None
            self.close()
            self._db = self._open_memory(seed)

    @property
    def on_disk(self) -> bool:
        """Whether writes go to the file (not: a read-only vault, or a full disk)."""
        return self.path is not None and not self._moved

    def close(self) -> None:
        """Close the file (the next use opens it again; one moved into memory on a full
        disk is tried again)."""
        with self._lock:
            if self._db is not None and self.path is not None:
                self._db.close()
                self._db = None
                self._moved = False

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            if self.path is None:
                self._db = self._open_memory(None)
            else:
                try:
                    try:
                        self._db = self._open_file(self.path)
                    except sqlite3.OperationalError:
                        raise
                    except sqlite3.DatabaseError as exc:  # not a database, or a damaged one
                        self._discard(exc)
                        self._db = self._open_file(self.path)
                except sqlite3.OperationalError as exc:
                    if full_disk_cause(exc) is None:
                        raise
                    self._db = self._move_to_memory(exc)  # (a new database cannot be made on a full disk)
        return self._db

    def _move_to_memory(self, exc: Exception) -> sqlite3.Connection:
        """The file cannot be written (a full disk): from now until ``close`` this process
        keeps the database in memory, a copy of the file as it is, so that what it derives
        agrees with what it reads; the file keeps its older state, which the next process
        derives again where it is behind (docs/DESIGN.md, "Read-only vaults and full
        disks")."""
        log.warning("the database %s cannot be written now, kept in memory: %s", self.path, exc)
        memory = self._open_memory(self.path)
        if self._db is not None:
            self._db.close()
        self._moved = True
        return memory

    def _open_file(self, path: Path) -> sqlite3.Connection:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(path, timeout=self.timeout, check_same_thread=False, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=DELETE")
            db.execute("PRAGMA synchronous=OFF")  # derived: see docs/DESIGN.md, "Derived state"
            db.execute("PRAGMA mmap_size=1073741824")  # read through a memory map (docs/DESIGN.md, "Caches and tuning")
            self._prepare(db)
        except BaseException:
            db.close()
            raise
        return db

    def _open_memory(self, seed: Path | None) -> sqlite3.Connection:
        db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        if seed is not None and seed.is_file():
            try:  # immutable: read without a lock or a journal, so nothing is written
                disk = sqlite3.connect(f"{seed.as_uri()}?immutable=1", uri=True)
                try:
                    disk.backup(db)
                finally:
                    disk.close()
            except sqlite3.DatabaseError as exc:
                log.warning("not reading %s: %s", seed, exc)
                db.close()
                db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self._prepare(db)
        return db

    def _prepare(self, db: sqlite3.Connection) -> None:
        """Make the schema where the database is new or of another version (its tables
        dropped: everything in them is derived again)."""
        if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
            self._make(db)
        self._generation = db.execute("SELECT value FROM meta WHERE key='generation'").fetchone()[0]

    def _make(self, db: sqlite3.Connection) -> None:
        db.execute("BEGIN IMMEDIATE")
        try:
            if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:  # (another process may have made it)
                tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'")]
                for table in tables:
                    db.execute(f'DROP TABLE IF EXISTS "{table}"')
                statement = ""
                for part in SCHEMA.split(";"):  # (a trigger's body holds statements of its own)
                    statement += part + ";"
                    if sqlite3.complete_statement(statement):
                        if statement.strip(" \n;"):
                            db.execute(statement)
                        statement = ""
                db.execute("INSERT INTO meta VALUES ('generation', ?)", (uuid.uuid4().hex,))
                db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:  # (SQLite ends it by itself on some errors, a full disk among them)
                db.execute("ROLLBACK")
            raise

    def _discard(self, exc: Exception) -> None:
        log.warning("rebuilding the damaged database %s: %s", self.path, exc)
        if self._db is not None:
            try:
                self._db.close()
            except sqlite3.Error:
                pass
            self._db = None
        if self.path is not None:
            for suffix in ("", "-journal", "-wal", "-shm"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)

    @contextmanager
    def _using(self) -> Iterator[sqlite3.Connection]:
        """The connection, under the lock. A database found damaged is deleted (the next
        use makes it afresh; its rows are derived again by whoever reads them) and the
        operation fails with StoreBusy."""
        with self._lock:
            db = self._conn()
            try:
                yield db
            except sqlite3.OperationalError:
                raise
            except sqlite3.DatabaseError as exc:
                self._discard(exc)
                raise StoreBusy(f"the database was damaged and is made afresh: {exc}") from exc

    def _read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """A read; once more on a fresh database when this one turned out damaged."""
        try:
            with self._using() as db:
                return work(db)
        except StoreBusy:
            if self._db is not None:
                raise
            with self._using() as db:
                return work(db)

    # -- reading and writing ---------------------------------------------------------------------
    def rows(self, sql: str, args: Iterable[Any] = ()) -> list[tuple]:
        args = tuple(args)
        return self._read(lambda db: db.execute(sql, args).fetchall())

    def row(self, sql: str, args: Iterable[Any] = ()) -> tuple | None:
        args = tuple(args)
        return self._read(lambda db: db.execute(sql, args).fetchone())

    def rows_in(self, sql: str, values: Iterable[Any], args: Iterable[Any] = ()) -> list[tuple]:
        """``sql`` with ``{}`` for the list in ``IN ({})`` (the values, bound as one JSON
        list: the statement's text stays the same, so SQLite prepares it once), then
        ``args``."""
        listed = json.dumps(list(dict.fromkeys(values)), ensure_ascii=False)
        return self.rows(sql.format("SELECT value FROM json_each(?)"), (listed, *args))

    @contextmanager
    def write(self) -> Iterator[Writer]:
        """One transaction (BEGIN IMMEDIATE … COMMIT; ROLLBACK when the block raises).
        Changes the block records go to the feed in it. Raises StoreBusy when the
        database cannot be written now."""
        with self._using() as db:
            try:
                db.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                self._full(exc)
                raise StoreBusy(str(exc)) from exc
            writer = Writer(db)
            try:
                yield writer
                writer.flush_changes()
                db.execute("COMMIT")
            except sqlite3.OperationalError as exc:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                self._full(exc)
                raise StoreBusy(str(exc)) from exc
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise

    def _full(self, exc: sqlite3.OperationalError) -> None:
        """A write failed: on a full disk the database moves into memory."""
        if self.on_disk and full_disk_cause(exc) is not None:
            self._db = self._move_to_memory(exc)

    def try_write(self, what: str, work: Callable[[Writer], object]) -> bool:
        """``work(writer)`` in one transaction, for derived state that may wait: when the
        database cannot be written now (busy past the timeout) it is logged and nothing is
        written (it is derived again later); on a full disk it is written in memory, where
        the database moved. Whether it was written."""
        moved = self._moved
        try:
            with self.write() as w:
                work(w)
        except StoreBusy as exc:
            if self._moved and not moved:  # the disk filled up just now: once more, in memory
                return self.try_write(what, work)
            log.warning("%s not written now: %s", what, exc)
            return False
        return True

    # -- the change feed ---------------------------------------------------------------------------
    @property
    def generation(self) -> str:
        """Which database this is: another one (made afresh) has another generation. (Read
        without the lock once connected: a search asks it of every note it scores.)"""
        if self._db is None:
            with self._using():
                pass
        return self._generation

    def mark(self) -> tuple[str, int]:
        """Where the feed is now: (this database's generation, its last change)."""
        seq = self.row("SELECT max(seq) FROM changes")
        return (self.generation, (seq[0] if seq else None) or 0)

    def since(self, mark: tuple[str, int] | None) -> Since:
        """What changed after ``mark`` (None: never read: everything)."""
        now = self.mark()
        if mark is None or mark[0] != now[0]:
            return Since(now, everything=True)
        if mark[1] == now[1]:
            return Since(now)
        first = self.row("SELECT min(seq) FROM changes")
        if first is None or first[0] is None or first[0] > mark[1] + 1:
            return Since(now, everything=True)
        keys: dict[str, set[str]] = {}
        for kind, key in self.rows("SELECT kind, key FROM changes WHERE seq > ? AND seq <= ?", (mark[1], now[1])):
            if key == EVERYTHING:
                return Since(now, everything=True)
            keys.setdefault(kind, set()).add(key)
        return Since(now, keys=keys)


class Writer:
    """The connection inside ``Store.write``, and the changes the block records."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self._changes: dict[str, set[str]] = {}

    def execute(self, sql: str, args: Iterable[Any] = ()) -> sqlite3.Cursor:
        return self.db.execute(sql, tuple(args))

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        self.db.executemany(sql, rows)

    def ids(self, keys: Iterable[str]) -> dict[str, int]:
        """The number of each key (table ``keys``), numbered now when new."""
        wanted = json.dumps(list(dict.fromkeys(keys)), ensure_ascii=False)
        self.db.execute("INSERT OR IGNORE INTO keys (key) SELECT value FROM json_each(?)", (wanted,))
        return dict(self.db.execute("SELECT k.key, k.id FROM json_each(?) j JOIN keys k ON k.key = j.value", (wanted,)))

    def changed(self, kind: str, keys: Iterable[str]) -> None:
        self._changes.setdefault(kind, set()).update(keys)

    def flush_changes(self) -> None:
        if sum(map(len, self._changes.values())) > FEED_KEEP // 2:
            rows = [(kind, EVERYTHING) for kind in sorted(self._changes)]
        else:
            rows = [(kind, key) for kind, keys in self._changes.items() for key in sorted(keys)]
        if rows:
            self.db.executemany("INSERT INTO changes (kind, key) VALUES (?, ?)", rows)
            self.db.execute("DELETE FROM changes WHERE seq <= (SELECT max(seq) FROM changes) - ?", (FEED_KEEP,))
        self._changes.clear()
