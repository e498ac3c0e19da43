"""Frontmatter YAML, fast: a reader for the plain layout memlink itself writes (block
mappings of simple keys; plain, single-quoted and ``|``/``|-`` literal scalars; lists of
scalars), in pure Python and about ten times quicker than the YAML loader, whose Python
constructor dominates opening a vault of 100k notes. Anything it is not certain to read
exactly as the loader would (flow collections, anchors, tags, double quotes, multi-line
plain or quoted scalars, comments, blank lines, tabs, control characters, plain scalars
that would resolve to a date…) makes it give up, and the caller uses the YAML loader:
the result is always the loader's (``tests/test_catalog.py`` compares them)."""

from __future__ import annotations

import re
from typing import Any

import yaml.resolver

from .yamlio import MAX_DEPTH, MAX_DIGITS, safe_load

# What the fast reader accepts at all: printable text and newlines (no tab, CR, NEL,
# BOM, line/paragraph separators, C0/C1 controls or surrogates).
_UNSAFE = re.compile("[^\n\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]")
_INT = re.compile(r"-?(?:0|[1-9][0-9]*)")
_FLOAT = re.compile(r"-?(?:0|[1-9][0-9]*)\.[0-9]+")
_BAD_START = frozenset("-?:,[]{}#&*!|>'\"%@` ")
_RESOLVERS = yaml.resolver.Resolver.yaml_implicit_resolvers
_STR = "tag:yaml.org,2002:str"
_BOOL = {"yes": True, "no": False, "true": True, "false": False, "on": True, "off": False}


class _GiveUp(Exception):
    """Not the plain layout: the YAML loader reads this one."""


def load_frontmatter(text: str) -> Any:
    """The frontmatter's YAML value, exactly as ``yamlio.safe_load`` gives it."""
    fast = fast_load(text)
    return safe_load(text) if fast is None else fast


def fast_load(text: str) -> dict | None:
    """The mapping the plain layout holds, or None when the text is not (only) that."""
    if not text or _UNSAFE.search(text) is not None:
        return None
    try:
        out, at = _mapping(text, 0, 0)
    except _GiveUp:
        return None
    return out if at >= len(text) else None


def _tag(value: str) -> str:
    """The tag YAML's resolver gives a plain scalar (its regexps, keyed by first char)."""
    for tag, regexp in _RESOLVERS.get(value[0], ()):
        if regexp.match(value):
            return tag
    for tag, regexp in _RESOLVERS.get(None, ()):
        if regexp.match(value):
            return tag
    return _STR


def _plain_line(value: str) -> None:
    if value[0] in _BAD_START or ": " in value or " #" in value or value[-1] == ":":
        raise _GiveUp


def _plain(value: str) -> Any:
    tag = _tag(value)
    if tag == _STR:
        return value
    if tag == "tag:yaml.org,2002:null":
        return None
    if tag == "tag:yaml.org,2002:bool":
        return _BOOL[value.lower()]
    if tag == "tag:yaml.org,2002:int" and _INT.fullmatch(value) and len(value) <= MAX_DIGITS:
        return int(value)
    if tag == "tag:yaml.org,2002:float" and _FLOAT.fullmatch(value):
        return float(value)
    raise _GiveUp  # dates, octal, sexagesimal, .inf, too many digits…: the loader knows them


def _quoted(text: str, value: str, at: int, indent: int) -> tuple[str, int]:
    """A single-quoted scalar ('' is a quote), perhaps over deeper lines: each line break
    folds to a space, with the spaces around it (as YAML folds a flow scalar)."""
    pieces: list[str] = []
    line, start = value, 1
    while True:
        end = line.find("'", start)
        if end < 0:  # goes on over the next line
            pieces.append(line[start:].rstrip(" ") + " ")
            more = _CONTINUED.match(text, at)
            if more is None or len(more.group(1)) <= indent or not more.group(2).strip(" "):
                raise _GiveUp  # a blank line (a line break in the value) or no deeper line
            line, start, at = more.group(2), 0, more.end()
            continue
        pieces.append(line[start:end])
        if line[end + 1 : end + 2] == "'":
            pieces.append("'")
            start = end + 2
            continue
        if line[end + 1 :].strip(" "):
            raise _GiveUp  # a comment or more after the closing quote
        return "".join(pieces), at


