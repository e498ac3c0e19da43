"""`memlink commit`: a chat session's new turns, or one turn of it, through the extraction
of memory notes (engine.extract), as one input (docs/DESIGN.md, "Session logs and events");
`memlink commit --all`: every session with turns not committed yet, one unit of work each.

Which turns were committed is recorded in the session's log itself: the unit of work
that writes a commit's notes and links also appends a commit mark to the log. A
whole-session commit's mark names the last event it covered (``upto``); a one-turn
commit's names the messages it covered (``turn``), so a later whole-session commit still
takes the turns before it and skips that one. A kill at any point leaves both or neither
(the journal finishes them together), and deleting `.memlink/` forgets nothing, so no
turn is extracted twice."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import MemlinkError
from ..extract.context import ExtractContext
from ..extract.inputs import InputError, choose_extractor
from ..extract.loop import ExtractLoop
from ..extract.rules import day_of
from ..extract.updater import MemoryUpdater, resolve_operations
from .events import COMMIT
from .log import Turn, message_text, project_turns, read_events, session_uri

if TYPE_CHECKING:
    from ..extract.updater import RunReport
    from ..storage.vault import Vault
    from .events import SessionEvent


def commit_session(vault: Vault, session_id: str, extractor: Any = None) -> RunReport | None:
    """Extract memories from the turns not committed yet. None when there is nothing new.
    The new events go through the one turn projection (docs/DESIGN.md, "Session logs and
    events"): reasoning, tool, draft and recall events never reach extraction. A commit
    closes what was said so far, so a last question still waiting for its answer is kept
    (``final``): the user's own words are what the rules extractor reads for preferences.
    The model is asked before the vault is locked; the notes, their links, the audit
    record and the commit mark then land as one unit of work."""
    events = _events(vault, session_id)
    start, done, mark = committed(vault, session_id, events)
    after = [e for e in events[start:] if e.kind != COMMIT]
    turns = project_turns(session_id, [e for e in after if e.key not in done], final=True)
    if not turns:
        return None
    return _commit(vault, session_id, turns, mark, {"upto": after[-1].key}, extractor)


def commit_turn(vault: Vault, session_id: str, turn_id: str, extractor: Any = None) -> RunReport | None:
    """Extract memories from one turn: the one holding the message (or the recall
    snapshot, or the answer from memory) whose id is ``turn_id``. None when that turn
    was committed already. Its mark names the turn's messages, so a later
    ``commit_session`` takes the turns before and after it, never this one again."""
    events = _events(vault, session_id)
    turns = project_turns(session_id, [e for e in events if e.kind != COMMIT], final=True)
    turn = next((t for t in turns if turn_id in t.source_ids or turn_id in t.skipped), None)
    if turn is None:
        raise InputError(f"no message {turn_id!r} in session {session_id!r} ({session_uri(session_id)})")
    start, done, mark = committed(vault, session_id, events)
    pending = {e.key for e in events[start:]} - done
    messages = [m for m in turn.messages if m.key in pending]  # (a turn that grew since: only the new messages)
    if not messages:
        return None
    return _commit(vault, session_id, project_turns(session_id, messages, final=True), mark,
                   {"turn": [m.key for m in messages]}, extractor)


@dataclass
class CommitAll:
    """What ``commit_all`` did: each session committed with its report, each that failed
    with why, and how many had nothing new."""

    committed: list[tuple[str, RunReport]] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    unchanged: int = 0

    def total(self) -> dict[str, int]:
        reports = [r for _s, r in self.committed]
        return {"sessions": len(reports), "created": sum(len(r.created) for r in reports),
                "changed": sum(len(r.changed) for r in reports), "links_added": sum(len(r.links_added) for r in reports)}


def commit_all(vault: Vault, extractor: Any = None, progress: Callable[[int, int], None] | None = None) -> CommitAll:
    """``commit_session`` for every session log with turns not committed yet (imported
    chats, the app's chats), each its own unit of work: a session that fails is named and
    the rest go on; running it again commits nothing twice."""
    folder = vault.root / "sessions"
    sessions = sorted(p.stem for p in folder.glob("*.jsonl")) if folder.is_dir() else []
    out = CommitAll()
    if extractor is None:
        extractor, _health = choose_extractor(vault)
    for n, session in enumerate(sessions, 1):
        try:
            report = commit_session(vault, session, extractor)
        except MemlinkError as exc:
            out.failed.append((session, str(exc)))
            continue
        if report is None:
            out.unchanged += 1
        else:
            out.committed.append((session, report))
        if progress:
            progress(n, len(sessions))
    return out


def _events(vault: Vault, session_id: str) -> list[SessionEvent]:
    log = session_uri(session_id)
    if not vault.path(log).is_file():
        raise InputError(f"no session {session_id!r} (looked for {log})")
    return read_events(vault, session_id)


def _commit(vault: Vault, session_id: str, turns: list[Turn], mark: str | None, covers: dict[str, Any],
            extractor: Any) -> RunReport | None:
    """Extract ``turns`` and land the notes with a commit mark holding ``covers``; None
    (nothing written) when another commit of the session landed since ``mark``."""
    when = _day(turns[-1].messages[-1].ts)
    # A session of several days (an imported chat) says which day each turn is from: its
    # "yesterday" counts from that day, not from the session's last.
    days = [day_of(str(t.messages[0].ts)) or when for t in turns]
    lines: list[str] = []
    several = len(set(days)) > 1
    for i, t in enumerate(turns):
        if several and (i == 0 or days[i] != days[i - 1]):
            lines.append(f"({days[i].isoformat()})")
        lines += t.transcript()
    asked = [m for t in turns for m in t.asked]
    ctx = ExtractContext("session", "\n".join(lines), when, user_lines=[message_text(m) for m in asked],
                         line_days=[day_of(str(m.ts)) or when for m in asked])
    if extractor is None:
        extractor, _health = choose_extractor(vault)
    ops = ExtractLoop(vault, extractor).run(ctx)
    with vault.transaction() as tx:
        if committed(vault, session_id, read_events(vault, session_id))[2] != mark:
            return None  # another commit of this session landed meanwhile: these turns are its
        report = MemoryUpdater(vault).apply_operations(resolve_operations(ops, ctx), ctx, extractor.name,
                                                       f"session {session_id}")
        tx.append(session_uri(session_id), {
            "session": session_id, "id": f"commit-{uuid.uuid4().hex}", "role": "system", "kind": COMMIT,
            "content": "", "ts": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), **covers})
    return report


def committed(vault: Vault, session_id: str, events: list[SessionEvent]) -> tuple[int, set[str], str | None]:
    """Where the events no whole-session commit covered start, the ids of messages
    committed one turn at a time, and the id of the last commit mark (None: never
    committed)."""
    at = {e.key: i for i, e in enumerate(events)}
    start, mark, whole = 0, None, False
    done: set[str] = set()
    for i, event in enumerate(events):
        if event.kind != COMMIT:
            continue
        extra = event.model_extra or {}
        if isinstance(extra.get("turn"), list):
            done.update(str(key) for key in extra["turn"])
        else:
            start = max(start, at.get(str(extra.get("upto")), i) + 1)
            whole = True
        mark = event.key
    if not whole:  # no whole-session mark: maybe committed before marks were kept in the log (the old hint)
        hint = vault.store.row("SELECT last_id FROM commits WHERE session = ?", (session_id,))
        if hint and hint[0] in at:
            start = at[hint[0]] + 1
    return start, done, mark


def _day(ts: object) -> dt.date:
    """The day a turn was said, as its time stamp names it; today when it names none."""
    return day_of(str(ts)) or dt.date.today()
