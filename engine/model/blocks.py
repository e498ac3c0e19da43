"""The generated blocks of a note's body (docs/DESIGN.md, "Vault format": the body).

The body under a note's frontmatter belongs to the person who writes it (in Obsidian, in
vim, anywhere). memlink generates two delimited blocks in it, each between HTML comment
lines — invisible in Obsidian's reading view and in any markdown renderer:

- the **view** (``<!-- memlink:view -->`` … ``<!-- /memlink:view -->``): the type's
  template rendered from the fields. It is rewritten on each field write; text around it
  is kept as it is (``engine.model.notes.rebuild_body``).
- the **Links** block (``<!-- memlink:links … -->`` … ``<!-- /memlink:links -->``): the
  note's outgoing links as ``[[wikilinks]]`` for Obsidian's graph and backlinks,
  regenerated from the link sidecars whenever the note's links change, in the same unit
  of work. It is never read back: the sidecars are the truth, and an edit inside it is
  overwritten by the next regeneration.

Readers that derive from a note's text (the search index, snippets, the catalog's
content hash, anchors) see ``visible_text``: the body without the Links block and
without the marker lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import quote

VIEW_OPEN = "<!-- memlink:view -->"
VIEW_CLOSE = "<!-- /memlink:view -->"
LINKS_OPEN = "<!-- memlink:links: generated from the link sidecars (.relations.json); edits here are overwritten -->"
LINKS_CLOSE = "<!-- /memlink:links -->"
LINKS_PREFIX = "<!-- memlink:links"
LINKS_HEADING = "**Links**"

_LINKS_OPEN_B = LINKS_PREFIX.encode()
_LINKS_CLOSE_B = LINKS_CLOSE.encode()
MAX_DESCRIPTION = 80  # a description longer than this is left out of the Links block
_UNSAFE_TARGET = re.compile(r"[#^|\[\]\n\r]")  # what a wikilink target cannot hold


def _is_open(line: str, prefix: str) -> bool:
    s = line.strip()
    return s.startswith(prefix) and s.endswith("-->") and not s.startswith("<!-- /")


def _block_span(lines: list[str], open_prefix: str, close: str) -> tuple[int, int] | None:
    """(first, last) line index of the first block: a close line and the nearest open line
    before it. A stray marker (its pair deleted by hand) is not a block."""
    opened = -1
    for i, line in enumerate(lines):
        if _is_open(line, open_prefix):
            opened = i
        elif line.strip() == close and opened >= 0:
            return opened, i
    return None


def links_span(body: str) -> tuple[int, int] | None:
    """Character span (start, end) of the Links block in ``body``, markers and the line
    break after the close marker included; None without one."""
    at = body.find(LINKS_PREFIX)
    if at < 0:
        return None
    first = body.rfind("\n", 0, at) + 1  # (no open marker above this line: the lines above are not read)
    lines = body[first:].split("\n")
    span = _block_span(lines, LINKS_PREFIX, LINKS_CLOSE)
    if span is None:
        return None
    start = first + sum(len(l) + 1 for l in lines[: span[0]])
    end = first + sum(len(l) + 1 for l in lines[: span[1] + 1])
    return start, min(end, len(body))


def strip_links_block(body: str) -> str:
    """``body`` without its Links block (and the blank line that separates it)."""
    span = links_span(body)
    if span is None:
        return body
    before, after = body[: span[0]], body[span[1] :]
    if not after.strip("\n"):
        before = before.rstrip("\n") + "\n" if before.strip("\n") else ""
        return before
    return before + after


def visible_text(body: str) -> str:
    """What derived readers see of a body: no Links block, no view marker lines."""
    body = strip_links_block(body)
    if VIEW_OPEN not in body and VIEW_CLOSE not in body:
        return body
    return "\n".join(l for l in body.split("\n") if l.strip() not in (VIEW_OPEN, VIEW_CLOSE))


def strip_links_bytes(data: bytes) -> bytes:
    """A note file's bytes without the Links block (the catalog's content hash: a note
    whose only change is its Links block keeps its hash, so it is not re-indexed)."""
    at = data.find(_LINKS_OPEN_B)
    if at < 0:
        return data
    try:
        return strip_links_block(data.decode("utf-8")).encode("utf-8")
    except UnicodeDecodeError:
        return data


def _inert(line: str) -> str:
    """A line of the view that reads as one of the markers (a field's text can hold one):
    its "<" escaped, so the view ends where memlink ended it, and markdown shows the
    line as written."""
    s = line.strip()
    return line.replace("<", "&lt;", 1) if s in (VIEW_OPEN, VIEW_CLOSE, LINKS_CLOSE) or _is_open(s, LINKS_PREFIX) else line


def view_text(view: str) -> str:
    """A rendered view as its block holds it: no blank line around it, no line that reads
    as a marker."""
    return "\n".join(_inert(line) for line in view.strip("\n").split("\n"))


def view_block(view: str) -> str:
    """The delimited view (no trailing newline)."""
    inner = view_text(view)
    return f"{VIEW_OPEN}\n{inner}\n{VIEW_CLOSE}" if inner else f"{VIEW_OPEN}\n{VIEW_CLOSE}"


def view_span(body: str) -> tuple[int, int, str] | None:
    """(start, end, inner text) of the view block in ``body`` outside the Links block;
    ``end`` is the end of the close marker line (its line break not included)."""
    if VIEW_CLOSE not in body:
        return None
    lines = body.split("\n")
    links = _block_span(lines, LINKS_PREFIX, LINKS_CLOSE)
    if links is not None:  # a view marker inside the Links block is not the view
        lines = ["\x00" if links[0] <= i <= links[1] else l for i, l in enumerate(lines)]
    span = _block_span(lines, VIEW_OPEN, VIEW_CLOSE)
    if span is None:
        return None
    real = body.split("\n")
    start = sum(len(l) + 1 for l in real[: span[0]])
    end = sum(len(l) + 1 for l in real[: span[1]]) + len(real[span[1]])
    return start, end, "\n".join(real[span[0] + 1 : span[1]])


@dataclass(frozen=True)
class LinkLine:
    """One outgoing link as the Links block shows it."""

    to_uri: str
    title: str
    link_type: str
    weight: float
    description: str = ""


def _alias(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("|", "/").replace("[", "(").replace("]", ")")).strip()


def wikilink(to_uri: str, title: str) -> str:
    """``[[path/without/.md|Title]]``: Obsidian resolves a vault-relative path. A path a
    wikilink cannot hold (``#``, ``|``, brackets) is a markdown link, which Obsidian
    resolves and draws in its graph too."""
    target = to_uri[:-3] if to_uri.endswith(".md") else to_uri
    shown = _alias(title) or target.rsplit("/", 1)[-1]
    if _UNSAFE_TARGET.search(target):
        return f"[{shown}]({quote(to_uri, safe='/')})"
    return f"[[{target}|{shown}]]" if shown != target else f"[[{target}]]"


def _weight(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".") if value != int(value) else f"{int(value)}"


def render_links_block(lines: Iterable[LinkLine]) -> str | None:
    """The Links block for these links (None: no links, no block). No trailing newline."""
    rows = []
    for l in lines:
        desc = " ".join(l.description.split())
        tail = f" — {desc}" if desc and len(desc) <= MAX_DESCRIPTION else ""
        rows.append(f"- {l.link_type} {wikilink(l.to_uri, l.title)} ({_weight(l.weight)}){tail}")
    if not rows:
        return None
    return "\n".join([LINKS_OPEN, LINKS_HEADING, "", *rows, LINKS_CLOSE])


def set_links_block(body: str, block: str | None) -> str:
    """``body`` with its Links block replaced in place by ``block``, appended at the end
    (after a blank line) when there was none, or removed (``block`` None)."""
    span = links_span(body)
    if span is None:
        if block is None:
            return body
        kept = body.rstrip("\n")
        return f"{kept}\n\n{block}\n" if kept else f"{block}\n"
    if block is None:
        return strip_links_block(body)
    return body[: span[0]] + block + "\n" + body[span[1] :]
