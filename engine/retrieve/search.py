"""Hybrid search (docs/DESIGN.md, "Search"): vector + keyword hits fused by score (each
hit's cosine plus its BM25 over the best one: engine.retrieve.fusion) → seeds → typed
propagation over links and backlinks → α-merge → forced one-hop follow of contradicts /
evolved_from → optional backlink boost (GBrain).
Each hit says how it was found and carries a snippet with its outgoing links rendered."""

from __future__ import annotations

import datetime as dt
import functools
import math
import os
import queue
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from filelock import FileLock
from pydantic import BaseModel

from ..errors import MemlinkError
from ..graph import Adjacency, PropagationParams, Step, Walk
from ..index import SearchIndex
from ..index.embed import cosine_shift, reads
from ..index.keywords import bm25_idf
from ..model.config import SearchConfig
from ..model.links import StoredLink
from ..model.linktypes import LinkType, LinkTypeTable, builtin_table
from ..model.relations import PERSON_KINDS, asked_relation, asks_who, relations_of
from ..model.text import has_cjk, question_tokens, snippet, tokenize, words
from ..storage.jsonl import append_jsonl, keep_newest
from ..storage.render import render_links
from .fusion import RouteHits, fuse
from .names import NameIndex

if TYPE_CHECKING:
    from ..storage.catalog import Catalog
    from ..storage.vault import Vault

T = TypeVar("T")


class Route(NamedTuple):
    """How a hit was found. (A named tuple: a search makes a hundred.)"""

    kind: str  # "vector" | "keyword" | "name" | "answer" | "graph" | "forced"
    rank: int = 0
    score: float = 0.0
    via: Step | None = None

    def describe(self) -> str:
        if self.kind in ("vector", "keyword"):
            return f"{self.kind} #{self.rank} ({self.score:.2f})"
        if self.kind == "name":
            return "named in the question"
        assert self.via is not None, f"a {self.kind} hit has its step"
        arrow = "→" if self.via.direction == "links" else "←"
        if self.kind == "answer":
            relation = self.via.link.description or self.via.link.link_type.value
            return f"answer: {relation} ({self.via.link.link_type.value}) {arrow} {self.via.src}"
        verb = "always follows" if self.kind == "forced" else "via"
        return f"graph {verb} {self.via.link.link_type.value} {arrow} from {self.via.src}"

    def to_json(self) -> dict:
        out = {"kind": self.kind, "rank": self.rank, "score": round(self.score, 4)}
        if self.via:
            out |= {"from": self.via.src, "link_type": self.via.link.link_type.value, "direction": self.via.direction,
                    "relation": self.via.link.description}
        return out


@dataclass
class SearchHit:
    uri: str
    title: str
    memory_type: str
    score: float
    routes: list[Route] = field(default_factory=list)
    snippet: str = ""
    evidence: list[SearchHit] = field(default_factory=list)  # notes derived from this one that matched too
    weak: bool = False  # found only by meaning, below the confident similarity
    superseded: bool = False  # a review kept another note over it (it ranks lower, and says so)
    superseded_in_part: bool = False  # ... over a claim of it (it ranks as before; the snippet may show that claim)

    @property
    def route(self) -> str:
        return "; ".join(r.describe() for r in self.routes)

    @property
    def supersession(self) -> str:
        """What a review kept over this note, as a result line says it ("" when nothing)."""
        return "superseded" if self.superseded else "superseded in part" if self.superseded_in_part else ""

    def to_json(self) -> dict:
        out = {
            "uri": self.uri,
            "title": self.title,
            "memory_type": self.memory_type,
            "score": round(self.score, 4),
            "route": self.route,
            "routes": [r.to_json() for r in self.routes],
            "snippet": self.snippet,
        }
        if self.evidence:
            out["evidence"] = [e.to_json() for e in self.evidence]
        if self.weak:
            out["weak"] = True
        if self.superseded:
            out["superseded"] = True
        if self.superseded_in_part:
            out["superseded_in_part"] = True
        return out


