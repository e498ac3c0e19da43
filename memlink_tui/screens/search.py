"""`/` from anywhere: type a query, see hits with their route and rendered snippet,
enter opens the note."""

from __future__ import annotations

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.worker import get_current_worker

from engine import MemlinkError, Vault
from engine.index import SearchIndex
from engine.model.text import counted
from engine.retrieve.search import SearchHit, search
from widgets import SearchResults
from widgets.safe import safe_markup


class SearchScreen(ModalScreen[str | None]):
    """Dismisses with the URI of the chosen note, or None."""

    DEFAULT_CSS = """
    SearchScreen { align: center top; }
    SearchScreen > Vertical { width: 90%; height: 85%; margin-top: 2; border: round $accent; background: $surface; }
    SearchScreen #search-status { color: $text-muted; padding: 0 1; height: 1; }
    """
    BINDINGS = [
        Binding("escape", "dismiss(None)", "Close"),
        Binding("down", "focus_results", "Results", show=False),
        Binding("ctrl+g", "toggle_graph", "Graph on/off"),
    ]

    def __init__(self, vault: Vault, query: str = ""):
        super().__init__()
        self.vault = vault
        self.query_text = query
        self.use_graph = True

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Input(value=self.query_text, placeholder="Search your memory…  (enter: search, ↓: results, esc: close)", id="search-input")
            yield Static("", id="search-status")
            yield SearchResults(id="search-results")

    def on_mount(self) -> None:
        self.query_one(Vertical).border_title = "Search"
        if self.query_text:
            self.run_search(self.query_text)

    @on(Input.Submitted, "#search-input")
    def _submitted(self, event: Input.Submitted) -> None:
        if event.value.strip():
            self.run_search(event.value.strip())

    def action_focus_results(self) -> None:
        results = self.query_one(SearchResults)
        if results.option_count:
            self.set_focus(results)

    def action_toggle_graph(self) -> None:
        self.use_graph = not self.use_graph
        query = self.query_one(Input).value.strip()
        if query:
            self.run_search(query)

    def run_search(self, query: str) -> None:
        self.query_one("#search-status", Static).update("searching… (the first search loads the index)")
        self._search(query)

    @work(thread=True, exclusive=True, group="search")
    def _search(self, query: str) -> None:
        try:
            SearchIndex.for_vault(self.vault).sync_if_stale()  # notes edited outside meanwhile
            hits = search(self.vault, query, k=15, use_graph=self.use_graph, log=True)
        except MemlinkError as exc:
            self.app.call_from_thread(self.notify, safe_markup(exc), title="Search failed", severity="error")
            return
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._show, query, hits)

    def _show(self, query: str, hits: list[SearchHit]) -> None:
        graph = "with" if self.use_graph else "without"
        self.query_one("#search-status", Static).update(
            f"{counted(len(hits), 'result')} for {safe_markup(repr(query))} — {graph} link graph (ctrl+g toggles)"
        )
        self.query_one(SearchResults).show(hits)
        self.last_hits = hits

    @on(OptionList.OptionSelected, "#search-results")
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)
