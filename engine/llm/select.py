"""Deprecated: use ``engine.llm.registry`` (``selection(cfg)`` / ``refresh(cfg)``) or a
vault's ``vault.services.selection``. Kept while the CLI and the app still call it."""

from __future__ import annotations

from ..config import LLMConfig
from . import Health, Provider
from .registry import refresh


def provider_status(cfg: LLMConfig) -> tuple[Provider | None, Health]:
    """(the LLM provider to use or None, its health). An explicit re-check, as the CLI's
    commands and the app's "check the provider" ask for; the registry keeps the answer."""
    chosen = refresh(cfg)
    return (chosen.provider if chosen.provider.is_llm else None), chosen.health
