"""The real LLM path: a local Ollama server through the official `ollama` client, with
structured output (``format`` = the pydantic model's JSON schema), temperature 0, a cap
on generated tokens and an explicit timeout (the client's default waits forever)."""

from __future__ import annotations

import os

import httpx
import ollama
from pydantic import ValidationError

from . import Health, LLMError, LLMInvalidOutput, LLMModelMissing, LLMTimeout, LLMUnavailable, T

DEFAULT_HOST = "http://127.0.0.1:11434"


def _summary(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(p) for p in err["loc"]) or "(top)"
        parts.append(f"{loc}: {err['msg']}")
    more = f" (+{exc.error_count() - 3} more)" if exc.error_count() > 3 else ""
    return "; ".join(parts) + more


class OllamaProvider:
    def __init__(self, model: str, host: str | None = None, timeout: float = 60.0, max_tokens: int = 2048):
        self.model = model
        self.host = host or os.environ.get("OLLAMA_HOST") or DEFAULT_HOST
        self.timeout = timeout
        self.max_tokens = max_tokens
        self.client = ollama.Client(host=self.host, timeout=timeout)
        self.name = f"ollama:{model}"

    # -- errors -------------------------------------------------------------------------------
    def _not_running(self) -> LLMUnavailable:
        return LLMUnavailable(f"Ollama is not running at {self.host}; start it with `ollama serve` (or set OLLAMA_HOST)")

    def _missing(self) -> LLMModelMissing:
        return LLMModelMissing(f"model {self.model!r} is not pulled on {self.host}; run `ollama pull {self.model}`")

    def _translate(self, exc: Exception) -> LLMError | None:
        """The client's errors as ours, each with what to do about it."""
        if isinstance(exc, (ConnectionError, httpx.ConnectError)):
            return self._not_running()
        if isinstance(exc, httpx.TimeoutException):
            return LLMTimeout(f"Ollama at {self.host} did not answer within {self.timeout:g}s")
        if isinstance(exc, ollama.ResponseError):
            if exc.status_code == 404:
                return self._missing()
            return LLMError(f"Ollama error {exc.status_code}: {str(exc.error)[:200]}")
        if isinstance(exc, httpx.HTTPError):
            return LLMError(f"talking to Ollama at {self.host} failed: {type(exc).__name__}")
        return None

    def _call(self, fn):
        try:
            return fn()
        except (ConnectionError, httpx.HTTPError, ollama.ResponseError) as exc:
            raise self._translate(exc) from None

    # -- the interface --------------------------------------------------------------------------
    def models(self) -> list[str]:
        """The model names this Ollama has pulled (LLMError when it is not running)."""
        listing = self._call(self.client.list)
        return sorted(m.model for m in listing.models if m.model)

    def health(self) -> Health:
        try:
            listing = self._call(self.client.list)
        except LLMError as exc:
            return Health(False, self.name, str(exc))
        names = {m.model for m in listing.models if m.model}
        wanted = self.model if ":" in self.model else f"{self.model}:latest"
        if self.model in names or wanted in names:
            return Health(True, self.name, f"Ollama at {self.host} has {self.model}")
        return Health(False, self.name, str(self._missing()))

    def stream_chat(self, messages: list[dict]):
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
        response = self._call(lambda: self.client.chat(
            model=self.model,
            messages=messages,
            format=schema.model_json_schema(),
            options={"temperature": 0, "num_predict": self.max_tokens},
            stream=False,
        ))
        raw = response.message.content or ""
        try:
            return schema.model_validate_json(raw)
        except ValidationError as exc:
            raise LLMInvalidOutput(f"the model's answer does not fit {schema.__name__}: {_summary(exc)}", raw) from None
