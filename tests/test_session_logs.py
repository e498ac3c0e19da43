"""Session logs a failed or killed write never tears, and which turns were extracted kept
in the vault itself: a full disk mid-append leaves the log as it was; a torn last line is
cut by the next append and by `check --fix`; a bad line in the middle is named and left
out while recall, import-chat and commit go on; a commit killed at any moment, or run
again after `.memlink/` was deleted, extracts no turn twice."""

from __future__ import annotations

import datetime as dt
import errno
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import forkserver
import pytest
from commit_worker import Rewording
from conftest import REPO, SAMPLE, memlink, set_llm, uncommitted
from test_crash_safety import ENV, assert_files_whole

from engine import Vault
from engine.extract.batch import ingest
from engine.extract.rules import RulesExtractor
from engine.lint.memo import check
from engine.sessions.commit import commit_session
from engine.sessions.extract import RulesTurnExtractor
from engine.sessions.importer import import_chat
from engine.sessions.log import append_events, read_events

RULES = RulesExtractor()
TURNS = RulesTurnExtractor()
WORKER = Path(__file__).with_name("commit_worker.py")
SETUP = "2026-08-11-evening-setup"
HANGZHOU = "2026-10-15-hangzhou-evening"


def event(i: str, role: str, content: str, session: str = "s") -> dict:
    return {"session": session, "id": i, "role": role, "content": content, "ts": f"2026-11-30T10:00:0{i[-1]}Z"}


def snapshot(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in root.rglob("*") if p.is_file() and ".memlink" not in p.parts}


def fresh(v: Vault) -> Vault:
    """The same vault with its derived state deleted."""
    v.close()
    shutil.rmtree(v.root / ".memlink")
    return Vault.open(v.root)


def sample_copy(tmp_path: Path, name: str = "v") -> Path:
    root = tmp_path / name
    shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns(".memlink"))
    set_llm(root, provider="rules")
    return root


def _file(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


# -- a full disk mid-append --------------------------------------------------------------------
@pytest.mark.parametrize("fails", ["write", "fsync"])
def test_a_full_disk_mid_append_leaves_the_log_byte_identical(vault, monkeypatch, fails):
    append_events(vault, "s", [event("1", "user", "Hello there.")])
    log = vault.path("sessions/s.jsonl")
    before = log.read_bytes()
    ino = (log.stat().st_dev, log.stat().st_ino)
    real_write, real_fsync = os.write, os.fsync
    writes: list[int] = []

    def write(fd, data):
        if _file(fd) != ino:
            return real_write(fd, data)
        writes.append(len(data))
        if fails == "write" and len(writes) > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, bytes(data)[: len(data) // 2] if fails == "write" else data)  # part of the line lands

    def fsync(fd):
        if fails == "fsync" and _file(fd) == ino:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_fsync(fd)

    monkeypatch.setattr(os, "write", write)
    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError, match="No space left"):
        append_events(vault, "s", [event("2", "assistant", "A long answer. " * 40)])
    monkeypatch.undo()
    assert writes and log.read_bytes() == before
    assert append_events(vault, "s", [event("2", "assistant", "Room again.")]) == 1
    assert [e.content for e in read_events(vault, "s")] == ["Hello there.", "Room again."]


def test_import_chat_on_a_full_disk_tears_nothing_and_works_once_there_is_room(tmp_path, monkeypatch):
    root = sample_copy(tmp_path)
    vault = Vault.open(root)
    chat = tmp_path / "chat.jsonl"
    chat.write_text("".join(json.dumps(event(i, role, text, HANGZHOU)) + "\n" for i, role, text in [
        ("x1", "user", "I bought a celadon tea bowl in Longquan."), ("x2", "assistant", "Noted, a celadon bowl.")]))
    log = root / "sessions" / f"{HANGZHOU}.jsonl"
    before = log.read_bytes()
    real = os.write

    def full(fd, data):
        if _file(fd) == (log.stat().st_dev, log.stat().st_ino):
            real(fd, bytes(data)[:10])  # a few bytes land, then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data)

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OSError):
        import_chat(vault, chat, TURNS)
    monkeypatch.undo()
    assert log.read_bytes() == before
    assert import_chat(Vault.open(root), chat, TURNS).events_added == 2
    r = memlink("recall", "celadon tea bowl Longquan", "--json", vault=root)
    assert r.returncode == 0 and "x1" in r.stdout, r.stderr
    assert memlink("commit", HANGZHOU, vault=root).returncode == 0


