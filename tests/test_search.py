"""Retrieval: fusion, typed propagation (every row of the link-type table), thresholds, forced
follow, sync after outside edits, rebuild on model change, zero vectors, CLI."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from engine import Vault
from engine.graph import PROPAGATION, LinkGraph, PropagationParams
from engine.index import SearchIndex
from engine.model.links import LinkType, StoredLink
from engine.retrieve.fusion import RouteHits, fuse
from engine.retrieve.search import search


def link(a, b, t, w=1.0, i=None):
    return StoredLink(id=i or f"{a}>{b}>{t}", from_uri=a, to_uri=b, direction="links", link_type=t, weight=w, created_at="x")


# -- fusion ---------------------------------------------------------------------------------
def test_reciprocal_rank_fusion():
    fused = fuse([RouteHits([("a", 9.0), ("b", 5.0), ("c", 1.0)], "rank", rrf_k=10),
                  RouteHits([("b", 0.9), ("d", 0.1)], "rank", rrf_k=10)])
    assert fused["b"] == pytest.approx(1 / 12 + 1 / 11)
    assert fused["a"] == pytest.approx(1 / 11)
    assert sorted(fused, key=lambda u: -fused[u]) == ["b", "a", "d", "c"]


def test_score_fusion_relative_to_the_best_raw_and_weighted():
    """Recall's fusion through the same function: BM25 over its best hit, the cosine as
    it is, a graph bonus over its best times its weight; a candidate found by one route
    only gets that route's share."""
    fused = fuse([RouteHits([("a", 8.0), ("b", 2.0)], "max"),
                  RouteHits([("a", 0.5), ("b", 0.25), ("c", 0.75)], "raw", 1.0),
                  RouteHits([("c", 0.4), ("b", 0.1)], "max", 0.1)])
    assert fused == pytest.approx({"a": 1.0 + 0.5, "b": 0.25 + 0.25 + 0.1 * 0.25, "c": 0.75 + 0.1})
    assert list(fused) == ["a", "b", "c"]  # first met first: stable sorts break ties by it
    assert fuse([RouteHits([("a", 0.0)], "max")]) == {"a": 0.0}  # a best score of 0 divides nothing


# -- propagation table ------------------------------------------------------------------------
@pytest.mark.parametrize("key", list(PROPAGATION), ids=lambda k: f"{k[0].value}-{k[1]}")
def test_each_propagation_rule(key):
    """Seed S; one hop over (type, direction) to X, then a second link of the same kind on
    to Y. X gets seed × table weight × link weight × damping / √deg(S); Y only when the
    rule continues and depth allows it."""
    ltype, direction = key
    rule = PROPAGATION[key]
    if direction == "links":  # S -> X -> Y
        links = [link("S", "X", ltype, 0.8), link("X", "Y", ltype, 0.8)]
    else:  # walking backlinks: X -> S and Y -> X
        links = [link("X", "S", ltype, 0.8), link("Y", "X", ltype, 0.8)]
    g = LinkGraph(links)
    params = PropagationParams(depth=3, min_link_weight=0.3)
    out = g.propagate({"S": 1.0}, params)
    first = rule.weight * 0.8 * 0.85 / math.sqrt(1)
    assert out["X"].score == pytest.approx(first)
    assert out["X"].via[0].link.link_type is ltype and out["X"].via[0].direction == direction
    if rule.cont and rule.max_depth >= 2:
        assert out["Y"].score == pytest.approx(first * rule.weight * 0.8 * 0.85 / math.sqrt(2))
    else:
        assert "Y" not in out
    # With the default depth of 1 nothing goes beyond one hop.
    assert "Y" not in g.propagate({"S": 1.0}, PropagationParams(depth=1))


def test_max_depth_limits_continuing_rules():
    chain = [link(f"n{i}", f"n{i+1}", LinkType.CAUSED_BY) for i in range(4)]  # caused_by links: max depth 2
    out = LinkGraph(chain).propagate({"n0": 1.0}, PropagationParams(depth=5))
    assert set(out) == {"n1", "n2"}


