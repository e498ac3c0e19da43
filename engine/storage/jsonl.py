"""JSON Lines: the one reader and the one appender for every append-only log memlink
keeps (session logs, the extraction audit, the review action log, the search log, and
the link store's per-folder log, which uses ``whole_lines`` and ``append_bytes`` under
the vault's journal).

Appends are one ``write`` of whole lines on an ``O_APPEND`` descriptor, then ``fsync``;
a torn last line left by a killed writer stays as it was, on its own line, and the next
record starts on a fresh one. Readers name the file and line of anything malformed
(strict), or skip it where a lost line only costs a hint (``strict=False``)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from filelock import FileLock
from pydantic import BaseModel, ValidationError

from ..errors import MemlinkError
from .atomic import atomic_write_bytes, fsync_dir

M = TypeVar("M", bound=BaseModel)


class JsonlError(MemlinkError):
    """A line of a log is not a JSON object (or not the record it should be)."""


def _where(path: Path, label: str | None, n: int) -> str:
    return f"{label or path} line {n}"


def read_jsonl(path: Path, *, strict: bool = True, label: str | None = None) -> list[dict[str, Any]]:
    """Every JSON object of a log, in order ([] when the file does not exist). ``label``
    names the file in errors (a vault-relative path reads better than an absolute one)."""
    return [record for _, record in read_numbered(path, strict=strict, label=label)]


def read_numbered(path: Path, *, strict: bool = True, label: str | None = None) -> list[tuple[int, dict[str, Any]]]:
    """As ``read_jsonl``, each object with its line number (for errors that name it)."""
    out: list[tuple[int, dict[str, Any]]] = []
    for n, line in _lines(path, strict, label):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            if strict:
                raise JsonlError(f"{_where(Path(path), label, n)}: not JSON ({exc.msg})") from None
            continue
        if not isinstance(record, dict):
            if strict:
                raise JsonlError(f"{_where(Path(path), label, n)}: not a JSON object")
            continue
        out.append((n, record))
    return out


def _lines(path: Path, strict: bool, label: str | None) -> list[tuple[int, str]]:
    """The log's non-blank lines with their numbers ([] when the file does not exist)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        if not strict:
            return []
        raise JsonlError(f"{label or path}: unreadable ({exc})") from None
    # Split on "\n" only: records are written with ensure_ascii=False, so a text may hold
    # U+2028, U+0085 or a form feed, which str.splitlines() would also break a line at.
    return [(n, line) for n, line in enumerate(text.split("\n"), 1) if line.strip()]


def read_records(path: Path, model: type[M], *, strict: bool = True, label: str | None = None) -> list[M]:
    """The log's lines validated as ``model``. Strict: the first bad line raises, naming
    it; otherwise bad lines are skipped. Each line is parsed and validated in one step
    (pydantic's JSON parser): a long log reads as fast as with ``json.loads`` alone."""
    out: list[M] = []
    for n, line in _lines(path, strict, label):
        try:
            out.append(model.model_validate_json(line))
        except ValidationError as exc:
            if strict:
                first = exc.errors()[0]
                why = f"not JSON ({first['msg']})" if first["type"] == "json_invalid" else invalid(exc)
                raise JsonlError(f"{_where(Path(path), label, n)}: {why}") from None
    return out


def invalid(exc: ValidationError) -> str:
    """A validation error in one short phrase: the first field at fault and why."""
    first = exc.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "(record)"
    return f"{loc}: {first['msg']}"


def encode(record: dict[str, Any] | BaseModel) -> str:
    """One record as one line (no trailing newline)."""
    if isinstance(record, BaseModel):
        return record.model_dump_json(exclude_none=False)
    return json.dumps(record, ensure_ascii=False)


def append_jsonl(path: Path, records: Iterable[dict[str, Any] | BaseModel], *, lock: bool = True) -> int:
    """Append records as lines in one write, then fsync. With ``lock`` (the default) a
    file lock beside the log serialises writers across processes; pass ``lock=False``
    when the caller already holds a lock that covers the file (the vault's write lock).
    Returns how many records were written."""
    lines = [encode(r) for r in records]
    if not lines:
        return 0
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = ("\n".join(lines) + "\n").encode("utf-8")
    if lock:
        with FileLock(str(path) + ".lock"):
            _append(path, data)
    else:
        _append(path, data)
    return len(lines)


def _append(path: Path, data: bytes) -> None:
    append_bytes(path, data)


def append_bytes(path: Path, data: bytes) -> None:
    """Append whole lines in one ``O_APPEND`` write, then fsync (a new file's folder entry
    too). A torn last line already there stays as it was, and ``data`` starts on a fresh
    line after it."""
    path = Path(path)
    new = not path.exists()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size:
            with open(path, "rb") as fh:  # only the last byte: is the last line whole?
                fh.seek(size - 1)
                if fh.read(1) != b"\n":
                    data = b"\n" + data
        view = memoryview(data)
        while view:  # os.write may write less than asked
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    if new:
        fsync_dir(path.parent)


def whole_lines(data: bytes) -> Iterator[tuple[int, bytes]]:
    """A log's complete, non-blank lines with their numbers; a torn last line (a killed
    writer's, with no newline yet) is left out."""
    end = data.rfind(b"\n") + 1
    for n, line in enumerate(data[:end].split(b"\n")[:-1], 1):
        if line.strip():
            yield n, line


def keep_newest(path: Path, limit: int) -> None:
    """Past ``limit`` bytes, rewrite a log whose old records are only history (the search
    log, the undo history) with its newer half, from a line's start, atomically. The
    caller holds the log's lock."""
    try:
        if Path(path).stat().st_size <= limit:
            return
        recent = Path(path).read_bytes()[-(limit // 2) :]
    except FileNotFoundError:
        return
    atomic_write_bytes(Path(path), recent[recent.find(b"\n") + 1 :])
