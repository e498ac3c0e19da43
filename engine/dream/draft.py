"""One topic's answer (docs/DESIGN.md, *Dream*): the context, then the operations from the
LLM (one structured call, checked strictly, quarantined when it does not fit) or from the
rules (a deterministic report). Both give DreamOperations, so one apply path serves
both."""

from __future__ import annotations

import datetime as dt
from importlib import resources
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import MemlinkError
from ..extract.context import ExtractContext
from ..extract.loop import ExtractionRejected, quarantine
from ..extract.pageids import FIRST_NEW
from ..extract.updater import Resolved, target_uri
from ..index import SearchIndex
from ..llm import LLMInvalidOutput
from ..llm.fence import RULE, one_line, quote
from ..model.lineranges import parse_ranges
from ..model.links import StoredLink, WikiLink
from ..model.notes import serialize_note
from ..model.templates import render_template
from ..model.text import question_tokens, tokenize
from ..retrieve.search import query_coverage
from ..storage.transaction import Transaction, text_hash
from .operations import DreamOperations, ReportItem, check_dream_operations
from .topics import NOT_EVIDENCE, Topic

if TYPE_CHECKING:
    from ..llm import Provider
    from ..model.notes import Note
    from ..storage.vault import Vault

MAX_TOPIC_NOTES = 90  # page ids 1–99 hold the topic's notes, then the reports beside them
MAX_RELATED_REPORTS = 5


class ReportDraft(BaseModel):
    """The rules' report for one topic."""

    model_config = ConfigDict(extra="forbid")

    answer: str
    conflicts: list[str]


# -- the context --------------------------------------------------------------------------------
def dream_context(vault: Vault, topic: Topic) -> ExtractContext:
    """The topic's notes under page ids 1…, the report it re-researches and existing
    reports drawn from its notes after them, and the links among all of these."""
    ctx = ExtractContext(kind="dream", text=topic.question, when=dt.date.today())
    for uri in topic.notes[:MAX_TOPIC_NOTES]:
        _add(vault, ctx, uri)
    if topic.report:
        _add(vault, ctx, topic.report)
    catalog = vault.catalog
    provenance = vault.config.link_table().role("provenance")
    related = sorted({link.from_uri for uri in topic.notes[:MAX_TOPIC_NOTES] for link in vault.links.of(uri, "backlinks")
                      if link.link_type is provenance and link.from_uri != topic.report
                      and catalog.memory_type(link.from_uri) == "report"})
    for uri in related[:MAX_RELATED_REPORTS]:
        _add(vault, ctx, uri)
    ctx.collect_links(vault)
    return ctx


def _add(vault: Vault, ctx: ExtractContext, uri: str) -> None:
    if ctx.page_of(uri) is not None or not vault.exists(uri):
        return
    try:
        ctx.add(vault.read_note(uri))
    except MemlinkError:
        pass  # a note that does not parse is for `memlink check` to report


def dream_messages(ctx: ExtractContext, topic: Topic) -> list[dict]:
    template = (resources.files("engine") / "templates" / "dream.j2").read_text(encoding="utf-8")
    pages = []
    for pid, note in sorted(ctx.notes.items()):
        fields = "\n".join(f"{k}: {v}" for k, v in note.fields.items())
        pages.append({"pid": pid, "memory_type": note.memory_type, "uri": one_line(note.uri),
                      "date": one_line(note.created_at[:10]), "evidence": note.memory_type not in NOT_EVIDENCE,
                      "text": quote(fields)})
    links = [{"f": ctx.page_of(link.from_uri), "t": ctx.page_of(link.to_uri), "link_type": link.link_type.value,
              "description": quote(link.description) if link.description else ""} for link in ctx.links]
    report_page = ctx.page_of(topic.report) if topic.report else None
    prompt = render_template(template, {
        "kind": topic.kind, "question": quote(topic.question), "pages": pages, "links": links,
        "report_page": report_page, "first_new": FIRST_NEW, "data_rule": RULE,
    }, "dream prompt")
    return [{"role": "user", "content": prompt}]


