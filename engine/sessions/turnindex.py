"""Recall's indexes over turn memories, persisted in `.memlink/turns/` (docs/DESIGN.md,
"Turn memory").

- Keywords: tantivy BM25 over what was said — the whole turn (every message of both
  sides), its date in words, and the neighbouring turns of the same session, which carry
  the context a single message leaves out ("Yes, last Saturday!").
- Vectors: hnswlib over the embedding of the turn's own text.
- `turns.sqlite`: the turns as recall shows them, each one's neighbours and the hash of
  its indexed text, the term graph of the triples with its communities, and the
  bookkeeping (store signature, vector snapshot). Turns are read from it one by one as
  recall needs them, so opening the index costs the same at 100 turns or 100k.

Sync compares the store's shard signature (a stat per shard) and, when it changed, the
hash of every turn's indexed text, so a new turn re-indexes itself and its neighbours.
Writes go keywords → vector snapshot → one SQLite transaction, and every step is
idempotent: a crash anywhere is repaired by the next sync. Everything here is derived
from the turn store; a missing, damaged or differently built index is rebuilt."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import shutil
import sqlite3
import uuid
from collections import defaultdict
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import tantivy
from filelock import FileLock, Timeout

from ..atomic import remove_file
from ..embed import Embedder, load_embedder
from ..index.keywords import bm25_idf
from ..index.vectors import VectorIndex
from ..text import cjk_expand, printable, tokenize
from .communities import label_propagation
from .store import TurnStore

if TYPE_CHECKING:
    import networkx as nx

    from ..vault import Vault

FORMAT = 5
SPEAKERS = frozenset({"user", "i", "assistant"})
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS turn (id TEXT PRIMARY KEY, hash TEXT NOT NULL, near TEXT NOT NULL, doc TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS term (id TEXT PRIMARY KEY, text TEXT NOT NULL, turns TEXT NOT NULL, community TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS edge (a TEXT NOT NULL, b TEXT NOT NULL, weight INTEGER NOT NULL, PRIMARY KEY (a, b));
"""


def date_words(ts: str) -> str:
    """A timestamp as the words a question would use ("1 November 2026"); other date
    strings (e.g. "1:56 pm on 8 May, 2023") are already words."""
    try:
        when = dt.datetime.fromisoformat(ts.strip())
    except ValueError:
        return ts
    return f"{when.day} {when:%B} {when.year}"


def own_text(turn: dict) -> str:
    """The turn's words as indexed and embedded (terminal control sequences left out)."""
    return printable(f"{turn['question']}\n{turn['answer']}").strip()


def neighbours(turns: dict[str, dict]) -> dict[str, list[str]]:
    """Each turn's previous and next turn in its session (by place, then time, then id)."""
    rows = sorted(turns.values(), key=lambda t: (t["session"], t.get("pos", 0), t["ts"], t["id"]))
    out: dict[str, list[str]] = {}
    for i, t in enumerate(rows):
        out[t["id"]] = [rows[j]["id"] for j in (i - 1, i + 1) if 0 <= j < len(rows) and rows[j]["session"] == t["session"]]
    return out


def indexed_text(turn: dict, near: list[dict]) -> tuple[str, str]:
    """What the keyword route indexes for a turn: its text, date and speakers' names; its
    neighbours' text."""
    own = "\n".join(p for p in (own_text(turn), date_words(turn["ts"]), " ".join(turn.get("speakers") or [])) if p)
    return own, "\n".join(own_text(n) for n in near)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]


def _schema() -> tantivy.Schema:
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("id", stored=True, tokenizer_name="raw")
    sb.add_text_field("text", stored=False, tokenizer_name="en_stem")
    sb.add_text_field("own", stored=False, tokenizer_name="en_stem")
    return sb.build()


