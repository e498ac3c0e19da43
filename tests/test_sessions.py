"""Chat sessions as memory: data contract, turn capture, navigation and recall, on our own
session host (docs/DESIGN.md, "Session logs and events")."""

from __future__ import annotations

import json

import networkx as nx
import pytest
from ollama_stub import OllamaStub
from pydantic import ValidationError

from engine.sessions.contract import TurnExtraction
from engine.sessions.events import SessionEvent
from engine.sessions.extract import LLMTurnExtractor, RulesTurnExtractor
from engine.sessions.importer import extract_pending, import_chat
from engine.sessions.log import append_events, project_turns, read_events
from engine.sessions.recall import TurnMemory, label_propagation
from engine.sessions.store import TurnStore, term_id


# -- data contract --------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [
    {"summary": "s", "outcome": "completed"},  # a top-level field missing
    {"summary": "s", "outcome": "done", "triples": []},  # outcome outside the enum
    {"summary": "s", "outcome": "completed", "triples": [{"subject": "a", "predicate": "b"}]},  # triple incomplete
    {"summary": "s", "outcome": "completed", "triples": [], "confidence": 0.9},  # extra field
    {"summary": "", "outcome": "completed", "triples": []},  # empty summary
])
def test_contract_rejects(bad):
    with pytest.raises(ValidationError):
        TurnExtraction.model_validate(bad)


def test_contract_accepts_empty_triples():
    assert TurnExtraction.model_validate({"summary": "s", "outcome": "unknown", "triples": []}).triples == []


# -- turn capture ---------------------------------------------------------------------------
EVENTS = [
    {"id": "1", "role": "user", "content": "Plan my Kyoto trip with Tom Vermeulen", "ts": "2026-11-01T10:00:00Z"},
    {"id": "2", "role": "assistant", "kind": "reasoning", "content": "thinking about trains", "ts": "2026-11-01T10:00:01Z"},
    {"id": "3", "role": "tool", "content": "search(kyoto)", "ts": "2026-11-01T10:00:02Z"},
    {"id": "4", "role": "assistant", "kind": "draft", "content": "Draft: day 1 …", "ts": "2026-11-01T10:00:03Z"},
    {"id": "5", "role": "assistant", "content": "Booked: three days in Kyoto, temples first.", "ts": "2026-11-01T10:00:04Z"},
    {"id": "6", "role": "user", "kind": "recall", "content": "[recalled] an old turn", "ts": "2026-11-01T10:00:05Z"},
    {"id": "7", "role": "user", "content": "And a ryokan?", "ts": "2026-11-01T10:01:00Z"},
]


def ev(raw: list[dict]) -> list[SessionEvent]:
    """Log lines of session "s" as events."""
    return [SessionEvent.model_validate({"session": "s", **e}) for e in raw]


def test_projection_keeps_the_question_and_the_visible_answer():
    (first, second) = project_turns("s", ev(EVENTS[:-1] + [EVENTS[-1], {"id": "8", "role": "assistant", "content": "Yes.", "ts": "x"}]))
    assert first.source_ids == ["1", "5"]
    assert set(first.skipped) == {"2", "3", "4", "6"}  # reasoning, tools, drafts, recall snapshots
    assert second.source_ids == ["7", "8"]
    assert project_turns("s", ev(EVENTS)) [-1].source_ids == ["1", "5"]  # "7" has no answer yet: not complete
    assert project_turns("s", ev(EVENTS), final=True)[-1].source_ids == ["7"]  # a finished transcript keeps it


def test_projection_keeps_every_message():
    """Sessions that open with the other side, several messages in a row from one side:
    every visible message lands in exactly one turn, in order."""
    events = [
        {"id": "a1", "role": "assistant", "content": "Morning! How was the trip?", "ts": "t1"},
        {"id": "u1", "role": "user", "content": "Great.", "ts": "t2"},
        {"id": "u2", "role": "user", "content": "We saw the temples in Kyoto.", "ts": "t3"},
        {"id": "a2", "role": "assistant", "content": "Lovely!", "ts": "t4"},
        {"id": "a3", "role": "assistant", "content": "Which one did you like best?", "ts": "t5"},
        {"id": "u3", "role": "user", "content": "Kinkaku-ji [image: a golden temple by a pond]", "ts": "t6"},
    ]
    turns = project_turns("s", ev(events), final=True)
    assert [t.source_ids for t in turns] == [["a1"], ["u1", "u2", "a2", "a3"], ["u3"]]
    assert turns[0].question["content"] == "" and turns[0].answer["content"] == "Morning! How was the trip?"
    assert turns[1].question["content"] == "Great.\nWe saw the temples in Kyoto."
    assert turns[1].answer["content"] == "Lovely!\nWhich one did you like best?"
    assert [t.pos for t in turns] == [0, 1, 2]
    assert [t.source_ids for t in project_turns("s", ev(events))] == [["a1"], ["u1", "u2", "a2", "a3"]]


