"""Memory types: YAML definitions validated into MemoryTypeSchema (docs/DESIGN.md, "Vault format").

Built-in types ship in ``engine/memory_types``; a vault may add or override types with
YAML files in its own ``memory_types/`` folder.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from ..errors import SchemaError, UriError
from .files import read_settings
from .templates import compile_template, render_template
from .text import printable_path
from .uris import normalize_uri
from .yamlio import safe_load

RESERVED_FIELDS = {"memory_type", "created_at", "updated_at", "page_id", "links", "uri"}


class FieldType(StrEnum):
    STRING = "string"
    INTEGER = "integer"
    NUMBER = "number"
    BOOLEAN = "boolean"
    LIST = "list"
    DATE = "date"


class MergeOp(StrEnum):
    PATCH = "patch"  # replace, or SEARCH/REPLACE edit of a string
    SUM = "sum"  # numeric add, or list union
    IMMUTABLE = "immutable"  # set once; a different value is rejected


class MemoryField(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    field_type: FieldType = FieldType.STRING
    merge_op: MergeOp = MergeOp.PATCH
    required: bool = False
    description: str = ""

    @model_validator(mode="after")
    def _sum_needs_numbers_or_lists(self) -> MemoryField:
        if self.merge_op is MergeOp.SUM and self.field_type not in (
            FieldType.INTEGER,
            FieldType.NUMBER,
            FieldType.LIST,
        ):
            raise ValueError(f"field {self.name!r}: merge_op sum needs an integer, number or list field")
        if self.name in RESERVED_FIELDS:
            raise ValueError(f"field name {self.name!r} is reserved")
        return self


class MemoryTypeSchema(BaseModel):
    model_config = ConfigDict(extra="forbid")

    memory_type: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    description: str = ""
    directory: str = Field("", description="Jinja2 template of the folder ('' = vault root)")
    filename: str = Field(description="Jinja2 template of the file name, ending in .md")
    title_field: str
    fields: list[MemoryField]
    content_template: str
    link_enabled: bool = Field(True, description="Whether linking is active for this type")
    goes_stale: bool = Field(True, description="Whether lint's freshness check applies (a past event never goes stale)")
    _origin: str = PrivateAttr("")  # the file it was read from, named by a template's error

    @field_validator("fields")
    @classmethod
    def _unique_names(cls, value: list[MemoryField]) -> list[MemoryField]:
        names = [f.name for f in value]
        dupes = {n for n in names if names.count(n) > 1}
        if dupes:
            raise ValueError(f"duplicate field names: {sorted(dupes)}")
        if not value:
            raise ValueError("a memory type needs at least one field")
        return value

    @model_validator(mode="after")
    def _check(self) -> MemoryTypeSchema:
        if self.title_field not in self.field_names:
            raise ValueError(f"title_field {self.title_field!r} is not one of the fields")
        for src in (self.directory, self.filename, self.content_template):
            try:
                compile_template(src)
            except SchemaError as exc:
                raise ValueError(str(exc)) from exc
        return self

    # -- helpers -------------------------------------------------------------------------
    @property
    def field_names(self) -> list[str]:
        return [f.name for f in self.fields]

    def field(self, name: str) -> MemoryField:
        for f in self.fields:
            if f.name == name:
                return f
        raise SchemaError(f"memory type {self.memory_type!r} has no field {name!r}")

    @property
    def text_field(self) -> str:
        """The default field a link points at: 'content' when present, else the title."""
        return "content" if "content" in self.field_names else self.title_field

    def validate_fields(self, values: dict[str, Any], *, complete: bool) -> dict[str, Any]:
        """Type-check field values. ``complete`` also demands every required field."""
        if not isinstance(values, dict):
            raise SchemaError(f"{self.memory_type}: fields must be a mapping")
        out: dict[str, Any] = {}
        for name, value in values.items():
            if name not in self.field_names:
                raise SchemaError(
                    f"{self.memory_type}: unknown field {name!r} (known: {', '.join(self.field_names)})"
                )
            out[name] = coerce_value(self.field(name), value, self.memory_type)
        if complete:
            missing = [f.name for f in self.fields if f.required and out.get(f.name) in (None, "", [])]
            if missing:
                raise SchemaError(f"{self.memory_type}: required field(s) missing: {', '.join(missing)} "
                                  "(under `fields:` in the frontmatter)")
        return out

    def template_context(self, values: dict[str, Any]) -> dict[str, Any]:
        ctx: dict[str, Any] = {}
        for f in self.fields:
            v = values.get(f.name)
            if v is None:
                v = [] if f.field_type is FieldType.LIST else ("" if f.field_type in (FieldType.STRING, FieldType.DATE) else None)
            ctx[f.name] = v
        return ctx

    def _what(self, template: str) -> str:
        return f"{self._origin or self.memory_type}: {template}"

    def note_uri(self, values: dict[str, Any]) -> str:
        ctx = self.template_context(values)
        folder = render_template(self.directory, ctx, self._what("directory")).strip().strip("/")
        name = render_template(self.filename, ctx, self._what("filename")).strip()
        if not name.endswith(".md") or "/" in name:
            raise SchemaError(f"{self.memory_type}: filename template gave {name!r}; it must be a plain name ending in .md")
        try:
            return normalize_uri(f"{folder}/{name}" if folder else name)
        except UriError as exc:
            raise SchemaError(f"{self.memory_type}: note path from its templates is invalid: {exc}") from exc

    def render_body(self, values: dict[str, Any], extra: dict[str, Any] | None = None) -> str:
        ctx = self.template_context(values)
        ctx.update(extra or {})
        body = render_template(self.content_template, ctx, self._what("content_template"))
        return body.strip("\n") + "\n"


def coerce_value(field: MemoryField, value: Any, type_name: str = "") -> Any:
    """Check a value against its field type; return the stored form (dates as ISO text)."""
    where = f"{type_name}.{field.name}" if type_name else field.name
    if value is None:
        return None
    ft = field.field_type
    if ft is FieldType.STRING:
        if not isinstance(value, str):
            raise SchemaError(f"{where}: expected text, got {type(value).__name__}")
        return value
    if ft is FieldType.INTEGER:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SchemaError(f"{where}: expected an integer, got {type(value).__name__}")
        return value
    if ft is FieldType.NUMBER:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SchemaError(f"{where}: expected a number, got {type(value).__name__}")
        return value
    if ft is FieldType.BOOLEAN:
        if not isinstance(value, bool):
            raise SchemaError(f"{where}: expected true or false, got {type(value).__name__}")
        return value
    if ft is FieldType.LIST:
        if not isinstance(value, list):
            raise SchemaError(f"{where}: expected a list, got {type(value).__name__}")
        for item in value:
            if isinstance(item, (dict, list)) or item is None:
                raise SchemaError(f"{where}: list items must be plain values")
        return list(value)
    if ft is FieldType.DATE:
        if isinstance(value, dt.datetime):
            return value.date().isoformat()
        if isinstance(value, dt.date):
            return value.isoformat()
        if isinstance(value, str):
            try:
                return dt.date.fromisoformat(value.strip()).isoformat()
            except ValueError:
                pass
        raise SchemaError(f"{where}: expected a date YYYY-MM-DD, got {value!r}")
    raise SchemaError(f"{where}: unsupported field type {ft}")  # pragma: no cover


def parse_type_yaml(text: str, origin: str) -> MemoryTypeSchema:
    try:
        data = safe_load(text)
    except yaml.YAMLError as exc:
        raise SchemaError(f"{origin}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise SchemaError(f"{origin}: a memory type must be a YAML mapping")
    try:
        schema = MemoryTypeSchema.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(top)"
        raise SchemaError(f"{origin}: {loc}: {first['msg']}") from None
    schema._origin = origin
    return schema


def read_type_file(path: Path, origin: str) -> MemoryTypeSchema:
    """A vault's memory type file, read (bounded: engine.model.files) and parsed."""
    try:
        text = read_settings(path)
    except UnicodeDecodeError as exc:
        raise SchemaError(f"{origin}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise SchemaError(f"{origin}: cannot be read ({exc.strerror or exc})") from None
    return parse_type_yaml(text, origin)


class TypeRegistry:
    """All memory types known to one vault: built-ins, then the vault's own overrides."""

    def __init__(self, types: dict[str, MemoryTypeSchema]):
        self._types = dict(types)

    @classmethod
    def builtin(cls) -> TypeRegistry:
        types: dict[str, MemoryTypeSchema] = {}
        folder = resources.files("engine.memory_types")
        for entry in sorted(folder.iterdir(), key=lambda p: p.name):
            if entry.name.endswith(".yaml"):
                schema = parse_type_yaml(entry.read_text(encoding="utf-8"), f"built-in {entry.name}")
                types[schema.memory_type] = schema
        return cls(types)

    @classmethod
    def for_vault(cls, root: Path) -> TypeRegistry:
        reg = cls.builtin()
        folder = Path(root) / "memory_types"
        if folder.is_dir():
            for path in sorted(folder.glob("*.yaml")) + sorted(folder.glob("*.yml")):
                schema = read_type_file(path, f"memory_types/{printable_path(path.name)}")
                reg._types[schema.memory_type] = schema
        return reg

    def get(self, name: str) -> MemoryTypeSchema:
        try:
            return self._types[name]
        except KeyError:
            raise SchemaError(f"unknown memory type {name!r} (known: {', '.join(self.names())})") from None

    def names(self) -> list[str]:
        return list(self._types)

    def __iter__(self) -> Iterator[MemoryTypeSchema]:
        return iter(self._types.values())

    def __contains__(self, name: object) -> bool:
        return name in self._types
