"""Write-path figures on the sample vault: time per `commit` of each sample session with
the zero-LLM rules provider (so no LLM call is in the figure: prefetch search, rules,
validation, resolve, merge, atomic writes, links, audit), plus what was created.

    .venv/bin/python benchmarks/bench_extract.py
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from engine import Vault  # noqa: E402
from engine.extract.rules import RulesExtractor  # noqa: E402
from engine.sessions.commit import commit_session  # noqa: E402


def run(extractor, label: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "v"
        shutil.copytree(REPO / "sample_vault", copy, ignore=shutil.ignore_patterns(".memlink"))
        vault = Vault.open(copy)
        from engine.index import SearchIndex

        SearchIndex.for_vault(vault)  # index built before timing: commits run on a warm vault
        notes = links = 0
        for path in sorted((copy / "sessions").glob("*.jsonl")):
            t = time.perf_counter()
            report = commit_session(vault, path.stem, extractor)
            ms = (time.perf_counter() - t) * 1000
            notes += len(report.created)
            links += len(report.links_added)
            print(f"  {label:<8} {path.stem:<34} {ms:7.1f} ms   {report.summary()}")
        print(f"  {label:<8} total: {notes} notes and {links} links created; vault check: "
              f"{sum(1 for p in vault.check() if p.severity == 'error')} errors")


if __name__ == "__main__":
    print("commit of each sample session")
    run(RulesExtractor(), "rules")
