"""What notes are called: titles, aliases (an entity's other names, the path a file was
imported from) and file names, each mapped to the notes it names. Ingest resolves
references with it; search finds the notes a question names.

Built from the catalog alone (no note is read) and kept per open vault until the catalog
changes."""

from __future__ import annotations

import difflib
import posixpath
import re
import threading
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rapidfuzz import fuzz

from ..model.text import words

if TYPE_CHECKING:
    from ..storage.catalog import Catalog
    from ..storage.vault import Vault

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
TEXT_SUFFIXES = (".md", ".markdown", ".mdown", ".txt", ".text")  # what ingest takes from a folder
_EXT = re.compile(r"\.(?:" + "|".join(s[1:] for s in TEXT_SUFFIXES) + r")$", re.I)
NEAR = 0.88  # difflib ratio for a near match of a name in a question ("Acme Robotic" ~ "Acme Robotics")
_NEAR_BOUND = NEAR * 100 - 1e-6  # rapidfuzz's ratio (percent) that every near match reaches
# A near match is looked for among the names that begin with the span's first word, when
# at most this many do: a word that begins thousands of names ("Meeting …") says too
# little to guess a misspelt one by, and reading them all made a search at 100k notes,
# 40k of them "Meeting …", take ~50 ms (docs/DESIGN.md, "Caches and tuning").
NEAR_AMONG = 1_000


def path_key(path: str) -> str:
    """An import path as a lookup key: POSIX, no leading slash, no extension, lowercased,
    in one Unicode form (a Mac writes "é" of a file name as "e" and an accent)."""
    return _EXT.sub("", posixpath.normpath(unicodedata.normalize("NFC", path).strip().lstrip("/"))).lower()


@dataclass(frozen=True)
class Named:
    uri: str
    start: int  # word span of the question that names it
    end: int
    exact: bool


@dataclass
class Scope:
    """Where a reference is read: the import it comes with — the pages of its folder
    (import paths as ``path_key``s, to their notes) and every page of the batch — and the
    referring page's folder in the imported tree. Those come first, in that order."""
    paths: dict[str, str] = field(default_factory=dict)
    batch: set[str] = field(default_factory=set)
    folder: str = ""
    attachments: set[str] = field(default_factory=set)  # the import's other files (images, PDFs…), lowercased paths
    stems: dict[str, list[str]] = field(default_factory=dict)  # file name -> its keys in ``paths`` (``file_names``)


def file_names(keys: Iterable[str]) -> dict[str, list[str]]:
    """A Scope's ``stems``: each path key under its file name."""
    out: dict[str, list[str]] = defaultdict(list)
    for key in keys:
        out[key.rsplit("/", 1)[-1]].append(key)
    return dict(out)


def _shortest(keys: list[str], folder: str) -> list[str]:
    """Obsidian's choice among files of one name: the one in the referring page's folder,
    else the one with the shortest path (several equally short: all of them)."""
    here = [k for k in keys if posixpath.dirname(k) == folder]
    if here:
        return here
    depth = min(k.count("/") for k in keys)
    return [k for k in keys if k.count("/") == depth]


@dataclass(frozen=True)
class Lookup:
    """What a reference resolves to: one note, or nothing — and then, when several notes
    answer to it and nothing tells them apart, the candidates (an ambiguous reference,
    reported, never guessed)."""
    uri: str | None = None
    candidates: tuple[str, ...] = ()

    @property
    def ambiguous(self) -> bool:
        return self.uri is None and len(self.candidates) > 1


class _Held:
    """The name index kept with a vault."""

    def __init__(self, _vault: Vault) -> None:
        self.names: NameIndex | None = None


class _Paths:
    """The path half of a NameIndex."""

    def __init__(self, catalog: Mapping):
        self.paths: dict[str, set[str]] = defaultdict(set)
        self.own: dict[str, str] = {}
        self.stems: dict[str, set[str]] = defaultdict(set)
        self.homes: dict[str, set[str]] = defaultdict(set)
        self.kinds: dict[str, str] = {}
        self.folders: set[str] = set()
        for uri, entry in catalog.items():
            self.kinds[uri] = entry.kind
            self.own.setdefault(path_key(uri), uri)
            self.stems[path_key(uri).rsplit("/", 1)[-1]].add(uri)
            if "/" in uri:
                self.folders.add(uri.split("/", 1)[0].lower())
            for name in [entry.title, *entry.aliases]:
                if "/" in name or _EXT.search(name):  # an import path
                    key = path_key(name)
                    self.paths[key].add(uri)
                    self.stems[key.rsplit("/", 1)[-1]].add(uri)
                    self.homes[uri].add(posixpath.dirname(key))
                    if "/" in name:
                        self.folders.add(key.split("/", 1)[0])


