"""Search at scale without the whole graph: a walk (``Walk``, reading each note's edges
from the link index as it reaches it) walks exactly what the full graph walks, search
gives the same hits through either and never builds the full graph, snippets render the
links anchored in their window, and snippets stem only the words that can match (the
same windows as stemming every word)."""

from __future__ import annotations

import json
import random
import re
import shutil
import sys
from pathlib import Path

import pytest

from engine import Vault
from engine.graph import LinkGraph, Walk
from engine.model.links import Edge
from engine.model.linktypes import LinkType
from engine.model.text import _CJK, _IS_CJK, SNIPPET_SCAN, _stemmer, snippet, tokenize
from engine.retrieve.search import propagation_params, search
from engine.storage.linkindex import LinkIndex

REPO = Path(__file__).resolve().parent.parent


# -- the walk against the full graph ------------------------------------------------------------
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
    vault.sync()
    return vault


def _walk(view, uri):
    return [(s.dst, s.direction, s.link.id, s.link.weight) for s in view.steps(uri)]


def test_a_walk_walks_what_the_full_graph_walks(linked):
    full = LinkGraph.build(linked)
    walk = Walk(linked)
    params = propagation_params(linked.config.search, linked.config.link_table())
    uris = sorted(linked.catalog.uris())
    assert sum(full.degree(u) for u in uris) > 1000
    for uri in uris:
        assert _walk(walk, uri) == _walk(full, uri), uri
        assert walk.backlink_count(uri) == full.backlink_count(uri)
        assert walk.forced_neighbours(uri, params) == full.forced_neighbours(uri, params)
    assert all(s.link.id != "link_odd" for u in uris for s in walk.steps(u))  # unknown type: no meaning
    rng = random.Random(5)
    for depth in (1, 3):
        p = propagation_params(linked.config.search.model_copy(update={"depth": depth}), linked.config.link_table())
        for _ in range(20):
            seeds = {u: rng.random() for u in rng.sample(uris, 8)}
            a, b = full.propagate(seeds, p), Walk(linked).propagate(seeds, p)
            assert list(a) == list(b)  # the same notes, met in the same order
            for uri in a:
                assert a[uri].score == b[uri].score
                assert [(s.src, s.link.id) for s in a[uri].via] == [(s.src, s.link.id) for s in b[uri].via]
    hub = max(uris, key=full.degree)
    assert Walk(linked).neighbourhood(hub, depth=2) == full.neighbourhood(hub, depth=2)
    for direction in ("in", "out"):
        assert Walk(linked).neighbourhood(hub, direction=direction, depth=2) == full.neighbourhood(hub, direction=direction, depth=2)


def test_a_one_hop_walk_counts_the_notes_it_reaches_in_the_seeds_read(linked, monkeypatch):
    """The hub test's degrees of the notes one hop reaches come with the seeds' edges, in
    the same read, and are the link index's counts of them."""
    uris = sorted(linked.catalog.uris())
    params = propagation_params(linked.config.search, linked.config.link_table())
    seeds = {u: 1.0 for u in uris[:8]}
    reads: list[str] = []
    for name in ("edges", "counts"):
        real = getattr(LinkIndex, name)
        monkeypatch.setattr(LinkIndex, name, lambda self, todo, *a, _n=name, _r=real, **k: reads.append(_n) or _r(self, todo, *a, **k))
    walk = Walk(linked)
    spread = walk.propagate(seeds, params)
    assert spread and reads == ["edges"]
    reached = [u for u in spread if u not in seeds]
    assert walk.degrees(reached) == linked.links.counts(reached)


def test_edges_read_together_are_the_edges_read_note_by_note(linked):
    uris = sorted(linked.catalog.uris())
    one_by_one, together = Walk(linked), Walk(linked)
    together.prefetch([*uris, "entities/no-such-note.md", "not a uri"])
    for uri in uris:
        assert _walk(together, uri) == _walk(one_by_one, uri), uri
    assert list(together.out_edges("entities/no-such-note.md")) == [] == list(together.in_edges("not a uri"))


