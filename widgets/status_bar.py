"""One line above the footer on every pane: the LLM provider (and why), the vault,
the search index state and how many background jobs are running. The app sends each
pane a ``Status`` when one of them changes (memlink_tui/messages.py: StatusChanged), so
every pane shows the same, live."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from textual.widgets import Static

from .safe import safe_markup


def short_path(path: Path | str) -> str:
    text = str(path)
    home = os.path.expanduser("~")
    return "~" + text[len(home):] if home not in ("", "/") and text.startswith(home + os.sep) else text


@dataclass(frozen=True)
class Status:
    provider_line: str = ""
    index_state: str = ""
    queue_depth: int = 0
    vault_path: Path | None = None
    read_only: bool = False
    # For the pane bar (widgets/pane_bar.py): (pane, what waits there), and the work running.
    badges: tuple[tuple[str, str], ...] = ()
    running: str = ""

    def line(self) -> str:
        parts = [
            "read-only" if self.read_only else "",
            self.provider_line,
            f"index {self.index_state}",
            f"queue {self.queue_depth}" if self.queue_depth else "queue idle",
            f"vault {short_path(self.vault_path or '—')}",
        ]
        return "  │  ".join(p for p in parts if p)


class StatusBar(Static):
    DEFAULT_CSS = """
    StatusBar { height: 1; padding: 0 1; background: $panel; color: $text-muted; }
    """

    def __init__(self, status: Status | None = None) -> None:
        super().__init__()
        self.status = status or Status()

    def on_mount(self) -> None:
        self.show(self.status)

    def show(self, status: Status) -> None:
        self.status = status
        self.update(safe_markup(status.line()))
