"""The link graph (networkx) built from the link index: typed propagation for search
(docs/DESIGN.md "Search", with the weights of the link-type table, "Link types"),
Personalized PageRank for hub finding, neighbourhood queries (GBrain's graph-query) and
paths.

Walking (propagation, steps, forced neighbours, neighbourhoods) is written once, in
``Adjacency``, over two ways of getting a note's edges: ``LinkGraph`` holds every link of
the vault (PageRank, paths, the graph pane, the dream), ``LazyLinks`` fetches a note's
links when a walk reaches it (search: it looks only at a few seeds' neighbourhoods, and
building the whole graph costs seconds and hundreds of MB at 100k notes). Both give a
note's edges in one canonical order (strongest first, then by the far note, type and id),
so a walk gives the same result through either, whatever order the links are stored in.

One graph per open Vault, kept by its services (``vault.services.graph``), rebuilt when
``vault.links_version`` moves (every link write, and sidecars changed outside memlink);
the lazy view (``vault.services.links``) is dropped at the same moments."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from .catalog import Catalog, parses
from .links import LinkType, StoredLink, decode_record
from .linkstore import links_of_type
from .linktypes import Flow, LinkTypeTable, builtin_table
from .uris import normalize_uri

if TYPE_CHECKING:
    import networkx as nx

    from .catalog import CatalogEntry
    from .linkstore import End
    from .vault import Vault

Direction = Literal["links", "backlinks"]


# How score flows along one (link_type, direction): weight, continue, max depth. The
# values are the link-type table's (docs/DESIGN.md "Link types"). "links" = following a
# link from its from-note to its to-note; "backlinks" = arriving at a note's backlink and
# walking to the note that links to it.
Rule = Flow
PROPAGATION: dict[tuple[LinkType, Direction], Rule] = builtin_table().propagation()


class Step(NamedTuple):
    """One edge walked: from ``src`` to ``dst`` over ``link`` in ``direction``. (A named
    tuple, as ``Edge``: a search makes hundreds, and a frozen dataclass costs three
    times as much to make.)"""

    src: str
    dst: str
    link: StoredLink | Edge
    direction: Direction

    def describe(self) -> str:
        arrow = "→" if self.direction == "links" else "←"
        return f"{self.link.link_type.value} {arrow} {self.src}"


@dataclass
class Propagated:
    score: float = 0.0
    via: list[Step] = field(default_factory=list)  # strongest contributions first


@dataclass
class PropagationParams:
    damping: float = 0.85
    depth: int = 1
    min_link_weight: float = 0.3
    forced_follow: tuple[LinkType, ...] = field(default_factory=lambda: builtin_table().forced_follow())
    table: dict[tuple[LinkType, Direction], Rule] = field(default_factory=lambda: dict(PROPAGATION))

    @classmethod
    def for_table(cls, link_types: LinkTypeTable, **params: Any) -> PropagationParams:
        """Parameters whose propagation table and forced follow are ``link_types``'s."""
        params.setdefault("forced_follow", link_types.forced_follow())
        return cls(table=link_types.propagation(), **params)


class Edge(NamedTuple):
    """A link as the graph keeps it: what walking and explaining need, nothing more
    (a 100k-note vault holds hundreds of thousands of these)."""

    id: str
    from_uri: str
    to_uri: str
    link_type: LinkType
    weight: float
    description: str = ""


def canonical(edges: Iterable[Edge], far: Literal["to_uri", "from_uri"]) -> list[Edge]:
    """A note's edges in the order every walk uses: strongest first, then by the note at
    the far end, the type and the id. Storage order (sidecar lines, the graph's build
    order) never decides a tie, so every process and every view ranks alike."""
    edges = list(edges)
    if len(edges) < 2:
        return edges
    return sorted(edges, key=_BY_TO if far == "to_uri" else _BY_FROM)


# (A type sorts as its name: LinkType is a str.)
def _BY_TO(e: Edge) -> tuple:  # noqa: N802
    return -e.weight, e.to_uri, e.link_type, e.id


def _BY_FROM(e: Edge) -> tuple:  # noqa: N802
    return -e.weight, e.from_uri, e.link_type, e.id


