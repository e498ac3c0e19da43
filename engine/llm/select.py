"""Which provider is active, and why. The offline default is the zero-LLM rules
provider; Ollama is used when configured (or on `auto`) and healthy."""

from __future__ import annotations

from ..config import LLMConfig
from . import Health
from .ollama_provider import OllamaProvider


def provider_status(cfg: LLMConfig) -> tuple[OllamaProvider | None, Health]:
    """(the Ollama provider to use or None, the health line to show people)."""
    if cfg.provider == "rules":
        return None, Health(True, "rules", "zero-LLM rules provider (memlink.yaml: llm.provider: rules)")
    ollama = OllamaProvider(cfg.model, cfg.host, cfg.timeout, cfg.max_tokens)
    health = ollama.health()
    if health.ok:
        return ollama, health
    if cfg.provider == "ollama":
        return ollama, health  # asked for explicitly: callers report the error when they use it
    return None, Health(True, "rules", f"zero-LLM rules provider, because {health.detail}")
