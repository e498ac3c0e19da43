"""ExtractLoop (the dream runs it too: docs/DESIGN.md, "Dream"): prefetch related pages → PageIdMap → one structured
call (or the rules) → strict validation. Invalid output changes nothing: it goes to
`.memlink/quarantine/` and the run reports why."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from importlib import resources
from typing import TYPE_CHECKING

from pydantic import BaseModel, ValidationError

from ..errors import MemlinkError
from ..graph import Walk
from ..llm import Breaker, LLMError, LLMInvalidOutput
from ..llm.fence import RULE, data, one_line, quote
from ..model.linktypes import builtin_table
from ..model.templates import render_template
from ..model.uris import PROFILE_URI
from ..retrieve.search import search
from ..storage.atomic import atomic_write_text
from . import operations
from .context import ExtractContext
from .operations import links_of
from .rules import RulesExtractor

if TYPE_CHECKING:
    from ..llm import Provider
    from ..model.schema import TypeRegistry
    from ..storage.vault import Vault
    from .inputs import Extractor

PREFETCH_HITS = 8
MAX_PAGES = 60


class ExtractionRejected(MemlinkError):
    """The provider's output did not fit the contract; it was quarantined."""


def prefetch(vault: Vault, ctx: ExtractContext) -> None:
    """Existing pages the input is about: search hits, their contradictions and closest
    links, the profile, and every known entity the text names."""
    table = vault.config.link_table()
    ctx.link_types = [(t.value, table.spec(t).description or table.spec(t).label) for t in table.names()]
    if vault.exists(PROFILE_URI):
        ctx.add(vault.read_note(PROFILE_URI))
    catalog = vault.catalog
    for uri, title in catalog.titles("entity"):
        ctx.known_names.setdefault(title.lower(), uri)
    query = ctx.text[:2000]
    hits = search(vault, query, k=PREFETCH_HITS, snippets=False, question=False) if query.strip() else []
    graph = Walk(vault)  # the hits' own links only: never the whole graph
    wanted: list[str] = []
    for hit in hits:
        wanted.append(hit.uri)
        for step in sorted(graph.steps(hit.uri), key=lambda s: -s.link.weight)[:3]:
            wanted.append(step.dst)
    low = ctx.text.lower()
    wanted += [uri for name, uri in ctx.known_names.items() if len(name) > 1 and name in low]
    for uri in wanted:
        if len(ctx.notes) >= MAX_PAGES or uri not in catalog or ctx.page_of(uri) is not None:
            continue
        try:
            note = vault.read_note(uri)
        except MemlinkError:
            continue
        ctx.add(note)
        if note.memory_type == "entity":
            for alias in note.fields.get("aliases") or []:
                ctx.known_names.setdefault(str(alias).lower(), uri)
    ctx.collect_links(vault)


def messages_for(ctx: ExtractContext) -> list[dict]:
    """The prompt: every text a person, a file or a model wrote (page fields, link
    descriptions, the input) is fenced data (engine.llm.fence)."""
    template = (resources.files("engine") / "templates" / "extract.j2").read_text(encoding="utf-8")
    pages = [{"pid": pid, "memory_type": note.memory_type, "uri": one_line(note.uri),
              "text": quote("\n".join(f"{k}: {v}" for k, v in note.fields.items()))}
             for pid, note in sorted(ctx.notes.items())]
    links = []
    for link in ctx.links:
        f, t = ctx.page_of(link.from_uri), ctx.page_of(link.to_uri)
        links.append({"f": f, "t": t, "link_type": link.link_type.value,
                      "description": quote(link.description) if link.description else ""})
    prompt = render_template(template, {
        "kind": ctx.kind, "when": ctx.when.isoformat(), "text": data(ctx.text), "source_page": ctx.source_page,
        "pages": pages, "links": links, "data_rule": RULE,
        "link_types": ctx.link_types or [(t.value, builtin_table().spec(t).description) for t in builtin_table().names()],
    }, "extract prompt")
    return [{"role": "user", "content": prompt}]


