"""Link types as data (docs/DESIGN.md "Link types").

One table describes every link type: its name, how score flows along it in each
direction, whether search always follows it, the phrases shown to people, the rules
extractor's cues, and the roles the rest of the engine asks about ("the conflict type").
The built-ins ship in ``engine/link_types.yaml``; a vault adds its own under
``link_types:`` in ``memlink.yaml`` (``VaultConfig.link_table()`` is the vault's table).

``LinkType`` is a link type's name: a ``str`` with one interned instance per name, so
``LinkType("contradicts") is LinkType.CONTRADICTS`` and ``link.link_type.value`` keep
working. ``LinkType(name)`` accepts the names of every table built in this process;
``LinkType.named(name)`` accepts any well-formed name, for reading sidecars that hold a
type no table declares (such links are kept, and carry no meaning until declared).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from functools import lru_cache
from importlib import resources
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, WithJsonSchema, field_validator
from pydantic_core import core_schema

from ..errors import LinkError
from .yamlio import safe_load

Direction = Literal["links", "backlinks"]
# What the engine asks of a type by meaning rather than by name; each role is held by at
# most one type. default: the type of a link nothing else types (legacy entries, plain
# mentions); conflict: two notes disagree (lint, review, dream); supersedes: the from-note
# replaces the to-note (review, dream); provenance: the from-note was made from the
# to-note (dream, search's grouping); membership: part of / works at (rules, relations).
Role = Literal["default", "conflict", "supersedes", "provenance", "membership"]
NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


class _LinkTypeMeta(type):
    def __iter__(cls) -> Iterator[LinkType]:
        """The link types known in this process: built-ins first, then vault-declared."""
        return iter([cls._interned[n] for n in cls._known])  # type: ignore[attr-defined]

    def __len__(cls) -> int:
        return len(cls._known)  # type: ignore[attr-defined]


class LinkType(str, metaclass=_LinkTypeMeta):
    """A link type's name (see the module docstring)."""

    _interned: ClassVar[dict[str, LinkType]] = {}
    _known: ClassVar[dict[str, None]] = {}  # an ordered set

    RELATED_TO: ClassVar[LinkType]
    BELONGS_TO: ClassVar[LinkType]
    CAUSED_BY: ClassVar[LinkType]
    DERIVED_FROM: ClassVar[LinkType]
    CONTRADICTS: ClassVar[LinkType]
    EVOLVED_FROM: ClassVar[LinkType]

    def __new__(cls, name: object) -> LinkType:
        if not isinstance(name, str) or str.__str__(name) not in cls._known:
            raise ValueError(f"unknown link type {name!r}")
        return cls._interned[str.__str__(name)]

    @classmethod
    def known(cls, name: str) -> LinkType | None:
        """The type called ``name`` if this process knows it (``LinkType(name)`` without
        the exception: a walk asks it of hundreds of records)."""
        return cls._interned[name] if name in cls._known else None

    @classmethod
    def named(cls, name: str) -> LinkType:
        """The type called ``name``, declared or not (it must be a well-formed name)."""
        hit = cls._interned.get(name)
        if hit is not None:
            return hit
        if not NAME.match(name):
            raise ValueError(f"{name!r} is not a link type name (lower-case letters, digits, _)")
        made = str.__new__(cls, name)
        cls._interned[str.__str__(made)] = made
        return made

    @classmethod
    def _declare(cls, name: str) -> LinkType:
        made = cls.named(name)
        cls._known[name] = None
        return made

    @property
    def value(self) -> str:
        return str.__str__(self)

    def __repr__(self) -> str:
        return f"LinkType({self.value!r})"

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (LinkType.named, (self.value,))

    def __copy__(self) -> LinkType:
        return self

    def __deepcopy__(self, memo: dict) -> LinkType:
        return self

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> core_schema.CoreSchema:
        # Validation: a known name; serialisation: the plain string.
        return core_schema.no_info_after_validator_function(
            cls, core_schema.str_schema(),
            serialization=core_schema.plain_serializer_function_ser_schema(lambda v: str.__str__(v), when_used="json"),
        )

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: Any, handler: Any) -> dict[str, Any]:
        return {"type": "string", "enum": [t.value for t in cls]}