def test_replaying_a_session_creates_nothing_new(vault, tmp_path):
    path = tmp_path / "chat.jsonl"
    path.write_text("\n".join(json.dumps({"session": "trip", **e}) for e in EVENTS + [
        {"id": "8", "role": "assistant", "content": "Yes, one night in a ryokan in Gion.", "ts": "2026-11-01T10:02:00Z"}]) + "\n")
    first = import_chat(vault, path, RulesTurnExtractor({"tom vermeulen": "Tom Vermeulen"}))
    assert (first.turns, first.extracted, first.events_added) == (2, 2, 8)
    log_before = (vault.root / "sessions" / "trip.jsonl").read_bytes()
    again = import_chat(vault, path, RulesTurnExtractor())
    assert (again.extracted, again.already, again.events_added) == (0, 2, 0)
    assert (vault.root / "sessions" / "trip.jsonl").read_bytes() == log_before  # the log is never rewritten
    assert len(TurnStore(vault).all()) == 2


def test_terms_are_shared_across_turns_and_ids_are_stable(vault):
    append_events(vault, "s", [
        {"session": "s", "id": "a1", "role": "user", "content": "Lunch with Noor El Mansouri at the studio", "ts": "2026-11-01"},
        {"session": "s", "id": "a2", "role": "assistant", "content": "Noted.", "ts": "2026-11-01"},
        {"session": "s", "id": "b1", "role": "user", "content": "Noor El Mansouri lent me her kiln", "ts": "2026-11-02"},
        {"session": "s", "id": "b2", "role": "assistant", "content": "Nice of her.", "ts": "2026-11-02"},
    ])
    extract_pending(vault, ["s"], RulesTurnExtractor())
    turns = TurnStore(vault).all()
    ids = [{t["object_id"] for t in turn["triples"]} for turn in turns]
    assert term_id("Noor El Mansouri") in ids[0] & ids[1]
    assert term_id("Noor  El   Mansouri") == term_id("noor el mansouri")  # whitespace/case normalised only


def test_label_propagation_is_deterministic_with_ties_by_label():
    g = nx.Graph([("b", "c"), ("a", "c"), ("x", "y")])
    first = label_propagation(g)
    assert first == label_propagation(nx.Graph(list(reversed(list(g.edges)))))
    assert first["a"] == first["b"] == first["c"] and first["x"] == first["y"] != first["a"]


# -- recall ---------------------------------------------------------------------------------
@pytest.fixture
def imported(sample, tmp_path):
    path = tmp_path / "all.jsonl"
    path.write_text("".join(p.read_text(encoding="utf-8") for p in sorted((sample.root / "sessions").glob("*.jsonl"))))
    from engine.sessions.importer import turn_extractor

    report = import_chat(sample, path, turn_extractor(sample))
    assert report.extracted == 36 and not report.failed
    return sample


def test_recall_returns_the_original_q_and_a(imported):
    hits = TurnMemory.for_vault(imported).recall("vegetarian at family dinners", k=3)
    assert hits and any("vegetarian" in h.question.lower() for h in hits)
    top = hits[0]
    events = {e.key: e for e in read_events(imported, top.session)}
    assert [events[i].content for i in top.sources] == [top.question, top.answer]  # exact, not a summary


def test_recall_by_a_named_entity_goes_through_the_graph(imported):
    hits = TurnMemory.for_vault(imported).recall("What did Noor say?", k=3)
    assert hits and any("graph" in r for h in hits for r in h.routes)
    assert any("Noor" in h.question for h in hits)
    assert any(t["object"].startswith("Noor") or t["subject"].startswith("Noor") for h in hits for t in h.triples)


def test_visible_turns_are_not_repeated_and_unrelated_questions_recall_nothing(imported):
    memory = TurnMemory.for_vault(imported)
    hits = memory.recall("vegetarian at family dinners", k=3)
    visible = set(hits[0].sources)
    assert hits[0].memory_id not in [h.memory_id for h in memory.recall("vegetarian at family dinners", k=3, visible=visible)]
    assert memory.recall("quantum chromodynamics lecture notes", k=5) == []


def test_failed_turn_extraction_is_quarantined_and_retried_later(vault):
    append_events(vault, "s", [
        {"session": "s", "id": "1", "role": "user", "content": "Remind me about the dentist", "ts": "2026-11-01"},
        {"session": "s", "id": "2", "role": "assistant", "content": "Done.", "ts": "2026-11-01"},
    ])
    with OllamaStub() as stub:
        from engine.llm.ollama_provider import OllamaProvider

        extractor = LLMTurnExtractor(OllamaProvider("tiny", host=stub.host, timeout=3))
        stub.script.append(("json", "Sure! The user wants a dentist reminder."))  # free text, not the contract
        report = extract_pending(vault, ["s"], extractor)
        assert report.extracted == 0 and len(report.failed) == 1
        assert "kept in .memlink/quarantine/" in report.failed[0]
        assert TurnStore(vault).all() == []
        stub.script.append(("json", json.dumps({"summary": "dentist reminder set", "outcome": "completed", "triples": []})))
        report = extract_pending(vault, ["s"], extractor)
        assert report.extracted == 1
        assert "Current Turn".lower() in stub.requests[-1]["body"]["messages"][0]["content"].lower()