def test_links_of_one_type_are_the_full_graphs_and_read_in_one_go(linked, monkeypatch):
    """``out_edges_of_type`` (a search's grouping asks it of 40 notes) gives what the full
    graph's edges of that type are, whether the notes were read already or not; of the
    notes not yet read, only that type's records are read, in one go."""
    full = LinkGraph.build(linked)
    uris = sorted(linked.catalog.uris())
    for link_type in LinkType:
        expect = {u: [e for e in full.out_edges(u) if e.link_type is link_type] for u in uris}
        assert Walk(linked).out_edges_of_type(uris, link_type) == expect, link_type
        half = Walk(linked)
        half.prefetch(uris[::2])  # half of them read already
        assert half.out_edges_of_type(uris, link_type) == expect, link_type
        half.out_edges(uris[1])  # (and one more read alone)
        assert half.out_edges_of_type(uris, link_type) == expect, link_type

    asked: list[list[str]] = []
    real = LinkIndex.edges
    monkeypatch.setattr(LinkIndex, "edges", lambda self, todo, *a, **k: asked.append(list(todo)) or real(self, todo, *a, **k))
    walk = Walk(linked)
    walk.prefetch(uris[::2])
    asked.clear()
    derived = walk.out_edges_of_type(uris, LinkType.named("derived_from"))
    assert any(derived.values())
    assert asked == [uris[1::2]]  # the rest, in one read
    for uri in uris:
        assert [list(walk.out_edges(uri)), list(walk.in_edges(uri))] == [list(full.out_edges(uri)), list(full.in_edges(uri))]


def test_edge_order_does_not_depend_on_storage_order(linked, tmp_path):
    """The same links stored in another order walk the same way: handed to the graph in
    reverse, or written in reverse in every sidecar."""
    links = list(linked.links.all())
    notes = set(linked.catalog.uris())
    one, other = LinkGraph(links, notes), LinkGraph(list(reversed(links)), notes)
    for uri in sorted(notes):
        assert _walk(one, uri) == _walk(other, uri)

    copy = tmp_path / "reversed"
    shutil.copytree(linked.root, copy, ignore=shutil.ignore_patterns(".memlink"))
    cars = list(copy.rglob(".relations.json"))
    assert cars
    for car in cars:
        car.write_text(json.dumps(json.loads(car.read_text(encoding="utf-8"))[::-1]), encoding="utf-8")
    flipped = Vault.open(copy)
    there, here = Walk(flipped), Walk(linked)
    for uri in sorted(notes):
        assert _walk(there, uri) == _walk(here, uri), uri
    assert [(u, _walk(LinkGraph.build(flipped), u)) for u in sorted(notes)[:50]] == \
        [(u, _walk(one, u)) for u in sorted(notes)[:50]]
    flipped.close()


def test_search_gives_the_same_hits_with_the_full_graph_as_with_the_walk(linked, monkeypatch):
    import engine.retrieve.search as search_module

    entries = linked.catalog.all()
    queries = [" ".join(e.title.split()[:2]) for e in entries[:25]]
    queries += ["Who is " + e.title for e in entries[30:35]]

    def run() -> list:
        return [[h.to_json() for h in search(linked, q, k=8)] for q in queries]

    walked = run()
    full = LinkGraph.build(linked)
    with monkeypatch.context() as m:
        m.setattr(search_module, "Walk", lambda vault: full)
        assert run() == walked
    assert any(r["kind"] in ("graph", "forced") for hits in walked for h in hits for r in h["routes"])

    def refuse(*a, **k):
        raise AssertionError("search built the whole link graph")

    monkeypatch.setattr(LinkGraph, "build", classmethod(refuse))
    monkeypatch.setattr(LinkGraph, "for_vault", classmethod(refuse))
    assert run() == walked


