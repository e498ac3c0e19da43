"""Search and recall quality on the sample vault.

- Search: recall@5 and MRR of the hand-labelled queries in benchmarks/quality_queries.yaml,
  for keyword-only, vector-only, hybrid and hybrid + graph. A result's evidence (notes
  derived from it, grouped under it) counts in its slot.
- Recall over the sample sessions (imported with the rules provider): recall@5 of the
  hand-labelled turn questions in benchmarks/recall_queries.yaml, for keyword + vector,
  the graph route alone and the fusion of all three. Real long conversations:
  benchmarks/locomo.py.

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
from engine.sessions.importer import import_chat, turn_extractor  # noqa: E402
from engine.sessions.recall import RecallParams, TurnMemory  # noqa: E402

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


RECALL_MODES = {"keyword + vector": RecallParams(graph=False, meaning_weight=0.0), "graph": None, "fused": RecallParams()}


def recall_at_5(memory: TurnMemory, queries: list[dict], mode: str, verbose: bool = False) -> float:
    """The share of each question's expected turns among the 5 recalled, averaged."""
    total = 0.0
    for q in queries:
        expected = {tuple(e) for e in q["expected"]}
        params = RECALL_MODES[mode]
        if params is None:
            got = [tuple(memory.turns[m]["sources"]) for m, _, _ in memory.graph_route(memory.literal_terms(q["query"]), 5)]
        else:
            memory.params = params
            got = [tuple(h.sources) for h in memory.recall(q["query"], k=5)]
        found = len(expected & set(got[:5])) / len(expected)
        total += found
        if verbose and mode == "fused" and found < 1:
            print(f"  [recall] miss: {q['query']!r}")
    memory.params = RecallParams()
    return total / max(1, len(queries))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vault", type=Path, default=REPO / "sample_vault")
    ap.add_argument("--queries", type=Path, default=REPO / "benchmarks" / "quality_queries.yaml")
    ap.add_argument("--turn-queries", type=Path, default=REPO / "benchmarks" / "recall_queries.yaml")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    queries = yaml.safe_load(args.queries.read_text(encoding="utf-8"))
    turn_queries = yaml.safe_load(args.turn_queries.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "vault"
        shutil.copytree(args.vault, copy, ignore=shutil.ignore_patterns(".memlink"))
        vault = Vault.open(copy)
        results = evaluate(vault, queries, verbose=args.verbose)
        chat = Path(tmp) / "sessions.jsonl"
        chat.write_text("".join(p.read_text(encoding="utf-8") for p in sorted((copy / "sessions").glob("*.jsonl"))),
                        encoding="utf-8")
        import_chat(vault, chat, turn_extractor(vault))
        memory = TurnMemory(vault)
        recalled = {mode: recall_at_5(memory, turn_queries, mode, args.verbose) for mode in RECALL_MODES}
        turns = len(memory.turns)
        vault.close()
    print(f"search: {len(queries)} queries on {args.vault.name}")
    print(f"{'mode':<16} {'recall@5':>9} {'MRR':>7}")
    for mode, r in results.items():
        print(f"{mode:<16} {r['recall@5']:>9.3f} {r['mrr']:>7.3f}")
    print(f"\nrecall: {len(turn_queries)} turn questions over the sample sessions ({turns} turns)")
    print(f"{'mode':<16} {'recall@5':>9}")
    for mode, r in recalled.items():
        print(f"{mode:<16} {r:>9.3f}")


if __name__ == "__main__":
    main()
