"""The memory browser: notes by type, the selected note with rendered links, and its
links/backlinks. Enter on a link follows it; backspace goes back (the app's history,
shared by every pane). From the open note: g graph, x its contradictions, a ask about
it in chat, M move or rename it."""

from __future__ import annotations

import shutil

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Footer, Markdown, Static, Tree

from engine import MemlinkError, Vault
from engine.model.text import counted
from widgets import LinkTable, NoteTree, NoteView
from widgets.safe import safe_markup, safe_path
from widgets.status_bar import Status

from ..messages import CatalogSynced, NoteChanged, NotesShown, VaultChanged
from .pane import Pane

# What an empty vault shows where a note would be: the ways to a first memory.
FIRST_STEPS = (
    "[b]Your vault is empty.[/b] To make your first memories:\n\n"
    "  [b]c[/b]  chat; [b]ctrl+s[/b] there saves the chat to memory\n"
    "  [b]i[/b]  import a text or markdown file\n\n"
    "From a shell: [b]memlink import-chat FILE[/b] imports a ChatGPT or Claude export, "
    "[b]memlink ingest FOLDER[/b] a folder of notes.\n\n"
    "Then [b]/[/b] searches what you saved."
)


class BrowserScreen(Pane):
    PANE = "browser"
    BINDINGS = [
        Binding("backspace,b", "app.back", "Back"),
        Binding("escape", "escape", "Back", show=False),  # (as in the other panes; a maximised panel is put back first)
        Binding("f", "app.forward", "Forward", show=False),
        Binding("t", "focus('tree')", "Tree"),
        Binding("n", "focus('note')", "Note"),
        Binding("l", "focus('links')", "Links"),
        Binding("B", "backlinks", "Backlinks", show=False),
        Binding("r", "reload", "Reload", show=False),
        Binding("g", "graph", "Graph"),
        Binding("x", "contradictions", "Contradictions"),
        Binding("a", "ask", "Ask in chat"),
        Binding("k", "link", "Link to…"),
        Binding("M", "move", "Move/rename", show=False),
        Binding("delete", "unlink", "Remove link", show=False),
        Binding("e", "edit", "Edit"),
        Binding("i", "app.import_file", "Import"),
    ]

    def __init__(self, vault: Vault, status: Status | None = None) -> None:
        super().__init__(vault, status)
        self.current: str | None = None
        self._vacant = "Select a note in the tree."  # what the note view says with no note open

    def compose(self) -> ComposeResult:
        yield self.pane_bar()
        with Horizontal():
            yield NoteTree(id="tree")
            with Vertical(id="reader"):
                yield NoteView(id="note")
                yield LinkTable(id="links")
        yield self.status_bar()
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(NoteTree).border_title = "Notes"
        self.query_one(NoteView).border_title = "Note"
        self.query_one(LinkTable).border_title = "Links"
        self.action_reload()
        self.set_focus(self.query_one(NoteTree))

    # -- navigation ---------------------------------------------------------------------------
    @property
    def location_uri(self) -> str | None:
        return self.current

    async def show_location(self, uri: str | None) -> None:
        if uri:
            await self.open_note(uri)

    async def open_note(self, uri: str) -> None:
        """Render ``uri`` here (the app's ``go`` records history and calls this)."""
        try:
            note = self.vault.read_note(uri)
            rendered = self.vault.render_note(uri)
            links = self.vault.links.of(note.uri, "both")
        except MemlinkError as exc:
            if uri == self.current and not self.vault.path(uri).exists():
                await self._gone(uri)  # moved or deleted outside this pane: the keys must not act on it
            else:
                self.notify(safe_markup(exc), title="Cannot open note", severity="error")
            return
        self.current = note.uri
        titles = {u: e.title for u, e in self.vault.catalog.entries(l.other(note.uri) for l in links).items()}
        await self.query_one(NoteView).show(note, self.vault.title(note), rendered.text, len(rendered.missing))
        self.query_one(LinkTable).show(links, titles, {l.id for l in rendered.missing})
        self.query_one(NoteTree).reveal(note.uri)
        self.query_one(NoteView).border_title = f"Note · {safe_path(note.uri)}"

    async def _gone(self, uri: str) -> None:
        self.current = None
        self._vacant = f"{safe_path(uri)} is no longer in the vault (moved or deleted). Select a note in the tree."
        await self.query_one(NoteView).clear(self._vacant)
        self.query_one(LinkTable).show([], {}, set())
        self.query_one(NoteView).border_title = "Note"

    def _need_note(self) -> bool:
        if not self.current:
            self.notify("Open a note first.", timeout=2)
        return bool(self.current)

    def action_graph(self) -> None:
        if self._need_note():
            self.go("graph", self.current)

    def action_backlinks(self) -> None:
        """Into the links table at the first backlink (the notes that link here)."""
        if not self._need_note():
            return
        table = self.query_one(LinkTable)
        rows = [i for i, l in enumerate(table._links) if l.direction == "backlinks"]
        if not rows:
            self.notify("No note links here yet.", timeout=2)
            return
        self.set_focus(table)
        table.move_cursor(row=rows[0])

    def action_contradictions(self) -> None:
        if self._need_note():
            self.go("lint", self.current)

    def action_ask(self) -> None:
        if self._need_note():
            self.go("chat", self.current)

    def action_link(self) -> None:
        """Link the open note to another (both sides written at once)."""
        if not self._need_note():
            return
        from .link_editor import LinkEditor

        uri = self.current
        assert uri is not None  # _need_note said so

        async def linked(said: str | None) -> None:
            if said:  # "linked to …" or "updated the link to …"
                self.notify(safe_markup(said), timeout=3)
                await self.open_note(uri)

        self.app.push_screen(LinkEditor(self.vault, uri), linked)

    def action_move(self) -> None:
        """Move or rename the open note; its links follow (screens.move_dialog)."""
        if not self._need_note():
            return
        from .move_dialog import MoveDialog

        assert self.current is not None  # _need_note said so

        async def moved(result) -> None:
            if result is None:
                return
            n = len(result.mentions)
            told = f"; {counted(n, 'link')} in note text still name{'s' * (n == 1)} the old path" if n else ""
            self.notify(safe_markup(result.message() + told), timeout=5)
            self.post_message(NoteChanged(result.new))
            await self.open_note(result.new)

        self.app.push_screen(MoveDialog(self.vault, self.current), moved)

    def action_unlink(self) -> None:
        """Remove the highlighted link in the links table, on both sides, after a yes."""
        table = self.query_one(LinkTable)
        link = table.selected_link
        if not table.has_focus or link is None:
            self.notify("Highlight a link in the links table (l) first.", timeout=3)
            return
        from engine.review.linkwrite import remove_link

        from .link_editor import Confirm

        source, target = (link.from_uri, link.to_uri)

        async def answered(yes: bool | None) -> None:
            if not yes:
                return
            try:
                remove_link(self.vault, source, target, link.link_type, link_id=link.id)  # just this one (undoable)
            except MemlinkError as exc:
                self.notify(safe_markup(exc), title="Link not removed", severity="error")
                return
            self.notify(safe_markup(f"removed {link.link_type.value} {source} → {target}"), timeout=3)
            assert self.current is not None  # the links table shows the open note's links
            await self.open_note(self.current)

        self.app.push_screen(Confirm(f"Remove the {link.link_type.value} link {source} → {target} on both sides?"), answered)

    def action_edit(self) -> None:
        """Edit the note in $VISUAL / $EDITOR. The editor works on a copy; what it saves is
        validated and written through the vault (journaled, line ranges of links into the
        note corrected) — or refused with the copy kept, changing nothing."""
        import os
        import shlex
        import subprocess
        import tempfile
        from pathlib import Path

        from textual.app import SuspendNotSupported

        if not self._need_note():
            return
        uri = self.current
        assert uri is not None  # _need_note said so
        try:
            original = self.vault.path(uri).read_text(encoding="utf-8")
        except (OSError, MemlinkError) as exc:  # (gone since it was opened: the refresh follows)
            self.notify(safe_markup(f"cannot edit {uri}: {exc}"), title="Editor", severity="error")
            return
        draft = Path(tempfile.mkdtemp(prefix="memlink-edit-")) / Path(uri).name
        draft.write_text(original, encoding="utf-8")
        editor = shlex.split(os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi")
        try:
            try:
                with self.app.suspend():
                    code = subprocess.call([*editor, str(draft)])
            except SuspendNotSupported:  # no terminal to hand over (tests, web): run it as is
                code = subprocess.call([*editor, str(draft)])
        except OSError as exc:
            self.notify(safe_markup(f"cannot run {editor[0]}: {exc}"), title="Editor", severity="error")
            return
        edited = draft.read_text(encoding="utf-8")
        if code != 0 or edited == original:
            self.notify(safe_markup("no changes saved" + (f" ({editor[0]} exited with {code})" if code else "")), timeout=3)
            shutil.rmtree(draft.parent, ignore_errors=True)
            return
        self._save_edit(uri, original, edited, draft)

    @work(thread=True, group="import")
    def _save_edit(self, uri: str, original: str, edited: str, draft) -> None:
        from engine.model.notes import parse_note, view_edit

        try:
            old = self.vault.read_note(uri)
            note = parse_note(edited, uri, self.vault.types)
            if note.memory_type != old.memory_type:
                raise MemlinkError(f"the memory type cannot change ({old.memory_type} → {note.memory_type})")
            schema = self.vault.schema(note.memory_type)
            edits = view_edit(note, old, schema)
            if edits is None:
                raise MemlinkError("the view between the memlink:view markers is made from the note's fields, and this "
                                   "edit cannot be read back into them (a line of other fields, or a text the view shows "
                                   "escaped): change the fields in the frontmatter, or write below the view")
            # (the visible title or text changed: the memory with it, unless its field was changed too)
            note.fields = {**note.fields, **{k: v for k, v in edits.items() if note.fields.get(k) == old.fields.get(k)}}
            with self.vault.writing():
                if self.vault.path(uri).read_text(encoding="utf-8") != original:
                    raise MemlinkError(f"{uri} changed on disk while you were editing")
                # the text under the frontmatter is the user's: kept (engine.model.notes.rebuild_body)
                self.vault.write_note(note.memory_type, note.fields, uri=uri, replace=True, body=note.body)
        except MemlinkError as exc:
            self.app.call_from_thread(self.notify, safe_markup(f"{exc}. Nothing was changed; your edit is kept in {draft}"),
                                      title="Edit not saved", severity="error", timeout=15)
            return
        shutil.rmtree(draft.parent, ignore_errors=True)
        self.post_message(NoteChanged(uri))  # the app reloads this browser (and whoever else cares)

    def action_focus(self, which: str) -> None:  # type: ignore[override]  # textual runs sync actions too; Screen types its own async
        # set_focus is immediate, so a key typed right after (l, enter) reaches the new pane.
        self.set_focus(self.query_one(f"#{which}"))

    async def action_escape(self) -> None:
        """Escape: a maximised panel back in its place, else back (as ⌫)."""
        if self.maximized is not None:
            self.minimize()
        else:
            await self.app.run_action("back")

    def action_reload(self) -> None:
        """Re-read the vault (notes edited outside memlink too): the catalog syncs in a
        worker, so the first paint never waits for it."""
        self.query_one(NoteTree).border_title = "Notes · loading…"
        self._load_catalog()

    @work(thread=True, exclusive=True, group="catalog")
    def _load_catalog(self) -> None:
        try:
            first = not self.query_one(NoteTree).loaded
            if first:  # the stored catalog draws the tree at once; the file check follows
                stored = self.vault.catalog.stored()
                if stored:
                    self.app.call_from_thread(self._show_tree, stored, NoteTree.signature_of(stored))
            self.vault.sync()
            entries = self.vault.catalog.all()
            signature = NoteTree.signature_of(entries)  # sorting 100k titles: here, not on the UI thread
        except MemlinkError as exc:
            self.app.call_from_thread(self.notify, safe_markup(exc), title="Cannot read the vault", severity="error")
            return
        self.app.call_from_thread(self._catalog_ready, entries, signature)

    def _show_tree(self, entries, signature: tuple) -> None:
        tree = self._tree()
        if tree is None:
            return
        tree.load(entries, signature)
        tree.border_title = f"Notes · {len(entries)}"
        self.call_after_refresh(self.post_message, NotesShown())

    def _tree(self) -> NoteTree | None:
        """The note tree, or None once the pane is being taken down (a catalog worker that
        finishes as the app closes lands here after the tree is gone)."""
        found = self.query(NoteTree)
        return found.first() if found else None

    def _catalog_ready(self, entries, signature: tuple) -> None:
        tree = self._tree()
        if tree is None:
            return
        if not tree.loaded or tree.signature != signature:
            self._show_tree(entries, signature)
        tree.border_title = f"Notes · {len(entries)}"
        if self.current:
            self.run_worker(self.open_note(self.current))
        else:
            self.query_one("#note-meta", Static).update(FIRST_STEPS if not entries else self._vacant)
        self.post_message(CatalogSynced())

    # -- events ------------------------------------------------------------------------------
    def on_vault_changed(self, _message: VaultChanged) -> None:
        self.action_reload()

    @on(Tree.NodeSelected, "#tree")
    async def _tree_selected(self, event: Tree.NodeSelected) -> None:
        if event.node.data:
            self.go("browser", event.node.data)

    @on(LinkTable.Follow)
    def _follow(self, event: LinkTable.Follow) -> None:
        self.go("browser", event.uri)

    @on(Markdown.LinkClicked)
    def _link_clicked(self, event: Markdown.LinkClicked) -> None:
        event.prevent_default()
        if self.vault.exists(event.href):
            self.go("browser", event.href)
