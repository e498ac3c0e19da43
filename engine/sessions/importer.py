"""Turning session logs into turn memories: `memlink import-chat FILE` (JSON Lines, a
ChatGPT or Claude export, or a WhatsApp or Telegram chat) and the per-session extraction queue. Turns are processed in
order, one extraction each; a turn whose extraction fails is quarantined and stays
pending (the next run retries it); failures never stop the other turns. After
``llm.max_failures`` failed model answers in a row the rules extract the rest
(``fallback`` says so)."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pydantic import ValidationError

from ..errors import MemlinkError
from ..extract.inputs import read_text_file
from ..extract.loop import quarantine
from ..extract.rules import day_of, time_of
from ..index import choose_model, model_line
from ..llm import Breaker, LLMError, LLMInvalidOutput
from ..llm.registry import selection
from ..model.text import counted
from ..storage.jsonl import JsonlError, invalid, read_numbered, read_records
from .chat_exports import (
    EXPORTS,
    FORMATS,
    MESSENGERS,
    NUMERIC_STAMP,
    ExportError,
    date_order,
    read_export,
    sniff,
    some,
    stamp_time,
)
from .events import COMMIT, REPLACED, ImportRecord, SessionEvent, TurnMemoryRecord
from .extract import LLMTurnExtractor, RulesTurnExtractor
from .log import Turn, append_events, project_turns, read_events, session_uri
from .store import TurnStore, lost_sessions, memory_id

if TYPE_CHECKING:
    from ..storage.vault import Vault

REQUIRED = ("session", "id", "role", "content", "ts")


@dataclass
class ImportReport:
    sessions: int = 0
    events_added: int = 0
    turns: int = 0
    extracted: int = 0
    already: int = 0
    failed: list[str] = field(default_factory=list)  # "session: reason"
    provider: str = ""
    fallback: str = ""  # why the model was given up and the rules extracted the rest, or ""
    format: str = "jsonl"
    left_out: dict[str, int] = field(default_factory=dict)  # what an export held that is not chat text, by kind
    unnamed: int = 0  # export conversations without an id: named by their title and start time
    model: str = ""  # a model that reads this chat, where the default does not and none is named (``choose_model``) ...
    model_set: bool = False  # ... set in memlink.yaml by this import (an empty vault's first chat)
    undated: list[str] = field(default_factory=list)  # time stamps naming no day (the first few; their memories: today)
    undated_count: int = 0
    replaced: int = 0  # messages imported before, no longer on their conversation's current branch
    edited: int = 0  # messages imported before and edited since (a messaging app): kept as first imported
    retimed: int = 0  # messages imported before with another time stamp: kept as first imported
    elsewhere: int = 0  # messages another session holds already (a chat exported again under another name or time zone)
    me: list[str] = field(default_factory=list)  # a WhatsApp or Telegram chat: the senders imported as the user
    assumed: list[str] = field(default_factory=list)  # what the reader assumed (who is the user, a date order)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def model_line(self) -> str:
        return model_line(self.model, self.model_set)

    def undated_line(self) -> str:
        """What the CLI and the app say of messages whose time stamp names no day."""
        if not self.undated_count:
            return ""
        seen = ", ".join(repr(ts) for ts in self.undated)
        return (f"{counted(self.undated_count, 'message')} with a time stamp naming no day ({seen}): "
                "their memories take the day of their session's last message, or of the commit")

    def left_out_lines(self) -> list[str]:
        """Every kind of thing the export held that was not imported, with its count, the
        conversations named by title and time, and what reading a WhatsApp or Telegram chat
        assumed (who is the user, a date order): what the CLI and the app show."""
        lines = [f"left out: {why}: {n}" for why, n in sorted(self.left_out.items(), key=lambda kv: (-kv[1], kv[0]))]
        lines += self.assumed
        if self.unnamed:
            lines.append(f"conversations without an id (named by their title and start time): {self.unnamed}")
        if self.edited:
            lines.append(f"edited after they were imported: {counted(self.edited, 'message')}, kept as first imported "
                         "(a session's log is never rewritten; the export holds the new text)")
        if self.retimed:
            lines.append(f"imported before with another time stamp: {counted(self.retimed, 'message')}, kept as first "
                         "imported (a session's log is never rewritten)")
        if self.elsewhere:
            lines.append(f"imported before in another session: {counted(self.elsewhere, 'message')} (the chat exported "
                         "again under another file name, or in another time zone), kept where they are")
        if self.replaced:
            lines.append(f"replaced since the last import (an answer regenerated, a prompt edited): "
                         f"{counted(self.replaced, 'message')}, left out of recall and memory from now on")
        return lines


def turn_extractor(vault: Vault) -> LLMTurnExtractor | RulesTurnExtractor:
    """The LLM's turn extractor when the vault's provider is a healthy LLM, else the rules."""
    llm = selection(vault.config.llm).llm
    if llm is not None:
        return LLMTurnExtractor(llm)
    return rules_extractor(vault)


def rules_extractor(vault: Vault) -> RulesTurnExtractor:
    """The rules turn extractor, knowing the vault's entity names and their aliases."""
    known: dict[str, str] = {}
    for entry in vault.catalog.all("entity"):  # (their aliases as the catalog holds them: no note is read)
        known[entry.title.lower()] = entry.title
        for alias in entry.aliases:
            known.setdefault(str(alias).lower(), entry.title)  # an alias names the same term
    return RulesTurnExtractor(known)


