"""The vault: a folder of markdown notes plus link sidecars. The source of truth.

Every change is a unit of work, ``Vault.transaction()`` (engine.transaction): it holds
``Vault.writing()`` (the cross-process vault lock, with any journal left by a killed
writer replayed first) and commits through ``Journal.commit`` (all files of one change
land together). ``.memlink/`` holds only derived state and can be deleted. See
docs/DESIGN.md, "Vault format" and "Units of work".
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Literal, cast

from filelock import FileLock, Timeout
from pydantic import ValidationError

from .atomic import SWEEP_MEMO, atomic_write_text, sweep_temp_files
from .blocks import LinkLine, render_links_block, set_links_block, visible_text
from .catalog import CATALOG_FILE, Catalog, CatalogEntry, CatalogStore, Snapshot, Stamp, Synced, content_hash, stamp_of
from .checks import Finding, run_checks
from .config import CONFIG_FILE, VaultConfig, dump_config, load_config
from .errors import DiskFull, LinkError, MemlinkError, NoteError, NoteNotFound, SchemaError, VaultError, VaultLocked
from .journal import STATE_DIR, Journal
from .lineranges import LineRangeMatcher, check_ranges, correct_ranges, format_ranges
from .links import SIDECAR, LinkType, StoredLink, decode_record, merge_link, new_link_id
from .linkstore import End, LinkStore, PutLink, RemoveLegacy, RemoveLink, links_of_type, sidecar_rel
from .merge import is_edit, merge_fields
from .notes import (
    Note,
    is_pending,
    new_body,
    now_iso,
    parse_note,
    parse_timestamp,
    rebuild_body,
    render_note_body,
    serialize_note,
    split_body,
    split_frontmatter,
)
from .render import Rendered, render_links
from .schema import MemoryTypeSchema, TypeRegistry
from .state import StateStore
from .transaction import Transaction
from .uris import PathResolver, normalize_uri, uri_dir
from .walk import Prewalk, Seen, Walked, take_early, vault_files

if TYPE_CHECKING:
    from .services import Services

# The folders a new vault starts with (engine.walk.NON_NOTE_DIRS: those that hold no notes).
DEFAULT_FOLDERS = ("preferences", "entities", "events", "reports", "report_candidates", "sources", "sessions")
LinkDirection = Literal["links", "backlinks", "both"]
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


class VaultReadOnly(VaultError):
    """A write on a vault opened read-only (a dry run, or a vault this user cannot write)."""


class Vault:
    def __init__(self, root: Path, config: VaultConfig, types: TypeRegistry):
        self.root = Path(os.path.realpath(root))
        self.config = config
        self.types = types
        self.state_dir = self.root / STATE_DIR
        self.state = StateStore(self.state_dir / "db")
        self.resolve = PathResolver(self.root)
        # Every link record, indexed by note (docs/DESIGN.md, "Vault format").
        self.linkstore = LinkStore(self.root, self.resolve, self.state_dir / "links.sqlite")
        self.journal = Journal(self.root, self.state_dir / "journal", self.linkstore)
        self._links_version = 0  # see links_version
        self.read_only = False  # writes nothing, not even derived state (see Vault.open)
        self.read_only_reason = ""  # why: a dry run, or a vault this user cannot write
        self._lock: FileLock | None = None
        self.warnings: list[str] = []  # things a user should hear about (e.g. a journal set aside)
        self._catalog: Catalog | None = None
        self._sidecar_stamps: dict[str, tuple[int, int]] | None = None
        # Higher layers (indexes) subscribe to ("changed" | "deleted", uri) after each write.
        self.listeners: list = []
        # The typed services of higher layers (index, graph, turn memory, provider...),
        # per vault and never process-wide; created on first use (see ``services``).
        self._services: Services | None = None
        self._services_lock = threading.Lock()
        self._catalog_lock = threading.RLock()  # the app syncs from workers and the UI thread
        self._stored: Catalog | None = None  # read by stored_notes, not yet synced
        self._synced: tuple[Catalog, Synced] | None = None  # see ``synced``
        self._catalog_db: CatalogStore | None = None  # the catalog table (see _catalog_rows)
        self._local = threading.local()  # the open transaction of each thread
        self._moment = threading.local()  # a ``settled`` block of this thread: walked already?
        self._prewalk: tuple[Prewalk, int] | None = None  # the next sync's walk, under way (prefetch_walk)
        self._writes_begun = self._writes_ended = 0  # write-lock holds begun and ended here (any thread)
        self._writes_at_open: int | None = None  # holds begun when ``open`` returned
        self._replayed = 0  # journals replayed by this object

    # -- opening ----------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path, *, read_only: bool = False) -> Vault:
        """Open a vault. ``read_only`` promises to write nothing at all, not even derived
        state: no journal replay, no catalog shards, and every write raises (a dry run).
        A vault this user cannot write (its folder or ``.memlink/``) opens read-only by
        itself: reads work, derived state stays in memory, writes are refused with the
        reason (docs/DESIGN.md, "Read-only vaults and full disks")."""
        root = Path(path).expanduser()
        if not root.is_dir():
            raise VaultError(f"vault folder {root} does not exist; create one with `memlink init --vault {root}`")
        vault = cls(root, load_config(root), TypeRegistry.for_vault(root))
        unwritable = _unwritable(vault.root)
        if read_only or unwritable is not None:
            vault.state.keep_in_memory()  # derived state (turn memories) lives for this process
            vault.linkstore.keep_in_memory()
        if read_only:
            vault.read_only, vault.read_only_reason = True, f"{vault.root} is open read-only here (a dry run)"
        elif unwritable is not None:
            vault.read_only = True
            vault.read_only_reason = f"the vault is read-only ({unwritable} cannot be written by this user)"
        else:
            vault._recover_quietly()
        vault._writes_at_open = vault._writes_begun
        return vault

    @classmethod
    def init(cls, path: str | Path, name: str | None = None) -> Vault:
        root = Path(path).expanduser()
        if (root / CONFIG_FILE).exists():
            raise VaultError(f"{root} is already a memlink vault")
        if root.exists() and (not root.is_dir() or any(root.iterdir())):
            raise VaultError(f"{root} exists and is not an empty folder")
        root.mkdir(parents=True, exist_ok=True)
        for folder in DEFAULT_FOLDERS:
            (root / folder).mkdir(exist_ok=True)
        config = VaultConfig(name=name or root.name or "memlink vault")
        atomic_write_text(root / CONFIG_FILE, dump_config(config))
        return cls.open(root)

    def _recover_quietly(self) -> None:
        """Sweep temp files a killed writer left, then replay journals if no other writer
        is active right now (otherwise the next write does the replay). The sweep needs no
        lock: it removes only temp files older than any live write keeps one."""
        sweep_temp_files(self.root, memo=self.state_dir / SWEEP_MEMO)
        try:
            with self.writing(timeout=0.2):
                pass
        except VaultLocked:
            pass
        except DiskFull as exc:  # reads go on; the next write tries again
            self.warnings.append(str(exc))

    @property
    def services(self) -> Services:
        """This vault's services (docs/DESIGN.md, "Services and providers")."""
        with self._services_lock:
            if self._services is None:
                from .services import Services

                self._services = Services(self)
            return self._services

    @property
    def matcher(self) -> LineRangeMatcher:
        """Line-range correction beyond exact search, as the services choose it."""
        return self.services.matcher

    def close(self) -> None:
        """Close the services (flushes the search index's snapshot) and the state store."""
        if self._services is not None:
            self._services.close()
        self.state.close()
        self.linkstore.close()
        with self._catalog_lock:
            if self._prewalk is not None:
                self._prewalk[0].close()
                self._prewalk = None
            if self._catalog_db is not None:
                self._catalog_db.close()

    @property
    def links_version(self) -> int:
        """Moves on every link write, this process's or another's (the link index counts
        them), and when sidecars changed outside memlink (a sync saw it, or a read found
        a folder changed behind the index's back and re-read it): caches keyed on it go
        stale."""
        return self._links_version + self.linkstore.writes() + self.linkstore.rereads

    @links_version.setter
    def links_version(self, value: int) -> None:
        self._links_version = value - self.linkstore.writes() - self.linkstore.rereads

    # -- the write lock -----------------------------------------------------------------------
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
            raise VaultLocked(
                f"another memlink process is writing to {self.root}; waited {wait:g}s for the lock "
                f"({self.state_dir / 'lock'})"
            ) from None
        self._writes_begun += 1
        try:
            if self._lock.lock_counter == 1 and self.journal.pending():
                replayed, problems = self.journal.recover()
                self.warnings += problems
                if replayed:
                    self._replayed += 1
                    self.links_version += 1
                    with self._catalog_lock:
                        self._catalog = None
                        self._synced = None
            yield
        finally:
            self._writes_ended += 1
            self._lock.release()

    # -- units of work ------------------------------------------------------------------------
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
            self._commit(tx)
        for event, uri in tx.events():
            self._notify(event, uri)

    def _tx(self) -> Transaction | None:
        return getattr(self._local, "tx", None)

    def staged(self, uri: str) -> bool:
        """Whether this thread's open transaction has staged a write or delete of ``uri``
        (derived readers, such as the search index, have not seen it yet)."""
        tx = self._tx()
        return tx is not None and tx.staged(normalize_uri(uri))

    def _commit(self, tx: Transaction) -> None:
        ops = tx.ops()
        if not ops:
            return
        self.journal.commit(ops)
        if tx.links_changed:
            self.links_version += 1
        # The catalog hears of the whole unit at once: one snapshot copy, one SQLite write.
        entries = [self._catalog_row(note) if note is not None else self._entry_now(uri)
                   for uri, note in tx.written()]
        self._catalog_store(entries, list(tx.deleted()))

    # -- notes ------------------------------------------------------------------------------
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

    def read_note(self, uri: str) -> Note:
        uri = normalize_uri(uri)
        path = self.path(uri)
        tx = self._tx()
        if tx is not None and tx.staged(uri):
            staged = tx.text(uri)
            if staged is None:
                raise NoteNotFound(f"no note at {uri}")
            return parse_note(staged, uri, self.types)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise NoteNotFound(f"no note at {uri}") from None
        except (IsADirectoryError, UnicodeDecodeError) as exc:
            raise NoteError(f"{uri}: not a readable note ({exc})") from exc
        return parse_note(text, uri, self.types)

    def read_body(self, uri: str) -> str:
        """A note's body as derived readers see it (``Note.text``: no Links block, no view
        markers), without parsing its frontmatter (fast; for indexing and snippets of
        notes the catalog already vouches for)."""
        tx = self._tx()
        if tx is not None and tx.staged(normalize_uri(uri)):
            staged = tx.text(normalize_uri(uri))
            if staged is None:
                raise NoteNotFound(f"no note at {uri}")
            return visible_text(split_body(staged))
        try:
            text = self.path(uri).read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise NoteError(f"{uri}: not UTF-8 text") from exc
        return visible_text(split_body(text))

    def schema(self, memory_type: str) -> MemoryTypeSchema:
        return self.types.get(memory_type)

    def title(self, note: Note) -> str:
        return note.title(self.schema(note.memory_type))

    def write_note(
        self,
        memory_type: str,
        fields: dict[str, Any],
        *,
        uri: str | None = None,
        created_at: str | None = None,
        updated_at: str | None = None,
        replace: bool = False,
        body: str | None = None,
    ) -> Note:
        """Create a note, or merge ``fields`` into the existing one (per each field's
        merge_op; with ``replace`` they become its fields as given — a person's edit). The
        note's path comes from the type's templates unless ``uri`` names an existing note.
        The body's generated view is rendered anew; text a person wrote around it is kept
        (engine.notes.rebuild_body); ``body``, when given, is the body a person wrote (the
        app's editor), kept the same way. Links into the note get their line ranges
        corrected in the same transaction; links whose passage vanished are removed on
        both sides. The Links block follows the note's links (``refresh_links_blocks``)."""
        schema = self.schema(memory_type)
        with self.transaction() as tx:
            if uri is None:
                plain = {k: v for k, v in fields.items() if not is_edit(v)}
                uri = schema.note_uri(schema.validate_fields(plain, complete=False))
            uri = normalize_uri(uri)
            present = (tx.text(uri) is not None) if tx.staged(uri) else self.path(uri).exists()
            old = self.read_note(uri) if present else None
            if old is not None and old.memory_type != memory_type:
                raise SchemaError(f"{uri} is a {old.memory_type} note, not a {memory_type}")
            merged = merge_fields(schema, None if replace else (old.fields if old else None), fields)
            merged = schema.validate_fields(merged, complete=True)
            if old is not None and merged == old.fields and updated_at is None and (body is None or body == old.body):
                return old  # nothing to change: no write, updated_at untouched (replays are no-ops)
            stamp = now_iso()
            created = old.created_at if old else parse_timestamp(created_at or stamp, "created_at")
            updated = parse_timestamp(updated_at or stamp, "updated_at")
            view = render_note_body(schema, merged, created, updated)
            base = body if body is not None else old.body if old is not None else None
            if base is None:
                body = new_body(view)
            else:  # the text a person typed under the frontmatter survives
                old_view = render_note_body(schema, old.fields, old.created_at, old.updated_at) if old else ""
                body = rebuild_body(base, old_view, view)
            note = Note(
                uri=uri,
                memory_type=memory_type,
                fields=merged,
                created_at=created,
                updated_at=updated,
                body=body,
                extra=old.extra if old else {},
            )
            tx.put_text(uri, serialize_note(note, schema), note)
            if old is not None:
                tx.link_ops(self._range_corrections(old, note))
                if self.config.obsidian.links_block and note.title(schema) != old.title(schema):
                    # the notes linking here show its title in their Links blocks
                    tx.links_touched(l.from_uri for l in self.get_file_links(uri, "backlinks"))
        return note

    def delete_note(self, uri: str) -> int:
        """Delete a note and every link into or out of it (both sides). Returns links removed."""
        uri = normalize_uri(uri)
        with self.transaction() as tx:
            if not self.exists(uri):
                raise NoteNotFound(f"no note at {uri}")
            tx.delete(uri)
            links = self.get_file_links(uri, "both")
            ops: list = []
            for link in links:
                ops += self._remove_ops(link)
            tx.link_ops(ops)
        return len(links)

    def supersede(self, old_uri: str, new_uri: str, day: str) -> Note:
        """Mark ``old_uri`` as superseded by ``new_uri`` from ``day`` on (``valid_until``
        and ``superseded_by`` in its frontmatter); nothing is deleted."""
        old_uri = normalize_uri(old_uri)
        with self.transaction() as tx:
            note = self.read_note(old_uri)
            note.extra = {**note.extra, "valid_until": day, "superseded_by": normalize_uri(new_uri)}
            tx.put_text(old_uri, serialize_note(note, self.schema(note.memory_type)), note)
        return note

    # -- links ----------------------------------------------------------------------------
    def relations(self, folder: str) -> list[StoredLink]:
        """Every entry of a folder's sidecar (legacy entries read as related_to links)."""
        folder = normalize_uri(folder) if folder else ""
        links = self.linkstore.folder_links(folder)
        tx = self._tx()
        return tx.folder_links(folder, links) if tx is not None else links

    def get_file_links(self, uri: str, direction: LinkDirection = "both") -> list[StoredLink]:
        """A note's outgoing links ("links"), incoming ones ("backlinks"), or both."""
        uri = normalize_uri(uri)
        folder = uri_dir(uri)
        out = []
        for d in ("links", "backlinks"):
            if direction in (d, "both"):
                out += self._note_links(folder, uri, d)
        return sorted(out, key=lambda l: -l.weight)

    def link_problems(self, uri: str) -> str | None:
        """Why a note's links, as read, may be incomplete: its folder's sidecar cannot be
        read, or holds entries that do not validate (readers skip them). None when whole."""
        folder = uri_dir(normalize_uri(uri))
        problems = self.linkstore.problems(folder)
        if problems.broken:
            return f"{problems.broken}; this folder's links are not shown"
        if problems.rejected:
            first = problems.rejected[0]
            more = f" and {len(problems.rejected) - 1} more" if len(problems.rejected) > 1 else ""
            return f"{sidecar_rel(folder)}: {first.label}{more} skipped ({first.cause})"
        return None

    def link_rows(self, uri: str) -> list[dict]:
        """A note's link records, both directions, as plain dicts (not validated again:
        the index holds only records that validated, and a transaction only what it
        staged). For walks over many notes, where building every record costs."""
        uri = normalize_uri(uri)
        return self.link_rows_of([uri])[uri]

    def link_rows_of(self, uris: Iterable[str], *, anchored: bool = False) -> dict[str, list[dict]]:
        """``link_rows`` for many notes, read in one query (a note whose links this
        thread's transaction staged: from the transaction). ``anchored``: only their
        links with an anchor (match_text), what a snippet renders."""
        staged, by_folder = self._staged_links(uris)
        out = {uri: [l.model_dump(mode="json") for l in links if not anchored or (l.direction == "links" and l.match_text)]
               for uri, links in staged.items()}
        for uri, raws in self.linkstore.rows_of_many(by_folder, anchored=anchored).items():
            out[uri] = [decode_record(raw) for raw in raws]
        return out

    def link_ends_of(self, uris: Iterable[str], anchors: dict[str, int] | None = None) -> dict[str, list[End]]:
        """What a walk reads of each note's link records (``End``: direction, the note at
        the other end, type, weight, id, description), both directions, in no particular
        order. Read from the link index in one query (a staged note's: from its
        transaction). ``anchors``, when given, gets how many of each note's links have an
        anchor."""
        staged, by_folder = self._staged_links(uris)
        out = {uri: [_end(l) for l in links] for uri, links in staged.items()}
        if anchors is not None:
            anchors.update({uri: _anchored(links) for uri, links in staged.items()})
        out.update(self.linkstore.ends_of_many(by_folder, anchors))
        return out

    def link_anchors_of(self, uris: Iterable[str]) -> dict[str, int]:
        """How many of each note's links have an anchor (a match_text: what its snippet
        renders), without reading its records (``LinkStore.anchors_of``)."""
        staged, by_folder = self._staged_links(uris)
        out = {uri: _anchored(links) for uri, links in staged.items()}
        out.update(self.linkstore.anchors_of(by_folder))
        return out

    def link_ends_of_type(self, uris: Iterable[str], link_type: str) -> dict[str, list[End]]:
        """``link_ends_of`` kept to each note's links (not backlinks) of one type, without
        reading the rest (``LinkStore.out_ends_of_type``)."""
        staged, by_folder = self._staged_links(uris)
        out = {uri: links_of_type(map(_end, links), link_type) for uri, links in staged.items()}
        out.update(self.linkstore.out_ends_of_type(by_folder, link_type))
        return out

    def _staged_links(self, uris: Iterable[str]) -> tuple[dict[str, list[StoredLink]], dict[str, list[str]]]:
        """The notes (normalized, once) whose links this thread's transaction staged, with
        their links both ways; and the others by folder (the index has theirs)."""
        tx = self._tx()
        staged: dict[str, list[StoredLink]] = {}
        by_folder: dict[str, list[str]] = {}
        known: Mapping[str, object] = self._catalog or {}  # (a URI it holds is canonical already: not checked again)
        for uri in dict.fromkeys(u if u in known else normalize_uri(u) for u in uris):
            folder = uri_dir(uri)
            if tx is not None and any(tx.note_links(folder, uri, d) is not None for d in ("links", "backlinks")):
                staged[uri] = self.get_file_links(uri, "both")
            else:
                by_folder.setdefault(folder, []).append(uri)
        return staged, by_folder

    def link(
        self,
        from_uri: str,
        to_uri: str,
        link_type: LinkType | str,
        *,
        weight: float = 1.0,
        t_field: str | None = None,
        t_line_ranges: str | None = None,
        match_text: str | None = None,
        description: str = "",
        created_at: str | None = None,
    ) -> StoredLink:
        """Write one link on both sides (merged with an existing one of the same type and
        ends; docs/DESIGN.md, "Vault format"). ``match_text`` must occur in the from-note's
        body, as `check` expects (a missing note is reported by the link itself)."""
        if match_text and self.exists(from_uri) and match_text not in self.read_note(from_uri).text:
            raise LinkError(f"cannot link: the anchor {match_text!r} is not in the text of {from_uri}")
        spec = dict(weight=weight, t_field=t_field, t_line_ranges=t_line_ranges, match_text=match_text,
                    description=description, created_at=created_at)
        return self.link_many([(from_uri, to_uri, link_type, spec)])[0]

    def link_many(self, specs: list[tuple[str, str, LinkType | str, dict]]) -> list[StoredLink]:
        """Write many links, each on both sides, in one transaction (all or none).
        Each spec is (from_uri, to_uri, link_type, {weight, t_field, t_line_ranges,
        match_text, description, created_at})."""
        with self.transaction() as tx:
            ops: list = []
            planned: dict[tuple, StoredLink] = {}
            order: list[tuple] = []
            for from_uri, to_uri, link_type, spec in specs:
                merged, extra = self._plan_link(from_uri, to_uri, link_type, planned, **spec)
                planned[merged.key] = merged
                order.append(merged.key)
                ops += extra
            for merged in planned.values():
                ops += [
                    PutLink(folder=uri_dir(merged.from_uri), link=merged.as_direction("links")),
                    PutLink(folder=uri_dir(merged.to_uri), link=merged.as_direction("backlinks")),
                ]
            tx.link_ops(ops)
        return [planned[k].as_direction("links") for k in order]

    def _plan_link(self, from_uri: str, to_uri: str, link_type: LinkType | str, planned: dict[tuple, StoredLink], *,
                   weight: float = 1.0, t_field: str | None = None, t_line_ranges: str | None = None,
                   match_text: str | None = None, description: str = "", created_at: str | None = None,
                   ) -> tuple[StoredLink, list]:
        from_uri, to_uri = normalize_uri(from_uri), normalize_uri(to_uri)
        if from_uri == to_uri:
            raise LinkError(f"a note cannot link to itself ({from_uri})")
        link_type = self.config.link_table().require(link_type)  # this vault's types only
        self._link_end(from_uri, "from")
        dst = self._link_end(to_uri, "to")
        dst_schema = self.schema(dst.memory_type)
        t_field = t_field or dst_schema.text_field
        if t_field not in dst_schema.field_names:
            raise LinkError(f"t_field {t_field!r} is not a field of {to_uri} ({dst.memory_type})")
        if t_line_ranges is not None:
            t_line_ranges = format_ranges(check_ranges(t_line_ranges, dst.field_text(t_field)))
        if match_text is not None and not match_text.strip():
            match_text = None
        from_folder, to_folder = uri_dir(from_uri), uri_dir(to_uri)
        candidate = _new_stored(from_uri, to_uri, link_type, weight, t_field, t_line_ranges, match_text, description, created_at)
        existing = planned.get(candidate.key) or self._find(from_folder, "links", candidate.key) or self._find(to_folder, "backlinks", candidate.key)
        merged = merge_link(existing, candidate.model_copy(update={"id": existing.id, "created_at": existing.created_at}) if existing else candidate)
        extra: list = []
        # A legacy {uris, reason} entry for the same pair is superseded by the new record.
        for old in self.get_file_links(from_uri, "links"):
            if old.legacy and old.to_uri == to_uri:
                extra.append(RemoveLegacy(folder=from_folder, entry_id=old.id, from_uri=from_uri, to_uri=to_uri))
        return merged, extra

    def unlink(self, from_uri: str, to_uri: str, link_type: LinkType | str | None = None,
               link_id: str | None = None) -> int:
        """Remove the links from ``from_uri`` to ``to_uri`` (of one type, or all; or just the
        one with ``link_id``) on both sides. Returns how many were removed; none found is an
        error."""
        from_uri, to_uri = normalize_uri(from_uri), normalize_uri(to_uri)
        if link_type is not None:
            try:
                link_type = LinkType(link_type)
            except ValueError:
                raise LinkError(f"unknown link type {link_type!r}") from None
        with self.transaction() as tx:
            targets = [
                l
                for l in self.get_file_links(from_uri, "links")
                if l.to_uri == to_uri and (link_type is None or l.link_type == link_type)
                and (link_id is None or l.id == link_id)
            ]
            if not targets:
                what = f"{link_type.value} link" if link_type else "link"
                raise LinkError(f"no {what} from {from_uri} to {to_uri}")
            ops: list = []
            for link in targets:
                ops += self._remove_ops(link)
            tx.link_ops(ops)
        return len(targets)

    def _link_end(self, uri: str, end: str) -> Note:
        try:
            note = self.read_note(uri)
        except NoteNotFound:
            raise LinkError(f"cannot link: the {end} note {uri} does not exist") from None
        if not self.schema(note.memory_type).link_enabled:
            raise LinkError(f"cannot link: memory type {note.memory_type!r} has linking disabled ({uri})")
        return note

    def _find(self, folder: str, direction: str, key: tuple) -> StoredLink | None:
        owner = key[0] if direction == "links" else key[1]
        for entry in self._note_links(folder, owner, direction):
            if entry.key == key and not entry.legacy:
                return entry
        return None

    def _note_links(self, folder: str, uri: str, direction: str) -> list[StoredLink]:
        tx = self._tx()
        staged = tx.note_links(folder, uri, direction) if tx is not None else None
        return staged if staged is not None else self.linkstore.links_of(folder, uri, direction)

    def _remove_ops(self, link: StoredLink) -> list:
        if link.legacy:
            folder = uri_dir(link.from_uri) if link.from_uri.endswith(".md") else link.from_uri
            from_uri = link.from_uri if link.from_uri.endswith(".md") else None
            return [RemoveLegacy(folder=folder, entry_id=link.id, from_uri=from_uri, to_uri=link.to_uri)]
        return [
            RemoveLink(folder=uri_dir(link.from_uri), id=link.id, direction="links"),
            RemoveLink(folder=uri_dir(link.to_uri), id=link.id, direction="backlinks"),
        ]

    def _range_corrections(self, old: Note, new: Note) -> list:
        """Links pointing into ``new`` follow their passage or are removed (docs/DESIGN.md,
        "Vault format": `t_line_ranges`)."""
        ops: list = []
        for link in self.get_file_links(new.uri, "backlinks"):
            if not link.t_line_ranges:
                continue
            fixed = correct_ranges(link.t_line_ranges, old.field_text(link.t_field), new.field_text(link.t_field), self.matcher)
            if fixed is None:
                ops += self._remove_ops(link)
            elif fixed != link.t_line_ranges:
                moved = link.model_copy(update={"t_line_ranges": fixed})
                ops += [
                    PutLink(folder=uri_dir(link.from_uri), link=moved.as_direction("links")),
                    PutLink(folder=uri_dir(link.to_uri), link=moved.as_direction("backlinks")),
                ]
        return ops

    # -- the Links block ---------------------------------------------------------------------
    def refresh_links_blocks(self, uris: Iterable[str]) -> list[str]:
        """Regenerate the Links block of these notes from their outgoing links as staged
        (docs/DESIGN.md, "Vault format": the body), in the open transaction (or one of
        its own); with ``obsidian.links_block`` off, remove it. A note whose block is
        already right is not written; a note that is not there or does not parse is left
        alone. Returns the notes rewritten. The transaction calls this by itself before
        it commits, for every note written or whose links changed."""
        rewritten: list[str] = []
        with self.transaction() as tx:
            on = self.config.obsidian.links_block
            titles: dict[str, str] = {}
            for uri in dict.fromkeys(normalize_uri(u) for u in uris):
                try:
                    text = tx.text(uri) if tx.staged(uri) else self.path(uri).read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError, MemlinkError):
                    continue
                if text is None:
                    continue
                front, body = split_frontmatter(text)
                if front is None or body is None:
                    continue
                # A note made here has the links staged here, if any (the link index is not asked).
                fresh = tx.created(uri) and tx.note_links(uri_dir(uri), uri, "links") is None
                block = self._links_block(uri, titles) if on and not fresh else None
                new = set_links_block(body, block)
                if new == body:
                    continue
                head = text[: len(text) - len(body)]
                new_text = head + new if head.endswith("\n") else f"{head}\n{new}"
                try:
                    note = parse_note(new_text, uri, self.types)
                except MemlinkError:
                    continue  # a note that does not parse is the person's to fix; it keeps its text
                tx.put_text(uri, new_text, note)
                rewritten.append(uri)
        return rewritten

    def _links_block(self, uri: str, titles: dict[str, str]) -> str | None:
        """The Links block of ``uri``: its outgoing links, strongest first, each with the
        title of the note it points at (``titles`` caches them)."""
        rows = []
        links = sorted(self.get_file_links(uri, "links"), key=lambda l: (-l.weight, l.to_uri, l.link_type.value, l.id))
        tx, catalog = self._tx(), self._catalog  # the catalog only when loaded: never a sync here
        for link in links:
            if link.to_uri not in titles:
                known = catalog.get(link.to_uri) if catalog is not None and not (tx and tx.staged(link.to_uri)) else None
                if known is not None and not known.error:
                    titles[link.to_uri] = known.title  # a hub's block is not a read of every note it links to
                else:
                    try:
                        titles[link.to_uri] = self.title(self.read_note(link.to_uri))
                    except MemlinkError:
                        titles[link.to_uri] = PurePosixPath(link.to_uri).stem
            rows.append(LinkLine(link.to_uri, titles[link.to_uri], link.link_type.value, link.weight, link.description))
        return render_links_block(rows)

    # -- reading for people -------------------------------------------------------------------
    def render_note(self, uri: str, href: Callable[[StoredLink], str] | None = None) -> Rendered:
        """The note body (``Note.text``: without the generated Links block, which lists
        the same links) with its outgoing links rendered at their match_text."""
        note = self.read_note(uri)
        links = self.get_file_links(note.uri, "links")
        return render_links(note.text, links, href) if href else render_links(note.text, links)

    # -- the catalog (derived: which notes exist, their type and title) --------------------
    def iter_vault_files(self) -> Iterator[Walked]:
        """Notes and link sidecars with their mtime and size, in sorted order
        (``engine.walk.vault_files``)."""
        return vault_files(str(self.root), SIDECAR)

    def prefetch_walk(self) -> None:
        """Start the next sync's walk in a second process, for a caller about to do other
        work first (the search index loads while it runs). Only before this process's
        first sync; a write through this vault meanwhile makes the sync walk again
        (docs/DESIGN.md, "Vault format": the walk in a second process)."""
        with self._catalog_lock:
            writes = self._writes_begun  # (read first: a write begun while it starts is one after it)
            early = take_early(str(self.root))
            if self._catalog is not None or self._prewalk is not None or writes != self._writes_ended:
                if early is not None:
                    early.close()
                return
            # A walk the CLI began before the engine loaded (engine.walk.walk_early) is
            # taken when nothing has written since: opening wrote nothing (no journal
            # replayed; its sweep removes only temp files, which no walk lists), and no
            # write went through since.
            if early is not None and writes == self._writes_at_open and not self._replayed:
                self._prewalk = (early, writes)
                return
            if early is not None:
                early.close()
            started = Prewalk.start(str(self.root), SIDECAR)
            if started is not None:
                self._prewalk = (started, writes)

    def _walk(self) -> Seen:
        """The vault's files now: the prefetched walk when no write went through this
        vault since it started, else a walk here. Callers hold ``_catalog_lock``."""
        pending, self._prewalk = self._prewalk, None
        if pending is not None:
            prewalk, writes = pending
            seen = prewalk.seen() if writes == self._writes_begun else None
            if seen is not None:
                return seen
            prewalk.close()
        return Seen(list(self.iter_vault_files()), SIDECAR)

    def sync_catalog(self, bodies: dict[str, tuple[str, str]] | None = None, *, walk: bool = False) -> Catalog:
        """Bring the catalog in line with the files (notes edited in vim or Obsidian, added
        or deleted). Only files whose mtime or size changed are read; only rows that
        changed are written, in one transaction. A sidecar changed outside memlink makes
        link caches stale. ``bodies``, when given, receives ``uri -> (sha, body)`` for
        each note read here (the search index indexes them without reading them again).
        In a ``settled`` block only the first sync walks the vault, unless ``walk``."""
        with self._catalog_lock:
            if not walk and getattr(self._moment, "walked", False) and self._catalog is not None:
                return self._catalog  # (this process's own writes keep it current)
            catalog = self._sync_catalog(bodies)
            if getattr(self._moment, "walked", None) is False:
                self._moment.walked = True
            return catalog

    @contextmanager
    def settled(self) -> Iterator[None]:
        """One command's view of the files: within the block (this thread) the vault is
        walked by the first ``sync_catalog`` only; later ones return the catalog as it is,
        kept current by this process's own writes. A dream at 100k notes synced four
        times, a walk and a stat of every file each (~1 s). What must see another
        process's writes (a repair under the write lock) asks with ``walk=True``."""
        if getattr(self._moment, "walked", None) is not None:
            yield  # (nested: the outer block's moment)
            return
        self._moment.walked = False
        try:
            yield
        finally:
            self._moment.walked = None

    @property
    def catalog_store(self) -> CatalogStore:
        """The catalog's table (its name lookups serve the name index)."""
        with self._catalog_lock:
            return self._catalog_rows()

    def _catalog_rows(self) -> CatalogStore:
        """The catalog table: `.memlink/catalog.sqlite`, or in memory for a read-only
        vault (docs/DESIGN.md, "Read-only vaults and full disks"). Callers hold
        ``_catalog_lock``."""
        if self._catalog_db is None:
            self._catalog_db = CatalogStore(self.state_dir / CATALOG_FILE, in_memory=self.state.memory is not None)
        return self._catalog_db

    def _sync_catalog(self, bodies: dict[str, tuple[str, str]] | None = None) -> Catalog:
        store = self._catalog_rows()
        cold = self._catalog is None and self._stored is None  # this process's first sync
        # The table's stamps, as the last whole-vault sync left them: read while a walk in
        # a second process may still be running.
        base = store.snapshot() if cold else None
        seen = self._walk()
        try:
            if base is not None and self._unchanged_since(base, seen):
                self._sidecar_stamps = seen.sidecars
                self._catalog = Catalog(cast("dict[str, CatalogEntry | Stamp]", base.stamps), self._catalog_fill, base.superseded)
                self._synced = (self._catalog, Synced(base.sum, base, frozenset()))
                return self._catalog
            walked = seen.files()
        finally:
            seen.close()  # (the second process's list: read now, or never)
        if walked is None:  # the second process failed after its summary: walked here
            seen = Seen(list(self.iter_vault_files()), SIDECAR)
            walked = seen.files() or []
        walk, sidecars = (seen.digest if cold else ""), seen.sidecars
        previous = self._catalog
        if self._catalog is not None:
            known = self._catalog
        elif self._stored is not None:
            known = self._stored
        elif base is not None:  # the same stamps as the rows, without loading 100k of them
            known = Catalog(cast("dict[str, CatalogEntry | Stamp]", base.stamps), store.entries, base.superseded)
        else:
            known = store.load()
        self._stored = None
        held = known.held()  # stamps and entries: unchanged ones are carried over unbuilt
        fresh: dict[str, CatalogEntry | Stamp] = {}
        changed: list[CatalogEntry] = []  # rows re-derived: the only ones written (no compare of every row)
        touched: list[str] = []  # notes whose content, parse error or type is not as held (Synced.changed)
        for uri, mtime, size in walked:
            if uri.endswith(SIDECAR):
                continue
            value = held.get(uri)
            stamp = value if type(value) is tuple else stamp_of(value) if value is not None else None  # (inlined: 100k calls)
            if stamp is None or stamp[0] != mtime or stamp[1] != size or not stamp[2]:
                new = self._catalog_entry(uri, mtime, size, bodies, walked=True)
                if new != known.get(uri):
                    changed.append(new)
                if stamp is None or stamp_of(new)[2:] != stamp[2:]:  # (its hash, parse error or type)
                    touched.append(uri)
                fresh[uri] = new
            else:
                fresh[uri] = value  # type: ignore[assignment]
        gone = [(uri,) for uri in held.keys() - fresh.keys()]
        snapshot = None
        loaded = known.superseded_as_loaded()
        if cold and loaded is not None:  # the next process's start (Snapshot), in the same write as the rows
            superseded = (loaded - {e.uri for e in changed} - {u for (u,) in gone}) | {e.uri for e in changed if e.superseded}
            snapshot = Snapshot(walk, {u: v if type(v) is tuple else stamp_of(v) for u, v in fresh.items()},
                                frozenset(superseded)).dumped()
        if not self.read_only and (changed or gone or snapshot is not None):  # a read-only vault keeps its catalog in this object only
            store.write(changed, gone, snapshot)
        if self._sidecar_stamps is not None and sidecars != self._sidecar_stamps:
            self.links_version += 1
        self._sidecar_stamps = sidecars
        # A note held as a stamp is unchanged since ``known`` was loaded: so is whether it is superseded.
        self._catalog = Catalog(fresh, self._catalog_fill, loaded)
        if snapshot is not None:
            self._synced = (self._catalog, Synced(base.sum if base is not None else "", snapshot,
                                                  frozenset(touched + [u for (u,) in gone])))
        elif not touched and not gone and self._synced is not None and self._synced[0] is previous:
            self._synced = (self._catalog, self._synced[1])  # (no note reads otherwise: still that catalog)
        else:
            self._synced = None  # (nor its 9 MB of bytes at 100k notes, kept for nothing)
        return self._catalog

    def synced(self, catalog: Catalog) -> Synced | None:
        """How this process's first sync made ``catalog`` (one ``sync_catalog`` returned),
        while every note still reads as it made it (no write since, no later sync that
        found a note changed): from which snapshot, to which, and the notes that differ
        between them (the check memo's shortcut: engine.checkmemo)."""
        synced = self._synced
        return synced[1] if synced is not None and synced[0] is catalog else None

    def _unchanged_since(self, snapshot: Snapshot, seen: Seen) -> bool:
        """Whether the last whole-vault sync's snapshot is the catalog now: the walk lists
        exactly the files it listed, with the same mtimes and sizes. Notes that did not
        parse are read again (a sync reads them every time: the reason may have gone);
        one that now reads otherwise means the snapshot is not taken as it is."""
        if snapshot.walk != seen.digest:
            return False
        return all(stamp_of(self._catalog_entry(uri, stamp[0], stamp[1], walked=True)) == stamp
                   for uri, stamp in snapshot.stamps.items() if not stamp[2])

    def _catalog_fill(self, uris: list[str]) -> dict[str, CatalogEntry]:
        """Whole entries for a catalog holding stamps: from the table, or re-derived from
        the file when the table no longer has the row (deleted, rebuilt, or another
        process's sync dropped it)."""
        store = self._catalog_db
        if store is None:
            with self._catalog_lock:
                store = self._catalog_rows()
        got = store.entries(uris)  # the table's own lock: never waits for a sync in another thread
        for uri in uris:
            if uri not in got:
                try:
                    got[uri] = self._entry_now(uri)
                except (OSError, MemlinkError) as exc:
                    got[uri] = CatalogEntry(uri, "", uri, "", "", 0, 0, error=str(exc))
        return got

    def _entry_now(self, uri: str) -> CatalogEntry:
        """The catalog entry of a note as its file is now."""
        st = self.path(uri).stat()
        return self._catalog_entry(uri, st.st_mtime_ns, st.st_size)

    def _catalog_entry(self, uri: str, mtime_ns: int, size: int, bodies: dict[str, tuple[str, str]] | None = None,
                       walked: bool = False) -> CatalogEntry:
        try:
            data = self._read_walked(uri) if walked else self.path(uri).read_bytes()
            note = parse_note(data.decode("utf-8"), uri, self.types)
        except (MemlinkError, OSError, UnicodeDecodeError) as exc:
            return CatalogEntry(uri, "", uri, "", "", mtime_ns, size, error=str(exc))
        sha = content_hash(data)
        if bodies is not None:
            bodies[uri] = (sha, note.text)
        return CatalogEntry(uri, note.memory_type, self.title(note), note.created_at, note.updated_at,
                            mtime_ns, size, sha, **_catalog_fields(note))

    def _read_walked(self, uri: str) -> bytes:
        """A file ``iter_vault_files`` just listed (its folders are real folders inside the
        vault: the walk enters no symlink): opened directly, without following a symlink;
        a symlinked file goes through ``path``, which checks where it leads."""
        try:
            fd = os.open(os.path.join(self.root, uri), os.O_RDONLY | _NOFOLLOW)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            return self.path(uri).read_bytes()
        with open(fd, "rb", buffering=0) as f:
            return f.readall()

    def stored_notes(self) -> list[CatalogEntry]:
        """The notes as the catalog last saw them, without checking the files: enough to
        draw a first screen at once; ``sync_catalog`` then brings it up to date."""
        catalog = self._catalog
        if catalog is None:
            with self._catalog_lock:
                catalog = self._catalog
                if catalog is None:
                    catalog = self._stored = self._catalog_rows().load()  # sync_catalog reuses it
        return [e for e in catalog.values() if not e.error]

    def catalog(self) -> Catalog:
        catalog = self._catalog
        if catalog is None:
            with self._catalog_lock:  # another thread may have synced while we waited
                catalog = self._catalog if self._catalog is not None else self._sync_catalog()
        return catalog

    def list_notes(self, memory_type: str | None = None) -> list[CatalogEntry]:
        return [
            e for e in self.catalog().values() if not e.error and (memory_type is None or e.memory_type == memory_type)
        ]

    def _catalog_row(self, note: Note) -> CatalogEntry:
        """The catalog entry of a note just written (its file's stamp and hash)."""
        path = self.path(note.uri)
        st = path.stat()
        return CatalogEntry(note.uri, note.memory_type, self.title(note), note.created_at, note.updated_at,
                            st.st_mtime_ns, st.st_size, content_hash(path.read_bytes()), **_catalog_fields(note))

    def _catalog_store(self, entries: list[CatalogEntry], gone: list[str]) -> None:
        # Copy on write under the lock: a sync in a worker must not lose these entries, and
        # readers iterating the previous dict (the UI thread) never see it change. Only
        # these rows are upserted (or deleted), in one write.
        if not entries and not gone:
            return
        with self._catalog_lock:
            if self._catalog is not None:
                self._catalog = self._catalog.replaced(put=entries, drop=gone)
                self._synced = None
            self._catalog_rows().write(entries, [(uri,) for uri in gone])

    def _notify(self, event: str, uri: str) -> None:
        for listener in list(self.listeners):
            listener(event, uri)

    # -- consistency --------------------------------------------------------------------------
    def sidecar_folders(self) -> Iterator[str]:
        """Folders holding link records (a sidecar or a link log)."""
        yield from self.linkstore.folders()

    def raw_links(self) -> Iterator[dict]:
        """Every outgoing link as its raw record (legacy entries expanded), from the link
        index: for building the link graph of a big vault fast. Entries that do not
        validate are left out; ``check()`` is where they are reported."""
        for raw, _legacy in self.linkstore.outgoing_raw():
            row = decode_record(raw)
            row.pop("legacy", None)
            yield row

    def all_links(self, types: Iterable[LinkType | str] | None = None) -> Iterator[StoredLink]:
        """Every outgoing link in the vault (each two-sided link once, from its links
        side); with ``types``, only those of these types (a legacy entry is related_to)."""
        yield from self.linkstore.outgoing(None if types is None else [str.__str__(t) for t in types])

    def check(self, *, full: bool = False) -> list[Finding]:
        """The vault's integrity findings (engine.checks): notes and logs that parse, links
        with both sides pointing at notes that exist, no failed journals. Errors here are
        exactly lint's errors; this is what `memlink check` reports."""
        return run_checks(self, integrity_only=True, full=full)


