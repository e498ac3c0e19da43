"""The Ollama provider through the real `ollama` client against a loopback server."""

from __future__ import annotations

import socket

import pytest
from pydantic import BaseModel, ConfigDict

from engine.config import LLMConfig
from engine.llm import LLMError, LLMInvalidOutput, LLMModelMissing, LLMTimeout, LLMUnavailable
from engine.llm.ollama_provider import OllamaProvider
from engine.llm.select import provider_status
from ollama_stub import OllamaStub


class TurnSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")
    summary: str
    outcome: str


@pytest.fixture
def stub():
    with OllamaStub() as s:
        yield s


def test_structured_output_validates_and_sends_the_schema(stub):
    stub.script.append(("json", '{"summary": "planned the week", "outcome": "completed"}'))
    p = OllamaProvider("tiny", host=stub.host, timeout=5, max_tokens=256)
    out = p.structured([{"role": "user", "content": "hi"}], TurnSummary)
    assert out == TurnSummary(summary="planned the week", outcome="completed")
    body = stub.requests[-1]["body"]
    assert body["format"] == TurnSummary.model_json_schema()
    assert body["options"]["temperature"] == 0 and body["options"]["num_predict"] == 256
    assert body["stream"] is False


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"summary": "x"}', "outcome: Field required"),
        ('{"summary": "x", "outcome": "y", "extra": 1}', "extra: Extra inputs are not permitted"),
        ("Sure! Here is the summary: planned the week.", "Invalid JSON"),
        ('{"summary": "x", "outcome": "y"', "Invalid JSON"),  # truncated: no repair
    ],
)
def test_invalid_output_is_an_error_with_the_raw_text_kept(stub, content, message):
    stub.script.append(("json", content))
    p = OllamaProvider("tiny", host=stub.host, timeout=5)
    with pytest.raises(LLMInvalidOutput, match=message) as info:
        p.structured([{"role": "user", "content": "hi"}], TurnSummary)
    assert info.value.raw == content
    assert len(stub.requests) == 1  # no retry


def test_missing_model(stub):
    stub.script.append(("status", 404, "model 'nope' not found"))
    p = OllamaProvider("nope", host=stub.host, timeout=5)
    with pytest.raises(LLMModelMissing, match="ollama pull nope"):
        p.structured([{"role": "user", "content": "hi"}], TurnSummary)
    health = p.health()
    assert not health.ok and "ollama pull nope" in health.detail


def test_timeout(stub):
    stub.script.append(("hang", 3))
    p = OllamaProvider("tiny", host=stub.host, timeout=0.5)
    with pytest.raises(LLMTimeout, match="did not answer within 0.5s"):
        p.structured([{"role": "user", "content": "hi"}], TurnSummary)


def test_server_error(stub):
    stub.script.append(("status", 500, "out of memory"))
    with pytest.raises(LLMError, match="500"):
        OllamaProvider("tiny", host=stub.host, timeout=5).structured([{"role": "user", "content": "hi"}], TurnSummary)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_connection_refused_says_how_to_start_ollama():
    p = OllamaProvider("tiny", host=f"http://127.0.0.1:{free_port()}", timeout=2)
    with pytest.raises(LLMUnavailable, match="ollama serve"):
        p.structured([{"role": "user", "content": "hi"}], TurnSummary)
    assert "not running" in p.health().detail


def test_provider_selection_says_which_and_why(stub):
    provider, health = provider_status(LLMConfig(model="tiny", host=stub.host))
    assert provider is not None and health.ok and health.provider == "ollama:tiny"
    provider, health = provider_status(LLMConfig(model="other", host=stub.host))
    assert provider is None and health.provider == "rules" and "ollama pull other" in health.detail
    provider, health = provider_status(LLMConfig(provider="rules", host=stub.host))
    assert provider is None and "llm.provider: rules" in health.detail
    down = f"http://127.0.0.1:{free_port()}"
    provider, health = provider_status(LLMConfig(host=down))
    assert provider is None and "not running" in health.detail
    provider, health = provider_status(LLMConfig(provider="ollama", host=down))
    assert provider is not None and not health.ok


def test_doctor_reports_the_provider_and_why(tmp_path, stub):
    import yaml

    from engine import Vault
    from test_cli import memlink

    root = tmp_path / "v"
    Vault.init(root)
    r = memlink("doctor", vault=root, env={"OLLAMA_HOST": f"http://127.0.0.1:{free_port()}"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "LLM provider     rules: zero-LLM rules provider, because Ollama is not running" in r.stdout
    cfg = yaml.safe_load((root / "memlink.yaml").read_text())
    cfg["llm"] = {"model": "tiny", "host": stub.host}
    (root / "memlink.yaml").write_text(yaml.safe_dump(cfg))
    r = memlink("doctor", vault=root)
    assert "ok   LLM provider     ollama:tiny: Ollama at" in r.stdout
    cfg["llm"] = {"provider": "ollama", "model": "missing", "host": stub.host}
    (root / "memlink.yaml").write_text(yaml.safe_dump(cfg))
    r = memlink("doctor", vault=root)
    assert r.returncode == 3 and "ollama pull missing" in r.stdout


def test_doctor_without_a_vault_still_checks_the_model_and_ollama(tmp_path):
    from test_cli import memlink

    r = memlink("doctor", vault=tmp_path / "nowhere", env={"OLLAMA_HOST": f"http://127.0.0.1:{free_port()}"})
    assert r.returncode == 3
    assert "FIX  vault" in r.stdout and "memlink init" in r.stdout and "memlink demo" in r.stdout
    assert "ok   embedding model" in r.stdout and "Ollama is not running" in r.stdout
    assert not (tmp_path / "nowhere").exists()