def extract_pending(vault: Vault, sessions: list[str], extractor: Any = None,
                    progress: Callable[[int, int], None] | None = None,
                    report: ImportReport | None = None, *, final: bool = False) -> ImportReport:
    """Extract every completed turn of these sessions that has no memory yet (``final``: a
    finished transcript, whose last turn counts even without an answer). Memories of turns
    the projection no longer has are dropped. Every session asked for gets a turn
    memories file, even an empty one: a session without one was never extracted
    (``restore_turns``)."""
    report = report or ImportReport()
    extractor = extractor or turn_extractor(vault)
    how_many = vault.config.chat.previous_summaries
    report.provider = extractor.name
    store = TurnStore(vault)
    todo: list[Turn] = []
    order: dict[str, list[str]] = {}  # each session's turn memory ids, in turn order
    place: dict[str, int] = {}  # memory id -> its place in that order
    summaries: dict[str, str] = {}  # memory id -> summary, stored or made in this run
    for session in sessions:
        turns = project_turns(session, read_events(vault, session), final=final)
        order[session] = [memory_id(t) for t in turns]
        place.update((mem, i) for i, mem in enumerate(order[session]))
        store.prune(session, set(order[session]))
        summaries.update(store.summaries(session))
        for turn in turns:
            report.turns += 1
            if memory_id(turn) in summaries:
                report.already += 1
            else:
                todo.append(turn)
    docs: list[TurnMemoryRecord] = []
    breaker = Breaker(vault.config.llm.max_failures)
    for n, turn in enumerate(todo, 1):
        if breaker.tripped and not isinstance(extractor, RulesTurnExtractor):
            report.fallback = f"{breaker.why()}: the rules extracted the remaining turns"
            extractor = rules_extractor(vault)
        try:
            extraction = extractor.extract(turn, _previous(order[turn.session], place[memory_id(turn)], summaries, how_many))
        except LLMInvalidOutput as exc:
            breaker.failed(exc)
            where = quarantine(vault, extractor.name, str(exc), exc.raw)
            report.failed.append(f"{turn.session} turn {turn.source_ids[0]}: {exc} (kept in {where})")
            continue
        except LLMError as exc:
            breaker.failed(exc)
            report.failed.append(f"{turn.session} turn {turn.source_ids[0]}: {exc}")
            continue
        breaker.answered()
        docs.append(store.doc(turn, extraction))
        summaries[memory_id(turn)] = extraction.summary
        report.extracted += 1
        if progress:
            progress(n, len(todo))
    if docs:
        store.put_many(docs)
    for session in sessions:
        store.keep(session)
    return report


