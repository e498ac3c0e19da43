"""The catalog: which notes exist, their type, title, timestamps and file identity (mtime,
size, content hash), and what each is called. Derived state: the store's ``notes`` and
``names`` tables, one row a note file (docs/DESIGN.md, "The catalog").

``sync`` walks the vault (a ``stat`` per file), reads and parses only the files whose
mtime or size changed (and those that did not parse last time), and writes the rows
that changed in one transaction, naming them in the change feed. Every other question is
a query: a process keeps in memory only what the walk compares (each note's mtime and
size) and what a search asks of every note it scores (does it parse, its type, is it
superseded)."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from ..errors import MemlinkError
from ..model.blocks import strip_links_bytes
from ..model.files import NOTE_BYTES, read_bounded
from ..model.links import SIDECAR
from ..model.notes import Note, is_pending, parse_note
from ..model.schema import TypeRegistry
from ..model.text import words
from ..model.uris import PathResolver
from .atomic import remove_stale_temp
from .store import KEY_ID, KEY_IDS, Store, Writer
from .walk import vault_files

# A note's row is named by its path's number (the store's ``keys``); what _entry takes:
_SELECT = ("SELECT k.key, n.memory_type, n.title, n.created_at, n.updated_at, n.mtime_ns, n.size, n.sha, n.error, "
           "n.superseded, n.aliases, n.kind, n.pending FROM notes n JOIN keys k ON k.id = n.id")
_UPSERT = "INSERT OR REPLACE INTO notes VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"


@dataclass(slots=True)
class CatalogEntry:
    uri: str
    memory_type: str
    title: str
    created_at: str
    updated_at: str
    mtime_ns: int
    size: int
    sha: str = ""  # content hash: the search index compares it to what it has indexed
    error: str | None = None
    superseded: bool = False  # a review kept another note over this one (valid_until set)
    # What other notes and questions may call this note by (engine.retrieve.names): its aliases
    # (other names, the path a file was imported from) and kind (person, company…).
    aliases: list = field(default_factory=list)
    kind: str = ""
    pending: bool = False  # a note whose extraction has not finished (engine.model.notes.is_pending)
    superseded_in_part: bool = False  # a review kept another note over a claim of it (superseded_claims)


@dataclass(frozen=True)
class Synced:
    """What one sync found: the notes added, changed or removed (by content, parse error
    or type), and the link sidecars the walk listed."""

    changed: frozenset[str]
    removed: frozenset[str]
    sidecars: frozenset[str]


def read_file(resolve: PathResolver, uri: str) -> bytes:
    """A vault file's bytes, opened in its folder as the resolver checked it without
    following a symlinked file (one that is goes through the resolver, which checks where
    it leads): a search reads a dozen notes for its snippets, a first sync every one. A
    regular file of at most NOTE_BYTES only (engine.model.files: FileRefused otherwise)."""
    folder, _, name = uri.rpartition("/")
    try:
        return read_bounded(os.path.join(resolve.folder(folder), name), NOTE_BYTES, follow=False)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        return read_bounded(resolve(uri), NOTE_BYTES)


def content_hash(data: bytes) -> str:
    """A note file's content hash, its generated Links block left out (engine.model.blocks): a
    note whose only change is that block is not re-indexed or re-checked."""
    return hashlib.sha256(strip_links_bytes(data)).hexdigest()[:20]


def _obsidian_aliases(value: object) -> list[str]:
    """The other names at the top of a note's frontmatter, where Obsidian reads them (an
    imported page's)."""
    return [v for v in value if isinstance(v, str) and v.strip()] if isinstance(value, list) else []


def _why(uri: str, exc: Exception) -> str:
    """A note's parse error, naming it."""
    if isinstance(exc, UnicodeDecodeError):
        return f"{uri}: not UTF-8 text ({exc.reason} at byte {exc.start})"
    text = str(exc)
    return text if text.startswith(f"{uri}:") else f"{uri}: {text}"


SUPERSEDED, IN_PART = 1, 2  # the notes table's ``superseded``: the whole note, or a claim of it (0: neither)


