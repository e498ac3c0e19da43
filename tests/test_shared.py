"""What a vault keeps for itself (``vault.shared``): one search index, one link graph, one
name index, one turn memory, one operations model, one table of session locks per open
vault, made on first use, made again when the store's change feed says what they derive
from changed, closed with the vault. Nothing of a vault is kept anywhere else: no
string-keyed or module-level cache in engine/."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import REPO, set_llm
from ollama_stub import OllamaStub

from engine import Vault
from engine.extract import operations
from engine.extract.inputs import choose_extractor
from engine.extract.rules import RulesExtractor
from engine.graph import LinkGraph
from engine.index import SearchIndex
from engine.model.schema import TypeRegistry
from engine.retrieve.names import NameIndex
from engine.retrieve.search import search
from engine.sessions.chat import ChatSession, KeyedLocks, session_locks
from engine.sessions.extract import RulesTurnExtractor
from engine.sessions.log import append_events
from engine.sessions.recall import TurnMemory

CAROLINE, ATLAS = "entities/caroline.md", "entities/atlas.md"


def write_two(v: Vault) -> None:
    v.write_note("entity", {"name": "Caroline", "kind": "person", "content": "Caroline glazes celadon tiles."})
    v.write_note("entity", {"name": "Atlas", "kind": "project", "content": "Atlas is the harbour scheduling rewrite."})


def indexed_elsewhere(root: Path, uri: str) -> str | None:
    """The content hash another process finds ``uri`` indexed at (None: not indexed)."""
    other = Vault.open(root)
    try:
        return SearchIndex(other).indexed_at(uri)
    finally:
        other.close()


def test_the_search_index_is_kept_with_its_vault_and_flushed_on_close(vault):
    write_two(vault)
    assert vault.peek(SearchIndex) is None  # nothing is made before it is asked for
    index = SearchIndex.for_vault(vault)
    assert vault.peek(SearchIndex) is index and SearchIndex.for_vault(vault) is index
    assert search(vault, "celadon", k=1)[0].uri == CAROLINE
    assert LinkGraph.for_vault(vault).nodes >= {CAROLINE, ATLAS}
    assert TurnMemory.for_vault(vault) is TurnMemory.for_vault(vault)
    noor = vault.write_note("entity", {"name": "Noor", "kind": "person", "content": "Noor repairs looms."})
    sha = vault.catalog.get(noor.uri).sha
    assert index.indexed_at(noor.uri) == sha  # searchable now…
    assert search(vault, "repairs looms", k=1)[0].uri == noor.uri
    assert indexed_elsewhere(vault.root, noor.uri) is None  # …recorded at the next checkpoint
    vault.close()
    assert vault.peek(SearchIndex) is None and index.on_vault_change not in vault.listeners
    assert indexed_elsewhere(vault.root, noor.uri) == sha  # close flushed it


def test_synced_picks_up_an_edit_made_outside(vault):
    write_two(vault)
    index, first = SearchIndex.synced(vault)  # opened: its first sync is the report
    assert first is index.last_sync and first.added == 2
    path = vault.root / ATLAS
    path.write_text(path.read_text(encoding="utf-8").replace("harbour scheduling", "lighthouse tariff"), encoding="utf-8")
    again, report = SearchIndex.synced(vault)
    assert again is index and report.changed == report.updated == 1
    assert search(vault, "lighthouse tariff", k=1)[0].uri == ATLAS
    assert SearchIndex.synced(vault)[1].changed == 0


def test_two_vaults_never_share_anything(tmp_path):
    a, b = Vault.init(tmp_path / "a"), Vault.init(tmp_path / "b")
    write_two(a)
    makers = [SearchIndex.for_vault, LinkGraph.for_vault, NameIndex.for_vault, TurnMemory.for_vault,
              session_locks, operations.for_vault]
    for make in makers:
        assert make(a) is make(a) and make(a) is not make(b), make
    assert search(b, "celadon", k=1) == [] and search(a, "celadon", k=1)[0].uri == CAROLINE
    again = Vault.open(a.root)  # the same folder opened twice is two vaults too
    for make in makers:
        assert make(again) is not make(a), make
    again.close()
    assert a.peek(SearchIndex) is not None  # (closing one leaves the other's)


def test_the_graph_is_made_again_after_a_link_write_and_the_names_after_a_new_note(vault):
    write_two(vault)
    g1 = LinkGraph.for_vault(vault)
    assert LinkGraph.for_vault(vault) is g1
    vault.link(CAROLINE, ATLAS, "belongs_to", weight=0.8)
    g2 = LinkGraph.for_vault(vault)
    assert g2 is not g1 and g2.g.has_edge(CAROLINE, ATLAS)
    assert LinkGraph.for_vault(vault) is g2

    other = Vault.open(vault.root)  # another process's write reaches this one through the feed
    other.unlink(CAROLINE, ATLAS)
    other.close()
    g3 = LinkGraph.for_vault(vault)
    assert g3 is not g2 and not g3.g.has_edge(CAROLINE, ATLAS)

    vault.link(CAROLINE, ATLAS, "belongs_to", weight=0.8)
    car = vault.root / "entities" / ".relations.json"
    kept = car.read_text(encoding="utf-8")
    assert LinkGraph.for_vault(vault).g.has_edge(CAROLINE, ATLAS)
    car.write_text("[]", encoding="utf-8")  # a sidecar emptied by another tool
    g4 = LinkGraph.for_vault(vault)
    assert not g4.g.has_edge(CAROLINE, ATLAS)
    car.write_text(kept, encoding="utf-8")
    assert LinkGraph.for_vault(vault) is not g4 and LinkGraph.for_vault(vault).g.has_edge(CAROLINE, ATLAS)

    names = NameIndex.for_vault(vault)
    assert NameIndex.for_vault(vault) is names
    vault.write_note("entity", {"name": "Noor", "kind": "person", "content": "Noor repairs looms."})
    assert NameIndex.for_vault(vault) is not names
    assert NameIndex.for_vault(vault).kind("entities/noor.md") == "person"
    names = NameIndex.for_vault(vault)
    path = vault.root / "entities" / "noor.md"  # a note edited by hand, then synced
    path.write_text(path.read_text(encoding="utf-8").replace("kind: person", "kind: project"), encoding="utf-8")
    vault.sync()
    assert NameIndex.for_vault(vault) is not names and NameIndex.for_vault(vault).kind("entities/noor.md") == "project"


def test_the_operations_model_is_built_once_per_type_registry(vault):
    model = operations.for_vault(vault)
    assert operations.for_vault(vault) is model
    built = operations.operations_model(vault.types, [t.memory_type for t in vault.types if t.link_enabled],
                                        vault.config.link_table())
    assert model.model_json_schema() == built.model_json_schema()
    vault.types = TypeRegistry.for_vault(vault.root)  # (another registry: memory types edited)
    assert operations.for_vault(vault) is not model
    assert operations.for_vault(vault).model_json_schema() == model.model_json_schema()
    assert operations.for_vault(Vault.open(vault.root)) is not model


def test_choose_extractor_leaves_the_matcher_to_the_vault(vault):
    rules = set_llm(vault.root, provider="rules")
    extractor, health = choose_extractor(rules)
    assert isinstance(extractor, RulesExtractor) and health.provider == "rules"
    assert rules.matcher.relocate(["gone"], "new text") is None  # exact search only
    with OllamaStub() as stub:
        v = set_llm(vault.root, model="tiny", host=stub.host)
        before = v.matcher
        extractor, health = choose_extractor(v)
        assert extractor.name == "ollama:tiny" and health.ok
        assert v.matcher is before  # nothing replaced behind anyone's back
        stub.script.append(("json", '{"t_line_ranges": "2"}'))
        assert v.matcher.relocate(["Caroline likes tea."], "Caroline leads Atlas.\nShe drinks tea.") == "2"
        assert "Find where these passages are now" in stub.requests[-1]["body"]["messages"][0]["content"]


def test_session_locks_serialise_one_session_and_are_dropped_when_idle(vault):
    locks = session_locks(vault)
    assert isinstance(locks, KeyedLocks) and session_locks(vault) is locks
    entered = {"s1": threading.Event(), "s2": threading.Event()}
    release = threading.Event()

    def work(key: str) -> None:
        with locks.hold(key):
            entered[key].set()
            release.wait(30)

    with locks.hold("s1"):
        waiting = threading.Thread(target=work, args=("s1",))
        other = threading.Thread(target=work, args=("s2",))
        waiting.start()
        other.start()
        assert entered["s2"].wait(30)  # another session goes ahead
        assert not entered["s1"].is_set()  # the same one waits for this holder
        assert len(locks) == 2
    release.set()
    waiting.join(30)
    other.join(30)
    assert entered["s1"].is_set() and not waiting.is_alive() and not other.is_alive()
    assert len(locks) == 0  # idle: nothing kept

    inside: list[str] = []
    overlap: list[str] = []
    turn = threading.Barrier(8)

    def busy(key: str) -> None:
        turn.wait(30)
        for _ in range(50):
            with locks.hold(key):
                inside.append(key)
                if inside.count(key) > 1:
                    overlap.append(key)
                inside.remove(key)

    threads = [threading.Thread(target=busy, args=(k,)) for k in ["s1"] * 4 + ["s2"] * 4]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
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
    assert len(session_locks(vault)) == 0


# -- nothing of a vault kept outside it ----------------------------------------------------------
MUTATORS = {"append", "add", "update", "setdefault", "pop", "popitem", "clear", "extend", "insert", "remove",
            "discard", "__setitem__"}
CONTAINERS = {"dict", "set", "list", "defaultdict", "OrderedDict", "WeakKeyDictionary", "WeakValueDictionary",
              "WeakSet", "Counter", "deque"}
# What a vault is found by: a Vault, its folder, a path in it.
VAULTISH = {"vault", "v", "_vault", "root", "path", "folder", "state_dir", "db_path"}
VAULTISH_TYPES = {"Vault", "Path", "Store"}


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call):
        return _name(node.func)
    return ""


def _mentions_a_vault(node: ast.AST) -> bool:
    return any(isinstance(n, (ast.Name, ast.Attribute)) and _name(n) in VAULTISH for n in ast.walk(node))


def _takes_a_vault(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
    return any(a.arg in VAULTISH or (a.annotation is not None and
                                     any(_name(n) in VAULTISH_TYPES for n in ast.walk(a.annotation))) for a in args)


def per_vault_caches(source: str) -> list[str]:
    """What in a module keeps something of a vault outside it: an attribute ``cache`` or
    ``services`` of a vault; a module-level container written, in a function, under a key
    made of a vault, its folder or a path (string-keyed or not), or in a function given a
    vault; a memoised function (``lru_cache``, ``cache``) given a vault or a path; a
    ``global`` rebound in a function given a vault."""
    tree = ast.parse(source)
    containers: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if isinstance(value, (ast.Dict, ast.Set, ast.List, ast.DictComp, ast.SetComp, ast.ListComp)) or (
                isinstance(value, ast.Call) and _name(value.func) in CONTAINERS):
            containers.update(t.id for t in targets if isinstance(t, ast.Name))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("cache", "cache_lock", "services"):
            owner = _name(node.value)
            if owner in ("vault", "v", "_vault") or owner.endswith("vault"):
                found.append(f"line {node.lineno}: {owner}.{node.attr}")
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        given = _takes_a_vault(node)
        for deco in node.decorator_list:
            if _name(deco) in ("lru_cache", "cache") and given:
                found.append(f"line {node.lineno}: {node.name} memoised on a vault or a path")
        for inner in ast.walk(node):
            if isinstance(inner, ast.Global) and given:
                found.append(f"line {inner.lineno}: {node.name} rebinds {', '.join(inner.names)}")
            targets = inner.targets if isinstance(inner, (ast.Assign, ast.Delete)) else \
                [inner.target] if isinstance(inner, ast.AugAssign) else []
            for t in targets:
                if isinstance(t, ast.Subscript) and _name(t.value) in containers and isinstance(t.value, ast.Name) and (
                        given or _mentions_a_vault(t.slice)):
                    found.append(f"line {inner.lineno}: {node.name} writes {t.value.id}[...]")
            if (isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute)
                    and isinstance(inner.func.value, ast.Name) and inner.func.value.id in containers
                    and inner.func.attr in MUTATORS and (given or any(_mentions_a_vault(a) for a in inner.args))):
                found.append(f"line {inner.lineno}: {node.name} calls {inner.func.value.id}.{inner.func.attr}")
    return found


@pytest.mark.parametrize("source", [
    "_INDEXES = {}\ndef index_for(v):\n    _INDEXES[str(v.root)] = 1\n",
    "_INDEXES: dict = {}\ndef index_for(name):\n    _INDEXES.setdefault(str(vault.root), 1)\n",
    "import weakref\n_HELD = weakref.WeakKeyDictionary()\ndef held(vault):\n    _HELD[vault] = 1\n",
    "from functools import lru_cache\n@lru_cache\ndef graph(vault):\n    return 1\n",
    "from functools import cache\n@cache\ndef config(root: str):\n    return 1\n",
    "def get(vault):\n    return vault.cache['index']\n",
    "def get(vault):\n    return vault.services.index\n",
    "_LAST = None\ndef remember(vault):\n    global _LAST\n    _LAST = vault\n",
])
def test_the_cache_check_finds_a_per_vault_cache(source):
    assert per_vault_caches(source)


def _caches_in(*folders: str) -> dict[str, list[str]]:
    uses = {}
    for folder in folders:
        for path in sorted((REPO / folder).rglob("*.py")):
            found = per_vault_caches(path.read_text(encoding="utf-8"))
            if found:
                uses[path.relative_to(REPO).as_posix()] = found
    return uses


def test_no_string_keyed_or_module_level_vault_cache_anywhere():
    """Per-vault state lives in ``vault.shared`` (closed with the vault, never shared by
    two vaults); a module-level table may memoise pure functions of strings only."""
    assert _caches_in("engine", "memlink_tui", "memlink_mcp") == {}, "keep per-vault state in vault.shared"
    assert not hasattr(Vault, "cache") and not hasattr(Vault, "services")
    # (the pure memo tables that are there are found by the scan: it does look)
    assert per_vault_caches((REPO / "engine" / "model" / "links.py").read_text(encoding="utf-8")) == []


# -- the benchmarks keep up with the engine -------------------------------------------------------
def _programs(source: str) -> list[str]:
    """The Python programs a module holds as strings (a benchmark's code for a process of
    its own, run with ``python -c``), pieces joined with ``+`` read whole."""
    def text(node: ast.AST) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = text(node.left), text(node.right)
            return None if left is None or right is None else left + right
        if isinstance(node, ast.Name):
            return named.get(node.id)
        return None

    named: dict[str, str] = {}
    out = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = text(node.value)
            if value is None:
                continue
            named[node.targets[0].id] = value
            if "import " not in value:
                continue
            try:
                ast.parse(value)
            except SyntaxError:
                continue
            out.append(value)
    return out


def _benchmark_sources() -> dict[str, list[str]]:
    """Each benchmark script's source and the programs it runs in processes of their own."""
    out = {}
    for path in sorted((REPO / "benchmarks").glob("*.py")):
        source = path.read_text(encoding="utf-8")
        out[path.relative_to(REPO).as_posix()] = [source, *_programs(source)]
    return out


