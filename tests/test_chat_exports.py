"""`import-chat` of real chat exports: ChatGPT's and Claude's `conversations.json`.
Each conversation becomes one session with its original timestamps and message ids
(ChatGPT: the current branch only); a re-import adds nothing; a malformed export names
the conversation at fault and changes nothing; the imported turns are recallable."""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
import sys
from pathlib import Path

import pytest
from conftest import REPO, memlink, set_llm

from engine import Vault
from engine.errors import MemlinkError
from engine.sessions.chat_exports import sniff
from engine.sessions.extract import RulesTurnExtractor
from engine.sessions.importer import import_chat
from engine.sessions.log import project_turns, read_events
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
    assert report.failed == [] and report.unnamed == 0
    assert report.left_out == {"messages on other branches (edited prompts, regenerated answers)": 2,
                               "hidden context (custom instructions, memory)": 2, "tool calls and results": 2,
                               "messages without text": 1, "'image_asset_pointer' parts without text": 2}
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


def test_a_regenerated_answer_replaces_the_one_imported_before(vault, tmp_path):
    """The conversation was exported again after its answer was regenerated: the new answer
    is the turn's, the old one (off the current branch now) is left out of recall and of
    what a commit extracts; importing again marks nothing twice."""
    import_chat(vault, CHATGPT, RulesTurnExtractor(), fmt="chatgpt")
    data = json.loads(CHATGPT.read_text(encoding="utf-8"))
    bread = data[0]
    bread["mapping"]["b1"]["children"].append("b2r")
    bread["mapping"]["b2r"] = {"id": "b2r", "parent": "b1", "children": [], "message": {
        "id": "b2r", "author": {"role": "assistant"}, "create_time": 1733400000.0,
        "content": {"content_type": "text", "parts": ["Feed the starter twice a day with rye flour."]}, "metadata": {},
        "recipient": "all"}}
    bread["current_node"] = "b2r"
    later = dump(tmp_path / "later.json", data)
    report = import_chat(vault, later, RulesTurnExtractor(), fmt="chatgpt")
    assert report.replaced == 1 and report.events_added == 2  # the new answer and the mark
    assert any("replaced since the last import" in line and "1 message" in line for line in report.left_out_lines())
    session = session_named(vault.root, "sourdough")
    (turn,) = project_turns(session, read_events(vault, session), final=True)
    assert [e.key for e in turn.asked + turn.answered] == ["b1", "b2r"]
    recalled = TurnMemory.for_vault(vault).recall("sourdough starter rye flour", k=3)
    assert ["b1", "b2r"] in [h.sources for h in recalled] and not any("b2" in h.sources for h in recalled)
    again = import_chat(vault, later, RulesTurnExtractor(), fmt="chatgpt")
    assert again.replaced == 0 and again.events_added == 0


# -- Claude -------------------------------------------------------------------------------
def test_claude_export_imports_each_conversation_in_order(vault):
    report = import_chat(vault, CLAUDE, RulesTurnExtractor(), fmt="claude")
    assert (report.sessions, report.events_added) == (2, 7)
    assert report.left_out == {"uploaded files without text (images)": 1}  # label.png; label.txt's text is kept
    cat = session_named(vault.root, "cat-food")
    assert re.fullmatch(r"2025-02-03-cat-food-[0-9a-f]{10}", cat)
    events = read_events(vault, cat)
    assert [(e.key, e.role) for e in events] == [("m-cat-1", "user"), ("m-cat-2", "assistant"), ("m-cat-3", "user"),
                                                 ("m-cat-4", "user"), ("m-cat-5", "assistant")]
    assert events[0].content == "My cat Miso is allergic to chicken, so I buy her salmon kibble."  # content blocks win
    assert events[1].content == "Salmon kibble is a good choice for a chicken allergy.\nCheck the labels for chicken fat too."
    assert events[2].content == "Attachment: label.txt\n> Ingredients: salmon"  # an uploaded file's text, quoted
    assert events[3].content == "Thanks, I will check the labels."  # no content blocks: its text
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
    # A note that quotes a WhatsApp line is a note: an export begins with a message.
    assert sniff("Minutes\n\n12/31/23, 9:41 PM - Alice: see you\n") == "jsonl"
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


def _lost_current():
    data = _gpt()
    data[0]["current_node"] = "nowhere"
    return data


def _broken_parent():
    data = _gpt()
    data[0]["mapping"]["b2"]["parent"] = "gone"
    return data


def _bad_time():
    data = _claude()
    data[0]["chat_messages"][0]["created_at"] = "yesterday"
    return data