def check_operations(ops: BaseModel, ctx: ExtractContext, types: TypeRegistry) -> None:
    """What the schema cannot say: page ids exist, new ids are unique and 100+, an update
    keeps the page's type, link ends exist and their fields belong to the target's type."""
    owners: dict[int, str] = {}
    for name in type(ops).model_fields:
        if name == "links":
            continue
        for item in getattr(ops, name):
            pid = item.page_id
            if pid < 100:
                note = ctx.notes.get(pid)
                if note is None:
                    raise ValueError(f"{name} item updates page {pid}, which is not an existing page")
                if note.memory_type != name:
                    raise ValueError(f"page {pid} is a {note.memory_type}, not a {name}")
            elif pid in owners:
                raise ValueError(f"new page id {pid} used twice")
            owners[pid] = name
    for i, link in enumerate(links_of(ops)):
        for end in (link.f, link.t):
            if end not in owners and end not in ctx.notes:
                raise ValueError(f"links[{i}] refers to page {end}, which does not exist")
        target_type = owners.get(link.t) or ctx.notes[link.t].memory_type
        if link.t_field not in types.get(target_type).field_names:
            raise ValueError(f"links[{i}].t_field {link.t_field!r} is not a field of {target_type}")
        if link.f == link.t:
            raise ValueError(f"links[{i}] links page {link.f} to itself")


def quarantine(vault: Vault, provider: str, reason: str, raw: str) -> str:
    """Keep rejected output for a person to inspect; never in the logs."""
    folder = vault.state_dir / "quarantine"
    name = f"{dt.datetime.now(dt.UTC).strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}.json"
    atomic_write_text(folder / name, json.dumps({"provider": provider, "reason": reason, "raw": raw}, ensure_ascii=False, indent=2))
    return f".memlink/quarantine/{name}"


class ExtractLoop:
    def __init__(self, vault: Vault, extractor: Extractor) -> None:
        self.vault = vault
        self.extractor = extractor  # RulesExtractor or LLMExtractor

    def _schema(self) -> type[BaseModel]:
        """The output model, kept with the vault."""
        return operations.for_vault(self.vault)

    def run(self, ctx: ExtractContext) -> BaseModel:
        prefetch(self.vault, ctx)
        schema = self._schema()
        name = self.extractor.name  # (who answered: a failure may make it the rules for what follows)
        try:
            ops = self.extractor.extract(ctx, schema)
            check_operations(ops, ctx, self.vault.types)
        except LLMInvalidOutput as exc:
            self._failed(exc)
            where = quarantine(self.vault, name, str(exc), exc.raw)
            raise ExtractionRejected(f"{exc}; nothing was changed, the answer is kept in {where}") from None
        except (ValueError, ValidationError) as exc:
            self._failed(exc)
            raw = ops.model_dump_json() if "ops" in locals() else ""
            where = quarantine(self.vault, name, str(exc), raw)
            raise ExtractionRejected(f"the extraction does not fit: {str(exc).splitlines()[0]}; nothing was changed, "
                                     f"the output is kept in {where}") from None
        except LLMError as exc:  # no answer (a timeout, a server error)
            self._failed(exc)
            raise
        if isinstance(self.extractor, LLMExtractor):
            self.extractor.breaker.answered()
        return ops

    def _failed(self, exc: Exception) -> None:
        if isinstance(self.extractor, LLMExtractor):
            self.extractor.breaker.failed(exc)


class LLMExtractor:
    """ExtractLoop's LLM side: the prompt template, one structured call. After
    ``breaker.limit`` failed answers in a row (``llm.max_failures``) it asks the model no
    more and the rules extract instead, for the rest of the command."""

    def __init__(self, provider: Provider, breaker: Breaker | None = None) -> None:
        self.provider = provider
        self.breaker = breaker or Breaker()
        self.rules = RulesExtractor()

    @property
    def name(self) -> str:
        return self.rules.name if self.breaker.tripped else self.provider.name

    @property
    def fallback(self) -> str:
        """Why the rules took over, or "" while the model answers."""
        why = self.breaker.why()
        return f"{why}: the rules extracted the rest" if why else ""

    def extract(self, ctx: ExtractContext, schema: type[BaseModel]) -> BaseModel:
        if self.breaker.tripped:
            return self.rules.extract(ctx, schema)
        return self.provider.structured(messages_for(ctx), schema)
