"""Import a file from the browser (`i`): type its path, or ctrl+o to pick it in a folder
tree (enter on a file); the import runs in a worker, then the result is shown as a diff —
notes created and changed, links added — before moving on. A chat export (`.json`, JSON
Lines, or a `.txt` shaped as a WhatsApp chat export) is imported as chat sessions
(`memlink import-chat`); its summary names what
was left out, and ctrl+s then commits every session with new turns (`memlink commit
--all`), which makes them searchable."""

from __future__ import annotations

from pathlib import Path

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Checkbox, DirectoryTree, Input, Static

from engine import MemlinkError, Vault
from engine.extract.updater import RunReport
from engine.model.text import counted
from widgets.safe import safe_markup, safe_path


def _whatsapp(path: Path) -> bool:
    """A `.txt` file whose first lines are a WhatsApp chat export's: a chat, not a note."""
    from engine.sessions.chat_exports import sniff

    if path.suffix.lower() != ".txt" or not path.is_file():
        return False
    try:
        with path.open(encoding="utf-8", errors="replace") as file:
            return sniff(file.read(8192)) == "whatsapp"
    except OSError:
        return False


def diff_markup(report: RunReport) -> str:
    """The report as Rich markup; imported text escaped and stripped of terminal control
    sequences."""
    lines = [f"[b]{safe_markup(report.summary())}[/b]  [dim]provider: {safe_markup(report.provider)}[/dim]", ""]
    lines += [f"[green]+ {safe_markup(u)}[/green]" for u in report.created]
    for change in report.changed:
        lines.append(f"[yellow]~ {safe_path(change['uri'])}[/yellow]")
        for key, after in change["after"].items():
            before = change["before"].get(key)
            if before != after:
                lines.append(f"    {safe_markup(key)}: [red]{safe_markup(before)[:80]}[/red] → [green]{safe_markup(after)[:80]}[/green]")
    lines += [f"[cyan]→ {safe_markup(l['from'])} -[{safe_markup(l['type'])}]-> {safe_markup(l['to'])}[/cyan]" for l in report.links_added]
    lines += [f"[red]! missing note referenced: {safe_markup(r)}[/red]" for r in report.unresolved]
    lines += [f"[red]! missing file referenced: {safe_markup(r)}[/red]" for r in report.missing_files]
    lines += [f"[red]! ambiguous reference: {safe_markup(r)}[/red]" for r in report.ambiguous]
    lines += [f"[red]! {safe_markup(p)}[/red]" for p in report.problems]
    return "\n".join(lines)