def test_live_extraction_reads_the_previous_turn_summaries_quoted(vault):
    """Chat extracts each turn on its own run; the model still reads the summaries of the
    session's turns before it (``chat.previous_summaries`` of them), as fenced data."""
    import yaml

    from engine.llm.fence import data
    from engine.llm.ollama_provider import OllamaProvider
    from engine.storage.vault import Vault

    def ask(n: int, question: str, answer: str) -> None:
        append_events(vault, "s", [
            {"session": "s", "id": f"q{n}", "role": "user", "content": question, "ts": "2026-11-01"},
            {"session": "s", "id": f"a{n}", "role": "assistant", "content": answer, "ts": "2026-11-01"},
        ])

    def reply(summary: str) -> tuple[str, str]:
        return ("json", json.dumps({"summary": summary, "outcome": "informational", "triples": []}))

    def prompt(request: dict) -> str:
        return request["body"]["messages"][0]["content"]

    with OllamaStub() as stub:
        extractor = LLMTurnExtractor(OllamaProvider("tiny", host=stub.host, timeout=3))
        ask(1, "My sister Ines runs a pottery studio in Delft.", "Nice, noted.")
        stub.script.append(reply("Ines, the user's sister,\nruns a pottery studio in Delft"))
        assert extract_pending(vault, ["s"], extractor).extracted == 1
        assert "Previous turn summaries:\n" + data("(none)") in prompt(stub.requests[-1])
        ask(2, "Is she open on Sundays?", "I don't know her hours.")
        stub.script.append(reply("The user asked whether Ines's studio opens on Sundays"))
        assert extract_pending(vault, ["s"], extractor).extracted == 1
        second = prompt(stub.requests[-1])
        # quoted line by line, in its own fence
        assert "Previous turn summaries:\n" + data("- Ines, the user's sister,\nruns a pottery studio in Delft") in second

        cfg = yaml.safe_load((vault.root / "memlink.yaml").read_text())
        cfg["chat"] = {"previous_summaries": 1}
        (vault.root / "memlink.yaml").write_text(yaml.safe_dump(cfg))
        one = Vault.open(vault.root)
        ask(3, "What does she make?", "Mugs, you said.")
        stub.script.append(reply("Ines makes mugs"))
        assert extract_pending(one, ["s"], extractor).extracted == 1
        third = prompt(stub.requests[-1])
        assert "| - The user asked whether Ines's studio opens on Sundays" in third and "Delft\n" not in third.split("CURRENT TURN")[0]


def test_cli_import_chat_and_batch_recall(vault, tmp_path):
    from conftest import memlink

    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps({"session": "k", **e}) + "\n" for e in EVENTS[:5]))
    vault.close()
    r = memlink("import-chat", str(path), vault=vault.root)
    assert r.returncode == 0 and "1 extracted for recall" in r.stdout and "memlink commit --all" in r.stdout, r.stderr
    questions = tmp_path / "q.txt"
    questions.write_text("Kyoto trip\nquantum chromodynamics\n")
    out = memlink("recall", "--batch", str(questions), vault=vault.root)
    lines = [json.loads(l) for l in out.stdout.splitlines()]
    assert [l["query"] for l in lines] == ["Kyoto trip", "quantum chromodynamics"]
    assert lines[0]["hits"][0]["sources"] == ["1", "5"] and lines[1]["hits"] == []
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"session": "x", "id": 1}\n')
    r = memlink("import-chat", str(bad), vault=vault.root)
    assert r.returncode == 1 and "line 1: has no role or content or ts (it may be null" in r.stderr, r.stderr


def test_communities_narrow_the_candidates(vault):
    append_events(vault, "s", [
        {"session": "s", "id": "1", "role": "user", "content": "Astrid Holm and Bram Visser run the harbour audit", "ts": "t"},
        {"session": "s", "id": "2", "role": "assistant", "content": "Noted.", "ts": "t"},
        {"session": "s", "id": "3", "role": "user", "content": "Chen Wei and Dara Okafor plan the garden party", "ts": "t"},
        {"session": "s", "id": "4", "role": "assistant", "content": "Noted.", "ts": "t"},
    ])
    extract_pending(vault, ["s"], RulesTurnExtractor())
    memory = TurnMemory.for_vault(vault)
    seeds = memory.literal_terms("What is Astrid doing?")
    assert [memory.term_text[s] for s in seeds] == ["Astrid Holm"]
    hits = memory.graph_route(seeds, 5)
    assert [memory.turns[m]["sources"] for m, _, _ in hits] == [["1", "2"]]  # the other community stays out