# -- the LLM -------------------------------------------------------------------------------------
def llm_operations(vault: Vault, provider: Provider, topic: Topic, ctx: ExtractContext) -> DreamOperations:
    """One structured call. An answer that does not fit the contract or the checks is
    quarantined and changes nothing (ExtractionRejected names where it is kept)."""
    ops = None
    try:
        ops = provider.structured(dream_messages(ctx, topic), DreamOperations)
        check_dream_operations(ops, ctx, vault)
    except LLMInvalidOutput as exc:
        where = quarantine(vault, provider.name, str(exc), exc.raw)
        raise ExtractionRejected(f"{exc}; nothing was changed, the answer is kept in {where}") from None
    except (ValueError, ValidationError) as exc:
        where = quarantine(vault, provider.name, str(exc), ops.model_dump_json() if ops is not None else "")
        raise ExtractionRejected(f"the answer does not fit: {str(exc).splitlines()[0]}; nothing was changed, "
                                 f"the answer is kept in {where}") from None
    return ops


# -- the rules ---------------------------------------------------------------------------------
EARLIER = "The answer it had before:"  # under a report's new answer: the one it had is never lost
DRAFTED_KEY = "drafted"  # the SHA-256 of the answer the dream last wrote: an answer that differs is a person's


def keep_earlier_answers(vault: Vault, resolved: Resolved) -> set[str]:
    """A report the dream writes again, re-researched or asked anew (a hub topic, a vault
    restored without its dream state), keeps the answer it has below the new one, under
    EARLIER. An answer the dream wrote itself (``DRAFTED_KEY``) gives only what it kept.
    Returns the reports whose answer stays a person's (the new one is the same): never
    marked as the dream's own."""
    theirs: set[str] = set()
    for op in resolved.notes:
        if op.memory_type != "report" or not isinstance(op.fields.get("answer"), str):
            continue
        uri = target_uri(vault, op)
        if not vault.exists(uri):
            continue
        note = vault.read_note(uri)
        now = str(note.fields.get("answer") or "").strip()
        own = note.extra.get(DRAFTED_KEY) == text_hash(now)
        kept = (now.split(EARLIER, 1)[1].strip() if EARLIER in now else "") if own else now
        new = op.fields["answer"].strip()
        if kept and kept == new and not own:
            theirs.add(uri)
        elif kept and kept != new and not new.endswith(f"{EARLIER}\n{kept}"):
            op.fields["answer"] = f"{new}\n\n{EARLIER}\n{kept}"
    return theirs


def mark_drafted(vault: Vault, tx: Transaction, uris: list[str]) -> None:
    """Record, in each report just written, the SHA-256 of its answer (``DRAFTED_KEY``)."""
    for uri in uris:
        note = vault.read_note(uri)
        if note.memory_type != "report":
            continue
        digest = text_hash(str(note.fields.get("answer") or "").strip())
        if note.extra.get(DRAFTED_KEY) != digest:
            note.extra = {**note.extra, DRAFTED_KEY: digest}
            tx.put_text(uri, serialize_note(note, vault.schema("report"), vault.read_text(uri)), note)


def rules_operations(vault: Vault, topic: Topic, ctx: ExtractContext) -> DreamOperations:
    """Today's deterministic report as operations: one report (the re-researched page, or
    a new one) deriving from every note of the topic (never from a report)."""
    sources = [pid for pid, note in sorted(ctx.notes.items())
               if note.uri in topic.notes and note.memory_type not in NOT_EVIDENCE]
    if topic.candidate:  # a question: only the notes that hold its words, as search judges them
        sources = evidence(vault, topic.question, {pid: ctx.notes[pid] for pid in sources})
        if not sources:
            return DreamOperations(report=[], links=[])  # nothing known yet: no report, the question stays open
    draft = rules_draft(vault, topic, [ctx.notes[pid].uri for pid in sources])
    page = (ctx.page_of(topic.report) if topic.report else None) or FIRST_NEW
    provenance = vault.config.link_table().role("provenance")
    # (a report re-researched keeps the source links it has: one to the same note is not a second)
    linked = {l.to_uri for l in vault.links.of(topic.report, "links") if l.link_type is provenance} if topic.report else set()
    links = [WikiLink(f=page, t=pid, t_field=vault.schema(ctx.notes[pid].memory_type).text_field,
                      link_type=provenance, weight=0.9, description="a source of this report")
             for pid in sources if ctx.notes[pid].uri not in linked]
    answer = draft.answer
    item = ReportItem(page_id=page, question=topic.question, answer=answer, conflicts=draft.conflicts)
    return DreamOperations(report=[item], links=links)


EVIDENCE_SHARE = 0.5  # a note quoted holds at least this share of what the note holding most of the question holds


