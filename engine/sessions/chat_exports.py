"""Real chat exports as import records (docs/DESIGN.md, "Session logs and events"):
ChatGPT's `conversations.json` (a message tree per conversation; only the current branch
is taken) and Claude's `conversations.json` (a list of messages per conversation), each
conversation one session with its original timestamps and message ids; and the chats of
messaging apps, WhatsApp's "Export chat" text and Telegram Desktop's `result.json`, each
chat one session a calendar day, every message carrying its sender (``_people``). What is
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
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from ..errors import MemlinkError
from ..llm.fence import one_line
from ..model.templates import slugify
from ..model.text import first_few
from .events import ImportRecord

FORMATS = ("jsonl", "chatgpt", "claude", "whatsapp", "telegram")
EXPORTS = {"chatgpt": "ChatGPT", "claude": "Claude", "whatsapp": "WhatsApp", "telegram": "Telegram"}
MESSENGERS = ("whatsapp", "telegram")  # chats between people: one session a day, a speaker on every message
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
    edited: set[str] = field(default_factory=set)  # ids of its messages the export marks as edited (a messaging app)
    beside: list[str] = field(default_factory=list)  # sessions in the vault that may hold its messages already


@dataclass
class Export:
    format: str
    conversations: list[Conversation] = field(default_factory=list)
    me: list[str] = field(default_factory=list)  # a messaging chat: the senders imported as the user
    assumed: list[str] = field(default_factory=list)  # what the reader assumed, for the report to say
    # A WhatsApp chat whose dates could be read either way: whether they were read month
    # first, and the line whose date settles that ("" when nothing in the file does).
    dates: tuple[bool, str] | None = None
    earlier_key: str | None = None  # (_Chat.earlier_key)
    owned: bool = False  # the user is the account's owner the export names (a whole-account Telegram export)


def sniff(text: str) -> str:
    """The format a file's shape says: "chatgpt" or "claude" for a JSON array whose
    conversations carry `mapping` or `chat_messages` (whichever key comes first);
    "telegram" for one JSON document (not a record a line) with `messages` or `chats`
    ("discord" when it has a `guild` and a `channel`: a Discord export, not read);
    "whatsapp" for text that begins with a WhatsApp message's start (a date and a time);
    else "jsonl" (one record per line)."""
    start = _skip(text, 0)
    if text.startswith("{", start):
        end = text.find("\n", start)
        first = text[start:] if end < 0 else text[start:end]
        try:
            record = json.loads(first)
        except ValueError:
            record = None  # (an indented document's first line is not a whole value)
        if isinstance(record, dict) and {"guild", "channel"} <= record.keys() or record is None and re.search(
                r'^\s{0,2}"guild"\s*:\s*\{', text, re.M) and re.search(r'^\s{0,2}"channel"\s*:', text, re.M):
            return "discord"  # (DiscordChatExporter's JSON: its `messages` are not Telegram's)
        if isinstance(record, dict) and "session" not in record and ("messages" in record or "chats" in record):
            return "telegram"
        if record is None and re.search(r'^\s{0,2}"(messages|chats)"\s*:\s*[\[{]', text, re.M):
            return "telegram"
        return "jsonl"
    first = _first_line(text, start)
    if _header(first) or re.match(rf"[{_MARKS}]*\[[{_MARKS}]*\d", first):  # (iOS's begins "[" and a date: a shape
        return "whatsapp"                                                   # not read is named by the WhatsApp reader)
    if not text.startswith("[", start):
        return "jsonl"
    # A key, not text inside a message: a quote in message text is escaped (\").
    found = re.search(r'(?<!\\)"(mapping|chat_messages)"\s*:', text)
    if found is None:
        empty = text.startswith("]", _skip(text, start + 1)) and _skip(text, _skip(text, start + 1) + 1) == len(text)
        return "chatgpt" if empty else "unknown"
    return "chatgpt" if found.group(1) == "mapping" else "claude"


def _first_line(text: str, i: int) -> str:
    """The first line from offset ``i`` with more than spaces and marks (no copy of the rest)."""
    while i < len(text):
        end = text.find("\n", i)
        end = len(text) if end < 0 else end
        if text[i:end].strip(_MARKS + " \t\r"):
            return text[i:end]
        i = end + 1
    return ""


def read_export(text: str, fmt: str, source: str, known: Iterable[str] = (), me: str | None = None,
                me_rule: str = "--me", months_first: bool | None = None, key: str | None = None,
                dates_rule: str = "as when this chat was imported before") -> Export:
    """The export's conversations as import records, every one checked (``source`` names
    the file in errors; ``known`` are the vault's session ids, so a conversation renamed
    since an earlier import keeps its session; ``me``: a messaging chat's sender whose
    messages are the user's; ``me_rule``: how ``me`` was chosen, for the report;
    ``months_first``: read a WhatsApp chat's dates so, whatever the file says (``dates_rule``
    says why, for the report); ``key``: what
    names a WhatsApp chat's sessions, instead of its name). The
    array is read one conversation at a time: only the text and the records are held,
    never the whole export as objects."""
    by_hash = {s.rsplit("-", 1)[-1]: s for s in known if re.search(rf"-[0-9a-f]{{{HASH_LEN}}}$", s)}
    if fmt in MESSENGERS:
        chats = _whatsapp(text, source, months_first, dates_rule) if fmt == "whatsapp" else _telegram(text, source)
        if key is not None:
            chats[0].key = key
        out = _people(fmt, chats, source, by_hash, me, me_rule)
        if fmt == "whatsapp":
            out.dates, out.earlier_key = chats[0].dates, chats[0].earlier_key
        return out
    model: type[GPTConversation | ClaudeConversation] = GPTConversation if fmt == "chatgpt" else ClaudeConversation
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


# -- messaging apps: WhatsApp and Telegram ---------------------------------------------------
SYSTEM = "system messages (security notices, joins, group changes, calls)"
MEDIA = "media (photos, videos, voice messages, stickers, files; a caption is kept as the message)"
DELETED = "deleted messages"


@dataclass
class _Said:
    mid: str | int
    sender: str  # the name shown
    sender_id: str  # what names the sender for --me besides the name (Telegram's `from_id`)
    text: str
    ts: str  # ISO, the local time the export shows
    edited: bool = False  # the export marks it as edited since it was sent


@dataclass
class _Chat:
    """A messaging app's chat as read, before its days and its user are known."""

    name: str
    key: str  # what names it in every export of it: Telegram's chat id, WhatsApp's chat name
    label: str  # how an error names it
    said: list[_Said] = field(default_factory=list)
    left_out: Counter[str] = field(default_factory=Counter)
    owner: str | None = None  # the exporting account's sender id (Telegram's whole-account export)
    assumed: list[str] = field(default_factory=list)  # what reading it assumed (WhatsApp's date order)
    dates: tuple[bool, str] | None = None  # (Export.dates)
    earlier_key: str | None = None  # another key the vault may hold this chat's sessions under (an iPhone export's "_chat")


