"""A folder's link sidecar on disk: `.relations.json`, a JSON list with one entry per line,
and, once that file is large, `.relations.log.jsonl` beside it (docs/DESIGN.md, "Vault
format": link logs). The files are the truth; the link index (engine.storage.linkindex) is
derived from them.

Below ``LOG_MODE_BYTES`` a link write rewrites the list. Above it, each unit of work
appends one line ``{"tx": <journal id>, "ops": [...]}`` to the log, and the log is folded
back into the list (compaction) once it outgrows ``COMPACT_RATIO`` of the list. Readers
apply the list, then the log's complete lines in order; a torn last line (a writer
killed mid-append) is ignored and cut off before the next append. Why a log at all: a
link write into a folder of 30,000 notes (a vault's `entities/` at 100k notes, a 57 MB
list) would otherwise rewrite the whole list, ~150 ms, where the target is 20 ms.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ..errors import SidecarError
from ..model.files import SIDECAR_BYTES, read_bounded
from ..model.links import (
    SIDECAR,
    Lines,
    StoredLink,
    dump_rows,
    is_entry,
    is_legacy,
    load_rows,
    load_rows_with_lines,
    salvage_rows,
    too_deep,
)
from ..model.yamlio import MAX_DEPTH
from .atomic import atomic_write_text, fsync_dir_now, remove_file
from .jsonl import append_bytes, whole_lines

SIDECAR_LOG = ".relations.log.jsonl"  # a big folder's appended link writes (see the module doc)
# Above this size a folder's sidecar takes appends instead of a rewrite per write. A
# rewrite (parse, apply, dump, write, fsync) costs ~10 ms per MB here; 256 kB (~800
# entries) keeps it near 3 ms, while an append costs ~1 ms at any size.
LOG_MODE_BYTES = 256_000
# Compaction once the log exceeds this fraction of the list: the list is rewritten once
# per COMPACT_RATIO * its size of appended bytes, so each appended byte costs at most
# 1 / COMPACT_RATIO bytes of rewrite (amortised O(1) per write), and a reader replays at
# most a quarter of the list's size.
COMPACT_RATIO = 0.25


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

    def __init__(self, rows: list) -> None:
        self._reset(rows)

    def _reset(self, rows: list) -> None:
        self.slots: dict[int, Any] = dict(enumerate(rows))
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
        raw = self.slots.pop(slot)
        self.by_id[(raw.get("direction"), raw.get("id"))].discard(slot)
        self.by_key[(raw.get("direction"), _key(raw))].discard(slot)

    def rows(self) -> list:
        return list(self.slots.values())

    def apply(self, op: dict) -> bool:
        kind = op.get("op")
        if kind == "put_link":
            new, place = op["link"], op.get("at")
            at = place if isinstance(place, int) else None  # (a put in place: undo)
            direction = new.get("direction")
            same = self.by_id.get((direction, new.get("id")), set()) | self.by_key.get((direction, _key(new)), set())
            order = None if at is None else list(self.slots)  # the rows' order, when a put has a place
            if len(same) == 1 and self.slots[slot := next(iter(same))] == new and (
                    at is None or order is None or order.index(slot) == min(at, len(order) - 1)):
                return False  # already there (a replay)
            for slot in same:
                self._drop(slot)
            self.slots[self.next] = new
            self._index(self.next, new)
            if at is not None and order is not None:
                order = [s for s in order if s not in same] if same else order
                order.insert(max(0, min(at, len(order))), self.next)
                self.slots = dict(zip(order, map(self.slots.__getitem__, order), strict=True))
            self.next += 1
            return True
        if kind == "remove_link":
            same = set(self.by_id.get((op.get("direction"), op.get("id")), set()))
            for slot in same:
                self._drop(slot)
            return bool(same)
        rows = self.rows()  # a legacy entry: rare, done on the list
        changed = apply_raw(rows, op)
        if changed:
            self._reset(rows)
        return changed


# -- the files of one folder --------------------------------------------------------------------
FileStamp = str | None  # "inode:mtime_ns:size", None: no file


def _stamp(path: str | Path) -> FileStamp:
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return f"{st.st_ino}:{st.st_mtime_ns}:{st.st_size}"


def _stamps(folder_path: Path) -> tuple[FileStamp, FileStamp]:
    base = os.fspath(folder_path)  # (joined as text: a search stamps dozens of folders)
    return _stamp(os.path.join(base, SIDECAR)), _stamp(os.path.join(base, SIDECAR_LOG))


def _size(stamp: FileStamp) -> int:
    return int(stamp.rsplit(":", 1)[1]) if stamp else 0


@dataclass
class FolderFiles:
    """What a folder's sidecar and log hold, read together."""

    rows: list = field(default_factory=list)  # the raw entries after the log's complete lines
    broken: str | None = None  # why the folder cannot be read at all
    base: FileStamp = None
    log: FileStamp = None
    has_log: bool = False
    lines: Lines = field(default_factory=dict)  # the list's entries with their lines (``read_folder(lines=True)``)

    @property
    def stamp(self) -> str:
        """The files as they were when read (``folder_stamp``)."""
        return f"{self.base or '-'}|{self.log or '-'}"


