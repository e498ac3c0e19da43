"""The records of a chat's life as pydantic models (docs/DESIGN.md, "Session logs and
events"): a session-log event, the import-chat record, and a turn memory as the store
keeps it. Models are checked where data enters (a log read, an import file, an append,
a store write); the inner loops then use the attributes."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, field_validator

SESSION_ID = re.compile(r"^[\w.\-]{1,120}$")
# The kind of a commit mark: a line `memlink commit` appends with the notes it extracted,
# in the same unit of work, naming the last event they cover (``upto``).
COMMIT = "commit"
# The kind of an answer made without a model from the memory context: it ends its turn and
# shows when the session is reopened, but it only repeats the vault, so extraction and
# recall leave its text out (``Turn.answer``, ``Turn.transcript``).
MEMORY_ANSWER = "memory"
# The kind of a mark an export's import appends when a message it imported before is no
# longer on the conversation's current branch (an answer regenerated, a prompt edited
# since): its content is that message's id, which turns leave out from then on.
REPLACED = "replaced"


class SessionEvent(BaseModel):
    """One line of `sessions/<id>.jsonl`. The five keys are required; ``kind`` marks what
    is not a plain message (reasoning, tool, draft, recall, commit), ``caption`` describes an
    image the message carries, ``speaker`` names who spoke in a group chat, ``title`` is
    the title of an imported conversation (on its first event). Any other key is kept as
    it was written."""

    model_config = ConfigDict(extra="allow")

    session: str
    id: StrictStr | StrictInt  # a source message id: kept as the importer gave it
    role: str
    content: str
    ts: str | int | float | None
    kind: str | None = None
    caption: str | None = None
    speaker: str | None = None
    title: str | None = None

    @property
    def key(self) -> str:
        """The id as text: ids 7 and "7" name the same message."""
        return str(self.id)

    def to_record(self) -> dict[str, Any]:
        """The event as a log line holds it: the optional keys only when they were given."""
        # What model_dump(exclude_unset=True) gives, without its cost per event (an import
        # appends tens of thousands): the fields given, then the extra keys, as they are.
        given = self.model_fields_set
        out = {k: v for k, v in self.__dict__.items() if k in given}
        out.update(self.__pydantic_extra__ or {})
        return out


IMPORT_ROLES = ("user", "assistant", "system", "tool", "recall")


class ImportRecord(SessionEvent):
    """A line of an import-chat file: a session event whose session id can name a log
    file (letters, digits, '.', '-' and '_'), whose role is one the turn projection knows
    (``recall``: memlink's own recall snapshots, so its logs import again) and whose
    content is text (strict: a number or a list is refused, not turned into text)."""

    content: StrictStr

    @field_validator("session")
    @classmethod
    def _file_name(cls, value: str) -> str:
        if not SESSION_ID.match(value):
            raise ValueError(f"bad session id {value!r}: use letters, digits, '.', '-' and '_'")
        return value

    @field_validator("role")
    @classmethod
    def _known_role(cls, value: str) -> str:
        if value not in IMPORT_ROLES:
            raise ValueError(f"unknown role {value!r}: use one of {', '.join(IMPORT_ROLES)}")
        return value


class TripleRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    subject: str
    subject_id: str
    predicate: str
    object: str
    object_id: str


class TurnMemoryRecord(BaseModel):
    """A turn memory as stored (docs/DESIGN.md, "Turn memory"): the turn's own words, its
    extraction, and where it sits in its session."""

    model_config = ConfigDict(extra="forbid")

    id: str
    session: str
    ts: str
    summary: str
    outcome: str
    sources: list[str] = Field(min_length=1)
    question: str
    answer: str
    triples: list[TripleRecord]
    pos: int
    speakers: list[str]
