"""References already in a note's text become links without any LLM (GBrain's auto-link;
docs/DESIGN.md, "Link types"): markdown links ``[text](path)`` (relative, root-relative, with or without ``.md``),
``[[wikilinks]]`` (by title, alias or file name, with or without ``|shown``) and bare
slug references (``people/mia-brown``). Paths resolve against the batch being imported
(its own pages first), the vault, and the paths files were imported from (their aliases).
Code fences are ignored; one link per target per note; match_text is the visible text. A
reference to a note that does not exist, or to several notes nothing tells apart (two
imports with a page at the same path, two pages with the same title in other folders),
is reported with its line, never linked; one naming a file that is not a page (an image,
a PDF) as a missing file.

An imported page's properties hold links as Obsidian reads them there
(``find_property_references``): a text property, or an item of a list property, that is
one ``[[wikilink]]`` (quoted in the YAML). Such a link has no anchor in the text; its
description names the property.

Each link is typed by the relation its sentence states (engine.model.relations: works at,
invested in, advises, attended …, kept in the description), else by the sentence cascade
of the rules provider."""

from __future__ import annotations

import posixpath
import re
import urllib.parse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..model.files import ATTACHMENT_SUFFIXES, DOCUMENT_SUFFIXES
from ..model.relations import RELATIONS, describe, relation_in
from ..model.text import MARKDOWN_LINK, NOT_A_NOTE, mask_code
from ..model.uris import uri_dir
from ..retrieve.names import TEXT_SUFFIXES, Lookup, NameIndex, Scope, path_key
from .rules import link_type_for

if TYPE_CHECKING:
    from ..model.linktypes import LinkTypeTable
    from ..storage.vault import Vault

_WIKI = re.compile(r"!?\[\[([^\]|#\n]+)(?:#([^\]|\n]*))?(?:\|([^\]\n]+))?\]\]")
_SLUG = re.compile(r"(?<![\w/.:@#~-])((?:[\w-]+/)+[\w-]+)(?:\.md)?(?![\w/])")
_SENT_END = re.compile(r"[.!?](?=\s|$)|\n")

PLAIN_WEIGHT = 0.6  # a page names another
RELATION_WEIGHT = 0.8  # … and says how they relate


@dataclass
class Reference:
    target: str  # vault URI
    text: str  # what the reader sees (match_text)
    sentence: str  # the sentence around it, references masked
    line: int = 0
    at: int = 0  # where the reference starts in ``sentence``
    anchor: str = ""  # the heading or block (``^id``) it points to in the target, as written
    more: list[tuple[str, int]] = field(default_factory=list)  # (sentence, at) of later references to the same note
    property: str = ""  # the page's property it is written in (then ``text`` is "": nothing in the text shows it)


@dataclass
class Missing:
    raw: str
    line: int
    candidates: tuple[str, ...] = ()  # several notes answer to it: ambiguous
    file: bool = False  # it names a file that is not a page (``x.png``, ``x.pdf``): a missing file, not a note

    def __str__(self) -> str:
        return f"line {self.line}: {self.raw}" + (f" (ambiguous: {', '.join(self.candidates)})" if self.candidates else "")


@dataclass
class AutoLinks:
    found: list[Reference] = field(default_factory=list)
    missing: list[Missing] = field(default_factory=list)  # references to notes that do not exist
    by_alias: list[Missing] = field(default_factory=list)  # resolved only through an alias or a title (candidates: the note)
    attachments: int = 0  # links to the import's other files (images, PDFs, canvases): not notes


