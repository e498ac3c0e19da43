"""The memo of the last check run, so the next one remakes only what changed, and the
run's findings as a report reads them (docs/DESIGN.md, "Checks").

A scoped check's finding is about one note and depends only on that note, its link
records and the notes at their other ends. The memo keeps, in the store, the last run's
findings (a row each), each note as it was checked (its content hash, parse error and
type), the notes the extraction audit named, and where the change feed was. The next
run's scope is:

- notes added, removed or changed since (compared in SQL with the catalog), and the
  notes at the other end of their links (a link's finding can be about either end);
- the notes whose link records the change feed names since (a sidecar read again whole,
  changed by hand or by another tool, makes the run full: the twins of its records, in
  other folders, may have changed too);
- notes the audit names now and did not then, or the other way round.

Anything the memo cannot follow makes the run full: no memo, another vault configuration
or set of checks, another day (a note's age is a finding), a feed that moved on too far,
or a sidecar that cannot be read at all. A run replaces the rows about the notes in
scope (and every row of the unscoped checks) and keeps the rest; a report (``Findings``)
then reads counts and pages in SQL. When the memo cannot be written (a full disk) the
run's findings are kept in memory for its report, and the next run is full."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..model.config import CONFIG_FILE
from ..storage.store import KEY_ID, KEY_IDS, Store, StoreBusy, Writer
from .checks import CHECKS, SEVERITIES, CheckContext, Finding

if TYPE_CHECKING:
    from ..storage.vault import Vault

# Worst first; then by note, in the order the store numbered them (by path, at a vault's
# first sync: engine.storage.catalog), which the order index follows.
_ORDER = "f.rank, f.category, f.uri, f.message, o.key, f.code"
_SELECT = ("SELECT f.category, f.rank, u.key, f.message, o.key, f.code FROM findings f JOIN keys u ON u.id = f.uri "
           "LEFT JOIN keys o ON o.id = f.other")
_STATE = "n.sha || '|' || coalesce(n.error, '') || '|' || n.memory_type"  # what a note's findings depend on


@dataclass
class Plan:
    """What a run remakes: ``scope`` None is every note."""

    scope: set[str] | None
    mark: tuple[str, int]
    reason: str = ""  # why the run is full (empty when it is incremental)
    run: str = ""  # an incremental run: the memo's run it was planned against (see ``save``)
    audited: set[str] = field(default_factory=set)  # the notes the audit named at the last run


class CheckMemo:
    def __init__(self, vault: Vault) -> None:
        self.vault = vault
        self.store = vault.store

    def _basis(self, today: dt.date) -> str:
        """What every finding depends on besides the notes and links: the vault's
        configuration, its memory types, the checks themselves and the day."""
        root = self.vault.root
        h = hashlib.sha256(today.isoformat().encode())
        for path in [root / CONFIG_FILE, *sorted((root / "memory_types").glob("*.yaml"))]:
            try:
                h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
            except OSError:
                h.update(path.name.encode() + b"\0-\0")
        h.update(",".join(f"{c.name}:{c.integrity}:{c.scoped}" for c in CHECKS).encode())
        h.update(",".join(f"{t.memory_type}:{t.goes_stale}" for t in self.vault.types).encode())  # (built-in types too)
        return h.hexdigest()[:20]

    def _meta(self) -> dict[str, str]:
        return dict(self.store.rows("SELECT key, value FROM meta WHERE key LIKE 'checks.%'"))

    # -- planning a run -------------------------------------------------------------------------
    def plan(self, ctx: CheckContext, *, full: bool = False) -> Plan:
        """What the next run remakes; call it right after ``vault.sync()`` (what that read
        again is a change before this run's mark, not one for the next run)."""
        links = self.vault.links
        mark = self.store.mark()
        out = Plan(scope=None, mark=mark)
        meta = self._meta()
        if full:
            out.reason = "asked for"
        elif meta.get("checks.basis") != self._basis(ctx.today):
            out.reason = "no memo" if not meta else "the configuration, the checks or the day changed"
        elif ctx.broken:
            out.reason = "a sidecar cannot be read"
        if out.reason:
            return out
        was = json.loads(meta.get("checks.mark", "null") or "null")
        since = self.store.since((str(was[0]), int(was[1])) if isinstance(was, list) and len(was) == 2 else None)
        if since.everything:
            out.reason = "too much changed since the last run"
            return out
        if since.of("folder"):  # (the twins of its records, in other folders, may have changed too)
            out.reason = "a sidecar was read again whole (changed by hand or by another tool)"
            return out
        # The notes the feed names (a catalog row written or removed since, by any process)
        # whose content, parse error or type is not what was checked.
        named = sorted(since.of("note"))
        now = dict(self.store.rows_in(f"SELECT k.key, {_STATE} FROM notes n JOIN keys k ON k.id = n.id WHERE n.id IN {KEY_IDS}",
                                      named))
        then = dict(self.store.rows_in(f"SELECT k.key, c.state FROM checked c JOIN keys k ON k.id = c.uri WHERE c.uri IN {KEY_IDS}",
                                       named))
        changed = {u for u in named if now.get(u) != then.get(u)}
        scope = changed | since.of("link")
        out.audited = {u for (u,) in self.store.rows("SELECT k.key FROM checked c JOIN keys k ON k.id = c.uri WHERE c.audited = 1")}
        scope |= out.audited ^ ctx.recorded
        for ls in links.of_many(sorted(changed), as_staged=False).values():  # findings about links into and out of them
            scope.update(l.to_uri if l.direction == "links" else l.from_uri for l in ls)
        out.scope = scope
        out.run = meta.get("checks.run", "")
        return out

    # -- saving a run -----------------------------------------------------------------------------
    def save(self, plan: Plan, ctx: CheckContext, made: dict[str, list[Finding]]) -> Findings:
        """Keep this run's findings (``made``, by check: for the notes in scope, and every
        finding of an unscoped check), the notes as checked and the feed's mark, in one
        store transaction, and return them as a report reads them. When the memo cannot
        be written now, or another run saved since this one was planned (its rows
        outside this scope are of another moment), the findings of a full run are kept in
        memory for this report."""
        rows = _rows(made)
        try:
            with self.store.write() as w:
                if plan.scope is not None and self._meta().get("checks.run", "") != plan.run:
                    raise _Raced
                self._record(w, plan, ctx, rows)
        except (StoreBusy, _Raced):
            if plan.scope is not None:  # the rows kept are not this moment's: this run whole, in memory
                ctx.scope = None
                for cache in ("good", "sides", "every_side", "links"):
                    ctx.__dict__.pop(cache, None)
                rows = _rows({check.name: list(check.run(ctx)) for check in CHECKS})
            return Findings.in_memory(rows)
        return Findings(self.store.rows)

    def _record(self, w: Writer, plan: Plan, ctx: CheckContext, rows: list[tuple]) -> None:
        checked = f"INSERT INTO checked SELECT n.id, {_STATE}, 0 FROM notes n"
        if plan.scope is None:
            w.execute("DELETE FROM findings")
            w.execute("DELETE FROM checked")
            w.execute(checked)
        else:
            w.execute("DELETE FROM findings WHERE scoped = 0")
            scope = w.ids(sorted(plan.scope))
            w.executemany("DELETE FROM findings WHERE uri = ?", [(i,) for i in scope.values()])
            w.executemany("DELETE FROM checked WHERE uri = ?", [(i,) for i in scope.values()])
            w.executemany(checked + " WHERE n.id = ?", [(i,) for i in scope.values()])
        _insert(w, rows)
        # The rows this run wrote start at 0; the others keep what the last run set.
        was = set() if plan.scope is None else plan.audited - plan.scope
        w.executemany(f"UPDATE checked SET audited = 0 WHERE uri = {KEY_ID}", [(u,) for u in sorted(was - ctx.recorded)])
        w.executemany(f"UPDATE checked SET audited = 1 WHERE uri = {KEY_ID}", [(u,) for u in sorted(ctx.recorded - was)])
        w.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                      [("checks.basis", self._basis(ctx.today)), ("checks.mark", json.dumps(list(plan.mark))),
                       ("checks.run", uuid.uuid4().hex)])