def test_a_snippets_links_are_those_anchored_in_its_window(vault, monkeypatch):
    """A hit's snippet renders the links of the note anchored in its window: not those
    anchored elsewhere in the note, nor a link without an anchor. The hits' links are read
    together, in one read."""
    ada = vault.write_note("entity", {"name": "Ada", "kind": "person", "content": "Ada works with Bo on the loom."})
    bo = vault.write_note("entity", {"name": "Bo", "kind": "person", "content": "Bo weaves."})
    cy = vault.write_note("entity", {"name": "Cy", "kind": "person", "content": "Cy sells looms."})
    long = vault.write_note("entity", {"name": "Dee", "kind": "person",
                                       "content": "Dee met Bo once. " + "Filler words go here. " * 40 + "Dee glazes celadon tiles."})
    vault.link(ada.uri, bo.uri, "related_to", weight=0.9, match_text="Bo")
    vault.link(ada.uri, cy.uri, "related_to", weight=0.5)  # no anchor
    vault.link(cy.uri, ada.uri, "related_to", weight=0.5, match_text="looms")
    vault.link(long.uri, bo.uri, "related_to", weight=0.9, match_text="met Bo")

    hit = next(h for h in search(vault, "Ada works with Bo", k=5) if h.uri == ada.uri)
    assert "Bo" in hit.snippet and bo.uri in hit.snippet and cy.uri not in hit.snippet
    hit = next(h for h in search(vault, "Cy sells looms", k=5) if h.uri == cy.uri)
    assert ada.uri in hit.snippet
    hit = next(h for h in search(vault, "Bo weaves", k=5) if h.uri == bo.uri)
    assert "Bo weaves." in hit.snippet and ada.uri not in hit.snippet  # (its backlinks are not rendered)
    hit = next(h for h in search(vault, "celadon glaze tiles", k=5) if h.uri == long.uri)
    assert "celadon" in hit.snippet and "met Bo" not in hit.snippet and bo.uri not in hit.snippet  # anchored outside
    hit = next(h for h in search(vault, "Dee met Bo", k=5) if h.uri == long.uri)
    assert "met Bo" in hit.snippet and bo.uri in hit.snippet  # anchored inside

    reads: list[tuple[list[str], str]] = []
    real = LinkIndex.of_many
    monkeypatch.setattr(LinkIndex, "of_many", lambda self, uris, direction="both", **kw:
                        reads.append((list(uris), direction)) or real(self, uris, direction, **kw))
    hits = search(vault, "Ada Bo Cy Dee", k=5)
    shown = [(uris, d) for uris, d in reads if d == "links"]
    assert len(shown) == 1 and set(shown[0][0]) == {h.uri for h in hits}


def test_a_hits_snippet_and_title_show_the_note_as_it_is_now(sample):
    """A note written since the index was opened, one staged in this thread's unit of
    work, one renamed by hand and synced: its hit shows its text and title as they are."""
    from engine.index import SearchIndex

    index = SearchIndex.for_vault(sample)
    query = "flat white Man Met Bril"
    expected = [(h.uri, h.snippet) for h in search(sample, query, k=8, index=index)]
    assert expected and all(s for _, s in expected)
    assert [h.title for h in search(sample, query, k=8, index=index)] == [sample.catalog.get(u).title for u, _ in expected]

    top = expected[0][0]
    text = sample.path(top).read_text(encoding="utf-8")
    title = sample.catalog.get(top).title
    assert text.index(title) < text.index("\n---\n")  # (its name, in the frontmatter)
    with sample.transaction() as tx:
        tx.put_text(top, text.replace("flat white", "flat white, a second version,").replace(title, "Second", 1))
    hit = next(h for h in search(sample, query, k=8, index=index) if h.uri == top)
    assert "second version" in hit.snippet and hit.title == "Second" == sample.catalog.get(top).title
    with pytest.raises(RuntimeError), sample.transaction() as tx:  # staged only: read through it
        tx.put_text(top, text.replace("flat white", "flat white, a third version,"))
        hit = next(h for h in search(sample, query, k=8, index=index) if h.uri == top)
        assert "third version" in hit.snippet
        raise RuntimeError("roll back")
    hit = next(h for h in search(sample, query, k=8, index=index) if h.uri == top)
    assert "second version" in hit.snippet and "third version" not in hit.snippet
    # A title edited by hand and synced into the catalog, the index not synced since: the
    # catalog's title is shown.
    current = sample.path(top).read_text(encoding="utf-8")
    sample.path(top).write_text(current.replace("Second", "Renamed By Hand", 1), encoding="utf-8")
    sample.sync()
    assert sample.catalog.get(top).title == "Renamed By Hand"
    hit = next(h for h in search(sample, query, k=8, index=index) if h.uri == top)
    assert hit.title == "Renamed By Hand" and "second version" in hit.snippet


