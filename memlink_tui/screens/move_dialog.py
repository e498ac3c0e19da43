"""`M` in the browser: move or rename the open note. The field starts at its path; enter
moves it (every link follows, both sides; `memlink undo` reverts it), a refusal is shown
in place with nothing changed. Dismisses with the new path, or None."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from engine import MemlinkError, Vault
from engine.review.move import MoveResult, move_note
from widgets.safe import safe_markup


class MoveDialog(ModalScreen[MoveResult | None]):
    DEFAULT_CSS = """
    MoveDialog { align: center middle; }
    MoveDialog > Vertical { width: 90; max-width: 100%; height: auto; border: round $accent; background: $surface; padding: 0 1; }
    MoveDialog #move-error { color: $error; height: auto; }
    """
    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, vault: Vault, uri: str):
        super().__init__()
        self.vault = vault
        self.uri = uri

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Input(self.uri, id="move-path")
            yield Static("", id="move-error")
            yield Static("[dim]the new path (or a folder), then enter · its links follow · esc cancels[/dim]")

    def on_mount(self) -> None:
        self.query_one(Vertical).border_title = f"Move {safe_markup(self.uri)} to"

    @on(Input.Submitted, "#move-path")
    def _move(self, event: Input.Submitted) -> None:
        try:
            result = move_note(self.vault, self.uri, event.value)
        except MemlinkError as exc:
            self.query_one("#move-error", Static).update(safe_markup(exc))
            return
        self.dismiss(result)