def _previous(ids: list[str], at: int, summaries: dict[str, str], how_many: int) -> list[str]:
    """The summaries of the last ``how_many`` turns before ``ids[at]`` in its session that
    have one (stored by an earlier run, or made in this one), oldest first: they let the
    extractor resolve "she" or "that place" in a turn made one at a time in chat."""
    out: list[str] = []
    for i in range(at - 1, -1, -1):
        if len(out) >= how_many:
            break
        if ids[i] in summaries:
            out.append(summaries[ids[i]])
    return out[::-1]


def import_chat(vault: Vault, path: Path, extractor: Any = None,
                progress: Callable[[int, int], None] | None = None, *, fmt: str | None = None,
                me: str | None = None, dates: str | None = None) -> ImportReport:
    """A chat file → session logs (appended, never rewritten) → turns → turn memories.
    ``fmt``: "jsonl" (records {session, id, role, content, ts}, other keys kept as given),
    "chatgpt" or "claude" (their `conversations.json` exports: one session per
    conversation, ``engine.sessions.chat_exports``), "whatsapp" or "telegram" (a chat
    between people: one session a day, the sender ``me`` as the user; ``dates``, "day-first"
    or "month-first": a WhatsApp chat's numeric dates, when nothing in the file says which);
    None: told by the file's shape. Message ids are kept as source ids. Everything is checked before
    anything is appended."""
    path = Path(path)
    if path.suffix.lower() == ".zip":  # (WhatsApp on an iPhone, ChatGPT and Claude send their exports zipped)
        raise MemlinkError(f"{path}: a .zip archive: unzip the export and import the chat file in it (_chat.txt, "
                           "result.json, conversations.json); nothing was imported")
    text = read_text_file(path)  # refuses a FIFO, a device or a binary file before a parser opens it
    if not text.strip():
        raise MemlinkError(f"{path}: empty: it holds no chat to import; nothing was imported")
    shape = sniff(text)
    fmt = fmt or shape
    if fmt not in FORMATS:
        if fmt == "discord":
            raise MemlinkError(f"{path}: a Discord export (DiscordChatExporter's JSON), which memlink does not read; "
                               "write its messages as JSON Lines (a record a line: session, id, role, content, ts) to "
                               "import them; nothing was imported")
        if fmt == "unknown":
            raise MemlinkError(f"{path}: a JSON array, but neither a ChatGPT nor a Claude export (no conversation has "
                               "`mapping` or `chat_messages`); nothing was imported")
        raise MemlinkError(f"unknown chat format {fmt!r}: use one of {', '.join(FORMATS)}")
    if dates is not None and fmt != "whatsapp":
        raise MemlinkError(f"{path}: --dates says how a WhatsApp chat writes its dates, and this is a {fmt} file; "
                           "nothing was imported")
    if me is not None and fmt not in MESSENGERS:
        raise MemlinkError(f"{path}: --me names the user of a WhatsApp or Telegram chat, and this is a {fmt} file; "
                           "nothing was imported")
    report = ImportReport(format=fmt)
    by_session: dict[str, list[SessionEvent]] = defaultdict(list)
    if fmt == "jsonl":
        if shape in EXPORTS:
            raise MemlinkError(f"{path}: not JSON Lines: it looks like a {EXPORTS[shape]} export "
                               f"(--format {shape}); nothing was imported")
        first = text.lstrip()[:1]
        if first == "{" and _starts_utf16(path):
            raise MemlinkError(f"{path}: UTF-16 text: JSON Lines are read as UTF-8; save it as UTF-8 and import it "
                               "again; nothing was imported")
        del text
        if first and first != "{":  # (a note, a CSV file: not a record a line)
            raise MemlinkError(f"{path}: not a chat file memlink reads; {READABLE}; nothing was imported")
        try:
            records = read_records(path, ImportRecord)  # parsed and checked in one step
        except JsonlError:
            _diagnose(path)  # rare: read again, line by line, to say what is wrong in our words
            raise
        _read_numeric_dates(vault, records, path, report)
        _oldest_first(records, report)
        for record in records:
            if record.kind != COMMIT:  # a commit mark of the vault the log came from: not this vault's
                by_session[record.session].append(record)

        def place(session: str, key: str, nth: int) -> str:
            return f"{path} line {_line_of(path, session, key, nth)}"
    else:
        folder = vault.root / "sessions"
        known = [p.stem for p in folder.glob("*.jsonl")] if folder.is_dir() else []
        export = read_export(text, fmt, str(path), known, me)
        key = None
        if export.earlier_key is not None:  # (sessions an import keyed so hold its messages: that chat's)
            keyed = read_export(text, fmt, str(path), known, me, key=export.earlier_key)
            if _logged(vault, keyed) and not _logged(vault, export):
                export, key = keyed, export.earlier_key
        if export.dates is not None and dates is not None:
            export = _as_told(vault, text, path, known, me, key, export, dates == "month-first")
        elif export.dates is not None:
            try:
                flipped = read_export(text, fmt, str(path), known, me, months_first=not export.dates[0], key=key)
            except ExportError:  # (--me names no sender of the days the other order can read)
                flipped = None
            export = _as_before(vault, export, flipped, path) if flipped is not None else export
        months_first = export.dates[0] if export.dates is not None and not export.dates[1] else None
        if export.owned and me is None:  # (each chat the account's owner's: the sessions that made another the user)
            users = {s: set(u) for s in _sessions_of(vault, export) if (u := _user_of(read_events(vault, s)))}
            held = sorted(s for s, u in users.items() if u != set(export.me))
            earlier = sorted({name for s in held for name in users[s]})
        else:
            earlier, held = _earlier_me(vault, export)
        if me is None and not export.owned and earlier and set(earlier) != set(export.me):  # (a newer export: "you" as before)
            export = read_export(text, fmt, str(path), known, earlier[0], "as when this chat was imported before",
                                 months_first, key, **({"dates_rule": "as --dates says"} if dates else {}))
        elif earlier and set(earlier) != set(export.me):
            named = f"--me names {some(export.me)}" if me is not None else \
                f"the export names its account's owner, {some(export.me)}"
            instead = f"import it with --me {earlier[0]!r} (or without --me), or" if me is not None else "so"
            which = "this chat was" if me is not None or not export.owned else "chats of it were"
            raise MemlinkError(f"{path}: {which} imported before with {some(earlier)} as you (user), and {named}; "
                               f"a chat's log is never rewritten, {instead} first delete its chat sessions from "
                               f"sessions/ ({some(held)}: each .jsonl and .memories.json) and import it again (notes "
                               "committed from them stay); nothing was imported")
        del text
        report.me, report.assumed = export.me, export.assumed
        labels: dict[str, str] = {}
        left_out: Counter[str] = Counter()
        for conversation in export.conversations:
            left_out.update(conversation.left_out)
            report.unnamed += conversation.unnamed
            records = _without_edits(vault, conversation)
            report.edited += len(conversation.records) - len(records)
            records, moved = _not_beside(vault, conversation, records)
            report.elsewhere += moved
            if records:
                by_session[conversation.session].extend(records)
                labels.setdefault(conversation.session, conversation.label)
            marks = _replaced(vault, conversation)
            if marks:
                by_session[conversation.session].extend(marks)
                report.replaced += len(marks)

        report.left_out = dict(left_out)

        def place(session: str, key: str, nth: int) -> str:
            return f"{path}: {labels[session]}"
    report.retimed = _refuse_changed_ids(vault, by_session, place)
    report.model, report.model_set = choose_model(vault, [e.content for events in by_session.values() for e in events])
    report.sessions = len(by_session)
    for session, events in by_session.items():
        added = append_events(vault, session, events)
        report.events_added += added
        for event in events if added else ():  # (a chat imported again says nothing twice)
            if day_of(str(event.ts or "")) is None:
                report.undated_count += 1
                shown = str(event.ts) if event.ts else "no time stamp"
                if len(report.undated) < 3 and shown not in report.undated:
                    report.undated.append(shown)
    return extract_pending(vault, list(by_session), extractor, progress, report, final=True)


