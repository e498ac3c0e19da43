"""resolve_operations + MemoryUpdater.apply_operations (docs/DESIGN.md, "Units of work"): page ids become
URIs, fields merge per merge_op, notes are written, all links land on both ends in one
transaction, references already in the text become links (auto-link), line ranges of
links into edited notes follow their text (exact, then the LLM matcher if any, else the
link goes on both sides). Every run appends an audit entry. Re-running the same input
changes nothing."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from ..errors import MemlinkError
from ..model.merge import is_edit
from ..model.text import counted
from ..retrieve.names import NameIndex
from ..storage.writes import PersonLinks, person_links
from .autolink import find_references, reference_link
from .context import ExtractContext
from .operations import item_fields, links_of

if TYPE_CHECKING:
    from ..model.links import StoredLink
    from ..storage.transaction import Transaction
    from ..storage.vault import Vault


@dataclass
class NoteOp:
    page_id: int
    memory_type: str
    fields: dict
    uri: str | None  # existing page; None = compute from the fields


@dataclass
class Resolved:
    notes: list[NoteOp] = field(default_factory=list)
    links: list[tuple[int, int, dict]] = field(default_factory=list)  # (f, t, link spec)


@dataclass
class RunReport:
    provider: str
    created: list[str] = field(default_factory=list)
    changed: list[dict] = field(default_factory=list)  # {uri, before, after}
    unchanged: list[str] = field(default_factory=list)
    links_added: list[dict] = field(default_factory=list)
    links_kept: int = 0
    unresolved: list[str] = field(default_factory=list)  # "file:line: reference" to notes that do not exist
    missing_files: list[str] = field(default_factory=list)  # "file:line: reference" to files (an image, a PDF) not there
    ambiguous: list[str] = field(default_factory=list)  # "file:line: reference (ambiguous: …)": to several notes
    problems: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (f"{counted(len(self.created), 'note')} created, {len(self.changed)} changed, "
                f"{counted(len(self.links_added), 'link')} added"
                + (f", {counted(len(self.unresolved), 'reference')} to missing notes" if self.unresolved else "")
                + (f", {counted(len(self.missing_files), 'reference')} to missing files" if self.missing_files else "")
                + (f", {len(self.ambiguous)} ambiguous" if self.ambiguous else ""))

    def to_json(self) -> dict[str, Any]:
        """The report as JSON data (a copy: the caller may keep or change it)."""
        return asdict(self)


class AuditEntry(BaseModel):
    """One line of `.memlink/audit/<day>.jsonl`: when, from what, and the run's report.
    Lint reads ``created`` and ``changed`` to tell notes with a provenance."""

    model_config = ConfigDict(extra="forbid")

    # The record's id: a journal replay appends a record once (docs/DESIGN.md, "Units of
    # work"). Lines written before ids existed have none.
    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    at: str
    source: str
    provider: str
    created: list[str]
    changed: list[dict[str, Any]]
    unchanged: list[str]
    links_added: list[dict[str, Any]]
    links_kept: int
    unresolved: list[str]
    missing_files: list[str] = []  # (lines written before it was kept have none)
    ambiguous: list[str] = []  # (lines written before it was kept have none)
    problems: list[str]


def resolve_operations(ops: BaseModel, ctx: ExtractContext) -> Resolved:
    out = Resolved()
    for name in type(ops).model_fields:
        if name == "links":
            continue
        for item in getattr(ops, name):
            uri = ctx.notes[item.page_id].uri if item.page_id < 100 else None
            out.notes.append(NoteOp(item.page_id, name, item_fields(item), uri))
    for link in links_of(ops):
        spec = {"weight": link.weight, "t_field": link.t_field, "t_line_ranges": link.t_line_ranges,
                "match_text": link.match_text, "description": link.description}
        out.links.append((link.f, link.t, {"link_type": link.link_type.value, **spec}))
    return out


def target_uri(vault: Vault, op: NoteOp) -> str:
    """The note an operation writes: the page it names, else the path its fields give."""
    if op.uri is not None:
        return op.uri
    schema = vault.schema(op.memory_type)
    return schema.note_uri(schema.validate_fields({k: v for k, v in op.fields.items() if not is_edit(v)}, complete=False))


class MemoryUpdater:
    def __init__(self, vault: Vault):
        self.vault = vault

    def apply_operations(self, resolved: Resolved, ctx: ExtractContext, provider: str, source: str,
                         deferred: list | None = None, autolink: bool = True) -> RunReport:
        """Write the notes, then their links — or, given ``deferred``, add the link specs
        to it for the caller to write. ``autolink=False`` leaves references in the text
        unlinked (a dream report quotes its sources' paths; its derived_from links say
        what they are)."""
        v = self.vault
        report = RunReport(provider)
        # One unit of work (docs/DESIGN.md, "Units of work"): the notes, their links and the
        # audit record land together or not at all.
        with v.transaction() as tx:
            uris: dict[int, str] = {pid: n.uri for pid, n in ctx.notes.items()}
            written = []
            for op in resolved.notes:
                before = None
                uri = target_uri(v, op)
                if v.exists(uri):
                    before = v.read_note(uri)
                note = v.write_note(op.memory_type, op.fields, uri=uri if before is not None else None,
                                    created_at=_stamp(ctx, op.page_id) if before is None else None)
                uris[op.page_id] = note.uri
                written.append(note)
                if before is None:
                    report.created.append(note.uri)
                elif before.fields != note.fields:
                    report.changed.append({"uri": note.uri, "before": before.fields, "after": note.fields})
                else:
                    report.unchanged.append(note.uri)
            specs = []
            for f, t, spec in resolved.links:
                spec = dict(spec)
                link_type = spec.pop("link_type")
                if uris[f] == uris[t]:
                    continue  # two page ids that became one note (an update of the same page)
                specs.append((uris[f], uris[t], link_type, spec))
            names = NameIndex.for_vault(v)
            for note in written if autolink else []:  # references already in the text (GBrain's auto-link)
                text = "\n".join(note.field_text(name) for name in note.fields)
                refs = find_references(v, note.uri, text, base=ctx.base, names=names)
                if ctx.source_page is None:  # an imported file's own references are reported by the import
                    for m in refs.missing:
                        (report.missing_files if m.file else report.unresolved).append(f"{note.uri}:{m.line}: {m.raw}")
                for ref in refs.found:
                    link_type, spec = reference_link(ref, note.fields.get("kind") or "", names.kind(ref.target), v.config.link_table())
                    specs.append((note.uri, ref.target, link_type, spec))
            if deferred is not None:
                deferred += specs  # the caller writes them, with others, in one transaction
            elif specs:
                try:
                    written_links = write_links(v, specs)
                except MemlinkError as exc:
                    report.problems.append(f"links not written: {exc}")
                    written_links = []
                for link, new in written_links:
                    if new:
                        report.links_added.append(link_entry(link))
                    else:
                        report.links_kept += 1
            self._audit(tx, report, source)
        return report

    def _audit(self, tx: Transaction, report: RunReport, source: str) -> None:
        """Stage the run's audit entry in the run's transaction (the journal appends it
        once, with the notes it names)."""
        entry = AuditEntry(at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), source=source,
                           **report.to_json())
        tx.append(f".memlink/audit/{dt.date.today().isoformat()}.jsonl", entry)


def write_links(vault: Vault, specs: list[tuple], persons: PersonLinks | None = None) -> list[tuple]:
    """Write link specs on both sides in one transaction, where the person has not had
    their say on the pair (``persons``, read here when not given); (link, whether it is
    new) each."""
    existing = {(l.from_uri, l.to_uri, l.link_type.value) for f in {s[0] for s in specs}
                for l in vault.links.of(f, "links")}
    out = []
    for link in vault.link_many(specs, persons=persons if persons is not None else person_links(vault)):
        key = (link.from_uri, link.to_uri, link.link_type.value)
        out.append((link, key not in existing))
        existing.add(key)
    return out


def link_entry(link: StoredLink) -> dict:
    return {"from": link.from_uri, "to": link.to_uri, "type": link.link_type.value, "weight": link.weight,
            "match_text": link.match_text, "relation": link.description}


def _stamp(ctx: ExtractContext, page_id: int) -> str:
    """A new note's created_at: noon of the day its source is from (the day its line was
    said, in a session of many days), but never later than now (a note committed this
    morning was not created this afternoon, and its updated_at, now, must not come before
    it). A dream's report is from now: it is written, not remembered."""
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    if ctx.kind == "dream":
        return now.isoformat()
    noon = dt.datetime.combine(ctx.said_on.get(page_id, ctx.when), dt.time(12, 0), tzinfo=dt.UTC)
    return min(noon, now).isoformat()
