"""The real LLM path: a local Ollama server through the official `ollama` client, with
structured output (``format`` = the pydantic model's JSON schema), temperature 0, a cap
on generated tokens and an explicit timeout (the client's default waits forever), cut
short when a deadline comes first (``until``: the dream's time budget)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

import httpx
import ollama
from pydantic import ValidationError

from . import (
    Health,
    LLMError,
    LLMInvalidOutput,
    LLMModelMissing,
    LLMTimeout,
    LLMUnavailable,
    Provider,
    T,
    not_running,
    resolve_host,
    seconds_left,
)

R = TypeVar("R")


def _summary(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(p) for p in err["loc"]) or "(top)"
        parts.append(f"{loc}: {err['msg']}")
    more = f" (+{exc.error_count() - 3} more)" if exc.error_count() > 3 else ""
    return "; ".join(parts) + more


def can_chat(capabilities: list[str] | None, family: str) -> bool:
    """Whether a model answers chat requests. Ollama's /api/show lists ``capabilities``
    ("completion" for chat models, "embedding" for embedding models); servers too old
    to say fall back to the family, where every embedding model Ollama ships is a BERT."""
    if capabilities:
        return "completion" in capabilities
    return "bert" not in family.lower()


class OllamaProvider(Provider):
    is_llm = True

    def __init__(self, model: str, host: str | None = None, timeout: float = 60.0, max_tokens: int = 2048):
        self.model = model
        self.host = resolve_host(host)
        self.timeout = timeout
        self.max_tokens = max_tokens
        self.client = ollama.Client(host=self.host, timeout=timeout)
        self.name = f"ollama:{model}"
        self.deadline: float | None = None  # (time.monotonic()) no structured call outlives it

    def until(self, deadline: float) -> OllamaProvider:
        bounded = OllamaProvider(self.model, self.host, self.timeout, self.max_tokens)
        bounded.deadline = deadline
        return bounded

    # -- errors -------------------------------------------------------------------------------
    def _not_running(self) -> LLMUnavailable:
        return not_running(self.host)

    def _missing(self) -> LLMModelMissing:
        return LLMModelMissing(f"model {self.model!r} is not pulled on {self.host}", f"run `ollama pull {self.model}`")

    def _not_chat(self) -> LLMModelMissing:
        return LLMModelMissing(f"model {self.model!r} on {self.host} is an embedding model, not a chat model",
                               "set llm.model in memlink.yaml to a chat model (e.g. llama3.2)")

    def _translate(self, exc: Exception, timeout: float | None = None) -> LLMError:
        """The client's errors as ours, each with what to do about it."""
        if isinstance(exc, (ConnectionError, httpx.ConnectError)):
            return self._not_running()
        if isinstance(exc, httpx.TimeoutException):
            return LLMTimeout(f"Ollama at {self.host} did not answer within {round(timeout or self.timeout, 1):g}s")
        if isinstance(exc, ollama.ResponseError):
            if exc.status_code == 404:
                return self._missing()
            return LLMError(f"Ollama error {exc.status_code}: {str(exc.error)[:200]}")
        if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError)):
            return LLMError(f"the connection to Ollama at {self.host} broke off before the answer was complete",
                            "try again; if it keeps happening, see Ollama's own log")
        if isinstance(exc, httpx.TransportError):
            return LLMError(f"the network connection to Ollama at {self.host} failed", "check that Ollama is running and reachable")
        return LLMError(f"talking to Ollama at {self.host} failed: {type(exc).__name__}")

    def _call(self, fn: Callable[[], R], timeout: float | None = None) -> R:
        try:
            return fn()
        except (ConnectionError, httpx.HTTPError, ollama.ResponseError) as exc:
            raise self._translate(exc, timeout) from None

    def _pulled(self) -> dict[str, str]:
        """Every pulled model's name → its family (LLMError when Ollama does not answer)."""
        listing = self._call(self.client.list)
        return {m.model: (m.details.family or "") if m.details else "" for m in listing.models if m.model}

    def _chat_capable(self, name: str, family: str) -> bool:
        shown = self._call(lambda: self.client.show(name))
        return can_chat(list(shown.capabilities or []), family)

    # -- the interface --------------------------------------------------------------------------
    def models(self) -> list[str]:
        """The chat models this Ollama has pulled (LLMError when it is not running)."""
        return sorted(name for name, family in self._pulled().items() if self._chat_capable(name, family))

    def health(self) -> Health:
        try:
            pulled = self._pulled()
            wanted = self.model if ":" in self.model else f"{self.model}:latest"
            name = self.model if self.model in pulled else wanted
            if name not in pulled:
                raise self._missing()
            if not self._chat_capable(name, pulled[name]):
                raise self._not_chat()
        except LLMUnavailable as exc:
            return Health(state="unavailable", provider=self.name, reason=exc.reason, fix=exc.fix)
        except LLMError as exc:  # the server answers, the model does not do
            return Health(state="degraded", provider=self.name, reason=exc.reason, fix=exc.fix)
        return Health(state="ok", provider=self.name, reason=f"Ollama at {self.host} has {self.model}")

    def stream_chat(self, messages: list[dict]) -> Iterator[str]:
        """A chat reply, streamed in pieces."""
        stream = self._call(lambda: self.client.chat(model=self.model, messages=messages, stream=True,
                                                     options={"num_predict": self.max_tokens}))
        try:
            for part in stream:
                text = part.message.content or ""
                if text:
                    yield text
        except (ConnectionError, httpx.HTTPError, ollama.ResponseError) as exc:  # the stream broke mid-way
            raise self._translate(exc) from None

    def structured(self, messages: list[dict], schema: type[T]) -> T:
        timeout = seconds_left(self.deadline, self.timeout)
        # A shorter timeout than the client's needs a client of its own (the ollama client
        # takes no timeout per request).
        own = timeout < self.timeout
        client = ollama.Client(host=self.host, timeout=timeout) if own else self.client
        try:
            response = self._call(lambda: client.chat(
                model=self.model,
                messages=messages,
                format=schema.model_json_schema(),
                options={"temperature": 0, "num_predict": self.max_tokens},
                stream=False,
            ), timeout)
        finally:
            if own:
                client.close()
        raw = response.message.content or ""
        try:
            return schema.model_validate_json(raw)
        except ValidationError as exc:
            raise LLMInvalidOutput(f"the model's answer does not fit {schema.__name__}: {_summary(exc)}", raw) from None