def restore_turns(vault: Vault) -> int:
    """Rebuild the turn memories of session logs that have none (their memories file is
    gone: docs/DESIGN.md, "Turn memory"), with the rules extractor: deterministic,
    offline and fast, so recall never waits for a model. Returns how many were made."""
    lost = lost_sessions(vault)
    if not lost:
        return 0
    # Completed turns only: a question still waiting for its answer (a chat in progress) is
    # extracted by its own session once answered.
    report = extract_pending(vault, lost, rules_extractor(vault))
    if report.extracted:
        vault.warnings.append(f"rebuilt {report.extracted} turn memories of {counted(len(lost), 'chat session')} from the "
                              "session logs with the rules extractor (their derived state was missing)")
    return report.extracted


def _read_numeric_dates(vault: Vault, records: list[ImportRecord], path: Path, report: ImportReport) -> None:
    """Time stamps written with numbers ("25/03/2024 10:00", "3/25/24, 10:00 AM") are read
    in the order each session settles (a day above 12), a session that settles nothing in
    the order it was read in when imported before (its log holds one of its messages at
    one reading), else in the order the rest of the file settles (else day first, or month
    first on a 12-hour clock), the report saying which; and logged as ISO: one stamp alone
    cannot tell whether 05/03 is in May or in March."""
    found: dict[str, list[tuple[ImportRecord, re.Match[str]]]] = defaultdict(list)
    for r in records:
        if isinstance(r.ts, str) and day_of(r.ts) is None and (m := NUMERIC_STAMP.fullmatch(r.ts.strip())):
            found[r.session].append((r, m))
    orders = {session: date_order([(m, f"the message with id {r.id!r} of session {session!r}") for r, m in said
                                   if len(m[1]) < 4], str(path), "chat session's time stamps")
              for session, said in found.items()}
    settled = {first for first, why in orders.values() if why}
    rest = settled.pop() if len(settled) == 1 else None  # (the file's order, where its sessions agree)
    why_for: dict[tuple[bool, str], list[str]] = defaultdict(list)
    for session, said in found.items():
        first, place = orders[session]
        if any(len(m[1]) < 4 for _, m in said):
            before = _read_before(vault, session, said) if not place else None
            if place:
                why = f"{place} names a day above 12"
            elif before is not None:
                first, why = before, "as when this session was imported before"
            elif rest is not None:
                first, why = rest, "the rest of the file names a day above 12"
            else:
                why = ("no day above 12 says which comes first (a 12-hour clock reads month/day, as in the US, unless "
                       "its dates are written with dots)")
            why_for[(first, why)].append(session)
        for record, m in said:
            when = stamp_time(m, first)
            if when is not None:  # (else it stays as written, and the report counts it undated)
                record.ts = when.isoformat()
    for (first, why), sessions in why_for.items():
        report.assumed.append(f"dates read {'month/day' if first else 'day/month'} in session{'s' * (len(sessions) > 1)} "
                              f"{some(sessions)}: {why}")


