"""The two inputs of the write path: a chat session's new turns (`memlink commit`) and
resources (`memlink ingest`): text and markdown files and folders, deduplicated by
SHA-256, each kept as a `sources/` note (engine.extract.batch); with --no-wiki a resource
is kept but not extracted."""

from __future__ import annotations

import codecs
import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import MemlinkError
from ..llm import Breaker
from ..llm.registry import selection
from .context import ExtractContext
from .loop import ExtractLoop, LLMExtractor
from .rules import RulesExtractor
from .updater import MemoryUpdater, RunReport, resolve_operations

if TYPE_CHECKING:
    from ..llm import Health
    from ..storage.vault import Vault

# What turns an input into operations: the rules, or the LLM behind a provider.
Extractor = RulesExtractor | LLMExtractor


class InputError(MemlinkError):
    pass


def choose_extractor(vault: Vault, force: str | None = None) -> tuple[RulesExtractor | LLMExtractor, Health]:
    """(extractor, health) for the vault's provider (``engine.llm.registry.selection``;
    ``force`` overrides llm.provider): the LLM when it is one, else the rules. The LLM
    extractor gives up on the model after ``llm.max_failures`` failed answers in a row,
    for as long as it is used (one command). Line-range correction follows the same
    provider through ``vault.matcher``; nothing is replaced here."""
    config = vault.config.llm
    chosen = selection(config if force is None else config.model_copy(update={"provider": force}))
    if not chosen.provider.is_llm:
        return RulesExtractor(), chosen.health
    return LLMExtractor(chosen.provider, Breaker(vault.config.llm.max_failures)), chosen.health


def run_extraction(vault: Vault, ctx: ExtractContext, extractor: Extractor, source: str, deferred: list | None = None) -> RunReport:
    ops = ExtractLoop(vault, extractor).run(ctx)
    return MemoryUpdater(vault).apply_operations(resolve_operations(ops, ctx), ctx, extractor.name, source, deferred)


# -- resources ------------------------------------------------------------------------------
@dataclass
class IngestResult:
    path: str
    source_uri: str | None
    report: RunReport | None
    skipped: str | None = None  # why nothing was done
    model_note: str = ""  # what a one-file import says of the embedding model (engine.index.model_line), or ""


def read_text_file(path: Path, *, follow: bool = True, max_bytes: int | None = None) -> str:
    """A regular file's text (``read_file_bytes``), UTF-8 and not binary; a byte-order
    mark is read as such (UTF-8's dropped; UTF-16, as Windows saves "Unicode" text, and UTF-32)."""
    data = read_file_bytes(path, follow=follow, max_bytes=max_bytes)
    wide = next((c for bom, c in ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
                                   (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16")) if data.startswith(bom)), None)
    if wide is not None:  # (UTF-32's marks first: the little-endian one begins as UTF-16's)
        try:
            text = data.decode(wide)
        except UnicodeDecodeError as exc:
            raise InputError(f"{path}: not {wide.upper()} text after its byte-order mark ({exc.reason} at byte {exc.start})") from None
        if "\x00" in text[:4096]:
            raise InputError(f"{path}: looks binary (NUL characters in its text); only text and markdown files are imported")
        return text
    data = data.removeprefix(codecs.BOM_UTF8)
    if b"\x00" in data[:4096]:
        raise InputError(f"{path}: looks binary (NUL byte in the first 4 KiB); only text and markdown files are imported")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:  # where: the line and byte, so the file can be fixed
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(f"{path}: line {line}: not UTF-8 text ({exc.reason} at byte {exc.start}); a file saved in "
                         "another encoding (Windows' Latin-1, cp1252) is imported once saved as UTF-8, e.g. "
                         f"`iconv -f cp1252 -t utf-8`") from None


def read_file_bytes(path: Path, *, follow: bool = True, max_bytes: int | None = None) -> bytes:
    """A regular file's bytes. Opened without blocking (a FIFO or device is refused, never
    waited on); with ``follow=False`` a symbolic link is refused too. A file larger than
    ``max_bytes`` is refused from its size, before it is read (``ingest.max_bytes``)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | (0 if follow else getattr(os, "O_NOFOLLOW", 0))
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        why = "a symbolic link" if exc.errno == errno.ELOOP else exc.strerror
        raise InputError(f"{path}: cannot read ({why})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{path}: not a regular file (a FIFO, socket or device)")
        if max_bytes is not None and st.st_size > max_bytes:
            raise InputError(_too_big(path, st.st_size, max_bytes))
        with os.fdopen(fd, "rb", closefd=False) as fh:
            # One byte past the cap tells a file that grew since fstat from one that fits.
            data = fh.read() if max_bytes is None else fh.read(max_bytes + 1)
        if max_bytes is not None and len(data) > max_bytes:
            raise InputError(_too_big(path, len(data), max_bytes))
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    finally:
        os.close(fd)
    return data


def _too_big(path: Path, size: int, limit: int) -> str:
    return (f"{path}: too large to import ({size:,} bytes; the limit is {limit:,} bytes, "
            f"ingest.max_bytes in memlink.yaml)")
