"""The memo of the last check run, so the next one remakes only what changed
(docs/DESIGN.md, "Checks").

A scoped check's finding is about one note and depends only on that note, its link
records and the notes at their other ends. The memo keeps, in `.memlink/checks.sqlite`
(derived state: a missing or unreadable one means a full run), the scoped findings of
the last run by note, each note's catalog signature then, the link index's change
number and the notes the extraction audit named. The next run's scope is:

- notes added, removed or changed since (catalog signature), and the notes at the other
  end of their links (a link's finding can be about either end);
- the notes whose link records were written or removed since (``LinkStore.changes_since``);
- notes the audit names now and did not then, or the other way round.

Anything the memo cannot follow makes the run full: no memo, another vault
configuration or set of checks, another day (a note's age is a finding), a link index
rebuilt, a sidecar re-read whole (an edit by another tool), or a sidecar that cannot be
read at all.

Each check's findings are kept as one marshalled list with a BLAKE2 checksum, not a row
each: at 100k notes a run keeps ~300k of them, and reading them back row by row cost
more than the rest of planning (docs/DESIGN.md, "Checks").
"""

from __future__ import annotations

import datetime as dt
import hashlib
import marshal
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .catalog import stamp_of
from .checks import CHECKS, CheckContext, Finding
from .config import CONFIG_FILE
from .uris import uri_dir

if TYPE_CHECKING:
    from .catalog import CatalogEntry, Stamp
    from .vault import Vault

