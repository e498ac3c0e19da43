"""Which provider this process uses, chosen once per LLM configuration (one health
check) and re-checked only when asked (``refresh``). The CLI, the app's status line and
the engine's callers all read the same ``Selection`` (docs/DESIGN.md,
"Providers")."""

from __future__ import annotations

import threading

from pydantic import BaseModel, ConfigDict

from ..model.config import LLMConfig
from . import Health, LLMError, Provider, listening, not_running, resolve_host
from .rules_provider import RulesProvider


class Selection(BaseModel):
    """The provider to use and its health when it was chosen. ``provider`` is never
    None: the rules provider stands in when no LLM is usable, except when Ollama was
    asked for explicitly, where callers report its error when they use it."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    provider: Provider
    health: Health

    @property
    def llm(self) -> Provider | None:
        """The provider when a healthy model stands behind it, else None."""
        return self.provider if self.provider.is_llm and self.health.ok else None


def choose(cfg: LLMConfig) -> Selection:
    """One health check: Ollama when configured (or on ``auto``) and healthy, else the rules."""
    if cfg.provider == "rules":
        rules = RulesProvider()
        return Selection(provider=rules, health=rules.health())
    host = resolve_host(cfg.host)
    if cfg.provider == "auto" and not listening(host):  # (the client is not even loaded)
        why = not_running(host)
        rules = RulesProvider(why.reason, fallback=True, fix=why.fix)
        return Selection(provider=rules, health=rules.health())
    from .ollama_provider import OllamaProvider  # (the client library: loaded only when a server may answer)

    ollama = OllamaProvider(cfg.model, cfg.host, cfg.timeout, cfg.max_tokens)
    health = ollama.health()
    if health.ok or cfg.provider == "ollama":
        return Selection(provider=ollama, health=health)
    rules = RulesProvider(health.reason, fallback=True, fix=health.fix)
    return Selection(provider=rules, health=rules.health())


Key = tuple[str, str, str, float, int]


class ProviderRegistry:
    """Selections by LLM configuration; thread-safe (the app checks from a worker)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # guards the table; never held during a check
        self._checking = threading.Lock()  # one check at a time: racing first uses share one
        self._chosen: dict[Key, Selection] = {}
        self.checks = 0  # health checks made, for `memlink doctor` and tests

    @staticmethod
    def _key(cfg: LLMConfig) -> Key:
        # The host as resolved now: $OLLAMA_HOST is part of which server is meant.
        return (cfg.provider, cfg.model, resolve_host(cfg.host), cfg.timeout, cfg.max_tokens)

    def _known(self, key: Key) -> Selection | None:
        with self._lock:
            return self._chosen.get(key)

    def get(self, cfg: LLMConfig) -> Selection:
        """The selection for this configuration, checked on first use only."""
        key = self._key(cfg)
        chosen = self._known(key)
        if chosen is not None:
            return chosen
        with self._checking:
            chosen = self._known(key)  # a racing first use may have checked meanwhile
            return chosen if chosen is not None else self._check(cfg, key)

    def refresh(self, cfg: LLMConfig) -> Selection:
        """Check again (Ollama started or stopped meanwhile) and remember the answer."""
        with self._checking:
            return self._check(cfg, self._key(cfg))

    def _check(self, cfg: LLMConfig, key: Key) -> Selection:
        chosen = choose(cfg)  # readers of other configurations are not blocked meanwhile
        with self._lock:
            self.checks += 1
            self._chosen[key] = chosen
        return chosen

    def forget(self) -> None:
        with self._lock:
            self._chosen.clear()


REGISTRY = ProviderRegistry()


def selection(cfg: LLMConfig) -> Selection:
    """The process-wide selection for ``cfg`` (see ``ProviderRegistry.get``)."""
    return REGISTRY.get(cfg)


def refresh(cfg: LLMConfig) -> Selection:
    return REGISTRY.refresh(cfg)


def models(cfg: LLMConfig) -> list[str]:
    """The chat models the configured Ollama offers, to switch to (the palette's "Model: …"
    entries); empty when it is not running. The chosen provider answers when it is Ollama;
    on rules, the same server is asked, briefly."""
    from .ollama_provider import OllamaProvider  # (see ``choose``)

    chosen = selection(cfg).provider
    source = chosen if isinstance(chosen, OllamaProvider) else OllamaProvider(cfg.model, cfg.host, timeout=2.0)
    try:
        return source.models()
    except LLMError:
        return []
