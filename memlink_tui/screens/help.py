"""`?`: every key binding of the screen underneath, and the app's own."""

from __future__ import annotations

from rich.markup import escape
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 80; height: 80%; border: round $accent; background: $surface; padding: 0 1; }
    """
    BINDINGS = [Binding("escape,question_mark,q", "dismiss(None)", "Close")]

    def __init__(self, under) -> None:
        super().__init__()
        self.under = under

    def compose(self) -> ComposeResult:
        lines = [f"[b]{escape(type(self.under).__name__.replace('Screen', ''))}[/b]"]
        for binding in self._listed(self.under) + [None] + self._listed(self.app):
            if binding is None:
                lines.append("\n[b]Everywhere[/b]")
                continue
            lines.append(f"  [b]{escape(binding.key):<18}[/b] {escape(binding.description or binding.action)}")
        lines.append("\n  [b]ctrl+p[/b]             command palette (open a note by title, panes, actions)")
        with VerticalScroll():
            yield Static("\n".join(lines))

    @staticmethod
    def _listed(node) -> list:
        out = []
        for b in getattr(node, "BINDINGS", []):
            if isinstance(b, Binding):
                out.append(b)
            elif isinstance(b, tuple):
                out.append(Binding(*b))
        return out
