"""Relations the text states between two pages (GBrain's zero-LLM link-type
cascade): founded → invested in → advises → reports to → works at → attended, strongest
first (attended first when one end is a meeting), declared as data in
``engine/link_types.yaml`` (``relations:``, with their cues and what each implies: a
founder works at what they founded), each mapped onto a link type by role:
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
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .linktypes import LinkType, builtin_data, builtin_table


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


class RelationSpec(BaseModel):
    """One row of ``relations:`` in engine/link_types.yaml."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-z][a-z_]*$")
    # A role, not a type name: a relation means membership or plain association whatever
    # the types are called, and the built-ins hold every role.
    role: Literal["membership", "default"]
    label: str = Field(min_length=1)
    inverse: str = Field(min_length=1)
    said: str
    asked: str
    reverse: str | None = None
    implies: list[str] = Field(default_factory=list)

    @field_validator("said", "asked", "reverse")
    @classmethod
    def _compiles(cls, cue: str | None) -> str | None:
        if cue is not None:
            re.compile(cue)
        return cue


def load_relations(rows: object, where: str) -> list[Relation]:
    """The relation table, in order; every relation implied is one of it."""
    try:
        specs = [RelationSpec.model_validate(row) for row in rows] if isinstance(rows, list) else None
    except (ValidationError, re.error) as exc:
        raise ValueError(f"{where}: relations: {exc}") from None
    if specs is None:
        raise ValueError(f"{where}: relations: must be a list")
    names = {s.name for s in specs}
    for s in specs:
        if unknown := [n for n in s.implies if n not in names or n == s.name]:
            raise ValueError(f"{where}: relation {s.name!r} implies {unknown[0]!r}, which is not another relation")
    table = builtin_table()
    return [Relation(s.name, table.role(s.role), s.label, s.inverse, re.compile(s.said, re.I), re.compile(s.asked, re.I),
                     re.compile(s.reverse, re.I) if s.reverse else None, tuple(s.implies)) for s in specs]


def _p(text: str) -> re.Pattern:
    return re.compile(text, re.I)


RELATIONS: list[Relation] = load_relations(builtin_data()["relations"], "engine/link_types.yaml")
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
