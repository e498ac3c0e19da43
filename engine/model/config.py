"""`memlink.yaml`: the vault's settings. Unknown keys are errors, so typos surface."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from ..errors import VaultError
from .files import read_settings
from .linktypes import LinkTypeSpec, LinkTypeTable, builtin_table
from .yamlio import safe_load

CONFIG_FILE = "memlink.yaml"


class EmbeddingConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str | None = Field(
        None,
        description="a model2vec model: 'multilingual' (the bundled multilingual-e5-small-m2v-192, for Chinese "
        "and other non-English text), 'english' (the bundled default), or a folder or hub id already in the local "
        "cache; empty = the bundled English one; a change re-indexes",
    )


class SearchConfig(BaseModel):
    """Hybrid search and graph propagation (docs/DESIGN.md, "Search", gives each default and why)."""

    model_config = ConfigDict(extra="forbid")

    candidates: int = Field(30, ge=1, description="hits taken from each route before fusion")
    rrf_k: int = Field(10, ge=1, description="the reciprocal-rank constant chat's memory context puts notes and turns in one "
                                             "order by")
    seeds: int = Field(10, ge=1, description="top fused hits that seed graph propagation")
    alpha: float = Field(0.7, ge=0, le=1, description="weight of the search score for seeds")
    damping: float = Field(0.85, ge=0, le=1)
    depth: int = Field(1, ge=1, le=5)
    min_link_weight: float = Field(0.3, ge=0, le=1)
    min_ppr_score: float = Field(0.05, ge=0)
    forced_follow: list[str] | None = Field(
        None, description="link types search always follows one hop; default: those the link-type table marks "
                          "forced_follow (docs/DESIGN.md \"Link types\")")
    backlink_boost: bool = False
    min_vector_similarity: float = Field(0.3, ge=-1, le=1, description="vector hits below this are noise")
    min_query_coverage: float = Field(
        0.2, ge=0, le=1,
        description="share of the question's content words' idf (frame words left out) the notes must hold to count as a "
                    "real match; below it, and with no note named, only vector hits above min_confident_similarity, marked weak")
    min_confident_similarity: float = Field(
        0.55, ge=-1, le=1,
        description="with no real match (min_query_coverage) and no note named, vector hits below this are noise: "
                    "nothing is returned")
    hnsw_m: int = Field(16, ge=4, le=64)
    hnsw_ef_construction: int = Field(100, ge=10)
    hnsw_ef_search: int = Field(200, ge=10)

    def hnsw(self) -> dict:
        return {"M": self.hnsw_m, "ef_construction": self.hnsw_ef_construction, "ef_search": self.hnsw_ef_search}


class LLMConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    provider: Literal["auto", "ollama", "rules"] = Field(
        "auto", description="auto: Ollama when it runs and has the model, else the zero-LLM rules"
    )
    model: str = "llama3.2"
    host: str | None = Field(None, description="default: $OLLAMA_HOST, else http://127.0.0.1:11434")
    timeout: float = Field(60.0, gt=0)
    max_tokens: int = Field(2048, ge=16)
    max_failures: int = Field(
        3, ge=1, description="failed model answers in a row (timeouts, answers that do not fit) after which a command "
                             "asks the model no more: ingest, commit and import-chat go on with the rules, the dream as "
                             "dream.on_llm_failure says")


class DreamInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str = Field(description="a memory type (its hub notes and their 1-hop in-link neighbours), or 'conflict'")
    scope: Literal["1-hop-neighbors"] = "1-hop-neighbors"


class DreamOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    memory_type: Literal["report"] = "report"


class DreamTask(BaseModel):
    """What the dream reads and what it writes (docs/DESIGN.md, "Dream")."""

    model_config = ConfigDict(extra="forbid")

    input: DreamInput
    output: DreamOutput = Field(default_factory=DreamOutput)


def _default_tasks() -> list[DreamTask]:
    return [DreamTask(input=DreamInput(source="entity")), DreamTask(input=DreamInput(source="conflict"))]


class ChatConfig(BaseModel):
    """What the chat model is given before each reply (docs/DESIGN.md, "Memory context")."""

    model_config = ConfigDict(extra="forbid")

    turns: int = Field(3, ge=0, le=50, description="past chat turns recalled for each question")
    notes: int = Field(3, ge=0, le=50, description="memory notes found for each question")
    context_tokens: int = Field(1500, ge=100, description="the memory context's size at most, in tokens (about 4 "
                                "characters each); recalled turns are kept first")
    previous_summaries: int = Field(3, ge=0, le=20, description="summaries of the session's previous turns given to "
                                    "the model that extracts a turn, so references like 'she' resolve")


class IngestConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # A file past this is refused before it is read: a 50 MB "note" helps nobody and
    # costs minutes and gigabytes (docs/DESIGN.md, "Units of work").
    max_bytes: int = Field(2_000_000, ge=1, description="the largest file `memlink ingest` imports, in bytes")
    inbox: str | None = Field(None, description="a folder outside the vault (relative to it, or absolute) whose files "
                              "`memlink ingest --inbox` and the app import; each file imported moves to its done/ folder")


class DreamSettings(BaseModel):
    """How long a dream may run and what it does when the model keeps failing
    (docs/DESIGN.md, "Dream"): cron must not wait on a hung model for ever."""

    model_config = ConfigDict(extra="forbid")

    budget_seconds: float = Field(600.0, gt=0, description="no topic is started after this many seconds, and no "
                                  "model call runs past them; the rest wait")
    max_llm_failures: int | None = Field(None, ge=1, description="the former name of llm.max_failures, read when "
                                         "that is not set")
    on_llm_failure: Literal["rules", "stop"] = Field(
        "rules", description="rules: answer the remaining topics with the rules; stop: leave them for the next run")


class ObsidianConfig(BaseModel):
    """The note body for Obsidian and other editors (docs/DESIGN.md, "Vault format")."""

    model_config = ConfigDict(extra="forbid")

    links_block: bool = Field(
        True, description="write each note's outgoing links as [[wikilinks]] in a generated block of its body; off: "
                          "no block is written and an existing one goes at the note's next write (`memlink obsidian` "
                          "regenerates every note)")


class VaultConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = "memlink vault"
    lock_timeout: float = Field(30.0, ge=0, description="seconds a writer waits for the vault lock")
    embedding: EmbeddingConfig = Field(default_factory=EmbeddingConfig)
    search: SearchConfig = Field(default_factory=SearchConfig)
    llm: LLMConfig = Field(default_factory=LLMConfig)
    ingest: IngestConfig = Field(default_factory=IngestConfig)
    chat: ChatConfig = Field(default_factory=ChatConfig)
    dream_tasks: list[DreamTask] = Field(default_factory=_default_tasks)
    dream_hubs: int = Field(3, ge=0, le=50, description="hub notes per anchor type a dream may report on")
    dream_max_reports: int = Field(20, ge=1, description="reports one dream writes at most; the rest wait for the next run")
    dream: DreamSettings = Field(default_factory=DreamSettings)
    obsidian: ObsidianConfig = Field(default_factory=ObsidianConfig)
    link_types: list[LinkTypeSpec] = Field(
        default_factory=list, description="the vault's own link types, added to the built-ins (docs/DESIGN.md \"Link types\")")
    _link_table: LinkTypeTable = PrivateAttr(default_factory=builtin_table)

    @model_validator(mode="after")
    def _table(self) -> VaultConfig:
        if self.dream.max_llm_failures is not None and "max_failures" not in self.llm.model_fields_set:
            self.llm.max_failures = self.dream.max_llm_failures  # one setting (the dream had it first)
        # Built once: a name clash with a built-in or a role claimed twice is a config error.
        self._link_table = builtin_table().with_types(self.link_types)
        for name in self.search.forced_follow or ():
            if name not in self._link_table:
                raise ValueError(f"search.forced_follow: unknown link type {name!r}")
        return self

    def link_table(self) -> LinkTypeTable:
        """The vault's link types: the built-ins plus ``link_types``."""
        return self._link_table


