"""The link store: each folder's link sidecar on disk, and an index of its records keyed
by note in `.memlink/links.sqlite` (docs/DESIGN.md, "Vault format" and "Units of work").

On disk (the source of truth) a folder holds `.relations.json`, a JSON list with one
entry per line. Once that file is larger than ``LOG_MODE_BYTES``, link writes no longer
rewrite it: each transaction appends one line ``{"tx": <journal id>, "ops": [...]}`` to
`.relations.log.jsonl` beside it, and the log is folded back into the list (compaction)
once it outgrows ``COMPACT_RATIO`` of the list. Readers apply the list, then the log's
complete lines in order; a torn last line (a writer killed mid-append) is ignored and
cut off before the next append.

The index is derived state. Each folder's row records the identity (inode, mtime, size)
of both files as last indexed; a read compares them with the files (a stat or two) and
re-reads a folder whose files changed behind its back (another tool, another process
that crashed before its index update); a process walking from memory (``_mirrored``)
compares a folder at most once every ``RECHECK_AFTER`` seconds. Our own writes update the rows and the stamps in
one SQLite transaction right after the files land. A missing or unreadable database is
rebuilt; a read-only vault keeps the index in memory for the process.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict

from .atomic import atomic_write_text, remove_file
from .errors import SidecarError
from .jsonl import append_bytes, whole_lines
from .links import (
    SIDECAR,
    Rejected,
    Sidecar,
    StoredLink,
    dump_rows,
    is_entry,
    is_legacy,
    legacy_links,
    load_rows_with_lines,
    sort_out,
)
from .uris import PathResolver, utf8_name

log = logging.getLogger(__name__)

SIDECAR_LOG = ".relations.log.jsonl"  # a big folder's appended link writes (see the module doc)
# Above this size a folder's sidecar takes appends instead of a rewrite per write. A
# rewrite (parse, apply, dump, write, fsync) costs ~10 ms per MB here; 256 kB (~800
# entries) keeps it near 3 ms, while an append costs ~1 ms at any size.
LOG_MODE_BYTES = 256_000
# Compaction once the log exceeds this fraction of the list: the list is rewritten once
# per COMPACT_RATIO * its size of appended bytes, so each appended byte costs at most
# 1 / COMPACT_RATIO bytes of rewrite (amortised O(1) per write), and readers of a stale
# index replay at most a quarter of the list's size.
COMPACT_RATIO = 0.25
SCHEMA_VERSION = "9"
MMAP_BYTES = 1 << 30  # address space, not memory: only the pages read are mapped in
_clock = time.monotonic  # (when a warm process last compared a folder's files: LinkStore.RECHECK_AFTER)


class _Op(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PutLink(_Op):
    """Insert or replace the entry with this id and direction in ``folder``'s sidecar (an
    entry of the same direction and key is replaced too). ``at``: where in the folder's
    list it goes (undo puts an entry back in its place); None: at the end."""

    op: Literal["put_link"] = "put_link"
    folder: str
    link: StoredLink
    at: int | None = None


class RemoveLink(_Op):
    op: Literal["remove_link"] = "remove_link"
    folder: str
    id: str
    direction: Literal["links", "backlinks"]


class RemoveLegacy(_Op):
    """Drop one target from a legacy {uris, reason} entry (and the entry once empty)."""

    op: Literal["remove_legacy"] = "remove_legacy"
    folder: str
    entry_id: str | None
    from_uri: str | None
    to_uri: str


LinkOp = PutLink | RemoveLink | RemoveLegacy
# What a walk reads of a record (``LinkStore.ends_of_many``): (direction, the note at the
# other end, link type, weight, id, description).
End = tuple[str, str, str, float, str, str]
_KINDS = ("put_link", "remove_link", "remove_legacy")


def sidecar_rel(folder: str) -> str:
    """A folder's sidecar as a vault-relative path."""
    return f"{folder}/{SIDECAR}" if folder else SIDECAR


def owner_of(link: StoredLink) -> str:
    """The note whose side this entry is: the from-note for links, the to-note for backlinks."""
    return link.from_uri if link.direction == "links" else link.to_uri


# -- raw entries: what readers and writers do to the files, without validation -----------------
def _key(raw: dict) -> str:
    """The dedup key of a raw entry (same pair, field and line ranges: the same link)."""
    return f"{raw.get('from_uri')}\x1f{raw.get('to_uri')}\x1f{raw.get('t_field', 'content')}\x1f{raw.get('t_line_ranges') or ''}"


def op_row(op: LinkOp) -> dict:
    """An operation as a log line holds it (its folder is the log's)."""
    row = op.model_dump(mode="json", exclude={"folder"})
    if row.get("at") is None:
        row.pop("at", None)
    return row


def apply_raw(rows: list, op: dict) -> bool:
    """Apply one operation (as ``op_row`` gives it) to a folder's raw entries, in place;
    True when something changed. Idempotent: applying it again changes nothing."""
    kind = op.get("op")
    if kind == "put_link":
        new = op["link"]
        direction, key = new.get("direction"), _key(new)
        same = [i for i, e in enumerate(rows)
                if is_entry(e) and e.get("direction") == direction and (e.get("id") == new.get("id") or _key(e) == key)]
        at = op.get("at")
        if len(same) == 1 and rows[same[0]] == new and (at is None or same[0] == min(at, len(rows) - 1)):
            return False  # already there (a replay)
        for i in reversed(same):
            del rows[i]
        if isinstance(at, int):
            rows.insert(max(0, min(at, len(rows))), new)
        else:
            rows.append(new)
        return True
    if kind == "remove_link":
        kept = [e for e in rows if not (is_entry(e) and e.get("id") == op.get("id") and e.get("direction") == op.get("direction"))]
        changed = len(kept) != len(rows)
        rows[:] = kept
        return changed
    if kind == "remove_legacy":
        changed = False
        out: list = []
        for e in rows:
            if (is_legacy(e) and isinstance(e["uris"], list) and (e.get("id") or "legacy") == op.get("entry_id")
                    and e.get("from_uri") == op.get("from_uri") and op.get("to_uri") in e["uris"]):
                changed = True
                e = {**e, "uris": [u for u in e["uris"] if u != op.get("to_uri")]}
                if not e["uris"]:
                    continue
            out.append(e)
        rows[:] = out
        return changed
    raise SidecarError(f"unknown link operation {kind!r}")


class RawRows:
    """A folder's raw entries with lookups by (direction, id) and (direction, key), so
    replaying a long log costs O(1) per operation, not a scan of the list; the result
    is what ``apply_raw`` gives operation by operation."""

    def __init__(self, rows: list, lines: list[str | None] | None = None) -> None:
        self._reset(rows, lines)

    def _reset(self, rows: list, lines: list[str | None] | None = None) -> None:
        self.slots: dict[int, Any] = dict(enumerate(rows))
        self.texts: dict[int, str | None] = dict(enumerate(lines)) if lines is not None else {}
        self.next = len(rows)
        self.by_id: dict[tuple, set[int]] = {}
        self.by_key: dict[tuple, set[int]] = {}
        for slot, raw in self.slots.items():
            self._index(slot, raw)

    def _index(self, slot: int, raw: Any) -> None:
        if is_entry(raw):
            self.by_id.setdefault((raw.get("direction"), raw.get("id")), set()).add(slot)
            self.by_key.setdefault((raw.get("direction"), _key(raw)), set()).add(slot)

    def _drop(self, slot: int) -> None:
        self.texts.pop(slot, None)
        raw = self.slots.pop(slot)
        self.by_id[(raw.get("direction"), raw.get("id"))].discard(slot)
        self.by_key[(raw.get("direction"), _key(raw))].discard(slot)

    def rows(self) -> list:
        return list(self.slots.values())

    def lines(self) -> list[str | None]:
        """Each row's JSON as read (None for rows the log put)."""
        return [self.texts.get(slot) for slot in self.slots]

    def apply(self, op: dict) -> bool:
        kind = op.get("op")
        if kind == "put_link" and op.get("at") is None:
            new = op["link"]
            direction = new.get("direction")
            same = self.by_id.get((direction, new.get("id")), set()) | self.by_key.get((direction, _key(new)), set())
            if len(same) == 1 and self.slots[next(iter(same))] == new:
                return False  # already there (a replay)
            for slot in same:
                self._drop(slot)
            self.slots[self.next] = new
            self._index(self.next, new)
            self.next += 1
            return True
        if kind == "remove_link":
            same = set(self.by_id.get((op.get("direction"), op.get("id")), set()))
            for slot in same:
                self._drop(slot)
            return bool(same)
        rows = self.rows()  # a put in place (undo) or a legacy entry: rare, done on the list
        changed = apply_raw(rows, op)
        if changed:
            self._reset(rows)
        return changed


