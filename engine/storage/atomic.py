"""Atomic file writes: temp file in the same folder, fsync, rename, fsync the folder.

A reader (or a crash) sees either the old file or the new one, never a torn one. Temp
files left behind by a killed process carry TMP_SUFFIX; the catalog's walk removes
them (``remove_stale_temp``).
"""

from __future__ import annotations

import errno
import os
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, TypeVar

T = TypeVar("T")
R = TypeVar("R")

TMP_SUFFIX = ".~memlink.tmp"


def temp_beside(path: Path) -> Path:
    """A fresh temp file's path in ``path``'s folder, named after it but never past a file
    name's 255 bytes (a long name, legal on its own, cannot take a suffix too)."""
    head = path.name.encode("utf-8")[:200].decode("utf-8", errors="ignore")
    return path.parent / f".{head}.{uuid.uuid4().hex[:8]}{TMP_SUFFIX}"
WRITERS = 16  # files ``parallel_writes`` writes at once
_batch = threading.local()  # .folders: the folders whose fsync waits for the end of a ``folder_syncs_once`` block


def fsync_dir(path: Path) -> None:
    folders = getattr(_batch, "folders", None)
    if folders is not None:
        folders.add(os.fspath(path))
        return
    _fsync_folder(os.fspath(path))


def fsync_dir_now(path: Path) -> None:
    """``fsync_dir``, at once even inside a ``folder_syncs_once`` block."""
    _fsync_folder(os.fspath(path))


@contextmanager
def folder_syncs_once(joined: set[str] | None = None) -> Iterator[set[str]]:
    """In the block, the folder fsync that ends each atomic write or durable removal is
    done once per folder when the block ends (a thousand notes written in a hundred
    folders: a hundred fsyncs, not a thousand). Until then a rename may be lost to a power
    cut, so the block is for work a journal will replay: its operations. ``joined``: the
    folders of a block open in another thread, which this thread writes for (that block
    syncs them)."""
    outer = getattr(_batch, "folders", None)
    if outer is not None:  # nested: the outer block syncs
        yield outer
        return
    _batch.folders = folders = set() if joined is None else joined
    try:
        yield folders
    finally:
        _batch.folders = None
        if joined is None:
            parallel_writes(_fsync_folder, sorted(folders))


def parallel_writes(work: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """``work(item)`` for each item, up to WRITERS at once; the results in order. For
    writes to files independent of each other: their fsyncs then share the file
    system's journal commits, where one after another each waits for its own (a
    thousand notes, ten times faster on a busy disk). Folder fsyncs join this thread's
    ``folder_syncs_once`` block."""
    if len(items) < 2:
        return [work(item) for item in items]
    folders = getattr(_batch, "folders", None)

    def run(item: T) -> R:
        if folders is None:
            return work(item)
        with folder_syncs_once(folders):
            return work(item)

    with ThreadPoolExecutor(max_workers=min(WRITERS, len(items))) as pool:
        return list(pool.map(run, items))


def _fsync_folder(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def atomic_writer(path: Path, mode: int | None = None, *, durable: bool = True) -> Iterator[BinaryIO]:
    """A file to write ``path`` through: a temp file beside it (created with ``mode``,
    else with the permissions of the file it replaces), fsynced and renamed over ``path``
    when the block ends, the folder fsynced; removed, and ``path`` untouched, when the
    block raises. ``durable=False`` (derived state that carries its own checksum): no
    fsync, the rename alone (whole or not there after a crash of this process; a power
    cut may leave anything, which the checksum catches)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_beside(path)
    try:
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 if mode is None else mode), "wb") as fh:
            yield fh
            fh.flush()
            if mode is None:
                try:  # keep the permissions of the file being replaced (a private note stays private)
                    os.chmod(fh.fileno(), os.stat(path).st_mode & 0o7777)
                except FileNotFoundError:
                    pass
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise
    if durable:
        fsync_dir(path.parent)


def atomic_write_bytes(path: Path, data: bytes, *, durable: bool = True) -> None:
    with atomic_writer(path, durable=durable) as fh:
        fh.write(data)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def remove_file(path: Path, durable: bool = True) -> None:
    """Delete a file (if present) and, when ``durable``, make the removal durable."""
    try:
        Path(path).unlink()
    except FileNotFoundError:
        return
    if durable:
        fsync_dir(Path(path).parent)


STALE_TEMP = 60.0  # seconds: a live writer's temp file lasts from its open to its rename


def remove_stale_temp(path: Path, mtime_ns: int, now: float) -> bool:
    """Remove a temp file a killed writer left (one older than ``STALE_TEMP``: safe
    without the vault lock, a live write's own temp file is younger). Whether it went."""
    if now - mtime_ns / 1e9 < STALE_TEMP:
        return False
    try:
        os.unlink(path)
    except OSError:
        return False
    return True


def disk_full(exc: BaseException) -> str | None:
    """One plain sentence when ``exc`` means the disk (or quota) is full, else None:
    an OSError with ENOSPC/EDQUOT, or tantivy's or SQLite's error saying so in words
    (docs/DESIGN.md, "Read-only vaults and full disks")."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        where = f" (writing {exc.filename})" if exc.filename else ""
    elif any(words in str(exc) for words in FULL_WORDS):
        where = ""
    else:
        return None
    return (f"the disk is full{where}: that write was not made, and whatever the command had finished before it "
            "is kept. Free some space and try again")


# How a full disk reads in errors that carry no errno: tantivy's ValueError, SQLite's.
FULL_WORDS = ("No space left on device", "Disk quota exceeded", "database or disk is full")


def full_disk_cause(exc: BaseException) -> BaseException | None:
    """``exc`` or the error under it (an engine error raised over an OSError) when it
    means the disk is full."""
    for candidate in (exc, exc.__cause__, exc.__context__):
        if candidate is not None and disk_full(candidate) is not None:
            return candidate
    return None
