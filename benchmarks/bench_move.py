"""`memlink mv` of a hub: a synthetic vault of N notes (``benchmarks/synthetic.py``) in
which one note has 1,000 backlinks (more added by hand, each with a line range), indexed
once (`memlink reindex`), the linking notes given the Links block memlink writes (it
names the hub's path, so the move rewrites each of them); then, a process each, `memlink
mv` of the hub to another folder and `memlink undo` of it, timed from the outside, median
of --runs. The requirement: the move in at most 2 s at 10k notes. Progress on stderr, a
markdown table on stdout.

    .venv/bin/python benchmarks/bench_move.py --notes 10000 --work /tmp/memlink-move
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO))

from synthetic import generate_fast  # noqa: E402

from engine import Vault  # noqa: E402
from engine.model.links import SIDECAR, LinkType, Sidecar, StoredLink  # noqa: E402
from engine.model.uris import uri_dir  # noqa: E402

BACKLINKS = 1_000
STAMP = "2026-01-01T00:00:00+00:00"


def add_backlinks(root: Path, uris: list[str], hub: str, want: int) -> int:
    """Give ``hub`` ``want`` backlinks (written straight into the sidecars, as the generator does)."""
    cars: dict[str, Sidecar] = {}

    def car(folder: str) -> Sidecar:
        if folder not in cars:
            path = root / folder / SIDECAR
            cars[folder] = Sidecar.parse(path.read_text(encoding="utf-8") if path.exists() else "", str(path), folder)
        return cars[folder]

    have = {l.from_uri for l in car(uri_dir(hub)).entries if l.direction == "backlinks" and l.to_uri == hub}
    for i, uri in enumerate(u for u in uris if u != hub and u not in have):
        if len(have) >= want:
            break
        link = StoredLink(id=f"hub_{i:08x}", from_uri=uri, to_uri=hub, direction="links", link_type=LinkType("related_to"),
                          weight=0.5, t_line_ranges="1", created_at=STAMP)
        car(uri_dir(uri)).entries.append(link)
        car(uri_dir(hub)).entries.append(link.as_direction("backlinks"))
        have.add(uri)
    for folder, c in cars.items():
        (root / folder / SIDECAR).write_text(c.dump(), encoding="utf-8")
    return len(have)


def timed(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system) of one memlink process. On a machine
    shared with other work the CPU figure is the steadier one."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "memlink_tui", *args], capture_output=True, text=True, env=env, cwd=REPO)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if run.returncode != 0:
        raise SystemExit(f"memlink {' '.join(args)} failed:\n{run.stdout}{run.stderr}")
    return seconds, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--work", type=Path, default=Path("/tmp/memlink-move"))
    args = parser.parse_args()
    root = args.work / f"v{args.notes}"
    if root.exists():
        shutil.rmtree(root)
    args.work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(REPO), "MEMLINK_CONFIG_HOME": str(args.work / "config"),
           "MEMLINK_DATA_HOME": str(args.work / "data"), "TMPDIR": str(args.work), "OPENBLAS_NUM_THREADS": "1"}
    print(f"generating {args.notes} notes", file=sys.stderr)
    made = generate_fast(root, args.notes)
    hub = made["uris"][0]
    count = add_backlinks(root, made["uris"], hub, BACKLINKS)
    print(f"{hub}: {count} backlinks; indexing", file=sys.stderr)
    timed(["--vault", str(root), "reindex"], env)
    os.environ.update(env)  # (the vault opened here keeps its state where the processes do)
    vault = Vault.open(root)
    vault.refresh_links_blocks(sorted({l.from_uri for l in vault.links.of(hub, "backlinks")}))
    vault.close()
    moves, undos = [], []
    for i in range(args.runs):
        moves.append(timed(["--vault", str(root), "mv", hub, "moved/"], env))
        undos.append(timed(["--vault", str(root), "undo"], env))
        print(f"run {i + 1}: mv {moves[-1][0]:.2f}s ({moves[-1][1]:.2f}s CPU), undo {undos[-1][0]:.2f}s", file=sys.stderr)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", file=sys.stderr)

    def med(rows: list[tuple[float, float]], i: int) -> float:
        return statistics.median(r[i] for r in rows)

    print("| notes | backlinks of the moved note | `memlink mv` process: wall / CPU | `memlink undo` of it: wall / CPU |\n"
          f"|---|---|---|---|\n| {args.notes:,} | {count:,} | {med(moves, 0):.2f} s / {med(moves, 1):.2f} s "
          f"| {med(undos, 0):.2f} s / {med(undos, 1):.2f} s |")


if __name__ == "__main__":
    main()
