"""The memo of the last check run, so the next one remakes only what changed, and the
run's findings as a report reads them (docs/DESIGN.md, "Checks").

A scoped check's finding is about one note and depends only on that note, its link
records and the notes at their other ends. The memo keeps, in `.memlink/checks.sqlite`
(derived state: a missing or unreadable one means a full run), the last run's findings,
a row each, the link index's change number and the notes the extraction audit named,
and beside it (`checks.sqlite-stamps-<checksum>`) the catalog's stamps then, as the catalog's own
snapshot holds them, with their checksum in the memo.
The next run's scope is:

- notes added, removed or changed since (their stamps), and the notes at the other end
  of their links (a link's finding can be about either end). When this process's first
  sync started from the very catalog snapshot the last run saw (its checksum), the
  notes that sync changed are those, and no stamp is compared (``Vault.synced``);
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
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .atomic import atomic_write_bytes, full_disk_cause
from .catalog import stamp_of, stamps_of
from .checks import CHECKS, SEVERITIES, CheckContext, Finding
from .config import CONFIG_FILE
from .uris import uri_dir

if TYPE_CHECKING:
    from .catalog import Stamp
    from .vault import Vault

MEMO_VERSION = "5"
LAYOUT = 5  # the tables' layout (PRAGMA user_version): a memo of another is started again
_TABLES = (
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    # The notes the audit named, one checksummed marshal (100k rows read back one by one
    # cost a tenth of a second).
    "CREATE TABLE seen(id INTEGER PRIMARY KEY CHECK (id = 0), sum TEXT NOT NULL, data BLOB NOT NULL)",
    # A finding a row: ``source`` the check that made it, ``category`` what people see
    # (Finding.check), ``rank`` its severity's place in SEVERITIES (worst first),
    # ``scoped`` whether its check is (an unscoped check's rows are all replaced by each
    # run: a partial index finds those few among 300k).
    "CREATE TABLE findings(source TEXT NOT NULL, category TEXT NOT NULL, "
    "rank INTEGER NOT NULL CHECK (rank IN (0, 1, 2)), uri TEXT NOT NULL, message TEXT NOT NULL, "
    "other TEXT, code TEXT NOT NULL, scoped INTEGER NOT NULL CHECK (scoped IN (0, 1)))",
    "CREATE INDEX findings_uri ON findings(uri)",  # a run's scope is replaced by note
    "CREATE INDEX findings_order ON findings(category, rank, uri, message)",  # counts and pages
    "CREATE INDEX findings_unscoped ON findings(scoped) WHERE scoped = 0",
)
# The catalog's stamps as the last run saw them: a file beside the memo, not a row. A
# 9 MB row at 100k notes cost a lint ~60 ms (written to the WAL, then again by the
# checkpoint that followed every run). Named by its checksum (the memo's meta names the
# one it holds), so another process's save never changes the file a plan is about to
# read; older ones are removed after the commit. Written without fsync: one torn, lost
# or gone makes the next run full.
STAMPS_SUFFIX = "-stamps-"
_ORDER = "rank, category, uri, message, other, code"  # worst first (a report's order)
_COLUMNS = "category, rank, uri, message, other, code"

def _checksum(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


@dataclass
class Plan:
    """What a run remakes: ``scope`` None is every note."""

    scope: set[str] | None
    seq: int = 0
    created: str = ""
    reason: str = ""  # why the run is full (empty when it is incremental)
    compared: bool = False  # an incremental run that compared every note's stamp (no shortcut)
    run: str = ""  # an incremental run: the memo's run it was planned against (see ``save``)


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
        for path in self._stamp_files():
            path.unlink(missing_ok=True)

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
            held = ctx.catalog.held()
            synced = ctx.vault.synced(ctx.catalog)
            if synced is not None and synced.before and meta.get("stamps") == synced.before:
                changed = set(synced.changed)  # the catalog this run saw, then this sync's changes
            else:
                # A note's findings depend on its content (hash), parse error and type, a
                # stamp's last three: not on its mtime (a link write rewrites the note's
                # Links block, which the hash leaves out). (stamp_of inlined: 100k notes.)
                before = self._stamps(meta.get("stamps"))
                if before is None:  # (the memo itself is fine: nothing is discarded)
                    out.reason = "the memo could not be read"
                    return out
                changed = {u for u, v in held.items()
                           if (b := before.get(u)) is None or b[2:] != (v if type(v) is tuple else stamp_of(v))[2:]}
                changed.update(before.keys() - held.keys())
                out.compared = True
            scope = changed | changes.owners
            recorded = db.execute("SELECT sum FROM seen WHERE id = 0").fetchone()
            if recorded is None or recorded[0] != _checksum(_recorded_bytes(ctx.recorded)):
                scope |= self._recorded(db) ^ ctx.recorded
            for uri in changed:  # a changed note changes the findings about links into and out of it
                folder = uri_dir(uri)
                for direction in ("links", "backlinks"):
                    for link in store.links_of(folder, uri, direction):
                        scope.add(link.to_uri if direction == "links" else link.from_uri)
            out.scope = scope
            out.run = meta.get("run", "")
            return out
        except (sqlite3.DatabaseError, KeyError, ValueError, TypeError, OSError):
            self._discard()
            out.reason = "the memo could not be read"
            return out

    def _stamps_path(self, digest: str) -> Path | None:
        if self.path is None or not digest.isalnum():
            return None
        return Path(f"{self.path}{STAMPS_SUFFIX}{digest}")

    def _stamps(self, digest: str | None) -> dict[str, Stamp] | None:
        """The catalog's stamps the last run saw (their checksum ``digest``, from the
        memo's meta); None when the file is gone or is not what that run wrote whole."""
        path = self._stamps_path(digest or "")
        if path is None:
            return None
        try:
            got = stamps_of(digest or "", path.read_bytes())
        except OSError:
            return None
        return None if got is None else got[0]

    def _stamp_files(self) -> list[Path]:
        if self.path is None:
            return []
        return list(self.path.parent.glob(f"{self.path.name}{STAMPS_SUFFIX}*"))

    @staticmethod
    def _recorded(db: sqlite3.Connection) -> set[str]:
        """The notes the audit named at the last run; ValueError when they are not what a
        run wrote whole."""
        got = db.execute("SELECT sum, data FROM seen WHERE id = 0").fetchone()
        if got is None or not isinstance(got[1], bytes) or _checksum(got[1]) != got[0]:
            raise ValueError("a damaged memo")
        try:
            recorded = marshal.loads(got[1])
        except (EOFError, TypeError) as exc:
            raise ValueError("a damaged memo") from exc
        if type(recorded) is not list:
            raise ValueError("a damaged memo")
        return set(recorded)

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
        scoped = {c.name: int(c.scoped) for c in CHECKS}
        try:
            db.execute("BEGIN IMMEDIATE")
            kept = dict(db.execute("SELECT key, value FROM meta").fetchall())
            if plan.scope is not None and kept.get("run", "") != plan.run:
                # Another process saved a run since this one was planned: its rows outside
                # this scope are of another moment. This run is made whole in memory
                # (the caller), and that memo stays as it is.
                db.execute("ROLLBACK")
                db.close()
                self._db = None
                return None
            if plan.scope is None:
                db.execute("DELETE FROM findings")
            else:
                db.execute("DELETE FROM findings WHERE scoped = 0")
                scope = sorted(plan.scope)
                for i in range(0, len(scope), 500):
                    part = scope[i : i + 500]
                    db.execute(f"DELETE FROM findings WHERE uri IN ({','.join('?' * len(part))})", part)  # noqa: S608
            rank = {s: i for i, s in enumerate(SEVERITIES)}
            db.executemany("INSERT INTO findings VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                           ((name, f.check, rank[f.severity], f.uri, f.message, f.other, f.code, scoped[name])
                            for name, found in made.items() for f in found))
            # The catalog as this run saw it: the snapshot its sync left, when the catalog
            # is still that (its bytes are made already), else its stamps marshalled the same way.
            synced = ctx.vault.synced(ctx.catalog)
            if synced is not None:
                stamps, digest = synced.after.data, synced.after.sum
            else:
                stamps = marshal.dumps(({u: v if type(v) is tuple else stamp_of(v) for u, v in held.items()}, []))
                digest = _checksum(stamps)
            path = self._stamps_path(digest)
            if path is not None and (plan.scope is None or not path.exists()):  # (a full run: also one found damaged)
                atomic_write_bytes(path, stamps, durable=False)
            recorded = _recorded_bytes(ctx.recorded)
            run = uuid.uuid4().hex
            db.execute("INSERT OR REPLACE INTO seen VALUES (0, ?, ?)", (_checksum(recorded), recorded))
            db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                           [("basis", self._basis(ctx.vault, ctx.today)), ("created", plan.created), ("seq", str(plan.seq)),
                            ("stamps", digest), ("run", run)])
            db.execute("COMMIT")
            for old in self._stamp_files():
                if old != path:
                    old.unlink(missing_ok=True)  # (a plan that read the old name then runs full)
            found = Findings(db)  # its snapshot: what this run saved
            if found.run != run:  # another run committed in between: its rows would show
                found.close()
                self._db = None
                return None
        except (sqlite3.DatabaseError, OSError) as exc:
            try:
                db.execute("ROLLBACK")
            except sqlite3.DatabaseError:
                pass
            if full_disk_cause(exc) is not None:  # rolled back: the memo is as it was (and frees no room)
                db.close()
                self._db = None
                return None
            self._discard()  # (in an unknown state: the next run is full)
            return None
        self._db = None  # (the report holds it now)
        if self.path is not None:
            ctx.vault.linkstore.forget_changes(plan.seq)  # this memo has seen them
        return found


def _recorded_bytes(recorded: set[str]) -> bytes:
    return marshal.dumps(sorted(recorded))


class Findings:
    """One run's findings as the memo holds them, read from one snapshot of it (a read
    transaction held until ``close``: another run meanwhile writes a new one). Counts
    and pages come from SQL; the whole list is made only when asked for."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db: sqlite3.Connection | None = db
        self._lock = threading.Lock()
        db.execute("BEGIN")
        got = db.execute("SELECT value FROM meta WHERE key = 'run'").fetchone()  # (the snapshot starts at the first read)
        self.run = got[0] if got else ""  # the run whose findings these are

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