def _file_bytes(root: Path, path: Path, where: str) -> bytes:
    """A sidecar's or link log's bytes (bounded, a regular file only: engine.model.files),
    or SidecarError naming why they cannot be read (FileNotFoundError: no file)."""
    if path.is_symlink():
        real = Path(os.path.realpath(path))
        if Path(os.path.realpath(root)) not in real.parents:
            raise SidecarError(f"{where}: a symlink to outside the vault; not read")
    try:
        return read_bounded(path, SIDECAR_BYTES)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise SidecarError(f"{where}: cannot be read ({exc.strerror or exc})") from None


def _base_text(root: Path, path: Path, where: str) -> str:
    """A sidecar file's text, or SidecarError naming why it cannot be read."""
    data = _file_bytes(root, path, where)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SidecarError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _log_record(line: bytes) -> list[dict]:
    """One log line's ops; ValueError when it is not a link-log record."""
    try:
        record = json.loads(line)
        ops = record["ops"]
    except (KeyError, TypeError, RecursionError, MemoryError):
        raise ValueError("not a link-log record") from None
    if not isinstance(ops, list) or not all(
            isinstance(o, dict) and o.get("op") in _KINDS and (o["op"] != "put_link" or isinstance(o.get("link"), dict))
            for o in ops):
        raise ValueError("not a link-log record")
    return ops


def _log_records(data: bytes, where: str) -> Iterator[list[dict]]:
    """Each of the log's complete lines' ops; a torn last line (no newline) is left out."""
    for n, line in whole_lines(data):
        try:
            yield _log_record(line)
        except ValueError:
            raise SidecarError(f"{where}: line {n} is not a link-log record") from None


def read_folder(root: Path, folder_path: Path, folder: str, *, lines: bool = False) -> FolderFiles:
    """Read a folder's sidecar and log (stamps taken before reading, so a change made
    while we read shows as a stale stamp later). With ``lines``, each entry of the list
    with its line, for ``dump_rows`` (when the list is in memlink's one-a-line format)."""
    base_stamp, log_stamp = _stamps(folder_path)
    out = FolderFiles(base=base_stamp, log=log_stamp, has_log=log_stamp is not None)
    try:
        if base_stamp is not None:
            out.rows, texts = load_rows_with_lines(_base_text(root, folder_path / SIDECAR, sidecar_rel(folder)),
                                                   sidecar_rel(folder))
            if lines and texts is not None:
                out.lines = {id(r): (r, t) for r, t in zip(out.rows, texts, strict=True)}
        if log_stamp is not None:
            where = _log_rel(folder)
            try:
                data = _file_bytes(root, folder_path / SIDECAR_LOG, where)
            except FileNotFoundError as exc:
                raise SidecarError(f"{where}: cannot be read ({exc.strerror or exc})") from None
            rows = RawRows(out.rows)
            for ops in _log_records(data, where):
                for op in ops:
                    rows.apply(op)
            out.rows = rows.rows()
    except FileNotFoundError as exc:  # gone since it was stamped
        out.rows, out.broken = [], f"{sidecar_rel(folder)}: cannot be read ({exc.strerror or exc})"
    except SidecarError as exc:
        out.rows, out.broken = [], str(exc)
    return out


def _log_rel(folder: str) -> str:
    return f"{folder}/{SIDECAR_LOG}" if folder else SIDECAR_LOG


@dataclass
class Salvaged:
    """What ``salvage_folder`` could read of a folder whose files do not read whole."""

    rows: list = field(default_factory=list)  # the raw entries: the list's readable lines, the log's records applied
    lost: list[tuple[str, int, bytes, str]] = field(default_factory=list)  # (file, line, bytes, why) of each other line


