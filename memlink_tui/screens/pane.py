"""What the five panes share: the vault they show, the status line the app sends them,
and where they are (``location_uri``, for the app's back/forward history)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.screen import ActiveBinding, Screen

from widgets import PaneBar, StatusBar
from widgets.status_bar import Status

from ..messages import Navigate, StatusChanged

if TYPE_CHECKING:
    from engine import Vault


class Pane(Screen):
    PANE = ""  # this pane's name in the app (its mode): the pane bar highlights it

    def __init__(self, vault: Vault, status: Status | None = None) -> None:
        super().__init__()
        self.vault = vault
        self.status = status or Status()  # the latest from the app; the bars start with it

    def pane_bar(self) -> PaneBar:
        return PaneBar(self.PANE, self.status)  # the vault's name and path are on the status line

    def status_bar(self) -> StatusBar:
        return StatusBar(self.status)

    def on_status_changed(self, message: StatusChanged) -> None:
        self.status = message.status
        for bar in self.query(StatusBar):
            bar.show(message.status)
        for pane_bar in self.query(PaneBar):
            pane_bar.show(message.status)

    @property
    def active_bindings(self) -> dict[str, ActiveBinding]:
        """The app's keys first (the footer lists them in this order, so the keys that
        work everywhere are never the ones cut off), then the pane's and the focused
        widget's."""
        bindings = super().active_bindings
        mine = {k: b for k, b in bindings.items() if b.node is self.app}
        return mine | {k: b for k, b in bindings.items() if b.node is not self.app}

    def go(self, pane: str, uri: str | None = None) -> None:
        """Ask the app to show ``pane`` (at ``uri``); safe from worker threads too."""
        self.post_message(Navigate(pane, uri))

    @property
    def location_uri(self) -> str | None:
        return None

    async def show_location(self, uri: str | None) -> None:
        """Show ``uri`` here (each pane decides what that means)."""