def _people(fmt: str, chats: list[_Chat], source: str, by_hash: dict[str, str], me: str | None,
            me_rule: str = "--me") -> Export:
    """A chat between people as import records: one session a calendar day (as the time
    the export shows), `<day>-<slug of the chat's name>-<hash of the chat and the day>`;
    every message carries its ``speaker``; the user's are those of ``me`` (a name, or a
    Telegram `from_id`), else of the account's owner (a whole-account Telegram export),
    else, of a chat between two named after one of them ("WhatsApp Chat with Ana"), of the
    other, else of the chat's first sender; every other sender answers (assistant)."""
    out = Export(fmt)
    senders = list(dict.fromkeys(s.sender for chat in chats for s in chat.said))
    if me is not None:
        me = _sender_named(me, chats, senders, source)
    rule = me_rule
    for chat in chats:
        out.assumed += chat.assumed
        user = me if me is not None else chat.owner
        named = {s.sender_id for s in chat.said if s.sender.casefold() == chat.name.casefold()}
        others = list(dict.fromkeys(s.sender_id for s in chat.said if s.sender_id not in named))
        if me is None and chat.owner is not None:
            rule, out.owned = "the account's owner", True
        elif user is None and len(named) == 1 and len(others) == 1:  # ("WhatsApp Chat with Ana": the export of Ana's friend)
            user, rule = others[0], f"the chat is named after {chat.name!r}, the other person"
        elif user is None and chat.said:
            user, rule = chat.said[0].sender_id, "the first sender" + (" of each chat" if len(chats) > 1 else "")
        days: dict[str, Conversation] = {}
        for said in chat.said:
            day = dt.datetime.fromisoformat(said.ts).date().isoformat()
            conversation = days.get(day)
            if conversation is None:
                digest = _digest(fmt, chat.key, said.ts)
                session = by_hash.get(digest) or f"{day}-{slugify(chat.name, SLUG_LEN)}-{digest}"
                conversation = days[day] = Conversation(session, f"{chat.label} on {day}")
                if fmt == "telegram":  # (its ids name a chat's messages whatever day the export's clock puts them on)
                    near = (dt.datetime.fromisoformat(said.ts) + dt.timedelta(days=d) for d in (-1, 1))
                    conversation.beside = [by_hash[h] for h in (_digest(fmt, chat.key, t.isoformat()) for t in near)
                                           if h in by_hash]
                else:  # (an id made of a message's time and sender: the chat's export saved under another name)
                    conversation.beside = [s for s in by_hash.values() if s.startswith(f"{day}-") and s != session]
            mine = user in (said.sender, said.sender_id)
            if mine and said.sender not in out.me:
                out.me.append(said.sender)
            if said.edited:
                conversation.edited.add(str(said.mid))
            try:
                _add(conversation, said.mid, "user" if mine else "assistant", said.text, said.ts, chat.name,
                     speaker=said.sender)
            except ValidationError as exc:
                raise ExportError(f"{source}: {conversation.label}: message {said.mid!r}: {_why(exc)}; "
                                  "nothing was imported") from None
        carrier = next(iter(days.values()), None) or Conversation("", chat.label)
        carrier.left_out.update(chat.left_out)
        out.conversations += days.values() if days else [carrier]
    if out.me or senders:
        again = "" if rule == me_rule else f"; to be another sender ({some(senders)}), import with --me NAME"
        out.assumed.append(f"you (user): {some(out.me) or 'none of the senders'} ({rule}); the others answer "
                           f"(assistant){again}")
    return out