def _read_before(vault: Vault, session: str, said: list[tuple[ImportRecord, re.Match[str]]]) -> bool | None:
    """Months first (True) or days first (False), as the session's log holds a message of
    ``said`` (its ISO stamp one reading of the stamp written); None when it holds none."""
    if not vault.path(session_uri(session)).is_file():
        return None
    logged = {e.key: str(e.ts) for e in read_events(vault, session)}
    for record, m in said:
        stamp = logged.get(record.key)
        for first in (False, True):
            when = stamp_time(m, first)
            if stamp is not None and when is not None and stamp == when.isoformat() and stamp_time(m, not first) != when:
                return first
    return None


def _time(ts: object) -> dt.datetime | None:
    """A message's time stamp as a time to compare (``time_of``), in UTC."""
    when = time_of(str(ts)) if ts is not None and not isinstance(ts, bool) else None
    return when.astimezone(dt.UTC).replace(tzinfo=None) if when is not None and when.tzinfo else when


SKEW = dt.timedelta(minutes=1)  # two clocks a little apart: not an order


def _oldest_first(records: list[ImportRecord], report: ImportReport) -> None:
    """A session the file lists newest first (every time stamp read, none later than the
    one before it, the last a minute or more before the first) is read oldest first: a
    turn pairs a question with the answer that came after it, not before. (Two messages
    a moment apart the wrong way are a clock's skew, not an order.)"""
    at: dict[str, list[int]] = defaultdict(list)
    for n, record in enumerate(records):
        at[record.session].append(n)
    flipped = []
    for session, places in at.items():
        times = [_time(records[n].ts) for n in places]
        if len(times) < 2 or None in times:
            continue
        known = cast("list[dt.datetime]", times)
        if all(a >= b for a, b in zip(known, known[1:], strict=False)) and known[0] - known[-1] >= SKEW:
            for n, record in zip(places, [records[n] for n in reversed(places)], strict=True):
                records[n] = record
            flipped.append(session)
    if flipped:
        report.assumed.append(f"{counted(len(flipped), 'chat session')} listed newest first ({some(flipped)}): read "
                              "oldest first, by their time stamps")


