"""Recall over turn memories (docs/DESIGN.md, "Turn memory"; its fusion: "Search").

- Keyword route: BM25 (tantivy) over what was said — the whole turn, its date and its
  neighbours in the session.
- Vector route: the question's embedding against each turn's own text (hnswlib).
- The two are fused by score: BM25 relative to the best BM25 hit, plus the cosine. The
  weights were measured on real long conversations (benchmarks/locomo.py).
- Graph route: terms the question names (real entities: not a greeting, not a name that
  occurs all over the history) seed Personalized PageRank in their label-propagation
  community; terms map back to turns. It adds a small bonus, so it never lifts a turn
  above a clearly stronger direct hit.
- Nothing is returned when nothing matches well enough (the evidence gate below), so an
  unrelated question recalls nothing. Ties break by turn id: the same store and question
  give the same answer in every process. Hits carry the exact original messages; turns
  whose sources are already visible are left out."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

from ..errors import MemlinkError
from ..index.embed import cosine_shift
from ..model.text import content_tokens, has_cjk, tokenize
from ..retrieve.fusion import RouteHits, fuse
from ..storage.atomic import full_disk_cause
from .communities import label_propagation
from .store import lost_sessions, norm_term
from .turnindex import TurnIndex, pagerank, question_keys

if TYPE_CHECKING:
    from ..index.embed import Embedder
    from ..storage.vault import Vault

__all__ = ["RecallHit", "RecallParams", "TurnMemory", "label_propagation"]

@lru_cache(maxsize=8192)
def _frame_word(word: str) -> bool:
    """A question word, stop word or greeting ("What", "Did", "Hey"): never a name."""
    return not content_tokens(word)


@dataclass
class RecallParams:
    """The recall model's knobs; defaults are the measured ones (benchmarks/locomo.py)."""

    keyword: bool = True
    vector: bool = True
    graph: bool = True
    vector_weight: float = 1.0  # cosine added to BM25 / best BM25
    own_weight: float = 0.3  # BM25 over the turn alone, added: its own words outrank its neighbours'
    graph_weight: float = 0.1  # at most this much for the best graph hit
    depth: int = 50  # candidates taken from each route
    seed_share: float = 0.02  # a term in more than this share of turns seeds nothing ...
    word_share: float = 0.05  # ... nor a match on words all in more than this share of indexed turns
    min_evidence: float = 0.7  # coverage + cosine the best hits need for anything to be recalled


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


