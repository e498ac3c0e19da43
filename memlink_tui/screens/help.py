"""`?`: every key that works on the screen underneath, as Textual resolves them (the
app's, the pane's with those it inherits, the focused widget's and its containers'),
grouped under plain names. Keys and descriptions are shown as text, never as markup."""

from __future__ import annotations

import re

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.keys import format_key
from textual.screen import ModalScreen
from textual.widgets import Static

from widgets.pane_bar import PANE_NAMES

_WORDS = {"enter": "enter", "backspace": "backspace", "escape": "esc", "space": "space", "tab": "tab"}
# What a focused widget is called in the help: the first of its classes named here, else
# its class name in words ("NoteTree": "note tree").
_WIDGETS = {"Input": "text field", "TextArea": "editor", "DataTable": "table", "ListView": "list",
            "OptionList": "list", "Tree": "tree", "NoteView": "note", "LinkTable": "links table",
            "NoteTree": "note tree", "MessageBox": "message box", "SearchResults": "results"}
PALETTE = Binding("ctrl+p", "command_palette", "Command palette (open a note by title, panes, actions, themes, provider)")


def people_key(key: str) -> str:
    """A key as people write it: `/`, `?`, `ctrl+p`, `alt+←` (not `slash`, `question_mark`)."""
    *mods, last = key.strip().split("+")
    return "+".join([*mods, _WORDS.get(last) or format_key(last)])


def in_words(name: str) -> str:
    """A class name as words: "FirstRunScreen" -> "first run", "DataTable" -> "data table"."""
    return " ".join(re.findall(r"[A-Z][a-z]*|[a-z]+", name.removesuffix("Screen"))).lower()


def widget_name(widget) -> str:
    for cls in type(widget).__mro__:
        if cls.__name__ in _WIDGETS:
            return _WIDGETS[cls.__name__]
    return in_words(type(widget).__name__)


def screen_name(screen) -> str:
    """"2 Chat" for a pane; a plain name ("First run") for any other screen."""
    for pane, key, name in PANE_NAMES:
        if getattr(screen, "PANE", None) == pane:
            return f"{key} {name}"
    return in_words(type(screen).__name__).capitalize() or "This screen"


def sections(screen) -> list[tuple[str, list[tuple[str, str]]]]:
    """The keys active on ``screen`` as (keys, what they do), each under the name of where
    they are bound: the app's (and the pane base's, which every pane has) first, as
    "Everywhere". Keys bound to the same action are listed together ("2, c")."""
    from .pane import Pane

    base = {k for b in Pane.BINDINGS for k in (b.key if isinstance(b, Binding) else b[0]).split(",")}
    groups: dict[str, dict[tuple[bool, str, str], list[str]]] = {"Everywhere": {}}
    for key, active in screen.active_bindings.items():
        node, binding = active.node, active.binding
        if node is screen.app or (node is screen and isinstance(screen, Pane) and key in base):
            where = "Everywhere"
        elif node is screen:
            where = screen_name(screen)
        else:
            where = f"In the {widget_name(node)}"
        groups.setdefault(where, {}).setdefault((_textual(node, key), binding.action, describe(binding)), []).append(key)
    if not any(PALETTE.key in keys for keys in groups["Everywhere"].values()):
        groups["Everywhere"][(False, PALETTE.action, describe(PALETTE))] = [PALETTE.key]
    # Everywhere, the pane, then the focused widget; in each, memlink's keys before Textual's own.
    order = ["Everywhere", screen_name(screen)] + [g for g in groups if g not in ("Everywhere", screen_name(screen))]
    return [(where, [(", ".join(people_key(k) for k in keys), does)
                     for (_base, _action, does), keys in sorted(groups[where].items(), key=lambda row: row[0][0])])
            for where in order if groups.get(where)]


def _textual(node, key: str) -> bool:
    """Whether ``key`` comes from one of Textual's own classes (tab, a list's cursor keys)."""
    for cls in type(node).__mro__:
        for b in cls.__dict__.get("BINDINGS", []):
            if key in (b.key if isinstance(b, Binding) else b[0]).split(","):
                return cls.__module__.startswith("textual")
    return True


def describe(binding: Binding) -> str:
    if binding.action == PALETTE.action:  # Textual calls it "palette"
        return PALETTE.description
    return binding.description or binding.action.replace("_", " ").split("(")[0]


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
        text = Text()
        for i, (where, rows) in enumerate(sections(self.under)):
            text.append(("\n" if i else "") + where + "\n", style="bold")
            for keys, does in rows:
                text.append(f"  {keys:<22}", style="bold")
                text.append(f" {does}\n")
        text.rstrip()
        with VerticalScroll() as box:
            box.border_title = "Keys (esc closes)"
            yield Static(text)
