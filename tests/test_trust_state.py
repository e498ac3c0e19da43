"""Trust in the vault's state: a read-only vault can be read (CLI and app),
deleting `.memlink/` loses no turn memory, leftover temp files are swept on open even
while another process holds the lock, and a full disk reads as one plain sentence."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import forkserver
import pytest
from conftest import REPO, SAMPLE

from engine import Vault
from engine.index import SearchIndex
from engine.lint.memo import check
from engine.sessions.importer import extract_pending, import_chat, restore_turns
from engine.sessions.log import append_events
from engine.sessions.store import TurnStore
from engine.storage.atomic import TMP_SUFFIX
from engine.storage.vault import VaultReadOnly
from memlink_tui.app import MemlinkApp
from memlink_tui.cli import main
from widgets import StatusBar

CHAT = [
    '{"session": "s1", "id": "m1", "role": "user", "content": "Which glaze did we pick for the celadon vase firing?", "ts": "2026-10-01T10:00:00"}',
    '{"session": "s1", "id": "m2", "role": "assistant", "content": "You picked the Tenmoku glaze for the celadon vase, fired at cone 6.", "ts": "2026-10-01T10:00:05"}',
]
QUESTION = "which glaze did we pick for the vase"


def memlink(*args: str, vault: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "memlink_tui", "--vault", str(vault), *args]
    return forkserver.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


def _can_mount(tmp_path: Path, script: str) -> bool:
    """Whether ``script`` (its folder as $0) succeeds in a private mount namespace."""
    probe = tmp_path / f"probe-{len(list(tmp_path.glob('probe-*')))}"
    probe.mkdir()
    r = subprocess.run(["unshare", "-m", "sh", "-c", script, str(probe)], capture_output=True, timeout=30)
    return r.returncode == 0


def _can_bind_read_only(tmp_path: Path) -> bool:
    return _can_mount(tmp_path, 'mount --bind -o ro "$0" "$0" && ! touch "$0/x"')


@pytest.fixture
def read_only_run(tmp_path: Path):
    """Run the CLI on a vault this process really cannot write: made read-only with chmod
    for a normal user; for root (who ignores permissions) a read-only bind mount in a
    private mount namespace. Skips where neither is possible."""
    if shutil.which("unshare") is None and os.geteuid() == 0:
        pytest.skip("running as root without unshare: no way to make a folder unwritable")
    if os.geteuid() == 0 and not _can_bind_read_only(tmp_path):
        pytest.skip("running as root and cannot bind-mount read-only here")
    locked: list[Path] = []
    servers: dict[Path, forkserver.Server] = {}

    def run(vault: Path, *args: str) -> subprocess.CompletedProcess:
        if os.geteuid() != 0:
            for path in [vault, *vault.rglob("*")]:
                if path.is_dir() or path.is_file():
                    path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
            locked.append(vault)
            return memlink(*args, vault=vault)
        if vault not in servers:  # processes forked in a namespace where the vault is mounted read-only
            script = 'mount --bind -o ro "$0" "$0" && exec "$@"'
            servers[vault] = forkserver.Server(("unshare", "-m", "sh", "-c", script, str(vault)))
        return servers[vault].run([sys.executable, "-m", "memlink_tui", "--vault", str(vault), *args], text=True,
                                  cwd=REPO, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})

    yield run
    for server in servers.values():
        server.close()
    for vault in locked:  # let pytest clean up
        for path in [vault, *vault.rglob("*")]:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# -- read-only vaults (failure 8) -----------------------------------------------------------------
def test_read_commands_work_on_a_vault_the_user_cannot_write(tmp_path, read_only_run):
    root = tmp_path / "ro"
    shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns(".memlink"))
    (root / "chat.jsonl").write_text("\n".join(CHAT) + "\n")
    assert memlink("import-chat", str(root / "chat.jsonl"), vault=root).returncode == 0
    shutil.rmtree(root / ".memlink")  # a fresh copy: no derived state at all, and none can be made
    before = _snapshot(root)
    note = "entities/王俊.md"

    r = read_only_run(root, "show", note)
    assert r.returncode == 0 and "王俊" in r.stdout, r.stderr
    r = read_only_run(root, "links", note)
    assert r.returncode == 0 and "berth-planner-v2" in r.stdout, r.stderr
    r = read_only_run(root, "search", "berth planner")
    assert r.returncode == 0 and "entities/berth-planner-v2.md" in r.stdout, r.stderr
    r = read_only_run(root, "check")
    assert r.returncode == 0 and "0 errors" in r.stdout, r.stderr
    r = read_only_run(root, "recall", QUESTION)
    assert r.returncode == 0 and "Tenmoku" in r.stdout, r.stderr  # rebuilt in memory from the session log
    r = read_only_run(root, "lint")
    assert "dashboards not written: the vault is read-only" in r.stdout, r.stderr
    r = read_only_run(root, "link", note, "entities/mochi.md", "--type", "related_to")
    assert r.returncode == 1 and "the vault is read-only" in r.stderr and "nothing was changed" in r.stderr
    assert "Traceback" not in r.stderr
    assert _snapshot(root) == before and not (root / ".memlink").exists()


def _deny_writes(monkeypatch, root: Path) -> None:
    """This process may not write the vault (as access(2) would say for another user)."""
    real = os.access
    inside = str(root.resolve())

    def access(path, mode, *args, **kwargs):
        if mode & os.W_OK and str(Path(path).resolve()).startswith(inside):
            return False
        return real(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "access", access)


def test_open_detects_a_vault_it_cannot_write(tmp_path, monkeypatch):
    root = tmp_path / "v"
    shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns(".memlink"))
    _deny_writes(monkeypatch, root)
    vault = Vault.open(root)
    assert vault.read_only and "read-only" in vault.read_only_reason
    assert vault.catalog.all() and SearchIndex.for_vault(vault).keyword_search("berth", 3)
    with pytest.raises(VaultReadOnly, match="nothing was changed"):
        vault.write_note("entity", {"name": "Nobody", "kind": "person", "content": "x"})
    assert not (root / ".memlink").exists()
    monkeypatch.undo()
    assert not Vault.open(root).read_only
    dry = Vault.open(root, read_only=True)
    assert dry.read_only and "is open read-only" in dry.read_only_reason


async def test_app_shows_read_only_and_refuses_writes(tmp_path, monkeypatch):
    root = tmp_path / "v"
    shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns(".memlink"))
    _deny_writes(monkeypatch, root)
    vault = Vault.open(root)
    app = MemlinkApp(vault)
    async with app.run_test(size=(160, 45)) as pilot:
        for _ in range(3):
            await app.workers.wait_for_complete()
            await pilot.pause()
        assert "read-only" in str(app.screen.query_one(StatusBar).render())
        await app.screen.open_note("entities/王俊.md")  # browsing works
        await pilot.pause()
        assert app.screen.current == "entities/王俊.md"
        await pilot.press("i")  # import a file: a write
        await pilot.pause()
        assert any("read-only" in n.message and "nothing was changed" in n.message for n in app._notifications)
        assert app.screen.__class__.__name__ == "BrowserScreen"
        await pilot.press("slash", *"berth planner", "enter")  # search works, its index in memory
        for _ in range(3):
            await app.workers.wait_for_complete()
            await pilot.pause()
        assert "entities/berth-planner-v2.md" in [h.uri for h in app.screen.last_hits]
    assert not (root / ".memlink").exists()


# -- turn memories are durable (failure 9) ------------------------------------------------------
def test_deleting_memlink_state_keeps_every_turn_memory(vault, tmp_path):
    chat = tmp_path / "chat.jsonl"
    chat.write_text("\n".join(CHAT) + "\n")
    r = memlink("import-chat", str(chat), vault=vault.root)
    assert r.returncode == 0, r.stderr
    assert "Tenmoku" in memlink("recall", QUESTION, vault=vault.root).stdout
    shutil.rmtree(vault.root / ".memlink")  # the README says this is safe
    r = memlink("recall", QUESTION, vault=vault.root)
    assert r.returncode == 0 and "Tenmoku" in r.stdout, r.stdout + r.stderr
    reopened = Vault.open(vault.root)
    assert len(TurnStore(reopened).all()) == 1  # written back to the derived state


class _Failing:
    name = "failing"

    def extract(self, turn, previous):
        from engine.llm import LLMError

        raise LLMError("model down")


def test_a_turn_whose_extraction_failed_stays_pending_not_rules_filled(vault, tmp_path):
    chat = tmp_path / "chat.jsonl"
    chat.write_text("\n".join(CHAT) + "\n")
    report = import_chat(vault, chat, extractor=_Failing())
    assert report.failed and not report.extracted
    assert restore_turns(vault) == 0  # its state is not lost: the next import retries with the model
    assert extract_pending(vault, ["s1"]).extracted == 1


def test_an_unanswered_question_is_not_restored(vault):
    append_events(vault, "s2", [{"session": "s2", "id": "q", "role": "user", "content": "Where is the kiln key?",
                                 "ts": "2026-10-02T09:00:00"}])
    assert restore_turns(vault) == 0 and TurnStore(vault).all() == []


# -- temp files (failure 11) --------------------------------------------------------------------
def _age(path: Path, seconds: float = 3600) -> None:
    past = time.time() - seconds
    os.utime(path, (past, past))


def test_a_sync_removes_old_temp_files_while_another_process_holds_the_lock(vault):
    old = vault.root / "entities" / f".x.md.deadbeef{TMP_SUFFIX}"
    fresh = vault.root / "entities" / f".y.md.cafef00d{TMP_SUFFIX}"
    log_side = vault.root / "sessions" / f".s.memories.json.00c0ffee{TMP_SUFFIX}"
    for path in (old, fresh, log_side):
        path.write_text("half a file")
    _age(old)
    _age(log_side)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from filelock import FileLock; l = FileLock(sys.argv[1]); "
         "l.acquire(); print('held', flush=True); time.sleep(60)", str(vault.state_dir / "lock")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        Vault.open(vault.root, read_only=True).sync()
        assert old.exists() and log_side.exists()  # a read-only sync removes nothing
        Vault.open(vault.root).sync()  # the walk needs no lock: it removes only what no live writer holds
        assert not old.exists() and not log_side.exists()
        assert fresh.exists()  # could be a live writer's
    finally:
        holder.kill()
        holder.wait()


def test_the_walk_never_removes_a_temp_file_outside_the_vault(vault, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    bait = outside / f".keep.md.0000beef{TMP_SUFFIX}"
    bait.write_text("not memlink's")
    _age(bait)
    (vault.root / "linked").symlink_to(outside, target_is_directory=True)  # a symlinked folder is not entered
    vault.sync()
    assert bait.exists()


# -- full disk (failure 11) ---------------------------------------------------------------------
def _full_disk(*_args, **_kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_full_disk_is_one_plain_sentence_in_the_cli(sample, monkeypatch, capsys):
    before = _snapshot(sample.root)
    monkeypatch.setattr(os, "fsync", _full_disk)
    code = main(["--vault", str(sample.root), "link", "entities/王俊.md", "entities/mochi.md",
                 "--type", "related_to"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("memlink: error: the disk is full") and "was not made" in err
    assert len(err.strip().splitlines()) == 1 and "Errno" not in err
    monkeypatch.undo()
    assert {k: v for k, v in _snapshot(sample.root).items() if not k.startswith(".memlink")} == \
        {k: v for k, v in before.items() if not k.startswith(".memlink")}


def test_tantivys_full_disk_error_is_one_plain_sentence(sample, monkeypatch, capsys):
    from engine.index import SearchIndex

    def sync(self, *args, **kwargs):
        raise ValueError("Failed to commit: An IO error occurred: 'No space left on device (os error 28)'")

    monkeypatch.setattr(SearchIndex, "sync", sync)
    code = main(["--vault", str(sample.root), "search", "berth"])
    err = capsys.readouterr().err
    assert code == 1 and err.strip() == ("memlink: error: the disk is full: that write was not made, and whatever the "
                                         "command had finished before it is kept. Free some space and try again")


def test_a_change_whose_journal_landed_before_the_disk_filled_says_so_and_finishes_later(sample, monkeypatch, capsys):
    """Past the journal (the commit point) a full disk does not undo the change: the
    sentence says it is recorded, nothing else is written before it, and the next write
    once there is room finishes it — no journal set aside as failed."""
    import engine.storage.journal as journal

    a, b = "entities/王俊.md", "entities/mochi.md"
    real = journal.apply_ops
    monkeypatch.setattr(journal, "apply_ops", _full_disk)
    code = main(["--vault", str(sample.root), "link", a, b, "--type", "caused_by"])
    err = capsys.readouterr().err
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert "the disk is full: this change is recorded (.memlink/journal/" in err and "finishes by itself" in err
    pending = list((sample.root / ".memlink" / "journal").glob("*.json"))
    assert len(pending) == 1
    code = main(["--vault", str(sample.root), "link", a, "profile.md", "--type", "related_to"])
    err = capsys.readouterr().err
    assert code == 1 and f"a change recorded earlier (.memlink/journal/{pending[0].name}) waits for room" in err
    assert list((sample.root / ".memlink" / "journal").glob("*.json")) == pending  # kept, not set aside
    monkeypatch.setattr(journal, "apply_ops", real)  # room again
    assert main(["--vault", str(sample.root), "link", a, "profile.md", "--type", "related_to"]) == 0
    vault = Vault.open(sample.root)
    made = {(l.to_uri, l.link_type.value) for l in vault.links.of(a, "links")}
    assert {(b, "caused_by"), ("profile.md", "related_to")} <= made
    assert not list((sample.root / ".memlink" / "journal").iterdir())
    assert [f for f in check(vault) if f.severity == "error"] == []


def _can_mount_tmpfs(tmp_path: Path) -> bool:
    return _can_mount(tmp_path, 'mount -t tmpfs -o size=1m tmpfs "$0"')


@pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0, reason="needs root and unshare for a tmpfs")
def test_a_really_full_disk_reads_on_and_writes_one_sentence(tmp_path):
    """The vault on a small tmpfs (in a private mount namespace), filled up: reads work
    (the link index moves into memory), lint lists its findings without its dashboards,
    every write is one sentence and no traceback, and once there is room again the vault
    checks clean with no journal set aside."""
    if not _can_mount_tmpfs(tmp_path):
        pytest.skip("cannot mount a tmpfs here")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    # Every command a process forked in a private mount namespace holding the tmpfs.
    script = 'mount -t tmpfs -o size=24m tmpfs "$0" && cp -r "$1" "$0/v" && rm -rf "$0/v/.memlink" && shift && exec "$@"'
    server = forkserver.Server(("unshare", "-m", "sh", "-c", script, str(mnt), str(SAMPLE)))
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def python(*args: str) -> tuple[int, str, str]:
        r = server.run([sys.executable, *args], text=True, cwd=REPO, timeout=600, env=env)
        return r.returncode, r.stdout, r.stderr

    def m(*args: str) -> tuple[int, str, str]:
        return python("-m", "memlink_tui", "--vault", f"{mnt}/v", *args)

    try:
        m("search", "mochi"), m("check")
        fill = "import sys\nwith open(sys.argv[1], 'wb') as f:\n    for _ in range(100): f.write(bytes(1 << 20))"
        assert "No space left on device" in python("-c", fill, f"{mnt}/fill")[2]
        results = [m(*c.split()) for c in ("search mochi", "show entities/mochi.md", "check", "lint",
                                           "link entities/mochi.md profile.md --type related_to",
                                           "dream --provider rules", "ask what-is-x")]
        python("-c", "import os, sys; os.remove(sys.argv[1])", f"{mnt}/fill")
        after = m("check")
        journal = python("-c", "import os, sys; print(*os.listdir(sys.argv[1]) if os.path.isdir(sys.argv[1]) else [])",
                         f"{mnt}/v/.memlink/journal")[1]
    finally:
        server.close()

    def result(n: int) -> tuple[int, str, str]:
        return results[n - 1]

    for n in range(1, 8):
        assert "Traceback" not in result(n)[2], result(n)
    assert result(1)[0] == 0 and "entities/mochi.md" in result(1)[1]  # search
    assert result(2)[0] == 0 and "Mochi" in result(2)[1]  # show
    assert result(3)[0] == 0  # check
    assert result(4)[0] == 0 and "dashboards not written: the disk is full" in result(4)[1]  # lint
    for n in (5, 6, 7):  # link, dream, ask: one sentence each
        code, _, err = result(n)
        lines = [line for line in err.splitlines() if line.startswith("memlink: error:")]
        assert code == 1 and len(lines) == 1 and "the disk is full" in lines[0], (n, err)
    assert after[0] == 0, after
    assert not [name for name in journal.split() if name.endswith(".failed")]


async def test_a_full_disk_is_one_plain_sentence_in_the_app(sample):
    app = MemlinkApp(sample)
    async with app.run_test(size=(140, 45)) as pilot:
        await pilot.pause()
        app.notify(str(OSError(errno.ENOSPC, "No space left on device", "/v/entities/x.md")), title="Save failed",
                   severity="error")
        await pilot.pause()
        last = app._notifications
        assert any(n.message.startswith("the disk is full") and "Errno" not in n.message for n in last)
