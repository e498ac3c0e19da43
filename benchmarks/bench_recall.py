"""Chat memory figures: import throughput (turns/s, rules provider), recall latency on a
generated long session (10k turns by default) beside a full-scan BM25 baseline, the wall
time of one `memlink recall` process (the first builds and saves the turn indexes, later
ones load them), the open figure — a fresh process opening the vault and answering one
recall, imports excluded — beside raw hnswlib + tantivy loads of the same snapshot and a
full scan of the stored turns, the cost of the first recall after one new turn (the sync),
and recall quality on the hand-labelled sample questions
(benchmarks/recall_queries.yaml) plus generated questions about the long session —
recall@5 for keyword + vector, graph only and fused. Real-conversation quality:
benchmarks/locomo.py.

    .venv/bin/python benchmarks/bench_recall.py [--turns 30000] [--per-session 100]

The generated history is split into sessions of ``--per-session`` turns (a session is a
shard of the turn store: a new turn re-indexes its session).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from synthetic import TextMaker  # noqa: E402

from engine import Vault  # noqa: E402
from engine.index.keywords import bm25_idf  # noqa: E402
from engine.model.text import tokenize  # noqa: E402
from engine.sessions.importer import import_chat, turn_extractor  # noqa: E402
from engine.sessions.recall import RecallParams, TurnMemory  # noqa: E402

PEOPLE = ["Astrid Holm", "Bram Visser", "Chen Wei", "Dara Okafor", "Emil Novak", "Farah Aziz", "Gus Moreno", "Hana Sato"]


def long_session(n: int, seed: int = 5, per_session: int = 0) -> tuple[list[dict], list[dict]]:
    """A long generated conversation (split into sessions of ``per_session`` turns when
    given); every 50th turn states a fact about a person, and a question about each such
    fact is labelled with its turn."""
    rng = random.Random(seed)
    text = TextMaker(rng)
    records, questions = [], []
    for i in range(n):
        q_id, a_id = f"long-{2 * i:06d}", f"long-{2 * i + 1:06d}"
        if i % 50 == 7:
            person, thing = rng.choice(PEOPLE), " ".join(rng.sample(text.topics[rng.randrange(200)], 2))
            q = f"Note that {person} is handling the {thing} for the {rng.choice(['harbour', 'studio', 'garden'])} project."
            a = f"Noted: {person} handles the {thing}."
            questions.append({"query": f"who handles the {thing}", "expected": [[q_id, a_id]], "kind": "generated"})
        else:
            q = text.sentence(rng.randrange(200), rng.randint(8, 16))
            a = text.sentence(rng.randrange(200), rng.randint(6, 12))
        ts = f"2026-{1 + i * 12 // n:02d}-01T10:00:00Z"
        session = f"long-{i // per_session:04d}" if per_session else "long"
        records.append({"session": session, "id": q_id, "role": "user", "content": q, "ts": ts})
        records.append({"session": session, "id": a_id, "role": "assistant", "content": a, "ts": ts})
    return records, questions


MODES = {"keyword + vector": RecallParams(graph=False), "graph": None, "fused": RecallParams()}


def recall_at_5(memory: TurnMemory, queries: list[dict], mode: str) -> float:
    total = 0.0
    for q in queries:
        expected = {tuple(e) for e in q["expected"]}
        if MODES[mode] is None:
            seeds = memory.literal_terms(q["query"])
            got = [tuple(memory.turns[m]["sources"]) for m, _, _ in memory.graph_route(seeds, 5)]
        else:
            memory.params = MODES[mode]
            got = [tuple(h.sources) for h in memory.recall(q["query"], k=5)]
        total += len(expected & set(got[:5])) / len(expected)
    return total / max(1, len(queries))


def full_scan_bm25(docs: dict[str, Counter], query: list[str], k: int) -> list[str]:
    """The baseline: BM25 by scoring every turn's text, no index (one pass for the
    document frequencies, one for the scores)."""
    n = len(docs)
    avg = sum(sum(c.values()) for c in docs.values()) / max(1, n)
    terms = set(query)
    df = Counter(t for counts in docs.values() for t in terms if t in counts)
    scores = {}
    for m, counts in docs.items():
        length = sum(counts.values())
        s = sum(bm25_idf(df[t], n) * counts[t] * 2.2 / (counts[t] + 1.2 * (0.25 + 0.75 * length / avg))
                for t in terms if t in counts)
        if s:
            scores[m] = s
    return sorted(scores, key=lambda m: (-scores[m], m))[:k]


OPEN_MEMLINK = """
import sys, time
import engine.services  # imported lazily by the first use of vault.services: import time, not open time
from engine import Vault
from engine.sessions.recall import TurnMemory
t = time.perf_counter()
vault = Vault.open(sys.argv[1])
hits = TurnMemory.for_vault(vault).recall(sys.argv[2], k=5)
print(time.perf_counter() - t, len(hits))
"""

OPEN_RAW = """
import json, sqlite3, sys, time
from pathlib import Path
import hnswlib, tantivy
from engine.index.embed import bundled_model_path, load_static_model
from engine.sessions.turnindex import _schema
folder = Path(sys.argv[1]) / ".memlink" / "turns"
t = time.perf_counter()
model = load_static_model(bundled_model_path())
db = sqlite3.connect(folder / "turns.sqlite")
meta = json.loads(db.execute("SELECT value FROM meta WHERE key = 'vectors'").fetchone()[0])
index = hnswlib.Index(space="cosine", dim=meta["dims"])
index.load_index(str(folder / meta["file"]), max_elements=meta["max_elements"])
index.set_ef(300)
vec = model.encode([sys.argv[2]])[0]
labels, _ = index.knn_query(vec[None, :], k=50)
kw = tantivy.Index(_schema(), path=str(folder / "keywords"))
searcher = kw.searcher()
found = searcher.search(kw.parse_query(sys.argv[2], ["text"]), 50).hits
print(time.perf_counter() - t, len(found))
"""

OPEN_SCAN = """
import json, sys, time
from collections import Counter
from pathlib import Path
sys.path.insert(0, "benchmarks")
from bench_recall import full_scan_bm25
from engine.model.text import tokenize
t = time.perf_counter()
docs = {}
for shard in sorted((Path(sys.argv[1]) / ".memlink" / "db").glob("turns-*.json")):
    for row in (json.loads(shard.read_text(encoding="utf-8")).get("turns") or {}).values():
        docs[row["id"]] = Counter(tokenize(row["question"] + " " + row["answer"]))
