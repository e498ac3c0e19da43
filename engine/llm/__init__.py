"""LLM providers behind one interface (docs/DESIGN.md, "Providers"):
``structured(messages, schema)`` → a validated pydantic object or a typed error,
``stream_chat``, ``models`` (chat models only) and ``health`` (a typed state with the
reason and the fix). Output is parsed and validated only: no JSON repair, no
default-filling, no retries."""

from __future__ import annotations

import os
import socket
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Literal, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict

from ..errors import MemlinkError

T = TypeVar("T", bound=BaseModel)

HealthState = Literal["ok", "degraded", "unavailable"]


class LLMError(MemlinkError):
    """The model could not give a usable answer. ``reason`` says what went wrong and
    ``fix`` what to do about it (empty when there is nothing to do)."""

    def __init__(self, reason: str, fix: str = ""):
        super().__init__(f"{reason}; {fix}" if fix else reason)
        self.reason = reason
        self.fix = fix


class LLMUnavailable(LLMError):
    """No server to talk to."""


class LLMModelMissing(LLMError):
    """The server runs, but the model is not pulled (or is no chat model)."""


class LLMTimeout(LLMError):
    pass


class LLMInvalidOutput(LLMError):
    """The answer did not validate. ``raw`` keeps it for quarantine; it is never logged."""

    def __init__(self, message: str, raw: str):
        super().__init__(message)
        self.raw = raw


class NeedsOllama(LLMUnavailable):
    """The rules provider was asked for something only a model can do (a chat reply)."""


DEFAULT_HOST = "http://127.0.0.1:11434"


def resolve_host(host: str | None) -> str:
    """The server a provider talks to: the configured host, else $OLLAMA_HOST, else local."""
    return host or os.environ.get("OLLAMA_HOST") or DEFAULT_HOST


def not_running(host: str) -> LLMUnavailable:
    return LLMUnavailable(f"Ollama is not running at {host}", "start it with `ollama serve` (or set OLLAMA_HOST)")


def listening(host: str, timeout: float = 2.0) -> bool:
    """Whether anything accepts a connection at an Ollama host (a URL, or host:port as
    $OLLAMA_HOST may give it): asked before the client library is loaded, which takes a
    tenth of a process's start when there is no server to talk to."""
    url = urlsplit(host if "://" in host else f"http://{host}")
    try:
        port = url.port or (443 if url.scheme == "https" else 11434)
        with socket.create_connection((url.hostname or "127.0.0.1", port), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


class Breaker:
    """Failed model answers in a row, within one command (docs/DESIGN.md, "Providers"):
    after ``limit`` of them (``llm.max_failures``) the command asks the model no more and
    goes on with the rules, so a hung or broken model costs a few timeouts, not one per
    file or turn. An answer that fits resets the count."""

    def __init__(self, limit: int = 3) -> None:
        self.limit = limit
        self.failures = 0
        self.last = ""  # what the last failure said

    @property
    def tripped(self) -> bool:
        return self.failures >= self.limit

    def failed(self, exc: BaseException) -> None:
        self.failures += 1
        self.last = str(exc).splitlines()[0] if str(exc) else type(exc).__name__

    def answered(self) -> None:
        if not self.tripped:  # (once tripped, the answers are the rules')
            self.failures = 0

    def why(self) -> str:
        """Why the model was given up, or "" while it is still asked."""
        if not self.tripped:
            return ""
        return f"{self.failures} model answers failed in a row (the last: {self.last})"


class Health(BaseModel):
    """What a provider can do right now, why, and how to fix it."""

    model_config = ConfigDict(frozen=True)

    state: HealthState
    provider: str  # "ollama:<model>" or "rules"
    reason: str  # why this provider, or what is wrong
    fix: str = ""  # what to do about it; empty when nothing needs doing
    fallback: bool = False  # the rules stand in for an LLM that is not available

    @property
    def ok(self) -> bool:
        return self.state == "ok"

    @property
    def summary(self) -> str:
        """The whole sentence people read (a notification, `memlink doctor`)."""
        if self.provider == "rules":
            text = "zero-LLM rules provider" + (f", because {self.reason}" if self.fallback else f" ({self.reason})")
        else:
            text = self.reason
        return f"{text}; {self.fix}" if self.fix else text

    @property
    def detail(self) -> str:
        """Deprecated name of ``summary``, for callers not moved yet."""
        return self.summary

    def line(self) -> str:
        """The short status-line text, e.g. ``LLM: rules (by choice)``."""
        if self.provider == "rules":
            return f"LLM: rules ({self.reason if self.fallback else 'by choice'})"
        name = self.provider.replace(":", " ", 1)
        return f"LLM: {name}" if self.ok else f"LLM: {name} — {self.state}"


class Provider(ABC):
    """One source of model answers. ``is_llm`` tells the callers that pick an extractor
    or a line matcher whether a model stands behind it."""

    name: str
    is_llm: bool

    @abstractmethod
    def structured(self, messages: list[dict], schema: type[T]) -> T:
        """One answer validated as ``schema``, or an LLMError."""

    @abstractmethod
    def stream_chat(self, messages: list[dict]) -> Iterator[str]:
        """A chat reply in pieces, or an LLMError."""

    @abstractmethod
    def models(self) -> list[str]:
        """The chat models this provider can use (embedding models are never listed)."""

    @abstractmethod
    def health(self) -> Health:
        """A fresh check of what this provider can do now."""

    def until(self, deadline: float) -> Provider:
        """This provider for calls that must end by ``deadline`` (a ``time.monotonic()``
        value): a call in flight at the deadline fails with LLMTimeout. The rules need no
        clock, so by default the provider itself."""
        return self


def seconds_left(deadline: float | None, timeout: float) -> float:
    """A call's timeout: the provider's own, or less when a deadline comes first.
    LLMTimeout when the deadline has passed: no call starts then."""
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise LLMTimeout("the time budget was spent before the model was asked")
    return min(timeout, left)