def _digest(fmt: str, key: str, ts: str) -> str:
    """What names a chat's session of the day ``ts`` falls on."""
    day = dt.datetime.fromisoformat(ts).date().isoformat()
    return hashlib.sha256(f"{fmt}:{key}:{day}".encode()).hexdigest()[:HASH_LEN]


def _sender_named(me: str, chats: list[_Chat], senders: list[str], source: str) -> str:
    """The sender ``me`` names: a sender's name or id as written, else the one sender whose
    name or id it is without regard to case and surrounding spaces ("ana" for "Ana"); a
    name that fits none, or several, is refused, naming the senders."""
    ids = {s.sender: s.sender_id for chat in chats for s in chat.said}
    if any(me in (name, sid) for name, sid in ids.items()):
        return me
    wanted = " ".join(me.split()).casefold()
    fits = [name for name, sid in ids.items() if wanted in (" ".join(name.split()).casefold(), sid.casefold())]
    if len(fits) == 1:
        return ids[fits[0]]
    if fits:
        raise ExportError(f"{source}: --me {me!r} fits more than one sender ({some(fits)}); name one as it is "
                          "written; nothing was imported")
    raise ExportError(f"{source}: --me {me!r} sent no message in this export (its senders: {some(senders)}); "
                      "nothing was imported")


def some(names: list[str]) -> str:
    """Names as a report quotes them: the first five, and how many more."""
    return first_few([repr(n) for n in names], 5)


