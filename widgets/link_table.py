"""A note's links (→) and backlinks (←): type, weight, the other note, description."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.message import Message
from textual.widgets import DataTable

from engine import StoredLink


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

    def on_mount(self) -> None:
        self.add_columns("", "type", "weight", "note", "anchor", "why")

    def show(self, links: list[StoredLink], titles: dict[str, str], missing_ids: set[str]) -> None:
        self.clear()
        self._targets = []
        for link in links:
            outgoing = link.direction == "links"
            other = link.to_uri if outgoing else link.from_uri
            anchor = link.match_text or ""
            if outgoing and link.id in missing_ids:
                anchor = Text(f"{anchor} (not in text)", style="italic")
            self.add_row(
                "→" if outgoing else "←",
                link.link_type.value + (" (legacy)" if link.legacy else ""),
                f"{link.weight:.2f}",
                titles.get(other, other),
                anchor,
                link.description,
            )
            self._targets.append(other)

    @property
    def selected_uri(self) -> str | None:
        if not self._targets or self.cursor_row < 0 or self.cursor_row >= len(self._targets):
            return None
        return self._targets[self.cursor_row]

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        uri = self.selected_uri
        if uri:
            self.post_message(self.Follow(uri))
