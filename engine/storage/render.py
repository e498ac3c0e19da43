"""Render outgoing links into text by match_text, at read time only (docs/DESIGN.md, "Vault format").

Rules: only direction "links" renders; every occurrence is replaced (but where the text
writes the anchor as a link itself: then only there); longer match texts
win over shorter ones they contain; a match_text absent from the text leaves the text
alone and is reported (the link itself stays). Link syntax already in the text (an
imported page's `[[page|Shown]]` or `[Shown](path)`) is never nested into: when its shown
text is a match_text it becomes that one link, otherwise it is left as written.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ..model.links import StoredLink
from ..model.text import mask_code
from ..model.uris import normalize_uri, uri_dir
from ..model.yamlio import plain
from .sidecars import sidecar_rel

if TYPE_CHECKING:
    from .vault import Vault


@dataclass
class Rendered:
    text: str
    rendered: list[StoredLink] = field(default_factory=list)  # links placed in the text
    missing: list[StoredLink] = field(default_factory=list)  # match_text not found


_EXISTING = re.compile(r"(?P<img>!\[[^\]]*\]\([^)\s]*\))|!?\[\[(?P<wiki>[^\]|]+)(?:\|(?P<wiki_shown>[^\]]+))?\]\]|(?<!!)\[(?P<md>[^\]]+)\]\([^)\s]+\)")


def _shown(m: re.Match) -> str | None:
    """What a link the text writes already shows: its alias, a wikilink's page name (the
    anchor of [[Pests#Hornworm]] is a place in it), a markdown link's text."""
    wiki = m.group("wiki")
    return m.group("wiki_shown") or (wiki.split("#", 1)[0].strip() or wiki if wiki else None) or m.group("md")


_HREF_UNSAFE = re.compile(r"[\s()<>%\[\]]")  # what ends or breaks a markdown link's destination


def href(path: str) -> str:
    """A path as a markdown link's destination: a space, bracket or parenthesis (an
    Obsidian vault's "Internal links.md") written as its %-escape, the rest as it is (a
    Chinese name stays readable). Markdown readers, the app's included, decode it."""
    return _HREF_UNSAFE.sub(lambda m: quote(m.group(0)), path)


def _default_href(link: StoredLink) -> str:
    return href(link.to_uri)


def heading_slug(heading: str) -> str:
    """A heading as markdown readers name its place (GitHub's rule): lower case, spaces as
    hyphens, other punctuation left out."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def render_links(text: str, links: list[StoredLink], href: Callable[[StoredLink], str] = _default_href, *,
                 headings: bool = False) -> Rendered:
    """The text with its links at their anchors (``match_text``), as markdown links; a
    wikilink the text writes becomes the link it names (an embedded note, ``![[…]]``, a
    plain link to it; with ``headings``, ``[[Page#Heading]]`` leads to that heading)."""
    by_text: dict[str, StoredLink] = {}
    for link in sorted(links, key=lambda l: -l.weight):
        if link.direction != "links" or not link.match_text:
            continue
        by_text.setdefault(link.match_text, link)  # strongest link wins a shared anchor
    result = Rendered(text=text)
    if not by_text:
        return result
    present = {t: l for t, l in by_text.items() if t in text}
    result.missing = [l for t, l in by_text.items() if t not in present]
    if not present:
        return result
    # Existing links first, then match texts longest first: at any position the regex
    # engine tries the alternatives in order.
    texts = "|".join(re.escape(t) for t in sorted(present, key=len, reverse=True))
    pattern = re.compile(rf"{_EXISTING.pattern}|(?P<plain>{texts})")
    used: dict[str, StoredLink] = {}
    # An anchor the text writes as a link already ("See [[Beta]]") is that link: the same
    # word elsewhere ("Beta is late") is the word, as the text's author left it.
    written = {shown for m in _EXISTING.finditer(text) if (shown := _shown(m)) in present}

    clean = mask_code(text)  # (a link's words or syntax inside code are code: left as written)

    def repl(m: re.Match) -> str:
        shown = m.group("plain")
        if m.group("img") or shown in written or clean[m.start():m.end()] != m.group(0):
            return m.group(0)  # an image's alt text stays as written
        if shown is None:  # link syntax already there
            shown = _shown(m)
            if shown not in present:
                return m.group(0)
        link = present[shown]
        used[link.id + link.to_uri] = link
        label = shown.replace("[", "\\[").replace("]", "\\]")
        heading = (m.group("wiki") or "").partition("#")[2] if headings else ""
        place = f"#{heading_slug(heading)}" if heading.strip() and not heading.startswith("^") else ""  # (^: a block)
        return f"[{label}]({href(link)}{place})"

    result.text = pattern.sub(repl, text)
    result.rendered = list(used.values())
    # A shorter anchor swallowed by a longer one at every occurrence is still reported.
    result.missing += [l for l in present.values() if (l.id + l.to_uri) not in used]
    return result


def note_data(vault: Vault, uri: str) -> dict[str, Any]:
    """A note as JSON data for other programs (`memlink show --json`, the MCP server): its
    fields, its other frontmatter keys and body, the body with its links rendered, links and backlinks, and why its
    links may be incomplete (None when whole)."""
    note = vault.read_note(uri)
    rendered = vault.render_note(note.uri)
    return {
        "uri": note.uri,
        "memory_type": note.memory_type,
        "title": vault.title(note),
        "created_at": note.created_at,
        "updated_at": note.updated_at,
        "fields": note.fields,
        "frontmatter": plain(note.extra),  # its other keys: an imported page's aliases, tags, properties
        "body": note.body,
        "rendered": rendered.text,
        "missing_match_text": [link.id for link in rendered.missing],
        "links": [link.model_dump(mode="json") for link in vault.links.of(note.uri, "links")],
        "backlinks": [link.model_dump(mode="json") for link in vault.links.of(note.uri, "backlinks")],
        "link_problems": link_problems(vault, note.uri),
    }


def link_problems(vault: Vault, uri: str) -> str | None:
    """Why a note's links, as read, may be incomplete: its folder's sidecar cannot be
    read, or holds entries that do not validate (readers skip them). None when whole."""
    folder = uri_dir(normalize_uri(uri))
    state = vault.links.folder(folder, records=False)
    if state.broken:
        return f"{state.broken}; this folder's links are not shown"
    if state.rejected:
        first = state.rejected[0]
        more = f" and {len(state.rejected) - 1} more" if len(state.rejected) > 1 else ""
        return f"{sidecar_rel(folder)}: {first.label}{more} skipped ({first.cause})"
    return None
