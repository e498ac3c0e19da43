"""The typed services of one open vault (docs/DESIGN.md, "Services and providers"): the
search index, the link graph, the turn memory, the name index, the extraction output
model, the line matcher, the LLM provider and the per-session chat locks.

One ``Services`` per open ``Vault`` (``vault.services``), created on first use. Each part
is built lazily on first use and kept until ``close()``; the graph is rebuilt when
``vault.links_version`` moves, the name index when the catalog is re-read, the operations
model when the memory types change. Two vaults never share any of it; only the provider
choice is process-wide (engine.llm.registry), keyed by the vault's LLM configuration."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import BaseModel

    from .graph import LazyLinks, LinkGraph
    from .index import Progress, SearchIndex, SyncReport
    from .lineranges import LineRangeMatcher
    from .llm import Health, Provider
    from .llm.registry import Selection
    from .names import NameIndex
    from .schema import TypeRegistry
    from .sessions.recall import TurnMemory
    from .vault import Vault


class KeyedLocks:
    """One lock per key (a chat session), kept only while someone holds or waits for it,
    so the table never grows beyond the sessions in flight."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, tuple[threading.Lock, int]] = {}  # key -> (lock, holders + waiters)

    @contextmanager
    def hold(self, key: str) -> Iterator[None]:
        with self._guard:
            lock, users = self._locks.get(key) or (threading.Lock(), 0)
            self._locks[key] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._guard:
                lock, users = self._locks[key]
                if users == 1:
                    del self._locks[key]
                else:
                    self._locks[key] = (lock, users - 1)

    def __len__(self) -> int:
        with self._guard:
            return len(self._locks)