def test_links_read_inside_a_transaction_include_what_it_staged(vault):
    """A note's records, a walk's edges and a typed read alike: staged ones from the
    transaction, the same once it commits."""
    a = vault.write_note("entity", {"name": "Ada", "kind": "person", "content": "Ada writes."})
    b = vault.write_note("entity", {"name": "Bo", "kind": "person", "content": "Bo reads."})
    related = LinkType.named("related_to")
    with vault.transaction():
        vault.link(a.uri, b.uri, "related_to", weight=0.8)
        rows = vault.links.of_many([a.uri, b.uri])
        assert [(l.direction, l.to_uri) for l in rows[a.uri]] == [("links", b.uri)]
        assert [(l.direction, l.from_uri) for l in rows[b.uri]] == [("backlinks", a.uri)]
        assert vault.links.of(a.uri, "links") == rows[a.uri] and vault.links.of(a.uri, as_staged=False) == []
        typed = Walk(vault).out_edges_of_type([a.uri, b.uri], related)  # (a typed read: grouping)
        assert [(e.to_uri, e.weight) for e in typed[a.uri]] == [(b.uri, 0.8)] and typed[b.uri] == []
        walk = Walk(vault)
        assert [(s.dst, s.direction) for s in walk.steps(a.uri)] == [(b.uri, "links")]
        assert [(s.dst, s.direction) for s in walk.steps(b.uri)] == [(a.uri, "backlinks")]
    assert vault.links.of_many([a.uri, b.uri]) == rows
    with vault.transaction():
        c = vault.write_note("entity", {"name": "Cy", "kind": "person", "content": "Cy asks."})
        vault.link(c.uri, a.uri, "caused_by", weight=0.6, description="asked")
        staged = vault.links.edges([a.uri, c.uri])
        out_a, in_a = staged[a.uri]
        assert [(e.to_uri, e.link_type.value, e.weight, e.id) for e in out_a] == [(b.uri, "related_to", 0.8, rows[a.uri][0].id)]
        assert [(e.from_uri, e.link_type.value, e.weight, e.description) for e in in_a] == [(c.uri, "caused_by", 0.6, "asked")]
        assert staged[c.uri][0] == in_a and staged[c.uri][1] == []
    committed = vault.links.edges([a.uri, c.uri])
    assert {u: (sorted(o), sorted(i)) for u, (o, i) in committed.items()} == \
        {u: (sorted(o), sorted(i)) for u, (o, i) in staged.items()}


def test_a_walk_made_after_a_link_write_sees_it(vault):
    a = vault.write_note("entity", {"name": "Ada", "kind": "person", "content": "Ada writes."})
    b = vault.write_note("entity", {"name": "Bo", "kind": "person", "content": "Bo reads."})
    assert list(Walk(vault).steps(a.uri)) == []
    vault.link(a.uri, b.uri, "related_to", weight=0.8)
    after = Walk(vault)
    assert [(s.dst, s.direction) for s in after.steps(a.uri)] == [(b.uri, "links")]
    assert [(s.dst, s.direction) for s in after.steps(b.uri)] == [(a.uri, "backlinks")]
    vault.unlink(a.uri, b.uri)
    assert list(Walk(vault).steps(a.uri)) == [] == list(Walk(vault).steps(b.uri))


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


