"""Every check of a vault, registered in one list: each is a small function that reads
the vault through a shared ``CheckContext`` and yields ``Finding``s.

``integrity`` checks find a broken vault (files that do not parse, one-sided or dangling
links, a journal that could not be replayed); they are the only ones that report errors,
and ``memlink check`` (``Vault.check``) runs just them. Lint runs them all. See
docs/DESIGN.md, "Checks".
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel

from .catalog import CatalogEntry
from .errors import LinkError, MemlinkError, SidecarError
from .jsonl import read_jsonl
from .lineranges import check_ranges
from .links import Direction, Sidecar, StoredLink
from .linktypes import LinkTypeTable
from .transaction import sidecar_rel
from .uris import uri_dir

if TYPE_CHECKING:
    from .notes import Note
    from .vault import Vault

Severity = Literal["error", "warning", "info"]
FRESH_DAYS, STALE_DAYS = 30, 90
LOW_WEIGHT = 0.5


class Finding(BaseModel):
    """One thing a check found. ``check`` groups findings for people (the lint pane, the
    dashboards); ``code`` names an integrity problem for tools (empty for hygiene
    findings, which their check names well enough)."""

    check: str
    severity: Severity
    uri: str
    message: str
    other: str | None = None  # the note on the other side (links, contradictions)
    code: str = ""

    @property
    def text(self) -> str:
        """The message as lint shows it: with its code when it has one."""
        return f"{self.code}: {self.message}" if self.code else self.message


class CheckContext:
    """What several checks read, read once per run."""

    def __init__(self, vault: Vault, today: dt.date) -> None:
        self.vault = vault
        self.today = today
        self._notes: dict[str, Note | None] = {}

    @cached_property
    def catalog(self) -> dict[str, CatalogEntry]:
        return self.vault.sync_catalog()

    @cached_property
    def good(self) -> dict[str, CatalogEntry]:
        """Catalog entries of notes that parse."""
        return {u: e for u, e in self.catalog.items() if not e.error}

    @cached_property
    def sidecars(self) -> tuple[dict[str, Sidecar], dict[str, str]]:
        """Parsed sidecars by folder, and the error of each one that does not parse."""
        cars: dict[str, Sidecar] = {}
        broken: dict[str, str] = {}
        for folder in self.vault.sidecar_folders():
            try:
                cars[folder] = self.vault.linkstore.sidecar(folder)
            except SidecarError as exc:
                broken[folder] = str(exc)
        return cars, broken

    @cached_property
    def table(self) -> LinkTypeTable:
        """The vault's link types (docs/DESIGN.md, "Link types"): checks ask by role."""
        return self.vault.config.link_table()

    @cached_property
    def links(self) -> list[StoredLink]:
        """Every outgoing link (legacy entries included), each two-sided link once."""
        return list(self.vault.all_links())

    def note(self, uri: str) -> Note | None:
        """A note that exists and parses (None otherwise), read once."""
        if uri not in self._notes:
            entry = self.catalog.get(uri)
            self._notes[uri] = None if entry is None or entry.error else self.vault.read_note(uri)
        return self._notes[uri]


@dataclass(frozen=True)
class Check:
    name: str
    run: Callable[[CheckContext], Iterable[Finding]]
    integrity: bool


CHECKS: list[Check] = []  # in the order they run; `memlink check` output follows it


def register(integrity: bool = False) -> Callable[[Callable[[CheckContext], Iterable[Finding]]], Callable[[CheckContext], Iterable[Finding]]]:
    def add(fn: Callable[[CheckContext], Iterable[Finding]]) -> Callable[[CheckContext], Iterable[Finding]]:
        CHECKS.append(Check(fn.__name__, fn, integrity))
        return fn
    return add


def run_checks(vault: Vault, *, integrity_only: bool = False, today: dt.date | None = None) -> list[Finding]:
    """Run the registered checks (only the integrity ones with ``integrity_only``) in
    registration order; one context is shared, so each file is read once."""
    ctx = CheckContext(vault, today or dt.date.today())
    out: list[Finding] = []
    for check in CHECKS:
        if check.integrity or not integrity_only:
            out += check.run(ctx)
    return out


def _problem(check: str, severity: Severity, code: str, uri: str, message: str) -> Finding:
    return Finding(check=check, severity=severity, uri=uri, message=message, code=code)


# -- integrity: structure ----------------------------------------------------------------------
@register(integrity=True)
def failed_journals(ctx: CheckContext) -> Iterator[Finding]:
    for path in ctx.vault.journal.failed():
        yield _problem("structure", "error", "failed_journal", f".memlink/journal/{path.name}",
                       "a change that could not be completed; inspect it, then delete the file")


@register(integrity=True)
def malformed_notes(ctx: CheckContext) -> Iterator[Finding]:
    for entry in ctx.catalog.values():
        if entry.error:
            yield _problem("structure", "error", "malformed_note", entry.uri, entry.error)


