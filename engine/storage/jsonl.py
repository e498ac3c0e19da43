"""JSON Lines: the one reader and the one appender for every append-only log memlink
keeps (session logs, the extraction audit, the review action log, the search log, and
the link store's per-folder log, which uses ``whole_lines`` and ``append_bytes`` under
the vault's journal).

Appends are one ``write`` of whole lines on an ``O_APPEND`` descriptor, then ``fsync``.
A write that fails (a full disk) is cut back, so a log never ends in part of a line; a
torn last line a killed writer left is cut by the next append (``heal_tail``). Readers
name the file and line of anything malformed (strict), or leave it out, saying where
when asked (``problems``), where one bad line must not stop the rest (``strict=False``)."""

from __future__ import annotations

import codecs
import errno
import json
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from filelock import FileLock
from pydantic import BaseModel, ValidationError

from ..errors import MemlinkError
from .atomic import atomic_write_bytes, fsync_dir

M = TypeVar("M", bound=BaseModel)

# (line number, what is wrong with it) of a line a lenient reader left out; line 0 is the
# whole file (it could not be read).
Problem = tuple[int, str]
TORN = "torn last line (a write that did not finish; the next append or `memlink check --fix` cuts it)"


class JsonlError(MemlinkError):
    """A line of a log is not a JSON object (or not the record it should be)."""


def _where(path: Path, label: str | None, n: int) -> str:
    return f"{label or path} line {n}" if n else f"{label or path}"


def read_jsonl(path: Path, *, strict: bool = True, label: str | None = None) -> list[dict[str, Any]]:
    """Every JSON object of a log, in order ([] when the file does not exist). ``label``
    names the file in errors (a vault-relative path reads better than an absolute one)."""
    return [record for _, record in read_numbered(path, strict=strict, label=label)]


def read_numbered(path: Path, *, strict: bool = True, label: str | None = None,
                  problems: list[Problem] | None = None) -> list[tuple[int, dict[str, Any]]]:
    """As ``read_jsonl``, each object with its line number (for errors that name it).
    Lenient (``strict=False``), the lines left out go to ``problems`` when given."""
    bad = _complaint(path, label, strict, problems)
    lines, torn = _lines(path, bad)
    out: list[tuple[int, dict[str, Any]]] = []
    for n, line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            bad(n, f"not JSON ({exc.msg})", n == torn)
            continue
        if not isinstance(record, dict):
            bad(n, "not a JSON object", False)
            continue
        out.append((n, record))
    return out


def read_records(path: Path, model: type[M], *, strict: bool = True, label: str | None = None,
                 problems: list[Problem] | None = None) -> list[M]:
    """The log's lines validated as ``model``. Strict: the first bad line raises, naming
    it; otherwise bad lines are left out (and listed in ``problems`` when given). Each
    line is parsed and validated in one step (pydantic's JSON parser): a long log reads
    as fast as with ``json.loads`` alone."""
    bad = _complaint(path, label, strict, problems)
    lines, torn = _lines(path, bad)
    out: list[M] = []
    for n, line in lines:
        try:
            out.append(model.model_validate_json(line))
        except ValidationError as exc:
            first = exc.errors()[0]
            not_json = first["type"] == "json_invalid"
            bad(n, f"not JSON ({first['msg']})" if not_json else invalid(exc), not_json and n == torn)
    return out


def _complaint(path: Path, label: str | None, strict: bool,
               problems: list[Problem] | None) -> Callable[[int, str, bool], None]:
    """What a reader does with a bad line: raise, naming it (strict), or note it."""
    def bad(n: int, why: str, torn: bool) -> None:
        if strict:
            raise JsonlError(f"{_where(Path(path), label, n)}: {why}")
        if problems is not None:
            problems.append((n, TORN if torn else why))
    return bad


