"""`memlink commit`: a chat session's new turns through the extraction of memory notes
(engine.extract), as one input (docs/DESIGN.md, "Session logs and events").

Which turns were committed is recorded in the session's log itself: the unit of work
that writes a commit's notes and links also appends a commit mark to the log, naming the
last event it covered. A kill at any point leaves both or neither (the journal finishes
them together), and deleting `.memlink/` forgets nothing, so no turn is extracted twice."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import TYPE_CHECKING, Any

from ..extract.context import ExtractContext
from ..extract.inputs import InputError, choose_extractor
from ..extract.loop import ExtractLoop
from ..extract.updater import MemoryUpdater, resolve_operations
from .events import COMMIT
from .log import message_text, project_turns, read_events, session_uri

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
    log = session_uri(session_id)
    if not vault.path(log).is_file():
        raise InputError(f"no session {session_id!r} (looked for {log})")
    events = read_events(vault, session_id)
    start, mark = committed(vault, session_id, events)
    new = [e for e in events[start:] if e.kind != COMMIT]
    alone = {str(i) for e in events if e.kind == COMMIT for i in (e.model_extra or {}).get("turn", [])}
    turns = [t for t in project_turns(session_id, new, final=True) if not alone & set(t.source_ids)]
    if not turns:
        return None
    when = _day(turns[-1].messages[-1].ts)
    text = "\n".join(line for t in turns for line in t.transcript())
    user_lines = [message_text(m) for t in turns for m in t.asked]
    ctx = ExtractContext("session", text, when, user_lines=user_lines)
    if extractor is None:
        extractor, _health = choose_extractor(vault)
    ops = ExtractLoop(vault, extractor).run(ctx)
    with vault.transaction() as tx:
        if committed(vault, session_id, read_events(vault, session_id))[1] != mark:
            return None  # another commit of this session landed meanwhile: these turns are its
        report = MemoryUpdater(vault).apply_operations(resolve_operations(ops, ctx), ctx, extractor.name,
                                                       f"session {session_id}")
        tx.append(log, {"session": session_id, "id": f"commit-{uuid.uuid4().hex}", "role": "system", "kind": COMMIT,
                        "content": "", "ts": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "upto": new[-1].key})
    return report


def commit_turn(vault: Vault, session_id: str, turn_id: str, extractor: Any = None) -> RunReport:
    """Extract the memories of one turn alone (``turn_id``: the id of any of its messages).
    Its commit mark names the turn's messages (``turn``) and no ``upto``: the turns around
    it stay for the next commit of the session, which leaves this one out."""
    events = read_events(vault, session_id) if vault.path(session_uri(session_id)).is_file() else []
    turns = [t for t in project_turns(session_id, [e for e in events if e.kind != COMMIT], final=True)
             if str(turn_id) in t.source_ids]
    if not turns:
        raise InputError(f"no turn {turn_id!r} in session {session_id!r}")
    turn = turns[0]
    ctx = ExtractContext("session", "\n".join(turn.transcript()), _day(turn.messages[-1].ts),
                         user_lines=[message_text(m) for m in turn.asked])
    if extractor is None:
        extractor, _health = choose_extractor(vault)
    ops = ExtractLoop(vault, extractor).run(ctx)
    with vault.transaction() as tx:
        report = MemoryUpdater(vault).apply_operations(resolve_operations(ops, ctx), ctx, extractor.name,
                                                       f"session {session_id}")
        tx.append(session_uri(session_id), {
            "session": session_id, "id": f"commit-{uuid.uuid4().hex}", "role": "system", "kind": COMMIT, "content": "",
            "ts": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "turn": turn.source_ids})
    return report


def committed(vault: Vault, session_id: str, events: list[SessionEvent]) -> tuple[int, str | None]:
    """Where the session's uncommitted events start, and the id of its last commit mark
    (None: never committed)."""
    at = {e.key: i for i, e in enumerate(events)}
    start, mark = 0, None
    for i, event in enumerate(events):
        if event.kind == COMMIT and "upto" in (event.model_extra or {}):  # a turn saved alone marks only it
            upto = (event.model_extra or {}).get("upto")
            start = max(start, at.get(str(upto), i) + 1)
            mark = event.key
    if mark is None:  # committed before commit marks were kept in the log: the old hint
        done = vault.store.row("SELECT last_id FROM commits WHERE session = ?", (session_id,))
        if done and done[0] in at:
            start = at[done[0]] + 1
    return start, mark


def _day(ts: object) -> dt.date:
    try:
        return dt.datetime.fromisoformat(str(ts).replace("Z", "+00:00")).date()
    except ValueError:
        return dt.date.today()
