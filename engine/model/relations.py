"""Relations the text states between two pages (GBrain's zero-LLM link-type
cascade): founded → invested in → advises → reports to → works at → attended, strongest
first (attended first when one end is a meeting), each mapped onto a link type by role:
the membership type (belongs_to) or the default type (related_to); see docs/DESIGN.md
"Link types". The relation itself is kept in the link's description, phrased from the link's
from-note to its to-note ("works at" from a person's page, "employs" from the
company's), so search can answer "Who works at X?".

A cue can state the relation either way round: "Mia works at Acme" has the relation's
subject before the cue, "Acme employs Mia", "Acme was backed by Bob" after it (the
relation's ``reverse`` cues). When the page kinds do not say who the subject is, the
reference's place around the cue does, flipped for a reverse cue.

Ingest uses ``relation_in`` on the sentence around a reference; search uses
``asked_relation`` on the question and ``relations_of`` on a link's description."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .linktypes import LinkType, builtin_table


@dataclass(frozen=True)
class Relation:
    name: str
    link_type: LinkType
    label: str  # the subject's page links to the object's: "works at"
    inverse: str  # the object's page links to the subject's: "employs"
    said: re.Pattern  # the relation stated in a sentence
    asked: re.Pattern  # the relation asked about in a question
    reverse: re.Pattern | None = None  # cues (among ``said``) whose grammatical subject is the relation's object
    implies: tuple[str, ...] = ()  # relations this one states too: a founder works at what they founded

    def answers(self, asked: Relation) -> bool:
        """Whether a link stating this relation answers a question asking ``asked``."""
        return asked.name == self.name or asked.name in self.implies


def _p(text: str) -> re.Pattern:
    return re.compile(text, re.I)


# Roles, not names: a relation means membership or plain association whatever the types
# are called. The built-ins hold every role, so these are every vault's.
_MEMBER = builtin_table().role("membership")
_PLAIN = builtin_table().role("default")

RELATIONS: list[Relation] = [  # strongest first: the first that matches a sentence decides
    Relation("founded", _MEMBER, "founded", "founded by",
             _p(r"\b(?:co-?)?found(?:ed|er|ing (?:member|partner|team))\b"), _p(r"\b(?:co-?)?found(?:ed|er|ers)\b"),
             _p(r"(?:co-?)?founded by\b"), implies=("works_at",)),
    Relation("invested_in", _PLAIN, "invested in", "backed by",
             _p(r"\binvest(?:ed|or|ors|ment|ments|s|ing)?\b|\bback(?:ed|er|ers|s)\b|\bangel\b|\bstake\b|"
                r"\bseries [a-f]\b|\b(?:seed|funding) round\b|\bfunded\b"),
             _p(r"\binvest(?:ed|or|ors|s|ing)?\b|\bback(?:ed|er|ers|s)?\b|\bfund(?:ed|s|ers)?\b"),
             _p(r"(?:backed|funded|invested in) by\b")),
    Relation("advises", _PLAIN, "advises", "advised by",
             _p(r"\badvis(?:e|es|ed|ing|or|ors|er|ers|ory)\b|\bmentor(?:s|ed|ing)?\b"),
             _p(r"\badvis(?:e|es|ed|ing|or|ors|er|ers|ory)\b|\bmentor(?:s|ed|ing)?\b"),
             _p(r"(?:advised|mentored) by\b")),
    Relation("reports_to", _MEMBER, "reports to", "manages",
             _p(r"\breports? (?:in)?to\b|\bmanaged by\b|\b(?:her|his|their) manager\b|"
                r"\bmanages\b(?!\s+(?:the|a|an|our|their|his|her|its)\b)"),
             _p(r"\breports? to\b|\bmanag(?:es|ed|er)\b"),
             _p(r"manages\b")),  # "Bob manages Mia": Mia reports to Bob ("managed by" says it the right way round)
    Relation("works_at", _MEMBER, "works at", "employs",
             _p(r"\bwork(?:s|ed|ing)? (?:at|for|here|there)\b|\bemploy(?:s|ed|ee|ees|er)?\b|\bjoined\b|\bhired\b|"
                r"\bstaff\b|\bon the team\b|\bteam at\b|\bleads? (?:a |the )?(?:team|engineering|sales|design|product)\b|"
                r"\b(?:CEO|CTO|CFO|COO|CMO|CPO|VP|president|head of|director|engineer|manager|designer|"
                r"lead|scientist|analyst)\b"),
             _p(r"\bwork(?:s|ed|ing)?\b|\bemploy(?:s|ed|ees)?\b|\bstaff\b|\bteam\b|\bemployees\b"),
             _p(r"employs?\b|hired\b(?!\s+by\b)")),  # "Acme employs / hired Mia"; "hired by", "employed by" are not
    Relation("attended", _MEMBER, "attended", "attended by",
             _p(r"\battend(?:ed|s|ees?|ing|ance)\b|\bpresent\b|\bparticipants?\b|\bwas at\b|\bwere at\b|"
                r"\bjoined\b|\bmet\b|\bin the room\b"),
             _p(r"\battend(?:ed|s|ees?|ing)?\b|\bwas at\b|\bwere at\b|\bpresent at\b|\bparticipat"),
             _p(r"attended by\b")),
]
BY_NAME = {r.name: r for r in RELATIONS}
# A meeting page that names a person records an attendee (GBrain) — unless the sentence
# says the person was not there.
ABSENT = _p(r"\bapolog(?:y|ies|ised|ized)\b|\babsent\b|\b(?:could ?n[o']t|did ?n[o']t|unable to) (?:attend|make it|join)\b|"
            r"\bmissed\b|\bwill get the notes\b")
MEETING_KINDS = {"meeting", "call", "event"}
PERSON_KINDS = {"person", "people"}


def relation_in(sentence: str, from_kind: str, to_kind: str, ref_at: int | None = None) -> tuple[Relation | None, bool]:
    """(the relation a sentence states between the page it is on and the page it refers
    to, whether the from-page is its subject). ``ref_at``: where the reference sits in the
    sentence, used when the page kinds do not tell who the subject is."""
    meeting = from_kind in MEETING_KINDS or to_kind in MEETING_KINDS
    # "met", "joined" mean attending only when a meeting is one end, and then they do.
    others = [r for r in RELATIONS if r.name != "attended"]
    order = [BY_NAME["attended"], *others] if meeting else others
    for rel in order:
        m = rel.said.search(sentence)
        if not m:
            continue
        if rel.name == "attended" and ABSENT.search(sentence):
            return None, True
        reverse = rel.reverse is not None and rel.reverse.match(sentence, m.start()) is not None
        return rel, _from_is_subject(rel, from_kind, to_kind, m.start(), ref_at, reverse)
    if from_kind in MEETING_KINDS and to_kind in PERSON_KINDS and not ABSENT.search(sentence):
        return BY_NAME["attended"], False
    return None, True


def _from_is_subject(rel: Relation, from_kind: str, to_kind: str, cue_at: int, ref_at: int | None,
                     reverse: bool = False) -> bool:
    if from_kind in PERSON_KINDS and to_kind not in PERSON_KINDS:
        return True  # a person works at / invests in / attends something
    if to_kind in PERSON_KINDS and from_kind not in PERSON_KINDS:
        return False
    if ref_at is None:
        return not reverse
    # "Mia reports to [Bob]": the reference after the cue is the object — unless the cue
    # says it the other way round ("Acme employs [Mia]": the reference is the subject).
    return (ref_at > cue_at) != reverse


def describe(rel: Relation, from_is_subject: bool) -> str:
    return rel.label if from_is_subject else rel.inverse


def relations_of(description: str) -> list[tuple[Relation, bool]]:
    """The relations a link's description names ("works at; invested in": one link per
    pair of pages keeps every relation stated), each with whether the link's from-note is
    its subject."""
    out = []
    for part in (description or "").lower().split(";"):
        text = part.strip()
        for rel in RELATIONS:
            if text == rel.label:
                out.append((rel, True))
            elif text == rel.inverse:
                out.append((rel, False))
    return out


_WHO = re.compile(r"^\s*(?:who(?:m|se)?|which (?:people|persons?|investors?|advisors?|advisers?|founders?|employees?)|"
                  r"name (?:the )?(?:people|persons?))\b", re.I)


def asks_who(question: str) -> bool:
    return bool(_WHO.search(question))


def asked_relation(question: str) -> Relation | None:
    """The relation a "Who …?" question asks about (the strongest one it names)."""
    for rel in RELATIONS:
        if rel.asked.search(question):
            return rel
    return None
