"""Session events as models, the one JSON-Lines module for session logs, the audit and
the search log, and the one turn projection that commit, import-chat and chat read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import SAMPLE, memlink, set_llm

from engine.errors import MemlinkError
from engine.extract.rules import RulesExtractor
from engine.extract.updater import AuditEntry
from engine.retrieve.search import SearchLogEntry, search
from engine.sessions.commit import commit_session
from engine.sessions.events import SessionEvent
from engine.sessions.importer import import_chat
from engine.sessions.log import SessionError, append_events, read_events, validate_session_file
from engine.storage.jsonl import read_records

SECRET = ("durian", "quince", "zorblax")


def _event(i: str, role: str, content: str, **extra: str) -> dict:
    return {"session": "leak", "id": i, "role": role, "content": content, "ts": f"2026-11-30T10:00:0{i}Z", **extra}


def _append(log: Path, *events: dict) -> None:
    with open(log, "a", encoding="utf-8") as fh:
        fh.write("".join(json.dumps(e) + "\n" for e in events))


def _leaks(root: Path) -> list[str]:
    """Files outside the session logs that mention what only the reasoning said."""
    out = []
    for path in root.rglob("*"):
        if not path.is_file() or "sessions" in path.relative_to(root).parts or "index" in path.parts:
            continue
        text = path.read_text(encoding="utf-8", errors="replace").lower()
        if any(word in text for word in SECRET):
            out.append(str(path.relative_to(root)))
    return out


def test_commit_never_extracts_reasoning(tmp_path):
    """An assistant's reasoning ("I love durian", a capitalised name) is not something the
    user said: after `memlink commit` nothing of it is in a note, a sidecar or the audit,
    while what the user said in the same session still becomes a memory."""
    root = tmp_path / "v"
    shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns(".memlink"))
    set_llm(root, provider="rules")
    log = root / "sessions" / "leak.jsonl"
    _append(log, _event("1", "user", "Can you help me plan the weekend? I love mangosteen."))
    first = memlink("commit", "leak", "--json", vault=root)
    assert first.returncode == 0, first.stderr
    assert "preferences/mangosteen.md" in json.loads(first.stdout)["created"]  # the user's words do reach extraction
    # The question's answer arrives later, after the assistant thought aloud.
    _append(log, _event("2", "assistant", "I love durian. I met Bartholomew Quince at Zorblax Industries.", kind="reasoning"),
            _event("3", "tool", "search(Zorblax durian)"),
            _event("4", "assistant", "Sure, what would you like to do?"))
    second = memlink("commit", "leak", "--json", vault=root)
    assert second.returncode == 0, second.stderr
    assert _leaks(root) == []
    assert not (root / "preferences" / "durian.md").exists()


def test_commit_reads_the_turn_projection(sample):
    """The text extraction sees is the projection's: no reasoning, tool, draft or recall
    snapshot, an image's caption with its message, and a last question still waiting
    for its answer (a commit closes what was said so far)."""
    append_events(sample, "p", [
        {"session": "p", "id": 1, "role": "user", "content": "Look at this.", "caption": "a red kite over a beach", "ts": "t"},
        {"session": "p", "id": 2, "role": "assistant", "kind": "reasoning", "content": "REASONING", "ts": "t"},
        {"session": "p", "id": 3, "role": "tool", "content": "TOOL", "ts": "t"},
        {"session": "p", "id": 4, "role": "assistant", "kind": "draft", "content": "DRAFT", "ts": "t"},
        {"session": "p", "id": 5, "role": "assistant", "content": "A lovely kite.", "ts": "t"},
        {"session": "p", "id": 6, "role": "user", "kind": "recall", "content": "RECALLED", "ts": "t"},
        {"session": "p", "id": 7, "role": "user", "content": "Is it windy tomorrow?", "ts": "t"},
    ])
    seen = []

    class Recording(RulesExtractor):
        def extract(self, ctx, schema):
            seen.append((ctx.text, list(ctx.user_lines)))
            return super().extract(ctx, schema)

    assert commit_session(sample, "p", Recording()) is not None
    (text, user_lines), = seen
    assert text.splitlines() == ["user: Look at this. [image: a red kite over a beach]", "assistant: A lovely kite.",
                                 "user: Is it windy tomorrow?"]
    assert user_lines == ["Look at this. [image: a red kite over a beach]", "Is it windy tomorrow?"]
    assert commit_session(sample, "p", Recording()) is None  # nothing new since


def test_events_keep_their_keys_and_the_log_names_a_bad_line(vault):
    append_events(vault, "k", [{"session": "k", "id": 7, "role": "user", "content": "hi", "ts": "t",
                                "speaker": "Mel", "x-client": {"v": 2}}])
    line = json.loads(vault.path("sessions/k.jsonl").read_text().splitlines()[0])
    assert line == {"session": "k", "id": 7, "role": "user", "content": "hi", "ts": "t", "speaker": "Mel",
                    "x-client": {"v": 2}}  # no null keys added, extra keys kept, the id's type kept
    (event,) = read_events(vault, "k")
    assert isinstance(event, SessionEvent) and event.speaker == "Mel" and event.key == "7"
    assert append_events(vault, "k", [dict(line, content="again")]) == 0  # the id is known: nothing appended
    with pytest.raises(SessionError, match="content"):
        append_events(vault, "k", [{"session": "k", "id": 8, "role": "user", "content": None, "ts": "t"}])
    with open(vault.path("sessions/k.jsonl"), "a") as fh:
        fh.write('{"session": "k", "id": 9, "role": "user", "ts": "t"}\n')
    assert [e.key for e in read_events(vault, "k")] == ["7"]  # the bad line is left out, and named
    assert [w for w in vault.warnings if w.startswith("sessions/k.jsonl line 2: content")]


@pytest.mark.parametrize("lines, problem", [
    (['{"session": "s", "id": 1, "role": "user", "content": "a", "ts": "t"}'], None),
    (['{"session": "s", "id": 1, "role": "user", "content": "a", "ts": "t"}', "not json"], "line 2: not JSON"),
    (['{"session": "s", "id": 1, "role": "user", "content": "a"}'], "line 1: needs keys ts"),
    (['{"session": "s", "id": 1.5, "role": "user", "content": "a", "ts": "t"}'], "line 1: id"),
    (['{"session": "s", "id": 1, "role": "user", "content": "a", "ts": "t"}',
      '{"session": "s", "id": 1, "role": "user", "content": "b", "ts": "t"}'], "line 2: duplicate id 1"),
])
def test_validate_session_file(tmp_path, lines, problem):
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(lines) + "\n")
    found = validate_session_file(path, "sessions/s.jsonl")
    assert found == [] if problem is None else (len(found) == 1 and found[0].startswith(problem)), found


def test_import_chat_names_the_bad_line_and_keeps_extra_keys(vault, tmp_path):
    path = tmp_path / "chat.jsonl"
    good = {"session": "g", "id": "1", "role": "user", "content": "hello", "ts": "t", "speaker": "Ann"}
    path.write_text(json.dumps(good) + "\n\n" + json.dumps({"session": "g", "id": "2", "role": "user", "content": 3, "ts": "t"}) + "\n")
    with pytest.raises(MemlinkError, match=r"chat.jsonl line 3: content.*nothing was imported"):
        import_chat(vault, path)
    assert not vault.path("sessions/g.jsonl").exists()
    path.write_text(json.dumps(good) + "\n")
    import_chat(vault, path)
    assert json.loads(vault.path("sessions/g.jsonl").read_text()) == good


def test_audit_and_search_log_are_records_appended_whole(sample):
    append_events(sample, "a", [{"session": "a", "id": 1, "role": "user", "content": "I love mangosteen.", "ts": "t"}])
    commit_session(sample, "a", RulesExtractor())
    commit_session(sample, "a", RulesExtractor())  # nothing new: no second entry
    audit = sorted((sample.state_dir / "audit").glob("*.jsonl"))
    entries = [e for p in audit for e in read_records(p, AuditEntry)]
    assert [e.source for e in entries] == ["session a"] and "preferences/mangosteen.md" in entries[0].created
    search(sample, "mangosteen", log=True)
    search(sample, "mangosteen", log=True)
    logged = read_records(sample.state_dir / "search-log.jsonl", SearchLogEntry)
    assert [e.q for e in logged] == ["mangosteen", "mangosteen"] and logged[0].hits >= 1
