"""Data shown in the app: note titles and bodies, chat and model text, file names, error
messages. Textual reads a plain string given to Static, Label, Tree, DataTable, OptionList
or notify as markup, so data goes through ``safe_markup``: ``engine.model.text.printable``
(the one sanitiser: no escape sequences, control characters or bidi overrides) and then
every ``[`` escaped, so ``[red]``, ``[link=…]`` or ``[{"field": …}]`` in a note shows
literally (docs/DESIGN.md, "Clean output")."""

from __future__ import annotations

import re

from engine.model.text import printable, printable_path

# Every bracket, not only the ones that look like a tag (Rich's own escape): Textual's
# markup parser also opens a tag at `[{` or `[ `, and then shows a later escape's
# backslash. Backslashes just before a bracket are doubled, as Rich's escape does.
_BRACKET = re.compile(r"(\\*)\[")


def _escape(text: str) -> str:
    return _BRACKET.sub(lambda m: m.group(1) * 2 + "\\[", text)


def safe_markup(text: object) -> str:
    """``text`` as markup that shows exactly its printable characters."""
    return _escape(printable(text))


def safe_path(path: object) -> str:
    """A file's name or path as markup on one line, every character that is not printable
    shown as its escape (``printable_path``)."""
    return _escape(printable_path(path))