# -- torn last lines ------------------------------------------------------------------------------
def test_a_torn_last_line_is_reported_then_cut_by_the_next_append(vault):
    append_events(vault, "s", [event("1", "user", "Hello there.")])
    log = vault.path("sessions/s.jsonl")
    whole = log.read_bytes()
    with open(log, "ab") as fh:
        fh.write(b'{"session": "s", "id": "2", "role": "assis')  # a writer killed mid-line
    found = [(f.code, f.uri, f.message) for f in check(vault)]
    assert [(c, u) for c, u, _m in found] == [("torn_session_line", "sessions/s.jsonl")]
    assert found[0][2].startswith("line 2: torn last line")
    assert [e.key for e in read_events(vault, "s")] == ["1"]  # readers leave it out
    assert append_events(vault, "s", [event("3", "user", "Still there?")]) == 1
    assert log.read_bytes() == whole + (json.dumps(event("3", "user", "Still there?")) + "\n").encode()
    assert check(vault) == []


def test_a_whole_last_record_without_its_newline_is_kept(vault):
    log = vault.path("sessions/s.jsonl")
    log.write_text(json.dumps(event("1", "user", "Typed by hand.")))  # no newline at the end
    assert check(vault) == []
    assert append_events(vault, "s", [event("2", "assistant", "Read.")]) == 1
    assert [e.content for e in read_events(vault, "s")] == ["Typed by hand.", "Read."]
    assert log.read_text().count("\n") == 2


