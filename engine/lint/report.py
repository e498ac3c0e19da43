"""Lint: every check a person reviewing a memory vault cares about, with a severity,
plus generated dashboards (`dashboards/*.md`) and a machine-readable digest for agents.
`fix` only does safe repairs (a link's missing side restored, links to notes that no
longer exist removed, a session log's torn last line cut) and says what it did."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import shlex
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from ..errors import SidecarError
from ..model.files import SIDECAR_BYTES, read_bounded
from ..model.links import SIDECAR, Direction, dump_rows, sort_out
from ..model.text import counted, printable
from ..model.uris import uri_dir
from ..review.actions import log_action
from ..review.move import moved_to
from ..sessions.log import heal_session_logs
from ..storage.atomic import atomic_write_text
from ..storage.journal import rejected_log
from ..storage.sidecars import SIDECAR_LOG, PutLink, RemoveLegacy, RemoveLink, read_folder, salvage_folder, sidecar_rel
from .checks import Finding
from .memo import check, check_run

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ..model.links import StoredLink
    from ..storage.transaction import Transaction
    from ..storage.vault import Vault
    from .memo import Findings

__all__ = ["GROUPED", "Finding", "Group", "LintReport", "fix", "lint", "set_aside", "write_dashboards"]

SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}
# Checks whose findings come by the dozen and rarely need acting on one by one: lint shows
# one line each, with a count, until asked for them (`memlink lint --check NAME`, enter in
# the lint pane). Errors, contradictions and link problems are listed one by one.
GROUPED = ("freshness", "provenance", "low_weight", "orphans", "open_questions")
CATEGORIES = ("structure", "links", "contradictions", *GROUPED)  # every check as people see it


def rank(f: Finding) -> tuple[int, bool]:
    """Where a finding goes in a listing: errors first, then contradictions (what lint is
    opened for), then other warnings, then info."""
    return SEVERITY_ORDER[f.severity], f.check != "contradictions"


@dataclass(frozen=True)
class Group:
    """One line standing for a grouped check's findings."""

    check: str
    severities: dict[str, int]  # how many findings of each severity

    @property
    def count(self) -> int:
        return sum(self.severities.values())

    @property
    def worst(self) -> str:
        return min(self.severities, key=SEVERITY_ORDER.__getitem__)

    @property
    def text(self) -> str:
        def plural(n: int, severity: str) -> str:
            return f"{n} {severity}{'s' if n != 1 and severity != 'info' else ''}"

        if len(self.severities) == 1:
            return plural(self.count, self.worst)
        parts = [plural(n, s) for s, n in sorted(self.severities.items(), key=lambda kv: SEVERITY_ORDER[kv[0]])]
        return f"{self.count} findings: {', '.join(parts)}"


