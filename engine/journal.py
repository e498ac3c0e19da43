"""Intent journal: multi-file changes (a link on two sides, a note plus the corrected
ranges of links into it) land completely or not at all.

A transaction is a list of idempotent operations. It is first written atomically as one
journal file in `.memlink/journal/`; then the operations are applied; then the journal
file is removed. A process killed at any instant leaves either no journal (nothing was
touched) or a complete journal, which the next writer replays before doing anything
else (roll-forward). Replaying twice gives the same result.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from .atomic import atomic_write_text, remove_file
from .errors import MemlinkError, SidecarError, UriError
from .jsonl import append_jsonl
from .links import REJECTED, SIDECAR, Sidecar, StoredLink
from .uris import PathResolver, resolve_uri

STATE_DIR = ".memlink"  # the vault's derived-state folder (engine.vault re-exports it)


class _Op(BaseModel):
    model_config = ConfigDict(extra="forbid")


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
    """Put a whole sidecar back as it was (undo); None removes it."""

    op: Literal["write_sidecar"] = "write_sidecar"
    folder: str
    text: str | None
    before: str | None = None


def file_hash(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


class PutLink(_Op):
    """Insert or replace the entry with this id and direction in ``folder``'s sidecar."""

    op: Literal["put_link"] = "put_link"
    folder: str
    link: StoredLink


class RemoveLink(_Op):
    op: Literal["remove_link"] = "remove_link"
    folder: str
    id: str
    direction: Literal["links", "backlinks"]


class AppendRecords(_Op):
    """Append records to an append-only log under ``.memlink/`` (the review action log,
    the extraction audit). Each record carries an ``id``; a replay appends nothing when
    the log's last record already has the last id of this batch, so a kill after the
    journal landed leaves the records in the log exactly once (docs/DESIGN.md, "Units of
    work"). The batch is one write, so it lands whole or not at all."""

    op: Literal["append_records"] = "append_records"
    log: str  # vault-relative, inside .memlink/
    records: list[dict]


class RemoveLegacy(_Op):
    """Drop one target from a legacy {uris, reason} entry (and the entry once empty)."""

    op: Literal["remove_legacy"] = "remove_legacy"
    folder: str
    entry_id: str | None
    from_uri: str | None
    to_uri: str


Op = Annotated[WriteFile | DeleteFile | PutLink | RemoveLink | RemoveLegacy | WriteSidecar | AppendRecords,
              Field(discriminator="op")]
_OPS = TypeAdapter(list[Op])


def sidecar_path(root: Path, folder: str) -> Path:
    return (resolve_uri(root, folder) if folder else Path(root)) / SIDECAR


class SidecarCache:
    """Parsed sidecars keyed by path and file identity (inode, mtime, size), so a folder
    with thousands of links is parsed once, not on every read. A file replaced by another
    writer gets a new inode (atomic rename) and is parsed again."""

    def __init__(self, resolver: PathResolver | None = None) -> None:
        self.resolver = resolver
        self._items: dict[Path, tuple[tuple[int, int, int], Sidecar | SidecarError]] = {}
        self._by_note: dict[Path, dict[tuple[str, str], list[StoredLink]]] = {}

    def _get(self, root: Path, folder: str) -> tuple[Path, Sidecar | SidecarError | None]:
        """The folder's parsed sidecar, the error of one that cannot be read (cached like
        a parse, so a broken file costs one attempt per version), or None: no file."""
        path = self.resolver.folder(folder) / SIDECAR if self.resolver else sidecar_path(root, folder)
        try:
            st = path.stat()
        except (FileNotFoundError, NotADirectoryError):
            self._items.pop(path, None)
            self._by_note.pop(path, None)
            return path, None
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        hit = self._items.get(path)
        if hit is not None and hit[0] == stamp:
            return path, hit[1]
        where = f"{folder}/{SIDECAR}" if folder else SIDECAR
        car: Sidecar | SidecarError
        try:
            car = Sidecar.parse(_sidecar_text(root, path, where), where, folder)
        except SidecarError as exc:
            car = exc
        self._items[path] = (stamp, car)
        self._by_note.pop(path, None)
        return path, car

    def read(self, root: Path, folder: str) -> Sidecar:
        """The folder's sidecar (empty when there is none). Raises SidecarError when the
        file cannot be read at all; bad entries inside it are in ``rejected``."""
        _path, car = self._get(root, folder)
        if isinstance(car, SidecarError):
            raise SidecarError(str(car))
        return car.copy() if car is not None else Sidecar()

    def broken(self, root: Path, folder: str) -> SidecarError | None:
        """Why the folder's sidecar cannot be read at all (None: it reads, or is absent)."""
        _path, car = self._get(root, folder)
        return car if isinstance(car, SidecarError) else None

    def note_links(self, root: Path, folder: str, uri: str, direction: str) -> list[StoredLink]:
        """One note's links or backlinks, from a per-sidecar index built once per version
        of the file (a folder can hold thousands of entries)."""
        path, car = self._get(root, folder)
        if not isinstance(car, Sidecar):
            return []  # unreadable: `memlink check` reports it; the folder's notes still open
        index = self._by_note.get(path)
        if index is None:
            index = {}
            for link in car.all_links(folder):
                owner = link.from_uri if link.direction == "links" else link.to_uri
                index.setdefault((owner, link.direction), []).append(link)
            self._by_note[path] = index
        return list(index.get((uri, direction), ()))

    def remember(self, path: Path, car: Sidecar) -> None:
        """Record what we just wrote, so our own write does not force a re-parse."""
        try:
            st = path.stat()
        except FileNotFoundError:
            self._items.pop(path, None)
            return
        self._items[path] = ((st.st_ino, st.st_mtime_ns, st.st_size), car.copy())
        self._by_note.pop(path, None)