@register(integrity=True)
def malformed_sidecars(ctx: CheckContext) -> Iterator[Finding]:
    """A sidecar that cannot be read, once; each bad entry of one that can, with its
    index (and id) and cause. Readers skip both (docs/DESIGN.md, "Checks")."""
    for folder, error in ctx.sidecars[1].items():
        yield _problem("structure", "error", "malformed_sidecar", sidecar_rel(folder), error.removeprefix(f"{sidecar_rel(folder)}: "))
    for folder, car in ctx.sidecars[0].items():
        for bad in car.rejected:
            yield _problem("structure", "error", "malformed_sidecar", sidecar_rel(folder),
                           f"{bad.label}: {bad.cause}; readers skip it, `memlink check --fix` moves it aside")


# -- integrity: links --------------------------------------------------------------------------
@register(integrity=True)
def link_records(ctx: CheckContext) -> Iterator[Finding]:
    """Every link has both sides, identical, in the right folders, pointing at notes that
    exist, with valid fields and line ranges; match_text that no longer occurs is a warning."""
    cars, broken = ctx.sidecars
    index = {(f, l.direction, l.id): l for f, car in cars.items() for l in car.entries}
    rejected = {(f, r.entry["id"]) for f, car in cars.items() for r in car.rejected
                if isinstance(r.entry, dict) and isinstance(r.entry.get("id"), str)}
    hidden: Counter[str] = Counter()  # sides whose twin sits in a sidecar that cannot be read
    for (folder, direction, _id), link in index.items():
        home = uri_dir(link.from_uri if direction == "links" else link.to_uri)
        where = link.from_uri if direction == "links" else link.to_uri
        if home != folder:
            yield _problem("links", "error", "misplaced_link", where,
                           f"{link.id} ({direction}) sits in {folder or '.'}/ but belongs in {home or '.'}/")
            continue
        other_dir: Direction = "backlinks" if direction == "links" else "links"
        other_folder = uri_dir(link.to_uri if direction == "links" else link.from_uri)
        twin = index.get((other_folder, other_dir, link.id))
        if twin is None and other_folder in broken:
            hidden[other_folder] += 1  # reported once per file below, not once per link
        elif twin is None:
            why = f" (it is a bad entry in {sidecar_rel(other_folder)})" if (other_folder, link.id) in rejected else ""
            yield _problem("links", "error", "one_sided_link", where,
                           f"{link.id} {link.from_uri} -> {link.to_uri} has no {other_dir} entry{why}")
        elif direction == "links" and not twin.same_record(link):
            yield _problem("links", "error", "mismatched_link", where, f"{link.id}: the two sides differ")
        if direction != "links":
            continue
        src, dst = ctx.note(link.from_uri), ctx.note(link.to_uri)
        for end, n in (("from", src), ("to", dst)):
            uri = link.from_uri if end == "from" else link.to_uri
            if n is None and uri not in ctx.catalog:  # a note that does not parse is malformed_note
                yield _problem("links", "error", "dangling_link", link.from_uri, f"{link.id}: {end} note {uri} does not exist")
        if dst is not None:
            schema = ctx.vault.schema(dst.memory_type)
            if link.t_field not in schema.field_names:
                yield _problem("links", "error", "bad_t_field", link.from_uri,
                               f"{link.id}: {link.to_uri} has no field {link.t_field!r}")
            elif link.t_line_ranges:
                try:
                    check_ranges(link.t_line_ranges, dst.field_text(link.t_field))
                except LinkError as exc:
                    yield _problem("links", "warning", "bad_line_range", link.from_uri, f"{link.id}: {exc}")
        if src is not None and link.match_text and link.match_text not in src.body:
            yield _problem("links", "warning", "match_text_missing", link.from_uri,
                           f"{link.id}: {link.match_text!r} not in the note")
    for folder, count in sorted(hidden.items()):
        yield _problem("links", "warning", "twin_in_unreadable_sidecar", sidecar_rel(folder),
                       f"{count} link(s) have their other side in this unreadable file; `memlink check --fix` "
                       "moves it aside and restores those sides")


@register(integrity=True)
def session_logs(ctx: CheckContext) -> Iterator[Finding]:
    """Every session log parses as events (the one event model: engine.sessions.events)."""
    from .sessions.log import validate_session_file

    folder = ctx.vault.root / "sessions"
    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        uri = f"sessions/{path.name}"
        for problem in validate_session_file(path, uri):
            yield _problem("structure", "error", "malformed_session", uri, problem)


@register(integrity=True)
def legacy_links(ctx: CheckContext) -> Iterator[Finding]:
    for folder, car in ctx.sidecars[0].items():
        for link in car.legacy_links(folder):
            if ctx.note(link.to_uri) is None:
                yield _problem("links", "error", "dangling_link", link.from_uri,
                               f"legacy entry {link.id}: {link.to_uri} does not exist")


@register(integrity=True)
def titles(ctx: CheckContext) -> Iterator[Finding]:
    for uri, entry in ctx.good.items():
        if not entry.title or entry.title == uri:
            yield _problem("structure", "error", "missing_title", uri, "missing title")