class LintReport:
    """A lint run: its counts at once, its findings read from the check memo as asked for
    (``page``, ``findings``): at 100k notes a run has ~300k findings, and a summary, the
    dashboards and the digest read a few thousand of them (docs/DESIGN.md, "Checks").
    Pages are read from the memo as it is when asked: a later run's findings, if one
    saved since."""

    def __init__(self, found: Findings, fixed: list[str] | None = None) -> None:
        self._found: Findings | None = found
        self.fixed: list[str] = fixed or []
        by_severity = found.counts()
        self.severities: dict[str, dict[str, int]] = defaultdict(dict)  # check -> severity -> count
        for (name, severity), n in by_severity.items():
            self.severities[name][severity] = self.severities[name].get(severity, 0) + n
        self.errors = sum(n for (_check, severity), n in by_severity.items() if severity == "error")
        self.counts: dict[str, int] = {}  # findings by check (as people see them)
        self.serious: dict[str, int] = {}  # errors and warnings by check
        for (name, severity), n in sorted(by_severity.items()):
            self.counts[name] = self.counts.get(name, 0) + n
            if severity != "info":
                self.serious[name] = self.serious.get(name, 0) + n
        self._all: list[Finding] | None = None

    def page(self, checks: Iterable[str] | None = None, limit: int | None = None, involving: str | None = None) -> list[Finding]:
        """The findings of these checks (all: None), worst first, at most ``limit``;
        ``involving``: only those about or pointing at that note."""
        if self._all is not None:
            wanted = None if checks is None else set(checks)
            rows = [f for f in self._all if (wanted is None or f.check in wanted)
                    and (involving is None or involving in (f.uri, f.other))]
            return rows[:limit] if limit is not None else rows
        if self._found is None:
            raise ValueError("the lint report was closed before its findings were read")
        return self._found.page(checks, limit=limit, involving=involving)

    @property
    def findings(self) -> list[Finding]:
        """Every finding, worst first (read once, then kept)."""
        if self._all is None:
            self._all = self.page()
        return self._all

    def groups(self) -> list[Group]:
        """The grouped checks that found something, worst first."""
        found = [Group(c, dict(self.severities[c])) for c in GROUPED if self.severities.get(c)]
        return sorted(found, key=lambda g: (SEVERITY_ORDER[g.worst], g.check))

    def by_check(self) -> dict[str, list[Finding]]:
        out: dict[str, list[Finding]] = defaultdict(list)
        for f in self.findings:
            out[f.check].append(f)
        return out

    def close(self) -> None:
        """Let go of the memo's snapshot (what was read stays readable)."""
        if self._found is not None:
            self._found.close()
            self._found = None

    def __enter__(self) -> LintReport:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def lint(vault: Vault, today: dt.date | None = None, *, full: bool = False) -> LintReport:
    """Every registered check (engine.lint.checks), worst first: incremental (only what
    changed since the last run is looked at again) unless ``full``."""
    return LintReport(check_run(vault, today=today, full=full))


def set_aside(vault: Vault) -> list[str]:
    """Move bad sidecar entries, and the lines of a sidecar or link log that do not read,
    to the rejected file beside them (appended, never overwritten: nothing is silently
    deleted), in one unit of work; every entry that still reads stays, and the Links
    blocks of the folder's notes follow what stays. A file that cannot be read at all (a
    symlink out of the vault) is moved whole. Says what went where (docs/DESIGN.md,
    "Checks")."""
    done: list[str] = []
    with vault.transaction() as tx:
        stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        for folder, problems in vault.links.problems().items():
            rel, log = sidecar_rel(folder), rejected_log(folder)
            where = vault.resolve.folder(folder)
            if problems.broken is not None:
                try:
                    salvaged = salvage_folder(vault.root, where, folder)
                except SidecarError:
                    done += _move_whole(tx, vault, folder, problems.broken, stamp)
                    continue
                for name, n, line, why in salvaged.lost:
                    tx.append(log, {"sidecar": name, "at": stamp, "line": n, "cause": why, **_kept_bytes(line)})
                rows, written = salvaged.rows, {}
            elif problems.rejected:
                files = read_folder(vault.root, where, folder, lines=True)
                rows, written = files.rows, files.lines
            else:
                continue
            _good, _legacy, rejected = sort_out(rows)
            for bad in rejected:
                tx.append(log, {"sidecar": SIDECAR, "at": stamp, "index": bad.index, "cause": bad.cause,
                                **_kept_entry(bad.entry, written.get(id(bad.entry)))})
            bad_at = {bad.index for bad in rejected}
            clean = [row for i, row in enumerate(rows) if i not in bad_at]
            tx.restore_sidecar(folder, dump_rows(clean) if clean else None)
            n = len(rejected)
            if problems.broken is None:
                done.append(f"moved {n} bad entr{'y' if n == 1 else 'ies'} of {rel} to {log}")
                continue
            # What the folder's notes' Links blocks listed may be gone with the lost lines.
            tx.links_touched(u for u in vault.catalog.uris() if uri_dir(u) == folder)
            lost = [f"{folder + '/' if folder else ''}{name} line {line}: {why}" for name, line, _text, why in salvaged.lost]
            lost += [f"{rel} {bad.label}: {bad.cause}" for bad in rejected]
            done.append(f"{rel} did not read whole ({problems.broken.removeprefix(rel + ': ')}): kept the {len(clean)} "
                        f"entr{'y' if len(clean) == 1 else 'ies'} that read; dropped {len(lost)} to {log}"
                        + (f" ({'; '.join(lost[:5])}{'; …' if len(lost) > 5 else ''})" if lost else ""))
    return done


