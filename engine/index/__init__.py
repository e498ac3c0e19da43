"""The search indexes of one vault (vectors + keywords) and their sync with the files.

State lives in `.memlink/index/`: the tantivy keyword index, a hnswlib snapshot and
``state.json`` (fingerprint, the content hash each note was indexed at, the vector map).
Sync compares the catalog's content hashes with ``state.json`` and re-indexes only what
changed; a different fingerprint (embedding model, dimensions, chunking, tokenizer) means
a full rebuild. Every step is idempotent, so a crash at any point is repaired by the next
sync."""

from __future__ import annotations

import json
import logging
import sqlite3
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import orjson

from ..atomic import atomic_write_text, remove_file
from ..embed import Embedder, load_embedder
from ..errors import MemlinkError
from ..text import CHUNK_WORDS, chunk_text
from .keywords import KeywordIndex
from .texts import TextStore
from .vectors import VectorIndex

if TYPE_CHECKING:
    from ..catalog import CatalogEntry
    from ..vault import Vault

log = logging.getLogger(__name__)
FORMAT = 4  # 2: the vector map as numbers, memory types from the catalog; 3: keyword documents keyed, texts apart;
# 4: titles beside the texts
BATCH = 256

Progress = Callable[[int, int], None]


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


class SearchIndex:
    def __init__(self, vault: Vault, embedder: Embedder | None = None) -> None:
        self.vault = vault
        self.folder = vault.state_dir / "index"
        self.notice: str | None = None
        if embedder is None:
            choice = load_embedder(vault.config.embedding.model)
            embedder, self.notice = choice.embedder, choice.notice
        self.embedder = embedder
        self.fingerprint = {
            "format": FORMAT,
            "model": embedder.name,
            "dims": embedder.dims,
            "chunk_words": CHUNK_WORDS,
            "tokenizer": "tantivy-en_stem+cjk-bigram-2",
        }
        self.indexed: dict[str, str] = {}  # uri -> content hash it was indexed at
        self.vectors = VectorIndex(embedder.dims, **vault.config.search.hnsw())
        self.keywords: KeywordIndex | None = None
        self.bodies: TextStore | None = None  # the notes' titles and texts as indexed (hits shown)
        self.dirty = False
        self._stale_reason = ""
        self.last_sync: SyncReport | None = None
        self.last_sync_at = 0.0

    @classmethod
    def for_vault(cls, vault: Vault, progress: Progress | None = None) -> SearchIndex:
        """The vault's index, kept by its services (``vault.services.open_index``)."""
        return vault.services.open_index(progress)

    # -- persistence ------------------------------------------------------------------------
    def load(self) -> None:
        state_path = self.folder / "state.json"
        state = None
        try:
            state = orjson.loads(state_path.read_bytes())  # (a tenth of json's time for 100k notes' hashes)
            if not isinstance(state, dict):
                raise ValueError("not an object")
        except FileNotFoundError:
            self._stale_reason = "no index yet"
        except (ValueError, OSError):
            state = None
            self._stale_reason = "index state unreadable"
        if self.vault.read_only:  # nothing may be written: this run indexes in memory
            state, self._stale_reason = None, "the vault is read-only; indexed in memory for this run"
        if state is not None and state.get("fingerprint") != self.fingerprint:
            old = state.get("fingerprint", {})
            changed = [k for k in self.fingerprint if old.get(k) != self.fingerprint[k]]
            self._stale_reason = f"index built with a different {', '.join(changed)}"
            state = None
        if state is not None:
            try:
                indexed = state["indexed"]
                if not isinstance(indexed, dict):
                    raise ValueError("the indexed notes are not a map")
                self.vectors = VectorIndex.load(self.folder, state["vectors"], list(indexed))
                self.indexed = indexed
                keyword_stats = dict(state.get("keyword_stats") or {})
                texts_token = state.get("texts")
            except (KeyError, OSError, RuntimeError, ValueError, TypeError, AttributeError) as exc:
                self._stale_reason = f"vector index unreadable ({exc})"
                state = None
        if state is None:
            self.vectors = VectorIndex(self.embedder.dims, **self.vault.config.search.hnsw())
            self.indexed = {}
            self.keywords = self.bodies = None  # made fresh by the rebuild in sync(), under the vault lock
        else:
            self.keywords = KeywordIndex(self.folder / "keywords", self._indexed_uris)
            self._kw.stats.update(keyword_stats)
            if self._kw.recreated or self._kw.count() != len(self.indexed):
                self._stale_reason = "keyword index missing or incomplete"
            try:
                self.bodies = TextStore(self.folder / "texts.sqlite")
                if self.bodies.token() != texts_token or texts_token is None:
                    self._stale_reason = self._stale_reason or "note texts missing or not those indexed"
            except sqlite3.OperationalError as exc:  # cannot be opened now (a full disk): snippets read the notes
                log.warning("note texts %s not usable (%s): snippets read the notes for now", self.folder / "texts.sqlite", exc)
                self.bodies = TextStore(None)
                self.bodies.broken = str(exc)  # (what this process indexes is not on disk: recorded as no token)
            except sqlite3.DatabaseError as exc:
                self.bodies = None
                self._stale_reason = self._stale_reason or f"note texts unreadable ({exc})"

    @property
    def _bodies(self) -> TextStore:
        """The notes' texts: opened by load(), or made by the rebuild in sync()."""
        assert self.bodies is not None, "the note texts are opened by load() or made by sync()"
        return self.bodies

    @property
    def _kw(self) -> KeywordIndex:
        """The keyword index: opened by load(), or made by the rebuild in sync()."""
        assert self.keywords is not None, "the keyword index is opened by load() or made by sync()"
        return self.keywords

    def checkpoint(self) -> None:
        """Make the in-memory index durable (keywords flushed, vector snapshot + state)."""
        if not self.dirty:
            return
        if self.vault.read_only:  # the index lives in memory: commit the keywords there only
            self._kw.flush()
            self._bodies.flush()
            self.dirty = False
            return
        with self.vault.writing():
            self._kw.flush()
            self._bodies.flush()
            tag = uuid.uuid4().hex[:10]
            # Every note with vectors is in ``indexed`` (put and dropped together); the map
            # names notes by their place in it.
            meta = self.vectors.save(self.folder, tag, list(self.indexed))
            state = {"fingerprint": self.fingerprint, "indexed": self.indexed, "vectors": meta,
                     "keyword_stats": self._kw.stats, "texts": self._bodies.token()}
            atomic_write_text(self.folder / "state.json", json.dumps(state, ensure_ascii=False, separators=(",", ":")))
            for old in self.folder.glob("vectors-*.bin"):
                if old.name != meta["file"]:
                    remove_file(old)
        self.dirty = False

    def close(self) -> None:
        self.checkpoint()
        if self.bodies is not None:
            self.bodies.close()

    # -- keeping up with the files ----------------------------------------------------------
    def status(self) -> dict:
        return {
            "notes_indexed": len(self.indexed),
            "chunks": len(self.vectors),
            "model": self.embedder.name,
            "dims": self.embedder.dims,
            "notice": self.notice,
        }

    def sync_if_stale(self, max_age: float = 10.0) -> SyncReport | None:
        """Sync unless the last one is recent: cheap enough before each interactive search
        (a walk of the vault with stat calls) and it picks up edits made outside."""
        if self.last_sync_at and time.monotonic() - self.last_sync_at < max_age:
            return None
        return self.sync()

    def sync(self, progress: Progress | None = None, full: bool = False) -> SyncReport:
        """Index what changed on disk since the last sync (or everything, with ``full``)."""
        started = time.perf_counter()
        self.last_sync_at = time.monotonic()
        report = SyncReport()
        if self.notice:
            report.notices.append(self.notice)
        if full or self._stale_reason:
            report.rebuilt = True
            report.reason = self._stale_reason or "full reindex asked for"
            with self._held():
                self.vectors = VectorIndex(self.embedder.dims, **self.vault.config.search.hnsw())
                self.indexed = {}
                self.keywords = KeywordIndex.wipe(None if self.vault.read_only else self.folder / "keywords", self._indexed_uris)
                # (the store it replaces is not closed: a search on another thread may be
                # reading it; its connection goes with it)
                self.bodies = TextStore.wipe(None if self.vault.read_only else self.folder / "texts.sqlite")
            self._stale_reason = ""
            self.dirty = True
        bodies: dict[str, tuple[str, str]] = {}  # the notes the catalog reads now: not read twice
        catalog = self.vault.sync_catalog(bodies=bodies)
        live = catalog.good_shas()
        if live == self.indexed:  # (the usual case, compared in C)
            todo, gone = [], []
        else:
            todo = [u for u, sha in live.items() if self.indexed.get(u) != sha]
            gone = [u for u in self.indexed if u not in live]
        report.added = sum(1 for u in todo if u not in self.indexed)
        report.updated = len(todo) - report.added
        report.removed = len(gone)
        if not todo and not gone:
            report.seconds = time.perf_counter() - started
            return report
        with self._held():
            for uri in gone:
                self._drop(uri)
            fresh = report.rebuilt or not self.indexed  # nothing to replace: one bulk hnswlib add
            direct = fresh or len(todo) > BATCH  # many notes: straight to tantivy, one commit
            for start in range(0, len(todo), BATCH):
                self._index_batch(todo[start : start + BATCH], fresh=fresh, direct=direct, bodies=bodies)
                if progress:
                    progress(min(start + BATCH, len(todo)), len(todo))
        self.dirty = True
        self.checkpoint()
        report.seconds = time.perf_counter() - started
        return report

    def _held(self) -> AbstractContextManager[None]:
        """The vault lock for index writes; none for a read-only vault (kept in memory)."""
        return nullcontext() if self.vault.read_only else self.vault.writing()

    def _index_batch(self, uris: list[str], *, fresh: bool = False, direct: bool = False,
                     bodies: dict[str, tuple[str, str]] | None = None) -> None:
        catalog = self.vault.catalog()
        texts: list[str] = []
        notes: list[tuple[CatalogEntry, str, int]] = []
        for uri in uris:
            entry = catalog.get(uri)
            if entry is None or entry.error:
                continue
            handed = bodies.pop(uri, None) if bodies else None
            if handed is not None and handed[0] == entry.sha:
                body = handed[1]  # read by this sync's catalog pass, at the hash the entry records
            else:
                try:
                    body = self.vault.read_body(uri)  # the catalog already parsed the frontmatter
                except (OSError, MemlinkError):
                    continue  # vanished since the catalog sync; the next sync sees it
            chunks = chunk_text(body)
            notes.append((entry, body, len(chunks)))
            texts.extend(c.text for c in chunks)
        matrix = self.embedder.encode(texts) if texts else np.zeros((0, self.embedder.dims), np.float32)
        at = 0
        items = []
        for entry, body, n in notes:
            vectors = matrix[at : at + n]
            at += n
            if fresh:
                items.append((entry.uri, vectors))
            else:
                self.vectors.put(entry.uri, vectors)
            self._kw.put(entry.uri, entry.memory_type, entry.title, body, direct=direct)
            self._bodies.put(entry.uri, entry.title, body)
            self.indexed[entry.uri] = entry.sha
        if items:
            self.vectors.put_many(items, threads=2)

    def _drop(self, uri: str) -> None:
        self.vectors.remove(uri)
        self._kw.remove(uri)
        self._bodies.remove(uri)
        self.indexed.pop(uri, None)

    def on_vault_change(self, event: str, uri: str) -> None:
        """Called by the vault after each note write or delete in this process: the note is
        searchable at once; the disk snapshot follows at the next checkpoint."""
        if event == "deleted":
            self._drop(uri)
            self.dirty = True
            return
        entry = self.vault.catalog().get(uri)
        if entry is not None and not entry.error and self.indexed.get(uri) == entry.sha:
            return  # same content (only its generated Links block changed): nothing to re-embed
        self._index_batch([uri])
        self.dirty = True

    # -- querying ---------------------------------------------------------------------------
    def embed_query(self, query: str) -> np.ndarray:
        return self.embedder.encode([query])[0]

    def vector_search(self, query: str, k: int, types: set[str] | None = None) -> list[tuple[str, float]]:
        vec = self.embed_query(query)
        want = k * 4 if types else k
        hits = self.vectors.query(vec, want)
        if not types:
            return [(u, s) for u, s, _ in hits][:k]
        catalog = self.vault.catalog()
        return [(u, s) for u, s, _ in hits if u in catalog and catalog[u].memory_type in types][:k]

    def keyword_search(self, query: str, k: int, types: set[str] | None = None) -> list[tuple[str, float]]:
        """The k best notes by BM25."""
        return self._kw.search(query, k, types)

    def texts(self, uris: list[str]) -> dict[str, tuple[str, str]]:
        """The (title, body) of these notes as indexed (the title the catalog gave, the
        body ``Note.text``), for the hits a search shows (those it cannot give, the caller
        reads from the catalog and the notes)."""
        out = self._bodies.texts(uris)
        if self._bodies.broken and self.bodies is not None and self.bodies.path is not None and not self._stale_reason:
            self._stale_reason = f"note texts unreadable ({self._bodies.broken})"  # the next sync rebuilds
        return out

    def indexed_at(self, uri: str) -> str | None:
        """The content hash ``uri`` was indexed at (None: not indexed)."""
        return self.indexed.get(uri)

    def _indexed_uris(self) -> list[str]:
        return list(self.indexed)

    def keyword_doc_freq(self, tokens: list[str]) -> tuple[dict[str, int], int]:
        return self._kw.doc_freq(tokens)
