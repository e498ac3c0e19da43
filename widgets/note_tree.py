"""A tree of notes grouped by memory type. Leaves are added a page at a time when a
branch is opened (and a "more" row loads the next page), so a 100k-note vault costs
the same to show as a small one."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from textual import on
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from engine import CatalogEntry

from .safe import safe_markup

TYPE_ORDER = ["profile", "preference", "entity", "event", "report", "report_candidate", "source"]
PAGE = 200
MORE = "\0more"  # data of the "show more" row at the end of a branch
EARLIER = "\0earlier"  # data of the "show earlier" row at its start


class NoteTree(Tree[str]):
    """Leaves carry the note URI as data; branch nodes carry None."""

    DEFAULT_CSS = """
    NoteTree { width: 1fr; min-width: 24; }
    """

    def __init__(self, *, id: str | None = None):
        super().__init__("notes", id=id)
        self.show_root = False
        self._leaves: dict[str, TreeNode[str]] = {}
        self._groups: dict[str, list[CatalogEntry]] = {}
        self._branches: dict[str, TreeNode[str]] = {}
        self._range: dict[str, tuple[int, int]] = {}  # leaves shown per branch: [lo, hi)
        self._position: dict[str, tuple[str, int]] = {}
        self.loaded = False
        self.signature: tuple = ()

    @staticmethod
    def signature_of(entries: Iterable[CatalogEntry]) -> tuple:
        """What the tree shows: a reload with the same signature changes nothing."""
        return tuple(sorted((e.uri, e.memory_type, e.title) for e in entries))

    def load(self, entries: Iterable[CatalogEntry], signature: tuple | None = None) -> None:
        """``signature``: ``signature_of(entries)`` if the caller has it (computed off the UI thread)."""
        entries = list(entries)
        self.loaded, self.signature = True, signature if signature is not None else self.signature_of(entries)
        cursor = self.cursor_node.data if self.cursor_node is not None else None
        expanded = {t for t, b in self._branches.items() if b.is_expanded}
        self.clear()
        self._leaves.clear()
        groups: dict[str, list[CatalogEntry]] = defaultdict(list)
        for entry in entries:
            groups[entry.memory_type].append(entry)
        order = [t for t in TYPE_ORDER if t in groups] + sorted(t for t in groups if t not in TYPE_ORDER)
        self._groups, self._branches, self._range, self._position = {}, {}, {}, {}
        for mtype in order:
            items = groups[mtype]
            # Events read best newest first; everything else alphabetically.
            if mtype == "event":
                items.sort(key=lambda e: e.uri, reverse=True)
            else:
                items.sort(key=lambda e: e.title.lower())
            self._groups[mtype] = items
            self._position.update((e.uri, (mtype, i)) for i, e in enumerate(items))
            branch = self.root.add(f"{safe_markup(mtype)} ({len(items)})", data=None)
            self._branches[mtype] = branch
            if len(order) <= 2 or mtype in expanded:
                self._show_range(mtype, 0, PAGE)
                branch.expand()
        for branch in self._branches.values():
            branch.allow_expand = True
        if cursor and cursor in self._position:
            self.reveal(cursor)
        elif self.cursor_line < 0:  # (a first enter or space acts on the first row, as the tree shows it)
            self.cursor_line = 0

    def _show_range(self, mtype: str, lo: int, hi: int) -> None:
        """Show leaves [lo, hi) of a branch, with "earlier" / "more" rows around them."""
        branch, items = self._branches[mtype], self._groups[mtype]
        lo, hi = max(0, lo), min(len(items), hi)
        for entry in items[slice(*self._range.get(mtype, (0, 0)))]:
            self._leaves.pop(entry.uri, None)
        branch.remove_children()
        if lo > 0:
            branch.add_leaf(f"… {lo} earlier (enter)", data=EARLIER)
        for entry in items[lo:hi]:
            self._leaves[entry.uri] = branch.add_leaf(safe_markup(entry.title), data=entry.uri)
        if hi < len(items):
            branch.add_leaf(f"… {len(items) - hi} more (enter)", data=MORE)
        self._range[mtype] = (lo, hi)

    @on(Tree.NodeExpanded)
    def _expanded(self, event: Tree.NodeExpanded) -> None:
        for mtype, branch in self._branches.items():
            if branch is event.node and mtype not in self._range:
                self._show_range(mtype, 0, PAGE)

    @on(Tree.NodeSelected)
    def _page(self, event: Tree.NodeSelected) -> None:
        if event.node.data not in (MORE, EARLIER):
            return
        event.stop()
        mtype = next((t for t, b in self._branches.items() if b is event.node.parent), None)
        if mtype is None:  # the tree was reloaded since this row was chosen
            return
        lo, hi = self._range[mtype]
        if event.node.data == MORE:
            self._show_range(mtype, lo, hi + PAGE)
            focus = hi
        else:
            self._show_range(mtype, lo - PAGE, hi)
            focus = lo - 1
        leaf = self._leaves.get(self._groups[mtype][focus].uri)
        if leaf is not None:
            self.call_after_refresh(self.move_cursor, leaf)

    def reveal(self, uri: str) -> None:
        """Expand the branch holding ``uri`` (showing the page around it) and put the cursor on it."""
        if uri not in self._leaves and uri in self._position:
            mtype, index = self._position[uri]
            lo, hi = self._range.get(mtype, (0, 0))
            if hi <= index < hi + PAGE:  # just past what is shown: one more page
                self._show_range(mtype, lo, hi + PAGE)
            else:  # far away: a page around it
                self._show_range(mtype, index - PAGE // 2, index + PAGE // 2)
        node = self._leaves.get(uri)
        if node is None:
            return
        if node.parent is not None:
            node.parent.expand()
        self.call_after_refresh(self.move_cursor, node)
