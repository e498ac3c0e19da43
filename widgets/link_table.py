"""A note's links (→) and backlinks (←): type, weight, the other note, description."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.message import Message
from textual.widgets import DataTable

from engine import StoredLink
from engine.model.text import printable

from .safe import safe_markup


class LinkTable(DataTable):
    DEFAULT_CSS = """
    LinkTable { height: 1fr; }
    """

    @dataclass
    class Follow(Message):
        """The user asked to open the note at the other end of a link."""

        uri: str

    def __init__(self, *, id: str | None = None):
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self._targets: list[str] = []
        self._links: list[StoredLink] = []

    def show(self, links: list[StoredLink], titles: dict[str, str], missing_ids: set[str]) -> None:
        # Explicit column widths: auto widths computed while rows are replaced rendered
        # at the header's width (a Textual DataTable caching quirk).
        self.clear(columns=True)
        note_width = min(36, max([4] + [len(titles.get(l.to_uri if l.direction == "links" else l.from_uri, "")) for l in links]))
        type_width = max([4] + [len(_type_label(l)) for l in links])  # ("related_to (legacy)" whole)
        for label, width in (("", 1), ("type", type_width), ("weight", 6), ("note", note_width), ("anchor", 24), ("why", 60)):
            self.add_column(label, width=width)
        self._targets = []
        self._links = list(links)
        out = sum(1 for l in links if l.direction == "links")
        self.border_title = f"Links → {out} · backlinks ← {len(links) - out}"
        self.border_subtitle = ""
        for link in links:
            outgoing = link.direction == "links"
            other = link.to_uri if outgoing else link.from_uri
            anchor: str | Text = safe_markup(link.match_text or "")
            if outgoing and link.id in missing_ids:
                anchor = Text(f"{printable(link.match_text or '')} (not in text)", style="italic")
            self.add_row(
                "→" if outgoing else "←",
                safe_markup(_type_label(link)),
                f"{link.weight:.2f}",
                safe_markup(titles.get(other, other)),
                anchor,
                safe_markup(link.description),
            )
            self._targets.append(other)

    @property
    def selected_uri(self) -> str | None:
        if not self._targets or self.cursor_row < 0 or self.cursor_row >= len(self._targets):
            return None
        return self._targets[self.cursor_row]

    @property
    def selected_link(self) -> StoredLink | None:
        if not self._links or self.cursor_row < 0 or self.cursor_row >= len(self._links):
            return None
        return self._links[self.cursor_row]

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """Show the highlighted link's full details under the table."""
        if 0 <= event.cursor_row < len(self._links):
            l = self._links[event.cursor_row]
            where = f"{l.t_field}" + (f" lines {l.t_line_ranges}" if l.t_line_ranges else "")
            self.border_subtitle = safe_markup(f"{l.link_type.value} {l.weight:.2f} → {where} · {l.description}"[:200])

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        uri = self.selected_uri
        if uri:
            self.post_message(self.Follow(uri))


def _type_label(link: StoredLink) -> str:
    return link.link_type.value + (" (legacy)" if link.legacy else "")