def salvage_folder(root: Path, folder_path: Path, folder: str) -> Salvaged:
    """Every entry a folder's list still holds and every record of its log that still
    reads, applied in order (a torn last log line, which no reader applies, is left out),
    and each line that does not read. For `check --fix`; SidecarError when a file cannot
    be read at all (not UTF-8 is no reason: such a line is one that does not read)."""
    out = Salvaged()
    rel = sidecar_rel(folder)
    try:
        data = _file_bytes(root, folder_path / SIDECAR, rel)
    except FileNotFoundError:
        data = b""
    try:
        out.rows = load_rows(data.decode("utf-8"), rel)
        if too_deep(out.rows):
            raise SidecarError("an entry nested too deep")
    except (UnicodeDecodeError, SidecarError):
        out.rows, bad = salvage_rows(data.decode("utf-8", "surrogateescape"))
        out.lost += [(SIDECAR, n, line.encode("utf-8", "surrogateescape"), why) for n, line, why in bad]
    try:
        log = _file_bytes(root, folder_path / SIDECAR_LOG, _log_rel(folder))
    except FileNotFoundError:
        return out
    rows = RawRows(out.rows)
    for n, line in whole_lines(log):
        try:
            ops = _log_record(line)
            if too_deep(ops):
                raise ValueError(f"nested more than {MAX_DEPTH} levels deep")
            for op in ops:
                rows.apply(op)
        except (ValueError, KeyError, TypeError) as exc:
            why = f"not valid JSON: {exc.msg}" if isinstance(exc, json.JSONDecodeError) else str(exc) or "not a link-log record"
            out.lost.append((SIDECAR_LOG, n, line, why))
    out.rows = rows.rows()
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
    files = read_folder(root, folder_path, folder, lines=True)
    if files.broken:
        raise SidecarError(files.broken)
    rows = RawRows(files.rows)
    changed = False
    for op in ops:
        changed = rows.apply(op_row(op)) or changed
    if changed or files.has_log:
        if rows.slots:
            atomic_write_text(base, dump_rows(rows.rows(), files.lines))
        else:
            remove_file(base)
        remove_file(log)  # its lines are in the list now
    return changed or files.has_log


def compact(root: Path, folder_path: Path, folder: str) -> None:
    """Fold the log into the list: the list is rewritten atomically from list + log, then
    the log removed. A kill between the two leaves a log whose operations are already in
    the list; applying them again changes nothing (``apply_raw`` is idempotent)."""
    files = read_folder(root, folder_path, folder, lines=True)
    if files.broken:
        raise SidecarError(files.broken)
    if files.rows:
        atomic_write_text(folder_path / SIDECAR, dump_rows(files.rows, files.lines))
    else:
        remove_file(folder_path / SIDECAR)
    # The log holds earlier units' operations, whose journals are gone: the new list is made
    # durable before the log goes, even inside a block that syncs its folders once at its end.
    fsync_dir_now(folder_path)
    remove_file(folder_path / SIDECAR_LOG)


def folder_stamp(folder_path: Path) -> str:
    """What a folder's link files are now, as one text the index compares: the list's
    and the log's identity (inode, mtime, size), "-" for a file that is not there."""
    base, log = _stamps(folder_path)
    return f"{base or '-'}|{log or '-'}"


def folder_text(root: Path, folder_path: Path, folder: str) -> str | None:
    """A folder's links as one sidecar text: the file itself when it has no log (byte for
    byte), else the list with its log applied (None: no links file). Raises SidecarError
    when they cannot be read."""
    if not (folder_path / SIDECAR_LOG).exists():
        try:
            return _base_text(root, folder_path / SIDECAR, sidecar_rel(folder))
        except FileNotFoundError:
            return None
    files = read_folder(root, folder_path, folder, lines=True)
    if files.broken:
        raise SidecarError(files.broken)
    return dump_rows(files.rows, files.lines) if files.rows else None


def rewritten_whole(folder_path: Path) -> bool:
    """Whether a link write rewrites this folder's list (a small one, no log) rather than
    appending to its log: then a record's place in the list is kept by undo."""
    return _size(_stamp(folder_path / SIDECAR)) <= LOG_MODE_BYTES and not (folder_path / SIDECAR_LOG).exists()