class NameIndex:
    """What notes are called: their names (titles and aliases, what a question names) are
    looked up in the catalog's names table; their paths (import paths, file names,
    folders: what ingest resolves references with) are built from every entry on first
    use (a large part of a second at 100k notes: a search never needs them). Kept with
    the vault until the change feed says a note changed (``for_vault``)."""

    def __init__(self, catalog: Catalog):
        self.catalog = catalog
        self._lock = threading.Lock()
        self._paths: _Paths | None = None
        self.mark: tuple[str, int] | None = None

    def _named(self, key: str) -> set[str]:
        return self.catalog.named([key]).get(key, set())

    def _path_tables(self) -> _Paths:
        if self._paths is None:
            with self._lock:
                if self._paths is None:
                    self._paths = _Paths({e.uri: e for e in self.catalog.all()})
        return self._paths

    @property
    def paths(self) -> dict[str, set[str]]:
        """path_key(import path) -> uris."""
        return self._path_tables().paths

    @property
    def own(self) -> dict[str, str]:
        """path_key(uri) -> uri."""
        return self._path_tables().own

    @property
    def stems(self) -> dict[str, set[str]]:
        """A file name without its extension -> uris."""
        return self._path_tables().stems

    @property
    def homes(self) -> dict[str, set[str]]:
        """uri -> the folders of its import paths."""
        return self._path_tables().homes

    @property
    def kinds(self) -> dict[str, str]:
        return self._path_tables().kinds

    @property
    def folders(self) -> set[str]:
        """First path segments of notes and aliases."""
        return self._path_tables().folders

    @classmethod
    def for_vault(cls, vault: Vault) -> NameIndex:
        """The vault's name index, made again once a note changed (the store's feed)."""
        held = vault.shared(_Held, _Held)
        since = vault.store.since(held.names.mark if held.names is not None else None)
        if held.names is None or since.any("note"):
            held.names = cls(vault.catalog)
            held.names.mark = since.mark
        return held.names

    def kind(self, uri: str) -> str:
        return self.kinds.get(uri, "")

    def _pick(self, uris: set[str] | None, scope: Scope | None) -> Lookup:
        """One of ``uris``: the only one, else the only one imported with the referring page
        (from its folder given, then its batch), else the only one in the referring page's
        folder; otherwise ambiguous."""
        if not uris:
            return Lookup()
        if len(uris) == 1:
            return Lookup(next(iter(uris)))
        narrowed = set(uris)
        if scope is not None:
            mine = set(scope.paths.values())
            for keep in (lambda u: u in mine, lambda u: u in scope.batch, lambda u: scope.folder in self.homes.get(u, ())):
                subset = {u for u in narrowed if keep(u)}
                if len(subset) == 1:
                    return Lookup(next(iter(subset)))
                narrowed = subset or narrowed
        return Lookup(None, tuple(sorted(narrowed)))

    def lookup_path(self, path: str, scope: Scope | None = None) -> Lookup:
        """An import path (or a note's own vault path): the batch's own page at that path
        first, then a note's path, then the paths other imports came from."""
        key = path_key(path)
        if scope is not None and key in scope.paths:
            return Lookup(scope.paths[key])
        if key in self.own:
            return Lookup(self.own[key])
        return self._pick(self.paths.get(key), scope)

    def by_path(self, path: str) -> str | None:
        return self.lookup_path(path).uri

    def lookup_name(self, name: str, scope: Scope | None = None) -> Lookup:
        """A wikilink's target: a title or alias, an import path, or a file name. Several
        notes with that name: the batch's, else the one in the referring page's folder,
        else the reference is ambiguous."""
        titled = self._pick(self._named(" ".join(words(name))), scope)
        if titled.uri:
            return titled
        by_path = self.lookup_path(name, scope)
        if by_path.uri:
            return by_path
        # A target with a folder names that folder: "Publish/Security" is the end of a path
        # (".../Publish/Security"), never Sync's "Security" (Obsidian leaves it unresolved).
        key = path_key(name)
        last = key.rsplit("/", 1)[-1]
        found = self.stems.get(last)
        if found and "/" in key:
            found = {u for u in found if any(p == key or p.endswith("/" + key) for p in
                                             (path_key(u), *(f"{h}/{last}" for h in self.homes.get(u, ()))))}
        stem = self._pick(found, scope)
        if stem.uri and not titled.ambiguous:
            return stem
        return titled if titled.ambiguous else (by_path if by_path.ambiguous else stem)

    def lookup_file(self, target: str, scope: Scope) -> Lookup:
        """A link target read as Obsidian reads it, among the pages of the referring page's
        import (``scope.paths``): a relative path (``./x``, ``../x``) from the page's folder,
        then a path from the import's root, or the end of one (``Folder/Note``), then a file
        name (the page's folder first, else the shortest path). Titles and aliases are not
        file names: the caller tries them only when this finds nothing."""
        raw = target.strip()
        if raw.startswith(("./", "../")):
            key = path_key(posixpath.join(scope.folder, raw))
            return Lookup(scope.paths[key]) if key in scope.paths else Lookup()
        key = path_key(raw)
        if key in scope.paths:
            return Lookup(scope.paths[key])
        tail = "/" + key
        keys = [k for k in scope.stems.get(key.rsplit("/", 1)[-1], ()) if k.endswith(tail)]
        if not keys:
            return Lookup()
        best = _shortest(keys, scope.folder)
        if len(best) == 1:
            return Lookup(scope.paths[best[0]])
        return Lookup(None, tuple(sorted(scope.paths[k] for k in best)))

    def by_name(self, name: str) -> str | None:
        return self.lookup_name(name).uri

    def named_in(self, question: str, min_words: int = 2) -> list[Named]:
        """The notes a question names by title or alias: the longest spans first, exactly or
        nearly (one typo, a missing plural). A one-word name counts only when the question
        writes it capitalised, as a name ("Atlas", not "atlas" the word), or is nothing but
        the name (a search for "money" asks for the note called Money)."""
        raw = _WORD.findall(re.sub(r"['’]s\b", "", question))
        qw = [w.lower() for w in raw]
        spans = {" ".join(qw[i : i + n]) for n in range(1, min(8, len(qw)) + 1) for i in range(len(qw) - n + 1)}
        # The spans' names and every name a span of two or more words may nearly be (one
        # that starts with its first word), in one read of the catalog's names.
        found = self.catalog.named(spans, qw[:-1], NEAR_AMONG)
        firsts: dict[str, list[str]] = {}
        for key in found:
            firsts.setdefault(key.split(" ", 1)[0], []).append(key)

        def starting(word: str) -> list[str]:
            return firsts.get(word, [])

        def named(key: str) -> set[str]:
            return found.get(key, set())
        out: list[Named] = []
        taken = [False] * len(qw)
        for n in range(min(8, len(qw)), 0, -1):
            for i in range(len(qw) - n + 1):
                if any(taken[i : i + n]):
                    continue
                if n < min_words and n < len(qw) and not (raw[i][:1].isupper() and i > 0 and len(raw[i]) > 2):
                    continue
                span = " ".join(qw[i : i + n])
                uris, exact = named(span), True
                if not uris and n >= 2:
                    # Not near: a name whose length is too far off (difflib's own first test),
                    # or whose longest common subsequence with the span is too short (difflib's
                    # matches are a common subsequence, so its ratio is at most rapidfuzz's,
                    # which C computes in a fraction of the time).
                    near = [c for c in starting(qw[i]) if 2.0 * min(len(c), len(span)) / (len(c) + len(span)) >= NEAR
                            and fuzz.ratio(span, c, score_cutoff=_NEAR_BOUND)]
                    close = difflib.get_close_matches(span, near, n=1, cutoff=NEAR) if near else []
                    uris, exact = (named(close[0]), False) if close else (set(), False)
                if uris:
                    out += [Named(u, i, i + n, exact) for u in sorted(uris)]
                    taken[i : i + n] = [True] * n
        return out
