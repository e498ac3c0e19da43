"""Faults: every write command killed at random file steps and run again, and every write
command run out of disk, after which search, recall and lint still answer.

Kills (slow): each command runs once uninterrupted on a copy of the sample vault, then
on other copies it is SIGKILLed before a random file step (``fault_worker.py``) and run
again. After each kill no file is torn, no journal is left once the vault is opened,
`check` finds no error; after running it again the vault's notes and links are those of the
uninterrupted run.

Full disk: the vault on a small tmpfs in a private mount namespace (root only), filled up
before the command; in-process, the disk made full at the boundaries memlink writes
derived state through (SQLite, tantivy, hnswlib, files), which needs no root."""

from __future__ import annotations

import errno
import json
import os
import random
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import forkserver
import pytest
import yaml
from conftest import REPO, SAMPLE, set_llm, uncommitted
from test_crash_safety import age_temp_files, assert_files_whole
from test_linked_pages import state_of

from engine import Vault
from engine.lint.memo import check
from engine.storage.atomic import TMP_SUFFIX

WORKER = Path(__file__).with_name("fault_worker.py")
ENV = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{Path(__file__).parent}"}
KILLS = int(os.environ.get("MEMLINK_FAULT_KILLS", "3"))
SESSION = "2026-11-20-weekly-review"
CHAT = [
    {"session": "pottery", "id": f"p{i}", "role": role, "content": text, "ts": f"2026-10-0{1 + i // 2}T10:00:0{i % 2}"}
    for i, (role, text) in enumerate([
        ("user", "Which glaze did we pick for the celadon vase firing?"),
        ("assistant", "You picked the Tenmoku glaze for the celadon vase, fired at cone 6."),
        ("user", "And who is bringing the kiln shelves to the studio?"),
        ("assistant", "Noor is bringing the kiln shelves on Thursday."),
        ("user", "Remind me what Mochi eats in the morning."),
        ("assistant", "Mochi gets wet food at seven and a little dry food at noon."),
    ])
]
WRITES = ["commit", "import-chat", "ingest", "link", "unlink", "lint --fix", "reindex --full", "dream", "obsidian"]
PAGES = {f"page-{i}.md": f"# Page {i}\n\nOn {i + 3} March 2024 Dana Whitfield met Ravi Patel at Web Summit about "
                         f"topic {i}. See [the next page](page-{(i + 1) % 4}.md).\n" for i in range(4)}


def memlink(root: Path, *args: str, kill_at: int = 0) -> subprocess.CompletedProcess:
    return forkserver.run([sys.executable, str(WORKER), str(kill_at), "--vault", str(root), *args],
                          capture_output=True, text=True, env=ENV, cwd=REPO, timeout=600)


def steps_of(run: subprocess.CompletedProcess) -> int:
    return int(run.stderr.strip().splitlines()[-1].removeprefix("steps: "))


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """The sample vault on the rules provider, opened, checked, searched and recalled once
    (its derived state made), with a chat to import and pages to ingest beside it."""
    base = tmp_path_factory.mktemp("faults")
    root = base / "vault"
    shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns(".memlink"))
    uncommitted(root)  # (commit is one of the commands killed: its chats have turns to commit)
    set_llm(root, provider="rules").close()
    (base / "chat.jsonl").write_text("".join(json.dumps(e) + "\n" for e in CHAT), encoding="utf-8")
    (base / "pages").mkdir()
    for name, text in PAGES.items():
        (base / "pages" / name).write_text(text, encoding="utf-8")
    for args in (["check"], ["search", "mochi"], ["recall", "what did we pick for the celadon"]):
        run = memlink(root, *args)
        assert run.returncode == 0, run.stderr
    return root


def command(name: str, template: Path) -> list[str]:
    return {
        "commit": ["commit", SESSION],
        "import-chat": ["import-chat", str(template.parent / "chat.jsonl")],
        "ingest": ["ingest", str(template.parent / "pages")],
        "link": ["link", "entities/mochi.md", "profile.md", "--type", "related_to", "--description", "a fault test"],
        "unlink": ["unlink", "entities/berth-planner-v2.md", "entities/havenlink.md"],
        "lint --fix": ["lint", "--fix"],
        "reindex --full": ["reindex", "--full"],
        "dream": ["dream", "--provider", "rules"],
        "obsidian": ["obsidian"],
    }[name]


