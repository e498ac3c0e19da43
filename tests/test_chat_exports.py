"""`import-chat` of real chat exports: ChatGPT's and Claude's `conversations.json`.
Each conversation becomes one session with its original timestamps and message ids
(ChatGPT: the current branch only); a re-import adds nothing; a malformed export names
the conversation at fault and changes nothing; the imported turns are recallable."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from test_cli import memlink

from engine import Vault
from engine.errors import MemlinkError
from engine.sessions.chat_exports import sniff
from engine.sessions.extract import RulesTurnExtractor
from engine.sessions.importer import import_chat
from engine.sessions.log import read_events
from engine.sessions.recall import TurnMemory
from engine.sessions.store import TurnStore

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CHATGPT = FIXTURES / "chatgpt_conversations.json"
CLAUDE = FIXTURES / "claude_conversations.json"


def logs(root: Path) -> dict[str, bytes]:
    folder = root / "sessions"
    return {p.stem: p.read_bytes() for p in sorted(folder.glob("*.jsonl"))} if folder.is_dir() else {}


def session_named(root: Path, word: str) -> str:
    found = [s for s in logs(root) if word in s]
    assert len(found) == 1, list(logs(root))
    return found[0]


def dump(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


# -- ChatGPT ------------------------------------------------------------------------------
def test_chatgpt_export_imports_the_current_branch_with_original_times(vault):
    report = import_chat(vault, CHATGPT, RulesTurnExtractor(), fmt="chatgpt")
    assert (report.format, report.sessions, report.events_added) == ("chatgpt", 2, 6)
    assert (report.skipped, report.off_branch, report.failed) == (5, 2, [])
    kyoto = session_named(vault.root, "kyoto")
    assert re.fullmatch(r"2024-11-01-kyoto-trip-planning-[0-9a-f]{10}", kyoto)
    events = read_events(vault, kyoto)
    # The edited prompt's branch (u1b), not the first one (u1/a1); no system prompt, hidden
    # custom instructions, image-only message, tool call or browsing display.
    assert [(e.key, e.role) for e in events] == [("u1b", "user"), ("a1b", "assistant"), ("u2", "user"), ("a2", "assistant")]
    assert events[0].content.startswith("I want to visit Kyoto in November")
    assert events[2].content == "Here is a photo of the ryokan I booked: Hiiragiya, in Nakagyo."  # the image part left out
    assert [e.ts for e in events] == ["2024-11-01T10:02:00+00:00", "2024-11-01T10:02:40+00:00",
                                      "2024-11-01T10:05:10+00:00",
                                      "2024-11-01T10:05:10+00:00"]  # a2 has no time: the one before it
    assert events[0].title == "Kyoto trip planning" and all(e.title is None for e in events[1:])
    text = b"".join(logs(vault.root).values()).decode()
    for absent in ("April", "Philosopher", "pineapple", "search(", "custom instructions"):
        assert absent not in text
    bread = read_events(vault, session_named(vault.root, "sourdough"))
    assert [(e.key, e.ts) for e in bread] == [("b1", "2024-12-05T07:30:00+00:00"), ("b2", "2024-12-05T07:30:30.250000+00:00")]


def test_chatgpt_reimport_adds_nothing_even_after_a_rename(vault, tmp_path):
    import_chat(vault, CHATGPT, RulesTurnExtractor(), fmt="chatgpt")
    before = logs(vault.root)
    again = import_chat(vault, CHATGPT, RulesTurnExtractor(), fmt="chatgpt")
    assert (again.events_added, again.extracted, again.already) == (0, 0, 3)
    assert logs(vault.root) == before
    data = json.loads(CHATGPT.read_text(encoding="utf-8"))
    data[1]["title"] = "Japan, autumn"  # renamed in ChatGPT since the last export: same conversation id
    renamed = import_chat(vault, dump(tmp_path / "renamed.json", data), RulesTurnExtractor(), fmt="chatgpt")
    assert renamed.events_added == 0 and logs(vault.root) == before
    assert len(TurnStore(vault).all()) == 3


def test_a_continued_conversation_appends_only_its_new_messages(vault, tmp_path):
    import_chat(vault, CHATGPT, RulesTurnExtractor(), fmt="chatgpt")
    data = json.loads(CHATGPT.read_text(encoding="utf-8"))
    bread = data[0]
    bread["mapping"]["b2"]["children"] = ["b3"]
    bread["mapping"]["b3"] = {"id": "b3", "parent": "b2", "children": [], "message": {
        "id": "b3", "author": {"role": "user"}, "create_time": 1733400000.0,
        "content": {"content_type": "text", "parts": ["Bubbles doubled overnight!"]}, "metadata": {}, "recipient": "all"}}
    bread["current_node"] = "b3"
    report = import_chat(vault, dump(tmp_path / "later.json", data), RulesTurnExtractor(), fmt="chatgpt")
    assert report.events_added == 1
    assert [e.key for e in read_events(vault, session_named(vault.root, "sourdough"))] == ["b1", "b2", "b3"]


# -- Claude -------------------------------------------------------------------------------
def test_claude_export_imports_each_conversation_in_order(vault):
    report = import_chat(vault, CLAUDE, RulesTurnExtractor(), fmt="claude")
    assert (report.sessions, report.events_added, report.skipped) == (2, 6, 1)
    cat = session_named(vault.root, "cat-food")
    assert re.fullmatch(r"2025-02-03-cat-food-[0-9a-f]{10}", cat)
    events = read_events(vault, cat)
    assert [(e.key, e.role) for e in events] == [("m-cat-1", "user"), ("m-cat-2", "assistant"),
                                                 ("m-cat-4", "user"), ("m-cat-5", "assistant")]
    assert events[0].content == "My cat Miso is allergic to chicken, so I buy her salmon kibble."  # content blocks win
    assert events[1].content == "Salmon kibble is a good choice for a chicken allergy.\nCheck the labels for chicken fat too."
    assert events[2].content == "Thanks, I will check the labels."  # no content blocks: its text
    assert events[0].ts == "2025-02-03T09:15:00.000000Z" and events[0].title == "Cat food"
    talk = read_events(vault, session_named(vault.root, "untitled"))  # no name: "untitled"
    assert [e.ts for e in talk] == ["2025-03-10T14:00:00.000000Z"] * 2  # a missing time: the one before it
    before = logs(vault.root)
    again = import_chat(vault, CLAUDE, RulesTurnExtractor())  # told by its shape
    assert (again.format, again.events_added, again.extracted) == ("claude", 0, 0)
    assert logs(vault.root) == before


# -- recall ---------------------------------------------------------------------------------
def test_imported_turns_are_recallable(vault):
    import_chat(vault, CHATGPT, RulesTurnExtractor())
    import_chat(vault, CLAUDE, RulesTurnExtractor())
    memory = TurnMemory.for_vault(vault)
    ryokan = memory.recall("Which ryokan did I book in Kyoto?", k=3)
    assert ryokan and ryokan[0].session == session_named(vault.root, "kyoto") and "u2" in ryokan[0].sources
    cat = memory.recall("What is Miso allergic to?", k=3)
    assert cat and cat[0].session == session_named(vault.root, "cat-food") and cat[0].sources == ["m-cat-1", "m-cat-2"]
    assert memory.recall("cherry blossoms Philosopher's Path", k=3) == []  # the abandoned branch is not memory


# -- the shape of a file ----------------------------------------------------------------------
def test_the_format_is_told_by_the_shape():
    assert sniff(CHATGPT.read_text(encoding="utf-8")) == "chatgpt"
    assert sniff(CLAUDE.read_text(encoding="utf-8")) == "claude"
    assert sniff('{"session": "s", "id": 1, "role": "user", "content": "[x]", "ts": null}\n') == "jsonl"
    assert sniff("[]") == "chatgpt"  # nothing to import either way
    assert sniff('[{"text": "say \\"mapping\\": here"}]') == "unknown"  # a key, not words in a message


# -- malformed exports: the place named, nothing changed -------------------------------------------
def _gpt() -> list:
    return json.loads(CHATGPT.read_text(encoding="utf-8"))


def _claude() -> list:
    return json.loads(CLAUDE.read_text(encoding="utf-8"))


def _no_mapping():
    data = _gpt()
    del data[1]["mapping"]
    return data


def _bad_role():
    data = _gpt()
    data[1]["mapping"]["a1"]["message"]["author"]["role"] = "wizard"  # off the branch: still checked
    return data


def _lost_current():
    data = _gpt()
    data[0]["current_node"] = "nowhere"
    return data


def _broken_parent():
    data = _gpt()
    data[0]["mapping"]["b2"]["parent"] = "gone"
    return data


def _bad_sender():
    data = _claude()
    data[1]["chat_messages"][1]["sender"] = "robot"
    return data


def _bad_time():
    data = _claude()
    data[0]["chat_messages"][0]["created_at"] = "yesterday"
    return data


@pytest.mark.parametrize("fmt, make, words", [
    ("chatgpt", lambda: {"conversations": []}, ["a ChatGPT export is a JSON array of conversations"]),
    ("chatgpt", _no_mapping, ["conversation [1]", "'6f1c2a90-kyoto-0001'", '"Kyoto trip planning"', "mapping: Field required"]),
    ("chatgpt", _bad_role, ["conversation [1]", "Kyoto trip planning", "mapping.a1.message.author.role", "'user'"]),
    ("chatgpt", _lost_current, ["conversation [0]", "Sourdough starter", "current_node 'nowhere' is not in the mapping"]),
    ("chatgpt", _broken_parent, ["conversation [0]", "node 'b2' has parent 'gone'"]),
    ("claude", _bad_sender, ["conversation [1]", "'7d2f9e44-talk-0002'", "chat_messages.1.sender", "'human'"]),
    ("claude", _bad_time, ["conversation [0]", '"Cat food"', "not an ISO timestamp: 'yesterday'"]),
    ("claude", _gpt, ["conversation [0]", "uuid: Field required", "looks like a ChatGPT export: --format chatgpt"]),
])
def test_a_malformed_export_names_the_conversation_and_changes_nothing(vault, tmp_path, fmt, make, words):
    import_chat(vault, CLAUDE if fmt == "chatgpt" else CHATGPT, RulesTurnExtractor())  # something there already
    before, memories = logs(vault.root), len(TurnStore(vault).all())
    path = dump(tmp_path / "conversations.json", make())
    with pytest.raises(MemlinkError) as caught:
        import_chat(vault, path, RulesTurnExtractor(), fmt=fmt)
    message = str(caught.value)
    assert str(path) in message and "nothing was imported" in message, message
    for word in words:
        assert word in message, message
    assert logs(vault.root) == before and len(TurnStore(vault).all()) == memories


def test_invalid_json_and_an_unknown_array_are_refused(vault, tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text(CHATGPT.read_text(encoding="utf-8")[:500], encoding="utf-8")
    with pytest.raises(MemlinkError, match="not valid JSON"):
        import_chat(vault, broken, fmt="chatgpt")
    with pytest.raises(MemlinkError, match="neither a ChatGPT nor a Claude export"):
        import_chat(vault, dump(tmp_path / "odd.json", [{"session": "s", "id": 1}]))
    with pytest.raises(MemlinkError, match="looks like a ChatGPT export"):  # an explicit --format jsonl is honoured
        import_chat(vault, CHATGPT, fmt="jsonl")
    assert logs(vault.root) == {}


def test_a_message_id_changed_against_the_log_is_refused_naming_the_conversation(vault, tmp_path):
    import_chat(vault, CLAUDE, RulesTurnExtractor())
    before = logs(vault.root)
    data = _claude()
    data[0]["chat_messages"][0]["content"][0]["text"] = "My cat Miso loves chicken."
    with pytest.raises(MemlinkError) as caught:
        import_chat(vault, dump(tmp_path / "c.json", data), RulesTurnExtractor())
    assert "conversation [0]" in str(caught.value) and "'m-cat-1'" in str(caught.value)
    assert "session's log" in str(caught.value)
    assert logs(vault.root) == before


# -- the command line ---------------------------------------------------------------------------
def test_cli_import_chat_formats_and_recall(tmp_path):
    root = tmp_path / "v"
    assert memlink("init", vault=root).returncode == 0
    r = memlink("import-chat", "--format", "chatgpt", str(CHATGPT), vault=root)
    assert r.returncode == 0, r.stderr
    assert "2 session(s) (chatgpt; 5 messages left out as not chat text, 2 on other branches), 6 new events" in r.stdout
    r = memlink("import-chat", str(CLAUDE), "--json", vault=root)  # no --format: told by the shape
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["format"] == "claude" and json.loads(r.stdout)["events_added"] == 6
    r = memlink("recall", "Bubbles rye flour", "--json", vault=root)
    hits = json.loads(r.stdout)
    assert r.returncode == 0 and hits and "sourdough" in hits[0]["session"], r.stdout
    r = memlink("recall", "Lisbon conference talk", "--json", vault=root)
    hits = json.loads(r.stdout)
    assert r.returncode == 0 and hits and hits[0]["sources"] == ["m-talk-1", "m-talk-2"], r.stdout


def test_cli_refuses_a_malformed_export_with_exit_1(tmp_path):
    root = tmp_path / "v"
    assert memlink("init", vault=root).returncode == 0
    bad = dump(tmp_path / "conversations.json", _no_mapping())
    r = memlink("import-chat", "--format", "chatgpt", str(bad), vault=root)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stderr.startswith("memlink: error: ") and "conversation [1]" in r.stderr and "mapping" in r.stderr
    assert logs(root) == {}
    r = memlink("import-chat", "--format", "gemini", str(bad), vault=root)
    assert r.returncode == 2  # a usage error


def test_a_copied_vault_reimports_nothing(tmp_path):
    """The session id is stable across processes and vault copies (the hash of the
    export's conversation id, not the order of the file)."""
    first = Vault.init(tmp_path / "a", name="a")
    import_chat(first, CHATGPT, RulesTurnExtractor())
    data = _gpt()
    data.reverse()
    second = tmp_path / "b"
    first.close()
    shutil.copytree(first.root, second)
    copy = Vault.open(second)
    assert import_chat(copy, dump(tmp_path / "rev.json", data), RulesTurnExtractor()).events_added == 0
    assert logs(second) == logs(first.root)


def test_the_cli_offers_the_engines_formats():
    from engine.sessions.chat_exports import FORMATS
    from memlink_tui.cli.write import CHAT_FORMATS

    assert CHAT_FORMATS == FORMATS