def test_check_fix_cuts_a_torn_last_line(tmp_path):
    root = sample_copy(tmp_path)
    log = root / "sessions" / f"{SETUP}.jsonl"
    whole = log.read_bytes()
    with open(log, "ab") as fh:
        fh.write('{"session": "2026-08-11-evening-setup", "id": "x", "content": "半'.encode()[:-1])  # torn mid-character too
    r = memlink("check", vault=root)
    torn = whole.count(b"\n") + 1
    assert r.returncode == 3 and f"sessions/{SETUP}.jsonl" in r.stdout and f"line {torn}: torn last line" in r.stdout, r.stdout
    r = memlink("check", "--fix", vault=root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"cut the torn last line of sessions/{SETUP}.jsonl" in r.stdout
    assert log.read_bytes() == whole


# -- a malformed line in the middle ----------------------------------------------------------------
def test_a_malformed_line_in_the_middle_is_named_and_the_rest_of_the_vault_works(tmp_path):
    root = sample_copy(tmp_path)
    log = root / "sessions" / f"{HANGZHOU}.jsonl"
    lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[4] = '{"session": "2026-10-15-hangzhou-evening", "id": oops\n'  # line 5
    lines[8] = '{"session": "2026-10-15-hangzhou-evening", "id": "x", "role": "user"}\n'  # line 9: no content
    log.write_text("".join(lines), encoding="utf-8")
    place = f"sessions/{HANGZHOU}.jsonl line 5"
    # Recall answers from the other sessions and from the other lines of this one (the
    # turn memories are made from the logs first: none are kept in the sample vault).
    r = memlink("recall", "Longjing village walk", "--json", vault=root)
    assert r.returncode == 0, r.stderr
    assert f"{HANGZHOU}-011" in r.stdout and place in r.stderr and f"{HANGZHOU}.jsonl line 9" in r.stderr
    r = memlink("recall", "scheduler design doc review", "--json", vault=root)
    assert r.returncode == 0 and "2026-09-03-morning-planning" in r.stdout, r.stderr
    r = memlink("check", vault=root)
    assert r.returncode == 3 and "line 5: not JSON" in r.stdout and "line 9: needs keys content, ts" in r.stdout, r.stdout
    r = memlink("commit", HANGZHOU, "--json", vault=root)
    assert r.returncode == 0 and place in r.stderr, r.stderr
    chat = tmp_path / "more.jsonl"
    chat.write_text(json.dumps(event("y1", "user", "I like celadon glazes.", HANGZHOU)) + "\n")
    r = memlink("import-chat", str(chat), vault=root)
    assert r.returncode == 0 and "1 new message," in r.stdout, r.stdout + r.stderr
    assert log.read_text(encoding="utf-8").splitlines()[4] == lines[4].rstrip("\n")  # left where it was


# -- which turns were extracted, in the vault ------------------------------------------------------
def test_commit_then_delete_memlink_then_commit_adds_nothing(tmp_path):
    root = sample_copy(tmp_path)
    for session in (SETUP, "2026-11-20-weekly-review"):
        r = memlink("commit", session, vault=root)
        assert r.returncode == 0, r.stderr
        before = snapshot(root)
        shutil.rmtree(root / ".memlink")
        r = memlink("commit", session, vault=root)
        assert r.returncode == 0 and "nothing new to commit" in r.stdout, r.stdout
        assert snapshot(root) == before


def test_import_chat_and_ingest_again_after_memlink_is_deleted_add_nothing(vault, tmp_path):
    chat = tmp_path / "chat.jsonl"
    chat.write_text("".join(json.dumps(event(i, role, text)) + "\n" for i, role, text in [
        ("1", "user", "I love mangosteen."), ("2", "assistant", "Noted.")]))
    doc = tmp_path / "a" / "offsite.md"
    doc.parent.mkdir()
    doc.write_text("# Offsite notes\n\nI like short standups.\n")
    copy = tmp_path / "b" / "offsite.md"  # the same text, found at another path
    copy.parent.mkdir()
    copy.write_text(doc.read_text())
    import_chat(vault, chat, TURNS)
    first = ingest(vault, doc, extractor=RULES)
    assert first.source_uri == "sources/offsite.md"
    before = snapshot(vault.root)
    vault = fresh(vault)
    again = import_chat(vault, chat, TURNS)
    assert (again.events_added, again.extracted, again.already) == (0, 0, 1)
    assert ingest(vault, doc, extractor=RULES).skipped == "already imported as sources/offsite.md"
    vault = fresh(vault)
    assert ingest(vault, copy, extractor=RULES).skipped == "already imported as sources/offsite.md"
    assert snapshot(vault.root) == before


@pytest.mark.parametrize(("ts", "day"), [("1:56 pm on 8 May, 2023", "2023-05-08"), ("2025年3月2日 晚上8:10", "2025-03-02"),
                                        ("2024-02-29T23:10:00Z", "2024-02-29"), ("1:05 May 8, 2023", "2023-05-08"),
                                        (1683720000, "2023-05-10"), (1683720000123, "2023-05-10")])  # (Unix noon)
def test_memories_of_an_imported_chat_are_dated_when_it_was_said(vault, tmp_path, ts, day):
    chat = tmp_path / "chat.jsonl"
    chat.write_text("".join(json.dumps(dict(event(i, role, text), ts=ts)) + "\n" for i, role, text in [
        ("1", "user", "I love mangosteen."), ("2", "assistant", "Noted.")]))
    import_chat(vault, chat, TURNS)
    assert commit_session(vault, "s", RULES) is not None
    assert vault.read_note("preferences/mangosteen.md").created_at.startswith(day)


def test_a_number_is_a_day_only_as_unix_time_of_this_century():
    from engine.extract.rules import day_of

    assert day_of("1683720000") == day_of("1683720000123") == day_of("1683720000.5") == dt.date(2023, 5, 10)
    assert [day_of(s) for s in ("202305081356", "2023050813", "123456789", "99999999999")] == [None] * 4


def test_an_import_names_time_stamps_that_name_no_day(tmp_path):
    root = tmp_path / "v"
    assert memlink("init", vault=root).returncode == 0
    chat = tmp_path / "chat.jsonl"
    chat.write_text("".join(json.dumps(dict(event(i, role, "Hello there."), ts=ts)) + "\n" for i, role, ts in [
        ("1", "user", "sometime last week"), ("2", "assistant", "the 8th"), ("3", "user", "1:56 pm on 8 May, 2023"),
        ("4", "assistant", "2023-05-08T13:57:00Z")]))
    r = memlink("import-chat", str(chat), vault=root)
    assert r.returncode == 0, r.stderr
    assert ("2 messages with a time stamp naming no day ('sometime last week', 'the 8th'): their memories take "
            "the day of their session's last message, or of the commit") in r.stdout, r.stdout
    again = memlink("import-chat", str(chat), vault=root)  # nothing new: nothing said twice
    assert again.returncode == 0 and "naming no day" not in again.stdout, again.stdout


def imported_chat(tmp_path: Path, said: list[tuple], root: Path | None = None) -> tuple[Path, str]:
    """A JSON Lines chat of (session, id, role, text, ts) messages imported into ``root`` (a
    new vault unless given): the vault and what the import printed."""
    if root is None:
        root = tmp_path / "v"
        assert memlink("init", vault=root).returncode == 0
    chat = tmp_path / "chat.jsonl"
    chat.write_text("".join(json.dumps(dict(event(i, role, text, session), ts=ts)) + "\n" for session, i, role, text, ts in said))
    r = memlink("import-chat", str(chat), vault=root)
    return root, r.stdout + r.stderr


def beagles(session: str, stamps: list, first: int = 1) -> list[tuple]:
    """Messages of one session at these stamps, the user's and the answer's in turn."""
    return [(session, str(i), "user" if i % 2 else "assistant", f"I adopted a beagle {i}.", ts)
            for i, ts in enumerate(stamps, first)]


def logged(root: Path, session: str = "s") -> list[dict]:
    return [json.loads(line) for line in (root / "sessions" / f"{session}.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("stamps, days, said", [
    # A day above 12 settles the order for the whole file.
    (["05/03/2024 10:00", "25/03/2024 10:01", "05.04.2024"], ["2024-03-05", "2024-03-25", "2024-04-05"],
     "dates read day/month in session 's': the message with id '2' of session 's' names a day above 12"),
    (["3/5/24, 9:41 PM", "3/25/24, 9:42 PM"], ["2024-03-05", "2024-03-25"],
     "dates read month/day in session 's': the message with id '2' of session 's' names a day above 12"),
    # Nothing settles it: day first, or month first on a 12-hour clock; the import says which.
    (["05/03/2024 10:00", "06/03/2024"], ["2024-03-05", "2024-03-06"], "dates read day/month in session 's': no day above 12 says"),
    (["05/03/2024 10:00 AM"], ["2024-05-03"], "dates read month/day in session 's': no day above 12 says"),
    (["2024/03/05 10:00"], ["2024-03-05"], ""),
])
def test_time_stamps_written_with_numbers_are_read_in_the_order_the_file_settles(tmp_path, stamps, days, said):
    root, out = imported_chat(tmp_path, beagles("s", stamps))
    assert said in out and "naming no day" not in out, out
    assert [e["ts"][:10] for e in logged(root)] == days
    turns = json.loads((root / "sessions" / "s.memories.json").read_text())["turns"].values()
    assert turns and all(t["ts"][:10] in days for t in turns), turns  # (a turn: the day of its last message)


def test_a_session_writing_its_dates_both_ways_is_refused(tmp_path):
    root, out = imported_chat(tmp_path, beagles("s", ["25/03/2024 10:00", "03/26/2024 10:01"]))
    assert not (root / "sessions" / "s.jsonl").exists(), out
    assert ("the message with id '2' of session 's' writes its date month first, and the message with id '1' of "
            "session 's' day first: not one chat session's time stamps; nothing was imported") in out, out


def test_yesterday_counts_from_the_day_it_was_said_in_a_chat_of_many_days(vault, tmp_path):
    said = [("1", "user", "Yesterday I went to a pottery class with Maya.", "1:56 pm on 8 May, 2023"),
            ("2", "assistant", "Fun!", "1:57 pm on 8 May, 2023"),
            ("3", "user", "Yesterday I fixed the bike.", "10:05 am on 25 December, 2023"),
            ("4", "assistant", "Nice.", "10:06 am on 25 December, 2023")]
    chat = tmp_path / "chat.jsonl"
    chat.write_text("".join(json.dumps(dict(event(i, role, text), ts=ts)) + "\n" for i, role, text, ts in said))
    import_chat(vault, chat, TURNS)
    read: list[str] = []

    class Reading(RulesExtractor):  # what a model reads: each day's turns under their date
        def extract(self, ctx, schema):
            read.append(ctx.text)
            return super().extract(ctx, schema)

    assert commit_session(vault, "s", Reading()) is not None
    dates = sorted(vault.read_note(e.uri).fields["date"] for e in vault.catalog.all("event"))
    assert dates == ["2023-05-07", "2023-12-24"]
    assert read[0].index("(2023-05-08)") < read[0].index("pottery") < read[0].index("(2023-12-25)") < read[0].index("bike")


def test_each_memory_of_a_chat_of_many_days_is_dated_the_day_it_was_said(vault, tmp_path):
    said = [("1", "user", "I prefer window seats.", "2023-05-10T10:00:00+00:00"), ("2", "assistant", "ok", 1683713000),
            ("3", "user", "I love rainy days.", "2023-06-01T10:00:00+00:00"), ("4", "assistant", "ok", "2023-06-01T10:00:05Z")]
    chat = tmp_path / "chat.jsonl"
    chat.write_text("".join(json.dumps(dict(event(i, role, text), ts=ts)) + "\n" for i, role, text, ts in said))
    import_chat(vault, chat, TURNS)
    assert commit_session(vault, "s", RULES) is not None
    assert vault.read_note("preferences/window-seats.md").created_at.startswith("2023-05-10")
    assert vault.read_note("preferences/rainy-days.md").created_at.startswith("2023-06-01")


def test_a_log_imported_from_another_vault_brings_no_commit_mark(vault, tmp_path):
    append_events(vault, "s", [event("1", "user", "I love mangosteen."), event("2", "assistant", "Noted.")])
    assert commit_session(vault, "s", RULES) is not None
    other = Vault.init(tmp_path / "other")
    import_chat(other, vault.path("sessions/s.jsonl"), TURNS)
    assert [e.kind for e in read_events(other, "s")] == [None, None]
    assert "preferences/mangosteen.md" in commit_session(other, "s", RULES).created


def _memories(root: Path) -> tuple[dict[str, dict], list[tuple]]:
    """The vault's notes (their fields) and links (without ids and times)."""
    v = Vault.open(root)
    try:
        notes = {e.uri: v.read_note(e.uri).fields for e in v.catalog.all()}
        links = sorted((l.direction, l.from_uri, l.to_uri, l.link_type.value, l.weight, l.match_text or "", l.description)
                       for l in v.links.all())
        return notes, links
    finally:
        v.close()


@pytest.mark.slow
def test_commit_killed_at_random_moments_then_run_again_gives_the_notes_and_links_of_one_run(tmp_path):
    kills = int(os.environ.get("MEMLINK_COMMIT_KILLS", "20"))
    seed = sample_copy(tmp_path, "seed")
    uncommitted(seed)
    assert memlink("reindex", vault=seed).returncode == 0  # the kills fall in the commit, not the first index

    def start(root: Path) -> subprocess.Popen:
        proc = forkserver.Popen([sys.executable, str(WORKER), str(root), SETUP],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=ENV, cwd=REPO)
        assert proc.stdout.readline().strip() == b"ready"
        return proc

    whole = tmp_path / "whole"
    shutil.copytree(seed, whole)
    proc = start(whole)
    began = time.monotonic()
    assert proc.wait() == 0
    took = time.monotonic() - began  # where the kills may fall (a bound only: nothing is timed)
    expected = _memories(whole)
    assert len(expected[0]) > len(_memories(seed)[0]) and len(expected[1]) > len(_memories(seed)[1])
    rng = random.Random(20261205)
    mid_transaction = 0
    for i in range(kills):
        root = tmp_path / f"kill-{i}"
        shutil.copytree(seed, root)
        proc = start(root)
        time.sleep(rng.uniform(0.0, took))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        mid_transaction += any((root / ".memlink" / "journal").glob("*.json"))
        assert_files_whole(root)
        v = Vault.open(root)  # replays a journal the kill left
        commit_session(v, SETUP, Rewording(v))  # (a turn extracted twice would be a second note)
        v.close()
        assert _memories(root) == expected, f"kill {i}"
        marks = [e for e in read_events(Vault.open(root), SETUP) if e.kind == "commit"]
        assert len(marks) == 1, f"kill {i}: {len(marks)} commit marks"
        assert [f for f in check(Vault.open(root)) if f.severity == "error"] == [], f"kill {i}"
        shutil.rmtree(root)
    print(f"\ncommit kills: {kills}, {mid_transaction} landed mid-transaction")


def test_the_sample_vault_s_chats_are_committed_already(tmp_path):
    """Its notes are those chats' memories: committing again would make each twice."""
    root = tmp_path / "sample"
    shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns(".memlink"))
    set_llm(root, provider="rules").close()
    r = memlink("commit", "--all", vault=root)
    assert r.returncode == 0 and "sessions committed: 0" in r.stdout and "with nothing new: 4" in r.stdout, r.stdout