# -- the files of one folder --------------------------------------------------------------------
Stamp = str | None  # "inode:mtime_ns:size", None: no file


def _stamp(path: str | Path) -> Stamp:
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return f"{st.st_ino}:{st.st_mtime_ns}:{st.st_size}"


def _stamps(folder_path: Path) -> tuple[Stamp, Stamp]:
    base = os.fspath(folder_path)  # (joined as text: a search stamps dozens of folders)
    return _stamp(os.path.join(base, SIDECAR)), _stamp(os.path.join(base, SIDECAR_LOG))


def _size(stamp: Stamp) -> int:
    return int(stamp.rsplit(":", 1)[1]) if stamp else 0


@dataclass
class FolderFiles:
    """What a folder's sidecar and log hold, read together."""

    rows: list = field(default_factory=list)  # the raw entries after the log's complete lines
    lines: list[str | None] | None = None  # each row's JSON as read from the list (None: none at hand)
    broken: str | None = None  # why the folder cannot be read at all
    base: Stamp = None
    log: Stamp = None
    last_tx: str | None = None  # the tx of the log's last complete line
    has_log: bool = False


def _base_text(root: Path, path: Path, where: str) -> str:
    """A sidecar file's text, or SidecarError naming why it cannot be read."""
    if path.is_symlink():
        real = Path(os.path.realpath(path))
        if Path(os.path.realpath(root)) not in real.parents:
            raise SidecarError(f"{where}: a symlink to outside the vault; not read")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SidecarError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except OSError as exc:
        raise SidecarError(f"{where}: cannot be read ({exc.strerror or exc})") from exc


def _busy(exc: sqlite3.OperationalError) -> bool:
    """Another connection holds the database: wait or report, never work around it."""
    return "locked" in str(exc) or "busy" in str(exc)


def _log_records(data: bytes, where: str) -> Iterator[tuple[str | None, list[dict]]]:
    """The log's complete lines as (tx, ops); a torn last line (no newline) is left out."""
    for n, line in whole_lines(data):
        try:
            record = json.loads(line)
            ops = record["ops"]
            if not isinstance(ops, list) or not all(
                    isinstance(o, dict) and o.get("op") in _KINDS and (o["op"] != "put_link" or isinstance(o.get("link"), dict))
                    for o in ops):
                raise ValueError("bad ops")
        except (ValueError, KeyError, TypeError, RecursionError):
            raise SidecarError(f"{where}: line {n} is not a link-log record") from None
        yield record.get("tx"), ops


def read_folder(root: Path, folder_path: Path, folder: str) -> FolderFiles:
    """Read a folder's sidecar and log (stamps taken before reading, so a change made
    while we read shows as a stale stamp later)."""
    base_stamp, log_stamp = _stamps(folder_path)
    out = FolderFiles(base=base_stamp, log=log_stamp, has_log=log_stamp is not None)
    try:
        if base_stamp is not None:
            out.rows, lines = load_rows_with_lines(_base_text(root, folder_path / SIDECAR, sidecar_rel(folder)),
                                                   sidecar_rel(folder))
            out.lines = list(lines) if lines is not None else None
        if log_stamp is not None:
            where = f"{folder}/{SIDECAR_LOG}" if folder else SIDECAR_LOG
            try:
                data = (folder_path / SIDECAR_LOG).read_bytes()
            except OSError as exc:
                raise SidecarError(f"{where}: cannot be read ({exc.strerror or exc})") from exc
            rows = RawRows(out.rows, out.lines)
            for tx, ops in _log_records(data, where):
                for op in ops:
                    rows.apply(op)
                out.last_tx = tx if isinstance(tx, str) else None
            out.rows, out.lines = rows.rows(), rows.lines()
    except SidecarError as exc:
        out.rows, out.lines, out.broken = [], None, str(exc)
    return out


def _log_tail(path: Path) -> tuple[int, int, str | None]:
    """(size, end of the last complete line, tx of that line) of a log, reading from its
    end: a long log costs a block or two."""
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        return 0, 0, None
    with fh:
        size = fh.seek(0, os.SEEK_END)
        pos, tail = size, b""
        while pos > 0:
            last = tail.rfind(b"\n")
            if last > 0 and tail.rfind(b"\n", 0, last) >= 0:
                break  # the last complete line is whole in ``tail``
            start = max(0, pos - 65536)
            fh.seek(start)
            tail = fh.read(pos - start) + tail
            pos = start
    end_in_tail = tail.rfind(b"\n") + 1
    end = pos + end_in_tail
    lines = [l for l in tail[:end_in_tail].split(b"\n") if l.strip()]
    tx = None
    if lines:
        try:
            record = json.loads(lines[-1])
            tx = record.get("tx") if isinstance(record, dict) else None
        except ValueError:
            tx = None
    return size, end, tx if isinstance(tx, str) else None


def _cut_torn_line(path: Path, end: int) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, end)
        os.fsync(fd)
    finally:
        os.close(fd)


def write_folder(root: Path, folder_path: Path, folder: str, ops: list[LinkOp], tx: str | None) -> bool:
    """Apply link operations to a folder's files; idempotent (a journal replay may run it
    again). A big sidecar gets one appended log line per transaction (skipped when the
    log's last line already carries ``tx``), then compaction once the log is large; a
    small one is rewritten whole from its raw entries. True when the files changed."""
    base, log = folder_path / SIDECAR, folder_path / SIDECAR_LOG
    base_size = _size(_stamp(base))
    if base_size > LOG_MODE_BYTES:
        size, end, last = _log_tail(log)
        if tx is None or last != tx:
            if end < size:
                _cut_torn_line(log, end)  # a killed append's torn tail
            line = (json.dumps({"tx": tx, "ops": [op_row(op) for op in ops]}, ensure_ascii=False) + "\n").encode("utf-8")
            append_bytes(log, line)  # the torn tail was cut just above: no fresh line needed
            size = end + len(line)
        if size > COMPACT_RATIO * base_size:
            compact(root, folder_path, folder)
        return True
    files = read_folder(root, folder_path, folder)
    if files.broken:
        raise SidecarError(files.broken)
    rows = RawRows(files.rows)
    changed = False
    for op in ops:
        changed = rows.apply(op_row(op)) or changed
    if changed or files.has_log:
        if rows.slots:
            atomic_write_text(base, dump_rows(rows.rows()))
        else:
            remove_file(base)
        remove_file(log)  # its lines are in the list now
    return changed or files.has_log


