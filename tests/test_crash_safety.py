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
from engine.atomic import TMP_SUFFIX, sweep_temp_files

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
        sweep_temp_files(root, older_than=0)  # what a later open does once they are old
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


def test_replay_never_overwrites_a_file_edited_since(tmp_path):
    from engine.journal import Journal, WriteFile, file_hash

    v = seed_vault(tmp_path / "vault")
    uri = "entities/person-0.md"
    path = v.path(uri)
    before = file_hash(path)
    journal = Journal(v.root, v.state_dir / "journal")
    journal.folder.mkdir(parents=True, exist_ok=True)
    # A journal as a killed writer leaves it, then the user edits the note in vim.
    from engine.journal import _OPS

    (journal.folder / "00000000000000000001-dead.json").write_bytes(_OPS.dump_json([WriteFile(uri=uri, text="stale", before=before)]))
    path.write_text(path.read_text().replace("first line", "edited by hand"))
    fresh = Vault.open(v.root)
    assert "edited by hand" in path.read_text()
    assert any("changed since" in w for w in fresh.warnings)
    assert not list(journal.folder.glob("*.json"))


def test_a_journal_that_cannot_be_replayed_is_set_aside_and_reported(tmp_path):
    from engine.journal import _OPS, PutLink
    from engine.links import StoredLink

    v = seed_vault(tmp_path / "vault")
    folder = v.state_dir / "journal"
    folder.mkdir(parents=True, exist_ok=True)
    link = StoredLink(id="l", from_uri="entities/person-0.md", to_uri="entities/person-1.md", direction="links",
                      link_type="related_to", weight=1.0, created_at="x")
    (folder / "00000000000000000001-dead.json").write_bytes(_OPS.dump_json([PutLink(folder="entities", link=link)]))
    (v.root / "entities" / ".relations.json").write_text("{broken")
    fresh = Vault.open(v.root)  # opening still works
    assert any("set aside" in w for w in fresh.warnings)
    assert "failed_journal" in {p.code for p in fresh.check()}
    assert fresh.read_note("entities/person-0.md")


def test_rewriting_a_note_keeps_its_permissions(tmp_path):
    v = seed_vault(tmp_path / "vault")
    path = v.path("entities/person-0.md")
    os.chmod(path, 0o600)
    v.write_note("entity", {"name": "Person 0", "content": "private"})
    assert (os.stat(path).st_mode & 0o777) == 0o600


def test_swapping_a_folder_for_a_symlink_is_noticed(tmp_path):
    from engine import UriError

    v = seed_vault(tmp_path / "vault")
    v.read_note("entities/person-0.md")  # the folder's real path is now remembered
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "person-0.md").write_text((v.root / "entities" / "person-0.md").read_text())
    os.rename(v.root / "entities", tmp_path / "moved")
    os.symlink(outside, v.root / "entities")
    with pytest.raises(UriError, match="outside the vault"):
        v.read_note("entities/person-0.md")
