"""Intent journal: multi-file changes (a link on two sides, a note plus the corrected
ranges of links into it) land completely or not at all.

A transaction is a list of idempotent operations. It is first written atomically as one
journal file in `.memlink/journal/`; then the operations are applied; then the journal
file is removed. A process killed at any instant leaves either no journal (nothing was
touched) or a complete journal, which the next writer replays before doing anything
else (roll-forward). Replaying twice gives the same result. Link operations are
applied by the link index (engine/storage/linkindex.py), which names the journal on a big
folder's log line so that a replay appends it once (docs/DESIGN.md, "Units of work").
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, TypeAdapter, ValidationError

from ..errors import DiskFull, MemlinkError, SidecarError, UriError
from ..model.links import REJECTED, SIDECAR
from ..model.text import printable_path
from ..model.uris import resolve_uri
from .atomic import atomic_write_text, folder_syncs_once, full_disk_cause, parallel_writes, remove_file
from .jsonl import append_jsonl
from .sidecars import SIDECAR_LOG, PutLink, RemoveLegacy, RemoveLink, _Op, sidecar_rel
from .store import STATE_DIR

if TYPE_CHECKING:
    from .linkindex import LinkIndex

SESSIONS = "sessions"  # the folder of chat session logs


class WriteFile(_Op):
    """Write ``text`` to ``uri``. ``before`` is the hash of the file when the change was
    planned (None: no file): a replay never overwrites a file edited since."""

    op: Literal["write_file"] = "write_file"
    uri: str
    text: str
    before: str | None = None


class DeleteFile(_Op):
    op: Literal["delete_file"] = "delete_file"
    uri: str
    before: str | None = None


class WriteSidecar(_Op):
    """Put a whole sidecar back as ``text`` (undo of an old action, `check --fix`); None
    removes it. The folder's link log goes too: the text is the folder's whole content.
    ``before``/``log_before``: hashes of the sidecar and its log when planned."""

    op: Literal["write_sidecar"] = "write_sidecar"
    folder: str
    text: str | None
    before: str | None = None
    log_before: str | None = None


def file_hash(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


class AppendRecords(_Op):
    """Append records to an append-only log (``log_path``: the review action log, the
    extraction audit, a session log's commit mark). Each record carries an ``id``; a replay appends nothing when
    the log's last record already has the last id of this batch, so a kill after the
    journal landed leaves the records in the log exactly once (docs/DESIGN.md, "Units of
    work"). The batch is one write, so it lands whole or not at all."""

    op: Literal["append_records"] = "append_records"
    log: str  # vault-relative (``log_path``)
    records: list[dict]


Op = Annotated[WriteFile | DeleteFile | PutLink | RemoveLink | RemoveLegacy | WriteSidecar | AppendRecords,
              Field(discriminator="op")]
_OPS = TypeAdapter(list[Op])


def sidecar_path(root: Path, folder: str) -> Path:
    return (resolve_uri(root, folder) if folder else Path(root)) / SIDECAR


def rejected_log(folder: str) -> str:
    """The vault-relative path of a folder's rejected file (an append-only log)."""
    return f"{folder}/{REJECTED}" if folder else REJECTED


def log_path(root: Path, log: str) -> Path:
    """An append-only log's path: only files inside the vault's ``.memlink/`` folder, the
    rejected file beside a sidecar, and a chat session's log (`sessions/<id>.jsonl`, which
    a commit marks)."""
    parts = log.split("/")
    if parts[-1] == REJECTED:
        return sidecar_path(root, "/".join(parts[:-1])).with_name(REJECTED)
    if len(parts) == 2 and parts[0] == SESSIONS and parts[1].endswith(".jsonl") and not parts[1].startswith("."):
        return resolve_uri(root, log)
    if parts[0] != STATE_DIR or len(parts) < 2 or any(p in ("", ".", "..") for p in parts[1:]):
        raise UriError(f"{log!r} is not a log inside {STATE_DIR}/")
    return Path(root).joinpath(*parts)


def last_record_id(path: Path) -> object:
    """The ``id`` of a log's last whole record (None: no file, no records, or a torn last
    line). Reads the file from its end, so a long log costs one block."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            end = size = fh.tell()
            tail = b""
            while end > 0 and tail.rstrip(b"\n").count(b"\n") < 1:
                start = max(0, end - 65536)
                fh.seek(start)
                tail = fh.read(end - start) + tail
                end = start
    except FileNotFoundError:
        return None
    lines = [l for l in tail.split(b"\n") if l.strip()] if size else []
    if not lines:
        return None
    try:
        record = json.loads(lines[-1])
    except ValueError:
        return None
    return record.get("id") if isinstance(record, dict) else None


def check_ops(root: Path, ops: list, links: LinkIndex) -> None:
    """Everything a transaction touches must be usable *before* its journal is written:
    paths inside the vault, sidecars that read with no rejected entry (from the link
    index: no sidecar is parsed here), files and folders this process may write. Raises
    UriError / SidecarError / PermissionError."""
    folders: set[str] = set()  # checked already (a moved hub's thousand puts name
    ends: set[str] = set()  # one folder and one note a thousand times)
    places: set[Path] = set()  # the files written, or the folders files are made in
    for op in ops:
        if isinstance(op, (WriteFile, DeleteFile)):
            path = links.resolve(op.uri)
            if isinstance(op, WriteFile) and os.path.islink(path):  # (a write would replace the link by a copy)
                raise UriError(f"{op.uri} is a symbolic link (to {printable_path(os.readlink(path))}): memlink writes "
                               "no note through a link; write the note it points to; nothing was changed")
            places.add(path.parent)
        elif isinstance(op, WriteSidecar):
            places.add(sidecar_path(root, op.folder).parent)
        elif isinstance(op, AppendRecords):
            places.add(log_path(root, op.log))
        else:
            if op.folder not in folders:
                problem = links.folder(op.folder, records=False).problem(op.folder)
                if problem:  # never rewrite a file around entries nobody has looked at
                    raise SidecarError(problem)
                folders.add(op.folder)
                places |= {sidecar_path(root, op.folder).parent, sidecar_path(root, op.folder).with_name(SIDECAR_LOG)}
            if isinstance(op, PutLink):
                for uri in (op.link.from_uri, op.link.to_uri):
                    if uri not in ends:
                        links.resolve(uri)
                        ends.add(uri)
    for place in sorted(places):
        _writable(root, place)


def _writable(root: Path, place: Path) -> None:
    """Raise PermissionError naming ``place`` when this process may not write it: a file
    that exists (appended in place), else the nearest folder that exists (files are made
    and renamed there). Checked before anything is written, so a change that cannot land
    on every file touches none (a link refused on one side is not left on the other)."""
    while not os.path.lexists(place) and place != root and place.parent != place:
        place = place.parent
    if os.path.isdir(place):
        ok = os.access(place, os.W_OK | os.X_OK)
    else:
        ok = not os.path.exists(place) or os.access(place, os.W_OK)
    if not ok:
        raise PermissionError(errno.EACCES, f"cannot write {printable_path(os.path.relpath(place, root))}: permission "
                              "denied; nothing was changed")


def apply_ops(root: Path, ops: list, links: LinkIndex, tx: str | None = None) -> tuple[list[str], list[str]]:
    """Apply operations; idempotent, so a replay after a crash is always safe. ``tx``
    names the journal (a folder's link log records it, so a replay appends once). Returns
    the note files it wrote or deleted, and the paths it left alone because they changed
    since the transaction was planned.

    Note files first, several at once (``parallel_writes``: each file is its own
    operation). Each folder written is fsynced once, at the end: the journal, durable
    already, replays whatever a power cut took before that."""
    skipped: list[str] = []
    touched: list[str] = []
    link_ops: list = []
    files = [op for op in ops if isinstance(op, (WriteFile, DeleteFile))]
    paths = [links.resolve(op.uri) for op in files]  # (in this thread: the resolver remembers folders)
    with folder_syncs_once():
        done = parallel_writes(_apply_file, list(zip(files, paths, strict=True)))
        for op, outcome in zip(files, done, strict=True):
            if outcome == "done":
                touched.append(op.uri)
            elif outcome == "skipped":
                skipped.append(op.uri)
        for op in ops:
            if isinstance(op, (WriteFile, DeleteFile)):
                continue
            if isinstance(op, WriteSidecar):
                path = sidecar_path(root, op.folder)
                now, now_log = file_hash(path), file_hash(path.with_name(SIDECAR_LOG))
                target = None if op.text is None else hashlib.sha256(op.text.encode("utf-8")).hexdigest()
                if now == target and now_log is None:
                    continue
                if now != target and (now != op.before or now_log != op.log_before):
                    skipped.append(sidecar_rel(op.folder))
                    continue
                links.restore(op.folder, op.text)  # (text already there: a kill before its log went)
            elif isinstance(op, AppendRecords):
                path = log_path(root, op.log)
                if op.records and last_record_id(path) != op.records[-1].get("id"):
                    # Every journal applies under the vault's write lock; a log's own lock file
                    # is for logs in .memlink/ only, never beside a sidecar in the user's folder.
                    append_jsonl(path, op.records, lock=op.log.startswith(f"{STATE_DIR}/"))
            else:
                link_ops.append(op)
        links.apply(link_ops, tx)
    return touched, skipped


def _apply_file(job: tuple[WriteFile | DeleteFile, Path]) -> str | None:
    """Write or delete one note file: "done", "skipped" (it changed since the
    transaction was planned) or None (done already)."""
    op, path = job
    now = file_hash(path)
    if isinstance(op, WriteFile):
        if now == hashlib.sha256(op.text.encode("utf-8")).hexdigest():
            return None
        if now != op.before:
            return "skipped"
        atomic_write_text(path, op.text)
    else:
        if now is None:
            return None
        if now != op.before:
            return "skipped"
        remove_file(path)
    return "done"


class Journal:
    def __init__(self, root: Path, folder: Path, links: LinkIndex):
        self.root = Path(root)
        self.folder = Path(folder)
        self.links = links

    def commit(self, ops: list) -> None:
        if not ops:
            return
        check_ops(self.root, ops, self.links)
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.json"
        atomic_write_text(path, _OPS.dump_json(ops).decode("utf-8"))  # failing here, nothing was made
        try:
            apply_ops(self.root, ops, self.links, path.stem)
        except (OSError, ValueError, MemlinkError) as exc:
            if full_disk_cause(exc) is None:
                raise
            # The journal is the commit point: the change is made, only not yet on every
            # file. It finishes on the next write once there is room; until then, say so.
            raise DiskFull(f"the disk is full: this change is recorded (.memlink/journal/{path.name}) but not yet "
                           "on every file; it finishes by itself at the next memlink write once there is room. "
                           "Free some space") from exc
        # No fsync for the removal: the next journal's write fsyncs this same folder before
        # its operations apply, so a removal lost to a power cut brings back only a journal
        # whose operations are already on disk and nothing after them; replaying it
        # changes nothing (docs/DESIGN.md, "Units of work").
        remove_file(path, durable=False)

    def pending(self) -> list[Path]:
        if not self.folder.is_dir():
            return []
        return sorted(p for p in self.folder.glob("*.json"))

    def recover(self) -> tuple[list[str], list[str]]:
        """Replay journals left by a killed writer. Call with the vault lock held.

        Returns (the note files the replays wrote or deleted, problems). A journal that cannot be replayed (a sidecar
        broken by hand since, a file edited since) is set aside as ``*.failed`` and
        reported, so the vault stays usable; ``memlink check`` lists it. On a full disk
        the journal stays as it is and DiskFull is raised: no later write may land first."""
        replayed: list[str] = []
        problems: list[str] = []
        for path in self.pending():
            try:
                ops = _OPS.validate_json(path.read_bytes())
                touched, skipped = apply_ops(self.root, ops, self.links, path.stem)
            except (ValidationError, ValueError, OSError, MemlinkError) as exc:
                if full_disk_cause(exc) is not None:  # not a bad journal: it waits for room
                    raise DiskFull(f"the disk is full: a change recorded earlier (.memlink/journal/{path.name}) "
                                   "waits for room to finish, and nothing else is written before it. "
                                   "Free some space and try again") from exc
                path.rename(path.with_suffix(".failed"))
                problems.append(f"journal {path.name} could not be replayed ({exc}); set aside as {path.stem}.failed")
                continue
            remove_file(path)
            replayed += touched
            problems += [f"journal {path.name}: {uri} changed since; left as it is" for uri in skipped]
        return replayed, problems

    def failed(self) -> list[Path]:
        return sorted(self.folder.glob("*.failed")) if self.folder.is_dir() else []