def _engine_imports(source: str) -> list[tuple[str, str]]:
    """(module, name) of every ``from engine… import name``, wherever it stands."""
    return [(node.module, alias.name) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "engine"
            for alias in node.names]


def _vault_attributes(source: str) -> set[str]:
    """The attributes read of a name that holds a vault (``vault``, ``v``, ``…_vault``)."""
    return {node.attr for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and (node.value.id in ("vault", "v") or node.value.id.endswith("_vault"))}


def _importable(module: str, name: str) -> bool:
    try:
        mod = importlib.import_module(module)
    except ImportError:
        return False
    return hasattr(mod, name) or (hasattr(mod, "__path__") and importlib.util.find_spec(f"{module}.{name}") is not None)


def test_the_benchmark_scans_read_the_programs_too():
    source = ('RUN = """\nfrom engine import Vault\n"""\nTAIL = "vault.services.index\\n"\n'
              'MORE = RUN + "vault = Vault.open(1)\\n" + TAIL\n')
    programs = _programs(source)
    assert len(programs) == 2 and "vault.services" in programs[1]
    assert per_vault_caches(programs[1]) and _vault_attributes(programs[1]) == {"services"}
    assert _engine_imports(programs[0]) == [("engine", "Vault")]
    assert _importable("engine", "Vault") and _importable("engine", "index") and _importable("engine.index", "embed")
    assert not _importable("engine", "services") and not _importable("engine.state", "AtomicJSONStorage")