def compact(root: Path, folder_path: Path, folder: str) -> None:
    """Fold the log into the list: the list is rewritten atomically from list + log, then
    the log removed. A kill between the two leaves a log whose operations are already in
    the list; applying them again changes nothing (``apply_raw`` is idempotent)."""
    files = read_folder(root, folder_path, folder)
    if files.broken:
        raise SidecarError(files.broken)
    if files.rows:
        atomic_write_text(folder_path / SIDECAR, dump_rows(files.rows))
    else:
        remove_file(folder_path / SIDECAR)
    remove_file(folder_path / SIDECAR_LOG)


# -- the index --------------------------------------------------------------------------------
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS folders(folder TEXT PRIMARY KEY, base TEXT, log TEXT, broken TEXT,
                                   rejected TEXT NOT NULL, legacy TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS links(folder TEXT NOT NULL, id TEXT NOT NULL, direction TEXT NOT NULL,
                                 owner TEXT NOT NULL, key TEXT NOT NULL, legacy INTEGER NOT NULL, raw TEXT NOT NULL,
                                 other TEXT NOT NULL, link_type TEXT NOT NULL, weight REAL NOT NULL, description TEXT NOT NULL,
                                 anchored INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS links_owner ON links(owner, direction, anchored, folder);
CREATE INDEX IF NOT EXISTS links_folder ON links(folder, direction, id);
CREATE TABLE IF NOT EXISTS changes(seq INTEGER NOT NULL, folder TEXT NOT NULL, id TEXT, direction TEXT, owner TEXT);
CREATE INDEX IF NOT EXISTS changes_seq ON changes(seq);
CREATE TABLE IF NOT EXISTS ends(owner TEXT NOT NULL, folder TEXT NOT NULL, data BLOB NOT NULL, anchors INTEGER NOT NULL,
                                PRIMARY KEY(owner, folder)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS ends_folder ON ends(folder);
"""
# ``ends``: each note's records in one folder as one JSON list of ``End``s, and how many
# of its links have an anchor, remade from ``links`` whenever those change
# (``_remake_ends``). A search's walk reads a note's edges with one key lookup and one
# decode, not a row per record, and its snippets skip notes without anchors
# (docs/DESIGN.md, "Search").
# (a REAL in json_array keeps 15 digits: 0.29999999999999993 would come back as 0.3, and
# a walk would cross a link under min_link_weight; 17 give the double back exactly)
_END_COLUMNS = ("json_group_array(json_array(direction, other, link_type, json(printf('%!.17g', weight)), id, description)), "
                "sum(direction = 'links' AND anchored)")


_ENDS = "owner, other"  # a record's two notes


@dataclass
class LinkChanges:
    """What changed in the index since a sequence number: ``everything`` when the index
    was rebuilt since (or the number is from before it existed); else the folders re-read
    whole from their files and the (folder, id, direction) records written or removed,
    with the notes at both ends of each (``owners``: before and after the write)."""

    seq: int
    everything: bool = False
    folders: set[str] = field(default_factory=set)
    links: set[tuple[str, str, str]] = field(default_factory=set)
    owners: set[str] = field(default_factory=set)


@dataclass
class _Mirror:
    """The index's ``ends`` and folder stamps in memory, as of change number ``seq`` of the
    index made at ``created`` (``LinkStore._mirrored`` keeps it in step)."""

    created: str
    seq: int
    ends: dict[tuple[str, str], tuple[str, int]]  # (owner, folder) -> (data, anchors)
    by_folder: dict[str, set[str]]  # folder -> the owners with ends there
    stamps: dict[str, tuple[Stamp, Stamp]]  # folder -> (base, log) as indexed
    checked: dict[str, float] = field(default_factory=dict)  # folder -> when its files were last compared (_clock)
    # link type -> (owner, folder) -> that note's links of the type (owners with any), made
    # when first asked (``out_ends_of_type``: grouping asks each search for the provenance
    # links of 40 notes, and decoding their whole ``ends`` was a tenth of a search)
    typed: dict[str, dict[tuple[str, str], list[End]]] = field(default_factory=dict)

    def put(self, owner: str, folder: str, row: tuple[str, int] | None) -> None:
        """A note's ``ends`` row as the index now holds it (None: it has none)."""
        key = (owner, folder)
        if row is None:
            self.ends.pop(key, None)
            self.by_folder.get(folder, set()).discard(owner)
        else:
            self.ends[key] = row
            self.by_folder.setdefault(folder, set()).add(owner)
        for name, table in self.typed.items():
            got = _links_of_type(row[0], name) if row is not None else []
            if got:
                table[key] = got
            else:
                table.pop(key, None)

    def of_type(self, name: str) -> dict[tuple[str, str], list[End]]:
        table = self.typed.get(name)
        if table is None:
            marker = json.dumps(name)  # (a type's name needs no escaping: lower-case letters, digits, _)
            table = self.typed[name] = {}
            for key, (data, _) in self.ends.items():
                if marker in data and (got := _links_of_type(data, name)):
                    table[key] = got
        return table


def links_of_type(ends: Iterable[Sequence[Any]], name: str) -> list[End]:
    """The links (not backlinks) of one type among a note's ends."""
    return [tuple(e) for e in ends if e[2] == name and e[0] == "links"]


def _links_of_type(data: str, name: str) -> list[End]:
    """``links_of_type`` of a note's ``ends`` data."""
    return links_of_type(orjson.loads(data), name)


@dataclass
class FolderProblems:
    broken: str | None = None  # the folder's sidecar (or log) cannot be read at all
    rejected: list[Rejected] = field(default_factory=list)  # entries that do not validate


def _row(folder: str, link_id: str, direction: str, owner: str, raw: dict, text: str | None = None, legacy: int = 0) -> tuple:
    """A links-table row: the entry's JSON as read when at hand (not encoded again), and
    what a walk reads of it (``End``), kept in the owner index too."""
    other = raw["to_uri"] if direction == "links" else raw["from_uri"]
    return (folder, link_id, direction, owner, _key(raw), legacy, text or json.dumps(raw, ensure_ascii=False),
            other, raw["link_type"], float(raw["weight"]), raw.get("description") or "", 1 if raw.get("match_text") else 0)


_INSERT = "INSERT INTO links VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"


def _legacy_links(folder: str, legacy: list[dict]) -> Iterator[StoredLink]:
    """A folder's legacy entries read as links."""
    for raw in legacy:
        try:
            yield from legacy_links(raw, folder)
        except ValueError:
            continue  # a folder-level entry at the vault root names no note


def _legacy_rows(folder: str, legacy: list[dict]) -> list[tuple]:
    out = []
    for link in _legacy_links(folder, legacy):
        row = {**link.model_dump(mode="json"), "legacy": True}
        out.append(_row(folder, link.id, "links", link.from_uri, row, legacy=1))
    return out


def _link(raw: str) -> StoredLink:
    return StoredLink.model_validate_json(raw)


class LinkStore:
    """Every link record of a vault, read by note, by folder or all at once, and written
    through ``apply`` (the journal's link operations). Thread-safe; several processes may
    share one index file (SQLite WAL; the stamps keep each of them right)."""

    def __init__(self, root: Path, resolver: PathResolver, path: Path | None) -> None:
        self.root = Path(root)
        self.resolve = resolver
        self.path = path  # None: in memory
        self._lock = threading.RLock()
        self._db: sqlite3.Connection | None = None
        self._settled = threading.local()  # see settled()
        # A process that walks again and again (the app, an MCP server) keeps every note's
        # ``ends`` in memory (_mirrored): a walk then costs no index lookups.
        self._mirror: _Mirror | None = None
        self._walks = 0  # settled blocks that read ends, before the mirror is made
        self._changed_here = 0  # rows this process changed (the mirror re-syncs after)
        self._stamp_paths: dict[str, tuple[str, str]] = {}  # folder -> its sidecar's and log's paths (_stale)
        # Folders re-read whole because their files changed behind the index's back (found
        # by this process, or by another one that the mirror follows): what keeps links
        # outside the index (the lazy view, the full graph: ``Vault.links_version``) is
        # made again.
        self.rereads = 0

    @contextmanager
    def settled(self) -> Iterator[None]:
        """Within the block, on this thread, each folder's files are compared with the
        index once: a walk that reads hundreds of notes' links in a few milliseconds (a
        search) sees one moment of each folder, not a stat per read. Writes in the block
        keep the index in step themselves."""
        if getattr(self._settled, "folders", None) is not None:
            yield
            return
        self._settled.folders = set()
        self._settled.walked = None  # folders(), walked once in the block
        self._settled.mirrored = None  # _changed_here when the mirror was last synced in the block
        self._settled.counted = False  # (a walk counted toward WARM_AFTER)
        try:
            yield
        finally:
            self._settled.folders = None
            self._settled.walked = None
            self._settled.mirrored = None

    def keep_in_memory(self) -> None:
        """Index in memory from now on (a read-only vault): the disk is never written."""
        with self._lock:
            self.close()
            self.path = None
            self._mirror = None

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    # -- the database ---------------------------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            try:
                self._db = self._open()
            except sqlite3.OperationalError as exc:
                if _busy(exc):
                    raise
                self._in_memory_now(exc)
                self._db = self._open()
            except sqlite3.DatabaseError:
                self._discard()
                self._db = self._open()
        return self._db

    def _in_memory_now(self, exc: sqlite3.OperationalError) -> None:
        """The index file cannot be opened or written now (a full disk: SQLite cannot even
        make its -shm file; an I/O error): this process keeps the index in memory, and
        the file, left as it is, is re-checked against the sidecars by the next process
        (docs/DESIGN.md, "Read-only vaults and full disks")."""
        log.warning("link index %s not usable (%s): kept in memory for now", self.path, exc)
        self.keep_in_memory()

    def _open(self) -> sqlite3.Connection:
        if self.path is None:
            db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(str(self.path), timeout=30, check_same_thread=False, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")  # derived state: a lost tail is re-read from the files
            # Reads through the page cache's map, not a read() per page: a search's walk
            # looks up ~50 notes in an index of 600k records (half its cost at 100k notes).
            db.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
        try:
            with _write(db):
                db.execute("CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
                version = db.execute("SELECT value FROM meta WHERE key='version'").fetchone()
                if version is None or version[0] != SCHEMA_VERSION:
                    for table in ("folders", "links", "changes", "ends", "meta"):
                        db.execute(f"DROP TABLE IF EXISTS {table}")  # noqa: S608 (fixed names): another layout
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        db.execute(statement)
                if version is None or version[0] != SCHEMA_VERSION:
                    start = str(time.time_ns() // 1000)  # a rebuilt index's numbers start past any old one's
                    db.executemany("INSERT INTO meta VALUES (?, ?)",
                                   [("version", SCHEMA_VERSION), ("created", start), ("seq", start), ("writes", "0")])
        except BaseException:
            db.close()
            raise
        return db

    def _discard(self) -> None:
        """Remove an unreadable index file (it is derived: the next read rebuilds it)."""
        self._mirror = None
        if self.path is None:
            return
        for suffix in ("", "-wal", "-shm"):
            try:
                os.unlink(f"{self.path}{suffix}")
            except FileNotFoundError:
                pass

    def _guard(self, fn: Any, *args: Any) -> Any:
        """Run a database step; an index that turns out corrupt is rebuilt once, one that
        cannot be written now moves into memory."""
        with self._lock:
            try:
                return fn(self._conn(), *args)
            except sqlite3.OperationalError as exc:
                if _busy(exc) or self.path is None:
                    raise
                self._in_memory_now(exc)  # not damaged: a full disk, an I/O error
                return fn(self._conn(), *args)
            except sqlite3.DatabaseError:
                self.close()
                self._discard()
                return fn(self._conn(), *args)

    # -- keeping rows in step with the files ------------------------------------------------
    def _folder_path(self, folder: str) -> Path:
        return self.resolve.folder(folder)

    def _unsettled(self, folders: Iterable[str]) -> list[str]:
        """The folders not yet compared with their files in this ``settled`` block (all of
        them outside one), each once; they count as compared from now on."""
        folders = list(dict.fromkeys(folders))
        settled = getattr(self._settled, "folders", None)
        if settled is not None:
            folders = [f for f in folders if f not in settled]
            settled.update(folders)
        return folders

    def _stale(self, db: sqlite3.Connection, folders: list[str],
               known: Mapping[str, tuple[Stamp, Stamp]] | None = None) -> list[str]:
        """The folders whose files differ from what was indexed (their stamps asked in one
        query: a search's walk meets dozens of folders; ``known``: a mirror's, in step)."""
        if not folders:
            return []
        if known is None:
            known = {f: (b, l) for f, b, l in db.execute(
                "SELECT folder, base, log FROM folders WHERE folder IN (SELECT value FROM json_each(?))", (json.dumps(folders),))}
        out = []
        paths = self._stamp_paths
        for folder in folders:
            at = paths.get(folder)
            if at is not None:
                now = _stamp(at[0]), _stamp(at[1])
            else:
                try:
                    base = os.fspath(self._folder_path(folder))
                except OSError:
                    now = (None, None)
                else:
                    at = os.path.join(base, SIDECAR), os.path.join(base, SIDECAR_LOG)
                    now = _stamp(at[0]), _stamp(at[1])
                    if now != (None, None):
                        # The files' paths, resolved once the folder exists: a search stamps
                        # dozens of folders. A folder moved or swapped for a link since shows
                        # as other stamps, and its re-read resolves it again (safely).
                        paths[folder] = at
            if known.get(folder, (None, None)) != now:
                out.append(folder)
        return out

    def _fresh(self, db: sqlite3.Connection, *folders: str, known: Mapping[str, tuple[Stamp, Stamp]] | None = None) -> bool:
        """Re-read each folder from its files when they differ from what was indexed;
        whether any was. Against the mirror (a warm process), a folder compared less than
        ``RECHECK_AFTER`` seconds ago is not compared again."""
        todo = self._unsettled(folders)
        mirror = self._mirror
        now = None
        if todo and mirror is not None and known is mirror.stamps:
            now = _clock()
            todo = [f for f in todo if now - mirror.checked.get(f, -math.inf) >= self.RECHECK_AFTER]
        if todo and known is None and getattr(self._settled, "mirrored", None) is not None:
            # Compared with the index, not with the mirror: the index may be past the
            # mirror for these folders (another process wrote since), so the mirror is
            # brought up to it before it answers for them.
            self._settled.mirrored = None
        stale = self._stale(db, todo, known)
        for folder in stale:
            self._reindex(db, folder)
        self.rereads += len(stale)
        if now is not None and mirror is not None:
            mirror.checked.update(dict.fromkeys(todo, now))  # (once compared, and re-read where it differed)
        return bool(stale)

    def _reindex(self, db: sqlite3.Connection, folder: str, *, empty: bool = False) -> None:
        self._changed_here += 1
        files = read_folder(self.root, self._folder_path(folder), folder)
        good, legacy, rejected = sort_out(files.rows)
        lines = files.lines
        # (an entry not as memlink writes it is kept as StoredLink makes it: every reader
        # of the index, the walks, the graph and the checks, then sees one form)
        rows = [_row(folder, link_id, direction, owner, files.rows[i], lines[i] if lines is not None else None)
                if canonical is None else _row(folder, link_id, direction, owner, canonical)
                for i, link_id, direction, owner, canonical in good]
        rows += _legacy_rows(folder, legacy)
        with _write(db):
            seq = _next(db, "seq")
            if not empty:  # (a first build knows the table holds nothing, and has no index to find it)
                db.execute("DELETE FROM links WHERE folder=?", (folder,))
            db.executemany(_INSERT, rows)
            if not empty:  # (a first build makes every note's at the end)
                _remake_ends(db, folder)
            if files.base is None and files.log is None:
                db.execute("DELETE FROM folders WHERE folder=?", (folder,))
            else:
                db.execute("INSERT OR REPLACE INTO folders VALUES (?, ?, ?, ?, ?, ?)",
                           (folder, files.base, files.log, files.broken,
                            json.dumps([r.model_dump(mode="json") for r in rejected], ensure_ascii=False),
                            json.dumps(legacy, ensure_ascii=False)))
            db.execute("INSERT INTO changes VALUES (?, ?, NULL, NULL, NULL)", (seq, folder))

    def refresh(self, folders: Iterable[str] | None = None) -> int:
        """Bring the given folders (default: every folder with a sidecar, and every folder
        indexed before) in step with their files; how many were re-read."""
        def run(db: sqlite3.Connection) -> int:
            wanted = set(self.folders()) | {f for (f,) in db.execute("SELECT folder FROM folders")} if folders is None else set(folders)
            todo = self._stale(db, self._unsettled(sorted(wanted)))
            bulk = len(todo) > 1 and db.execute("SELECT 1 FROM links LIMIT 1").fetchone() is None
            if not bulk:
                for folder in todo:
                    self._reindex(db, folder)
                return len(todo)
            # A first build fills an empty table in one transaction, its indexes made once
            # at the end, not kept up row by row (a third of the build at 100k notes).
            # Meanwhile other processes read the empty index (their snapshot, its indexes
            # there) and wait to write; a kill rolls it all back. A second builder that
            # waited finds the table full and re-reads only what still differs.
            db.execute("PRAGMA cache_size=-262144")  # the index sorts in memory (256 MB at most)
            db.execute("PRAGMA mmap_size=0")  # (its reads of the whole table would stay mapped in)
            try:
                with _write(db):
                    if db.execute("SELECT 1 FROM links LIMIT 1").fetchone() is not None:
                        todo = self._stale(db, todo)
                        for folder in todo:
                            self._reindex(db, folder)
                        return len(todo)
                    db.execute("DROP INDEX IF EXISTS links_owner")
                    db.execute("DROP INDEX IF EXISTS links_folder")
                    for folder in todo:
                        self._reindex(db, folder, empty=True)
                    for statement in _SCHEMA.split(";"):
                        if "CREATE INDEX" in statement:
                            db.execute(statement)
                    _remake_ends(db)
            finally:
                db.execute("PRAGMA cache_size=-2000")  # (SQLite's default)
                if self.path is not None:
                    db.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
            return len(todo)
        return int(self._guard(run))

    # -- reads -----------------------------------------------------------------------------------
    def links_of(self, folder: str, owner: str, direction: str) -> list[StoredLink]:
        """One note's links or backlinks as its folder's sidecar holds them (the note is
        ``owner``: the from-note of a link, the to-note of a backlink)."""
        def run(db: sqlite3.Connection) -> list[str]:
            self._fresh(db, folder)
            return [raw for (raw,) in db.execute(
                "SELECT raw FROM links INDEXED BY links_owner WHERE owner=? AND direction=? AND folder=? ORDER BY rowid", (owner, direction, folder))]
        return [_link(raw) for raw in self._guard(run)]

    def rows_of(self, folder: str, owner: str) -> list[str]:
        """One note's link records, both directions, as the raw JSON indexed (validated
        when they were indexed): for walks that need only ends, type and weight."""
        return self.rows_of_many({folder: [owner]})[owner]

    def rows_of_many(self, owners: Mapping[str, Iterable[str]], *, anchored: bool = False) -> dict[str, list[str]]:
        """``rows_of`` for several notes (folder -> its notes), in one read whatever the
        folders. Every owner asked for has a list. ``anchored``: only their links with an
        anchor (a match_text, what a snippet renders), picked in the owner index."""
        which = "direction = 'links' AND anchored = 1" if anchored else "direction IN ('links', 'backlinks')"
        return self._by_owner(owners, f"raw FROM links INDEXED BY links_owner WHERE {which} AND owner IN ",
                              "ORDER BY rowid", lambda row: row[0])

    def ends_of_many(self, owners: Mapping[str, Iterable[str]], anchors: dict[str, int] | None = None) -> dict[str, list[End]]:
        """What a walk reads of each note's link records, both directions (``End``), for
        several notes (folder -> its notes)
        in one read whatever the folders: a walk reaching a seed set's neighbours meets
        notes of dozens of folders. Read from ``ends``, no record decoded (docs/DESIGN.md,
        "Search"). In no particular order; every owner asked has a list. ``anchors``, when
        given, gets how many of each one's links have an anchor."""
        def run(db: sqlite3.Connection) -> dict[str, list]:
            mirror = self._mirror_for(db, owners)
            if mirror is None:
                return self._select_by_owner(db, owners, "data, anchors FROM ends WHERE owner IN ", "", tuple)
            got = mirror.ends.get
            return {o: [row] if (row := got((o, folder))) is not None else [] for folder, os_ in owners.items() for o in os_}
        out: dict[str, list[End]] = {}
        for owner, rows in self._guard(run).items():
            if anchors is not None:
                anchors[owner] = sum(n for _, n in rows)
            out[owner] = [tuple(e) for blob, _ in rows for e in orjson.loads(blob)]
        return out

    def anchors_of(self, owners: Mapping[str, Iterable[str]]) -> dict[str, int]:
        """How many of each note's links have an anchor (what its snippet renders), from
        ``ends`` without decoding it (folder -> its notes; every owner asked is answered)."""
        def run(db: sqlite3.Connection) -> dict[str, int]:
            mirror = self._mirror_for(db, owners)
            if mirror is None:
                rows = self._select_by_owner(db, owners, "anchors FROM ends WHERE owner IN ", "", lambda row: row[0])
                return {o: sum(n) for o, n in rows.items()}
            got = mirror.ends.get
            return {o: row[1] if (row := got((o, folder))) is not None else 0 for folder, os_ in owners.items() for o in os_}
        return self._guard(run)

    def out_ends_of_type(self, owners: Mapping[str, Iterable[str]], name: str) -> dict[str, list[End]]:
        """``ends_of_many`` kept to each note's links (not backlinks) of one type: from the
        mirror in a warm process, no note's data decoded (a search's grouping asks for
        the provenance links of its 40 best hits); every owner asked has a list."""
        def run(db: sqlite3.Connection) -> dict[str, list[End]] | None:
            mirror = self._mirror_for(db, owners)
            if mirror is None:
                return None
            got = mirror.of_type(name).get
            return {o: got((o, folder)) or [] for folder, os_ in owners.items() for o in os_}
        out = self._guard(run)
        if out is None:  # (no mirror: the whole ends, kept to the type)
            out = {o: links_of_type(ends, name) for o, ends in self.ends_of_many(owners).items()}
        return out

    def _mirror_for(self, db: sqlite3.Connection, owners: Mapping[str, Iterable[str]]) -> _Mirror | None:
        """The mirror (None: not kept), its folders of these notes compared with their
        files first (``_fresh``) and re-read into it where they differ."""
        mirror = self._mirrored(db)
        if mirror is not None and self._fresh(db, *owners, known=mirror.stamps):
            mirror = self._mirrored(db)  # (the folders re-read)
            assert mirror is not None
        return mirror

    def _by_owner(self, owners: Mapping[str, Iterable[str]], query: str, order: str, make: Any) -> dict[str, list]:
        """``SELECT <query> (<owners>) <order>``: ``make(row)`` for each row of an owner's
        own folder (a note's sides are in its folder's sidecar), the folders brought in
        step first."""
        return self._guard(self._select_by_owner, owners, query, order, make)

    def _select_by_owner(self, db: sqlite3.Connection, owners: Mapping[str, Iterable[str]], query: str, order: str,
                         make: Any) -> dict[str, list]:
        home = {o: folder for folder, os_ in owners.items() for o in os_}
        wanted = list(home)
        self._fresh(db, *owners)
        out: dict[str, list] = {o: [] for o in wanted}
        for i in range(0, len(wanted), 500):  # under SQLite's bound-parameter limit
            part = wanted[i:i + 500]
            marks = ",".join("?" * len(part))
            for row in db.execute(f"SELECT owner, folder, {query}({marks}) {order}", part):  # noqa: S608 (fixed text)
                if row[1] == home[row[0]]:
                    out[row[0]].append(make(row[2:]))
        return out

    # -- the mirror ----------------------------------------------------------------------------
    WARM_AFTER = 2  # walks in a process before it keeps the mirror
    # A warm process compares a folder's files with its mirror at most once a second, as
    # the turn memory does its shards: its own writes and other processes' come through
    # the index at once; an edit behind the index's back (by hand, another tool) shows
    # within a second (docs/DESIGN.md, "Search"). A search touches ~20 folders, two stat
    # calls each: a third of a warm search's link reads at 100k notes.
    RECHECK_AFTER = 1.0

    def _mirrored(self, db: sqlite3.Connection) -> _Mirror | None:
        """Every note's ``ends`` and every folder's stamps in memory, in step with the
        index: made once this process has walked ``WARM_AFTER`` times (a one-off search
        does not pay the 0.2 s it costs at 100k notes), then brought up to the index's
        change number by the changes since (once per ``settled`` block, and again after
        this process changed rows). None: not made (yet), or an index in memory."""
        if self.path is None:
            return None
        settled = getattr(self._settled, "folders", None) is not None
        mirror = self._mirror
        if mirror is None:
            if settled and not self._settled.counted:
                self._settled.counted = True
                self._walks += 1
            if self._walks < self.WARM_AFTER:
                return None
        elif settled and self._settled.mirrored == self._changed_here:
            return mirror
        ask = "SELECT key, value FROM meta WHERE key IN ('created', 'seq', 'forgot')"
        meta = dict(db.execute(ask).fetchall())
        if mirror is None or meta["created"] != mirror.created or meta["seq"] != str(mirror.seq):
            with _write(db, "BEGIN"):  # one moment of meta, changes, ends and folders
                meta = dict(db.execute(ask).fetchall())
                seq = int(meta["seq"])
                if mirror is None or mirror.created != meta["created"] or int(meta.get("forgot", 0)) > mirror.seq:
                    mirror = self._mirror = _load_mirror(db, meta["created"], seq)
                elif seq != mirror.seq:
                    self.rereads += _follow(db, mirror, seq)
        if settled:
            self._settled.mirrored = self._changed_here
        return mirror

    def folder_rows(self, folder: str) -> list[str]:
        """Every link record of a folder as the raw JSON indexed (legacy entries as links)."""
        def run(db: sqlite3.Connection) -> list[str]:
            self._fresh(db, folder)
            return [raw for (raw,) in db.execute("SELECT raw FROM links WHERE folder=? ORDER BY legacy, rowid", (folder,))]
        return self._guard(run)

    def folder_links(self, folder: str) -> list[StoredLink]:
        """Every link record of a folder (legacy entries read as related_to links)."""
        def run(db: sqlite3.Connection) -> list[str]:
            self._fresh(db, folder)
            return [raw for (raw,) in db.execute("SELECT raw FROM links WHERE folder=? ORDER BY legacy, rowid", (folder,))]
        return [_link(raw) for raw in self._guard(run)]

    def entry(self, folder: str, link_id: str, direction: str) -> StoredLink | None:
        """The record with this id and direction in a folder (None: there is none)."""
        def run(db: sqlite3.Connection) -> Any:
            self._fresh(db, folder)
            return db.execute("SELECT raw FROM links WHERE folder=? AND direction=? AND id=? AND legacy=0 ORDER BY rowid DESC",
                              (folder, direction, link_id)).fetchone()
        row = self._guard(run)
        return _link(row[0]) if row else None

    def owners(self, folder: str, link_id: str, direction: str) -> list[str]:
        """The notes whose side the records with this id are (normally one)."""
        def run(db: sqlite3.Connection) -> list[str]:
            self._fresh(db, folder)
            return [o for (o,) in db.execute("SELECT DISTINCT owner FROM links WHERE folder=? AND direction=? AND id=?",
                                             (folder, direction, link_id))]
        return self._guard(run)

    def problems(self, folder: str) -> FolderProblems:
        """Why a folder's sidecar cannot be read, or which of its entries are rejected."""
        def run(db: sqlite3.Connection) -> Any:
            self._fresh(db, folder)
            return db.execute("SELECT broken, rejected FROM folders WHERE folder=?", (folder,)).fetchone()
        row = self._guard(run)
        if row is None:
            return FolderProblems()
        return FolderProblems(row[0], [Rejected.model_validate(r) for r in json.loads(row[1])])

    def sidecar(self, folder: str) -> Sidecar:
        """A folder's links sorted out (links, legacy entries, rejected entries). Raises
        SidecarError when the folder's sidecar cannot be read at all."""
        def run(db: sqlite3.Connection) -> Any:
            self._fresh(db, folder)
            head = db.execute("SELECT broken, rejected, legacy FROM folders WHERE folder=?", (folder,)).fetchone()
            raws = [raw for (raw,) in db.execute("SELECT raw FROM links WHERE folder=? AND legacy=0 ORDER BY rowid", (folder,))]
            return head, raws
        head, raws = self._guard(run)
        if head is None:
            return Sidecar()
        if head[0]:
            raise SidecarError(head[0])
        return Sidecar([_link(r) for r in raws], json.loads(head[2]), [Rejected.model_validate(r) for r in json.loads(head[1])])

    def folders(self) -> list[str]:
        """Folders holding a sidecar or a link log (hidden folders are not walked); in a
        ``settled`` block, walked once."""
        walked = getattr(self._settled, "walked", None)
        if walked is not None:
            return list(walked)
        out = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and utf8_name(d))
            if SIDECAR in filenames or SIDECAR_LOG in filenames:
                rel = os.path.relpath(dirpath, self.root)
                out.append("" if rel == "." else rel.replace(os.sep, "/"))
        if getattr(self._settled, "folders", None) is not None:
            self._settled.walked = out
        return list(out)

    def outgoing_raw(self, types: Iterable[str] | None = None) -> list[tuple[str, bool]]:
        """Every outgoing link record as stored (raw JSON, legacy?), after bringing every
        folder in step: each two-sided link once, from its links side. ``types``: only
        links of these types (picked in SQL: a dream wants a few thousand of 300k)."""
        self.refresh()
        wanted = None if types is None else json.dumps(sorted(set(types)))

        def run(db: sqlite3.Connection) -> list[tuple[str, bool]]:
            if wanted is None:
                rows = db.execute("SELECT raw, legacy FROM links WHERE direction='links' ORDER BY folder, legacy, rowid")
            else:
                rows = db.execute("SELECT raw, legacy FROM links WHERE direction='links' AND link_type "
                                  "IN (SELECT value FROM json_each(?)) ORDER BY folder, legacy, rowid", (wanted,))
            return [(raw, bool(legacy)) for raw, legacy in rows]
        return self._guard(run)

    def stats(self, top: int = 10, *, refresh: bool = True) -> tuple[int, dict[str, int], list[tuple[str, int]]]:
        """Outgoing links: how many, how many of each type, and the ``top`` notes with the
        most link records (links and backlinks), counted in SQL: no record is parsed.
        ``refresh=False`` when every folder was just brought in step (a check run)."""
        if refresh:
            self.refresh()

        def run(db: sqlite3.Connection) -> tuple[int, dict[str, int], list[tuple[str, int]]]:
            # Kept in meta by change number: a lint after a note edit (no link written)
            # does not count 600k records again.
            key = "stats:" + ":".join(str(r[0]) for r in db.execute(
                "SELECT value FROM meta WHERE key IN ('created', 'seq') ORDER BY key")) + f":{top}"
            kept = db.execute("SELECT value FROM meta WHERE key='stats'").fetchone()
            if kept is not None:
                was, _, body = kept[0].partition("\n")
                if was == key:
                    count, types, degree = json.loads(body)
                    return count, types, [(o, n) for o, n in degree]
            types = {str(t): n for t, n in db.execute(
                "SELECT link_type, count(*) FROM links WHERE direction='links' GROUP BY 1 ORDER BY 2 DESC")}
            degree = [(o, n) for o, n in db.execute(
                "SELECT owner, count(*) FROM links GROUP BY owner ORDER BY 2 DESC, owner LIMIT ?", (top,))]
            out = (sum(types.values()), types, degree)
            try:
                with _write(db):
                    db.execute("INSERT OR REPLACE INTO meta VALUES ('stats', ?)", (key + "\n" + json.dumps(out),))
            except sqlite3.OperationalError:
                pass  # busy or read-only: counted again next time
            return out
        return self._guard(run)

    def legacy_targets(self) -> set[str]:
        """The notes an old ``{uris, reason}`` entry points at (they have no side of their own)."""
        self.refresh()
        # From each folder's legacy entries (a small table), not a scan of every record
        # for the legacy ones (no index finds them: ~0.15 s of a lint at 100k notes).
        held = self._guard(lambda db: db.execute("SELECT folder, legacy FROM folders WHERE legacy != '[]'").fetchall())
        return {link.to_uri for folder, legacy in held for link in _legacy_links(folder, json.loads(legacy))}

    def outgoing(self, types: Iterable[str] | None = None) -> Iterator[StoredLink]:
        for raw, _legacy in self.outgoing_raw(types):
            yield _link(raw)

    def materialized(self, folder: str) -> list:
        """A folder's raw entries as its files hold them (the list with its log applied).
        Raises SidecarError when they cannot be read."""
        files = read_folder(self.root, self._folder_path(folder), folder)
        if files.broken:
            raise SidecarError(files.broken)
        return files.rows

    def effective_text(self, folder: str) -> str | None:
        """The folder's sidecar as one text: the file itself when it has no log, else the
        list with its log applied (None: no sidecar)."""
        path = self._folder_path(folder)
        if not (path / SIDECAR_LOG).exists():
            try:
                return (path / SIDECAR).read_text(encoding="utf-8")
            except FileNotFoundError:
                return None
        rows = self.materialized(folder)
        return dump_rows(rows) if rows else None

    def in_log_mode(self, folder: str) -> bool:
        path = self._folder_path(folder)
        return _size(_stamp(path / SIDECAR)) > LOG_MODE_BYTES or (path / SIDECAR_LOG).exists()

    # -- change tracking ---------------------------------------------------------------------
    def seq(self) -> int:
        """The index's change number: it moves on every write and every re-read folder."""
        return int(self._guard(lambda db: db.execute("SELECT value FROM meta WHERE key='seq'").fetchone()[0]))

    def created(self) -> str:
        """When this index was (re)built: change numbers from before it mean nothing."""
        return str(self._guard(lambda db: db.execute("SELECT value FROM meta WHERE key='created'").fetchone()[0]))

    def writes(self) -> int:
        """How many link writes (by any process) the index has seen: it moves when links
        were written, not when a folder was merely re-read."""
        return int(self._guard(lambda db: db.execute("SELECT value FROM meta WHERE key='writes'").fetchone()[0]))

    def changes_since(self, seq: int) -> LinkChanges:
        """Records written or removed, and folders re-read whole, after ``seq``."""
        def run(db: sqlite3.Connection) -> LinkChanges:
            with _write(db, "BEGIN"):  # one snapshot of meta and changes
                meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
                out = LinkChanges(seq=int(meta["seq"]))
                if seq < int(meta["created"]):
                    out.everything = True
                    return out
                for folder, link_id, direction, owner in db.execute(
                        "SELECT folder, id, direction, owner FROM changes WHERE seq > ?", (seq,)):
                    if link_id is None:
                        out.folders.add(folder)
                    else:
                        out.links.add((folder, link_id, direction))
                    if owner is not None:
                        out.owners.add(owner)
                return out
        return self._guard(run)

    def forget_changes(self, upto: int) -> None:
        """Drop the change records up to ``upto``: the checks' memo (their one reader) has
        seen them. Without this the table grows by a row per link end written, forever."""
        def run(db: sqlite3.Connection) -> None:
            with _write(db):
                db.execute("DELETE FROM changes WHERE seq <= ?", (upto,))
                # (a mirror from before ``upto`` cannot follow these changes: it is made again)
                db.execute("INSERT INTO meta VALUES ('forgot', ?) ON CONFLICT(key) DO UPDATE SET value=max(CAST(value AS INTEGER), ?)",
                           (str(upto), upto))
        self._guard(run)

    # -- writes ------------------------------------------------------------------------------
    def apply(self, ops: list[LinkOp], tx: str | None) -> None:
        """Apply a journal's link operations: files first (``write_folder``), then, per
        folder, the same operations on its rows and its new stamps in one SQLite
        transaction. A folder whose rows were not in step with its files before the write
        (a replay after a kill, an edit by hand) is re-read instead."""
        by_folder: dict[str, list[LinkOp]] = {}
        for op in ops:
            by_folder.setdefault(op.folder, []).append(op)
        for folder, folder_ops in by_folder.items():
            self.apply_folder(folder, folder_ops, tx)

    def apply_folder(self, folder: str, ops: list[LinkOp], tx: str | None) -> None:
        path = self._folder_path(folder)

        def before(db: sqlite3.Connection) -> bool:
            row = db.execute("SELECT base, log FROM folders WHERE folder=?", (folder,)).fetchone()
            return (tuple(row) if row else (None, None)) == _stamps(path)
        in_step = self._guard(before)
        write_folder(self.root, path, folder, ops, tx)
        self._guard(self._record, folder, ops, in_step)

    def _record(self, db: sqlite3.Connection, folder: str, ops: list[LinkOp], in_step: bool) -> None:
        self._changed_here += 1
        with _write(db):
            _next(db, "writes")
            if not in_step:
                self._reindex(db, folder)
                return
            seq = _next(db, "seq")
            # (id, direction, a note at either end): what the incremental check remakes
            touched: set[tuple[str, str, str]] = set()
            for op in ops:
                if isinstance(op, PutLink):
                    raw = op.link.model_dump(mode="json")
                    row = _row(folder, op.link.id, op.link.direction, owner_of(op.link), raw)
                    gone = db.execute(f"SELECT rowid, id, {_ENDS} FROM links WHERE folder=? AND direction=? AND legacy=0 AND id=?",
                                      (folder, row[2], row[1])).fetchall()
                    gone += db.execute(f"SELECT rowid, id, {_ENDS} FROM links INDEXED BY links_owner WHERE owner=? AND direction=? AND key=? AND folder=? AND legacy=0",
                                       (row[3], row[2], row[4], folder)).fetchall()
                    db.executemany("DELETE FROM links WHERE rowid=?", [(r,) for r, *_ in gone])
                    db.execute(_INSERT, row)
                    for _, i, a, b in gone:
                        touched |= {(i, row[2], a), (i, row[2], b)}
                    touched |= {(row[1], row[2], op.link.from_uri), (row[1], row[2], op.link.to_uri)}
                elif isinstance(op, RemoveLink):
                    ends = db.execute(f"SELECT {_ENDS} FROM links WHERE folder=? AND direction=? AND id=? AND legacy=0",
                                      (folder, op.direction, op.id)).fetchall()
                    db.execute("DELETE FROM links WHERE folder=? AND direction=? AND id=? AND legacy=0", (folder, op.direction, op.id))
                    touched |= {(op.id, op.direction, uri) for pair in ends for uri in pair} or {(op.id, op.direction, None)}  # type: ignore[arg-type]
                else:
                    head = db.execute("SELECT legacy FROM folders WHERE folder=?", (folder,)).fetchone()
                    legacy = json.loads(head[0]) if head else []
                    old_owners = {o for (o,) in db.execute("SELECT DISTINCT owner FROM links WHERE folder=? AND legacy=1", (folder,))}
                    if apply_raw(legacy, op_row(op)):
                        db.execute("UPDATE folders SET legacy=? WHERE folder=?", (json.dumps(legacy, ensure_ascii=False), folder))
                        db.execute("DELETE FROM links WHERE folder=? AND legacy=1", (folder,))
                        db.executemany(_INSERT, _legacy_rows(folder, legacy))
                    touched |= {(op.entry_id or "legacy", "links", o) for o in old_owners | {op.to_uri}}
            db.executemany("INSERT INTO changes VALUES (?, ?, ?, ?, ?)", [(seq, folder, i, d, o) for i, d, o in sorted(touched, key=str)])
            _remake_ends(db, folder, {o for _, _, o in touched if o is not None})
            base, log = _stamps(self._folder_path(folder))
            if base is None and log is None:
                db.execute("DELETE FROM folders WHERE folder=?", (folder,))
            elif db.execute("UPDATE folders SET base=?, log=? WHERE folder=?", (base, log, folder)).rowcount == 0:
                db.execute("INSERT INTO folders VALUES (?, ?, ?, NULL, '[]', '[]')", (folder, base, log))

    def restore(self, folder: str, text: str | None) -> None:
        """Put a folder's whole sidecar back as ``text`` (None: no sidecar); its log goes."""
        path = self._folder_path(folder)
        if text is None:
            remove_file(path / SIDECAR)
        else:
            atomic_write_text(path / SIDECAR, text)
        remove_file(path / SIDECAR_LOG)

        def run(db: sqlite3.Connection) -> None:
            with _write(db):
                _next(db, "writes")
                self._reindex(db, folder)
        self._guard(run)

    # -- for tests and tools -----------------------------------------------------------------
    def indexed_rows(self, fresh_only: bool = True) -> dict[str, list[tuple]]:
        """The rows of each folder as indexed, and its notes' ``ends``, by folder, without
        re-reading anything; with ``fresh_only`` only folders whose stamps match their files
        (what a read would trust). A rebuild from the files must give the same rows."""
        def run(db: sqlite3.Connection) -> dict[str, list[tuple]]:
            out: dict[str, list[tuple]] = {}
            for folder, base, log in db.execute("SELECT folder, base, log FROM folders").fetchall():
                if fresh_only and (base, log) != _stamps(self._folder_path(folder)):
                    continue
                out[folder] = sorted(tuple(r) for r in db.execute(
                    "SELECT folder, id, direction, owner, key, legacy, raw, other, link_type, weight, description, anchored "
                    "FROM links WHERE folder=?", (folder,)))
                # each note's walk data (``ends``), its records in a fixed order
                out[folder] += sorted(("ends", owner, json.dumps(sorted(orjson.loads(data))), anchors) for owner, data, anchors
                                      in db.execute("SELECT owner, data, anchors FROM ends WHERE folder=?", (folder,)))
            return out
        return self._guard(run)


class _write:
    """BEGIN IMMEDIATE … COMMIT (ROLLBACK on error); nested uses join the outer one."""

    def __init__(self, db: sqlite3.Connection, begin: str = "BEGIN IMMEDIATE") -> None:
        self.db = db
        self.begin = begin
        self.outer = False

    def __enter__(self) -> sqlite3.Connection:
        if not self.db.in_transaction:
            self.db.execute(self.begin)
            self.outer = True
        return self.db

    def __exit__(self, kind: object, *_: object) -> None:
        if self.outer:
            self.db.execute("ROLLBACK" if kind else "COMMIT")


def _load_mirror(db: sqlite3.Connection, created: str, seq: int) -> _Mirror:
    ends: dict[tuple[str, str], tuple[str, int]] = {}
    by_folder: dict[str, set[str]] = {}
    for owner, folder, data, anchors in db.execute("SELECT owner, folder, data, anchors FROM ends"):
        ends[owner, folder] = (data, anchors)
        by_folder.setdefault(folder, set()).add(owner)
    stamps = {f: (b, l) for f, b, l in db.execute("SELECT folder, base, log FROM folders")}
    return _Mirror(created, seq, ends, by_folder, stamps)


def _follow(db: sqlite3.Connection, mirror: _Mirror, seq: int) -> int:
    """Bring a mirror from its change number to ``seq``: the notes whose records changed
    since, or every note of a folder re-read whole, and the stamps of their folders; how
    many folders were re-read whole."""
    changed = db.execute("SELECT DISTINCT folder, owner FROM changes WHERE seq > ?", (mirror.seq,)).fetchall()
    whole = {f for f, owner in changed if owner is None}
    for folder in whole:
        for owner in list(mirror.by_folder.get(folder, ())):
            mirror.put(owner, folder, None)
        for owner, data, anchors in db.execute("SELECT owner, data, anchors FROM ends WHERE folder=?", (folder,)):
            mirror.put(owner, folder, (data, anchors))
    for folder, owner in changed:
        if owner is None or folder in whole:
            continue
        row = db.execute("SELECT data, anchors FROM ends WHERE owner=? AND folder=?", (owner, folder)).fetchone()
        mirror.put(owner, folder, (row[0], row[1]) if row is not None else None)
    for folder in {f for f, _ in changed}:
        row = db.execute("SELECT base, log FROM folders WHERE folder=?", (folder,)).fetchone()
        if row is None:
            mirror.stamps.pop(folder, None)
        else:
            mirror.stamps[folder] = (row[0], row[1])
    mirror.seq = seq
    return len(whole)


def _remake_ends(db: sqlite3.Connection, folder: str | None = None, owners: Iterable[str] | None = None) -> None:
    """Remake ``ends`` from ``links``: of these notes in ``folder``, of every note in it
    (no ``owners``), or of the whole index (no ``folder``, a first build)."""
    if folder is None:
        db.execute("DELETE FROM ends")
        db.execute(f"INSERT INTO ends SELECT owner, folder, {_END_COLUMNS} FROM links GROUP BY owner, folder")  # noqa: S608
    elif owners is None:
        db.execute("DELETE FROM ends WHERE folder=?", (folder,))
        db.execute(f"INSERT INTO ends SELECT owner, folder, {_END_COLUMNS} FROM links WHERE folder=? GROUP BY owner",  # noqa: S608
                   (folder,))
    else:
        for owner in owners:
            db.execute("DELETE FROM ends WHERE owner=? AND folder=?", (owner, folder))
            db.execute(f"INSERT INTO ends SELECT owner, folder, {_END_COLUMNS} FROM links INDEXED BY links_owner "  # noqa: S608
                       "WHERE owner=? AND folder=? GROUP BY owner", (owner, folder))


def _next(db: sqlite3.Connection, counter: str) -> int:
    value = int(db.execute("SELECT value FROM meta WHERE key=?", (counter,)).fetchone()[0]) + 1
    db.execute("UPDATE meta SET value=? WHERE key=?", (str(value), counter))
    return value
