"""YAML reading for the whole engine: PyYAML's safe loader, through libyaml when it is
there (about ten times faster; every CLI start reads the vault's memory types).

A first pass over the document's events (the C parser's; nothing is built) refuses what
would hang a reader or take its memory before the loader builds anything: nesting deeper
than MAX_DEPTH (the loader, and whatever walks the value after it, recurses), aliases
that repeat more than MAX_REPEATED values (a "billion laughs": a few lines that expand to
billions of values for whatever walks or prints them), a number too long for Python to
convert. Those refusals, and anything else the loader raises, are a ``yaml.YAMLError``
whose message names the line and never holds the document (docs/DESIGN.md, "Vault
format": bounded readers)."""

from __future__ import annotations

import re
from typing import Any

import yaml

Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

MAX_DEPTH = 64  # nested mappings and lists
MAX_REPEATED = 100_000  # values aliases repeat, counted as expanded
MAX_DIGITS = 4300  # Python's own limit for converting text to int
_INT = re.compile(r"[-+]?[0-9][0-9_]*")
_OPEN = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSE = (yaml.MappingEndEvent, yaml.SequenceEndEvent)


class CoreLoader(Loader):  # type: ignore[valid-type,misc]  # (the C loader when libyaml is there)
    """YAML 1.2's core schema, as Obsidian reads a page's properties: only true/false are
    booleans; a number is one written as a number, with nothing to reread (no octal
    ``01234``, no sexagesimal ``12:30``, no exponent); a date stays the text it was
    written as. "NO", "yes", "01234", "12:30", "1e3", "2023-01-05T09:30:00" are text, as
    a person sees them in Obsidian."""


CoreLoader.yaml_implicit_resolvers = {}
for _tag, _pattern, _first in (
        ("bool", r"true|True|TRUE|false|False|FALSE", "tTfF"),
        ("null", r"~|null|Null|NULL|", ["~", "n", "N", ""]),
        ("int", r"[-+]?(?:0|[1-9][0-9]*)", "-+0123456789"),
        ("float", r"[-+]?(?:0|[1-9][0-9]*)?\.[0-9]+|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)", "-+0123456789."),
        ("merge", r"<<", "<")):
    CoreLoader.add_implicit_resolver(f"tag:yaml.org,2002:{_tag}", re.compile(f"^(?:{_pattern})$"), list(_first))


class YAMLRefused(yaml.YAMLError):
    """A document the loader is not let build (see the module doc), or one it failed on."""


def safe_load(text: str, loader: type = Loader) -> Any:
    """``text`` read by PyYAML's safe loader (YAML 1.1), or ``CoreLoader``."""
    try:
        _vet(text)
        return yaml.load(text, Loader=loader)
    except YAMLRefused:
        raise
    except yaml.MarkedYAMLError as exc:  # on one line: a finding or an error is one line
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        raise YAMLRefused(where + "; ".join(p for p in (exc.context, exc.problem) if p)) from None
    except yaml.YAMLError:
        raise
    except (ValueError, TypeError, OverflowError, RecursionError, MemoryError) as exc:
        # e.g. a date that does not exist (2024-02-30): the loader says which value, not where
        raise YAMLRefused(f"a value that cannot be read ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from None


def nesting(value: Any) -> int:
    """How many mappings and lists deep a loaded value goes (a scalar: 0)."""
    if isinstance(value, dict):
        return 1 + max(map(nesting, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(nesting, value), default=0)
    return 0


def plain(value: Any) -> Any:
    """A loaded value as JSON holds it, the same in every process: a mapping's keys as text
    (YAML's may be numbers or dates), a set sorted, a date as its text."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((plain(v) for v in value), key=repr)
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)


def _vet(text: str) -> None:
    """Refuse a document nested too deep, whose aliases repeat too much, or holding a
    number too long (see the module doc). Each open mapping or list counts the values
    under it, an alias counting those of its anchor."""
    sizes: dict[str, int] = {}  # anchor -> values it stands for
    open_: list[list] = []  # [values so far, anchor] of each mapping or list not closed yet
    repeated = 0
    for event in yaml.parse(text, Loader=Loader):
        if isinstance(event, _OPEN):
            open_.append([1, event.anchor])
            if len(open_) > MAX_DEPTH:
                raise YAMLRefused(f"{_line(event)}nested more than {MAX_DEPTH} levels deep")
            continue
        if isinstance(event, _CLOSE):
            n, anchor = open_.pop()
        elif isinstance(event, yaml.AliasEvent):
            n, anchor = sizes.get(event.anchor or "", 1), None
            repeated += n
            if repeated > MAX_REPEATED:
                raise YAMLRefused(f"{_line(event)}aliases repeat more than {MAX_REPEATED:,} values")
        elif isinstance(event, yaml.ScalarEvent):
            n, anchor = 1, event.anchor
            value = event.value
            if not event.style and len(value) > MAX_DIGITS and _INT.fullmatch(value) and \
                    len(value.replace("_", "").lstrip("+-")) > MAX_DIGITS:
                raise YAMLRefused(f"{_line(event)}a number of more than {MAX_DIGITS:,} digits")
        else:
            continue
        if anchor is not None:
            sizes[anchor] = n
        if open_:
            open_[-1][0] += n


def _line(event: yaml.Event) -> str:
    mark = event.start_mark
    return f"line {mark.line + 1}: " if mark is not None else ""
