"""One structured extraction per completed turn: the rules (offline) or the LLM. The
LLM sees only the turn's question and final answer (plus earlier summaries for
references), as fenced data (engine.llm.fence); its answer is parsed and validated,
nothing else."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..extract.rules import _DISLIKE, _LIKE, _ZH_DISLIKE, _ZH_LIKE, _topic, names_in
from ..llm.fence import RULE, data
from .contract import Outcome, Triple, TurnExtraction
from .log import Turn

if TYPE_CHECKING:
    from ..llm import Provider

_DONE = re.compile(r"\b(done|finished|completed|booked|sent|fixed|created|scheduled|noted)\b|已完成|好了", re.I)
_FAILED = re.compile(r"\b(failed|couldn'?t|can'?t|unable|error)\b|失败|不能", re.I)
_PARTIAL = re.compile(r"\b(partly|partially|some of|not all|part of it)\b|部分", re.I)
# Words that open a chat message before a name ("Hey John", "Thanks Nate"): what
# follows them is the person spoken to, not a topic (docs/DESIGN.md, "Turn memory").
_GREETINGS = frozenset("hey hi hello hiya yo thanks thank thx congrats congratulations wow woohoo yay yeah yes "
                       "no ok okay oh ah aw aww bye goodbye morning evening night cheers sorry welcome dear great "
                       "nice cool awesome amazing sure glad haha lol omg woah whoa wowza ooh hmm yep nope".split())
_SENTENCES = re.compile(r"[^.!?\n。！？]+[.!?。！？]?")
_FIRST = re.compile(r"^(.{1,160}?[.!?。！？])(\s|$)", re.S)


def _first_sentence(text: str) -> str:
    text = " ".join(text.split())
    m = _FIRST.match(text)
    return (m.group(1) if m else text[:160]).strip()


def _names(text: str) -> list[str]:
    """Multi-word names in chat text, greetings stripped ("Hey Mel Brown" → "Mel Brown")."""
    out = []
    for sentence in _SENTENCES.findall(text):
        # Chat lines often end without a full stop; names_in would take such a line for a
        # Title Case headline, a rule meant for documents.
        for name in names_in(sentence.strip().rstrip(".!?。！？") + "."):
            words = name.split()
            while words and words[0].lower() in _GREETINGS:
                words.pop(0)
            if len(words) >= 2 and " ".join(words) not in out:
                out.append(" ".join(words))
    return out


class RulesTurnExtractor:
    name = "rules"

    def __init__(self, known_names: dict[str, str] | None = None):
        self.known = known_names or {}  # lower-case entity title/alias -> display name

    def extract(self, turn: Turn, previous: list[str]) -> TurnExtraction:
        q, a = turn.question["content"], turn.answer["content"]
        question = " ".join(q.split())
        summary = f"{question[:300]}{'…' if len(question) > 300 else ''} → {_first_sentence(a)}"
        outcome = (Outcome.FAILED if _FAILED.search(a) else Outcome.PARTIAL if _PARTIAL.search(a)
                   else Outcome.COMPLETED if _DONE.search(a) else Outcome.INFORMATIONAL)
        triples: list[Triple] = []
        seen = set()

        def add(s: str, p: str, o: str) -> None:
            key = (s.lower(), p, o.lower())
            if s.strip() and o.strip() and key not in seen:
                seen.add(key)
                triples.append(Triple(subject=s.strip(), predicate=p, object=o.strip()))

        for pattern, predicate in ((_LIKE, "likes"), (_ZH_LIKE, "likes"), (_DISLIKE, "dislikes"), (_ZH_DISLIKE, "dislikes")):
            for m in pattern.finditer(q):
                add("user", predicate, _topic(m["obj"]))
        low = (q + " " + a).lower()
        named = [shown for name, shown in self.known.items()
                 if (len(name) >= 2 and not name.isascii() or len(name) > 2) and name in low]
        named += [n for n in _names(q + "\n" + a) if n.lower() not in self.known and n not in named]
        for name in named:
            add("user", "talks about", name)
        for i, a_name in enumerate(named):  # names met in the same turn are related
            for b_name in named[i + 1 :]:
                add(a_name, "mentioned with", b_name)
        return TurnExtraction(summary=summary, outcome=outcome, triples=triples)


class LLMTurnExtractor:
    def __init__(self, provider: Provider) -> None:
        self.provider = provider
        self.name = provider.name

    def extract(self, turn: Turn, previous: list[str]) -> TurnExtraction:
        context = "\n".join(f"- {s}" for s in previous) or "(none)"
        current = f"User: {turn.question['content']}\nAssistant: {turn.answer['content']}"
        prompt = (
            "Summarise this completed chat turn for a memory index. The CURRENT TURN is the only "
            "source of facts; earlier summaries only help resolve references like 'that plan'.\n"
            "Return summary (objects, conclusions, the status the answer reports), outcome "
            "(completed | partial | failed | informational | unknown) and triples "
            "(subject, predicate, object) taken only from your summary; [] when there is no clear relation.\n"
            f"{RULE}\n\nPrevious turn summaries:\n{data(context)}\n\nCURRENT TURN:\n{data(current)}"
        )
        return self.provider.structured([{"role": "user", "content": prompt}], TurnExtraction)