def _move_whole(tx: Transaction, vault: Vault, folder: str, broken: str, stamp: str) -> list[str]:
    """A folder's link files that cannot be read at all, moved whole to its rejected file."""
    rel, log = sidecar_rel(folder), rejected_log(folder)
    where = vault.resolve.folder(folder)
    kept: dict[str, str] = {}
    for name, path in ((SIDECAR, where / SIDECAR), (SIDECAR_LOG, where / SIDECAR_LOG)):
        try:  # a symlink is kept as where it pointed: its target is not the vault's to copy
            one = {"symlink": os.readlink(path)} if path.is_symlink() else _kept_bytes(read_bounded(path, SIDECAR_BYTES))
        except FileNotFoundError:
            continue
        except OSError:
            return []  # nothing to keep or move (a folder or a pipe named like a sidecar): check still reports it
        kept.update(one if name == SIDECAR else {f"log_{k}": v for k, v in one.items()})
    if not kept:
        return []
    tx.append(log, {"sidecar": SIDECAR, "at": stamp, "cause": broken, **kept})
    tx.restore_sidecar(folder, None)
    return [f"moved unreadable {rel} to {log} ({broken.removeprefix(rel + ': ')})"]


def _kept_entry(entry: object, line: tuple[object, str] | None) -> dict[str, object]:
    """A set-aside entry as the rejected file keeps it: the entry, or, when JSON cannot
    hold it as it was read (a weight of 1e999 read as infinity), its line as written."""
    try:
        json.dumps(entry, allow_nan=False)
    except ValueError:
        return {"text": line[1] if line is not None else json.dumps(entry, ensure_ascii=False)}
    return {"entry": entry}


def _kept_bytes(raw: bytes) -> dict[str, str]:
    try:
        return {"text": raw.decode("utf-8")}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(raw).decode("ascii")}


