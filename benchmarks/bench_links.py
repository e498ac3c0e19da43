"""Link writes at scale: memlink's link store beside the simple way, in the same run.

For each size (synthetic vaults from ``synthetic.generate_fast``; 40% events in day
folders, the rest in three big folders — ``entities/`` holds ~30% of the notes):

- index build: the link index built from nothing (``.memlink/links.sqlite`` deleted),
  beside ``json.loads`` of every sidecar (the least any reader of the files must do);
- fresh process: one ``vault.link`` between a note of the biggest folder and an event, in
  a new process each time (vault opened first, not timed), beside the simple way done in
  a new process too: ``json.loads`` both folders' sidecars, append the entry, rewrite
  both files atomically (temp, fsync, rename) — what a write cost before the link store,
  without its pydantic parse;
- warm: the same in one process, many times (the simple way keeps the parsed lists);
- the ``memlink link`` command's wall time, beside the sample vault's.

Links are written into the vault it is given (a scratch copy: generated under
``--root``, reused across runs); the simple way writes beside the sidecars under another
name and removes its files.

    .venv/bin/python benchmarks/bench_links.py --sizes 1000,10000,100000
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from engine.linkstore import SIDECAR_LOG  # noqa: E402

from engine import Vault  # noqa: E402
from engine.model.links import SIDECAR  # noqa: E402
from engine.storage.atomic import atomic_write_text  # noqa: E402

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def pairs(vault: Vault, n: int, seed: int = 1) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    notes = [e.uri for e in vault.catalog.all()]
    big = [u for u in notes if u.startswith("entities/")]
    events = [u for u in notes if u.startswith("events/")] or notes
    return [(rng.choice(big), rng.choice(events)) for _ in range(n)]


FRESH_MEMLINK = """
import sys, time, json
from engine import Vault
v = Vault.open(sys.argv[1])
t = time.perf_counter()
v.link(sys.argv[2], sys.argv[3], "related_to", weight=0.5, description="bench")
print(json.dumps((time.perf_counter() - t) * 1000))
"""

FRESH_SIMPLE = """
import sys, time, json, os
from pathlib import Path
from engine.storage.atomic import atomic_write_text
root = Path(sys.argv[1])
entry = json.loads(sys.argv[4])
t = time.perf_counter()
for uri, direction in ((sys.argv[2], "links"), (sys.argv[3], "backlinks")):
    folder = root / uri.rpartition("/")[0]
    src = folder / ".relations.json"
    rows = json.loads(src.read_text(encoding="utf-8")) if src.exists() else []
    rows.append({**entry, "direction": direction})
    text = "[\\n" + ",\\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\\n]\\n"
    atomic_write_text(folder / ".relations.baseline.json", text)