class Adjacency:
    """A note's edges out and in, and the walks over them: typed propagation, steps,
    forced neighbours, neighbourhoods. Subclasses say where the edges come from."""

    # -- walking ----------------------------------------------------------------------------
    def out_edges(self, uri: str) -> Sequence[Edge]:
        """The links ``uri`` makes, in canonical order (``canonical``)."""
        raise NotImplementedError

    def in_edges(self, uri: str) -> Sequence[Edge]:
        """The links made to ``uri`` (its backlinks), in canonical order."""
        raise NotImplementedError

    def prefetch(self, uris: Iterable[str]) -> None:
        """A hint: a walk is about to read these notes' edges (a view that fetches on
        demand reads them in one go)."""

    def out_edges_of_type(self, uris: Iterable[str], link_type: LinkType) -> dict[str, list[Edge]]:
        """Each note's links of one type, in canonical order: ``out_edges`` filtered (a
        view that fetches on demand reads only those records of notes it has not read)."""
        return {uri: [e for e in self.out_edges(uri) if e.link_type is link_type] for uri in uris}

    def steps(self, uri: str) -> Iterable[Step]:
        """Every edge out of ``uri``: its links (→) and its backlinks (←)."""
        for e in self.out_edges(uri):
            yield Step(uri, e.to_uri, e, "links")
        for e in self.in_edges(uri):
            yield Step(uri, e.from_uri, e, "backlinks")

    def degree(self, uri: str) -> int:
        return len(self.out_edges(uri)) + len(self.in_edges(uri))

    def backlink_count(self, uri: str) -> int:
        return len(self.in_edges(uri))

    def propagate(self, seeds: dict[str, float], params: PropagationParams) -> dict[str, Propagated]:
        """Spread seed scores along typed links (docs/DESIGN.md, "Search": graph propagation).

        Each step multiplies by the table weight of (link_type, direction), the link's own
        weight and the damping factor, divided by √degree of the note it leaves; links
        under ``min_link_weight`` are skipped; a note reached over a non-continuing rule,
        or at the depth limit, spreads no further; a rule is not used past its max depth.
        Contributions from several seeds combine by noisy-OR, 1 - Π(1 - c): two weak
        paths to a bridging note beat one, but a hub reached from every seed stays below 1."""
        out: dict[str, Propagated] = defaultdict(Propagated)

        def combine(a: float, b: float) -> float:
            return 1.0 - (1.0 - a) * (1.0 - min(b, 1.0))  # noisy-OR: bounded, additive when small

        table, min_weight, damping = params.table, params.min_link_weight, params.damping
        self.prefetch(seed for seed, score in seeds.items() if score > 0)  # (one read for every seed's first hop)
        for seed, seed_score in seeds.items():
            if seed_score <= 0:
                continue
            # Breadth-first from each seed; a note is reached once per seed (at its nearest
            # hop), so score never echoes back along the way it came.
            visited = {seed}
            frontier = [(seed, seed_score)]
            for hop in range(1, params.depth + 1):
                self.prefetch(uri for uri, _ in frontier)
                reached: dict[str, list] = {}  # dst -> [gain, steps, continues]
                for uri, score in frontier:
                    outs, ins = self.out_edges(uri), self.in_edges(uri)
                    # A note's score spreads over its links, as a random walk's does: divided
                    # by √degree of the note it leaves, so a hub does not flood.
                    spread = math.sqrt(max(1, len(outs) + len(ins)))
                    sides: tuple[tuple[Direction, Sequence[Edge]], ...] = (("links", outs), ("backlinks", ins))
                    for direction, edges in sides:
                        forward = direction == "links"
                        for e in edges:
                            dst = e.to_uri if forward else e.from_uri
                            if dst in visited or e.weight < min_weight:
                                continue
                            rule = table.get((e.link_type, direction))
                            if rule is None or hop > rule.max_depth:
                                continue
                            gain = score * rule.weight * e.weight * damping / spread
                            step = Step(uri, dst, e, direction)
                            prev = reached.get(dst)
                            if prev is None:
                                reached[dst] = [combine(0.0, gain), [step], rule.cont]
                            else:
                                prev[0] = combine(prev[0], gain)
                                prev[1].append(step)
                                prev[2] = prev[2] or rule.cont
                frontier = []
                for dst, (gain, steps, cont) in reached.items():
                    visited.add(dst)
                    got = out[dst]
                    got.score = combine(got.score, gain)
                    got.via.extend(steps)
                    if cont:
                        frontier.append((dst, gain))
                if not frontier:
                    break
        for p in out.values():
            p.via.sort(key=lambda s: -s.link.weight)
        return dict(out)

    def forced_neighbours(self, uri: str, params: PropagationParams) -> list[Step]:
        """Links that search always follows one hop, whatever their weight (the table's
        forced_follow types, docs/DESIGN.md "Link types")."""
        return [s for s in self.steps(uri) if s.link.link_type in params.forced_follow]

    def neighbourhood(
        self,
        uri: str,
        types: set[LinkType] | None = None,
        direction: Literal["in", "out", "both"] = "both",
        depth: int = 1,
    ) -> list[tuple[int, Step]]:
        """GBrain's graph-query: notes reachable from ``uri`` within ``depth`` hops over
        links of the given types, following outgoing links (out), backlinks (in) or both.
        Returns (hop, step) pairs in breadth-first order, each note once."""
        seen = {uri}
        out: list[tuple[int, Step]] = []
        frontier = [uri]
        for hop in range(1, depth + 1):
            nxt = []
            for node in frontier:
                for step in self.steps(node):
                    if types and step.link.link_type not in types:
                        continue
                    if direction == "out" and step.direction != "links":
                        continue
                    if direction == "in" and step.direction != "backlinks":
                        continue
                    if step.dst in seen:
                        continue
                    seen.add(step.dst)
                    out.append((hop, step))
                    nxt.append(step.dst)
            frontier = nxt
        return out


