"""The vault: a folder of markdown notes plus link sidecars, the source of truth.

``Vault`` owns the files: the write lock, units of work (``transaction``) and the journal
they commit through (all files of one change land together). Beside it are its derived
views, each its own component over the one store `.memlink/index.sqlite`: the catalog
(``vault.catalog``: which notes exist, what they are called) and the link index
(``vault.links``: the one way to read links). See docs/DESIGN.md, "Vault format" and
"Units of work"."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from filelock import FileLock, Timeout

from ..errors import DiskFull, LinkError, MemlinkError, NoteError, NoteNotFound, VaultError, VaultLocked
from ..llm.linematch import ProviderLineMatcher
from ..model.blocks import VIEW_OPEN, visible_text
from ..model.config import CONFIG_FILE, VaultConfig, bring_in_hint, dump_config, load_config, with_embedding_model
from ..model.files import read_settings
from ..model.links import LinkType, StoredLink
from ..model.notes import Note, parse_note, split_body
from ..model.schema import MemoryTypeSchema, TypeRegistry
from ..model.uris import PathResolver, normalize_uri
from . import writes
from .atomic import atomic_write_text
from .catalog import Catalog, Synced, content_hash, read_file
from .journal import Journal
from .linkindex import LinkIndex
from .render import Rendered, render_links
from .store import DB_FILE, STATE_DIR, Store
from .transaction import Transaction

if TYPE_CHECKING:
    from ..model.lineranges import LineRangeMatcher

T = TypeVar("T")
# The folders a new vault starts with (engine.storage.walk.NON_NOTE_DIRS: those that hold no notes).
DEFAULT_FOLDERS = ("preferences", "entities", "events", "reports", "report_candidates", "sources", "sessions")


class VaultReadOnly(VaultError):
    """A write on a vault opened read-only (a dry run, or a vault this user cannot write)."""


class Vault:
    def __init__(self, root: Path, config: VaultConfig, types: TypeRegistry):
        self.root = Path(os.path.realpath(root))
        self.config = config
        self.types = types
        self.state_dir = self.root / STATE_DIR
        self.resolve = PathResolver(self.root)
        self.store = Store(self.state_dir / DB_FILE)
        self.catalog = Catalog(self.resolve, self.store, types, on_walk=lambda seen: self.links.refresh(sidecars=seen.sidecars))
        self.links = LinkIndex(self.resolve, self.store, self._tx, note_folders=self.catalog.folders)
        self.journal = Journal(self.root, self.state_dir / "journal", self.links)
        self.read_only = False  # writes nothing, not even derived state (see Vault.open)
        self.read_only_reason = ""  # why: a dry run, or a vault this user cannot write
        self.warnings: list[str] = []  # things a user should hear about (e.g. a journal set aside)
        # Line-range correction beyond exact search: the LLM's when the vault's provider is
        # one (asked only when exact search fails); None: exact search only.
        self.matcher: LineRangeMatcher | None = ProviderLineMatcher(config.llm)
        # Higher layers hear of ("changed" | "deleted", uri) after each commit.
        self.listeners: list[Callable[[str, str], None]] = []
        self._shared: dict[type, Any] = {}  # see ``shared``
        self._shared_lock = threading.Lock()
        self._making: dict[type, threading.Lock] = {}
        self._lock: FileLock | None = None
        self._local = threading.local()  # the open transaction of each thread

    # -- opening and closing ------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path, *, read_only: bool = False) -> Vault:
        """Open a vault. ``read_only`` promises to write nothing at all, not even derived
        state: no journal replay, the database in memory, every write refused (a dry run).
        A vault this user cannot write opens read-only by itself, with the reason
        (docs/DESIGN.md, "Read-only vaults and full disks")."""
        root = Path(path).expanduser()
        if not root.is_dir():
            raise VaultError(f"vault folder {root} does not exist; create one with `memlink init --vault {root}`")
        vault = cls(root, load_config(root), TypeRegistry.for_vault(root))
        unwritable = _unwritable(vault.root)
        if read_only or unwritable is not None:
            vault.read_only = True
            vault.read_only_reason = (f"{vault.root} is open read-only" if read_only else
                                      f"the vault is read-only ({unwritable} cannot be written by this user)")
            vault.store.keep_in_memory()
            vault.catalog.read_only = True
        else:
            vault._recover_quietly()
        return vault

    @classmethod
    def init(cls, path: str | Path, name: str | None = None) -> Vault:
        root = Path(path).expanduser()
        if (root / CONFIG_FILE).exists():
            raise VaultError(f"{root} is already a memlink vault")
        if root.exists() and (not root.is_dir() or any(root.iterdir())):
            raise VaultError(f"{root} exists and is not an empty folder" + bring_in_hint(root))
        root.mkdir(parents=True, exist_ok=True)
        for folder in DEFAULT_FOLDERS:
            (root / folder).mkdir(exist_ok=True)
        atomic_write_text(root / CONFIG_FILE, dump_config(VaultConfig(name=name or root.name or "memlink vault")))
        return cls.open(root)

    def _recover_quietly(self) -> None:
        """Replay journals a killed writer left, unless another writer is active right now
        (then the next write does it)."""
        if not self.journal.pending():
            return
        try:
            with self.writing(timeout=0.2):
                pass
        except VaultLocked:
            pass
        except DiskFull as exc:  # reads go on; the next write tries again
            self.warnings.append(str(exc))

    def close(self) -> None:
        """Close what was opened on this vault (the search index is flushed)."""
        with self._shared_lock:
            shared, self._shared = self._shared, {}
        for part in reversed(list(shared.values())):
            close = getattr(part, "close", None)
            if close is not None:
                close()
        self.store.close()

    def name_embedding_model(self, name: str, why: str) -> bool:
        """Name the embedding model in memlink.yaml, which names none (a line added, the
        rest as written), under the write lock, and close what ``shared`` made with the
        one before (a part holding an ``embedder``: made again on next use). False,
        nothing written, when the file has an ``embedding:`` setting already (or would
        not read back as it plus the line)."""
        path = self.root / CONFIG_FILE
        with self.writing():
            text = with_embedding_model(read_settings(path), name, why)
            if text is None:
                return False
            atomic_write_text(path, text)
            self.config.embedding.model = name
        with self._shared_lock:
            derived = [(kind, part) for kind, part in self._shared.items() if hasattr(part, "embedder")]
        for kind, part in derived:
            self.forget(kind)
            close = getattr(part, "close", None)
            if close is not None:
                close()
        return True

    def shared(self, kind: type[T], make: Callable[[Vault], T]) -> T:
        """This vault's one ``kind`` (its search index, its turn memory…), made by
        ``make(vault)`` on first use, kept until ``close`` (which calls its ``close``).
        Higher layers keep what they derive here, per vault, never process-wide."""
        part = self._shared.get(kind)
        if part is not None:
            return part
        with self._shared_lock:  # one lock a kind: making the search index takes seconds
            making = self._making.setdefault(kind, threading.Lock())
        with making:
            part = self._shared.get(kind)
            if part is None:
                part = self._shared[kind] = make(self)
            return part

    def peek(self, kind: type[T]) -> T | None:
        """This vault's ``kind`` if it was made already (``shared``)."""
        return self._shared.get(kind)

    def forget(self, kind: type) -> None:
        """Let this vault's ``kind`` go (it is made again on next use), unclosed."""
        with self._shared_lock:
            self._shared.pop(kind, None)

    # -- the write lock and units of work ------------------------------------------------------
    @contextmanager
    def writing(self, timeout: float | None = None) -> Iterator[None]:
        """Hold the vault's write lock (waiting up to lock_timeout); replay pending journals."""
        if self.read_only:
            raise VaultReadOnly(f"{self.read_only_reason}; nothing was changed")
        if self._lock is None:
            self.state_dir.mkdir(exist_ok=True)
            self._lock = FileLock(str(self.state_dir / "lock"))
        wait = self.config.lock_timeout if timeout is None else timeout
        try:
            self._lock.acquire(timeout=wait)
        except Timeout:
            raise VaultLocked(f"another memlink process is writing to {self.root}; waited {wait:g}s for the lock "
                              f"({self.state_dir / 'lock'})") from None
        try:
            if self._lock.lock_counter == 1 and self.journal.pending():
                replayed, problems = self.journal.recover()
                self.warnings += problems
                self._reread(replayed)  # the catalog follows the notes a replay wrote
            yield
        finally:
            self._lock.release()

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """One unit of work: everything staged on the yielded transaction (and by this
        vault's write methods called in the block, on this thread) is committed through
        the journal as one atomic step when the block ends; nothing when it raises.
        Nested blocks join the open transaction; one that raises undoes only its own
        staging. Listeners hear of the changes after the commit."""
        open_tx = self._tx()
        if open_tx is not None:
            mark = open_tx.mark()
            try:
                yield open_tx
            except BaseException:
                open_tx.rollback(mark)
                raise
            return
        with self.writing():
            tx = Transaction(self)
            self._local.tx = tx
            try:
                yield tx
                tx.settle()  # Links blocks follow the links staged (reads go through this transaction)
            finally:
                self._local.tx = None
            ops = tx.ops()
            if ops:
                self.journal.commit(ops)
                entries = [self.catalog.entry_of(note, *self._stamp(uri)) if note is not None else self.catalog.entry_now(uri)
                           for uri, note in tx.written()]
                self.catalog.record(entries, tx.deleted())
        for event, uri in tx.events():
            for listener in list(self.listeners):
                listener(event, uri)

    def _tx(self) -> Transaction | None:
        return getattr(self._local, "tx", None)

    def _stamp(self, uri: str) -> tuple[int, int, str]:
        """A note file's mtime, size and content hash, as just written."""
        path = self.path(uri)
        st = path.stat()
        return st.st_mtime_ns, st.st_size, content_hash(path.read_bytes())

    def _reread(self, uris: list[str]) -> None:
        entries, gone = [], []
        for uri in uris:
            try:
                entries.append(self.catalog.entry_now(uri))
            except FileNotFoundError:
                gone.append(uri)
            except (OSError, MemlinkError):
                continue  # (the next sync reads it)
        self.catalog.record(entries, gone)

    def staged(self, uri: str) -> bool:
        """Whether this thread's open transaction has staged a write or delete of ``uri``
        (derived readers, such as the search index, have not seen it yet)."""
        tx = self._tx()
        return tx is not None and tx.staged(normalize_uri(uri))

    def sync(self, bodies: dict[str, tuple[str, str]] | None = None) -> Synced:
        """Bring the catalog and the link index in step with the files (edited in vim or
        Obsidian, added, deleted): one walk of the vault (``Catalog.sync``, which brings
        the link folders it saw along)."""
        return self.catalog.sync(bodies)

    # -- reading notes ----------------------------------------------------------------------------
    def path(self, uri: str) -> Path:
        return self.resolve(uri)

    def exists(self, uri: str) -> bool:
        tx = self._tx()
        try:
            if tx is not None and tx.staged(normalize_uri(uri)):
                return tx.text(normalize_uri(uri)) is not None
            return self.path(uri).is_file()
        except MemlinkError:
            return False

    def read_text(self, uri: str) -> str:
        """A note file's text (as staged in this thread's unit of work)."""
        uri = normalize_uri(uri)
        tx = self._tx()
        if tx is not None and tx.staged(uri):
            staged = tx.text(uri)
            if staged is None:
                raise NoteNotFound(f"no note at {uri}")
            return staged
        try:
            return read_file(self.resolve, uri).decode("utf-8")
        except FileNotFoundError:
            hint = f" ({uri}.md is one: a note's path ends in .md)" if not uri.endswith(".md") and self.exists(f"{uri}.md") else ""
            raise NoteNotFound(f"no note at {uri}{hint}") from None
        except UnicodeDecodeError as exc:
            raise NoteError(f"{uri}: not a readable note (not UTF-8 text: {exc.reason} at byte {exc.start})") from None
        except OSError as exc:  # a folder, a named pipe, a file too large (engine.model.files)
            raise NoteError(f"{uri}: not a readable note ({exc.strerror or exc})") from None

    def read_note(self, uri: str) -> Note:
        return parse_note(self.read_text(uri), normalize_uri(uri), self.types)

    def read_body(self, uri: str) -> str:
        """A note's body as derived readers see it (``Note.text``: no Links block, no view
        markers), without parsing its frontmatter when the body shows its view."""
        text = self.read_text(uri)
        body = split_body(text)
        if VIEW_OPEN not in body:  # (written by hand: its words may be in its fields alone)
            try:
                return parse_note(text, normalize_uri(uri), self.types).text
            except (MemlinkError, ValueError):
                pass
        return visible_text(body)

    def schema(self, memory_type: str) -> MemoryTypeSchema:
        return self.types.get(memory_type)

    def title(self, note: Note) -> str:
        return note.title(self.schema(note.memory_type))

    def render_note(self, uri: str, href: Callable[[StoredLink], str] | None = None) -> Rendered:
        """The note body (``Note.text``: without the generated Links block, which lists
        the same links) with its outgoing links rendered at their match_text."""
        note = self.read_note(uri)
        links = self.links.of(note.uri, "links")
        return render_links(note.text, links, href) if href else render_links(note.text, links)

    # -- writing (engine.storage.writes) -------------------------------------------------------------------
    def write_note(self, memory_type: str, fields: dict[str, Any], *, uri: str | None = None,
                   created_at: str | None = None, updated_at: str | None = None, replace: bool = False,
                   body: str | None = None) -> Note:
        """Create a note, or merge ``fields`` into the existing one (per each field's
        merge_op; with ``replace`` they become its fields as given — a person's edit). The
        note's path comes from the type's templates unless ``uri`` names an existing note.
        The body's generated view is rendered anew; text a person wrote around it is kept;
        ``body``, when given, is the body a person wrote (the app's editor), kept the same
        way. Links into the note get their line ranges corrected in the same unit of
        work; links whose passage vanished are removed on both sides."""
        with self.transaction() as tx:
            return writes.write_note(self, tx, memory_type, fields, uri=uri, created_at=created_at,
                                     updated_at=updated_at, replace=replace, body=body)

    def delete_note(self, uri: str) -> int:
        """Delete a note and every link into or out of it (both sides). Returns links removed."""
        with self.transaction() as tx:
            return writes.delete_note(self, tx, normalize_uri(uri))

    def supersede(self, old_uri: str, new_uri: str, day: str) -> Note:
        """Mark ``old_uri`` as superseded by ``new_uri`` from ``day`` on (``valid_until``
        and ``superseded_by`` in its frontmatter); nothing is deleted."""
        with self.transaction() as tx:
            return writes.supersede(self, tx, normalize_uri(old_uri), new_uri, day)

    def link(self, from_uri: str, to_uri: str, link_type: LinkType | str, *, weight: float = 1.0,
             t_field: str | None = None, t_line_ranges: str | None = None, match_text: str | None = None,
             description: str = "", created_at: str | None = None) -> StoredLink:
        """Write one link on both sides (merged with an existing one of the same ends,
        target field and lines, whose type it replaces; docs/DESIGN.md, "Vault format"). ``match_text`` must occur in the from-note's
        body, as `check` expects (a missing note is reported by the link itself)."""
        if match_text and self.exists(from_uri) and match_text not in self.read_note(from_uri).text:
            raise LinkError(f"cannot link: the anchor {match_text!r} is not in the text of {from_uri}")
        spec = dict(weight=weight, t_field=t_field, t_line_ranges=t_line_ranges, match_text=match_text,
                    description=description, created_at=created_at)
        return self.link_many([(from_uri, to_uri, link_type, spec)])[0]

    def link_many(self, specs: list[writes.LinkSpec], *, persons: writes.PersonLinks | None = None) -> list[StoredLink]:
        """Write many links, each on both sides, in one unit of work (all or none). Each
        spec is (from_uri, to_uri, link_type, {weight, t_field, t_line_ranges, match_text,
        description, created_at}). With ``persons`` (the machine's writes), a person's say
        on a pair stands (``writes.link_many``)."""
        with self.transaction() as tx:
            return writes.link_many(self, tx, specs, persons=persons)

    def unlink(self, from_uri: str, to_uri: str, link_type: LinkType | str | None = None,
               link_id: str | None = None) -> int:
        """Remove the links from ``from_uri`` to ``to_uri`` (of one type, or all; or just the
        one with ``link_id``) on both sides. Returns how many were removed; none found is an
        error."""
        with self.transaction() as tx:
            return writes.unlink(self, tx, from_uri, to_uri, link_type, link_id)

    def refresh_links_blocks(self, uris: list[str]) -> list[str]:
        """Regenerate these notes' Links blocks (engine.storage.writes.refresh_links_blocks); the
        transaction does it by itself for every note it wrote or whose links changed."""
        with self.transaction() as tx:
            return writes.refresh_links_blocks(self, tx, uris)


def _unwritable(root: Path) -> Path | None:
    """The first of the vault folder and its ``.memlink/`` this process cannot write, or
    None. access(2) also answers for read-only mounts (EROFS)."""
    state = root / STATE_DIR
    for folder in (root, state):
        if folder.exists() and not os.access(folder, os.W_OK):
            return folder
    return None
