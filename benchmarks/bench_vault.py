"""Vault write/read figures on a synthetic vault. Prints a small table.

    .venv/bin/python benchmarks/bench_vault.py [--notes 2000]
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from synthetic import TextMaker, generate, note_fields  # noqa: E402

from engine import Vault  # noqa: E402


def timed(fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def row(name: str, ms: list[float]) -> None:
    ms = sorted(ms)
    p95 = ms[min(len(ms) - 1, int(len(ms) * 0.95))]
    print(f"{name:<40} p50 {statistics.median(ms):8.2f} ms   p95 {p95:8.2f} ms   n={len(ms)}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--notes", type=int, default=1000)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="memlink-bench-"))
    try:
        t = time.perf_counter()
        vault = generate(tmp / "v", args.notes)
        build = time.perf_counter() - t
        links = sum(1 for _ in vault.all_links())
        print(f"synthetic vault: {args.notes} notes, {links} links, built in {build:.1f} s "
              f"({build / (args.notes + links) * 1000:.2f} ms per note or link write)")
        rng = random.Random(1)
        text = TextMaker(rng)
        uris = [e.uri for e in vault.catalog.all()]
        i = [args.notes]

        def write():
            i[0] += 1
            vault.write_note(*note_fields(text, i[0], rng.randrange(len(text.topics))))

        row("write_note (new note, atomic)", timed(write, 200))
        row("link (two sides, journaled)", timed(lambda: vault.link(*rng.sample(uris, 2), "related_to", weight=0.5), 200))
        row("get_file_links(both)", timed(lambda: vault.links.of(rng.choice(uris), "both"), 500))
        row("render_note", timed(lambda: vault.render_note(rng.choice(uris)), 500))
        row("Vault.open", timed(lambda: Vault.open(vault.root), 5))
        fresh = Vault.open(vault.root)
        shutil.rmtree(vault.root / ".memlink")
        row("catalog sync, cold (.memlink deleted)", timed(lambda: Vault.open(vault.root).sync_catalog(), 1))
        row("catalog sync, warm (nothing changed)", timed(fresh.sync_catalog, 5))
        row("check (whole vault)", timed(fresh.check, 1))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
