"""The model's output contract (docs/DESIGN.md, "Providers", on when it is rebuilt): ``StructuredMemoryOperations`` generated
from the registered memory types. Each type becomes a list of flat items carrying a
``page_id`` (1–99: update that existing page, 100+: a new page) plus the type's fields;
``links`` is one top-level list of WikiLinks whose ``link_type`` is one of the vault's
link types (docs/DESIGN.md "Link types"). Every key is required and nothing extra is
allowed: an answer that does not fit is rejected, never repaired."""

from __future__ import annotations

from types import GenericAlias
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from ..model.links import WikiLink
from ..model.linktypes import LinkTypeTable, builtin_table
from ..model.schema import FieldType, MemoryTypeSchema, TypeRegistry

if TYPE_CHECKING:
    from ..storage.vault import Vault

_PY = {
    FieldType.STRING: str,
    FieldType.INTEGER: int,
    FieldType.NUMBER: float,
    FieldType.BOOLEAN: bool,
    FieldType.LIST: list[str | int | float],
    FieldType.DATE: str,
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


def item_model(schema: MemoryTypeSchema) -> type[BaseModel]:
    fields: dict[str, Any] = {"page_id": (int, Field(ge=1))}
    for f in schema.fields:
        py = _PY[f.field_type]
        if f.field_type is FieldType.DATE:
            fields[f.name] = (py | None, Field(None, pattern=r"^\d{4}-\d{2}-\d{2}$", description=f.description or "YYYY-MM-DD"))
        else:
            fields[f.name] = (py | None, Field(None, description=f.description or None))
    return create_model(f"{schema.memory_type.title().replace('_', '')}Item", __base__=_Strict, **fields)


def wikilink_model(link_types: LinkTypeTable) -> type[WikiLink]:
    """WikiLink whose ``link_type`` must be one of ``link_types`` (in the JSON schema the
    model is given, too): a type another vault declared in this process is rejected."""
    return create_model("WikiLink", __base__=WikiLink, link_type=(link_types.field_type(), ...))


def operations_model(types: TypeRegistry, names: list[str] | None = None,
                     link_types: LinkTypeTable | None = None) -> type[BaseModel]:
    """The output model for the given memory types (all linkable types by default) and
    link types (the built-ins by default; pass the vault's ``config.link_table()``)."""
    table = link_types or builtin_table()
    chosen = [t for t in types if (names is None or t.memory_type in names)]
    # GenericAlias(list, (X,)) is list[X] for a class X made at runtime.
    fields: dict[str, Any] = {t.memory_type: (GenericAlias(list, (item_model(t),)), ...) for t in chosen}
    fields["links"] = (GenericAlias(list, (wikilink_model(table),)), ...)
    model = create_model("StructuredMemoryOperations", __base__=_Strict, **fields)
    model.link_types = table  # type: ignore[attr-defined]  # read back by link_types_of
    return model


class _Built:
    """The output model of a vault's memory types (``for_vault``)."""

    def __init__(self, _vault: Vault) -> None:
        self.types: TypeRegistry | None = None
        self.model: type[BaseModel] | None = None


def for_vault(vault: Vault) -> type[BaseModel]:
    """ExtractLoop's output model for the vault's memory types, built once per type
    registry (building it costs ~25 ms) and kept with the vault."""
    built = vault.shared(_Built, _Built)
    if built.model is None or built.types is not vault.types:
        names = [t.memory_type for t in vault.types if t.link_enabled]
        built.types, built.model = vault.types, operations_model(vault.types, names, vault.config.link_table())
    return built.model


def link_types_of(model: type[BaseModel]) -> LinkTypeTable:
    """The link-type table an output model was built for: the rules extractor types links
    with the same table the model validates them against."""
    table = getattr(model, "link_types", None)
    return table if isinstance(table, LinkTypeTable) else builtin_table()


def links_of(ops: BaseModel) -> list[WikiLink]:
    """The links of an operations model's instance (its ``links`` field)."""
    links: list[WikiLink] = ops.links  # type: ignore[attr-defined]  # a field pydantic's create_model adds at runtime
    return links


def item_fields(item: BaseModel) -> dict[str, Any]:
    """An item's field values without page_id and without fields left out (None)."""
    return {k: v for k, v in item.model_dump().items() if k != "page_id" and v is not None}
