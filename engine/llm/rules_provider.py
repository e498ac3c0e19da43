"""The zero-LLM provider: extraction and recall run on rules (engine.extract.rules,
engine.sessions.importer), so this provider only reports why it is the one in use and
refuses what needs a model, saying how to get one."""

from __future__ import annotations

from collections.abc import Iterator

from . import Health, NeedsOllama, Provider, T

CHOSEN = "memlink.yaml: llm.provider: rules"


class RulesProvider(Provider):
    name = "rules"
    is_llm = False

    def __init__(self, reason: str = CHOSEN, fallback: bool = False, fix: str = ""):
        self.reason = reason  # why the rules are in use
        self.fallback = fallback  # standing in for an LLM that is not available
        self.fix = fix

    def _refuse(self, what: str) -> NeedsOllama:
        why = f" ({self.reason})" if self.fallback else ""
        return NeedsOllama(f"{what} need an LLM and the zero-LLM rules provider is in use{why}",
                           "start Ollama with `ollama serve`, `ollama pull` the model and set llm.provider to "
                           "auto or ollama; browsing, search, import and extraction keep working")

    def structured(self, messages: list[dict], schema: type[T]) -> T:
        raise self._refuse("structured answers")

    def stream_chat(self, messages: list[dict]) -> Iterator[str]:
        raise self._refuse("chat replies")

    def models(self) -> list[str]:
        return []

    def health(self) -> Health:
        return Health(state="ok", provider=self.name, reason=self.reason, fix=self.fix, fallback=self.fallback)
