"""The dream pass (seed 000 §3.4.2, T+1): find questions worth answering in what changed,
write question-driven reports, and tidy up.

Topics, in order: pending report_candidates (the user asked), contradicts links,
evolved_from chains (superseded knowledge), reports whose derived_from sources changed
since they were written (re-research). For each topic a context (the notes, their plain
text, the links among them, existing related reports) goes to the LLM (one structured
call) or to the rules, which write a deterministic report: the question, the statements
quoted with their notes and lines, a timeline, what is still open. Reports go through the
report schema and template, link derived_from every source, and are never read back as
evidence. Maintenance runs in the same pass: re-sync, one-sided link repair, re-index,
orphan count. A human-readable summary is appended to DREAMS.md."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Callable

from filelock import FileLock, Timeout
from pydantic import BaseModel, ConfigDict

from .atomic import atomic_write_text
from .errors import MemlinkError
from .links import LinkType

DREAMS_FILE = "DREAMS.md"


class DreamBusy(MemlinkError):
    """Another dream is running on this vault."""


class ReportDraft(BaseModel):
    """What the LLM writes for one topic."""

    model_config = ConfigDict(extra="forbid")

    answer: str
    conflicts: list[str]


@dataclass
class Topic:
    kind: str  # candidate | conflict | evolution | re-research
    key: str  # stable identity: a second run skips what it already handled
    question: str
    notes: list[str]
    candidate: str | None = None
    report: str | None = None  # an existing report to update
    link: object = None  # the contradicts link, for quoting the lines that disagree


@dataclass
class DreamReport:
    topics: list[dict] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    maintenance: dict = field(default_factory=dict)
    provider: str = "rules"
    dry_run: bool = False

    def to_json(self) -> dict:
        return dict(self.__dict__)


# -- state -------------------------------------------------------------------------------------
def _state_path(vault):
    return vault.state_dir / "dream" / "state.json"


def load_state(vault) -> dict:
    try:
        return json.loads(_state_path(vault).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return {"done": {}}


def save_state(vault, state: dict) -> None:
    atomic_write_text(_state_path(vault), json.dumps(state, ensure_ascii=False, indent=1))


# -- topic discovery ------------------------------------------------------------------------------
SEARCHED_OFTEN = 3
POORLY_COVERED = 0.45  # best vector similarity of the hits


def searched_questions(vault, state: dict) -> list[str]:
    """Queries searched at least 3 times whose results stayed thin: each becomes a
    research question (once)."""
    path = vault.state_dir / "search-log.jsonl"
    if not path.exists():
        return []
    stats: dict[str, list[dict]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        stats.setdefault(str(entry.get("q", "")).lower(), []).append(entry)
    done = state.get("done", {})
    out = []
    for q, entries in sorted(stats.items()):
        if len(q) < 3 or len(entries) < SEARCHED_OFTEN or f"searched:{q}" in done:
            continue
        if max(e.get("hits", 0) for e in entries) < 3 or max(e.get("best_vector", 0) for e in entries) < POORLY_COVERED:
            out.append(entries[-1]["q"])
    return out


def discover(vault, state: dict) -> list[Topic]:
    for q in searched_questions(vault, state):  # searched often, found little: ask it
        try:
            vault.write_note("report_candidate", {"question": f"What do I know about {q}?", "status": "pending",
                                                  "user_requirement": f"Searched {SEARCHED_OFTEN}+ times with thin results."})
        except MemlinkError:
            continue
        state.setdefault("done", {})[f"searched:{q.lower()}"] = dt.date.today().isoformat()
    catalog = {u: e for u, e in vault.sync_catalog().items() if not e.error}
    done = state.get("done", {})
    topics: list[Topic] = []
    title = lambda u: catalog[u].title if u in catalog else u  # noqa: E731

    for uri, e in sorted(catalog.items()):  # the user's own questions first
        if e.memory_type != "report_candidate":
            continue
        note = vault.read_note(uri)
        if (note.fields.get("status") or "pending") != "pending":
            continue
        from .search import search

        related = [h.uri for h in search(vault, note.fields["question"], k=8, snippets=False)
                   if h.memory_type not in ("report", "report_candidate")]
        topics.append(Topic("candidate", f"candidate:{uri}", note.fields["question"], related, candidate=uri))

    links = [l for l in vault.all_links() if not l.legacy and l.from_uri in catalog and l.to_uri in catalog]
    tasks = vault.config.dream_tasks
    conflicts_on = any(t.input.source == "conflict" for t in tasks)
    for l in links if conflicts_on else []:
        if l.link_type is LinkType.CONTRADICTS and f"conflict:{l.id}" not in done:
            if catalog[l.from_uri].memory_type == "report" or catalog[l.to_uri].memory_type == "report":
                continue  # dream output is never evidence
            q = f"Which holds: {title(l.from_uri)} or {title(l.to_uri)}?"
            topics.append(Topic("conflict", f"conflict:{l.id}", q, [l.from_uri, l.to_uri], link=l))

    newer = {l.from_uri: l.to_uri for l in links if l.link_type is LinkType.EVOLVED_FROM}
    older = set(newer.values())
    for head in sorted(set(newer) - older):  # newest version of each chain
        chain = [head]
        while chain[-1] in newer and newer[chain[-1]] not in chain:
            chain.append(newer[chain[-1]])
        key = "evolution:" + "<".join(chain)
        if len(chain) >= 2 and key not in done:
            topics.append(Topic("evolution", key, f"How did {title(chain[-1])} change over time?", list(reversed(chain))))

    for uri, e in sorted(catalog.items()):
        if e.memory_type != "report":
            continue
        sources = [l.to_uri for l in vault.get_file_links(uri, "links") if l.link_type is LinkType.DERIVED_FROM]
        # A source that changed, or a new note linked to a source, since the report was written.
        newcomers = {l.from_uri for s in sources for l in vault.get_file_links(s, "backlinks")
                     if l.from_uri in catalog and catalog[l.from_uri].memory_type not in ("report", "report_candidate")
                     and l.from_uri not in sources and catalog[l.from_uri].updated_at >= e.updated_at}
        changed = [s for s in sources if s in catalog and catalog[s].updated_at > e.updated_at] + sorted(newcomers)
        sources = sources + sorted(newcomers - set(sources))
        if changed:
            key = f"re-research:{uri}:{max(catalog[s].updated_at for s in changed)}"
            if key not in done:
                note = vault.read_note(uri)
                topics.append(Topic("re-research", key, note.fields["question"], sources, report=uri))

    # dream_tasks with an anchor type: the hubs of that type (PPR, uniform seeds) whose
    # in-link neighbourhood has notes no report covers yet.
    covered = {l.to_uri for l in links if l.link_type is LinkType.DERIVED_FROM and catalog[l.from_uri].memory_type == "report"}
    from .graph import LinkGraph

    graph = LinkGraph.for_vault(vault)
    for task in tasks:
        anchor = task.input.source
        if anchor == "conflict":
            continue
        anchors = [u for u, e in catalog.items() if e.memory_type == anchor]
        if not anchors:
            continue
        ranks = graph.ppr({u: 1.0 for u in anchors})
        hubs = sorted(anchors, key=lambda u: -ranks.get(u, 0.0))
        picked = 0
        for hub in hubs:
            if picked >= vault.config.dream_hubs:
                break
            neighbours = sorted({l.from_uri for l in vault.get_file_links(hub, "backlinks")
                                 if l.from_uri in catalog and catalog[l.from_uri].memory_type not in ("report", "report_candidate")})
            since = state.get("last_run", "")  # only what is new since the last dream
            fresh = [n for n in neighbours if n not in covered and catalog[n].updated_at > since]
            if len(fresh) < 2:
                continue
            key = f"hub:{hub}:{max(catalog[n].updated_at for n in fresh)}"
            if key in done:
                continue
            picked += 1
            topics.append(Topic("hub", key, f"What do the notes around {title(hub)} add up to?", [hub] + neighbours))
    return topics


# -- writing one report ----------------------------------------------------------------------
def _lines(vault, uri: str) -> tuple[str, str, str]:
    note = vault.read_note(uri)
    schema = vault.schema(note.memory_type)
    text = note.field_text(schema.text_field)
    first = next((l for l in text.splitlines() if l.strip()), "")
    return vault.title(note), first, note.fields.get("date") or note.created_at[:10]


def _disputed(vault, uri: str, link, fallback: str) -> tuple[str, str]:
    """The line of ``uri`` the contradicts link points at: the from side's line holding
    the link's match_text, the to side's t_line_ranges; else the first line."""
    from .lineranges import parse_ranges

    note = vault.read_note(uri)
    if link is not None and uri == link.to_uri and link.t_line_ranges:
        text = note.field_text(link.t_field).splitlines()
        start, end = parse_ranges(link.t_line_ranges)[0]
        chosen = " ".join(l.strip() for l in text[start - 1 : end])
        if chosen:
            return f"{link.t_field} line {link.t_line_ranges}", chosen
    if link is not None and uri == link.from_uri and link.match_text:
        for n, line in enumerate(note.field_text(vault.schema(note.memory_type).text_field).splitlines(), 1):
            if link.match_text in line:
                return f"line {n}", line.strip()
    return "line 1", fallback


def rules_draft(vault, topic: Topic) -> ReportDraft:
    parts, conflicts = [], []
    quoted = [(u, *_lines(vault, u)) for u in topic.notes if vault.exists(u)]
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


def llm_draft(vault, provider, topic: Topic) -> ReportDraft:
    """DreamContextProvider + one structured call: the topic's notes as plain text (links
    not rendered), the links among them, and existing reports drawn from them."""
    blocks, group = [], set(topic.notes)
    for uri in topic.notes:
        if vault.exists(uri):
            note = vault.read_note(uri)
            blocks.append(f"[{uri}] ({note.memory_type}, {note.created_at[:10]})\n{note.body.strip()}")
    links = [f"{l.from_uri} -{l.link_type.value}-> {l.to_uri}: {l.description}"
             for uri in topic.notes for l in vault.get_file_links(uri, "links") if l.to_uri in group]
    reports = sorted({l.from_uri for uri in topic.notes for l in vault.get_file_links(uri, "backlinks")
                      if l.link_type is LinkType.DERIVED_FROM and l.from_uri != topic.report})
    existing = [f"[{u}] {vault.read_note(u).fields.get('question', '')}" for u in reports[:5] if vault.exists(u)]
    prompt = (f"Write a short research report answering: {topic.question}\nUse only these notes; quote them with "
              f"their paths; list the conflicts you see; do not repeat what the existing reports already say.\n\n"
              + "\n\n".join(blocks)
              + ("\n\nLinks among them:\n" + "\n".join(links) if links else "")
              + ("\n\nExisting related reports:\n" + "\n".join(existing) if existing else ""))
    return provider.structured([{"role": "user", "content": prompt}], ReportDraft)


def write_report(vault, topic: Topic, draft: ReportDraft, day: str) -> str:
    sources = [u for u in topic.notes if vault.exists(u)]
    fields = {"question": topic.question, "answer": draft.answer, "source_uris": sources, "conflicts": draft.conflicts}
    if topic.report:
        fields = {"answer": draft.answer, "source_uris": sources, "conflicts": draft.conflicts}
        note = vault.write_note("report", fields, uri=topic.report)
    else:
        note = vault.write_note("report", fields)
    specs = [(note.uri, s, "derived_from", {"weight": 0.9, "description": "a source of this report"}) for s in sources if s != note.uri]
    if specs:
        vault.link_many(specs)
    if topic.candidate:
        vault.write_note("report_candidate", {"status": "done", "report_uri": note.uri}, uri=topic.candidate)
        vault.link(topic.candidate, note.uri, "related_to", description="answered by this report")
    return note.uri


# -- the run ------------------------------------------------------------------------------------
def dream(vault, *, provider=None, dry_run: bool = False, progress: Callable[[int, int], None] | None = None,
          wait: float = 0.0) -> DreamReport:
    lock = FileLock(str(vault.state_dir / "dream.lock"))
    vault.state_dir.mkdir(exist_ok=True)
    try:
        lock.acquire(timeout=wait)
    except Timeout:
        raise DreamBusy(f"another dream is running on {vault.root}") from None
    try:
        return _run(vault, provider, dry_run, progress)
    finally:
        lock.release()


def _run(vault, provider, dry_run, progress) -> DreamReport:
    from .index import SearchIndex
    from .lint import fix, lint

    report = DreamReport(provider=provider.name if provider else "rules", dry_run=dry_run)
    state = load_state(vault)
    day = dt.date.today().isoformat()
    if not dry_run:  # maintenance first: the topics then see a tidy vault
        repaired = fix(vault)
        sync = SearchIndex.for_vault(vault).sync()
        report.maintenance = {"links_repaired": len(repaired), "reindexed": sync.changed}
    topics = discover(vault, state)
    limit = vault.config.dream_max_reports
    if len(topics) > limit:  # the user's own questions come first in the list
        report.skipped.append(f"{len(topics) - limit} more topic(s) wait for the next run (dream_max_reports: {limit})")
        topics = topics[:limit]
    report.topics = [{"kind": t.kind, "question": t.question, "notes": t.notes} for t in topics]
    for n, topic in enumerate(topics, 1):
        if dry_run:
            continue
        try:
            draft = llm_draft(vault, provider, topic) if provider else rules_draft(vault, topic)
            report.written.append(write_report(vault, topic, draft, day))
            state.setdefault("done", {})[topic.key] = day
        except MemlinkError as exc:
            report.skipped.append(f"{topic.question}: {exc}")
        if progress:
            progress(n, len(topics))
    if not dry_run:
        report.maintenance["orphans"] = len([f for f in lint(vault).findings if f.check == "orphans"])
        state["last_run"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        save_state(vault, state)
        _diary(vault, report)
    return report


def _diary(vault, report: DreamReport) -> None:
    lines = [f"## Dream {dt.datetime.now().strftime('%Y-%m-%d %H:%M')} ({report.provider})", ""]
    if not report.topics:
        lines.append("Nothing new: no pending questions, contradictions, changed views or changed sources.")
    for topic in report.topics:
        lines.append(f"- found ({topic['kind']}): {topic['question']}")
    lines += [f"- wrote `{uri}`" for uri in report.written]
    lines += [f"- skipped: {why}" for why in report.skipped]
    m = report.maintenance
    lines.append(f"- maintenance: {m.get('links_repaired', 0)} links repaired, {m.get('reindexed', 0)} notes re-indexed, "
                 f"{m.get('orphans', 0)} orphans")
    path = vault.root / DREAMS_FILE
    old = path.read_text(encoding="utf-8") if path.exists() else "# Dream diary\n\nWritten by `memlink dream`.\n"
    atomic_write_text(path, old.rstrip("\n") + "\n\n" + "\n".join(lines) + "\n")