def _scalar(text: str, value: str, at: int, indent: int) -> tuple[Any, int]:
    """A scalar starting on its key's (or item's) line; ``at`` is the next line. Plain
    scalars may go on over deeper lines (folded with spaces, as YAML does)."""
    if value[0] == "'":
        return _quoted(text, value, at, indent)
    if value == "[]":
        return [], at
    if value == "{}":
        return {}, at
    _plain_line(value)
    more = _CONTINUED.match(text, at)
    if more is None or len(more.group(1)) <= indent:
        return _plain(value), at
    parts = [value]
    while more is not None and len(more.group(1)) > indent:
        line = more.group(2).rstrip(" ")
        if not line:
            raise _GiveUp  # a blank line inside: a line break in the value
        _plain_line(line)
        parts.append(line)
        at = more.end()
        more = _CONTINUED.match(text, at)
    return _plain(" ".join(parts)), at


def _mapping(text: str, at: int, indent: int) -> tuple[dict, int]:
    out: dict = {}
    end = len(text)
    while at < end:
        m = _KEY.match(text, at)
        if m is None:
            line = _CONTINUED.match(text, at)
            if line is not None and line.group(2).strip(" ") and len(line.group(1)) < indent:
                break  # the parent's next key
            raise _GiveUp
        depth = len(m.group(1))
        if depth != indent:
            if depth < indent:
                break
            raise _GiveUp  # deeper than a key of this mapping may be
        key = m.group(2)
        if key not in _STR_KEYS:
            if _tag(key) != _STR:
                raise _GiveUp  # e.g. `yes:` is a boolean key
            if len(_STR_KEYS) < 1000:
                _STR_KEYS.add(key)
        value = (m.group(3) or "").rstrip(" ")
        at = m.end()
        if not value:
            out[key], at = _nested(text, at, indent)
        elif value == "|-" or value == "|":
            out[key], at = _literal(text, at, indent, strip=value == "|-")
        else:
            out[key], at = _scalar(text, value, at, indent)
    return out, at


def _nested(text: str, at: int, indent: int) -> tuple[Any, int]:
    """What follows ``key:`` with nothing after it: a list, a deeper mapping, or null."""
    line = _CONTINUED.match(text, at)
    if line is None:
        return None, at
    deeper = len(line.group(1))
    rest = line.group(2)
    if not rest.strip(" ") or deeper + 2 > MAX_DEPTH:
        raise _GiveUp  # (deeper than the loader reads: it says so; each level is at least a space deeper)
    if rest[0] == "-" and deeper >= indent:
        return _sequence(text, at, deeper)
    if deeper > indent:
        return _mapping(text, at, deeper)
    return None, at


def _sequence(text: str, at: int, indent: int) -> tuple[list, int]:
    out = []
    end = len(text)
    while at < end:
        m = _ITEM.match(text, at)
        if m is None:
            line = _CONTINUED.match(text, at)
            if line is not None and line.group(2).strip(" ") and line.group(2)[0] != "-" and len(line.group(1)) <= indent:
                break  # the next key
            raise _GiveUp
        depth = len(m.group(1))
        if depth != indent:
            if depth < indent:
                break
            raise _GiveUp
        value = m.group(2).rstrip(" ")
        if not value or value in ("|", "|-", "[]", "{}"):
            raise _GiveUp
        item, at = _scalar(text, value, m.end(), indent)
        out.append(item)
    return out, at


def _literal(text: str, at: int, indent: int, *, strip: bool) -> tuple[str, int]:
    """A ``|`` (clip) or ``|-`` (strip) block scalar whose first line sets its indentation."""
    first = _CONTINUED.match(text, at)
    if first is None:
        raise _GiveUp
    inner = len(first.group(1))
    if inner <= indent or not first.group(2).strip(" "):
        raise _GiveUp
    stop = _block_end(inner).search(text, at)
    block = text[at : stop.start()] if stop else text[at:]
    if _SPACE_LINE.search(block):
        raise _GiveUp  # a line of spaces: content or not, let YAML say
    if stop is None and not strip:
        raise _GiveUp  # how the line break at the end of the text is kept: let YAML say
    content = block[inner:].replace("\n" + " " * inner, "\n").rstrip("\n")
    return (content if strip or not content else content + "\n"), (stop.end() if stop else len(text))


_KEY = re.compile(r"( *)([A-Za-z_][A-Za-z0-9_-]*):(?: +([^\n]*))?(?:\n|\Z)")
_ITEM = re.compile(r"( *)- +([^\n]*)(?:\n|\Z)")
_CONTINUED = re.compile(r"( *)([^\n]*)(?:\n|\Z)")
_SPACE_LINE = re.compile(r"(?m)^ +$")
_STR_KEYS: set[str] = set()  # keys known to resolve to text
_ENDS: dict[int, re.Pattern[str]] = {}


def _block_end(inner: int) -> re.Pattern[str]:
    """The line break that ends a literal indented by ``inner``: the next line neither
    empty nor that deep."""
    pattern = _ENDS.get(inner)
    if pattern is None:
        pattern = _ENDS[inner] = re.compile(r"\n(?!" + " " * inner + r"|\n)")
    return pattern
