"""The report queue: research questions (pending first) and reports; `a` asks a
question, `D` runs the dream in a worker and shows what changed, enter opens a note."""

from __future__ import annotations

import asyncio

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Input, Label, ListItem, ListView, Markdown, Static

from engine import MemlinkError, Vault
from engine.dream.topics import NOTHING_YET
from engine.model.text import counted, printable
from widgets.safe import safe_markup, safe_path
from widgets.status_bar import Status

from ..messages import VaultChanged
from .pane import Pane


class AskScreen(ModalScreen[str | None]):
    DEFAULT_CSS = "AskScreen { align: center middle; } AskScreen > Input { width: 80%; }"
    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]

    def compose(self) -> ComposeResult:
        yield Input(placeholder="A question for the next dream, then enter")

    @on(Input.Submitted)
    def _done(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)


NO_REPORTS = """**No questions or reports yet.**

- **a** asks a research question (or say "help me research …" in a chat).
- **D** runs the dream: it writes reports on your questions, on contradictions and on
  views that changed. It needs memories first: chat, import or ingest.
"""


class ReportScreen(Pane):
    PANE = "reports"
    BINDINGS = [
        Binding("escape", "app.back", "Back"),
        Binding("a", "ask", "Ask a research question"),
        Binding("D", "dream", "Run dream"),
    ]
    DEFAULT_CSS = """
    ReportScreen #queue { width: 1fr; border: round $panel; }
    ReportScreen #queue:focus { border: round $accent; }
    ReportScreen #queue Label { width: 1fr; }  /* a title longer than the list wraps */
    ReportScreen #detail { width: 2fr; border: round $panel; padding: 0 1; }
    ReportScreen #dream-status { height: auto; max-height: 30%; overflow-y: auto; padding: 0 1; color: $text-muted; }
    """

    def __init__(self, vault: Vault, status: Status | None = None) -> None:
        super().__init__(vault, status)
        # One refresh at a time: a live refresh racing the one that selects a new question
        # would read the cursor mid-way and put it back on the first row.
        self._refreshing = asyncio.Lock()

    def compose(self) -> ComposeResult:
        yield self.pane_bar()
        yield Static("D runs the dream: pending questions, contradictions and changed views become reports.", id="dream-status")
        with Horizontal():
            yield ListView(id="queue")
            with VerticalScroll(id="detail"):
                yield Markdown("", open_links=False, id="report-body")
        yield self.status_bar()
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#queue").border_title = "Questions and reports"
        self.set_focus(self.query_one("#queue"))

    location_uri = None

    async def show_location(self, uri: str | None) -> None:
        await self.refresh_queue(select=uri)

    async def on_vault_changed(self, _message: VaultChanged) -> None:
        """Notes changed (a dream, another process): the list again, on the same item."""
        await self.refresh_queue()

    def _selected(self) -> str | None:
        item = self.query_one("#queue", ListView).highlighted_child
        return item.name if item is not None else None

    async def refresh_queue(self, select: str | None = None) -> None:
        """The list again, on ``select`` (else on the item the cursor is on)."""
        async with self._refreshing:
            await self._refill(select or self._selected())

    async def _refill(self, select: str | None) -> None:
        rows = []  # the catalog as the app knows it (r in the browser re-reads the files)
        for e in self.vault.catalog.all("report_candidate"):
            status = self.vault.read_note(e.uri).fields.get("status") or "pending"
            still_open = status in ("pending", NOTHING_YET)  # (a question nothing answers yet is asked again)
            rows.append((0 if still_open else 1, f"[{status.replace('_', ' ')}] {e.title}", e.uri))
        for e in self.vault.catalog.all("report"):
            rows.append((2, f"report · {e.title}", e.uri))
        view = self.query_one("#queue", ListView)
        ordered = sorted(rows)
        await view.clear()
        await view.extend(ListItem(Label(safe_markup(label)), name=uri) for _order, label, uri in ordered)
        uris = [uri for _o, _l, uri in ordered]
        if uris:
            view.index = uris.index(select) if select in uris else 0
        else:
            await self.query_one("#report-body", Markdown).update(NO_REPORTS)

    @on(ListView.Highlighted, "#queue")
    async def _show(self, event: ListView.Highlighted) -> None:
        if event.item is None or not event.item.name:
            return
        try:
            rendered = self.vault.render_note(event.item.name)
        except MemlinkError as exc:
            rendered = None
            text = f"*{exc}*"
        await self.query_one("#report-body", Markdown).update(printable(rendered.text if rendered else text))
        self.query_one("#detail").border_title = safe_markup(event.item.name)

    @on(ListView.Selected, "#queue")
    def _open(self, event: ListView.Selected) -> None:
        if event.item.name:
            self.go("browser", event.item.name)

    def action_ask(self) -> None:
        async def asked(question: str | None) -> None:
            if question:
                from engine.dream import ask

                try:
                    uri = ask(self.vault, question)  # the same question again gives the same note
                except MemlinkError as exc:
                    self.notify(safe_markup(exc), severity="error")
                    return
                self.notify(f"added {safe_path(uri)}")
                await self.refresh_queue(select=uri)

        self.app.push_screen(AskScreen(), asked)

    def action_dream(self) -> None:
        self.query_one("#dream-status", Static).update("dreaming…")
        self.run_dream()

    @work(thread=True, exclusive=True, group="dream")
    def run_dream(self) -> None:
        from engine.dream import DreamBusy, dream
        from engine.llm.registry import selection  # (the HTTP client: only when a report is drafted)

        llm = selection(self.vault.config.llm).llm  # the process's one provider choice

        def progress(done: int, total: int) -> None:
            self.app.call_from_thread(self.query_one("#dream-status", Static).update, f"dreaming… {done}/{total} topics")

        try:
            report = dream(self.vault, provider=llm, progress=progress)
        except (DreamBusy, MemlinkError) as exc:
            self.app.call_from_thread(self.query_one("#dream-status", Static).update, f"[red]{safe_markup(str(exc))}[/red]")
            self.app.call_from_thread(self.notify, safe_markup(str(exc).splitlines()[0]), title="Dream failed", severity="error")
            return
        summary = (f"dream ({report.provider}): {counted(len(report.topics), 'topic')}, "
                   f"{counted(len(report.written), 'report')} written")
        lines = ([safe_markup(summary)] + [f"+ {safe_markup(u)}" for u in report.written]
                 + [f"- nothing known yet (the question stays open): {safe_markup(q)}" for q in report.nothing_yet]
                 + [f"- no report: {safe_markup(q)}" for q in report.no_report]
                 + [f"! {safe_markup(s)}" for s in report.skipped])
        self.app.call_from_thread(self.query_one("#dream-status", Static).update, "\n".join(lines))
        self.app.call_from_thread(self.refresh_queue, report.written[0] if report.written else None)  # type: ignore[arg-type]  # textual's typing infers Never for an async callback
        self.app.call_from_thread(self.notify, safe_markup(summary), title="Dream finished")