# WhatsApp's "Export chat" text: a message starts a line with its date, time and sender,
# Android `12/31/23, 9:41 PM - Alice: text` (or `31.12.23, 21:41 - …`), iOS
# `[31/12/2023, 21:41:05] Alice: text`; the lines after it, up to the next start, are its
# own. iOS marks what no one typed (a notice, an omitted photo) with U+200E before it.
_MARKS = "\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\ufeff"
_WA_STAMP = r"(\d{1,4})[./-](\d{1,2})[./-](\d{1,4})\.?,?\s(\d{1,2})[:.](\d{2})(?:[:.](\d{2}))?(?:\s?([AaPp])\.?\s?[Mm]\.?)?"
_WA_ANDROID = re.compile(rf"{_WA_STAMP}\s[-–]\s(.*)", re.S)
_WA_IOS = re.compile(rf"\[{_WA_STAMP}\]\s(.*)", re.S)
# What WhatsApp writes in place of a message, in the exporting phone's language (the
# export's language is not said anywhere, so every language's markers are tried): media
# left out of the export (Android `<Media omitted>`, a file's name and "(file attached)";
# iOS "image omitted"), a deleted message, and the mark an edited message ends with.
_WA_MARKERS: dict[str, dict[str, tuple[str, ...]]] = {
    "media": {  # a whole message, Android's form
        "en": ("<Media omitted>",), "de": ("<Medien ausgeschlossen>", "<Medien weggelassen>"),
        "es": ("<Multimedia omitido>", "<Archivo multimedia omitido>"), "fr": ("<Médias omis>", "<Fichier omis>"),
        "pt": ("<Mídia oculta>", "<Arquivo de mídia oculto>", "<Multimédia omitido>"), "it": ("<Media omessi>",),
        "nl": ("<Media weggelaten>",), "tr": ("<Medya dahil edilmedi>",), "id": ("<Media tidak disertakan>",),
        "ru": ("<Без медиафайлов>",),
    },
    "attached": {  # after a file's name ("IMG-20240101-WA0001.jpg (file attached)")
        "en": ("file attached",), "de": ("Datei angehängt",), "es": ("archivo adjunto",), "fr": ("fichier joint",),
        "pt": ("arquivo anexado", "ficheiro anexado"), "it": ("file allegato",), "nl": ("bestand bijgevoegd",),
        "tr": ("dosya ekli",), "id": ("file terlampir",), "ru": ("файл добавлен",),
    },
    "omitted": {  # iOS: "<kind> omitted" ("image omitted", "Bild weggelassen", "imagen omitida")
        "en": ("omitted",), "de": ("weggelassen", "ausgelassen"), "es": ("omitido", "omitida"),
        "fr": ("omis", "omise", "absent", "absente", "retiré"), "pt": ("ocultado", "ocultada", "omitido", "omitida"),
        "it": ("omesso", "omessa"), "nl": ("weggelaten",), "tr": ("dahil edilmedi",), "id": ("tidak disertakan",),
    },
    "deleted": {
        "en": ("This message was deleted", "You deleted this message"),
        "de": ("Diese Nachricht wurde gelöscht", "Du hast diese Nachricht gelöscht"),
        "es": ("Se eliminó este mensaje", "Eliminaste este mensaje", "Este mensaje fue eliminado"),
        "fr": ("Ce message a été supprimé", "Vous avez supprimé ce message"),
        "pt": ("Esta mensagem foi apagada", "Você apagou esta mensagem", "Mensagem apagada",
               "Apagou esta mensagem"),
        "it": ("Questo messaggio è stato eliminato", "Hai eliminato questo messaggio"),
        "nl": ("Dit bericht is verwijderd", "Je hebt dit bericht verwijderd"),
        "tr": ("Bu mesaj silindi", "Bu mesajı sildiniz"), "id": ("Pesan ini dihapus", "Anda menghapus pesan ini"),
        "ru": ("Данное сообщение удалено", "Вы удалили данное сообщение"),
    },
    "edited": {
        "en": ("This message was edited",), "de": ("Diese Nachricht wurde bearbeitet",),
        "es": ("Se editó este mensaje",), "fr": ("Ce message a été modifié",),
        "pt": ("Mensagem editada", "Esta mensagem foi editada"), "it": ("Questo messaggio è stato modificato",),
        "nl": ("Dit bericht is bewerkt",), "tr": ("Bu mesaj düzenlendi",), "id": ("Pesan ini telah diedit",),
    },
}


def _any(kind: str) -> str:
    return "|".join(re.escape(m) for ms in _WA_MARKERS[kind].values() for m in ms)


_WA_MEDIA = re.compile(rf"{_any('media')}|<[^<>]*\bomitted>|<attached: [^<>]*>|.+ \((?:{_any('attached')})\)|"
                       rf".*\b(?:image|video|audio|sticker|GIF|document|Contact card) omitted", re.I)
_WA_OMITTED = re.compile(rf"\w+(?: \w+)? (?:{_any('omitted')})", re.I)  # (iOS marks it: only a marked message)
_WA_DELETED = re.compile(rf"(?:{_any('deleted')})\.?", re.I)
_WA_EDITED = re.compile(rf"\s*[{_MARKS}]*<(?:{_any('edited')})\.?>", re.I)
_WA_SHAPES = "'12/31/23, 9:41 PM - Alice: …' or '[31/12/2023, 21:41:05] Alice: …'"


