"""The memo of the last check run, so the next one remakes only what changed, and the
run's findings as a report reads them (docs/DESIGN.md, "Checks").

A scoped check's finding is about one note and depends only on that note, its link
records and the notes at their other ends. The memo keeps, in `.memlink/checks.sqlite`
(derived state: a missing or unreadable one means a full run), the last run's findings,
a row each, each note's catalog signature then, the link index's change number and the
notes the extraction audit named. The next run's scope is:

- notes added, removed or changed since (catalog signature), and the notes at the other
  end of their links (a link's finding can be about either end);
- the notes whose link records were written or removed since (``LinkStore.changes_since``);
- notes the audit names now and did not then, or the other way round.

Anything the memo cannot follow makes the run full: no memo, another vault
configuration or set of checks, another day (a note's age is a finding), a link index
rebuilt, a sidecar re-read whole (an edit by another tool), or a sidecar that cannot be
read at all.

A run replaces the rows about the notes in scope (and every row of the unscoped checks)
and leaves the rest where they are; a report (``Findings``) then reads counts and pages
from the table in SQL. At 100k notes a run keeps ~300k findings, and making them all
into objects again, sorting and counting them cost more than a second per run
(docs/DESIGN.md, "Checks"). A read-only vault keeps its memo in memory, for one run.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import marshal
import sqlite3
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .catalog import stamp_of
from .checks import CHECKS, SEVERITIES, CheckContext, Finding
from .config import CONFIG_FILE
from .uris import uri_dir

if TYPE_CHECKING:
    from .catalog import CatalogEntry, Stamp
    from .vault import Vault

MEMO_VERSION = "4"
LAYOUT = 4  # the tables' layout (PRAGMA user_version): a memo of another is started again
_TABLES = (
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    # What the run saw: each note's signature and the notes the audit named (one
    # checksummed marshal: 100k rows read back one by one cost a tenth of a second).
    "CREATE TABLE seen(id INTEGER PRIMARY KEY CHECK (id = 0), sum TEXT NOT NULL, data BLOB NOT NULL)",
    # A finding a row: ``source`` the check that made it, ``category`` what people see
    # (Finding.check), ``rank`` its severity's place in SEVERITIES (worst first).
    "CREATE TABLE findings(source TEXT NOT NULL, category TEXT NOT NULL, "
    "rank INTEGER NOT NULL CHECK (rank IN (0, 1, 2)), uri TEXT NOT NULL, message TEXT NOT NULL, "
    "other TEXT, code TEXT NOT NULL)",
    "CREATE INDEX findings_uri ON findings(uri)",  # a run's scope is replaced by note
    "CREATE INDEX findings_order ON findings(category, rank, uri, message)",  # counts and pages
)
_ORDER = "rank, category, uri, message, other, code"  # worst first (a report's order)
_COLUMNS = "category, rank, uri, message, other, code"

Signature = tuple  # (content hash, parse error, memory type): a stamp's last three


def _signature(value: CatalogEntry | Stamp) -> Signature:
    """What a note's findings depend on of the note itself: its content (the hash), its
    type (which a changed type file can change without the content) and whether it
    parses. From the stamp: a run over 100k notes builds no entry for this."""
    return stamp_of(value)[2:]


@dataclass
class Plan:
    """What a run remakes: ``scope`` None is every note."""

    scope: set[str] | None
    seq: int = 0
    created: str = ""
    reason: str = ""  # why the run is full (empty when it is incremental)
    signatures: dict[str, Signature] = field(default_factory=dict)  # as the memo had them (an incremental run)


class CheckMemo:
    def __init__(self, path: Path | None) -> None:
        self.path = path  # None: kept in memory for one run (a read-only vault runs whole each time)
        self._db: sqlite3.Connection | None = None  # from the plan to the report's end

    @classmethod
    def for_vault(cls, vault: Vault) -> CheckMemo:
        return cls(None if vault.read_only else vault.state_dir / "checks.sqlite")

    def _connect(self) -> sqlite3.Connection | None:
        if self._db is not None:
            return self._db
        try:
            if self.path is None:
                db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                db = sqlite3.connect(str(self.path), timeout=30, isolation_level=None, check_same_thread=False)
                db.execute("PRAGMA journal_mode=WAL")  # a report reads its snapshot while another run writes
                db.execute("PRAGMA synchronous=NORMAL")  # derived: a lost memo means one full run
            if db.execute("PRAGMA user_version").fetchone()[0] != LAYOUT:
                db.execute("BEGIN IMMEDIATE")
                for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall():
                    db.execute(f'DROP TABLE IF EXISTS "{name}"')  # noqa: S608 (names of this file's own tables)
                for statement in _TABLES:
                    db.execute(statement)
                db.execute(f"PRAGMA user_version={LAYOUT}")
                db.execute("COMMIT")
        except sqlite3.DatabaseError:
            self._discard()
            return None
        self._db = db
        return db

    def _discard(self) -> None:
        if self._db is not None:
            try:
                self._db.close()
            except sqlite3.Error:
                pass
            self._db = None
        if self.path is None:
            return
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)

    @staticmethod
    def _basis(vault: Vault, today: dt.date) -> str:
        """What every finding depends on besides the notes and links: the vault's
        configuration, its memory types, the checks themselves and the day."""
        h = hashlib.sha256(f"{MEMO_VERSION}|{today.isoformat()}".encode())
        for path in [vault.root / CONFIG_FILE, *sorted((vault.root / "memory_types").glob("*.yaml"))]:
            try:
                h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
            except OSError:
                h.update(path.name.encode() + b"\0-\0")
        h.update(",".join(f"{c.name}:{c.integrity}:{c.scoped}" for c in CHECKS).encode())
        return h.hexdigest()[:20]

    # -- planning a run -------------------------------------------------------------------------
    def plan(self, ctx: CheckContext, *, full: bool = False) -> Plan:
        store = ctx.vault.linkstore
        # Every folder in step with its files first: what that re-reads is a change of
        # this run (before ``seq``), not of the next one.
        store.refresh()
        seq = store.seq()
        created = store.created()
        out = Plan(scope=None, seq=seq, created=created)
        db = self._connect()
        if full or db is None or self.path is None:
            out.reason = "asked for" if full else "no memo"
            return out
        try:
            meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
            if meta.get("basis") != self._basis(ctx.vault, ctx.today):
                out.reason = "no memo" if not meta else "the configuration, the checks or the day changed"
                return out
            if meta.get("created") != created:
                out.reason = "the link index was rebuilt"
                return out
            if ctx.broken:
                out.reason = "a sidecar cannot be read"
                return out
            changes = store.changes_since(int(meta["seq"]))
            if changes.everything or changes.folders:
                out.reason = "a sidecar was changed by hand or by another tool"
                return out
            before, was_recorded = self._seen(db)
            held = ctx.catalog.held()
            # (stamp_of inlined: 100k notes)
            changed = {u for u, v in held.items() if before.get(u) != (v[2:] if type(v) is tuple else _signature(v))}
            changed.update(before.keys() - held.keys())
            scope = changed | changes.owners | (was_recorded ^ ctx.recorded)
            for uri in changed:  # a changed note changes the findings about links into and out of it
                folder = uri_dir(uri)
                for direction in ("links", "backlinks"):
                    for link in store.links_of(folder, uri, direction):
                        scope.add(link.to_uri if direction == "links" else link.from_uri)
            out.scope = scope
            out.signatures = before
            return out
        except (sqlite3.DatabaseError, KeyError, ValueError, TypeError):
            self._discard()
            out.reason = "the memo could not be read"
            return out

    @staticmethod
    def _seen(db: sqlite3.Connection) -> tuple[dict[str, Signature], set[str]]:
        """The signatures and audit-named notes the last run saw; ValueError when they are
        not what this code wrote whole."""
        row = db.execute("SELECT sum, data FROM seen WHERE id = 0").fetchone()
        if row is None or not isinstance(row[1], bytes) or hashlib.blake2b(row[1], digest_size=16).hexdigest() != row[0]:
            raise ValueError("a damaged memo")
        try:
            signatures, recorded = marshal.loads(row[1])
        except (EOFError, TypeError) as exc:
            raise ValueError("a damaged memo") from exc
        if type(signatures) is not dict or type(recorded) is not list:
            raise ValueError("a damaged memo")
        return signatures, set(recorded)

    # -- saving a run -----------------------------------------------------------------------------
    def save(self, plan: Plan, ctx: CheckContext, made: dict[str, list[Finding]]) -> Findings | None:
        """Keep this run's findings (``made``, by check: for the notes in scope, and every
        finding of an unscoped check), the catalog signatures and the link index's change
        number it saw, in one SQLite transaction (a memo is whole or as it was), and return
        them as a report reads them. None when the memo could not be written (a full disk,
        a lock held past the timeout, a damaged file): the caller runs whole in memory."""
        db = self._connect()
        if db is None:
            return None
        held = ctx.catalog.held()
        unscoped = [c.name for c in CHECKS if not c.scoped]
        try:
            db.execute("BEGIN IMMEDIATE")
            if plan.scope is None:
                db.execute("DELETE FROM findings")
                signatures = {u: _signature(v) for u, v in held.items()}
            else:
                db.execute(f"DELETE FROM findings WHERE source IN ({','.join('?' * len(unscoped))})", unscoped)  # noqa: S608
                scope = sorted(plan.scope)
                for i in range(0, len(scope), 500):
                    part = scope[i : i + 500]
                    db.execute(f"DELETE FROM findings WHERE uri IN ({','.join('?' * len(part))})", part)  # noqa: S608
                signatures = plan.signatures
                for uri in scope:
                    value = held.get(uri)
                    if value is None:
                        signatures.pop(uri, None)
                    else:
                        signatures[uri] = _signature(value)
            rank = {s: i for i, s in enumerate(SEVERITIES)}
            db.executemany("INSERT INTO findings VALUES (?, ?, ?, ?, ?, ?, ?)",
                           ((name, f.check, rank[f.severity], f.uri, f.message, f.other, f.code)
                            for name, found in made.items() for f in found))
            data = marshal.dumps((signatures, sorted(ctx.recorded)))
            db.execute("INSERT OR REPLACE INTO seen VALUES (0, ?, ?)", (hashlib.blake2b(data, digest_size=16).hexdigest(), data))
            db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                           [("basis", self._basis(ctx.vault, ctx.today)), ("created", plan.created), ("seq", str(plan.seq))])
            db.execute("COMMIT")
            found = Findings(db)  # its snapshot: what this run saved
        except sqlite3.DatabaseError:
            try:
                db.execute("ROLLBACK")
            except sqlite3.DatabaseError:
                pass
            self._discard()  # (in an unknown state: the next run is full)
            return None
        self._db = None  # (the report holds it now)
        if self.path is not None:
            ctx.vault.linkstore.forget_changes(plan.seq)  # this memo has seen them
        return found


class Findings:
    """One run's findings as the memo holds them, read from one snapshot of it (a read
    transaction held until ``close``: another run meanwhile writes a new one). Counts
    and pages come from SQL; the whole list is made only when asked for."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db: sqlite3.Connection | None = db
        self._lock = threading.Lock()
        db.execute("BEGIN")
        db.execute("SELECT 1 FROM meta LIMIT 1").fetchall()  # (the snapshot starts at the first read)

    def _rows(self, sql: str, args: Iterable[object] = ()) -> list[tuple]:
        with self._lock:
            if self._db is None:
                raise ValueError("the findings were closed")
            return self._db.execute(sql, tuple(args)).fetchall()

    def counts(self) -> dict[tuple[str, str], int]:
        """How many findings there are by (check as people see it, severity)."""
        return {(category, SEVERITIES[rank]): n for category, rank, n in
                self._rows("SELECT category, rank, COUNT(*) FROM findings GROUP BY category, rank")}

    def page(self, categories: Iterable[str] | None = None, *, sources: Iterable[str] | None = None,
             limit: int | None = None, involving: str | None = None) -> list[Finding]:
        """The findings (of these checks as people see them, or made by these checks),
        worst first, at most ``limit``; ``involving``: only those about or pointing at
        that note."""
        where, args = [], []
        for column, values in (("category", categories), ("source", sources)):
            if values is not None:
                values = list(values)
                where.append(f"{column} IN ({','.join('?' * len(values))})")
                args += values
        if involving is not None:
            where.append("(uri = ? OR other = ?)")
            args += [involving, involving]
        sql = f"SELECT {_COLUMNS} FROM findings {'WHERE ' + ' AND '.join(where) if where else ''} ORDER BY {_ORDER}"  # noqa: S608
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [Finding(c, SEVERITIES[r], u, m, o, code) for c, r, u, m, o, code in self._rows(sql, args)]

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def __del__(self) -> None:
        self.close()
