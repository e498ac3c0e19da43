"""Text helpers shared by the indexes: tokens for BM25 (English words stemmed, CJK as
unigrams + bigrams), chunks for embedding, snippets for results; ``printable`` for text
shown on a terminal."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise

import Stemmer

# Han, kana, hangul: scripts written without spaces between words.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+", re.UNICODE)
_SPLIT = re.compile(rf"([{_CJK}]+)|([^\W_{_CJK}]+)", re.UNICODE)  # (cjk run, word)
_IS_CJK = re.compile(rf"[{_CJK}]")
_STOP = frozenset(
    "a an and are as at be but by for from has have he her his i in is it its of on or she so that the "
    "their them they this to was were what when where which who will with you your".split()
)
# The frame of a question ("what about …", "tell me about …", "when did we discuss …"):
# words that say how something is asked, not what. Search's evidence gate neither needs
# nor credits them. (As tokens: stemmed, the stop words above already gone.)
QUESTION_FRAME = frozenset(
    "about tell told telling say said says talk talked talking discuss discussed discussing discussion mention "
    "mentioned remember recall know knew think thought we us our me my i you your did do does done had has have "
    "can could would should shall may might please show give any anything something everything someone anyone "
    "hey hi hello thanks thank again ever how why whose whom am been being name".split()
)
_HEADING = re.compile(r"^#{1,6}\s", re.MULTILINE)
CHUNK_WORDS = 300
# Terminal escape sequences (CSI, OSC, DCS/SOS/PM/APC strings, two-byte ESC sequences),
# in their 7-bit and 8-bit forms, then any C0/C1 control left (newline and tab stay), then
# the bidi embeddings, overrides and isolates that make text display in another order than
# it is stored (docs/DESIGN.md, "Clean output").
_BIDI = "\u202a-\u202e\u2066-\u2069"
_ESCAPES = re.compile(
    r"(?:\x1b\[|\x9b)[\x20-\x3f]*[\x40-\x7e]?"  # CSI … final byte
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"  # OSC, DCS, SOS, PM, APC … terminator
    # (unterminated, only the introducer goes, below: what follows stays visible)
    r"|\x1b[\x20-\x2f]*[\x30-\x7e]?"  # other ESC sequences (and a lone ESC)
    rf"|[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}]"
)
# What JSON leaves raw (it escapes C0 itself): DEL, C1 and the bidi controls.
_JSON_RAW = re.compile(f"[\x7f-\x9f{_BIDI}]")


def printable(text: object) -> str:
    """``text`` safe to print on a terminal: escape sequences, control characters (C0 and
    C1, except newline and tab; a bare carriage return too) and bidi overrides removed, so
    that imported or note text can never move the cursor, write the clipboard, hide a link,
    retitle the window or reorder what is shown. The one sanitiser for the CLI and the app."""
    text = str(text)
    if text.isprintable():  # every character the pattern removes is a control (Cc) or format (Cf) one
        return text
    return _ESCAPES.sub("", text)


def printable_path(path: object) -> str:
    """A file's name or path as one printable line: every character that is not printable
    (a newline or tab too, a control, a bidi override, a byte of a name that is not UTF-8)
    written as its Python escape (``\\n``, ``\\x1b``, ``\\udcff``), so a name shows what it
    is and can neither break the line it is on nor act on the terminal."""
    text = str(path)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def printable_json(text: str) -> str:
    """JSON text (``json.dumps(..., ensure_ascii=False)``) safe to print: the characters
    ``printable`` would drop and JSON leaves raw are written as ``\\uXXXX`` escapes, so the
    data survives a round trip while the terminal never sees them. Outside strings JSON
    holds none of them, so the result parses to the same value."""
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)


def has_cjk(text: str) -> bool:
    """Whether the text holds Han, kana or hangul (scripts written without spaces)."""
    return bool(_IS_CJK.search(text))


@lru_cache(maxsize=1)
def _stemmer() -> Stemmer.Stemmer:
    return Stemmer.Stemmer("english")


_ASKS = re.compile(r"^\W*(?:what|when|where|who|whom|whose|which|why|how|did|do|does|is|are|was|were|can|could|"
                   r"should|would|will|have|has|tell|remind|show)\b|\?\s*$", re.IGNORECASE)


def asks(text: str) -> bool:
    """Whether ``text`` reads as a question (a question word first, or a question mark
    last), so that its frame words frame it: "talk slides" is a query about a talk."""
    return bool(_ASKS.search(text))


def content_tokens(text: str) -> list[str]:
    """A question's tokens without its frame (QUESTION_FRAME), each once, in order."""
    frame = _frame_tokens()
    return [t for t in dict.fromkeys(tokenize(text)) if t not in frame]


