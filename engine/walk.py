"""The walk of a vault: every note and link sidecar with its mtime and size, the catalog's
view of what changed (docs/DESIGN.md, "Vault format": the catalog, the walk in a second process).

Standard library only, and nothing from the engine: this file also runs as a script in a
second process (``python -I -S walk.py ROOT SIDECAR``), which walks while the first one
loads the search index."""

from __future__ import annotations

import hashlib
import marshal
import operator
import os
import subprocess
import sys
import time
import weakref
from collections.abc import Iterator
from typing import Any, TypeGuard

NON_NOTE_DIRS = {"sessions", "dashboards", "memory_types"}
NON_NOTE_FILES = {"DREAMS.md", "README.md"}  # generated diaries and read-me files at the vault root

Walked = tuple[str, int, int]  # uri, mtime_ns, size

_by_name = operator.attrgetter("name")


def utf8_name(name: str) -> bool:
    """Whether a file name read from the disk is UTF-8 (os.listdir hands back other bytes
    as surrogates, which no note path, log or index can hold)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def vault_files(root: str, sidecar: str) -> Iterator[Walked]:
    """Notes (``*.md`` outside hidden and non-note folders) and link sidecars (files named
    ``sidecar``), in sorted order, folder by folder (each folder's files before its
    subfolders). Symlinked folders are not entered (as os.walk); a symlinked file is
    listed with its target's stat. One scandir per folder: names and types come with the
    listing."""
    stack: list[tuple[str, str]] = [(root, "")]
    while stack:
        dirpath, rel = stack.pop()
        try:
            with os.scandir(dirpath) as it:
                entries = sorted(it, key=_by_name)
        except OSError:
            continue
        subdirs = []
        prefix = f"{rel}/" if rel else ""
        for entry in entries:
            name = entry.name
            if not name.isascii() and not utf8_name(name):
                continue  # a name that is not UTF-8 cannot be a note path (docs/DESIGN.md "Vault format")
            try:
                is_dir = entry.is_dir()
            except OSError:
                continue
            if is_dir:
                if not name.startswith(".") and not (rel == "" and name in NON_NOTE_DIRS) and not entry.is_symlink():
                    subdirs.append((entry.path, prefix + name))
                continue
            if rel == "" and name in NON_NOTE_FILES:
                continue
            if (name.endswith(".md") and not name.startswith(".")) or name == sidecar:
                try:
                    st = entry.stat()
                except OSError:
                    continue
                yield prefix + name, st.st_mtime_ns, st.st_size
        stack.extend(reversed(subdirs))


def walk_digest(files: list[Walked]) -> str:
    """What a walk listed (uri, mtime_ns, size of every note and sidecar, in walk order),
    as one hash: compared without loading a snapshot that does not match. (marshal: a
    quarter of repr's time at 100k files; another Python's marshal may differ, and then
    the snapshot is not taken once.) Version 2 writes no back-references: the bytes do
    not depend on which other objects hold the same strings and numbers."""
    return hashlib.blake2b(marshal.dumps(files, 2), digest_size=16).hexdigest()


def _sidecars(files: list[Walked], sidecar: str) -> dict[str, tuple[int, int]]:
    return {uri: (mtime, size) for uri, mtime, size in files if uri.endswith(sidecar)}


class Seen:
    """What one walk saw: its digest and the sidecars' stamps at once, every file when
    asked (a vault whose digest matches the catalog's snapshot never needs the list)."""

    def __init__(self, files: list[Walked] | None, sidecar: str, *, digest: str | None = None,
                 sidecars: dict[str, tuple[int, int]] | None = None, rest: Prewalk | None = None) -> None:
        self._files, self._rest = files, rest
        self._digest = digest
        self.sidecars = sidecars if sidecars is not None else _sidecars(files or [], sidecar)

    @property
    def digest(self) -> str:
        if self._digest is None:
            self._digest = walk_digest(self.files() or [])
        return self._digest

    def files(self) -> list[Walked] | None:
        """Every file the walk listed, or None when the second process failed to send
        them (the caller walks again)."""
        if self._files is None and self._rest is not None:
            self._files, self._rest = self._rest.rest(), None
        return self._files

    def close(self) -> None:
        if self._rest is not None:
            self._rest.close()
            self._rest = None


SIDECAR = ".relations.json"  # a folder's link sidecar (engine.links; named here for a walk begun before the engine loads)
_early: dict[str, Prewalk] = {}  # walks begun by ``walk_early``, by the vault's real path


def walk_early(root: str) -> None:
    """Begin the walk of the vault at ``root`` before the engine is imported (the CLI's
    first step for search and lint): importing and opening then run alongside it
    (~0.2 s). ``take_early`` hands it to the vault when it opens; a walk nobody takes
    ends with the process."""
    started = Prewalk.start(root, SIDECAR)
    if started is not None:
        _early[os.path.realpath(root)] = started


def take_early(root: str) -> Prewalk | None:
    """The walk ``walk_early`` began for this vault, if any (once)."""
    return _early.pop(os.path.realpath(root), None) if _early else None


class Prewalk:
    """``vault_files`` run in a second process, started before the caller has work that
    holds the interpreter (loading the index and the embedding model): the stat calls of
    100k files then cost no wall time. A thread would not do: each stat gives up the GIL
    and waits up to the switch interval to get it back. The process sends a summary
    first (the walk's digest and the sidecars), then the whole list, read only if asked
    (docs/DESIGN.md, "Vault format": the walk in a second process)."""

    MAX_AGE = 60.0  # seconds: a walk older than this is not taken (edits made since would be missed)

    def __init__(self, root: str, sidecar: str) -> None:
        self.sidecar = sidecar
        self.started = time.monotonic()
        # -I: no environment, no user site, not the script's folder on the path; the file
        # names must decode as they do here, so the UTF-8 mode is passed (-I drops PYTHONUTF8).
        self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
            [sys.executable, "-I", "-S", "-X", f"utf8={sys.flags.utf8_mode}", __file__, root, sidecar],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self._stop = weakref.finalize(self, _stop, self._proc)  # a walk nobody reads ends with its owner

    @classmethod
    def start(cls, root: str, sidecar: str) -> Prewalk | None:
        """A walk under way, or None when no second process can be started (no
        interpreter path, one that is not Python's (an application embedding it), no file
        to run, a process limit): the caller walks itself."""
        name = os.path.basename(sys.executable or "").lower()
        if not name.startswith(("python", "pypy")) or not os.path.isfile(__file__):
            return None
        try:
            return cls(root, sidecar)
        except OSError:
            return None

    def seen(self) -> Seen | None:
        """The walk's summary, or None if it is too old, the process failed or sent
        anything else than this code writes, or decoded file names otherwise than this
        process does: the caller then walks itself."""
        if time.monotonic() - self.started > self.MAX_AGE:
            self.close()
            return None
        summary = self._blob()
        digest, sidecars, names = summary if type(summary) is tuple and len(summary) == 3 else (None, None, None)
        if type(digest) is not str or not _is_walked(sidecars) or names != _names():
            self.close()
            return None
        return Seen(None, self.sidecar, digest=digest, sidecars={uri: (mtime, size) for uri, mtime, size in sidecars},
                    rest=self)

    def rest(self) -> list[Walked] | None:
        """Every file, after the summary (None on any failure)."""
        files = self._blob()
        proc = self._proc
        ended = files is not None and proc is not None and proc.wait() == 0  # (it exits once the list is read)
        self.close()
        return files if ended and _is_walked(files) else None

    def _blob(self) -> object:
        """One blob from the process (its mark, its length, marshal data), or None."""
        proc = self._proc
        if proc is None or proc.stdout is None:
            return None
        try:
            head = proc.stdout.read(len(_MARK) + 8)
            if len(head) != len(_MARK) + 8 or not head.startswith(_MARK):
                return None  # (anything else printed first: not this code's output)
            size = int.from_bytes(head[len(_MARK):], "little")
            if size > _MAX_BLOB:
                return None
            data = proc.stdout.read(size)
            if len(data) != size:
                return None
            return marshal.loads(data)
        except (OSError, ValueError, EOFError, TypeError, MemoryError):
            return None

    def close(self) -> None:
        """Stop a walk nobody will read (more of)."""
        self._proc = None
        self._stop()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.kill()
    proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


_MARK = b"mlwalk1\n"  # what every blob starts with
_MAX_BLOB = 1 << 32  # bytes: 100k files make 6 MB


def _names() -> tuple[str, str]:
    """How this interpreter decodes file names: the two processes must agree."""
    return sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()


def _is_walked(value: object) -> TypeGuard[list[Walked]]:
    """Whether ``value`` is a list of (str, int, int), checked whole in C."""
    if type(value) is not list:
        return False
    if not value:
        return True
    if set(map(type, value)) != {tuple} or set(map(len, value)) != {3}:
        return False
    uris, mtimes, sizes = zip(*value, strict=True)
    return set(map(type, uris)) == {str} and set(map(type, mtimes)) | set(map(type, sizes)) == {int}


def _send(value: Any) -> None:
    data = marshal.dumps(value)
    sys.stdout.buffer.write(_MARK + len(data).to_bytes(8, "little") + data)
    sys.stdout.buffer.flush()


if __name__ == "__main__":
    _root, _sidecar = sys.argv[1], sys.argv[2]
    _files = list(vault_files(_root, _sidecar))
    _send((walk_digest(_files), [w for w in _files if w[0].endswith(_sidecar)], _names()))
    _send(_files)