def find_references(vault: Vault, from_uri: str, text: str, base: str | None = None, names: NameIndex | None = None,
                    scope: Scope | None = None) -> AutoLinks:
    """The references in ``text`` (the note ``from_uri``'s, or the file it was imported
    from: then ``base`` is that file's folder in the imported tree, for relative paths,
    and ``scope`` the batch it is imported with)."""
    names = names or NameIndex.for_vault(vault)
    catalog = vault.catalog
    out = AutoLinks()
    clean = mask_code(text)  # code is not a reference
    # (start, end, what it resolved to, shown, raw, anchor)
    spans: list[tuple[int, int, Lookup, str, str, str]] = []
    aliased: set[int] = set()  # starts of the spans resolved through an alias
    named_files: set[int] = set()  # starts of the spans that name a file that is not a page

    def attachment(raw: str) -> bool:
        """A link to one of the import's files that is not a page (``diagram.png``)."""
        path = urllib.parse.unquote(raw.split("#", 1)[0]).strip().lower()
        if scope is None or not _file_suffix(path):
            return False
        if path.startswith(("./", "../")):
            path = posixpath.normpath(posixpath.join(scope.folder.lower(), path))
        return path in scope.attachments or path.rsplit("/", 1)[-1] in scope.attachments

    def live(found: Lookup) -> Lookup:
        if found.uri is None:
            return found
        return found if found.uri in catalog else Lookup()

    def by_path(raw: str) -> Lookup:
        path = urllib.parse.unquote(raw.split("#", 1)[0].split("?", 1)[0])
        if not path:
            return Lookup()
        bases = [] if path.startswith("/") else [b for b in (base, uri_dir(from_uri)) if b is not None]
        for folder in [*bases, ""]:
            joined = posixpath.normpath(posixpath.join(folder, path.lstrip("/")))
            if joined.startswith(".."):
                continue
            if scope is not None and (mine := scope.paths.get(path_key(joined))):
                return live(Lookup(mine))  # the batch's own page at that path
            for cand in (joined, joined + ".md"):
                if cand in catalog:
                    return live(Lookup(cand))
            found = names.lookup_path(joined, scope)
            if found.uri or found.ambiguous:
                return live(found)
        return Lookup()

    files: list[tuple[int, int]] = []  # attachment links: masked, not references
    for m in MARKDOWN_LINK.finditer(clean):
        dest = m[2] or m[3]
        if NOT_A_NOTE.match(dest):
            continue  # a web link or an anchor, not a note
        if attachment(dest):
            files.append((m.start(), m.end()))
            continue
        found = by_path(dest)
        if m[0].startswith("!") and found.uri is None:
            continue  # an image that is not one of the import's files (an embedded note or document is a link)
        anchor = dest.split("#", 1)[1] if "#" in dest else ""
        spans.append((m.start(), m.end(), found, m[1], m[0], urllib.parse.unquote(anchor)))
        if _names_file(urllib.parse.unquote(dest.split("#", 1)[0].split("?", 1)[0])):
            named_files.add(m.start())
    for m in _WIKI.finditer(clean):
        name = m[1].rstrip("\\").strip()  # (``[[a\|b]]`` in a table escapes its bar)
        if attachment(name):
            files.append((m.start(), m.end()))
            continue
        if m[0].startswith("!") and scope is None and _file_suffix(name):
            continue  # an embedded file outside an import: nothing to tell it by
        found = live(names.lookup_file(name, scope)) if scope is not None else Lookup()
        if found.uri is None and not found.ambiguous:
            found = live(names.lookup_name(name, scope))
            if scope is not None and found.uri in scope.batch:
                aliased.add(m.start())  # Obsidian would not resolve it: said so
        if found.uri is None and not found.ambiguous:
            found = by_path(name)
        spans.append((m.start(), m.end(), found, (m[3] or name).strip(), m[0], (m[2] or "").strip()))
        if _names_file(name):
            named_files.add(m.start())
    out.attachments = len(files)
    masked = _mask(clean, [*spans, *files])
    for m in _SLUG.finditer(masked):
        found = by_path(m[1])
        known_folder = m[1].split("/", 1)[0].lower() in names.folders
        if found.uri or found.ambiguous or known_folder:  # "and/or", dates and the like are not references
            spans.append((m.start(), m.end(), found, m[1], m[0], ""))
    masked = _mask(clean, [*spans, *files])
    seen: dict[str, Reference] = {}
    for start, end, found, shown, raw, anchor in sorted(spans, key=lambda s: (s[0], s[1])):
        line = text.count("\n", 0, start) + 1
        target = found.uri
        if target is None:
            out.missing.append(Missing(raw, line, found.candidates if found.ambiguous else (), start in named_files))
            continue
        if target == from_uri:
            continue
        if start in aliased:
            out.by_alias.append(Missing(raw, line, (target,)))
        left, right = _sentence_bounds(masked, start, end)
        if target in seen:  # one link per target; what each sentence says is kept
            seen[target].more.append((masked[left:right], start - left))
            continue
        seen[target] = Reference(target, shown, masked[left:right], line, start - left, anchor)
        out.found.append(seen[target])
    return out