def prepared(name: str, template: Path, target: Path) -> Path:
    """A copy of the template set up for ``name``: lint --fix gets a note deleted behind
    its links' backs, to repair; obsidian the Links block turned off, to take out of every
    note."""
    shutil.copytree(template, target)
    if name == "lint --fix":
        (target / "entities" / "klei-vuur.md").unlink()
    if name == "obsidian":
        cfg = yaml.safe_load((target / "memlink.yaml").read_text(encoding="utf-8"))
        (target / "memlink.yaml").write_text(yaml.safe_dump({**cfg, "obsidian": {"links_block": False}}), encoding="utf-8")
    return target


def vault_state(root: Path) -> tuple:
    """What a command leaves in the vault: every note's fields, every link, and every
    session log's events and turn memories."""
    vault = Vault.open(root)
    notes, links = state_of(vault)
    vault.close()
    sessions = {}
    for path in sorted((root / "sessions").glob("*")):
        if path.name.endswith(".jsonl"):
            sessions[path.name] = sorted(_stable(line) for line in path.read_text(encoding="utf-8").splitlines())
        elif path.name.endswith(".memories.json"):
            sessions[path.name] = json.loads(path.read_text(encoding="utf-8"))
    return notes, links, sessions


def _stable(line: str) -> str:
    """A session log line without what differs from run to run: a commit mark's own id and
    time (what it covers, ``upto``, is compared)."""
    event = json.loads(line)
    if event.get("kind") == "commit":
        event.pop("id", None), event.pop("ts", None)
    return json.dumps(event, sort_keys=True)


def errors_of(vault: Vault) -> set[tuple]:
    return {(f.check, f.uri, f.other) for f in check(vault) if f.severity == "error"}


def errors_in(root: Path) -> set[tuple]:
    vault = Vault.open(root)
    try:
        return errors_of(vault)
    finally:
        vault.close()


def assert_sound(root: Path, where: str, allowed: set[tuple]) -> None:
    """No torn file; opened, nothing left in the journal and no error `check` did not
    find before the command (``allowed``); temp files a killed writer left go once old."""
    assert_files_whole(root)
    vault = Vault.open(root)  # replays a journal left in flight
    left = [p.name for p in (root / ".memlink" / "journal").glob("*") if not p.name.endswith(TMP_SUFFIX)]
    assert left == [], f"{where}: journal left {left}"  # (a temp file goes below, once old)
    assert errors_of(vault) <= allowed, f"{where}: {errors_of(vault) - allowed}"
    age_temp_files(root)
    vault.sync()
    vault.close()
    assert list(root.rglob(f"*{TMP_SUFFIX}")) == [], where


# Link and unlink say the second time that there is nothing to do; the rest end the same.
AGAIN_OK = {"unlink": (0, 1), "link": (0, 1)}


@pytest.mark.slow
@pytest.mark.parametrize("name", WRITES)
def test_a_write_command_killed_at_a_random_step_and_run_again_ends_as_an_uninterrupted_run(template, tmp_path, name):
    args = command(name, template)
    clean = prepared(name, template, tmp_path / "clean")
    allowed = errors_in(clean)  # (lint --fix starts from a vault with errors to repair)
    run = memlink(clean, *args)
    assert run.returncode == 0, run.stderr
    steps = steps_of(run)
    assert steps > 2, f"{name} took {steps} file steps: nothing to kill"
    want, after = vault_state(clean), errors_in(clean)
    rng = random.Random(f"kills of {name}")
    for kill_at in sorted(rng.sample(range(1, steps + 1), min(KILLS, steps))):
        root = prepared(name, template, tmp_path / f"killed-{kill_at}")
        killed = memlink(root, *args, kill_at=kill_at)
        assert killed.returncode in (-signal.SIGKILL, 0), killed.stderr  # (0: this run took fewer steps)
        assert_sound(root, f"{name} killed before step {kill_at}", allowed)
        again = memlink(root, *args)
        assert again.returncode in AGAIN_OK.get(name, (0,)), again.stderr
        assert "Traceback" not in again.stderr
        assert_sound(root, f"{name} killed before step {kill_at}, run again", after)
        if name == "dream":
            continue  # (each dream takes up the next topics: two runs are not one; the checks above hold)
        got = vault_state(root)
        assert got == want, f"{name} killed before step {kill_at}, run again"