def _lines(path: Path, bad: Callable[[int, str, bool], None]) -> tuple[list[tuple[int, str]], int]:
    """The log's non-blank lines with their numbers ([] when the file does not exist), and
    the number of its last line when no newline ends it (0: none), which is torn if it
    does not parse. Lines are split on b"\\n" only: records are written with
    ensure_ascii=False, so a text may hold U+2028, U+0085 or a form feed, which
    str.splitlines() would also break a line at. A line that is not UTF-8 is bad, alone."""
    try:
        data = _read_regular(Path(path))
    except FileNotFoundError:
        return [], 0
    except OSError as exc:
        bad(0, f"unreadable ({exc.strerror or exc})", False)
        return [], 0
    parts = data.removeprefix(codecs.BOM_UTF8).split(b"\n")  # (a byte-order mark, as some editors save: not text)
    out: list[tuple[int, str]] = []
    for n, raw in enumerate(parts, 1):
        if not raw.strip():
            continue
        try:
            out.append((n, raw.decode("utf-8")))
        except UnicodeDecodeError:
            bad(n, "not UTF-8 text", n == len(parts))
    return out, (len(parts) if parts[-1].strip() else 0)


def _read_regular(path: Path) -> bytes:
    """A regular file's bytes; anything else (a FIFO, a device) is refused, never waited on."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        _regular(fd)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read()
    finally:
        os.close(fd)


def _regular(fd: int) -> None:
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        raise OSError(errno.EINVAL, "not a regular file (a FIFO, socket or device)")


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
            append_bytes(path, data)
    else:
        append_bytes(path, data)
    return len(lines)


def append_bytes(path: Path, data: bytes) -> None:
    """Append whole lines in one ``O_APPEND`` write, then fsync (a new file's folder entry
    too). A torn last line already there is cut first (``heal_tail``); a last record
    that only lacks its newline gets one. A write or fsync that fails (a full disk) is
    cut back to the file's size before it: the log is as it was. Call it under the lock
    that covers the file."""
    path = Path(path)
    new = not path.exists()
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_NONBLOCK", 0), 0o644)
    try:
        _regular(fd)
        _cut, whole = _heal(fd)
        size = os.fstat(fd).st_size
        if not whole:
            data = b"\n" + data
        try:
            view = memoryview(data)
            while view:  # os.write may write less than asked
                view = view[os.write(fd, view):]
            os.fsync(fd)
        except OSError:
            _truncate(fd, size)
            raise
    finally:
        os.close(fd)
    if new:
        fsync_dir(path.parent)


def heal_tail(path: Path) -> bytes:
    """Cut a torn last line (bytes after the last newline that are not a whole JSON
    record: a write killed half-way) and give a whole last record its missing newline.
    Returns the bytes cut (b"": none). For ``memlink check --fix``; appends do it by
    themselves. Call it under the lock that covers the file."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return b""
    try:
        _regular(fd)
        cut, whole = _heal(fd)
        if not whole:
            os.write(fd, b"\n")
            os.fsync(fd)
        return cut
    finally:
        os.close(fd)


def _heal(fd: int) -> tuple[bytes, bool]:
    """(the torn tail cut, whether the file now ends a line: empty, or a newline last)."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return b"", True  # (the usual case: one byte read)
    start = _line_start(fd, size)
    tail = os.pread(fd, size - start, start)
    if not tail.strip():
        return b"", False  # (blank: readers skip it; the next line starts after a newline)
    try:
        json.loads(tail)
        return b"", False  # a whole record without its newline
    except ValueError:
        pass
    os.ftruncate(fd, start)
    os.fsync(fd)
    return tail, True


def _line_start(fd: int, size: int) -> int:
    """Where the file's last line starts: just after its last newline (0: none)."""
    end = size
    while end > 0:
        start = max(0, end - 65536)
        chunk = os.pread(fd, end - start, start)
        found = chunk.rfind(b"\n")
        if found >= 0:
            return start + found + 1
        end = start
    return 0


def _truncate(fd: int, size: int) -> None:
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    except OSError:
        pass  # (cutting back needs no space; if even that fails, the next append cuts the tail)


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
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return
    # From the first whole line in the newer half; the newest record is always kept, however
    # big (its undo must not go).
    last = data.rfind(b"\n", 0, len(data) - 1) + 1
    start = data.find(b"\n", len(data) - limit // 2 - 1) + 1
    atomic_write_bytes(Path(path), data[min(start or last, last):])