# -- vectors --------------------------------------------------------------------------------------
def test_vector_hits_are_each_notes_best_chunk_nearest_first():
    """A query names its notes by their nearest chunk, best first, and stops naming once
    it has k: the same as ranking every note by its best chunk (a small index: exact)."""
    import numpy as np

    from engine.index.vectors import VectorIndex
    from engine.storage.store import Store

    rng = np.random.default_rng(5)
    vi = VectorIndex("notes", Store(None), None, 16, ef_search=400)
    notes = {f"n{i}.md": rng.normal(size=(int(rng.integers(1, 6)), 16)).astype(np.float32) for i in range(120)}
    vi.put_many(list(notes.items()))
    vi.remove(["n7.md"])  # (deleted labels are skipped)
    for _ in range(30):
        q = rng.normal(size=16).astype(np.float32)
        cos = {u: float(np.max(v @ q / (np.linalg.norm(v, axis=1) * np.linalg.norm(q)))) for u, v in notes.items() if u != "n7.md"}
        for k in (1, 5, 12):
            got = vi.query(q, k)
            assert [u for u, _, _ in got] == sorted(cos, key=lambda u: -cos[u])[:k]
            assert all(abs(sim - cos[u]) < 1e-5 for u, sim, _ in got)
            assert all(np.isclose(notes[u][chunk] @ q / (np.linalg.norm(notes[u][chunk]) * np.linalg.norm(q)), sim, atol=1e-5)
                       for u, sim, chunk in got)


def test_a_saved_vector_index_loads_answers_queries_and_takes_writes(tmp_path):
    import numpy as np

    from engine.index.vectors import VectorIndex
    from engine.storage.store import Store

    rng = np.random.default_rng(3)
    store = Store(tmp_path / "index.sqlite")
    folder = tmp_path / "vectors"
    vi = VectorIndex("t", store, folder, 8)
    assert not vi.load()  # nothing saved yet
    vi.put_many([(f"n{i}.md", rng.random((2, 8)).astype(np.float32)) for i in range(41)])
    vi.remove(["n40.md"])
    with store.write() as w:
        name = vi.save(w)
    vi.saved(name)
    q = rng.random(8).astype(np.float32)

    other = Store(tmp_path / "index.sqlite")  # another process
    loaded = VectorIndex("t", other, folder, 8)
    assert loaded.load()
    assert len(loaded) == len(vi) == 80 and loaded.query(q, 5) == vi.query(q, 5)
    assert loaded.cosines(q, ["n3.md", "n40.md"]).keys() == {"n3.md"}

    new = rng.random((1, 8)).astype(np.float32)  # a write after loading
    for index in (loaded, vi):
        index.put_many([("n3.md", new)])
    assert len(loaded) == len(vi) == 79 and loaded.query(q, 5) == vi.query(q, 5)
    assert loaded.query(new[0], 1)[0][:1] == ("n3.md",)
    with other.write() as w:
        name = loaded.save(w)
    loaded.saved(name)
    assert len(list(folder.glob("*.bin"))) == 1  # the file it replaced is gone
    again = VectorIndex("t", Store(tmp_path / "index.sqlite"), folder, 8)
    assert again.load() and len(again) == 79 and again.query(q, 5) == loaded.query(q, 5)

    # A snapshot that cannot be used is not loaded (the caller rebuilds).
    assert not VectorIndex("t", store, folder, 16).load()  # other dimensions
    assert not VectorIndex("t", store, folder, 8, M=32).load()  # other parameters
    assert not VectorIndex("t", store, None, 8).load()  # in memory
    for path in folder.glob("*.bin"):
        path.unlink()
    assert not VectorIndex("t", store, folder, 8).load()  # its file gone


# -- the whole graph ------------------------------------------------------------------------------
def test_the_weighted_digraph_sums_parallel_links_in_the_multigraphs_order():
    """PageRank's graph is built from the edges directly (not through the networkx
    multigraph): the same nodes, edges, summed weights and order, so the same scores."""
    import networkx as nx

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


