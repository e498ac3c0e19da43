"""The memory context for a question (docs/DESIGN.md, "Memory context"): what the vault
knows about it, from memory notes (search) and past chat turns (recall) at once, each item
with its source and why it was chosen, numbered for citation as ``[n]``. It is the one
way the chat pane, `memlink chat`, MCP's `context` tool and the rules' answer read memory
for a question.

The turns come first in the budget: notes are added beside them, never instead of them
(recall's evidence is what the LoCoMo benchmark measures), then both are put in one order
by reciprocal rank, so the best of each list leads."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, StrictFloat, StrictInt, StrictStr, ValidationError, model_validator

from ..errors import MemlinkError
from ..llm.fence import one_line
from ..model.blocks import LINKS_CLOSE, LINKS_PREFIX, VIEW_CLOSE, VIEW_OPEN
from ..model.notes import parse_note, split_frontmatter
from ..model.text import content_tokens
from ..retrieve.search import search
from .events import SESSION_ID
from .recall import TurnMemory, said

if TYPE_CHECKING:
    from ..index import SearchIndex
    from ..storage.vault import Vault



@dataclass
class MemoryItem:
    kind: Literal["note", "turn"]
    source: str  # a note's path, or a chat session's id
    where: str  # a note's line range ("18-20"), or a turn's message ids
    title: str  # one line: it is printed among lines memlink writes
    text: str
    route: str  # why it was chosen
    score: float
    when: str = ""  # the day a turn was said (its time stamp as written when it names no day)

    @property
    def cite(self) -> str:
        """Where it comes from, as a person opens it: `entities/klei-vuur.md:18-20`, or
        `session 2026-08-11-evening-setup (2026-08-11), messages m1, m2`: a model asked
        "when did I…" reads the day."""
        if self.kind == "note":
            return f"{self.source}:{self.where}"
        return f"session {self.source}{f' ({self.when})' if self.when else ''}, messages {self.where}"

    def to_json(self) -> dict:
        return dict(asdict(self), cite=self.cite, score=round(self.score, 4))

    @classmethod
    def from_json(cls, value: object) -> MemoryItem | None:
        """An item as ``to_json`` wrote it (a session log's recall snapshot); None for
        anything else: a log is data, read from wherever it came."""
        try:
            given = _Given.model_validate(value)
        except ValidationError:
            return None
        return cls(given.kind, given.source, given.where, given.title, given.text, given.route, float(given.score),
                   given.when)


class _Given(BaseModel):
    kind: Literal["note", "turn"]
    source: StrictStr
    where: StrictStr
    title: StrictStr
    text: StrictStr
    route: StrictStr
    score: StrictFloat | StrictInt
    when: StrictStr = ""

    @model_validator(mode="after")
    def _a_session_id(self) -> _Given:
        if self.kind == "turn" and not SESSION_ID.match(self.source):  # (a turn opens its session's log)
            raise ValueError(f"bad session id {self.source!r}")
        return self


@dataclass
class MemoryContext:
    question: str
    items: list[MemoryItem]

    def to_json(self) -> dict:
        return {"question": self.question, "items": [dict(n=n, **i.to_json()) for n, i in enumerate(self.items, 1)]}


def memory_context(vault: Vault, question: str, *, visible: set[str] | None = None,
                   index: SearchIndex | None = None, turn_count: int | None = None,
                   note_count: int | None = None, types: set[str] | None = None) -> MemoryContext:
    """Up to ``chat.turns`` recalled turns and ``chat.notes`` notes for ``question`` (or
    ``turn_count`` and ``note_count``: the dream asks for notes alone), within
    ``chat.context_tokens``. ``visible``: message ids the model already reads in full (the
    session's last turns), which recall leaves out; ``types``: the memory types a note may
    have (all when None)."""
    cfg = vault.config.chat
    budget = cfg.context_tokens * CHARS_PER_TOKEN
    turn_count = cfg.turns if turn_count is None else turn_count
    note_count = cfg.notes if note_count is None else note_count
    turns: list[MemoryItem] = []
    if turn_count:
        hits = TurnMemory.for_vault(vault).recall(question, k=turn_count, visible=visible)
        for hit, words in zip(hits, said(vault, hits), strict=True):
            turns.append(MemoryItem("turn", hit.session, ", ".join(hit.sources), one_line(hit.summary or hit.question),
                                    "\n".join(f"{who}: {text}" for who, text in words), "; ".join(hit.routes), hit.score,
                                    one_line(hit.day())))
    notes: list[MemoryItem] = []
    if note_count:
        for found in search(vault, question, k=note_count, index=index, snippets=False, types=types)[:note_count]:
            passage = _passage(vault, found.uri, question, budget // note_count)
            if passage:
                text, first, last = passage
                notes.append(MemoryItem("note", found.uri, f"{first}-{last}", one_line(found.title), text, found.route,
                                        found.score))
    kept: list[MemoryItem] = []
    used = 0

    def take(item: MemoryItem) -> None:
        nonlocal used
        kept.append(item)
        used += len(item.text) + len(item.title)

    for item in turns:  # turns first, whole, best first: notes never push a recalled turn out
        if used + len(item.text) + len(item.title) <= budget:
            take(item)
    share = budget // turn_count if turn_count else budget
    for item in turns:  # a turn too long for what is left (a pasted email): cut to its share, if half of it is left
        room = min(share, budget - used) - len(item.title) - 2  # (its title and the cut marks)
        if all(k is not item for k in kept) and room >= share // 2:
            item.text = _fit(item.text, question, room)
            take(item)
    for item in notes:
        if used + len(item.text) + len(item.title) <= budget:
            take(item)
    rrf_k = vault.config.search.rrf_k  # (the reciprocal-rank constant of this merge)
    rank = {id(i): 1 / (rrf_k + r) for group in (turns, notes) for r, i in enumerate(group, 1)}
    kept.sort(key=lambda i: (-rank[id(i)], i.kind != "turn"))
    return MemoryContext(question, kept)


CHARS_PER_TOKEN = 4  # a budget in tokens, counted without a tokenizer: English runs ~4 characters a token


def _passage(vault: Vault, uri: str, question: str, limit: int) -> tuple[str, int, int] | None:
    """The lines of a note's body that best answer ``question``, at most ``limit``
    characters, with their line numbers in the file (1-based): the whole body when it
    fits, else the lines around the one sharing most of the question's words."""
    try:
        text = vault.read_text(uri)
    except (OSError, MemlinkError):  # gone or unreadable since it was indexed: one item fewer
        return None
    lines = text.split("\n")
    body_text = split_frontmatter(text)[1]
    start = len(lines) - len(body_text.split("\n")) if body_text is not None else len(lines)
    body: list[tuple[int, str]] = []  # (line number, line) of what a reader sees
    in_links = False
    for n, line in enumerate(lines[start:], start + 1):
        s = line.strip()
        if s.startswith(LINKS_PREFIX):
            in_links = True
        elif s == LINKS_CLOSE:
            in_links = False
        elif not in_links and s and s not in (VIEW_OPEN, VIEW_CLOSE):
            body.append((n, line))
    if not body:  # (written by hand, its words in the frontmatter alone: Note.text; cited where they stand)
        try:
            shown = parse_note(text, uri, vault.types).text.strip().split("\n")
        except MemlinkError:
            return None
        at = next((n for n, line in enumerate(lines, 1) if shown[0] and shown[0] in line), 1)
        body = [(at + i, line) for i, line in enumerate(shown) if line.strip()]
    if not body:
        return None
    lo, hi = _window([line for _, line in body], question, limit)
    chosen = body[lo:hi + 1]
    return "\n".join(line for _, line in chosen)[:limit], chosen[0][0], chosen[-1][0]


def _window(lines: list[str], question: str, limit: int) -> tuple[int, int]:
    """The first and last of the lines that best answer ``question`` within ``limit``
    characters: the line sharing most of its words, grown around while they fit."""
    words = set(content_tokens(question))
    best = max(range(len(lines)), key=lambda i: (len(words & set(content_tokens(lines[i]))), -i))
    lo = hi = best
    size = len(lines[best])
    while True:  # grow around the best line, the earlier side first (its heading, its subject)
        grew = False
        for i in (lo - 1, hi + 1):
            if 0 <= i < len(lines) and size + len(lines[i]) + 1 <= limit:
                size += len(lines[i]) + 1
                lo, hi = min(lo, i), max(hi, i)
                grew = True
        if not grew:
            break
    return lo, hi


def _fit(text: str, question: str, limit: int) -> str:
    """A recalled turn within ``limit`` characters (and the "…" that mark a cut): whole
    when it fits, else the lines that best answer the question (a pasted email is not the
    memory) and, with room left, the start of the line after them (an answer too long to
    fit whole); a single line too long is cut around the first of the question's words."""
    if len(text) <= limit:
        return text
    lines = text.split("\n")
    lo, hi = _window(lines, question, limit)
    window = "\n".join(lines[lo:hi + 1])
    if len(window) > limit:
        low = window.lower()  # (a stem is where its word starts; a CJK token is where it is written)
        at = min((p for w in content_tokens(question) if (p := low.find(w)) >= 0), default=0)
        start = max(0, at - limit // 4)
        space = window.rfind(" ", 0, start)
        start = space + 1 if start and 0 <= space and start - space < 40 else start  # (at a word's start)
        window = window[start:start + limit]
    elif hi + 1 < len(lines) and limit - len(window) > 40:
        window += "\n" + lines[hi + 1][: limit - len(window) - 1]
    return ("" if text.startswith(window) else "…") + window + ("" if text.endswith(window) else "…")


def answer_from_memory(context: MemoryContext, why: str = "no chat model is available") -> str:
    """An answer without a model: each item's lines that share most of the question's
    words, quoted with its citation number and source, under a plain statement that no
    model wrote it."""
    head = f"No model wrote this answer ({why}); "
    if not context.items:
        return head + "your memory holds nothing that answers it."
    words = set(content_tokens(context.question))
    out = [head + "this is what your memory holds on it:"]
    unquoted: list[str] = []
    for n, item in enumerate(context.items, 1):
        lines = [line.strip() for line in item.text.split("\n") if line.strip() and not line.startswith("# ")]
        shared = [words & set(content_tokens(line)) for line in lines]
        # A word on many of the item's lines (its name, "the studio") tells them apart less.
        df = Counter(w for ws in shared for w in ws)
        score = [sum(1 / df[w] for w in ws) for ws in shared]
        best = sorted((i for i in range(len(lines)) if score[i] > 0), key=lambda i: -score[i])[:QUOTED_LINES]
        named = bool(words & set(content_tokens(item.title)))  # (the note the question names: "What does Mochi eat?")
        if not best and words and not named:
            unquoted.append(f"[{n}]")  # none of the question's words: found by meaning alone, not worth quoting
            continue
        shown = [lines[i] for i in sorted(best or range(min(QUOTED_LINES if named else 1, len(lines))))]  # in its own order
        title = item.title if len(item.title) <= 80 else item.title[:79] + "…"
        out.append(f"[{n}] {title} — {item.cite}")
        out.extend(f"    {line}" for line in shown)
    if len(out) == 1:
        return head + "your memory holds nothing that answers it."
    if unquoted:
        out.append(f"(not quoted: {', '.join(unquoted)}, close in meaning but holding none of the question's words)")
    return "\n".join(out)


QUOTED_LINES = 2  # lines quoted of each memory item in an answer without a model
