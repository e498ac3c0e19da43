"""Dual-route recall over turn memories (seed 002 §三–四).

- Summary route: the query's embedding against the turn summaries (hnswlib), above a
  similarity floor; when the query embeds to nothing, a strict whole-phrase lexical match.
- Graph route: terms the query names literally seed the search (else the ends of the
  summary hits' triples); label-propagation communities of those terms bound the
  candidates; Personalized PageRank inside them ranks terms, which map back to turns.
- Reciprocal-rank fusion of both; nothing is returned when nothing passes the floors, so
  an unrelated question recalls nothing. Hits carry the exact original Q/A and the triples
  that explain the route; turns whose sources are already visible are left out."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from ..embed import load_embedder, nonzero
from ..index.vectors import VectorIndex
from ..text import tokenize
from .store import TurnStore, norm_term, term_id

SUMMARY_FLOOR = 0.5
RRF_K = 10
FALLBACK_WEIGHT = 0.25  # graph hits from second-hand seeds (the summary hits' triples) vote less


@dataclass
class RecallHit:
    memory_id: str
    session: str
    sources: list[str]
    summary: str
    question: str
    answer: str
    score: float
    routes: list[str] = field(default_factory=list)
    triples: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        return dict(self.__dict__, route="; ".join(self.routes), score=round(self.score, 4))


def label_propagation(g: nx.Graph) -> dict[str, str]:
    """Deterministic label propagation: nodes in sorted order, each takes the label most
    common among its neighbours (by edge weight), ties broken by the smallest label;
    at most as many rounds as nodes."""
    labels = {n: n for n in g.nodes}
    order = sorted(g.nodes)
    for _ in range(max(1, len(order))):
        changed = False
        for node in order:
            votes: dict[str, float] = defaultdict(float)
            for nb, data in g[node].items():
                votes[labels[nb]] += data.get("weight", 1.0)
            if not votes:
                continue
            best = max(votes.values())
            label = min(l for l, v in votes.items() if v == best)
            if label != labels[node] and (votes.get(labels[node], 0) < best or label < labels[node]):
                labels[node] = label
                changed = True
        if not changed:
            break
    return labels


class TurnMemory:
    """Everything recall needs for one vault, built once and dropped on every write."""

    def __init__(self, vault, embedder=None):
        self.vault = vault
        self.turns = {t["id"]: t for t in TurnStore(vault).all()}
        self.embedder = embedder or load_embedder(vault.config.embedding.model).embedder
        ids = sorted(self.turns)
        vectors = self.embedder.encode([self.turns[i]["summary"] for i in ids]) if ids else np.zeros((0, self.embedder.dims))
        self.vectors = VectorIndex(self.embedder.dims, capacity=max(16, len(ids)))
        self.vectors.put_many([(i, vectors[n : n + 1]) for n, i in enumerate(ids)])
        self.g = nx.Graph()
        self.term_text: dict[str, str] = {}
        self.term_turns: dict[str, set[str]] = defaultdict(set)
        speaker = {term_id("user"), term_id("i"), term_id("assistant")}
        for mem_id, turn in self.turns.items():
            for t in turn["triples"]:
                a, b = t["subject_id"], t["object_id"]
                for tid, text in ((a, t["subject"]), (b, t["object"])):
                    if tid not in speaker:
                        self.term_text[tid] = text
                        self.term_turns[tid].add(mem_id)
                        self.g.add_node(tid)
                if a in speaker or b in speaker:
                    continue  # the speaker would tie every term into one community
                w = self.g[a][b]["weight"] + 1 if self.g.has_edge(a, b) else 1  # repeated evidence adds up
                self.g.add_edge(a, b, weight=w)
        self.community = label_propagation(self.g)
        self._tokens: dict[str, set[str]] = {}

    @classmethod
    def for_vault(cls, vault) -> "TurnMemory":
        with vault.cache_lock:
            mem = vault.cache.get("turn_memory")
            if mem is None:
                mem = cls(vault)
                vault.cache["turn_memory"] = mem
            return mem

    # -- routes -------------------------------------------------------------------------------
    def summary_route(self, query: str, k: int, skip: set[str]) -> list[tuple[str, float, str]]:
        """Vector hits above the floor, then strict lexical matches the vectors missed."""
        hits: list[tuple[str, float, str]] = []
        vec = self.embedder.encode([query])[0]
        if nonzero(vec[None, :])[0]:
            hits = [(m, s, "summary") for m, s, _ in self.vectors.query(vec, k + len(skip))
                    if s >= SUMMARY_FLOOR and m not in skip][:k]
        have = {m for m, _, _ in hits}
        hits += [(m, s, "lexical") for m, s in self.lexical(query, k + len(skip)) if m not in have and m not in skip]
        return hits[:k]

    def lexical(self, query: str, k: int) -> list[tuple[str, float]]:
        """Strict lexical match: every word of the question occurs in the turn's question
        or summary (stemmed; CJK by characters and pairs)."""
        wanted = set(tokenize(query))
        if not wanted:
            return []
        hits = []
        for m, t in self.turns.items():
            have = self._tokens.get(m)
            if have is None:
                have = self._tokens[m] = set(tokenize(t["question"] + " " + t["summary"]))
            if wanted <= have:
                hits.append((m, 1.0))
        return sorted(hits, key=lambda h: self.turns[h[0]]["ts"], reverse=True)[:k]

    def literal_terms(self, query: str) -> list[str]:
        """Terms the question names: the whole term, or one of its words when that word is a
        name in the question (capitalised, or CJK)."""
        flat = " " + re.sub(r"[^\w\u4e00-\u9fff]+", " ", query).strip() + " "
        low = flat.lower()
        names = {w.lower() for w in flat.split() if (w[:1].isupper() and len(w) >= 3) or re.search(r"[\u4e00-\u9fff]", w)}
        out = []
        for tid, text in self.term_text.items():
            t = norm_term(text).lower()
            if len(t) < 2:
                continue
            cjk = bool(re.search(r"[\u4e00-\u9fff]", t))
            if (cjk and t in low) or f" {t} " in low or (names & set(t.split())):
                out.append(tid)
        return out

    def graph_route(self, seeds: list[str], k: int) -> list[tuple[str, float, list[dict]]]:
        if not seeds:
            return []
        communities = {self.community.get(s) for s in seeds}
        members = [n for n in self.g.nodes if self.community.get(n) in communities]
        sub = self.g.subgraph(members)
        pers = {s: 1.0 for s in seeds if s in sub}
        if not pers:
            return []
        ranks = nx.pagerank(sub, alpha=0.85, personalization=pers, weight="weight", tol=1e-10, max_iter=300)
        scores: dict[str, float] = defaultdict(float)
        why: dict[str, list[dict]] = defaultdict(list)
        for term, r in ranks.items():
            for mem in self.term_turns.get(term, ()):
                scores[mem] += r
        for mem in scores:
            why[mem] = [t for t in self.turns[mem]["triples"] if t["subject_id"] in pers or t["object_id"] in pers] or \
                self.turns[mem]["triples"][:2]
        ranked = sorted(scores, key=lambda m: -scores[m])[:k]
        return [(m, scores[m], why[m]) for m in ranked]

    def recall(self, query: str, *, k: int = 5, session: str | None = None, visible: set[str] | None = None) -> list[RecallHit]:
        if not self.turns or not query.strip():
            return []
        visible = visible or set()
        skip = {m for m, t in self.turns.items() if set(t["sources"]) <= visible or (session and t["session"] != session)}
        summary = self.summary_route(query, k * 3, skip)
        seeds = self.literal_terms(query)
        graph_kind = "graph (terms in the question)"
        graph_weight = 1.0
        if not seeds and summary:
            seeds = sorted({t[end] for m, _, _ in summary[:3] for t in self.turns[m]["triples"]
                            for end in ("subject_id", "object_id")} & set(self.term_text))
            graph_kind = "graph (from the summary hits)"
            graph_weight = FALLBACK_WEIGHT  # second-hand seeds: a weaker vote than terms the user named
        graph = self.graph_route(seeds, k * 3)
        fused: dict[str, float] = defaultdict(float)
        routes: dict[str, list[str]] = defaultdict(list)
        explain: dict[str, list[dict]] = {}
        for rank, (m, s, how) in enumerate(summary, 1):
            fused[m] += 1 / (RRF_K + rank) + 1e-6  # a direct summary hit wins a tie
            routes[m].append(f"{how} #{rank} ({s:.2f})")
        graph = [g for g in graph if g[0] not in skip]
        for rank, (m, s, why) in enumerate(graph, 1):
            fused[m] += graph_weight / (RRF_K + rank)
            routes[m].append(f"{graph_kind} #{rank}")
            explain[m] = why
        hits = []
        for m in sorted(fused, key=lambda x: -fused[x]):  # turns already in the window were skipped
            t = self.turns[m]
            hits.append(RecallHit(m, t["session"], t["sources"], t["summary"], t["question"], t["answer"], fused[m],
                                  routes[m], explain.get(m, [])))
            if len(hits) >= k:
                break
        return hits
