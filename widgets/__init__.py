"""Reusable Textual widgets. They display engine objects; they never change the vault."""

from .link_table import LinkTable
from .note_tree import NoteTree
from .note_view import NoteView

__all__ = ["LinkTable", "NoteTree", "NoteView"]