def question_tokens(text: str) -> list[str] | None:
    """The tokens a query is matched on when it reads as a question (``asks``): its
    content words, its frame left out; None when every word of it counts (not a
    question, or a question made only of frame words)."""
    return (content_tokens(text) or None) if asks(text) else None


@lru_cache(maxsize=1)
def _frame_tokens() -> frozenset[str]:
    return frozenset(tokenize(" ".join(QUESTION_FRAME)))


# A date written the Chinese, Japanese or Korean way: 2023年5月2日, 5月2号, 5월 2일, 5月.
_CJK_DATE = re.compile(r"(?:(\d{4})\s*[年년]\s*)?(\d{1,2})\s*[月월]\s*(?:(\d{1,2})\s*[日号號일])?")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")


def with_date_words(text: str) -> str:
    """``text`` with each CJK date followed by its English words ("5月2号" → "5月2号 2 May"),
    the form turn dates are indexed in (engine.sessions.turnindex.date_words): a question
    asked in one language finds a date written in the other."""
    if "月" not in text and "월" not in text:
        return text

    def words(m: re.Match[str]) -> str:
        year, month, day = m.group(1), int(m.group(2)), m.group(3)
        if not 1 <= month <= 12 or (day and not 1 <= int(day) <= 31):
            return m.group(0)
        said = " ".join(p for p in (day, _MONTHS[month - 1], year) if p)
        return f"{m.group(0)} {said} "

    return _CJK_DATE.sub(words, text)


def tokenize(text: str) -> list[str]:
    """Lowercased, stemmed word tokens; each CJK run gives its characters and bigrams, and
    a CJK date its English words too."""
    out: list[str] = []
    words: list[str] = []
    for cjk, word in _SPLIT.findall(with_date_words(text).lower()):
        if cjk:
            out.extend(cjk)
            out.extend(cjk[i : i + 2] for i in range(len(cjk) - 1))
        elif word not in _STOP and (len(word) > 1 or word.isdigit()):
            words.append(word)
    if words:
        out.extend(_stemmer().stemWords(words))
    return out


_CJK_RUN = re.compile(rf"[{_CJK}]+")


def cjk_expand(text: str) -> str:
    """Text for an index whose own tokenizer splits words and stems English (tantivy's
    en_stem): each CJK run is replaced by its characters and bigrams, space-separated,
    so the index sees the same CJK tokens ``tokenize`` makes (a CJK date's English words
    included)."""
    if not _IS_CJK.search(text):
        return text
    text = with_date_words(text)
    return _CJK_RUN.sub(lambda m: " " + " ".join([*m.group(0), *(m.group(0)[i : i + 2] for i in range(len(m.group(0)) - 1))]) + " ", text)


@dataclass
class Chunk:
    index: int
    text: str


def chunk_text(text: str, max_words: int = CHUNK_WORDS) -> list[Chunk]:
    """Split by markdown headings, then into windows of at most ``max_words`` words."""
    parts: list[str] = []
    starts = [m.start() for m in _HEADING.finditer(text)]
    bounds = sorted(set([0, *starts, len(text)]))
    sections = [text[a:b].strip() for a, b in pairwise(bounds)]
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


# Snippets look at this much of a note's text: a match further into a long document does
# not place the window (the cost of a snippet stays bounded whatever the note's size).
SNIPPET_SCAN = 100_000
# Snowball English stems a word to a string whose all-but-last letters begin the word,
# except for these (docs: the Porter2 exceptional forms); a stem's words are found by
# that prefix and only they are stemmed.
_STEM_OUTLIERS = {"die": "dying", "lie": "lying", "tie": "tying"}
_WORD = re.compile(rf"[^\W_{_CJK}]+")  # a word as ``tokenize`` splits them (CJK runs apart)


@lru_cache(maxsize=256)
def _word_starts(stems: frozenset[str]) -> tuple[str, ...]:
    """What a word that may stem to one of ``stems`` begins with: a stem's letters but its
    last, or an outlier form of it. (Found with ``str.find``: a pattern of them compiled
    per query cost more than the whole scan.)"""
    starts = set()
    for stem in stems:
        starts.add(stem[: max(1, len(stem) - 1)])
        if stem in _STEM_OUTLIERS:
            starts.add(_STEM_OUTLIERS[stem])
    return tuple(sorted(starts))