class _Worker:
    """One daemon thread running calls in turn: the vector route's (a daemon holds no
    process open, so a one-shot command still ends at once; a forked child, which has
    none of its parent's threads, makes its own)."""

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[tuple[Future, Callable[[], object]]] = queue.SimpleQueue()
        threading.Thread(target=self._run, name="memlink-vector-route", daemon=True).start()

    def _run(self) -> None:
        while True:
            future, call = self._calls.get()
            try:
                future.set_result(call())
            except BaseException as exc:  # (the caller's, raised where it waits)
                future.set_exception(exc)

    def submit(self, call: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()
        self._calls.put((future, call))
        return future


def _new_worker() -> None:
    global _ROUTES
    _ROUTES = _Worker()


_ROUTES: _Worker
_new_worker()
os.register_at_fork(after_in_child=_new_worker)


def propagation_params(cfg: SearchConfig, link_types: LinkTypeTable | None = None) -> PropagationParams:
    """The propagation parameters: ``cfg``'s numbers, the link-type table's weights, and
    its forced-follow types unless ``cfg.forced_follow`` names others. (Made once per
    table and numbers: a search asks each time; nothing changes them.)"""
    return _propagation_params(link_types or builtin_table(), cfg.damping, cfg.depth, cfg.min_link_weight,
                               None if cfg.forced_follow is None else tuple(cfg.forced_follow))


@functools.lru_cache(maxsize=16)
def _propagation_params(table: LinkTypeTable, damping: float, depth: int, min_link_weight: float,
                        forced_follow: tuple[str, ...] | None) -> PropagationParams:
    extra: dict[str, tuple[LinkType, ...]] = {}
    if forced_follow is not None:
        extra["forced_follow"] = tuple(table.require(t) for t in forced_follow)
    return PropagationParams.for_table(table, damping=damping, depth=depth, min_link_weight=min_link_weight, **extra)


def search(
    vault: Vault,
    query: str,
    *,
    k: int = 10,
    types: set[str] | None = None,
    use_graph: bool = True,
    routes: tuple[str, ...] = ("vector", "keyword"),
    index: SearchIndex | None = None,
    snippets: bool = True,
    log: bool = False,
    use_names: bool = True,
    group: bool = True,
    question: bool = True,
) -> list[SearchHit]:
    """The k best notes for ``query``. Notes the question names (title or alias) seed the
    graph at full score; a "Who … X?" question puts the people X's links name first, those
    whose link states the asked relation (or one implying it) ahead, and when it asks a
    relation shows only people; notes derived from a hit that matched too
    are grouped under it (``group``). When the notes hold too little of the question's
    content words (``query_coverage`` below ``min_query_coverage``) and it names no note,
    only vector hits above ``min_confident_similarity`` are returned, marked weak. With
    ``question=False`` (the query is a whole text, e.g. a document being imported, whose
    related notes are wanted) any word of it in a note is a match."""
    query_tokens = set(tokenize(query))
    if not query_tokens:
        return []  # punctuation alone asks nothing (its vector is close to anything by chance)
    cfg = vault.config.search
    index = index or SearchIndex.for_vault(vault)
    catalog = vault.catalog
    n = max(cfg.candidates, k)

    known = catalog.memory_types()

    def allowed(uri: str) -> bool:
        return uri in known if not types else known.get(uri) in types

    found: dict[str, list[Route]] = {}
    ranked_lists: list[RouteHits] = []
    vec, kw = [], []
    # The vector route runs on the other core while this thread asks the keyword and name
    # routes (docs/DESIGN.md, "Caches and tuning"): hnswlib lets go of the GIL.
    vector_hits = _ROUTES.submit(lambda: index.vector_search(query, n)) if "vector" in routes else None
    if "keyword" in routes:
        # A question's frame ("how much", "what did we say about") is not what it asks:
        # its keyword hits are on its content words, the words the gate weighs. (Only
        # when it reads as a question: "talk slides" is about a talk.)
        kw = index.keyword_search(query, n, tokens=question_tokens(query) if question else None)
    named = _named(vault, query) if use_names else []
    named = [u for u in named if allowed(u)]
    if vector_hits is not None:
        vec = [(u, s) for u, s in vector_hits.result() if s >= cfg.min_vector_similarity]
        ranked_lists.append(RouteHits(vec, "raw"))
        for rank, (uri, sim) in enumerate(vec, 1):
            found.setdefault(uri, []).append(Route("vector", rank, sim))
    if "keyword" in routes:
        ranked_lists.append(RouteHits(kw, "max"))
        for rank, (uri, score) in enumerate(kw, 1):
            found.setdefault(uri, []).append(Route("keyword", rank, score))
    # Is there any real match? The question's own words (not its frame: "what about",
    # "tell me", "when did we discuss") in the notes — most of their weight, rare words
    # counting more — or a note named.
    if question:  # (a CJK question the model does not read, no vector route: any of its words held)
        coverage = query_coverage(index, query)
        lexical = coverage >= cfg.min_query_coverage or (coverage > 0 and has_cjk(query) and not reads(index.embedder, query)
                                                         and _holds_a_pair(index, query))
    else:
        lexical = bool(kw) or ("keyword" not in routes and bool(index.keyword_search(query, 1)))
    weak = not lexical and not named
    if weak and (not vec or vec[0][1] < cfg.min_confident_similarity + cosine_shift(index.embedder)):
        if log:
            _log_query(vault, query, [], found)
        return []  # nothing in the vault says anything about it: no confident noise
    # By score, not rank (docs/DESIGN.md, "Search"): a keyword route's clear winner is not
    # levelled by the vector route's near ties, nor a close meaning by a hit on common words.
    fused = fuse(ranked_lists)
    top = max(fused.values(), default=0.0)
    base = {u: s / top for u, s in fused.items()} if top else {}  # best hit = 1.0, comparable with propagation
    for uri in named:
        base[uri] = 1.0
        found.setdefault(uri, []).insert(0, Route("name", 0, 1.0))

    final: dict[str, float] = {}
    seeds = dict(sorted(base.items(), key=lambda kv: -kv[1])[: cfg.seeds])
    seeds.update({u: 1.0 for u in named})
    # Only the seeds' neighbourhoods are walked: their links are fetched as reached
    # (docs/DESIGN.md, "Search"), never the whole graph.
    graph = Walk(vault) if use_graph else None
    params = propagation_params(cfg, vault.config.link_table())
    if graph is not None:
        spread = graph.propagate(seeds, params)
        # Every search hit is in the seed set (docs/DESIGN.md, "Search"), however many seeds spread.
        for uri, b in base.items():
            ppr = spread[uri].score if uri in spread else 0.0
            final[uri] = cfg.alpha * b + (1 - cfg.alpha) * ppr
        for uri, p in spread.items():
            if uri in base:
                continue
            if p.score >= cfg.min_ppr_score:
                final[uri] = p.score
                found[uri] = [Route("graph", 0, p.score, p.via[0])]
    else:
        final = dict(base)

    superseded = catalog.superseded()
    for uri in [u for u in final if u in superseded] if superseded else ():  # (a review kept another note)
        final[uri] *= 0.5
    if graph is not None and cfg.backlink_boost:
        graph.prefetch(final)
        for uri in final:
            final[uri] *= 1.0 + 0.05 * math.log(1 + graph.backlink_count(uri))
    # Tiers: the answers a named note's links give, then the named notes, then the rest.
    # In a "Who …?" question: the answers (0), the named notes (1), people whose link states
    # no relation (2), the rest (3).
    tier: dict[str, int] = {}
    answered = False  # the links answer the relation asked: only the answers and the named notes
    people: set[str] = set()  # when not empty, only these are shown
    if graph is not None and named and asks_who(query):
        asked = _without_names(query, vault)
        tier = {u: 1 for u in named}
        for uri, (score, step, strong) in _answers(graph, catalog, named, asked, params).items():
            if not allowed(uri):
                continue
            final[uri] = max(final.get(uri, 0.0), score)
            found[uri] = [Route("answer", 0, score, step)] + [r for r in found.get(uri, []) if r.kind != "graph"]
            # A person whose link states no relation may still be an answer the words did
            # not type ("Early money came from Bob"): after the sure ones. One whose link
            # states another relation (advises, asked "works at") is not.
            tier[uri] = 0 if strong else 2 if not relations_of(step.link.description) else 3
        answered = asked_relation(asked) is not None and 0 in tier.values()
        # "Who works at / invested in … X?" asks for people: when any candidate is a
        # person's page, only people are shown (not X's page, nor fragments derived from
        # pages). An open "who" question ("who's responsible for what?") is not filtered.
        if asked_relation(asked) is not None:
            people = _people(catalog, final)
    kept = [u for u in final if allowed(u) and (not answered or u in tier and tier[u] < 3) and (not people or u in people)]
    # (no tiers, most questions: best first by score alone; ties keep their order either way)
    order = sorted(kept, key=lambda u: (tier.get(u, 3), -final[u])) if tier else sorted(kept, key=final.__getitem__, reverse=True)
    if answered:  # what the named notes' own derived notes say stays available, under them
        order += [u for u in sorted(final, key=lambda u: -final[u]) if u not in tier and allowed(u)]
    evidence = _group(graph, order, k, vault.config.link_table()) if group and graph is not None else {}
    ranked = [u for u in order if u not in evidence and (not answered or u in tier) and (not people or u in people)][:k]
    if graph is not None:
        graph.prefetch(ranked)  # what forced neighbours read

    # Contradictions and newer/older versions of a hit are never left out (docs/DESIGN.md,
    # "Search"): they follow the top k, so they add to the results without pushing a
    # search hit out.
    if graph is not None:
        extra: dict[str, float] = {}
        for uri in ranked:
            for step in graph.forced_neighbours(uri, params):
                if step.dst in ranked or step.dst in extra or not allowed(step.dst):
                    continue
                rule = params.table[(step.link.link_type, step.direction)]
                extra[step.dst] = final[uri] * rule.weight * params.damping
                found[step.dst] = [Route("forced", 0, extra[step.dst], step)]
        # At most half as many as asked for (and at least 3): the strongest ones.
        keep = sorted(extra, key=lambda u: -extra[u])[: max(3, k // 2)]
        final.update({u: extra[u] for u in keep})
        ranked = ranked + keep

    if log:
        _log_query(vault, query, ranked, found)

    def hit(uri: str) -> SearchHit:
        entry = entries[uri]
        h = SearchHit(uri, entry.title, entry.memory_type, final[uri], found.get(uri, []), weak=weak,
                      superseded=uri in superseded, superseded_in_part=entry.superseded_in_part)
        if snippets:
            h.snippet = _snippet(vault, uri, query_tokens, anchored.get(uri, []))
        return h

    under: dict[str, list[str]] = {}  # page -> its derived notes, in ranking order
    for e in order:
        if e in evidence:
            under.setdefault(evidence[e], []).append(e)
    shown = [*ranked, *(e for u in ranked for e in under.get(u, ()))]
    # What is shown of each hit, in one read each: the catalog's entries, and the links
    # with an anchor (what a snippet renders).
    entries = catalog.entries(shown)  # (a note another process moved or deleted since this one looked has none: left out)
    anchored = vault.links.of_many(shown, "links", anchored=True, compare=False) if snippets else {}
    hits = []
    for uri in (u for u in ranked if u in entries):
        h = hit(uri)
        h.evidence = [hit(e) for e in under.get(uri, ()) if e in entries]
        hits.append(h)
    return hits


def query_coverage(index: SearchIndex, query: str, text: str | None = None) -> float:
    """The share of a question's content words' idf that some note holds: 1.0 when every
    word occurs somewhere, 0.0 when none does. In a query that reads as a question
    (``asks``) frame words (engine.model.text.QUESTION_FRAME) do not count; a question made
    only of them is judged on all its words. With ``text``: the
    share that this one text holds (whether a note is evidence for the question: the dream)."""
    tokens = question_tokens(query) or list(dict.fromkeys(tokenize(query)))
    if not tokens:
        return 0.0
    df, n = index.keyword_doc_freq(tokens)
    idf = {t: bm25_idf(df[t], n) for t in tokens}
    total = sum(idf.values())
    held = set(tokenize(text)) if text is not None else {t for t in tokens if df[t]}
    return sum(v for t, v in idf.items() if t in held) / total if total else 0.0


def _holds_a_pair(index: SearchIndex, query: str) -> bool:
    """Whether the notes hold two CJK characters of the question side by side (a word, as
    near as characters tell): one character alone ("文" of 语文 for 文件) is shared by
    unrelated text too widely to count as a match. A question of one character: it."""
    pairs = [t for t in dict.fromkeys(tokenize(query)) if len(t) == 2 and has_cjk(t)]
    if not pairs:
        return True
    df, _n = index.keyword_doc_freq(pairs)
    return any(df[t] for t in pairs)


def _named(vault: Vault, query: str) -> list[str]:
    out: list[str] = []
    for named in NameIndex.for_vault(vault).named_in(query):
        if named.uri not in out:
            out.append(named.uri)
    return out


def _without_names(query: str, vault: Vault) -> str:
    """The question without the names in it: "Who attended the Acme investor update?"
    asks about attending, whatever the meeting is called."""
    spans = NameIndex.for_vault(vault).named_in(query)
    qw = words(query)
    keep = [w for i, w in enumerate(qw) if not any(s.start <= i < s.end for s in spans)]
    return " ".join(keep)


def _answers(graph: Adjacency, catalog: Catalog, named: list[str], question: str,
             params: PropagationParams) -> dict[str, tuple[float, Step, bool]]:
    """The notes a "Who …?" question's named notes link to (either way): people first.
    Each gets (score, the link, strong): strong when the link states the relation asked
    with the person as its subject (or no relation is asked and it names a person). The
    score follows the link's type and direction (the propagation table, docs/DESIGN.md
    "Link types") and its weight."""
    asked = asked_relation(question)
    out: dict[str, tuple[float, Step, bool]] = {}
    steps = [s for x in named for s in graph.steps(x) if s.dst not in named and s.dst in catalog]
    kinds = {u: e.kind for u, e in catalog.entries(s.dst for s in steps).items()}
    for step in steps:
        dst = step.dst
        person = kinds[dst] in PERSON_KINDS
        if asked is not None:  # the link states it, with the other note as the subject
            strong = any(rel.answers(asked) and (from_subject if step.direction == "backlinks" else not from_subject)
                         for rel, from_subject in relations_of(step.link.description))
        else:
            strong = person
        if not (person or strong):
            continue
        rule = params.table.get((step.link.link_type, step.direction))
        score = (rule.weight if rule else 0.4) * step.link.weight * (1.0 if strong else 0.5)
        if dst not in out or score > out[dst][0]:
            out[dst] = (score, step, strong)
    return out


def _people(catalog: Catalog, uris: Iterable[str]) -> set[str]:
    return {u for u, e in catalog.entries(uris).items() if e.kind in PERSON_KINDS}


def _group(graph: Adjacency, order: list[str], k: int, link_types: LinkTypeTable) -> dict[str, str]:
    """Notes derived from a page that ranks above them go under that page (uri -> page),
    so one source does not take five slots with its fragments. A derived note that ranks
    above its page keeps its own place: it is the better answer."""
    provenance = link_types.role("provenance")
    above: set[str] = set()
    out: dict[str, str] = {}
    derived = graph.out_edges_of_type(order[: 4 * k], provenance)  # (only those records are read)
    for uri in order[: 4 * k]:
        for edge in derived[uri]:
            if edge.to_uri in above and edge.to_uri not in out:
                out[uri] = edge.to_uri
                break
        above.add(uri)
    return out


def _snippet(vault: Vault, uri: str, query_tokens: set[str], anchored: list[StoredLink]) -> str:
    """The best window of the note's text, with its outgoing links that have an anchor
    there rendered inside it."""
    try:
        body = vault.read_body(uri)
    except (OSError, MemlinkError):
        return ""
    window = snippet(body, query_tokens)
    return render_links(window, [l for l in anchored if l.match_text and l.match_text in window]).text


class SearchLogEntry(BaseModel):
    """One line of `.memlink/search-log.jsonl`."""

    q: str
    hits: int
    best_vector: float
    at: str


SEARCH_LOG_MAX = 1_000_000  # bytes (~10k searches); past it the log keeps its newer half


def _log_query(vault: Vault, query: str, ranked: list[str], found: dict[str, list[Route]]) -> None:
    """Interactive searches are logged (`.memlink/search-log.jsonl`) so the dream can spot
    topics searched often but poorly covered. A read-only vault writes no log."""
    if vault.read_only:
        return
    best = max((r.score for u in ranked[:5] for r in found.get(u, []) if r.kind == "vector"), default=0.0)
    entry = SearchLogEntry(q=" ".join(query.split()), hits=len(ranked), best_vector=round(best, 3),
                           at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))
    path = vault.state_dir / "search-log.jsonl"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(f"{path}.lock"):
            keep_newest(path, SEARCH_LOG_MAX)
            append_jsonl(path, [entry], lock=False)
    except OSError:
        pass  # a log is a help; searching goes on
