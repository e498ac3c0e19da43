"""Nothing lost: writers SIGKILLed at random moments never leave a one-sided link or a
torn file; concurrent writers serialise on the vault lock."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO
from engine import Vault, VaultLocked
from engine.atomic import TMP_SUFFIX

WORKER = Path(__file__).with_name("crash_worker.py")
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
KILLS = int(os.environ.get("MEMLINK_KILLS", "60"))


def seed_vault(root: Path) -> Vault:
    v = Vault.init(root)
    body = "first line\nsecond line\nthird line"
    for i in range(4):
        v.write_note("entity", {"name": f"Person {i}", "kind": "person", "content": body})
        v.write_note("preference", {"topic": f"Topic {i}", "content": body})
    v.write_note("event", {"event_name": "Kickoff", "date": "2026-09-01", "content": body})
    return v


def assert_files_whole(root: Path) -> None:
    """Every note parses and every sidecar is complete JSON, before any recovery runs."""
    for path in root.rglob("*.md"):
        text = path.read_text(encoding="utf-8")
        assert text.startswith("---\n") and "\n---\n" in text[4:], f"torn note {path}"
    for path in root.rglob(".relations.json"):
        json.loads(path.read_text(encoding="utf-8"))


def test_sigkill_at_random_moments_never_leaves_a_one_sided_link(tmp_path):
    root = tmp_path / "vault"
    seed_vault(root)
    rng = random.Random(20261130)
    started = time.monotonic()
    mid_transaction = 0
    for i in range(KILLS):
        proc = subprocess.Popen([sys.executable, str(WORKER), str(root), str(i)], stdout=subprocess.PIPE, env=ENV, cwd=REPO)
        assert proc.stdout.readline().strip() == b"ready"
        time.sleep(rng.uniform(0.0, 0.15))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        journal = root / ".memlink" / "journal"
        if journal.is_dir() and any(journal.glob("*.json")):
            mid_transaction += 1
        assert_files_whole(root)
        vault = Vault.open(root)  # replays any pending journal
        errors = [p for p in vault.check() if p.severity == "error"]
        assert errors == [], f"after kill {i}: {errors}"
        assert not list(journal.glob("*.json")) if journal.is_dir() else True
        assert not list(root.rglob(f"*{TMP_SUFFIX}"))
    elapsed = time.monotonic() - started
    print(f"\nkill test: {KILLS} SIGKILLs in {elapsed:.1f}s, {mid_transaction} landed mid-transaction")
    links = sum(1 for _ in Vault.open(root).all_links())
    assert links > 0


def test_two_writers_at_once_serialise(tmp_path):
    root = tmp_path / "vault"
    seed_vault(root)
    procs = [
        subprocess.Popen([sys.executable, str(WORKER), str(root), str(seed), "120"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, cwd=REPO)
        for seed in (1, 2)
    ]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()
    vault = Vault.open(root)
    assert [p for p in vault.check() if p.severity == "error"] == []
    assert sum(1 for _ in vault.all_links()) > 0


HOLD = """
import sys, time
from engine import Vault
v = Vault.open(sys.argv[1])
with v.writing():
    print("holding", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def test_second_writer_gets_a_clear_error_when_the_lock_is_held(tmp_path):
    root = tmp_path / "vault"
    v = seed_vault(root)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(root), "4"], stdout=subprocess.PIPE, env=ENV, cwd=REPO)
    try:
        assert holder.stdout.readline().strip() == b"holding"
        v.config.lock_timeout = 0.3
        a, b = [e.uri for e in v.list_notes()][:2]
        with pytest.raises(VaultLocked, match="another memlink process"):
            v.link(a, b, "related_to")
        cli = subprocess.run(
            [sys.executable, "-m", "memlink_tui", "--vault", str(root), "link", a, b, "--type", "related_to"],
            capture_output=True, text=True, env={**ENV, "MEMLINK_LOCK_TIMEOUT": "0.3"}, cwd=REPO, timeout=60,
        )
        assert cli.returncode == 1 and cli.stderr.startswith("memlink: error: another memlink process")
        assert len(cli.stderr.strip().splitlines()) == 1
    finally:
        holder.kill()
        holder.wait()
    assert v.get_file_links(a) == []
    v.link(a, b, "related_to")  # the lock is free again
    assert len(v.get_file_links(a)) == 1
