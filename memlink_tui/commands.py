"""Command palette (ctrl+p): open a note by title, the panes and actions by name,
switch theme, switch LLM provider or model."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content
from textual.fuzzy import Matcher

from engine.model.text import printable
from widgets.safe import safe_markup

if TYPE_CHECKING:
    from .app import MemlinkApp


def shown(matcher: Matcher, text: str) -> Content:
    """``text`` as the palette shows a hit, its matched letters marked: read as text, never
    as markup (a note's title, an Ollama model's or a theme's name is data:
    ``Matcher.highlight`` would run its ``[@click=…]``)."""
    text = printable(text)
    content = Content(text)
    score, offsets = matcher.fuzzy_search.match(matcher.query, text)
    for offset in offsets if score else ():
        if not text[offset].isspace():
            content = content.stylize(matcher.match_style, offset, offset + 1)
    return content


class _AppProvider(Provider):
    """A command provider of the memlink app (textual types ``self.app`` as any App)."""

    @property
    def app(self) -> MemlinkApp:
        return cast("MemlinkApp", super().app)


class NoteCommands(_AppProvider):
    """Open any note by typing part of its title."""

    async def search(self, query: str) -> Hits:
        app = self.app
        if app.vault is None:
            return
        matcher = self.matcher(query)
        for entry in app.vault.catalog.all():
            score = matcher.match(entry.title)
            if score > 0:
                yield Hit(score, shown(matcher, entry.title), partial(app.open_note, entry.uri),
                          text=entry.title, help=safe_markup(f"{entry.memory_type} · {entry.uri}"))


class _Listed(_AppProvider):
    """A fixed list of (name, callback, help) shown on an empty query too."""

    def entries(self) -> list[tuple[str, Callable[[], Any], str]]:
        raise NotImplementedError

    async def discover(self) -> Hits:
        for name, callback, help_text in self.entries():
            yield DiscoveryHit(Content(printable(name)), callback, text=name, help=safe_markup(help_text))

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, callback, help_text in self.entries():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, shown(matcher, name), callback, text=name, help=safe_markup(help_text))


class ActionCommands(_Listed):
    """memlink's panes and actions by name."""

    ACTIONS = [
        ("Memory browser", "go('browser')", "notes by type, the open note and its links (1)"),
        ("Chat", "go('chat')", "talk to the local model with recall (2, c)"),
        ("Graph explorer", "go('graph')", "the open note's neighbours, PageRank, paths (3, g)"),
        ("Report queue", "go('reports')", "research questions and reports (4, R)"),
        ("Lint and review", "go('lint')", "lint checks and contradiction review (5, L)"),
        ("Search", "search", "hybrid search over the vault (/)"),
        ("Run dream", "dream", "turn questions, contradictions and changes into reports (D in reports)"),
        ("Run lint", "go('lint')", "check the vault and refresh the dashboards"),
        ("New chat session", "new_session", "start a fresh conversation (ctrl+n in chat)"),
        ("Import file", "import_file", "ingest a text or markdown file and show the diff (i)"),
        ("Back", "back", "where you were before (ctrl+left, b in the browser)"),
        ("Forward", "forward", "undo a back (ctrl+right, f in the browser)"),
        ("Next theme", "next_theme", "cycle memlink's themes (ctrl+t)"),
        ("Help", "help", "every key of the current pane (?)"),
    ]

    def entries(self):
        if self.app.vault is None:
            return []
        return [(name, partial(self.app.run_action, action), help_text) for name, action, help_text in self.ACTIONS]


class ThemeCommands(_Listed):
    """Theme: <name> for each of memlink's themes (bundled and the user's own)."""

    def entries(self):
        return [(f"Theme: {t.name}", partial(setattr, self.app, "theme", t.name),
                 "light" if not t.dark else ("terminal colours" if t.ansi else "dark"))
                for t in self.app.memlink_themes]


class ProviderCommands(_Listed):
    """Provider: rules / auto / ollama, and Model: <name> for each model Ollama has."""

    async def startup(self) -> None:
        self.models: list[str] = []
        vault = self.app.vault
        if vault is None:
            return
        from engine.llm.registry import models

        # Ollama not running: no models, only the provider entries are offered.
        self.models = await asyncio.to_thread(models, vault.config.llm)

    def entries(self):
        if self.app.vault is None:
            return []
        app = self.app
        current = app.vault.config.llm
        out = [
            ("Provider: rules", partial(app.set_provider, "rules"), "zero-LLM rules, never calls a model"),
            ("Provider: auto", partial(app.set_provider, "auto"), "Ollama when it runs and has the model, else rules"),
            ("Provider: ollama", partial(app.set_provider, "ollama"), f"always Ollama ({current.model})"),
        ]
        out += [(f"Model: {m}", partial(app.set_provider, "ollama", m), "use this Ollama model")
                for m in getattr(self, "models", [])]
        return out
