"""Recall's indexes over turn memories, persisted in `.memlink/turns/` (docs/DESIGN.md,
"Turn memory").

- Keywords: tantivy BM25 over what was said — the whole turn (every message of both
  sides), its date in words, and the neighbouring turns of the same session, which carry
  the context a single message leaves out ("Yes, last Saturday!").
- Vectors: hnswlib over the embedding of the turn's own text. A vector's label is kept in
  the turn's SQLite row, so opening reads no label map: hits are named by a lookup.
- `turns.sqlite`: the turns as recall shows them (label, neighbours, hash of the indexed
  text), which terms each turn's triples name and join, the terms with their turn count,
  words and community, the store's shard stamps as last synced and the vector snapshot.
  Everything recall needs is read row by row, so opening costs the same at 100 turns or
  100k and a question reads only the turns, terms and community it touches.

Sync compares the store's shards (a stat each) with the stamps recorded when they were
last indexed, and reads only the shards that changed: a session's new turn re-indexes
that session, never the history. Writes go keywords → vector snapshot → one SQLite
transaction, and every step is idempotent: a crash anywhere is repaired by the next sync.
Everything here is derived from the turn store; a missing, damaged or differently built
index is rebuilt."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import shutil
import sqlite3
import uuid
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import hnswlib
import numpy as np
import tantivy
from filelock import FileLock, Timeout

from ..atomic import remove_file
from ..embed import Embedder, load_embedder, nonzero
from ..index.keywords import bm25_idf
from ..text import cjk_expand, has_cjk, printable, tokenize
from .communities import label_propagation
from .store import TurnStore, norm_term

if TYPE_CHECKING:
    from ..vault import Vault

T = TypeVar("T")
FORMAT = 6
SPEAKERS = frozenset({"user", "i", "assistant"})
EXACT_FALLBACK = 20_000  # live vectors up to which a failed hnswlib query scans exactly
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS shard (name TEXT PRIMARY KEY, stamp TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS turn (id TEXT PRIMARY KEY, shard TEXT NOT NULL, label INTEGER, hash TEXT NOT NULL,
                                 near TEXT NOT NULL, doc TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS turn_shard ON turn (shard);
CREATE UNIQUE INDEX IF NOT EXISTS turn_label ON turn (label);
CREATE TABLE IF NOT EXISTS mention (turn TEXT NOT NULL, term TEXT NOT NULL, text TEXT NOT NULL, PRIMARY KEY (turn, term));
CREATE INDEX IF NOT EXISTS mention_term ON mention (term);
CREATE TABLE IF NOT EXISTS link (turn TEXT NOT NULL, a TEXT NOT NULL, b TEXT NOT NULL, n INTEGER NOT NULL,
                                 PRIMARY KEY (turn, a, b));
CREATE INDEX IF NOT EXISTS link_a ON link (a);
CREATE INDEX IF NOT EXISTS link_b ON link (b);
CREATE TABLE IF NOT EXISTS term (id TEXT PRIMARY KEY, text TEXT NOT NULL, turns INTEGER NOT NULL, community TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS term_community ON term (community);
CREATE TABLE IF NOT EXISTS term_key (key TEXT NOT NULL, term TEXT NOT NULL, PRIMARY KEY (key, term));
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


def turn_terms(turn: dict) -> tuple[dict[str, str], dict[tuple[str, str], int]]:
    """What one turn adds to the term graph: the terms its triples name (each with the text
    it first has in the turn) and the pairs of terms a triple relates, with how often. The
    speakers are left out: they would tie every term together."""
    mentions: dict[str, str] = {}
    links: dict[tuple[str, str], int] = defaultdict(int)
    for t in turn["triples"]:
        ends = [(t["subject_id"], t["subject"]), (t["object_id"], t["object"])]
        kept = [(tid, text) for tid, text in ends if text.lower() not in SPEAKERS]
        for tid, text in kept:
            mentions.setdefault(tid, text)
        (a, _), (b, _) = ends
        if len(kept) == 2 and a != b:
            links[(a, b) if a < b else (b, a)] += 1
    return mentions, dict(links)


def term_keys(text: str) -> set[str]:
    """What finds a term from a question's words: each of its words and, for a term in a
    script written without spaces, its first such character (see ``question_keys``)."""
    t = norm_term(text).lower()
    keys = set(t.split())
    first = next((c for c in t if has_cjk(c)), None)
    if first is not None:
        keys.add(first)
    return keys


def question_keys(low: str) -> set[str]:
    """The keys a question can match terms by: its words, and its CJK characters (a CJK term
    matches anywhere inside the question's text)."""
    return set(low.split()) | {c for c in low if has_cjk(c)}


def pagerank(nodes: list[str], edges: Mapping[tuple[str, str], float], personalization: Mapping[str, float],
             alpha: float = 0.85, tol: float = 1e-10, max_iter: int = 300) -> dict[str, float]:
    """Personalized PageRank on an undirected weighted graph, the power iteration networkx's
    ``pagerank`` runs (dangling mass to the personalization), on numpy alone: importing
    scipy would cost a recall process more than the whole question. Unconverged after
    ``max_iter`` rounds, the last iterate is returned rather than an error."""
    n = len(nodes)
    if not n:
        return {}
    pos = {v: i for i, v in enumerate(nodes)}
    pairs = [(pos[a], pos[b], float(w)) for (a, b), w in edges.items() if a in pos and b in pos]
    rows = np.array([r for a, b, _ in pairs for r in (a, b)], dtype=np.int64)
    cols = np.array([c for a, b, _ in pairs for c in (b, a)], dtype=np.int64)
    vals = np.array([w for _, _, w in pairs for _ in (0, 1)], dtype=float)
    out_weight = np.bincount(rows, weights=vals, minlength=n)
    inverse = np.zeros(n)
    inverse[out_weight != 0] = 1.0 / out_weight[out_weight != 0]
    step = vals * inverse[rows] if len(rows) else vals
    p = np.array([personalization.get(v, 0.0) for v in nodes], dtype=float)
    p /= p.sum()
    dangling = np.where(out_weight == 0)[0]
    x = np.repeat(1.0 / n, n)
    for _ in range(max_iter):
        last = x
        spread = np.bincount(cols, weights=x[rows] * step, minlength=n) if len(rows) else np.zeros(n)
        x = alpha * (spread + float(x[dangling].sum()) * p) + (1 - alpha) * p
        if np.absolute(x - last).sum() < n * tol:
            break
    return dict(zip(nodes, map(float, x), strict=True))


class TurnVectors:
    """hnswlib (cosine) over one vector per turn. The labels live in the turn table, so
    loading reads the snapshot and nothing else; deleted slots are reused."""

    M, EF_CONSTRUCTION, EF_SEARCH = 16, 100, 300

    def __init__(self, dims: int, capacity: int = 1024) -> None:
        self.dims = dims
        self.index = hnswlib.Index(space="cosine", dim=dims)
        self.index.init_index(max_elements=max(capacity, 16), M=self.M, ef_construction=self.EF_CONSTRUCTION,
                              allow_replace_deleted=True)
        self._tune()
        self.next_label = 0
        self.live = 0

    def _tune(self) -> None:
        self.index.set_ef(self.EF_SEARCH)
        self.index.set_num_threads(1)

    @classmethod
    def load(cls, folder: Path, meta: dict) -> TurnVectors:
        self = cls(int(meta["dims"]), 16)
        self.index = hnswlib.Index(space="cosine", dim=self.dims)
        self.index.load_index(str(folder / meta["file"]), max_elements=int(meta["max_elements"]), allow_replace_deleted=True)
        self._tune()
        self.next_label, self.live = int(meta["next_label"]), int(meta["live"])
        return self

    def save(self, folder: Path, tag: str) -> dict:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f"vectors-{tag}.bin.tmp"
        self.index.save_index(str(tmp))
        tmp.replace(folder / f"vectors-{tag}.bin")
        return {"file": f"vectors-{tag}.bin", "dims": self.dims, "max_elements": self.index.get_max_elements(),
                "next_label": self.next_label, "live": self.live}

    def add(self, matrix: np.ndarray, threads: int = 2) -> list[int | None]:
        """One label per row (None for an all-zero row: nothing the model knows)."""
        keep = nonzero(matrix) if len(matrix) else np.zeros(0, dtype=bool)
        labels: list[int | None] = []
        for ok in keep:
            labels.append(self.next_label if ok else None)
            self.next_label += bool(ok)
        rows = [n for n, ok in enumerate(keep) if ok]
        if rows:
            need = self.index.element_count + len(rows)
            if need > self.index.get_max_elements():
                self.index.resize_index(max(need, int(self.index.get_max_elements() * 1.5) + 16))
            self.index.add_items(matrix[rows], np.asarray([labels[n] for n in rows]), num_threads=threads,
                                 replace_deleted=True)
            self.live += len(rows)
        return labels

    def remove(self, labels: Iterable[int]) -> None:
        for label in labels:
            self.index.mark_deleted(label)
            self.live -= 1

    def knn(self, vector: np.ndarray, want: int, k: int, live_labels: Any) -> tuple[np.ndarray, np.ndarray]:
        """hnswlib's nearest live labels. A graph full of near-duplicates in reused slots can
        fail to reach ``want`` live items, and hnswlib raises instead of returning fewer:
        then ask for fewer, down to ``k``; below that, scan a small index exactly
        (``live_labels()``: every live label)."""
        while want >= 1:
            try:
                found, dists = self.index.knn_query(vector[None, :], k=want)
                return found[0], dists[0]
            except RuntimeError:
                if want <= k and self.live <= EXACT_FALLBACK:
                    labels = np.asarray(live_labels(), dtype=np.uint64)
                    rows = np.asarray(self.index.get_items(labels, return_type="numpy"), dtype=np.float32)
                    norms = np.linalg.norm(rows, axis=1) * float(np.linalg.norm(vector)) + 1e-12
                    d = 1.0 - rows @ vector / norms
                    order = np.argsort(d, kind="stable")[:want]
                    return labels[order], d[order]
                want = max(want // 2, k) if want > k else want // 2
        return np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.float32)


class TurnRows(Mapping):
    """The indexed turns by id, read from SQLite on first use and kept."""

    def __init__(self, db: sqlite3.Connection, count: int):
        self.db = db
        self.count = count
        self.cache: dict[str, dict] = {}

    def __getitem__(self, mem_id: str) -> dict:
        if mem_id not in self.cache:
            row = self.db.execute("SELECT doc FROM turn WHERE id = ?", (mem_id,)).fetchone()
            if row is None:
                raise KeyError(mem_id)
            self.cache[mem_id] = json.loads(row[0])
        return self.cache[mem_id]

    def __iter__(self) -> Iterator[str]:
        return iter([r[0] for r in self.db.execute("SELECT id FROM turn ORDER BY id")])

    def __len__(self) -> int:
        return self.count


def _in(values: list) -> str:
    return ",".join("?" * len(values))


def _chunks(values: list[T], size: int = 500) -> Iterator[list[T]]:
    for i in range(0, len(values), size):
        yield values[i : i + size]


class TurnIndex:
    def __init__(self, vault: Vault, embedder: Embedder | None = None) -> None:
        self.vault = vault
        self.folder = vault.state_dir / "turns"
        self.embedder = embedder or load_embedder(vault.config.embedding.model).embedder
        self.fingerprint = {"format": FORMAT, "model": self.embedder.name, "dims": self.embedder.dims,
                            "tokenizer": "tantivy-en_stem+cjk-bigram-2"}
        self.memory = False  # built in memory only (the vault is read-only)
        self.db = self._connect(memory=True)
        self.synced: dict[str, str] = {}  # the store's shard stamps this index holds
        self.snapshot: dict | None = None  # the saved vector snapshot loaded (or last written)
        self.turns = TurnRows(self.db, 0)
        self.near: dict[str, list[str]] = {}
        self.vectors = TurnVectors(self.embedder.dims)
        self.keywords: tantivy.Index | None = None

    # -- loading and syncing --------------------------------------------------------------------
    def open(self) -> TurnIndex:
        """Load the saved index, then bring it up to date with the store. Syncing holds the
        index's own lock (`.memlink/turns/lock`), not the vault's: recall is a read and never
        waits for a vault writer; two processes never sync at once, and the second one loads
        what the first saved. Where the lock cannot be made (a read-only vault), the index
        is built in memory for this process."""
        store = TurnStore(self.vault)
        loaded = self._load()
        if loaded and not self.stale(store):
            return self
        lock = None if self.vault.read_only else self._lock()  # read-only: not even a lock file
        if lock is None:
            self._reset(memory=True)
            self.sync(store)
            return self
        try:
            if not (loaded and self._unchanged_on_disk()) and not self._load():
                self._reset()
            self.sync(store)  # nothing to do when another process synced while this one waited
        except (OSError, sqlite3.Error):  # the index cannot be saved (a full disk): recall from memory
            self._reset(memory=True)
            self.sync(store)
        finally:
            lock.release()
        return self

    def _unchanged_on_disk(self) -> bool:
        """Whether the saved index is still the one loaded (no other process synced since)."""
        try:
            return self._meta("vectors") == self.snapshot and dict(self.db.execute("SELECT name, stamp FROM shard")) == self.synced
        except (sqlite3.Error, ValueError):
            return False

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
        self.db.close()
        if memory:
            self.keywords = tantivy.Index(_schema())
        else:
            shutil.rmtree(self.folder / "keywords", ignore_errors=True)
            (self.folder / "keywords").mkdir(parents=True, exist_ok=True)
            self.keywords = tantivy.Index(_schema(), path=str(self.folder / "keywords"), reuse=True)
            for name in ("turns.sqlite", "turns.sqlite-journal"):  # possibly damaged: start a new file
                (self.folder / name).unlink(missing_ok=True)
        self.db = self._connect(memory)
        self.synced, self.near = {}, {}
        self.turns = TurnRows(self.db, 0)
        self.vectors = TurnVectors(self.embedder.dims)

    def stale(self, store: TurnStore | None = None) -> bool:
        """Whether the store changed since this index was synced (a stat per shard)."""
        return (store or TurnStore(self.vault)).stamps() != self.synced

    def _connect(self, memory: bool = False) -> sqlite3.Connection:
        if memory:
            db = sqlite3.connect(":memory:", check_same_thread=False)
        else:
            self.folder.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.folder / "turns.sqlite", check_same_thread=False)
        db.executescript(_SCHEMA)
        return db

    def _meta(self, key: str) -> Any:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def _load(self) -> bool:
        """Open the saved index: the SQLite file, the keyword index and the vector
        snapshot — nothing read per turn."""
        if not (self.folder / "turns.sqlite").is_file():
            return False
        try:
            db = sqlite3.connect(self.folder / "turns.sqlite", check_same_thread=False)
            self.db.close()
            self.db = db
            db.executescript(_SCHEMA)
            if self._meta("fingerprint") != self.fingerprint:
                return False
            count = int(self._meta("count"))
            vectors = TurnVectors.load(self.folder, self._meta("vectors"))
            keywords = tantivy.Index(_schema(), path=str(self.folder / "keywords"), reuse=True)
            if keywords.searcher().num_docs != count:
                return False
            synced = dict(db.execute("SELECT name, stamp FROM shard"))
        except (OSError, ValueError, KeyError, TypeError, RuntimeError, sqlite3.Error):
            return False  # derived data: rebuilt by sync
        self.memory = False
        self.vectors, self.keywords, self.synced, self.near = vectors, keywords, synced, {}
        self.snapshot = self._meta("vectors")
        self.turns = TurnRows(self.db, count)
        return True

    @property
    def _kw(self) -> tantivy.Index:
        """The keyword index: opened by open(), or made by sync()."""
        assert self.keywords is not None, "the turn keyword index is opened by open() or made by sync()"
        return self.keywords

    def neighbours_of(self, mem_id: str) -> list[str]:
        if mem_id not in self.near:
            row = self.db.execute("SELECT near FROM turn WHERE id = ?", (mem_id,)).fetchone()
            self.near[mem_id] = json.loads(row[0]) if row else []
        return self.near[mem_id]

    def sync(self, store: TurnStore) -> None:
        """Index what changed in the store since the loaded state (everything after a
        reset): only the shards whose stamp moved are read. The caller holds the index
        lock (or the index lives in memory)."""
        db = self.db
        stamps = store.stamps()
        changed = sorted(n for n, s in stamps.items() if self.synced.get(n) != s)
        dropped = sorted(n for n in self.synced if n not in stamps)
        if not changed and not dropped:
            return
        turns: dict[str, dict] = {}
        shard_of: dict[str, str] = {}
        for name in changed:
            for row in store.shard_rows(name):
                turns[row["id"]] = dict(row)
                shard_of[row["id"]] = name
        old: dict[str, tuple[str, int | None]] = {}
        for name in changed + dropped:
            old.update({m: (h, label) for m, h, label in db.execute("SELECT id, hash, label FROM turn WHERE shard = ?", (name,))})
        near = neighbours(turns)  # a session's turns share its shard: neighbours never cross one
        texts = {m: indexed_text(turns[m], [turns[n] for n in near[m]]) for m in turns}
        hashes = {m: _sha("\x1f".join(texts[m])) for m in turns}
        todo = sorted(m for m in turns if m not in old or old[m][0] != hashes[m])
        gone = sorted(m for m in old if m not in turns)
        writer = self._kw.writer(heap_size=50_000_000, num_threads=1)
        for m in gone + todo:
            writer.delete_documents_by_term("id", m)
        for m in todo:
            own, near_text = texts[m]
            writer.add_document(tantivy.Document(id=m, text=cjk_expand(own + "\n" + near_text), own=cjk_expand(own)))
        writer.commit()
        writer.wait_merging_threads()
        self._kw.reload()
        self.vectors.remove(label for m in gone + todo if m in old and (label := old[m][1]) is not None)
        labels = {m: old[m][1] for m in turns if m in old}
        if todo:
            matrix = self.embedder.encode([own_text(turns[m]) for m in todo])
            labels.update(zip(todo, self.vectors.add(matrix), strict=True))
        self._save(stamps, changed, dropped, turns, shard_of, near, hashes, labels, sorted(old))

    def _save(self, stamps: dict[str, str], changed: list[str], dropped: list[str], turns: dict[str, dict],
              shard_of: dict[str, str], near: dict[str, list[str]], hashes: dict[str, str],
              labels: dict[str, int | None], before: list[str]) -> None:
        db = self.db
        snapshot = None
        if not self.memory:
            snapshot = self.vectors.save(self.folder, uuid.uuid4().hex[:10])
        with db:  # one transaction: the saved index moves from one whole state to the next
            touched: set[str] = set()
            for chunk in _chunks(before):
                touched.update(r[0] for r in db.execute(f"SELECT term FROM mention WHERE turn IN ({_in(chunk)})", chunk))
                db.execute(f"DELETE FROM mention WHERE turn IN ({_in(chunk)})", chunk)
                db.execute(f"DELETE FROM link WHERE turn IN ({_in(chunk)})", chunk)
                db.execute(f"DELETE FROM turn WHERE id IN ({_in(chunk)})", chunk)
            rows, mentions, links = [], [], []
            for m in sorted(turns):
                rows.append((m, shard_of[m], labels.get(m), hashes[m], json.dumps(near[m]),
                             json.dumps(turns[m], ensure_ascii=False)))
                said, joined = turn_terms(turns[m])
                mentions += [(m, tid, text) for tid, text in said.items()]
                links += [(m, a, b, n) for (a, b), n in joined.items()]
                touched.update(said)
            db.executemany("INSERT INTO turn VALUES (?, ?, ?, ?, ?, ?)", rows)
            db.executemany("INSERT INTO mention VALUES (?, ?, ?)", mentions)
            db.executemany("INSERT INTO link VALUES (?, ?, ?, ?)", links)
            self._update_terms(sorted(touched))
            db.executemany("DELETE FROM shard WHERE name = ?", [(n,) for n in dropped])
            db.executemany("INSERT OR REPLACE INTO shard VALUES (?, ?)", [(n, stamps[n]) for n in changed])
            count = db.execute("SELECT count(*) FROM turn").fetchone()[0]
            meta = {"fingerprint": self.fingerprint, "count": count, "vectors": snapshot}
            db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", [(k, json.dumps(v)) for k, v in meta.items()])
        if snapshot is not None:
            for old in self.folder.glob("vectors-*.bin"):
                if old.name != snapshot["file"]:
                    remove_file(old)
        self.synced, self.near, self.snapshot = dict(stamps), {}, snapshot
        self.turns = TurnRows(db, count)

    def _update_terms(self, touched: list[str]) -> None:
        """The term rows of the terms a sync touched (text, turn count, words), then the
        communities of every component they are in, computed afresh: label propagation
        never crosses components, so the others keep theirs."""
        db = self.db
        for tid in touched:
            first = db.execute("SELECT text, count(*) OVER () FROM mention WHERE term = ? ORDER BY turn LIMIT 1",
                               (tid,)).fetchone()
            was = db.execute("SELECT 1 FROM term WHERE id = ?", (tid,)).fetchone()
            if first is None:
                db.execute("DELETE FROM term WHERE id = ?", (tid,))
                db.execute("DELETE FROM term_key WHERE term = ?", (tid,))
                continue
            db.execute("INSERT OR REPLACE INTO term VALUES (?, ?, ?, ?)", (tid, first[0], first[1], tid))
            if not was:
                db.executemany("INSERT OR IGNORE INTO term_key VALUES (?, ?)", [(k, tid) for k in term_keys(first[0])])
        import networkx as nx

        seen: set[str] = set()
        for tid in touched:
            if tid in seen or not db.execute("SELECT 1 FROM term WHERE id = ?", (tid,)).fetchone():
                continue
            nodes, edges = self._component(tid)
            seen |= nodes
            g = nx.Graph()
            g.add_nodes_from(sorted(nodes))
            g.add_weighted_edges_from((a, b, w) for (a, b), w in sorted(edges.items()))
            db.executemany("UPDATE term SET community = ? WHERE id = ?",
                           [(c, n) for n, c in sorted(label_propagation(g).items())])

    def _edges_of(self, tid: str) -> dict[tuple[str, str], int]:
        """The term's edges in the graph (weight: how many triples relate the two terms)."""
        out: dict[tuple[str, str], int] = {}
        for b, w in self.db.execute("SELECT b, sum(n) FROM link WHERE a = ? GROUP BY b", (tid,)):
            out[(tid, b)] = w
        for a, w in self.db.execute("SELECT a, sum(n) FROM link WHERE b = ? GROUP BY a", (tid,)):
            out[(a, tid)] = w
        return out

    def _component(self, tid: str) -> tuple[set[str], dict[tuple[str, str], int]]:
        nodes, edges, frontier = {tid}, {}, [tid]
        while frontier:
            nxt = []
            for node in frontier:
                for (a, b), w in self._edges_of(node).items():
                    edges[(a, b)] = w
                    other = b if a == node else a
                    if other not in nodes:
                        nodes.add(other)
                        nxt.append(other)
            frontier = nxt
        return nodes, edges

    # -- the term graph, read as a question needs it --------------------------------------------
    def term_text(self) -> dict[str, str]:
        """Every term's text (for inspection: a question reads only the terms it names)."""
        return dict(self.db.execute("SELECT id, text FROM term ORDER BY id"))

    def terms_named(self, keys: set[str]) -> list[tuple[str, str, int]]:
        """Terms having one of these keys (``term_keys``), by id: (id, text, turn count)."""
        found: set[str] = set()
        keys_sorted = sorted(keys)
        for chunk in _chunks(keys_sorted):
            found.update(r[0] for r in self.db.execute(f"SELECT term FROM term_key WHERE key IN ({_in(chunk)})", chunk))
        out = []
        for chunk in _chunks(sorted(found)):
            out += self.db.execute(f"SELECT id, text, turns FROM term WHERE id IN ({_in(chunk)})", chunk).fetchall()
        return sorted(out)

    def community_graph(self, seeds: list[str]) -> tuple[list[str], dict[tuple[str, str], int]]:
        """The terms of the seeds' communities, sorted, and the edges among them."""
        communities: set[str] = set()
        for chunk in _chunks(sorted(seeds)):
            communities.update(r[0] for r in self.db.execute(f"SELECT community FROM term WHERE id IN ({_in(chunk)})", chunk))
        members: set[str] = set()
        for chunk in _chunks(sorted(communities)):
            members.update(r[0] for r in self.db.execute(f"SELECT id FROM term WHERE community IN ({_in(chunk)})", chunk))
        edges: dict[tuple[str, str], int] = {}
        for node in sorted(members):
            for b, w in self.db.execute("SELECT b, sum(n) FROM link WHERE a = ? GROUP BY b", (node,)):
                if b in members:
                    edges[(node, b)] = w
        return sorted(members), edges

    def term_turns(self, terms: list[str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = defaultdict(list)
        for chunk in _chunks(terms):
            for term, turn in self.db.execute(f"SELECT term, turn FROM mention WHERE term IN ({_in(chunk)}) ORDER BY turn", chunk):
                out[term].append(turn)
        return out

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
        """Up to ``k`` turns by cosine similarity with the question."""
        if not self.vectors.live or not nonzero(vector[None, :])[0]:
            return []
        want = min(self.vectors.live, max(k * 3, k + 8))
        found, dists = self.vectors.knn(vector, want, k, self._live_labels)
        ids = self._ids_of([int(label) for label in found])
        best: dict[str, float] = {}
        for label, dist in zip(found, dists, strict=True):
            m = ids.get(int(label))
            if m is not None and m not in best:
                best[m] = 1.0 - float(dist)
        return sorted(best.items(), key=lambda kv: -kv[1])[:k]

    def _live_labels(self) -> list[int]:
        return [r[0] for r in self.db.execute("SELECT label FROM turn WHERE label IS NOT NULL ORDER BY label")]

    def _ids_of(self, labels: list[int]) -> dict[int, str]:
        out: dict[int, str] = {}
        for chunk in _chunks(labels):
            out.update(self.db.execute(f"SELECT label, id FROM turn WHERE label IN ({_in(chunk)})", chunk))
        return out

    def cosines(self, vector: np.ndarray, ids: list[str]) -> dict[str, float]:
        """Exact cosine of the query with each of these turns (their stored vectors)."""
        labels: list[tuple[str, int]] = []
        for chunk in _chunks(ids):
            labels += self.db.execute(f"SELECT id, label FROM turn WHERE label IS NOT NULL AND id IN ({_in(chunk)})",
                                      chunk).fetchall()
        if not labels:
            return {}
        stored = np.asarray(self.vectors.index.get_items([l for _, l in labels]), dtype=np.float32)
        sims = stored @ vector
        return {m: float(s) for (m, _), s in zip(labels, sims, strict=True)}

    def tokens_of(self, mem_id: str) -> set[str]:
        near = [self.turns[n] for n in self.neighbours_of(mem_id)]
        return set(tokenize("\n".join(indexed_text(self.turns[mem_id], near))))
