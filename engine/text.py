"""Text helpers shared by the indexes: tokens for BM25 (English words stemmed, CJK as
unigrams + bigrams), chunks for embedding, snippets for results."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import Stemmer

# Han, kana, hangul: scripts written without spaces between words.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+", re.UNICODE)
_IS_CJK = re.compile(rf"[{_CJK}]")
_STOP = frozenset(
    "a an and are as at be but by for from has have he her his i in is it its of on or she so that the "
    "their them they this to was were what when where which who will with you your".split()
)
_HEADING = re.compile(r"^#{1,6}\s", re.MULTILINE)
CHUNK_WORDS = 300


@lru_cache(maxsize=1)
def _stemmer():
    return Stemmer.Stemmer("english")


def tokenize(text: str) -> list[str]:
    """Lowercased, stemmed word tokens; each CJK run gives its characters and bigrams."""
    out: list[str] = []
    words: list[str] = []
    for run in _TOKEN.findall(text.lower()):
        if _IS_CJK.match(run):
            out.extend(run)
            out.extend(run[i : i + 2] for i in range(len(run) - 1))
        elif run not in _STOP and (len(run) > 1 or run.isdigit()):
            words.append(run)
    if words:
        out.extend(_stemmer().stemWords(words))
    return out


@dataclass
class Chunk:
    index: int
    text: str


def chunk_text(text: str, max_words: int = CHUNK_WORDS) -> list[Chunk]:
    """Split by markdown headings, then into windows of at most ``max_words`` words."""
    parts: list[str] = []
    starts = [m.start() for m in _HEADING.finditer(text)]
    bounds = sorted(set([0, *starts, len(text)]))
    sections = [text[a:b].strip() for a, b in zip(bounds, bounds[1:])]
    for section in sections:
        if not section:
            continue
        words = section.split()
        # CJK text has few spaces: count characters too so a long Chinese note still splits.
        if len(words) <= max_words and len(section) <= max_words * 6:
            parts.append(section)
            continue
        step = max_words if len(words) > max_words else None
        if step:
            parts.extend(" ".join(words[i : i + step]) for i in range(0, len(words), step))
        else:
            size = max_words * 6
            parts.extend(section[i : i + size] for i in range(0, len(section), size))
    # Merge a heading-only section into the next one: a title alone embeds poorly.
    merged: list[str] = []
    for part in parts:
        if merged and len(merged[-1].split()) < 8:
            merged[-1] = merged[-1] + "\n" + part
        else:
            merged.append(part)
    return [Chunk(i, t) for i, t in enumerate(merged)]


def snippet(text: str, query_tokens: set[str], width: int = 220) -> str:
    """The ~width-char window of ``text`` (lines joined) with the most query tokens."""
    lines = [l.strip() for l in text.splitlines() if l.strip() and not l.startswith("#")]
    flat = " ".join(lines)
    if len(flat) <= width:
        return flat
    best, best_score = 0, -1
    step = max(20, width // 4)
    for start in range(0, max(1, len(flat) - width + step), step):
        window = flat[start : start + width]
        score = sum(1 for t in tokenize(window) if t in query_tokens)
        if score > best_score:
            best, best_score = start, score
    window = flat[best : best + width]
    if best > 0:
        cut = window.find(" ")
        window = "…" + (window[cut + 1 :] if 0 <= cut < 30 else window)
    if best + width < len(flat):
        cut = window.rfind(" ")
        window = (window[:cut] if cut > width // 2 else window) + "…"
    return window