def _sum(weights: Iterable[float]) -> float:
    """Left to right, as the multigraph path added them (float sums depend on order)."""
    total = 0.0
    for w in weights:
        total += w
    return total


class LinkGraph(Adjacency):
    """Every link between notes of the vault, in memory (and as networkx on first use)."""

    def __init__(self, links: Iterable[StoredLink | Edge], notes: Iterable[str] = ()):
        self.nodes: set[str] = set(notes)
        self.out: dict[str, list[Edge]] = defaultdict(list)
        self.inc: dict[str, list[Edge]] = defaultdict(list)
        for link in links:
            if getattr(link, "direction", "links") != "links":
                continue
            edge = link if isinstance(link, Edge) else Edge(
                link.id, link.from_uri, link.to_uri, link.link_type, link.weight, link.description
            )
            self.out[edge.from_uri].append(edge)
            self.inc[edge.to_uri].append(edge)
            self.nodes.update((edge.from_uri, edge.to_uri))
        self._nx: nx.MultiDiGraph | None = None
        self._ordered: dict[tuple[str, str], list[Edge]] = {}  # (uri, side) -> its edges, canonical

    def out_edges(self, uri: str) -> Sequence[Edge]:
        return self._canonical(self.out, uri, "out")

    def in_edges(self, uri: str) -> Sequence[Edge]:
        return self._canonical(self.inc, uri, "in")

    def _canonical(self, table: dict[str, list[Edge]], uri: str, side: str) -> Sequence[Edge]:
        edges = table.get(uri)
        if not edges:
            return ()
        ordered = self._ordered.get((uri, side))
        if ordered is None:  # sorted on first use: a walk touches few notes
            ordered = self._ordered[uri, side] = canonical(edges, "to_uri" if side == "out" else "from_uri")
        return ordered

    @classmethod
    def for_vault(cls, vault: Vault) -> LinkGraph:
        """The vault's graph, kept by its services and rebuilt when its links changed."""
        return vault.services.graph

    @classmethod
    def build(cls, vault: Vault) -> LinkGraph:
        """A fresh graph from the vault's link index (``vault.services.graph`` keeps one).
        The index holds only records that validated, so each is made into an edge as is."""
        notes = {e.uri for e in vault.list_notes()}
        edges = []
        for raw, _legacy in vault.linkstore.outgoing_raw():
            row = decode_record(raw)
            # Only links between notes that exist, of a type this process knows (an
            # undeclared one carries no meaning; docs/DESIGN.md, "Checks" reports the rest).
            if row["from_uri"] in notes and row["to_uri"] in notes:
                try:
                    kind = LinkType(row["link_type"])
                except ValueError:
                    continue
                edges.append(Edge(row["id"], row["from_uri"], row["to_uri"], kind, float(row["weight"]),
                                  row.get("description") or ""))
        return cls(edges, notes)

    @property
    def g(self) -> nx.MultiDiGraph:
        """The networkx view, built on first use (PageRank, paths)."""
        if self._nx is None:
            import networkx as nx  # whole-graph views only: a search never needs it

            g = nx.MultiDiGraph()
            g.add_nodes_from(self.nodes)
            g.add_edges_from((e.from_uri, e.to_uri, e.id, {"link": e}) for edges in self.out.values() for e in edges)
            self._nx = g
        return self._nx

    # -- whole-graph views ------------------------------------------------------------------
    def weighted_digraph(self) -> nx.DiGraph:
        """One edge per linked pair, weighing the sum of its links' weights (a link id seen
        twice on a pair counts once, its last record: as in ``g``, keyed by id). Built from
        the edges directly, in the multigraph's order (nodes, then each note's links as
        written), not through ``g``: at 100k notes the multigraph alone took seconds."""
        import networkx as nx

        pairs: dict[tuple[str, str], dict[str, float]] = {}
        for a in self.nodes:
            for e in self.out.get(a, ()):
                pairs.setdefault((a, e.to_uri), {})[e.id] = e.weight
        g = nx.DiGraph()
        g.add_nodes_from(self.nodes)
        g.add_weighted_edges_from((a, b, _sum(ws.values())) for (a, b), ws in pairs.items())
        return g

    def ppr(self, personalization: dict[str, float] | None = None, alpha: float = 0.85, both_ways: bool = False) -> dict[str, float]:
        """Personalized PageRank over link weights. With ``both_ways`` the walk may also go
        from a note to the notes linking to it (neighbourhood ranking around a note);
        without, score gathers where links point (hub finding)."""
        g = self.weighted_digraph()
        if both_ways:
            for a, b, data in list(g.edges(data=True)):
                if g.has_edge(b, a):
                    continue
                g.add_edge(b, a, weight=data["weight"])
        if g.number_of_nodes() == 0:
            return {}
        pers = {n: w for n, w in (personalization or {}).items() if n in g and w > 0} or None
        import networkx as nx

        return nx.pagerank(g, alpha=alpha, personalization=pers, weight="weight", tol=1e-10, max_iter=500)

    def path(self, a: str, b: str) -> list[Step] | None:
        """A shortest path between two notes, walking links either way."""
        if a not in self.nodes or b not in self.nodes:
            return None
        import networkx as nx

        try:
            nodes = nx.shortest_path(self.g.to_undirected(as_view=True), a, b)
        except nx.NetworkXNoPath:
            return None
        steps: list[Step] = []
        for x, y in pairwise(nodes):
            step = next((s for s in self.steps(x) if s.dst == y), None)
            assert step is not None  # the path walks the graph's own edges
            steps.append(step)
        return steps