class Services:
    def __init__(self, vault: Vault) -> None:
        self.vault = vault
        # One lock per part: the app's startup worker opens the index (slow) while the UI
        # thread asks for the graph or the turn memory.
        self._index_lock = threading.Lock()
        self._turns_lock = threading.Lock()
        self._lock = threading.Lock()  # the cheap parts
        self._index: SearchIndex | None = None
        self._graph: tuple[int, LinkGraph] | None = None
        self._links: tuple[int, object, LazyLinks] | None = None
        self._names: tuple[object, NameIndex] | None = None
        self._turns: TurnMemory | None = None
        self._operations: tuple[TypeRegistry, type[BaseModel]] | None = None
        self._matcher: LineRangeMatcher | None = None
        self.session_locks = KeyedLocks()

    @classmethod
    def for_vault(cls, vault: Vault) -> Services:
        return vault.services

    # -- search index ---------------------------------------------------------------------------
    def open_index(self, progress: Progress | None = None) -> SearchIndex:
        """The search index: loaded and synced with the files on first use, then kept up
        to date by the vault's write notifications (``sync()`` picks up outside edits)."""
        from .index import SearchIndex

        with self._index_lock:  # the app's startup worker and a first search may race here
            if self._index is None:
                self.vault.prefetch_walk()  # the sync's walk runs while the model and index load
                index = SearchIndex(self.vault)
                index.load()
                index.last_sync = index.sync(progress)
                self.vault.listeners.append(index.on_vault_change)
                self._index = index
            return self._index

    @property
    def index(self) -> SearchIndex:
        return self.open_index()

    @property
    def loaded_index(self) -> SearchIndex | None:
        """The index if it is open already, without opening it."""
        return self._index

    def adopt_index(self, index: SearchIndex) -> None:
        """Use an index built by the caller (a benchmark times its own full build)."""
        with self._index_lock:
            if self._index is not None:
                self._drop_listener(self._index)
            self.vault.listeners.append(index.on_vault_change)
            self._index = index

    def _drop_listener(self, index: SearchIndex) -> None:
        if index.on_vault_change in self.vault.listeners:
            self.vault.listeners.remove(index.on_vault_change)

    # -- link graph and names -------------------------------------------------------------------
    @property
    def graph(self) -> LinkGraph:
        """The link graph, rebuilt only when the vault's links changed."""
        from .graph import LinkGraph

        self.vault.catalog()  # a first sync records sidecar stamps (and may bump links_version)
        version = self.vault.links_version
        cached = self._graph
        if cached is not None and cached[0] == version:
            return cached[1]
        graph = LinkGraph.build(self.vault)
        self._graph = (version, graph)
        return graph

    @property
    def links(self) -> LazyLinks:
        """The links of the notes a walk reaches, fetched note by note (search needs only
        a few seeds' neighbourhoods, never the whole graph); a fresh view when the
        vault's links or its catalog changed."""
        from .graph import LazyLinks

        catalog = self.vault.catalog()  # a first sync records sidecar stamps (and may bump links_version)
        version = self.vault.links_version
        cached = self._links
        if cached is not None and cached[0] == version and cached[1] is catalog:
            return cached[2]
        links = LazyLinks(self.vault, catalog)
        self._links = (version, catalog, links)
        return links

    @property
    def names(self) -> NameIndex:
        """The name index of the current catalog."""
        from .names import NameIndex

        catalog = self.vault.catalog()
        cached = self._names
        if cached is not None and cached[0] is catalog:
            return cached[1]
        names = NameIndex(catalog, self.vault.catalog_store)
        self._names = (catalog, names)
        return names

    # -- turn memory ------------------------------------------------------------------------------
    @property
    def turns(self) -> TurnMemory:
        from .sessions.recall import TurnMemory

        with self._turns_lock:
            if self._turns is None:
                self._turns = TurnMemory(self.vault)
            return self._turns

    def invalidate_turns(self) -> None:
        """Turn memories were written: recall re-reads the store on next use."""
        with self._turns_lock:
            self._turns = None

    # -- extraction -------------------------------------------------------------------------------
    @property
    def operations_model(self) -> type[BaseModel]:
        """ExtractLoop's output model for the vault's memory types, built once per type
        registry (building it costs ~25 ms)."""
        from .extract.operations import operations_model

        types = self.vault.types
        with self._lock:
            if self._operations is None or self._operations[0] is not types:
                names = [t.memory_type for t in types if t.link_enabled]
                self._operations = (types, operations_model(types, names, self.vault.config.link_table()))
            return self._operations[1]

    # -- provider and matcher ---------------------------------------------------------------------
    @property
    def selection(self) -> Selection:
        """The provider for this vault's LLM configuration, chosen once per process."""
        from .llm.registry import selection  # the HTTP client is imported only by who needs it

        return selection(self.vault.config.llm)

    @property
    def provider(self) -> Provider:
        return self.selection.provider

    @property
    def health(self) -> Health:
        return self.selection.health

    def refresh_provider(self) -> Selection:
        """Check the provider again (Ollama started or stopped meanwhile)."""
        from .llm.registry import refresh

        return refresh(self.vault.config.llm)

    @property
    def matcher(self) -> LineRangeMatcher:
        """Line-range correction beyond exact search: the LLM's semantic matcher when the
        vault's provider is a healthy LLM (asked only when exact search fails), else none.
        Assign one to replace it (tests)."""
        if self._matcher is not None:
            return self._matcher
        from .extract.linematch import ProviderLineMatcher

        return ProviderLineMatcher(self)

    @matcher.setter
    def matcher(self, matcher: LineRangeMatcher | None) -> None:
        self._matcher = matcher

    # -- lifecycle --------------------------------------------------------------------------------
    def sync(self, progress: Progress | None = None) -> SyncReport | None:
        """Pick up edits made outside memlink: the index (opened if needed; opening syncs)
        and, through the catalog, the graph and names on their next use."""
        opened = self._index is not None
        index = self.open_index(progress)
        return index.sync(progress) if opened else index.last_sync

    def close(self) -> None:
        """Flush what needs flushing (the index's snapshot) and let everything go; a later
        use builds afresh from the files."""
        with self._index_lock:
            index, self._index = self._index, None
        if index is not None:
            self._drop_listener(index)
            index.close()
        with self._turns_lock:
            self._turns = None
        with self._lock:
            self._graph = self._links = self._names = self._operations = None