def bring_in_hint(folder: Path) -> str:
    """For a folder of notes that is not a vault (an Obsidian vault): how to use them,
    as the end of an error message; "" for any other folder."""
    try:
        notes = folder.is_dir() and any(p.suffix == ".md" or p.name == ".obsidian" for p in folder.iterdir())
    except OSError:
        notes = False
    return (f"; to use the notes in {folder} (an Obsidian vault, say), create a vault elsewhere "
            f"(`memlink --vault NEW init`) and import them: `memlink --vault NEW ingest {folder}` keeps their "
            "folders, links and attachments") if notes else ""


def load_config(root: Path) -> VaultConfig:
    path = Path(root) / CONFIG_FILE
    try:
        data = safe_load(read_settings(path)) or {}
    except FileNotFoundError:
        raise VaultError(f"{root} is not a memlink vault (no {CONFIG_FILE}); create one with `memlink init`"
                         + bring_in_hint(Path(root))) from None
    except yaml.YAMLError as exc:
        raise VaultError(f"{CONFIG_FILE}: not valid YAML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise VaultError(f"{CONFIG_FILE}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise VaultError(f"{CONFIG_FILE}: cannot be read ({exc.strerror or exc})") from None
    if not isinstance(data, dict):
        raise VaultError(f"{CONFIG_FILE}: must be a YAML mapping")
    # The environment may shorten or lengthen the lock wait (e.g. for a cron job).
    if os.environ.get("MEMLINK_LOCK_TIMEOUT"):
        data = {**data, "lock_timeout": os.environ["MEMLINK_LOCK_TIMEOUT"]}
    try:
        return VaultConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise VaultError(f"{CONFIG_FILE}: {loc}: {first['msg']}") from None


def with_embedding_model(text: str, name: str, why: str) -> str | None:
    """memlink.yaml's ``text`` with ``embedding: model: name`` added, every line already
    there kept as written (``why`` becomes its comment), or None when it has an
    ``embedding:`` setting already."""
    data = safe_load(text) or {}
    if not isinstance(data, dict) or "embedding" in data:
        return None
    out = f"{text.rstrip()}\nembedding:\n  model: {name}  # {why}\n".lstrip("\n")
    try:  # (a file ending in `...`, a flow mapping, a kept trailing blank: left as it is)
        return out if safe_load(out) == {**data, "embedding": {"model": name}} else None
    except yaml.YAMLError:
        return None


def dump_config(config: VaultConfig) -> str:
    """Only what differs from the defaults (plus the name), so new defaults reach old vaults."""
    data = {"name": config.name, **config.model_dump(mode="json", exclude_defaults=True, by_alias=True)}
    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False)