def _unwritable(root: Path) -> Path | None:
    """The first of the vault folder and its ``.memlink/`` (with ``db/``) this process
    cannot write, or None. access(2) also answers for read-only mounts (EROFS)."""
    state = root / STATE_DIR
    for folder in (root, state, state / "db"):
        if folder.exists() and not os.access(folder, os.W_OK):
            return folder
    return None


def _catalog_fields(note: Note) -> dict:
    """What the catalog keeps of a note besides its type, title, dates and stamp: whether
    it is superseded, its other names (aliases) and kind, and whether its extraction is
    pending (lint asks every source note: reading each file cost seconds at 100k)."""
    aliases = note.fields.get("aliases")
    kind = note.fields.get("kind")
    return {"superseded": "valid_until" in note.extra,
            "aliases": [str(a) for a in aliases] if isinstance(aliases, list) else [],
            "kind": str(kind).strip().lower() if isinstance(kind, str) else "",
            "pending": is_pending(note)}


def _new_stored(from_uri: str, to_uri: str, link_type: LinkType, weight: float, t_field: str, t_line_ranges: str | None,
                match_text: str | None, description: str, created_at: str | None) -> StoredLink:
    try:
        return StoredLink(
            id=new_link_id(),
            from_uri=from_uri,
            to_uri=to_uri,
            direction="links",
            link_type=link_type,
            weight=weight,
            t_field=t_field,
            t_line_ranges=t_line_ranges,
            match_text=match_text,
            description=description or "",
            created_at=parse_timestamp(created_at, "created_at") if created_at else now_iso(),
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        raise LinkError(f"invalid link: {first['loc'][0]}: {first['msg']}") from exc


def _end(link: StoredLink) -> End:
    """A staged link as a walk reads it from the index (``End``)."""
    other = link.to_uri if link.direction == "links" else link.from_uri
    return (link.direction, other, link.link_type.value, link.weight, link.id, link.description)


def _anchored(links: Iterable[StoredLink]) -> int:
    """How many of a note's links have an anchor (what its snippet renders)."""
    return sum(1 for l in links if l.direction == "links" and l.match_text)
