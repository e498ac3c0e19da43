"""The two inputs of the write path: a chat session's new turns (`memlink commit`) and
resources (`memlink ingest`): text and markdown files and folders, deduplicated by
SHA-256, each kept as a `sources/` note (engine.extract.batch); with --no-wiki a resource
is kept but not extracted."""

from __future__ import annotations

import datetime as dt
import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import MemlinkError
from ..llm.registry import selection
from .context import ExtractContext
from .loop import ExtractLoop, LLMExtractor
from .rules import RulesExtractor
from .updater import MemoryUpdater, RunReport, resolve_operations

if TYPE_CHECKING:
    from ..llm import Health
    from ..vault import Vault

# What turns an input into operations: the rules, or the LLM behind a provider.
Extractor = RulesExtractor | LLMExtractor


class InputError(MemlinkError):
    pass


def choose_extractor(vault: Vault) -> tuple[RulesExtractor | LLMExtractor, Health]:
    """(extractor, health) for the vault's provider (``engine.llm.registry.selection``):
    the LLM when it is one, else the rules. Line-range correction follows the same
    provider through ``vault.matcher``; nothing is replaced here."""
    chosen = selection(vault.config.llm)
    if not chosen.provider.is_llm:
        return RulesExtractor(), chosen.health
    return LLMExtractor(chosen.provider), chosen.health


def run_extraction(vault: Vault, ctx: ExtractContext, extractor: Extractor, source: str, deferred: list | None = None) -> RunReport:
    ops = ExtractLoop(vault, extractor).run(ctx)
    return MemoryUpdater(vault).apply_operations(resolve_operations(ops, ctx), ctx, extractor.name, source, deferred)


# -- sessions -------------------------------------------------------------------------------
def commit_session(vault: Vault, session_id: str, extractor: Any = None) -> RunReport | None:
    """Extract memories from the turns not committed yet. None when there is nothing new.
    The new events go through the one turn projection (docs/DESIGN.md, "Session logs and
    events"): reasoning, tool, draft and recall events never reach extraction. A commit
    closes what was said so far, so a last question still waiting for its answer is kept
    (``final``): the user's own words are what the rules extractor reads for preferences."""
    done = vault.store.row("SELECT last_id FROM commits WHERE session = ?", (session_id,))
    from ..sessions.log import message_text, project_turns, read_events, session_uri

    if not vault.path(session_uri(session_id)).is_file():
        raise InputError(f"no session {session_id!r} (looked for sessions/{session_id}.jsonl)")
    events = read_events(vault, session_id)
    ids = [e.key for e in events]
    start = ids.index(done[0]) + 1 if done and done[0] in ids else 0
    turns = project_turns(session_id, events[start:], final=True)
    if not turns:
        return None
    when = _day(turns[-1].messages[-1].ts)
    text = "\n".join(line for t in turns for line in t.transcript())
    user_lines = [message_text(m) for t in turns for m in t.asked]
    ctx = ExtractContext("session", text, when, user_lines=user_lines)
    if extractor is None:
        extractor, _health = choose_extractor(vault)
    report = run_extraction(vault, ctx, extractor, f"session {session_id}")
    vault.store.try_write("the commit mark", lambda w: w.execute(
        "INSERT OR REPLACE INTO commits VALUES (?, ?)", (session_id, ids[-1])))
    return report


def _day(ts: object) -> dt.date:
    try:
        return dt.datetime.fromisoformat(str(ts).replace("Z", "+00:00")).date()
    except ValueError:
        return dt.date.today()


# -- resources ------------------------------------------------------------------------------
@dataclass
class IngestResult:
    path: str
    source_uri: str | None
    report: RunReport | None
    skipped: str | None = None  # why nothing was done


def read_text_file(path: Path, *, follow: bool = True, max_bytes: int | None = None) -> str:
    """A regular file's text. Opened without blocking (a FIFO or device is refused, never
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
    if b"\x00" in data[:4096]:
        raise InputError(f"{path}: looks binary (NUL byte in the first 4 KiB); only text and markdown files are imported")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None


def _too_big(path: Path, size: int, limit: int) -> str:
    return (f"{path}: too large to import ({size:,} bytes; the limit is {limit:,} bytes, "
            f"ingest.max_bytes in memlink.yaml)")


def ingest(vault: Vault, path: Path, *, wiki: bool = True, extractor: Extractor | None = None) -> IngestResult:
    """One file (a batch of one: see engine.extract.batch)."""
    from .batch import ingest_batch

    batch = ingest_batch(vault, [Path(path)], wiki=wiki, extractor=extractor)
    if batch.failed:
        raise InputError(batch.failed[0]["error"])
    return batch.files[0]