hits = full_scan_bm25(docs, tokenize(sys.argv[2]), 5)
print(time.perf_counter() - t, len(hits))
"""


def fresh(code: str, root: Path, query: str) -> float:
    """Seconds a fresh process spends on ``code``'s timed part (imports excluded)."""
    out = subprocess.run([sys.executable, "-c", code, str(root), query], check=True, capture_output=True, text=True,
                         cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO), OPENBLAS_NUM_THREADS="1")).stdout
    return float(out.split()[0])


def open_figures(root: Path, query: str, runs: int = 5) -> None:
    """Open + first recall in fresh processes, memlink beside two baselines on the same store."""
    took = {name: statistics.median(fresh(code, root, query) for _ in range(runs))
            for name, code in (("memlink", OPEN_MEMLINK), ("raw", OPEN_RAW), ("scan", OPEN_SCAN))}
    print(f"open: a fresh process opening the vault and answering one recall (imports excluded, median of {runs}): "
          f"memlink {took['memlink']:.3f} s; baselines on the same store: raw hnswlib + tantivy load and one query "
          f"each (model load included) {took['raw']:.3f} s, full scan of the stored turns (TinyDB shards, BM25) "
          f"{took['scan']:.3f} s")


def one_new_turn(root: Path, query: str) -> None:
    """The first recall after one new turn in one session (a sync), beside a rebuild."""
    sessions = sorted(p.stem for p in (root / "sessions").glob("long*.jsonl"))
    session = sessions[len(sessions) // 2]
    vault = Vault.open(root)
    from engine.sessions.extract import RulesTurnExtractor
    from engine.sessions.importer import extract_pending
    from engine.sessions.log import append_events

    append_events(vault, session, [
        {"session": session, "id": "new-q", "role": "user", "content": "Did Astrid Holm fix the kiln?", "ts": "2026-12-01"},
        {"session": session, "id": "new-a", "role": "assistant", "content": "Yes, it fires again.", "ts": "2026-12-01"}])
    extract_pending(vault, [session], RulesTurnExtractor(), final=True)
    vault.close()
    synced = fresh(OPEN_MEMLINK, root, query)
    shutil.rmtree(root / ".memlink" / "turns")
    rebuilt = fresh(OPEN_MEMLINK, root, query)
    print(f"after one new turn in one session: open + sync + recall {synced:.2f} s in a fresh process; "
          f"baseline, rebuilding the turn indexes: {rebuilt:.2f} s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=10_000)
    ap.add_argument("--per-session", type=int, default=100)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="memlink-recall-"))
    try:
        root = tmp / "v"
        shutil.copytree(REPO / "sample_vault", root, ignore=shutil.ignore_patterns(".memlink"))
        vault = Vault.open(root)
        sample = tmp / "sample.jsonl"
        sample.write_text("".join(p.read_text(encoding="utf-8") for p in sorted((root / "sessions").glob("*.jsonl"))))
        import_chat(vault, sample, turn_extractor(vault))
        labelled_path = REPO / "benchmarks" / "recall_queries.yaml"
        labelled = yaml.safe_load(labelled_path.read_text(encoding="utf-8"))
        alone = TurnMemory(vault)
        print(f"hand-labelled sample questions ({len(labelled)}), the sample sessions alone: recall@5 " + "  ".join(
            f"{mode} {recall_at_5(alone, labelled, mode):.3f}" for mode in MODES))
        records, generated = long_session(args.turns, per_session=args.per_session)
        path = tmp / "long.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
        t = time.perf_counter()
        report = import_chat(vault, path, turn_extractor(vault))
        took = time.perf_counter() - t
        print(f"import-chat: {report.extracted:,} turns in {took:.1f}s = {report.extracted / took:,.0f} turns/s "
              f"(rules provider: log append, projection, extraction, storage)")
        vault.close()
        walls = []
        for _ in range(4):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "memlink_tui", "--vault", str(root), "recall", "who handles the kiln",
                            "--json"], check=True, capture_output=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
            walls.append(time.perf_counter() - t)
        print(f"one `memlink recall` process over the store: first {walls[0]:.2f} s (builds and saves the turn "
              f"indexes), then {statistics.median(walls[1:]):.2f} s wall (median of 3, loads them)")
        open_figures(root, "who handles the garden project lights")
        vault = Vault.open(root)
        t = time.perf_counter()
        memory = TurnMemory.for_vault(vault)
        print(f"recall index open in process ({len(memory.turns):,} turns): {time.perf_counter() - t:.2f}s")
        rng = random.Random(9)
        questions = [q["query"] for q in generated] + [text for text in
                     ("what did I say about my coffee", "the winter market", "Wang Jun and the migration", "kiln for home")]
        lat = []
        for q in rng.choices(questions, k=300):
            t = time.perf_counter()
            memory.recall(q, k=5)
            lat.append((time.perf_counter() - t) * 1000)
        lat.sort()
        docs = {m: Counter(tokenize(t["question"] + " " + t["answer"])) for m, t in memory.turns.items()}
        scan = []
        for q in rng.choices(questions, k=30):
            t = time.perf_counter()
            full_scan_bm25(docs, tokenize(q), 5)
            scan.append((time.perf_counter() - t) * 1000)
        print(f"recall latency at {len(memory.turns):,} turns: p50 {statistics.median(lat):.1f} ms  "
              f"p95 {lat[int(len(lat) * .95)]:.1f} ms; full-scan BM25 baseline over the same turns: "
              f"p50 {statistics.median(scan):.1f} ms")
        for name, qs in (("hand-labelled sample questions, with the long session", labelled),
                         ("generated long-session questions", generated)):
            if not qs:
                continue
            print(f"{name} ({len(qs)}): recall@5 " + "  ".join(
                f"{mode} {recall_at_5(memory, qs, mode):.3f}" for mode in MODES))
        vault.close()
        one_new_turn(root, "did Astrid Holm fix the kiln")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
