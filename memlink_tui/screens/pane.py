"""What the five panes share: the vault they show, the status line the app sends them,
where they are (``location_uri``, for the app's back/forward history) and whether they
hold text not sent yet (``unsent``, for quitting)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import events
from textual.binding import Binding
from textual.screen import ActiveBinding, Screen
from textual.widget import Widget
from textual.widgets import Static

from widgets import PaneBar, StatusBar
from widgets.status_bar import Status

from ..messages import Navigate, StatusChanged

if TYPE_CHECKING:
    from engine import Vault


MIN_SIZE = (60, 16)  # below it a pane says the terminal is too small (docs: README "Panes and keys")


class Pane(Screen):
    PANE = ""  # this pane's name in the app (its mode): the pane bar highlights it
    BINDINGS = [Binding("z", "zoom", "Maximise", show=False)]

    def __init__(self, vault: Vault, status: Status | None = None) -> None:
        super().__init__()
        self.vault = vault
        self.status = status or Status()  # the latest from the app; the bars start with it
        self._before_small: Widget | None = None  # what had the focus when the terminal became too small

    def on_mount(self) -> None:
        self.mount(Static("", id="too-small"))
        self._fit(self.size.width, self.size.height)

    def on_resize(self, event: events.Resize) -> None:
        self._fit(event.size.width, event.size.height)

    def _fit(self, width: int, height: int) -> None:
        small = width < MIN_SIZE[0] or height < MIN_SIZE[1]
        was = self.has_class("-too-small")
        if small and not was:
            self._before_small = self.focused  # (hidden, it loses the focus: a key typed after would act on the pane)
        self.set_class(small, "-too-small")
        back = self._before_small
        if was and not small and back is not None and back.is_attached:
            self.call_after_refresh(self.set_focus, back)
        if small:
            for notice in self.query("#too-small").results(Static):
                notice.update(f"The terminal is too small for memlink ({width}×{height}).\n"
                              f"Make it at least {MIN_SIZE[0]}×{MIN_SIZE[1]}.")

    def action_zoom(self) -> None:
        """z: the focused panel fills the pane; z again (or escape) puts it back."""
        if self.maximized is not None:
            self.minimize()
        elif self.focused is not None and not self.maximize(self.focused):
            self.maximized = self.focused  # (a scrolling panel, the note view or a chat log, too)

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

    UNSENT = "Text typed here is not sent"  # what quitting would lose when ``unsent``

    @property
    def unsent(self) -> bool:
        """Text typed here and not sent yet: quitting asks first."""
        return False

    async def show_location(self, uri: str | None) -> None:
        """Show ``uri`` here (each pane decides what that means)."""