def _entry(r: tuple) -> CatalogEntry:
    return CatalogEntry(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9] == SUPERSEDED,
                        json.loads(r[10]) if r[10] else [], r[11], bool(r[12]), r[9] == IN_PART)


def _row(e: CatalogEntry, ids: dict[str, int]) -> tuple:
    return (ids[e.uri], e.memory_type, e.title, e.created_at, e.updated_at, e.mtime_ns, e.size, e.sha, e.error,
            SUPERSEDED if e.superseded else IN_PART if e.superseded_in_part else 0,
            json.dumps(e.aliases, ensure_ascii=False) if e.aliases else "", e.kind,
            1 if e.pending else 0)


def _names(e: CatalogEntry) -> list[str]:
    """What a note is called: each name's words, lowercased, joined by one space."""
    if e.error:
        return []
    return sorted({key for name in [e.title, *e.aliases] if (key := " ".join(words(name)))})


@dataclass(frozen=True)
class _Known:
    """What a process keeps of the catalog: each note file's (mtime, size) as recorded,
    the type of each note that parses, and the superseded ones."""

    files: dict[str, tuple[int, int]]
    good: dict[str, str]
    superseded: frozenset[str]
    generation: str
    folders: frozenset[str] | None = None  # (made when first asked: Catalog.folders)


