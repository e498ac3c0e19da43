"""The notes' search index (vectors + keywords) and its sync with the catalog.

Its files are in `.memlink/index/` (tantivy's `notes/`, the hnswlib snapshot); what it
holds is in the store: each note's content hash as indexed (``indexed``, space "notes"),
its vectors' labels, its fingerprint. Sync compares the catalog's hashes with those in
SQL and re-indexes only what differs; another fingerprint (embedding model, dimensions,
chunking, tokenizer, what the keyword text holds) means a rebuild. Every step is
idempotent, so a crash at any point is repaired by the next sync."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..errors import DiskFull, MemlinkError
from ..model.text import CHUNK_WORDS, chunk_text, shown_text
from ..storage.atomic import full_disk_cause
from ..storage.store import KEY_ID, KEY_IDS, StoreBusy, Writer
from .embed import Embedder, load_embedder, model_for, query_vector
from .keywords import KeywordIndex
from .vectors import VectorIndex

if TYPE_CHECKING:
    from ..storage.vault import Vault

log = logging.getLogger(__name__)
# Notes embedded and added to the vectors at a time: hnswlib starts its threads per call,
# and 2048 a call builds 100k notes' vectors in ~60% of the time 256 a call takes.
BATCH = 2048
SPACE = "notes"
_KEYS = "SELECT k.key FROM indexed i JOIN keys k ON k.id = i.key"  # the notes indexed (add a WHERE)
# One text field: a note's title is its text's first line, so a title word counts once, as
# a word of the note. (A title field of its own, however weighted, let a page titled
# "Settings" outrank the page holding every word of "Global settings": docs/DESIGN.md,
# "Search".)
FIELDS = ("text",)

Progress = Callable[[int, int], None]


def keyword_doc(title: str, body: str) -> dict[str, str]:
    """What the keyword index holds of a note: its title, then its text as a reader sees
    it (a link's words, not the path it points at: a page linking to "Obsidian Publish/…"
    is not about publishing)."""
    return {"text": f"{title}\n\n{shown_text(body)}"}


@dataclass
class SyncReport:
    added: int = 0
    updated: int = 0
    removed: int = 0
    rebuilt: bool = False
    reason: str = ""
    seconds: float = 0.0
    notices: list[str] = field(default_factory=list)

    @property
    def changed(self) -> int:
        return self.added + self.updated + self.removed


MODEL_CHOSEN = "the default English model does not read most of the first import"


def choose_model(vault: Vault, texts: list[str]) -> tuple[str, bool]:
    """When memlink.yaml names no embedding model and the default English one does not
    read most of ``texts`` (the messages of a Chinese companion chat, the pages of a
    Japanese vault: engine.index.embed.model_for): the model that does, and whether it was
    set in memlink.yaml — it is when they are the first import into an empty vault (no
    note, no chat history), to see and to change there; a vault that has either keeps
    what it has, and the import says what would read them (``model_line``). Called before
    the import writes anything (an import's own notes would make the vault not empty)."""
    if vault.read_only or vault.config.embedding.model is not None:
        return "", False
    chosen = model_for(texts)
    if chosen is None:
        return "", False
    empty = not any((vault.root / "sessions").glob("*.jsonl")) and not len(vault.catalog) and not vault.catalog.errors()
    try:
        return chosen, empty and vault.name_embedding_model(chosen, MODEL_CHOSEN)
    except (OSError, MemlinkError) as exc:  # (memlink.yaml not writable now: the import goes on, and says what would read it)
        log.warning("embedding model not set in memlink.yaml: %s", exc)
        return chosen, False


def model_line(model: str, model_set: bool) -> str:
    """What the CLI and the app say of ``choose_model``'s answer, or ""."""
    if model_set:
        return f"embedding model: {model} ({MODEL_CHOSEN}; set in memlink.yaml)"
    if model:
        return (f"most of this import is in a script the default English model does not read: `embedding: "
                f"{{model: {model}}}` in memlink.yaml reads it (re-indexed when memlink next opens the vault)")
    return ""


class SearchIndex:
    def __init__(self, vault: Vault, embedder: Embedder | None = None) -> None:
        self.vault = vault
        self.store = vault.store
        self.folder = None if vault.read_only else vault.state_dir / "index"
        self.notice: str | None = None
        self.unwritten = ""  # why its files are not written this run (then it lives in memory)
        if embedder is None:
            choice = load_embedder(vault.config.embedding.model)
            embedder, self.notice = choice.embedder, choice.notice
        self.embedder = embedder
        self.fingerprint = json.dumps({"model": embedder.name, "dims": embedder.dims, "chunk_words": CHUNK_WORDS,
                                       "tokenizer": "tantivy-en_stem+cjk-bigram-2", "keyword text": "title+shown body",
                                       "hnsw": vault.config.search.hnsw()}, sort_keys=True)
        self.vectors = VectorIndex(SPACE, self.store, self.folder, embedder.dims, **vault.config.search.hnsw())
        try:
            self.keywords = KeywordIndex(self.folder / SPACE if self.folder else None, FIELDS)
        except (OSError, ValueError) as exc:
            self.keywords = self._in_memory(exc, refill=False)
        self._changed: dict[str, str | None] = {}  # uri -> content hash indexed since the last checkpoint (None: dropped)
        self._synced: tuple[str, int] | None = None  # the change feed's mark at this process's last compare
        self._recorded: tuple[str, int] | None = None  # the one the store holds
        self._stale_reason = ""
        self.last_sync: SyncReport | None = None
        self.last_sync_at = 0.0

    @classmethod
    def for_vault(cls, vault: Vault, progress: Progress | None = None) -> SearchIndex:
        """The vault's index: opened and synced with the files on first use, then kept
        with the vault, up to date through its write notifications (``sync`` picks up
        edits made outside)."""
        def make(v: Vault) -> SearchIndex:
            index = cls(v)
            index.load()
            index.last_sync = index.sync(progress)
            v.listeners.append(index.on_vault_change)
            return index

        return vault.shared(SearchIndex, make)

    @classmethod
    def synced(cls, vault: Vault, progress: Progress | None = None) -> tuple[SearchIndex, SyncReport]:
        """The vault's index brought up to date with the files: opened (which syncs it),
        or synced again when it was open."""
        was_open = vault.peek(cls) is not None
        index = cls.for_vault(vault, progress)
        report = index.sync(progress) if was_open or index.last_sync is None else index.last_sync
        return index, report

    # -- persistence ------------------------------------------------------------------------
    def load(self) -> None:
        mark = self.store.row("SELECT value FROM meta WHERE key = 'notes.mark'")
        got = json.loads(mark[0]) if mark else None
        self._recorded = (str(got[0]), int(got[1])) if isinstance(got, list) and len(got) == 2 else None
        row = self.store.row("SELECT value FROM meta WHERE key = 'notes.fingerprint'")
        count = self.store.row("SELECT count(*) FROM indexed WHERE space = ?", (SPACE,))
        if self.vault.read_only:
            self._stale_reason = "the vault is read-only; indexed in memory for this run"
        elif self.folder is None:
            self._stale_reason = "its files cannot be written now; indexed in memory for this run"
        elif row is None:
            self._stale_reason = "no index yet"
        elif row[0] != self.fingerprint:
            old, now = json.loads(row[0]), json.loads(self.fingerprint)
            self._stale_reason = f"index built with a different {', '.join(k for k in now if old.get(k) != now[k])}"
        elif not self.vectors.load():
            self._stale_reason = "vector index missing or unreadable"
        elif self.keywords.made or self.keywords.count() != (count[0] if count else 0):
            self._stale_reason = "keyword index missing or incomplete"

    def checkpoint(self) -> None:
        """Make what was indexed durable: keywords committed, the vector snapshot, and the
        hashes indexed and the change feed's mark they reach, recorded together."""
        if not self._changed and not self.keywords.pending:
            if self._synced is not None and self._synced != self._recorded and self.folder is not None:
                mark = json.dumps(list(self._synced))  # (nothing indexed: the mark alone moves)
                if self.store.try_write("the search index's mark", lambda w: w.execute(
                        "INSERT OR REPLACE INTO meta VALUES ('notes.mark', ?)", (mark,))):
                    self._recorded = self._synced
            return
        with self._held():
            if self.folder is not None and not self.store.on_disk:  # (the database moved into memory: a full disk)
                self.keywords = self._in_memory(DiskFull("the database is kept in memory"))
            self._flush()
            if self.folder is None:  # in memory: nothing to record
                return
            changed = dict(self._changed)
            synced = list(self._synced) if self._synced is not None else None
            saved: list[str | None] = []

            def work(w: Writer) -> None:
                saved.append(self.vectors.save(w))
                ids = w.ids(sorted(changed))
                w.executemany("DELETE FROM indexed WHERE space = ? AND key = ?", [(SPACE, ids[u]) for u in changed])
                w.executemany("INSERT INTO indexed VALUES (?, ?, ?)", [(SPACE, ids[u], sha) for u, sha in changed.items() if sha])
                w.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                              [("notes.fingerprint", self.fingerprint), ("notes.mark", json.dumps(synced))])

            try:
                with self.store.write() as w:
                    work(w)
            except (StoreBusy, OSError) as exc:  # derived: kept in memory, recorded at a later checkpoint
                log.warning("the search index's state was not recorded: %s", exc)
                for name in saved:
                    self.vectors.discard(name)
                return
            for name in saved:
                self.vectors.saved(name)
            self._changed.clear()
            self._recorded = self._synced

    def _flush(self) -> None:
        """The keywords committed (the caller holds the vault lock); when their files
        cannot be written, kept in memory instead."""
        try:
            self.keywords.flush()
        except (OSError, ValueError) as exc:
            self.keywords = self._in_memory(exc)

    def _in_memory(self, exc: Exception, refill: bool = True) -> KeywordIndex:
        """The index's files cannot be written now (``exc``: a full disk; docs/DESIGN.md,
        "Read-only vaults and full disks"). From here on this process keeps the index in
        memory and records nothing; with ``refill`` the keywords of every note it holds
        are put in again (the vectors are in memory already). What is on disk stays as it
        was, and a later process brings it up to date."""
        full = isinstance(exc, DiskFull) or full_disk_cause(exc) is not None
        if not full and not isinstance(exc, OSError):
            raise exc
        log.warning("the search index cannot be written now, kept in memory: %s", exc)
        self.unwritten = f"{'the disk is full' if full else exc}: the search index is kept in memory for this run"
        waiting = getattr(self, "keywords", None)
        self.folder = None
        keywords = KeywordIndex(None, FIELDS)
        if refill:
            held = self.indexed_shas()
            pending = waiting.pending if waiting is not None else {}
            for uri, entry in self.vault.catalog.entries(sorted(held)).items():
                doc = pending.get(uri)
                if doc is not None:
                    keywords.put(uri, *doc)
                    continue
                try:
                    keywords.put(uri, keyword_doc(entry.title, self.vault.read_body(uri)), entry.memory_type)
                except (OSError, MemlinkError):
                    continue  # vanished since; the next sync sees it
            keywords.flush()
        return keywords

    def close(self) -> None:
        if self.on_vault_change in self.vault.listeners:
            self.vault.listeners.remove(self.on_vault_change)
        try:
            self.checkpoint()
        except MemlinkError as exc:  # (a read-only vault, a full disk: indexed again next time)
            log.warning("search index not saved: %s", exc)

    # -- keeping up with the files ----------------------------------------------------------
    def status(self) -> dict:
        saved = self.store.row("SELECT count(*) FROM indexed WHERE space = ?", (SPACE,))
        known = {k for (k,) in self.store.rows_in(f"{_KEYS} WHERE i.key IN {KEY_IDS} AND i.space = ?",
                                                  list(self._changed), (SPACE,))} if self._changed else set()
        indexed = (saved[0] if saved else 0) + sum((sha is not None) - (u in known) for u, sha in self._changed.items())
        return {"notes_indexed": indexed, "chunks": len(self.vectors), "model": self.embedder.name,
                "dims": self.embedder.dims, "notice": self.notice}

    def indexed_shas(self) -> dict[str, str]:
        """uri -> content hash of every note indexed (as recorded, then as indexed since)."""
        out = dict(self.store.rows("SELECT k.key, i.sha FROM indexed i JOIN keys k ON k.id = i.key WHERE i.space = ?",
                                   (SPACE,)))
        for uri, sha in self._changed.items():
            if sha is None:
                out.pop(uri, None)
            else:
                out[uri] = sha
        return out

    def sync_if_stale(self, max_age: float = 10.0) -> SyncReport | None:
        """Sync unless the last one is recent: cheap enough before each interactive search
        (a walk of the vault with stat calls) and it picks up edits made outside."""
        if self.last_sync_at and time.monotonic() - self.last_sync_at < max_age:
            return None
        return self.sync()

    def sync(self, progress: Progress | None = None, full: bool = False) -> SyncReport:
        """Index what changed on disk since the last sync (everything, with ``full``)."""
        started = time.perf_counter()
        self.last_sync_at = time.monotonic()
        report = SyncReport()
        if self.notice:
            report.notices.append(self.notice)
        bodies: dict[str, tuple[str, str]] = {}  # the notes the catalog reads now: not read twice
        self.vault.sync(bodies)
        since = self.store.since(self._mark())  # the notes any process wrote since this index last looked
        if full or self._stale_reason:
            report.rebuilt = True
            report.reason = self._stale_reason or "full reindex asked for"
            with self._held():
                self.vectors.wipe()
                try:
                    self.keywords = self.keywords.wipe()
                except (OSError, ValueError) as exc:
                    self.keywords = self._in_memory(exc, refill=False)
                self._changed = {u: None for u in self.indexed_shas()}
            self._stale_reason = ""
            todo = sorted(self.vault.catalog.shas())
            gone: list[str] = []
        else:
            todo, gone = self._differences(None if since.everything else since.of("note"))
        self._synced = since.mark
        if todo:
            was = {k for (k,) in self.store.rows_in(f"{_KEYS} WHERE i.key IN {KEY_IDS} AND i.space = ?", todo, (SPACE,))}
            report.added = sum(1 for u in todo if u not in was and self._changed.get(u) is None)
            report.updated = len(todo) - report.added
        report.removed = len(gone)
        if todo or gone:
            with self._held():
                for uri in gone:
                    self._drop(uri)
                for start in range(0, len(todo), BATCH):
                    self._index_batch(todo[start : start + BATCH], bodies=bodies, threads=2)
                    if progress:
                        progress(min(start + BATCH, len(todo)), len(todo))
            self.checkpoint()
        report.seconds = time.perf_counter() - started
        return report

    def _mark(self) -> tuple[str, int] | None:
        """Where the change feed was when this index last compared itself with the catalog
        (in this process, else as recorded; None: compare every note)."""
        return self._synced if self._synced is not None else self._recorded

    def _differences(self, among: set[str] | None) -> tuple[list[str], list[str]]:
        """The notes whose hash differs from the one indexed (or not indexed), and those
        indexed that are no notes now, asked in SQL: of every note, or only of ``among``
        (the notes the change feed names); then what this process indexed since its last
        checkpoint on top."""
        if among is None:
            todo = {u for (u,) in self.store.rows(
                "SELECT k.key FROM notes n JOIN keys k ON k.id = n.id LEFT JOIN indexed i ON i.space = ? AND i.key = n.id "
                "WHERE n.error IS NULL AND (i.sha IS NULL OR i.sha != n.sha)", (SPACE,))}
            gone = {u for (u,) in self.store.rows(
                f"{_KEYS} LEFT JOIN notes n ON n.id = i.key WHERE i.space = ? AND (n.id IS NULL OR n.error IS NOT NULL)",
                (SPACE,))}
        else:
            live = {u: sha for u, sha, error in self.store.rows_in(
                f"SELECT k.key, n.sha, n.error FROM notes n JOIN keys k ON k.id = n.id WHERE n.id IN {KEY_IDS}",
                sorted(among)) if error is None}
            held = dict(self.store.rows_in(
                "SELECT k.key, i.sha FROM indexed i JOIN keys k ON k.id = i.key WHERE i.key IN " + KEY_IDS + " AND i.space = ?",
                sorted(among), (SPACE,)))
            todo = {u for u, sha in live.items() if held.get(u) != sha}
            gone = {u for u in held if u not in live}
        if self._changed:
            live = self.vault.catalog.shas()
            for uri, sha in self._changed.items():
                todo.discard(uri)
                gone.discard(uri)
                if uri in live and live[uri] != sha:
                    todo.add(uri)
                elif uri not in live and sha is not None:
                    gone.add(uri)
        good = self.vault.catalog
        return sorted(u for u in todo if u in good), sorted(gone)

    @contextmanager
    def _held(self) -> Iterator[None]:
        """The vault lock for index writes; none for an index in memory. When the lock
        cannot be had because a change recorded earlier waits for room (a full disk), the
        index moves into memory."""
        with ExitStack() as held:
            if self.folder is not None:
                try:
                    held.enter_context(self.vault.writing())
                except DiskFull as exc:
                    self.keywords = self._in_memory(exc)
            yield

    def _index_batch(self, uris: list[str], *, bodies: dict[str, tuple[str, str]] | None = None, threads: int = 1) -> None:
        texts: list[str] = []
        notes: list[tuple[str, str, str, str, int]] = []  # uri, sha, title, body, chunks
        for uri, entry in self.vault.catalog.entries(uris).items():
            handed = bodies.pop(uri, None) if bodies else None
            if handed is not None and handed[0] == entry.sha:
                body = handed[1]  # read by this sync's catalog pass, at the hash the entry records
            else:
                try:
                    body = self.vault.read_body(uri)
                except (OSError, MemlinkError):
                    continue  # vanished since the catalog sync; the next sync sees it
            chunks = chunk_text(body)
            notes.append((uri, entry.sha, entry.title, body, len(chunks)))
            self.keywords.put(uri, keyword_doc(entry.title, body), entry.memory_type)
            texts.extend(c.text for c in chunks)
        matrix = self.embedder.encode(texts) if texts else np.zeros((0, self.embedder.dims), np.float32)
        at, items = 0, []
        for uri, sha, _title, _body, n in notes:
            items.append((uri, matrix[at : at + n]))
            at += n
            self._changed[uri] = sha
        self.vectors.put_many(items, threads=threads)

    def _drop(self, uri: str) -> None:
        self.vectors.remove([uri])
        self.keywords.remove(uri)
        self._changed[uri] = None

    def on_vault_change(self, event: str, uri: str) -> None:
        """Called by the vault after each note write or delete in this process: the note is
        searchable at once; the disk snapshot follows at the next checkpoint."""
        if event == "deleted":
            self._drop(uri)
            return
        entry = self.vault.catalog.get(uri)
        if entry is None:
            return
        if self.indexed_at(uri) != entry.sha:  # (a note whose only change is its Links block keeps its hash)
            self._index_batch([uri])

    # -- querying ---------------------------------------------------------------------------
    def indexed_at(self, uri: str) -> str | None:
        """The content hash ``uri`` was indexed at (None: not indexed)."""
        if uri in self._changed:
            return self._changed[uri]
        row = self.store.row(f"SELECT sha FROM indexed WHERE space = ? AND key = {KEY_ID}", (SPACE, uri))
        return row[0] if row else None

    def embed_query(self, query: str) -> np.ndarray:
        return query_vector(self.embedder, query)

    def vector_search(self, query: str, k: int, types: set[str] | None = None) -> list[tuple[str, float]]:
        hits = self.vectors.query(self.embed_query(query), k * 4 if types else k)
        if types:
            catalog = self.vault.catalog
            hits = [h for h in hits if catalog.memory_type(h[0]) in types]
        return [(u, s) for u, s, _ in hits][:k]

    def _flushed(self) -> KeywordIndex:
        if self.keywords.pending:
            with self._held():
                self._flush()
        return self.keywords

    def keyword_search(self, query: str, k: int, types: set[str] | None = None,
                       tokens: list[str] | None = None) -> list[tuple[str, float]]:
        """The k best notes by BM25 over their title and text, for the query's tokens (or
        these ``tokens``, as ``tokenize`` makes them)."""
        return self._flushed().search(self.keywords.tokens(query) if tokens is None else tokens, k, {"text": 1.0}, types)

    def keyword_doc_freq(self, tokens: list[str]) -> tuple[dict[str, int], int]:
        return self._flushed().doc_freq(tokens)