class TermGraph:
    """Terms of the turns' triples, joined when a triple relates them (repeated evidence
    adds weight); the speakers are left out, they would tie every term together. The
    networkx graph is built on first use: most questions name no term, and importing
    networkx would cost every `memlink recall` process a few tenths of a second."""

    def __init__(self) -> None:
        self.term_text: dict[str, str] = {}
        self.term_turns: dict[str, set[str]] = defaultdict(set)
        self.edges: dict[tuple[str, str], int] = {}
        self.community: dict[str, str] = {}
        self._g = None

    @classmethod
    def of(cls, turns: dict[str, dict]) -> TermGraph:
        graph = cls()
        for mem_id in sorted(turns):
            for t in turns[mem_id]["triples"]:
                ends = [(t["subject_id"], t["subject"]), (t["object_id"], t["object"])]
                kept = [(tid, text) for tid, text in ends if text.lower() not in SPEAKERS]
                for tid, text in kept:
                    graph.term_text.setdefault(tid, text)
                    graph.term_turns[tid].add(mem_id)
                (a, _), (b, _) = ends
                if len(kept) == 2 and a != b:
                    key = (a, b) if a < b else (b, a)
                    graph.edges[key] = graph.edges.get(key, 0) + 1
        graph.community = label_propagation(graph.g)
        return graph

    @property
    def g(self) -> nx.Graph:
        if self._g is None:
            import networkx as nx

            g = nx.Graph()
            g.add_nodes_from(sorted(self.term_text))
            g.add_weighted_edges_from((a, b, w) for (a, b), w in sorted(self.edges.items()))
            self._g = g
        return self._g


class TurnRows(Mapping):
    """The indexed turns by id, read from SQLite on first use and kept."""

    def __init__(self, db: sqlite3.Connection | None, rows: dict[str, dict] | None = None):
        self.db = db
        self.cache: dict[str, dict] = dict(rows or {})
        self.complete = rows is not None
        self._ids: list[str] | None = sorted(self.cache) if self.complete else None

    def __getitem__(self, mem_id: str) -> dict:
        if mem_id not in self.cache:
            if self.complete or self.db is None:
                raise KeyError(mem_id)
            row = self.db.execute("SELECT doc FROM turn WHERE id = ?", (mem_id,)).fetchone()
            if row is None:
                raise KeyError(mem_id)
            self.cache[mem_id] = json.loads(row[0])
        return self.cache[mem_id]

    def _all_ids(self) -> list[str]:
        if self._ids is None:
            self._ids = [r[0] for r in self.db.execute("SELECT id FROM turn ORDER BY id")] if self.db else []
        return self._ids

    def __iter__(self) -> Iterator[str]:
        return iter(self._all_ids())

    def __len__(self) -> int:
        return len(self._all_ids())


