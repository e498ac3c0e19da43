"""Recall's indexes over turn memories (docs/DESIGN.md, "Turn memory").

- Keywords (engine.index.keywords, `.memlink/index/turns/`): BM25 over what was said —
  the whole turn (every message of both sides), its date in words, and the neighbouring
  turns of the same session, which carry the context a single message leaves out ("Yes,
  last Saturday!").
- Vectors (engine.index.vectors, space "turns"): the embedding of the turn's own text.
- The store's tables: the turns as recall shows them (neighbours, hash of the indexed
  text), which terms each turn's triples name and relate, the terms with their turn
  count, words and community, and each session's turn memories as last indexed. A
  question reads only the turns, terms and community it touches.

Sync compares each session's turn memories file (a stat) with the stamp recorded when it
was last indexed and reads only the sessions that changed: a new turn re-indexes its
session, never the history. Writes go keywords → vector snapshot → one store
transaction, and every step is idempotent: a crash anywhere is repaired by the next
sync. Everything here is derived from the turn memories; another fingerprint means a
rebuild."""

from __future__ import annotations

import datetime as dt
import errno
import hashlib
import json
import logging
from collections import defaultdict
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

import numpy as np
from filelock import FileLock, Timeout

from ..index.embed import Embedder, load_embedder
from ..index.keywords import KeywordIndex, bm25_idf
from ..index.vectors import VectorIndex
from ..model.text import has_cjk, printable, tokenize
from ..storage.atomic import full_disk_cause
from ..storage.store import Store, StoreBusy, Writer
from .communities import label_propagation
from .store import TurnStore, norm_term

if TYPE_CHECKING:
    from ..storage.vault import Vault

log = logging.getLogger(__name__)
SPACE = "turns"
FIELDS = ("text", "own")
SPEAKERS = frozenset({"user", "i", "assistant"})
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


class TurnRows(Mapping):
    """The indexed turns by id, read from the store on first use and kept."""

    def __init__(self, index: TurnIndex, count: int):
        self.index = index
        self.count = count
        self.cache: dict[str, dict] = {}

    def __getitem__(self, mem_id: str) -> dict:
        if mem_id not in self.cache:
            row = self.index.store.row("SELECT doc FROM turns WHERE id = ?", (mem_id,))
            if row is None:
                raise KeyError(mem_id)
            self.cache[mem_id] = json.loads(row[0])
        return self.cache[mem_id]

    def __iter__(self) -> Iterator[str]:
        return iter([r[0] for r in self.index.store.rows("SELECT id FROM turns ORDER BY id")])

    def __len__(self) -> int:
        return self.count