def _refuse_changed_ids(vault: Vault, by_session: dict[str, list[SessionEvent]],
                        place: Callable[[str, str, int], str]) -> int:
    """A message id names one message: the same id twice with another role or content (in
    the file, or against the session's log) is refused before anything is appended. The
    same message again is a replay, and is skipped by the append; how many of those the
    log holds with another time stamp is returned (kept as first imported)."""
    retimed = 0
    for session, events in by_session.items():
        logged = read_events(vault, session)
        seen: dict[str, tuple[str, str]] = {e.key: (e.role, e.content) for e in logged}
        when = {e.key: e.ts for e in logged}
        in_log = set(seen)
        again = {e.key: e for e in events if e.key in in_log}.values()  # (a stamp the log holds unread: not compared)
        retimed += sum(1 for e in again if (a := _time(e.ts)) is not None and (b := _time(when[e.key])) is not None
                       and a != b)
        occurrences: dict[str, int] = defaultdict(int)
        for event in events:
            occurrences[event.key] += 1
            old = seen.setdefault(event.key, (event.role, event.content))
            if old != (event.role, event.content):
                where = "the session's log" if event.key in in_log else "an earlier message of the file"
                was, now = (f"{role}: {_short(text)}" for role, text in (old, (event.role, event.content)))
                raise MemlinkError(f"{place(session, event.key, occurrences[event.key])}: message id {event.id!r} of session "
                                   f"{session!r} is already used with a different role or content in {where} (there: "
                                   f"{was}; here: {now}); nothing was imported")
    return retimed


def _replaced(vault: Vault, conversation: Any) -> list[SessionEvent]:
    """A mark for each message of the conversation's log that the export now holds off its
    current branch, and no mark says so yet (``REPLACED``)."""
    if not conversation.off_branch or not vault.path(session_uri(conversation.session)).is_file():
        return []
    events = read_events(vault, conversation.session)
    logged = {e.key: e for e in events if e.kind != REPLACED}
    marked = {e.content for e in events if e.kind == REPLACED}
    return [SessionEvent(session=conversation.session, id=f"{mid}~replaced", role="system", kind=REPLACED, content=mid,
                         ts=logged[mid].ts) for mid in conversation.off_branch if mid in logged and mid not in marked]