class TurnIndex:
    def __init__(self, vault: Vault, embedder: Embedder | None = None) -> None:
        self.vault = vault
        self.folder = vault.state_dir / "turns"
        self.embedder = embedder or load_embedder(vault.config.embedding.model).embedder
        self.fingerprint = {"format": FORMAT, "model": self.embedder.name, "dims": self.embedder.dims,
                            "tokenizer": "tantivy-en_stem+cjk-bigram-2"}
        self.db: sqlite3.Connection | None = None
        self.memory = False  # built in memory only (the vault is read-only)
        self.signature: list | None = None  # the store's signature the index was synced with
        self.turns: Mapping[str, dict] = TurnRows(None, {})
        self.near: dict[str, list[str]] = {}
        self.vectors = VectorIndex(self.embedder.dims)
        self.keywords: tantivy.Index | None = None
        self._graph: TermGraph | None = TermGraph()

    # -- loading and syncing --------------------------------------------------------------------
    def open(self) -> TurnIndex:
        """Load the saved index, then bring it up to date with the store. Syncing holds the
        index's own lock (`.memlink/turns/lock`), not the vault's: recall is a read and never
        waits for a vault writer; two processes never sync at once, and the second one loads
        what the first saved. Where the lock cannot be made (a read-only vault), the index
        is built in memory for this process."""
        store = TurnStore(self.vault)
        if self._load() and self.signature == store.signature():
            return self
        lock = None if self.vault.read_only else self._lock()  # read-only: not even a lock file
        if lock is None:
            self._reset(memory=True)
            self.sync(store.all(), store.signature())
            return self
        try:
            signature = store.signature()
            if not self._load():
                self._reset()
            elif self.signature == signature:
                return self  # another process synced while this one waited
            self.sync(store.all(), signature)
        finally:
            lock.release()
        return self

    def _lock(self) -> FileLock | None:
        """The index's own lock, held; None where it cannot be made or taken."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            lock = FileLock(str(self.folder / "lock"))
            lock.acquire(timeout=max(60.0, self.vault.config.lock_timeout))
        except (OSError, Timeout):
            return None
        return lock

    def _reset(self, memory: bool = False) -> None:
        """Start from an empty index, on disk (under the lock) or in memory."""
        self.memory = memory
        if memory:
            self.db = None
            self.keywords = tantivy.Index(_schema())
        else:
            shutil.rmtree(self.folder / "keywords", ignore_errors=True)
            (self.folder / "keywords").mkdir(parents=True, exist_ok=True)
            self.keywords = tantivy.Index(_schema(), path=str(self.folder / "keywords"), reuse=True)
            if self.db is not None:
                self.db.close()
            for name in ("turns.sqlite", "turns.sqlite-journal"):  # possibly damaged: start a new file
                (self.folder / name).unlink(missing_ok=True)
            self.db = self._connect()
        self.vectors = VectorIndex(self.embedder.dims)

    def stale(self) -> bool:
        """Whether the store changed since this index was synced (another process wrote)."""
        return self.signature != TurnStore(self.vault).signature()

    def _connect(self) -> sqlite3.Connection:
        self.folder.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.folder / "turns.sqlite", check_same_thread=False)
        db.executescript(_SCHEMA)
        return db

    def _meta(self, key: str) -> Any:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone() if self.db else None
        return json.loads(row[0]) if row else None

    def _load(self) -> bool:
        if not (self.folder / "turns.sqlite").is_file():
            return False
        try:
            self.db = self._connect()
            if self._meta("fingerprint") != self.fingerprint:
                return False
            vectors = VectorIndex.load(self.folder, self._meta("vectors"))
            keywords = tantivy.Index(_schema(), path=str(self.folder / "keywords"), reuse=True)
            count = self.db.execute("SELECT count(*) FROM turn").fetchone()[0]
            if keywords.searcher().num_docs != count:
                return False
        except (OSError, ValueError, KeyError, TypeError, RuntimeError, sqlite3.Error):
            return False  # derived data: rebuilt by sync
        self.vectors, self.keywords = vectors, keywords
        self.signature = self._meta("signature")
        self.turns = TurnRows(self.db)
        self._graph = None  # read on first use
        return True

    @property
    def _kw(self) -> tantivy.Index:
        """The keyword index: opened by open(), or made by sync()."""
        assert self.keywords is not None, "the turn keyword index is opened by open() or made by sync()"
        return self.keywords

    @property
    def graph(self) -> TermGraph:
        if self._graph is None:
            assert self.db is not None, "a graph built in memory is kept by sync()"
            graph = TermGraph()
            for tid, text, turns, community in self.db.execute("SELECT id, text, turns, community FROM term"):
                graph.term_text[tid] = text
                graph.term_turns[tid] = set(json.loads(turns))
                graph.community[tid] = community
            graph.edges = {(a, b): w for a, b, w in self.db.execute("SELECT a, b, weight FROM edge")}
            self._graph = graph
        return self._graph

    def neighbours_of(self, mem_id: str) -> list[str]:
        if mem_id not in self.near and self.db is not None:
            row = self.db.execute("SELECT near FROM turn WHERE id = ?", (mem_id,)).fetchone()
            self.near[mem_id] = json.loads(row[0]) if row else []
        return self.near.get(mem_id, [])

    def sync(self, rows: list[dict], signature: list) -> None:
        """Index what changed in the store since the loaded state (everything after a
        reset). The caller holds the index lock."""
        old = dict(self.db.execute("SELECT id, hash FROM turn")) if self.db is not None else {}
        turns = {r["id"]: dict(r) for r in rows}
        near = neighbours(turns)
        texts = {m: indexed_text(turns[m], [turns[n] for n in near[m]]) for m in turns}
        hashes = {m: _sha("\x1f".join(texts[m])) for m in turns}
        todo = sorted(m for m in turns if old.get(m) != hashes[m])
        gone = sorted(m for m in old if m not in turns)
        writer = self._kw.writer(heap_size=50_000_000, num_threads=1)
        for m in gone + todo:
            writer.delete_documents_by_term("id", m)
            self.vectors.remove(m)
        for m in todo:
            own, near_text = texts[m]
            writer.add_document(tantivy.Document(id=m, text=cjk_expand(own + "\n" + near_text), own=cjk_expand(own)))
        if todo:
            matrix = self.embedder.encode([own_text(turns[m]) for m in todo])
            self.vectors.put_many([(m, matrix[n : n + 1]) for n, m in enumerate(todo)], threads=2)
        writer.commit()
        writer.wait_merging_threads()
        self._kw.reload()
        graph = TermGraph.of(turns)
        self._save(turns, near, hashes, todo, gone, graph, signature)
        self.turns, self.near, self._graph, self.signature = TurnRows(self.db, turns), near, graph, signature

    def _save(self, turns: dict[str, dict], near: dict[str, list[str]], hashes: dict[str, str], todo: list[str],
              gone: list[str], graph: TermGraph, signature: list) -> None:
        if self.db is None:
            return  # built in memory for this process
        try:
            meta = self.vectors.save(self.folder, uuid.uuid4().hex[:10])
            with self.db:  # one transaction: the saved index moves from one whole state to the next
                self.db.executemany("DELETE FROM turn WHERE id = ?", [(m,) for m in gone])
                self.db.executemany("INSERT OR REPLACE INTO turn (id, hash, near, doc) VALUES (?, ?, ?, ?)",
                                    [(m, hashes[m], json.dumps(near[m]), json.dumps(turns[m], ensure_ascii=False))
                                     for m in todo])
                self.db.executemany("UPDATE turn SET near = ? WHERE id = ?", [(json.dumps(near[m]), m) for m in sorted(turns)])
                self.db.execute("DELETE FROM term")
                self.db.executemany("INSERT INTO term VALUES (?, ?, ?, ?)",
                                    [(tid, graph.term_text[tid], json.dumps(sorted(graph.term_turns[tid])),
                                      graph.community.get(tid, tid)) for tid in sorted(graph.term_text)])
                self.db.execute("DELETE FROM edge")
                self.db.executemany("INSERT INTO edge VALUES (?, ?, ?)", [(a, b, w) for (a, b), w in sorted(graph.edges.items())])
                for key, value in (("fingerprint", self.fingerprint), ("signature", signature), ("vectors", meta)):
                    self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))
            for old in self.folder.glob("vectors-*.bin"):
                if old.name != meta["file"]:
                    remove_file(old)
        except (OSError, sqlite3.Error):
            pass  # a read-only vault still recalls, from memory; the next writable run saves

    # -- querying -------------------------------------------------------------------------------
    def keyword_hits(self, tokens: list[str], k: int, own_weight: float = 0.0) -> list[tuple[str, float]]:
        """BM25 over the turn with its neighbours, plus, weighted, over the turn alone."""
        if not tokens or self.keywords is None:
            return []
        Q, Occur = tantivy.Query, tantivy.Occur
        schema = _schema()
        clauses = []
        for t in sorted(set(tokens)):
            clauses.append((Occur.Should, Q.term_query(schema, "text", t)))
            if own_weight:
                clauses.append((Occur.Should, Q.boost_query(Q.term_query(schema, "own", t), own_weight)))
        query = Q.boolean_query(clauses)
        searcher = self._kw.searcher()
        hits = searcher.search(query, k, count=False).hits
        return [(searcher.doc(addr)["id"][0], float(score)) for score, addr in hits]

    def idf(self, tokens: list[str]) -> dict[str, float]:
        """BM25's idf of each token in this collection (a token it never saw: the highest)."""
        searcher = self._kw.searcher()
        n = max(1, searcher.num_docs)
        return {tok: bm25_idf(searcher.doc_freq("text", tok), n) for tok in set(tokens)}

    def doc_freq(self, words: list[str]) -> dict[str, int]:
        """How many indexed turns hold each word (stemmed like the index)."""
        searcher = self._kw.searcher()
        return {w: max((searcher.doc_freq("text", t) for t in tokenize(w)), default=0) for w in words}

    def vector_hits(self, vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        return [(m, s) for m, s, _ in self.vectors.query(vector, k)]

    def cosines(self, vector: np.ndarray, ids: list[str]) -> dict[str, float]:
        """Exact cosine of the query with each of these turns (their stored vectors)."""
        labels = [(m, self.vectors.by_uri[m][0]) for m in ids if self.vectors.by_uri.get(m)]
        if not labels:
            return {}
        stored = np.asarray(self.vectors.index.get_items([l for _, l in labels]), dtype=np.float32)
        sims = stored @ vector
        return {m: float(s) for (m, _), s in zip(labels, sims, strict=True)}

    def tokens_of(self, mem_id: str) -> set[str]:
        near = [self.turns[n] for n in self.neighbours_of(mem_id)]
        return set(tokenize("\n".join(indexed_text(self.turns[mem_id], near))))
