"""What notes are called: titles, aliases (an entity's other names, the path a file was
imported from) and file names, each mapped to the notes it names. Ingest resolves
references with it; search finds the notes a question names.

Built from the catalog alone (no note is read) and kept per open vault until the catalog
changes."""

from __future__ import annotations

import difflib
import posixpath
import re
from collections import defaultdict
from dataclasses import dataclass

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_EXT = re.compile(r"\.(?:md|markdown|mdown|txt|text)$", re.I)
NEAR = 0.88  # difflib ratio for a near match of a name in a question ("Acme Robotic" ~ "Acme Robotics")


def words(text: str) -> list[str]:
    """A name's words, lowercased, possessives dropped: "Acme's" → ["acme"]."""
    return [w for w in _WORD.findall(re.sub(r"['’]s\b", "", text.lower()))]


def path_key(path: str) -> str:
    """An import path as a lookup key: POSIX, no leading slash, no extension, lowercased."""
    return _EXT.sub("", posixpath.normpath(path.strip().lstrip("/"))).lower()


@dataclass(frozen=True)
class Named:
    uri: str
    start: int  # word span of the question that names it
    end: int
    exact: bool


class NameIndex:
    def __init__(self, catalog: dict):
        self.titles: dict[str, set[str]] = defaultdict(set)  # " ".join(words(title)) -> uris
        self.paths: dict[str, str] = {}  # path_key(alias or uri) -> uri
        self.stems: dict[str, set[str]] = defaultdict(set)  # file name without extension -> uris
        self.kinds: dict[str, str] = {}
        self.folders: set[str] = set()  # first path segments of notes and aliases
        self.by_first: dict[str, set[str]] = defaultdict(set)  # first word -> names (for near matches)
        for uri, entry in catalog.items():
            if entry.error:
                continue
            self.kinds[uri] = entry.kind
            self.paths.setdefault(path_key(uri), uri)
            self.stems[path_key(uri).rsplit("/", 1)[-1]].add(uri)
            if "/" in uri:
                self.folders.add(uri.split("/", 1)[0].lower())
            for name in [entry.title, *entry.aliases]:
                key = " ".join(words(name))
                if key:
                    self.titles[key].add(uri)
                    self.by_first[key.split()[0]].add(key)
                if "/" in name or _EXT.search(name):  # an import path
                    self.paths[path_key(name)] = uri
                    self.stems[path_key(name).rsplit("/", 1)[-1]].add(uri)
                    if "/" in name:
                        self.folders.add(path_key(name).split("/", 1)[0])

    @classmethod
    def for_vault(cls, vault) -> "NameIndex":
        catalog = vault.catalog()
        cached = vault.cache.get("names")
        if cached is not None and cached[0] is catalog:
            return cached[1]
        index = cls(catalog)
        vault.cache["names"] = (catalog, index)
        return index

    def kind(self, uri: str) -> str:
        return self.kinds.get(uri, "")

    def by_path(self, path: str) -> str | None:
        return self.paths.get(path_key(path))

    def by_name(self, name: str) -> str | None:
        """A wikilink's target: a title or alias, an import path, or a file name (when only
        one note has it)."""
        uris = self.titles.get(" ".join(words(name)))
        if uris and len(uris) == 1:
            return next(iter(uris))
        if uri := self.by_path(name):
            return uri
        stems = self.stems.get(path_key(name).rsplit("/", 1)[-1])
        if stems and len(stems) == 1:
            return next(iter(stems))
        return sorted(uris)[0] if uris else None

    def named_in(self, question: str, min_words: int = 2) -> list[Named]:
        """The notes a question names by title or alias: the longest spans first, exactly or
        nearly (one typo, a missing plural). A one-word name counts only when the question
        writes it capitalised, as a name ("Atlas", not "atlas" the word)."""
        raw = _WORD.findall(re.sub(r"['’]s\b", "", question))
        qw = [w.lower() for w in raw]
        out: list[Named] = []
        taken = [False] * len(qw)
        for n in range(min(8, len(qw)), 0, -1):
            for i in range(len(qw) - n + 1):
                if any(taken[i : i + n]):
                    continue
                if n < min_words and not (raw[i][:1].isupper() and i > 0 and len(raw[i]) > 2):
                    continue
                span = " ".join(qw[i : i + n])
                uris, exact = self.titles.get(span), True
                if not uris and n >= 2:
                    close = difflib.get_close_matches(span, self.by_first.get(qw[i], ()), n=1, cutoff=NEAR)
                    uris, exact = (self.titles[close[0]], False) if close else (None, False)
                if uris:
                    out += [Named(u, i, i + n, exact) for u in sorted(uris)]
                    taken[i : i + n] = [True] * n
        return out