class LazyLinks(Adjacency):
    """The vault's links fetched note by note when a walk reaches a note (from the link
    index, ``vault.link_ends_of``: no record decoded), kept for this view's life; a
    note's edges are made from what was read when something walks them. The same edges
    as ``LinkGraph.build`` gives (but a legacy entry's incoming side: it has no backlink
    record; docs/DESIGN.md, "Search"): only links whose both ends are notes of the
    catalog, of a type this process knows. Services keep one per catalog and
    ``links_version``."""

    MAX_NOTES = 50_000  # notes kept; beyond, the cache starts over (a long-lived app)

    def __init__(self, vault: Vault, catalog: Mapping[str, CatalogEntry] | None = None) -> None:
        self.vault = vault
        self.catalog = catalog if catalog is not None else vault.catalog()
        self._ends: dict[str, list[End]] = {}  # a note's records as read, both directions
        self._edges: dict[str, tuple[list[Edge], list[Edge]]] = {}  # made from them when walked
        self._anchored: dict[str, list[dict]] = {}  # a note's links with an anchor, as stored (snippets)

    def prefetch(self, uris: Iterable[str]) -> None:
        uris = list(dict.fromkeys(uris))
        if len(self._ends) + len(uris) > self.MAX_NOTES:  # (before choosing what to read: all of it stays)
            self._ends.clear()
            self._edges.clear()
            self._anchored.clear()
        todo = [u for u in uris if u not in self._ends and self._is_note(u)]
        if todo:
            self._read(todo)

    def _read(self, uris: list[str]) -> None:
        anchors: dict[str, int] = {}
        self._ends.update(self.vault.link_ends_of(uris, anchors=anchors))
        # Notes with no link that has an anchor: their snippets render none, and nothing
        # more is read for them.
        self._anchored.update({uri: [] for uri, n in anchors.items() if not n})

    def prefetch_anchored(self, uris: Iterable[str]) -> None:
        """A hint: ``links(uri, within=…)`` is about to be asked for these notes (what
        they hold is read in one go)."""
        if len(self._anchored) > self.MAX_NOTES:  # (it holds notes whose anchor count alone was read too)
            self._anchored.clear()
        todo = [u for u in uris if u not in self._anchored and self._is_note(u)]
        unread = [u for u in todo if u not in self._ends]
        if unread:  # (how many a note has is kept beside its records: most have none)
            self._anchored.update({u: [] for u, n in self.vault.link_anchors_of(unread).items() if not n})
            todo = [u for u in todo if u not in self._anchored]
        if todo:
            self._anchored.update(self.vault.link_rows_of(todo, anchored=True))

    def out_edges_of_type(self, uris: Iterable[str], link_type: LinkType) -> dict[str, list[Edge]]:
        """(Of the notes not read yet only the records of this type are read, in one read,
        and not kept: a warm process answers them from its mirror without decoding a
        note's whole records, ``LinkStore.out_ends_of_type``.)"""
        uris = list(dict.fromkeys(uris))
        name = link_type.value
        unread = [u for u in uris if u not in self._ends and self._is_note(u)]
        typed = self.vault.link_ends_of_type(unread, name) if unread else {}
        out: dict[str, list[Edge]] = {}
        for uri in uris:
            hit = self._edges.get(uri)
            if hit is not None:
                out[uri] = [e for e in hit[0] if e.link_type is link_type]
                continue
            ends = typed[uri] if uri in typed else links_of_type(self._ends.get(uri, ()), name)
            out[uri] = self._edges_of(uri, ends)[0] if ends else []
        return out

    def _fetch(self, uri: str) -> tuple[list[Edge], list[Edge]]:
        hit = self._edges.get(uri)
        if hit is not None:
            return hit
        if uri not in self._ends:
            self.prefetch([uri])
        hit = self._edges[uri] = self._edges_of(uri, self._ends.get(uri, ()))
        return hit

    def _edges_of(self, uri: str, ends: Iterable[End]) -> tuple[list[Edge], list[Edge]]:
        """A note's records as its edges out and in, canonical: only links whose both
        ends are notes of the catalog, of a type this process knows."""
        out: list[Edge] = []
        inc: list[Edge] = []
        is_note = self.catalog.is_good if isinstance(self.catalog, Catalog) else self._is_note
        for direction, other, type_name, weight, link_id, description in ends:
            link_type = LinkType.known(type_name)
            if link_type is None or not is_note(other):
                continue
            if direction == "links":
                out.append(Edge(link_id, uri, other, link_type, weight, description))
            else:
                inc.append(Edge(link_id, other, uri, link_type, weight, description))
        return canonical(out, "to_uri"), canonical(inc, "from_uri")

    def _is_note(self, uri: str) -> bool:
        return parses(self.catalog, uri)

    def out_edges(self, uri: str) -> Sequence[Edge]:
        return self._fetch(uri)[0]

    def in_edges(self, uri: str) -> Sequence[Edge]:
        return self._fetch(uri)[1]

    def links(self, uri: str, within: str | None = None) -> list[StoredLink]:
        """``uri``'s outgoing links as stored (anchors and all, for rendering a snippet);
        with ``within``, only those whose anchor (match_text) occurs in that text."""
        if uri not in self.catalog:  # (a URI the catalog holds is canonical already)
            uri = normalize_uri(uri)
        if not self._is_note(uri):
            return []
        if within is None:
            rows = [row for row in self.vault.link_rows(uri) if row["direction"] == "links"]
        else:
            if uri not in self._anchored:
                self.prefetch_anchored([uri])
            rows = [row for row in self._anchored[uri] if row["match_text"] in within]
        return sorted((StoredLink.model_validate(row) for row in rows), key=lambda l: -l.weight)
