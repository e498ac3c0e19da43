"""Session logs: `sessions/<id>.jsonl`, one event per line, append-only, never rewritten.
Turn projection: a completed turn is the first real user message and the last visible
assistant answer; reasoning, tool traffic, drafts and recall snapshots never reach
extraction."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import MemlinkError
from ..uris import normalize_uri

ANSWER_ROLES = {"assistant"}
QUESTION_ROLES = {"user"}
_SESSION_ID = re.compile(r"^[\w.\-]{1,120}$")


class SessionError(MemlinkError):
    pass


def session_uri(session: str) -> str:
    if not _SESSION_ID.match(session or ""):
        raise SessionError(f"bad session id {session!r}: use letters, digits, '.', '-' and '_'")
    return normalize_uri(f"sessions/{session}.jsonl")


def read_events(vault, session: str) -> list[dict]:
    path = vault.path(session_uri(session))
    if not path.is_file():
        return []
    events = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SessionError(f"sessions/{session}.jsonl line {n}: not JSON ({exc.msg})") from None
        if isinstance(event, dict):
            events.append(event)
    return events


def append_events(vault, session: str, events: list[dict]) -> int:
    """Append events whose ids the log does not hold yet (one write + fsync). Returns how
    many were appended. Existing lines are never touched."""
    known = {str(e.get("id")) for e in read_events(vault, session)}
    new = [e for e in events if str(e.get("id")) not in known]
    if not new:
        return 0
    path: Path = vault.path(session_uri(session))
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in new).encode("utf-8")
    with vault.writing():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            if os.fstat(fd).st_size and not path.read_bytes().endswith(b"\n"):
                data = b"\n" + data  # a torn last line stays as it was, on its own line
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
    return len(new)


@dataclass
class Turn:
    session: str
    question: dict
    answer: dict
    ts: str
    skipped: list[str] = field(default_factory=list)  # ids of events between Q and A left out

    @property
    def source_ids(self) -> list[str]:
        return [str(self.question["id"]), str(self.answer["id"])]


def _visible(event: dict) -> bool:
    return isinstance(event.get("content"), str) and bool(event["content"].strip())


def project_turns(session: str, events: list[dict]) -> list[Turn]:
    """Completed turns, in order. A user event marked as a recall snapshot (kind: recall,
    or role: recall) is not a user message; tool and reasoning events are skipped."""
    turns: list[Turn] = []
    question, answer, between = None, None, []

    def close():
        if question is not None and answer is not None:
            turns.append(Turn(session, question, answer, str(answer.get("ts") or question.get("ts") or ""), between))

    for event in events:
        role = event.get("role")
        real_user = role in QUESTION_ROLES and event.get("kind") not in ("recall", "tool") and _visible(event)
        if real_user:
            close()
            question, answer, between = event, None, []
        elif question is not None and role in ANSWER_ROLES and event.get("kind") not in ("reasoning", "tool", "draft") and _visible(event):
            if answer is not None:
                between.append(str(answer.get("id")))
            answer = event
        elif question is not None:
            between.append(str(event.get("id")))
    close()
    return turns
