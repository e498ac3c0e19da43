"""A chat session on our own host: the user's message goes to the log, recall runs,
the context is assembled, the reply streams from Ollama and goes to the log; completed
turns are extracted in the background, one session at a time, in order. Extraction
failures never block chatting."""

from __future__ import annotations

import datetime as dt
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..errors import MemlinkError
from ..llm import LLMError
from ..model.text import printable
from .context import assemble, visible_sources
from .events import MEMORY_ANSWER, SessionEvent
from .importer import ImportReport, extract_pending
from .log import Turn, append_events, project_turns, read_events
from .memory import MemoryContext, MemoryItem, answer_from_memory, memory_context

if TYPE_CHECKING:
    from ..storage.vault import Vault

SYSTEM = ("You are the user's personal assistant inside memlink, an offline memory workstation. "
          "Answer briefly and concretely. When what you say comes from an entry of the user's memory, cite it "
          "by its number in square brackets, as [1].")


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def new_session_id() -> str:
    return dt.datetime.now().strftime("%Y-%m-%d-%H%M%S") + "-" + uuid.uuid4().hex[:4]


class KeyedLocks:
    """One lock per key (a chat session), kept only while someone holds or waits for it,
    so the table never grows beyond the sessions in flight."""

    def __init__(self, _vault: Vault | None = None) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, tuple[threading.Lock, int]] = {}  # key -> (lock, holders + waiters)

    @contextmanager
    def hold(self, key: str) -> Iterator[None]:
        with self._guard:
            lock, users = self._locks.get(key) or (threading.Lock(), 0)
            self._locks[key] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._guard:
                lock, users = self._locks[key]
                if users == 1:
                    del self._locks[key]
                else:
                    self._locks[key] = (lock, users - 1)

    def __len__(self) -> int:
        with self._guard:
            return len(self._locks)


def session_locks(vault: Vault) -> KeyedLocks:
    """The vault's per-session locks: one session's turns are extracted one at a time."""
    return vault.shared(KeyedLocks, KeyedLocks)


SNAPSHOT_TEXT = 200  # characters of an item's text a recall snapshot keeps (what the recall list shows)


def given_items(turns: list[Turn], events: list[SessionEvent]) -> list[list[MemoryItem]]:
    """For each turn, the memory items its reply was given, numbered as it cites them: what
    the turn's last recall snapshot holds; none without one, from one written before
    snapshots held their items, or when any item is in another shape (the numbers would
    no longer match the citations)."""
    snapshots = {e.key: e for e in events if e.kind == "recall"}
    at = {e.key: n for n, e in enumerate(events)}
    out = []
    for turn in turns:
        # (one after the turn's last question: a reply that failed leaves the snapshot of a
        # question it never answered, and the next question may have recalled nothing)
        asked = max((at[m.key] for m in turn.asked), default=-1)
        taken = [snapshots[k] for k in turn.skipped if k in snapshots and at[k] > asked]
        listed = (taken[-1].model_extra or {}).get("items") if taken else None
        items = [MemoryItem.from_json(i) for i in listed] if isinstance(listed, list) else []
        out.append([] if None in items else [i for i in items if i is not None])
    return out


class ChatSession:
    def __init__(self, vault: Vault, session: str, provider: Any = None, turn_extractor: Any = None):
        self.vault = vault
        self.session = session
        self.provider = provider  # an OllamaProvider, or None (then no replies, only memory)
        self.turn_extractor = turn_extractor
        self.last_context = MemoryContext("", [])  # what the last question was given of memory

    def _event(self, role: str, content: str, kind: str | None = None, **extra: Any) -> SessionEvent:
        event = SessionEvent(session=self.session, id=f"{self.session}-{uuid.uuid4().hex[:10]}", role=role,
                             content=content, ts=now(), **extra)
        if kind is not None:
            event.kind = kind  # set only when given: a plain message's line has no kind key
        return event

    def turns(self) -> list[Turn]:
        return project_turns(self.session, read_events(self.vault, self.session))

    def prepare(self, text: str, about: str | None = None) -> list[dict[str, str]]:
        """Log the user's message, recall, and build what the model will see. ``about``: a
        note URI the user is asking about; it is given to the model and seeds recall with
        its title."""
        text = printable(text)  # (a paste can carry terminal escapes: what is typed is text)
        if not text.strip():
            raise MemlinkError("the message holds no text (only control characters); nothing was sent")
        note = self.vault.read_note(about) if about else None  # before logging: a missing note changes nothing
        append_events(self.vault, self.session, [self._event("user", text)])
        turns = self.turns()
        title = self.vault.title(note) if note else ""
        query = f"{text} {title}".strip()
        try:
            self.last_context = memory_context(self.vault, query, visible=visible_sources(turns))
        except Exception:  # memory is a help, never a blocker
            self.last_context = MemoryContext(query, [])
        if self.last_context.items:  # what was given, kept in the log (never read back as a user fact)
            items = self.last_context.items
            # (with each item as the reply's citations open it: a reopened session's [n] are links too)
            append_events(self.vault, self.session, [self._event(
                "recall", "; ".join(f"[{n}] {i.cite} ({i.route})" for n, i in enumerate(items, 1)), kind="recall",
                items=[dict(i.to_json(), text=i.text[:SNAPSHOT_TEXT]) for i in items])])
        about_text = (title, self.vault.render_note(note.uri).text) if note else None
        return assemble(SYSTEM, turns, text, self.last_context, about=about_text)

    def reply(self, messages: list[dict[str, str]], stopped: Callable[[], bool] = lambda: False) -> Iterator[str]:
        """Stream the answer from Ollama; the full answer is logged at the end, unless
        ``stopped`` says the person stopped it meanwhile. An answer with no words is an
        error (nothing logged). Without a model the answer is the memory context itself,
        quoted with its citations and said to be no model's (logged as kind "memory":
        extraction leaves its text out, it only repeats the vault)."""
        if self.provider is None:
            answer = answer_from_memory(self.last_context)
            append_events(self.vault, self.session, [self._event("assistant", answer, kind=MEMORY_ANSWER)])
            yield answer
            return
        parts: list[str] = []
        for chunk in self.provider.stream_chat(messages):
            parts.append(chunk)
            yield chunk
        if not "".join(parts).strip():
            raise LLMError("the model sent an empty reply", "ask again, or try another model")
        if not stopped():
            append_events(self.vault, self.session, [self._event("assistant", "".join(parts))])

    def extract_in_background(self, done: Callable[[object], None] | None = None) -> threading.Thread:
        """Extract this session's completed turns on a background thread, one session's
        turns at a time and in order (the vault's per-session locks, dropped when idle)."""
        locks = session_locks(self.vault)

        def work() -> None:
            report: ImportReport | Exception
            with locks.hold(self.session):
                try:
                    report = extract_pending(self.vault, [self.session], self.turn_extractor)
                except Exception as exc:  # never let extraction take the chat down
                    report = exc
            if done:
                done(report)

        thread = threading.Thread(target=work, daemon=True, name=f"extract-{self.session}")
        thread.start()
        return thread
