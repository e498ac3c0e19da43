"""A name that wraps at its hyphens, for a narrow list: a chat session's id
(``2026-12-05-planning-the-lisbon-trip``) shows whole, a line per run of its parts that
fits, where a plain label would cut it at the list's edge (Textual wraps only at spaces)."""

from __future__ import annotations

import re

from rich.cells import cell_len
from textual.content import Content
from textual.widget import Widget

from engine.model.text import printable

PARTS = re.compile(r"[^-]*-|[^-]+")  # each part with the hyphen that ends it


def hyphen_lines(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` cells, broken after a hyphen; a part wider
    than a line is cut where the line ends."""
    width = max(width, 1)
    lines = [""]
    for part in PARTS.findall(text):
        if lines[-1] and cell_len(lines[-1] + part) > width:
            lines.append("")
        for char in part:
            if lines[-1] and cell_len(lines[-1] + char) > width:
                lines.append("")
            lines[-1] += char
    return lines


class HyphenWrapped(Widget):
    """``text`` (data: shown as it is, never read as markup) wrapped by ``hyphen_lines``
    to the widget's width, as many lines high as that takes."""

    DEFAULT_CSS = "HyphenWrapped { width: 1fr; height: auto; }"

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = printable(text)

    def get_content_height(self, container, viewport, width: int) -> int:
        return len(hyphen_lines(self.text, width))

    def render(self) -> Content:
        return Content("\n".join(hyphen_lines(self.text, self.content_size.width)))
