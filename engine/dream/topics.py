"""Topic discovery for the dream (docs/DESIGN.md, *Dream*): what is worth a report.

Topics, in order: pending report_candidates (the user asked), contradicts links,
evolved_from chains (superseded knowledge), reports whose derived_from sources changed
since they were written (re-research), and hubs of the ``dream_tasks`` anchor types whose
neighbours no report covers yet. A topic's ``key`` is its stable identity: a handled key
is recorded in the dream state and not offered again."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import MemlinkError
from ..graph import LinkGraph
from ..model.links import StoredLink
from ..sessions.memory import memory_context
from ..storage.jsonl import read_jsonl
from .ask import ask

if TYPE_CHECKING:
    from ..storage.vault import Vault


@dataclass
class Topic:
    kind: str  # candidate | conflict | evolution | re-research | hub
    key: str  # stable identity: a second run skips what it already handled
    question: str
    notes: list[str]
    candidate: str | None = None  # the report_candidate this topic answers
    report: str | None = None  # an existing report to update
    link: StoredLink | None = None  # the contradicts link, for quoting the lines that disagree


# -- topic discovery ------------------------------------------------------------------------------
NOT_EVIDENCE = ("report", "report_candidate")  # dream output is never a source
SEARCHED_OFTEN = 3
POORLY_COVERED = 0.45  # best vector similarity of the hits


def searched_questions(vault: Vault, state: dict) -> list[str]:
    """Queries searched at least 3 times whose results stayed thin: each becomes a
    research question (once). A lost or torn log line only costs a hint: skipped."""
    stats: dict[str, list[dict]] = {}
    for entry in read_jsonl(vault.state_dir / "search-log.jsonl", strict=False):
        stats.setdefault(str(entry.get("q", "")).lower(), []).append(entry)
    done = state.get("done", {})
    out = []
    for q, entries in sorted(stats.items()):
        if len(q) < 3 or len(entries) < SEARCHED_OFTEN or f"searched:{q}" in done:
            continue
        if max(e.get("hits", 0) for e in entries) < 3 or max(e.get("best_vector", 0) for e in entries) < POORLY_COVERED:
            out.append(str(entries[-1]["q"]))
    return out


PARTLY = "answered_partly"  # a rules report gathered what the vault knows; the question stays open
NOTHING_YET = "nothing_known_yet"  # no note is evidence for it and no report was written; still open
OPEN = ("pending", NOTHING_YET)  # questions every dream takes up


def discover(vault: Vault, state: dict, *, dry_run: bool = False, llm: bool = False) -> list[Topic]:
    """The topics of this run. A real run files each poorly covered search as a research
    question first (``ask``); a dry run only lists it, searches nothing (the search
    index would sync) and writes nothing. A question the rules answered only partly
    (``answered_partly``) is taken up again when an LLM answers (``llm``); one the vault knew
    nothing about (``nothing_known_yet``) by every dream."""
    searched: list[Topic] = []
    for q in searched_questions(vault, state):  # searched often, found little: ask it
        question = f"What do I know about {q}?"
        if dry_run:
            searched.append(Topic("candidate", f"searched:{q.lower()}", question, []))
            continue
        try:
            ask(vault, question, f"Searched {SEARCHED_OFTEN}+ times with thin results.")
        except MemlinkError:
            continue
        state.setdefault("done", {})[f"searched:{q.lower()}"] = dt.date.today().isoformat()
    if not dry_run:
        vault.sync()
    catalog = {e.uri: e for e in vault.catalog.all()}
    evidence = {e.memory_type for e in catalog.values()} - set(NOT_EVIDENCE)  # (reports never are)
    done = state.get("done", {})
    topics: list[Topic] = []

    def title(uri: str) -> str:
        return catalog[uri].title if uri in catalog else uri

    def subject(uri: str) -> str:
        """A note as the subject of a question: a thing's title is a noun phrase ("Berth
        Planner v2"); an event's names what happened ("Applied for a stall"), so it is quoted."""
        if uri in catalog and catalog[uri].memory_type == "event":
            return f'the account of "{title(uri)}"'
        return title(uri)

    for uri, e in sorted(catalog.items()):  # the user's own questions first
        if e.memory_type != "report_candidate":
            continue
        note = vault.read_note(uri)
        if (note.fields.get("status") or "pending") not in ((*OPEN, PARTLY) if llm else OPEN):
            continue
        related = [] if dry_run else _related(vault, note.fields["question"], evidence)
        topics.append(Topic("candidate", f"candidate:{uri}", note.fields["question"], related, candidate=uri))
    topics += searched

    table = vault.config.link_table()
    conflict, supersedes, provenance = table.role("conflict"), table.role("supersedes"), table.role("provenance")
    links = [link for link in vault.links.all(types=(conflict, supersedes, provenance))  # not all 300k at 100k notes
             if not link.legacy and link.from_uri in catalog and link.to_uri in catalog]
    tasks = vault.config.dream_tasks
    conflicts_on = any(t.input.source == "conflict" for t in tasks)
    for link in links if conflicts_on else []:
        if link.link_type is conflict and f"conflict:{link.id}" not in done:
            if catalog[link.from_uri].memory_type == "report" or catalog[link.to_uri].memory_type == "report":
                continue  # dream output is never evidence
            q = f"Which holds: {title(link.from_uri)} or {title(link.to_uri)}?"
            topics.append(Topic("conflict", f"conflict:{link.id}", q, [link.from_uri, link.to_uri], link=link))

    newer = {link.from_uri: link.to_uri for link in links if link.link_type is supersedes}
    older = set(newer.values())
    for head in sorted(set(newer) - older):  # newest version of each chain
        chain = [head]
        while chain[-1] in newer and newer[chain[-1]] not in chain:
            chain.append(newer[chain[-1]])
        key = "evolution:" + "<".join(chain)
        if len(chain) >= 2 and key not in done:
            topics.append(Topic("evolution", key, f"How did {subject(chain[-1])} change over time?", list(reversed(chain))))

    for uri, e in sorted(catalog.items()):
        if e.memory_type != "report":
            continue
        sources = [link.to_uri for link in vault.links.of(uri, "links") if link.link_type is provenance]
        # A source that changed, or a new note linked to a source, since the report was written.
        newcomers = {link.from_uri for s in sources for link in vault.links.of(s, "backlinks")
                     if link.from_uri in catalog and catalog[link.from_uri].memory_type not in NOT_EVIDENCE
                     and link.from_uri not in sources and catalog[link.from_uri].updated_at >= e.updated_at}
        changed = [s for s in sources if s in catalog and catalog[s].updated_at > e.updated_at] + sorted(newcomers)
        sources = sources + sorted(newcomers - set(sources))
        if changed:
            key = f"re-research:{uri}:{max(catalog[s].updated_at for s in changed)}"
            if key not in done:
                note = vault.read_note(uri)
                topics.append(Topic("re-research", key, note.fields["question"], sources, report=uri))

    # dream_tasks with an anchor type: the hubs of that type (PPR, uniform seeds) whose
    # in-link neighbourhood has notes no report covers yet.
    covered = {link.to_uri for link in links
               if link.link_type is provenance and catalog[link.from_uri].memory_type == "report"}
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
            neighbours = sorted({link.from_uri for link in vault.links.of(hub, "backlinks")
                                 if link.from_uri in catalog and catalog[link.from_uri].memory_type not in NOT_EVIDENCE})
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




def _related(vault: Vault, question: str, evidence: set[str]) -> list[str]:
    """The notes a research question is about: the notes of its memory context, as chat
    reads them (reports are never evidence; the dream's pages are whole notes, so turns
    are not asked for)."""
    context = memory_context(vault, question, turn_count=0, note_count=RELATED, types=evidence)
    return [item.source for item in context.items]


RELATED = 8  # notes a research question gathers as its pages
