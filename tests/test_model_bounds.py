"""A hung or broken model costs a command a few timeouts, not one per item (docs/DESIGN.md,
"Providers"): after `llm.max_failures` failed answers in a row, ingest, commit and
import-chat go on with the rules and say so; what failed stays pending. `dream --budget`
cuts a model call still waiting. Against the real `ollama` client and a loopback server."""

from __future__ import annotations

import json
import time

import pytest
from conftest import memlink, set_llm
from ollama_stub import OllamaStub
from test_dream import conflicts
from test_linked_pages import cli_vault, write

from engine.dream import dream
from engine.extract.batch import ingest_batch, pending_sources
from engine.llm.ollama_provider import OllamaProvider
from engine.retrieve.search import search

TIMEOUT = 2.0  # llm.timeout in these tests: seconds
# The hung-model ingest's: its three timeouts take 3/5 of the bound, the rest is left for
# importing 20 files (a few seconds on a busy machine).
HUNG_TIMEOUT = 5.0


def pages(tmp_path, n: int) -> object:
    return write(tmp_path / "pages", {f"note-{i:02d}.md": f"# Note {i}\n\nI like pottery class number {i}.\n"
                                      for i in range(n)})


@pytest.mark.slow
def test_ingest_of_20_files_against_a_model_that_never_answers_finishes_within_5_timeouts(vault, tmp_path):
    folder = pages(tmp_path, 20)
    with OllamaStub() as stub:
        v = set_llm(vault.root, provider="ollama", model="tiny", host=stub.host, timeout=HUNG_TIMEOUT)
        stub.script += [("hang", 120)] * 20  # a model that takes every request and never answers
        search(v, "warm up")  # (the search index and its embedding model, loaded before the clock starts)
        started = time.monotonic()
        result = ingest_batch(v, [folder])
        took = time.monotonic() - started
    assert took <= 5 * HUNG_TIMEOUT, took
    assert len(stub.requests) == 3  # three timeouts in a row, then the model is asked no more
    assert "3 model answers failed in a row" in result.fallback and "did not answer" in result.fallback
    assert len(result.pending) == 3  # kept, marked pending: the next run retries them with the model
    done = [r.report for r in result.files if r.source_uri not in {p["source"] for p in result.pending}]
    assert len(done) == 17 and {r.provider for r in done} == {"rules"}
    assert len(pending_sources(v)) == 3


def test_commit_gives_up_on_a_failing_model_across_its_pending_sources_and_says_so(tmp_path):
    root = cli_vault(tmp_path)
    folder = pages(tmp_path, 3)
    session = root / "sessions" / "s.jsonl"
    session.parent.mkdir(exist_ok=True)
    session.write_text("".join(json.dumps({"session": "s", "id": str(i), "role": role, "content": text,
                                           "ts": "2026-11-01T10:00:00Z"}) + "\n"
                               for i, (role, text) in enumerate([("user", "I love glaze chemistry."), ("assistant", "Noted.")])))
    with OllamaStub() as stub:
        set_llm(root, provider="ollama", model="tiny", host=stub.host, timeout=TIMEOUT, max_failures=2).close()
        stub.script += [("status", 500, "model crashed")] * 10
        r = memlink("ingest", str(folder), vault=root)
        assert r.returncode == 5 and len(stub.requests) == 2  # the third file went to the rules
        assert "memlink: model: 2 model answers failed in a row" in r.stderr and "the rules extracted the rest" in r.stderr
        r = memlink("commit", "s", vault=root)
    # The two pending sources failed again, so the session's turns went to the rules.
    assert len(stub.requests) == 4, [q["path"] for q in stub.requests]
    assert r.returncode == 5 and "memlink: model: 2 model answers failed in a row" in r.stderr
    assert "[provider: rules]" in r.stdout and "session s:" in r.stdout


def test_import_chat_gives_up_on_a_failing_model_and_reports_it(tmp_path):
    root = cli_vault(tmp_path)
    chat = tmp_path / "chat.jsonl"
    lines = []
    for n in range(20):
        lines += [{"session": "c", "id": f"q{n}", "role": "user", "content": f"Question {n} about kilns?"},
                  {"session": "c", "id": f"a{n}", "role": "assistant", "content": f"Answer {n}: cone 6."}]
    chat.write_text("".join(json.dumps({**line, "ts": "2026-11-01T10:00:00Z"}) + "\n" for line in lines))
    with OllamaStub() as stub:
        set_llm(root, provider="ollama", model="tiny", host=stub.host, timeout=TIMEOUT).close()
        stub.script += [("json", "not the contract")] * 20
        r = memlink("import-chat", str(chat), "--json", vault=root)
    report = json.loads(r.stdout)
    assert r.returncode == 5 and len(stub.requests) == 3
    assert len(report["failed"]) == 3 and report["extracted"] == 17  # the failed turns wait for the next import
    assert report["fallback"].startswith("3 model answers failed in a row") and "rules" in report["fallback"]


def test_the_dream_budget_cuts_a_model_call_in_flight(vault):
    questions = conflicts(vault, 2)
    with OllamaStub() as stub:
        provider = OllamaProvider("tiny", host=stub.host, timeout=120)
        stub.script.append(("hang", 120))
        started = time.monotonic()
        result = dream(vault, provider=provider, budget=5.0)
        took = time.monotonic() - started
    assert took < 60, took  # the call was cut at the budget, not at the model's 120 s timeout
    assert len(stub.requests) == 1 and result.failed == questions[:1] and result.deferred == questions[1:]
    assert "did not answer within" in result.skipped[0]
