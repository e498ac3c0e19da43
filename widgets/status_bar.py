"""One line above the footer on every pane: the LLM provider (and why), the vault,
the search index state and how many background jobs are running. It reads the app's
reactive fields, so every pane shows the same, live."""

from __future__ import annotations

import os

from rich.markup import escape
from textual.widgets import Static

WATCHED = ("provider_line", "index_state", "queue_depth")  # the vault path is fixed per pane


def short_path(path) -> str:
    text = str(path)
    home = os.path.expanduser("~")
    return "~" + text[len(home):] if home not in ("", "/") and text.startswith(home + os.sep) else text


class StatusBar(Static):
    DEFAULT_CSS = """
    StatusBar { height: 1; padding: 0 1; background: $panel; color: $text-muted; }
    """

    def on_mount(self) -> None:
        for name in WATCHED:
            if hasattr(type(self.app), name):  # only the memlink app has these reactives
                self.watch(self.app, name, self._changed, init=False)
        self._changed()

    def _changed(self, *_args) -> None:
        app = self.app
        queue = getattr(app, "queue_depth", 0)
        parts = [
            getattr(app, "provider_line", ""),
            f"index {getattr(app, 'index_state', '')}",
            f"queue {queue}" if queue else "queue idle",
            f"vault {short_path(getattr(app, 'vault_path', '') or '—')}",
        ]
        self.update(escape("  │  ".join(p for p in parts if p)))