def _file_suffix(name: str) -> bool:
    """Whether a link names a file that is not a page (``x.png``, ``x.pdf``, ``x.canvas``)."""
    suffix = posixpath.splitext(name)[1].lower()
    return bool(suffix) and " " not in suffix and suffix not in TEXT_SUFFIXES


def _names_file(name: str) -> bool:
    """Whether a link names one of the files an import copies or converts (an image, a
    canvas, a PDF), not a page: a missing one is a missing file."""
    suffix = posixpath.splitext(name.strip())[1].lower()
    return suffix in ATTACHMENT_SUFFIXES or suffix in DOCUMENT_SUFFIXES


def property_links(properties: dict) -> list[tuple[str, str]]:
    """(property, link) for each internal link a page's properties hold as Obsidian reads
    them: a text value, or an item of a list, that is one ``[[wikilink]]`` (a markdown link,
    or a link inside other text, is no link there)."""
    out = []
    for key, value in properties.items():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str) and _WIKI.fullmatch(item.strip()) and not item.strip().startswith("!"):
                out.append((str(key), item.strip()))
    return out


def find_property_references(vault: Vault, from_uri: str, properties: dict, front: str = "", base: str | None = None,
                             names: NameIndex | None = None, scope: Scope | None = None) -> AutoLinks:
    """The references of a page's properties (``property_links``), resolved as its text's
    are (``find_references``); each found one names its property, and each a line of
    ``front`` (the file's frontmatter as written) where it is, else line 1."""
    links = property_links(properties)
    out = find_references(vault, from_uri, "\n".join(raw for _key, raw in links), base=base, names=names, scope=scope)

    def line(n: int) -> int:
        at = front.find(links[n - 1][1])
        return front.count("\n", 0, at) + 1 if at >= 0 else 1

    for ref in out.found:
        ref.property, ref.text, ref.line = links[ref.line - 1][0], "", line(ref.line)
    for miss in [*out.missing, *out.by_alias]:
        miss.line = line(miss.line)
    return out


def stated(ref: Reference) -> str:
    """What the link of a reference is told apart by among its note's links (as
    ``StoredLink.match_text or description``): its text, or, written in a property, its
    description."""
    return ref.text or property_description(ref.property)


def property_description(key: str) -> str:
    return f"referenced in the {key} property"


def _mask(text: str, spans: list) -> str:
    """The text with each reference replaced by a neutral run of the same length, so that
    a title inside a link ("… investor update") states no relation and a path's dots end
    no sentence."""
    chars = list(text)
    for start, end, *_ in spans:
        chars[start:end] = "§" * (end - start)
    return "".join(chars)


def _sentence_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    left = 0
    for m in _SENT_END.finditer(text, 0, start):
        left = m.end()
    after = _SENT_END.search(text, end)
    return left, (after.end() if after else len(text))


def reference_link(ref: Reference, from_kind: str = "", to_kind: str = "",
                   link_types: LinkTypeTable | None = None) -> tuple[str, dict]:
    """(link type, link spec) for a reference: the relations its sentences state between
    the two pages (all in the description, the strongest one's type: GBrain keeps one
    edge per pair), else the sentence cascade of the vault's link types (``link_types``;
    the built-ins when not given). A reference written in a property states no relation:
    the property's name is the cascade's sentence (``team``, ``part_of``), and the
    description names it."""
    if ref.property:
        cue = re.sub(r"[_-]+", " ", ref.property)
        return link_type_for(cue, link_types), {"weight": PLAIN_WEIGHT, "description": property_description(ref.property)}
    stated: dict[str, tuple] = {}
    for sentence, at in [(ref.sentence, ref.at), *ref.more]:
        rel, from_is_subject = relation_in(sentence, from_kind, to_kind, at)
        if rel is not None:
            stated.setdefault(describe(rel, from_is_subject), (RELATIONS.index(rel), rel))
    if stated:
        ordered = sorted(stated.items(), key=lambda kv: kv[1][0])
        return ordered[0][1][1].link_type.value, {"weight": RELATION_WEIGHT, "match_text": ref.text,
                                                  "description": "; ".join(label for label, _ in ordered)}
    return link_type_for(ref.sentence, link_types), {"weight": PLAIN_WEIGHT, "match_text": ref.text,
                                          "description": "referenced in the text"}
