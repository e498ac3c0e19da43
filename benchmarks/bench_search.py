"""Retrieval figures on synthetic vaults: full reindex throughput, hybrid + graph search
latency against a full-scan baseline, hnswlib recall@10 against exact search, the cost of
indexing one changed note, and peak memory.

    .venv/bin/python benchmarks/bench_search.py --sizes 10000 100000
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # small products stall under threaded BLAS

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from synthetic import generate_fast  # noqa: E402

from engine import Vault  # noqa: E402
from engine.graph import LinkGraph  # noqa: E402
from engine.index import SearchIndex  # noqa: E402
from engine.retrieve.search import search  # noqa: E402


def pct(ms: list[float], p: float) -> float:
    ms = sorted(ms)
    return ms[min(len(ms) - 1, int(len(ms) * p))]


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def full_scan(texts: list[str], uris: list[str], query: str, k: int = 10) -> list[str]:
    """The baseline: score every note's text by query-term occurrences (a wiki grep)."""
    terms = query.lower().split()
    scored = []
    for uri, text in zip(uris, texts, strict=True):
        s = sum(text.count(t) for t in terms)
        if s:
            scored.append((s, uri))
    scored.sort(reverse=True)
    return [u for _, u in scored[:k]]


def hnsw_recall(index: SearchIndex, queries: list[str], k: int = 10) -> float:
    vi = index.vectors
    labels = np.array(sorted(vi.labels))
    matrix = np.asarray(vi.index.get_items(labels), dtype=np.float32)
    matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
    hits = total = 0
    for q in queries:
        vec = index.embed_query(q)
        if not np.any(vec):
            continue
        exact = set(labels[np.argsort(-(matrix @ vec))[:k]].tolist())
        found, _ = vi.index.knn_query(vec[None, :], k=k)
        hits += len(exact & set(found[0].tolist()))
        total += k
    return hits / total if total else float("nan")


def run(n: int, queries_n: int, tmp: Path) -> None:
    print(f"\n== {n:,} notes")
    root = tmp / f"v{n}"
    t = time.perf_counter()
    meta = generate_fast(root, n)
    print(f"generated in {time.perf_counter() - t:.1f}s: {meta['links']:,} links")
    text = meta["text"]
    rng = random.Random(3)

    vault = Vault.open(root)
    t = time.perf_counter()
    vault.sync_catalog()
    cat = time.perf_counter() - t
    index = SearchIndex(vault)
    index.load()
    t = time.perf_counter()
    index.sync(full=True)
    took = time.perf_counter() - t
    print(f"catalog of a vault never seen (read + parse every note): {cat:.1f}s")
    print(f"full reindex (`memlink reindex --full`): {took:.1f}s = {n / took:,.0f} notes/s ({len(index.vectors):,} chunks: "
          f"read, chunk, embed, hnswlib, tantivy, snapshot)")
    print(f"cold start, both: {cat + took:.1f}s = {n / (cat + took):,.0f} notes/s   peak memory so far {peak_mb():,.0f} MB")
    vault.services.adopt_index(index)

    t = time.perf_counter()
    LinkGraph.for_vault(vault)
    print(f"link graph build (first search only): {time.perf_counter() - t:.2f}s")

    queries = []
    for _ in range(queries_n):
        topic = meta["topics"][rng.randrange(n)]
        words = rng.sample(text.topics[topic], 2) + [rng.choice(text.common[:300])]
        queries.append(" ".join(words))
    for q in queries[:5]:
        search(vault, q, k=10, index=index)

    def timed(fn) -> list[float]:
        out = []
        for q in queries:
            t = time.perf_counter()
            fn(q)
            out.append((time.perf_counter() - t) * 1000)
        return out

    hybrid_graph = timed(lambda q: search(vault, q, k=10, index=index))
    hybrid = timed(lambda q: search(vault, q, k=10, index=index, use_graph=False))
    corpus = [(root / u).read_text(encoding="utf-8").lower() for u in meta["uris"]]
    scan = timed(lambda q: full_scan(corpus, meta["uris"], q))
    corpus.clear()
    hg50 = statistics.median(hybrid_graph)
    print(f"search hybrid+graph (with snippets): p50 {hg50:.2f} ms  p95 {pct(hybrid_graph, .95):.2f} ms")
    print(f"search hybrid, no graph:             p50 {statistics.median(hybrid):.2f} ms  p95 {pct(hybrid, .95):.2f} ms")
    print(f"full-scan baseline:                  p50 {statistics.median(scan):.2f} ms  p95 {pct(scan, .95):.2f} ms"
          f"  → hybrid+graph is {statistics.median(scan) / hg50:.0f}× faster")
    print(f"hnswlib recall@10 vs exact search: {hnsw_recall(index, queries[:200]):.3f} "
          f"(M {index.vectors.params['M']}, ef_construction {index.vectors.params['ef_construction']}, "
          f"ef {index.vectors.params['ef_search']})")

    # One changed note: the index update alone, and the whole write (file, catalog, index).
    sample = rng.sample(meta["uris"], 100)
    upd, write = [], []
    for uri in sample:
        note = vault.read_note(uri)
        t = time.perf_counter()
        index.on_vault_change("changed", uri)
        upd.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        vault.write_note(note.memory_type, {"content": text.body(meta["topics"][0])}, uri=uri)
        write.append((time.perf_counter() - t) * 1000)
    print(f"index one changed note (embed, hnswlib, tantivy commit): p50 {statistics.median(upd):.2f} ms  p95 {pct(upd, .95):.2f} ms")
    print(f"write_note end to end (atomic write, catalog, index):    p50 {statistics.median(write):.2f} ms  p95 {pct(write, .95):.2f} ms")
    t = time.perf_counter()
    index.checkpoint()
    print(f"checkpoint (snapshot to disk): {time.perf_counter() - t:.2f}s")
    print(f"peak memory: {peak_mb():,.0f} MB")
    vault.close()
    shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000])
    ap.add_argument("--queries", type=int, default=300)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="memlink-bench-"))
    try:
        for n in args.sizes:
            run(n, args.queries, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
