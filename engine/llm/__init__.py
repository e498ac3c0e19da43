"""LLM providers behind one method in spirit: ``structured(messages, schema)`` → a
validated pydantic object, or a typed error. Output is parsed and validated only: no JSON
repair, no default-filling, no retries (seed 002 §一)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, TypeVar

from pydantic import BaseModel

from ..errors import MemlinkError

T = TypeVar("T", bound=BaseModel)


class LLMError(MemlinkError):
    """The model could not give a usable answer."""


class LLMUnavailable(LLMError):
    """No server to talk to."""


class LLMModelMissing(LLMError):
    """The server runs, but the model is not pulled."""


class LLMTimeout(LLMError):
    pass


class LLMInvalidOutput(LLMError):
    """The answer did not validate. ``raw`` keeps it for quarantine; it is never logged."""

    def __init__(self, message: str, raw: str):
        super().__init__(message)
        self.raw = raw


@dataclass
class Health:
    ok: bool
    provider: str  # "ollama:<model>" or "rules"
    detail: str  # why this provider, or what is wrong, with the fix


class LLMProvider(Protocol):
    name: str

    def structured(self, messages: list[dict], schema: type[T]) -> T: ...

    def health(self) -> Health: ...
