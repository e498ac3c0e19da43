"""Reusable Textual widgets. They display engine objects; they never change the vault."""

from .link_table import LinkTable
from .note_tree import NoteTree
from .note_view import NoteView
from .pane_bar import PaneBar
from .search_results import SearchResults
from .status_bar import StatusBar

__all__ = ["LinkTable", "NoteTree", "NoteView", "PaneBar", "SearchResults", "StatusBar"]
