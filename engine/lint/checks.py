"""Every check of a vault, registered in one list: each is a small function that reads
the vault through a shared ``CheckContext`` and yields ``Finding``s.

``integrity`` checks find a broken vault (files that do not parse, one-sided or dangling
links, a journal that could not be replayed); they are the only ones that report errors,
and ``memlink check`` (``check``) lists just theirs. Lint runs them all. See
docs/DESIGN.md, "Checks".
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Literal

from ..errors import LinkError, MemlinkError
from ..model.lineranges import check_ranges
from ..model.links import Direction, StoredLink
from ..model.linktypes import LinkTypeTable
from ..model.text import counted
from ..model.uris import uri_dir
from ..review.actions import ACTION_LOG
from ..sessions.log import SHOWN_LINES, validate_session_file
from ..storage.catalog import Catalog, CatalogEntry
from ..storage.jsonl import TORN, read_jsonl
from ..storage.linkindex import FolderLinks, home
from ..storage.sidecars import owner_of, sidecar_rel

if TYPE_CHECKING:
    from ..model.notes import Note
    from ..storage.vault import Vault

Severity = Literal["error", "warning", "info"]
FRESH_DAYS, STALE_DAYS = 30, 90
LOW_WEIGHT = 0.5


SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")


@dataclass(slots=True)
class Finding:
    """One thing a check found. ``check`` groups findings for people (the lint pane, the
    dashboards); ``code`` names an integrity problem for tools (empty for hygiene
    findings, which their check names well enough).

    A plain dataclass, checked here, not a pydantic model: a lint of 100k notes makes and
    keeps 300k of them, and a model instance costs 5–8 µs against under one (docs/DESIGN.md,
    "Checks"). Every finding is made by this module or read back from the memo, whose rows
    it checks."""

    check: str
    severity: Severity
    uri: str
    message: str
    other: str | None = None  # the note on the other side (links, contradictions)
    code: str = ""

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"finding {self.uri}: severity {self.severity!r} is not one of {', '.join(SEVERITIES)}")

    @property
    def text(self) -> str:
        """The message as lint shows it: with its code when it has one."""
        return f"{self.code}: {self.message}" if self.code else self.message

    def as_dict(self) -> dict[str, str | None]:
        return asdict(self)


class CheckContext:
    """What several checks read, read once per run. With a ``scope`` the run is
    incremental: checks that look at notes and their links (``Check.scoped``) make
    findings only about the notes in it (docs/DESIGN.md, "Checks")."""

    def __init__(self, vault: Vault, today: dt.date, scope: set[str] | None = None) -> None:
        self.vault = vault
        self.today = today
        self.scope = scope
        self._notes: dict[str, Note | None] = {}
        self._twins: dict[tuple[str, str, str], StoredLink | None] = {}

    @cached_property
    def catalog(self) -> Catalog:
        return self.vault.catalog

    @cached_property
    def good(self) -> dict[str, CatalogEntry]:
        """Entries of the notes that parse: every one, or in a scoped run those in scope."""
        if self.scope is None:
            return {e.uri: e for e in self.catalog.all()}
        return self.catalog.entries(self.scope)

    def in_scope(self) -> Iterator[tuple[str, CatalogEntry]]:
        """The good notes whose findings this run makes."""
        for uri in sorted(self.good):
            yield uri, self.good[uri]

    def good_entry(self, uri: str) -> CatalogEntry | None:
        """The entry of a note that exists and parses (None otherwise)."""
        if self.scope is None or uri in self.good:
            return self.good.get(uri)
        return self.catalog.get(uri)

    @cached_property
    def malformed(self) -> dict[str, str]:
        """Note files that do not parse, with why."""
        return self.catalog.errors()

    @cached_property
    def problems(self) -> dict[str, FolderLinks]:
        """The folders whose sidecar cannot be read, or holds bad entries."""
        return self.vault.links.problems()

    @cached_property
    def broken(self) -> dict[str, str]:
        return {f: p.broken for f, p in self.problems.items() if p.broken}

    @cached_property
    def sides(self) -> list[tuple[str, StoredLink]]:
        """Link records (both sides, legacy entries read as links) with the folder each
        sits in: every record, or in a scoped run those whose note is in scope."""
        links = self.vault.links
        if self.scope is None:
            return [(folder, link) for folder in links.folders() if folder not in self.broken
                    for link in links.folder(folder).links]
        return [(home(owner_of(l)), l) for ls in links.of_many(sorted(self.scope), as_staged=False).values() for l in ls]

    @cached_property
    def every_side(self) -> dict[tuple[str, str, str], StoredLink]:
        """Every record but legacy ones by (folder, direction, id), the first of each (a
        full run: one dict, looked up 600k times at 100k notes)."""
        out: dict[tuple[str, str, str], StoredLink] = {}
        for f, link in self.sides:
            if not link.legacy:
                out.setdefault((f, link.direction, link.id), link)
        return out

    def twin(self, folder: str, direction: Direction, link_id: str) -> StoredLink | None:
        """The record with this id and direction in a folder (a link's other side)."""
        key = (folder, direction, link_id)
        if self.scope is None:
            return self.every_side.get(key)
        if key not in self._twins:
            self._twins[key] = None if folder in self.broken else self.vault.links.record(folder, link_id, direction)
        return self._twins[key]

    @cached_property
    def table(self) -> LinkTypeTable:
        """The vault's link types (docs/DESIGN.md, "Link types"): checks ask by role."""
        return self.vault.config.link_table()

    @cached_property
    def links(self) -> list[StoredLink]:
        """Outgoing links (legacy entries included), each two-sided link once: every one,
        or in a scoped run those whose from-note is in scope."""
        return [link for _folder, link in self.sides if link.direction == "links"]

    @cached_property
    def recorded(self) -> set[str]:
        """Notes an extraction run's audit names (see ``provenanced``)."""
        return provenanced(self.vault)

    def exists(self, uri: str) -> bool:
        """A note that exists and parses (from the catalog: no file is read)."""
        return uri in self.catalog

    def note(self, uri: str) -> Note | None:
        """A note that exists and parses (None otherwise: also one that cannot be read now,
        which the unreadable-file check reports), read once."""
        if uri not in self._notes:
            try:
                self._notes[uri] = self.vault.read_note(uri) if uri in self.catalog else None
            except MemlinkError:
                self._notes[uri] = None
        return self._notes[uri]


@dataclass(frozen=True)
class Check:
    name: str
    run: Callable[[CheckContext], Iterable[Finding]]
    integrity: bool
    # Scoped: its findings are about one note each (``Finding.uri``) and depend only on
    # that note, its links and the notes at their other ends, so an incremental run
    # remakes them for the notes in scope and keeps the rest. Unscoped checks read the
    # catalog or a few files and always run whole.
    scoped: bool


CHECKS: list[Check] = []  # in the order they run (output is worst first: engine.lint.memo)


def register(integrity: bool = False, scoped: bool = False) -> Callable[[Callable[[CheckContext], Iterable[Finding]]], Callable[[CheckContext], Iterable[Finding]]]:
    def add(fn: Callable[[CheckContext], Iterable[Finding]]) -> Callable[[CheckContext], Iterable[Finding]]:
        CHECKS.append(Check(fn.__name__, fn, integrity, scoped))
        return fn
    return add


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
    for uri, error in ctx.malformed.items():  # (the finding names the note: its error does too, first)
        yield _problem("structure", "error", "malformed_note", uri, error.removeprefix(f"{uri}: "))


@register(integrity=True)
def unreadable_files(ctx: CheckContext) -> Iterator[Finding]:
    """Files named like a note or a sidecar that the walk does not read: a named pipe, a
    device, a socket, a name that is not UTF-8 (engine.storage.walk)."""
    for path, why in sorted(ctx.catalog.skipped().items()):
        yield _problem("structure", "error", "unreadable_file", path, why)


@register(integrity=True)
def malformed_sidecars(ctx: CheckContext) -> Iterator[Finding]:
    """A sidecar that cannot be read, once; each bad entry of one that can, with its
    index (and id) and cause. Readers skip both (docs/DESIGN.md, "Checks")."""
    for folder, error in ctx.broken.items():
        yield _problem("structure", "error", "malformed_sidecar", sidecar_rel(folder), error.removeprefix(f"{sidecar_rel(folder)}: "))
    for folder, problems in ctx.problems.items():
        for bad in problems.rejected:
            yield _problem("structure", "error", "malformed_sidecar", sidecar_rel(folder),
                           f"{bad.label}: {bad.cause}; readers skip it, `memlink check --fix` moves it aside")


# -- integrity: links --------------------------------------------------------------------------
@register(integrity=True, scoped=True)
def link_records(ctx: CheckContext) -> Iterator[Finding]:
    """Every link has both sides, identical, in the right folders, pointing at notes that
    exist, with valid fields and line ranges; match_text that no longer occurs is a warning.
    Each finding is about the note whose side is looked at; notes are read from their
    files only for a link with line ranges or an anchor."""
    rejected = {(f, r.entry["id"]) for f, p in ctx.problems.items() for r in p.rejected
                if isinstance(r.entry, dict) and isinstance(r.entry.get("id"), str)}
    fields: dict[str, set[str]] = {}  # memory type -> its field names
    # The loop runs for every record of the vault in a full run (600k at 100k notes): the
    # twins' dict and the catalog's are asked directly, and a folder is rpartition's.
    sides = ctx.every_side.get if ctx.scope is None else None
    good_entry = ctx.good.get if ctx.scope is None else ctx.good_entry
    known, malformed = ctx.catalog, ctx.malformed  # a note that does not parse still exists (malformed_note)
    for folder, link in ctx.sides:
        if link.legacy:
            continue
        direction = link.direction
        where = link.from_uri if direction == "links" else link.to_uri
        home = where.rpartition("/")[0]  # (uri_dir)
        if home != folder:
            yield _problem("links", "error", "misplaced_link", where,
                           f"{link.id} ({direction}) sits in {folder or '.'}/ but belongs in {home or '.'}/")
            continue
        other_dir: Direction = "backlinks" if direction == "links" else "links"
        other_folder = (link.to_uri if direction == "links" else link.from_uri).rpartition("/")[0]
        twin = sides((other_folder, other_dir, link.id)) if sides is not None else ctx.twin(other_folder, other_dir, link.id)
        if twin is None and other_folder in ctx.broken:
            pass  # counted once per file by twins_in_unreadable_sidecars
        elif twin is None:
            why = f" (it is a bad entry in {sidecar_rel(other_folder)})" if (other_folder, link.id) in rejected else ""
            yield _problem("links", "error", "one_sided_link", where,
                           f"{link.id} {link.from_uri} -> {link.to_uri} has no {other_dir} entry{why}")
        elif direction == "links" and not twin.same_record(link):
            differ = [k for k in ("from_uri", "to_uri", "link_type", "weight", "t_field", "t_line_ranges", "match_text",
                                  "description", "created_at") if getattr(twin, k) != getattr(link, k)]
            yield _problem("links", "error", "mismatched_link", where,
                           f"{link.id}: the two sides differ in {', '.join(differ) or 'their records'} "
                           f"({sidecar_rel(folder)} and {sidecar_rel(other_folder)}: edit one to match the other)")
        if direction != "links":
            continue
        for end, uri in (("from", link.from_uri), ("to", link.to_uri)):
            if uri not in known and uri not in malformed:
                yield _problem("links", "error", "dangling_link", link.from_uri,
                               f"{link.id}: {end} note {uri} does not exist (moved by hand? `memlink mv {uri} NEW` "
                               "relinks it; `check --fix` removes the link, and `memlink undo` puts it back)")
        dst = good_entry(link.to_uri)
        if dst is not None:
            names = fields.get(dst.memory_type)
            if names is None:
                names = fields[dst.memory_type] = set(ctx.vault.schema(dst.memory_type).field_names)
            if link.t_field not in names:
                yield _problem("links", "error", "bad_t_field", link.from_uri,
                               f"{link.id}: {link.to_uri} has no field {link.t_field!r}")
            elif link.t_line_ranges and (note := ctx.note(link.to_uri)) is not None:
                try:
                    check_ranges(link.t_line_ranges, note.field_text(link.t_field))
                except LinkError as exc:
                    yield _problem("links", "warning", "bad_line_range", link.from_uri, f"{link.id}: {exc}")
        if link.match_text and ctx.exists(link.from_uri):
            src = ctx.note(link.from_uri)
            if src is not None and link.match_text not in src.text:
                yield _problem("links", "warning", "match_text_missing", link.from_uri,
                               f"{link.id}: {link.match_text!r} not in the note")


@register(integrity=True)
def twins_in_unreadable_sidecars(ctx: CheckContext) -> Iterator[Finding]:
    """Links whose other side sits in a sidecar that cannot be read: once per file."""
    if not ctx.broken:
        return
    hidden: Counter[str] = Counter()
    links = ctx.vault.links
    for folder in links.folders():
        if folder in ctx.broken:
            continue
        for link in links.folder(folder).links:
            if link.legacy:
                continue
            other = uri_dir(link.to_uri if link.direction == "links" else link.from_uri)
            if other in ctx.broken:
                hidden[other] += 1
    for folder, count in sorted(hidden.items()):
        yield _problem("links", "warning", "twin_in_unreadable_sidecar", sidecar_rel(folder),
                       f"{counted(count, 'link')} have their other side in this unreadable file; `memlink check --fix` "
                       "moves it aside and restores those sides")


@register(integrity=True)
def session_logs(ctx: CheckContext) -> Iterator[Finding]:
    """Every line of every session log is an event (the one event model:
    engine.sessions.events). Each bad line is named; readers leave it out, and a torn
    last line is cut by `check --fix` or the next append."""
    folder = ctx.vault.root / "sessions"
    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        uri = f"sessions/{path.name}"
        problems = validate_session_file(path, uri)
        for problem in problems[:SHOWN_LINES]:
            if TORN in problem:
                yield _problem("structure", "error", "torn_session_line", uri, problem)
            else:
                yield _problem("structure", "error", "malformed_session", uri,
                               f"{problem}; readers leave this line out (memlink never rewrites a log: mend or delete "
                               "the line in a text editor)")
        if len(problems) > SHOWN_LINES:
            yield _problem("structure", "error", "malformed_session", uri,
                           f"and {len(problems) - SHOWN_LINES} more bad lines; readers leave them out")


@register(integrity=True, scoped=True)
def legacy_links(ctx: CheckContext) -> Iterator[Finding]:
    for link in ctx.links:
        if link.legacy and not ctx.exists(link.to_uri):
                yield _problem("links", "error", "dangling_link", link.from_uri,
                               f"legacy entry {link.id}: {link.to_uri} does not exist")


@register(integrity=True, scoped=True)
def titles(ctx: CheckContext) -> Iterator[Finding]:
    for uri, entry in ctx.in_scope():
        if not entry.title or entry.title == uri:
            yield _problem("structure", "error", "missing_title", uri, "missing title")


@register(integrity=True, scoped=True)
def self_links(ctx: CheckContext) -> Iterator[Finding]:
    for l in ctx.links:
        if not l.legacy and l.from_uri == l.to_uri:
            yield _problem("links", "error", "self_link", l.from_uri, f"{l.id}: links to itself")


# -- hygiene: what a person reviewing the vault cares about -----------------------------------
@register(integrity=True, scoped=True)
def pending_extraction(ctx: CheckContext) -> Iterator[Finding]:
    """Imported files whose memories and links never landed (an ingest that failed or was
    killed: docs/DESIGN.md, "Units of work"). A warning, not an error: every link is whole
    and every note parses, and the next ingest, commit or dream finishes them by itself."""
    for uri, entry in ctx.in_scope():  # pending is the catalog's: no file is read
        if entry.memory_type == "source" and entry.pending:
            yield _problem("provenance", "warning", "pending_extraction", uri,
                           "imported, but its memories and links were not extracted yet; "
                           "the next `memlink ingest`, `commit` or `dream` finishes it")


@register(scoped=True)
def low_weight(ctx: CheckContext) -> Iterator[Finding]:
    for l in ctx.links:
        if not l.legacy and l.weight < LOW_WEIGHT:
            yield Finding(check="low_weight", severity="info", uri=l.from_uri, other=l.to_uri,
                          message=f"{l.link_type.value} link weight {l.weight:.2f} (< {LOW_WEIGHT})")


@register(scoped=True)
def unknown_link_types(ctx: CheckContext) -> Iterator[Finding]:
    """A link whose type the vault does not declare (a memlink.yaml entry removed, or a
    sidecar written by another tool): it reads and can be removed, but search does not
    follow it."""
    for l in ctx.links:
        if not l.legacy and l.link_type not in ctx.table:
            yield Finding(check="links", severity="warning", uri=l.from_uri, other=l.to_uri, code="unknown_link_type",
                          message=f"{l.id}: link type {l.link_type.value!r} is not declared (memlink.yaml link_types)")


@register(scoped=True)
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
    for entry in read_jsonl(vault.root / ACTION_LOG, strict=False):  # (a note moved since keeps where it came from)
        a, b = entry.get("a"), entry.get("b")
        if entry.get("action") == "move" and isinstance(a, str) and a in out and isinstance(b, str):
            out.add(b)
    return out


@register(scoped=True)
def provenance(ctx: CheckContext) -> Iterator[Finding]:
    recorded = ctx.recorded
    provenance_type = ctx.table.role("provenance")
    derived = {l.from_uri for l in ctx.links if not l.legacy and l.link_type is provenance_type}
    for uri, entry in ctx.in_scope():
        if entry.memory_type == "report":
            try:
                sources = ctx.vault.read_note(uri).fields.get("source_uris") or []
            except MemlinkError:
                sources = []
            if not sources and uri not in derived:
                yield Finding(check="provenance", severity="warning", uri=uri, message="report without sources")
        elif entry.memory_type not in ("profile", "source") and uri not in recorded and uri not in derived:
            yield Finding(check="provenance", severity="info", uri=uri, message="no source session or file recorded")


@register(scoped=True)
def open_questions(ctx: CheckContext) -> Iterator[Finding]:
    for uri, entry in ctx.in_scope():
        if entry.memory_type != "report_candidate":
            continue
        try:
            status = ctx.vault.read_note(uri).fields.get("status") or "pending"
        except MemlinkError:
            status = "pending"
        if status in ("pending", "nothing_known_yet"):
            yield Finding(check="open_questions", severity="info", uri=uri, message=f"open research question: {entry.title}")
        elif status == "answered_partly":  # a report of what the vault holds, no model asked: still open
            yield Finding(check="open_questions", severity="info", uri=uri,
                          message=f"open research question (a report gathers what the vault holds): {entry.title}")


def _age_days(stamp: str, today: dt.date) -> int | None:
    try:
        return (today - dt.datetime.fromisoformat(stamp).date()).days
    except ValueError:
        return None


@register(scoped=True)  # a scoped run is on the day of the memo (it keeps the day: engine.lint.memo)
def freshness(ctx: CheckContext) -> Iterator[Finding]:
    """Notes not updated for a while, of the types that can go stale (a memory type's
    ``goes_stale``: a past event or an imported file never does)."""
    lasting = {t.memory_type for t in ctx.vault.types if not t.goes_stale}
    for uri, entry in ctx.in_scope():
        if entry.memory_type in lasting:
            continue
        age = _age_days(entry.updated_at, ctx.today)
        if age is None:
            continue
        level = "fresh" if age < FRESH_DAYS else "aging" if age < STALE_DAYS else "stale"
        if level != "fresh":
            yield Finding(check="freshness", severity="warning" if level == "stale" else "info", uri=uri,
                          message=f"{level}: updated {age} days ago")


@register(scoped=True)
def orphans(ctx: CheckContext) -> Iterator[Finding]:
    degree: Counter[str] = Counter()
    for _folder, l in ctx.sides:  # each link is counted at both ends, from its two sides
        degree[l.to_uri if l.direction == "backlinks" else l.from_uri] += 1
        if l.legacy:
            degree[l.to_uri] += 1  # a legacy entry has one side only
    targets = ctx.vault.links.legacy_targets(ctx.good) if ctx.scope is not None else set()
    for uri, entry in ctx.in_scope():
        if degree[uri] == 0 and uri not in targets and entry.memory_type != "profile":
            yield Finding(check="orphans", severity="warning", uri=uri, message="no links in or out")
