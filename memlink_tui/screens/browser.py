"""The memory browser: notes by type, the selected note with rendered links, and its
links/backlinks. Enter on a link follows it; backspace goes back."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer, Header, Markdown, Tree

from engine import MemlinkError, Vault
from widgets import LinkTable, NoteTree, NoteView


class BrowserScreen(Screen):
    BINDINGS = [
        Binding("backspace,b", "back", "Back"),
        Binding("f", "forward", "Forward", show=False),
        Binding("t", "focus('tree')", "Tree"),
        Binding("n", "focus('note')", "Note"),
        Binding("l", "focus('links')", "Links"),
        Binding("r", "reload", "Reload"),
        Binding("g", "graph", "Graph"),
        Binding("i", "import_file", "Import"),
    ]

    def __init__(self, vault: Vault):
        super().__init__()
        self.vault = vault
        self.current: str | None = None
        self._back: list[str] = []
        self._forward: list[str] = []

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal():
            yield NoteTree(id="tree")
            with Vertical(id="reader"):
                yield NoteView(id="note")
                yield LinkTable(id="links")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(NoteTree).border_title = "Notes"
        self.query_one(NoteView).border_title = "Note"
        self.query_one(LinkTable).border_title = "Links"
        self.action_reload()
        self.set_focus(self.query_one(NoteTree))

    # -- navigation ---------------------------------------------------------------------------
    async def open_note(self, uri: str, *, record: bool = True) -> None:
        try:
            note = self.vault.read_note(uri)
            rendered = self.vault.render_note(uri)
            links = self.vault.get_file_links(note.uri, "both")
        except MemlinkError as exc:
            self.notify(str(exc), title="Cannot open note", severity="error")
            return
        if record and self.current and self.current != note.uri:
            self._back.append(self.current)
            self._forward.clear()
        self.current = note.uri
        catalog = self.vault.catalog()
        titles = {u: e.title for u, e in catalog.items()}
        await self.query_one(NoteView).show(note, self.vault.title(note), rendered.text, len(rendered.missing))
        self.query_one(LinkTable).show(links, titles, {l.id for l in rendered.missing})
        self.query_one(NoteTree).reveal(note.uri)
        self.sub_title = note.uri

    async def action_back(self) -> None:
        if not self._back:
            self.notify("Nothing to go back to.", timeout=2)
            return
        if self.current:
            self._forward.append(self.current)
        await self.open_note(self._back.pop(), record=False)

    async def action_forward(self) -> None:
        if not self._forward:
            return
        if self.current:
            self._back.append(self.current)
        await self.open_note(self._forward.pop(), record=False)

    def action_graph(self) -> None:
        if not self.current:
            self.notify("Open a note first.", timeout=2)
            return
        from .graph import GraphScreen

        def opened(uri: str | None) -> None:
            if uri:
                self.run_worker(self.open_note(uri))

        self.app.push_screen(GraphScreen(self.vault, self.current), opened)

    def action_import_file(self) -> None:
        from .importer import ImportScreen

        def done(uri: str | None) -> None:
            self.action_reload()
            if uri:
                self.run_worker(self.open_note(uri))

        self.app.push_screen(ImportScreen(self.vault), done)

    def action_focus(self, which: str) -> None:
        # set_focus is immediate, so a key typed right after (l, enter) reaches the new pane.
        self.set_focus(self.query_one(f"#{which}"))

    def action_reload(self) -> None:
        self.vault.sync_catalog()
        self.query_one(NoteTree).load(self.vault.list_notes())
        if self.current:
            self.run_worker(self.open_note(self.current, record=False))
        index = self.vault.cache.get("index")
        if index is not None:
            self.run_worker(index.sync, thread=True, group="index", exclusive=True)

    # -- events ------------------------------------------------------------------------------
    @on(Tree.NodeSelected, "#tree")
    async def _tree_selected(self, event: Tree.NodeSelected) -> None:
        if event.node.data:
            await self.open_note(event.node.data)

    @on(LinkTable.Follow)
    async def _follow(self, event: LinkTable.Follow) -> None:
        await self.open_note(event.uri)

    @on(Markdown.LinkClicked)
    async def _link_clicked(self, event: Markdown.LinkClicked) -> None:
        event.prevent_default()
        if self.vault.exists(event.href):
            await self.open_note(event.href)
