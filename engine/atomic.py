"""Atomic file writes: temp file in the same folder, fsync, rename, fsync the folder.

A reader (or a crash) sees either the old file or the new one, never a torn one. Temp
files left behind by a killed process carry TMP_SUFFIX and are removed on vault open.
"""

from __future__ import annotations

import errno
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

TMP_SUFFIX = ".~memlink.tmp"
SWEEP_MEMO = "sweep.json"  # in `.memlink/`: see sweep_temp_files


def fsync_dir(path: Path) -> None:
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
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex[:8]}{TMP_SUFFIX}"
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


SWEEP_SETTLED = 2.0  # seconds: a folder changed this recently is listed again next time


class _SweptFolder(NamedTuple):
    inode: int
    mtime_ns: int
    subfolders: list[str]


class SweepMemo(BaseModel):
    """``.memlink/sweep.json``: each folder the last sweep listed and found clean, with
    the stamp it had then and its subfolders (docs/DESIGN.md, "Read-only vaults and full
    disks"). Derived: a missing or bad memo means one full sweep."""

    model_config = ConfigDict(extra="forbid")
    version: Literal[1]
    folders: dict[str, _SweptFolder]

    @field_validator("folders")
    @classmethod
    def _inside(cls, folders: dict[str, _SweptFolder]) -> dict[str, _SweptFolder]:
        for rel, folder in folders.items():  # a memo names only folders inside the vault
            for name in (*(rel.split("/") if rel else ()), *folder.subfolders):
                if name in ("", ".", "..") or "/" in name or "\\" in name or "\0" in name:
                    raise ValueError(f"{rel!r}: not a folder name inside the vault")
        return folders


def _read_sweep_memo(path: Path | None) -> dict[str, _SweptFolder]:
    if path is None:
        return {}
    try:
        return SweepMemo.model_validate_json(path.read_bytes()).folders
    except (OSError, ValidationError, ValueError):
        return {}  # derived: sweep everything, and write it anew


def sweep_temp_files(root: Path, older_than: float = 60.0, memo: Path | None = None) -> int:
    """Remove temp files a killed writer left behind. Only old ones: a live writer's temp
    file lasts from its open to its rename (milliseconds; seconds for a huge file), so
    this is safe without the vault lock, while another process writes. Returns how many
    were removed.

    With ``memo``, a folder whose inode and mtime are what the memo recorded is not
    listed again: no entry was added to it since it was found clean (creating or
    renaming a file into a folder moves its mtime). A folder is recorded only when it
    held no temp file and had not changed for SWEEP_SETTLED seconds (file timestamps
    are coarser than a nanosecond). At 100k notes: ~100 stats instead of listing 100k
    files at every open. Symlinked folders are not entered (as os.walk)."""
    import time

    known = _read_sweep_memo(memo)
    clean: dict[str, _SweptFolder] = {}
    removed = 0
    now = time.time()
    cutoff = now - older_than
    stack: list[tuple[str, str]] = [("", str(root))]
    while stack:
        rel, path = stack.pop()
        try:
            st = os.stat(path)
        except OSError:
            continue
        mark = known.get(rel)
        if mark is not None and mark.inode == st.st_ino and mark.mtime_ns == st.st_mtime_ns:
            clean[rel] = mark
            stack.extend((f"{rel}/{name}" if rel else name, os.path.join(path, name)) for name in mark.subfolders)
            continue
        subfolders: list[str] = []
        left = False  # a temp file stays (young, or could not be removed)
        try:
            with os.scandir(path) as entries:
                for entry in entries:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            subfolders.append(entry.name)
                            continue
                        if not entry.name.endswith(TMP_SUFFIX):
                            continue
                        if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                            os.unlink(entry.path)
                            removed += 1
                        else:
                            left = True
                    except OSError:
                        left = True
        except OSError:
            continue
        subfolders.sort()
        if not left and st.st_mtime < now - SWEEP_SETTLED:
            clean[rel] = _SweptFolder(st.st_ino, st.st_mtime_ns, subfolders)
        stack.extend((f"{rel}/{name}" if rel else name, os.path.join(path, name)) for name in reversed(subfolders))
    if memo is not None and clean != known:
        try:
            atomic_write_bytes(memo, SweepMemo(version=1, folders=clean).model_dump_json().encode())
        except OSError:
            pass  # derived: the next open sweeps more
    return removed


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