class Catalog:
    def __init__(self, resolve: PathResolver, store: Store, types: TypeRegistry,
                 on_walk: Callable[[Synced], object] | None = None) -> None:
        self.resolve = resolve
        self.root = resolve.root
        self.store = store
        self.types = types
        self.read_only = False  # a dry run: no temp file is removed
        self.on_walk = on_walk  # hears what each sync saw (the link index: the sidecars it listed)
        self._lock = threading.RLock()  # the app syncs from workers and the UI thread
        self._known: _Known | None = None
        self._skipped: dict[str, str] = {}  # what the last walk did not read (engine.storage.walk)

    # -- bringing it in step with the files ------------------------------------------------------
    def sync(self, bodies: dict[str, tuple[str, str]] | None = None) -> Synced:
        """Bring the catalog in line with the files (notes edited in vim or Obsidian, added
        or deleted). ``bodies``, when given, receives ``uri -> (sha, text)`` of each note
        read here (the search index indexes them without reading them again)."""
        with self._lock:
            known = self._known if self._known is not None and self._known.generation == self.store.generation \
                else self._from_store()
            self._known = known
            now = time.time()
            files: dict[str, tuple[int, int]] = {}
            sidecars = []
            skipped: dict[str, str] = {}
            unreadable: set[str] = set()
            for uri, mtime, size in vault_files(str(self.root), SIDECAR, skipped, unreadable):
                if uri.endswith(".md"):
                    files[uri] = (mtime, size)
                elif uri.endswith(SIDECAR):
                    sidecars.append(uri)
                elif not self.read_only:
                    remove_stale_temp(self.root / uri, mtime, now)
            failed = known.files.keys() - known.good.keys()  # read again: the reason may have gone
            if files == known.files:  # (most walks: nothing changed, told in one comparison)
                todo, gone = sorted(failed), []
            else:
                todo = [u for u, stamp in files.items() if known.files.get(u) != stamp or u in failed]
                # (A note in a folder that cannot be listed is not known to be gone: it stays as last read.)
                hidden = tuple(f"{folder}/" for folder in unreadable)
                gone = [u for u in known.files if u not in files and not (hidden and u.startswith(hidden))]
            fresh = [self._derive(uri, *files[uri], bodies=bodies) for uri in todo]
            was = {r[0]: r[1:] for r in self.store.rows_in(
                "SELECT k.key, n.sha, n.error, n.memory_type FROM notes n JOIN keys k ON k.id = n.id WHERE n.id IN " + KEY_IDS,
                todo)}
            changed = {e.uri for e in fresh if was.get(e.uri) != (e.sha, e.error, e.memory_type)}
            self._write(fresh, gone)
            self._skipped = skipped
            synced = Synced(frozenset(changed), frozenset(gone), frozenset(sidecars))
        if self.on_walk is not None:
            self.on_walk(synced)
        return synced

    def folders(self) -> frozenset[str]:
        """The folders that hold note files (the vault's root is ""; a folder emptied since
        this process first asked may still be listed)."""
        known = self._loaded()
        if known.folders is None:
            object.__setattr__(known, "folders", frozenset(u.rpartition("/")[0] for u in known.files) | {""})
        assert known.folders is not None
        return known.folders

    def _loaded(self) -> _Known:
        """What this process knows: a process's first question walks the vault (``sync``),
        and so does the first after the store was made afresh."""
        known = self._known
        if known is not None and known.generation == self.store.generation:
            return known
        with self._lock:
            if self._known is None or self._known.generation != self.store.generation:
                self.sync()
            assert self._known is not None
            return self._known

    def _from_store(self) -> _Known:
        files: dict[str, tuple[int, int]] = {}
        good: dict[str, str] = {}
        superseded: set[str] = set()
        generation = self.store.generation
        for uri, mtime, size, memory_type, error, gone in self.store.rows(
                "SELECT k.key, n.mtime_ns, n.size, n.memory_type, n.error IS NOT NULL, n.superseded "
                "FROM notes n JOIN keys k ON k.id = n.id"):
            files[uri] = (mtime, size)
            if not error:
                good[uri] = memory_type
            if gone == SUPERSEDED:
                superseded.add(uri)
        return _Known(files, good, frozenset(superseded), generation)

    def stored(self) -> list[CatalogEntry]:
        """The notes as the catalog last saw them, without looking at the files: enough to
        draw a first screen at once (a sync then brings it up to date)."""
        return [_entry(r) for r in self.store.rows(f"{_SELECT} WHERE n.error IS NULL ORDER BY k.key")]

    def record(self, entries: Iterable[CatalogEntry], gone: Iterable[str]) -> None:
        """Rows for notes a unit of work wrote or deleted (no walk)."""
        with self._lock:
            self._loaded()
            self._write(list(entries), list(gone))

    def _write(self, entries: list[CatalogEntry], gone: list[str]) -> None:
        if not entries and not gone:
            return
        known = self._known
        assert known is not None

        def work(w: Writer) -> None:
            uris = sorted([*gone, *(e.uri for e in entries)])
            ids = w.ids(uris)  # (numbered in path order, the first time: a report lists notes by number)
            # (only a note links still name: a note memlink deleted took its links along, and is sought by none)
            w.executemany("INSERT OR REPLACE INTO gone SELECT id, sha FROM notes WHERE id = ?1 AND error IS NULL AND ("
                          "EXISTS (SELECT 1 FROM links WHERE from_id = ?1 AND side = 0) OR "
                          "EXISTS (SELECT 1 FROM links WHERE to_id = ?1 AND side = 1))", [(ids[u],) for u in gone])
            w.executemany("DELETE FROM notes WHERE id = ?", [(ids[u],) for u in gone])
            w.executemany("DELETE FROM gone WHERE id = ?", [(ids[e.uri],) for e in entries])
            w.executemany(_UPSERT, [_row(e, ids) for e in entries])
            w.executemany("DELETE FROM names WHERE uri = ?", [(ids[u],) for u in uris])
            w.executemany("INSERT INTO names VALUES (?, ?)", [(n, ids[e.uri]) for e in entries for n in _names(e)])
            w.changed("note", uris)

        # A write that cannot be made now (a full disk, a lock held too long) changes
        # nothing here either: the next sync reads those files again.
        if not self.store.try_write("the catalog", work):
            return
        if not gone and all(e.uri in known.files and e.superseded == (e.uri in known.superseded)
                            and known.good.get(e.uri) == (None if e.error else e.memory_type) for e in entries):
            # Notes rewritten as the kind they were (a link's two notes): their stamps change
            # in place, as a reader on another thread may see them change; no copy of every
            # note's row (7 ms of a link write at 100k notes).
            for e in entries:
                known.files[e.uri] = (e.mtime_ns, e.size)
            return
        # Copied, then swapped in: a reader on another thread never sees a dict change size.
        files, good, superseded = dict(known.files), dict(known.good), set(known.superseded)
        folders = None if known.folders is None else known.folders | {e.uri.rpartition("/")[0] for e in entries}
        for uri in gone:
            files.pop(uri, None)
            good.pop(uri, None)
            superseded.discard(uri)
        for e in entries:
            files[e.uri] = (e.mtime_ns, e.size)
            good.pop(e.uri, None)
            superseded.discard(e.uri)
            if not e.error:
                good[e.uri] = e.memory_type
            if e.superseded:
                superseded.add(e.uri)
        self._known = _Known(files, good, frozenset(superseded), known.generation, folders)

    def _derive(self, uri: str, mtime_ns: int, size: int, *, bodies: dict[str, tuple[str, str]] | None = None,
                data: bytes | None = None) -> CatalogEntry:
        """A note's entry from its file (as the walk listed it: opened without following a
        symlink; a symlinked file goes through the resolver, which checks where it leads)."""
        try:
            if data is None:
                data = self._read(uri)
            note = parse_note(data.decode("utf-8"), uri, self.types)
        except (MemlinkError, ValueError, RecursionError) as exc:  # (ValueError: UnicodeDecodeError too)
            return CatalogEntry(uri, "", uri, "", "", mtime_ns, size, error=_why(uri, exc))
        except OSError as exc:
            return CatalogEntry(uri, "", uri, "", "", mtime_ns, size, error=f"{uri}: cannot be read ({exc.strerror or exc})")
        sha = content_hash(data)
        if bodies is not None:
            bodies[uri] = (sha, note.text)
        return self.entry_of(note, mtime_ns, size, sha)

    def entry_of(self, note: Note, mtime_ns: int, size: int, sha: str) -> CatalogEntry:
        """The entry of a parsed note whose file has this stamp and hash."""
        aliases = note.fields.get("aliases")
        aliases = [*(aliases if isinstance(aliases, list) else []), *_obsidian_aliases(note.extra.get("aliases"))]
        kind = note.fields.get("kind")
        return CatalogEntry(note.uri, note.memory_type, note.title(self.types.get(note.memory_type)), note.created_at,
                            note.updated_at, mtime_ns, size, sha, superseded=(whole := "valid_until" in note.extra),
                            superseded_in_part=not whole and bool(note.superseded(whole=False)),
                            aliases=[str(a) for a in aliases],
                            kind=str(kind).strip().lower() if isinstance(kind, str) else "", pending=is_pending(note))

    def entry_now(self, uri: str) -> CatalogEntry:
        """The entry of a note as its file is now."""
        data = self._read(uri)
        st = self.resolve(uri).stat()
        return self._derive(uri, st.st_mtime_ns, st.st_size, data=data)

    def _read(self, uri: str) -> bytes:
        return read_file(self.resolve, uri)

    # -- questions ------------------------------------------------------------------------------
    def __contains__(self, uri: object) -> bool:
        """A note that exists and parses."""
        return uri in self._loaded().good

    def __len__(self) -> int:
        return len(self._loaded().good)

    def uris(self) -> list[str]:
        """Every note that parses."""
        return list(self._loaded().good)

    def memory_type(self, uri: str) -> str | None:
        return self._loaded().good.get(uri)

    def memory_types(self) -> Mapping[str, str]:
        """Each note that parses with its memory type, as this process knows them now (a
        snapshot: a later write makes a new one). A search asks it of every note it scores."""
        return self._loaded().good

    def type_counts(self) -> dict[str, int]:
        """How many notes that parse there are of each memory type."""
        return dict(Counter(self._loaded().good.values()))

    def superseded(self) -> frozenset[str]:
        """The notes a review superseded (they rank lower in search)."""
        return self._loaded().superseded

    def get(self, uri: str) -> CatalogEntry | None:
        """The entry of a note that exists and parses (None otherwise)."""
        return self.entries([uri]).get(uri)

    def entries(self, uris: Iterable[str]) -> dict[str, CatalogEntry]:
        """The entries of those of ``uris`` that exist and parse."""
        good = self._loaded().good
        wanted = [u for u in dict.fromkeys(uris) if u in good]
        rows = self.store.rows_in(f"{_SELECT} WHERE n.id IN {KEY_IDS}", wanted)
        return {r[0]: _entry(r) for r in rows if not r[8]}

    def all(self, memory_type: str | None = None, *, pending: bool = False) -> list[CatalogEntry]:
        """Every note that parses (of one type; only those whose extraction has not
        finished, with ``pending``), by uri."""
        good = self._loaded().good
        where = "n.error IS NULL" + (" AND n.memory_type = ?" if memory_type is not None else "") + \
            (" AND n.pending = 1" if pending else "")
        rows = self.store.rows(f"{_SELECT} WHERE {where} ORDER BY k.key", () if memory_type is None else (memory_type,))
        return [_entry(r) for r in rows if r[0] in good]

    def titles(self, memory_type: str) -> list[tuple[str, str]]:
        """(uri, title) of every note of one type that parses, by uri: what a name lookup
        over 30k entities needs, without making their entries."""
        good = self._loaded().good
        return [(uri, title) for uri, title in self.store.rows(
            "SELECT k.key, n.title FROM notes n JOIN keys k ON k.id = n.id WHERE n.error IS NULL AND n.memory_type = ? "
            "ORDER BY k.key", (memory_type,)) if uri in good]

    def skipped(self) -> dict[str, str]:
        """Files with a note's or sidecar's name that the last walk did not read (not a
        regular file, a name that is not UTF-8): printable path -> why."""
        self._loaded()
        return dict(self._skipped)

    def errors(self) -> dict[str, str]:
        """Note files that do not parse, with why."""
        self._loaded()
        return dict(self.store.rows("SELECT k.key, n.error FROM notes n JOIN keys k ON k.id = n.id "
                                    "WHERE n.error IS NOT NULL ORDER BY k.key"))

    def shas(self) -> dict[str, str]:
        """uri -> content hash of every note that parses."""
        rows = self.store.rows("SELECT k.key, n.sha FROM notes n JOIN keys k ON k.id = n.id WHERE n.error IS NULL")
        good = self._loaded().good
        return {u: sha for u, sha in rows if u in good}

    def last_sha(self, uri: str) -> str | None:
        """The content hash the note at ``uri`` had when its file went (None: it is there,
        or it never parsed): where it went, moved by hand, is the note with that hash."""
        if uri in self._loaded().files:
            return None
        row = self.store.row(f"SELECT sha FROM gone WHERE id = {KEY_ID}", (uri,))
        return row[0] if row else None

    def named(self, keys: Iterable[str], firsts: Iterable[str] = (), most: int = 0) -> dict[str, set[str]]:
        """The notes called each of ``keys`` (a name's words, lowercased, joined by one
        space), and those called a name of two or more words whose first word is one of
        ``firsts`` (when at most ``most`` names begin with it), by name."""
        out: dict[str, set[str]] = {}
        good = self._loaded().good
        rows = self.store.rows_in("SELECT n.key, k.key FROM names n JOIN keys k ON k.id = n.uri WHERE n.key IN ({})",
                                  sorted(set(keys)))
        if firsts := sorted(set(firsts)):
            begins = "n.key >= f.value || ' ' AND n.key < f.value || '!'"  # (such a name sorts between the two)
            few = [first for first, many in self.store.rows(
                f"SELECT f.value, (SELECT count(*) FROM (SELECT 1 FROM names n WHERE {begins} LIMIT ?)) FROM json_each(?) f",
                (most + 1, json.dumps(firsts, ensure_ascii=False))) if many <= most]
            if few:
                rows += self.store.rows(f"SELECT n.key, k.key FROM json_each(?) f CROSS JOIN names n ON {begins} "
                                        "JOIN keys k ON k.id = n.uri", (json.dumps(few, ensure_ascii=False),))
        for key, uri in rows:
            if uri in good:
                out.setdefault(key, set()).add(uri)
        return out


__all__ = ["Catalog", "CatalogEntry", "Synced", "content_hash", "read_file"]