def _not_beside(vault: Vault, conversation: Any, records: list[ImportRecord]) -> tuple[list[ImportRecord], int]:
    """The records but those a session beside the conversation's holds (``beside``: a
    Telegram chat's of the day before or after, as the exporting computer's clock put its
    messages; the same day's, for a WhatsApp chat exported again under another file name),
    and how many were left out."""
    if not conversation.beside:
        return records, 0
    # (by its words too: two chats' messages of one sender in one minute share a WhatsApp id)
    logged = {(e.key, e.content) for session in conversation.beside for e in read_events(vault, session)}
    kept = [r for r in records if (r.key, r.content) not in logged]
    return kept, len(records) - len(kept)


def _starts_utf16(path: Path) -> bool:
    """Whether the file begins with UTF-16's byte-order mark (Windows' "Unicode" text)."""
    with path.open("rb") as fh:
        return fh.read(2) in (b"\xff\xfe", b"\xfe\xff")


def _without_edits(vault: Vault, conversation: Any) -> list[ImportRecord]:
    """The conversation's records but those its export marks as edited whose id its log
    holds with other words: the log is never rewritten, and appending the new words would
    put them out of their place in the conversation."""
    if not conversation.edited or not vault.path(session_uri(conversation.session)).is_file():
        return list(conversation.records)
    logged = {e.key: e.content for e in read_events(vault, conversation.session)}
    return [r for r in conversation.records
            if r.key not in conversation.edited or logged.get(r.key, r.content) == r.content]


def _as_told(vault: Vault, text: str, path: Path, known: list[str], me: str | None, key: str | None, export: Any,
             months_first: bool) -> Any:
    """A WhatsApp chat read with its dates in the order ``--dates`` gives: refused when a
    line of the file settles the other order, or the chat was imported before read the
    other way (a log is never rewritten)."""
    told = "month first" if months_first else "day first"
    other_order, settled = export.dates
    if settled and other_order != months_first:
        raise MemlinkError(f"{path}: --dates says {told}, and {settled} writes its date "
                           f"{'month' if other_order else 'day'} first; nothing was imported")
    try:
        other = read_export(text, "whatsapp", str(path), known, me, months_first=not months_first, key=key)
    except ExportError:
        other = None
    mine = read_export(text, "whatsapp", str(path), known, me, months_first=months_first, key=key,
                       dates_rule="as --dates says")
    read = {(c.session, r.key) for c in mine.conversations for r in c.records}
    if other is not None and any(pair not in read for pair in _logged(vault, other)):  # (a day both readings share: no say)
        raise MemlinkError(f"{path}: this chat was imported before with its dates read "
                           f"{'day' if months_first else 'month'} first, and --dates says {told}; a chat's log is never "
                           "rewritten: delete its chat sessions from sessions/ first and import it again; nothing was "
                           "imported")
    return mine


def _as_before(vault: Vault, export: Any, flipped: Any, path: Path) -> Any:
    """A WhatsApp chat whose dates read either way (day/month, month/day) is read as when
    it was imported before: the other reading when only its messages are in the vault's
    logs. A file that settles the order against an earlier import is refused, naming the
    sessions that import dated wrongly (a log is never rewritten)."""
    ours, theirs = _logged(vault, export), _logged(vault, flipped)
    mine = {r.key for c in export.conversations for r in c.records}
    wrong = sorted({s for s, key in theirs if key not in mine})
    if not wrong or {key for _, key in ours} - {r.key for c in flipped.conversations for r in c.records}:
        return export
    months_first, settled = export.dates
    if not settled:
        return flipped
    order, other = ("month/day", "day/month") if months_first else ("day/month", "month/day")
    raise MemlinkError(f"{path}: this chat was imported before with its dates read {other}, and this export's {settled} "
                       f"shows they are {order}: the sessions {some(wrong)} hold its messages under wrong days. Delete "
                       "them from sessions/ (each .jsonl and .memories.json; notes committed from them stay) and import "
                       "this export again; nothing was imported")