def test_weak_links_are_skipped_and_paths_combine():
    g = LinkGraph([link("A", "C", LinkType.RELATED_TO, 0.29), link("A", "B", LinkType.BELONGS_TO, 0.9), link("D", "B", LinkType.BELONGS_TO, 0.9)])
    out = g.propagate({"A": 1.0, "D": 1.0}, PropagationParams())
    assert "C" not in out
    from_a = 0.7 * 0.9 * 0.85 / math.sqrt(2)  # A has two links: its score spreads thinner
    from_d = 0.7 * 0.9 * 0.85 / math.sqrt(1)
    assert out["B"].score == pytest.approx(1 - (1 - from_a) * (1 - from_d))  # two seeds bridge B (noisy-OR)
    assert len(out["B"].via) == 2


# -- search on a small vault ------------------------------------------------------------------
@pytest.fixture
def small(vault: Vault) -> Vault:
    w = vault.write_note
    w("entity", {"name": "Caroline", "kind": "person", "content": "Caroline reviews the Python code of the Atlas team."})
    w("entity", {"name": "Atlas", "kind": "project", "content": "Atlas is the harbour scheduling rewrite."})
    w("preference", {"topic": "Type hints", "content": "The user dislikes type hints in Python code."})
    w("preference", {"topic": "Type hints everywhere", "content": "The user now wants type hints on every function."})
    w("event", {"event_name": "Kiln firing", "date": "2026-09-01", "content": "Fired celadon test tiles at the studio."})
    vault.link("entities/caroline.md", "entities/atlas.md", "belongs_to", weight=0.9, match_text="Atlas team")
    vault.link("preferences/type-hints-everywhere.md", "preferences/type-hints.md", "evolved_from", weight=0.9)
    return vault


def test_fusion_by_score_a_clear_keyword_winner_beats_the_vector_route_near_tie(small, monkeypatch):
    """Both routes find both notes: one holds every word of the query (BM25 far ahead),
    the other is a hair closer in meaning. By rank they would tie (first and second on
    each route); by score the clear keyword winner leads."""
    index = SearchIndex.for_vault(small)
    both = ("entities/atlas.md", "events/2026/09/01/kiln-firing.md")
    monkeypatch.setattr(index, "vector_search", lambda q, n, types=None: [(both[1], 0.62), (both[0], 0.60)])
    monkeypatch.setattr(index, "keyword_search", lambda q, n, types=None, tokens=None: [(both[0], 9.0), (both[1], 2.0)])
    hits = search(small, "harbour scheduling rewrite", k=2, index=index, use_graph=False, snippets=False)
    assert [h.uri for h in hits] == list(both)
    assert hits[0].score == pytest.approx(1.0) and hits[1].score == pytest.approx((0.62 + 2.0 / 9.0) / 1.6)


def test_a_question_frame_word_is_no_keyword_match(small):
    """"How much is …?" asks about its content words: a note whose only word in common is
    "how" is no keyword hit (by score it would rank on it)."""
    small.write_note("entity", {"name": "How staff engineers write a promotion packet", "kind": "topic",
                                "content": "A packet lists impact, scope and peer feedback."})
    small.write_note("entity", {"name": "Klei en Vuur", "kind": "place",
                                "content": "The studio's membership is 95 euros a month."})
    hits = search(small, "How much is the membership at the studio?", k=5, snippets=False)
    assert hits[0].uri == "entities/klei-en-vuur.md"
    packet = [h for h in hits if h.uri == "entities/how-staff-engineers-write-a-promotion-packet.md"]
    assert not packet or "keyword" not in {r.kind for r in packet[0].routes}


def test_search_routes_snippets_and_graph_supplement(small):
    hits = search(small, "Caroline reviews Python code", k=5)
    top = hits[0]
    assert top.uri == "entities/caroline.md"
    assert {r.kind for r in top.routes} <= {"vector", "keyword"} and top.routes
    assert "[Atlas team](entities/atlas.md)" in top.snippet  # links rendered in the snippet
    atlas = next(h for h in hits if h.uri == "entities/atlas.md")
    assert any(r.kind in ("graph", "vector", "keyword") for r in atlas.routes)
    assert all(h.to_json()["route"] for h in hits)