def any_link_type(value: object) -> LinkType:
    """Pydantic validator for stored links: any well-formed name, declared or not."""
    if isinstance(value, LinkType):
        return value
    if not isinstance(value, str):
        raise ValueError("a link type must be text")
    return LinkType.named(value)


class Flow(BaseModel):
    """How score flows along a link type in one direction (docs/DESIGN.md "Link types")."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    weight: float = Field(ge=0.0, le=1.0, description="multiplies the score that flows")
    cont: bool = Field(False, alias="continue", description="the note reached spreads further")
    max_depth: int = Field(1, ge=1, le=5, description="hops from a seed this rule is used for")


class LinkTypeSpec(BaseModel):
    """One row of the link-type table."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME.pattern)
    label: str = Field(min_length=1, description="read from the from-note: 'evolved from'")
    inverse: str = Field(min_length=1, description="read from the to-note: 'evolved into'")
    description: str = ""
    forward: Flow = Field(description="score flowing from the from-note to the to-note")
    backward: Flow = Field(description="score flowing from the to-note back to the from-note")
    forced_follow: bool = Field(False, description="search always shows these neighbours of a hit")
    roles: list[Role] = Field(default_factory=list)
    cues: list[str] = Field(default_factory=list, description="regular expressions (case-insensitive) that type a mention")
    cue_rank: int = Field(100, ge=0, description="cues are tried lowest rank first")
    _cue: re.Pattern[str] | None = PrivateAttr(None)

    @field_validator("cues")
    @classmethod
    def _compiles(cls, cues: list[str]) -> list[str]:
        for cue in cues:
            try:
                re.compile(cue)
            except re.error as exc:
                raise ValueError(f"cue {cue!r} is not a regular expression: {exc}") from None
        return cues

    def model_post_init(self, _context: Any) -> None:
        self._cue = re.compile("|".join(self.cues), re.I) if self.cues else None

    @property
    def cue(self) -> re.Pattern[str] | None:
        return self._cue

    @property
    def type(self) -> LinkType:
        return LinkType.named(self.name)


