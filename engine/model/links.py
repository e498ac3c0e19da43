"""The link model: WikiLink (LLM layer, page ids), StoredWikiLink / StoredLink (storage
layer, URIs), the `.relations.json` sidecar format with its legacy `{uris, reason}`
entries (docs/DESIGN.md, "Vault format"), and the links merge rules. What each link type means lives in the
link-type table (``engine/model/linktypes.py``, docs/DESIGN.md "Link types").
"""

from __future__ import annotations

import functools
import itertools
import json
import operator
import re
import uuid
from collections.abc import Iterable
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    ValidationError,
    WithJsonSchema,
    field_validator,
)

from ..errors import LinkError, SidecarError, UriError
from .lineranges import format_ranges, parse_ranges
from .linktypes import LinkType, any_link_type, builtin_table
from .uris import normalize_uri, utf8_name
from .yamlio import MAX_DEPTH, MAX_DIGITS

SIDECAR = ".relations.json"  # a folder's links
REJECTED = ".relations.rejected.jsonl"  # bad sidecar entries moved aside by `check --fix`
Direction = Literal["links", "backlinks"]


__all__ = ["LinkType", "REJECTED", "SIDECAR", "Rejected", "Sidecar", "StoredLink", "StoredWikiLink", "WikiLink", "links_merge", "merge_link", "new_link_id"]

# A stored link's type: any well-formed name, so a sidecar holding a type this vault does
# not declare still reads (the link is kept; it carries no meaning until declared).
StoredLinkType = Annotated[
    LinkType, PlainValidator(any_link_type), PlainSerializer(lambda t: t.value, return_type=str, when_used="json"),
    WithJsonSchema({"type": "string"}),
]
# The built-ins hold every role and a vault cannot take one over, so this is every
# vault's default type.
DEFAULT_TYPE = builtin_table().role("default")