print(json.dumps((time.perf_counter() - t) * 1000))
"""


def entry(a: str, b: str) -> dict:
    return {"id": "link_bench", "from_uri": a, "to_uri": b, "link_type": "related_to", "weight": 0.5,
            "t_field": "content", "t_line_ranges": None, "match_text": None, "description": "bench",
            "created_at": "2026-12-01T00:00:00+00:00"}


def run(code: str, *args: str) -> float:
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=ENV, cwd=ROOT, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def cleanup_baseline(root: Path) -> None:
    for path in root.rglob(".relations.baseline.json"):
        path.unlink()


def index_build(root: Path) -> tuple[float, float, int]:
    db = root / ".memlink" / "links.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    v = Vault.open(root)
    t = time.perf_counter()
    v.linkstore.refresh()
    ours = time.perf_counter() - t
    t = time.perf_counter()
    n = 0
    for path in root.rglob(SIDECAR):
        n += len(json.loads(path.read_text(encoding="utf-8")))
    simple = time.perf_counter() - t
    v.close()
    return ours, simple, n


def cli_wall(root: Path, a: str, b: str, runs: int) -> float:
    walls = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "memlink_tui", "--vault", str(root), "link", a, b, "--type", "related_to"],
                       capture_output=True, env=ENV, cwd=ROOT, check=True)
        walls.append(time.perf_counter() - t)
        subprocess.run([sys.executable, "-m", "memlink_tui", "--vault", str(root), "unlink", a, b],
                       capture_output=True, env=ENV, cwd=ROOT, check=True)
    return statistics.median(walls)


def bench(root: Path, fresh_runs: int, warm_runs: int) -> dict:
    v = Vault.open(root)
    biggest = max((p.stat().st_size, p) for p in root.rglob(SIDECAR))
    out: dict = {"notes": len(v.catalog.all()), "biggest_sidecar_mb": round(biggest[0] / 1e6, 1)}
    v.close()
    ours, simple, n = index_build(root)
    out.update(records=n, index_build_s=round(ours, 2), json_loads_all_s=round(simple, 2))
    v = Vault.open(root)
    todo = pairs(v, fresh_runs + warm_runs + 1)
    v.link(*todo[0], "related_to")  # the first write may have to fold a log: not what is measured
    v.close()
    fresh, fresh_simple = [], []
    for a, b in todo[1 : fresh_runs + 1]:
        fresh.append(run(FRESH_MEMLINK, str(root), a, b))
        fresh_simple.append(run(FRESH_SIMPLE, str(root), a, b, json.dumps(entry(a, b))))
    v = Vault.open(root)
    warm, warm_simple = [], []
    lists: dict[Path, list] = {}
    for a, b in todo[fresh_runs + 1 :]:
        t = time.perf_counter()
        v.link(a, b, "related_to", weight=0.5, description="bench")
        warm.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        for uri, direction in ((a, "links"), (b, "backlinks")):
            folder = root / uri.rpartition("/")[0]
            if folder not in lists:
                src = folder / SIDECAR
                lists[folder] = json.loads(src.read_text(encoding="utf-8")) if src.exists() else []
            lists[folder].append({**entry(a, b), "direction": direction})
            rows = lists[folder]
            atomic_write_text(folder / ".relations.baseline.json",
                              "[\n" + ",\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n]\n")
        warm_simple.append((time.perf_counter() - t) * 1000)
    v.close()
    cleanup_baseline(root)
    out["fresh_ms"] = {"memlink_p50": round(statistics.median(fresh), 1), "memlink_p95": round(pct(fresh, 0.95), 1),
                       "simple_p50": round(statistics.median(fresh_simple), 1), "simple_p95": round(pct(fresh_simple, 0.95), 1)}
    out["warm_ms"] = {"memlink_p50": round(statistics.median(warm), 1), "memlink_p95": round(pct(warm, 0.95), 1),
                      "simple_p50": round(statistics.median(warm_simple), 1), "simple_p95": round(pct(warm_simple, 0.95), 1)}
    out["log_mode_folders"] = sorted(str(p.parent.relative_to(root)) for p in root.rglob(SIDECAR_LOG))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000", help="comma-separated note counts")
    ap.add_argument("--root", default=str(Path(tempfile.gettempdir()) / "memlink-bench-links"),
                    help="where the synthetic vaults are generated (kept for the next run)")
    ap.add_argument("--fresh", type=int, default=9, help="fresh-process writes per size")
    ap.add_argument("--warm", type=int, default=40, help="warm writes per size")
    ap.add_argument("--cli", type=int, default=3, help="`memlink link` runs per vault (0: skip)")
    args = ap.parse_args()
    from synthetic import generate_fast

    base = Path(args.root)
    results = {}
    sample_cli = None
    if args.cli:
        sample = base / "sample"
        if sample.exists():
            shutil.rmtree(sample)
        shutil.copytree(ROOT / "sample_vault", sample, ignore=shutil.ignore_patterns(".memlink"))
        sv = Vault.open(sample)
        a, b = pairs(sv, 1)[0]
        sv.close()
        sample_cli = cli_wall(sample, a, b, args.cli)
        print(f"sample vault: `memlink link` wall {sample_cli:.2f} s (median of {args.cli})", flush=True)
    for size in (int(s) for s in args.sizes.split(",")):
        root = base / f"v{size}"
        if not root.exists():
            t = time.perf_counter()
            generate_fast(root, size)
            print(f"generated {size} notes in {time.perf_counter() - t:.0f} s", flush=True)
        r = bench(root, args.fresh, args.warm)
        if args.cli:
            v = Vault.open(root)
            a, b = pairs(v, 1, seed=99)[0]
            v.close()
            r["cli_link_wall_s"] = round(cli_wall(root, a, b, args.cli), 2)
        results[size] = r
        f, w = r["fresh_ms"], r["warm_ms"]
        print(f"\n{size} notes ({r['records']} sidecar records, biggest sidecar {r['biggest_sidecar_mb']} MB; "
              f"log mode: {', '.join(r['log_mode_folders']) or 'none'})")
        print(f"  index build from nothing {r['index_build_s']:.2f} s   | simple: json.loads of every sidecar {r['json_loads_all_s']:.2f} s")
        print(f"  link, fresh process  p50 {f['memlink_p50']:7.1f} ms  p95 {f['memlink_p95']:7.1f} ms"
              f"   | simple parse+rewrite  p50 {f['simple_p50']:7.1f} ms  p95 {f['simple_p95']:7.1f} ms")
        print(f"  link, warm           p50 {w['memlink_p50']:7.1f} ms  p95 {w['memlink_p95']:7.1f} ms"
              f"   | simple rewrite        p50 {w['simple_p50']:7.1f} ms  p95 {w['simple_p95']:7.1f} ms")
        if args.cli:
            print(f"  `memlink link` wall  {r['cli_link_wall_s']:.2f} s (sample vault {sample_cli:.2f} s)", flush=True)
    print("\n" + json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