def evidence(vault: Vault, question: str, notes: dict[int, Note]) -> list[int]:
    """The notes that say something about ``question``, in the order given: each holds
    two of its content words at least (all, when it has fewer: one word shared, "near" or
    "teacher" of "Which cello teachers are near Delfshaven?", is a coincidence), enough
    of their weight (search's coverage test, ``search.min_query_coverage``) and at least
    ``EVIDENCE_SHARE`` of what the best of them holds: a note sharing only the question's
    place ("… at home in Rotterdam?") is not quoted beside the notes about its subject.
    Found by meaning alone is not enough for the rules to quote a note as what the vault
    knows."""
    index = SearchIndex.for_vault(vault)
    asked = set(question_tokens(question) or tokenize(question))
    texts = {pid: f"{vault.title(note)}\n{note.text}" for pid, note in notes.items()}
    sharing = [pid for pid in notes if len(asked & set(tokenize(texts[pid]))) >= min(2, len(asked))]
    held = {pid: query_coverage(index, question, texts[pid]) for pid in sharing}
    floor = max(vault.config.search.min_query_coverage, EVIDENCE_SHARE * max(held.values(), default=0.0))
    return [pid for pid in sharing if held[pid] >= floor]


def rules_draft(vault: Vault, topic: Topic, uris: list[str]) -> ReportDraft:
    """The question, the statements quoted with their notes and lines, a timeline, what
    is still open."""
    parts: list[str] = []
    conflicts: list[str] = []
    quoted = [(u, *_lines(vault, u)) for u in uris]
    if topic.kind == "conflict":
        parts.append("Two notes disagree:")
        for uri, t, first, _day in quoted:
            where, line = _disputed(vault, uri, topic.link, first)
            parts.append(f'- {t} (`{uri}`, {where}): "{line}"')
        conflicts = [f"{quoted[0][1]} vs {quoted[1][1]}"] if len(quoted) >= 2 else []
        open_part = "Which statement holds is still open: review the pair (keep one, merge, or dismiss)."
    elif topic.kind == "evolution":
        parts.append("The view changed over time; the newest version is the last one below.")
        open_part = f"Current: {quoted[-1][1]}." if quoted else ""
    elif topic.kind == "re-research":
        parts.append("Sources of this report changed, or new notes joined them, since it was written; what they say now:")
        open_part = "Check whether the earlier answer still holds."
    elif topic.kind == "hub":
        parts.append(f"{quoted[0][1] if quoted else 'This note'} is a hub of the vault; the notes linking to it say:")
        open_part = "What these add up to is for you (or an LLM provider) to judge; the notes are gathered here."
    else:
        parts.append("What the vault already knows about this question:")
        open_part = "Nothing outside the vault was consulted (zero-LLM rules); the question stays open for research."
    if topic.kind != "conflict":
        for uri, t, first, _day in quoted:
            parts.append(f"- {t} (`{uri}`): {first}")
    timeline = sorted(quoted, key=lambda q: q[3])
    parts += ["", "Timeline:"] + [f"- {day}: {t}" for _u, t, _f, day in timeline]
    parts += ["", f"Still open: {open_part}"]
    return ReportDraft(answer="\n".join(parts), conflicts=conflicts)


def _lines(vault: Vault, uri: str) -> tuple[str, str, str]:
    note = vault.read_note(uri)
    schema = vault.schema(note.memory_type)
    text = note.field_text(schema.text_field)
    first = next((line for line in text.splitlines() if line.strip()), "")
    return vault.title(note), first, note.fields.get("date") or note.created_at[:10]


def _disputed(vault: Vault, uri: str, link: StoredLink | None, fallback: str) -> tuple[str, str]:
    """The line of ``uri`` the contradicts link points at: the from side's line holding
    the link's match_text, the to side's t_line_ranges; else the first line."""
    note = vault.read_note(uri)
    if link is not None and uri == link.to_uri and link.t_line_ranges:
        text = note.field_text(link.t_field).splitlines()
        start, end = parse_ranges(link.t_line_ranges)[0]
        chosen = " ".join(line.strip() for line in text[start - 1 : end])
        if chosen:
            return f"{link.t_field} line {link.t_line_ranges}", chosen
    if link is not None and uri == link.from_uri and link.match_text:
        for n, line in enumerate(note.field_text(vault.schema(note.memory_type).text_field).splitlines(), 1):
            if link.match_text in line:
                return f"line {n}", line.strip()
    return "line 1", fallback
