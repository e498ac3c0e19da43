"""The dream's output contract and its checks (docs/DESIGN.md, *Dream*).

One answer per topic: ``{"report": [...], "links": [...]}``. ``report`` holds zero, one or
several reports, each under a page id (1–99: re-research of an existing report page,
100+: a new report); ``links`` are WikiLinks among the pages. Every key is required and
nothing extra is allowed, as in extraction (engine/extract/operations.py). The checks
add what the schema cannot say; an answer that fails any of them is rejected whole."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from ..errors import MemlinkError
from ..extract.loop import check_operations
from ..extract.updater import NoteOp, Resolved, resolve_operations
from ..model.links import LinkType, WikiLink
from .topics import NOT_EVIDENCE

if TYPE_CHECKING:
    from ..extract.context import ExtractContext
    from ..model.linktypes import Role
    from ..storage.vault import Vault

# The links a dream may propose, by role (docs/DESIGN.md, "Link types"): a report's
# sources, and what it finds between notes.
DREAM_LINK_ROLES: tuple[Role, ...] = ("provenance", "conflict", "supersedes")


def dream_link_types(vault: Vault) -> tuple[LinkType, ...]:
    table = vault.config.link_table()
    return tuple(table.role(role) for role in DREAM_LINK_ROLES)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ReportItem(_Strict):
    page_id: int = Field(ge=1)
    question: str
    answer: str
    conflicts: list[str]


class DreamOperations(_Strict):
    report: list[ReportItem]
    links: list[WikiLink]


def check_dream_operations(ops: DreamOperations, ctx: ExtractContext, vault: Vault) -> None:
    """Raise ValueError naming the first thing wrong. Extraction's checks (page ids exist,
    new ids unique and 100+, an update keeps the page's type, link ends exist, t_field is
    a field of the target, no self-links), then the dream's own: only the dream's link
    types; derived_from goes from a report of this answer to a note that is not a report;
    contradicts/evolved_from join two existing notes that are not reports; report fields
    fit the report schema and two new reports never share a file."""
    check_operations(ops, ctx, vault.types)
    reports = {item.page_id for item in ops.report}
    schema = vault.schema("report")
    new_uris: dict[str, int] = {}
    for item in ops.report:
        fields = {"answer": item.answer, "conflicts": item.conflicts}
        try:
            if item.page_id >= 100:
                fields["question"] = item.question
                uri = schema.note_uri(schema.validate_fields(fields, complete=True))
                if uri in new_uris:
                    raise ValueError(f"reports {new_uris[uri]} and {item.page_id} ask the same question ({uri})")
                new_uris[uri] = item.page_id
            else:
                schema.validate_fields(fields, complete=False)
        except MemlinkError as exc:
            raise ValueError(f"report {item.page_id}: {exc}") from None
    allowed_types = dream_link_types(vault)
    provenance = vault.config.link_table().role("provenance")
    for i, link in enumerate(ops.links):
        if link.link_type not in allowed_types:
            allowed = ", ".join(t.value for t in allowed_types)
            raise ValueError(f"links[{i}] is {link.link_type.value}; a dream proposes only {allowed}")
        target = ctx.notes.get(link.t)
        if target is None or target.memory_type in NOT_EVIDENCE:
            raise ValueError(f"links[{i}] points at page {link.t}, which is not an existing note (reports are never evidence)")
        if link.link_type is provenance:
            if link.f not in reports:
                raise ValueError(f"links[{i}] is derived_from from page {link.f}, which is not a report of this answer")
        else:
            source = ctx.notes.get(link.f)
            if source is None or source.memory_type in NOT_EVIDENCE:
                raise ValueError(f"links[{i}] ({link.link_type.value}) starts at page {link.f}, "
                                 "which is not an existing note (reports are never evidence)")


def resolve_dream(ops: DreamOperations, ctx: ExtractContext, provenance: LinkType) -> Resolved:
    """Page ids become URIs through extraction's resolve; each report's ``source_uris``
    are the notes it links derived_from. Re-research keeps the report's question (its
    file name comes from it)."""
    resolved = resolve_operations(ops, ctx)
    sources: dict[int, list[str]] = {}
    for link in ops.links:
        if link.link_type is provenance:
            sources.setdefault(link.f, []).append(ctx.notes[link.t].uri)
    notes = []
    for op in resolved.notes:
        fields = {**op.fields, "source_uris": sources.get(op.page_id, [])}
        if op.uri is not None:
            fields.pop("question", None)
        notes.append(NoteOp(op.page_id, op.memory_type, fields, op.uri))
    return Resolved(notes=notes, links=resolved.links)
