"""Derived state in `.memlink/db/`: TinyDB shards written atomically.

TinyDB rewrites a whole file on every write, so state is split into small shards (one
file per concern, e.g. ``commits``) and callers batch their writes. Each shard is written
through AtomicJSONStorage (temp + fsync + rename) and cached in memory until the file
changes on disk. Shards are derived data: an unreadable shard is discarded and rebuilt.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

from tinydb import TinyDB
from tinydb.storages import Storage

from .atomic import atomic_write_text

log = logging.getLogger(__name__)
_SHARD = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


class AtomicJSONStorage(Storage):
    def __init__(self, path: str | Path, memory: dict[str, str] | None = None):
        self.path = Path(path)
        self.memory = memory  # a read-only vault's shards, by file name: never written to disk
        self._text: str | None = None  # the shard's JSON as last read or written
        self._stamp: tuple[int, ...] | None = None

    def _disk_stamp(self) -> tuple[int, ...] | None:
        # Every atomic write is a rename to a new inode: with the inode and ctime in the
        # stamp a same-size rewrite by another process is seen even on coarse mtimes.
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)

    def read(self) -> dict | None:
        # Each read parses the cached text: callers get their own copy to mutate, at the
        # cost of one parse (cheaper than deep-copying a parsed dict).
        if self.memory is not None and self.path.name in self.memory:
            return json.loads(self.memory[self.path.name])
        stamp = self._disk_stamp()
        if stamp is None:
            return None
        if self._text is not None and stamp == self._stamp:
            return json.loads(self._text)
        try:
            text = self.path.read_text(encoding="utf-8") or "{}"
            data = json.loads(text)
            if not isinstance(data, dict):
                raise ValueError("not an object")
        except (ValueError, OSError) as exc:
            log.warning("discarding unreadable state shard %s: %s", self.path, exc)
            try:
                self.path.unlink(missing_ok=True)
            except OSError:
                pass  # a read-only vault: the shard is ignored, not removed
            self._text, self._stamp = None, None
            return None
        self._text, self._stamp = text, stamp
        return data

    def write(self, data: dict) -> None:
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        if self.memory is not None:
            self.memory[self.path.name] = text
            return
        atomic_write_text(self.path, text)
        # Not cached: another process may replace the file between our rename and a stat,
        # and caching our text under its stamp would hide its write. The next read parses.
        self._text, self._stamp = None, None

    def close(self) -> None:
        pass


class StateStore:
    """Opens TinyDB shards under one folder; one TinyDB object per shard per store."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self._dbs: dict[str, TinyDB] = {}
        self.memory: dict[str, str] | None = None  # set by keep_in_memory()

    def keep_in_memory(self) -> None:
        """Write shards to memory from now on (a read-only vault): reads see them, the
        disk is never touched (docs/DESIGN.md, "Read-only vaults and full disks")."""
        self.close()
        self.memory = {}

    def shards(self, prefix: str) -> list[tuple[str, tuple[int, ...]]]:
        """The shards whose name starts with ``prefix``, each with a stamp that changes on
        every write (inode, size, mtime on disk; size and hash of the text in memory), by name."""
        out: dict[str, tuple[int, ...]] = {}
        for path in self.folder.glob(f"{prefix}*.json") if self.folder.is_dir() else []:
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            out[path.stem] = (st.st_ino, st.st_size, st.st_mtime_ns)
        for name, text in (self.memory or {}).items():
            if name.startswith(prefix):
                out[name.removesuffix(".json")] = (0, len(text), hash(text))
        return sorted(out.items())

    def db(self, shard: str) -> TinyDB:
        if not _SHARD.match(shard):
            raise ValueError(f"bad shard name {shard!r}")
        if shard not in self._dbs:  # no folder made here: the first write makes it
            self._dbs[shard] = TinyDB(self.folder / f"{shard}.json", storage=AtomicJSONStorage, memory=self.memory)
        return self._dbs[shard]

    def exists(self, shard: str) -> bool:
        """Whether the shard has been written (on disk, or in memory for a read-only vault)."""
        return f"{shard}.json" in (self.memory or {}) or (self.folder / f"{shard}.json").is_file()

    def close(self) -> None:
        for db in self._dbs.values():
            db.close()
        self._dbs.clear()
