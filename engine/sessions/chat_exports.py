"""Real chat exports as import records (docs/DESIGN.md, "Session logs and events"):
ChatGPT's `conversations.json` (a message tree per conversation; only the current branch
is taken) and Claude's `conversations.json` (a list of messages per conversation). Each
conversation becomes one session with its original timestamps and message ids. What is
not chat text is left out and counted by kind (``Conversation.left_out``): nothing said
is dropped without a count, and an unknown role or a missing conversation id never stops
the rest of the export. The export's shape is a pydantic model (extra keys are allowed, and not kept: real exports
carry many); the array is read one conversation at a time, so a large export is held as
its text and its records, never as a whole tree of objects. Every conversation is
checked, and a problem names it by index, id and title, before anything is appended."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, StrictStr, ValidationError

from ..errors import MemlinkError
from ..llm.fence import one_line
from ..model.templates import slugify
from .events import ImportRecord

FORMATS = ("jsonl", "chatgpt", "claude")
EXPORTS = {"chatgpt": "ChatGPT", "claude": "Claude"}
SLUG_LEN = 40
HASH_LEN = 10


class ExportError(MemlinkError):
    pass


class _Part(BaseModel):
    model_config = ConfigDict(extra="ignore")


# -- ChatGPT ------------------------------------------------------------------------------
class GPTAuthor(_Part):
    role: StrictStr  # user, assistant, system, tool; any other is left out and counted


class GPTContent(_Part):
    content_type: str
    parts: list[StrictStr | dict[str, Any] | None] | None = None  # text, and image pointers (dicts)


class GPTMessage(_Part):
    id: StrictStr
    author: GPTAuthor
    create_time: float | None = None
    content: GPTContent
    metadata: dict[str, Any] | None = None
    recipient: str | None = None  # "all" for chat; a tool's name for a call to it


class GPTNode(_Part):
    message: GPTMessage | None = None
    parent: StrictStr | None = None


class GPTConversation(_Part):
    id: StrictStr | None = None
    conversation_id: StrictStr | None = None
    title: str | None = None
    create_time: float | None = None
    update_time: float | None = None
    mapping: dict[str, GPTNode]
    current_node: StrictStr


# -- Claude -------------------------------------------------------------------------------
def _iso(value: str | None) -> str | None:
    if value is not None:
        try:
            dt.datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"not an ISO timestamp: {value!r}") from None
    return value


IsoStamp = Annotated[str, AfterValidator(_iso)]


class ClaudeBlock(_Part):
    type: str
    text: str | None = None


class ClaudeAttachment(_Part):
    file_name: str | None = None
    extracted_content: str | None = None  # the text of the file the user uploaded


class ClaudeMessage(_Part):
    uuid: StrictStr
    text: str | None = None
    content: list[ClaudeBlock] | None = None
    sender: StrictStr  # human or assistant; any other is left out and counted
    created_at: IsoStamp | None = None
    attachments: list[ClaudeAttachment] | None = None
    files: list[dict[str, Any]] | None = None  # uploads the export holds no text of (images)


class ClaudeConversation(_Part):
    uuid: StrictStr | None = None
    name: str | None = None
    created_at: IsoStamp | None = None
    chat_messages: list[ClaudeMessage]


@dataclass
class Conversation:
    """One conversation as import records, and what was left out of it."""

    session: str
    label: str  # how an error names it: "conversation [2] (id '…', "title")"
    records: list[ImportRecord] = field(default_factory=list)
    left_out: Counter[str] = field(default_factory=Counter)  # what was not imported, by kind: "system messages": 2
    unnamed: bool = False  # no id in the export: its session is named by its title and start time
    off_branch: list[str] = field(default_factory=list)  # ids of its messages not on the current branch


@dataclass
class Export:
    format: str
    conversations: list[Conversation] = field(default_factory=list)


def sniff(text: str) -> str:
    """The format a file's shape says: "chatgpt" or "claude" for a JSON array whose
    conversations carry `mapping` or `chat_messages` (whichever key comes first), else
    "jsonl" (one record per line, today's format)."""
    start = _skip(text, 0)
    if not text.startswith("[", start):
        return "jsonl"
    # A key, not text inside a message: a quote in message text is escaped (\").
    found = re.search(r'(?<!\\)"(mapping|chat_messages)"\s*:', text)
    if found is None:
        empty = text.startswith("]", _skip(text, start + 1)) and _skip(text, _skip(text, start + 1) + 1) == len(text)
        return "chatgpt" if empty else "unknown"
    return "chatgpt" if found.group(1) == "mapping" else "claude"


def read_export(text: str, fmt: str, source: str, known: Iterable[str] = ()) -> Export:
    """The export's conversations as import records, every one checked (``source`` names
    the file in errors; ``known`` are the vault's session ids, so a conversation renamed
    since an earlier import keeps its session). The array is read one conversation at a
    time: only the text and the records are held, never the whole export as objects."""
    model: type[GPTConversation | ClaudeConversation] = GPTConversation if fmt == "chatgpt" else ClaudeConversation
    by_hash = {s.rsplit("-", 1)[-1]: s for s in known if re.search(rf"-[0-9a-f]{{{HASH_LEN}}}$", s)}
    out = Export(fmt)
    for n, raw in _items(text, source, EXPORTS[fmt]):
        label = _label(n, *_names(raw))
        try:
            conversation = model.model_validate(raw)
            converted = Conversation("", label)
            converted.session = _session_id(fmt, conversation, by_hash, converted)
            if isinstance(conversation, GPTConversation):
                _chatgpt(conversation, converted)
            else:
                _claude(conversation, converted)
        except (ValueError, ValidationError) as exc:
            why = _why(exc) if isinstance(exc, ValidationError) else str(exc)
            raise ExportError(f"{source}: {label}: {why}{_hint(text, fmt)}; nothing was imported") from None
        out.conversations.append(converted)
    return out


_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")


def _skip(text: str, i: int) -> int:
    """The offset of the first character past JSON whitespace from ``i`` (no copy of the text)."""
    found = _SPACE.match(text, i)
    return found.end() if found else i


def _items(text: str, source: str, name: str) -> Iterator[tuple[int, Any]]:
    """The items of the top-level JSON array, one at a time (``raw_decode`` from an offset
    into the text), with their index."""
    def skip(i: int) -> int:
        return _skip(text, i)

    def broken(i: int, why: str) -> ExportError:
        line = text.count("\n", 0, i) + 1
        return ExportError(f"{source}: not valid JSON (line {line} column {i - text.rfind(chr(10), 0, i)}: {why}); "
                           "nothing was imported")

    i = skip(0)
    if not text.startswith("[", i):
        raise ExportError(f"{source}: a {name} export is a JSON array of conversations, and this file does not start "
                          "with '['; nothing was imported")
    i = skip(i + 1)
    n = 0
    if text.startswith("]", i):
        i = skip(i + 1)
    else:
        while True:
            try:
                item, i = _DECODER.raw_decode(text, i)
            except json.JSONDecodeError as exc:
                raise broken(exc.pos, exc.msg) from None
            yield n, item
            n += 1
            i = skip(i)
            if text.startswith(",", i):
                i = skip(i + 1)
            elif text.startswith("]", i):
                i = skip(i + 1)
                break
            else:
                raise broken(i, "expected ',' or ']' after a conversation")
    if i != len(text):
        raise broken(i, "more data after the array")


# -- ChatGPT: the current branch ------------------------------------------------------------
CHAT_TEXT = ("text", "multimodal_text")
OFF_BRANCH = "messages on other branches (edited prompts, regenerated answers)"
NO_TEXT = "messages without text"


def _chatgpt(conv: GPTConversation, out: Conversation) -> None:
    """The current branch, root first: from `current_node` up through `parent`. Only user
    and assistant chat text is kept (a voice message's transcription is its text); system
    prompts, tool traffic (a message addressed to a tool, or from one), hidden context
    (custom instructions, memory), code and its output, browsing displays, reasoning,
    messages of an unknown role and image-only messages are left out and counted."""
    mapping = conv.mapping
    if conv.current_node not in mapping:
        raise ValueError(f"current_node {conv.current_node!r} is not in the mapping")
    branch: list[GPTNode] = []
    seen: set[str] = set()
    child: str = ""
    node_id: str | None = conv.current_node
    while node_id is not None:
        if node_id in seen:
            raise ValueError(f"the parents in the mapping loop at node {node_id!r}")
        node = mapping.get(node_id)
        if node is None:
            raise ValueError(f"node {child!r} has parent {node_id!r}, which is not in the mapping")
        seen.add(node_id)
        branch.append(node)
        child, node_id = node_id, node.parent
    branch.reverse()
    out.off_branch = [node.message.id for k, node in mapping.items() if k not in seen and node.message is not None]
    if out.off_branch:
        out.left_out[OFF_BRANCH] += len(out.off_branch)
    last = _epoch(conv.create_time) or _epoch(conv.update_time)
    for node in branch:
        message = node.message
        if message is None:
            continue
        text = _gpt_text(message, out.left_out)
        if text is None:
            continue
        last = _epoch(message.create_time) or last  # no time of its own: the one before it (order is kept)
        _add(out, message.id, message.author.role, text, last, conv.title)


def _gpt_text(message: GPTMessage, left_out: Counter[str]) -> str | None:
    """The message's chat text, or None with the reason counted in ``left_out``. Every part
    that carries text is kept (typed text, a voice message's `audio_transcription`); a
    part without any (an image, the audio itself) is counted by its kind."""
    meta = message.metadata or {}
    role = message.author.role
    kind = message.content.content_type
    if role not in ("user", "assistant", "system", "tool"):
        why = f"messages with an unknown role {role!r}"
    elif meta.get("is_visually_hidden_from_conversation"):
        why = "hidden context (custom instructions, memory)"
    elif role == "system":
        why = "system messages"
    elif role == "tool" or message.recipient not in (None, "all"):
        why = "tool calls and results"
    elif kind not in CHAT_TEXT:
        why = f"{kind!r} messages (not chat text)"
    else:
        texts = []
        for part in message.content.parts or []:
            text = part if isinstance(part, str) else part.get("text") if isinstance(part, dict) else None
            if isinstance(text, str):
                texts.append(text)
            elif isinstance(part, dict):
                left_out[f"{part.get('content_type') or 'unnamed'!r} parts without text"] += 1
        text = "\n".join(t for t in texts if t.strip())
        if text.strip():
            return text
        why = NO_TEXT
    left_out[why] += 1
    return None


def _epoch(value: float | None) -> str | None:
    if value is None:
        return None
    try:
        return dt.datetime.fromtimestamp(value, dt.UTC).isoformat()
    except (OverflowError, OSError, ValueError):
        raise ValueError(f"create_time {value!r} is not a time") from None


# -- Claude ---------------------------------------------------------------------------------
def _claude(conv: ClaudeConversation, out: Conversation) -> None:
    """The messages in order; `human` is the user. A message's text blocks, else its
    `text`, then the text of each file attached to it (labelled with its name). A message
    with none, of an unknown sender, an attachment without text and an upload the export
    holds no text of (an image) are left out and counted."""
    last = conv.created_at
    for message in conv.chat_messages:
        if message.sender not in ("human", "assistant"):
            out.left_out[f"messages from an unknown sender {message.sender!r}"] += 1
            continue
        blocks = [b.text for b in message.content or [] if b.type == "text" and b.text and b.text.strip()]
        parts = ["\n".join(blocks) if blocks else (message.text or "")]
        read: set[object] = set()
        for attachment in message.attachments or []:
            if attachment.extracted_content and attachment.extracted_content.strip():
                parts.append(_attachment(attachment.file_name or "unnamed file", attachment.extracted_content))
                read.add(attachment.file_name)
            else:
                out.left_out["attachments without text"] += 1
        unread = [f for f in message.files or [] if f.get("file_name") not in read]  # (a file can be in both lists)
        if unread:
            out.left_out["uploaded files without text (images)"] += len(unread)
        text = "\n\n".join(p for p in parts if p.strip())
        if not text:
            out.left_out[NO_TEXT] += 1
            continue
        last = message.created_at or last
        _add(out, message.uuid, "user" if message.sender == "human" else "assistant", text, last, conv.name)


def _attachment(name: str, content: str) -> str:
    """An attached file's text as part of the turn: labelled with its name, every line
    quoted ("> "), so the file's own text can neither end the quote nor pass for code,
    which extraction leaves out (the user's file is what they said). The name is kept to
    its one line, so it cannot end the label and write lines of its own."""
    lines = content.strip("\n").split("\n")
    return f"Attachment: {one_line(name)}\n" + "\n".join(f"> {line}".rstrip() for line in lines)


# -- shared ---------------------------------------------------------------------------------
def _add(out: Conversation, mid: str, role: str, text: str, ts: str | None, title: str | None) -> None:
    """One message as an import record (checked as every import line is); the
    conversation's title rides on its first event (a log has no header line)."""
    extra = {"title": title.strip()} if not out.records and title and title.strip() else {}
    out.records.append(ImportRecord(session=out.session, id=mid, role=role, content=text, ts=ts, **extra))


def _conversation_id(conv: Any) -> str:
    if isinstance(conv, GPTConversation):
        return conv.conversation_id or conv.id or ""
    return conv.uuid or ""


def _title(conv: Any) -> str:
    return (conv.title if isinstance(conv, GPTConversation) else conv.name) or ""


def _label(n: int, cid: object, title: object) -> str:
    named = [f"id {cid!r}"] if cid else []
    if title:
        named.append(json.dumps(str(title), ensure_ascii=False))
    return f"conversation [{n}]" + (f" ({', '.join(named)})" if named else "")


def _session_id(fmt: str, conv: Any, by_hash: dict[str, str], out: Conversation) -> str:
    """`<date>-<slug of the title>-<hash>`: the date it was started (UTC), a readable
    slug, and a hash of the export's conversation id, which is what makes it stable: a
    session already imported under that hash keeps its id when the title was changed. A
    conversation without an id is named by its title and start time (``unnamed``), which
    are as stable as the export."""
    cid = _conversation_id(conv)
    if not cid:
        out.unnamed = True
        cid = f"no id:{_title(conv)}:{conv.create_time if isinstance(conv, GPTConversation) else conv.created_at}"
    digest = hashlib.sha256(f"{fmt}:{cid}".encode()).hexdigest()[:HASH_LEN]
    if digest in by_hash:
        return by_hash[digest]
    if isinstance(conv, GPTConversation):
        started = _epoch(conv.create_time) or _epoch(conv.update_time)
    else:
        started = conv.created_at
    day = dt.datetime.fromisoformat(started).astimezone(dt.UTC).date().isoformat() if started else "undated"
    return f"{day}-{slugify(_title(conv), SLUG_LEN)}-{digest}"


def _names(raw: Any) -> tuple[str, str]:
    """A raw conversation's id and title, to name it in an error (before it is checked)."""
    if not isinstance(raw, dict):
        return "", ""
    cid = raw.get("conversation_id") or raw.get("id") or raw.get("uuid") or ""
    title = raw.get("title") or raw.get("name") or ""
    return (str(cid) if isinstance(cid, str | int) else ""), (title if isinstance(title, str) else "")


def _why(exc: ValidationError) -> str:
    """The first problem inside a conversation: where in it, and what."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(the conversation)"
    why = str(first["ctx"]["error"]) if first["type"] == "value_error" else first["msg"]
    return f"{where}: {why}"


def _hint(text: str, fmt: str) -> str:
    """When a file is refused as one format and its shape says another, say so."""
    shape = sniff(text)
    return f" (the file looks like a {EXPORTS[shape]} export: --format {shape})" if shape in EXPORTS and shape != fmt else ""