class TurnMemory:
    """Recall for one vault: the persisted turn indexes, opened once per vault object and
    dropped on every turn write (the next open syncs what changed)."""

    def __init__(self, vault: Vault, embedder: Embedder | None = None, params: RecallParams | None = None) -> None:
        self.vault = vault
        if lost_sessions(vault):  # "deleting .memlink/ is safe": lost turn memories come back first
            from .importer import restore_turns  # importer imports the extraction stack: only then

            try:
                restore_turns(vault)
            except (OSError, MemlinkError) as exc:  # a full disk: recall what there is; made at a later recall
                if full_disk_cause(exc) is None:
                    raise
                vault.warnings.append("the disk is full: the turn memories of sessions that have none are made at a "
                                      "later recall")
        self.mark = vault.store.mark()
        self.index = TurnIndex(vault, embedder).open()
        self.embedder = self.index.embedder
        self.params = params or RecallParams()

    def _follow_the_store(self) -> None:
        """Turn memories written since the index was opened (an extraction in this process
        or another, an import) are in the store's change feed: the index syncs them."""
        since = self.vault.store.since(self.mark)
        self.mark = since.mark
        if since.any("turn-memories"):
            self.index = TurnIndex(self.vault, self.embedder).open()

    @property
    def turns(self) -> Mapping[str, dict]:
        return self.index.turns

    @property
    def term_text(self) -> dict[str, str]:
        return self.index.term_text()

    @classmethod
    def for_vault(cls, vault: Vault) -> TurnMemory:
        """The vault's turn memory, kept with the vault (dropped when turns are written:
        the next one syncs what changed)."""
        return vault.shared(TurnMemory, TurnMemory)

    # -- graph route ----------------------------------------------------------------------------
    def literal_terms(self, query: str) -> list[str]:
        """Terms the question names: the whole term, or one of its words when that word is
        a name in the question (capitalised, or CJK). What matches must be rare: a term
        found all over the history, or a match on a word that is (a speaker's name, a
        greeting before it: "Woah Joanna"), seeds nothing. Only terms sharing a word (or a
        CJK character) with the question are read."""
        flat = " " + re.sub(r"[^\w]+", " ", query).strip() + " "  # \w holds every script's letters
        low = flat.lower()
        names = {w.lower() for w in flat.split()
                 if ((w[:1].isupper() and len(w) >= 3) or has_cjk(w)) and not _frame_word(w)}
        limit = max(2, self.params.seed_share * len(self.turns))
        out = []
        for tid, text, n_turns in self.index.terms_named(question_keys(low)):
            t = norm_term(text).lower()
            if len(t) < 2 or n_turns > limit or _frame_word(t.split()[0]):
                continue
            if (has_cjk(t) and t in low) or f" {t} " in low:
                matched = t.split()
            else:
                matched = sorted(names & set(t.split()))
            # A word said in two turns is indexed in up to six (each turn and its neighbours).
            if matched and min(self.index.doc_freq(matched).values()) <= max(6, self.params.word_share * len(self.turns)):
                out.append(tid)
        return out

    def graph_route(self, seeds: list[str], k: int) -> list[tuple[str, float, list[dict]]]:
        """Personalized PageRank from the seeds over their communities' part of the term
        graph (read for this question alone); terms map back to the turns naming them."""
        if not seeds:
            return []
        members, edges = self.index.community_graph(seeds)
        pers = {s: 1.0 for s in seeds if s in set(members)}
        if not pers:
            return []
        ranks = pagerank(members, edges, pers, alpha=0.85, tol=1e-10, max_iter=300)
        turns_of = self.index.term_turns(members)
        scores: dict[str, float] = defaultdict(float)
        for term in sorted(ranks):
            for mem in turns_of.get(term, ()):
                scores[mem] += ranks[term]
        ranked: list[str] = []
        for m in sorted(scores, key=lambda m: (-scores[m], m)):  # read turns only until k are found
            if len(ranked) == k:
                break
            if m in self.turns:
                ranked.append(m)
        out = []
        for m in ranked:
            triples = self.turns[m]["triples"]
            why = [t for t in triples if t["subject_id"] in pers or t["object_id"] in pers] or triples[:2]
            out.append((m, scores[m], why))
        return out

    # -- recall ---------------------------------------------------------------------------------
    def recall(self, query: str, *, k: int = 5, session: str | None = None, visible: set[str] | None = None) -> list[RecallHit]:
        p = self.params
        self._follow_the_store()
        if not self.turns or not query.strip():
            return []
        visible = visible or set()

        def usable(m: str) -> bool:
            t = self.turns.get(m)  # None: dropped by another process since this index was read
            return t is not None and not set(t["sources"]) <= visible and not (session and t["session"] != session)

        depth = p.depth + len(visible) + (len(self.turns) if session else 0)
        tokens = tokenize(query)
        vec = self.embedder.encode([query])[0]
        # Both routes are always asked: the evidence gate weighs both, whichever rank.
        keyword = [(m, s) for m, s in self.index.keyword_hits(tokens, depth, p.own_weight) if usable(m)][: p.depth]
        vector = [(m, s) for m, s in self.index.vector_hits(vec, depth) if usable(m)][: p.depth]
        cos = self.index.cosines(vec, sorted({m for m, _ in keyword} | {m for m, _ in vector}))
        if not self._relevant(query, keyword, cos):
            return []
        keyword, vector = keyword if p.keyword else [], vector if p.vector else []
        routes: dict[str, list[str]] = defaultdict(list)
        for rank, (m, s) in enumerate(keyword, 1):
            routes[m].append(f"keyword #{rank} ({s:.2f})")
        for rank, (m, s) in enumerate(vector, 1):
            routes[m].append(f"vector #{rank} ({s:.2f})")
        # By score, not rank (docs/DESIGN.md, "Search"): BM25 relative to its best hit, the
        # cosine of every candidate either route found, a graph bonus relative to its best.
        fusing = [RouteHits(keyword, "max")]
        if p.vector:
            fusing.append(RouteHits([(m, cos.get(m, 0.0)) for m in routes], "raw", p.vector_weight))
        explain: dict[str, list[dict]] = {}
        if p.graph:
            graph = [g for g in self.graph_route(self.literal_terms(query), p.depth) if usable(g[0])]
            fusing.append(RouteHits([(m, s) for m, s, _ in graph], "max", p.graph_weight))
            for rank, (m, _s, why) in enumerate(graph, 1):
                routes[m].append(f"graph (terms in the question) #{rank}")
                explain[m] = why
        fused = fuse(fusing)
        ranked = sorted(fused, key=lambda m: (-fused[m], m))[:k]
        hits = []
        for m in ranked:
            t = self.turns[m]
            hits.append(RecallHit(m, t["session"], t["sources"], t["summary"], t["question"], t["answer"], fused[m],
                                  routes[m], explain.get(m, [])))
        return hits

    def _relevant(self, query: str, keyword: list[tuple[str, float]], cos: dict[str, float]) -> bool:
        """The evidence gate: the best keyword hits' coverage of the question's content
        words (the share of their idf they match: rare words count more, a word the
        history never used counts most; the frame of a question — "what did we say
        about" — counts neither way) plus the best cosine must reach ``min_evidence`` (plus the
        model's ``cosine_shift``: docs/DESIGN.md, "Search": the embedding model).
        Measured on real and on unrelated questions in benchmarks/locomo.py."""
        coverage = 0.0
        tokens = content_tokens(query)
        if keyword and tokens:
            idf = self.index.idf(tokens)
            total = sum(idf.values())
            for m, _ in keyword[:5]:
                have = self.index.tokens_of(m)
                coverage = max(coverage, sum(v for t, v in idf.items() if t in have) / total)
        return coverage + max(cos.values(), default=0.0) >= self.params.min_evidence + cosine_shift(self.embedder)