@register(integrity=True)
def self_links(ctx: CheckContext) -> Iterator[Finding]:
    for l in ctx.links:
        if not l.legacy and l.from_uri == l.to_uri:
            yield _problem("links", "error", "self_link", l.from_uri, f"{l.id}: links to itself")


# -- hygiene: what a person reviewing the vault cares about -----------------------------------
@register(integrity=True)
def pending_extraction(ctx: CheckContext) -> Iterator[Finding]:
    """Imported files whose memories and links never landed (an ingest that failed or was
    killed: docs/DESIGN.md, "Units of work"). A warning, not an error: every link is whole
    and every note parses, and the next ingest, commit or dream finishes them by itself."""
    from .extract.batch import is_pending

    for entry in ctx.good.values():
        if entry.memory_type == "source":
            note = ctx.note(entry.uri)
            if note is not None and is_pending(note):
                yield _problem("provenance", "warning", "pending_extraction", entry.uri,
                               "imported, but its memories and links were not extracted yet; "
                               "the next `memlink ingest`, `commit` or `dream` finishes it")


@register()
def low_weight(ctx: CheckContext) -> Iterator[Finding]:
    for l in ctx.links:
        if not l.legacy and l.weight < LOW_WEIGHT:
            yield Finding(check="low_weight", severity="info", uri=l.from_uri, other=l.to_uri,
                          message=f"{l.link_type.value} link weight {l.weight:.2f} (< {LOW_WEIGHT})")


@register()
def unknown_link_types(ctx: CheckContext) -> Iterator[Finding]:
    """A link whose type the vault does not declare (a memlink.yaml entry removed, or a
    sidecar written by another tool): it reads and can be removed, but search does not
    follow it."""
    for l in ctx.links:
        if not l.legacy and l.link_type not in ctx.table:
            yield Finding(check="links", severity="warning", uri=l.from_uri, other=l.to_uri, code="unknown_link_type",
                          message=f"{l.id}: link type {l.link_type.value!r} is not declared (memlink.yaml link_types)")


@register()
def contradictions(ctx: CheckContext) -> Iterator[Finding]:
    for l in ctx.links:
        if not l.legacy and l.link_type is ctx.table.role("conflict"):
            yield Finding(check="contradictions", severity="warning", uri=l.from_uri, other=l.to_uri,
                          message=l.description or "contradicts")


def provenanced(vault: Vault) -> set[str]:
    """Notes that came from a session or a file: in the audit of an extraction run."""
    out: set[str] = set()
    folder = vault.state_dir / "audit"
    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        for entry in read_jsonl(path, strict=False):  # a lost line only costs a hint
            created = entry.get("created", [])
            changed = entry.get("changed", [])
            if isinstance(created, list):
                out.update(u for u in created if isinstance(u, str))
            if isinstance(changed, list):
                out.update(c["uri"] for c in changed if isinstance(c, dict) and isinstance(c.get("uri"), str))
    return out


@register()
def provenance(ctx: CheckContext) -> Iterator[Finding]:
    recorded = provenanced(ctx.vault)
    provenance_type = ctx.table.role("provenance")
    derived = {l.from_uri for l in ctx.links if not l.legacy and l.link_type is provenance_type}
    for uri, entry in ctx.good.items():
        if entry.memory_type == "report":
            try:
                sources = ctx.vault.read_note(uri).fields.get("source_uris") or []
            except MemlinkError:
                sources = []
            if not sources and uri not in derived:
                yield Finding(check="provenance", severity="warning", uri=uri, message="report without sources")
        elif entry.memory_type not in ("profile", "source") and uri not in recorded and uri not in derived:
            yield Finding(check="provenance", severity="info", uri=uri, message="no source session or file recorded")


@register()
def open_questions(ctx: CheckContext) -> Iterator[Finding]:
    for uri, entry in ctx.good.items():
        if entry.memory_type != "report_candidate":
            continue
        try:
            status = ctx.vault.read_note(uri).fields.get("status") or "pending"
        except MemlinkError:
            status = "pending"
        if status == "pending":
            yield Finding(check="open_questions", severity="info", uri=uri, message=f"open research question: {entry.title}")


def _age_days(stamp: str, today: dt.date) -> int | None:
    try:
        return (today - dt.datetime.fromisoformat(stamp).date()).days
    except ValueError:
        return None


@register()
def freshness(ctx: CheckContext) -> Iterator[Finding]:
    for uri, entry in ctx.good.items():
        age = _age_days(entry.updated_at, ctx.today)
        if age is None:
            continue
        level = "fresh" if age < FRESH_DAYS else "aging" if age < STALE_DAYS else "stale"
        if level != "fresh":
            yield Finding(check="freshness", severity="warning" if level == "stale" else "info", uri=uri,
                          message=f"{level}: updated {age} days ago")


@register()
def orphans(ctx: CheckContext) -> Iterator[Finding]:
    degree: Counter[str] = Counter()
    for l in ctx.links:
        degree[l.from_uri] += 1
        degree[l.to_uri] += 1
    for uri, entry in ctx.good.items():
        if degree[uri] == 0 and entry.memory_type != "profile":
            yield Finding(check="orphans", severity="warning", uri=uri, message="no links in or out")