def test_a_session_listed_newest_first_is_read_oldest_first(tmp_path):
    """A turn pairs a question with the answer after it in time, however the file lists them."""
    said = [("s", "4", "assistant", "Try the Alhambra at sunrise.", "2024-05-01T10:03:00Z"),
            ("s", "3", "user", "What should I see in Granada?", "2024-05-01T10:02:00Z"),
            ("s", "2", "assistant", "Paella in Valencia is the classic.", "2024-05-01T10:01:00Z"),
            ("s", "1", "user", "Where should I eat paella?", "2024-05-01T10:00:00Z")]
    root, out = imported_chat(tmp_path, said)
    assert "1 chat session listed newest first ('s'): read oldest first" in out, out
    r = memlink("recall", "What should I see in Granada?", "--k", "1", "--json", vault=root)
    [hit] = json.loads(r.stdout)
    assert (hit["question"], hit["answer"]) == ("What should I see in Granada?", "Try the Alhambra at sunrise.")
    _root, out = imported_chat(tmp_path, said, root)
    assert "0 new messages" in out, out


def test_a_message_imported_again_with_another_time_stamp_is_kept_and_said_so(tmp_path):
    root, _out = imported_chat(tmp_path, beagles("s", ["2024-03-13T10:00:01Z", "2024-03-13T10:00:02Z"]))
    _root, out = imported_chat(tmp_path, beagles("s", ["2024-03-14T10:00:01Z", "2024-03-14T10:00:02Z"]), root)
    assert "imported before with another time stamp: 2 messages, kept as first imported" in out, out
    assert [e["ts"] for e in logged(root)] == ["2024-03-13T10:00:01Z", "2024-03-13T10:00:02Z"]


