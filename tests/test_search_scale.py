"""Search at scale without the whole graph: the lazy link view walks exactly what the full
graph walks, search gives the same hits through either and never builds the full graph,
and snippets stem only the words that can match (the same windows as stemming every word)."""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path

import pytest

from engine import Vault
from engine.graph import LazyLinks, LinkGraph
from engine.search import propagation_params, search
from engine.text import _CJK, _IS_CJK, SNIPPET_SCAN, _stemmer, snippet, tokenize

REPO = Path(__file__).resolve().parent.parent


# -- the lazy view against the full graph -----------------------------------------------------
@pytest.fixture(scope="module")
def linked(tmp_path_factory) -> Vault:
    """A synthetic vault with all six link types, hubs and ties in link weight, plus a
    link to a note that is gone and one of a type no table declares."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from synthetic import generate_fast

    root = tmp_path_factory.mktemp("scale") / "v"
    meta = generate_fast(root, 300, links_per_note=4.0)
    vault = Vault.open(root)
    a, b = meta["uris"][0], meta["uris"][1]
    (root / a).unlink()  # its links now point at no note: neither view walks them
    folder = root / b.rsplit("/", 1)[0] / ".relations.json"
    rows = json.loads(folder.read_text(encoding="utf-8"))
    rows.append({"id": "link_odd", "from_uri": b, "to_uri": meta["uris"][2], "direction": "links",
                 "link_type": "refutes_maybe", "weight": 0.9, "t_field": "content", "t_line_ranges": None,
                 "match_text": None, "description": "", "created_at": "x"})
    folder.write_text(json.dumps(rows), encoding="utf-8")
    vault.sync_catalog()
    return vault


def _walk(view, uri):
    return [(s.dst, s.direction, s.link.id, s.link.weight) for s in view.steps(uri)]


def test_lazy_links_walk_what_the_full_graph_walks(linked):
    full = LinkGraph.build(linked)
    lazy = LazyLinks(linked)
    params = propagation_params(linked.config.search, linked.config.link_table())
    uris = sorted(linked.catalog())
    assert sum(full.degree(u) for u in uris) > 1000
    for uri in uris:
        assert _walk(lazy, uri) == _walk(full, uri), uri
        assert lazy.backlink_count(uri) == full.backlink_count(uri)
        assert lazy.forced_neighbours(uri, params) == full.forced_neighbours(uri, params)
    assert all(s.link.id != "link_odd" for u in uris for s in lazy.steps(u))  # unknown type: no meaning
    rng = random.Random(5)
    for depth in (1, 3):
        p = propagation_params(linked.config.search.model_copy(update={"depth": depth}), linked.config.link_table())
        for _ in range(20):
            seeds = {u: rng.random() for u in rng.sample(uris, 8)}
            a, b = full.propagate(seeds, p), lazy.propagate(seeds, p)
            assert list(a) == list(b)  # the same notes, met in the same order
            for uri in a:
                assert a[uri].score == b[uri].score
                assert [(s.src, s.link.id) for s in a[uri].via] == [(s.src, s.link.id) for s in b[uri].via]
    hub = max(uris, key=full.degree)
    assert lazy.neighbourhood(hub, depth=2) == full.neighbourhood(hub, depth=2)


@pytest.mark.parametrize("warm", [False, True])
def test_links_of_one_type_are_the_full_graphs_and_read_alone(linked, monkeypatch, warm):
    """``out_edges_of_type`` (a search's grouping asks it of 40 notes) gives what the full
    graph's edges of that type are, whether the notes were read already or not, from the
    index or from a warm process's mirror; of the notes not yet read only those records
    are read, in one go, and a walk over them later reads them whole."""
    from engine.linkstore import LinkStore
    from engine.linktypes import LinkType as LT

    if warm:
        monkeypatch.setattr(LinkStore, "WARM_AFTER", 0)
    full = LinkGraph.build(linked)
    uris = sorted(linked.catalog())
    fetched: list[int] = []
    typed: list[int] = []
    real, real_typed = type(linked).link_ends_of, type(linked).link_ends_of_type

    def counting(self, todo, anchors=None):
        rows = real(self, todo, anchors)
        fetched.append(len(rows))
        return rows

    def counting_typed(self, todo, link_type):
        rows = real_typed(self, todo, link_type)
        typed.append(len(rows))
        return rows

    monkeypatch.setattr(type(linked), "link_ends_of", counting)
    monkeypatch.setattr(type(linked), "link_ends_of_type", counting_typed)
    for link_type in LT:
        expect = {u: [e for e in full.out_edges(u) if e.link_type is link_type] for u in uris}
        assert LazyLinks(linked).out_edges_of_type(uris, link_type) == expect, link_type
        half = LazyLinks(linked)
        half.prefetch(uris[::2])  # half of them read already
        assert half.out_edges_of_type(uris, link_type) == expect, link_type
        half.out_edges(uris[1])  # (and one made into edges)
        assert half.out_edges_of_type(uris, link_type) == expect, link_type
    assert (linked.linkstore._mirror is not None) == warm
    fetched.clear()
    typed.clear()
    lazy = LazyLinks(linked)
    derived = lazy.out_edges_of_type(uris, LT("derived_from"))
    assert typed == [len(uris)] and fetched == [] and any(derived.values())
    for uri in uris:
        assert [list(lazy.out_edges(uri)), list(lazy.in_edges(uri))] == [list(full.out_edges(uri)), list(full.in_edges(uri))]
    assert sum(fetched) == len(uris)


def test_edge_order_does_not_depend_on_storage_order(linked):
    """The same links stored in another order walk the same way."""
    links = list(linked.all_links())
    notes = set(linked.catalog())
    one, other = LinkGraph(links, notes), LinkGraph(list(reversed(links)), notes)
    for uri in sorted(notes):
        assert _walk(one, uri) == _walk(other, uri)


def test_search_gives_the_same_hits_without_the_full_graph(linked, monkeypatch):
    queries = [" ".join(json.loads(json.dumps(e.title)).split()[:2]) for e in list(linked.catalog().values())[:25]]
    queries += ["Who is " + e.title for e in list(linked.catalog().values())[30:35]]

    def run() -> list:
        return [[h.to_json() for h in search(linked, q, k=8)] for q in queries]

    lazy = run()
    full = LinkGraph.build(linked)
    with monkeypatch.context() as m:
        m.setattr(type(linked.services), "links", property(lambda self: full))
        assert run() == lazy
    assert any(r["kind"] in ("graph", "forced") for hits in lazy for h in hits for r in h["routes"])

    def refuse(*a, **k):
        raise AssertionError("search built the whole link graph")

    monkeypatch.setattr(LinkGraph, "build", classmethod(refuse))
    assert run() == lazy


def test_prefetched_links_are_the_links_fetched_note_by_note(linked):
    uris = sorted(linked.catalog())
    one_by_one, prefetched = LazyLinks(linked), LazyLinks(linked)
    prefetched.prefetch([*uris, "entities/no-such-note.md", "not a uri"])
    for uri in uris:
        assert _walk(prefetched, uri) == _walk(one_by_one, uri), uri
        assert prefetched.links(uri) == one_by_one.links(uri)


@pytest.mark.parametrize("warm", [False, True])
def test_a_snippets_links_are_those_anchored_in_its_window(vault, monkeypatch, warm):
    """The links a snippet renders (anchored in its window) are read for the hits at once,
    and are the ones a note-by-note read gives; a link without an anchor is not read, nor
    the records of a note with none (from the index, or a warm process's mirror)."""
    from engine.linkstore import LinkStore

    if warm:
        monkeypatch.setattr(LinkStore, "WARM_AFTER", 0)
    ada = vault.write_note("entity", {"name": "Ada", "kind": "person", "content": "Ada works with Bo on the loom."})
    bo = vault.write_note("entity", {"name": "Bo", "kind": "person", "content": "Bo weaves."})
    cy = vault.write_note("entity", {"name": "Cy", "kind": "person", "content": "Cy sells looms."})
    vault.link(ada.uri, bo.uri, "related_to", weight=0.9, match_text="Bo")
    vault.link(ada.uri, cy.uri, "related_to", weight=0.5)  # no anchor
    vault.link(cy.uri, ada.uri, "related_to", weight=0.5, match_text="looms")
    at_once, one_by_one = LazyLinks(vault), LazyLinks(vault)
    at_once.prefetch_anchored([ada.uri, bo.uri, cy.uri, "entities/none.md"])
    assert at_once._anchored[bo.uri] == [] and [r["to_uri"] for r in at_once._anchored[ada.uri]] == [bo.uri]
    assert at_once._ends == {} and (vault.linkstore._mirror is not None) == warm
    for uri, window, expect in [(ada.uri, "Ada works with Bo", [bo.uri]), (ada.uri, "Ada works", []),
                                (cy.uri, "Cy sells looms.", [ada.uri]), (bo.uri, "Bo weaves.", [])]:
        got = at_once.links(uri, within=window)
        assert [l.to_uri for l in got] == expect and got == one_by_one.links(uri, within=window)
    assert [l.to_uri for l in at_once.links(ada.uri)] == [bo.uri, cy.uri]  # without a window: every link
    hit = next(h for h in search(vault, "Ada works with Bo", k=5) if h.uri == ada.uri)
    assert "Bo" in hit.snippet and bo.uri in hit.snippet


def test_links_read_together_inside_a_transaction_include_what_it_staged(vault):
    """Records and walk ends alike: staged ones from the transaction, the same once it commits."""
    from engine.linktypes import LinkType

    a = vault.write_note("entity", {"name": "Ada", "kind": "person", "content": "Ada writes."})
    b = vault.write_note("entity", {"name": "Bo", "kind": "person", "content": "Bo reads."})
    with vault.transaction():
        vault.link(a.uri, b.uri, "related_to", weight=0.8)
        rows = vault.link_rows_of([a.uri, b.uri])
        assert [(r["direction"], r["to_uri"]) for r in rows[a.uri]] == [("links", b.uri)]
        assert [(r["direction"], r["from_uri"]) for r in rows[b.uri]] == [("backlinks", a.uri)]
        typed = LazyLinks(vault).out_edges_of_type([a.uri, b.uri], LinkType("related_to"))  # (a typed read: grouping)
        assert [(e.to_uri, e.weight) for e in typed[a.uri]] == [(b.uri, 0.8)] and typed[b.uri] == []
    assert vault.link_rows_of([a.uri, b.uri]) == rows
    with vault.transaction():
        c = vault.write_note("entity", {"name": "Cy", "kind": "person", "content": "Cy asks."})
        vault.link(c.uri, a.uri, "caused_by", weight=0.6, description="asked")
        staged = vault.link_ends_of([a.uri, c.uri])
        assert sorted(staged[a.uri]) == [("backlinks", c.uri, "caused_by", 0.6, staged[c.uri][0][4], "asked"),
                                         ("links", b.uri, "related_to", 0.8, rows[a.uri][0]["id"], "")]
    assert {u: sorted(e) for u, e in vault.link_ends_of([a.uri, c.uri]).items()} == {a.uri: sorted(staged[a.uri]), c.uri: staged[c.uri]}


def test_lazy_links_follow_link_writes(vault):
    a = vault.write_note("entity", {"name": "Ada", "kind": "person", "content": "Ada writes."})
    b = vault.write_note("entity", {"name": "Bo", "kind": "person", "content": "Bo reads."})
    before = vault.services.links
    assert list(before.steps(a.uri)) == [] and vault.services.links is before
    vault.link(a.uri, b.uri, "related_to", weight=0.8)
    after = vault.services.links
    assert after is not before
    assert [(s.dst, s.direction) for s in after.steps(a.uri)] == [(b.uri, "links")]
    assert [(s.dst, s.direction) for s in after.steps(b.uri)] == [(a.uri, "backlinks")]


# -- snippets ---------------------------------------------------------------------------------
_TOKEN = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+", re.UNICODE)


def reference_snippet(text: str, query_tokens: set[str], width: int = 220) -> str:
    """The snippet as it was: every word of the text stemmed (except that a CJK run's
    last character no longer counts twice, as its own "bigram")."""
    flat = " ".join(l.strip() for l in text.splitlines() if l.strip() and not l.startswith("#"))
    if len(flat) <= width:
        return flat
    runs = [(m.start(), m.group(0)) for m in _TOKEN.finditer(flat.lower())]
    words = [w for _, w in runs if not _IS_CJK.match(w)]
    stems = iter(_stemmer().stemWords(words)) if words else iter(())
    hits: list[int] = []
    for pos, run in runs:
        if _IS_CJK.match(run):
            for i, c in enumerate(run):
                if c in query_tokens:
                    hits.append(pos + i)
                if i + 1 < len(run) and run[i : i + 2] in query_tokens:
                    hits.append(pos + i)
        elif next(stems) in query_tokens:
            hits.append(pos)
    best = 0
    if hits:
        best_count = -1
        for h in hits:
            start = max(0, h - width // 5)
            count = sum(1 for x in hits if start <= x < start + width)
            if count > best_count:
                best, best_count = start, count
    window = flat[best : best + width]
    if best > 0:
        cut = window.find(" ")
        window = "…" + (window[cut + 1 :] if 0 <= cut < 30 else window)
    if best + width < len(flat):
        cut = window.rfind(" ")
        window = (window[:cut] if cut > width // 2 else window) + "…"
    return window


WORDS = ("dying lying tying die lies tie skies sky flying fly crying cries using used uses aging ages "
         "running runs runner generously generous organization organize relational relate happily happy "
         "early only gently ugly news atlas cosmos 2026 2026s x1 café naïve Straße über kiln firing fired "
         "celadon tiles studio harbour scheduling the a of and to is in").split()
CJK = ["蓝色", "陶瓷", "窑", "火", "的", "中文", "釉"]


def test_snippet_matches_stemming_every_word():
    rng = random.Random(11)
    for _ in range(400):
        pieces = []
        for _ in range(rng.randint(5, 160)):
            r = rng.random()
            pieces.append(rng.choice(CJK) if r < 0.1 else rng.choice(WORDS).capitalize() if r < 0.2 else rng.choice(WORDS))
            if rng.random() < 0.05:
                pieces.append("\n# A heading\n" if rng.random() < 0.3 else "\n")
        text = " ".join(pieces) + ("" if rng.random() < 0.5 else rng.choice(CJK) + "abc" + rng.choice(CJK))
        query = " ".join(rng.sample(WORDS, 3) + ([rng.choice(CJK)] if rng.random() < 0.3 else []))
        tokens = set(tokenize(query))
        assert snippet(text, tokens) == reference_snippet(text, tokens), (text, query)
        assert snippet(text, tokens, width=60) == reference_snippet(text, tokens, width=60), (text, query)


def test_snippet_finds_the_outlier_forms():
    text = "filler " * 80 + "the cat was dying slowly " + "filler " * 80
    window = snippet(text, set(tokenize("die")))
    assert "dying" in window and window.startswith("…") and window.endswith("…")


def test_snippet_of_a_long_note_looks_only_at_its_start():
    head = "kiln firing at the studio. " * 20
    text = head + "filler words here. " * (SNIPPET_SCAN // 10) + "celadon glaze"
    window = snippet(text, set(tokenize("celadon")))
    assert "celadon" not in window and window.endswith("…")  # the match is past the scanned part
    assert "kiln" in snippet(text, set(tokenize("kiln")))
    assert snippet("short " * 10 + "x" * SNIPPET_SCAN, set()).endswith("…")  # cut text says so


def test_snippets_come_from_the_indexed_text_without_reading_notes(sample, monkeypatch):
    """A search's snippets are cut from the text the index holds (stored with each
    document, or the delta's for a note written since the last commit): the same windows
    as from the files, and no note file is read. A note this thread's transaction has
    staged is read (the index has not seen it)."""
    from engine.vault import Vault as V

    index = sample.services.open_index()
    query = "flat white Man Met Bril"
    expected = [(h.uri, h.snippet) for h in search(sample, query, k=8, index=index)]
    reads: list[str] = []
    real = V.read_body
    monkeypatch.setattr(V, "read_body", lambda self, uri: reads.append(uri) or real(self, uri))
    from_index = [(h.uri, h.snippet) for h in search(sample, query, k=8, index=index)]
    assert from_index == expected and all(s for _, s in from_index) and reads == []

    # The titles shown are the catalog's, held beside the texts (no catalog entry is read).
    assert [h.title for h in search(sample, query, k=8, index=index)] == [sample.catalog()[u].title for u, _ in expected]

    top = expected[0][0]  # written now: the index's delta holds the new text, still no read
    text = sample.path(top).read_text(encoding="utf-8")
    title = sample.catalog()[top].title
    assert text.index(title) < text.index("\n---\n")  # (its name, in the frontmatter)
    with sample.transaction() as tx:
        tx.put_text(top, text.replace("flat white", "flat white, a second version,").replace(title, "Second", 1))
    reads.clear()  # (indexing the write read it)
    hit = next(h for h in search(sample, query, k=8, index=index) if h.uri == top)
    assert "second version" in hit.snippet and hit.title == "Second" == sample.catalog()[top].title and reads == []
    assert index.texts([top])[top][0] == "Second" and "second version" in index.texts([top])[top][1]
    with pytest.raises(RuntimeError), sample.transaction() as tx:  # staged only: read through it
        tx.put_text(top, text.replace("flat white", "flat white, a third version,"))
        hit = next(h for h in search(sample, query, k=8, index=index) if h.uri == top)
        assert "third version" in hit.snippet and reads == [top]
        raise RuntimeError("roll back")
    # A title edited by hand and synced into the catalog, the index not synced since: the
    # catalog's title is shown (the text is still the one searched).
    current = sample.path(top).read_text(encoding="utf-8")
    sample.path(top).write_text(current.replace("Second", "Renamed By Hand", 1), encoding="utf-8")
    sample.sync_catalog()
    assert sample.catalog()[top].title == "Renamed By Hand" and index.texts([top])[top][0] == "Second"
    hit = next(h for h in search(sample, query, k=8, index=index) if h.uri == top)
    assert hit.title == "Renamed By Hand" and "second version" in hit.snippet


# -- loading the vector snapshot ----------------------------------------------------------------
def test_vector_hits_are_each_notes_best_chunk_nearest_first():
    """A query names its notes by their nearest chunk, best first, and stops naming once
    it has k: the same as ranking every note by its best chunk (a small index: exact)."""
    import numpy as np

    from engine.index.vectors import VectorIndex

    rng = np.random.default_rng(5)
    vi = VectorIndex(16, ef_search=400)
    notes = {f"n{i}.md": rng.normal(size=(int(rng.integers(1, 6)), 16)).astype(np.float32) for i in range(120)}
    vi.put_many(list(notes.items()))
    vi.remove("n7.md")  # (deleted labels are skipped)
    for _ in range(30):
        q = rng.normal(size=16).astype(np.float32)
        cos = {u: float(np.max(v @ q / (np.linalg.norm(v, axis=1) * np.linalg.norm(q)))) for u, v in notes.items() if u != "n7.md"}
        for k in (1, 5, 12):
            got = vi.query(q, k)
            assert [u for u, _, _ in got] == sorted(cos, key=lambda u: -cos[u])[:k]
            assert all(abs(sim - cos[u]) < 1e-5 for u, sim, _ in got)
            assert all(np.isclose(notes[u][chunk] @ q / (np.linalg.norm(notes[u][chunk]) * np.linalg.norm(q)), sim, atol=1e-5)
                       for u, sim, chunk in got)


def test_a_loaded_vector_map_answers_queries_and_takes_writes(tmp_path):
    import numpy as np

    from engine.index.vectors import VectorIndex

    rng = np.random.default_rng(3)
    vi = VectorIndex(8)
    vi.put_many([(f"n{i}.md", rng.random((2, 8)).astype(np.float32)) for i in range(41)])
    vi.remove("n40.md")  # labels 80 and 81: none held
    uris = [f"n{i}.md" for i in range(40)][::-1]  # the caller's order, not the labels'
    meta = vi.save(tmp_path, "t", uris)
    loaded = VectorIndex.load(tmp_path, json.loads(json.dumps(meta)), uris)
    q = rng.random(8).astype(np.float32)
    assert len(loaded) == 80 and loaded.query(q, 5) == vi.query(q, 5)
    asked = np.array([0, 79, 80, 5, 10**6, 81, 3], dtype=np.uint64)  # three labels it does not hold
    assert list(loaded._labels_of(asked)) == [vi._label(int(x)) for x in asked] and list(loaded._labels_of(asked))[2] == (None, 0)
    loaded.put("n3.md", rng.random((1, 8)).astype(np.float32))  # a write unpacks the map
    vi.put("n3.md", loaded.index.get_items([loaded.by_uri["n3.md"][0]], return_type="numpy"))
    assert len(loaded) == 79 and loaded.by_uri["n3.md"] == [82]
    assert loaded.query(q, 5) == vi.query(q, 5)
    for broken in ([*meta["map"], 1], [*meta["map"], 999, 40, 0], [*meta["map"], 0, 1, 0], [*meta["map"][:-1], "0"]):
        with pytest.raises(ValueError, match="vector map"):
            VectorIndex.load(tmp_path, {**meta, "map": broken}, uris)


def test_the_weighted_digraph_sums_parallel_links_in_the_multigraphs_order():
    """PageRank's graph is built from the edges directly (not through the networkx
    multigraph): the same nodes, edges, summed weights and order, so the same scores."""
    import networkx as nx

    from engine.graph import Edge
    from engine.linktypes import LinkType

    rng = random.Random(5)
    notes = [f"n/{i}.md" for i in range(60)]
    types = [LinkType.named("related_to"), LinkType.named("contradicts"), LinkType.named("belongs_to")]
    edges = [Edge(f"l{i}", a, b, rng.choice(types), rng.choice([0.1, 0.3, 0.7, 1.0]), "")
             for i in range(400) for a, b in [rng.sample(notes, 2)]]
    graph = LinkGraph(edges, notes)
    expected = nx.DiGraph()
    expected.add_nodes_from(graph.g.nodes)
    for a, b, data in graph.g.edges(data=True):
        if expected.has_edge(a, b):
            expected[a][b]["weight"] += data["link"].weight
        else:
            expected.add_edge(a, b, weight=data["link"].weight)
    got = graph.weighted_digraph()
    assert any(w > 1.0 for _, _, w in got.edges(data="weight"))  # some pairs have several links
    assert list(got.nodes) == list(expected.nodes)
    assert list(got.edges(data=True)) == list(expected.edges(data=True))
    assert graph.ppr() == nx.pagerank(expected, weight="weight", tol=1e-10, max_iter=500)


def test_links_of_some_types_are_picked_in_sql(sample):
    table = sample.config.link_table()
    conflict = table.role("conflict")
    every = [l for l in sample.all_links() if l.link_type is conflict]
    assert every and list(sample.all_links(types=[conflict])) == every
    assert list(sample.all_links(types=[])) == []


def test_a_link_id_twice_on_one_pair_weighs_once_as_in_the_multigraph():
    from engine.graph import Edge
    from engine.linktypes import LinkType

    related = LinkType.named("related_to")
    edges = [Edge("legacy", "a.md", "b.md", related, 1.0, ""), Edge("legacy", "a.md", "b.md", related, 0.5, ""),
             Edge("l2", "a.md", "b.md", related, 0.25, "")]
    graph = LinkGraph(edges, ["a.md", "b.md"])
    assert graph.g.number_of_edges() == 2  # the multigraph keys edges by link id
    assert graph.weighted_digraph()["a.md"]["b.md"]["weight"] == 0.75


def test_an_entry_written_another_way_walks_as_in_the_full_graph(vault):
    """A sidecar entry another tool wrote with a path not in canonical form validates (the
    path is normalized); the index keeps it normalized, so the walk, the full graph and
    the checks all see the same link."""
    a = vault.write_note("entity", {"name": "Ada", "kind": "person", "content": "Ada writes."})
    b = vault.write_note("entity", {"name": "Bo", "kind": "person", "content": "Bo reads."})
    vault.link(a.uri, b.uri, "related_to", weight=0.8)
    path = vault.root / "entities" / ".relations.json"
    rows = json.loads(path.read_text(encoding="utf-8"))
    for row in rows:
        row["from_uri"] = "./" + row["from_uri"]
    path.write_text(json.dumps(rows), encoding="utf-8")
    lazy, full = LazyLinks(vault), LinkGraph.build(vault)
    for uri in (a.uri, b.uri):
        assert _walk(lazy, uri) == _walk(full, uri) != []
    assert {l.from_uri for l in vault.get_file_links(b.uri, "backlinks")} == {a.uri}


# -- keyword hits named by their keys -------------------------------------------------------
def _kw_index(folder: Path, known: list[str]):
    from engine.index.keywords import KeywordIndex

    index = KeywordIndex(folder, known=lambda: known)
    for uri, body in (("a.md", "quokka ferry"), ("b.md", "quokka island ferry"), ("c.md", "quokka")):
        index.put(uri, "note", uri, body, direct=True)
    index.flush()
    return index


def test_keyword_hits_are_named_by_key_and_by_document_where_the_key_tells_nothing(tmp_path, monkeypatch):
    import engine.index.keywords as keywords

    plain = _kw_index(tmp_path / "plain", [])  # no keys known: every hit's document is read
    want = plain.search("quokka ferry", 5)
    assert len(want) == 3 and {u for u, _ in want} == {"a.md", "b.md", "c.md"}
    keyed = _kw_index(tmp_path / "keyed", ["a.md", "b.md"])  # c.md indexed by someone else
    assert keyed.search("quokka ferry", 5) == want
    # Another writer adds a note after this index learnt its keys: found by its document.
    other = keywords.KeywordIndex(tmp_path / "keyed")
    other.put("d.md", "note", "d.md", "quokka ferry ferry", direct=True)
    other.flush()
    keyed.index.reload()
    assert "d.md" in dict(keyed.search("quokka ferry", 5))
    # Two notes with one key: neither is taken for the other.
    monkeypatch.setattr(keywords, "note_key", lambda uri: 7)
    shared = _kw_index(tmp_path / "shared", ["a.md", "b.md", "c.md"])
    assert shared.search("quokka ferry", 5) == want


# -- the notes' texts, kept beside the keyword index --------------------------------------------
def _texts_files(root: Path) -> list[Path]:
    path = root / ".memlink" / "index" / "texts.sqlite"
    return [Path(f"{path}{suffix}") for suffix in ("", "-wal", "-shm")]


@pytest.mark.parametrize("damage", ["deleted", "garbage", "behind"])
def test_note_texts_missing_damaged_or_behind_are_rebuilt_and_snippets_stay_right(sample, damage):
    """The snippets' texts (`.memlink/index/texts.sqlite`) are derived: deleted, not a
    database, or behind what the index recorded (an older copy: a flush lost), the next
    open rebuilds the index and says why; the snippets read as they should."""
    from engine.index import SearchIndex

    index = SearchIndex.for_vault(sample)
    saved = {p: p.read_bytes() for p in _texts_files(sample.root) if p.exists()}
    note = search(sample, "celadon glaze", k=1, index=index)[0].uri
    if damage == "behind":  # the note changes after the copy was taken
        old = sample.read_note(note)
        sample.write_note(old.memory_type, {**old.fields, "content": "A celadon glaze crawled in the second firing."}, uri=note)
        index.checkpoint()
    before = {h.uri: h.snippet for h in search(sample, "celadon glaze", k=5, index=index)}
    assert before and all(before.values())
    sample.close()
    for p in _texts_files(sample.root):
        p.unlink(missing_ok=True)
    if damage == "garbage":
        _texts_files(sample.root)[0].write_bytes(b"not a database at all " * 100)
    elif damage == "behind":
        for p, data in saved.items():
            p.write_bytes(data)
    again = Vault.open(sample.root)
    fresh = SearchIndex.for_vault(again)
    assert fresh.last_sync.rebuilt and "note texts" in fresh.last_sync.reason
    assert {h.uri: h.snippet for h in search(again, "celadon glaze", k=5, index=fresh)} == before


def test_closing_the_vault_lets_the_note_texts_go_and_a_later_search_opens_them_again(sample):
    """Closing lets the store's file go (SQLite folds its write-ahead log back and removes
    it with its index), so `.memlink/` holds still once the vault is closed; the index
    object still answers after (the store is opened again)."""
    from engine.index import SearchIndex

    index = SearchIndex.for_vault(sample)
    before = [(h.uri, h.title, h.snippet) for h in search(sample, "celadon glaze", k=5, index=index)]
    folder = sample.root / ".memlink" / "index"
    assert (folder / "texts.sqlite-wal").exists()
    index.close()
    assert not (folder / "texts.sqlite-wal").exists() and not (folder / "texts.sqlite-shm").exists()
    assert [(h.uri, h.title, h.snippet) for h in search(sample, "celadon glaze", k=5, index=index)] == before
    assert index.bodies is not None and not index.bodies.broken


def test_note_texts_damaged_while_in_use_leave_snippets_to_the_notes_and_a_rebuild(sample, monkeypatch):
    """A store that turns out damaged during a search: the snippets read the notes, the
    search goes on, and the index's next sync rebuilds it."""
    import sqlite3

    from engine.index import SearchIndex

    index = SearchIndex.for_vault(sample)
    before = {h.uri: h.snippet for h in search(sample, "celadon glaze", k=5, index=index)}

    class Damaged:
        def execute(self, *args, **kwargs):
            raise sqlite3.DatabaseError("database disk image is malformed")

    monkeypatch.setattr(index.bodies, "_open", Damaged())
    assert {h.uri: h.snippet for h in search(sample, "celadon glaze", k=5, index=index)} == before
    monkeypatch.undo()
    report = index.sync()
    assert report.rebuilt and "note texts unreadable" in report.reason
    assert {h.uri: h.snippet for h in search(sample, "celadon glaze", k=5, index=index)} == before


def test_a_walk_reads_each_links_weight_exactly(vault):
    """The walk's copy of a link (``ends``) keeps its weight to the last bit, so a link
    just under ``min_link_weight`` stays under it, as in the full graph."""
    a = vault.write_note("entity", {"name": "Ada", "content": "x"}).uri
    b = vault.write_note("entity", {"name": "Bo", "content": "x"}).uri
    vault.link(a, b, "related_to", weight=0.29999999999999993)
    lazy, full = LazyLinks(vault), LinkGraph.build(vault)
    assert [e.weight for e in lazy.out_edges(a)] == [0.29999999999999993] == [e.weight for e in full.out_edges(a)]
    assert list(lazy.in_edges(b)) == list(full.in_edges(b))
