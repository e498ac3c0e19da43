"""Session logs: `sessions/<id>.jsonl`, one event per line, append-only, never rewritten.
Turn projection: a turn is a run of user messages and the run of visible answers after it;
every visible message lands in one turn (docs/DESIGN.md, "Turn memory"). Reasoning, tool
traffic, drafts and recall snapshots never reach extraction."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ..errors import MemlinkError
from ..model.uris import normalize_uri
from ..storage.jsonl import JsonlError, append_jsonl, invalid, read_numbered, read_records
from .events import SESSION_ID, SessionEvent

if TYPE_CHECKING:
    from pathlib import Path

    from ..storage.vault import Vault

ANSWER_ROLES = {"assistant"}
QUESTION_ROLES = {"user"}


class SessionError(MemlinkError):
    pass


def session_uri(session: str) -> str:
    if not SESSION_ID.match(session or ""):
        raise SessionError(f"bad session id {session!r}: use letters, digits, '.', '-' and '_'")
    return normalize_uri(f"sessions/{session}.jsonl")


def read_events(vault: Vault, session: str) -> list[SessionEvent]:
    """The session's events, in order ([] for a session not started). A line that is not
    an event raises, naming the file and line."""
    label = session_uri(session)
    try:
        return read_records(vault.path(label), SessionEvent, label=label)
    except JsonlError as exc:
        raise SessionError(str(exc)) from None


def append_events(vault: Vault, session: str, events: Iterable[SessionEvent | dict[str, Any]]) -> int:
    """Append events whose ids the log does not hold yet, in one write + fsync, under the
    vault's write lock (which covers the log: no second lock). A plain dict is checked as
    a ``SessionEvent`` first (nothing is written when one is not). Returns how many were
    appended. Existing lines are never touched."""
    path = vault.path(session_uri(session))
    checked: list[SessionEvent] = []
    for n, event in enumerate(events, 1):
        try:
            checked.append(event if isinstance(event, SessionEvent) else SessionEvent.model_validate(event))
        except ValidationError as exc:
            raise SessionError(f"{session_uri(session)}: event {n} to append: {invalid(exc)}") from None
    with vault.writing():
        known = {e.key for e in read_events(vault, session)}
        new: list[SessionEvent] = []
        for event in checked:
            if event.key not in known:
                known.add(event.key)
                new.append(event)
        return append_jsonl(path, [e.to_record() for e in new], lock=False)


def validate_session_file(path: Path, uri: str) -> list[str]:
    """What is wrong with a session log file, for the vault's checks: [] when every line
    is an event with a text content and the ids are unique; else the first problem,
    naming its line."""
    try:
        numbered = read_numbered(path, label=uri)
    except JsonlError as exc:
        return [str(exc).removeprefix(uri).lstrip(": ")]
    ids: set[str | int] = set()
    for n, raw in numbered:
        missing = sorted({"session", "id", "role", "content", "ts"} - set(raw))
        if missing:
            return [f"line {n}: needs keys {', '.join(missing)}"]
        try:
            event = SessionEvent.model_validate(raw)
        except ValidationError as exc:
            return [f"line {n}: {invalid(exc)}"]
        if event.id in ids:
            return [f"line {n}: duplicate id {event.id!r}"]
        ids.add(event.id)
    return []


@dataclass
class Turn:
    """One exchange: the user side's messages, then the other side's (either may hold
    several messages in a row; the user side is empty when a session opens with the
    assistant). Every visible message of a session belongs to exactly one turn."""

    session: str
    asked: list[SessionEvent]
    answered: list[SessionEvent]
    ts: str
    pos: int = 0  # the turn's place in its session
    skipped: list[str] = field(default_factory=list)  # ids of events inside the turn left out

    @property
    def messages(self) -> list[SessionEvent]:
        return self.asked + self.answered

    @property
    def source_ids(self) -> list[str]:
        return [m.key for m in self.messages]

    @property
    def question(self) -> dict[str, str]:
        return _joined(self.asked)

    @property
    def answer(self) -> dict[str, str]:
        return _joined(self.answered)

    def transcript(self) -> list[str]:
        """The turn's messages as "role: text" lines, the form extraction reads."""
        return [f"{m.role}: {message_text(m)}" for m in self.messages]


def message_text(event: SessionEvent) -> str:
    """A message as said: its content, and the caption of an image it carries (an optional
    ``caption`` field) as `[image: …]`."""
    caption = event.caption
    if caption and caption.strip():
        return f"{event.content} [image: {caption.strip()}]".strip()
    return event.content


def _joined(events: list[SessionEvent]) -> dict[str, str]:
    return {"id": events[0].key if events else "", "content": "\n".join(message_text(e) for e in events)}


def _visible(event: SessionEvent) -> bool:
    return bool(message_text(event).strip())


def project_turns(session: str, events: Iterable[SessionEvent], *, final: bool = False) -> list[Turn]:
    """Turns, in order: the one projection of a session log that chat, import-chat and
    commit read (docs/DESIGN.md, "Session logs and events"). A user event marked as a
    recall snapshot (kind: recall, or role: recall) is not a user message; tool,
    reasoning and draft events are skipped. A last turn still waiting for its answer is
    left out of a live session; ``final`` (a finished transcript, or a commit) keeps it."""
    turns: list[Turn] = []
    asked: list[SessionEvent] = []
    answered: list[SessionEvent] = []
    between: list[str] = []

    def close() -> None:
        if asked or answered:
            stamps = [str(e.ts) for e in answered + asked if e.ts]
            turns.append(Turn(session, list(asked), list(answered), stamps[0] if stamps else "", len(turns), list(between)))

    for event in events:
        role, kind = event.role, event.kind
        if role in QUESTION_ROLES and kind not in ("recall", "tool") and _visible(event):
            if answered:
                close()
                asked, answered, between = [], [], []
            asked.append(event)
        elif role in ANSWER_ROLES and kind not in ("reasoning", "tool", "draft") and _visible(event):
            answered.append(event)
        elif asked or answered:
            between.append(event.key)
    if answered or final:
        close()
    return turns