# A date written with numbers, day and month in either order ("31/12/2023", "12/31/23,
# 9:41 PM", "2023-12-31 21:41"), then perhaps a time: WhatsApp's stamps, and JSON Lines'.
NUMERIC_STAMP = re.compile(r"(\d{1,4})[./-](\d{1,2})[./-](\d{1,4})\.?(?:,?[\sT](\d{1,2})[:.](\d{2})(?:[:.](\d{2}))?"
                            r"(?:\s?([AaPp])\.?\s?[Mm]\.?)?)?")


def date_order(stamps: list[tuple[re.Match[str], str]], source: str, what: str) -> tuple[bool, str]:
    """(months first, what settles it: "line N", or "" when no day is above 12) for numeric
    stamps whose year comes last (``NUMERIC_STAMP`` matches, each with its place). Left
    unsettled, a 12-hour clock reads month first (as in the US), a 24-hour one, or dates
    written with dots (31.12.23: as the countries that put the day first write them, never
    the US), day first. Both orders in one file: refused, as not one ``what``."""
    day_first = next((place for m, place in stamps if int(m[1]) > 12), None)
    month_first = next((place for m, place in stamps if int(m[2]) > 12), None)
    if day_first and month_first:
        raise ExportError(f"{source}: {month_first} writes its date month first, and {day_first} day first: "
                          f"not one {what}; nothing was imported")
    if day_first or month_first:
        return month_first is not None, month_first or day_first or ""
    return any(m[7] for m, _ in stamps) and not all(m.string[m.end(1)] == "." for m, _ in stamps), ""


def stamp_time(m: re.Match[str], months_first: bool) -> dt.datetime | None:
    """The time a numeric stamp (``NUMERIC_STAMP``) names, read in that order; None when it
    names none (a 13th month, a 25th hour)."""
    a, b, c = m[1], m[2], m[3]
    year, month, day = (a, b, c) if len(a) == 4 else (c, a, b) if months_first else (c, b, a)
    hour = int(m[4] or 0)
    if m[7]:  # a 12-hour clock runs 1 to 12 (0 in some locales: "00:08 a. m."); another hour ("25:10 PM") is no time
        hour = hour % 12 + (12 if m[7] in ("p", "P") else 0) if 0 <= hour <= 12 else 24  # (24 is refused below)
    try:
        return dt.datetime(int(year) + (2000 if len(year) <= 2 else 0), int(month), int(day), hour, int(m[5] or 0),
                           int(m[6] or 0))
    except ValueError:
        return None


def _header(line: str) -> re.Match[str] | None:
    """The start of a WhatsApp message on this line, if it is one (in the shapes above, or
    one ``_LOOSE`` reads, matched as it writes it in them)."""
    line = line.lstrip(_MARKS)
    if found := _WA_ANDROID.match(line) or _WA_IOS.match(line):
        return found
    loose = _LOOSE.match(line)
    if loose is None or loose["first"] and not loose["open"]:  # (the time first only in iOS's brackets: a message's
        return None                                            # own "09:00, 12/25/23 - breakfast" is its text)
    half = loose["before"] or loose["after"]
    time, half = (loose["first"], "") if loose["first"] else (loose["time"], _HALVES[half] if half else "")
    date = re.sub(rf"[{_MARKS}]|(?<=[./-])\s", "", loose["date"])  # (an Arabic phone's marks, a Korean one's spaces)
    if loose["be"]:  # (the Buddhist era, as a Thai iPhone counts years: 2567 BE is 2024)
        if (year := re.fullmatch(r"(.*\D)(\d{4})", date)) is None:
            return None
        date = f"{year[1]}{int(year[2]) - 543}"
    said = f"{loose['open']}{date}, {time}{' ' + half if half else ''}{loose['close']}{loose['rest']}"
    return _WA_ANDROID.match(said) or _WA_IOS.match(said)