@pytest.mark.parametrize("fmt, make, words", [
    ("chatgpt", lambda: {"conversations": []}, ["a ChatGPT export is a JSON array of conversations"]),
    ("chatgpt", _no_mapping, ["conversation [1]", "'6f1c2a90-kyoto-0001'", '"Kyoto trip planning"', "mapping: Field required"]),
    ("chatgpt", _lost_current, ["conversation [0]", "Sourdough starter", "current_node 'nowhere' is not in the mapping"]),
    ("chatgpt", _broken_parent, ["conversation [0]", "node 'b2' has parent 'gone'"]),
    ("claude", _bad_time, ["conversation [0]", '"Cat food"', "not an ISO timestamp: 'yesterday'"]),
    ("claude", _gpt, ["conversation [0]", "chat_messages: Field required", "looks like a ChatGPT export: --format chatgpt"]),
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
    # Files memlink does not read are named as such, with those it reads: not "line 1: not JSON".
    note = tmp_path / "note.txt"
    note.write_text("Shopping: rye bread, oat milk\nCall the plumber on Monday\n", encoding="utf-8")
    document = tmp_path / "contacts.json"
    document.write_text(json.dumps({"name": "Ana", "contacts": [{"id": 1, "phone": "+31"}]}, indent=1), encoding="utf-8")
    for path, said in ((note, "not a chat file memlink reads"), (document, "one JSON document, not a chat file")):
        with pytest.raises(MemlinkError, match=said) as refused:
            import_chat(vault, path)
        assert "it reads JSON Lines" in str(refused.value) and "ChatGPT or Claude" in str(refused.value)
        assert "a WhatsApp chat export (.txt) and a Telegram Desktop export (result.json)" in str(refused.value)
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
    assert "here: user: 'My cat Miso loves chicken.'" in str(caught.value)  # what differs, both sides shown
    assert "(there: user: '" in str(caught.value)
    assert logs(vault.root) == before


# -- the command line ---------------------------------------------------------------------------
def test_cli_import_chat_formats_and_recall(tmp_path):
    root = tmp_path / "v"
    assert memlink("init", vault=root).returncode == 0
    r = memlink("import-chat", "--format", "chatgpt", str(CHATGPT), vault=root)
    assert r.returncode == 0, r.stderr
    assert "2 chat sessions (chatgpt), 6 new messages" in r.stdout
    assert "  left out: messages on other branches (edited prompts, regenerated answers): 2\n" in r.stdout
    r = memlink("import-chat", str(CLAUDE), "--json", vault=root)  # no --format: told by the shape
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["format"] == "claude" and json.loads(r.stdout)["events_added"] == 7
    r = memlink("recall", "Bubbles rye flour", "--json", vault=root)
    hits = json.loads(r.stdout)
    assert r.returncode == 0 and hits and "sourdough" in hits[0]["session"], r.stdout
    r = memlink("recall", "Lisbon conference talk", "--json", vault=root)
    hits = json.loads(r.stdout)
    assert r.returncode == 0 and hits and hits[0]["sources"] == ["m-talk-1", "m-talk-2"], r.stdout


def test_a_recalled_question_never_answered_shows_no_empty_answer(tmp_path):
    root = tmp_path / "v"
    assert memlink("init", vault=root).returncode == 0
    chat = tmp_path / "notes-to-self.jsonl"
    chat.write_text(json.dumps({"session": "self", "id": "n1", "role": "user", "content": "Buy rye flour for Bubbles",
                                "ts": "2026-01-05T09:00:00Z"}) + "\n", encoding="utf-8")
    assert memlink("import-chat", str(chat), vault=root).returncode == 0
    r = memlink("recall", "rye flour", vault=root)
    assert r.returncode == 0 and "   Q: Buy rye flour for Bubbles" in r.stdout and "A:" not in r.stdout, r.stdout


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


# -- every message accounted for ------------------------------------------------------------------
def _gpt_conversation(title: str, start: float, messages: list[tuple[str, str, dict]], **ids: str) -> dict:
    """A ChatGPT conversation of one branch: (id, role, content) per message, in order."""
    mapping: dict = {"root": {"id": "root", "message": None, "parent": None, "children": []}}
    parent = "root"
    for n, (mid, role, content) in enumerate(messages):
        mapping[parent]["children"] = [mid]
        mapping[mid] = {"id": mid, "parent": parent, "children": [], "message": {
            "id": mid, "author": {"role": role}, "create_time": start + n, "content": content,
            "metadata": {}, "recipient": "all"}}
        parent = mid
    return {"title": title, "create_time": start, "mapping": mapping, "current_node": parent, **ids}


def _said(text: str) -> dict:
    return {"content_type": "text", "parts": [text]}


def _spoken(text: str, audio_first: bool) -> dict:
    audio = {"content_type": "audio_asset_pointer", "asset_pointer": "file-service://voice"}
    words = {"content_type": "audio_transcription", "text": text, "direction": "in"}
    return {"content_type": "multimodal_text", "parts": [audio, words] if audio_first else [words, audio]}


def _mixed_export() -> list:
    voice = _gpt_conversation("Bakery by voice", 1735725600.0, [
        ("v1", "user", _spoken("I love the rye loaf from Bakkerij Vink on the Oudegracht.", True)),
        ("v2", "assistant", _spoken("Bakkerij Vink opens at seven on Saturdays.", False))], id="voice-0001")
    critic = _gpt_conversation("Marathon plan", 1735812000.0, [
        ("r1", "user", _said("I am training for the Rotterdam marathon in April.")),
        ("r2", "critic", _said("The answer below could be more concise.")),
        ("r3", "assistant", _said("Build up to 32 km long runs by March."))], conversation_id="critic-0002")
    no_id = _gpt_conversation("Balcony tomatoes", 1735898400.0, [
        ("t1", "user", _said("The balcony tomatoes are Sungold, planted in May.")),
        ("t2", "assistant", _said("Sungold ripens early; water them daily in July."))])
    return [voice, critic, no_id]


def test_voice_messages_unknown_roles_and_conversations_without_an_id_import_and_are_counted(vault, tmp_path):
    report = import_chat(vault, dump(tmp_path / "conversations.json", _mixed_export()), RulesTurnExtractor())
    assert (report.format, report.sessions, report.events_added, report.unnamed) == ("chatgpt", 3, 6, 1)
    assert report.left_out == {"messages with an unknown role 'critic'": 1, "'audio_asset_pointer' parts without text": 2}
    voice = read_events(vault, session_named(vault.root, "bakery-by-voice"))
    assert [(e.key, e.content) for e in voice] == [("v1", "I love the rye loaf from Bakkerij Vink on the Oudegracht."),
                                                   ("v2", "Bakkerij Vink opens at seven on Saturdays.")]
    assert [e.key for e in read_events(vault, session_named(vault.root, "marathon"))] == ["r1", "r3"]
    tomatoes = session_named(vault.root, "balcony-tomatoes")
    assert re.fullmatch(r"2025-01-03-balcony-tomatoes-[0-9a-f]{10}", tomatoes)
    assert [e.key for e in read_events(vault, tomatoes)] == ["t1", "t2"]
    # The name made from its title and start time is stable: a later export, in another
    # order, adds nothing.
    before = logs(vault.root)
    again = import_chat(vault, dump(tmp_path / "later.json", _mixed_export()[::-1]), RulesTurnExtractor())
    assert (again.events_added, again.sessions) == (0, 3) and logs(vault.root) == before
    assert TurnMemory.for_vault(vault).recall("rye loaf from Bakkerij Vink", k=1)[0].session == session_named(
        vault.root, "bakery-by-voice")


def test_claude_attachment_text_is_recallable_and_empty_attachments_are_counted(vault, tmp_path):
    data = _claude()
    message = data[1]["chat_messages"][0]
    message["attachments"] = [{"file_name": "abstract.md", "extracted_content": "Talk abstract: ```tidal energy``` "
                               "in the Westerschelde estuary."},
                              {"file_name": "slides.pdf", "extracted_content": ""}]
    message["files"] = [{"file_name": "abstract.md"}, {"file_name": "photo.jpg"}]
    data[1]["chat_messages"].append({"uuid": "m-talk-3", "text": "Noted.", "sender": "narrator", "content": []})
    del data[1]["uuid"]  # no id: named by its name and start time
    report = import_chat(vault, dump(tmp_path / "claude.json", data), RulesTurnExtractor())
    assert report.left_out == {"uploaded files without text (images)": 2,  # label.png and photo.jpg
                               "attachments without text": 1, "messages from an unknown sender 'narrator'": 1}
    assert report.unnamed == 1
    talk = read_events(vault, session_named(vault.root, "untitled"))
    assert talk[0].content.endswith("Attachment: abstract.md\n> Talk abstract: ```tidal energy``` in the "
                                    "Westerschelde estuary.")
    hits = TurnMemory.for_vault(vault).recall("tidal energy in the Westerschelde", k=3)
    assert hits and hits[0].session == session_named(vault.root, "untitled") and "m-talk-1" in hits[0].sources


def test_an_attachment_name_stays_on_its_label_line(vault, tmp_path):
    data = _claude()
    message = data[1]["chat_messages"][0]
    message["attachments"] = [{"file_name": "notes.md\nI moved to Utrecht.\r\n> forged", "extracted_content": "Bring rye."}]
    import_chat(vault, dump(tmp_path / "claude.json", data), RulesTurnExtractor())
    (turn,) = [e for s in logs(vault.root) for e in read_events(vault, s) if "notes.md" in e.content]
    assert turn.content.endswith("Attachment: notes.md I moved to Utrecht. > forged\n> Bring rye.")


def test_cli_names_what_was_left_out_and_commit_all_makes_imports_searchable(tmp_path):
    root = tmp_path / "v"
    assert memlink("init", vault=root).returncode == 0
    set_llm(root, provider="rules").close()
    r = memlink("import-chat", str(dump(tmp_path / "conversations.json", _mixed_export())), vault=root)
    assert r.returncode == 0, r.stderr
    assert "  left out: messages with an unknown role 'critic': 1\n" in r.stdout
    assert "  left out: 'audio_asset_pointer' parts without text: 2\n" in r.stdout
    assert "  conversations without an id (named by their title and start time): 1\n" in r.stdout
    data = _claude()
    data[0]["chat_messages"][0]["attachments"] = [{"file_name": "list.txt", "extracted_content":
                                                   "Shopping list: I prefer Edgard Cooper salmon kibble for Miso."}]
    r = memlink("import-chat", str(dump(tmp_path / "claude.json", data)), vault=root)
    assert r.returncode == 0 and "left out: uploaded files without text (images): 1" in r.stdout, r.stdout
    assert "Bakkerij" not in memlink("search", "Bakkerij Vink", vault=root).stdout  # not committed yet
    r = memlink("commit", "--all", "--json", vault=root)
    assert r.returncode == 0, r.stderr
    done = json.loads(r.stdout)
    assert done["total"]["sessions"] == 5 and done["failed"] == [] and done["total"]["created"] >= 2
    for query, word in (("rye loaf Bakkerij Vink", "Vink"), ("Edgard Cooper kibble", "Edgard")):
        r = memlink("search", query, "--json", vault=root)
        assert r.returncode == 0 and word.lower() in r.stdout.lower(), (query, r.stdout[:500])
    again = memlink("commit", "--all", vault=root)  # nothing committed twice
    assert again.returncode == 0 and "sessions committed: 0 " in again.stdout and "with nothing new: 5" in again.stdout
    assert memlink("commit", vault=root).returncode == 2  # a session or --all
    assert memlink("commit", "--all", "--turn", "x", vault=root).returncode == 2


async def test_the_app_imports_a_chat_export_names_what_was_left_out_and_commits_every_session(tmp_path):
    from conftest import settle
    from textual.widgets import Static

    from engine.retrieve.search import search
    from memlink_tui.app import MemlinkApp
    from memlink_tui.screens.importer import ImportScreen

    vault = Vault.init(tmp_path / "vault", name="test")
    vault.close()
    vault = set_llm(vault.root, provider="rules")
    export = dump(tmp_path / "conversations.json", _mixed_export())
    app = MemlinkApp(vault)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        app.push_screen(ImportScreen(vault))
        await pilot.pause()
        screen = app.screen
        assert screen.check_action("commit_all", ()) is False  # offered only after a chat import
        await pilot.press(*str(export), "enter")
        await settle(app, pilot)
        shown = str(screen.query_one("#import-result", Static).render())
        assert "3 chat sessions (chatgpt), 6 new messages" in shown, shown
        assert "left out: messages with an unknown role 'critic': 1" in shown
        assert "conversations without an id (named by their title and start time): 1" in shown
        assert "ctrl+s" in shown and screen.check_action("commit_all", ()) is True
        await pilot.press("ctrl+s")
        await settle(app, pilot)
        shown = str(screen.query_one("#import-result", Static).render())
        assert "sessions committed: 3" in shown, shown
    hits = search(Vault.open(vault.root), "rye loaf Bakkerij Vink", k=3)
    assert hits and "vink" in (hits[0].title + hits[0].uri).lower()


# -- messaging apps: WhatsApp and Telegram ----------------------------------------------------------
LRM, NNBSP = "\u200e", "\u202f"
ANDROID = (  # WhatsApp for Android in the US: month first, a 12-hour clock with U+202F before PM
    f"12/30/23, 9:40{NNBSP}PM - Messages and calls are end-to-end encrypted. No one outside of this chat, not even "
    "WhatsApp, can read or listen to them. Tap to learn more.\n"
    f"12/30/23, 9:41{NNBSP}PM - Ana: We signed the lease for the flat on Oudegracht!\n"
    "The keys come on Friday.\n"
    f"12/30/23, 9:41{NNBSP}PM - Ana: <Media omitted>\n"
    f"12/30/23, 9:42{NNBSP}PM - Bo: Congrats! Is it the one with the canal view?\n"
    f"12/30/23, 9:42{NNBSP}PM - Bo: This message was deleted\n"
    f"12/31/23, 10:05{NNBSP}AM - Ana: IMG-20231231-WA0001.jpg (file attached)\n"
    "The canal view from the kitchen\n"
    f"12/31/23, 10:06{NNBSP}AM - Bo: Gorgeous. Dinner there tonight? <This message was edited>\n")
IOS = (  # WhatsApp for iPhone, a group: day first, seconds, U+200E before what no one typed
    f"{LRM}[02/01/2024, 18:00:01] Climbing: {LRM}Messages and calls are end-to-end encrypted.\n"
    f"{LRM}[02/01/2024, 18:00:02] Climbing: {LRM}Ana created group “Climbing”\n"
    "[02/01/2024, 18:03:10] Ana: The bouldering gym Monk reopens on Saturday\n"
    f"{LRM}[02/01/2024, 18:03:40] Bo: {LRM}image omitted\n"
    "[02/01/2024, 18:04:00] Cas: I tore a finger pulley, no climbing for six weeks\n"
    f"{LRM}[03/01/2024, 09:00:00] Cas: {LRM}Missed voice call\n"
    "[13/01/2024, 09:15:00] Bo: Monk was packed today\n")


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def events_of(root: Path) -> list:
    vault = Vault.open(root)
    try:
        return [e for s in logs(root) for e in read_events(vault, s)]
    finally:
        vault.close()


def test_whatsapp_android_export_is_a_session_a_day_each_message_with_its_speaker(vault, tmp_path):
    chat = write(tmp_path / "WhatsApp Chat with Ana.txt", ANDROID)
    assert sniff(ANDROID) == "whatsapp"
    report = import_chat(vault, chat, RulesTurnExtractor())
    assert (report.format, report.sessions, report.events_added) == ("whatsapp", 2, 4)
    assert report.left_out == {"system messages (security notices, joins, group changes, calls)": 1,
                               "media (photos, videos, voice messages, stickers, files; a caption is kept as the "
                               "message)": 2, "deleted messages": 1}
    assert report.me == ["Bo"]  # "WhatsApp Chat with Ana": Ana's friend exported it, and the report says so
    assert any("you (user): 'Bo' (the chat is named after 'Ana', the other person)" in line and "--me NAME" in line
               for line in report.left_out_lines())
    first, second = sorted(logs(vault.root))
    assert re.fullmatch(r"2023-12-30-ana-[0-9a-f]{10}", first) and second.startswith("2023-12-31-ana-")
    said = read_events(vault, first)
    assert [(e.role, e.speaker, e.content, e.ts) for e in said] == [
        ("assistant", "Ana", "We signed the lease for the flat on Oudegracht!\nThe keys come on Friday.", "2023-12-30T21:41:00"),
        ("user", "Bo", "Congrats! Is it the one with the canal view?", "2023-12-30T21:42:00")]
    assert said[0].title == "Ana"
    assert [(e.speaker, e.content) for e in read_events(vault, second)] == [
        ("Ana", "The canal view from the kitchen"), ("Bo", "Gorgeous. Dinner there tonight?")]
    hits = TurnMemory.for_vault(vault).recall("When do the keys of the flat on Oudegracht come?", k=3)
    assert hits and hits[0].session == first


@pytest.mark.parametrize("name", ["Chat de WhatsApp con Ana", "WhatsApp Chat mit Ana", "Discussion WhatsApp avec Ana",
                                  "Conversa do WhatsApp com Ana", "Chat WhatsApp con Ana", "WhatsApp-chat met Ana",
                                  "Ana ile WhatsApp Sohbeti"])
def test_an_export_named_in_the_phones_language_is_named_after_the_other_person(vault, tmp_path, name):
    report = import_chat(vault, write(tmp_path / f"{name}.txt", ANDROID), RulesTurnExtractor())
    assert report.me == ["Bo"]
    assert any("the chat is named after 'Ana', the other person" in line for line in report.left_out_lines())
    assert all(re.fullmatch(r"2023-12-3[01]-ana-[0-9a-f]{10}", s) for s in logs(vault.root))


def test_the_same_chat_exported_from_the_other_persons_phone_keeps_who_the_user_is(vault, tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "hers").mkdir()
    import_chat(vault, write(tmp_path / "mine" / "WhatsApp Chat with Melanie.txt",
                             "13/10/2023, 10:31 - Caroline: I love painting.\n13/10/2023, 10:32 - Melanie: Nice!\n"),
                RulesTurnExtractor())
    report = import_chat(vault, write(tmp_path / "hers" / "WhatsApp Chat with Caroline.txt",
                                      "13/10/2023, 10:31 - Caroline: I love painting.\n13/10/2023, 10:32 - Melanie: Nice!\n"
                                      "14/10/2023, 09:00 - Melanie: I hate painting, it is so messy.\n"),
                         RulesTurnExtractor())
    assert report.me == ["Caroline"] and report.elsewhere == 2
    assert any("'Caroline' (as when this chat was imported before)" in line for line in report.left_out_lines())
    assert {(e.speaker, e.role) for s in logs(vault.root) for e in read_events(vault, s)} == {
        ("Caroline", "user"), ("Melanie", "assistant")}


def test_a_group_notice_quoting_a_name_with_a_colon_is_a_notice_not_the_first_sender(vault, tmp_path):
    """Android writes a group's notices without a sender: a group named "Trip: Lisbon"
    puts ": " inside the quotes, which names no sender (and must not become the user)."""
    chat = write(tmp_path / "WhatsApp Chat with Trip.txt", (
        '12/31/23, 9:40 PM - Ana created group "Trip: Lisbon"\n'
        '12/31/23, 9:40 PM - Bo changed the subject from "Trip: Lisbon" to "Trip: Porto"\n'
        '12/31/23, 9:41 PM - Ana: Who books the flat?\n'
        '12/31/23, 9:42 PM - Robert "Bob" Smith: I do: tonight\n'))
    report = import_chat(vault, chat, RulesTurnExtractor())
    assert report.me == ["Ana"] and report.left_out == {"system messages (security notices, joins, group changes, calls)": 2}
    assert [(e.role, e.speaker, e.content) for e in events_of(vault.root)] == [
        ("user", "Ana", "Who books the flat?"), ("assistant", 'Robert "Bob" Smith', "I do: tonight")]


def test_a_message_whose_words_start_on_the_next_line_is_kept(vault, tmp_path):
    chat = write(tmp_path / "WhatsApp Chat with Ana.txt",
                 "[30/12/2023, 21:41:05] Ana: \nThe list:\n- bread\n[30/12/2023, 21:42:00] Bo: ok\n")
    report = import_chat(vault, chat, RulesTurnExtractor())
    assert not report.left_out
    assert [(e.speaker, e.content) for e in events_of(vault.root)] == [("Ana", "The list:\n- bread"), ("Bo", "ok")]


def test_whatsapp_ios_group_export_with_me_and_the_date_order_settled_by_the_whole_file(vault, tmp_path):
    chat = tmp_path / "WhatsApp Chat - Climbing" / "_chat.txt"
    chat.parent.mkdir()
    write(chat, IOS)
    report = import_chat(vault, chat, RulesTurnExtractor(), me="Cas")
    assert report.format == "whatsapp" and report.left_out["system messages (security notices, joins, group "
                                                           "changes, calls)"] == 3
    assert not any("dates read" in line for line in report.left_out_lines())  # 13/01 settles day first
    got = events_of(vault.root)
    assert [(e.ts, e.speaker, e.role) for e in got] == [("2024-01-02T18:03:10", "Ana", "assistant"),
                                                        ("2024-01-02T18:04:00", "Cas", "user"),
                                                        ("2024-01-13T09:15:00", "Bo", "assistant")]
    assert sorted(logs(vault.root))[0].startswith("2024-01-02-climbing-")
    # Nothing settles the order (no first or second field above 12): said, and assumed for every line.
    ambiguous = write(tmp_path / "WhatsApp Chat with Dee.txt", "05.01.24, 21:41 - Dee: Bring the rope\n"
                      "06.01.24, 08:00 - Eli: Done\n")
    report = import_chat(vault, ambiguous, RulesTurnExtractor())
    assert "dates read day/month (a 24-hour clock): no day in the file is above 12 to say which comes first" in \
        report.left_out_lines()
    assert [e.ts for e in events_of(vault.root) if e.speaker in ("Dee", "Eli")] == ["2024-01-05T21:41:00",
                                                                                    "2024-01-06T08:00:00"]


def test_whatsapp_import_again_adds_nothing_and_a_newer_export_adds_only_its_new_messages(vault, tmp_path):
    same_minute = "12/31/23, 10:07\u202fAM - Ana: Yes!\n12/31/23, 10:07\u202fAM - Ana: Yes!\n"
    import_chat(vault, write(tmp_path / "WhatsApp Chat with Ana.txt", ANDROID + same_minute), RulesTurnExtractor())
    before = logs(vault.root)
    again = import_chat(vault, tmp_path / "WhatsApp Chat with Ana.txt", RulesTurnExtractor())
    assert (again.events_added, again.extracted) == (0, 0) and logs(vault.root) == before
    (tmp_path / "later").mkdir()
    newer = write(tmp_path / "later" / "WhatsApp Chat with Ana.txt", ANDROID + same_minute + "12/31/23, 10:07\u202fAM - Ana: Yes!\n1/2/24, 8:00\u202fAM - Bo: Morning\n")
    report = import_chat(vault, newer, RulesTurnExtractor())
    assert (report.events_added, report.sessions) == (2, 3)  # a third "Yes!" that minute, and a new day
    for session, text in before.items():
        assert logs(vault.root)[session].startswith(text)
    assert [e.content for e in events_of(vault.root)][-4:] == ["Yes!", "Yes!", "Yes!", "Morning"]
    # A newer export saved beside the first one is named "… (1).txt": the same chat, nothing twice.
    beside = write(tmp_path / "WhatsApp Chat with Ana (1).txt", newer.read_text(encoding="utf-8"))
    assert import_chat(vault, beside, RulesTurnExtractor()).events_added == 0 and len(logs(vault.root)) == 3
    beside = write(tmp_path / "WhatsApp Chat with Ana(2).txt", newer.read_text(encoding="utf-8"))  # (a browser's name)
    assert import_chat(vault, beside, RulesTurnExtractor()).events_added == 0 and len(logs(vault.root)) == 3
    # Saved under a name of its own: its messages are in the vault already, under the chat's first name.
    renamed = write(tmp_path / "ana-backup.txt", newer.read_text(encoding="utf-8") + "1/2/24, 9:00\u202fAM - Ana: Hi\n")
    held = len(events_of(vault.root))
    again = import_chat(vault, renamed, RulesTurnExtractor())
    assert (again.events_added, again.elsewhere) == (1, held)
    assert [e.content for e in events_of(vault.root)].count("Morning") == 1
    # Another chat where Bo spoke in the same minute: the same id, other words; imported.
    other = write(tmp_path / "WhatsApp Chat with Cy.txt", "1/2/24, 8:00\u202fAM - Bo: Kiln at ten\n")
    assert import_chat(vault, other, RulesTurnExtractor()).events_added == 1


def test_a_newer_whatsapp_export_reads_its_dates_as_the_chat_was_imported_or_says_which_sessions_are_wrong(vault, tmp_path):
    chat = tmp_path / "WhatsApp Chat with Ana.txt"
    import_chat(vault, write(chat, "05/01/2026, 19:15 - Ana: hi\n06/01/2026, 19:02 - Bo: yo\n"), RulesTurnExtractor())
    # Nothing in the newer file settles the order, and its 12-hour clock alone would say month first.
    write(chat, "05/01/2026, 19:15 - Ana: hi\n06/01/2026, 19:02 - Bo: yo\n07/01/2026, 9:00 pm - Ana: later\n")
    report = import_chat(vault, chat, RulesTurnExtractor())
    assert report.events_added == 1 and "dates read day/month, as when this chat was imported before" in report.assumed
    assert sorted(s[:10] for s in logs(vault.root)) == ["2026-01-05", "2026-01-06", "2026-01-07"]
    # A first export read month first (a 12-hour clock), then one whose day 13 says day first: refused.
    first = tmp_path / "WhatsApp Chat with Priya.txt"
    import_chat(vault, write(first, "05/01/2026, 9:15 am - Priya: Dentist moved to Friday\n"
                                    "06/01/2026, 7:02 pm - Sam: I paid the electricity bill\n"), RulesTurnExtractor())
    before = logs(vault.root)
    wrong = sorted(s for s in before if "priya" in s)
    assert [s[:10] for s in wrong] == ["2026-05-01", "2026-06-01"]
    write(first, first.read_text(encoding="utf-8") + "13/01/2026, 8:00 pm - Priya: Mum's birthday dinner on Sunday\n")
    with pytest.raises(MemlinkError) as caught:
        import_chat(vault, first, RulesTurnExtractor())
    message = str(caught.value)
    assert "imported before with its dates read month/day, and this export's line 3 shows they are day/month" in message
    assert all(s.removesuffix(".jsonl") in message for s in wrong) and message.endswith("nothing was imported")
    assert logs(vault.root) == before
    # A file that settles the order itself says nothing of an earlier import's.
    crew = write(tmp_path / "WhatsApp Chat with Crew.txt", "13/01/2026, 19:15 - Ana: Kiln Friday?\n"
                                                           "13/01/2026, 19:20 - Bo: Yes\n13/01/2026, 19:30 - Cy: Me too\n")
    import_chat(vault, crew, RulesTurnExtractor(), me="Bo")
    again = import_chat(vault, crew, RulesTurnExtractor())
    assert again.events_added == 0 and not any(line.startswith("dates read") for line in again.assumed)


def test_two_iphone_exports_in_folders_of_other_names_are_two_chats(vault, tmp_path):
    for folder, text in (("a", "[03/01/2026, 10:00:01] Tom: Lunch with Ana tomorrow?\n[03/01/2026, 10:01:12] Ana: Sure\n"),
                         ("b", "[03/01/2026, 18:00:00] Tom: The server is down\n[03/01/2026, 18:02:00] Bob: Rebooting\n")):
        (tmp_path / folder).mkdir()
        assert import_chat(vault, write(tmp_path / folder / "_chat.txt", text), RulesTurnExtractor()).events_added == 2
    assert sorted(s.split("-")[3] for s in logs(vault.root)) == ["a", "b"]
    # A chat whose sessions an earlier import named after "_chat" (its folder unknown) keeps them.
    earlier = write(tmp_path / "WhatsApp Chat with _chat.txt", "[04/01/2026, 09:00:00] Eve: Kiln at 6\n")
    import_chat(vault, earlier, RulesTurnExtractor())
    before = logs(vault.root)
    (tmp_path / "c").mkdir()
    again = write(tmp_path / "c" / "_chat.txt", earlier.read_text(encoding="utf-8") + "[05/01/2026, 09:00:00] Eve: Done\n")
    assert import_chat(vault, again, RulesTurnExtractor()).events_added == 1
    assert len(set(logs(vault.root)) - set(before)) == 1  # the new day's session
    assert all(logs(vault.root)[s] == text for s, text in before.items())
    # Another chat in a folder of another name, on a day that chat also spoke: a chat of its own.
    (tmp_path / "d").mkdir()
    other = write(tmp_path / "d" / "_chat.txt", "[04/01/2026, 11:00:00] Bob: Glaze order sent\n")
    assert import_chat(vault, other, RulesTurnExtractor()).events_added == 1
    assert any(s.startswith("2026-01-04-d-") for s in logs(vault.root))
    # A newer export saved beside the first one ("_chat (1).txt"): the same chat.
    grown = write(tmp_path / "a" / "_chat (1).txt", (tmp_path / "a" / "_chat.txt").read_text(encoding="utf-8")
                  + "[03/01/2026, 10:05:00] Tom: Great\n")
    assert import_chat(vault, grown, RulesTurnExtractor()).events_added == 1


def test_a_message_edited_since_it_was_imported_keeps_its_words_and_the_newer_messages_import(vault, tmp_path):
    chat = tmp_path / "WhatsApp Chat with Ana.txt"
    import_chat(vault, write(chat, "14/02/2026, 18:00 - Ana: Dinner at Casa Lisboa at 8?\n14/02/2026, 18:01 - Leo: Sure\n"),
                RulesTurnExtractor())
    before = logs(vault.root)
    write(chat, "14/02/2026, 18:00 - Ana: Dinner at Casa Lisboa at 9? <This message was edited>\n"
                "14/02/2026, 18:01 - Leo: Sure\n15/02/2026, 10:00 - Ana: Lovely evening\n")
    report = import_chat(vault, chat, RulesTurnExtractor())
    assert (report.events_added, report.edited) == (1, 1)
    assert any(line.startswith("edited after they were imported: 1 message, kept as first imported")
               for line in report.left_out_lines())
    for session, text in before.items():
        assert logs(vault.root)[session] == text  # a log is never rewritten
    assert [e.content for e in events_of(vault.root)] == ["Dinner at Casa Lisboa at 8?", "Sure", "Lovely evening"]
    # Telegram marks an edit with the time it was made.
    chat_tg = _telegram_chat("Bo", 4242)
    import_chat(vault, dump(tmp_path / "result.json", chat_tg), RulesTurnExtractor(), me="Bo")
    chat_tg["messages"][4] |= {"text": "Rehearsal moved to Thursday", "edited": "2024-03-02T11:00:00"}
    chat_tg["messages"].append({"id": 6, "type": "message", "date": "2024-03-03T09:00:00", "from": "Bo",
                                "from_id": "user22", "text": "See you there"})
    report = import_chat(vault, dump(tmp_path / "result.json", chat_tg), RulesTurnExtractor(), me="Bo")
    assert (report.events_added, report.edited) == (1, 1)
    # A message whose words changed with no edit mark is another message under a known id: refused.
    del chat_tg["messages"][4]["edited"]
    with pytest.raises(MemlinkError, match="already used with a different role or content"):
        import_chat(vault, dump(tmp_path / "result.json", chat_tg), RulesTurnExtractor(), me="Bo")


@pytest.mark.parametrize("text, fmt, words", [
    ("Chat with Ana\n12/30/23, 9:41 PM - Ana: hi\n", "whatsapp", ["line 1: not the start of a WhatsApp message", "'Chat with Ana'"]),
    ("\n\nhello there\n", "whatsapp", ["line 3: not the start of a WhatsApp message"]),
    ("12/30/23, 9:41 PM - Ana: hi\n30/12/23, 9:42 PM - Bo: hi\n", None, ["line 1 writes its date month first, and line 2 day first: not one WhatsApp export"]),
    ("2/30/24, 9:41 PM - Ana: hi\n", None, ["line 1: '2/30/24, 9:41 PM' is not a date and time"]),
    ("12/30/23, 9:41 PM - Ana: hi\n12/31/23, 25:10 PM - Bo: hi\n", None, ["line 2: '12/31/23, 25:10 PM' is not a date"]),
    ("[3/18/R4, 14:56:01] Ana: hi\n", None, ["line 1: not the start of a WhatsApp message"]),  # (not "a JSON array")
])
def test_an_unreadable_whatsapp_export_names_the_file_and_line_and_imports_nothing(vault, tmp_path, text, fmt, words):
    import_chat(vault, write(tmp_path / "WhatsApp Chat with Ana.txt", ANDROID), RulesTurnExtractor())
    before = logs(vault.root)
    bad = write(tmp_path / "bad.txt", text)
    with pytest.raises(MemlinkError) as caught:
        import_chat(vault, bad, RulesTurnExtractor(), fmt=fmt)
    message = str(caught.value)
    assert message.startswith(str(bad)) and message.endswith("nothing was imported"), message
    for word in words:
        assert word in message, message
    assert logs(vault.root) == before


def _telegram_chat(name: str, cid: int) -> dict:
    return {"name": name, "type": "personal_chat", "id": cid, "messages": [
        {"id": 1, "type": "service", "date": "2024-03-01T09:00:00", "actor": "Ana", "action": "phone_call", "text": ""},
        {"id": 2, "type": "message", "date": "2024-03-01T09:05:00", "from": "Ana", "from_id": "user11",
         "text": ["The choir meets at ", {"type": "bold", "text": "Stadsschouwburg"}, " on Tuesdays"]},
        {"id": 3, "type": "message", "date": "2024-03-01T09:06:00", "from": "Bo", "from_id": "user22",
         "photo": "photos/photo_1.jpg", "text": "Our score for the Brahms Requiem"},
        {"id": 4, "type": "message", "date": "2024-03-02T10:00:00", "from": "Bo", "from_id": "user22",
         "media_type": "sticker", "sticker_emoji": "🎵", "file": "stickers/s.webp", "text": ""},
        {"id": 5, "type": "message", "date": "2024-03-02T10:01:00", "from": "Ana", "from_id": "user11",
         "text": "Rehearsal moved to Wednesday"}]}


def test_telegram_chat_export_is_a_session_a_day_with_speakers_and_captions(vault, tmp_path):
    export = write(tmp_path / "result.json", json.dumps(_telegram_chat("Bo", 4242), indent=1))  # as Telegram writes it
    assert sniff(export.read_text(encoding="utf-8")) == "telegram"
    report = import_chat(vault, export, RulesTurnExtractor(), me="Bo")
    assert (report.format, report.sessions, report.events_added, report.me) == ("telegram", 2, 3, ["Bo"])
    assert report.left_out == {"system messages (security notices, joins, group changes, calls)": 1,
                               "media (photos, videos, voice messages, stickers, files; a caption is kept as the "
                               "message)": 2}
    got = events_of(vault.root)
    assert [(e.id, e.role, e.speaker, e.content) for e in got] == [
        (2, "assistant", "Ana", "The choir meets at Stadsschouwburg on Tuesdays"),
        (3, "user", "Bo", "Our score for the Brahms Requiem"), (5, "assistant", "Ana", "Rehearsal moved to Wednesday")]
    assert sorted(logs(vault.root))[0].startswith("2024-03-01-bo-")
    # Renamed in Telegram since: the chat's id keeps its sessions; nothing is added.
    before = logs(vault.root)
    again = import_chat(vault, dump(tmp_path / "renamed.json", _telegram_chat("Bo (choir)", 4242)), RulesTurnExtractor(),
                        me="Bo")
    assert again.events_added == 0 and logs(vault.root) == before
    # --me must name a sender; another --me than before would change the roles of imported messages: refused.
    with pytest.raises(MemlinkError, match=r"--me 'Cy' sent no message in this export \(its senders: 'Ana', 'Bo'\)"):
        import_chat(vault, export, RulesTurnExtractor(), me="Cy")
    with pytest.raises(MemlinkError, match=r"imported before with 'Bo' as you \(user\), and --me names 'Ana'.*"
                       r"import it with --me 'Bo'.*delete its chat sessions"):
        import_chat(vault, export, RulesTurnExtractor(), me="Ana")
    assert logs(vault.root) == before


def test_a_whole_telegram_account_export_takes_its_owner_as_the_user(vault, tmp_path):
    account = {"personal_information": {"user_id": 11, "first_name": "Ana"},
               "chats": {"about": "", "list": [_telegram_chat("Bo", 4242), _telegram_chat("Choir", 777)]}}
    report = import_chat(vault, dump(tmp_path / "result.json", account), RulesTurnExtractor())
    assert (report.format, report.sessions, report.events_added, report.me) == ("telegram", 4, 6, ["Ana"])
    assert any("(the account's owner)" in line for line in report.left_out_lines())
    assert {(e.speaker, e.role) for e in events_of(vault.root)} == {("Ana", "user"), ("Bo", "assistant")}
    broken = {"chats": {"list": [_telegram_chat("Bo", 1), {"name": "Odd", "id": 9, "messages": [{"id": "x"}]}]}}
    with pytest.raises(MemlinkError, match=r'chat \[1\] \(id 9, "Odd"\): messages.0.id'):
        import_chat(vault, dump(tmp_path / "broken.json", broken), RulesTurnExtractor())
    for odd in ({"chats": 5}, {"chats": {"list": 5}}, {"chats": {"list": []}, "left_chats": []}):
        with pytest.raises(MemlinkError, match=r"a Telegram export is a JSON object, one chat's `messages` or the "
                                               r"account's `chats.list`; nothing was imported"):
            import_chat(vault, dump(tmp_path / "odd.json", odd), RulesTurnExtractor(), fmt="telegram")


def test_an_account_export_whose_owner_an_earlier_import_of_one_of_its_chats_did_not_take_as_you_is_refused(
        vault, tmp_path):
    import_chat(vault, dump(tmp_path / "choir.json", _telegram_chat("Choir", 777)), RulesTurnExtractor())  # (its first sender)
    before = logs(vault.root)
    account = {"personal_information": {"user_id": 22, "first_name": "Bo"},
               "chats": {"list": [_telegram_chat("Choir", 777), _telegram_chat("Ana", 4242)]}}
    with pytest.raises(MemlinkError, match=r"chats of it were imported before with 'Ana' as you \(user\), and the export "
                                           r"names its account's owner, 'Bo'.*delete its chat sessions from sessions/ "
                                           r"\('2024-03-01-choir-[0-9a-f]+', '2024-03-02-choir-[0-9a-f]+': each"):
        import_chat(vault, dump(tmp_path / "result.json", account), RulesTurnExtractor())
    assert logs(vault.root) == before
    bos = {"personal_information": {"user_id": 22}, "chats": {"list": [_telegram_chat("Bo", 4242)]}}
    import_chat(vault, dump(tmp_path / "bo.json", bos), RulesTurnExtractor())  # (a chat whose user was its owner: not named)
    with pytest.raises(MemlinkError, match=r"\('2024-03-01-choir-[0-9a-f]+', '2024-03-02-choir-[0-9a-f]+': each"):
        import_chat(vault, dump(tmp_path / "result.json", account | {"chats": {"list": [_telegram_chat("Bo", 4242),
                                                                                         _telegram_chat("Choir", 777)]}}),
                    RulesTurnExtractor())


def test_a_telegram_account_export_imports_the_chats_it_has_left_too(vault, tmp_path):
    account = {"personal_information": {"user_id": 11}, "chats": {"list": [_telegram_chat("Bo", 4242)]},
               "left_chats": {"about": "", "list": [_telegram_chat("Old choir", 777)]}}
    report = import_chat(vault, dump(tmp_path / "result.json", account), RulesTurnExtractor())
    assert (report.sessions, report.events_added) == (4, 6)
    assert sum(1 for name in logs(vault.root) if "old-choir" in name) == 2


@pytest.mark.parametrize("about", ["Ana", ["Ana"], 11])
def test_an_account_export_whose_owner_is_not_an_object_imports_as_a_chat_without_an_owner(vault, tmp_path, about):
    account = {"personal_information": about, "chats": {"list": [_telegram_chat("Bo", 4242)]}}
    report = import_chat(vault, dump(tmp_path / "result.json", account), RulesTurnExtractor())
    assert report.events_added and report.me == ["Ana"]  # (the chat is Bo's: its other person is you)


def test_a_chat_exported_from_a_messaging_app_recalls_as_its_json_lines_import(tmp_path):
    """A small LoCoMo-shaped conversation imported three ways (JSON Lines as
    benchmarks/locomo.py --speaker makes it, a WhatsApp export, a Telegram export): every
    question recalls the same messages."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import messaging_fidelity

    turns = [("Mia", "I adopted a greyhound called Pip from the shelter in Haarlem."),
             ("Noor", "Greyhounds are so calm. How old is Pip?"), ("Mia", "Pip is four and loves the beach at Zandvoort."),
             ("Noor", "My sister runs a bakery in Leiden, she sells rye sourdough."),
             ("Mia", "I will visit the bakery in Leiden on Sunday."), ("Noor", "Try the cardamom buns too.")]
    later = [("Noor", "I signed up for the Dam tot Damloop, ten miles."), ("Mia", "Good luck! I will cheer at the finish"),
             ("Noor", "My knee hurts after the long run on the dunes."), ("Mia", "Ice it and rest for a week.")]
    conversation = {"speaker_a": "Mia", "speaker_b": "Noor",
                    "session_1_date_time": "1:56 pm on 8 May, 2023", "session_2_date_time": "7:10 pm on 21 May, 2023"}
    for n, said in ((1, turns), (2, later)):
        conversation[f"session_{n}"] = [{"speaker": who, "dia_id": f"D{n}:{i}", "text": text}
                                        for i, (who, text) in enumerate(said, 1)]
    questions = ["What is the name of Mia's dog?", "Where does Noor's sister have her bakery?",
                 "Which race did Noor sign up for?", "What happened to Noor's knee?", "Where does Pip like to go?"]
    sample = {"sample_id": "mia-noor", "conversation": conversation,
              "qa": [{"question": q, "evidence": [], "category": 1} for q in questions]}
    qfile = write(tmp_path / "q.txt", "".join(q + "\n" for q in questions))
    recalled = {fmt: messaging_fidelity.recall(*messaging_fidelity.build(sample, tmp_path, fmt),
                                               [{"question": q} for q in questions], qfile)
                for fmt in ("jsonl", "whatsapp", "telegram")}
    assert all(recalled["jsonl"]) and recalled["whatsapp"] == recalled["jsonl"] == recalled["telegram"]
    assert recalled["jsonl"][0][0][0] == "D1:1"


def test_cli_imports_a_whatsapp_chat_as_the_sender_me_names(tmp_path):
    root = tmp_path / "v"
    assert memlink("init", vault=root).returncode == 0
    set_llm(root, provider="rules").close()
    chat = write(tmp_path / "WhatsApp Chat with Ana.txt", ANDROID)
    r = memlink("import-chat", str(chat), "--me", "Bo", vault=root)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("2 chat sessions (whatsapp), 4 new messages, ")
    assert "  you (user): 'Bo' (--me); the others answer (assistant)\n" in r.stdout
    assert "  left out: deleted messages: 1\n" in r.stdout
    r = memlink("import-chat", str(chat), "--me", "Bo", "--json", vault=root)
    assert r.returncode == 0 and json.loads(r.stdout)["events_added"] == 0 and json.loads(r.stdout)["me"] == ["Bo"]
    r = memlink("import-chat", str(CHATGPT), "--me", "Bo", vault=root)
    assert r.returncode == 1 and "--me names the user of a WhatsApp or Telegram chat" in r.stderr, r.stderr
    r = memlink("recall", "lease for the flat on Oudegracht", "--json", vault=root)
    assert r.returncode == 0 and json.loads(r.stdout)[0]["session"].startswith("2023-12-30-ana-"), r.stdout
    # A session recall cannot find, no question, an empty file: said, and nothing else done.
    r = memlink("recall", "lease", "--session", "2023-12-30-typo", vault=root)
    assert r.returncode == 1 and "no session '2023-12-30-typo'" in r.stderr, r.stderr
    assert memlink("recall", vault=root).returncode == 2
    before = logs(root)
    r = memlink("import-chat", str(write(tmp_path / "empty.txt", " \n")), vault=root)
    assert r.returncode == 1 and "empty.txt: empty: it holds no chat to import; nothing was imported" in r.stderr
    assert logs(root) == before


def test_dates_no_line_settles_are_read_as_dates_says_and_a_file_or_log_saying_otherwise_refuses_it(vault, tmp_path):
    chat = write(tmp_path / "WhatsApp Chat with Priya.txt", "02/03/24, 9:05 pm - Priya: Did you see the match?\n"
                                                               "05/03/24, 8:15 am - Priya: Amma birthday dinner on Sunday\n")
    report = import_chat(vault, chat, RulesTurnExtractor(), dates="day-first")
    assert sorted(s[:10] for s in logs(vault.root)) == ["2024-03-02", "2024-03-05"]
    assert any("dates read day/month, as --dates says" in line for line in report.left_out_lines())
    before = logs(vault.root)
    with pytest.raises(MemlinkError, match="imported before with its dates read day first, and --dates says month first"):
        import_chat(vault, chat, RulesTurnExtractor(), dates="month-first")
    same = write(tmp_path / "WhatsApp Chat with Amma.txt", "02/03/24, 9:05 pm - Amma: Hi\n05/05/24, 8:15 am - Amma: Dinner\n")
    import_chat(vault, same, RulesTurnExtractor(), dates="month-first")  # (05/05 reads alike either way: no say)
    before = logs(vault.root)
    with pytest.raises(MemlinkError, match="imported before with its dates read month first, and --dates says day first"):
        import_chat(vault, same, RulesTurnExtractor(), dates="day-first")
    settled = write(tmp_path / "WhatsApp Chat with Ravi.txt", "13/03/24, 9:05 pm - Ravi: Hi\n")
    with pytest.raises(MemlinkError, match="--dates says month first, and line 1 writes its date day first"):
        import_chat(vault, settled, RulesTurnExtractor(), dates="month-first")
    with pytest.raises(MemlinkError, match="--dates says how a WhatsApp chat writes its dates, and this is a chatgpt file"):
        import_chat(vault, CHATGPT, RulesTurnExtractor(), dates="day-first")
    assert logs(vault.root) == before


def test_a_discord_export_is_named_as_one_memlink_does_not_read(vault, tmp_path):
    export = {"guild": {"id": "1", "name": "Friends"}, "channel": {"id": "2", "name": "general"},
              "messages": [{"id": "3", "type": "Default", "timestamp": "2024-05-03T21:14:00+00:00",
                            "author": {"id": "4", "name": "ana"}, "content": "hi"}]}
    for text in (json.dumps(export, indent=2), json.dumps(export)):  # (as it writes it, and on one line)
        chat = write(tmp_path / "general.json", text)
        with pytest.raises(MemlinkError, match=r"a Discord export \(DiscordChatExporter's JSON\), which memlink does not read"):
            import_chat(vault, chat, RulesTurnExtractor())
    assert logs(vault.root) == {}


def test_a_group_chat_s_memories_are_what_the_user_said_not_the_others_on_a_day_they_were_silent(vault, tmp_path):
    from engine.extract.rules import RulesExtractor
    from engine.sessions.commit import commit_all

    chat = write(tmp_path / "WhatsApp Chat with Book Club.txt", "14/02/2024, 19:00 - Alex: I love mystery novels.\n"
                 "14/02/2024, 19:05 - Sam: Sounds good\n"
                 "15/02/2024, 08:10 - Sam: I hate mystery novels. I love poetry.\n"
                 "15/02/2024, 08:12 - Jo: I love cats.\n")
    import_chat(vault, chat, RulesTurnExtractor(), me="Alex")
    done = commit_all(vault, RulesExtractor())
    assert done.failed == [] and len(done.committed) == 2
    assert sorted(u for u in vault.catalog.uris() if u.startswith("preferences/")) == ["preferences/mystery-novels.md"]
    assert all(l.link_type.value != "contradicts" for l in vault.links.all())


def test_a_sender_s_name_reaches_recall_json_without_its_terminal_escapes(vault, tmp_path):
    chat = write(tmp_path / "WhatsApp Chat with Mei.txt", "30/12/2025, 09:16 - Tom\x1b[31m: Hike at Lion Rock on Saturday?\n"
                                                         "30/12/2025, 09:18 - Mei: Yes, I will bring oolong tea\n")
    import_chat(vault, chat, RulesTurnExtractor())
    (hit,) = [h for h in TurnMemory.for_vault(vault).recall("who brings oolong tea to the hike", k=3) if "Mei" in h.speakers]
    assert "\x1b" in "".join(hit.speakers) and "\x1b" not in "".join(hit.to_json()["speakers"])


async def test_the_app_imports_a_whatsapp_text_export_as_a_chat_not_a_note(tmp_path):
    from conftest import settle
    from textual.widgets import Static

    from memlink_tui.app import MemlinkApp
    from memlink_tui.screens.importer import ImportScreen

    vault = Vault.init(tmp_path / "vault", name="test")
    vault.close()
    vault = set_llm(vault.root, provider="rules")
    chat = write(tmp_path / "WhatsApp Chat with Ana.txt", ANDROID)
    app = MemlinkApp(vault)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        app.push_screen(ImportScreen(vault))
        await pilot.pause()
        await pilot.press(*str(chat), "enter")
        await settle(app, pilot)
        shown = str(app.screen.query_one("#import-result", Static).render())
        assert "2 chat sessions (whatsapp), 4 new messages" in shown, shown
        assert "you (user): 'Bo' (the chat is named after 'Ana'" in shown
    assert len(logs(vault.root)) == 2 and not list(vault.root.rglob("*Ana*.md"))  # chat sessions, no source note


def test_an_iphone_export_that_begins_with_a_bracket_is_told_a_whatsapp_chat(vault, tmp_path):
    """iOS writes every message start as "[date, time] Name: …"; a chat whose first line
    carries no mark begins with "[", as a JSON array does."""
    text = ("[14/04/2024, 18:03:40] Lukas: Shall we hike on 8 June?\n"
            "[14/04/2024, 18:05:02] Mia: 8 June works for me\n")
    assert sniff(text) == "whatsapp" and sniff("\ufeff" + text) == "whatsapp"
    chat = tmp_path / "WhatsApp Chat - Hiking" / "_chat.txt"
    chat.parent.mkdir()
    report = import_chat(vault, write(chat, text), RulesTurnExtractor())
    assert (report.format, report.events_added) == ("whatsapp", 2)
    assert sniff('[{"mapping": {}, "current_node": "a"}]') == "chatgpt"  # (a JSON array is still one)


def test_a_message_s_own_lines_with_a_date_and_time_stay_its_text(vault, tmp_path):
    text = ("12/24/23, 9:41 PM - Ana: Plan for tomorrow:\n09:00, 12/25/23 - breakfast at Bob's\n"
            "5. 1. 2024 10:00 - dentist\nsee you!\n12/24/23, 9:45 PM - Bob: ok\n")
    import_chat(vault, write(tmp_path / "WhatsApp Chat with Ana.txt", text), RulesTurnExtractor())
    assert [e.content for e in events_of(vault.root)] == [
        "Plan for tomorrow:\n09:00, 12/25/23 - breakfast at Bob's\n5. 1. 2024 10:00 - dentist\nsee you!", "ok"]


RLM = "\u200f"


@pytest.mark.parametrize("lines, times", [
    # Arabic (iOS): marks inside the date, an Arabic comma; Arabic-Indic digits and م (pm) too
    ([f"[18{RLM}/3{RLM}/2022{RLM}\u060c 14:56:01] Ana: hi", f"[١٩{RLM}/٣{RLM}/٢٠٢٢\u060c ٢:٥٦:٠٠ م] Bo: hi"],
     ["2022-03-18T14:56:01", "2022-03-19T14:56:00"]),
    (["[14:56:01, 3/18/22] Ana: hi", "[9:02:10, 3/19/22] Bo: hi"], ["2022-03-18T14:56:01", "2022-03-19T09:02:10"]),  # time first
    (["2026/4/6 下午1:54 - Ana: hi", "2026/4/7 上午9:05 - Bo: hi"], ["2026-04-06T13:54:00", "2026-04-07T09:05:00"]),
    (["2026/07/25 午後1:32 - Ana: hi", "[2024. 5. 2. 오후 3:04:05] Bo: hi"], ["2026-07-25T13:32:00", "2024-05-02T15:04:05"]),
    (["[12.3.2022 klo 14.08.18] Ana: hi"], ["2022-03-12T14:08:18"]),  # Finnish
    (["2022/12/14, 13:34. - Ana: hi"], ["2022-12-14T13:34:00"]),
    (["06/20/2020, 00:08 a. m. - Ana: hi", "06/20/2020, 00:09 p. m. - Bo: hi"], ["2020-06-20T00:08:00", "2020-06-20T12:09:00"]),
    (["[05.08.23, 5:52:02 PM] Ana: hi"], ["2023-08-05T17:52:02"]),  # (12-hour, but dots: day first, as in Germany)
    (["[3/18/2565 BE, 14:56:01] Ana: hi"], ["2022-03-18T14:56:01"]),  # (a Thai iPhone's Buddhist-era year)
])
def test_whatsapp_stamps_as_other_phones_write_them(vault, tmp_path, lines, times):
    import_chat(vault, write(tmp_path / "WhatsApp Chat with Ana.txt", "\n".join(lines) + "\n"), RulesTurnExtractor())
    assert sorted(e.ts for e in events_of(vault.root)) == sorted(times)  # (each message kept, at the time it says)


LOCALIZED_ANDROID = (  # WhatsApp for Android in German: day first, a 24-hour clock
    "14.04.24, 18:03 - Lukas: Wann wollen wir wandern gehen?\n"
    "14.04.24, 18:05 - Mia: <Medien ausgeschlossen>\n"
    "14.04.24, 18:06 - Mia: IMG-20240414-WA0003.jpg (Datei angehängt)\n"
    "14.04.24, 18:09 - Mia: Diese Nachricht wurde gelöscht\n"
    "14.04.24, 18:10 - Sam: Du hast diese Nachricht gelöscht\n"
    "15.04.24, 09:14 - Lukas: Abgemacht: am 8. Juni auf die Zugspitze <Diese Nachricht wurde bearbeitet>\n")
LOCALIZED_IOS = (  # WhatsApp for iPhone in Spanish
    "[10/05/2024, 20:17:01] Bo: Empiezo un trabajo nuevo en Cabify\n"
    f"{LRM}[10/05/2024, 20:18:00] Sam: {LRM}imagen omitida\n"
    f"{LRM}[10/05/2024, 20:18:30] Carla: {LRM}audio omitido\n"
    "[10/05/2024, 20:19:00] Carla: Se eliminó este mensaje.\n"
    f"[10/05/2024, 20:21:00] Bo: El 3 de junio {LRM}<Se editó este mensaje.>\n")


LOCALIZED_RU = (  # WhatsApp for Android in Russian
    "18.03.22, 14:56 - Дима: Привет, в субботу идём в поход?\n"
    "18.03.22, 15:10 - Лена: <Без медиафайлов>\n"
    "18.03.22, 15:11 - Лена: Alex.vcf (файл добавлен)\n"
    "18.03.22, 15:12 - Лена: Данное сообщение удалено\n"
    "18.03.22, 15:13 - Дима: Вы удалили данное сообщение\n")


@pytest.mark.parametrize("text, said, media, deleted", [
    (LOCALIZED_ANDROID, ["Wann wollen wir wandern gehen?", "Abgemacht: am 8. Juni auf die Zugspitze"], 2, 2),
    (LOCALIZED_RU, ["Привет, в субботу идём в поход?"], 2, 2),
    (LOCALIZED_IOS, ["Empiezo un trabajo nuevo en Cabify", "El 3 de junio"], 2, 1),
])
def test_whatsapp_markers_in_the_phones_language_are_not_taken_for_messages(vault, tmp_path, text, said, media, deleted):
    report = import_chat(vault, write(tmp_path / "WhatsApp Chat with Friends.txt", text), RulesTurnExtractor())
    assert [e.content for e in events_of(vault.root)] == said
    assert report.left_out == {"media (photos, videos, voice messages, stickers, files; a caption is kept as the "
                               "message)": media, "deleted messages": deleted}


def test_a_notice_quoting_a_name_with_a_colon_is_no_message(vault, tmp_path):
    """Android writes a notice without a sender, and a group's name may hold ": "; iOS
    writes the group's name as a notice's sender."""
    android = ('10/05/2024, 20:15 - Bo created group "Trip: Asturias"\n'
               '10/05/2024, 20:16 - Bo changed the subject from "Trip: Asturias" to "Trip: Asturias 2024"\n'
               "10/05/2024, 20:16 - Lukas hat den Betreff zu „Zugspitze: 8. Juni“ geändert\n"
               '10/05/2024, 20:17 - Robert "Bob" Lee: We rent a house in Cangas de Onís: 12 to 15 July\n')
    report = import_chat(vault, write(tmp_path / "WhatsApp Chat with Trip.txt", android), RulesTurnExtractor())
    assert [(e.speaker, e.content) for e in events_of(vault.root)] == [
        ('Robert "Bob" Lee', "We rent a house in Cangas de Onís: 12 to 15 July")]
    assert report.left_out == {"system messages (security notices, joins, group changes, calls)": 3}
    ios = (f"[14/04/2024, 18:02:11] Zugspitze: 8. Juni: {LRM}Lukas created this group\n"
           "[14/04/2024, 18:03:40] Lukas: Treffpunkt: 6 Uhr am Bahnhof\n")
    chat = tmp_path / "WhatsApp Chat - Zugspitze" / "_chat.txt"
    chat.parent.mkdir()
    import_chat(vault, write(chat, ios), RulesTurnExtractor())
    assert [(e.speaker, e.content) for e in read_events(vault, session_named(vault.root, "zugspitze"))] == [
        ("Lukas", "Treffpunkt: 6 Uhr am Bahnhof")]


def test_me_names_a_sender_whatever_its_case_and_refuses_a_name_that_fits_two(vault, tmp_path):
    chat = write(tmp_path / "WhatsApp Chat with Ana.txt", ANDROID)
    report = import_chat(vault, chat, RulesTurnExtractor(), me="  bo ")
    assert report.me == ["Bo"] and any("you (user): 'Bo' (--me)" in line for line in report.left_out_lines())
    two = write(tmp_path / "WhatsApp Chat with Cas.txt", "05.01.24, 21:41 - Cas: Bring the rope\n"
                "05.01.24, 21:42 - CAS: Which rope?\n")
    with pytest.raises(MemlinkError, match=r"--me 'cas' fits more than one sender \('Cas', 'CAS'\)"):
        import_chat(vault, two, RulesTurnExtractor(), me="cas")
    assert import_chat(vault, two, RulesTurnExtractor(), me="CAS").me == ["CAS"]  # (as written: that one)


def test_a_newer_export_without_me_keeps_who_was_you_and_another_me_says_what_to_do(vault, tmp_path):
    import_chat(vault, write(tmp_path / "WhatsApp Chat with Ana.txt", ANDROID), RulesTurnExtractor(), me="Ana")
    before = logs(vault.root)
    (tmp_path / "later").mkdir()
    newer = write(tmp_path / "later" / "WhatsApp Chat with Ana.txt", ANDROID + "1/2/24, 8:00\u202fAM - Ana: Morning\n")
    report = import_chat(vault, newer, RulesTurnExtractor())  # no --me: Ana, as before (not the chat's other person)
    assert (report.events_added, report.me) == (1, ["Ana"])
    assert "you (user): 'Ana' (as when this chat was imported before); the others answer (assistant)" in \
        report.left_out_lines()
    assert [(e.speaker, e.role) for e in events_of(vault.root)][-1] == ("Ana", "user")
    after = logs(vault.root)
    with pytest.raises(MemlinkError) as caught:
        import_chat(vault, newer, RulesTurnExtractor(), me="bo")
    assert "import it with --me 'Ana' (or without --me), or first delete its chat sessions from sessions/" in \
        str(caught.value)
    assert logs(vault.root) == after and all(after[s].startswith(text) for s, text in before.items())
    for session in after:  # what it says to do works: the chat's sessions deleted, imported with Ana as you
        for path in (vault.root / "sessions").glob(f"{session}.*"):
            path.unlink()
    assert import_chat(vault, newer, RulesTurnExtractor(), me="bo").me == ["Bo"]
    assert {(e.speaker, e.role) for e in events_of(vault.root)} == {("Bo", "user"), ("Ana", "assistant")}


async def test_the_chat_pane_names_who_said_each_message_of_a_group_chat(tmp_path):
    from conftest import open_at, settle

    from memlink_tui.app import MemlinkApp

    vault = Vault.init(tmp_path / "vault", name="test")
    chat = tmp_path / "WhatsApp Chat - Climbing" / "_chat.txt"
    chat.parent.mkdir()
    import_chat(vault, write(chat, IOS), RulesTurnExtractor(), me="Cas")
    vault.close()
    app = MemlinkApp(set_llm(tmp_path / "vault", provider="rules"))
    async with app.run_test(size=(120, 36)) as pilot:
        await open_at(app, pilot, "chat")
        app.screen.open_session(sorted(logs(tmp_path / "vault"))[0])
        await settle(app, pilot)
        shown = [str(w.render()) for w in app.screen.query("#transcript Static")]
        assert shown == ["Ana  The bouldering gym Monk reopens on Saturday",
                         "Cas (you)  I tore a finger pulley, no climbing for six weeks"], shown


def test_recall_and_the_memory_context_say_who_said_each_message_of_a_chat_between_people(vault, tmp_path):
    from engine.sessions.memory import memory_context

    import_chat(vault, write(tmp_path / "WhatsApp Chat with Ana.txt", ANDROID), RulesTurnExtractor(), me="Ana")
    question = "Which flat did Ana sign the lease for?"
    context = memory_context(vault, question, note_count=0)
    said = next(i.text for i in context.items if i.kind == "turn")
    assert said.startswith("Ana: We signed the lease for the flat on Oudegracht!") and "\nBo: Congrats!" in said
    vault.close()
    shown = memlink("recall", question, vault=vault.root).stdout
    assert "   Ana: We signed the lease" in shown and "   Bo: Congrats!" in shown and "   Q: " not in shown


def test_a_chat_with_no_speaker_names_is_recalled_as_question_and_answer(vault, tmp_path):
    chat = write(tmp_path / "chat.jsonl", "".join(json.dumps(r) + "\n" for r in [
        {"session": "s1", "id": 1, "role": "user", "content": "We signed the lease on Oudegracht.", "ts": None},
        {"session": "s1", "id": 2, "role": "assistant", "content": "Congratulations on the flat!", "ts": None}]))
    import_chat(vault, chat, RulesTurnExtractor())
    vault.close()
    shown = memlink("recall", "Which lease did we sign?", vault=vault.root).stdout
    assert "   Q: We signed the lease on Oudegracht." in shown and "   A: Congratulations on the flat!" in shown


@pytest.mark.parametrize("name, data, words", [
    ("chat.zip", b"PK\x03\x04\x14\x00\x00\x00", "a .zip archive: unzip the export and import the chat file in it"),
    ("chat.jsonl", json.dumps({"session": "s", "id": "1", "role": "user", "content": "hi", "ts": "2026-01-01T10:00:00"})
     .encode("utf-16"), "UTF-16 text: JSON Lines are read as UTF-8; save it as UTF-8"),
])
def test_a_zipped_export_or_a_utf16_json_lines_file_is_refused_saying_what_to_do(vault, tmp_path, name, data, words):
    (tmp_path / name).write_bytes(data)
    with pytest.raises(MemlinkError, match=re.escape(words)):
        import_chat(vault, tmp_path / name, RulesTurnExtractor())
    assert logs(vault.root) == {}


def test_a_telegram_chat_exported_again_in_another_time_zone_adds_only_its_new_messages(vault, tmp_path):
    def chat(hours: int, *more: dict) -> dict:
        at = [dt.datetime(2025, 12, 31, 23, 30) + dt.timedelta(hours=hours, minutes=10 * n) for n in range(2)]
        return {"name": "Eva", "type": "personal_chat", "id": 99, "messages": [
            {"id": n + 1, "type": "message", "date": t.isoformat(), "from": who, "from_id": uid, "text": text}
            for n, (t, (who, uid, text)) in enumerate(zip(at, [("Eva", "user1", "Happy new year!"),
                                                               ("Max", "user2", "Same to you")], strict=True))] + list(more)}

    import_chat(vault, dump(tmp_path / "result.json", chat(0)), RulesTurnExtractor(), me="Max")
    before = logs(vault.root)
    later = {"id": 3, "type": "message", "date": "2026-01-01T09:00:00", "from": "Eva", "from_id": "user1",
             "text": "Brunch at ten?"}
    report = import_chat(vault, dump(tmp_path / "result.json", chat(1, later)), RulesTurnExtractor(), me="Max")
    assert (report.events_added, report.elsewhere) == (1, 2)
    assert any(line.startswith("imported before in another session: 2 messages") for line in report.left_out_lines())
    assert [e.content for e in events_of(vault.root)] == ["Happy new year!", "Same to you", "Brunch at ten?"]
    assert all(logs(vault.root)[s] == text for s, text in before.items())
