"""Nothing lost: writers SIGKILLed at random moments never leave a one-sided link or a
torn file; concurrent writers serialise on the vault lock; a review action or an undo
killed at any step of its commit lands whole, with its action-log record, or not at all."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import forkserver
import pytest
from conftest import REPO
from test_linkindex import indexed, link_folders, rebuilt, trusted

from engine import Vault, VaultLocked
from engine.lint.memo import check
from engine.storage.atomic import STALE_TEMP, TMP_SUFFIX
from engine.storage.jsonl import read_jsonl
from engine.storage.sidecars import SIDECAR_LOG
from engine.storage.store import DB_FILE, Store
from engine.storage.walk import NON_NOTE_DIRS, NON_NOTE_FILES

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
    """Every note parses, every sidecar is complete JSON and every link-log line but a
    torn last one (no newline: readers ignore it) is a record, before any recovery runs."""
    for path in root.rglob("*.md"):
        top = path.relative_to(root).parts[0]
        if top in NON_NOTE_DIRS or top in NON_NOTE_FILES or top.startswith("."):
            continue  # (dashboards, the dream diary: generated, written whole, not notes)
        text = path.read_text(encoding="utf-8")
        assert text.startswith("---\n") and "\n---\n" in text[4:], f"torn note {path}"
    for path in root.rglob(".relations.json"):
        json.loads(path.read_text(encoding="utf-8"))
    for path in root.rglob(SIDECAR_LOG):
        data = path.read_bytes()
        for line in data[: data.rfind(b"\n") + 1].splitlines():
            assert isinstance(json.loads(line)["ops"], list), f"bad log line in {path}"


def assert_index_matches_files(root: Path) -> set[str]:
    """Every folder the link index trusts (its stamps match the files) holds exactly the
    rows a rebuild from the files gives; the rest it re-reads before use. Returns the
    folders it trusts."""
    store = Store(root / ".memlink" / DB_FILE)
    try:
        sure = trusted(root, store)
        now = indexed(store, sure)
    finally:
        store.close()
    fresh = rebuilt(root)
    for folder in sure:
        assert now.get(folder) == fresh.get(folder), f"the index is wrong about {folder}/"
    return sure


def age_temp_files(root: Path) -> list[Path]:
    """Make every temp file under ``root`` look left long ago by a killed writer."""
    temps = list(root.rglob(f"*{TMP_SUFFIX}"))
    old = time.time() - 10 * STALE_TEMP
    for path in temps:
        os.utime(path, (old, old))
    return temps


@pytest.mark.slow
def test_sigkill_at_random_moments_never_leaves_a_one_sided_link(tmp_path):
    root = tmp_path / "vault"
    seed_vault(root)
    rng = random.Random(20261130)
    started = time.monotonic()
    mid_transaction = 0
    for i in range(KILLS):
        proc = forkserver.Popen([sys.executable, str(WORKER), str(root), str(i)], stdout=subprocess.PIPE, env=ENV, cwd=REPO)
        assert proc.stdout.readline().strip() == b"ready"
        time.sleep(rng.uniform(0.0, 0.15))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        journal = root / ".memlink" / "journal"
        if journal.is_dir() and any(journal.glob("*.json")):
            mid_transaction += 1
        assert_files_whole(root)
        vault = Vault.open(root)  # replays any pending journal
        errors = [p for p in check(vault) if p.severity == "error"]
        assert errors == [], f"after kill {i}: {errors}"
        assert not list(journal.glob("*.json")) if journal.is_dir() else True
        age_temp_files(root)
        vault.sync()  # what a later walk does once they are old
        assert list(root.rglob(f"*{TMP_SUFFIX}")) == []
        vault.close()
    elapsed = time.monotonic() - started
    print(f"\nkill test: {KILLS} SIGKILLs in {elapsed:.1f}s, {mid_transaction} landed mid-transaction")
    links = sum(1 for _ in Vault.open(root).links.all())
    assert links > 0


@pytest.mark.slow
def test_sigkill_of_link_writes_in_log_mode_and_compaction_leaves_both_sides_or_neither(tmp_path):
    """The same kills with every sidecar in log mode and compaction every few writes:
    after each, before recovery the index is right about every folder it trusts; after
    reopening no link is one-sided and the index equals a rebuild from the files."""
    root = tmp_path / "vault"
    seed_vault(root)
    env = {**ENV, "MEMLINK_TEST_LOG_MODE_BYTES": "300", "MEMLINK_TEST_COMPACT_RATIO": "1.5"}
    rng = random.Random(20261202)
    compacted = logged = 0
    for i in range(max(KILLS // 2, 10)):
        proc = forkserver.Popen([sys.executable, str(WORKER), str(root), str(1000 + i)], stdout=subprocess.PIPE, env=env, cwd=REPO)
        assert proc.stdout.readline().strip() == b"ready"
        time.sleep(rng.uniform(0.0, 0.15))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        logs = list(root.rglob(SIDECAR_LOG))
        logged += bool(logs)
        assert_files_whole(root)
        assert_index_matches_files(root)
        vault = Vault.open(root)
        errors = [p for p in check(vault) if p.severity == "error"]
        assert errors == [], f"after kill {i}: {errors}"
        assert assert_index_matches_files(root) >= link_folders(root)  # all read, all trusted
        vault.close()
        compacted += len(logs) > len(list(root.rglob(SIDECAR_LOG)))
    assert logged, "no sidecar ever took a log line: the test proved nothing"
    assert sum(1 for _ in Vault.open(root).links.all()) > 0


@pytest.mark.slow
def test_a_link_write_killed_at_each_step_of_append_and_compaction_lands_whole_or_not_at_all(tmp_path):
    """Kill `vault.link` before each file step (journal, the log append in the big
    folder, the compaction's rewrite and log removal, the small folder's rewrite, the
    journal's removal): after reopening the link has both sides or neither."""
    template = tmp_path / "template"
    v = seed_vault(template)
    people = sorted(e.uri for e in v.catalog.all() if e.uri.startswith("entities/"))
    pref = sorted(e.uri for e in v.catalog.all() if e.uri.startswith("preferences/"))[0]
    v.close()
    env = {**ENV, "MEMLINK_TEST_LOG_MODE_BYTES": "300", "MEMLINK_TEST_COMPACT_RATIO": "100"}
    seed = forkserver.run([sys.executable, "-c", "import sys; sys.path.insert(0, 'tests'); import crash_worker; from engine import Vault\n"
                           "v = Vault.open(sys.argv[1]); p = sys.argv[2:]\n"
                           "[v.link(p[0], x, 'related_to') for x in p[1:]]",
                           str(template), *people], env=env, cwd=REPO, capture_output=True, text=True)
    assert seed.returncode == 0, seed.stderr
    log = template / "entities" / SIDECAR_LOG
    assert log.exists()
    # Compaction right after the next append (its line is a few hundred bytes).
    env["MEMLINK_TEST_COMPACT_RATIO"] = str((log.stat().st_size + 50) / (template / "entities" / ".relations.json").stat().st_size)
    work = tmp_path / "work"
    outcomes, steps = set(), 0
    import shutil

    for step in range(1, 50):
        if work.exists():
            shutil.rmtree(work)
        shutil.copytree(template, work)
        run = forkserver.run([sys.executable, str(REVIEW_WORKER), str(work), "link", people[1], pref, str(step)],
                             capture_output=True, env=env, cwd=REPO, timeout=120)
        if run.returncode == 0:
            steps = step
            break
        assert run.returncode == -signal.SIGKILL, run.stderr.decode()
        assert_files_whole(work)
        assert_index_matches_files(work)
        vault = Vault.open(work)
        assert [p for p in check(vault) if p.severity == "error"] == [], f"kill before step {step}"
        made = [l for l in vault.links.of(people[1], "links") if l.to_uri == pref]
        back = [l for l in vault.links.of(pref, "backlinks") if l.from_uri == people[1]]
        assert len(made) == len(back) <= 1, f"kill before step {step}"
        outcomes.add(bool(made))
        assert_index_matches_files(work)
        vault.link(people[1], pref, "caused_by", weight=0.6, description="again")  # the vault still takes writes
        assert [p for p in check(vault) if p.severity == "error"] == []
        vault.close()
    assert steps > 4, "append, compaction and the small rewrite should be several steps"
    assert outcomes == {True, False}
    assert not (work / "entities" / SIDECAR_LOG).exists()  # the finished run compacted


@pytest.mark.slow
def test_two_writers_at_once_serialise(tmp_path):
    root = tmp_path / "vault"
    seed_vault(root)
    procs = [
        forkserver.Popen([sys.executable, str(WORKER), str(root), str(seed), "120"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, cwd=REPO)
        for seed in (1, 2)
    ]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()
    vault = Vault.open(root)
    assert [p for p in check(vault) if p.severity == "error"] == []
    assert sum(1 for _ in vault.links.all()) > 0


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
        a, b = [e.uri for e in v.catalog.all()][:2]
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
    assert v.links.of(a) == []
    v.link(a, b, "related_to")  # the lock is free again
    assert len(v.links.of(a)) == 1


def test_a_killed_writers_temp_files_are_removed_by_the_next_walk_once_old(tmp_path):
    """Temp files a writer killed before its rename leaves beside notes, sidecars and
    session files go at the next walk once older than STALE_TEMP; a young one (a live
    writer's) stays."""
    v = seed_vault(tmp_path / "vault")
    left = [v.root / "entities" / f".person-0.md.1234abcd{TMP_SUFFIX}",
            v.root / "entities" / f".relations.json.1234abcd{TMP_SUFFIX}",
            v.root / "sessions" / f".s.jsonl.1234abcd{TMP_SUFFIX}"]
    for path in left:
        path.write_text("half a write")
    age_temp_files(v.root)
    young = v.root / "preferences" / f".topic-0.md.1234abcd{TMP_SUFFIX}"
    young.write_text("a live write")
    Vault.open(v.root).sync()
    assert [p for p in left if p.exists()] == [] and young.exists()
    ro = Vault.open(v.root, read_only=True)  # a read-only walk removes nothing
    age_temp_files(v.root)
    ro.sync()
    assert young.exists()


def test_a_killed_writers_temp_journal_file_is_removed_once_old(tmp_path):
    v = seed_vault(tmp_path / "vault")
    v.journal.folder.mkdir(parents=True, exist_ok=True)
    temp = v.journal.folder / f".00000000000000000001-dead.json.1234abcd{TMP_SUFFIX}"
    temp.write_text("half a journal")  # what a writer killed inside Journal.commit's write leaves
    age_temp_files(v.root)
    fresh = Vault.open(v.root)
    fresh.sync()
    fresh.link("entities/person-0.md", "entities/person-1.md", "related_to")
    assert not temp.exists()


def test_replay_never_overwrites_a_file_edited_since(tmp_path):
    from engine.storage.journal import WriteFile, file_hash

    v = seed_vault(tmp_path / "vault")
    uri = "entities/person-0.md"
    path = v.path(uri)
    before = file_hash(path)
    journal = v.journal
    journal.folder.mkdir(parents=True, exist_ok=True)
    # A journal as a killed writer leaves it, then the user edits the note in vim.
    from engine.storage.journal import _OPS

    (journal.folder / "00000000000000000001-dead.json").write_bytes(_OPS.dump_json([WriteFile(uri=uri, text="stale", before=before)]))
    path.write_text(path.read_text().replace("first line", "edited by hand"))
    fresh = Vault.open(v.root)
    assert "edited by hand" in path.read_text()
    assert any("changed since" in w for w in fresh.warnings)
    assert not list(journal.folder.glob("*.json"))


def test_a_journal_that_cannot_be_replayed_is_set_aside_and_reported(tmp_path):
    from engine.model.links import StoredLink
    from engine.storage.journal import _OPS
    from engine.storage.sidecars import PutLink

    v = seed_vault(tmp_path / "vault")
    folder = v.state_dir / "journal"
    folder.mkdir(parents=True, exist_ok=True)
    link = StoredLink(id="l", from_uri="entities/person-0.md", to_uri="entities/person-1.md", direction="links",
                      link_type="related_to", weight=1.0, created_at="x")
    (folder / "00000000000000000001-dead.json").write_bytes(_OPS.dump_json([PutLink(folder="entities", link=link)]))
    (v.root / "entities" / ".relations.json").write_text("{broken")
    fresh = Vault.open(v.root)  # opening still works
    assert any("set aside" in w for w in fresh.warnings)
    assert "failed_journal" in {p.code for p in check(fresh)}
    assert fresh.read_note("entities/person-0.md")


def test_rewriting_a_note_keeps_its_permissions(tmp_path):
    v = seed_vault(tmp_path / "vault")
    path = v.path("entities/person-0.md")
    os.chmod(path, 0o600)
    v.write_note("entity", {"name": "Person 0", "content": "private"})
    assert (os.stat(path).st_mode & 0o777) == 0o600


def test_a_keyword_commit_killed_after_writing_its_deletes_does_not_stop_the_next(tmp_path):
    """A kill between tantivy writing a segment's deletes and its meta.json leaves a file no
    commit names; the next edit of the same note wants that very file name."""
    from engine.retrieve.search import search

    v = seed_vault(tmp_path / "vault")
    search(v, "Person")  # (builds the index)
    v.close()
    meta = tmp_path / "vault" / ".memlink" / "index" / "notes" / "meta.json"
    before = meta.read_bytes()
    v = Vault.open(tmp_path / "vault")
    v.write_note("entity", {"name": "Person 0", "content": "moved to Lisbon"})
    search(v, "Lisbon")
    v.close()
    meta.write_bytes(before)  # (the commit that wrote the deletes never landed)
    v = Vault.open(tmp_path / "vault")
    v.write_note("entity", {"name": "Person 0", "content": "moved to Porto"})
    assert [hit.uri for hit in search(v, "Porto")] == ["entities/person-0.md"]
    assert search(v, "Lisbon") == []
    v.close()


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


# -- review actions and undo: killed at every step of their one commit ---------------------
REVIEW_WORKER = Path(__file__).with_name("review_crash_worker.py")
ACTION_LOG = ".memlink/review/actions.jsonl"


def _vault_files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*")
            if p.is_file() and ".memlink" not in p.parts}


def _seed_contradiction(root: Path) -> tuple[str, str]:
    v = Vault.init(root)
    a = v.write_note("preference", {"topic": "Coffee", "sentiment": "like", "content": "Loves a morning flat white."})
    b = v.write_note("event", {"event_name": "Quit coffee", "date": "2026-11-01", "content": "Stopped drinking coffee."})
    v.link(b.uri, a.uri, "contradicts", weight=0.8, description="quit what she loves")
    # An unrelated link into A's only line, from a third folder: a merge keeps it (re-anchored).
    c = v.write_note("entity", {"name": "Cafe", "kind": "place", "content": "Her cafe."})
    v.link(c.uri, a.uri, "related_to", t_line_ranges="1", description="where she drinks it")
    v.close()
    return a.uri, b.uri


def _kill_at_each_step(template: Path, work: Path, action: str, a: str, b: str):
    """Run the worker killed before step 1, 2, ... until a run finishes; yield the vault
    folder left by each killed run."""
    import shutil

    for step in range(1, 50):
        if work.exists():
            shutil.rmtree(work)
        shutil.copytree(template, work)
        run = forkserver.run([sys.executable, str(REVIEW_WORKER), str(work), action, a, b, str(step)],
                             capture_output=True, env=ENV, cwd=REPO, timeout=120)
        if run.returncode == 0:
            assert run.stdout.strip() == b"done"
            assert step > 3, "the commit should have several steps to kill"
            return
        assert run.returncode == -signal.SIGKILL, run.stderr.decode()
        yield step
    raise AssertionError("the worker never finished")


@pytest.mark.slow
@pytest.mark.parametrize("action", ["keep-a", "keep-b", "merge", "dismiss", "research"])
def test_a_review_action_killed_at_any_step_lands_with_its_undo_record_or_not_at_all(tmp_path, action):
    from engine.review.actions import last_action, undo

    template = tmp_path / "template"
    a, b = _seed_contradiction(template)
    before = _vault_files(template)
    work = tmp_path / "work"
    landed = 0
    for step in _kill_at_each_step(template, work, action, a, b):
        assert_files_whole(work)
        vault = Vault.open(work)  # replays the journal, if the kill left one
        assert [p for p in check(vault) if p.severity == "error"] == [], f"kill before step {step}"
        age_temp_files(work)  # (notes are written several at once: a kill may leave their temp files)
        vault.sync()  # what a later walk does once they are old
        record = last_action(vault)
        contradicts = [l for l in vault.links.of(b, "links") if l.link_type.value == "contradicts"]
        if record is None:
            assert _vault_files(work) == before and contradicts, f"kill before step {step}: half an action"
            continue
        landed += 1
        assert record["action"] == action
        assert len(read_jsonl(work / ACTION_LOG)) == 1, f"kill before step {step}: the record twice"
        if action == "keep-a":
            assert not contradicts and vault.read_note(b).extra["superseded_by"] == a
        elif action == "keep-b":
            assert not contradicts and vault.read_note(a).extra["superseded_by"] == b
        elif action == "merge":  # (an event merged into a preference stays current)
            assert not contradicts and "superseded_by" not in vault.read_note(b).extra
            assert [l.to_uri for l in vault.links.of(a, "links") if l.link_type.value == "evolved_from"] == [b]
            assert vault.read_note(a).fields["content"] == "Merged: both are true at different times."
            assert [l.link_type.value for l in vault.links.of(a, "backlinks")].count("related_to") == 1
        elif action == "dismiss":
            assert not contradicts and [l.link_type.value for l in vault.links.of(b, "links")] == ["related_to"]
        else:
            assert vault.exists(record["message"].split(": ", 1)[1])
        assert undo(vault).startswith(f"undid {action}")
        assert _vault_files(work) == before and last_action(vault) is None
        assert [p for p in check(vault) if p.severity == "error"] == []
    assert landed, "no kill fell after the journal was written"


@pytest.mark.slow
def test_an_undo_killed_at_any_step_restores_everything_with_its_record_or_nothing(tmp_path):
    from engine.review.actions import last_action, review, undo

    template = tmp_path / "template"
    a, b = _seed_contradiction(template)
    before = _vault_files(template)
    v = Vault.open(template)
    review(v, a, b, "keep-a")
    v.close()
    after = _vault_files(template)
    work = tmp_path / "work"
    outcomes = set()
    for step in _kill_at_each_step(template, work, "undo", a, b):
        assert_files_whole(work)
        vault = Vault.open(work)
        assert [p for p in check(vault) if p.severity == "error"] == [], f"kill before step {step}"
        age_temp_files(work)
        vault.sync()
        if last_action(vault) is None:  # the undo landed: files back and its record written
            assert _vault_files(work) == before, f"kill before step {step}"
            assert [r for r in read_jsonl(work / ACTION_LOG) if "undo" in r][1:] == [], "the undo record twice"
            outcomes.add("undone")
            continue
        assert _vault_files(work) == after, f"kill before step {step}: half an undo"
        outcomes.add("not undone")
        assert undo(vault).startswith("undid keep-a")  # a later undo works
        assert _vault_files(work) == before and last_action(vault) is None
    assert outcomes == {"undone", "not undone"}
    cli = subprocess.run([sys.executable, "-m", "memlink_tui", "--vault", str(work), "check"],
                         capture_output=True, text=True, env=ENV, cwd=REPO, timeout=60)
    assert cli.returncode == 0 and " 0 errors" in cli.stdout, cli.stdout + cli.stderr


@pytest.mark.slow
def test_an_ingest_killed_at_random_moments_finishes_on_the_next_run_with_nothing_half_done(tmp_path):
    """SIGKILL `memlink ingest` of a folder of 60 small files at random moments, then
    re-run it, again and again; after each kill no file is torn and `check` finds no
    error; in the end the vault equals one that was never interrupted: every file has
    its source note, its memories and its links, and none is left pending."""
    from conftest import set_llm
    from test_linked_pages import state_of

    from engine.extract.batch import ingest_batch, pending_sources
    from engine.extract.rules import RulesExtractor

    pages = tmp_path / "pages"
    pages.mkdir()
    for i in range(60):
        (pages / f"page-{i:02d}.md").write_text(
            f"# Page {i}\n\nOn {i % 28 + 1} March 2024 Dana Whitfield met Ravi Patel at Web Summit about topic {i}. "
            f"See [the next page](page-{(i + 1) % 60:02d}.md).\n", encoding="utf-8")
    clean = Vault.init(tmp_path / "clean")
    began = time.monotonic()
    ingest_batch(clean, [pages], extractor=RulesExtractor())
    took = time.monotonic() - began  # where the kills may fall (a bound only: nothing is timed)
    want = state_of(clean)
    clean.close()

    root = tmp_path / "vault"
    Vault.init(root).close()
    set_llm(root, provider="rules").close()
    command = [sys.executable, "-m", "memlink_tui", "--vault", str(root), "ingest", str(pages)]
    rng = random.Random(20261201)
    kills = int(os.environ.get("MEMLINK_INGEST_KILLS", "12"))
    left_pending = 0
    for i in range(kills):
        proc = forkserver.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV, cwd=REPO)
        try:  # (memlink is imported before the fork: the files from the start)
            proc.wait(timeout=rng.uniform(0.0, took))  # a run left little to do may end first
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert_files_whole(root)
        vault = Vault.open(root)  # replays a journal left in flight
        errors = [p for p in check(vault) if p.severity == "error"]
        assert errors == [], f"after kill {i}: {errors}"
        left_pending += bool(pending_sources(vault))
        vault.close()
    assert left_pending, "no kill landed between a source note and its memories: the test proved nothing"
    done = forkserver.run(command, capture_output=True, text=True, env=ENV, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr
    vault = Vault.open(root)
    assert pending_sources(vault) == []
    got = state_of(vault)
    assert set(got[0]) == set(want[0])  # every source note and every memory
    assert got[1] == want[1]  # every link, both sides checked by `check` below
    assert got == want
    vault.close()
    cli = subprocess.run([sys.executable, "-m", "memlink_tui", "--vault", str(root), "check", "--json"],
                         capture_output=True, text=True, env=ENV, cwd=REPO, timeout=120)
    assert cli.returncode == 0 and json.loads(cli.stdout) == [], cli.stdout
