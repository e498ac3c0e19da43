"""What the five panes share: the vault they show, the status line the app sends them,
and where they are (``location_uri``, for the app's back/forward history)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.screen import Screen

from widgets import StatusBar
from widgets.status_bar import Status

from ..messages import Navigate, StatusChanged

if TYPE_CHECKING:
    from engine import Vault


class Pane(Screen):
    def __init__(self, vault: Vault, status: Status | None = None) -> None:
        super().__init__()
        self.vault = vault
        self.status = status or Status()  # the latest from the app; StatusBar starts with it

    def status_bar(self) -> StatusBar:
        return StatusBar(self.status)

    def on_status_changed(self, message: StatusChanged) -> None:
        self.status = message.status
        for bar in self.query(StatusBar):
            bar.show(message.status)

    def go(self, pane: str, uri: str | None = None) -> None:
        """Ask the app to show ``pane`` (at ``uri``); safe from worker threads too."""
        self.post_message(Navigate(pane, uri))

    @property
    def location_uri(self) -> str | None:
        return None

    async def show_location(self, uri: str | None) -> None:
        """Show ``uri`` here (each pane decides what that means)."""
