"""Reading one file of a vault or of its settings: regular files only, and never more
than a bound. A named pipe, device or socket given a note's name would block a reader
for ever (or never end); a file of gigabytes would take the memory. Either is one file's
error (``FileRefused``, an OSError), never the vault's (docs/DESIGN.md, "Vault format")."""

from __future__ import annotations

import os
import stat
from pathlib import Path

NOTE_BYTES = 64 << 20  # a note (ingest refuses files past ingest.max_bytes, 2 MB by default)
SIDECAR_BYTES = 1 << 30  # a folder's links: ~570 bytes a link, a 100k-note vault's largest is 57 MB
SETTINGS_BYTES = 1 << 20  # memlink.yaml, memory_types/*.yaml, the app's settings.yaml
IMAGE_SUFFIXES = frozenset((".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp", ".bmp", ".avif"))  # shown inline
# Files of an imported folder that pages link to or embed (Obsidian's attachments): copied beside them.
ATTACHMENT_SUFFIXES = IMAGE_SUFFIXES | {".canvas", ".excalidraw", ".mp3", ".wav", ".m4a", ".ogg", ".flac", ".mp4",
                                        ".webm", ".mov"}
DOCUMENT_SUFFIXES = (".pdf", ".html", ".htm", ".docx", ".csv")  # documents an import converts into notes

_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)  # (no wait on a pipe's writer)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


class FileRefused(OSError):
    """A file that is not read: not a regular file, or larger than its bound."""


def kind_of(mode: int) -> str | None:
    """What a file that is not a regular one is ("a named pipe"…); None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def read_bounded(path: str | os.PathLike[str], limit: int, *, follow: bool = True) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes. ``follow=False``: a
    symlink is not followed (OSError ELOOP). Raises FileRefused for anything else."""
    fd = os.open(path, _FLAGS | (0 if follow else _NOFOLLOW))
    with open(fd, "rb", buffering=0) as f:
        st = os.fstat(fd)
        kind = kind_of(st.st_mode)
        if kind is not None:
            raise FileRefused(f"not a regular file ({kind}); not read")
        parts: list[bytes] = []
        total = 0
        while chunk := f.read(min(limit + 1 - total, max(st.st_size + 1 - total, 1 << 16))):
            parts.append(chunk)
            total += len(chunk)
            if total > limit:
                raise FileRefused(f"larger than {limit:,} bytes; not read")
    return parts[0] if len(parts) == 1 else b"".join(parts)


def read_settings(path: Path) -> str:
    """A settings file's text (UTF-8, at most SETTINGS_BYTES). Raises OSError (a missing
    file: FileNotFoundError) or UnicodeDecodeError."""
    return read_bounded(path, SETTINGS_BYTES).decode("utf-8")
