"""Search quality on the sample vault: recall@5 and MRR of the hand-labelled queries in
benchmarks/quality_queries.yaml, for keyword-only, vector-only, hybrid and hybrid + graph.
A result's evidence (notes derived from it, grouped under it) counts in its slot.

    .venv/bin/python benchmarks/quality.py [--vault PATH] [--verbose]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from engine import Vault  # noqa: E402
from engine.index import SearchIndex  # noqa: E402
from engine.retrieve.search import search  # noqa: E402

MODES = {
    "keyword": dict(routes=("keyword",), use_graph=False),
    "vector": dict(routes=("vector",), use_graph=False),
    "hybrid": dict(routes=("vector", "keyword"), use_graph=False),
    "hybrid+graph": dict(routes=("vector", "keyword"), use_graph=True),
}


def evaluate(vault: Vault, queries: list[dict], k: int = 5, verbose: bool = False) -> dict[str, dict[str, float]]:
    index = SearchIndex.for_vault(vault)
    index.sync()
    out = {}
    for mode, kwargs in MODES.items():
        recall = mrr = 0.0
        for q in queries:
            expected = set(q["expected"])
            # A hit's evidence (derived notes grouped under it) is shown in its slot.
            slots = [{h.uri, *(e.uri for e in h.evidence)}
                     for h in search(vault, q["query"], k=k, index=index, snippets=False, **kwargs)[:k]]
            hits = [u for slot in slots for u in slot]
            recall += len(expected & set(hits)) / len(expected)
            rank = next((i for i, slot in enumerate(slots, 1) if slot & expected), None)
            mrr += 1.0 / rank if rank else 0.0
            if verbose and not rank:
                print(f"  [{mode}] miss: {q['query']!r} -> {hits[:3]}")
        out[mode] = {"recall@5": recall / len(queries), "mrr": mrr / len(queries)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vault", type=Path, default=REPO / "sample_vault")
    ap.add_argument("--queries", type=Path, default=REPO / "benchmarks" / "quality_queries.yaml")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    queries = yaml.safe_load(args.queries.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "vault"
        shutil.copytree(args.vault, copy, ignore=shutil.ignore_patterns(".memlink"))
        results = evaluate(Vault.open(copy), queries, verbose=args.verbose)
    print(f"{len(queries)} queries on {args.vault.name}")
    print(f"{'mode':<14} {'recall@5':>9} {'MRR':>7}")
    for mode, r in results.items():
        print(f"{mode:<14} {r['recall@5']:>9.3f} {r['mrr']:>7.3f}")


if __name__ == "__main__":
    main()
