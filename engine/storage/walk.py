"""The walk of a vault: every note and link sidecar with its mtime and size, which is how
the catalog learns what changed on disk (docs/DESIGN.md, "The catalog"), and the temp
files a killed writer left (removed by the sync that sees them)."""

from __future__ import annotations

import os
from collections.abc import Iterator

from ..errors import UriError
from ..model.files import kind_of
from ..model.text import printable, printable_path
from ..model.uris import normalize_uri, utf8_name
from .atomic import TMP_SUFFIX
from .store import STATE_DIR

NON_NOTE_DIRS = {"sessions", "dashboards", "memory_types"}
NON_NOTE_FILES = {"DREAMS.md", "README.md"}  # generated diaries and read-me files at the vault root

Walked = tuple[str, int, int]  # uri, mtime_ns, size
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_BY_FD = os.scandir in os.supports_fd  # (not on Windows: there a folder is listed by its path)


def check_note_target(uri: str) -> str:
    """``uri`` normalized, when a note may be written there: a path ending in .md outside
    the folders and files memlink keeps for itself (which the walk never reads as notes).
    UriError names the path and why otherwise."""
    uri = normalize_uri(uri)
    if printable(uri) != uri or "\n" in uri or "\t" in uri or any(part != part.strip() for part in uri.split("/")):
        raise UriError(f"{printable_path(uri)}: a note's path holds no control or direction characters, and no space at "
                       "the start or end of a name")
    if not uri.endswith(".md"):
        raise UriError(f"{uri}: a note's path ends in .md")
    if uri.split("/")[0] in NON_NOTE_DIRS or uri in NON_NOTE_FILES:
        raise UriError(f"{uri}: memlink keeps no notes there (it is its own folder or file)")
    return uri


def vault_files(root: str, sidecar: str, skipped: dict[str, str] | None = None,
                unreadable: set[str] | None = None) -> Iterator[Walked]:
    """Notes (``*.md`` outside hidden and non-note folders), link sidecars (files named
    ``sidecar``) and temp files (``TMP_SUFFIX``, in the non-note folders and `.memlink/`
    too), folder by folder, in no particular order. Symlinked folders are not entered (as
    os.walk); a symlinked file is listed with its target's stat. One scandir per folder:
    names and types come with the listing. Only regular files are listed: a named pipe,
    device or socket with a note's name, and a note or folder whose name is not UTF-8
    (docs/DESIGN.md "Vault format"), go to ``skipped`` (printable path -> why) instead.
    A note folder that cannot be listed goes to ``unreadable`` (and ``skipped``): what it
    held is not known, which is not the same as gone."""
    stack: list[tuple[str, str, bool]] = [(root, "", True)]
    while stack:
        dirpath, rel, notes = stack.pop()
        # Listed through the folder's descriptor, open while its files are looked at: each
        # stat names a file within it, not by its whole path (a fifth of a walk at 100k notes).
        if not _BY_FD:
            yield from _folder(dirpath, dirpath, rel, notes, sidecar, stack, skipped, unreadable)
            continue
        try:
            fd = os.open(dirpath, _DIR_FLAGS)
        except OSError as exc:
            if notes and rel:
                _unreadable(rel, exc, skipped, unreadable)
            continue
        try:
            yield from _folder(fd, dirpath, rel, notes, sidecar, stack, skipped, unreadable)
        finally:
            os.close(fd)


def _folder(listed: int | str, dirpath: str, rel: str, notes: bool, sidecar: str, stack: list[tuple[str, str, bool]],
            skipped: dict[str, str] | None, unreadable: set[str] | None) -> Iterator[Walked]:
    """One folder of ``vault_files`` (``listed``: its descriptor, or its path): its files,
    and its subfolders onto ``stack``."""
    try:
        with os.scandir(listed) as it:
            entries = list(it)
    except OSError as exc:
        if notes and rel:
            _unreadable(rel, exc, skipped, unreadable)
        return
    subdirs = []
    prefix = f"{rel}/" if rel else ""
    for entry in entries:
        name = entry.name
        try:
            is_dir = entry.is_dir()
        except OSError:
            continue
        if not name.isascii() and not utf8_name(name):
            if skipped is not None and notes and not name.startswith(".") and (is_dir or name.endswith(".md")):
                skipped[printable_path(prefix + name)] = (
                    f"a {'folder' if is_dir else 'note'} whose name is not UTF-8: not read; rename it")
            continue
        if is_dir:
            if entry.is_symlink():
                continue
            if not name.startswith("."):
                subdirs.append((os.path.join(dirpath, name), prefix + name, notes and not (rel == "" and name in NON_NOTE_DIRS)))
            elif rel == "" and name == STATE_DIR:  # derived state: walked for temp files only
                subdirs.append((os.path.join(dirpath, name), prefix + name, False))
            continue
        if name.endswith(TMP_SUFFIX):
            wanted = True
        elif not notes or (rel == "" and name in NON_NOTE_FILES):
            continue
        else:
            wanted = (name.endswith(".md") and not name.startswith(".")) or name == sidecar
        if wanted:
            try:
                st = entry.stat()
            except PermissionError as exc:  # listed, but not entered (no x): what it holds is not known
                if notes and rel:
                    _unreadable(rel, exc, skipped, unreadable)
                continue
            except OSError:
                continue
            kind = kind_of(st.st_mode)
            if kind is not None:
                if skipped is not None and not name.endswith(TMP_SUFFIX):
                    skipped[printable_path(prefix + name)] = f"{kind}, not a file: not read"
                continue
            yield prefix + name, st.st_mtime_ns, st.st_size
    stack.extend(subdirs)


def _unreadable(rel: str, exc: OSError, skipped: dict[str, str] | None, unreadable: set[str] | None) -> None:
    if unreadable is not None:
        unreadable.add(rel)
    if skipped is not None:
        skipped[printable_path(rel) + "/"] = (f"a folder that cannot be read ({exc.strerror or exc}): its notes and "
                                             "links are kept as last read until it can be")

