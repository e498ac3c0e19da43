"""The chat pane: sessions on the left, the conversation in the middle (replies stream
from Ollama as they are written; escape stops one, ctrl+y asks again for one that failed
or was stopped), and on the right what recall injected and why. A message starts a new
session unless one is picked in the list; ctrl+n starts one too, ctrl+s commits the
session into memory notes, ctrl+o only the chosen reply's turn. With no Ollama the pane
says why and how to start it, and answers from memory; everything else keeps working.
`a` on a note in the browser opens this pane asking about that note: it is given to the
model and seeds recall. A reply's [n] citations are links (click, or ctrl+r and enter):
a note opens in the browser, a past turn in its session."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Footer, Input, ListItem, ListView, OptionList, Static
from textual.widgets.option_list import Option

from engine import MemlinkError, Vault
from engine.llm import LLMError
from engine.model.text import counted, printable
from engine.sessions.chat import SNAPSHOT_TEXT, ChatSession, given_items, new_session_id, session_locks
from engine.sessions.log import message_text, project_turns, read_events, session_uri
from widgets.hyphen_wrap import HyphenWrapped
from widgets.keys import keys_taken
from widgets.safe import safe_markup, safe_path
from widgets.status_bar import Status

from ..messages import ExtractionStarted, ProviderChanged, VaultChanged
from .pane import Pane

if TYPE_CHECKING:
    from engine.extract.updater import RunReport
    from engine.llm import Health, Provider
    from engine.sessions.memory import MemoryItem

NEW_SESSION = ("A new chat session. Type below and press enter. [b]ctrl+s[/b] saves the session to memory "
               "(then [b]/[/b] finds it); [b]ctrl+l[/b] picks an earlier session in the list.")
# (Not the digits: a message begins with one often — "5 days ago" — and the keys after a
# pane switch would act in that pane.)
EMPTY_BOX_KEYS = {"/": "app.search", "?": "app.help"}
PLACEHOLDER = "Message…  (enter sends)"
CITATION = re.compile(r"(?<!\\)\[(\d{1,2})\]")  # [n] in a reply as shown
MARKED_CITATION = re.compile(r"(?<!\\)\\\[(\d{1,2})\]")  # [n] in safe_markup's output (a doubled \ is the text's own)


class Reply(Static, can_focus=True):
    """A reply in the transcript, with the memory items it was given (``items``: its [n]
    citations, shown as links) and the id of the question it answers (``turn``)."""

    class Cited(Message):
        def __init__(self, reply: Reply, n: int) -> None:
            super().__init__()
            self.reply, self.n = reply, n

    def __init__(self, text: str = "…", items: list[MemoryItem] | None = None, about: str | None = None,
                 turn: str = "") -> None:
        super().__init__(text, classes="assistant")
        self.items, self.about, self.turn = list(items or []), about, turn

    def show(self, text: str, extra: str = "") -> None:
        """``text`` (data) with its citations of ``items`` as links, then ``extra`` (markup)."""
        count = len(self.items)

        def link(m: re.Match) -> str:
            n = int(m.group(1))
            return f"[b u $accent @click=cite({n})]\\[{n}][/]" if 1 <= n <= count else m.group(0)

        self.update(MARKED_CITATION.sub(link, safe_markup(text)) + extra)

    def action_cite(self, n: int) -> None:
        self.post_message(self.Cited(self, n))


class MessageBox(Input):
    """The message field. While it is empty, / and ? do what they do everywhere else
    (search, help); once a message is begun they are text. Digits are always text."""

    def _action_for(self, character: str | None) -> str | None:
        return None if self.value else EMPTY_BOX_KEYS.get(character or "")

    def check_consume_key(self, key: str, character: str | None) -> bool:
        return super().check_consume_key(key, character) and self._action_for(character) is None

    async def _on_key(self, event: events.Key) -> None:
        action = self._action_for(event.character)
        if action is not None:  # (Input's own handler, which would type it, is not run)
            event.stop()
            event.prevent_default()
            await self.run_action(action)


RECALL_HINT = "Recall shows here what of your memory a reply was given, and why."


def _session_row(name: str) -> ListItem:
    """A chat session in the list: its whole name, wrapped at its hyphens (the list is
    narrow, and sessions of one day differ only after the date)."""
    return ListItem(HyphenWrapped(name), name=name)


class ChatScreen(Pane):
    PANE = "chat"
    UNSENT = "The message typed in the chat is not sent"
    BINDINGS = [
        # (the footer shows these in order: at 80 columns, saving comes before what may be cut)
        Binding("escape", "stop_or_back", "Back / stop reply"),
        Binding("ctrl+y", "retry", "Retry reply", show=False),  # a failed or stopped reply says so itself
        Binding("ctrl+g", "extract_with_rules", "Extract with rules", show=False),  # ctrl+e is the field's end of line
        Binding("ctrl+s", "commit", "Save to memory", priority=True),
        Binding("ctrl+r", "focus_recall", "Citations"),
        Binding("ctrl+o", "save_reply", "Save one reply"),
        Binding("ctrl+n", "new_session", "New session"),
        Binding("ctrl+l", "focus_sessions", "Chat sessions list", show=False),
    ]
    DEFAULT_CSS = """
    ChatScreen #sessions { width: 30; border: round $panel; }
    ChatScreen #sessions:focus-within { border: round $accent; }
    ChatScreen #sessions > .-open { border-left: tall $accent; text-style: bold; }  /* the session shown */
    ChatScreen #conversation { width: 2fr; }
    ChatScreen #transcript { height: 1fr; border: round $panel; padding: 0 1; }
    ChatScreen #recall { width: 1fr; border: round $panel; }
    ChatScreen #recall:focus-within { border: round $accent; }
    ChatScreen #recall-text { padding: 0 1; height: auto; color: $text-muted; }
    ChatScreen #recall-list { height: 1fr; border: none; background: transparent; }
    ChatScreen .user { color: $accent; margin-top: 1; }
    ChatScreen .assistant { margin-bottom: 1; }
    ChatScreen .assistant:focus { background: $accent 15%; }  /* ($boost is transparent in some themes) */
    ChatScreen #status { height: auto; color: $text-muted; padding: 0 1; }
    ChatScreen .hint { color: $text-muted; }
    """

    def __init__(self, vault: Vault, status: Status | None = None) -> None:
        super().__init__(vault, status)
        self.provider = None
        self.health = None
        self.chat: ChatSession | None = None
        self.about: str | None = None  # a note the next messages ask about
        self._about_title = ""
        self._unanswered: tuple[list[dict[str, str]], Reply] | None = None  # a reply that failed or was stopped
        self._replying: tuple[list[dict[str, str]], Reply, list[str]] | None = None  # the reply being written
        self._recall_targets: list[tuple[str, str, str]] = []  # (kind, source, where) of each recall row
        self._sessions: list[str] = []  # the names in the sessions list

    def compose(self) -> ComposeResult:
        yield self.pane_bar()
        with Horizontal():
            yield ListView(id="sessions")
            with Vertical(id="conversation"):
                yield VerticalScroll(id="transcript")
                yield Static("", id="status")
                yield MessageBox(placeholder=PLACEHOLDER, id="message")
            with Vertical(id="recall"):
                yield Static(RECALL_HINT, id="recall-text")
                yield OptionList(id="recall-list")
        yield self.status_bar()
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#sessions").border_title = "Sessions"
        self.query_one("#transcript").border_title = "Chat"
        self.query_one("#recall").border_title = "Recall"
        self.call_later(self.load_sessions)
        self.open_session(new_session_id())  # a message starts a new session unless one is picked in the list
        self.set_focus(self.query_one("#message", Input))

    # -- where we are ---------------------------------------------------------------------------
    @property
    def location_uri(self) -> str | None:
        return self.about

    @property
    def unsent(self) -> bool:
        return bool(self.query_one("#message", Input).value.strip())

    async def show_location(self, uri: str | None) -> None:
        """With a note: the next messages ask about it; without: plain chat again."""
        if not uri:
            self._ask_about(None)
        else:
            try:
                title = self.vault.title(self.vault.read_note(uri))
            except MemlinkError as exc:  # deleted since: plain chat
                self.notify(safe_markup(exc), severity="warning")
                self._ask_about(None)
                self.set_focus(self.query_one("#message", Input))
                return
            self._ask_about(uri, title)
        self.set_focus(self.query_one("#message", Input))

    def _ask_about(self, uri: str | None, title: str = "") -> None:
        self.about, self._about_title = uri, title
        box = self.query_one("#message", Input)
        if uri:
            box.placeholder = f"Ask about “{printable(title)}”…  (enter sends)"
            self._say_about()
        else:
            box.placeholder = PLACEHOLDER
            if self.health is not None:
                self._provider_ready(self.provider, self.health, getattr(self, "_extractor", None))

    def _say_about(self) -> None:
        """What asking about the note does, with the model there or not."""
        if self.provider is not None:
            given = "the note goes to the model and seeds recall"
        elif self.health is not None:
            given = "no chat model: the answer quotes what your memory holds on it"
        else:  # (the provider is still being checked)
            given = "the note seeds recall"
        self._status(f"asking about [b]{safe_markup(self._about_title)}[/b] — {given}")

    def action_focus_recall(self) -> None:
        """The recall list with the chosen reply's memory (the last reply's when none is
        chosen), at the first item it cites."""
        reply = self._chosen_reply()
        recall = self.query_one("#recall-list", OptionList)
        if reply is None or not (reply.items or reply.about):  # (not another reply's list, left from before)
            recall.clear_options()
            self._recall_targets.clear()
            self.query_one("#recall-text", Static).update(
                "No reply yet." if reply is None else "No memory is kept for this reply: it was given none, or it "
                "was written before replies kept what they were given.")
            return
        self._show_recall(reply)
        cited = [int(n) for n in CITATION.findall(str(reply.render())) if 1 <= int(n) <= len(reply.items)]
        recall.highlighted = (cited[0] if cited else 1) - 1 + (1 if reply.about else 0)
        self.set_focus(recall)

    def _chosen_reply(self) -> Reply | None:
        """The reply in focus, or else the last one."""
        if isinstance(self.focused, Reply):
            return self.focused
        replies = self.query("#transcript Reply")
        return replies.last(Reply) if replies else None

    # -- provider -------------------------------------------------------------------------------
    def on_provider_changed(self, message: ProviderChanged) -> None:
        """The app checked (or switched) the provider: pick it up here."""
        self.check_provider(message.provider, message.health)

    @work(thread=True, exclusive=True, group="chat-provider")
    def check_provider(self, provider: Provider | None, health: Health) -> None:
        from engine.sessions.importer import turn_extractor

        extractor = turn_extractor(self.vault)
        self.app.call_from_thread(self._provider_ready, provider, health, extractor)

    def _provider_ready(self, provider, health, extractor) -> None:
        self.provider, self.health = provider, health
        if self.chat is not None:
            self.chat.provider, self.chat.turn_extractor = provider, extractor
        self._extractor = extractor
        if self.about:
            self._say_about()
        elif provider is None:
            self._status(f"[b]No chat model:[/b] {safe_markup(health.summary)}. Answers quote your memory with "
                         f"citations; browsing, search, import and extraction keep working.")
        else:
            self._status(f"chat model: {safe_markup(health.provider)}")

    def _status(self, text: str) -> None:
        self.query_one("#status", Static).update(text)

    # -- sessions -------------------------------------------------------------------------------
    async def load_sessions(self) -> None:
        """The session logs in the vault (and the one begun here, its log not written yet),
        the list's cursor kept on its session."""
        folder = self.vault.root / "sessions"
        names = {p.stem for p in folder.glob("*.jsonl")} if folder.is_dir() else set()
        if self.chat is not None and self.chat.session in self._sessions:
            names.add(self.chat.session)
        if sorted(names) == self._sessions:
            return
        self._sessions = sorted(names)
        view = self.query_one("#sessions", ListView)
        item = view.highlighted_child
        await view.clear()
        await view.extend(_session_row(name) for name in self._sessions)
        if item is not None and item.name in self._sessions:
            view.index = self._sessions.index(item.name)
        self._mark_open()

    async def on_vault_changed(self, _message: VaultChanged) -> None:
        """A session log was written (here, or elsewhere: `memlink import-chat`)."""
        await self.load_sessions()

    def _list_session(self, name: str) -> None:
        """A session just begun, in the list at once (its log is being written)."""
        if name not in self._sessions:
            self._sessions.append(name)
            self.query_one("#sessions", ListView).append(_session_row(name))
        self._mark_open()

    def _mark_open(self) -> None:
        """Mark the session shown in the list: the cursor there is only where the list is."""
        for item in self.query_one("#sessions", ListView).children:
            item.set_class(self.chat is not None and item.name == self.chat.session, "-open")

    def action_focus_sessions(self) -> None:
        """The session list, at the session shown."""
        sessions = self.query_one("#sessions", ListView)
        names = [item.name for item in sessions.children]
        if self.chat is not None and self.chat.session in names:
            sessions.index = names.index(self.chat.session)
        self.set_focus(sessions)

    @on(ListView.Selected, "#sessions")
    def _picked(self, event: ListView.Selected) -> None:
        if event.item.name:
            self.open_session(event.item.name)
            self.set_focus(self.query_one("#message", Input))

    def open_session(self, session: str, at: str = "") -> None:
        """Show ``session``'s conversation, scrolled to the message with id ``at`` (else its end)."""
        self._reading: str | None = None  # (_open: the conversation a past turn was opened from)
        if self.is_mounted and getattr(self, "about", None):
            self._ask_about(None)  # a note asked about belongs to the conversation it was asked in
        self.chat = ChatSession(self.vault, session, self.provider, getattr(self, "_extractor", None))
        self._unsaved = self._unanswered = None  # (ctrl+g and ctrl+y act on the conversation shown)
        if self.is_mounted:  # what recall showed belongs to the conversation it was for
            self.query_one("#recall-text", Static).update(RECALL_HINT)
            self.query_one("#recall-list", OptionList).clear_options()
            self._recall_targets.clear()
        transcript = self.query_one("#transcript", VerticalScroll)
        transcript.remove_children()
        target = None
        events = read_events(self.vault, session)
        turns = project_turns(session, events, final=True)  # an unanswered message shows too
        if not turns:
            transcript.mount(Static(NEW_SESSION, classes="hint"))
        last: Reply | None = None  # (the children removed above may still be there until the next refresh)
        for turn, given in zip(turns, given_items(turns, events), strict=True):
            for message in turn.asked:  # (a chat between people: each message names its sender)
                you = f"[b]{safe_markup(message.speaker)}[/b] (you)" if message.speaker else "[b]you[/b]"
                shown: Static = Static(f"{you}  {safe_markup(message_text(message))}", classes="user")
                transcript.mount(shown)
                target = shown if message.key == at else target
            for message in turn.answered:
                who = f"[b]{safe_markup(message.speaker)}[/b]  " if message.speaker else ""
                shown = Reply(who + safe_markup(message_text(message)), turn=turn.source_ids[0])
                if given and not message.speaker:  # (the memory it was given: its [n] open it, ctrl+r lists it)
                    shown.items = given
                    shown.show(message_text(message))
                transcript.mount(shown)
                target = shown if message.key == at else target
                last = shown
        transcript.border_title = f"Chat · {safe_markup(session)}"
        self._mark_open()
        if last is not None and last.items and self.is_mounted:  # (the last reply's memory in the recall pane, as then)
            self._show_recall(last)
        # After the refresh: the new messages must be laid out before the end (or the turn) is known.
        if target is None:
            transcript.call_after_refresh(transcript.scroll_end, animate=False)
        else:
            transcript.call_after_refresh(transcript.scroll_to_center, target, animate=False)

    def action_new_session(self) -> None:
        self.open_session(new_session_id())
        self.set_focus(self.query_one("#message", Input))

    # -- talking ----------------------------------------------------------------------------------
    @on(Input.Submitted, "#message")
    def _send(self, event: Input.Submitted) -> None:
        text = printable(event.value).strip()  # (what a paste's escapes leave: the words)
        if not text or self.chat is None:
            return
        if self._replying_workers():  # (two replies at once would interleave in the log: the message stays typed)
            self._status("a reply is being written: it answers first (esc stops it); then enter sends this")
            return
        if self._reading is not None:  # (a past session opened from a citation: read, not continued)
            self.open_session(self._reading)
        event.input.value = ""
        self._list_session(self.chat.session)
        transcript = self.query_one("#transcript", VerticalScroll)
        for hint in transcript.query(".hint"):
            hint.remove()
        transcript.mount(Static(f"[b]you[/b]  {safe_markup(text)}", classes="user"))
        answer = Reply("…")
        transcript.mount(answer)
        transcript.scroll_end(animate=False)
        self.talk(text, answer)

    @work(thread=True, group="chat")
    def talk(self, text: str, answer: Reply) -> None:
        chat = self.chat
        assert chat is not None  # _send() talks only in an open session
        about = self.about
        if about and not self.vault.exists(about):  # deleted since: plain chat, and say so
            self.app.call_from_thread(self._ask_about, None)
            self.app.call_from_thread(self.notify, f"{safe_markup(about)} no longer exists; asking without it", severity="warning")
            about = None
        try:
            messages = chat.prepare(text, about=about)
        except MemlinkError as exc:
            self.app.call_from_thread(answer.update, f"[red]{safe_markup(str(exc))}[/red]")
            return
        asked = project_turns(chat.session, read_events(self.vault, chat.session), final=True)
        answer.items, answer.about, answer.turn = chat.last_context.items, about, asked[-1].source_ids[0] if asked else ""
        self.app.call_from_thread(self._show_recall, answer)
        self._reply(chat, messages, answer)

    def _reply(self, chat: ChatSession, messages: list[dict[str, str]], answer: Reply) -> None:
        """Stream the reply into ``answer`` piece by piece (in the chat worker). A reply
        that fails or is stopped (escape) is not logged; ctrl+y asks again."""
        from textual.worker import get_current_worker

        worker = get_current_worker()
        parts: list[str] = []
        transcript = self.query_one("#transcript", VerticalScroll)
        self._replying = (messages, answer, parts)
        if worker.is_cancelled:  # stopped before the model was asked
            self._unanswered, self._replying = (messages, answer), None
            self.app.call_from_thread(answer.update, "[dim](stopped; ctrl+y asks again)[/dim]")
            return
        try:
            for piece in chat.reply(messages, stopped=lambda: worker.is_cancelled):
                if worker.is_cancelled:
                    return  # escape said so already (action_stop_or_back); the reply is not logged
                parts.append(piece)
                self.app.call_from_thread(answer.show, "".join(parts))
                self.app.call_from_thread(transcript.scroll_end, animate=False)
        except LLMError as exc:
            if worker.is_cancelled:
                return
            self._unanswered = (messages, answer)
            shown = "".join(parts) + "\n" if parts else ""
            self.app.call_from_thread(answer.show, shown, f"[red]{safe_markup(str(exc))}[/red]  [dim](ctrl+y asks again)[/dim]")
            return
        finally:
            self._replying = None
        if worker.is_cancelled:
            return
        self._unanswered = None
        self.app.call_from_thread(transcript.scroll_end, animate=False)
        def extracted(report) -> None:  # (the turn memory is in the log either way: a closed app is not told)
            try:
                self.app.call_from_thread(self._extracted, report)
            except RuntimeError:  # (the app closed meanwhile: no app to find, or not running)
                pass

        thread = chat.extract_in_background(extracted)
        self.post_message(ExtractionStarted(thread))  # the app counts it in the status line's queue
        if chat.session not in self._sessions:
            self.app.call_from_thread(self.load_sessions)  # type: ignore[arg-type]  # textual's typing infers Never for an async callback

    def _replying_workers(self) -> list:
        """The workers writing a reply now (a question, or one asked again)."""
        return [w for w in self.workers if w.group in ("chat", "chat-retry") and not w.is_finished]

    async def action_stop_or_back(self) -> None:
        """Escape: stop the reply being written, or (none) go back."""
        replying = self._replying_workers()
        if replying:
            for w in replying:
                w.cancel()
            if self._replying is not None:  # said now: the model may not send its next piece for a while
                messages, answer, parts = self._replying
                self._unanswered = (messages, answer)
                answer.show("".join(parts), "  [dim](stopped; ctrl+y asks again)[/dim]")
            return
        if self._reading is not None:  # (a past conversation opened from a citation: back to yours)
            self.open_session(self._reading)
            self.set_focus(self.query_one("#message", Input))
            return
        await self.app.run_action("back")

    def action_retry(self) -> None:
        """Ask the model again for the last reply that failed or was stopped."""
        if self._unanswered is None or self.chat is None:
            self.notify("No failed or stopped reply to ask again.", timeout=3)
            return
        messages, answer = self._unanswered
        answer.update("…")
        self._retry(self.chat, messages, answer)

    @work(thread=True, exclusive=True, group="chat-retry")
    def _retry(self, chat: ChatSession, messages: list[dict[str, str]], answer: Reply) -> None:
        self._reply(chat, messages, answer)

    def _extracted(self, report) -> None:
        failed = str(report) if isinstance(report, Exception) else "; ".join(getattr(report, "failed", []) or [])
        if failed and self.chat is not None:
            self._unextracted = self.chat.session
            self.notify(f"turn memory not updated: {safe_markup(failed)} — ctrl+g extracts it with the rules provider",
                        severity="warning", timeout=10)

    _unextracted: str | None = None  # a session whose last extraction failed

    def action_extract_with_rules(self) -> None:
        """ctrl+g: save what the model failed to save (a commit, a reply), else extract the
        turns a failed extraction left, with the zero-LLM rules."""
        if self._unsaved is not None:
            self._status("saving it to memory with the rules provider…")
            self._save(*self._unsaved, rules=True)
        elif self._unextracted is None:
            self.notify("No failed save or extraction to retry.", timeout=3)
        else:
            self._extract_with_rules(self._unextracted)

    @work(thread=True, exclusive=True, group="commit")
    def _extract_with_rules(self, session: str) -> None:
        from engine.sessions.importer import extract_pending, rules_extractor

        locks = session_locks(self.vault)
        try:
            with locks.hold(session):
                report = extract_pending(self.vault, [session], rules_extractor(self.vault))
        except MemlinkError as exc:
            self.app.call_from_thread(self.notify, f"rules extraction failed: {safe_markup(exc)}", severity="error")
            return
        if report.failed:
            self.app.call_from_thread(self.notify, f"still not extracted: {safe_markup('; '.join(report.failed))}",
                                      severity="warning")
            return
        self._unextracted = None
        self.app.call_from_thread(self.notify, f"turn memory updated with the rules: {counted(report.extracted, 'turn')}")

    def _show_recall(self, reply: Reply) -> None:
        """Exactly what the model was given for ``reply`` (or, without a model, what memory
        found, which the answer quotes from), numbered as the reply cites it; enter opens
        the note or the turn."""
        items = reply.items
        given = "given to the model" if self.provider is not None else "found (no model)"  # (the answer quotes those sharing its words)
        head = (f"{counted(len(items), 'memory item')} {given}" if items
                else "Nothing in your memory was relevant to this message.")
        self.query_one("#recall-text", Static).update(head + "  [dim](ctrl+r, enter opens)[/dim]")
        options, self._recall_targets = [], []
        if reply.about:
            options.append(Option(f"[b]note asked about[/b]\n{safe_path(reply.about)}"))
            self._recall_targets.append(("note", reply.about, ""))
        for n, item in enumerate(items, 1):
            where = safe_path(item.cite) if item.kind == "note" else safe_markup(item.cite)
            options.append(Option(f"[b]\\[{n}] {safe_markup(item.title[:80])}[/b]\n[dim]{where}[/dim]\n"
                                  f"[i]{safe_markup(item.route)}[/i]\n{safe_markup(item.text[:SNAPSHOT_TEXT])}"))
            self._recall_targets.append((item.kind, item.source, item.where.split(",")[0].strip()))
        recall = self.query_one("#recall-list", OptionList)
        recall.clear_options()
        recall.add_options(options)

    @on(OptionList.OptionSelected, "#recall-list")
    def _open_recalled(self, event: OptionList.OptionSelected) -> None:
        self._open(*self._recall_targets[event.option_index])

    @on(Reply.Cited)
    def _open_cited(self, event: Reply.Cited) -> None:
        item = event.reply.items[event.n - 1]
        self._open(item.kind, item.source, item.where.split(",")[0].strip())

    def _open(self, kind: str, target: str, at: str) -> None:
        """A note in the browser; a turn in its session, scrolled to it."""
        if kind == "note":
            self.go("browser", target)
        else:  # (to read: the next message goes to the conversation it was opened from)
            try:
                there = self.vault.exists(session_uri(target))
            except MemlinkError as exc:
                there, why = False, str(exc)
            else:
                why = f"the conversation {target} is no longer in the vault"
            if not there:
                self.notify(safe_markup(why), title="Cannot open the turn", severity="warning")
                return
            back = self._reading or (self.chat.session if self.chat is not None else None)
            self.open_session(target, at=at)
            if back is not None and back != target:
                self._reading = back
                self.query_one("#transcript", VerticalScroll).border_title = (
                    f"Chat · read only · {safe_markup(target)}: a message or escape goes back to your conversation")
            self.set_focus(self.query_one("#message", Input))

    # -- commit -----------------------------------------------------------------------------------
    async def action_commit(self) -> None:
        if self.chat is None:
            return
        await keys_taken(self.query_one("#message", Input))  # (a message typed and sent just before: sent first)
        if self._replying_workers():
            self._status("an answer is still being written: ctrl+s saves the session once it is there")
            return
        if not self.vault.exists(session_uri(self.chat.session)):
            self._status("nothing to save yet: this session has no message")
            return
        self._status("committing the session to memory…")
        self._save(self.chat.session, None)

    def action_save_reply(self) -> None:
        """ctrl+o: the memories of the chosen reply's turn alone (the last reply's when none
        is chosen)."""
        reply = self._chosen_reply()
        if self.chat is None or reply is None or not reply.turn:
            self.notify("No reply to save yet.", timeout=3)
            return
        self._status("saving this reply's turn to memory…")
        self._save(self.chat.session, reply.turn)

    _unsaved: tuple[str, str | None] | None = None  # a save the model failed: (session, turn or None: the session)

    @work(thread=True, exclusive=True, group="commit")
    def _save(self, session: str, turn: str | None, rules: bool = False) -> None:
        """Save one reply's turn (``turn``) or the session's new turns to memory; with
        ``rules``, extracted by the zero-LLM rules (ctrl+g, after the model failed)."""
        from engine.extract.loop import ExtractionRejected
        from engine.extract.rules import RulesExtractor
        from engine.llm import LLMError
        from engine.sessions.commit import commit_session, commit_turn

        extractor = RulesExtractor() if rules else None
        failed = "saving the reply failed" if turn else "commit failed"
        try:
            report = commit_turn(self.vault, session, turn, extractor) if turn else commit_session(self.vault, session, extractor)
        except MemlinkError as exc:
            again, self._unsaved = "", None
            if isinstance(exc, LLMError | ExtractionRejected) and not rules:  # (the model: the rules can save it)
                self._unsaved, again = (session, turn), " — ctrl+g saves it with the rules provider"
            self.app.call_from_thread(self._status, f"[red]{failed}: {safe_markup(str(exc))}[/red]{again}")
            return
        self._unsaved = None
        if turn:
            self._say_saved(report, "saved one reply", "Saved one reply", "this reply was saved already")
        else:
            self._say_saved(report, "committed", f"Committed {session}", "no turns since the last save")

    def _say_saved(self, report: RunReport | None, done: str, title: str, none: str) -> None:
        """Say what a save wrote (from its worker): the counts, or why nothing was new."""
        if report is None:
            said, title = f"nothing new to save: {none}", "Nothing new to save"
        elif not (report.created or report.changed or report.links_added):
            found = "what it says is in memory already" if report.unchanged else "no memories found in it"
            said, title = f"nothing new to save: {found}", "Nothing new to save"
        else:
            said = f"{done}: {report.summary()}"
        self.app.call_from_thread(self._status, safe_markup(said))
        self.app.call_from_thread(self.notify, safe_markup(said), title=safe_markup(title))