def test_each_session_settles_its_own_date_order_and_one_that_cannot_takes_the_file_s(tmp_path):
    root, out = imported_chat(tmp_path, [*beagles("a", ["25/03/2024 10:00", "25/03/2024 10:01"]),
                                         *beagles("b", ["05/04/2024 09:00", "05/04/2024 09:01"], 3),
                                         *beagles("c", ["03/26/2024 09:00", "03/26/2024 09:01"], 5)])
    assert "nothing was imported" not in out, out  # (two ways in one file: each session is one chat)
    assert {s: logged(root, s)[0]["ts"][:10] for s in "abc"} == {"a": "2024-03-25", "b": "2024-04-05", "c": "2024-03-26"}
    assert "dates read day/month in session 'b': no day above 12 says which comes first" in out, out
    _root, out = imported_chat(tmp_path, [*beagles("b2", ["05/04/2024 09:00", "05/04/2024 09:01"], 7),
                                          *beagles("d", ["03/26/2024 09:00"], 9)], root)
    assert "dates read month/day in session 'b2': the rest of the file names a day above 12" in out, out


def test_a_time_stamp_logged_unread_or_as_a_number_is_not_said_to_have_changed(tmp_path):
    root, out = imported_chat(tmp_path, beagles("s", [1710324000, 1710324001]))
    _root, out = imported_chat(tmp_path, beagles("s", ["1710324000", "1710324001"]), root)
    assert "another time stamp" not in out and "0 new messages" in out, out