# -- full disk ----------------------------------------------------------------------------
READS = [["search", "search", "mochi"], ["recall", "recall", "what did we pick for the celadon"], ["lint", "lint"]]
RUN = """
import json, sys
from memlink_tui.cli import main
for name, *args in json.loads(sys.argv[2]):
    print("== " + name, flush=True)
    code = main(["--vault", sys.argv[1], *args])
    print(f"== rc {code}", flush=True)
"""


def _answers(out: str) -> dict[str, tuple[int, str]]:
    """The reads' exit codes and output, by command."""
    got, name, lines = {}, "", []
    for line in out.splitlines():
        if line.startswith("== rc "):
            got[name] = (int(line[6:]), "\n".join(lines))
        elif line.startswith("== "):
            name, lines = line[3:], []
        else:
            lines.append(line)
    return got


def _can_mount_tmpfs() -> bool:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return False
    probe = subprocess.run(["unshare", "-m", "sh", "-c", 'd=$(mktemp -d) && mount -t tmpfs -o size=1m tmpfs "$d"'],
                           capture_output=True, timeout=30)
    return probe.returncode == 0


# Each command on a disk with no room, and those that write more with room for part of it
# (the dream then stops with a journal waiting for room, which reads must not wait for).
FULL = [(name, 0) for name in WRITES] + [(name, 100_000) for name in ("commit", "import-chat", "ingest", "lint --fix",
                                                                      "dream")]