# Stamps some phones write otherwise, read as the shapes above: the time first (iOS in
# Vietnamese: "[14:56:01, 3/18/22] "); marks inside the date and an Arabic comma before
# the time, which may end in ص or م (Arabic's am, pm); a half of the day before the time
# (Chinese 下午1:54, Japanese 午後1:32, Korean 오후 1:32, a Korean date "2024. 5. 2."); a
# Buddhist-era year ("3/18/2565 BE"); a word before the time (Finnish "klo"); a dot after
# it ("13:34. - ").
_HALVES = {"上午": "AM", "下午": "PM", "午前": "AM", "午後": "PM", "오전": "AM", "오후": "PM", "ص": "AM", "م": "PM"}
_LOOSE = re.compile(
    rf"(?P<open>\[?)(?:(?P<first>\d{{1,2}}[:.]\d{{2}}(?:[:.]\d{{2}})?(?:\s?[AaPp]\.?\s?[Mm]\.?)?),\s)?"
    rf"(?P<date>\d{{4}}\.\s\d{{1,2}}\.\s\d{{1,2}}|\d{{1,4}}[{_MARKS}]*[./-]\d{{1,2}}[{_MARKS}]*[./-]\d{{1,4}})[{_MARKS}]*\.?"
    rf"(?P<be>\sBE)?"
    rf"(?(first)|[,\u060c]?\s(?:klo\s)?(?:(?P<before>上午|下午|午前|午後|오전|오후)\s?)?"
    rf"(?P<time>\d{{1,2}}[:.]\d{{2}}(?:[:.]\d{{2}})?(?:\s?[AaPp]\.?\s?[Mm]\.?)?)\.?(?:\s(?P<after>[صم]))?)"
    rf"(?P<close>\]\s|\s[-–]\s)(?P<rest>.*)", re.S)


def _whatsapp(text: str, source: str, force: bool | None = None, why: str = "") -> list[_Chat]:
    """The chat's messages. Whether a date is day or month first is settled by the whole
    file (a first field above 12 is a day, a second one a month); when nothing settles it,
    a 12-hour clock says month first (as the US writes dates), else day first, and the
    import says which was assumed (``force``: months first or not, whatever the file
    says: how a chat imported before was read). A message's id is made of its time, its sender and its
    place among that sender's messages of that minute (WhatsApp gives none), so a newer
    export of the chat makes the same ids."""
    starts: list[tuple[int, re.Match[str], list[str]]] = []
    for n, line in enumerate(text.split("\n"), 1):
        line = line.removesuffix("\r")
        if found := _header(line):
            starts.append((n, found, []))
        elif starts:
            starts[-1][2].append(line)
        elif line.strip(_MARKS + " \t"):
            raise ExportError(f"{source} line {n}: not the start of a WhatsApp message (a date, a time and a sender: "
                              f"{_WA_SHAPES}): {one_line(line)[:60]!r}; nothing was imported")
    name = _wa_name(source)
    chat = _Chat(name, name, f"chat {name!r}")
    if _copy_of(Path(source).stem) == "_chat" and not Path(source).absolute().parent.name.lower().startswith("whatsapp chat"):
        chat.earlier_key = "_chat"  # (sessions keyed "_chat": an iPhone export whose folder did not name the chat)
    ambiguous = [(m, f"line {n}") for n, m, _ in starts if len(m[1]) < 4]
    months_first, settled = date_order(ambiguous, source, "WhatsApp export")
    if force is not None:
        months_first = force
        if ambiguous:
            chat.dates = (force, "")
            chat.assumed.append(f"dates read {'month/day' if force else 'day/month'}, {why}")
    elif ambiguous and not settled:
        order = "month/day (a 12-hour clock, as in the US)" if months_first else \
            "day/month (dates written with dots)" if any(m[7] for m, _ in ambiguous) else "day/month (a 24-hour clock)"
        chat.assumed.append(f"dates read {order}: no day in the file is above 12 to say which comes first")
        chat.dates = (months_first, "")
    elif ambiguous:
        chat.dates = (months_first, settled)
    seen: Counter[tuple[str, str]] = Counter()
    for n, m, more in starts:
        when = stamp_time(m, months_first)
        if when is None:
            if force is not None and ambiguous:  # (a date the forced order cannot read: no import read it so)
                continue
            raise ExportError(f"{source} line {n}: {m[0][: m.start(8)].strip(' -–[]')!r} is not a date and time; "
                              "nothing was imported")
        head, colon, body = _sender_and_text(m[8])
        if not colon:  # (Android: a notice has no sender)
            chat.left_out[SYSTEM] += 1
            continue
        sender, ts = head.strip(_MARKS + " "), when.isoformat()
        seen[ts, sender] += 1
        mid = "wa-" + hashlib.sha256(f"{ts}\0{sender}\0{seen[ts, sender]}".encode()).hexdigest()[:16]
        marked = body != "" and body[0] in _MARKS  # ("" is in every string: a message that starts on its next line)
        first, _, rest = "\n".join([body, *more]).lstrip(_MARKS).partition("\n")
        if _WA_DELETED.fullmatch(first.strip(_MARKS + " ")) and not rest.strip():
            chat.left_out[DELETED] += 1
            continue
        shown = first.strip(_MARKS + " ")
        media = bool(_WA_MEDIA.fullmatch(shown) or marked and _WA_OMITTED.fullmatch(shown))
        if media:
            chat.left_out[MEDIA] += 1
            first = ""
        elif marked:  # (iOS: a notice, named after the chat or a person)
            chat.left_out[SYSTEM] += 1
            continue
        whole = f"{first}\n{rest}"
        words = _WA_EDITED.sub("", whole).strip()
        if words:
            chat.said.append(_Said(mid, sender, sender, words, ts, edited=bool(_WA_EDITED.search(whole))))
        elif not media:
            chat.left_out[NO_TEXT] += 1
    return [chat]


