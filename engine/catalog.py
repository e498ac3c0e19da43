"""The catalog: which notes exist, their type, title, timestamps and file identity
(mtime + size + content hash). Derived state in one SQLite table
(`.memlink/catalog.sqlite`), one row per note keyed by its URI: recording a note
upserts one row, a delete removes one; a sync writes its changes in one transaction.
A read-only vault keeps the table in memory (seeded from the file when there is one) and
never writes to disk. A missing, unreadable or older-layout database is rebuilt from the
files (docs/DESIGN.md, "Vault format")."""

from __future__ import annotations

import hashlib
import json
import logging
import marshal
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable, ItemsView, Iterable, Iterator, Mapping, ValuesView
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from .blocks import strip_links_bytes

log = logging.getLogger(__name__)
T = TypeVar("T")

CATALOG_FILE = "catalog.sqlite"  # in `.memlink/`
# The table's layout; a database of another layout is dropped and its rows re-derived.
LAYOUT = 4  # (4: pending)
_COLUMNS = "uri, memory_type, title, created_at, updated_at, mtime_ns, size, sha, error, superseded, aliases, kind, pending"
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS notes (uri TEXT PRIMARY KEY, memory_type TEXT NOT NULL, title TEXT NOT NULL, "
    "created_at TEXT NOT NULL, updated_at TEXT NOT NULL, mtime_ns INTEGER NOT NULL, size INTEGER NOT NULL, "
    "sha TEXT NOT NULL, error TEXT, superseded INTEGER NOT NULL, aliases TEXT NOT NULL, kind TEXT NOT NULL, "
    "pending INTEGER NOT NULL) "
    "WITHOUT ROWID"
)
# What each note is called (engine.names): the words of its title and of each alias, and
# the first of them, so a question's names are looked up without loading every title.
_NAMES = (
    "CREATE TABLE IF NOT EXISTS names (key TEXT NOT NULL, first TEXT NOT NULL, uri TEXT NOT NULL); "
    "CREATE INDEX IF NOT EXISTS names_key ON names(key); CREATE INDEX IF NOT EXISTS names_first ON names(first); "
    "CREATE INDEX IF NOT EXISTS names_uri ON names(uri)"
)
# What the last whole-vault sync saw (``Snapshot``), one row or none; every other write
# removes it in the same transaction.
_SNAPSHOT = ("CREATE TABLE IF NOT EXISTS walk_snapshot (id INTEGER PRIMARY KEY CHECK (id = 0), walk TEXT NOT NULL, "
             "sum TEXT NOT NULL, data BLOB NOT NULL)")
_UPSERT = f"INSERT OR REPLACE INTO notes ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"


@dataclass(slots=True)
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
    pending: bool = False  # a note whose extraction has not finished (engine.notes.is_pending)


Row = tuple  # a notes-table row in _COLUMNS order
# What a note's row says about its file, all a sync compares (mtime_ns, size, sha, error),
# and its memory type (counted per type by lint's digest without building entries).
Stamp = tuple[int, int, str, str | None, str]
_STAMP_COLUMNS = "uri, mtime_ns, size, sha, error, memory_type"
Fill = Callable[[list[str]], dict[str, CatalogEntry]]


def _entry(r: Row) -> CatalogEntry:
    return CatalogEntry(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], bool(r[9]),
                        json.loads(r[10]) if r[10] else [], r[11], bool(r[12]))


def stamp_of(value: CatalogEntry | Stamp) -> Stamp:
    if type(value) is tuple:
        return value
    return value.mtime_ns, value.size, value.sha, value.error, value.memory_type  # type: ignore[union-attr]