def test_a_process_forked_after_a_search_searches_too(small):
    """The vector route runs in a worker thread; a child forked after a search (a server
    that forks per request) has none of its parent's threads and must make its own."""
    before = [h.uri for h in search(small, "Caroline reviews Python code", k=5, snippets=False)]
    pid = os.fork()
    if pid == 0:  # (the child: exits with 0 only when it found the same notes; a hang ends at the alarm)
        import signal

        signal.alarm(30)
        try:
            got = [h.uri for h in search(small, "Caroline reviews Python code", k=5, snippets=False)]
            os._exit(0 if got == before else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.mark.parametrize("working", [False, True])
def test_a_one_shot_command_ends_at_once_after_a_search_unless_a_thread_is_working(small, working):
    """The vector route's thread never holds a command's fast exit (``end_now``) back; a
    thread still working does (it finishes the usual way)."""
    script = f"""
import threading
from engine import Vault
from engine.retrieve.search import search
from memlink_tui.cli import end_now
assert search(Vault.open({str(small.root)!r}), "Caroline reviews Python code", k=3)
release = threading.Event()
if {working}:
    threading.Thread(target=release.wait).start()
end_now(0)
print("the usual exit", flush=True)
release.set()
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
    assert r.returncode == 0, r.stderr
    assert ("the usual exit" in r.stdout) == working


def test_graph_only_supplement_says_which_link(small):
    hits = search(small, "Caroline", k=5, routes=("keyword",))
    atlas = next(h for h in hits if h.uri == "entities/atlas.md")
    assert [r.kind for r in atlas.routes] == ["graph"]
    assert atlas.routes[0].via.link.link_type is LinkType.BELONGS_TO
    assert "belongs_to" in atlas.route and "entities/caroline.md" in atlas.route
    assert not [h for h in search(small, "Caroline", k=5, routes=("keyword",), use_graph=False) if h.uri == "entities/atlas.md"]


def test_min_ppr_score_drops_weak_supplements(small):
    small.config.search.min_ppr_score = 0.99
    assert "entities/atlas.md" not in [h.uri for h in search(small, "Caroline", k=5, routes=("keyword",))]


def test_forced_follow_of_contradicts_ignores_thresholds(small):
    small.write_note("preference", {"topic": "Tea", "content": "Drinks green tea every afternoon."})
    small.write_note("event", {"event_name": "Coffee binge", "date": "2026-09-02", "content": "Had four espressos and no drink of anything green."})
    small.link("events/2026/09/02/coffee-binge.md", "preferences/tea.md", "contradicts", weight=0.1)
    hits = search(small, "green tea afternoon", k=1, routes=("keyword",))
    assert hits[0].uri == "preferences/tea.md"
    forced = [h for h in hits if h.routes and h.routes[0].kind == "forced"]
    assert [h.uri for h in forced] == ["events/2026/09/02/coffee-binge.md"]
    assert "always follows contradicts" in forced[0].route
    small.config.search.forced_follow = []
    assert [h.uri for h in search(small, "green tea afternoon", k=1, routes=("keyword",))] == ["preferences/tea.md"]


def test_type_filter(small):
    hits = search(small, "type hints Python", k=10, types={"preference"})
    assert hits and all(h.memory_type == "preference" for h in hits)


def test_evolved_from_finds_the_newer_version(small):
    """Only the old opinion matches the words; its newer version comes along the
    evolved_from backlink (old → new: weight 0.9, continues)."""
    hits = {h.uri: h for h in search(small, "dislikes", k=2, routes=("keyword",))}
    assert set(hits) == {"preferences/type-hints.md", "preferences/type-hints-everywhere.md"}
    newer = hits["preferences/type-hints-everywhere.md"]
    assert newer.routes[0].kind in ("graph", "forced") and newer.routes[0].via.link.link_type is LinkType.EVOLVED_FROM


# -- keeping the index in step with the files ------------------------------------------------
def test_in_process_writes_update_the_index(small):
    index = SearchIndex.for_vault(small)
    index.sync()
    small.write_note("entity", {"name": "Zanzibar", "content": "A spice island visited in June."})
    assert [h.uri for h in search(small, "Zanzibar spice", k=1)] == ["entities/zanzibar.md"]
    small.delete_note("entities/zanzibar.md")
    assert "entities/zanzibar.md" not in [h.uri for h in search(small, "Zanzibar spice", k=3)]


def test_sync_after_an_outside_edit(small):
    index = SearchIndex.for_vault(small)
    index.sync()
    small.close()
    path = small.path("events/2026/09/01/kiln-firing.md")
    path.write_text(path.read_text().replace("celadon test tiles", "shino porcelain bowls"))
    os.utime(path, ns=(10**18, 10**18))
    fresh = Vault.open(small.root)  # as a new process would: index loaded from disk
    index = SearchIndex.for_vault(fresh)  # syncs on first use
    report = index.last_sync
    assert (report.added, report.updated, report.removed, report.rebuilt) == (0, 1, 0, False)
    assert search(fresh, "shino porcelain", k=1)[0].uri == "events/2026/09/01/kiln-firing.md"
    path.unlink()
    assert index.sync().removed == 1
    assert "events/2026/09/01/kiln-firing.md" not in [h.uri for h in search(fresh, "shino porcelain", k=3)]
    assert index.sync().changed == 0


def tiny_model(folder: Path, vocab_words: list[str], dims: int = 8) -> Path:
    from model2vec import StaticModel
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    vocab = {"[UNK]": 0, "[PAD]": 1, **{w: i + 2 for i, w in enumerate(vocab_words)}}
    tok = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    vectors = np.random.RandomState(0).randn(len(vocab), dims).astype(np.float32)
    vectors[:2] = 0
    StaticModel(vectors=vectors, tokenizer=tok, normalize=True).save_pretrained(str(folder))
    return folder


def set_model(v: Vault, model: str) -> Vault:
    cfg = yaml.safe_load((v.root / "memlink.yaml").read_text())
    cfg["embedding"] = {"model": model}
    (v.root / "memlink.yaml").write_text(yaml.safe_dump(cfg))
    return Vault.open(v.root)


def test_model_change_forces_a_rebuild_and_zero_vectors_stay_out(small, tmp_path):
    SearchIndex.for_vault(small).sync()
    small.write_note("preference", {"topic": "龙井茶", "content": "最喜欢明前龙井"})
    small.close()
    model = tiny_model(tmp_path / "tiny", ["caroline", "atlas", "python", "code", "kiln", "tea"])
    v = set_model(small, str(model))
    index = SearchIndex.for_vault(v)
    assert index.notice is None and index.embedder.dims == 8
    report = index.last_sync
    assert report.rebuilt and "model" in report.reason
    # The Chinese note embeds to zero under this vocabulary: no vector, but keywords find it.
    assert index.vectors.cosines(np.ones(8, np.float32), ["preferences/龙井茶.md"]) == {}
    assert index.indexed_at("preferences/龙井茶.md") is not None
    assert [h.uri for h in search(v, "龙井", k=1)] == ["preferences/龙井茶.md"]
    assert index.vector_search("龙井", 5) == []


def test_unloadable_model_falls_back_to_the_bundled_one(small, tmp_path):
    v = set_model(small, str(tmp_path / "no-such-model"))
    index = SearchIndex.for_vault(v)
    assert index.embedder.name == "minilm-l6-m2v-256"
    assert "could not be loaded" in index.notice
    assert index.notice in index.last_sync.notices


def test_index_survives_deleting_memlink_folder(small):
    import shutil

    SearchIndex.for_vault(small).sync()
    small.close()
    shutil.rmtree(small.root / ".memlink")
    v = Vault.open(small.root)
    report = SearchIndex.for_vault(v).last_sync
    assert report.rebuilt and report.added == 5
    assert search(v, "celadon", k=1)[0].uri == "events/2026/09/01/kiln-firing.md"


def test_graph_cache_is_per_vault_and_invalidated_by_link_writes(small):
    g1 = LinkGraph.for_vault(small)
    assert LinkGraph.for_vault(small) is g1
    small.link("events/2026/09/01/kiln-firing.md", "entities/caroline.md", "related_to")
    g2 = LinkGraph.for_vault(small)
    assert g2 is not g1 and g2.g.has_edge("events/2026/09/01/kiln-firing.md", "entities/caroline.md")
    other = Vault.open(small.root)
    assert LinkGraph.for_vault(other) is not g2


def test_graph_query_and_path(small):
    g = LinkGraph.for_vault(small)
    rows = g.neighbourhood("entities/atlas.md", direction="in")
    assert [(hop, s.dst, s.direction) for hop, s in rows] == [(1, "entities/caroline.md", "backlinks")]
    assert g.neighbourhood("entities/atlas.md", direction="out") == []
    assert g.neighbourhood("entities/atlas.md", types={LinkType.CONTRADICTS}) == []
    assert [s.dst for s in g.path("entities/atlas.md", "entities/caroline.md")] == ["entities/caroline.md"]
    assert g.path("entities/atlas.md", "preferences/type-hints.md") is None
    ranks = g.ppr({"entities/caroline.md": 1.0}, both_ways=True)
    assert max(ranks, key=ranks.get) in {"entities/caroline.md", "entities/atlas.md"}


def test_cli_search_graph_query_reindex(small):
    from conftest import memlink

    small.close()
    import shutil

    shutil.rmtree(small.root / ".memlink", ignore_errors=True)  # a vault never opened
    r = memlink("reindex", vault=small.root)
    assert r.returncode == 0 and "indexed 5 notes" in r.stdout, r.stderr
    # The link index is built too (every folder with a sidecar), so the first search reads none.
    sidecars = {p.parent for p in small.root.rglob(".relations.json") if ".memlink" not in p.parts}
    links = len(Vault.open(small.root).links.all())
    assert f"link index: {links} links in {len(sidecars)} folders" in r.stdout and sidecars and links, r.stdout
    assert f"link index: {links} links in {len(sidecars)} folders" in memlink("reindex", vault=small.root).stdout
    hits = json.loads(memlink("search", "Caroline reviews Python code", "--k", "3", "--json", vault=small.root).stdout)
    assert hits[0]["uri"] == "entities/caroline.md"
    assert {"uri", "score", "route", "snippet"} <= set(hits[0])
    typed = json.loads(memlink("search", "Python", "--type", "preference", "--json", vault=small.root).stdout)
    assert typed and {h["memory_type"] for h in typed} == {"preference"}
    rows = json.loads(memlink("graph-query", "entities/atlas.md", "--direction", "in", "--json", vault=small.root).stdout)
    assert [(r["uri"], r["direction"], r["link_type"]) for r in rows] == [("entities/caroline.md", "in", "belongs_to")]
    r = memlink("search", "x", "--type", "recipe", vault=small.root)
    assert r.returncode == 1 and "unknown memory type" in r.stderr


def test_pending_keyword_updates_score_like_committed_ones(small):
    index = SearchIndex.for_vault(small)
    small.write_note("entity", {"name": "Quokka", "content": "A quokka colony lives on Rottnest island near the ferry."})
    assert "entities/quokka.md" in index.keywords.pending  # not yet committed to tantivy
    before = dict(index.keyword_search("quokka ferry island", 5))
    index.checkpoint()
    assert not index.keywords.pending
    after = dict(index.keyword_search("quokka ferry island", 5))
    assert set(before) == set(after) and "entities/quokka.md" in after
    assert before["entities/quokka.md"] == pytest.approx(after["entities/quokka.md"], rel=0.25)
    small.delete_note("entities/quokka.md")
    assert "entities/quokka.md" not in dict(index.keyword_search("quokka", 5))


# -- the evidence gate: a question's frame is no match ------------------------------------
@pytest.mark.parametrize("question", ["what about xyzzyqq", "tell me about xyzzyqq", "when did we discuss xyzzyqq"])
def test_nonsense_inside_an_ordinary_question_is_no_confident_match(sample, question):
    from conftest import memlink

    hits = search(sample, question)
    assert all(h.weak for h in hits)  # nothing, or only weak-marked hits close in meaning
    out = memlink("search", question, vault=sample.root).stdout
    assert out.strip() == "no results" or out.startswith("weak matches")
    assert search(sample, "what about the coffee")  # the frame does not hide a real question
    assert not search(sample, "tell me about Man Met Bril")[0].weak


def test_cli_snippets_show_a_link_as_its_words_and_json_keeps_it(sample):
    from conftest import memlink

    out = memlink("search", "celadon glaze kiln", vault=sample.root).stdout
    assert "Loves Longquan-style celadon:" in out and "](entities/" not in out, out
    hits = json.loads(memlink("search", "celadon glaze kiln", "--json", vault=sample.root).stdout)
    assert any("[Longquan-style celadon](entities/cone-6-celadon.md)" in h["snippet"] for h in hits)


def test_search_output_strips_terminal_control_sequences(vault):
    from conftest import memlink

    vault.write_note("entity", {"name": "Evil \x1b]0;pwned\x07Corp", "content": "Evil Corp sells \x1b[2J zorblax widgets.\x9b31m"})
    out = memlink("search", "zorblax", vault=vault.root).stdout
    assert "zorblax" in out and not any(c in out for c in "\x1b\x07\x9b")


def test_vector_queries_over_replaced_near_duplicate_chunks_return_k_notes_instead_of_raising():
    """Once deleted slots are reused, hnswlib can fail to reach k live items in a graph of
    near-duplicates and raises; the index asks again and still returns k notes."""
    import numpy as np

    from engine.index.vectors import VectorIndex
    from engine.storage.store import Store

    rng = np.random.default_rng(0)
    base = rng.normal(size=(4, 16)).astype(np.float32)
    index = VectorIndex("notes", Store(None), None, 16)
    keys: set[str] = set()
    for i in range(200):
        index.put_many([(f"n{i}", base[rng.integers(0, 4)][None, :].copy())])
        keys.add(f"n{i}")
        if i % 3 == 0:
            index.put_many([(f"n{i // 2}", base[rng.integers(0, 4)][None, :].copy())])
        hits = index.query(base[0], 30)
        assert len(hits) == min(30, len(keys))
        assert len({uri for uri, _, _ in hits}) == len(hits)


def test_a_word_that_begins_too_many_names_is_no_clue_for_a_near_match(vault, monkeypatch):
    """A misspelt name is guessed among the names that begin with its first word only when
    few do ("Meeting …" 40k times over says nothing); the name written exactly is found
    however many share its first word."""
    import engine.retrieve.names as names_module
    from engine.retrieve.names import NameIndex

    for topic in ("Budget", "Roadmap", "Hiring", "Offsite"):
        vault.write_note("entity", {"name": f"Meeting {topic} Review", "kind": "event"})
    typo, exact = "What came of Meeting Budgte Review?", "What came of Meeting Budget Review?"
    uri = next(u for u in vault.catalog.uris() if "budget" in u)

    def named(question: str) -> list[tuple[str, bool]]:
        return [(n.uri, n.exact) for n in NameIndex(vault.catalog).named_in(question)]

    assert named(typo) == [(uri, False)] and named(exact) == [(uri, True)]
    monkeypatch.setattr(names_module, "NEAR_AMONG", 3)  # four names begin with "meeting"
    assert named(typo) == [] and named(exact) == [(uri, True)]


def test_a_name_written_with_a_typo_is_found_and_the_prefilter_never_drops_a_near_match(sample):
    """A question naming a note nearly (a typo) seeds it. The names compared with difflib
    are first kept to those rapidfuzz's ratio allows (twice the longest common subsequence
    over both lengths: difflib's matches are a common subsequence), which must never drop
    a name difflib would have matched."""
    import difflib
    import random

    from rapidfuzz import fuzz

    from engine.retrieve.names import _NEAR_BOUND, NEAR, NameIndex

    names = NameIndex.for_vault(sample)
    uri = "entities/man-met-bril-koffie.md"
    assert [n.uri for n in names.named_in("Where is Man Met Bril Kofie again?") if not n.exact] == [uri]
    assert uri not in [n.uri for n in names.named_in("Where is Man Mat Brol Kaffee Shop again?")]
    rng = random.Random(7)
    words = ["acme", "robotics", "robotic", "man", "met", "bril", "koffie", "ko", "mia", "brown", "browne", "e", "ee"]
    near = 0
    for _ in range(20000):
        a = " ".join(rng.choice(words) for _ in range(rng.randint(1, 4)))
        b = " ".join(rng.choice(words) for _ in range(rng.randint(1, 4)))
        at = rng.randint(0, len(b))
        b = b if rng.random() < 0.5 else b[:at] + rng.choice("abe ") + b[at + rng.randint(0, 1):]
        if difflib.get_close_matches(a, [b], n=1, cutoff=NEAR):
            near += 1
            assert fuzz.ratio(a, b, score_cutoff=_NEAR_BOUND), (a, b)
    assert near > 50


def test_a_hub_linking_every_page_does_not_outrank_the_pages_that_answer(vault, tmp_path):
    """An index page linking every page is every seed's neighbour: its share of the walk
    is divided by its degree, so the pages that hold the words rank above it."""
    from engine.extract.batch import ingest_batch
    from engine.extract.rules import RulesExtractor

    pages = tmp_path / "pages"
    pages.mkdir()
    titles = [f"Workshop {n}" for n in range(1, 41)]
    for n, title in enumerate(titles, 1):
        what = "a paper lantern" + " lantern" * (7 - n) if n <= 6 else f"a bench number {n}"
        (pages / f"workshop-{n}.md").write_text(f"# {title}\n\nWe built {what}.\n")
    (pages / "index.md").write_text("# Index\n\n" + "".join(f"- [[{t}]]\n" for t in titles))
    ingest_batch(vault, [pages], extractor=RulesExtractor())
    order = [h.uri for h in search(vault, "lantern", k=10, routes=("keyword",))]
    assert order[:6] == [f"sources/pages/workshop-{n}.md" for n in range(1, 7)], order


def test_a_link_counts_by_the_words_it_shows_not_the_path_it_points_at(vault, tmp_path):
    """A page that links to "Obsidian Publish/Set up Obsidian Publish" under other words
    is not about publishing: the keyword route reads what a reader sees."""
    from engine.extract.batch import ingest_batch
    from engine.extract.rules import RulesExtractor
    from engine.model.text import shown_text

    assert shown_text("See [[Publish/Set up Publish|the guide]], [[Sync#Limits]] and [notes](Publish/x.md).") == (
        "See the guide, Sync Limits and notes.")
    pages = tmp_path / "help"
    (pages / "Publish").mkdir(parents=True)
    (pages / "Publish" / "Set up Publish.md").write_text("# Set up Publish\n\nPublish your notes to a website.\n")
    (pages / "Redirects.md").write_text("# Redirects\n\nOld notes move; see [[Publish/Set up Publish|the guide]] "
                                         "and [[Publish/Set up Publish|setting it up]] and [the site](Publish/Set%20up%20Publish.md).\n")
    ingest_batch(vault, [pages], extractor=RulesExtractor())
    hits = [h.uri for h in search(vault, "publish", k=5, routes=("keyword",), use_graph=False)]
    assert hits == ["sources/help/Publish/Set up Publish.md"], hits


def test_a_page_titled_with_one_of_the_words_does_not_outrank_the_page_holding_them_all(vault, tmp_path):
    """In a real vault one-word titles are common words ("Settings", "Search"): a title
    counts as the note's first line, not as a field of its own that outweighs the text."""
    from engine.extract.batch import ingest_batch
    from engine.extract.rules import RulesExtractor

    pages = tmp_path / "pages"
    pages.mkdir()
    texts = {
        "Settings": "Open the settings from the ribbon to change how the app looks and behaves. Options are grouped "
                    "in tabs.",
        "How the app stores data": "Notes are plain Markdown files in your vault folder. Plugins keep their own "
                                   "configuration files.\n\n## Global settings\n\nGlobal settings apply to every vault "
                                   "and are kept in the system configuration folder.",
        "Themes": "A theme changes colours and fonts. Install themes from the community directory.",
        "Hotkeys": "Assign a key combination to any command from the command palette.",
        "Backups": "Copy the vault folder to back up every note; sync services keep versions too.",
    }
    for title, text in texts.items():
        (pages / f"{title}.md").write_text(text + "\n", encoding="utf-8")
    ingest_batch(vault, [pages], extractor=RulesExtractor())
    answer = "sources/pages/How the app stores data.md"
    assert [u for u, _ in SearchIndex.for_vault(vault).keyword_search("Global settings", 2)] == [
        answer, "sources/pages/Settings.md"]
    assert search(vault, "Global settings", k=3, snippets=False)[0].uri == answer


def test_a_keyword_query_keeps_words_a_question_would_frame_with(small):
    """"talk slides" is no question: "talk" is what it is about, not its frame."""
    small.write_note("event", {"event_name": "Conference talk", "date": "2026-10-02",
                               "content": "Gave the harbour scheduling talk at PyCon NL."})
    hits = search(small, "talk slides", k=5, snippets=False)
    assert hits and hits[0].uri == "events/2026/10/02/conference-talk.md"
    assert "keyword" in {r.kind for r in hits[0].routes}


def test_a_note_another_process_moved_away_is_left_out_not_an_error(tmp_path):
    """A long-lived process (the MCP server, the app) searches on while `memlink mv` runs."""
    import shutil

    from conftest import SAMPLE, memlink

    root = tmp_path / "v"
    shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns(".memlink"))
    vault = Vault.open(root)
    try:
        index = SearchIndex.for_vault(vault)
        assert search(vault, "Mochi cat", index=index)[0].uri == "entities/mochi.md"
        assert memlink("mv", "entities/mochi.md", "entities/cat-mochi.md", vault=root).returncode == 0
        hits = search(vault, "Mochi cat", index=index)
        assert hits and "entities/mochi.md" not in {h.uri for h in hits} | {e.uri for h in hits for e in h.evidence}
    finally:
        vault.close()
