"""Which provider this process uses, chosen once per LLM configuration (one health
check) and re-checked only when asked (``refresh``). The CLI, the app's status line and
the engine's callers all read the same ``Selection`` (docs/DESIGN.md, "Services and
providers")."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from ..config import LLMConfig
from . import Health, Provider
from .ollama_provider import OllamaProvider, resolve_host
from .rules_provider import RulesProvider


@dataclass(frozen=True)
class Selection:
    """The provider to use and its health when it was chosen. ``provider`` is never
    None: the rules provider stands in when no LLM is usable, except when Ollama was
    asked for explicitly, where callers report its error when they use it."""

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
        return Selection(rules, rules.health())
    ollama = OllamaProvider(cfg.model, cfg.host, cfg.timeout, cfg.max_tokens)
    health = ollama.health()
    if health.ok or cfg.provider == "ollama":
        return Selection(ollama, health)
    rules = RulesProvider(health.reason, fallback=True, fix=health.fix)
    return Selection(rules, rules.health())


Key = tuple[str, str, str, float, int]


class ProviderRegistry:
    """Selections by LLM configuration; thread-safe (the app checks from a worker)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._chosen: dict[Key, Selection] = {}
        self.checks = 0  # health checks made, for `memlink doctor` and tests

    @staticmethod
    def _key(cfg: LLMConfig) -> Key:
        # The host as resolved now: $OLLAMA_HOST is part of which server is meant.
        return (cfg.provider, cfg.model, resolve_host(cfg.host), cfg.timeout, cfg.max_tokens)

    def get(self, cfg: LLMConfig) -> Selection:
        """The selection for this configuration, checked on first use only."""
        key = self._key(cfg)
        with self._lock:
            chosen = self._chosen.get(key)
        return chosen if chosen is not None else self.refresh(cfg)

    def refresh(self, cfg: LLMConfig) -> Selection:
        """Check again (Ollama started or stopped meanwhile) and remember the answer."""
        chosen = choose(cfg)  # outside the lock: a slow server must not block other readers
        with self._lock:
            self.checks += 1
            self._chosen[self._key(cfg)] = chosen
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