def _sidecar_text(root: Path, path: Path, where: str) -> str:
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


def rejected_log(folder: str) -> str:
    """The vault-relative path of a folder's rejected file (an append-only log)."""
    return f"{folder}/{REJECTED}" if folder else REJECTED


def log_path(root: Path, log: str) -> Path:
    """An append-only log's path: only files inside the vault's ``.memlink/`` folder, and
    the rejected file beside a sidecar."""
    parts = log.split("/")
    if parts[-1] == REJECTED:
        return sidecar_path(root, "/".join(parts[:-1])).with_name(REJECTED)
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


def read_sidecar(root: Path, folder: str, cache: SidecarCache | None = None) -> Sidecar:
    return (cache or SidecarCache()).read(root, folder)


def apply_sidecar_op(car: Sidecar, op: PutLink | RemoveLink | RemoveLegacy) -> bool:
    """Apply one operation to a parsed sidecar; True when something changed."""
    if isinstance(op, PutLink):
        new = op.link
        same = [
            e
            for e in car.entries
            if e.direction == new.direction and (e.id == new.id or (e.from_uri == new.from_uri and e.to_uri == new.to_uri and e.key == new.key))
        ]
        if len(same) == 1 and same[0] == new:
            return False  # already there (a replay)
        car.entries = [e for e in car.entries if not any(e is x for x in same)] if same else car.entries
        car.entries.append(new)
        return True
    if isinstance(op, RemoveLink):
        kept = [e for e in car.entries if not (e.id == op.id and e.direction == op.direction)]
        changed = len(kept) != len(car.entries)
        car.entries = kept
        return changed
    if isinstance(op, RemoveLegacy):
        kept_legacy: list[dict] = []
        changed = False
        for raw in car.legacy:
            matches = ((raw.get("id") or "legacy") == op.entry_id) and (raw.get("from_uri") == op.from_uri)
            if matches and op.to_uri in raw["uris"]:
                changed = True
                raw = {**raw, "uris": [u for u in raw["uris"] if u != op.to_uri]}
                if not raw["uris"]:
                    continue
            kept_legacy.append(raw)
        car.legacy = kept_legacy
        return changed
    return False


