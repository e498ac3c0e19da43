"""Dream figures (rules provider, so no LLM time): a run on the sample vault and on a
synthetic 10k-note vault, with the reports produced; a second run must write nothing.

    .venv/bin/python benchmarks/bench_dream.py [--notes 10000]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from synthetic import generate_fast  # noqa: E402

from engine import Vault  # noqa: E402
from engine.dream import dream  # noqa: E402
from engine.index import SearchIndex  # noqa: E402


def run(root: Path, label: str) -> None:
    vault = Vault.open(root)
    t = time.perf_counter()
    SearchIndex.for_vault(vault)
    index_s = time.perf_counter() - t
    t = time.perf_counter()
    first = dream(vault)
    took = time.perf_counter() - t
    kinds: dict[str, int] = {}
    for topic in first.topics:
        kinds[topic["kind"]] = kinds.get(topic["kind"], 0) + 1
    t = time.perf_counter()
    second = dream(vault)
    again = time.perf_counter() - t
    print(f"{label}: dream {took:.1f}s (index ready beforehand, {index_s:.1f}s): {len(first.written)} reports "
          f"from {len(first.topics)} topics {kinds}; second run {again:.1f}s, {len(second.written)} reports")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--notes", type=int, default=10_000)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="memlink-dream-"))
    try:
        shutil.copytree(REPO / "sample_vault", tmp / "sample", ignore=shutil.ignore_patterns(".memlink"))
        run(tmp / "sample", "sample vault (72 notes)")
        generate_fast(tmp / "synthetic", args.notes)
        run(tmp / "synthetic", f"synthetic vault ({args.notes:,} notes)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
