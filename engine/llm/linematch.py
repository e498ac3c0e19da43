"""The LLM side of line-range correction (docs/DESIGN.md, "Providers"):
when exact search cannot find a linked passage after an edit, ask the model where it
went — or that it is gone."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ..model.config import LLMConfig
from . import LLMError, Provider
from .fence import RULE, data


class Relocated(BaseModel):
    model_config = ConfigDict(extra="forbid")

    t_line_ranges: str | None


class LLMLineMatcher:
    def __init__(self, provider: Provider):
        self.provider = provider

    def relocate(self, old_segments: list[str], new_text: str) -> str | None:
        # Numbered by the lines the link's ranges count (split on \n only); the fence quotes
        # each of them whole, so a \r or \u2028 inside one line cannot renumber the rest.
        numbered = "\n".join(f"{i}: {' '.join(line.splitlines())}" for i, line in enumerate(new_text.split("\n"), 1))
        passages = "\n---\n".join(old_segments)
        prompt = (
            f"A note was edited. Find where these passages are now, by meaning.\n{RULE}\n\n"
            f"PASSAGES (separated by ---):\n{data(passages)}\n\nNEW TEXT (numbered lines):\n{data(numbered)}\n\n"
            'Answer {"t_line_ranges": "3-5"} (several ranges comma-separated), or '
            '{"t_line_ranges": null} when the passages are gone.'
        )
        try:
            answer = self.provider.structured([{"role": "user", "content": prompt}], Relocated)
        except LLMError:
            return None  # no answer: the link is treated as gone, on both sides
        return answer.t_line_ranges


class ProviderLineMatcher:
    """A vault's matcher (``vault.matcher``): the LLM matcher when the vault's provider is
    a healthy LLM, else nothing beyond exact search. The provider is looked up only when
    exact search failed, so plain edits never wait for a health check."""

    def __init__(self, config: LLMConfig):
        self.config = config

    def relocate(self, old_segments: list[str], new_text: str) -> str | None:
        from .registry import selection  # (the HTTP client is imported only when a passage moved)

        llm = selection(self.config).llm
        if llm is None:
            return None
        return LLMLineMatcher(llm).relocate(old_segments, new_text)
