"""Vault-relative POSIX URIs: the only way notes are named.

A URI like ``entities/caroline.md`` is checked lexically (no absolute paths, no ``..``,
no backslashes, no hidden segments) and then physically (after resolving symlinks it
must still lie inside the vault).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from ..errors import UriError

__all__ = ["PROFILE_URI", "PathResolver", "normalize_uri", "resolve_uri", "uri_dir", "utf8_name"]

PROFILE_URI = "profile.md"  # the vault owner's note (engine/memory_types/profile.yaml: one, at the root)


def utf8_name(name: str) -> bool:
    """Whether a file name read from the disk is UTF-8 (os.listdir hands back other bytes
    as surrogates, which no note path, log or index can hold)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def normalize_uri(uri: str) -> str:
    """Return the canonical form of a vault URI or raise UriError (lexical checks only)."""
    if not isinstance(uri, str):
        raise UriError("empty note path")
    return _normalized(uri)


@functools.lru_cache(maxsize=1 << 15)  # a search's walk asks it of hundreds of URIs, most seen before
def _normalized(uri: str) -> str:
    if not uri.strip():
        raise UriError("empty note path")
    raw = uri.strip()
    if "\\" in raw or "\x00" in raw:
        raise UriError(f"note path {uri!r} contains a backslash or NUL byte")
    if not utf8_name(raw):
        raise UriError(f"note path {uri!r} is not UTF-8")
    if raw.startswith("/") or (len(raw) > 1 and raw[1] == ":"):
        raise UriError(f"note path {uri!r} is absolute; use a path relative to the vault")
    parts = [p for p in raw.split("/") if p not in ("", ".")]
    if not parts:
        raise UriError(f"note path {uri!r} names the vault itself")
    for part in parts:
        if part == "..":
            raise UriError(f"note path {uri!r} contains '..'")
        if part.startswith("."):
            raise UriError(f"note path {uri!r} has a hidden segment {part!r}")
    return "/".join(parts)


def resolve_uri(root: Path, uri: str) -> Path:
    """Map a URI to a filesystem path inside ``root``, following symlinks, or raise."""
    norm = normalize_uri(uri)
    real_root = Path(os.path.realpath(root))
    target = Path(os.path.realpath(real_root / norm))
    if target != real_root and real_root not in target.parents:
        raise UriError(f"note path {uri!r} resolves outside the vault")
    return real_root / norm


def uri_dir(uri: str) -> str:
    """The folder part of a URI ('' for a note at the vault root)."""
    return uri.rpartition("/")[0]


class PathResolver:
    """resolve_uri with the realpath of each folder remembered: reading many notes of one
    folder then costs one lstat per note (is the file itself a symlink?) instead of a
    full realpath walk. Folders are remembered only once they exist."""

    def __init__(self, root: Path):
        self.root = Path(os.path.realpath(root))
        self._folders: dict[str, tuple[Path, tuple[int, int]]] = {}

    def folder(self, folder: str) -> Path:
        if not folder:
            return self.root
        hit = self._folders.get(folder)
        if hit is not None:
            real, ident = hit
            try:
                st = os.lstat(real)  # the same directory still (not swapped for a symlink)?
                if (st.st_dev, st.st_ino) == ident:
                    return real
            except OSError:
                pass
            del self._folders[folder]
        real = Path(os.path.realpath(resolve_uri(self.root, folder)))
        try:
            st = os.lstat(real)
        except OSError:
            return real
        if real.is_dir():
            self._folders[folder] = (real, (st.st_dev, st.st_ino))
        return real

    def __call__(self, uri: str) -> Path:
        norm = normalize_uri(uri)
        folder, _, name = norm.rpartition("/")
        path = self.folder(folder) / name
        if os.path.islink(path):
            return resolve_uri(self.root, norm)  # checks where the link leads
        return path
