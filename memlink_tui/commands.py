"""Command palette (ctrl+p): open a note by title, and the app's actions by name."""

from __future__ import annotations

from functools import partial

from textual.command import Hit, Hits, Provider


class NoteCommands(Provider):
    """Open any note by typing part of its title."""

    async def search(self, query: str) -> Hits:
        app = self.app
        matcher = self.matcher(query)
        for entry in app.vault.list_notes():
            score = matcher.match(entry.title)
            if score > 0:
                yield Hit(score, matcher.highlight(entry.title), partial(app.open_note, entry.uri),
                          help=f"{entry.memory_type} · {entry.uri}")


class ActionCommands(Provider):
    """memlink's panes and actions by name."""

    ACTIONS = [
        ("Search", "search", "hybrid search over the vault (/)"),
        ("Chat", "chat", "the chat pane (c)"),
        ("Report queue", "reports", "questions, reports, run the dream (R)"),
        ("Lint and review", "lint", "lint checks and contradiction review (L)"),
        ("Help", "help", "every key of the current screen (?)"),
    ]

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, action, help_text in self.ACTIONS:
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), partial(self.app.run_action, action), help=help_text)