def test_no_vault_cache_in_the_benchmarks():
    assert _caches_in("benchmarks") == {}
    found = {rel: hits for rel, sources in _benchmark_sources().items()
             if (hits := [hit for program in sources[1:] for hit in per_vault_caches(program)])}
    assert found == {}, "keep per-vault state in vault.shared"


def test_the_benchmarks_use_the_engine_as_it_is(vault):
    """Every name a benchmark imports from the engine (at the top, in a function or in a
    program it runs) is there, and every attribute it reads of a vault is one a vault has:
    a removed API fails here, not in a long run."""
    missing = []
    for rel, sources in _benchmark_sources().items():
        for source in sources:
            missing += [f"{rel}: from {module} import {name}" for module, name in _engine_imports(source)
                        if not _importable(module, name)]
            missing += [f"{rel}: vault.{attr}" for attr in sorted(_vault_attributes(source)) if not hasattr(vault, attr)]
    assert missing == []


def test_every_benchmark_imports():
    names = sorted(path.stem for path in (REPO / "benchmarks").glob("*.py"))
    code = "import importlib, sys\nsys.path[:0] = sys.argv[1:3]\nfor name in sys.argv[3:]:\n    importlib.import_module(name)\n"
    run = subprocess.run([sys.executable, "-c", code, str(REPO), str(REPO / "benchmarks"), *names],
                         capture_output=True, text=True, timeout=300, cwd=REPO)
    assert run.returncode == 0, run.stderr
