"""The memlink Textual app. Thin: screens own their behaviour."""

from __future__ import annotations

from importlib import resources

from textual.app import App
from textual.binding import Binding

from engine import Vault

from .screens.browser import BrowserScreen



class MemlinkApp(App):
    TITLE = "memlink"
    CSS_PATH = str(resources.files("themes") / "memlink.tcss")
    BINDINGS = [Binding("q", "quit", "Quit")]

    def __init__(self, vault: Vault):
        super().__init__()
        self.vault = vault

    def on_mount(self) -> None:
        self.title = f"memlink — {self.vault.config.name}"
        self.push_screen(BrowserScreen(self.vault))