def _check_ranges(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        return format_ranges(parse_ranges(value))
    except LinkError as exc:
        raise ValueError(str(exc)) from exc


class Edge(NamedTuple):
    """A link as a walk over the graph sees it: what walking and explaining need, nothing
    more (a 100k-note vault holds hundreds of thousands of these)."""

    id: str
    from_uri: str
    to_uri: str
    link_type: LinkType
    weight: float
    description: str = ""


class WikiLink(BaseModel):
    """A link as the LLM writes it: page ids, valid only inside one ExtractLoop run."""

    model_config = ConfigDict(extra="forbid")

    f: int
    t: int
    t_field: str
    t_line_ranges: str | None = None
    link_type: LinkType
    weight: float = Field(1.0, ge=0.0, le=1.0)
    match_text: str | None = None
    description: str = ""

    _ranges = field_validator("t_line_ranges")(classmethod(lambda cls, v: _check_ranges(v)))


class StoredWikiLink(BaseModel):
    """A WikiLink after page ids became URIs."""

    model_config = ConfigDict(extra="forbid")

    f_uri: str
    t_uri: str
    t_field: str
    t_line_ranges: str | None = None
    link_type: LinkType
    weight: float = Field(ge=0.0, le=1.0)
    match_text: str | None = None
    description: str = ""

    _ranges = field_validator("t_line_ranges")(classmethod(lambda cls, v: _check_ranges(v)))


class StoredLink(BaseModel):
    """One sidecar entry. The same record sits in the from-note's folder (direction
    "links") and in the to-note's folder (direction "backlinks"); link_type never flips."""

    model_config = ConfigDict(extra="forbid")

    id: str
    from_uri: str
    to_uri: str
    direction: Direction
    link_type: StoredLinkType
    weight: float = Field(ge=0.0, le=1.0)
    t_field: str = "content"
    t_line_ranges: str | None = None
    match_text: str | None = None
    description: str = ""
    created_at: str
    legacy: bool = Field(False, exclude=True)  # read from an old {uris, reason} entry

    _ranges = field_validator("t_line_ranges")(classmethod(lambda cls, v: _check_ranges(v)))

    @field_validator("from_uri", "to_uri")
    @classmethod
    def _inside(cls, value: str) -> str:
        try:
            return _normalized(value)
        except UriError as exc:
            raise ValueError(str(exc)) from exc

    def other(self, uri: str) -> str:
        """The note at the other end of this link from ``uri``."""
        return self.from_uri if self.to_uri == uri else self.to_uri

    @property
    def key(self) -> tuple[str, str, str, str]:
        """Dedup key: same pair, same field, same line ranges = same link (docs/DESIGN.md, "Vault format")."""
        return (self.from_uri, self.to_uri, self.t_field, self.t_line_ranges or "")

    def as_direction(self, direction: Direction) -> StoredLink:
        return self.model_copy(update={"direction": direction})

    def same_record(self, other: StoredLink) -> bool:
        """The two sides of one link hold the same record (all but the direction)."""
        return _RECORD(self) == _RECORD(other)

    @classmethod
    def trusted(cls, fields: dict[str, Any]) -> StoredLink:
        """A record from fields that validated when they were stored (the link index's
        rows), every field given: made as ``model_construct`` makes it, without its
        per-field work (a full check run makes 600k of them at 100k notes)."""
        link = object.__new__(cls)
        object.__setattr__(link, "__dict__", fields)
        object.__setattr__(link, "__pydantic_fields_set__", set(fields))
        object.__setattr__(link, "__pydantic_extra__", None)
        object.__setattr__(link, "__pydantic_private__", None)
        return link


_RECORD = operator.attrgetter(*(f for f in StoredLink.model_fields if f not in ("direction", "legacy")))
_NORMALIZED: dict[str, str] = {}
_NORMALIZED_MAX = 1 << 18  # every note's uri at 100k notes, with room


def _normalized(uri: str) -> str:
    """normalize_uri, remembered: a big sidecar names each note many times (a plain dict,
    emptied when full: twice as fast per hit as lru_cache, which the index build feels)."""
    hit = _NORMALIZED.get(uri)
    if hit is None:
        hit = normalize_uri(uri)
        if len(_NORMALIZED) >= _NORMALIZED_MAX:
            _NORMALIZED.clear()
        _NORMALIZED[uri] = hit
    return hit


def new_link_id() -> str:
    return "link_" + uuid.uuid4().hex[:16]


def merge_link(existing: StoredLink | None, new: StoredLink) -> StoredLink:
    """The merge rule for one key: weight max, link_type and description latest, id kept."""
    if existing is None:
        return new
    return existing.model_copy(
        update={
            "weight": max(existing.weight, new.weight),
            "link_type": new.link_type,
            "description": new.description,
            "match_text": new.match_text if new.match_text is not None else existing.match_text,
        }
    )


def links_merge(entries: list[StoredLink], incoming: list[StoredLink]) -> list[StoredLink]:
    """Merge ``incoming`` into ``entries`` (same direction rules for links and backlinks):
    dedupe by (direction, from, to, t_field, t_line_ranges), weight max, link_type and
    description of the newest write, result ordered by weight descending."""
    merged: dict[tuple, StoredLink] = {}
    for link in [*entries, *incoming]:
        k = (link.direction, *link.key)
        merged[k] = merge_link(merged.get(k), link)
    return sorted(merged.values(), key=lambda l: -l.weight)


# -- sidecar files -------------------------------------------------------------------------


class Rejected(BaseModel):
    """A sidecar entry readers skip: its place in the file, why, and the entry as it was
    (kept verbatim; ``memlink check --fix`` moves it to the folder's rejected file,
    docs/DESIGN.md "Vault format")."""

    index: int
    entry: Any
    cause: str

    @property
    def label(self) -> str:
        link_id = self.entry.get("id") if isinstance(self.entry, dict) else None
        return f"entry {self.index}" + (f" ({link_id})" if isinstance(link_id, str) and link_id else "")


class Sidecar:
    """The links of one folder, sorted out: ``entries`` are new-format StoredLinks;
    ``legacy`` are old `{uris, reason}` dicts kept verbatim until the link they hold is
    rewritten in the new format; ``rejected`` are entries that do not validate (a path
    out of the vault, a bad type, a missing key): readers skip them, one bad entry never
    hides the rest of the file. The link index (engine/storage/linkindex.py) reads them;
    ``parse`` and ``dump`` read and write one `.relations.json` text.
    """

    def __init__(self, entries: list[StoredLink] | None = None, legacy: list[dict] | None = None,
                 rejected: list[Rejected] | None = None):
        self.entries = entries or []
        self.legacy = legacy or []
        self.rejected = rejected or []

    @classmethod
    def parse(cls, text: str, where: str, folder: str) -> Sidecar:
        """Parse a sidecar. A file that is not a JSON list raises SidecarError; a bad
        entry inside one is set aside in ``rejected`` with its index and cause."""
        return cls(*classify(load_rows(text, where)))

    def dump(self) -> str:
        """One entry per line: diff-friendly, and fast (the C JSON encoder, no indent).
        Rejected entries are written back as they were: only `check --fix` moves them."""
        return dump_rows([*(l.model_dump(mode="json") for l in self.entries), *self.legacy, *(r.entry for r in self.rejected)])

    def legacy_links(self, folder: str) -> list[StoredLink]:
        """Legacy entries read as links of the default type (related_to; docs/DESIGN.md
        "Link types"): weight 1.0, reason → description.
        An entry without from_uri is a folder-level relation: its from_uri is the folder."""
        return [link for raw in self.legacy for link in legacy_links(raw, folder)]

    def all_links(self, folder: str) -> list[StoredLink]:
        return [*self.entries, *self.legacy_links(folder)]


def load_rows(text: str, where: str) -> list:
    """The raw entries of a sidecar text; SidecarError when it is not a JSON list."""
    return load_rows_with_lines(text, where)[0]


def load_rows_with_lines(text: str, where: str) -> tuple[list, list[str] | None]:
    """The raw entries of a sidecar text and, when the file is in memlink's own format
    (one entry per line), each entry's line: the JSON of an entry as written, so an index
    can keep it without encoding it again. SidecarError when it is not a JSON list."""
    try:
        data = json.loads(text) if text.strip() else []
    except json.JSONDecodeError as exc:
        raise SidecarError(f"{where}: not valid JSON: {exc}") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise SidecarError(f"{where}: {json_problem(text, exc)}") from None
    if not isinstance(data, list):
        raise SidecarError(f"{where}: must hold a JSON list of link entries")
    lines = text.split("\n")
    if data and lines[0] == "[" and len(lines) == len(data) + 3 and lines[-2] == "]" and lines[-1] == "":
        body = [line[:-1] if line.endswith(",") else line for line in lines[1:-2]]
        if all(line.startswith("{") and line.endswith("}") for line in body):
            return data, body
    return data, None


_LONG_NUMBER = re.compile(rf"[0-9]{{{MAX_DIGITS + 1}}}")


def json_problem(text: str, exc: BaseException) -> str:
    """Why JSON that is not a syntax error did not load, with the line when it is known:
    a number too long for Python to convert (JSON sets no limit), nesting too deep."""
    if isinstance(exc, RecursionError):
        return f"nested more than {MAX_DEPTH} levels deep"
    if isinstance(exc, MemoryError):
        return "too large to be read"
    long = _LONG_NUMBER.search(text)
    if long is not None:
        return f"line {text.count(chr(10), 0, long.start()) + 1}: a number of more than {MAX_DIGITS:,} digits"
    return f"a value that cannot be read ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"


def salvage_rows(text: str) -> tuple[list, list[tuple[int, str, str]]]:
    """What can still be read of a sidecar text that does not load whole: each line that
    is one entry as memlink writes them (``dump_rows``: one a line, a comma after all but
    the last) is kept; every other line that holds anything is returned as (line number,
    text, why) for the rejected file. Nothing is lost: the rows and the lines together
    hold every character of the text but the list's brackets, commas and blank lines."""
    rows: list = []
    bad: list[tuple[int, str, str]] = []
    for n, line in enumerate(text.split("\n"), 1):
        body = line.strip()
        if body.startswith("[") and (body == "[" or body[1:].lstrip()[:1] in ("{", "]")):
            body = body[1:].lstrip()  # the list's opening bracket
        if body.endswith("]") and (body == "]" or body[:-1].rstrip().endswith("}")):
            body = body[:-1].rstrip()  # its closing one
        body = body.removesuffix(",").rstrip()
        if not body:
            continue
        if not body.isascii() and not utf8_name(body):
            bad.append((n, line, "not UTF-8 text"))
            continue
        try:
            row = json.loads(body)
            if too_deep(row):
                raise RecursionError
            rows.append(row)
        except json.JSONDecodeError as exc:
            bad.append((n, line, f"not valid JSON: {exc.msg} (column {exc.colno})"))
        except (ValueError, RecursionError, MemoryError) as exc:
            bad.append((n, line, json_problem(body, exc).removeprefix("line 1: ")))
    return rows, bad


def is_entry(raw: object) -> bool:
    """A new-format entry (by shape, before validation)."""
    return isinstance(raw, dict) and "uris" not in raw and "to_uri" in raw


def is_legacy(raw: object) -> bool:
    return isinstance(raw, dict) and "uris" in raw


def classify(rows: list) -> tuple[list[StoredLink], list[dict], list[Rejected]]:
    """Validate raw entries: (links, legacy entries, rejected entries with index and cause)."""
    entries: list[StoredLink] = []
    legacy: list[dict] = []
    rejected: list[Rejected] = []
    for i, raw in enumerate(rows):
        one = _sort_one(i, raw)
        if isinstance(one, StoredLink):
            entries.append(one)
        elif isinstance(one, Rejected):
            rejected.append(one)
        else:
            legacy.append(one)
    return entries, legacy, rejected


def sort_out(rows: list) -> tuple[list[tuple[int, str, str, str, dict | None]], list[dict], list[Rejected]]:
    """``classify`` for the link index: ``(index, id, direction, owner, canonical)`` of
    each good entry (owner: the from-note of a link, the to-note of a backlink;
    canonical: None when the entry is already as StoredLink dumps it, else that dump, so
    the index holds every record in one form: paths normalized, defaults filled), legacy
    entries, rejected entries. An entry as memlink writes it (``plainly_valid``) is not
    built into a StoredLink: 600k of them cost ~8 s at 100k notes; any other goes through
    StoredLink."""
    good: list[tuple[int, str, str, str, dict | None]] = []
    legacy: list[dict] = []
    rejected: list[Rejected] = []
    for i, raw in enumerate(rows):
        if type(raw) is dict and plainly_valid(raw):
            direction = raw["direction"]
            good.append((i, raw["id"], direction, raw["from_uri"] if direction == "links" else raw["to_uri"], None))
            continue
        one = _sort_one(i, raw)
        if isinstance(one, StoredLink):
            good.append((i, one.id, one.direction, one.from_uri if one.direction == "links" else one.to_uri,
                         one.model_dump(mode="json")))
        elif isinstance(one, Rejected):
            rejected.append(one)
        else:
            legacy.append(one)
    return good, legacy, rejected


def too_deep(value: object) -> bool:
    """Whether a JSON value nests more than MAX_DEPTH lists and objects (pydantic and
    the JSON encoder, which write a rejected entry back, recurse)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            inner: Iterable[object] = item.values()
        elif isinstance(item, list):
            inner = item
        else:
            continue
        if depth > MAX_DEPTH:
            return True
        stack.extend((x, depth + 1) for x in inner if isinstance(x, (dict, list)))
    return False


def _sort_one(i: int, raw: object) -> StoredLink | dict | Rejected:
    """One entry sorted out; SidecarError (for the whole file) when it nests too deep to
    be kept, even as a rejected entry."""
    if isinstance(raw, (dict, list)) and too_deep(raw):
        raise SidecarError(f"entry {i}: nested more than {MAX_DEPTH} levels deep")
    try:
        if not isinstance(raw, dict):
            raise SidecarError("not an object")
        if "uris" in raw:
            _check_legacy(raw)
            return raw
        if "to_uri" in raw:
            return _validate(raw)
        raise SidecarError("has neither 'to_uri' nor legacy 'uris'")
    except SidecarError as exc:
        return Rejected(index=i, entry=raw, cause=str(exc))


class _Missing:
    """A key the entry leaves out (its default applies)."""


# Each StoredLink key in order, and the JSON types it may hold as written: a required key
# no _Missing, a key that may be null NoneType as well. Every allowed combination is kept,
# so an entry's types are checked with one set lookup.
_SHAPE: dict[str, tuple[type, ...]] = {
    "id": (str,), "from_uri": (str,), "to_uri": (str,), "direction": (str,), "link_type": (str,),
    "weight": (int, float), "t_field": (str, _Missing), "t_line_ranges": (str, type(None), _Missing),
    "match_text": (str, type(None), _Missing), "description": (str, _Missing), "created_at": (str,),
}
assert _SHAPE.keys() == StoredLink.model_fields.keys() - {"legacy"}, "plainly_valid must know every StoredLink key"
_KEYS = frozenset(_SHAPE)
_ORDER = tuple(_SHAPE)  # every key, in the order memlink writes them
_SHAPES = frozenset(itertools.product(*_SHAPE.values()))
_MISSING = _Missing()


def plainly_valid(raw: dict) -> bool:
    """Whether ``raw`` is a StoredLink exactly as written: only StoredLink's keys, the
    required ones present, each value of its exact JSON type and already canonical (paths
    normalized, line ranges formatted, a well-formed type name, a weight in [0, 1]).
    Such an entry validates, and dumps back as itself with the defaults filled in
    (property-tested against pydantic). False is no verdict: the entry may still be
    valid after pydantic's coercions, or invalid; ask StoredLink."""
    if tuple(raw) == _ORDER:  # all keys, as memlink writes them: their types in one pass
        if tuple(map(type, raw.values())) not in _SHAPES:
            return False
    elif not raw.keys() <= _KEYS or tuple([type(raw.get(k, _MISSING)) for k in _SHAPE]) not in _SHAPES:
        return False
    if not 0.0 <= raw["weight"] <= 1.0 or raw["direction"] not in ("links", "backlinks"):
        return False
    try:
        if _normalized(raw["from_uri"]) != raw["from_uri"] or _normalized(raw["to_uri"]) != raw["to_uri"]:
            return False
        LinkType.named(raw["link_type"])
        ranges = raw.get("t_line_ranges")
        return ranges is None or _canonical_ranges(ranges) == ranges
    except (UriError, ValueError):
        return False


@functools.lru_cache(maxsize=4096)
def _canonical_ranges(value: str) -> str | None:
    return _check_ranges(value)


def _weight(raw: object) -> float:
    w = raw.get("weight") if isinstance(raw, dict) else None
    return float(w) if isinstance(w, (int, float)) else 0.0


_ENCODER = json.JSONEncoder(ensure_ascii=False)  # (``json.dumps`` with an argument builds one per call)
Lines = dict[int, tuple[Any, str]]  # entries as read, by ``id``, each with its line (``read_folder(lines=True)``)


def dump_rows(rows: list, lines: Lines | None = None) -> str:
    """A sidecar's text from raw entries, one per line: links by weight (highest first,
    ties in their order), then legacy entries, then anything else as it was. An entry
    in ``lines`` (the same object as read) is written as its line was: a small change
    to a folder of a thousand links encodes the entries it changed, not all of them."""
    links = sorted((r for r in rows if is_entry(r)), key=lambda r: -_weight(r))
    rest = [r for r in rows if is_legacy(r)] + [r for r in rows if not is_entry(r) and not is_legacy(r)]
    known = lines or {}
    ordered = [*links, *rest]
    out = []
    for r in ordered:
        hit = known.get(id(r))
        out.append(hit[1] if hit is not None and hit[0] is r else _ENCODER.encode(r))
    if not out:
        return "[]\n"
    text = "[\n" + ",\n".join(out) + "\n]\n"
    # A line is kept only where the text says what the entries say: a file another tool laid
    # out (two entries on a line, one over two lines) can pass for one entry a line.
    if known and json.loads(text) != ordered:
        return "[\n" + ",\n".join(_ENCODER.encode(r) for r in ordered) + "\n]\n"
    return text


def legacy_links(raw: dict, folder: str) -> list[StoredLink]:
    """One legacy entry's links (see ``Sidecar.legacy_links``)."""
    return [
        StoredLink(
            id=str(raw.get("id") or "legacy"),
            from_uri=str(raw.get("from_uri") or folder),
            to_uri=uri,
            direction="links",
            link_type=DEFAULT_TYPE,
            weight=1.0,
            description=str(raw.get("reason") or ""),
            created_at=str(raw.get("created_at") or ""),
            legacy=True,
        )
        for uri in raw["uris"]
    ]


def _validate(raw: dict) -> StoredLink:
    try:
        return StoredLink.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise SidecarError(f"{loc}: {first['msg']}" if loc else first["msg"]) from exc


def _check_legacy(raw: dict) -> None:
    uris = raw.get("uris")
    if not isinstance(uris, list) or not all(isinstance(u, str) for u in uris):
        raise SidecarError("legacy 'uris' must be a list of paths")
    for key in ("reason", "from_uri", "id", "created_at"):
        if key in raw and not isinstance(raw[key], str):
            raise SidecarError(f"legacy {key!r} must be text")
    for uri in [*uris, *([raw["from_uri"]] if raw.get("from_uri") else [])]:
        try:
            normalize_uri(uri)
        except UriError as exc:
            raise SidecarError(f"legacy entry: {exc}") from exc