_QUOTES = "\"“”„«»"


def _sender_and_text(line: str) -> tuple[str, str, str]:
    """A message line's sender, ": " and text; no ": " for a notice without a sender
    (Android). A ": " inside a quoted name is not the sender's ("Ana changed the subject to
    “Trip: Lisbon”": the quote is still open before it), and iOS marks a notice's text,
    so a group named "Trip: Lisbon" ends its name where the mark begins."""
    cut = line.find(": \u200e")
    if cut >= 0:
        return line[:cut], ": ", line[cut + 2:]
    head, colon, body = line.partition(": ")
    if colon and sum(head.count(q) for q in _QUOTES) % 2:
        return line, "", ""
    return head, colon, body


def _copy_of(name: str) -> str:
    """A file or folder name without the mark of a copy saved beside another: "… (1)", or
    "…(1)" as some browsers write it."""
    return re.sub(r"\s?\(\d+\)$", "", name)


def _wa_name(source: str) -> str:
    """The chat's name, from the export's file name ("WhatsApp Chat with Alice.txt"; iOS
    names it `_chat.txt` inside a folder "WhatsApp Chat - Alice", or whatever the folder
    was renamed: two chats' `_chat.txt` are two chats): what names the chat's sessions, in
    every export of it (a newer one saved beside it as "… (1).txt" too)."""
    path = Path(source).absolute()
    stem = _copy_of(path.stem)
    stem = _copy_of(path.parent.name) if stem == "_chat" and path.parent.name else stem
    for title in _WA_TITLES:
        if m := title.fullmatch(stem.strip()):
            return m[1].strip()
    return re.sub(r"^WhatsApp Chat\s*", "", stem, flags=re.I).strip() or "WhatsApp chat"


# An export's file name in the phone's language: "WhatsApp Chat with Ana", "Chat de
# WhatsApp con Ana", "Ana ile WhatsApp Sohbeti" (the languages of _WA_MARKERS and a few more).
_WA_TITLES = tuple(re.compile(re.escape(t).replace(r"\{\}", "(.+)").replace(r"\ ", r"\s+"), re.I) for t in (
    "WhatsApp Chat with {}", "WhatsApp Chat - {}", "WhatsApp Chat mit {}", "WhatsApp-Chat mit {}",
    "Chat de WhatsApp con {}", "Discussion WhatsApp avec {}", "Conversa do WhatsApp com {}",
    "Conversa no WhatsApp com {}", "Chat WhatsApp con {}", "WhatsApp-chat met {}", "WhatsApp Gesprek met {}",
    "{} ile WhatsApp Sohbeti", "Chat WhatsApp dengan {}", "WhatsApp chat med {}", "WhatsApp-chatt med {}",
    "WhatsApp-samtale med {}", "Czat WhatsApp z {}", "Чат WhatsApp с {}",
))


# Telegram Desktop's "Export chat history" (JSON): one chat, or the whole account's
# (`chats.list`, with `personal_information` naming its owner).
class TGEntity(_Part):
    text: str = ""


