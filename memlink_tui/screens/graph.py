"""The graph explorer for one note: its neighbours grouped by link type and direction
(expand a neighbour to go a hop deeper), notes ranked by Personalized PageRank from it,
and the path to a marked note. Enter opens a note in the browser."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Footer, Static, Tree
from textual.widgets.tree import TreeNode
from textual.worker import get_current_worker

from engine import Vault
from engine.graph import LinkGraph, Step
from widgets.safe import safe_markup
from widgets.status_bar import Status

from ..messages import NoteFocused
from .pane import Pane


class NeighbourTree(Tree):
    """The neighbours: → goes a hop deeper into the highlighted note, ← back out (as in a
    file tree; a bare Tree scrolls sideways)."""

    BINDINGS = [
        Binding("right", "deeper", "A hop deeper", show=False),
        Binding("left", "out", "A hop back", show=False),
    ]

    def action_deeper(self) -> None:
        node = self.cursor_node
        if node is not None and node.allow_expand and not node.is_expanded:
            node.expand()
        elif node is not None and node.children:
            self.move_cursor(node.children[0])

    def action_out(self) -> None:
        node = self.cursor_node
        if node is None:
            return
        if node.is_expanded and node is not self.root:
            node.collapse()
        elif node.parent is not None:
            self.move_cursor(node.parent)


class GraphScreen(Pane):
    PANE = "graph"
    BINDINGS = [
        Binding("escape,backspace", "app.back", "Back"),
        Binding("o", "open", "Open note"),
        Binding("m", "mark", "Mark for path"),
        Binding("p", "path", "Path to mark"),
        Binding("h", "center", "Re-center here"),  # not c: c is chat everywhere
    ]
    DEFAULT_CSS = """
    GraphScreen #neighbours { width: 1fr; border: round $panel; }
    GraphScreen #neighbours:focus { border: round $accent; }
    GraphScreen #right { width: 1fr; }
    GraphScreen #ppr { height: 1fr; border: round $panel; }
    GraphScreen #ppr:focus { border: round $accent; }
    GraphScreen #path { height: auto; min-height: 3; border: round $panel; padding: 0 1; }
    """

    def __init__(self, vault: Vault, uri: str | None = None, status: Status | None = None) -> None:
        super().__init__(vault, status)
        self.center = uri
        self.mark: str | None = None

    def compose(self) -> ComposeResult:
        yield self.pane_bar()
        with Horizontal():
            yield NeighbourTree("neighbours", id="neighbours")
            with Vertical(id="right"):
                yield DataTable(id="ppr", cursor_type="row", zebra_stripes=True)
                yield Static("m marks the highlighted note; p shows the path from the mark to it.", id="path")
        yield self.status_bar()
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#ppr", DataTable)
        for label, width in (("#", 3), ("score", 6), ("note", 48), ("type", 16)):  # (the note first: a narrow pane shows it)
            table.add_column(label, width=width)  # fixed: auto widths can render at the header's width
        self.query_one("#path").border_title = "Path"
        self.set_focus(self.query_one("#neighbours", Tree))

    @property
    def location_uri(self) -> str | None:
        return self.center

    async def show_location(self, uri: str | None) -> None:
        if uri != self.center or self.center is None:
            self.load(uri)
        self.set_focus(self.query_one("#neighbours", Tree))

    # -- building ---------------------------------------------------------------------------
    def _title(self, uri: str) -> str:
        entry = self.vault.catalog.get(uri)
        return entry.title if entry else uri

    def load(self, uri: str | None) -> None:
        """Centre on ``uri`` (None: the best-linked note). The graph is built and ranked in
        a worker: the first build takes seconds on a big vault."""
        if uri is None and self.center is not None:
            return
        self.center = uri
        self.query_one("#neighbours", Tree).border_title = "Links · loading the graph…"
        self._compute(uri)

    @work(thread=True, exclusive=True, group="graph")
    def _compute(self, uri: str | None) -> None:
        graph = LinkGraph.for_vault(self.vault)
        if uri is None:
            degrees = {e.uri: graph.degree(e.uri) for e in self.vault.catalog.all()}
            uri = max(degrees, key=lambda u: (degrees[u], u), default=None)
            if uri is None:
                self.app.call_from_thread(self._no_links)
                return
        steps = list(graph.steps(uri))
        ranks = graph.ppr({uri: 1.0}, both_ways=True)
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._show_graph, uri, steps, ranks)

    def _no_links(self) -> None:
        tree = self.query_one("#neighbours", Tree)
        tree.border_title = "Links · no links yet"
        tree.root.set_label("no notes yet")
        self.query_one("#path", Static).update("No links yet: chat (c), import (i in the browser) or ingest a folder; "
                                               "the links between your notes show here.")

    def _show_graph(self, uri: str, steps: list[Step], ranks: dict[str, float]) -> None:
        self.center = uri
        self.post_message(NoteFocused(uri))  # the graph key starts here next time
        tree: Tree = self.query_one("#neighbours", Tree)
        tree.clear()
        tree.root.set_label(safe_markup(self._title(uri)))
        tree.root.data = uri
        tree.show_root = True
        self._add_groups(tree.root, steps, exclude={uri})
        tree.root.expand()
        tree.move_cursor(tree.root)  # (the row the cursor was on now holds another note: o would open it)
        tree.border_title = f"Links of {safe_markup(self._title(uri))}"
        self._fill_ppr(ranks, uri)

    def _add_groups(self, node: TreeNode, steps, exclude: set[str]) -> None:
        groups: dict[tuple[str, str], list[Step]] = defaultdict(list)
        for step in steps:
            if step.dst not in exclude:
                groups[(step.link.link_type.value, step.direction)].append(step)
        for (ltype, direction), items in sorted(groups.items()):
            arrow = "→" if direction == "links" else "←"
            group = node.add(f"{arrow} {safe_markup(ltype)} ({len(items)})", data=None, expand=True)
            for step in sorted(items, key=lambda s: -s.link.weight):
                label = f"{safe_markup(self._title(step.dst))} [dim]{step.link.weight:.2f}[/dim]"
                group.add(label, data=step.dst, allow_expand=True)

    @on(Tree.NodeExpanded, "#neighbours")
    def _expand(self, event: Tree.NodeExpanded) -> None:
        node = event.node
        if node.data and not node.children and node is not self.query_one("#neighbours", Tree).root:
            ancestors = {n.data for n in self._ancestors(node) if n.data}
            graph = LinkGraph.for_vault(self.vault)
            self._add_groups(node, graph.steps(node.data), exclude=ancestors | {node.data})
            if not node.children:
                node.allow_expand = False

    @staticmethod
    def _ancestors(node: TreeNode | None) -> Iterator[TreeNode]:
        while node is not None:
            yield node
            node = node.parent

    def _fill_ppr(self, ranks: dict[str, float], uri: str) -> None:
        table = self.query_one("#ppr", DataTable)
        table.clear()
        top = [u for u in sorted(ranks, key=lambda u: -ranks[u]) if u != uri][:20]
        entries = self.vault.catalog.entries(top)
        for i, u in enumerate(top, 1):
            entry = entries.get(u)
            title = entry.title if entry else u
            table.add_row(str(i), f"{ranks[u]:.3f}", safe_markup(title[:48]), safe_markup(entry.memory_type if entry else ""), key=u)
        table.border_title = "Personalized PageRank from this note"

    # -- actions ----------------------------------------------------------------------------
    def _highlighted(self) -> str | None:
        focused = self.focused
        if isinstance(focused, DataTable) and focused.row_count:
            return focused.coordinate_to_cell_key(focused.cursor_coordinate).row_key.value
        node = self.query_one("#neighbours", Tree).cursor_node
        return node.data if node is not None else None

    def action_open(self) -> None:
        uri = self._highlighted()
        if uri:
            self.go("browser", uri)

    def action_center(self) -> None:
        uri = self._highlighted()
        if uri:
            self.go("graph", uri)

    def action_mark(self) -> None:
        self.mark = self._highlighted()
        if self.mark:
            self.query_one("#path", Static).update(f"marked: {safe_markup(self._title(self.mark))} — now highlight another note and press p")

    def action_path(self) -> None:
        target = self._highlighted()
        if not self.mark or not target:
            self.notify("Mark a note with m first, then highlight another and press p.", timeout=3)
            return
        steps = LinkGraph.for_vault(self.vault).path(self.mark, target)
        panel = self.query_one("#path", Static)
        if steps is None:
            panel.update(f"no path between {safe_markup(self._title(self.mark))} and {safe_markup(self._title(target))}")
            return
        parts = [f"[b]{safe_markup(self._title(self.mark))}[/b]"]
        for s in steps:
            arrow = f"—{s.link.link_type.value}→" if s.direction == "links" else f"←{s.link.link_type.value}—"
            parts.append(f" {arrow} [b]{safe_markup(self._title(s.dst))}[/b]")
        panel.update("".join(parts) + f"   ({len(steps)} hop{'s' if len(steps) != 1 else ''})")

    @on(DataTable.RowSelected, "#ppr")
    def _ppr_selected(self, event: DataTable.RowSelected) -> None:
        self.go("browser", event.row_key.value)
