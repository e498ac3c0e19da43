"""Session logs: `sessions/<id>.jsonl`, one event per line, append-only, never rewritten
(a torn last line, left by a write that did not finish, is cut by the next append).
Turn projection: a turn is a run of user messages and the run of visible answers after it;
every visible message lands in one turn (docs/DESIGN.md, "Turn memory"). Reasoning, tool
traffic, drafts, recall snapshots and commit marks never reach extraction."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ..errors import MemlinkError
from ..model.text import printable
from ..model.uris import normalize_uri
from ..storage.jsonl import Problem, append_jsonl, heal_tail, invalid, read_numbered, read_records
from .events import COMMIT, MEMORY_ANSWER, REPLACED, SESSION_ID, SessionEvent

if TYPE_CHECKING:
    from pathlib import Path

    from ..storage.vault import Vault

SHOWN_LINES = 20  # bad lines of a log named one by one; the rest are counted
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
    an event is left out and reported once, naming the file and line (in
    ``vault.warnings``; `memlink check` lists it too): one bad line stops neither the
    rest of its session nor anything else."""
    label = session_uri(session)
    problems: list[Problem] = []
    events = read_records(vault.path(label), SessionEvent, strict=False, label=label, problems=problems)
    said = [f"{label} line {n}: {why}; left out" if n else f"{label}: {why}; left out" for n, why in problems[:SHOWN_LINES]]
    if len(problems) > SHOWN_LINES:
        said.append(f"{label}: {len(problems) - SHOWN_LINES} more bad lines left out")
    vault.warnings += [w for w in said if w not in vault.warnings]
    return events


def append_events(vault: Vault, session: str, events: Iterable[SessionEvent | dict[str, Any]]) -> int:
    """Append events whose ids the log does not hold yet, in one write + fsync, under the
    vault's write lock (which covers the log: no second lock). A plain dict is checked as
    a ``SessionEvent`` first (nothing is written when one is not). Returns how many were
    appended. Existing lines are never touched; a torn last line is cut."""
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
    is an event with a text content and the ids are unique; else each bad line, as
    "line N: why" (``TORN`` in it: a torn last line)."""
    problems: list[Problem] = []
    numbered = read_numbered(path, strict=False, label=uri, problems=problems)
    ids: set[str | int] = set()
    for n, raw in numbered:
        missing = sorted({"session", "id", "role", "content", "ts"} - set(raw))
        if missing:
            problems.append((n, f"needs keys {', '.join(missing)}"))
            continue
        try:
            event = SessionEvent.model_validate(raw)
        except ValidationError as exc:
            problems.append((n, invalid(exc)))
            continue
        if event.id in ids:
            problems.append((n, f"duplicate id {event.id!r}"))
            continue
        ids.add(event.id)
    return [f"line {n}: {why}" if n else why for n, why in sorted(problems)]


def heal_session_logs(vault: Vault) -> list[str]:
    """Cut the torn last line of every session log (`memlink check --fix`), under the
    vault's write lock; says what was cut."""
    folder = vault.root / "sessions"
    done: list[str] = []
    with vault.writing():
        for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
            try:
                cut = heal_tail(path)
            except OSError:
                continue  # (not a file to repair: `memlink check` names it)
            if cut:
                done.append(f"cut the torn last line of sessions/{path.name} ({len(cut)} bytes of a write that did not finish)")
    return done


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
        """What was answered, as extraction and recall read it: an answer from memory
        (kind ``memory``) only repeats the vault, so it is not part of it."""
        return _joined([m for m in self.answered if m.kind != MEMORY_ANSWER])

    def transcript(self) -> list[str]:
        """The turn's messages as "role: text" lines, the form extraction reads (without
        an answer from memory)."""
        return [f"{m.role}: {message_text(m)}" for m in self.messages if m.kind != MEMORY_ANSWER]


def message_text(event: SessionEvent) -> str:
    """A message as said: its content, and the caption of an image it carries (an optional
    ``caption`` field) as `[image: …]`. Terminal escapes and control characters are left
    out (``printable``): the log keeps what arrived, but a note made from a message (its
    title, its text) or a prompt built from it never holds them."""
    caption = event.caption
    text = f"{event.content} [image: {caption.strip()}]".strip() if caption and caption.strip() else event.content
    return printable(text.replace("\r\n", "\n").replace("\r", "\n"))  # (a lone CR ends a line in old exports)


def _joined(events: list[SessionEvent]) -> dict[str, str]:
    return {"id": events[0].key if events else "", "content": "\n".join(message_text(e) for e in events)}


def _visible(event: SessionEvent) -> bool:
    return bool(message_text(event).strip())


def project_turns(session: str, events: Iterable[SessionEvent], *, final: bool = False) -> list[Turn]:
    """Turns, in order: the one projection of a session log that chat, import-chat and
    commit read (docs/DESIGN.md, "Session logs and events"). A user event marked as a
    recall snapshot (kind: recall, or role: recall) is not a user message; tool,
    reasoning and draft events and commit marks are skipped. A last turn still waiting
    for its answer is left out of a live session; ``final`` (a finished transcript, or a
    commit) keeps it."""
    turns: list[Turn] = []
    asked: list[SessionEvent] = []
    answered: list[SessionEvent] = []
    between: list[str] = []

    def close() -> None:
        if asked or answered:
            stamps = [str(e.ts) for e in answered + asked if e.ts]
            turns.append(Turn(session, list(asked), list(answered), stamps[0] if stamps else "", len(turns), list(between)))

    events = list(events)
    replaced = {e.content for e in events if e.kind == REPLACED}  # (off the current branch since: not said)
    for event in events:
        role, kind = event.role, event.kind
        if kind in (COMMIT, REPLACED) or event.key in replaced:
            continue
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