def snippet(text: str, query_tokens: set[str], width: int = 220) -> str:
    """The ~width-char window of ``text`` (lines joined, headings dropped) holding the
    most query tokens. Only words that can match a query token are stemmed (found by
    their first letters), and only the first SNIPPET_SCAN characters are looked at, so a
    snippet costs little however long the note is."""
    more = len(text) > SNIPPET_SCAN
    if more:
        text = text[:SNIPPET_SCAN]
    flat = " ".join(kept for line in text.splitlines() if not line.startswith("#") and (kept := line.strip()))
    if len(flat) <= width and not more:
        return flat
    lower = flat.lower()
    hits: list[int] = []
    cjk = [t for t in query_tokens if _IS_CJK.match(t)]
    for token in cjk:  # a CJK character or bigram, wherever it occurs (always inside a CJK run)
        at = lower.find(token)
        while at >= 0:
            hits.append(at)
            at = lower.find(token, at + 1)
    begins = set()
    for prefix in _word_starts(frozenset(t for t in query_tokens if not _IS_CJK.match(t))):
        at = lower.find(prefix)
        while at >= 0:
            if not (at and _WORD.match(lower, at - 1)):  # only where a word begins
                begins.add(at)
            at = lower.find(prefix, at + 1)
    if begins:
        found = [(at, word.group(0)) for at in sorted(begins) if (word := _WORD.match(lower, at)) is not None]
        stems = _stemmer().stemWords([w for _, w in found])
        hits += [pos for (pos, _), stem in zip(found, stems, strict=True) if stem in query_tokens]
    hits.sort()
    best = 0
    if hits:
        # The window starting a little before some hit that covers the most hits (the
        # first such, in text order).
        best_count = -1
        for h in hits:
            start = max(0, h - width // 5)
            count = bisect.bisect_left(hits, start + width) - bisect.bisect_left(hits, start)
            if count > best_count:
                best, best_count = start, count
    window = flat[best : best + width]
    if best > 0:
        cut = window.find(" ")
        window = "…" + (window[cut + 1 :] if 0 <= cut < 30 else window)
    if best + width < len(flat) or more:
        cut = window.rfind(" ")
        window = (window[:cut] if cut > width // 2 else window) + "…"
    return window


_NAME_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def words(text: str) -> list[str]:
    """A name's words, lowercased, possessives dropped: "Acme's" → ["acme"]."""
    return _NAME_WORD.findall(re.sub(r"['’]s\b", "", text.lower()))


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and the noun in the number it takes: "1 note", "2 notes", "0 replies"."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def first_few(shown: list[str], most: int) -> str:
    """The first ``most`` of a list, and how many more: "a, b, c and 4 more"."""
    return ", ".join(shown[:most]) + (f" and {len(shown) - most} more" if len(shown) > most else "")


# A markdown link or image, [text](dest "title"): a destination in <…> may hold spaces (group
# 2), a bare one balanced parentheses ("sampling%20(signal%20processing).md", group 3), as
# CommonMark reads them; group 1 is its text. An escaped bracket, \[, begins none.
MARKDOWN_LINK = re.compile(r"(?<!\\)!?\[([^\]\n]+)\]\((?:<([^<>\n]+)>|((?:[^()\s]|\([^()\s]*\))+))(?:\s+\"[^\"]*\")?\)")
# A destination that names no note: a web address (any scheme) or a place in the same page.
NOT_A_NOTE = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//|#)", re.I)
# A wikilink ([[target|shown]], [[target]]) or a markdown link or image ([shown](target)).
_LINK_SYNTAX = re.compile(r"!?\[\[([^\]|\n]+)(?:\|([^\]\n]+))?\]\]|!?\[([^\]\n]*)\]\([^)\s]*\)")


def shown_text(text: str) -> str:
    """``text`` as a reader sees it: each link as the words it shows (a wikilink without
    an alias as its note's name), not the path it points at."""
    if "[" not in text:
        return text

    def shown(m: re.Match) -> str:
        if m.group(1) is None:  # a markdown link: its text
            return m.group(3)
        if m.group(2):  # a wikilink's alias
            return m.group(2)
        page, _, heading = m.group(1).partition("#")  # what Obsidian shows: the file name, the heading
        return f"{page.rsplit('/', 1)[-1]} {heading}".strip()

    return _LINK_SYNTAX.sub(shown, text)


# Code in markdown: a fenced block (from a fence line to its closing one, or the end) and an
# inline span (between runs of as many backticks).
CODE_FENCE = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n.*?(?:^[ \t]*\1[^\n]*$|\Z)", re.M | re.S)
INLINE_CODE = re.compile(r"(`+)[^`\n]*?\1")


def mask_code(text: str) -> str:
    """The text with its code (fenced blocks, inline spans) blanked, each character but a
    line end a space, at the same offsets: what is left are the places a link can be."""
    blank = lambda m: re.sub(r"[^\n]", " ", m.group(0))  # noqa: E731
    return INLINE_CODE.sub(blank, CODE_FENCE.sub(blank, text))