class ImportScreen(ModalScreen[str | None]):
    """Dismisses with the URI of the imported source note (or None)."""

    DEFAULT_CSS = """
    ImportScreen { align: center middle; }
    ImportScreen > Vertical { width: 90%; height: 80%; border: round $accent; background: $surface; padding: 0 1; }
    ImportScreen #import-diff { height: 1fr; }
    ImportScreen #import-files { height: 1fr; border: round $panel; }
    ImportScreen #import-files:focus { border: round $accent; }
    """
    BINDINGS = [Binding("escape", "close", "Close"), Binding("ctrl+o", "browse", "Pick a file"),
                Binding("ctrl+s", "commit_all", "Commit all sessions")]
    CHAT_SUFFIXES = (".json", ".jsonl")  # a chat export or transcript: imported as chat sessions

    def __init__(self, vault: Vault, start: Path | None = None):
        super().__init__()
        self.vault = vault
        self.source: str | None = None
        self.start = start or Path.home()  # where the folder tree opens
        self.chats = False  # a chat export was imported: ctrl+s commits its sessions

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Input(placeholder="path of a text or markdown file, or a chat export (.json), then enter · ctrl+o "
                        "picks one",
                        id="import-path")
            yield Checkbox("keep as a source only (no extraction)", id="no-wiki")
            with VerticalScroll(id="import-diff"):
                yield Static("", id="import-result")

    def on_mount(self) -> None:
        self.query_one(Vertical).border_title = "Import a file"

    def action_browse(self) -> None:
        """A folder tree to pick the file in (made when asked: it reads folders as you open them)."""
        found = self.query("#import-files")
        if found:
            found.first().focus()
            return
        tree = DirectoryTree(self.start, id="import-files")
        tree.border_title = f"{safe_markup(self.start)} · enter on a file imports it"
        self.query_one(Vertical).mount(tree, after=self.query_one("#import-path"))
        tree.focus()

    @on(DirectoryTree.FileSelected, "#import-files")
    def _picked(self, event: DirectoryTree.FileSelected) -> None:
        path = self.query_one("#import-path", Input)
        path.value = str(event.path)
        self.query_one("#import-result", Static).update("importing…")
        self.run_import(Path(event.path), not self.query_one(Checkbox).value)

    @on(Input.Submitted, "#import-path")
    def _go(self, event: Input.Submitted) -> None:
        if event.value.strip():
            self.query_one("#import-result", Static).update("importing…")
            self.run_import(Path(event.value.strip()).expanduser(), not self.query_one(Checkbox).value)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.chats if action == "commit_all" else True  # offered once a chat export was imported

    @work(thread=True, exclusive=True, group="import")
    def run_import(self, path: Path, wiki: bool) -> None:
        from engine.extract.batch import ingest
        from engine.extract.inputs import choose_extractor

        if path.suffix.lower() in self.CHAT_SUFFIXES or _whatsapp(path):
            self._import_chat(path)
            return
        try:
            extractor, _health = choose_extractor(self.vault)
            result = ingest(self.vault, path, wiki=wiki, extractor=extractor)
        except MemlinkError as exc:
            self.app.call_from_thread(self._show, f"[red]{safe_markup(str(exc))}[/red]", None)
            return
        if result.skipped:
            text = f"skipped: {safe_markup(result.skipped)}"
        else:
            assert result.report is not None  # a file imported has its run report
            text = diff_markup(result.report) + (f"\n{safe_markup(result.model_note)}" if result.model_note else "")
        self.app.call_from_thread(self._show, text + "\n\n[dim]esc: close and open the source note[/dim]", result.source_uri)

    def _import_chat(self, path: Path) -> None:
        from engine.sessions.importer import import_chat, turn_extractor

        try:
            report = import_chat(self.vault, path, turn_extractor(self.vault))
        except MemlinkError as exc:
            self.app.call_from_thread(self._show, f"[red]{safe_markup(str(exc))}[/red]", None)
            return
        lines = [f"[b]{counted(report.sessions, 'chat session')} ({safe_markup(report.format)}), "
                 f"{counted(report.events_added, 'new message')}, {counted(report.turns, 'turn')}[/b]  [dim]provider: {safe_markup(report.provider)}[/dim]"]
        lines += [safe_markup(line) for line in [report.model_line(), report.undated_line(), *report.left_out_lines()] if line]
        lines += [f"[red]! {safe_markup(f)}[/red]" for f in report.failed]
        lines += ["", "[b]ctrl+s[/b]: commit every session with new turns, so their memories are searchable · "
                  "[dim]esc: close[/dim]"]
        self.chats = True
        self.app.call_from_thread(self.refresh_bindings)
        self.app.call_from_thread(self._show, "\n".join(lines), None)

    def action_commit_all(self) -> None:
        if self.chats:
            self.query_one("#import-result", Static).update("committing the chat sessions…")
            self.run_commit_all()

    @work(thread=True, exclusive=True, group="import")
    def run_commit_all(self) -> None:
        from engine.sessions.commit import commit_all

        try:
            result = commit_all(self.vault)
        except MemlinkError as exc:
            self.app.call_from_thread(self._show, f"[red]{safe_markup(str(exc))}[/red]", None)
            return
        total = result.total()
        lines = [f"[b]sessions committed: {total['sessions']} (notes created: {total['created']}, changed: "
                 f"{total['changed']}, links added: {total['links_added']}); with nothing new: {result.unchanged}[/b]"]
        for session, report in result.committed:
            lines += [f"[b]session {safe_markup(session)}[/b]", diff_markup(report)]
        lines += [f"[red]! session {safe_markup(s)}: {safe_markup(why)}[/red]" for s, why in result.failed]
        self.app.call_from_thread(self._show, "\n".join(lines) + "\n\n[dim]esc: close[/dim]", None)

    def _show(self, text: str, source: str | None) -> None:
        self.source = source
        self.query_one("#import-result", Static).update(text)

    def action_close(self) -> None:
        self.dismiss(self.source)
