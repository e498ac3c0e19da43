"""The providers: Ollama through the real `ollama` client against a loopback server, the
rules provider, and the registry that chooses between them once per configuration."""

from __future__ import annotations

import socket

import pytest
from ollama_stub import OllamaStub
from pydantic import BaseModel, ConfigDict

from engine.llm import Health, LLMError, LLMInvalidOutput, LLMModelMissing, LLMTimeout, LLMUnavailable, NeedsOllama, Provider
from engine.llm.ollama_provider import OllamaProvider
from engine.llm.registry import ProviderRegistry, refresh
from engine.llm.rules_provider import RulesProvider
from engine.model.config import LLMConfig


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
    assert "not running" in p.health().summary


def test_provider_selection_says_which_and_why(stub):
    chosen = refresh(LLMConfig(model="tiny", host=stub.host))
    assert chosen.llm is not None and chosen.health.ok and chosen.health.provider == "ollama:tiny"
    chosen = refresh(LLMConfig(model="other", host=stub.host))
    assert chosen.llm is None and chosen.health.provider == "rules" and "ollama pull other" in chosen.health.summary
    chosen = refresh(LLMConfig(provider="rules", host=stub.host))
    assert chosen.llm is None and "llm.provider: rules" in chosen.health.summary
    down = f"http://127.0.0.1:{free_port()}"
    chosen = refresh(LLMConfig(host=down))
    assert chosen.llm is None and "not running" in chosen.health.summary
    chosen = refresh(LLMConfig(provider="ollama", host=down))  # asked for: kept, its error shown when used
    assert chosen.provider.is_llm and chosen.llm is None and not chosen.health.ok


def test_doctor_reports_the_provider_and_why(tmp_path, stub):
    import yaml
    from conftest import memlink

    from engine import Vault

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
    from conftest import memlink

    r = memlink("doctor", vault=tmp_path / "nowhere", env={"OLLAMA_HOST": f"http://127.0.0.1:{free_port()}"})
    assert r.returncode == 3
    assert "FIX  vault" in r.stdout and "memlink init" in r.stdout and "memlink demo" in r.stdout
    assert "ok   embedding model" in r.stdout and "Ollama is not running" in r.stdout
    assert not (tmp_path / "nowhere").exists()


# -- the provider interface, chat models only, the registry -------------------------------------
def test_embedding_models_are_never_offered_as_chat_models():
    with OllamaStub(models=["llama3.2:latest"], embedding=["nomic-embed-text:latest"]) as stub:
        p = OllamaProvider("llama3.2", host=stub.host, timeout=5)
        assert p.models() == ["llama3.2:latest"]
        assert p.health().ok
        embed = OllamaProvider("nomic-embed-text", host=stub.host, timeout=5).health()
        assert embed.state == "degraded" and "embedding model" in embed.reason and "chat model" in embed.fix
        chosen = ProviderRegistry().get(LLMConfig(model="nomic-embed-text", host=stub.host))
        assert chosen.provider.name == "rules" and chosen.llm is None and chosen.health.fallback


def test_registry_checks_once_per_configuration_until_refreshed(stub):
    registry = ProviderRegistry()
    cfg = LLMConfig(model="tiny", host=stub.host)
    first = registry.get(cfg)
    assert first.llm is not None and first.health.ok and first.provider.name == "ollama:tiny"
    assert registry.get(cfg) is first and registry.get(cfg.model_copy()) is first
    assert stub.count("/api/tags") == 1 and registry.checks == 1
    again = registry.refresh(cfg)
    assert again is not first and registry.get(cfg) is again
    assert stub.count("/api/tags") == 2 and registry.checks == 2
    registry.get(LLMConfig(provider="rules", host=stub.host))  # another configuration: its own choice
    assert stub.count("/api/tags") == 2 and registry.checks == 3


def test_one_health_check_per_process_for_every_engine_caller(tmp_path, stub):
    from conftest import set_llm

    from engine import Vault
    from engine.extract.inputs import choose_extractor
    from engine.llm.registry import refresh, selection
    from engine.sessions.importer import turn_extractor

    Vault.init(tmp_path / "a")
    Vault.init(tmp_path / "b")
    a = set_llm(tmp_path / "a", model="tiny", host=stub.host, timeout=7)  # a configuration no other test uses
    b = set_llm(tmp_path / "b", model="tiny", host=stub.host, timeout=7)
    extractor, health = choose_extractor(a)
    assert extractor.name == "ollama:tiny" and health.ok
    assert turn_extractor(a).name == "ollama:tiny"
    assert selection(b.config.llm).provider is selection(a.config.llm).provider and selection(b.config.llm).health.ok
    assert stub.count("/api/tags") == 1
    assert refresh(a.config.llm).health.ok and stub.count("/api/tags") == 2


def test_rules_provider_is_a_provider_with_typed_refusals():
    rules = RulesProvider()
    assert isinstance(rules, Provider) and not rules.is_llm and rules.models() == []
    health = rules.health()
    assert health.ok and health.state == "ok" and health.provider == "rules" and "llm.provider: rules" in health.reason
    assert health.line() == "LLM: rules (by choice)"
    with pytest.raises(NeedsOllama, match="ollama serve") as info:
        rules.structured([{"role": "user", "content": "hi"}], TurnSummary)
    assert isinstance(info.value, LLMUnavailable) and "chat" not in info.value.reason
    with pytest.raises(NeedsOllama, match="chat replies need an LLM"):
        next(iter(rules.stream_chat([{"role": "user", "content": "hi"}])))


def test_health_reads_without_splitting_a_message():
    down = f"http://127.0.0.1:{free_port()}"
    chosen = ProviderRegistry().get(LLMConfig(host=down))
    h = chosen.health
    assert chosen.provider.name == "rules" and h.ok and h.fallback
    assert h.reason == f"Ollama is not running at {down}" and "ollama serve" in h.fix
    assert h.line() == f"LLM: rules (Ollama is not running at {down})"
    assert h.summary.startswith(f"zero-LLM rules provider, because Ollama is not running at {down}; start it")
    with pytest.raises(NeedsOllama, match="Ollama is not running"):
        chosen.provider.structured([], TurnSummary)
    explicit = ProviderRegistry().get(LLMConfig(provider="ollama", host=down))
    assert explicit.provider.is_llm and explicit.llm is None
    assert explicit.health.state == "unavailable" and explicit.health.line() == "LLM: ollama llama3.2 — unavailable"
    ok = Health(state="ok", provider="ollama:tiny", reason="Ollama at x has tiny")
    assert ok.line() == "LLM: ollama tiny" and ok.summary == "Ollama at x has tiny"


def test_racing_first_uses_share_one_check(stub):
    import threading

    registry = ProviderRegistry()
    cfg = LLMConfig(model="tiny", host=stub.host)
    seen = []
    threads = [threading.Thread(target=lambda: seen.append(registry.get(cfg))) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(s) for s in seen}) == 1 and registry.checks == 1 and stub.count("/api/tags") == 1


def test_a_stream_that_breaks_off_is_said_in_plain_words(stub):
    stub.script.append(("cut", "Half an"))
    p = OllamaProvider("tiny", host=stub.host, timeout=5)
    got = []
    with pytest.raises(LLMError) as info:
        for piece in p.stream_chat([{"role": "user", "content": "hi"}]):
            got.append(piece)
    assert "broke off before the answer was complete" in str(info.value)
    assert "RemoteProtocolError" not in str(info.value) and "try again" in info.value.fix