class Catalog(Mapping[str, CatalogEntry]):
    """The notes by uri: one snapshot, never changed once made (a write makes a new one,
    ``replaced``). Loaded from the table it holds only each note's stamp (``Stamp``: what
    a sync compares, and whether the note parses); a note's whole entry is read from the
    table when first asked for (``fill``), and all of them at once when something walks
    every entry or has asked for many. At 100k notes reading and building every entry
    costs half a second, and a search reads a few dozen (docs/DESIGN.md, "Vault format")."""

    __slots__ = ("_items", "_fill", "_singles", "_superseded", "_none_superseded")
    # Single reads (a query each, ~20 µs) before the rest are read in one go (half a
    # second at 100k notes): a search reads a few hundred; a walk over every note, all.
    BULK_AFTER = 2000

    def __init__(self, items: dict[str, CatalogEntry | Stamp] | None = None, fill: Fill | None = None,
                 superseded: frozenset[str] | None = None) -> None:
        self._items: dict[str, CatalogEntry | Stamp] = items if items is not None else {}
        self._fill = fill
        self._singles = 0
        # The notes the table marks superseded, as loaded: what a note still held as a
        # stamp (unchanged since) answers ``is_superseded`` from. None: not known, its
        # entry is read.
        self._superseded = superseded
        self._none_superseded: bool | None = None  # (superseded_in: none is, as far as this snapshot knows)

    def __getitem__(self, uri: str) -> CatalogEntry:
        value = self._items[uri]
        if type(value) is tuple:
            self._singles += 1
            if self._singles > max(self.BULK_AFTER, len(self._items) // 20):
                self._complete()
            else:
                self._read([uri])
            value = self._items[uri]
        return value  # type: ignore[return-value]

    def _read(self, uris: list[str]) -> None:
        """Replace stamps by entries (same keys, same size: iteration elsewhere is safe)."""
        got = self._fill(uris) if self._fill is not None else {}
        for uri in uris:
            entry = got.get(uri)
            if entry is None:  # no fill (a bare snapshot): what the stamp knows
                mtime_ns, size, sha, error, memory_type = self._items[uri]  # type: ignore[misc]
                entry = CatalogEntry(uri, memory_type, uri, "", "", mtime_ns, size, sha, error=error or "not in the catalog table")
            elif entry.superseded:
                self._none_superseded = False
            self._items[uri] = entry

    def prefetch(self, uris: Iterable[str]) -> None:
        """Read the entries of these notes still held as stamps, in one go (a search's
        hits), without counting them as single reads."""
        todo = [u for u in dict.fromkeys(uris) if type(self._items.get(u)) is tuple]
        if todo:
            self._read(todo)

    def _complete(self) -> None:
        todo = [u for u, v in self._items.items() if type(v) is tuple]
        if todo:
            self._read(todo)

    def values(self) -> ValuesView[CatalogEntry]:
        self._complete()
        return super().values()

    def items(self) -> ItemsView[str, CatalogEntry]:
        self._complete()
        return super().items()

    def get(self, uri: str, default: Any = None) -> Any:
        return self[uri] if uri in self._items else default

    def __contains__(self, uri: object) -> bool:
        return uri in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def held(self) -> Mapping[str, CatalogEntry | Stamp]:
        """Each note's stamp or entry as held, read-only (``stamp_of`` reads either):
        for a sync, which compares every file and builds no entry it does not need. The
        dict itself (a proxy's lookups cost a tenth of a second at 100k notes): not to be
        changed."""
        return self._items

    def is_good(self, uri: str) -> bool:
        """A note of the catalog that parses (its entry has no error)."""
        value = self._items.get(uri)
        if value is None:
            return False
        return not (value[3] if type(value) is tuple else value.error)  # type: ignore[union-attr]  # (stamp_of inlined)

    def memory_type_of(self, uri: str) -> str:
        """A note's memory type, from its stamp or its entry (none is built)."""
        value = self._items[uri]
        return value[4] if type(value) is tuple else value.memory_type  # type: ignore[union-attr]

    def sha_of(self, uri: str) -> str | None:
        """A note's content hash, from its stamp or its entry (none is built); None: not
        a note of the catalog."""
        value = self._items.get(uri)
        if value is None:
            return None
        return value[2] if type(value) is tuple else value.sha  # type: ignore[union-attr]

    def is_superseded(self, uri: str) -> bool:
        """A review kept another note over this one; answered without building the entry
        of a note held as a stamp (a search asks it of every note it scores)."""
        value = self._items.get(uri)
        if value is None:
            return False
        if type(value) is not tuple:
            return value.superseded  # type: ignore[union-attr]
        if self._superseded is not None:
            return uri in self._superseded
        return self[uri].superseded

    def superseded_in(self, uris: Iterable[str]) -> list[str]:
        """Those of ``uris`` that are superseded (``is_superseded``), answered at once when
        no note of this snapshot is (most vaults: a search asks it of every note it scores)."""
        if self._none_superseded is None:  # (once per snapshot: its entries looked at once)
            self._none_superseded = self._superseded is not None and not self._superseded and not any(
                type(v) is not tuple and v.superseded for v in self._items.values())  # type: ignore[union-attr]
        if self._none_superseded:
            return []
        return [u for u in uris if self.is_superseded(u)]

    def superseded_as_loaded(self) -> frozenset[str] | None:
        """The superseded set this snapshot was loaded with (for a snapshot made from it)."""
        return self._superseded

    def type_counts(self) -> dict[str, int]:
        """How many notes that parse there are of each memory type (from the stamps: no
        entry is built)."""
        stamps = [v if type(v) is tuple else stamp_of(v) for v in self._items.values()]
        return dict(Counter(s[4] for s in stamps if not s[3]))  # (counted in C: 100k notes)

    def good_shas(self) -> dict[str, str]:
        """uri -> content hash of every note that parses, without building entries."""
        out = {}
        for uri, value in self._items.items():
            _, _, sha, error, _ = stamp_of(value)
            if not error:
                out[uri] = sha
        return out

    def replaced(self, put: Iterable[CatalogEntry] = (), drop: Iterable[str] = ()) -> Catalog:
        """A new snapshot with ``put`` entries added or replaced and ``drop`` removed."""
        items = dict(self._items)
        for uri in drop:
            items.pop(uri, None)
        items.update((e.uri, e) for e in put)
        return Catalog(items, self._fill, self._superseded)  # a put entry answers for itself


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The catalog as a whole-vault sync that found nothing to change saw it: the walk's
    files (``walk_digest``), each note's stamp and the superseded notes. A process whose
    walk lists exactly these files takes the stamps as they are: no row loaded, no file
    compared one by one (docs/DESIGN.md, "Vault format")."""

    walk: str
    stamps: dict[str, Stamp]
    superseded: frozenset[str]
    # Its checksum and bytes, as stored (``dumped``): the checksum names this state of
    # the catalog (the check memo keeps it: engine.checkmemo).
    sum: str = field(default="", compare=False)
    data: bytes = field(default=b"", compare=False, repr=False)

    def dump(self) -> tuple[str, str, bytes]:
        data = marshal.dumps((self.stamps, sorted(self.superseded)))
        return self.walk, hashlib.blake2b(data, digest_size=16).hexdigest(), data

    def dumped(self) -> Snapshot:
        """The same snapshot with its checksum and bytes (what ``CatalogStore.write`` stores)."""
        walk, digest, data = self.dump()
        return Snapshot(walk, self.stamps, self.superseded, digest, data)

    @classmethod
    def load(cls, walk: str, digest: str, data: bytes) -> Snapshot | None:
        """The snapshot, or None when the bytes are not one this code wrote whole."""
        stamps = stamps_of(digest, data)
        if stamps is None:
            return None
        return cls(walk, stamps[0], frozenset(stamps[1]), digest, data)


def stamps_of(digest: str, data: bytes) -> tuple[dict[str, Stamp], list[str]] | None:
    """A snapshot's stamps and superseded notes from its bytes, or None when they are not
    what ``Snapshot.dump`` wrote whole."""
    if hashlib.blake2b(data, digest_size=16).hexdigest() != digest:
        return None
    try:
        stamps, superseded = marshal.loads(data)
    except (EOFError, ValueError, TypeError):
        return None
    if type(stamps) is not dict or type(superseded) is not list:
        return None
    return stamps, superseded


@dataclass(frozen=True)
class Synced:
    """A process's first whole-vault sync: from the snapshot it started from (checksum
    ``before``; "" when there was none) to the one it left (``after``, whose stamps are
    the catalog it made), and the notes added, changed or removed between them. What the
    check memo needs to know what changed since its last run without comparing 100k
    stamps (docs/DESIGN.md, "Checks")."""

    before: str
    after: Snapshot
    changed: frozenset[str]


def parses(catalog: Mapping[str, CatalogEntry], uri: str) -> bool:
    """``uri`` is a note of ``catalog`` that parses; a ``Catalog`` answers from the stamp,
    without building the entry."""
    if isinstance(catalog, Catalog):
        return catalog.is_good(uri)
    entry = catalog.get(uri)
    return entry is not None and not entry.error


def content_hash(data: bytes) -> str:
    """A note file's content hash, its generated Links block left out (engine.blocks): a
    note whose only change is that block is not re-indexed or re-checked."""
    return hashlib.sha256(strip_links_bytes(data)).hexdigest()[:20]


def _name_rows(e: CatalogEntry) -> list[tuple[str, str, str]]:
    from .names import words

    if e.error:
        return []
    keys = {" ".join(words(name)) for name in [e.title, *e.aliases]}
    return [(key, key.split()[0], e.uri) for key in sorted(keys) if key]


def _row(e: CatalogEntry) -> tuple:
    return (e.uri, e.memory_type, e.title, e.created_at, e.updated_at, e.mtime_ns, e.size, e.sha, e.error,
            1 if e.superseded else 0, json.dumps(e.aliases, ensure_ascii=False) if e.aliases else "", e.kind,
            1 if e.pending else 0)


class CatalogStore:
    """The catalog table of one vault: ``path`` on disk, or in memory when ``in_memory``
    (a read-only vault: the file, if any, is read once and never written). One connection
    per store, shared by the threads of the process under a lock; other processes (the
    CLI next to the app) see each committed write."""

    def __init__(self, path: Path, *, in_memory: bool = False, timeout: float = 30.0):
        self.path = Path(path)
        self.in_memory = in_memory
        self.timeout = timeout  # how long a write waits for another process's transaction
        self._lock = threading.RLock()
        self._db: sqlite3.Connection | None = None

    # -- the connection ---------------------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            try:
                self._db = self._open()
            except sqlite3.DatabaseError as exc:
                if not _damaged(exc):
                    raise
                self._discard(exc)  # not a database, or damaged: derived, start over
                self._db = self._open()
        return self._db

    def _open(self) -> sqlite3.Connection:
        if self.in_memory:
            db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
            self._seed(db)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=self.timeout, check_same_thread=False, isolation_level=None)
            try:
                # A rollback journal, not WAL: a commit leaves nothing behind (no -wal/-shm
                # that the last connection to close, perhaps a vault object collected much
                # later, would fold back into the file), so `.memlink/` holds still between
                # writes; a one-row commit costs ~0.5 ms with its syncs (bench_open.py).
                db.execute("PRAGMA journal_mode=DELETE")
                db.execute("PRAGMA synchronous=NORMAL")
            except sqlite3.DatabaseError:
                db.close()
                raise
        try:
            self._prepare(db)
        except sqlite3.DatabaseError:
            db.close()
            raise
        if not self.in_memory:
            self._remove_old_shards()
        return db

    def _prepare(self, db: sqlite3.Connection) -> None:
        if db.execute("PRAGMA user_version").fetchone()[0] != LAYOUT:
            with _tx(db):  # a database of an older layout (or a new one): its rows are re-derived
                db.execute("DROP TABLE IF EXISTS notes")
                db.execute("DROP TABLE IF EXISTS names")
                db.execute("DROP TABLE IF EXISTS walk_snapshot")
                db.execute(_SCHEMA)
                for statement in _NAMES.split("; "):
                    db.execute(statement)
                db.execute(f"PRAGMA user_version={LAYOUT}")
        db.execute(_SNAPSHOT)  # (added within layout 3: a table of its own, made where missing)

    def _seed(self, db: sqlite3.Connection) -> None:
        """Copy the on-disk catalog into memory without writing a byte: ``immutable``
        reads the file without a lock and makes no journal. A row read while another
        process commits may be stale, or the copy unreadable (then it starts empty): sync
        compares every row with its file anyway."""
        if not self.path.is_file():
            return
        try:
            disk = sqlite3.connect(f"{self.path.as_uri()}?immutable=1", uri=True)
            try:
                disk.backup(db)
            finally:
                disk.close()
        except sqlite3.DatabaseError as exc:
            log.warning("not reading the catalog %s: %s", self.path, exc)
            db.execute("DROP TABLE IF EXISTS notes")
            db.execute("PRAGMA user_version=0")

    def _discard(self, exc: Exception) -> None:
        log.warning("discarding unreadable catalog %s: %s", self.path, exc)
        if self._db is not None:
            try:
                self._db.close()
            except sqlite3.Error:
                pass
            self._db = None
        if not self.in_memory:
            for suffix in ("", "-journal", "-wal", "-shm"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)

    def _remove_old_shards(self) -> None:
        """The TinyDB shards of older versions (`db/catalog-*.json`): derived, superseded."""
        for old in (self.path.parent / "db").glob("catalog-*.json"):
            try:
                old.unlink()
            except OSError:
                pass

    def _run(self, work: Callable[[sqlite3.Connection], T], default: T) -> T:
        """Run ``work(db)`` under the lock. A database found damaged is discarded (its rows
        are re-derived by the next sync); one that cannot be used now (locked by another
        process past the timeout, a full disk) is left as it is. Either way ``default`` is
        returned: the catalog is derived, and a row not written is re-derived by a sync."""
        with self._lock:
            try:
                return work(self._conn())
            except sqlite3.DatabaseError as exc:
                if _damaged(exc):
                    self._discard(exc)
                else:
                    log.warning("catalog %s not updated: %s", self.path, exc)
                return default

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    # -- rows -------------------------------------------------------------------------------
    def load(self) -> Catalog:
        """The catalog as stamps; entries are read from this table as asked for."""
        def work(db: sqlite3.Connection) -> Catalog:
            stamps = {r[0]: r[1:] for r in db.execute(f"SELECT {_STAMP_COLUMNS} FROM notes")}
            superseded = frozenset(u for (u,) in db.execute("SELECT uri FROM notes WHERE superseded=1"))
            return Catalog(stamps, self.entries, superseded)

        return self._run(work, Catalog(fill=self.entries))

    def entries(self, uris: list[str]) -> dict[str, CatalogEntry]:
        """The entries of these notes that the table holds."""
        def work(db: sqlite3.Connection) -> dict[str, CatalogEntry]:
            # Most of the table: one pass over it. Measured at 100k notes: 3,000 entries by
            # key 0.02 s against 0.16 s for the pass; 30,000 0.17 s against 0.24 s.
            if len(uris) > 30000:
                wanted = set(uris)
                return {r[0]: _entry(r) for r in db.execute(f"SELECT {_COLUMNS} FROM notes") if r[0] in wanted}
            out = {}
            for i in range(0, len(uris), 500):
                part = uris[i : i + 500]
                for r in db.execute(f"SELECT {_COLUMNS} FROM notes WHERE uri IN ({','.join('?' * len(part))})", part):
                    out[r[0]] = _entry(r)
            return out

        return self._run(work, {})

    def snapshot(self) -> Snapshot | None:
        """What the last whole-vault sync saw (the table's stamps: any other write removes
        it), or None."""
        def work(db: sqlite3.Connection) -> Snapshot | None:
            row = db.execute("SELECT walk, sum, data FROM walk_snapshot WHERE id = 0").fetchone()
            return Snapshot.load(*row) if row and isinstance(row[2], bytes) else None

        return self._run(work, None)

    def write(self, rows: Iterable[CatalogEntry], gone: Iterable[tuple[str]] = (), snapshot: Snapshot | None = None) -> None:
        """Upsert ``rows`` and delete ``gone`` in one transaction. The snapshot goes with
        any write: ``snapshot`` (a whole-vault sync's) replaces it, or there is none."""
        def work(db: sqlite3.Connection) -> None:
            rows_ = list(rows)
            gone_ = list(gone)
            with _tx(db):
                db.execute("DELETE FROM walk_snapshot")
                if snapshot is not None:
                    walk, digest, data = (snapshot.walk, snapshot.sum, snapshot.data) if snapshot.data else snapshot.dump()
                    db.execute("INSERT INTO walk_snapshot VALUES (0, ?, ?, ?)", (walk, digest, data))
                db.executemany(_UPSERT, map(_row, rows_))
                db.executemany("DELETE FROM notes WHERE uri = ?", gone_)
                db.executemany("DELETE FROM names WHERE uri = ?", [(e.uri,) for e in rows_] + gone_)
                db.executemany("INSERT INTO names VALUES (?, ?, ?)", [n for e in rows_ for n in _name_rows(e)])

        self._run(work, None)

    def named_or_starting(self, keys: Iterable[str], firsts: Iterable[str]) -> dict[str, set[str]]:
        """The notes called each of ``keys``, and those called any name whose first word
        is one of ``firsts`` (for near matches), by name, in one read (a question's
        spans and its words)."""
        def work(db: sqlite3.Connection) -> dict[str, set[str]]:
            out: dict[str, set[str]] = {}
            wanted, starts = sorted(set(keys)), sorted(set(firsts))
            for i in range(0, max(len(wanted), len(starts)), 250):  # (under SQLite's bound-parameter limit)
                part, part_starts = wanted[i : i + 250], starts[i : i + 250]
                marks, start_marks = ",".join("?" * len(part)), ",".join("?" * len(part_starts))
                for key, uri in db.execute(
                        f"SELECT key, uri FROM names WHERE key IN ({marks}) OR first IN ({start_marks})", [*part, *part_starts]):  # noqa: S608
                    out.setdefault(key, set()).add(uri)
            return out

        return self._run(work, {})

    def put(self, entry: CatalogEntry) -> None:
        self.write([entry])

    def drop(self, uri: str) -> None:
        self.write([], [(uri,)])


def _damaged(exc: sqlite3.DatabaseError) -> bool:
    """Not a database, or a damaged one (SQLITE_NOTADB, SQLITE_CORRUPT), as opposed to one
    that is busy, locked, read-only or on a full disk (OperationalError)."""
    return not isinstance(exc, sqlite3.OperationalError)


class _tx:
    """BEGIN IMMEDIATE … COMMIT (ROLLBACK on error) on an autocommit connection."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: type[BaseException] | None, *_exc: object) -> None:
        self.db.execute("ROLLBACK" if kind else "COMMIT")
