"""The bar at the top of every pane: the five panes by key and name, the current one
highlighted, each with what is waiting there (notes, new reports, lint errors and open
contradictions), and the background work running. A click on a pane goes there. The app
sends every pane the same ``Status`` (memlink_tui/messages.py: StatusChanged), so the
bar is live wherever you are."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from .safe import safe_markup
from .status_bar import Status

PANE_NAMES = (("browser", "1", "Memory"), ("chat", "2", "Chat"), ("graph", "3", "Graph"),
              ("reports", "4", "Reports"), ("lint", "5", "Lint"))


def _variant(current: str, badges: dict[str, str], title: str, running: str) -> str:
    parts = []
    for pane, key, name in PANE_NAMES:
        badge = badges.get(pane, "")
        label = f"{key} {name}" + (f" [b]{safe_markup(badge)}[/b]" if badge else "")
        style = "reverse b" if pane == current else "dim" if not badge else ""
        inner = f"[{style}] {label} [/{style}]" if style else f" {label} "
        parts.append(f"[@click=app.go('{pane}')]{inner}[/]")
    head = f"[b]{safe_markup(title)}[/b]  " if title else ""
    tail = f"  [$warning]⟳ {safe_markup(running)}[/]" if running else ""
    return head + "·".join(parts) + tail


def pane_bar_text(current: str, status: Status, width: int | None = None, title: str = "memlink") -> str:
    """The bar as markup: ``[@click]`` links for the panes, the current one in reverse.
    With ``width``, the most detailed form that fits: the title goes first, then the
    running work's names (its count stays), then the badges' words (their numbers stay);
    the five panes always show."""
    badges = dict(status.badges)
    short = {pane: " ".join(w for w in badge.split() if any(c.isdigit() for c in w)) for pane, badge in badges.items()}
    busy = status.running.split(", ") if status.running else []
    count = f"{len(busy)}" if busy else ""
    variants = [(badges, title, status.running), (badges, "", status.running), (badges, "", count), (short, "", count)]
    text = ""
    for badge_set, head, running in variants:
        text = _variant(current, badge_set, head, running)
        if width is None or Content.from_markup(text).cell_length <= width:
            break
    return text


class PaneBar(Static):
    DEFAULT_CSS = """
    PaneBar { height: 1; padding: 0 1; background: $panel; }
    """

    def __init__(self, current: str, status: Status | None = None) -> None:
        super().__init__()
        self.current = current
        self.status = status or Status()

    def on_mount(self) -> None:
        self.show(self.status)

    def on_resize(self) -> None:
        self.show(self.status)

    def show(self, status: Status) -> None:
        self.status = status
        width = self.content_region.width or None
        self.update(pane_bar_text(self.current, status, width))