def _logged(vault: Vault, export: Any) -> set[tuple[str, str]]:
    """(session, message id) of the export's messages that the sessions' logs hold, with
    their words (a WhatsApp id alone is one sender's minute: another chat's message too)."""
    out = set()
    for conversation in export.conversations:
        if conversation.records and vault.path(session_uri(conversation.session)).is_file():
            logged = {(e.key, e.content) for e in read_events(vault, conversation.session)}
            out |= {(conversation.session, r.key) for r in conversation.records if (r.key, r.content) in logged}
    return out


def _sessions_of(vault: Vault, export: Any) -> list[str]:
    """The chat sessions of a messaging export that the vault holds already."""
    return sorted({c.session for c in export.conversations if c.session and vault.path(session_uri(c.session)).is_file()})


def _earlier_me(vault: Vault, export: Any) -> tuple[list[str], list[str]]:
    """Who was the user (the speakers of user messages) when the chat sessions of a
    WhatsApp or Telegram export were imported before, as the first of them that has a user
    message says (a chat has one user: its other sessions are not read); else as the
    sessions say that hold its messages under another name (the same chat exported from
    the other person's phone, "WhatsApp Chat with Caroline" after "… with Melanie").
    With the sessions that hold the chat; empty when none."""
    ours = _sessions_of(vault, export)
    for session in ours:
        if found := _user_of(read_events(vault, session)):
            return found, ours
    for conversation in export.conversations:
        mine = {(r.key, r.content) for r in conversation.records}
        for session in conversation.beside:
            events = read_events(vault, session)
            if any((e.key, e.content) in mine for e in events) and (found := _user_of(events)):
                return found, [session]
    return [], ours


def _user_of(events: list[SessionEvent]) -> list[str]:
    """The speakers of a chat session's user messages."""
    return sorted({e.speaker for e in events if e.role == "user" and e.speaker and e.kind is None})


def _short(text: str, limit: int = 60) -> str:
    """A message's text on one line in an error, cut to ``limit`` characters."""
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[: limit - 1] + "…")


def _line_of(path: Path, session: str, key: str, nth: int) -> int:
    """The line number of the ``nth`` record of the file with this session and id (read
    again only when an import is refused, so a good import parses once)."""
    count = 0
    for n, raw in read_numbered(path):
        if raw.get("session") == session and str(raw.get("id")) == key:
            count += 1
            if count == nth:
                return n
    return 0


READABLE = ("it reads JSON Lines (a record a line: session, id, role, content, ts), the conversations.json of a "
            "ChatGPT or Claude data export, a WhatsApp chat export (.txt) and a Telegram Desktop export (result.json)")


def _diagnose(path: Path) -> None:
    """Raise for the first bad line of an import file, naming it and what it lacks."""
    try:
        text = read_text_file(path)
        whole = json.loads(text) if len(text.strip().splitlines()) > 1 else None  # (one line is a record)
    except (ValueError, MemlinkError):
        whole = None
    if isinstance(whole, dict):  # (an export memlink does not read)
        raise MemlinkError(f"{path}: one JSON document, not a chat file memlink reads; {READABLE}; nothing was imported")
    try:
        numbered = read_numbered(path)
    except JsonlError as exc:
        raise MemlinkError(f"{exc}; nothing was imported") from None
    for n, raw in numbered:
        missing = [k for k in REQUIRED if k not in raw]
        if missing:
            ts = " (it may be null when the message has no time)" if "ts" in missing else ""
            raise MemlinkError(f"{path} line {n}: has no {' or '.join(missing)}{ts}; a record needs the keys "
                               f"{', '.join(REQUIRED)}; nothing was imported")
        try:
            ImportRecord.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors()[0]  # a bad session id says so in its own words
            why = str(first["ctx"]["error"]) if first["type"] == "value_error" else invalid(exc)
            raise MemlinkError(f"{path} line {n}: {why}; nothing was imported") from None