class TurnIndex:
    def __init__(self, vault: Vault, embedder: Embedder | None = None) -> None:
        self.vault = vault
        self.store = vault.store
        self.folder = None if vault.read_only else vault.state_dir / "index"
        self.embedder = embedder or load_embedder(vault.config.embedding.model).embedder
        self.fingerprint = json.dumps({"model": self.embedder.name, "dims": self.embedder.dims,
                                       "tokenizer": "tantivy-en_stem+cjk-bigram-2"}, sort_keys=True)
        self.synced: dict[str, str] = {}  # each session's turn memories file as indexed (its stamp)
        self.turns = TurnRows(self, 0)
        self.near: dict[str, list[str]] = {}
        try:
            self.keywords = KeywordIndex(self.folder / SPACE if self.folder else None, FIELDS)
        except (OSError, ValueError) as exc:
            self._in_memory(exc)
        self.vectors = VectorIndex(SPACE, self.store, self.folder, self.embedder.dims, **vault.config.search.hnsw())

    def _in_memory(self, exc: Exception) -> None:
        """The index's files cannot be written now (a full disk: docs/DESIGN.md, "Read-only
        vaults and full disks"): from here on this process indexes the turns in memory,
        with a database of its own, and writes nothing; what is on disk stays as it was
        and is brought up to date by a later sync."""
        if not isinstance(exc, OSError) and full_disk_cause(exc) is None:
            raise exc
        log.warning("the turn index cannot be written now, kept in memory: %s", exc)
        self.folder, self.store = None, Store(None)
        self.keywords = KeywordIndex(None, FIELDS)
        self.vectors = VectorIndex(SPACE, self.store, None, self.embedder.dims, **self.vault.config.search.hnsw())
        self.synced, self.near, self.turns = {}, {}, TurnRows(self, 0)

    # -- loading and syncing --------------------------------------------------------------------
    def open(self) -> TurnIndex:
        """Load the saved index, then bring it up to date with the turn memories. Syncing
        holds the index's own lock (`.memlink/index/turns.lock`), not the vault's: recall is
        a read and never waits for a vault writer; two processes never sync at once, and
        the second one loads what the first saved."""
        turns = TurnStore(self.vault)
        if self._load() and not self.stale(turns):
            return self
        lock = self._lock()
        try:
            if not self._load():
                self._reset()
            self.sync(turns)  # nothing to do when another process synced while this one waited
        finally:
            if lock is not None:
                lock.release()
        return self

    def _lock(self) -> FileLock | None:
        """The index's own lock, held; None for an index in memory, or where the lock
        cannot be made (then this process syncs alone, as a read-only vault does)."""
        if self.folder is None:
            return None
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            lock = FileLock(str(self.folder / "turns.lock"))
            lock.acquire(timeout=max(60.0, self.vault.config.lock_timeout))
        except (OSError, Timeout):
            return None
        return lock

    def _load(self) -> bool:
        """What the store holds of a saved index, with its files: False when another
        fingerprint built it, or its files do not match it (then it is rebuilt)."""
        if self.folder is None:  # a read-only vault: its keywords and vectors are made in memory, from scratch
            return False
        meta = dict(self.store.rows("SELECT key, value FROM meta WHERE key IN ('turns.fingerprint', 'turns.count')"))
        if meta.get("turns.fingerprint") != self.fingerprint:
            return False
        n = int(meta.get("turns.count", "0"))
        if not self.vectors.load() or self.keywords.count() != n:
            return False
        self.synced = dict(self.store.rows("SELECT session, stamp FROM turn_sessions"))
        self.near, self.turns = {}, TurnRows(self, n)
        return True

    def _reset(self) -> None:
        """Start from an empty index."""
        try:
            self.keywords = self.keywords.wipe()
        except (OSError, ValueError) as exc:
            self._in_memory(exc)
        self.vectors.wipe()

        def work(w: Writer) -> None:
            for table in ("turns", "turn_sessions", "mentions", "relates", "terms", "term_keys"):
                w.execute(f"DELETE FROM {table}")  # noqa: S608 (fixed names)
            w.execute("DELETE FROM meta WHERE key LIKE 'turns.%'")  # (the sync that follows writes them)

        self.store.try_write("the turn index", work)
        self.synced, self.near, self.turns = {}, {}, TurnRows(self, 0)

    def stale(self, store: TurnStore | None = None) -> bool:
        """Whether the turn memories changed since this index was synced (a stat a session)."""
        return (store or TurnStore(self.vault)).stamps() != self.synced

    def neighbours_of(self, mem_id: str) -> list[str]:
        if mem_id not in self.near:
            row = self.store.row("SELECT near FROM turns WHERE id = ?", (mem_id,))
            self.near[mem_id] = json.loads(row[0]) if row else []
        return self.near[mem_id]

    def sync(self, store: TurnStore) -> None:
        """Index what changed in the turn memories since the loaded state (everything after
        a reset): only the sessions whose file moved are read."""
        stamps = store.stamps()
        changed = sorted(n for n, s in stamps.items() if self.synced.get(n) != s)
        dropped = sorted(n for n in self.synced if n not in stamps)
        if not changed and not dropped:
            return
        turns: dict[str, dict] = {}
        for session in changed:
            for row in store.rows(session):
                turns[row["id"]] = dict(row)
        old = {m: h for m, h in self.store.rows_in("SELECT id, hash FROM turns WHERE session IN ({})", changed + dropped)}
        near = neighbours(turns)  # a session's turns are read together: neighbours never cross one
        texts = {m: indexed_text(turns[m], [turns[n] for n in near[m]]) for m in turns}
        hashes = {m: _sha("\x1f".join(texts[m])) for m in turns}
        todo = sorted(m for m in turns if old.get(m) != hashes[m])
        gone = sorted(m for m in old if m not in turns)
        for m in gone:
            self.keywords.remove(m)
        for m in todo:
            own, near_text = texts[m]
            self.keywords.put(m, {"text": own + "\n" + near_text, "own": own})
        try:
            if self.folder is not None and not self.vault.store.on_disk:  # the database moved into memory
                raise OSError(errno.ENOSPC, "the disk is full: the database is kept in memory")
            self.keywords.flush()
        except (OSError, ValueError) as exc:  # (a full disk)
            self._in_memory(exc)
            self.sync(store)  # every turn again, in memory
            return
        self.vectors.remove(gone)
        if todo:
            matrix = self.embedder.encode([own_text(turns[m]) for m in todo])
            self.vectors.put_many([(m, matrix[i : i + 1]) for i, m in enumerate(todo)], threads=2)
        saved: list[str | None] = []

        def work(w: Writer) -> None:
            try:
                saved.append(self.vectors.save(w))
            except OSError:  # the snapshot cannot be written (a full disk): built again next time
                w.execute("DELETE FROM meta WHERE key = 'turns.fingerprint'")
            before = sorted(old)
            touched = {t for (t,) in self.store.rows_in("SELECT term FROM mentions WHERE turn IN ({})", before)}
            w.executemany("DELETE FROM mentions WHERE turn = ?", [(m,) for m in before])
            w.executemany("DELETE FROM relates WHERE turn = ?", [(m,) for m in before])
            w.executemany("DELETE FROM turns WHERE id = ?", [(m,) for m in before])
            rows, mentions, links = [], [], []
            for m in sorted(turns):
                rows.append((m, turns[m]["session"], hashes[m], json.dumps(near[m]), json.dumps(turns[m], ensure_ascii=False)))
                said, joined = turn_terms(turns[m])
                mentions += [(m, tid, text) for tid, text in said.items()]
                links += [(m, a, b, n) for (a, b), n in joined.items()]
                touched.update(said)
            w.executemany("INSERT INTO turns VALUES (?, ?, ?, ?, ?)", rows)
            w.executemany("INSERT INTO mentions VALUES (?, ?, ?)", mentions)
            w.executemany("INSERT INTO relates VALUES (?, ?, ?, ?)", links)
            self._update_terms(w, sorted(touched))
            w.executemany("DELETE FROM turn_sessions WHERE session = ?", [(n,) for n in dropped])
            w.executemany("INSERT OR REPLACE INTO turn_sessions VALUES (?, ?)", [(n, stamps[n]) for n in changed])
            count = w.execute("SELECT count(*) FROM turns").fetchone()[0]
            w.execute("INSERT OR REPLACE INTO meta VALUES ('turns.count', ?)", (str(count),))
            if saved:
                w.execute("INSERT OR REPLACE INTO meta VALUES ('turns.fingerprint', ?)", (self.fingerprint,))
            self.synced, self.near, self.turns = dict(stamps), {}, TurnRows(self, count)

        try:
            with self.store.write() as w:
                work(w)
        except StoreBusy:  # not recorded (a full disk): this process recalls from what it just read
            for name in saved:
                self.vectors.discard(name)
            rows = TurnRows(self, len(self.turns) + len(set(turns) - set(old)) - len(gone))
            rows.cache.update(turns)
            self.turns, self.near = rows, {**self.near, **near}
            return
        for name in saved:
            self.vectors.saved(name)

    def _update_terms(self, w: Writer, touched: list[str]) -> None:
        """The term rows of the terms a sync touched (text, turn count, words), then the
        communities of every component they are in, computed afresh: label propagation
        never crosses components, so the others keep theirs."""
        for tid in touched:
            first = w.execute("SELECT text, count(*) OVER () FROM mentions WHERE term = ? ORDER BY turn LIMIT 1",
                              (tid,)).fetchone()
            was = w.execute("SELECT 1 FROM terms WHERE id = ?", (tid,)).fetchone()
            if first is None:
                w.execute("DELETE FROM terms WHERE id = ?", (tid,))
                w.execute("DELETE FROM term_keys WHERE term = ?", (tid,))
                continue
            w.execute("INSERT OR REPLACE INTO terms VALUES (?, ?, ?, ?)", (tid, first[0], first[1], tid))
            if not was:
                w.executemany("INSERT OR IGNORE INTO term_keys VALUES (?, ?)", [(k, tid) for k in term_keys(first[0])])
        import networkx as nx  # (only a sync that touched terms needs it)

        seen: set[str] = set()
        for tid in touched:
            if tid in seen or not w.execute("SELECT 1 FROM terms WHERE id = ?", (tid,)).fetchone():
                continue
            nodes, edges = self._component(w, tid)
            seen |= nodes
            g = nx.Graph()
            g.add_nodes_from(sorted(nodes))
            g.add_weighted_edges_from((a, b, wt) for (a, b), wt in sorted(edges.items()))
            w.executemany("UPDATE terms SET community = ? WHERE id = ?",
                          [(c, n) for n, c in sorted(label_propagation(g).items())])

    @staticmethod
    def _edges_of(w: Writer, tid: str) -> dict[tuple[str, str], int]:
        """The term's edges in the graph (weight: how many triples relate the two terms)."""
        out: dict[tuple[str, str], int] = {}
        for b, n in w.execute("SELECT b, sum(n) FROM relates WHERE a = ? GROUP BY b", (tid,)):
            out[(tid, b)] = n
        for a, n in w.execute("SELECT a, sum(n) FROM relates WHERE b = ? GROUP BY a", (tid,)):
            out[(a, tid)] = n
        return out

    def _component(self, w: Writer, tid: str) -> tuple[set[str], dict[tuple[str, str], int]]:
        nodes, edges, frontier = {tid}, {}, [tid]
        while frontier:
            nxt = []
            for node in frontier:
                for (a, b), n in self._edges_of(w, node).items():
                    edges[(a, b)] = n
                    other = b if a == node else a
                    if other not in nodes:
                        nodes.add(other)
                        nxt.append(other)
            frontier = nxt
        return nodes, edges

    # -- the term graph, read as a question needs it --------------------------------------------
    def term_text(self) -> dict[str, str]:
        """Every term's text (for inspection: a question reads only the terms it names)."""
        return dict(self.store.rows("SELECT id, text FROM terms ORDER BY id"))

    def terms_named(self, keys: set[str]) -> list[tuple[str, str, int]]:
        """Terms having one of these keys (``term_keys``), by id: (id, text, turn count)."""
        found = {t for (t,) in self.store.rows_in("SELECT term FROM term_keys WHERE key IN ({})", sorted(keys))}
        return sorted(self.store.rows_in("SELECT id, text, turns FROM terms WHERE id IN ({})", sorted(found)))

    def community_graph(self, seeds: list[str]) -> tuple[list[str], dict[tuple[str, str], int]]:
        """The terms of the seeds' communities, sorted, and the edges among them."""
        communities = {c for (c,) in self.store.rows_in("SELECT community FROM terms WHERE id IN ({})", sorted(seeds))}
        members = {m for (m,) in self.store.rows_in("SELECT id FROM terms WHERE community IN ({})", sorted(communities))}
        edges: dict[tuple[str, str], int] = {}
        for a, b, n in self.store.rows_in("SELECT a, b, sum(n) FROM relates WHERE a IN ({}) GROUP BY a, b", sorted(members)):
            if b in members:
                edges[(a, b)] = n
        return sorted(members), dict(sorted(edges.items()))

    def term_turns(self, terms: list[str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = defaultdict(list)
        for term, turn in sorted(self.store.rows_in("SELECT term, turn FROM mentions WHERE term IN ({})", terms),
                                 key=lambda r: r[1]):
            out[term].append(turn)
        return out

    # -- querying -------------------------------------------------------------------------------
    def keyword_hits(self, tokens: list[str], k: int, own_weight: float = 0.0) -> list[tuple[str, float]]:
        """BM25 over the turn with its neighbours, plus, weighted, over the turn alone."""
        boosts = {"text": 1.0, **({"own": own_weight} if own_weight else {})}
        return self.keywords.search(tokens, k, boosts)

    def idf(self, tokens: list[str]) -> dict[str, float]:
        """BM25's idf of each token in this collection (a token it never saw: the highest)."""
        df, n = self.keywords.doc_freq(sorted(set(tokens)), ("text",))
        return {tok: bm25_idf(df[tok], max(1, n)) for tok in set(tokens)}

    def doc_freq(self, words: list[str]) -> dict[str, int]:
        """How many indexed turns hold each word (stemmed like the index)."""
        out = {}
        for w in words:
            df, _ = self.keywords.doc_freq(tokenize(w), ("text",))
            out[w] = max(df.values(), default=0)
        return out

    def vector_hits(self, vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        """Up to ``k`` turns by cosine similarity with the question."""
        return sorted(((m, s) for m, s, _ in self.vectors.query(vector, k)), key=lambda kv: -kv[1])[:k]

    def cosines(self, vector: np.ndarray, ids: list[str]) -> dict[str, float]:
        """Exact cosine of the query with each of these turns (their stored vectors)."""
        return self.vectors.cosines(vector, ids)

    def tokens_of(self, mem_id: str) -> set[str]:
        near = [self.turns[n] for n in self.neighbours_of(mem_id)]
        return set(tokenize("\n".join(indexed_text(self.turns[mem_id], near))))