class TGMessage(_Part):
    id: StrictInt
    type: StrictStr  # "message", or "service" (a join, a pin, a call): left out and counted
    date: IsoStamp
    sender: str | None = Field(None, alias="from")
    from_id: str | None = None
    text: StrictStr | list[StrictStr | TGEntity] = ""
    photo: Any = None
    file: Any = None
    media_type: Any = None
    poll: Any = None
    location_information: Any = None
    contact_information: Any = None
    edited: Any = None  # when it was edited, if it was

    def words(self) -> str:
        """The text: a string, or a list of strings and entities (a link, bold text) each with its own."""
        parts = [self.text] if isinstance(self.text, str) else self.text
        return "".join(p if isinstance(p, str) else p.text for p in parts)

    def media(self) -> bool:
        return any(x is not None for x in (self.photo, self.file, self.media_type, self.poll,
                                           self.location_information, self.contact_information))


class TGChat(_Part):
    id: StrictInt | None = None
    name: str | None = None
    type: str | None = None
    messages: list[TGMessage]


def _telegram(text: str, source: str) -> list[_Chat]:
    """Each chat's messages: typed text, and a photo's or file's caption (the media itself
    is counted, and left out); service messages are left out and counted."""
    try:
        whole = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ExportError(f"{source}: not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg}); "
                          "nothing was imported") from None
    account = isinstance(whole, dict) and "chats" in whole
    # (the account's chats, then those it has left: what was said there is its history too)
    lists = [whole.get(part, {}) for part in ("chats", "left_chats")] if account else [{"list": [whole]}]
    if not isinstance(whole, dict) or not all(isinstance(part, dict) and isinstance(part.get("list", []), list)
                                              for part in lists):
        raise ExportError(f"{source}: a Telegram export is a JSON object, one chat's `messages` or the account's "
                          "`chats.list`; nothing was imported")
    raws = [raw for part in lists for raw in part.get("list", [])]
    about = whole.get("personal_information") if account else None
    me = about.get("user_id") if isinstance(about, dict) else None
    chats = []
    for n, raw in enumerate(raws):
        label = _label(n, *_names(raw), noun="chat")
        try:
            tg = TGChat.model_validate(raw)
        except ValidationError as exc:
            raise ExportError(f"{source}: {label}: {_why(exc)}; nothing was imported") from None
        name = (tg.name or ("Saved Messages" if tg.type == "saved_messages" else "")).strip() or "Telegram chat"
        chat = _Chat(name, str(tg.id) if tg.id is not None else name, label, owner=f"user{me}" if me else None)
        for message in tg.messages:
            if message.type != "message":
                chat.left_out[SYSTEM] += 1
                continue
            if message.media():
                chat.left_out[MEDIA] += 1
            words = message.words().strip()
            if words:
                sender = message.sender or message.from_id or "unknown sender"
                chat.said.append(_Said(message.id, sender, message.from_id or sender, words, message.date,
                                       edited=message.edited is not None))
            elif not message.media():
                chat.left_out[NO_TEXT] += 1
        chats.append(chat)
    return chats


# -- shared ---------------------------------------------------------------------------------
def _add(out: Conversation, mid: str | int, role: str, text: str, ts: str | None, title: str | None,
         **more: str) -> None:
    """One message as an import record (checked as every import line is); the
    conversation's title rides on its first event (a log has no header line)."""
    extra = {"title": title.strip()} if not out.records and title and title.strip() else {}
    out.records.append(ImportRecord(session=out.session, id=mid, role=role, content=text, ts=ts, **extra, **more))


def _conversation_id(conv: Any) -> str:
    if isinstance(conv, GPTConversation):
        return conv.conversation_id or conv.id or ""
    return conv.uuid or ""


def _title(conv: Any) -> str:
    return (conv.title if isinstance(conv, GPTConversation) else conv.name) or ""


def _label(n: int, cid: object, title: object, noun: str = "conversation") -> str:
    named = [f"id {cid!r}"] if cid else []
    if title:
        named.append(json.dumps(str(title), ensure_ascii=False))
    return f"{noun} [{n}]" + (f" ({', '.join(named)})" if named else "")


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


def _names(raw: Any) -> tuple[str | int, str]:
    """A raw conversation's id and title, to name it in an error (before it is checked)."""
    if not isinstance(raw, dict):
        return "", ""
    cid = raw.get("conversation_id") or raw.get("id") or raw.get("uuid") or ""
    title = raw.get("title") or raw.get("name") or ""
    return (cid if isinstance(cid, str | int) else ""), (title if isinstance(title, str) else "")


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
