"""t_line_ranges: "3-5,8" style 1-based inclusive line ranges, and their correction after
an edit (docs/DESIGN.md, "Vault format").

Correction: each range's old lines are looked up as whole lines (trimmed, exact) in the
new text, nearest to their old place. If every range is found, the new ranges are returned. Otherwise a pluggable
semantic matcher gets a chance; if it cannot place the text either, the caller deletes
the link on both sides.
"""

from __future__ import annotations

import re
from typing import Protocol

from ..errors import LinkError

_RANGE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")

Ranges = list[tuple[int, int]]


def parse_ranges(spec: str) -> Ranges:
    if not isinstance(spec, str) or not spec.strip():
        raise LinkError(f"empty line range {spec!r}")
    out: Ranges = []
    for part in spec.split(","):
        m = _RANGE.match(part)
        if not m:
            raise LinkError(f"bad line range {spec!r}: use forms like '3', '3-5' or '3-5,8-10'")
        start = int(m.group(1))
        end = int(m.group(2) or start)
        if start < 1 or end < start:
            raise LinkError(f"bad line range {spec!r}: lines start at 1 and a range may not run backwards")
        out.append((start, end))
    return out


def format_ranges(ranges: Ranges) -> str:
    return ",".join(str(s) if s == e else f"{s}-{e}" for s, e in ranges)


def check_ranges(spec: str, text: str) -> Ranges:
    ranges = parse_ranges(spec)
    count = len(text.split("\n")) if text else 0
    for _s, e in ranges:
        if e > count:
            raise LinkError(f"line range {spec!r} is past the end of the text ({count} lines)")
    return ranges


def segments(text: str, ranges: Ranges) -> list[str] | None:
    """The text of each range, or None when a range lies past the end of ``text``."""
    lines = text.split("\n")
    out = []
    for s, e in ranges:
        if e > len(lines):
            return None
        out.append("\n".join(lines[s - 1 : e]))
    return out


class LineRangeMatcher(Protocol):
    """Relocates passages that moved in a way exact search cannot follow."""

    def relocate(self, old_segments: list[str], new_text: str) -> str | None:
        """Return new t_line_ranges for the passages, or None when they are gone."""


class ExactOnlyMatcher:
    """The default until an LLM matcher is configured: nothing beyond exact search."""

    def relocate(self, old_segments: list[str], new_text: str) -> str | None:
        return None


def _find(old_lines: list[str], start: int, end: int, new_lines: list[str]) -> tuple[int, int] | None:
    """Where the old lines start..end (1-based) now are: the same whole lines (compared
    trimmed), at their old place if still there, else the occurrence nearest to it."""
    seg = [l.strip() for l in old_lines[start - 1 : end]]
    n = len(seg)
    if not any(seg):  # blank lines carry nothing to look for: keep the place if it exists
        return (start, end) if end <= len(new_lines) else None
    trimmed = [l.strip() for l in new_lines]
    hits = [i for i in range(len(trimmed) - n + 1) if trimmed[i : i + n] == seg]
    if not hits:
        return None
    best = min(hits, key=lambda i: abs(i + 1 - start))
    return best + 1, best + n


def correct_ranges(spec: str, old_text: str, new_text: str, matcher: LineRangeMatcher | None = None) -> str | None:
    """New ranges for ``spec`` after ``old_text`` became ``new_text``; None = delete the link."""
    if old_text == new_text:
        return spec
    try:
        ranges = parse_ranges(spec)
    except LinkError:
        return None
    old_segments = segments(old_text, ranges)
    if old_segments is None:
        return None
    old_lines, new_lines = old_text.split("\n"), new_text.split("\n")
    found = [_find(old_lines, s, e, new_lines) for s, e in ranges]
    if all(f is not None for f in found):
        return format_ranges([f for f in found if f is not None])
    relocated = (matcher or ExactOnlyMatcher()).relocate(old_segments, new_text)
    if relocated is None:
        return None
    try:
        check_ranges(relocated, new_text)
    except LinkError:
        return None
    return format_ranges(parse_ranges(relocated))