def check_ops(root: Path, ops: list, cache: SidecarCache | None = None) -> None:
    """Everything a transaction touches must be usable *before* its journal is written:
    paths inside the vault, sidecars that parse. Raises UriError / SidecarError."""
    for op in ops:
        if isinstance(op, (WriteFile, DeleteFile)):
            resolve_uri(root, op.uri)
        elif isinstance(op, WriteSidecar):
            sidecar_path(root, op.folder)
        elif isinstance(op, AppendRecords):
            log_path(root, op.log)
        else:
            car = read_sidecar(root, op.folder, cache)
            if car.rejected:  # never rewrite a file around entries nobody has looked at
                bad = car.rejected[0]
                where = f"{op.folder}/{SIDECAR}" if op.folder else SIDECAR
                raise SidecarError(f"{where}: {bad.label}: {bad.cause} "
                                   "(`memlink check --fix` moves bad entries aside)")
            if isinstance(op, PutLink):
                resolve_uri(root, op.link.from_uri)
                resolve_uri(root, op.link.to_uri)


def apply_ops(root: Path, ops: list, cache: SidecarCache | None = None) -> list[str]:
    """Apply operations; idempotent, so a replay after a crash is always safe. Returns
    the paths it left alone because they changed since the transaction was planned."""
    skipped: list[str] = []
    by_folder: dict[str, list] = {}
    for op in ops:
        if isinstance(op, WriteFile):
            path = resolve_uri(root, op.uri)
            now = file_hash(path)
            if now == hashlib.sha256(op.text.encode("utf-8")).hexdigest():
                continue  # already written
            if now != op.before:
                skipped.append(op.uri)
                continue
            atomic_write_text(path, op.text)
        elif isinstance(op, DeleteFile):
            path = resolve_uri(root, op.uri)
            now = file_hash(path)
            if now is None:
                continue
            if now != op.before:
                skipped.append(op.uri)
                continue
            remove_file(path)
        elif isinstance(op, WriteSidecar):
            path = sidecar_path(root, op.folder)
            now = file_hash(path)
            target = None if op.text is None else hashlib.sha256(op.text.encode("utf-8")).hexdigest()
            if now == target:
                continue
            if now != op.before:
                skipped.append(f"{op.folder}/{SIDECAR}")
                continue
            if op.text is None:
                remove_file(path)
            else:
                atomic_write_text(path, op.text)
        elif isinstance(op, AppendRecords):
            path = log_path(root, op.log)
            if op.records and last_record_id(path) != op.records[-1].get("id"):
                append_jsonl(path, op.records)
        else:
            by_folder.setdefault(op.folder, []).append(op)
    for folder, folder_ops in by_folder.items():
        car = read_sidecar(root, folder, cache)
        changed = False
        for op in folder_ops:
            changed = apply_sidecar_op(car, op) or changed
        if changed:
            path = sidecar_path(root, folder)
            if not car.entries and not car.legacy:
                remove_file(path)
            else:
                atomic_write_text(path, car.dump())
                if cache is not None:
                    cache.remember(path, car)
    return skipped


class Journal:
    def __init__(self, root: Path, folder: Path, cache: SidecarCache | None = None):
        self.root = Path(root)
        self.folder = Path(folder)
        self.cache = cache

    def commit(self, ops: list) -> None:
        if not ops:
            return
        check_ops(self.root, ops, self.cache)
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.json"
        atomic_write_text(path, _OPS.dump_json(ops).decode("utf-8"))
        apply_ops(self.root, ops, self.cache)
        remove_file(path)

    def pending(self) -> list[Path]:
        if not self.folder.is_dir():
            return []
        return sorted(p for p in self.folder.glob("*.json"))

    def recover(self) -> tuple[int, list[str]]:
        """Replay journals left by a killed writer. Call with the vault lock held.

        Returns (journals replayed, problems). A journal that cannot be replayed (a sidecar
        broken by hand since, a file edited since) is set aside as ``*.failed`` and
        reported, so the vault stays usable; ``memlink check`` lists it."""
        replayed, problems = 0, []
        for path in self.pending():
            try:
                ops = _OPS.validate_json(path.read_bytes())
                skipped = apply_ops(self.root, ops, self.cache)
            except (ValidationError, ValueError, OSError, MemlinkError) as exc:
                path.rename(path.with_suffix(".failed"))
                problems.append(f"journal {path.name} could not be replayed ({exc}); set aside as {path.stem}.failed")
                continue
            remove_file(path)
            replayed += 1
            problems += [f"journal {path.name}: {uri} changed since; left as it is" for uri in skipped]
        return replayed, problems

    def failed(self) -> list[Path]:
        return sorted(self.folder.glob("*.failed")) if self.folder.is_dir() else []
