"""`memlink chat` on the command line, with the loopback Ollama stand-in and with no model,
and saving one turn into notes (`memlink commit --turn`) without a later commit of the
whole chat session extracting it again or skipping the turns before it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from commit_worker import Rewording
from conftest import SAMPLE, memlink
from ollama_stub import OllamaStub
from test_hostile_text import HOSTILE, hostile_vault, unsafe

from engine import Vault
from engine.extract.inputs import InputError
from engine.sessions.commit import commit_session, commit_turn
from engine.sessions.context import BEGIN_MEMORY, END_MEMORY
from engine.sessions.log import append_events, read_events
from engine.sessions.store import TurnStore

STUDIO = "How much is the membership at the studio?"
NO_OLLAMA = {"OLLAMA_HOST": "http://127.0.0.1:9"}  # nothing listens there
EXTRACTION = json.dumps({"summary": "The studio membership is €95 a month.", "outcome": "informational", "triples": []})


def sample_copy(tmp_path: Path) -> Path:
    root = tmp_path / "sample"
    shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns(".memlink"))
    return root


def fenced(content: str) -> list[str]:
    """The lines between BEGIN MEMORY and END MEMORY."""
    lines = content.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith(BEGIN_MEMORY))
    end = next(i for i, line in enumerate(lines) if line.startswith(END_MEMORY))
    return lines[start + 1:end]


def test_chat_sends_the_note_fenced_as_data_and_prints_its_citation(tmp_path):
    root = sample_copy(tmp_path)
    with OllamaStub(models=["llama3.2:latest"]) as stub:
        stub.script += [("json", "It is €95 a month [1]."), ("json", EXTRACTION)]
        r = memlink("chat", STUDIO, vault=root, env={"OLLAMA_HOST": stub.host})
        assert r.returncode == 0, r.stderr
        sent = stub.requests[0]["body"]["messages"]
        assert stub.requests[0]["body"]["stream"] and sent[-1] == {"role": "user", "content": STUDIO}
        data = [line for m in sent if BEGIN_MEMORY in m["content"] for line in fenced(m["content"])]
        assert any("€95" in line for line in data)
        assert all(line.startswith("| ") or line.startswith("[") for line in data)  # quoted, or an entry's header
        assert "€95" not in "".join(m["content"] for m in sent if m["role"] == "system")
        answer, given = r.stdout.split("memory given to the model:\n")
        assert answer.strip() == "It is €95 a month [1]."
        assert any("entities/klei-vuur.md:" in line for line in given.splitlines())
        session = r.stderr.split("chat session ", 1)[1].split(" ", 1)[0]

        # Going on in the same chat session: the model reads the first turn as conversation.
        stub.script += [("json", "Fridays."), ("json", EXTRACTION)]
        r = memlink("chat", "And when are the glaze firings?", "--session", session, "--json", vault=root,
                    env={"OLLAMA_HOST": stub.host})
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        sent = stub.requests[2]["body"]["messages"]
    assert {"role": "user", "content": STUDIO} in sent and {"role": "assistant", "content": "It is €95 a month [1]."} in sent
    assert set(out) == {"session", "turn", "answer", "model", "context"}
    assert (out["session"], out["answer"], out["model"]) == (session, "Fridays.", "ollama:llama3.2")
    items = out["context"]["items"]
    assert out["context"]["question"] == "And when are the glaze firings?" and items
    assert [i["n"] for i in items] == list(range(1, len(items) + 1))
    assert {"kind", "source", "where", "title", "text", "route", "score", "cite"} <= set(items[0])
    events = [e for e in read_events(Vault.open(root), session) if e.role in ("user", "assistant")]
    assert [e.content for e in events] == [STUDIO, "It is €95 a month [1].", "And when are the glaze firings?", "Fridays."]
    assert out["turn"] == events[2].key
    # Each answered turn gets its turn memory, as the app makes it: recall finds it later.
    assert len(TurnStore(Vault.open(root)).summaries(session)) == 2


def test_a_reply_cut_off_exits_1_and_logs_no_answer(tmp_path):
    root = sample_copy(tmp_path)
    with OllamaStub(models=["llama3.2:latest"]) as stub:
        stub.script.append(("cut", "It is"))
        r = memlink("chat", STUDIO, vault=root, env={"OLLAMA_HOST": stub.host})
    assert r.returncode == 1 and r.stderr.splitlines()[-1].startswith("memlink: error: "), r.stderr
    session = r.stderr.split("chat session ", 1)[1].split(" ", 1)[0]
    assert [e.role for e in read_events(Vault.open(root), session)] == ["user", "recall"]


def test_chat_without_a_model_quotes_the_note_and_says_no_model_wrote_it(tmp_path):
    root = sample_copy(tmp_path)
    r = memlink("chat", STUDIO, vault=root, env=NO_OLLAMA)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("No model wrote this answer")
    assert "€95" in r.stdout and "entities/klei-vuur.md:" in r.stdout
    assert "given to the model" not in r.stdout
    r = memlink("chat", STUDIO, "--json", vault=root, env=NO_OLLAMA)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["model"] is None and out["answer"].startswith("No model wrote this answer")
    assert any(i["source"] == "entities/klei-vuur.md" for i in out["context"]["items"])


def test_chat_refuses_a_missing_session_an_absent_model_or_an_empty_question_and_writes_nothing(tmp_path):
    root = sample_copy(tmp_path)
    for session, said in (("2020-01-01-nothing", "no chat session '2020-01-01-nothing'"), ("../x", "bad session id")):
        r = memlink("chat", STUDIO, "--session", session, vault=root, env=NO_OLLAMA)
        assert r.returncode == 1 and said in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
    r = memlink("chat", STUDIO, "--provider", "ollama", vault=root, env=NO_OLLAMA)
    assert r.returncode == 1 and "not running" in r.stderr, r.stderr
    r = memlink("chat", " ", vault=root, env=NO_OLLAMA)
    assert r.returncode == 2 and "the question is empty" in r.stderr, r.stderr
    assert sorted(p.name for p in (root / "sessions").glob("*.jsonl")) == sorted(
        p.name for p in (SAMPLE / "sessions").glob("*.jsonl"))


def test_chat_prints_no_escape_sequence_from_notes_turns_or_the_model(tmp_path):
    root = tmp_path / "v"
    hostile_vault(root).close()
    with OllamaStub(models=["llama3.2:latest"]) as stub:
        stub.script += [("json", f"The crane {HOSTILE} [1]."), ("json", EXTRACTION)]
        with_model = memlink("chat", "alpha harbour crane", vault=root, env={"OLLAMA_HOST": stub.host})
    runs = [with_model, memlink("chat", "alpha harbour crane", vault=root, env=NO_OLLAMA),
            memlink("chat", "paint the fence", "--json", vault=root, env=NO_OLLAMA)]
    for r in runs:
        assert r.returncode == 0, r.stderr
        assert unsafe(r.stdout) == [] and unsafe(r.stderr) == []
    assert "The crane" in with_model.stdout and "Alpha" in runs[1].stdout
    answer = json.loads(runs[2].stdout)["answer"]  # quoted from the turn's memory: its words, none of its escapes
    assert "Fence painted here over" in answer and unsafe(answer) == []


def said(session: str, *pairs: tuple[str, str], first: int = 1) -> list[dict]:
    """Turns of questions and answers, their messages named q1, a1, q2, a2…"""
    out = []
    for n, (question, answer) in enumerate(pairs, first):
        out += [{"session": session, "id": f"q{n}", "role": "user", "content": question, "ts": f"2026-11-30T10:0{n}:00Z"},
                {"session": session, "id": f"a{n}", "role": "assistant", "content": answer, "ts": f"2026-11-30T10:0{n}:30Z"}]
    return out


def test_one_turn_saved_alone_then_the_session_commit_saves_the_rest_once(vault):
    append_events(vault, "s", said("s", ("I love mangosteen.", "Noted."), ("I love durian.", "Noted."),
                                   ("I love rambutan.", "Noted.")))
    words = Rewording(vault)  # a turn extracted twice would show as a second, reworded note
    report = commit_turn(vault, "s", "a2", words)  # any message of the turn names it
    assert report is not None and report.created == ["preferences/durian.md"]
    mark = read_events(vault, "s")[-1]
    assert mark.kind == "commit" and (mark.model_extra or {}).get("turn") == ["q2", "a2"]
    assert commit_turn(vault, "s", "q2", words) is None  # saved already
    rest = commit_session(vault, "s", words)
    assert rest is not None and sorted(rest.created) == ["preferences/mangosteen.md", "preferences/rambutan.md"]
    assert commit_session(vault, "s", words) is None and commit_turn(vault, "s", "q1", words) is None
    assert sorted(e.uri for e in vault.catalog.all("preference")) == [
        "preferences/durian.md", "preferences/mangosteen.md", "preferences/rambutan.md"]
    # After a whole-session commit a new turn is saved alone, and then the next commit finds nothing new.
    append_events(vault, "s", said("s", ("I love lychee.", "Noted."), first=4))
    assert commit_turn(vault, "s", "q4", words).created == ["preferences/lychee.md"]
    assert commit_session(vault, "s", words) is None
    with pytest.raises(InputError, match="no message 'q9' in session 's'"):
        commit_turn(vault, "s", "q9", words)


def test_commit_turn_on_the_command_line(tmp_path):
    root = tmp_path / "v"
    vault = Vault.init(root)
    append_events(vault, "s", said("s", ("I love mangosteen.", "Noted."), ("I love durian.", "Noted.")))
    vault.close()
    r = memlink("commit", "s", "--turn", "q2", vault=root, env=NO_OLLAMA)
    assert r.returncode == 0 and "session s turn q2" in r.stdout and "+ preferences/durian.md" in r.stdout, r.stderr
    r = memlink("commit", "s", "--turn", "q2", vault=root, env=NO_OLLAMA)
    assert r.returncode == 0 and "nothing new to commit" in r.stdout, r.stdout
    r = memlink("commit", "s", "--json", vault=root, env=NO_OLLAMA)
    assert r.returncode == 0 and json.loads(r.stdout)["created"] == ["preferences/mangosteen.md"], r.stdout
    r = memlink("commit", "s", "--turn", "nope", vault=root, env=NO_OLLAMA)
    assert r.returncode == 1 and "no message 'nope' in session 's'" in r.stderr, r.stderr


def test_a_commit_keeps_what_was_said_as_written_and_a_question_states_no_preference(vault):
    append_events(vault, "s", said("s", ("Do I like espresso? Should I like jazz. 我喜欢咖啡吗？ I now hate black tea.", "Noted."),
                                   ("I prefer `ripgrep` over grep. I love the site https://cooking.example/pasta for dinners.",
                                    "Noted.")))
    report = commit_session(vault, "s")
    assert report is not None
    notes = {e.uri: vault.read_note(e.uri).fields for e in vault.catalog.all("preference")}
    assert sorted(notes) == ["preferences/black-tea.md", "preferences/ripgrep-over-grep.md",
                             "preferences/site-for-dinners.md"]
    assert notes["preferences/black-tea.md"]["sentiment"] == "dislike"
    assert notes["preferences/ripgrep-over-grep.md"]["content"] == "I prefer `ripgrep` over grep."
    assert notes["preferences/site-for-dinners.md"]["content"] == \
        "I love the site https://cooking.example/pasta for dinners."


@pytest.mark.parametrize("message, notes", [
    ("I prefer `ripgrep`. I hate grep.", {"preferences/ripgrep.md": "I prefer `ripgrep`.", "preferences/grep.md": "I hate grep."}),
    ("I like `tea`. My mum likes tea.", {"preferences/tea.md": "I like `tea`."}),
    ("I like [tea](http://t.example). I like tea with milk.", {"preferences/tea.md": "I like tea.",
                                                                 "preferences/tea-with-milk.md": "I like tea with milk."}),
    ("I love `os.path`. I like it.", {}),  # (a code span holding a sentence's end is code: no preference of it)
])
def test_each_sentence_of_a_message_is_kept_as_written_and_alone(vault, message, notes):
    append_events(vault, "s", said("s", (message, "Noted.")))
    commit_session(vault, "s")
    got = {e.uri: vault.read_note(e.uri).fields["content"] for e in vault.catalog.all("preference")}
    assert got == notes


def test_commit_and_ingest_take_the_provider_asked_for(tmp_path):
    root = tmp_path / "v"
    vault = Vault.init(root)
    append_events(vault, "s", said("s", ("I love mangosteen.", "Noted."),))
    vault.close()
    doc = tmp_path / "durian.md"
    doc.write_text("# Durian\n\nI love durian.\n")
    with OllamaStub(models=["llama3.2:latest"]) as stub:
        stub.script += [("json", "not the JSON asked for")] * 12
        env = {"OLLAMA_HOST": stub.host}
        r = memlink("commit", "s", vault=root, env=env)
        assert r.returncode == 1 and "does not fit" in r.stderr and "`--provider rules`" in r.stderr, r.stderr
        assert not list(root.glob("preferences/*.md"))
        r = memlink("commit", "--all", vault=root, env=env)
        assert r.returncode == 5 and "failed: 1" in r.stdout and "--all --provider rules" in r.stderr, r.stderr
        # The model's answers do not fit: the same turns, saved by the rules.
        r = memlink("commit", "s", "--provider", "rules", vault=root, env=env)
        assert r.returncode == 0 and "provider: rules" in r.stderr and "+ preferences/mangosteen.md" in r.stdout, r.stderr
        asked = len(stub.requests)
        r = memlink("ingest", str(doc), "--provider", "rules", vault=root, env=env)
        assert r.returncode == 0 and "provider: rules" in r.stderr, r.stderr
        assert len(stub.requests) == asked  # the model was not asked
    # Ollama asked for where none answers: the command stops, nothing written.
    before = sorted(p.relative_to(root) for p in root.rglob("*.md"))
    r = memlink("commit", "s", "--provider", "ollama", vault=root, env=NO_OLLAMA)
    assert r.returncode == 1 and "Ollama" in r.stderr, r.stderr
    r = memlink("ingest", str(doc), "--provider", "ollama", vault=root, env=NO_OLLAMA)
    assert r.returncode == 1 and "Ollama" in r.stderr, r.stderr
    assert sorted(p.relative_to(root) for p in root.rglob("*.md")) == before
