"""Hybrid search (seed 000 §3.5.1): vector + keyword hits fused by reciprocal rank → seeds
→ typed propagation over links and backlinks → α-merge → forced one-hop follow of
contradicts / evolved_from → optional backlink boost (GBrain). Each hit says how it was
found and carries a snippet with its outgoing links rendered (§3.2.4)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .config import SearchConfig
from .errors import MemlinkError
from .graph import LinkGraph, PropagationParams, Step
from .index import SearchIndex
from .links import LinkType
from .render import render_links
from .text import snippet, tokenize


@dataclass
class Route:
    kind: str  # "vector" | "keyword" | "graph" | "forced"
    rank: int = 0
    score: float = 0.0
    via: Step | None = None

    def describe(self) -> str:
        if self.kind in ("vector", "keyword"):
            return f"{self.kind} #{self.rank} ({self.score:.2f})"
        arrow = "→" if self.via.direction == "links" else "←"
        verb = "always follows" if self.kind == "forced" else "via"
        return f"graph {verb} {self.via.link.link_type.value} {arrow} from {self.via.src}"


@dataclass
class SearchHit:
    uri: str
    title: str
    memory_type: str
    score: float
    routes: list[Route] = field(default_factory=list)
    snippet: str = ""

    @property
    def route(self) -> str:
        return "; ".join(r.describe() for r in self.routes)

    def to_json(self) -> dict:
        return {
            "uri": self.uri,
            "title": self.title,
            "memory_type": self.memory_type,
            "score": round(self.score, 4),
            "route": self.route,
            "routes": [
                {"kind": r.kind, "rank": r.rank, "score": round(r.score, 4)}
                | ({"from": r.via.src, "link_type": r.via.link.link_type.value, "direction": r.via.direction} if r.via else {})
                for r in self.routes
            ],
            "snippet": self.snippet,
        }


def propagation_params(cfg: SearchConfig) -> PropagationParams:
    return PropagationParams(
        damping=cfg.damping,
        depth=cfg.depth,
        min_link_weight=cfg.min_link_weight,
        forced_follow=tuple(LinkType(t) for t in cfg.forced_follow),
    )


def rrf(ranked_lists: list[list[str]], k: int) -> dict[str, float]:
    """Reciprocal rank fusion: Σ 1 / (k + rank) over the lists a document appears in."""
    out: dict[str, float] = {}
    for ranked in ranked_lists:
        for rank, uri in enumerate(ranked, 1):
            out[uri] = out.get(uri, 0.0) + 1.0 / (k + rank)
    return out


def search(
    vault,
    query: str,
    *,
    k: int = 10,
    types: set[str] | None = None,
    use_graph: bool = True,
    routes: tuple[str, ...] = ("vector", "keyword"),
    index: SearchIndex | None = None,
    snippets: bool = True,
    log: bool = False,
) -> list[SearchHit]:
    cfg = vault.config.search
    index = index or SearchIndex.for_vault(vault)
    catalog = vault.catalog()
    n = max(cfg.candidates, k)

    found: dict[str, list[Route]] = {}
    ranked_lists = []
    if "vector" in routes:
        vec = [(u, s) for u, s in index.vector_search(query, n) if s >= cfg.min_vector_similarity]
        ranked_lists.append([u for u, _ in vec])
        for rank, (uri, sim) in enumerate(vec, 1):
            found.setdefault(uri, []).append(Route("vector", rank, sim))
    if "keyword" in routes:
        kw = index.keyword_search(query, n)
        ranked_lists.append([u for u, _ in kw])
        for rank, (uri, score) in enumerate(kw, 1):
            found.setdefault(uri, []).append(Route("keyword", rank, score))
    fused = rrf(ranked_lists, cfg.rrf_k)
    if not fused:
        if log:
            _log_query(vault, query, [], found)
        return []
    top = max(fused.values())
    base = {u: s / top for u, s in fused.items()}  # best hit = 1.0, comparable with propagation

    final: dict[str, float] = {}
    seeds = dict(sorted(base.items(), key=lambda kv: -kv[1])[: cfg.seeds])
    graph = LinkGraph.for_vault(vault) if use_graph else None
    if graph is not None:
        params = propagation_params(cfg)
        spread = graph.propagate(seeds, params)
        # Every search hit is in the seed set of §3.5.1 (only the strongest spread score).
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

    def allowed(uri: str) -> bool:
        entry = catalog.get(uri)
        return entry is not None and not entry.error and (not types or entry.memory_type in types)

    for uri in final:  # superseded knowledge (a review kept another note) ranks lower
        entry = catalog.get(uri)
        if entry is not None and entry.superseded:
            final[uri] *= 0.5
    if graph is not None and cfg.backlink_boost:
        for uri in final:
            final[uri] *= 1.0 + 0.05 * math.log(1 + graph.backlink_count(uri))
    ranked = [u for u in sorted(final, key=lambda u: -final[u]) if allowed(u)][:k]

    # Contradictions and newer/older versions of a hit are never left out (§3.2.7.3): they
    # follow the top k, so they add to the results without pushing a search hit out.
    if graph is not None:
        params = propagation_params(cfg)
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
    query_tokens = set(tokenize(query))
    hits = []
    for uri in ranked:
        entry = catalog[uri]
        hit = SearchHit(uri, entry.title, entry.memory_type, final[uri], found.get(uri, []))
        if snippets:
            hit.snippet = _snippet(vault, uri, query_tokens)
        hits.append(hit)
    return hits


def _snippet(vault, uri: str, query_tokens: set[str]) -> str:
    """The best window of the note's text, with its outgoing links rendered inside it."""
    try:
        body = vault.read_body(uri)
    except (OSError, MemlinkError):
        return ""
    window = snippet(body, query_tokens)
    return render_links(window, vault.get_file_links(uri, "links")).text


def _log_query(vault, query: str, ranked: list[str], found: dict) -> None:
    """Interactive searches are logged (`.memlink/search-log.jsonl`) so the dream can spot
    topics searched often but poorly covered."""
    import datetime as dt
    import json

    best = max((r.score for u in ranked[:5] for r in found.get(u, []) if r.kind == "vector"), default=0.0)
    entry = {"q": " ".join(query.split()), "hits": len(ranked), "best_vector": round(best, 3),
             "at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
    try:
        vault.state_dir.mkdir(exist_ok=True)
        with open(vault.state_dir / "search-log.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry, ensure_ascii=False) + "\n")
    except OSError:
        pass  # a log is a help; searching goes on
