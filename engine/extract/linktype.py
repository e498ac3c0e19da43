"""With an LLM running, the zero-LLM link types of an imported page's references are
refined by the model: one structured call per page lists its references with the
cascade's guess, and the model answers a link type and a relation for each. The answer is
validated strictly (pydantic, extra="forbid", every reference at most once and in
range); an answer that does not fit is quarantined and the cascade's types are kept —
never repaired. The page's text, titles and the references' words are fenced data
(engine.llm.fence); a failure counts toward the command's breaker (``llm.max_failures``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from ..llm import Breaker, LLMError, LLMInvalidOutput
from ..llm.fence import RULE, data, one_line
from ..model.links import LinkType
from ..model.linktypes import LinkTypeTable
from ..model.relations import RELATIONS
from .autolink import PLAIN_WEIGHT, RELATION_WEIGHT
from .loop import quarantine

if TYPE_CHECKING:
    from ..storage.vault import Vault
    from .batch import Page

MAX_TEXT = 4000
PLAIN = "referenced in the text"


class LinkChoice(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ref: int = Field(ge=1, description="the reference's number")
    link_type: LinkType
    relation: str = Field(max_length=60, description="from this page to the target, e.g. 'works at', or 'mentions'")


class LinkChoices(BaseModel):
    model_config = ConfigDict(extra="forbid")

    links: list[LinkChoice]


def choices_model(link_types: LinkTypeTable) -> type[LinkChoices]:
    """LinkChoices whose link types must be the vault's (docs/DESIGN.md "Link types")."""
    choice = create_model("LinkChoice", __base__=LinkChoice, link_type=(link_types.field_type(), ...))
    return create_model("LinkChoices", __base__=LinkChoices, links=(list[choice], ...))


def _prompt(page: Page, specs: list[tuple], vault: Vault) -> str:
    catalog = vault.catalog
    labels = ", ".join(f"'{r.label}' / '{r.inverse}'" for r in RELATIONS)
    link_types = ", ".join(t.value for t in vault.config.link_table().names())
    rows = []
    for i, (_f, to_uri, link_type, spec) in enumerate(specs, 1):
        entry = catalog.get(to_uri)
        target = entry.title if entry is not None else to_uri
        rows.append(f"{i}. {one_line(target)} ({one_line(to_uri)}) shown as {spec.get('match_text')!r}; "
                    f"guess: {link_type}, {spec.get('description')!r}")
    page_text = f"# {page.title} ({page.kind})\n{page.body[:MAX_TEXT]}"
    references = "\n".join(rows)
    return (
        "A page refers to other pages. For each numbered reference, choose the link "
        f"type (one of: {link_types}) and the relation the page states, phrased from "
        f"this page to the target ({labels}), or 'mentions' when it states none.\n{RULE}\n\n"
        f"PAGE:\n{data(page_text)}\n\nREFERENCES (one numbered line each):\n{data(references)}\n\n"
        'Answer {"links": [{"ref": 1, "link_type": "belongs_to", "relation": "works at"}, ...]}.'
    )


def refine_links(vault: Vault, provider: Any, page: Page, specs: list[tuple], report: Any,
                 breaker: Breaker | None = None) -> list[tuple]:
    """The specs with the model's link types and relations, or unchanged if it failed."""
    breaker = breaker or Breaker()
    try:
        schema = choices_model(vault.config.link_table())
        answer = provider.structured([{"role": "user", "content": _prompt(page, specs, vault)}], schema)
        seen: set[int] = set()
        for choice in answer.links:
            if choice.ref > len(specs) or choice.ref in seen:
                raise ValueError(f"reference {choice.ref} is not one of the {len(specs)} listed, or answered twice")
            seen.add(choice.ref)
    except LLMInvalidOutput as exc:
        breaker.failed(exc)
        where = quarantine(vault, provider.name, str(exc), exc.raw)
        report.problems.append(f"{page.path}: link types kept from the rules: {exc} (kept in {where})")
        return specs
    except ValueError as exc:
        breaker.failed(exc)
        where = quarantine(vault, provider.name, str(exc), answer.model_dump_json())
        report.problems.append(f"{page.path}: link types kept from the rules: {exc} (kept in {where})")
        return specs
    except (LLMError, ValidationError) as exc:
        breaker.failed(exc)
        report.problems.append(f"{page.path}: link types kept from the rules: {exc}")
        return specs
    breaker.answered()
    out = list(specs)
    for choice in answer.links:
        f, t, _type, spec = specs[choice.ref - 1]
        relation = " ".join(choice.relation.lower().split())
        stated = bool(relation) and relation not in ("mentions", "mentioned", "none")
        out[choice.ref - 1] = (f, t, choice.link_type.value, {
            **spec, "weight": RELATION_WEIGHT if stated else PLAIN_WEIGHT,
            "description": relation if stated else PLAIN,
        })
    return out
