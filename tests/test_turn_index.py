"""The turn index at scale (docs/DESIGN.md, "Turn memory"): opening reads no turn, a
question reads only what it touches, a sync reads only the shards that changed, and what
an incremental sync leaves is exactly what a rebuild from scratch makes."""

from __future__ import annotations

import random
import shutil
import sqlite3

import networkx as nx
import pytest

from engine import Vault
from engine.index.vectors import VectorIndex
from engine.sessions.extract import RulesTurnExtractor
from engine.sessions.importer import extract_pending
from engine.sessions.log import append_events
from engine.sessions.recall import TurnMemory
from engine.sessions.store import TurnStore
from engine.sessions.turnindex import TurnIndex, pagerank

BIG_TABLES = ("turns", "mentions", "relates", "terms", "term_keys")


def chat(vault, session: str, lines: list[str], ts: str = "2026-11-01T10:00:00Z") -> None:
    events = [{"session": session, "id": f"{session}-{i}", "role": ("user", "assistant")[i % 2 == 0], "content": text,
               "ts": ts} for i, text in enumerate(lines, 1)]
    append_events(vault, session, events)
    extract_pending(vault, [session], RulesTurnExtractor(), final=True)


def history(vault) -> None:
    chat(vault, "a", ["Astrid Holm and Bram Visser run the harbour audit", "Noted, the audit starts Monday.",
                      "Did Bram Visser send the kiln invoice?", "Yes, Bram Visser sent it."])
    chat(vault, "b", ["Chen Wei and Dara Okafor plan the garden party", "Sounds fun.",
                      "Hana Sato brings the lanterns", "Lovely."])
    chat(vault, "c", ["Emil Novak fixed the studio roof", "Good news."])


def state(vault) -> dict:
    """Everything the store says about turns and terms, minus vector labels."""
    rows = vault.store.rows
    return {
        "turns": rows("SELECT * FROM turns ORDER BY id"),
        "mentions": rows("SELECT * FROM mentions ORDER BY turn, term"),
        "relates": rows("SELECT * FROM relates ORDER BY turn, a, b"),
        "terms": rows("SELECT * FROM terms ORDER BY id"),
        "term_keys": rows("SELECT * FROM term_keys ORDER BY key, term"),
        "sessions": rows("SELECT * FROM turn_sessions ORDER BY session"),
        "vectors": rows("SELECT count(*) FROM vectors WHERE space = 'turns'"),
    }


def forget_the_turn_index(vault) -> None:
    """What deleting its files does: the next open builds it from the turn memories."""
    with vault.store.write() as w:
        w.execute("DELETE FROM meta WHERE key LIKE 'turns.%'")
    shutil.rmtree(vault.state_dir / "index" / "turns")


QUESTIONS = ["What did Bram Visser send?", "who plans the garden party", "Astrid Holm and Chen Wei",
             "studio roof", "What is Hana doing?"]


def answers(memory: TurnMemory) -> list:
    """The turns recalled (scores move a little: tantivy's BM25 statistics still count
    deleted documents until their segment merges)."""
    return [[h.memory_id for h in memory.recall(q, k=3)] for q in QUESTIONS]


def test_an_incremental_sync_leaves_what_a_rebuild_makes(vault):
    history(vault)
    TurnMemory(vault)
    # Grow a session (its turns shift: memories dropped and made) and join two components
    # through a new session.
    chat(vault, "a", ["Astrid Holm and Bram Visser run the harbour audit", "Noted, the audit starts Monday.",
                      "Did Bram Visser send the kiln invoice?", "Yes, Bram Visser sent it.",
                      "Astrid Holm met Chen Wei about the kiln", "Good."])
    chat(vault, "d", ["Chen Wei thanked Astrid Holm for the lanterns", "Nice."])
    incremental = TurnMemory(vault)
    after_sync, got = state(vault), answers(incremental)
    communities = {row[1]: row[3] for row in after_sync["terms"]}
    assert communities["Astrid Holm"] == communities["Chen Wei"] == communities["Dara Okafor"]  # joined by "d"
    assert communities["Emil Novak"] != communities["Astrid Holm"]
    forget_the_turn_index(vault)
    rebuilt = TurnMemory(vault)
    assert state(vault) == after_sync
    assert answers(rebuilt) == got and any(got)