def fix(vault: Vault) -> list[str]:
    """Safe repairs only: first bad sidecar entries and files are set aside
    (``set_aside``) and the torn last lines of session logs cut (``heal_session_logs``);
    then, in one unit of work, restore the missing side of a one-sided link whose two
    notes exist, and remove links (both sides) to or from notes that no longer exist —
    logged as an action `memlink undo` takes back (a note moved by hand, found after the
    removal: undo, then `memlink mv`)."""
    done: list[str] = set_aside(vault) + heal_session_logs(vault)
    if not any(f.code in REPAIRED for f in check(vault)):
        return done  # nothing to repair (the incremental check says so without reading every sidecar)
    with vault.transaction() as tx:
        # Under the lock: a note another process writes meanwhile is seen. A note that
        # exists but does not parse (a half-done edit) still exists: its links stay.
        vault.sync()
        exists = set(vault.catalog.uris()) | set(vault.catalog.errors())
        ops: list[PutLink | RemoveLink | RemoveLegacy] = []
        seen: dict[tuple[str, str], tuple[str, StoredLink]] = {}
        unusable: set[str] = set()
        pairs: list[tuple[str, str]] = []  # the links removed: (from, to)
        for folder in vault.links.folders():
            car = vault.links.folder(folder)
            if car.problem(folder):
                unusable.add(folder)  # reported by lint, not guessed at; a writer refuses it until set aside
                continue
            for l in car.links:
                if not l.legacy:
                    seen[(l.direction, l.id)] = (folder, l)
                elif l.from_uri.endswith(".md") and l.to_uri not in exists:
                    ops.append(RemoveLegacy(folder=folder, entry_id=l.id, from_uri=l.from_uri, to_uri=l.to_uri))
                    pairs.append((l.from_uri, l.to_uri))
                    done.append(f"removed legacy link {l.from_uri} -> {l.to_uri} (target missing)")
        moved: dict[str, str | None] = {}  # a missing note -> where it was moved by hand (engine.review.move)
        for (direction, link_id), (folder, l) in seen.items():
            if l.from_uri not in exists or l.to_uri not in exists:
                gone = l.to_uri if l.to_uri not in exists else l.from_uri
                if gone not in moved:
                    moved[gone] = there = moved_to(vault, gone)
                    if there:
                        done.append(f"kept the links of {gone}: it looks moved to {there} "
                                    f"(`memlink mv {shlex.quote(gone)} {shlex.quote(there)}` retargets them)")
                if moved[gone]:
                    continue
                ops.append(RemoveLink(folder=folder, id=l.id, direction=direction))
                pairs.append((l.from_uri, l.to_uri))
                done.append(f"removed {direction} entry {l.id} {l.from_uri} -> {l.to_uri} (a note is missing)")
                continue
            twin_dir: Direction = "backlinks" if direction == "links" else "links"
            if (twin_dir, link_id) not in seen:
                twin_folder = uri_dir(l.to_uri if direction == "links" else l.from_uri)
                if twin_folder in unusable or vault.links.folder(twin_folder, records=False).broken is not None:
                    continue  # its sidecar could not be set aside; check keeps reporting it
                ops.append(PutLink(folder=twin_folder, link=l.as_direction(twin_dir)))
                done.append(f"restored the {twin_dir} side of {l.id} {l.from_uri} -> {l.to_uri}")
        tx.link_ops(ops)
        if pairs:  # (the action names the first pair; undo puts back every record)
            log_action(vault, tx, "fix", *pairs[0], f"check --fix removed {counted(len(pairs), 'link record')} "
                                                     "to or from missing notes")
    return done


REPAIRED = {"one_sided_link", "dangling_link"}  # what fix() repairs


# -- dashboards ----------------------------------------------------------------------------------
DASHBOARDS = {
    "contradictions": ("Contradictions", ["contradictions"]),
    "open-questions": ("Open questions", ["open_questions"]),
    "low-confidence": ("Low-confidence links", ["low_weight"]),
    "stale": ("Aging and stale notes", ["freshness"]),
    "orphans": ("Orphans", ["orphans"]),
    "provenance": ("Provenance", ["provenance"]),
    "lint": ("Lint: structure and links", ["structure", "links"]),
}


DASHBOARD_ROWS = 500  # listed per dashboard, worst first; the count says how many there are


