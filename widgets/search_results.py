"""Search results: title, type, score, how each hit was found, and its snippet."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.widgets import OptionList
from textual.widgets.option_list import Option

from .safe import safe_markup, safe_path

if TYPE_CHECKING:  # engine.retrieve.search pulls in numpy and the index; not needed to draw
    from engine.retrieve.search import SearchHit


def _snippet_markup(snippet: str) -> str:
    """Rendered links ([text](uri)) shown underlined: the snippet is markdown."""
    import re

    out, last = [], 0
    for m in re.finditer(r"\[([^\]]+)\]\(([^)]+)\)", snippet):
        out.append(safe_markup(snippet[last : m.start()]))
        out.append(f"[u]{safe_markup(m.group(1))}[/u]")
        last = m.end()
    out.append(safe_markup(snippet[last:]))
    return "".join(out)


class SearchResults(OptionList):
    DEFAULT_CSS = """
    SearchResults { height: 1fr; }
    """

    def show(self, hits: list[SearchHit]) -> None:
        self.clear_options()
        for i, h in enumerate(hits):
            if i:
                self.add_option(None)  # a separator line between hits
            text = (
                f"[b]{safe_markup(h.title)}[/b]  [dim]{safe_markup(h.memory_type)} · {safe_path(h.uri)} · {h.score:.2f}"
                f"{' · weak match' if h.weak else ''}{f' · {h.supersession}' if h.supersession else ''}[/dim]\n"
                f"  [i $text-muted]{safe_markup(h.route)}[/]\n"
                f"  {_snippet_markup(h.snippet)}"
            )
            for e in h.evidence:  # notes derived from this one that matched too
                text += f"\n  [dim]↳ {safe_markup(e.title)} · {safe_markup(e.memory_type)} · {safe_path(e.uri)}[/dim]"
            self.add_option(Option(text, id=h.uri))
        if hits:
            self.highlighted = 0