def test_a_vanished_memories_file_takes_its_turns_out_of_the_index(vault):
    history(vault)
    index = TurnIndex(vault).open()
    before = len(index.turns)
    (vault.root / "sessions" / "c.memories.json").unlink()
    after = TurnIndex(vault).open()
    assert len(after.turns) == before - 1 and len(list(after.turns)) == before - 1
    assert "Emil Novak" not in after.term_text().values()
    assert [h.sources for h in TurnMemory(vault).recall("studio roof", k=1)] == [["c-1", "c-2"]]  # restored from the log


def test_opening_and_asking_read_no_table_whole(vault, monkeypatch):
    """Open cost must not grow with the history: no turn memories file is read, and every
    statement run on the turn, term and graph tables finds its rows through an index."""
    history(vault)
    TurnMemory(vault)
    read: list[str] = []
    monkeypatch.setattr(TurnStore, "rows", lambda self, session: read.append(session) or [])
    statements: list[str] = []
    real_connect = sqlite3.connect

    def traced(*args, **kwargs):
        db = real_connect(*args, **kwargs)
        db.set_trace_callback(statements.append)
        return db

    monkeypatch.setattr(sqlite3, "connect", traced)
    memory = TurnMemory(Vault.open(vault.root))
    for q in QUESTIONS:
        memory.recall(q, k=3)
    assert read == [] and statements
    check = real_connect(vault.state_dir / "index.sqlite")
    scans = []
    for sql in statements:
        if not sql.lstrip().upper().startswith("SELECT"):
            continue
        plan = " | ".join(r[3] for r in check.execute("EXPLAIN QUERY PLAN " + sql))
        if any(f"SCAN {t}" in plan and f"SCAN {t}_" not in plan for t in BIG_TABLES):
            scans.append((sql, plan))
    assert scans == []


def test_pagerank_is_networkx_pagerank():
    rng = random.Random(4)
    nodes = [f"t{i:02d}" for i in range(40)]
    edges = {}
    for _ in range(70):
        a, b = sorted(rng.sample(nodes, 2))
        edges[(a, b)] = edges.get((a, b), 0) + rng.randint(1, 3)
    g = nx.Graph()
    g.add_nodes_from(nodes)  # some stay isolated: dangling mass goes to the seeds
    g.add_weighted_edges_from((a, b, w) for (a, b), w in edges.items())
    pers = {"t03": 1.0, "t17": 1.0, nodes[-1]: 1.0}
    theirs = nx.pagerank(g, alpha=0.85, personalization=pers, weight="weight", tol=1e-10, max_iter=300)
    ours = pagerank(nodes, edges, pers)
    assert ours.keys() == theirs.keys()
    assert max(abs(ours[n] - theirs[n]) for n in nodes) < 1e-12
    assert pagerank(["x"], {}, {"x": 1.0}) == pytest.approx({"x": 1.0})


def test_an_index_that_cannot_be_saved_still_recalls_and_is_built_again_next_time(vault, monkeypatch):
    history(vault)

    def full_disk(self, w):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(VectorIndex, "save", full_disk)
    memory = TurnMemory(vault)
    assert [h.sources for h in memory.recall("studio roof", k=1)] == [["c-1", "c-2"]]
    assert vault.store.row("SELECT value FROM meta WHERE key = 'turns.fingerprint'") is None  # rebuilt next time
    monkeypatch.undo()
    assert [h.sources for h in TurnMemory(Vault.open(vault.root)).recall("studio roof", k=1)] == [["c-1", "c-2"]]
