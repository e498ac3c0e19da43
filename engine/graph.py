"""The link graph (networkx) built from the link index: typed propagation for search
(docs/DESIGN.md "Search", with the weights of the link-type table, "Link types"),
Personalized PageRank for hub finding, neighbourhood queries (GBrain's graph-query) and
paths.

Walking (propagation, steps, forced neighbours, neighbourhoods) is written once, in
``Adjacency``, over two ways of getting a note's edges: ``LinkGraph`` holds every link of
the vault (PageRank, paths, the graph pane, the dream), ``Walk`` reads a note's edges
from the link index when a walk reaches it (search: it looks only at a few seeds'
neighbourhoods). Both give a note's edges in one canonical order (strongest first, then
by the far note, type and id), so a walk gives the same result through either.

One whole graph per open vault (``LinkGraph.for_vault``), made again when the store's
change feed says a link or a note changed."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from .model.links import Edge, LinkType, StoredLink
from .model.linktypes import Flow, LinkTypeTable, builtin_table

if TYPE_CHECKING:
    import networkx as nx

    from .storage.vault import Vault

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
    # A note with more links than this (an index, a map of content) takes in score divided
    # by √(its degree / hub_degree): linking every page does not make it every seed's neighbour.
    hub_degree: int = 10

    @classmethod
    def for_table(cls, link_types: LinkTypeTable, **params: Any) -> PropagationParams:
        """Parameters whose propagation table and forced follow are ``link_types``'s."""
        params.setdefault("forced_follow", link_types.forced_follow())
        return cls(table=link_types.propagation(), **params)


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

    def prefetch(self, uris: Iterable[str], far_degrees: bool = False) -> None:
        """A hint: a walk is about to read these notes' edges (a view that fetches on
        demand reads them in one go), and with ``far_degrees`` the degrees of the notes
        they lead to (counted in the same read)."""

    def out_edges_of_type(self, uris: Iterable[str], link_type: LinkType) -> dict[str, list[Edge]]:
        """Each note's links of one type, in canonical order (``out_edges`` filtered)."""
        uris = list(uris)
        self.prefetch(uris)
        return {uri: [e for e in self.out_edges(uri) if e.link_type is link_type] for uri in uris}

    def steps(self, uri: str) -> Iterable[Step]:
        """Every edge out of ``uri``: its links (→) and its backlinks (←)."""
        for e in self.out_edges(uri):
            yield Step(uri, e.to_uri, e, "links")
        for e in self.in_edges(uri):
            yield Step(uri, e.from_uri, e, "backlinks")

    def degree(self, uri: str) -> int:
        return len(self.out_edges(uri)) + len(self.in_edges(uri))

    def degrees(self, uris: Iterable[str]) -> dict[str, int]:
        """Each note's degree (a view that fetches on demand may count without reading
        the edges)."""
        return {u: self.degree(u) for u in uris}

    def backlink_count(self, uri: str) -> int:
        return len(self.in_edges(uri))

    def propagate(self, seeds: dict[str, float], params: PropagationParams) -> dict[str, Propagated]:
        """Spread seed scores along typed links (docs/DESIGN.md, "Search": graph propagation).

        Each step multiplies by the table weight of (link_type, direction), the link's own
        weight and the damping factor, divided by √degree of the note it leaves and, past
        ``hub_degree`` links, by √(degree / hub_degree) of the note it reaches; links
        under ``min_link_weight`` are skipped; a note reached over a non-continuing rule,
        or at the depth limit, spreads no further; a rule is not used past its max depth.
        Contributions from several seeds combine by noisy-OR, 1 - Π(1 - c): two weak
        paths to a bridging note beat one, but a hub reached from every seed stays below 1
        (and well below the notes it links)."""
        out: dict[str, Propagated] = defaultdict(Propagated)
        gains: dict[str, list[float]] = defaultdict(list)  # each seed's contribution, before the hub share

        def hub_share(degree: int) -> float:
            return math.sqrt(max(1.0, degree / params.hub_degree))

        def combine(a: float, b: float) -> float:
            return 1.0 - (1.0 - a) * (1.0 - min(b, 1.0))  # noisy-OR: bounded, additive when small

        table, min_weight, damping = params.table, params.min_link_weight, params.damping
        # (One read for every seed's first hop, and the degrees of the notes it reaches.)
        self.prefetch((seed for seed, score in seeds.items() if score > 0), far_degrees=True)
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
                    gains[dst].append(gain)
                    out[dst].via.extend(steps)
                    if cont and hop < params.depth:
                        frontier.append((dst, gain))
                if not frontier:
                    break
                self.prefetch(dst for dst, _ in frontier)  # (the next hop reads them: one read)
                frontier = [(dst, gain / hub_share(self.degree(dst))) for dst, gain in frontier]
        degrees = self.degrees(gains)  # (one count for every note reached)
        for dst, got in out.items():
            share = hub_share(degrees[dst])
            for gain in gains[dst]:
                got.score = combine(got.score, gain / share)
            got.via.sort(key=lambda s: -s.link.weight)
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
        self.mark: tuple[str, int] | None = None  # the store's change feed when it was made (for_vault)

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
        """The vault's graph: kept with the vault, made again when the change feed says a
        link or a note changed since (the link files are compared with the index first)."""
        held = vault.shared(_Held, _Held)
        vault.links.refresh()
        since = vault.store.since(held.graph.mark if held.graph is not None else None)
        if held.graph is None or since.any("link", "note"):
            graph = cls.build(vault)
            graph.mark = since.mark
            held.graph = graph
        return held.graph

    @classmethod
    def build(cls, vault: Vault) -> LinkGraph:
        """A fresh graph from the vault's link index: links between notes that exist, of
        a type this process knows (an undeclared one carries no meaning; docs/DESIGN.md,
        "Checks" reports the rest)."""
        notes = set(vault.catalog.uris())
        edges = [e for e in vault.links.graph_edges() if e.from_uri in notes and e.to_uri in notes]
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
        twice on a pair counts once, its last record: as in ``g``, keyed by id)."""
        import networkx as nx  # (whole-graph views only)

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
        import networkx as nx  # (whole-graph views only)

        return nx.pagerank(g, alpha=alpha, personalization=pers, weight="weight", tol=1e-10, max_iter=500)

    def path(self, a: str, b: str) -> list[Step] | None:
        """A shortest path between two notes, walking links either way."""
        if a not in self.nodes or b not in self.nodes:
            return None
        import networkx as nx  # (whole-graph views only)

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


class _Held:
    """The whole graph kept with a vault (``LinkGraph.for_vault``)."""

    def __init__(self, _vault: Vault) -> None:
        self.graph: LinkGraph | None = None


class Walk(Adjacency):
    """The edges of the notes one walk reaches, read from the link index as it reaches
    them (a few seeds' neighbourhoods: never the whole graph) and kept for the walk: links
    between notes of the catalog, of a type this process knows. As the catalog, it reads
    the vault as its last sync left it (and this process's writes since): the folders'
    link files are not compared again on each read."""

    def __init__(self, vault: Vault) -> None:
        self.vault = vault
        self._edges: dict[str, tuple[list[Edge], list[Edge]]] = {}
        self._counted: dict[str, int] = {}  # degrees of notes not read, counted with their neighbours' edges

    def prefetch(self, uris: Iterable[str], far_degrees: bool = False) -> None:
        catalog = self.vault.catalog.memory_types()
        todo = [u for u in dict.fromkeys(uris) if u not in self._edges and u in catalog]
        read = self.vault.links.edges(todo, compare=False, far_counts=self._counted if far_degrees else None) if todo else {}
        for uri, (out, inc) in read.items():
            self._edges[uri] = (canonical([e for e in out if e.to_uri in catalog], "to_uri"),
                                canonical([e for e in inc if e.from_uri in catalog], "from_uri"))

    def degrees(self, uris: Iterable[str]) -> dict[str, int]:
        """(Counted in the link index for notes the walk has not read: their edges are not
        read. A count is of the links as stored, a link to a note deleted since included:
        what a hub test needs, at a fraction of the reading.)"""
        uris = list(dict.fromkeys(uris))
        missing = [u for u in uris if u not in self._edges and u not in self._counted]
        counted = self._counted | self.vault.links.counts(missing) if missing else self._counted
        return {u: self.degree(u) if u in self._edges else counted.get(u, 0) for u in uris}

    def out_edges_of_type(self, uris: Iterable[str], link_type: LinkType) -> dict[str, list[Edge]]:
        """(Only the records of that type are read for notes the walk has not reached.)"""
        uris = list(dict.fromkeys(uris))
        catalog = self.vault.catalog.memory_types()
        todo = [u for u in uris if u not in self._edges and u in catalog]
        read = self.vault.links.edges(todo, "links", [link_type], compare=False) if todo else {}
        return {u: [e for e in self.out_edges(u) if e.link_type is link_type] if u in self._edges
                else canonical([e for e in read[u][0] if e.to_uri in catalog], "to_uri") if u in read else []
                for u in uris}

    def _of(self, uri: str) -> tuple[list[Edge], list[Edge]]:
        hit = self._edges.get(uri)
        if hit is None:
            self.prefetch([uri])
            hit = self._edges.get(uri, ([], []))
        return hit

    def out_edges(self, uri: str) -> Sequence[Edge]:
        return self._of(uri)[0]

    def in_edges(self, uri: str) -> Sequence[Edge]:
        return self._of(uri)[1]