MEMO_VERSION = "3"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS notes(uri TEXT PRIMARY KEY, sig TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS recorded(uri TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS found(check_name TEXT PRIMARY KEY, sum TEXT NOT NULL, data BLOB NOT NULL);
DROP TABLE IF EXISTS findings
"""  # (findings: version 2's table, a row per finding)

Row = tuple  # a finding as kept: (uri, severity, message, other, code, check)


def _row(f: Finding) -> Row:
    return (f.uri, f.severity, f.message, f.other, f.code, f.check)


def _pack(rows: list[Row]) -> tuple[str, bytes]:
    data = marshal.dumps(rows)
    return hashlib.blake2b(data, digest_size=16).hexdigest(), data


def _unpack(digest: str, data: object) -> list[Row]:
    """A check's kept findings; ValueError when the bytes are not a list this code wrote
    whole (a memo that cannot be read means a full run)."""
    if not isinstance(data, bytes) or hashlib.blake2b(data, digest_size=16).hexdigest() != digest:
        raise ValueError("a damaged memo")
    try:
        rows = marshal.loads(data)
    except (EOFError, TypeError) as exc:
        raise ValueError("a damaged memo") from exc
    if type(rows) is not list:
        raise ValueError("a damaged memo")
    return rows


@dataclass
class Plan:
    """What a run remakes: ``scope`` None is every note; ``kept`` are the last run's
    scoped findings outside the scope, by check."""

    scope: set[str] | None
    kept: dict[str, list[Finding]] = field(default_factory=dict)
    dropped: dict[str, list[Row]] = field(default_factory=dict)  # the last run's findings in scope, by check
    seq: int = 0
    created: str = ""
    reason: str = ""  # why the run is full (empty when it is incremental)


def _sig(value: CatalogEntry | Stamp) -> str:
    """What a note's findings depend on of the note itself: its content (the hash), its
    type (which a changed type file can change without the content) and whether it
    parses. From the stamp: a run over 100k notes builds no entry for this."""
    _, _, sha, error, memory_type = stamp_of(value)
    return f"{sha}|{memory_type}|{error or ''}"


class CheckMemo:
    def __init__(self, path: Path | None) -> None:
        self.path = path  # None: nothing is kept (a read-only vault runs whole each time)
        self._db: sqlite3.Connection | None = None  # held from an incremental plan to its save

    @classmethod
    def for_vault(cls, vault: Vault) -> CheckMemo:
        return cls(None if vault.read_only else vault.state_dir / "checks.sqlite")

    def _connect(self) -> sqlite3.Connection | None:
        if self.path is None:
            return None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(str(self.path), timeout=30, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")  # derived: a lost memo means one full run
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)
            return db
        except sqlite3.DatabaseError:
            self._discard()
            return None

    def _discard(self) -> None:
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
        if full or db is None:
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
            before = dict(db.execute("SELECT uri, sig FROM notes").fetchall())
            now = {uri: _sig(value) for uri, value in ctx.catalog.held().items()}
            changed = {u for u in before.keys() | now.keys() if before.get(u) != now.get(u)}
            was_recorded = {u for (u,) in db.execute("SELECT uri FROM recorded")}
            scope = changed | changes.owners | (was_recorded ^ ctx.recorded)
            for uri in changed:  # a changed note changes the findings about links into and out of it
                folder = uri_dir(uri)
                for direction in ("links", "backlinks"):
                    for link in store.links_of(folder, uri, direction):
                        scope.add(link.to_uri if direction == "links" else link.from_uri)
            out.scope = scope
            out.kept, out.dropped = self._kept(db, scope)
            return out
        except (sqlite3.DatabaseError, KeyError, ValueError, TypeError):
            db.close()
            self._discard()
            out.reason = "the memo could not be read"
            return out
        finally:
            if out.scope is None:
                db.close()
            else:
                self._db = db

    @staticmethod
    def _kept(db: sqlite3.Connection, scope: set[str]) -> tuple[dict[str, list[Finding]], dict[str, list[Row]]]:
        """The last run's findings outside ``scope`` (by check, in their order) and those
        inside it. ValueError or TypeError: a row that is not a finding."""
        kept: dict[str, list[Finding]] = {}
        dropped: dict[str, list[Row]] = {}
        for name, digest, data in db.execute("SELECT check_name, sum, data FROM found"):
            keep: list[Finding] = kept.setdefault(name, [])
            out: list[Row] = dropped.setdefault(name, [])
            for row in _unpack(digest, data):
                uri, severity, message, other, code, category = row
                if uri in scope:
                    out.append(row)
                else:
                    keep.append(Finding(category, severity, uri, message, other, code))  # checked: ValueError
        return kept, dropped

    # -- saving a run -----------------------------------------------------------------------------
    def save(self, plan: Plan, ctx: CheckContext, made: dict[str, list[Finding]], scoped: dict[str, list[Finding]]) -> None:
        """Keep this run's scoped findings (``scoped``: each scoped check's, kept and
        ``made``), the catalog signatures and the link index's change number it saw (all
        in one SQLite transaction: a memo is whole or absent). A check whose findings in
        scope came out as they were is not written again."""
        db = self._db or self._connect()
        if db is None:
            return
        try:
            db.execute("BEGIN IMMEDIATE")
            if plan.scope is None:
                db.execute("DELETE FROM found")
                db.execute("DELETE FROM notes")
                db.execute("DELETE FROM recorded")
                db.executemany("INSERT INTO notes VALUES (?, ?)", ((u, _sig(v)) for u, v in ctx.catalog.held().items()))
                db.executemany("INSERT INTO recorded VALUES (?)", ((u,) for u in ctx.recorded))
            else:
                held = ctx.catalog.held()
                for uri in plan.scope:
                    value = held.get(uri)
                    if value is None:
                        db.execute("DELETE FROM notes WHERE uri=?", (uri,))
                    else:
                        db.execute("INSERT OR REPLACE INTO notes VALUES (?, ?)", (uri, _sig(value)))
                db.execute("DELETE FROM recorded")
                db.executemany("INSERT INTO recorded VALUES (?)", ((u,) for u in ctx.recorded))
            for name, found in scoped.items():
                if plan.scope is not None and name in plan.dropped and Counter(map(_row, made.get(name, []))) == Counter(plan.dropped[name]):
                    continue  # the same findings as the memo holds
                db.execute("INSERT OR REPLACE INTO found VALUES (?, ?, ?)", (name, *_pack([_row(f) for f in found])))
            db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                           [("basis", self._basis(ctx.vault, ctx.today)), ("created", plan.created), ("seq", str(plan.seq))])
            db.execute("COMMIT")
        except sqlite3.DatabaseError:
            try:
                db.execute("ROLLBACK")
            except sqlite3.DatabaseError:
                pass
            db.close()
            self._discard()
        else:
            db.close()
            ctx.vault.linkstore.forget_changes(plan.seq)  # this memo has seen them
        self._db = None
