"""Session logs: `sessions/<id>.jsonl`, one event per line, append-only, never rewritten.
Turn projection: a turn is a run of user messages and the run of visible answers after it;
every visible message lands in one turn (docs/DESIGN.md, "Turn memory"). Reasoning, tool
traffic, drafts and recall snapshots never reach extraction."""

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
    """One exchange: the user side's messages, then the other side's (either may hold
    several messages in a row; the user side is empty when a session opens with the
    assistant). Every visible message of a session belongs to exactly one turn."""

    session: str
    asked: list[dict]
    answered: list[dict]
    ts: str
    pos: int = 0  # the turn's place in its session
    skipped: list[str] = field(default_factory=list)  # ids of events inside the turn left out

    @property
    def messages(self) -> list[dict]:
        return self.asked + self.answered

    @property
    def source_ids(self) -> list[str]:
        return [str(m["id"]) for m in self.messages]

    @property
    def question(self) -> dict:
        return _joined(self.asked)

    @property
    def answer(self) -> dict:
        return _joined(self.answered)


def message_text(event: dict) -> str:
    """A message as said: its content, and the caption of an image it carries (an optional
    ``caption`` field) as `[image: …]`."""
    content = event.get("content") if isinstance(event.get("content"), str) else ""
    caption = event.get("caption")
    if isinstance(caption, str) and caption.strip():
        return f"{content} [image: {caption.strip()}]".strip()
    return content


def _joined(events: list[dict]) -> dict:
    return {"id": str(events[0]["id"]) if events else "", "content": "\n".join(message_text(e) for e in events)}


def _visible(event: dict) -> bool:
    return bool(message_text(event).strip())


def project_turns(session: str, events: list[dict], *, final: bool = False) -> list[Turn]:
    """Turns, in order. A user event marked as a recall snapshot (kind: recall, or role:
    recall) is not a user message; tool, reasoning and draft events are skipped. A last
    turn still waiting for its answer is left out of a live session; ``final`` (a
    finished transcript) keeps it."""
    turns: list[Turn] = []
    asked: list[dict] = []
    answered: list[dict] = []
    between: list[str] = []

    def close() -> None:
        if asked or answered:
            stamps = [str(e["ts"]) for e in answered + asked if e.get("ts")]
            turns.append(Turn(session, list(asked), list(answered), stamps[0] if stamps else "", len(turns), list(between)))

    for event in events:
        role, kind = event.get("role"), event.get("kind")
        if role in QUESTION_ROLES and kind not in ("recall", "tool") and _visible(event):
            if answered:
                close()
                asked, answered, between = [], [], []
            asked.append(event)
        elif role in ANSWER_ROLES and kind not in ("reasoning", "tool", "draft") and _visible(event):
            answered.append(event)
        elif asked or answered:
            between.append(str(event.get("id")))
    if answered or final:
        close()
    return turns
