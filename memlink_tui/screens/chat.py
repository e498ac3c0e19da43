"""The chat pane: sessions on the left, the conversation in the middle (replies stream
from Ollama), and on the right what recall injected and why. ctrl+n starts a session,
ctrl+s commits the session into memory notes. With no Ollama the pane says why and how
to start it; everything else keeps working."""

from __future__ import annotations

from rich.markup import escape
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Header, Input, ListItem, ListView, Label, Static

from engine import MemlinkError, Vault
from engine.llm import LLMError
from engine.sessions.chat import ChatSession, new_session_id
from engine.sessions.log import project_turns, read_events


class ChatScreen(Screen):
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("ctrl+n", "new_session", "New session"),
        Binding("ctrl+s", "commit", "Commit to memory", priority=True),
    ]
    DEFAULT_CSS = """
    ChatScreen #sessions { width: 30; border: round $panel; }
    ChatScreen #sessions:focus-within { border: round $accent; }
    ChatScreen #conversation { width: 2fr; }
    ChatScreen #transcript { height: 1fr; border: round $panel; padding: 0 1; }
    ChatScreen #recall { width: 1fr; border: round $panel; padding: 0 1; }
    ChatScreen .user { color: $accent; margin-top: 1; }
    ChatScreen .assistant { margin-bottom: 1; }
    ChatScreen #status { height: auto; color: $text-muted; padding: 0 1; }
    """

    def __init__(self, vault: Vault):
        super().__init__()
        self.vault = vault
        self.provider = None
        self.health = None
        self.chat: ChatSession | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal():
            yield ListView(id="sessions")
            with Vertical(id="conversation"):
                yield VerticalScroll(id="transcript")
                yield Static("", id="status")
                yield Input(placeholder="Message…  (enter sends)", id="message")
            yield VerticalScroll(Static("Recall shows here what past turns were given to the model, and why.", id="recall-text"), id="recall")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#sessions").border_title = "Sessions"
        self.query_one("#transcript").border_title = "Chat"
        self.query_one("#recall").border_title = "Recall"
        self.load_sessions()
        self.check_provider()
        self.open_session(self._sessions[-1] if self._sessions else new_session_id())
        self.set_focus(self.query_one("#message", Input))

    # -- provider -------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="chat-provider")
    def check_provider(self) -> None:
        from engine.llm.select import provider_status
        from engine.sessions.importer import turn_extractor

        provider, health = provider_status(self.vault.config.llm)
        extractor = turn_extractor(self.vault)
        self.app.call_from_thread(self._provider_ready, provider if health.ok else None, health, extractor)

    def _provider_ready(self, provider, health, extractor) -> None:
        self.provider, self.health = provider, health
        if self.chat is not None:
            self.chat.provider, self.chat.turn_extractor = provider, extractor
        self._extractor = extractor
        if provider is None:
            self._status(f"[b]No chat model:[/b] {escape(health.detail)}. Browsing, search, import and memory "
                         f"extraction keep working.")
        else:
            self._status(f"chat model: {escape(health.provider)}")
        self.sub_title = f"LLM: {health.provider}"

    def _status(self, text: str) -> None:
        self.query_one("#status", Static).update(text)

    # -- sessions -------------------------------------------------------------------------------
    def load_sessions(self) -> None:
        folder = self.vault.root / "sessions"
        self._sessions = sorted(p.stem for p in folder.glob("*.jsonl")) if folder.is_dir() else []
        view = self.query_one("#sessions", ListView)
        view.clear()
        for name in self._sessions:
            view.append(ListItem(Label(name), name=name))

    @on(ListView.Selected, "#sessions")
    def _picked(self, event: ListView.Selected) -> None:
        if event.item.name:
            self.open_session(event.item.name)
            self.set_focus(self.query_one("#message", Input))

    def open_session(self, session: str) -> None:
        self.chat = ChatSession(self.vault, session, self.provider, getattr(self, "_extractor", None))
        transcript = self.query_one("#transcript", VerticalScroll)
        transcript.remove_children()
        for turn in project_turns(session, read_events(self.vault, session)):
            transcript.mount(Static(f"[b]you[/b]  {escape(turn.question['content'])}", classes="user"))
            transcript.mount(Static(escape(turn.answer["content"]), classes="assistant"))
        transcript.border_title = f"Chat · {session}"
        transcript.scroll_end(animate=False)

    def action_new_session(self) -> None:
        self.open_session(new_session_id())
        self.set_focus(self.query_one("#message", Input))

    # -- talking ----------------------------------------------------------------------------------
    @on(Input.Submitted, "#message")
    def _send(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if not text or self.chat is None:
            return
        event.input.value = ""
        transcript = self.query_one("#transcript", VerticalScroll)
        transcript.mount(Static(f"[b]you[/b]  {escape(text)}", classes="user"))
        answer = Static("…", classes="assistant")
        transcript.mount(answer)
        transcript.scroll_end(animate=False)
        self.talk(text, answer)

    @work(thread=True, group="chat")
    def talk(self, text: str, answer: Static) -> None:
        chat = self.chat
        try:
            messages = chat.prepare(text)
        except MemlinkError as exc:
            self.app.call_from_thread(answer.update, f"[red]{escape(str(exc))}[/red]")
            return
        self.app.call_from_thread(self._show_recall, chat)
        parts: list[str] = []
        try:
            for piece in chat.reply(messages):
                parts.append(piece)
                self.app.call_from_thread(answer.update, escape("".join(parts)))
        except LLMError as exc:
            self.app.call_from_thread(answer.update, f"[red]{escape(str(exc))}[/red]")
            return
        self.app.call_from_thread(self.query_one("#transcript", VerticalScroll).scroll_end, animate=False)
        chat.extract_in_background(lambda report: self.app.call_from_thread(self._extracted, report))
        if chat.session not in self._sessions:
            self.app.call_from_thread(self.load_sessions)

    def _extracted(self, report) -> None:
        if isinstance(report, Exception):
            self.notify(f"turn memory not updated: {report}", severity="warning")

    def _show_recall(self, chat: ChatSession) -> None:
        hits = chat.last_recall
        if not hits:
            text = "Nothing from past conversations was relevant to this message."
        else:
            lines = []
            for h in hits:
                lines.append(f"[b]{escape(h.session)}[/b] [dim]{escape(', '.join(h.sources))}[/dim]\n"
                             f"[i]{escape('; '.join(h.routes))}[/i]\nQ: {escape(h.question[:200])}\nA: {escape(h.answer[:200])}\n")
            text = "\n".join(lines)
        self.query_one("#recall-text", Static).update(text)

    # -- commit -----------------------------------------------------------------------------------
    def action_commit(self) -> None:
        if self.chat is not None:
            self._status("committing the session to memory…")
            self.commit(self.chat.session)

    @work(thread=True, exclusive=True, group="commit")
    def commit(self, session: str) -> None:
        from engine.extract.inputs import commit_session

        try:
            report = commit_session(self.vault, session)
        except MemlinkError as exc:
            self.app.call_from_thread(self._status, f"[red]commit failed: {escape(str(exc))}[/red]")
            return
        text = "nothing new to commit" if report is None else report.summary()
        self.app.call_from_thread(self._status, f"commit: {escape(text)}")
        self.app.call_from_thread(self.notify, text, title=f"Committed {session}")
