"""A tree of notes grouped by memory type."""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from engine import CatalogEntry

TYPE_ORDER = ["profile", "preference", "entity", "event", "report", "report_candidate", "source"]


class NoteTree(Tree[str]):
    """Leaves carry the note URI as data; branch nodes carry None."""

    DEFAULT_CSS = """
    NoteTree { width: 1fr; min-width: 24; }
    """

    def __init__(self, *, id: str | None = None):
        super().__init__("notes", id=id)
        self.show_root = False
        self._leaves: dict[str, TreeNode[str]] = {}

    def load(self, entries: Iterable[CatalogEntry]) -> None:
        self.clear()
        self._leaves.clear()
        groups: dict[str, list[CatalogEntry]] = defaultdict(list)
        for entry in entries:
            groups[entry.memory_type].append(entry)
        order = [t for t in TYPE_ORDER if t in groups] + sorted(t for t in groups if t not in TYPE_ORDER)
        for mtype in order:
            items = groups[mtype]
            # Events read best newest first; everything else alphabetically.
            if mtype == "event":
                items.sort(key=lambda e: e.uri, reverse=True)
            else:
                items.sort(key=lambda e: e.title.lower())
            branch = self.root.add(f"{mtype} ({len(items)})", data=None, expand=len(order) <= 2)
            for entry in items:
                self._leaves[entry.uri] = branch.add_leaf(entry.title, data=entry.uri)

    def reveal(self, uri: str) -> None:
        """Expand the branch holding ``uri`` and put the cursor on it."""
        node = self._leaves.get(uri)
        if node is None:
            return
        if node.parent is not None:
            node.parent.expand()
        self.call_after_refresh(self.move_cursor, node)
