"""The app on big synthetic vaults (headless, through Textual's Pilot): time to the
first frame and to the filled note tree, then how quickly the tree answers keys at that
size (open the biggest branch, move, page, jump to a note deep in the list, and open a
note). The vault was used before: its catalog and search index exist, as on a person's
machine the second day. The cold cost (first ever open) is printed separately.

    .venv/bin/python benchmarks/bench_app.py --sizes 10000 100000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from synthetic import generate_fast  # noqa: E402

from engine import Vault  # noqa: E402
from engine.index import SearchIndex  # noqa: E402


async def until(check, timeout: float = 120.0, step: float = 0.002) -> None:
    end = time.perf_counter() + timeout
    while not check():
        if time.perf_counter() > end:
            raise TimeoutError("the app did not get there in time")
        await asyncio.sleep(step)


async def measure(root: Path) -> dict:
    """Times are to the frame that shows the result (the app's display call), not to
    when Pilot's key simulation settles."""
    from memlink_tui.app import MemlinkApp
    from memlink_tui.screens.browser import BrowserScreen
    from widgets import NoteTree

    out: dict[str, float] = {}
    frames: list[float] = []
    t0 = time.perf_counter()
    app = MemlinkApp(Vault.open(root))
    display = app._display

    def on_display(*args, **kwargs):
        frames.append(time.perf_counter())
        return display(*args, **kwargs)

    app._display = on_display

    def frame_after(t: float) -> float:
        return next(f for f in frames if f >= t) - t

    async with app.run_test(size=(160, 50)) as pilot:
        await until(lambda: isinstance(app.screen, BrowserScreen) and frames)
        out["first frame"] = frames[0] - t0
        tree = app.screen.query_one(NoteTree)
        await until(lambda: bool(tree._groups))
        filled = time.perf_counter()
        await until(lambda: frames[-1] >= filled, timeout=10)
        out["first frame with the note tree"] = next(f for f in frames if f >= filled) - t0

        async def timed(name: str, action) -> None:
            t = time.perf_counter()
            await action()
            await pilot.pause()
            out[name] = frame_after(t)

        biggest = max(tree._groups, key=lambda t: len(tree._groups[t]))
        branch = tree._branches[biggest]
        tree.focus()
        tree.move_cursor(branch)
        await pilot.pause()
        await timed(f"open the biggest branch ({len(tree._groups[biggest]):,})", lambda: pilot.press("space"))
        keys = []
        for _ in range(20):
            t = time.perf_counter()
            await pilot.press("down")
            await pilot.pause()
            keys.append(frame_after(t))
        out["cursor down, median of 20"] = statistics.median(keys)
        tree.move_cursor(branch.children[-1])
        await pilot.pause()
        await timed("show the next page", lambda: pilot.press("enter"))
        deep = tree._groups[biggest][len(tree._groups[biggest]) * 9 // 10].uri

        async def jump():
            tree.reveal(deep)

        await timed("jump to a note 90% down the list", jump)

        t = time.perf_counter()
        app.go("browser", deep)
        await app.workers.wait_for_complete()
        await pilot.pause()
        out["open a note (render + links, until settled)"] = time.perf_counter() - t
        await app.workers.wait_for_complete()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000])
    parser.add_argument("--keep", metavar="DIR", type=Path,
                        help="keep the generated vaults in DIR and reuse them on the next run")
    args = parser.parse_args()
    os.environ.setdefault("MEMLINK_CONFIG_HOME", tempfile.mkdtemp(prefix="memlink-bench-config-"))
    t = time.perf_counter()
    import memlink_tui.app  # noqa: F401

    print(f"importing the app (Textual, engine core)   {time.perf_counter() - t:8.2f} s  (before any frame)")
    for n in args.sizes:
        base = args.keep or Path(tempfile.mkdtemp(prefix=f"memlink-app-{n}-"))
        root = base / f"vault-{n}"
        try:
            if not (root / "memlink.yaml").exists():
                t = time.perf_counter()
                shutil.rmtree(root, ignore_errors=True)
                generate_fast(root, n)
                print(f"\n{n:,} notes (generated in {time.perf_counter() - t:.1f}s)")
            else:
                print(f"\n{n:,} notes (reusing {root})")
            t = time.perf_counter()
            vault = Vault.open(root)
            vault.sync()
            print(f"  catalog sync at open (cold the first time) {time.perf_counter() - t:8.2f} s  (in a worker)")
            t = time.perf_counter()
            index = SearchIndex.for_vault(vault)
            index.checkpoint()
            vault.close()
            print(f"  search index load + sync (cold the first time) {time.perf_counter() - t:8.2f} s  (in a worker)")
            figures = asyncio.run(measure(root))
            for name, seconds in figures.items():
                print(f"  {name:<40} {seconds * 1000:8.1f} ms")
        finally:
            if not args.keep:
                shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
