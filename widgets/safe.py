"""Data shown in the app: note titles and bodies, chat and model text, file names, error
messages. Textual reads a plain string given to Static, Label, Tree, DataTable, OptionList
or notify as Rich markup, so data goes through ``safe_markup``: ``engine.model.text.printable``
(the one sanitiser: no escape sequences, control characters or bidi overrides) and then
Rich's markup escape, so ``[red]`` or ``[link=…]`` in a note shows literally
(docs/DESIGN.md, "Clean output")."""

from __future__ import annotations

from rich.markup import escape

from engine.model.text import printable, printable_path


def safe_markup(text: object) -> str:
    """``text`` as markup that shows exactly its printable characters."""
    return escape(printable(text))


def safe_path(path: object) -> str:
    """A file's name or path as markup on one line, every character that is not printable
    shown as its escape (``printable_path``)."""
    return escape(printable_path(path))
