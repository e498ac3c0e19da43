"""The zero-LLM rules provider: deterministic extraction from what the user said.

- preferences: "I like / love / prefer / enjoy …", "I hate / dislike / can't stand …",
  "I no longer …", "… instead of …", 我喜欢 / 我不喜欢 / 更喜欢 / 不再喜欢 …
- research requests: "help me research X", "look into X for me", 帮我研究 X → report_candidate
- dated events: a sentence with a date (ISO, "3 September", today / yesterday, 10月14日 …)
- entities: known titles and aliases mentioned; new multi-word capitalised names
- links by mention, typed by a cascade in GBrain's spirit on the sentence around the
  mention: the cues of the link-type table (docs/DESIGN.md "Link types"; no longer /
  instead of → evolved_from, because → caused_by, part of / works at → belongs_to,
  according to → derived_from, else related_to); a preference opposite to an existing
  one on the same topic → the conflict type (contradicts); a changed opinion → the
  supersedes type (evolved_from).

It produces the same StructuredMemoryOperations an LLM would, so everything after it
(resolve, merge, write, links) is shared."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import BaseModel

from ..model.linktypes import LinkType, LinkTypeTable, builtin_table
from ..model.notes import split_frontmatter
from ..model.templates import slugify
from ..model.text import CODE_FENCE, INLINE_CODE, tokenize
from ..model.yamlio import safe_load
from .context import ExtractContext
from .operations import link_types_of

if TYPE_CHECKING:
    from ..model.notes import Note

_SENT = re.compile(r"[^.!?。！？\n]+[.!?。！？]?")
_LIKE = re.compile(r"\bI\s+(?:really\s+|do\s+|still\s+|now\s+)?(?:like|love|enjoy|prefer|adore)\s+(?P<obj>[^.!?;\n]+)", re.I)
_DISLIKE = re.compile(r"\bI\s+(?:really\s+|still\s+|now\s+)?(?:hate|dislike|can'?t stand|cannot stand|don'?t like|do not like|avoid)\s+(?P<obj>[^.!?;\n]+)", re.I)
_NO_LONGER = re.compile(
    r"\bI\s+no longer\s+(?:like|love|drink|eat|use|want|enjoy)\s+(?P<obj>[^.!?;\n]+?)(?=[.!?;,\n]|$)"
    r"|\bI\s+(?:don'?t|do not)\s+(?:like|love|drink|eat|use|want|enjoy)\s+(?P<obj2>[^.!?;\n]+?)\s+any\s?more", re.I)
_CHANGED = re.compile(r"\bchanged my mind about\s+(?P<obj>[^.!?;,\n]+)", re.I)
_INSTEAD = re.compile(r"(?P<new>[\w' -]{2,40}?)\s+instead of\s+(?P<old>[\w' -]{2,40})", re.I)
# A question asks; it states no preference: "Do I like espresso?", "Should I like jazz", "我喜欢咖啡吗".
_QUESTION = re.compile(r"[?？]\s*$|^\W*(?:do|does|did|should|would|could|can|will|shall|may|might|must|am)\s+I\b|吗\W*$",
                       re.I)
_ZH_LIKE = re.compile(r"我(?:很|最|真|也|还是|更)?喜欢(?P<obj>[^。！？，,；\n]+)")
_ZH_DISLIKE = re.compile(r"我(?:很|也|真)?(?:不喜欢|讨厌)(?P<obj>[^。！？，,；\n]+)")
_ZH_NO_LONGER = re.compile(r"我不再喜欢(?P<obj>[^。！？，,；\n]+)")
_RESEARCH = re.compile(
    r"(?:help me|can you|could you|please|would you)\s+(?:research|look into|find out(?: about)?|investigate|dig into)\s+(?P<q>[^.!?\n]+)"
    r"|\bresearch\s+(?P<q2>[^.!?\n:]+?)\s+for me(?:\s*:\s*(?P<after>[^.!?\n]+))?"
    r"|\bresearch\s+(?:thing|topic|question|request|task)\s*:\s*(?P<q3>[^.!?\n]+)", re.I)
_PRONOUNS = {"this", "that", "it", "these", "those", "something"}
# A preference about a person spoken to or of ("I love you too", "I hate you lol"): none to keep.
_PERSONAL = {"you", "ya", "u", "him", "her", "them", "us", "me", "yourself"}
# When the view holds, after its topic: "coffee these days", "coffee now, switching to matcha".
_LATELY = re.compile(r"\s+(?:these days|nowadays|now|lately|recently|any ?more|at the moment|right now)\b(?=\s*(?:,|$))",
                     re.I)
_ZH_RESEARCH = re.compile(r"帮我(?:研究|查一下|调查|了解一下)(?P<q>[^。！？\n]+)")
_MONTHS = {m: i for i, m in enumerate(
    "january february march april may june july august september october november december".split(), 1)}
_DATE_ISO = re.compile(r"\b(20\d\d)-(\d\d)-(\d\d)\b")
_DATE_DM = re.compile(r"\b(\d{1,2})\s+(" + "|".join(_MONTHS) + r")\b", re.I)
_DATE_MD = re.compile(r"\b(" + "|".join(_MONTHS) + r")\s+(\d{1,2})\b", re.I)
_DATE_ZH = re.compile(r"(\d{1,2})月(\d{1,2})[日号]")
_RELATIVE = {"today": 0, "this morning": 0, "tonight": 0, "this afternoon": 0, "yesterday": -1, "last night": -1,
             "今天": 0, "今晚": 0, "昨天": -1, "昨晚": -1}
_CAPNAME = re.compile(r"\b([A-Z][a-z]+(?:\s+(?:[A-Z][a-z]+|de|van|von|der|el|El|al)){1,3})\b")
# Never a name, wherever they stand: months, weekdays, and words capitalised only as a
# sentence's first word.
NOT_NAMES = {m.capitalize() for m in _MONTHS} | {"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday",
                                                   "Sunday", "I", "The", "A", "An", "My", "We", "You", "It", "This", "That"}
# Words that, capitalised, only open a sentence ("Why Mia left", "Led Series B round"):
# closed-class words and common opening verbs. Dropped at the start of a sentence only —
# mid-sentence a capitalised word is part of a name ("moved to New Zealand"). Words that
# do start names ("New York", "First Republic Bank", "Will Smith") are not among them;
# title-case lines are left to ``_headline``.
_OPENERS = {w.capitalize() for w in (
    "why how what when where who whom whose which while whether if then than so and but or nor yet also "
    "most more many much some any all every each both few several such no not none other another "
    "our your their his her its these those there here he she they we us them me "
    "is are was were be been being do does did have has had would can could should might must "
    "on in at by for from with without of to into onto about after before during since until over under "
    "led built grew sold raised ran went met saw got made took gave came bought left began spent told said sent "
    "found won lost wrote held joined yesterday today tomorrow tonight"
).split()}
_LOWER_WORD = re.compile(r"(?<![\w'-])[a-z][a-z'-]+")
_HEADING_LINE = re.compile(r"^\s*#{1,6}\s")
_SMALL = {"a", "an", "the", "of", "in", "on", "at", "for", "to", "and", "or", "from", "with", "by"}
_TRIM = re.compile(r"\s+(?:because|but|since|although|when|so|and then|which)\b.*$", re.I)
# A new clause run on after the topic, as chats write them: "skiing it's my favorite
# sport", "hiking, it relaxes me", "concerts they are so fun".
# ("movies that are scary", "places where you can swim", "when it is sunny": one clause.)
_RUN_ON = re.compile(r"(?:\s*,\s*|\s+)(?:and\s+)?(?:it|this|they|i|we|he|she|you)"
                     r"(?:['’](?:s|re|m|ve|d|ll)\b|\s+(?:is|are|was|were|am|has|have|had|will|would|can)\b)"
                     r"|\s*,\s*(?:it|they|we|he|she|you|i)\b", re.I)
_JOINED = re.compile(r"(?:^|\s)(?:when|where|what|how|why|who|whom|which|that|if|whether)$", re.I)
# An English past tense or a Chinese aspect marker: a sentence that says something happened
# (a date alone, as in a heading "2024-07-17", does not).
_DID = re.compile(r"\b\w+ed\b|\b(?:went|met|had|saw|got|made|ate|ran|took|gave|came|did|was|were|bought|left|moved|"
                  r"began|spent|told|said|sent|found|won|lost|fell|flew|drove|wrote|read|held)\b|了|过", re.I)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
# Words a title does not end on: "Oolong tea over green tea in" is cut at "in".
_DANGLING = _SMALL | {"over", "than", "into", "about", "as", "like", "without", "but", "because", "when", "while",
                      "during", "after", "before", "my", "our", "your", "their", "his", "her", "its", "very",
                      "really", "so", "that", "this", "is", "are", "was", "were", "be", "not"}

# What is not prose, left out before sentences are read: code, links' targets, file names.
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)
_EMBED = re.compile(r"!\[\[[^\]\n]*\]\]|!\[[^\]\n]*\]\([^)\n]*\)")
_MD_LINK = re.compile(r"\[([^\]\n]*)\]\([^)\n]*\)")
_WIKI = re.compile(r"\[\[(?:[^\]|\n]*\|)?([^\]\n]*)\]\]")
_URL = re.compile(r"\b(?:https?|ftp|file)://\S+|\bwww\.\S+|<[a-z]+:[^>\s]*>", re.I)
_FILE = re.compile(r"(?<![\w/.-])[\w./~-]*[\w-]\.(?:png|jpe?g|gif|svg|webp|bmp|pdf|md|markdown|txt|py|js|ts|tsx|json|"
                   r"ya?ml|toml|csv|tsv|html?|css|docx?|xlsx?|pptx?|canvas|sh|bash|zsh|rs|go|java|c|h|cpp|rb|php|"
                   r"sql|log|zip|tar|gz|mp3|mp4|mov|wav)\b", re.I)
_HTML_CODE = re.compile(r"<(script|style)\b[^>]*>.*?</\1\s*>", re.I | re.S)  # an HTML element's code
_HTML_TAG = re.compile(r"</?[a-zA-Z][\w:-]*(?:\s[^<>]*)?/?>")  # a tag with its attributes (the text between stays)
_BLOCK_START = re.compile(r"^\s*(?:[-*+>|#]|\d+[.)]\s|$)")
_LINE_END = re.compile(r"[.!?:;。！？|]\s*$")  # a line that ends a sentence or a table row


def prose(text: str) -> str:
    """``text`` without what is not prose — fenced code, inline code, comments, HTML tags
    and scripts, URLs, file and image names, embeds —, links kept as their shown text, and a paragraph's wrapped
    lines joined (a sentence broken over two lines is one sentence, not two fragments)."""
    text = CODE_FENCE.sub("\n", text)
    text = _HTML_COMMENT.sub(" ", text)
    text = _HTML_CODE.sub(" ", text)
    text = _HTML_TAG.sub("", text)  # (an embed's attributes are no sentence: "padding:56.29% 0 0 0")
    text = INLINE_CODE.sub(" ", text)
    text = _EMBED.sub(" ", text)
    text = _MD_LINK.sub(lambda m: m[1], text)
    text = _WIKI.sub(lambda m: m[1].split("#")[0], text)
    text = _URL.sub(" ", text)
    text = _FILE.sub(" ", text)
    # A line's parts are joined once it is complete: growing one string, or reading it
    # again for each line added, takes time quadratic in a paragraph's length.
    lines: list[str] = []
    parts: list[str] = []  # the line being joined: its first line, then the stripped lines run on to it
    heading = False
    for line in text.split("\n"):
        if (parts and parts[-1].strip() and not _BLOCK_START.match(line) and not heading
                and not _LINE_END.search(parts[-1])):
            if len(parts) == 1:
                parts[0] = parts[0].rstrip()
            parts.append(line.strip())
        else:
            if parts:
                lines.append(" ".join(parts))
            parts = [line]
        if len(parts) <= 2:  # (a heading is told by its first characters: more run-on text does not change it)
            heading = bool(_HEADING_LINE.match(" ".join(parts)))
    lines.append(" ".join(parts))
    return "\n".join(lines)


def _code_words(said: str) -> str:
    """What a person said, a code span's words kept (in a message, `ripgrep` names a
    thing; a document's code goes): not one that holds a sentence's end (`os.path`)."""
    return INLINE_CODE.sub(lambda m: " " if _ENDS.search(m[0]) else m[0].strip("`"), said)


_ENDS = re.compile(r"[.!?。！？]")
_CLOSING = re.compile(r"[`\])>*_~]*[.!?。！？]?")  # what closes a sentence's last word: markup, then its end mark


def _as_written(raw: str, sentence: str, at: int) -> tuple[str, int]:
    """``sentence`` (of ``prose(_code_words(raw))``) as ``raw`` writes it from offset
    ``at`` on — with the code and links prose left out — and where it ends in ``raw``;
    ``sentence`` itself when that span does not read as the sentence."""
    words = [w.rstrip(".!?。！？") or w for w in sentence.split()]
    start = end = raw.find(words[0], at)
    for word in words if start >= 0 else ():
        end = raw.find(word, end)
        if end < 0:
            return sentence, at
        end += len(word)
    if start < 0:
        return sentence, at
    end = _CLOSING.match(raw, end).end()  # type: ignore[union-attr]  # (it matches the empty string too)
    span = " ".join(raw[start:end].split())
    if span == " ".join(sentence.split()) or " ".join(prose(_code_words(span)).split()) != " ".join(sentence.split()):
        return sentence, end
    return span, end


def _whole(words: list[str]) -> str:
    """A title made of these words, never ending on a word that needs more after it."""
    while len(words) > 1 and words[-1].lower().strip(",;:") in _DANGLING:
        words = words[:-1]
    return " ".join(words).rstrip(",;:")


def source_day(name: str, text: str) -> dt.date | None:
    """The day an imported file is from: a date in its file name (``2024-07-17.md``,
    ``journal/2024-07-17 notes.md``), else its frontmatter's ``date`` (or ``created``);
    None when neither says (never the day it is imported)."""
    if m := _DATE_ISO.search(name.rsplit("/", 1)[-1]):
        try:
            return dt.date(int(m[1]), int(m[2]), int(m[3]))
        except ValueError:
            pass
    front, _body = split_frontmatter(text)
    if front is None:
        return None
    try:
        meta = safe_load(front)
    except (yaml.YAMLError, ValueError):  # (a frontmatter that does not read says no day)
        return None
    for key in ("date", "created", "created_at"):
        value = meta.get(key) if isinstance(meta, dict) else None
        if isinstance(value, dt.datetime):
            return value.date()
        if isinstance(value, dt.date):
            return value
        if isinstance(value, str) and (m := _DATE_ISO.match(value.strip())):
            try:
                return dt.date(int(m[1]), int(m[2]), int(m[3]))
            except ValueError:
                return None
    return None


def _clause(sentence: str) -> bool:
    """A sentence that can state a preference or an event: not a heading, a table row or a
    bare label, and of three words or more (or written in CJK, which has no spaces)."""
    if _HEADING_LINE.match(sentence) or sentence.lstrip().startswith("|") or _headline(sentence):
        return False
    return len(re.findall(r"\w+", sentence)) >= 3 or bool(_CJK.search(sentence))


def link_type_for(sentence: str, link_types: LinkTypeTable | None = None) -> str:
    """The link type a mention in ``sentence`` gets: the first type (by cue rank) whose
    cue the sentence holds, else the default type (related_to)."""
    return (link_types or builtin_table()).type_for(sentence).value


def _topic(obj: str) -> str:
    obj = obj.strip()
    if (run_on := _RUN_ON.search(obj)) and not _JOINED.search(obj[: run_on.start()]):
        obj = obj[: run_on.start()]
    obj = _TRIM.sub("", obj).strip(" '\"")
    if lately := _LATELY.search(obj):
        obj = obj[: lately.start()]
    obj = re.sub(r"^(?:to|the|a|an|my|it when|when)\s+", "", obj, flags=re.I)
    words = obj.split()
    return _whole(words[:6]) if words else ""


def _headline(sentence: str) -> bool:
    """A markdown heading, or a Title Case Line (most words capitalised): its capitals
    say nothing about names."""
    if _HEADING_LINE.match(sentence):
        return True
    if re.search(r"[.!?。！？]\s*$", sentence):
        return False  # headlines carry no full stop
    words = [w for w in re.findall(r"[A-Za-z][\w'-]*", sentence) if w.lower() not in _SMALL]
    lower = sum(w[0].islower() for w in words)
    return len(words) - lower >= 3 and lower <= 1


def names_in(sentence: str, common: set[str] | frozenset = frozenset()) -> list[str]:
    """New multi-word names in a sentence. At the sentence's start (only openers before
    the name) its leading openers are dropped, and a first word the text also writes in
    lower case; months and weekdays never start a name. What is left must still be two
    words or more."""
    if _headline(sentence):
        return []
    out = []
    for m in _CAPNAME.finditer(sentence):
        words = m[1].split()
        before = re.findall(r"\w+", sentence[: m.start()])
        opening = all(w.capitalize() in _OPENERS or w.capitalize() in NOT_NAMES for w in before)
        first = True
        while words and (words[0] in NOT_NAMES or opening and (
                words[0] in _OPENERS or (first and words[0].lower() in common))):
            words.pop(0)
            first = False
        if len(words) >= 2 and words[-1] not in NOT_NAMES:
            out.append(" ".join(words))
    return out


def _overlap(a: str, b: str) -> float:
    """How much one topic covers the other (for "I no longer like X": X may be short)."""
    ta, tb = set(tokenize(a)), set(tokenize(b))
    return len(ta & tb) / max(1, min(len(ta), len(tb))) if ta and tb else 0.0


def _same_topic(a: str, b: str) -> bool:
    """Two topics are the same when most of their words are shared (Jaccard ≥ 0.5):
    "vegetarian diet" vs "places where the vegetarian option is" are not."""
    ta, tb = set(tokenize(a)), set(tokenize(b))
    return bool(ta and tb) and len(ta & tb) / len(ta | tb) >= 0.5


_YEAR = re.compile(r"(?<!\d)(?:19|20)\d\d(?!\d)")
_CLOCK = re.compile(r"\b\d{1,2}:\d\d(?::\d\d)?(?:\s*[ap]\.?m\.?\b)?", re.I)


_EPOCH = re.compile(r"(\d{10}|\d{13})(?:\.\d+)?")  # Unix time in seconds or milliseconds (UTC, as exports write it)


def time_of(stamp: str) -> dt.datetime | None:
    """The time a message's time stamp names when it is a time: ISO ("2023-05-08T13:56:00Z",
    as written, with its zone or none), or Unix time in seconds or milliseconds (UTC, from
    2000 on: a number of that length that is no time of this century is an id or a packed
    date); None otherwise."""
    if m := _EPOCH.fullmatch(stamp.strip()):
        said = dt.datetime.fromtimestamp(float(stamp) / (1000 if len(m[1]) == 13 else 1), dt.UTC)
        return said if dt.date(2000, 1, 1) <= said.date() <= dt.date.today() + dt.timedelta(days=366) else None
    try:
        return dt.datetime.fromisoformat(stamp.strip().replace("Z", "+00:00"))
    except ValueError:
        return None


def day_of(stamp: str) -> dt.date | None:
    """The day a message's time stamp names: a time (``time_of``: ISO, its own day; Unix
    time, its UTC day), or a day, month and year as chat exports write them ("1:56 pm on
    8 May, 2023"); None otherwise."""
    if (when := time_of(stamp)) is not None:
        return when.date()
    if _EPOCH.fullmatch(stamp.strip()):
        return None
    stamp = _CLOCK.sub(" ", stamp)  # ("1:05 May 8, 2023": 05 is no day)
    year = _YEAR.search(stamp)
    return _date_in(stamp, dt.date(int(year[0]), 1, 1), relative=False) if year else None


def _date_in(sentence: str, when: dt.date, relative: bool = True) -> dt.date | None:
    """The date a sentence names; "today", "yesterday"… only when ``relative`` (the day
    the input is from is known)."""
    if m := _DATE_ISO.search(sentence):
        try:
            return dt.date(int(m[1]), int(m[2]), int(m[3]))
        except ValueError:
            return None
    for pattern, order in ((_DATE_DM, "dm"), (_DATE_MD, "md")):
        if m := pattern.search(sentence):
            day, month = (m[1], m[2]) if order == "dm" else (m[2], m[1])
            try:
                return dt.date(when.year, _MONTHS[month.lower()], int(day))
            except ValueError:
                return None
    if m := _DATE_ZH.search(sentence):
        try:
            return dt.date(when.year, int(m[1]), int(m[2]))
        except ValueError:
            return None
    low = sentence.lower()
    for phrase, delta in _RELATIVE.items() if relative else ():
        if phrase in low:
            return when + dt.timedelta(days=delta)
    return None


@dataclass
class _Out:
    items: dict[str, list[dict]] = field(default_factory=dict)
    links: list[dict] = field(default_factory=list)
    seen: set = field(default_factory=set)
    day: dt.date | None = None  # the day the line read now was said
    link_types: LinkTypeTable = field(default_factory=builtin_table)  # the vault's, from the output model


class RulesExtractor:
    name = "rules"
    fallback = ""  # (no model to give up on)

    def extract(self, ctx: ExtractContext, schema: type[BaseModel]) -> BaseModel:
        out = _Out(items={name: [] for name in schema.model_fields if name != "links"}, link_types=link_types_of(schema))
        # A conversation's memories are what the user said: a day they said nothing gives
        # none (another speaker's "I love cats" is not theirs). Other inputs are read whole.
        lines = [prose(_code_words(line)) for line in ctx.user_lines] if ctx.kind == "session" else [prose(ctx.text)]
        days = ctx.line_days if len(ctx.line_days) == len(lines) else [ctx.when] * len(lines)
        profile = next((pid for pid, n in ctx.notes.items() if n.memory_type == "profile"), None)
        ctx.common_words = ctx.common_words | set(_LOWER_WORD.findall(ctx.text))
        for n, (line, day) in enumerate(zip(lines, days, strict=True)):
            out.day = day
            at = 0
            for sentence in (s.strip() for s in _SENT.findall(line)):
                if sentence:
                    # (what a person said is kept as they wrote it: the code and links prose leaves out too)
                    said, at = _as_written(ctx.user_lines[n], sentence, at) if ctx.user_lines else (sentence, 0)
                    self._sentence(sentence, ctx, out, profile, day, said)
        return schema.model_validate({**out.items, "links": out.links})

    # -- one sentence -------------------------------------------------------------------------
    def _new(self, ctx: ExtractContext, out: _Out, mtype: str, fields: dict, key: tuple) -> int | None:
        if mtype not in out.items or key in out.seen:
            return None
        out.seen.add(key)
        page_id = ctx.pages.next_new_page_id()
        out.items[mtype].append({"page_id": page_id, **fields})
        if out.day is not None and out.day != ctx.when:
            ctx.said_on[page_id] = out.day  # (its note is dated the day it was said)
        return page_id

    def _link(self, out: _Out, f: int, t: int, link_type: LinkType, t_field: str, match_text: str | None, why: str,
              weight: float = 0.8) -> None:
        key = (f, t)
        if f == t or key in out.seen:
            return
        out.seen.add(key)
        out.links.append({"f": f, "t": t, "t_field": t_field, "link_type": link_type.value, "weight": weight,
                          "match_text": match_text or None, "description": why})

    def _sentence(self, s: str, ctx: ExtractContext, out: _Out, profile: int | None, when: dt.date,
                  said: str) -> None:
        """One sentence said on ``when`` (its "yesterday" counts from that day): ``s`` as
        prose, ``said`` as written (what a note keeps of it)."""
        created: list[tuple[int, str]] = []  # (page id, field holding the sentence)
        # Preferences, and opinions that changed; a question ("Do I like espresso?") states none.
        for pattern, sentiment, changed in ((_NO_LONGER, "dislike", True), (_ZH_NO_LONGER, "dislike", True),
                                            (_CHANGED, "neutral", True), (_DISLIKE, "dislike", False),
                                            (_ZH_DISLIKE, "dislike", False), (_LIKE, "like", False),
                                            (_ZH_LIKE, "like", False)):
            m = pattern.search(s)
            if not m or _QUESTION.search(s):
                continue
            obj = next((v for k, v in m.groupdict().items() if k.startswith("obj") and v), "")
            topic = _topic(obj)
            if (not _clause(s) or not topic or topic.lower() in _PRONOUNS or not tokenize(topic)
                    or topic.split()[0].lower().strip(",") in _PERSONAL):
                break  # a fragment, a heading, or about nothing named
            about = topic  # what it is about; the note's topic may get a date to stay distinct
            for note in ctx.notes.values():  # the same topic held another view: keep both, linked
                old = note.fields.get("sentiment")
                if (note.memory_type == "preference" and slugify(note.fields.get("topic", "")) == slugify(topic)
                        and (changed or (old and old != sentiment))):
                    topic = f"{topic} ({when.isoformat()})"
            pid = self._new(ctx, out, "preference", {"topic": topic[:1].upper() + topic[1:], "sentiment": sentiment,
                                                       "content": said}, ("preference", topic.lower()))
            if pid is None:
                break
            created.append((pid, "content"))
            if profile is not None:
                self._link(out, pid, profile, out.link_types.role("membership"), "content", None, "a preference of the user", 0.6)
            for other_pid, note in ctx.notes.items():
                if note.memory_type != "preference":
                    continue
                other = note.fields.get("topic", "")
                if not (_overlap(other, about) >= 0.5 if changed else _same_topic(other, about)):
                    continue
                old = note.fields.get("sentiment")
                anchor = obj.strip() if obj.strip() in said else None
                if changed:
                    self._link(out, pid, other_pid, out.link_types.role("supersedes"), "content", anchor, "the user's view changed")
                elif old and old != sentiment and old != "neutral":
                    self._link(out, pid, other_pid, out.link_types.role("conflict"), "content", anchor,
                               f"says {sentiment} where the earlier note says {old}")
            break
        if m := _INSTEAD.search(s):
            for other_pid, note in ctx.notes.items():
                if note.memory_type == "preference" and _overlap(note.fields.get("topic", ""), m["old"]) >= 0.5:
                    for pid, _f in created:
                        self._link(out, pid, other_pid, out.link_types.role("supersedes"), "content",
                                   m["new"].strip() if m["new"].strip() in said else None,
                                   "chosen instead of the earlier preference")
        # Research requests.
        m = _RESEARCH.search(s) or _ZH_RESEARCH.search(s)
        if m:
            g = m.groupdict()
            q = (g.get("q") or g.get("q2") or g.get("q3") or "").strip().rstrip("?？")
            if q.lower() in _PRONOUNS:  # "research this for me: <the actual question>"
                q = (g.get("after") or "").strip()
            if q:
                question = q[:1].upper() + q[1:] + ("？" if re.search(r"[\u4e00-\u9fff]$", q) else "?")
                pid = self._new(ctx, out, "report_candidate", {"question": question, "user_requirement": said, "status": "pending"},
                                ("report_candidate", question.lower()))
                if pid is not None:
                    created.append((pid, "user_requirement"))
        # Dated events.
        day = _date_in(s, when, ctx.day_known)
        if day is not None and not created and _DID.search(s) and _clause(s):
            words = re.sub(r"[^\w\s'-]", " ", s).split()
            name = _whole(words[:8]) if words else s[:40]
            participants = [n.fields.get("name") or n.fields.get("title") for n in self._mentions(s, ctx).values()
                            if n.fields.get("kind") == "person"]  # an entity's name, an imported person page's title
            participants = [p for p in participants if isinstance(p, str) and p]
            fields: dict[str, Any] = {"event_name": name, "date": day.isoformat(), "content": said}
            if participants:
                fields["participants"] = participants
            pid = self._new(ctx, out, "event", fields, ("event", name.lower(), day))
            if pid is not None:
                created.append((pid, "content"))
        if not created:
            return
        if ctx.source_page is not None:
            for pid, _f in created:
                self._link(out, pid, ctx.source_page, out.link_types.role("provenance"), "content", None,
                           "drawn from the imported resource", 0.9)
        # Mentions of known entities, and new capitalised names.
        link_type = out.link_types.type_for(s)
        for mention, (pid_known, note) in self._mention_pages(s, ctx).items():
            for pid, _f in created:
                self._link(out, pid, pid_known, link_type, "content" if "content" in note.fields else "name", mention,
                           f"mentions {note.fields.get('name') or mention}")
        for name in names_in(s, ctx.common_words):
            if name.lower() in ctx.known_names or " ".join(reversed(name.lower().split())) in ctx.known_names:
                continue  # known, or known in the other order ("Jun Wang" is the Wang Jun a note names)
            pid_new = self._new(ctx, out, "entity", {"name": name, "content": said}, ("entity", name.lower()))
            if pid_new is not None:
                for pid, _f in created:
                    self._link(out, pid, pid_new, link_type, "content", name, f"mentions {name}")

    def _mentions(self, s: str, ctx: ExtractContext) -> dict[str, Note]:
        return {m: n for m, (_p, n) in self._mention_pages(s, ctx).items()}

    def _mention_pages(self, s: str, ctx: ExtractContext) -> dict[str, tuple[int, Note]]:
        found: dict[str, tuple[int, Note]] = {}
        low = s.lower()
        for name in sorted(ctx.known_names, key=len, reverse=True):
            if len(name) < 2:
                continue
            at = low.find(name)
            if at < 0:
                continue
            if name.isascii() and not (at == 0 or not low[at - 1].isalnum()) or (
                name.isascii() and at + len(name) < len(low) and low[at + len(name)].isalnum()
            ):
                continue  # inside another word
            uri = ctx.known_names[name]
            pid = ctx.page_of(uri)
            if pid is None or any(p == pid for p, _ in found.values()):
                continue
            found[s[at : at + len(name)]] = (pid, ctx.notes[pid])
        return found
