"""First run: no vault where memlink looks. Offer to create an empty one there, or to
open the demo (the data folder's copy of the sample vault). Dismisses with the opened Vault, or None (quit)."""

from __future__ import annotations

from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

from engine import MemlinkError, Vault
from widgets.safe import safe_markup
from widgets.status_bar import short_path


class FirstRunScreen(Screen[Vault | None]):
    BINDINGS = [
        Binding("n", "create", "Create an empty vault"),
        Binding("d", "demo", "Open the demo"),
        Binding("q,escape", "dismiss(None)", "Quit"),
    ]
    DEFAULT_CSS = """
    FirstRunScreen { align: center middle; }
    FirstRunScreen > Vertical { width: 80; height: auto; border: round $accent; padding: 1 2; }
    FirstRunScreen #first-run-error { color: $error; height: auto; }
    """

    def __init__(self, path: Path):
        super().__init__()
        self.path = Path(path)

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical():
            yield Static(
                "[b]Welcome to memlink.[/b]\n\n"
                f"There is no vault at [b]{safe_markup(short_path(self.path))}[/b] yet.\n\n"
                "  [b]n[/b]  create an empty vault there\n"
                "  [b]d[/b]  open the demo: a copy of the sample vault (72 notes, 4 chat sessions)\n"
                "  [b]q[/b]  quit (or start with --vault PATH / $MEMLINK_VAULT)\n",
                id="welcome",
            )
            yield Static("", id="first-run-error")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(Vertical).border_title = "First run"

    def _fail(self, exc: Exception) -> None:
        self.query_one("#first-run-error", Static).update(safe_markup(str(exc)))

    def action_create(self) -> None:
        try:
            vault = Vault.init(self.path)
        except (MemlinkError, OSError) as exc:
            self._fail(exc)
            return
        self.notify(f"created an empty vault at {safe_markup(vault.root)}", timeout=5)
        self.dismiss(vault)

    def action_demo(self) -> None:
        from ..paths import demo_vault

        try:
            target, made = demo_vault()
            vault = Vault.open(target)
        except (MemlinkError, OSError) as exc:
            self._fail(exc)
            return
        said = "demo vault copied to" if made else "the demo copy (memlink demo --fresh replaces it) is at"
        self.notify(f"{said} {safe_markup(target)}", timeout=5)
        self.dismiss(vault)
