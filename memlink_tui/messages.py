"""The messages the app and its panes exchange. Panes post the upward ones (they bubble
from the screen to the app, which owns navigation, the status line and the background
queue); the app posts the downward ones to a pane (``bubble = False``: they stop there).
A pane never reads or sets another pane's attributes, nor the app's."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.message import Message

from widgets.status_bar import Status

if TYPE_CHECKING:
    from engine.llm import Health, Provider


# -- pane → app -------------------------------------------------------------------------------
@dataclass
class Navigate(Message):
    """Show ``pane`` (at note ``uri`` when given); the app records the step in its history."""

    pane: str
    uri: str | None = None


@dataclass
class NotesShown(Message):
    """The note tree is drawn: background loading (provider check, index) may start."""


@dataclass
class CatalogSynced(Message):
    """The catalog was re-read from the files: the search index should catch up."""


@dataclass
class NoteChanged(Message):
    """A pane changed a note (an edit, an import): the browser re-reads the vault."""

    uri: str | None = None


@dataclass
class NoteFocused(Message):
    """A pane now centres on ``uri`` (the graph): the graph key starts there next time."""

    uri: str


@dataclass
class ExtractionStarted(Message):
    """Chat started extracting a turn's memory in ``thread``: the queue counts it while alive."""

    thread: threading.Thread


@dataclass
class Linted(Message):
    """A lint run finished: its error and contradiction counts go on the pane bar."""

    errors: int
    contradictions: int


# -- app → pane -------------------------------------------------------------------------------
@dataclass
class ProviderChanged(Message):
    """The app checked (or switched) the LLM provider. ``provider`` is None when it is not usable."""

    bubble = False
    provider: Provider | None
    health: Health  # state, provider, reason, fix (line() and summary for people)


@dataclass
class StatusChanged(Message):
    """The status line's fields changed (provider, index, queue)."""

    bubble = False
    status: Status


@dataclass
class VaultChanged(Message):
    """Notes changed under the pane (an edit, an import), or chat session logs under the
    chat pane: re-read them."""

    bubble = False
    uri: str | None = None