@pytest.mark.parametrize("stamps", [["2024-05-01T10:03:00Z", "2024-05-01T10:03:00Z", "2024-05-01T10:01:00Z",
                                     "2024-05-01T10:00:00Z"],  # (stamps to the minute: a question and its answer alike)
                                    ["2024-05-01T11:00:00Z", "2024-05-01T10:00:00Z"]])
def test_a_session_newest_first_is_told_by_its_stamps_to_the_minute_or_two_messages_apart(tmp_path, stamps):
    said = [("s", str(len(stamps) - n), "assistant" if n % 2 == 0 else "user", f"Message {len(stamps) - n}.", ts)
            for n, ts in enumerate(stamps)]
    root, out = imported_chat(tmp_path, said)
    assert "listed newest first" in out, out
    assert [e["id"] for e in logged(root)] == [str(i) for i in range(1, len(stamps) + 1)]


def test_an_answer_stamped_a_moment_before_its_question_stays_after_it(tmp_path):
    """The model's server clock a little behind the user's: a skew, not a newest-first file."""
    root, _out = imported_chat(tmp_path, [("s", "1", "user", "Where should I eat paella?", "2024-05-01T10:00:00.120Z"),
                                          ("s", "2", "assistant", "Valencia.", "2024-05-01T10:00:00.100Z")])
    assert [e["id"] for e in logged(root)] == ["1", "2"]


def test_a_session_imported_before_keeps_the_date_order_it_was_read_in(tmp_path):
    """Nothing in the session says which comes first: the order its log was read in stands,
    whatever another session of the new file settles."""
    root, out = imported_chat(tmp_path, beagles("s", ["05/03/2024 10:00", "06/03/2024 10:01"]))
    assert "dates read day/month in session 's'" in out, out
    _root, out = imported_chat(tmp_path, [*beagles("s", ["05/03/2024 10:00", "06/03/2024 10:01", "07/03/2024 10:02"]),
                                          *beagles("d", ["03/26/2024 09:00"], 9)], root)
    assert "dates read day/month in session 's': as when this session was imported before" in out, out
    assert "another time stamp" not in out, out
    assert [e["ts"][:10] for e in logged(root)] == ["2024-03-05", "2024-03-06", "2024-03-07"]