def check(vault: Vault, *, today: dt.date | None = None, full: bool = False) -> list[Finding]:
    """The vault's integrity findings, worst first: notes and logs that parse, links with
    both sides pointing at notes that exist, no failed journals. Errors here are exactly
    lint's errors; this is what `memlink check` reports (``check_run`` runs them all)."""
    return check_run(vault, today=today, full=full).page(sources=[c.name for c in CHECKS if c.integrity])


def check_run(vault: Vault, *, today: dt.date | None = None, full: bool = False) -> Findings:
    """Run every registered check (engine.lint.checks); one context is shared, so each file is
    read once. Incremental unless ``full``: scoped checks remake findings only for the
    notes that changed since the last run (their files, their links, and the notes next
    to them) and keep the rest from the memo. The result is the same as a full run's."""
    day = today or dt.date.today()
    vault.sync()  # the run's view of the files
    memo = CheckMemo(vault)
    ctx = CheckContext(vault, day)
    plan = memo.plan(ctx, full=full)
    ctx.scope = plan.scope
    return memo.save(plan, ctx, {c.name: list(c.run(ctx)) for c in CHECKS})


def _rows(made: dict[str, list[Finding]]) -> list[tuple]:
    """Findings by check as rows: (check, category, rank, uri, message, other, code, scoped)."""
    scoped = {c.name: int(c.scoped) for c in CHECKS}
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    return [(name, f.check, rank[f.severity], f.uri, f.message, f.other, f.code, scoped[name])
            for name, found in made.items() for f in found]


