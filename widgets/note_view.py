"""A note rendered for reading: a header with its metadata and the body as markdown,
outgoing links rendered by match_text (hrefs are vault URIs)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Markdown, Static

from engine import Note
from engine.model.text import counted, printable

from .safe import safe_markup, safe_path


class NoteView(VerticalScroll, can_focus=True):
    DEFAULT_CSS = """
    NoteView { height: 2fr; padding: 0 1; }
    NoteView > #note-meta { color: $text-muted; padding: 0 0 1 0; }
    NoteView MarkdownH1 { margin: 0 0 1 0; }  /* (a note's title, right under its header: at 80×24 its text is in sight) */
    """

    def compose(self) -> ComposeResult:
        yield Static("Select a note in the tree.", id="note-meta")
        yield Markdown("", open_links=False, id="note-body")

    async def show(self, note: Note, title: str, rendered_body: str, missing: int) -> None:
        fields = "  ".join(
            f"[b]{safe_markup(k)}[/b]: {safe_markup(', '.join(map(str, v)) if isinstance(v, list) else str(v))}"
            for k, v in note.fields.items()
            if k not in ("content", "answer") and v not in ("", [], None) and v != title  # (the title heads the header)
        )
        warn = f"\n[$warning]{counted(missing, 'link anchor')} not found in the text[/]" if missing else ""
        warn += "".join(f"\n[$warning]{safe_markup(line)}[/]" for line in note.superseded())
        meta = (
            f"[b]{safe_markup(title)}[/b]  [dim]{safe_markup(note.memory_type)} · {safe_path(note.uri)}[/dim]\n"
            f"created {safe_markup(note.created_at[:10])} · updated {safe_markup(note.updated_at[:10])}\n{fields}{warn}"
        )
        self.query_one("#note-meta", Static).update(meta)
        # Markdown is not Rich markup: the body only loses what a terminal would act on.
        await self.query_one("#note-body", Markdown).update(printable(rendered_body))
        self.scroll_home(animate=False)

    async def clear(self, message: str) -> None:
        """No note: ``message`` (markup) where its header was."""
        self.query_one("#note-meta", Static).update(message)
        await self.query_one("#note-body", Markdown).update("")
