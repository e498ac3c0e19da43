"""A vault's typed services: one per open vault, built on first use, closed with the
vault; the chat's per-session locks; no string-keyed caches left anywhere."""

from __future__ import annotations

import ast
import threading
import time
from pathlib import Path

from conftest import REPO, set_llm
from ollama_stub import OllamaStub

from engine import Vault
from engine.extract.inputs import choose_extractor
from engine.extract.rules import RulesExtractor
from engine.index import SearchIndex
from engine.search import search
from engine.services import KeyedLocks, Services
from engine.sessions.chat import ChatSession
from engine.sessions.extract import RulesTurnExtractor
from engine.sessions.log import append_events
from engine.sessions.recall import TurnMemory


def write_two(v: Vault) -> None:
    v.write_note("entity", {"name": "Caroline", "kind": "person", "content": "Caroline glazes celadon tiles."})
    v.write_note("entity", {"name": "Atlas", "kind": "project", "content": "Atlas is the harbour scheduling rewrite."})


def test_open_use_and_close_flushes_the_index(vault):
    write_two(vault)
    services = vault.services
    assert services is vault.services and Services.for_vault(vault) is services
    assert services.loaded_index is None  # nothing is built before it is asked for
    index = services.index
    assert services.loaded_index is index and SearchIndex.for_vault(vault) is index
    assert search(vault, "celadon", k=1)[0].uri == "entities/caroline.md"
    assert services.graph.nodes >= {"entities/caroline.md", "entities/atlas.md"}
    assert TurnMemory.for_vault(vault) is services.turns
    vault.write_note("entity", {"name": "Noor", "kind": "person", "content": "Noor repairs looms."})
    assert index.dirty  # searchable now, on disk only at the next checkpoint
    fresh = SearchIndex(Vault.open(vault.root))
    fresh.load()
    assert "entities/noor.md" not in fresh.indexed
    vault.close()
    assert vault.services.loaded_index is None and index.on_vault_change not in vault.listeners
    fresh = SearchIndex(Vault.open(vault.root))
    fresh.load()
    assert "entities/noor.md" in fresh.indexed  # close flushed the snapshot


def test_sync_picks_up_an_edit_made_outside(vault):
    write_two(vault)
    assert vault.services.index is not None  # build the index now, so the edit below comes after it
    (vault.root / "entities" / "atlas.md").write_text(
        (vault.root / "entities" / "atlas.md").read_text().replace("harbour scheduling", "lighthouse tariff"))
    report = vault.services.sync()
    assert report is not None and report.changed == 1
    assert search(vault, "lighthouse tariff", k=1)[0].uri == "entities/atlas.md"


def test_two_vaults_never_share_services(tmp_path):
    a, b = Vault.init(tmp_path / "a"), Vault.init(tmp_path / "b")
    write_two(a)
    assert a.services is not b.services
    assert a.services.index is not b.services.index
    assert a.services.graph is not b.services.graph
    assert a.services.names is not b.services.names
    assert search(b, "celadon", k=1) == []
    again = Vault.open(a.root)  # the same folder opened twice is two vaults too
    assert again.services is not a.services and again.services.graph is not a.services.graph


def test_graph_is_rebuilt_after_a_link_write_and_names_after_a_new_note(vault):
    write_two(vault)
    g1 = vault.services.graph
    assert vault.services.graph is g1
    vault.link("entities/caroline.md", "entities/atlas.md", "belongs_to", weight=0.8)
    g2 = vault.services.graph
    assert g2 is not g1 and g2.g.has_edge("entities/caroline.md", "entities/atlas.md")
    names = vault.services.names
    assert vault.services.names is names
    vault.write_note("entity", {"name": "Noor", "kind": "person", "content": "Noor repairs looms."})
    assert vault.services.names is not names
    assert vault.services.names.kind("entities/noor.md") == "person"


def test_operations_model_is_built_once_per_type_registry(vault):
    from engine.extract.operations import operations_model

    model = vault.services.operations_model
    assert vault.services.operations_model is model
    built = operations_model(vault.types, [t.memory_type for t in vault.types if t.link_enabled])
    assert model.model_json_schema() == built.model_json_schema()
    assert Vault.open(vault.root).services.operations_model is not model


def test_choose_extractor_leaves_the_matcher_to_the_services(vault):
    rules = set_llm(vault.root, provider="rules")
    extractor, health = choose_extractor(rules)
    assert isinstance(extractor, RulesExtractor) and health.provider == "rules"
    assert rules.matcher.relocate(["gone"], "new text") is None  # exact search only
    with OllamaStub() as stub:
        v = set_llm(vault.root, model="tiny", host=stub.host)
        before = type(v.services.matcher)
        extractor, health = choose_extractor(v)
        assert extractor.name == "ollama:tiny" and health.ok
        assert type(v.services.matcher) is before  # nothing replaced behind anyone's back
        stub.script.append(("json", '{"t_line_ranges": "2"}'))
        assert v.matcher.relocate(["Caroline likes tea."], "Caroline leads Atlas.\nShe drinks tea.") == "2"
        assert "Find where these passages are now" in stub.requests[-1]["body"]["messages"][0]["content"]


def test_session_locks_serialise_one_session_and_are_dropped_when_idle():
    locks = KeyedLocks()
    inside, overlap = [], []

    def work(key: str) -> None:
        with locks.hold(key):
            inside.append(key)
            if inside.count(key) > 1:
                overlap.append(key)
            time.sleep(0.02)
            inside.remove(key)

    threads = [threading.Thread(target=work, args=(k,)) for k in ["s1"] * 4 + ["s2"] * 4]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlap == [] and len(locks) == 0


def test_background_extraction_leaves_no_lock_behind(vault):
    for n in range(3):
        session = f"2026-11-0{n + 1}-s{n}"
        append_events(vault, session, [
            {"session": session, "id": f"{session}-q", "role": "user", "content": "I moved to Lisbon.",
             "ts": "2026-11-01T10:00:00Z"},
            {"session": session, "id": f"{session}-a", "role": "assistant", "content": "Noted.",
             "ts": "2026-11-01T10:00:05Z"},
        ])
        chat = ChatSession(vault, session, turn_extractor=RulesTurnExtractor({}))
        done: list = []
        chat.extract_in_background(done.append).join()
        assert done and not isinstance(done[0], Exception) and done[0].extracted == 1
    assert len(vault.services.session_locks) == 0


# -- no string-keyed caches ------------------------------------------------------------------


def _vault_cache_uses(path: Path) -> int:
    found = 0
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and node.attr in ("cache", "cache_lock"):
            owner = node.value
            name = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else ""
            if name in ("vault", "v", "_vault") or name.endswith("vault"):
                found += 1
    return found


def test_no_string_keyed_vault_cache_anywhere():
    uses = {}
    for folder in ("engine", "memlink_tui", "benchmarks"):
        for path in sorted((REPO / folder).rglob("*.py")):
            count = _vault_cache_uses(path)
            if count:
                uses[path.relative_to(REPO).as_posix()] = count
    assert uses == {}, "vault.cache is gone: use vault.services"
    assert not hasattr(Vault, "cache")
