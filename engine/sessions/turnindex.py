"""Recall's indexes over turn memories, persisted in `.memlink/turns/` (docs/DESIGN.md,
"Turn memory").

- Keywords: tantivy BM25 over what was said — the whole turn (every message of both
  sides), its date in words, and the neighbouring turns of the same session, which carry
  the context a single message leaves out ("Yes, last Saturday!").
- Vectors: hnswlib over the embedding of the turn's own text.
- The term graph of the turns' triples (for the graph route) is rebuilt from the stored
  turns at load; its communities are saved with it.

Sync compares the store's shard signature (cheap: a stat per shard) and, when it changed,
the hash of every turn's indexed text, so a new turn re-indexes itself and its two
neighbours only. Everything here is derived from the turn store: a missing, damaged or
differently built index is rebuilt."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import shutil
import uuid
from collections import defaultdict

import numpy as np
import tantivy

from ..atomic import atomic_write_text, remove_file
from ..embed import Embedder, load_embedder
from ..index.vectors import VectorIndex
from ..text import cjk_expand, tokenize
from .communities import label_propagation
from .store import TurnStore

FORMAT = 2
SPEAKERS = ("user", "i", "assistant")


def date_words(ts: str) -> str:
    """A timestamp as the words a question would use ("1 November 2026"); other date
    strings (e.g. "1:56 pm on 8 May, 2023") are already words."""
    try:
        when = dt.datetime.fromisoformat(ts.strip())
    except ValueError:
        return ts
    return f"{when.day} {when:%B} {when.year}"


def own_text(turn: dict) -> str:
    return f"{turn['question']}\n{turn['answer']}".strip()


def ordered(turns: dict[str, dict]) -> list[dict]:
    """Turns in conversation order: by session, then place in the session."""
    return sorted(turns.values(), key=lambda t: (t["session"], t.get("pos", 0), t["ts"], t["id"]))


def indexed_texts(turns: dict[str, dict]) -> dict[str, str]:
    """What the keyword route indexes for each turn: its text, date and neighbours."""
    rows = ordered(turns)
    out = {}
    for i, t in enumerate(rows):
        parts = [own_text(t), date_words(t["ts"])]
        for j in (i - 1, i + 1):
            if 0 <= j < len(rows) and rows[j]["session"] == t["session"]:
                parts.append(own_text(rows[j]))
        out[t["id"]] = "\n".join(p for p in parts if p)
    return out


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]


def _schema() -> tantivy.Schema:
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("id", stored=True, tokenizer_name="raw")
    sb.add_text_field("text", stored=False, tokenizer_name="en_stem")
    return sb.build()


class TermGraph:
    """Terms of the turns' triples, joined when a triple relates them (repeated evidence
    adds weight); the speakers are left out, they would tie every term together. The
    networkx graph is built on first use: most questions name no term, and importing
    networkx would cost every `memlink recall` process a few tenths of a second."""

    def __init__(self, turns: dict[str, dict]):
        self.edges: dict[tuple[str, str], int] = {}
        self.term_text: dict[str, str] = {}
        self.term_turns: dict[str, set[str]] = defaultdict(set)
        speaker = {t for t in SPEAKERS}
        for mem_id in sorted(turns):
            for t in turns[mem_id]["triples"]:
                a, b = t["subject_id"], t["object_id"]
                ends = ((a, t["subject"]), (b, t["object"]))
                if any(text.lower() in speaker for _, text in ends):
                    for tid, text in ends:
                        if text.lower() not in speaker:
                            self._add(tid, text, mem_id)
                    continue
                for tid, text in ends:
                    self._add(tid, text, mem_id)
                if a != b:
                    key = (a, b) if a < b else (b, a)
                    self.edges[key] = self.edges.get(key, 0) + 1
        self.community: dict[str, str] = {}
        self._g = None

    def _add(self, tid: str, text: str, mem_id: str) -> None:
        self.term_text.setdefault(tid, text)
        self.term_turns[tid].add(mem_id)

    @property
    def g(self):
        if self._g is None:
            import networkx as nx

            g = nx.Graph()
            g.add_nodes_from(sorted(self.term_text))
            g.add_weighted_edges_from((a, b, w) for (a, b), w in sorted(self.edges.items()))
            self._g = g
        return self._g


class TurnIndex:
    def __init__(self, vault, embedder: Embedder | None = None):
        self.vault = vault
        self.folder = vault.state_dir / "turns"
        self.embedder = embedder or load_embedder(vault.config.embedding.model).embedder
        self.fingerprint = {"format": FORMAT, "model": self.embedder.name, "dims": self.embedder.dims,
                            "tokenizer": "tantivy-en_stem+cjk-bigram-2"}
        self.turns: dict[str, dict] = {}
        self.hashes: dict[str, str] = {}  # turn id -> hash of its indexed text
        self.signature: list = []
        self.vectors = VectorIndex(self.embedder.dims)
        self.keywords: tantivy.Index | None = None
        self.graph = TermGraph({})

    # -- loading and syncing --------------------------------------------------------------------
    def open(self) -> "TurnIndex":
        """Load the saved index, then bring it up to date with the store."""
        store = TurnStore(self.vault)
        signature = store.signature()
        state = self._load()
        if state is not None and state["signature"] == signature:
            return self
        self.sync(store.all(), signature)
        return self

    def _load(self) -> dict | None:
        try:
            state = json.loads((self.folder / "state.json").read_text(encoding="utf-8"))
            if not isinstance(state, dict) or state.get("fingerprint") != self.fingerprint:
                return None
            turns = json.loads((self.folder / state["turns_file"]).read_text(encoding="utf-8"))
            vectors = VectorIndex.load(self.folder, state["vectors"])
            keywords = tantivy.Index(_schema(), path=str(self.folder / "keywords"), reuse=True)
            if keywords.searcher().num_docs != len(turns):
                return None
        except (OSError, ValueError, KeyError, TypeError, RuntimeError):
            return None  # derived data: rebuilt by sync
        self.turns = {t["id"]: t for t in turns}
        self.hashes, self.signature = dict(state["hashes"]), state["signature"]
        self.vectors, self.keywords = vectors, keywords
        self.graph = TermGraph(self.turns)
        self.graph.community = dict(state["community"])
        return state

    def sync(self, rows: list[dict], signature: list) -> None:
        fresh = self.keywords is None
        if fresh:
            shutil.rmtree(self.folder / "keywords", ignore_errors=True)
            (self.folder / "keywords").mkdir(parents=True, exist_ok=True)
            self.keywords = tantivy.Index(_schema(), path=str(self.folder / "keywords"), reuse=True)
            self.vectors, self.hashes = VectorIndex(self.embedder.dims, capacity=len(rows) + 16), {}
        turns = {r["id"]: dict(r) for r in rows}
        texts = indexed_texts(turns)
        hashes = {m: _sha(texts[m] + "\x1f" + own_text(turns[m])) for m in turns}
        todo = sorted(m for m in turns if self.hashes.get(m) != hashes[m])
        gone = sorted(m for m in self.hashes if m not in turns)
        writer = self.keywords.writer(heap_size=50_000_000, num_threads=1)
        for m in gone + todo:
            writer.delete_documents_by_term("id", m)
            self.vectors.remove(m)
        for m in todo:
            writer.add_document(tantivy.Document(id=m, text=cjk_expand(texts[m])))
        matrix = self.embedder.encode([own_text(turns[m]) for m in todo]) if todo else None
        if todo:
            self.vectors.put_many([(m, matrix[n : n + 1]) for n, m in enumerate(todo)], threads=2)
        writer.commit()
        writer.wait_merging_threads()
        self.keywords.reload()
        self.turns, self.hashes, self.signature = turns, hashes, signature
        self.graph = TermGraph(turns)
        self.graph.community = label_propagation(self.graph.g)
        self._save()

    def _save(self) -> None:
        try:
            with self.vault.writing():
                tag = uuid.uuid4().hex[:10]
                meta = self.vectors.save(self.folder, tag)
                turns_file = f"turns-{tag}.json"
                atomic_write_text(self.folder / turns_file, json.dumps(ordered(self.turns), ensure_ascii=False))
                state = {"fingerprint": self.fingerprint, "signature": self.signature, "hashes": self.hashes,
                         "vectors": meta, "turns_file": turns_file, "community": self.graph.community}
                atomic_write_text(self.folder / "state.json", json.dumps(state, ensure_ascii=False))
                for old in [*self.folder.glob("vectors-*.bin"), *self.folder.glob("turns-*.json")]:
                    if old.name not in (meta["file"], turns_file):
                        remove_file(old)
        except OSError:
            pass  # a read-only vault still recalls, from memory; the next writable run saves

    # -- querying -------------------------------------------------------------------------------
    def keyword_hits(self, tokens: list[str], k: int) -> list[tuple[str, float]]:
        if not tokens or not self.turns:
            return []
        Q, Occur = tantivy.Query, tantivy.Occur
        schema = _schema()
        query = Q.boolean_query([(Occur.Should, Q.term_query(schema, "text", t)) for t in sorted(set(tokens))])
        searcher = self.keywords.searcher()
        hits = searcher.search(query, k, count=False).hits
        return [(searcher.doc(addr)["id"][0], float(score)) for score, addr in hits]

    def idf(self, tokens: list[str]) -> dict[str, float]:
        """BM25's idf of each token in this collection (a token it never saw: the highest)."""
        searcher = self.keywords.searcher()
        n = max(1, searcher.num_docs)
        out = {}
        for tok in set(tokens):
            df = searcher.doc_freq("text", tok)
            out[tok] = float(np.log(1 + (n - df + 0.5) / (df + 0.5)))
        return out

    def vector_hits(self, vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        return [(m, s) for m, s, _ in self.vectors.query(vector, k)]

    def cosines(self, vector: np.ndarray, ids: list[str]) -> dict[str, float]:
        """Exact cosine of the query with each of these turns (their stored vectors)."""
        labels = [(m, self.vectors.by_uri[m][0]) for m in ids if self.vectors.by_uri.get(m)]
        if not labels:
            return {}
        stored = np.asarray(self.vectors.index.get_items([l for _, l in labels]), dtype=np.float32)
        sims = stored @ vector
        return {m: float(s) for (m, _), s in zip(labels, sims)}

    def tokens_of(self, mem_id: str) -> set[str]:
        return set(tokenize(indexed_texts_one(self.turns, mem_id)))


def indexed_texts_one(turns: dict[str, dict], mem_id: str) -> str:
    """The indexed text of one turn (its neighbours found by session and place)."""
    t = turns[mem_id]
    same = sorted((x for x in turns.values() if x["session"] == t["session"]),
                  key=lambda x: (x.get("pos", 0), x["ts"], x["id"]))
    return indexed_texts({x["id"]: x for x in same})[mem_id]
