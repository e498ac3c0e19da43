"""`?`: every key binding of the screen underneath, and the app's own."""

from __future__ import annotations

from rich.markup import escape
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.keys import format_key
from textual.screen import ModalScreen
from textual.widgets import Static

_WORDS = {"enter": "enter", "backspace": "backspace", "escape": "esc", "space": "space", "tab": "tab"}


def people_key(key: str) -> str:
    """A key as people write it: `/`, `?`, `ctrl+p`, `alt+←` (not `slash`, `question_mark`)."""
    *mods, last = key.strip().split("+")
    return "+".join([*mods, _WORDS.get(last) or format_key(last)])


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
        lines = ["[b]Everywhere[/b]"]  # first: the keys that work in every pane
        lines += self._lines(self._listed(type(self.app), inherited=False))
        lines.append(f"  [b]{'ctrl+p':<22}[/b] command palette (open a note by title, panes, actions, themes, provider)")
        lines.append(f"\n[b]{escape(type(self.under).__name__.replace('Screen', ''))}[/b]")
        lines += self._lines(self._listed(type(self.under), inherited=False))
        focused = getattr(self.under, "focused", None)
        if focused is not None and self._listed(type(focused)):
            lines.append(f"\n[b]In the focused {escape(type(focused).__name__)}[/b]")
            lines += self._lines(self._listed(type(focused)))
        with VerticalScroll() as box:
            box.border_title = "Keys (esc closes)"
            yield Static("\n".join(lines))

    @staticmethod
    def _lines(bindings: list[Binding]) -> list[str]:
        out = []
        for b in bindings:
            keys = ", ".join(people_key(k) for k in b.key.split(","))
            out.append(f"  [b]{escape(keys):<22}[/b] {escape(b.description or b.action)}")
        return out

    @staticmethod
    def _listed(cls, inherited: bool = True) -> list[Binding]:
        """The class's own bindings, and with ``inherited`` those of its bases (a Tree's
        cursor keys); Textual's generic screen/app keys stay out."""
        out, seen = [], set()
        for klass in cls.__mro__ if inherited else (cls,):
            for b in klass.__dict__.get("BINDINGS", []):
                b = b if isinstance(b, Binding) else Binding(*b)
                if b.key not in seen:
                    seen.add(b.key)
                    out.append(b)
        return out