def write_dashboards(vault: Vault, report: LintReport, today: dt.date | None = None) -> list[str]:
    """Regenerate `dashboards/*.md` (never hand-edited) and `dashboards/digest.json`.
    A dashboard lists its first ``DASHBOARD_ROWS`` findings and says how many more there
    are: a page of 100k stale notes is read by nobody, and writing it costs seconds
    (`memlink lint --all` and `--json` give them all)."""
    today = today or dt.date.today()
    folder: Path = vault.root / "dashboards"
    pages = {name: report.page(checks, DASHBOARD_ROWS) for name, (_title, checks) in DASHBOARDS.items()}
    totals = {name: sum(report.counts.get(c, 0) for c in checks) for name, (_title, checks) in DASHBOARDS.items()}
    questions = pages["open-questions"]  # (the digest's too)
    count, types, degree = vault.links.stats(top=10)  # (lint just brought every folder in step)
    shown = [u for rows in pages.values() for f in rows for u in (f.uri, f.other) if u]
    titles = _titles(vault, [*shown, *(u for u, _ in degree), *(f.uri for f in questions)])
    written = []
    header = f"<!-- generated by `memlink lint` on {today.isoformat()}; edits are overwritten -->\n"
    for name, (title, _checks) in DASHBOARDS.items():
        rows, total = pages[name], totals[name]
        lines = [header, f"# {title}\n", f"{total} item(s).\n"]
        for f in rows:
            other = f" ↔ {titles.get(f.other, f.other)} (`{f.other}`)" if f.other else ""
            lines.append(f"- **{f.severity}** {titles.get(f.uri, f.uri)} (`{f.uri}`){other} — {f.text}")
        if total > len(rows):
            lines.append(f"\n… and {total - len(rows)} more: `memlink lint --all` lists them all.")
        atomic_write_text(folder / f"{name}.md", printable("\n".join(lines) + "\n"))  # (`cat` it: no escapes)
        written.append(f"dashboards/{name}.md")
    # Relationship summary: link types and the most linked notes.
    lines = [header, "# Relationships\n", f"{count} links.\n", "| link type | count |", "|---|---|"]
    lines += [f"| {t} | {n} |" for t, n in types.items()]
    lines += ["", "Most linked notes:", ""] + [f"- {titles.get(u, u)} (`{u}`): {n}" for u, n in degree]
    atomic_write_text(folder / "relationships.md", printable("\n".join(lines) + "\n"))
    written.append("dashboards/relationships.md")
    summary = digest(vault, report, today, stats=(count, types, degree), titles=titles, questions=questions,
                     contradictions=pages["contradictions"])
    atomic_write_text(folder / "digest.json", _json_text(summary))
    written.append("dashboards/digest.json")
    return written


def _json_text(data: dict) -> str:
    """``json.dumps(data, ensure_ascii=False, indent=2)`` and a newline, the same text
    (orjson: a tenth of the time for the 3 MB digest of a 100k-note vault); what orjson
    refuses (a lone surrogate in a title) json writes."""
    try:
        return orjson.dumps(data, option=orjson.OPT_INDENT_2).decode("utf-8") + "\n"
    except TypeError:
        return json.dumps(data, ensure_ascii=False, indent=2) + "\n"


def _titles(vault: Vault, uris: list[str]) -> dict[str, str]:
    """The titles of the notes a dashboard shows, read in one go (building every entry of
    a 100k-note catalog for a page of 500 rows costs more than the rest of the page)."""
    return {u: e.title for u, e in vault.catalog.entries(uris).items()}


def digest(vault: Vault, report: LintReport, today: dt.date | None = None,
           stats: tuple[int, dict[str, int], list[tuple[str, int]]] | None = None,
           titles: dict[str, str] | None = None, questions: list[Finding] | None = None,
           contradictions: list[Finding] | None = None) -> dict:
    """The lint run in brief, for agents (`dashboards/digest.json`, the MCP lint digest):
    counts per type and link type, the most linked notes, health, and the first
    ``DASHBOARD_ROWS`` contradictions and open questions, worst first (``health.checks``
    says how many there are: a 100k-note vault had 21k contradictions, a 3 MB digest).
    Writes nothing. ``stats``, ``titles``, ``questions``, ``contradictions``: what the
    caller has already (write_dashboards: its pages of those checks; the stats and titles
    cost a tenth of a second each at 100k notes)."""
    if questions is None:
        questions = report.page(["open_questions"], DASHBOARD_ROWS)
    if contradictions is None:
        contradictions = report.page(["contradictions"], DASHBOARD_ROWS)
    count, types, degree = stats or vault.links.stats(top=10)
    if titles is None:
        titles = _titles(vault, [*(u for u, _ in degree), *(f.uri for f in questions)])
    per_type = vault.catalog.type_counts()
    return {
        "generated": (today or dt.date.today()).isoformat(),
        "notes": sum(per_type.values()),
        "per_type": dict(per_type),
        "links": count,
        "link_types": types,
        "top_linked": [{"uri": u, "title": titles.get(u, u), "degree": n} for u, n in degree],
        "health": {"errors": report.errors, "checks": report.counts},
        "contradictions": [{"a": f.uri, "b": f.other, "why": f.message} for f in contradictions],
        "open_questions": [titles.get(f.uri, f.uri) for f in questions],
    }
