"""The key map as a markdown table, from the bindings themselves: the README holds its
output (a test keeps the two in step: `python -m memlink_tui.keymap` prints it)."""

from __future__ import annotations

from textual.binding import Binding

from .screens.help import people_key


def _rows(cls: type, inherited: bool = False) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for klass in cls.__mro__ if inherited else (cls,):
        for b in klass.__dict__.get("BINDINGS", []):
            b = b if isinstance(b, Binding) else Binding(*b)
            if b.key in seen:
                continue
            seen.add(b.key)
            keys, does = ", ".join(f"`{people_key(k)}`" for k in b.key.split(",")), b.description or b.action
            if out and out[-1][1] == does:  # (two bindings that do the same, one row: ⌫ and esc both go back)
                out[-1] = (f"{out[-1][0]}, {keys}", does)
            else:
                out.append((keys, does))
    return out


def keymap() -> str:
    from .app import MemlinkApp
    from .screens.browser import BrowserScreen
    from .screens.chat import ChatScreen
    from .screens.graph import GraphScreen
    from .screens.lint import LintScreen
    from .screens.pane import Pane
    from .screens.reports import ReportScreen

    sections = [("everywhere", _rows(MemlinkApp) + [("`ctrl+p`", "Command palette")] + _rows(Pane)),
                ("1 Memory", _rows(BrowserScreen)), ("2 Chat", _rows(ChatScreen)), ("3 Graph", _rows(GraphScreen)),
                ("4 Reports", _rows(ReportScreen)), ("5 Lint", _rows(LintScreen))]
    lines = ["| where | keys | does |", "|---|---|---|"]
    for where, rows in sections:
        for i, (keys, does) in enumerate(rows):
            lines.append(f"| {where if i == 0 else ''} | {keys} | {does} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(keymap())
