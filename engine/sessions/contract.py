"""The turn extraction contract (docs/DESIGN.md, "Turn memory"): one call per completed
turn returns summary, outcome and SPO triples — all three required, nothing else allowed."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class Outcome(StrEnum):
    COMPLETED = "completed"
    PARTIAL = "partial"
    FAILED = "failed"
    INFORMATIONAL = "informational"
    UNKNOWN = "unknown"


class Triple(BaseModel):
    model_config = ConfigDict(extra="forbid")

    subject: str = Field(min_length=1)
    predicate: str = Field(min_length=1)
    object: str = Field(min_length=1)


class TurnExtraction(BaseModel):
    model_config = ConfigDict(extra="forbid")

    summary: str = Field(min_length=1)
    outcome: Outcome
    triples: list[Triple]
