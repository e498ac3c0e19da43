"""References already in a note's text become links without any LLM (GBrain's auto-link,
§2.1): markdown links ``[text](path)``, ``[[wikilinks]]`` and bare slug references to
other notes. Code fences are ignored; one link per target per note; match_text is the
visible text. A reference to a note that does not exist is reported, never linked."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from ..errors import UriError
from ..uris import normalize_uri, uri_dir
from .rules import link_type_for

_FENCE = re.compile(r"```.*?```|~~~.*?~~~", re.S)
_MD_LINK = re.compile(r"\[([^\]\n]+)\]\(([^)\s]+)\)")
_WIKI = re.compile(r"\[\[([^\]|#\n]+)(?:#[^\]|\n]*)?(?:\|([^\]\n]+))?\]\]")
_SLUG = re.compile(r"(?<![\w/])((?:entities|preferences|reports|report_candidates|sources|events/\d{4}/\d{2}/\d{2})/[\w\-\u4e00-\u9fff]+)(?:\.md)?\b")


@dataclass
class Reference:
    target: str  # vault URI
    text: str  # what the reader sees (match_text)
    sentence: str


@dataclass
class AutoLinks:
    found: list[Reference] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # references to notes that do not exist


def _sentence_around(text: str, start: int) -> str:
    left = max(text.rfind(".", 0, start), text.rfind("\n", 0, start)) + 1
    right_candidates = [i for i in (text.find(".", start), text.find("\n", start)) if i >= 0]
    right = min(right_candidates) if right_candidates else len(text)
    return text[left:right]


def find_references(vault, from_uri: str, text: str) -> AutoLinks:
    out = AutoLinks()
    clean = _FENCE.sub(lambda m: " " * len(m.group(0)), text)
    catalog = vault.catalog()
    by_title = {e.title.lower(): u for u, e in catalog.items() if not e.error}
    seen: set[str] = set()

    def add(target: str | None, shown: str, raw: str, at: int) -> None:
        if target is None or target not in catalog or catalog[target].error:
            out.missing.append(raw)
            return
        if target == from_uri or target in seen:
            return
        seen.add(target)
        out.found.append(Reference(target, shown, _sentence_around(clean, at)))

    def as_uri(path: str) -> str | None:
        path = path.split("#", 1)[0]
        if re.match(r"^[a-z]+:", path):
            return None
        candidates = [path, str(PurePosixPath(uri_dir(from_uri)) / path)] if uri_dir(from_uri) else [path]
        for cand in candidates:
            for c in (cand, cand + ".md"):
                try:
                    norm = normalize_uri(str(PurePosixPath(c)))
                except UriError:
                    continue
                if norm in catalog:
                    return norm
        try:
            return normalize_uri(path if path.endswith(".md") else path + ".md")
        except UriError:
            return None

    for m in _MD_LINK.finditer(clean):
        if re.match(r"^[a-z]+://", m[2]) or m[2].startswith("mailto:"):
            continue  # a web link, not a note
        add(as_uri(m[2]), m[1], m[0], m.start())
    for m in _WIKI.finditer(clean):
        name = m[1].strip()
        target = by_title.get(name.lower()) or as_uri(name)
        add(target, (m[2] or name).strip(), m[0], m.start())
    for m in _SLUG.finditer(clean):
        add(as_uri(m[1]), m[1], m[0], m.start())
    return out


def typed(ref: Reference) -> str:
    return link_type_for(ref.sentence)
