"""Multilingual vectors: the bundled English model beside the bundled multilingual one on
the sample vault, in the same run.

For each model (``embedding.model`` in a copy of the sample vault's memlink.yaml):

- recall@5 of the hand-labelled queries in benchmarks/multilingual_queries.yaml, by
  language (zh, en), over notes (memlink search: keyword route only — BM25, the baseline —,
  vector route only, and hybrid without graph) and over session turns (recall's keyword
  route, its vector route, and keyword + vector fused); "vec>0" counts the queries whose
  vector route returns anything at all;
- the figures of benchmarks/quality.py (recall@5 and MRR), split into its English and its
  Chinese queries;
- how many of benchmarks/unrelated_questions.txt recall and search answer (they should
  abstain);
- the model's size on disk, its load time in a fresh process (median of 3; the CLI loads
  it at every start) and the time to embed every note chunk and session turn of the vault.

    .venv/bin/python benchmarks/multilingual.py [--models english multilingual] [--verbose]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from quality import evaluate as quality_evaluate  # noqa: E402

from engine import Vault  # noqa: E402
from engine.index import SearchIndex  # noqa: E402
from engine.index.embed import BUNDLED_MODEL, bundled_model_path, bundled_name, nonzero, query_vector  # noqa: E402
from engine.model.text import chunk_text, tokenize  # noqa: E402
from engine.retrieve.search import search  # noqa: E402
from engine.sessions.importer import import_chat, turn_extractor  # noqa: E402
from engine.sessions.recall import RecallParams, TurnMemory  # noqa: E402

QUERIES = REPO / "benchmarks" / "multilingual_queries.yaml"
UNRELATED = REPO / "benchmarks" / "unrelated_questions.txt"
NOTE_MODES = {"keyword": ("keyword",), "vector": ("vector",), "hybrid": ("vector", "keyword")}
LOAD = """
import sys, time
t = time.perf_counter()
from engine.index.embed import load_embedder
load_embedder(sys.argv[1] or None)
print(time.perf_counter() - t)
"""


def open_copy(src: Path, tmp: Path, model: str) -> Vault:
    root = tmp / model.replace("/", "_")
    shutil.copytree(src, root, ignore=shutil.ignore_patterns(".memlink"))
    cfg = yaml.safe_load((root / "memlink.yaml").read_text(encoding="utf-8"))
    if model != "default":
        cfg["embedding"] = {"model": model}
    (root / "memlink.yaml").write_text(yaml.safe_dump(cfg, allow_unicode=True), encoding="utf-8")
    vault = Vault.open(root)
    sample = tmp / f"{root.name}-sessions.jsonl"
    sample.write_text("".join(p.read_text(encoding="utf-8") for p in sorted((root / "sessions").glob("*.jsonl"))),
                      encoding="utf-8")
    import_chat(vault, sample, turn_extractor(vault))
    return vault


def note_scores(vault: Vault, index: SearchIndex, q: dict, routes: tuple[str, ...]) -> tuple[float, int]:
    expected = set(q["notes"])
    hits = search(vault, q["query"], k=5, index=index, snippets=False, routes=routes, use_graph=False)[:5]
    found = {u for h in hits for u in (h.uri, *(e.uri for e in h.evidence))}
    return len(expected & found) / len(expected), len(hits)


def turn_scores(memory: TurnMemory, q: dict, mode: str) -> tuple[float, int]:
    expected = {tuple(e) for e in q["turns"]}
    if mode == "keyword":
        ids = [m for m, _ in memory.index.keyword_hits(tokenize(q["query"]), 5, memory.params.own_weight)]
    elif mode == "vector":
        ids = [m for m, _ in memory.index.vector_hits(query_vector(memory.embedder, q["query"]), 5)]
    else:
        memory.params = RecallParams(graph=False)
        ids = [h.memory_id for h in memory.recall(q["query"], k=5)]
        memory.params = RecallParams()
    got = {tuple(memory.turns[m]["sources"]) for m in ids[:5]}
    return len(expected & got) / len(expected), len(ids)


def measure(src: Path, model: str, tmp: Path, verbose: bool) -> dict:
    queries = yaml.safe_load(QUERIES.read_text(encoding="utf-8"))
    vault = open_copy(src, tmp, model)
    index = SearchIndex.for_vault(vault)
    index.sync()
    memory = TurnMemory(vault)
    embedder = index.embedder
    out: dict = {"name": embedder.name, "dims": embedder.dims, "notice": index.notice}
    for lang, part in [(lang, part) for lang in ("zh", "en") for part in ("notes", "turns", "all")]:
        for mode in NOTE_MODES:
            rows = [q for q in queries if q["lang"] == lang and (part == "all" or part in q)]
            total = nonempty = 0.0
            for q in rows:
                if "notes" in q:
                    r, n = note_scores(vault, index, q, NOTE_MODES[mode])
                else:
                    r, n = turn_scores(memory, q, mode)
                total += r
                nonempty += n > 0
                if verbose and r < 1 and mode != "keyword" and part == "all":
                    print(f"  [{embedder.name} {mode}] miss: {q['query']!r}")
            out[(lang, part, mode)] = (total / len(rows), int(nonempty), len(rows))
    for lang in ("zh", "en"):
        out[(lang, "zero")] = int((~nonzero(embedder.encode([q["query"] for q in queries if q["lang"] == lang]))).sum())
    quality = yaml.safe_load((REPO / "benchmarks" / "quality_queries.yaml").read_text(encoding="utf-8"))
    for lang, rows in (("en", [q for q in quality if q.get("kind") != "chinese"]),
                       ("zh", [q for q in quality if q.get("kind") == "chinese"])):
        out[("quality", lang)] = (len(rows), quality_evaluate(vault, rows))
    unrelated = [x.strip() for x in UNRELATED.read_text(encoding="utf-8").splitlines()
                 if x.strip() and not x.startswith("#")]
    out["unrelated"] = (sum(bool(memory.recall(u, k=5)) for u in unrelated), len(unrelated))
    out["unrelated_search"] = sum(bool(search(vault, u, k=5, index=index, snippets=False)) for u in unrelated)
    # Embedding cost: every note chunk and every stored turn, warm model, best of 3.
    texts = [c.text for e in vault.catalog.all() if not e.error for c in chunk_text(vault.read_body(e.uri))]
    texts += [f"{t['question']} {t['answer']}" for t in memory.turns.values()]
    embedder.encode(texts[:8])
    runs = []
    for _ in range(3):
        t = time.perf_counter()
        embedder.encode(texts)
        runs.append(time.perf_counter() - t)
    out["embed"] = (len(texts), min(runs))
    loads = []
    for _ in range(3):
        proc = subprocess.run([sys.executable, "-c", LOAD, "" if model == "default" else model], cwd=REPO,
                              capture_output=True, text=True, check=True)
        loads.append(float(proc.stdout.split()[-1]))
    out["load"] = statistics.median(loads)
    folder = bundled_model_path(bundled_name(model) or BUNDLED_MODEL) if model == "default" or bundled_name(model) \
        else Path(model)
    out["size"] = sum(p.stat().st_size for p in folder.iterdir()) if folder.is_dir() else 0
    vault.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vault", type=Path, default=REPO / "sample_vault")
    ap.add_argument("--models", nargs="+", default=["english", "multilingual"],
                    help="embedding.model values (aliases, bundled names or folders); 'default' = unset")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = [measure(args.vault, m, Path(tmp), args.verbose) for m in args.models]
    queries = yaml.safe_load(QUERIES.read_text(encoding="utf-8"))
    n_notes = {lang: sum(1 for q in queries if q["lang"] == lang and "notes" in q) for lang in ("zh", "en")}
    n_turns = {lang: sum(1 for q in queries if q["lang"] == lang and "turns" in q) for lang in ("zh", "en")}
    print(f"labelled queries ({QUERIES.name}): zh {n_notes['zh']} notes + {n_turns['zh']} turns, "
          f"en {n_notes['en']} notes + {n_turns['en']} turns; recall@5 (vec>0: queries the vector route answers)")
    print(f"{'model':<32} {'lang':<4} {'over':<6} {'keyword':>8} {'vector':>8} {'vec>0':>7} {'hybrid':>8} "
          f"{'zero-vector queries':>20}")
    for r in results:
        for lang in ("zh", "en"):
            for part in ("notes", "turns", "all"):
                kw, vec, hy = r[(lang, part, "keyword")], r[(lang, part, "vector")], r[(lang, part, "hybrid")]
                zero = r[(lang, "zero")] if part == "all" else ""
                print(f"{r['name']:<32} {lang:<4} {part:<6} {kw[0]:>8.3f} {vec[0]:>8.3f} {f'{vec[1]}/{vec[2]}':>7} "
                      f"{hy[0]:>8.3f} {zero:>20}")
    print("\nbenchmarks/quality.py queries (recall@5 / MRR), English queries and Chinese ones:")
    print(f"{'model':<32} {'set':<8} {'keyword':>13} {'vector':>13} {'hybrid':>13} {'hybrid+graph':>13}")
    for r in results:
        for lang in ("en", "zh"):
            n, q = r[("quality", lang)]
            cells = " ".join(f"{q[m]['recall@5']:.3f}/{q[m]['mrr']:.3f}".rjust(13) for m in q)
            print(f"{r['name']:<32} {f'{lang} ({n})':<8} {cells}")
    print(f"\n{'model':<32} {'dims':>5} {'size MB':>8} {'load s':>7} {'embed vault':>22} "
          f"{'unrelated: recalled / searched':>31}")
    for r in results:
        n, s = r["embed"]
        embed = f"{n} texts in {s * 1000:.0f} ms"
        unrelated = f"{r['unrelated'][0]}/{r['unrelated'][1]} / {r['unrelated_search']}/{r['unrelated'][1]}"
        print(f"{r['name']:<32} {r['dims']:>5} {r['size'] / 1e6:>8.1f} {r['load']:>7.3f} {embed:>22} {unrelated:>31}")
        if r["notice"]:
            print(f"  notice: {r['notice']}")


if __name__ == "__main__":
    main()