@pytest.mark.slow
@pytest.mark.skipif(not _can_mount_tmpfs(), reason="needs root, unshare and a tmpfs")
@pytest.mark.parametrize(("name", "free"), FULL)
def test_after_a_write_command_ran_out_of_disk_search_recall_and_lint_still_answer(template, tmp_path, name, free):
    """The vault on a tmpfs filled to ``free`` bytes; the command fails with one sentence
    (or finishes, when it fitted); then, the disk still full, search, recall and lint
    answer; once there is room again the command runs again, the vault checks clean and
    the reads still answer."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    room = [["again", *command(name, template)], ["check", "check"], *READS]  # (one process: its imports once)
    # Every step a process forked in a private mount namespace holding the full tmpfs.
    script = ('mount -t tmpfs -o size=40m tmpfs "$0" && cp -r "$1" "$0/v" && '
              f'{{ dd if=/dev/zero of="$0/fill" bs=64k >/dev/null 2>&1; truncate -s -{free} "$0/fill"; }} && shift && exec "$@"')
    server = forkserver.Server(("unshare", "-m", "sh", "-c", script, str(mnt), str(prepared(name, template, tmp_path / "vault"))))
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def python(*args: str) -> subprocess.CompletedProcess:
        return server.run([sys.executable, *args], text=True, cwd=REPO, timeout=900, env=env)

    try:
        write = python("-m", "memlink_tui", "--vault", f"{mnt}/v", *command(name, template))
        full = python("-c", RUN, f"{mnt}/v", json.dumps(READS))
        python("-c", "import os, sys; os.remove(sys.argv[1])", f"{mnt}/fill")
        again = python("-c", RUN, f"{mnt}/v", json.dumps(room))
    finally:
        server.close()

    assert "Traceback" not in write.stderr and write.returncode in (0, 1, 5), write.stderr  # (5: a dream that did some of its topics)
    if write.returncode == 1:
        assert "the disk is full" in write.stderr, write.stderr
    for when, run, names in (("full", full, {"search", "recall", "lint"}),
                             ("room", again, {"again", "check", "search", "recall", "lint"})):
        answers = _answers(run.stdout)
        assert "Traceback" not in run.stderr, (when, run.stderr)
        assert set(answers) == names, (when, run.stdout, run.stderr)
        assert answers["search"][0] == 0 and "entities/mochi.md" in answers["search"][1], (when, answers)
        assert answers["recall"][0] == 0 and "celadon" in answers["recall"][1].lower(), (when, answers)
        assert answers["lint"][0] in (0, 3) and " errors; " in answers["lint"][1], (when, answers)
    assert answers["check"][0] == 0, again.stdout + again.stderr


# -- full disk, injected (no root needed) ----------------------------------------------------
def _no_room(*_args, **_kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.fixture
def no_room():
    """A full disk at every boundary memlink writes through: file writes, renames and
    syncs, SQLite (its words for it), tantivy's commits and new indexes (its words), so
    no derived state can be written; call it to make room again."""
    from engine.index.keywords import KeywordIndex
    from engine.storage.store import Store, StoreBusy

    tantivy_full = "Failed to commit: An IO error occurred: 'No space left on device (os error 28)'"
    made, flush, write = KeywordIndex.__init__, KeywordIndex.flush, Store.write

    def new_index(self, folder, fields):
        if folder is not None and not (folder / "meta.json").exists():
            raise ValueError(tantivy_full)
        made(self, folder, fields)

    def commit(self):
        if self.pending and self.folder is not None:
            raise ValueError(tantivy_full)
        flush(self)

    def sqlite_write(self):
        if self.path is not None:  # (a database in memory has room)
            raise StoreBusy("database or disk is full")
        return write(self)

    patch = pytest.MonkeyPatch()  # (its own: undoing it leaves the test's other patches alone)
    for module, name, fake in ((os, "write", _no_room), (os, "replace", _no_room), (os, "fsync", _no_room),
                               (KeywordIndex, "__init__", new_index), (KeywordIndex, "flush", commit),
                               (Store, "write", sqlite_write)):
        patch.setattr(module, name, fake)
    yield patch.undo
    patch.undo()


def _reads(root: Path, capsys) -> dict[str, tuple[int, str]]:
    from memlink_tui.cli import main

    got = {}
    for args in (["search", "mochi"], ["recall", "what did we pick for the celadon"], ["lint"]):
        code = main(["--vault", str(root), *args])
        captured = capsys.readouterr()
        got[args[0]] = (code, captured.out + captured.err)
    return got


@pytest.mark.parametrize("name", ["reindex --full", "import-chat", "ingest", "dream"])
def test_with_no_room_for_derived_state_search_recall_and_lint_answer_from_memory(template, tmp_path, no_room,
                                                                                name, capsys):
    """An injected full disk (no root needed): a write command that runs out of room, then
    search, recall and lint with the disk still full, then again with room."""
    from memlink_tui.cli import main

    root = prepared(name, template, tmp_path / "vault")
    shutil.rmtree(root / ".memlink" / "index" / "notes")  # what a rebuild cut short by the full disk leaves
    code = main(["--vault", str(root), *command(name, template)])
    err = capsys.readouterr().err
    assert code in (0, 1, 5) and "Traceback" not in err, err
    if code == 1:
        assert "the disk is full" in err, err
    for when in ("full", "room"):
        answers = _reads(root, capsys)
        assert answers["search"][0] == 0 and "entities/mochi.md" in answers["search"][1], (when, answers)
        assert answers["recall"][0] == 0 and "celadon" in answers["recall"][1].lower(), (when, answers)
        assert answers["lint"][0] in (0, 3) and " errors; " in answers["lint"][1], (when, answers)
        no_room()
    assert (root / ".memlink" / "index" / "notes" / "meta.json").exists()  # written again once there was room


def test_a_database_that_cannot_grow_moves_into_memory_and_reads_see_the_vault_as_it_is(sample):
    """SQLite's own "database or disk is full" (its page limit, no root needed): notes
    added and deleted by hand cannot be recorded in the file, yet this process's search
    and check see the vault as it is; the next process finds the file as it was and
    reads the vault again."""
    from engine.retrieve.search import search

    sample.sync()
    check(sample)
    (sample.root / "entities" / "klei-vuur.md").unlink()
    when = "'2026-10-01T10:00:00+00:00'"
    for i in range(60):
        (sample.root / "entities" / f"kiln-{i}.md").write_text(
            f"---\nmemory_type: entity\ncreated_at: {when}\nupdated_at: {when}\nfields:\n"
            f"  name: Kiln number {i} of the Zwaanshals studio\n  kind: thing\n  content: Kiln number {i} is electric.\n---\n",
            encoding="utf-8")
    pages = sample.store.row("PRAGMA page_count")[0]
    sample.store.row(f"PRAGMA max_page_count = {pages}")  # no room to grow from here
    dangling = {f.message for f in check(sample) if "klei-vuur.md does not exist" in f.message}
    assert dangling and not sample.store.on_disk
    assert "entities/kiln-7.md" in sample.catalog and "entities/klei-vuur.md" not in sample.catalog
    assert "entities/kiln-7.md" in [h.uri for h in search(sample, "kiln number 7", k=3)]
    sample.close()
    again = Vault.open(sample.root)
    assert again.store.on_disk
    assert {f.message for f in check(again) if "klei-vuur.md does not exist" in f.message} == dangling


# -- growth -------------------------------------------------------------------------------------
def test_the_search_log_keeps_its_newer_half_past_its_cap(sample):
    from engine.retrieve.search import SEARCH_LOG_MAX, SearchLogEntry, search
    from engine.storage.jsonl import read_records

    log = sample.state_dir / "search-log.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    line = SearchLogEntry(q="an old question", hits=0, best_vector=0.1, at="2026-01-01T00:00:00+00:00").model_dump_json()
    log.write_text((line + "\n") * (SEARCH_LOG_MAX // len(line) + 10), encoding="utf-8")
    for _ in range(3):
        search(sample, "mochi", log=True)
    assert SEARCH_LOG_MAX // 2 <= log.stat().st_size <= SEARCH_LOG_MAX
    kept = read_records(log, SearchLogEntry)  # strict: every line whole
    assert [e.q for e in kept[-3:]] == ["mochi"] * 3 and kept[0].q == "an old question"


def test_link_writes_leave_dot_memlink_bounded_and_undo_working(sample, monkeypatch):
    """Links written, updated and removed hundreds of times: the undo history keeps its
    newer part under its cap (each update keeps both notes' texts), the change feed its
    last FEED_KEEP rows, and the last update can still be undone."""
    import engine.review.actions as actions
    import engine.storage.store as store
    from engine.review.actions import undo
    from engine.review.linkwrite import write_link

    monkeypatch.setattr(actions, "UNDO_HISTORY_MAX", 60_000)
    monkeypatch.setattr(store, "FEED_KEEP", 300)
    a, b = "entities/berth-planner-v2.md", "entities/havenlink.md"
    others = ["entities/mochi.md", "profile.md", "entities/hangzhou.md"]

    def size() -> int:
        return sum(p.stat().st_size for p in sample.state_dir.rglob("*") if p.is_file())

    def work(rounds: int) -> None:
        for i in range(rounds):
            write_link(sample, a, b, update=True, weight=0.5 + i % 40 / 100, description=f"round {i}")
            sample.link(others[i % 3], others[(i + 1) % 3], "related_to", description=f"round {i}")
            sample.unlink(others[i % 3], others[(i + 1) % 3])

    work(100)
    settled = size()
    work(200)
    assert (sample.state_dir / "review" / "actions.jsonl").stat().st_size <= 60_000
    assert size() <= settled + 60_000  # (unbounded, 200 more updates alone add ~900 kB)
    assert undo(sample).startswith("undid update-link")
    assert [l.description for l in sample.links.of(a, "links") if l.to_uri == b] == ["round 198"]


def test_trimming_a_capped_log_keeps_whole_records_and_always_the_newest(tmp_path):
    from engine.storage.jsonl import keep_newest

    log = tmp_path / "actions.jsonl"
    log.write_bytes(b'{"old": 1}\n' + b'{"big": "' + b"x" * 5000 + b'"}\n')
    keep_newest(log, 1000)  # the newest record alone is past the cap: it stays, whole
    assert [json.loads(line) for line in log.read_bytes().splitlines()] == [{"big": "x" * 5000}]
    log.write_bytes(b"".join(b'{"n": %d}\n' % i for i in range(1000)))
    keep_newest(log, 2000)
    kept = [json.loads(line)["n"] for line in log.read_bytes().splitlines()]
    assert kept[-1] == 999 and kept == list(range(kept[0], 1000)) and len(log.read_bytes()) <= 1000
