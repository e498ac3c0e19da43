"""`memlink commit`: a chat session's new turns through the extraction of memory notes
(engine.extract), as one input (docs/DESIGN.md, "Session logs and events")."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from ..extract.context import ExtractContext
from ..extract.inputs import InputError, choose_extractor, run_extraction
from .log import message_text, project_turns, read_events, session_uri

if TYPE_CHECKING:
    from ..extract.updater import RunReport
    from ..storage.vault import Vault


def commit_session(vault: Vault, session_id: str, extractor: Any = None) -> RunReport | None:
    """Extract memories from the turns not committed yet. None when there is nothing new.
    The new events go through the one turn projection (docs/DESIGN.md, "Session logs and
    events"): reasoning, tool, draft and recall events never reach extraction. A commit
    closes what was said so far, so a last question still waiting for its answer is kept
    (``final``): the user's own words are what the rules extractor reads for preferences."""
    if not vault.path(session_uri(session_id)).is_file():
        raise InputError(f"no session {session_id!r} (looked for sessions/{session_id}.jsonl)")
    done = vault.store.row("SELECT last_id FROM commits WHERE session = ?", (session_id,))
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
