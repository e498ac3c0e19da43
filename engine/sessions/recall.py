"""Recall over turn memories (docs/DESIGN.md, "Turn memory"; its fusion: "Search").

- Keyword route: BM25 (tantivy) over what was said — the whole turn, its date and its
  neighbours in the session.
- Vector route: the question's embedding against each turn's own text (hnswlib).
- The two are fused by score: BM25 relative to the best BM25 hit, scaled by how much of
  the question the hit holds, plus twice the cosine, so a turn that means what was asked
  beats one sharing a common word with it. The weights were measured on real long
  conversations and real messaging chats (benchmarks/locomo.py).
- Near words: a question word the history hardly uses ("ceramics" where it says
  "pottery") is looked for by the words nearest in meaning that it does use (the static
  model's own word vectors: engine.sessions.expansion), a second BM25 query adding a
  little to its hits.
- Graph route: terms the question names (real entities: not a greeting, not a name that
  occurs all over the history) seed Personalized PageRank in their label-propagation
  community; terms map back to turns. It adds a small bonus, so it never lifts a turn
  above a clearly stronger direct hit.
- Nothing is returned when nothing matches well enough (the evidence gate below), so an
  unrelated question recalls nothing; a strong hit on either route is always recalled.
- Within a message budget, a long turn (a burst of messages) gives its best window of
  messages, cut to those holding the question's words and the reply, rather than
  costing the whole budget.
- Ties break by turn id: the same store and question give the same answer in every
  process. Hits carry the exact original messages; turns whose sources are already
  visible are left out."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

from ..errors import MemlinkError
from ..extract.rules import NOT_NAMES, day_of
from ..index.embed import cosine_shift, query_vector, reads
from ..model.text import content_tokens, has_cjk, printable, tokenize
from ..model.uris import PROFILE_URI
from ..retrieve.fusion import RouteHits, fuse
from ..storage.atomic import full_disk_cause
from .communities import label_propagation
from .events import MEMORY_ANSWER
from .expansion import WORDS, held_in_meaning, near_words
from .log import message_text, read_events
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
    """The recall model's knobs; defaults are the measured ones (benchmarks/locomo.py, on
    LoCoMo and REALTALK, each split into a part tuned on and a part held out)."""

    keyword: bool = True
    vector: bool = True
    graph: bool = True
    vector_weight: float = 2.0  # cosine × this, added to the keyword score: a close meaning beats a few shared words
    coverage_power: float = 0.5  # keyword score: BM25 / best BM25 × (the hit's share of the question) ** this
    own_weight: float = 0.3  # BM25 over the turn alone, added: its own words outrank its neighbours'
    graph_weight: float = 0.1  # at most this much for the best graph hit
    depth: int = 50  # candidates taken from each route
    seed_share: float = 0.02  # a term in more than this share of turns seeds nothing ...
    word_share: float = 0.05  # ... nor a match on words all in more than this share of indexed turns
    min_evidence: float = 0.75  # coverage + cosine the best hits need for anything to be recalled ...
    named_evidence: float = 0.3  # ... when the question names someone the history is about (a speaker)
    about_share: float = 0.35  # a name in this share of the indexed turns is someone the history is about
    strong_cosine: float = 0.6  # a best cosine this high is recalled whatever the keywords say ...
    strong_coverage: float = 0.9  # ... and so is a keyword hit holding this much of the question
    near_weight: float = 0.3  # the route on words near in meaning to a rare question word: this much for its best hit ...
    rare_turns: int = 3  # ... a word in at most this many indexed turns ("ceramics" where the history says "pottery") ...
    near_words: int = 5  # ... gives at most this many words the history holds ...
    near_cosine: float = 0.5  # ... each this close to it by the static model's word vectors (engine.sessions.expansion)
    meaning_weight: float = 1.0  # the share of the question's words a turn holds in meaning (its words' nearest), times this ...
    meaning_cosine: float = 0.2  # ... a word nearer than this to none of the turn's counting for nothing
    window: int = 6  # within a message budget, a longer turn gives its best window of this many messages, cut (``_window``)


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
    when: str = ""  # the turn's time stamp, as written in its log
    speakers: list[str] = field(default_factory=list)  # who spoke in it, where the chat names them

    def day(self) -> str:
        """The day it was said (ISO), or its time stamp as written when that names no day."""
        said = day_of(self.when)
        return said.isoformat() if said else self.when

    def to_json(self) -> dict:
        # (a sender's name is the export's data: no terminal escape reaches a script that prints it)
        return dict(self.__dict__, route="; ".join(self.routes), score=round(self.score, 4),
                    speakers=[printable(s) for s in self.speakers])


def said(vault: Vault, hits: list[RecallHit]) -> list[list[tuple[str, str]]]:
    """Each recalled turn's words as (who, text): each of its messages with its speaker's
    name where the chat names who spoke (a WhatsApp, Telegram or group chat: read from its
    session log, once a session), else the question (Q) and the answer (A), the one that
    was said (a question not answered has no A)."""
    logs: dict[str, list] = {}
    out = []
    for hit in hits:
        messages = []
        if hit.speakers:
            if hit.session not in logs:
                logs[hit.session] = read_events(vault, hit.session)
            wanted = set(hit.sources)
            messages = [e for e in logs[hit.session] if e.key in wanted and e.kind != MEMORY_ANSWER]
        out.append([(e.speaker or e.role, message_text(e)) for e in messages]
                   or [(who, text) for who, text in (("Q", hit.question), ("A", hit.answer)) if text])
    return out


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
    def recall(self, query: str, *, k: int = 5, messages: int | None = None, session: str | None = None,
               visible: set[str] | None = None) -> list[RecallHit]:
        """The best ``k`` turns for ``query``; with ``messages``, the best turns and windows
        of turns holding at most that many messages in all (``k`` is then not used): a
        turn of 12 messages costs 12."""
        p = self.params
        self._follow_the_store()
        if not self.turns or not query.strip():
            return []
        visible = visible or set()
        said, unnamed = query, self._unnamed(query)
        query = unnamed if content_tokens(unnamed) else query  # (a question of her name alone: as asked)

        def usable(m: str) -> bool:
            t = self.turns.get(m)  # None: dropped by another process since this index was read
            return t is not None and not set(t["sources"]) <= visible and not (session and t["session"] != session)

        depth = p.depth + len(visible) + (len(self.turns) if session else 0)
        tokens = tokenize(query)
        read = reads(self.embedder, query)  # (a question in a script the model was not trained on: by its words alone)
        vec = query_vector(self.embedder, query)
        # Both routes are always asked: the evidence gate weighs both, whichever rank.
        keyword = [(m, s) for m, s in self.index.keyword_hits(tokens, depth, p.own_weight) if usable(m)][: p.depth]
        vector = [(m, s) for m, s in self.index.vector_hits(vec, depth) if usable(m)][: p.depth]
        cos = self.index.cosines(vec, sorted({m for m, _ in keyword} | {m for m, _ in vector}))
        content = content_tokens(query)
        idf = self.index.idf(content) if content else {}
        covered = self._coverage(keyword[:5], idf)
        if not self._relevant(said, covered, cos, read, owner=unnamed != said):
            return []
        keyword, vector = keyword if p.keyword else [], vector if p.vector else []
        routes: dict[str, list[str]] = defaultdict(list)
        for rank, (m, s) in enumerate(keyword, 1):
            routes[m].append(f"keyword #{rank} ({s:.2f})")
        for rank, (m, s) in enumerate(vector, 1):
            routes[m].append(f"vector #{rank} ({s:.2f})")
        # By score, not rank (docs/DESIGN.md, "Search"): a keyword hit's BM25 relative to the
        # best one times how much of the question it holds (a hit on one common word is weak,
        # however it ranks), the cosine of every candidate either route found, a graph bonus
        # relative to its best.
        floor = min(covered.values(), default=1.0)  # (below the top five: as the least of them)
        top = keyword[0][1] if keyword else 0.0
        fusing = [RouteHits([(m, s / top * covered.get(m, floor) ** p.coverage_power) for m, s in keyword], "raw")]
        if p.vector:
            fusing.append(RouteHits([(m, cos.get(m, 0.0)) for m in routes], "raw", p.vector_weight))
        explain: dict[str, list[dict]] = {}
        if p.graph:
            graph = [g for g in self.graph_route(self.literal_terms(query), p.depth) if usable(g[0])]
            fusing.append(RouteHits([(m, s) for m, s, _ in graph], "max", p.graph_weight))
            for rank, (m, _s, why) in enumerate(graph, 1):
                routes[m].append(f"graph (terms in the question) #{rank}")
                explain[m] = why
        if p.keyword and p.near_weight and read:
            near = [(m, s) for m, s in self.index.keyword_hits(self._near_tokens(query, tokens), depth, p.own_weight)
                    if usable(m)][: p.depth]
            for rank, (m, s) in enumerate(near, 1):
                routes[m].append(f"near words #{rank} ({s:.2f})")
            fusing.append(RouteHits(near, "max", p.near_weight))
        asked = self._asked(query, idf) if p.meaning_weight and read else {}
        if asked:  # (the best ``depth`` so far: what it can lift into the top)
            first = fuse(fusing)
            best = sorted(first, key=lambda m: (-first[m], m))[: p.depth]
            meant = held_in_meaning(self.embedder, asked, {m: f"{self.turns[m]['question']}\n{self.turns[m]['answer']}" for m in best}, p.meaning_cosine)
            meant = {m: share for m, share in meant.items() if share > 0}
            for m, share in meant.items():
                routes[m].append(f"its words near the question's ({share:.2f})")
            fusing.append(RouteHits(list(meant.items()), "raw", p.meaning_weight))
        fused = fuse(fusing)
        ranked = sorted(fused, key=lambda m: (-fused[m], m))
        hits = []
        for m, part in (self._within(ranked, messages, idf, asked) if messages is not None else
                        [(m, None) for m in ranked[:k]]):
            t = self.turns[m]
            sources, question, answer = (t["sources"], t["question"], t["answer"]) if part is None else part
            hits.append(RecallHit(m, t["session"], sources, t["summary"], question, answer, fused[m], routes[m],
                                  explain.get(m, []), t.get("ts", ""), list(t.get("speakers") or [])))
        return hits

    def _near_tokens(self, query: str, tokens: list[str]) -> list[str]:
        """Tokens of words near in meaning to the question's rare words (in at most
        ``rare_turns`` indexed turns, or none), that the history holds in few enough turns
        to tell turns apart (``word_share``), and the question does not."""
        p = self.params
        words = _question_words(query)
        stems = {w: tokenize(w) for w in words}
        seen, _ = self.index.keywords.doc_freq(sorted({t for ts in stems.values() for t in ts}), ("text",))
        rare = [w for w in words if stems[w] and max(seen[t] for t in stems[w]) <= p.rare_turns]
        have, out = set(tokens), {}
        for near in near_words(self.embedder, rare, 2 * p.near_words, p.near_cosine).values():
            new = [t for t in dict.fromkeys(t for w in near for t in tokenize(w)) if t not in have]
            out.update(dict.fromkeys(new[: p.near_words]))
        if not out:
            return []
        held, n = self.index.keywords.doc_freq(sorted(out), ("own",))
        return [t for t in out if 0 < held[t] <= max(6, p.word_share * n)]

    @staticmethod
    def _asked(query: str, idf: dict[str, float]) -> dict[str, float]:
        """The question's content words and their weight, the idf of their tokens (what the
        words held in meaning are weighed by: engine.sessions.expansion.held_in_meaning)."""
        asked: dict[str, float] = {}
        for word in _question_words(query):
            weight = max((idf.get(t, 0.0) for t in tokenize(word)), default=0.0)
            if weight:
                asked[word] = weight
        return asked

    def _coverage(self, keyword: list[tuple[str, float]], idf: dict[str, float]) -> dict[str, float]:
        """Each keyword hit's share of the question's content words, by idf (rare words count
        more, a word the history never used counts most; the frame of a question — "what
        did we say about" — counts neither way). Nothing for a question of no content word."""
        total = sum(idf.values())
        if not total:
            return {}
        out = {}
        for m, _ in keyword:
            have = self.index.tokens_of(m)
            out[m] = sum(v for t, v in idf.items() if t in have) / total
        return out

    def _within(self, ranked: list[str], budget: int, idf: dict[str, float], asked: dict[str, float]
                ) -> list[tuple[str, tuple[list[str], str, str] | None]]:
        """The ranked turns, best first, while their messages fit in ``budget``: each gives
        its best window (``_window``: at most ``window`` messages, or what is left, cut to
        those holding the question's words, or the message holding most of them in meaning,
        and the reply); one whose messages cannot be told apart is taken whole or not at
        all."""
        out: list[tuple[str, tuple[list[str], str, str] | None]] = []
        left = budget
        for m in ranked:
            if left <= 0:
                break
            t = self.turns[m]
            size = min(len(t["sources"]), left, self.params.window)
            part = _window(t, size, self._message_scores(t, idf, asked))
            if part is None and size < len(t["sources"]):
                continue
            if part is not None and len(part[0]) == len(t["sources"]):
                part = None  # (the whole turn)
            out.append((m, part))
            left -= len(part[0]) if part is not None else size
        return out

    def _message_scores(self, turn: dict, idf: dict[str, float], asked: dict[str, float]) -> list[float] | None:
        """Each of a turn's messages' share of the question's words (by idf), the message
        holding most of them in meaning counting as holding them all; None when the turn's
        text cannot be split into its messages (a message holding a line break)."""
        lines = _lines(turn)
        if len(lines) != len(turn["sources"]):
            return None
        score = [float(sum(v for t, v in idf.items() if t in words)) for words in (set(tokenize(line)) for line in lines)]
        meant = held_in_meaning(self.embedder, asked, dict(enumerate(lines)), self.params.meaning_cosine) if asked else {}
        if meant and max(meant.values()) > 0:
            best = min(meant, key=lambda i: (-meant[i], i))
            score[best] += sum(asked.values())  # (a turn recalled for what a message means keeps that message)
        return score

    def _relevant(self, query: str, covered: dict[str, float], cos: dict[str, float], read: bool = True,
                  owner: bool = False) -> bool:
        """The evidence gate. Never closed when the best hit is strong on either route: a
        cosine of ``strong_cosine``, or a keyword hit holding ``strong_coverage`` of the
        question (``_coverage``). Else the best keyword hit's coverage plus the best cosine
        must reach ``min_evidence``, or only ``named_evidence`` when the question names
        someone the history is about (a speaker: "What are Paola's hobbies?" uses words a
        chat never does, and asks about it all the same; or the vault's owner, ``owner``). Cosines count less the model's
        ``cosine_shift`` (docs/DESIGN.md, "Search": the embedding model). Measured on real
        and on unrelated questions in benchmarks/locomo.py. A question the model does not
        read (``read`` False: no cosine) in Chinese, Japanese or Korean is closed only when
        the history holds none of its words: CJK characters are shared too widely for their
        share to tell more."""
        p = self.params
        coverage = max(covered.values(), default=0.0)
        if not read and has_cjk(query):
            return coverage > 0
        best = max(cos.values(), default=0.0) - cosine_shift(self.embedder)
        if best >= p.strong_cosine or coverage >= p.strong_coverage:
            return True
        return coverage + best >= (p.named_evidence if owner or self._names_someone(query) else p.min_evidence)

    def _names_someone(self, query: str) -> bool:
        """Whether the question names someone the history is about: a capitalised word (not
        a question word) found in ``about_share`` of the indexed turns, as a speaker's name is.
        (A question naming the vault's owner, ``_unnamed``, names someone too: she says "I"
        in the chats, "What glaze is Lena testing?")"""
        names = [w for w in re.findall(r"\w+", query) if w[:1].isupper() and len(w) >= 2 and not _frame_word(w)]
        if not names:
            return False
        floor = self.params.about_share * len(self.turns)
        return any(n >= floor for n in self.index.doc_freq(names).values())

    def _unnamed(self, query: str) -> str:
        """The question without the names of the vault's owner: her profile's name, its
        first word and her aliases, as written there (capitalised: "the rose" is no Rose;
        a month or weekday alone is no name here, "June" asks about June), not as the
        question's first word. Her name matches only the turns that happen to use it
        ("Nice to meet you, Lena"), not what she asks about."""
        names: set[str] = set()
        try:  # (the profile's own file: the catalog of a big vault is not walked for one note)
            profile = self.vault.read_note(PROFILE_URI) if self.vault.exists(PROFILE_URI) else None
        except MemlinkError:
            profile = None  # (one that does not parse names no one)
        if profile is not None and profile.memory_type == "profile":
            title = str(profile.fields.get("name") or "")
            aliases = profile.fields.get("aliases")
            names.update(str(n).strip() for n in (title, title.split()[0] if title.split() else "",
                                                  *(aliases if isinstance(aliases, list) else [])))
        left = query
        for name in sorted((n for n in names if n and n not in NOT_NAMES), key=len, reverse=True):
            said = re.escape(name) if has_cjk(name) else rf"\b{re.escape(name)}(?:['’]s)?\b"
            left = re.sub(rf"(?<=.){said}", " ", left)
        return left


def _question_words(query: str) -> list[str]:
    """A question's words of three letters or more, lowercased, its frame left out, sorted."""
    return sorted({w.lower() for w in WORDS.findall(query) if not _frame_word(w)})


def _lines(turn: dict) -> list[str]:
    """A turn's messages, one a line (its question's, then its answer's)."""
    return (turn["question"].split("\n") if turn["question"] else []) + (turn["answer"].split("\n") if turn["answer"] else [])


def _window(turn: dict, size: int, score: list[float] | None) -> tuple[list[str], str, str] | None:
    """The ``size`` consecutive messages of a turn that hold most of the question (by each
    message's ``score``; the earliest on a tie), cut to those of them that hold any, with
    the reply when the last of them ends the question or the message replied to when the
    first begins the answer (the rest of a burst is not what was asked about, and a budget
    spent on it is spent on nothing; a window holding nothing stays whole), as (sources,
    question, answer); None when the turn's text cannot be split into its messages
    (``score`` None)."""
    if score is None:
        return None
    lines = _lines(turn)
    asked = len(turn["question"].split("\n")) if turn["question"] else 0
    start = max(range(len(lines) - size + 1), key=lambda i: (sum(score[i:i + size]), -i))
    end = start + size
    held = [i for i in range(start, end) if score[i] > 0]
    if held:  # (the reply may lie outside the window: then it is taken when it fits)
        lo = held[0] - 1 if held[0] == asked > 0 else held[0]
        hi = held[-1] + 2 if held[-1] == asked - 1 < len(lines) - 1 else held[-1] + 1
        start, end = (lo, hi) if hi - lo <= size else (max(start, lo), min(end, hi))
    return (turn["sources"][start:end], "\n".join(lines[start:min(end, asked)]), "\n".join(lines[max(start, asked):end]))