class LinkTypeTable:
    """An ordered set of link types: the built-ins, plus a vault's own."""

    def __init__(self, specs: Iterable[LinkTypeSpec]):
        self._specs: dict[str, LinkTypeSpec] = {}
        self._roles: dict[str, LinkType] = {}
        for spec in specs:
            if spec.name in self._specs:
                raise ValueError(f"link type {spec.name!r} is declared twice")
            self._specs[spec.name] = spec
            for role in spec.roles:
                if role in self._roles:
                    raise ValueError(f"link types {self._roles[role].value!r} and {spec.name!r} both claim the role {role!r}")
                self._roles[role] = LinkType.named(spec.name)
        if "default" not in self._roles:
            raise ValueError("no link type has the role 'default'")
        for name in self._specs:
            LinkType._declare(name)  # known to this process, so LinkType(name) validates
        self._cascade = sorted((s for s in self._specs.values() if s.cue is not None), key=lambda s: s.cue_rank)

    def __iter__(self) -> Iterator[LinkTypeSpec]:
        return iter(self._specs.values())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and str.__str__(name) in self._specs

    def names(self) -> list[LinkType]:
        return [LinkType.named(n) for n in self._specs]

    def spec(self, link_type: str) -> LinkTypeSpec:
        return self._specs[str.__str__(link_type)]

    def require(self, link_type: object) -> LinkType:
        """``link_type`` as a LinkType of this table, or a LinkError naming the choices."""
        if isinstance(link_type, str) and link_type in self:
            return LinkType.named(str.__str__(link_type))
        raise LinkError(f"unknown link type {link_type!r} (one of: {', '.join(self._specs)})")

    def role(self, role: Role) -> LinkType:
        """The type that holds ``role``. The built-ins hold every role and a vault cannot
        take one over, so every table answers every role."""
        return self._roles[role]

    def propagation(self) -> dict[tuple[LinkType, Direction], Flow]:
        """(type, direction) → Flow for every type: the graph's propagation table."""
        out: dict[tuple[LinkType, Direction], Flow] = {}
        for spec in self._specs.values():
            out[(spec.type, "links")] = spec.forward
            out[(spec.type, "backlinks")] = spec.backward
        return out

    def forced_follow(self) -> tuple[LinkType, ...]:
        return tuple(s.type for s in self._specs.values() if s.forced_follow)

    def phrase(self, link_type: str, direction: Direction) -> str:
        """How a link reads from one of its notes: the label from the from-note (links),
        the inverse from the to-note (backlinks); an undeclared type reads as its name."""
        spec = self._specs.get(str.__str__(link_type))
        if spec is None:
            return str.__str__(link_type)
        return spec.label if direction == "links" else spec.inverse

    def type_for(self, sentence: str) -> LinkType:
        """The rules extractor's cascade: the first type (by cue_rank) whose cue occurs in
        the sentence, else the default type."""
        for spec in self._cascade:
            if spec.cue is not None and spec.cue.search(sentence):
                return spec.type
        return self._roles["default"]

    def field_type(self) -> Any:
        """A pydantic field type that accepts only this table's types, with the names as
        the JSON schema's enum (the schema an LLM is given)."""

        def declared(value: LinkType) -> LinkType:
            if value not in self:
                raise ValueError(f"unknown link type {value.value!r}")
            return value

        names = list(self._specs)
        return Annotated[LinkType, AfterValidator(declared), WithJsonSchema({"type": "string", "enum": names})]

    def unknown(self, link_types: Iterable[str]) -> list[str]:
        """The names among ``link_types`` this table does not declare, each once."""
        return list(dict.fromkeys(str.__str__(t) for t in link_types if t not in self))

    def with_types(self, extra: Iterable[LinkTypeSpec]) -> LinkTypeTable:
        """This table plus ``extra`` (new names only: a built-in cannot be redefined)."""
        extra = list(extra)
        if not extra:
            return self
        return LinkTypeTable([*self._specs.values(), *extra])


def parse_rows(data: Any, where: str) -> list[LinkTypeSpec]:
    if not isinstance(data, list):
        raise ValueError(f"{where}: must hold a YAML list of link types")
    try:
        return [LinkTypeSpec.model_validate(row) for row in data]
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ValueError(f"{where}: {'.'.join(str(p) for p in first['loc'])}: {first['msg']}") from None


@lru_cache(maxsize=1)
def builtin_data() -> dict[str, Any]:
    """``engine/link_types.yaml``: its ``link_types`` and the ``relations`` links state."""
    text = resources.files("engine").joinpath("link_types.yaml").read_text(encoding="utf-8")
    data = safe_load(text)
    if not isinstance(data, dict) or not {"link_types", "relations"} <= data.keys():
        raise RuntimeError("engine/link_types.yaml must hold link_types: and relations:")
    return data


@lru_cache(maxsize=1)
def builtin_table() -> LinkTypeTable:
    """The six built-in types from ``engine/link_types.yaml``."""
    return LinkTypeTable(parse_rows(builtin_data()["link_types"], "engine/link_types.yaml"))


def _builtins() -> None:
    table = builtin_table()
    for spec in table:
        setattr(LinkType, spec.name.upper(), spec.type)
    for attr in ("RELATED_TO", "BELONGS_TO", "CAUSED_BY", "DERIVED_FROM", "CONTRADICTS", "EVOLVED_FROM"):
        if not isinstance(getattr(LinkType, attr, None), LinkType):
            raise RuntimeError(f"engine/link_types.yaml lacks the built-in {attr.lower()}")


_builtins()