def test_a_link_id_twice_on_one_pair_weighs_once_as_in_the_multigraph():
    related = LinkType.named("related_to")
    edges = [Edge("legacy", "a.md", "b.md", related, 1.0, ""), Edge("legacy", "a.md", "b.md", related, 0.5, ""),
             Edge("l2", "a.md", "b.md", related, 0.25, "")]
    graph = LinkGraph(edges, ["a.md", "b.md"])
    assert graph.g.number_of_edges() == 2  # the multigraph keys edges by link id
    assert graph.weighted_digraph()["a.md"]["b.md"]["weight"] == 0.75


def test_links_of_some_types_are_picked_in_sql(sample, monkeypatch):
    table = sample.config.link_table()
    conflict = table.role("conflict")
    every = [l for l in sample.links.all() if l.link_type is conflict]
    assert every and sample.links.all(types=[conflict]) == every
    assert sample.links.all(types=[conflict.value]) == every  # (by name too)
    assert sample.links.all(types=[]) == []
    two = [l for l in sample.links.all() if l.link_type in (conflict, table.role("provenance"))]
    assert sample.links.all(types=[conflict, table.role("provenance")]) == two and len(two) > len(every)


def test_an_entry_written_another_way_walks_as_in_the_full_graph(vault):
    """A sidecar entry another tool wrote with a path not in canonical form validates (the
    path is normalized); the index keeps it normalized, so the walk, the full graph and
    the checks all see the same link."""
    from engine.lint.memo import check

    a = vault.write_note("entity", {"name": "Ada", "kind": "person", "content": "Ada writes."})
    b = vault.write_note("entity", {"name": "Bo", "kind": "person", "content": "Bo reads."})
    vault.link(a.uri, b.uri, "related_to", weight=0.8)
    path = vault.root / "entities" / ".relations.json"
    rows = json.loads(path.read_text(encoding="utf-8"))
    for row in rows:
        row["from_uri"] = "./" + row["from_uri"]
    path.write_text(json.dumps(rows), encoding="utf-8")
    walk, full = Walk(vault), LinkGraph.build(vault)
    for uri in (a.uri, b.uri):
        assert _walk(walk, uri) == _walk(full, uri) != []
    assert {l.from_uri for l in vault.links.of(b.uri, "backlinks")} == {a.uri}
    assert [l.from_uri for l in vault.links.all()] == [a.uri]
    assert check(vault) == []


def test_a_walk_reads_each_links_weight_exactly(vault):
    """A walk's copy of a link keeps its weight to the last bit, so a link just under
    ``min_link_weight`` stays under it, as in the full graph."""
    a = vault.write_note("entity", {"name": "Ada", "content": "x"}).uri
    b = vault.write_note("entity", {"name": "Bo", "content": "x"}).uri
    vault.link(a, b, "related_to", weight=0.29999999999999993)
    walk, full = Walk(vault), LinkGraph.build(vault)
    assert [e.weight for e in walk.out_edges(a)] == [0.29999999999999993] == [e.weight for e in full.out_edges(a)]
    assert list(walk.in_edges(b)) == list(full.in_edges(b))
    assert [l.weight for l in vault.links.of(a, "links")] == [0.29999999999999993]


def test_the_scale_benchmarks_raw_baseline_reads_memlinks_own_index(sample):
    """benchmarks/bench_scale.py times raw hnswlib + tantivy over the files memlink wrote:
    its program must still read them as they are laid out (field names included)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import subprocess

    from bench_scale import RAW_QUERY, py

    from engine.index import SearchIndex
    from engine.index.embed import bundled_model_path

    SearchIndex.for_vault(sample).sync()
    sample.close()
    out = subprocess.run(py(RAW_QUERY, str(sample.root), str(bundled_model_path()), "200", "kiln glaze"),
                         capture_output=True, text=True, check=True)
    assert "entities/klei-vuur.md" in out.stdout