def _insert(w: Writer, rows: list[tuple]) -> None:
    ids = w.ids(sorted({u for r in rows for u in (r[3], r[5]) if u is not None}))
    w.executemany("INSERT INTO findings VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                  [(*r[:3], ids[r[3]], r[4], None if r[5] is None else ids[r[5]], *r[6:]) for r in rows])


class _Raced(Exception):
    """Another run saved the memo since this one was planned."""


class Findings:
    """One run's findings: counts and pages read in SQL, from the memo (or from a table in
    memory, when the memo could not be written), the whole list only when asked for."""

    def __init__(self, rows: Callable[[str, Iterable[object]], list[tuple]]) -> None:
        self._rows = rows

    @classmethod
    def in_memory(cls, rows: list[tuple]) -> Findings:
        store = Store(None)
        with store.write() as w:
            _insert(w, rows)
        return cls(store.rows)

    def counts(self) -> dict[tuple[str, str], int]:
        """How many findings there are by (check as people see it, severity)."""
        return {(category, SEVERITIES[rank]): n for category, rank, n in
                self._rows("SELECT category, rank, COUNT(*) FROM findings GROUP BY category, rank", ())}

    def page(self, categories: Iterable[str] | None = None, *, sources: Iterable[str] | None = None,
             limit: int | None = None, involving: str | None = None) -> list[Finding]:
        """The findings (of these checks as people see them, or made by these checks),
        worst first, at most ``limit``; ``involving``: only those about or pointing at
        that note."""
        where: list[str] = []
        args: list[object] = []
        for column, values in (("f.category", categories), ("f.source", sources)):
            if values is not None:
                values = list(values)
                where.append(f"{column} IN ({','.join('?' * len(values))})")
                args += values
        if involving is not None:
            where.append(f"(f.uri = {KEY_ID} OR f.other = {KEY_ID})")
            args += [involving, involving]
        sql = f"{_SELECT} {'WHERE ' + ' AND '.join(where) if where else ''} ORDER BY {_ORDER}"  # noqa: S608
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [Finding(c, SEVERITIES[r], u, m, o, code) for c, r, u, m, o, code in self._rows(sql, args)]

    def close(self) -> None:
        """(Nothing is held: kept for the report's ``with`` block.)"""
