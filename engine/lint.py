"""Lint: every check a person reviewing a memory vault cares about, with a severity,
plus generated dashboards (`dashboards/*.md`) and a machine-readable digest for agents.
`fix` only does safe repairs (a link's missing side restored, links to notes that no
longer exist removed) and says what it did."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from .atomic import atomic_write_text
from .errors import MemlinkError
from .journal import PutLink, RemoveLegacy, RemoveLink
from .uris import uri_dir

FRESH_DAYS, STALE_DAYS = 30, 90
LOW_WEIGHT = 0.5
SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


@dataclass
class Finding:
    check: str
    severity: str  # error | warning | info
    uri: str
    message: str
    other: str | None = None  # the note on the other side (links, contradictions)


@dataclass
class LintReport:
    findings: list[Finding] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def errors(self) -> int:
        return sum(1 for f in self.findings if f.severity == "error")

    def by_check(self) -> dict[str, list[Finding]]:
        out: dict[str, list[Finding]] = defaultdict(list)
        for f in self.findings:
            out[f.check].append(f)
        return out


def _age_days(stamp: str, today: dt.date) -> int | None:
    try:
        return (today - dt.datetime.fromisoformat(stamp).date()).days
    except ValueError:
        return None


def _provenanced(vault) -> set[str]:
    """Notes that came from a session or a file: in the audit of an extraction run."""
    out: set[str] = set()
    folder = vault.state_dir / "audit"
    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            out.update(entry.get("created", []))
            out.update(c.get("uri") for c in entry.get("changed", []) if isinstance(c, dict))
    return out


def lint(vault, today: dt.date | None = None) -> LintReport:
    today = today or dt.date.today()
    report = LintReport()
    add = report.findings.append
    catalog = vault.sync_catalog()
    # Structure and link integrity: the vault's own consistency checks.
    for p in vault.check():
        check = {"malformed_note": "structure", "malformed_sidecar": "structure", "malformed_session": "structure",
                 "failed_journal": "structure"}.get(p.code, "links")
        add(Finding(check, p.severity, p.uri, f"{p.code}: {p.message}"))
    notes = {u: e for u, e in catalog.items() if not e.error}
    for uri, entry in notes.items():
        if not entry.title or entry.title == uri:
            add(Finding("structure", "error", uri, "missing title"))
    links = [l for l in vault.all_links() if not l.legacy]
    degree: Counter = Counter()
    for l in links:
        degree[l.from_uri] += 1
        degree[l.to_uri] += 1
        if l.from_uri == l.to_uri:
            add(Finding("links", "error", l.from_uri, f"{l.id}: links to itself"))
        if l.weight < LOW_WEIGHT:
            add(Finding("low_weight", "info", l.from_uri, f"{l.link_type.value} link weight {l.weight:.2f} (< {LOW_WEIGHT})", l.to_uri))
        if l.link_type.value == "contradicts":
            add(Finding("contradictions", "warning", l.from_uri, l.description or "contradicts", l.to_uri))
    for l in vault.all_links():
        if l.legacy:
            degree[l.from_uri] += 1
            degree[l.to_uri] += 1
    provenance = _provenanced(vault)
    derived = {l.from_uri for l in links if l.link_type.value == "derived_from"}
    for uri, entry in notes.items():
        if entry.memory_type == "report":
            try:
                sources = vault.read_note(uri).fields.get("source_uris") or []
            except MemlinkError:
                sources = []
            if not sources and uri not in derived:
                add(Finding("provenance", "warning", uri, "report without sources"))
        elif entry.memory_type not in ("profile", "source") and uri not in provenance and uri not in derived:
            add(Finding("provenance", "info", uri, "no source session or file recorded"))
        if entry.memory_type == "report_candidate":
            try:
                status = vault.read_note(uri).fields.get("status") or "pending"
            except MemlinkError:
                status = "pending"
            if status == "pending":
                add(Finding("open_questions", "info", uri, f"open research question: {entry.title}"))
        age = _age_days(entry.updated_at, today)
        if age is not None:
            level = "fresh" if age < FRESH_DAYS else "aging" if age < STALE_DAYS else "stale"
            if level != "fresh":
                add(Finding("freshness", "warning" if level == "stale" else "info", uri, f"{level}: updated {age} days ago"))
        if degree[uri] == 0 and entry.memory_type != "profile":
            add(Finding("orphans", "warning", uri, "no links in or out"))
    report.findings.sort(key=lambda f: (SEVERITY_ORDER[f.severity], f.check, f.uri))
    report.counts = dict(Counter(f.check for f in report.findings))
    return report


def fix(vault) -> list[str]:
    """Safe repairs only: restore the missing side of a one-sided link whose two notes
    exist; remove links (both sides) to or from notes that no longer exist."""
    done: list[str] = []
    catalog = vault.sync_catalog()
    exists = {u for u, e in catalog.items() if not e.error}
    with vault.writing():
        ops: list = []
        seen: dict[tuple, object] = {}
        for folder in vault.sidecar_folders():
            try:
                car = vault.sidecars.read(vault.root, folder)
            except MemlinkError:
                continue  # a broken sidecar is reported by lint, not guessed at
            for l in car.entries:
                seen[(l.direction, l.id)] = (folder, l)
            for l in car.legacy_links(folder):
                if l.from_uri.endswith(".md") and l.to_uri not in exists:
                    ops.append(RemoveLegacy(folder=folder, entry_id=l.id, from_uri=l.from_uri, to_uri=l.to_uri))
                    done.append(f"removed legacy link {l.from_uri} -> {l.to_uri} (target missing)")
        for (direction, link_id), (folder, l) in seen.items():
            if l.from_uri not in exists or l.to_uri not in exists:
                ops.append(RemoveLink(folder=folder, id=l.id, direction=direction))
                done.append(f"removed {direction} entry {l.id} {l.from_uri} -> {l.to_uri} (a note is missing)")
                continue
            twin_dir = "backlinks" if direction == "links" else "links"
            if (twin_dir, link_id) not in seen:
                twin_folder = uri_dir(l.to_uri if direction == "links" else l.from_uri)
                ops.append(PutLink(folder=twin_folder, link=l.as_direction(twin_dir)))
                done.append(f"restored the {twin_dir} side of {l.id} {l.from_uri} -> {l.to_uri}")
        if ops:
            vault._commit(ops, links_changed=True)
    return done


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


def write_dashboards(vault, report: LintReport, today: dt.date | None = None) -> list[str]:
    """Regenerate `dashboards/*.md` (never hand-edited) and `dashboards/digest.json`."""
    today = today or dt.date.today()
    folder: Path = vault.root / "dashboards"
    catalog = vault.catalog()
    titles = {u: e.title for u, e in catalog.items()}
    by_check = report.by_check()
    written = []
    header = f"<!-- generated by `memlink lint` on {today.isoformat()}; edits are overwritten -->\n"
    for name, (title, checks) in DASHBOARDS.items():
        rows = [f for c in checks for f in by_check.get(c, [])]
        lines = [header, f"# {title}\n", f"{len(rows)} item(s).\n"]
        for f in rows:
            other = f" ↔ {titles.get(f.other, f.other)} (`{f.other}`)" if f.other else ""
            lines.append(f"- **{f.severity}** {titles.get(f.uri, f.uri)} (`{f.uri}`){other} — {f.message}")
        atomic_write_text(folder / f"{name}.md", "\n".join(lines) + "\n")
        written.append(f"dashboards/{name}.md")
    # Relationship summary: link types and the most linked notes.
    links = list(vault.all_links())
    types = Counter(l.link_type.value for l in links)
    degree = Counter([l.from_uri for l in links] + [l.to_uri for l in links])
    lines = [header, "# Relationships\n", f"{len(links)} links.\n", "| link type | count |", "|---|---|"]
    lines += [f"| {t} | {n} |" for t, n in types.most_common()]
    lines += ["", "Most linked notes:", ""] + [f"- {titles.get(u, u)} (`{u}`): {n}" for u, n in degree.most_common(10)]
    atomic_write_text(folder / "relationships.md", "\n".join(lines) + "\n")
    written.append("dashboards/relationships.md")
    per_type = Counter(e.memory_type for e in catalog.values() if not e.error)
    digest = {
        "generated": today.isoformat(),
        "notes": sum(per_type.values()),
        "per_type": dict(per_type),
        "links": len(links),
        "link_types": dict(types),
        "top_linked": [{"uri": u, "title": titles.get(u, u), "degree": n} for u, n in degree.most_common(10)],
        "health": {"errors": report.errors, "checks": report.counts},
        "contradictions": [{"a": f.uri, "b": f.other, "why": f.message} for f in by_check.get("contradictions", [])],
        "open_questions": [titles.get(f.uri, f.uri) for f in by_check.get("open_questions", [])],
    }
    atomic_write_text(folder / "digest.json", json.dumps(digest, ensure_ascii=False, indent=2) + "\n")
    written.append("dashboards/digest.json")
    return written
