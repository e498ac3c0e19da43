"""The memlink Textual app. Thin: screens own their behaviour."""

from __future__ import annotations

from importlib import resources

from textual.app import App
from textual import work
from textual.binding import Binding

from engine import MemlinkError, Vault

from .commands import ActionCommands, NoteCommands
from .screens.browser import BrowserScreen



class MemlinkApp(App):
    TITLE = "memlink"
    CSS_PATH = str(resources.files("themes") / "memlink.tcss")
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("slash", "search", "Search"),
        Binding("c", "chat", "Chat"),
        Binding("R", "reports", "Reports"),
        Binding("L", "lint", "Lint"),
        Binding("question_mark", "help", "Help"),
    ]
    COMMANDS = App.COMMANDS | {NoteCommands, ActionCommands}

    def __init__(self, vault: Vault):
        super().__init__()
        self.vault = vault

    def on_mount(self) -> None:
        self.title = f"memlink — {self.vault.config.name}"
        self.browser = BrowserScreen(self.vault)
        self.push_screen(self.browser)
        self.prepare_index()
        self.check_provider()
        self.set_interval(30, self.checkpoint)

    @work(thread=True, exclusive=True, group="provider")
    def check_provider(self) -> None:
        """Which LLM provider is active and why, shown in the header (Ollama or rules)."""
        from engine.llm.select import provider_status

        _provider, health = provider_status(self.vault.config.llm)
        self.call_from_thread(setattr, self, "sub_title", f"LLM: {health.provider}")
        severity = "information" if health.provider != "rules" or health.ok else "warning"
        self.call_from_thread(self.notify, health.detail, title=f"LLM: {health.provider}", severity=severity, timeout=6)

    @work(thread=True, exclusive=True, group="index")
    def prepare_index(self) -> None:
        """Load and sync the search index off the UI thread, so the first search is quick."""
        from engine.index import SearchIndex

        try:
            index = SearchIndex.for_vault(self.vault)
        except MemlinkError as exc:
            self.call_from_thread(self.notify, str(exc), title="Index unavailable", severity="error")
            return
        report = index.last_sync
        for notice in report.notices if report else []:
            self.call_from_thread(self.notify, notice, title="Embedding model", severity="warning", timeout=10)
        if report and report.changed:
            self.call_from_thread(
                self.notify, f"indexed {report.changed} changed note(s) in {report.seconds:.1f}s", timeout=3
            )

    @work(thread=True, exclusive=True, group="checkpoint")
    def checkpoint(self) -> None:
        index = self.vault.cache.get("index")
        if index is not None:
            index.checkpoint()

    def action_search(self) -> None:
        from .screens.search import SearchScreen

        if isinstance(self.screen, SearchScreen):
            return

        def chosen(uri: str | None) -> None:
            if uri:
                if self.screen is not self.browser:
                    self.pop_screen()
                self.run_worker(self.browser.open_note(uri))

        self.push_screen(SearchScreen(self.vault), chosen)

    def action_chat(self) -> None:
        from .screens.chat import ChatScreen

        if not isinstance(self.screen, ChatScreen):
            self.push_screen(ChatScreen(self.vault))

    def open_note(self, uri: str) -> None:
        """Show ``uri`` in the memory browser, from wherever the user is."""
        while self.screen is not self.browser and self.browser in self.screen_stack:
            self.pop_screen()
        self.run_worker(self.browser.open_note(uri))

    def action_help(self) -> None:
        from .screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.screen))

    def _open_from(self, uri: str | None) -> None:
        if uri:
            if self.screen is not self.browser:
                self.pop_screen()
            self.run_worker(self.browser.open_note(uri))

    def action_reports(self) -> None:
        from .screens.reports import ReportScreen

        if not isinstance(self.screen, ReportScreen):
            self.push_screen(ReportScreen(self.vault), self._open_from)

    def action_lint(self) -> None:
        from .screens.lint import LintScreen

        if not isinstance(self.screen, LintScreen):
            self.push_screen(LintScreen(self.vault), self._open_from)

    def on_unmount(self) -> None:
        self.vault.close()
