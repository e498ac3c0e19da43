"""The memlink Textual app. Thin: the five panes are Textual modes (each keeps its own
state while you are elsewhere), the app owns navigation history, the status line
(provider, vault, index, queue), themes and the user's settings. Panes talk to it
through the messages in messages.py; it answers a pane with a message too."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from functools import partial
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, cast

from textual import work
from textual.app import App
from textual.binding import Binding
from textual.message import Message
from textual.reactive import reactive
from textual.screen import ModalScreen, Screen

from engine import MemlinkError, Vault
from engine.model.text import counted, printable
from engine.storage.atomic import disk_full
from widgets.safe import safe_markup
from widgets.status_bar import Status

from .commands import ActionCommands, NoteCommands, ProviderCommands, ThemeCommands
from .messages import (
    CatalogSynced,
    ExtractionStarted,
    Linted,
    Navigate,
    NoteChanged,
    NoteFocused,
    NotesShown,
    ProviderChanged,
    StatusChanged,
    VaultChanged,
)
from .seen import SeenReports
from .settings import SettingsFile
from .theming import DEFAULT_THEME, load_themes

if TYPE_CHECKING:
    from textual.notifications import SeverityLevel

    from .screens.pane import Pane

PANE_CLASSES = {
    "browser": (".screens.browser", "BrowserScreen"),
    "chat": (".screens.chat", "ChatScreen"),
    "graph": (".screens.graph", "GraphScreen"),
    "reports": (".screens.reports", "ReportScreen"),
    "lint": (".screens.lint", "LintScreen"),
}
PANES = tuple(PANE_CLASSES)
BACKGROUND_GROUPS = {"index", "dream", "commit", "import", "inbox", "lint"}
RUNNING_WORDS = {"index": "indexing", "dream": "dreaming", "commit": "committing", "import": "importing", "inbox": "importing",
                 "lint": "linting"}
# The provider is checked at start and on request; this timer notices Ollama starting or
# stopping meanwhile (docs/DESIGN.md, "Providers").
PROVIDER_RECHECK_SECONDS = 60
INBOX_SECONDS = 60  # how often the inbox folder (ingest.inbox) is looked at


def _digest_counts(path: Path) -> tuple[int, int] | None:
    """(errors, contradictions) from the lint digest (`dashboards/digest.json`), if any."""
    import json

    try:
        health = json.loads(path.read_text(encoding="utf-8"))["health"]
        return int(health["errors"]), int(health["checks"].get("contradictions", 0))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _vault_file(root: Path, _change: object, path: str) -> bool:
    """Files whose change the panes show: notes, link sidecars and logs, chat session logs;
    not derived state (`.memlink/`), hidden folders, temp files or generated dashboards."""
    from engine.model.links import SIDECAR
    from engine.storage.atomic import TMP_SUFFIX
    from engine.storage.sidecars import SIDECAR_LOG
    from engine.storage.walk import NON_NOTE_DIRS

    try:
        parts = Path(path).relative_to(root).parts
    except ValueError:
        return False
    if _session_log(root, path):
        return True
    if not parts or parts[0] in NON_NOTE_DIRS or any(p.startswith(".") for p in parts[:-1]):
        return False
    name = parts[-1]
    if name.endswith(TMP_SUFFIX):
        return False
    return name in (SIDECAR, SIDECAR_LOG) or (name.endswith(".md") and not name.startswith("."))


def _session_log(root: Path, path: str) -> bool:
    """A chat session's log (`sessions/<id>.jsonl`): the chat pane lists them."""
    file = Path(path)
    return file.parent == root / "sessions" and file.suffix == ".jsonl" and not file.name.startswith(".")


def save_crash(error: BaseException) -> Path | None:
    """Write ``error``'s traceback to `crash-<time>.log` in the data folder; its path, or
    None when it cannot be written (the traceback still prints on exit)."""
    import datetime as dt
    import traceback

    from .paths import data_dir

    path = data_dir() / f"crash-{dt.datetime.now().strftime('%Y%m%d-%H%M%S-%f')}.log"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(traceback.format_exception(error)), encoding="utf-8")
    except OSError:
        return None
    return path


@dataclass(frozen=True)
class Location:
    pane: str
    uri: str | None = None


class History:
    """Back/forward across panes and notes, like a browser's."""

    def __init__(self, limit: int = 200):
        self.back: list[Location] = []
        self.forward: list[Location] = []
        self.limit = limit

    def visit(self, here: Location) -> None:
        if not self.back or self.back[-1] != here:
            self.back.append(here)
            del self.back[: -self.limit]
        self.forward.clear()

    def go_back(self, here: Location, alive=lambda _: True) -> Location | None:
        """The previous location still there (notes deleted since are skipped)."""
        return self._step(self.back, self.forward, here, alive)

    def go_forward(self, here: Location, alive=lambda _: True) -> Location | None:
        return self._step(self.forward, self.back, here, alive)

    @staticmethod
    def _step(source: list[Location], other: list[Location], here: Location, alive) -> Location | None:
        while source:
            target = source.pop()
            if alive(target) and target != here:
                other.append(here)
                return target
        return None


class MemlinkApp(App):
    TITLE = "memlink"
    CSS_PATH = str(resources.files("themes") / "memlink.tcss")
    # The pane keys are in the pane bar at the top, so the footer keeps to the rest.
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("slash", "search", "Search", key_display="/"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("1", "go('browser')", "Memory", show=False),
        Binding("2,c", "go('chat')", "Chat", show=False),
        Binding("3", "go('graph')", "Graph", show=False),
        Binding("4,R", "go('reports')", "Reports", show=False),
        Binding("5,L", "go('lint')", "Lint", show=False),
        Binding("ctrl+left,alt+left", "back", "Back", show=False),
        Binding("ctrl+right,alt+right", "forward", "Forward", show=False),
        Binding("ctrl+t", "next_theme", "Theme", show=False),
    ]
    COMMANDS = App.COMMANDS | {NoteCommands, ActionCommands, ThemeCommands, ProviderCommands}
    # Classes for small terminals (themes/memlink.tcss): side panels shrink.
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (32, "-tall")]

    provider_line: reactive[str] = reactive("LLM: checking…")
    index_state: reactive[str] = reactive("not loaded")
    queue_depth: reactive[int] = reactive(0)

    def __init__(self, vault: Vault | None, *, vault_path: Path | None = None, settings: SettingsFile | None = None):
        super().__init__()
        self.vault = vault
        self.vault_path = vault.root if vault else vault_path
        self.settings = settings or SettingsFile()
        self.history = History()
        self._nav_lock = asyncio.Lock()
        self._provider_generation = 0
        self._index_progress: str | None = None  # set by the index worker, shown by a timer
        self.current_note: str | None = None
        self.provider = None
        self.health = None
        self.panes: dict[str, Pane] = {}
        self._extracting: list[threading.Thread] = []  # chat's turn extractions, counted in the queue
        self._inbox_told: set[str] = set()  # inbox failures and hints said once already
        self.memlink_themes, self._theme_problems = load_themes()
        for theme in self.memlink_themes:
            self.register_theme(theme)

    # -- start ----------------------------------------------------------------------------------
    def on_mount(self) -> None:
        wanted = self.settings.settings.theme or DEFAULT_THEME
        self.theme = wanted if wanted in self.available_themes else DEFAULT_THEME
        self._applied_theme = self.theme  # what startup applied: not a choice to save
        self.theme_changed_signal.subscribe(self, self._remember_theme)
        for problem in self._theme_problems + ([self.settings.error] if self.settings.error else []):
            self.notify(safe_markup(problem), title="Settings", severity="warning", timeout=10)
        if self.vault is None:
            from .screens.first_run import FirstRunScreen

            assert self.vault_path is not None, "without a vault the app is given the folder to make one in"
            self.push_screen(FirstRunScreen(self.vault_path), self._first_run_done)
        else:
            self.start(self.vault)

    def _first_run_done(self, vault: Vault | None) -> None:
        if vault is None:
            self.exit()
        else:
            self.start(vault)

    def start(self, vault: Vault) -> None:
        """Open the vault in the panes. The first paint needs only the catalog; the search
        index and the provider check load in workers."""
        self.vault, self.vault_path = vault, vault.root
        self.title = printable(f"memlink — {vault.config.name}")
        overrides = {k: v for k, v in (("provider", self.settings.settings.llm_provider),
                                       ("model", self.settings.settings.llm_model)) if v}
        if overrides:
            vault.config.llm = vault.config.llm.model_copy(update=overrides)
        for pane in PANES:
            self.add_mode(pane, partial(self._make_pane, pane))
        self.switch_mode("browser")
        # Background loading waits for the note tree (browser calls notes_shown): worker
        # threads importing numpy/hnswlib/ollama hold the GIL while the UI paints.
        self.set_timer(3, self.notes_shown)  # an empty vault, or a slow first catalog
        self.set_interval(30, self.checkpoint)
        self.set_interval(0.5, self._count_queue)
        self.set_interval(PROVIDER_RECHECK_SECONDS, self.recheck_provider)
        if vault.config.ingest.inbox and not vault.read_only:
            self.set_timer(5, self.import_inbox)
            self.set_interval(INBOX_SECONDS, self.import_inbox)
        self.watch_vault()

    @property
    def opened(self) -> Vault:
        """The vault the panes show, once start() has opened it."""
        assert self.vault is not None, "the app has started on a vault"
        return self.vault

    def _make_pane(self, pane: str) -> Pane:
        # Each pane's module is imported when first shown: chat pulls in the Ollama
        # client, which the first paint should not wait for.
        import importlib

        module, name = PANE_CLASSES[pane]
        cls = getattr(importlib.import_module(module, __package__), name)
        screen = cls(self.vault, status=self._status())
        self.panes[pane] = screen
        if pane == "chat" and self.health is not None:  # handled once the pane is mounted
            screen.post_message(ProviderChanged(self.provider, self.health))
        return screen

    def _tell(self, pane: str, message: Message) -> None:
        """Send a pane a message, if it has been opened (an unopened one reads fresh)."""
        screen = self.panes.get(pane)
        if screen is not None:
            screen.post_message(message)

    # -- messages from the panes ----------------------------------------------------------------
    def on_navigate(self, message: Navigate) -> None:
        self.go(message.pane, message.uri)

    def on_notes_shown(self, _message: NotesShown) -> None:
        self.notes_shown()

    def on_catalog_synced(self, _message: CatalogSynced) -> None:
        self.sync_index()
        self.count_badges()

    def on_note_changed(self, message: NoteChanged) -> None:
        self._tell("browser", VaultChanged(message.uri))
        self.count_badges()

    def on_linted(self, message: Linted) -> None:
        self.lint_counts = (message.errors, message.contradictions)
        self.count_badges()

    def on_note_focused(self, message: NoteFocused) -> None:
        self.current_note = message.uri

    def on_extraction_started(self, message: ExtractionStarted) -> None:
        self._extracting.append(message.thread)
        self._count_queue()

    # -- navigation -----------------------------------------------------------------------------
    def location(self) -> Location | None:
        if self.current_mode not in PANES or not self.screen_stack:
            return None
        from .screens.pane import Pane

        base = self.screen_stack[0]  # every pane says where it is through Pane.location_uri
        return Location(self.current_mode, base.location_uri if isinstance(base, Pane) else None)

    def go(self, pane: str, uri: str | None = None, *, record: bool = True, then=None) -> None:
        """Show ``pane`` (at note ``uri`` when given), remembering where we were."""
        if self.vault is None:
            return
        if pane == "graph":
            uri = uri or self.current_note  # None: the graph starts at the best-linked note
        self.run_worker(self._navigate("go", Location(pane, uri), record, then), group="navigate")

    async def _navigate(self, how: str, target: Location | None = None, record: bool = True, then=None) -> None:
        """One navigation at a time, in order: "here" is read when the previous one has
        finished, and a step is recorded only if the screen really moved."""
        async with self._nav_lock:
            here = self.location()
            if how == "back":
                target = self.history.go_back(here, alive=self._alive) if here else None
                if target is None:
                    if here is not None and here.pane != "browser":
                        target, how = Location("browser"), "home"  # the browser is home; not a step
                    else:
                        self.notify("Nothing to go back to.", timeout=2)
                        return
            elif how == "forward":
                target = self.history.go_forward(here, alive=self._alive) if here else None
                if target is None:
                    return
            assert target is not None  # given with "go"; found for "back" and "forward"
            try:
                await self._show(target, then)
            except Exception as exc:  # a pane that cannot show must not take the app down
                self.notify(safe_markup(str(exc).splitlines()[0] if str(exc) else type(exc).__name__),
                            title=f"Cannot open {target.pane}", severity="error")
                return
            blank = here is not None and here.pane == "browser" and here.uri is None  # nothing open yet
            if how == "go" and record and here is not None and not blank and self.location() != here:
                self.history.visit(here)

    def _alive(self, location: Location) -> bool:
        """Browser and graph steps need their note; other panes are worth going back to."""
        return location.uri is None or location.pane not in ("browser", "graph") or self.opened.exists(location.uri)

    async def _show(self, target: Location, then=None) -> None:
        while len(self.screen_stack) > 1 and isinstance(self.screen, ModalScreen):
            self.pop_screen()
        if self.current_mode != target.pane:
            await self.switch_mode(target.pane)
            if target.pane == "reports":
                self._seen().mark({e.uri for e in self.opened.catalog.all("report")})  # the new reports are seen now
                self.count_badges()
        screen = cast("Pane", self.screen_stack[0])  # a mode's base screen is its pane
        await screen.show_location(target.uri)
        if target.uri and target.pane in ("browser", "graph"):
            self.current_note = target.uri
        if then is not None:
            then(screen)  # e.g. start a new session once the chat pane is up

    def open_note(self, uri: str) -> None:
        """Show ``uri`` in the memory browser, from wherever the user is."""
        self.go("browser", uri)

    def action_go(self, pane: str) -> None:
        self.go(pane)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """No vault yet (the first run): no search, and the footer offers none."""
        return self.vault is not None or action not in ("search", "go", "back", "forward")

    def action_back(self) -> None:  # type: ignore[override]  # textual runs sync actions too; App types its own async
        if self.vault is not None:
            self.run_worker(self._navigate("back"), group="navigate")

    def action_forward(self) -> None:
        if self.vault is not None:
            self.run_worker(self._navigate("forward"), group="navigate")

    def action_search(self) -> None:
        from .screens.search import SearchScreen

        if self.vault is None or isinstance(self.screen, SearchScreen):
            return

        def chosen(uri: str | None) -> None:
            if uri:
                self.go("browser", uri)

        self.push_screen(SearchScreen(self.vault), chosen)

    def refuse_write(self) -> bool:
        """True (and says why) when the vault cannot be written: a write action stops."""
        if self.vault is None or not self.vault.read_only:
            return False
        self.notify(f"{self.vault.read_only_reason}; nothing was changed", title="Read-only", severity="warning")
        return True

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        # A full disk reads as one plain sentence wherever the error was caught
        # (docs/DESIGN.md, "Read-only vaults and full disks").
        full = disk_full(ValueError(message))
        if full:
            message, title, severity = full, title or "Disk full", "error"
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

    def action_import_file(self) -> None:
        from .screens.importer import ImportScreen

        if self.vault is None or self.refuse_write():
            return

        def done(uri: str | None) -> None:
            self._tell("browser", VaultChanged(uri))
            if uri:
                self.go("browser", uri)

        self.push_screen(ImportScreen(self.vault), done)

    def action_new_session(self) -> None:
        if self.refuse_write():
            return
        self.go("chat", then=lambda chat: chat.action_new_session())

    def action_dream(self) -> None:
        if self.refuse_write():
            return
        self.go("reports", then=lambda reports: reports.action_dream())

    async def action_quit(self) -> None:
        """Quit; while background work runs (a dream, an import, an extraction) or a chat
        message is typed and not sent, ask first."""
        from .screens.link_editor import Confirm

        unsent = [pane.UNSENT for pane in self.panes.values() if pane.is_mounted and pane.unsent]
        if not (self.running or unsent) or self.screen is self._asking_to_quit:  # (quit twice: quit)
            self.exit()
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.exit()

        why = []
        if self.running:
            why.append(f"Still {self.running}: what is written stays; work not finished is picked up the next time.")
        why += [f"{what}: quitting loses it." for what in unsent]
        self._asking_to_quit = Confirm(" ".join(why) + " Quit now?")
        self.push_screen(self._asking_to_quit, answered)

    _asking_to_quit: Screen | None = None  # the confirm quitting asked, while it is up

    def action_help(self) -> None:
        from .screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.screen))

    # -- themes ---------------------------------------------------------------------------------
    def _remember_theme(self, theme) -> None:
        if theme.name == self._applied_theme:
            return
        self._applied_theme = theme.name
        if not self.settings.update(theme=theme.name):
            self.notify(self.settings.error or "settings not saved", severity="warning")

    def get_system_commands(self, screen):
        """Textual's palette commands, less its "Theme" picker (every built-in theme):
        memlink's themes are offered as "Theme: <name>", the same list ctrl+t cycles."""
        for command in super().get_system_commands(screen):
            if command.title != "Theme":
                yield command

    def action_next_theme(self) -> None:
        names = [t.name for t in self.memlink_themes]
        if names:
            i = names.index(self.theme) + 1 if self.theme in names else 0
            self.theme = names[i % len(names)]
            self.notify(f"theme: {self.theme}", timeout=2)

    # -- provider -------------------------------------------------------------------------------
    def set_provider(self, provider: str, model: str | None = None) -> None:
        """Switch the LLM provider (and model) for this app, and remember it."""
        update = {"provider": provider} | ({"model": model} if model else {})
        self.opened.config.llm = self.opened.config.llm.model_copy(update=update)
        if not self.settings.update(llm_provider=provider, **({"llm_model": model} if model else {})):
            self.notify(self.settings.error or "settings not saved", severity="warning")
        self.check_provider()

    def check_provider(self) -> None:
        """Which LLM provider is active and why: in the status line and a notification."""
        self._provider_generation += 1
        self.provider_line = "LLM: checking…"
        self._check_provider(self._provider_generation, self.opened.config.llm)

    @work(thread=True, group="provider")
    def _check_provider(self, generation: int, config, quiet: bool = False) -> None:
        from engine.llm.registry import refresh

        chosen = refresh(config)  # asked for (startup, a switch, the timer): check again
        self.call_from_thread(self._provider_ready, chosen.llm, chosen.health, generation, quiet)

    def recheck_provider(self) -> None:
        """The timer: Ollama may have started or stopped. Says something only on a change."""
        if self.vault is None or self.health is None or any(w.group == "provider" and not w.is_finished for w in self.workers):
            return
        self._check_provider(self._provider_generation, self.vault.config.llm, quiet=True)

    def _provider_ready(self, provider, health, generation: int, quiet: bool = False) -> None:
        if generation != self._provider_generation:
            return  # a newer check (the user switched provider meanwhile) wins
        if quiet and self.health is not None and health.line() == self.health.line():
            return
        self.provider, self.health = provider, health
        self.provider_line = health.line()
        detail = health.summary
        if health.provider == "rules" and self.settings.settings.llm_provider == "rules":
            detail = f"zero-LLM rules provider (chosen in the app, saved in {self.settings.path})"
        severity: SeverityLevel = "information" if health.ok else "warning"
        self.notify(safe_markup(detail), title=safe_markup(f"LLM: {health.provider}"), severity=severity, timeout=6)
        self._tell("chat", ProviderChanged(self.provider, health))

    # -- background work ------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="index")
    def prepare_index(self) -> None:
        """Load and sync the search index off the UI thread, so the first search is quick."""

        def progress(done: int, total: int) -> None:
            # Not call_from_thread: the sync holds the vault lock, and a UI thread waiting
            # for that lock would never run the call. The queue timer shows it instead.
            self._index_progress = f"syncing {done}/{total}"

        self.call_from_thread(setattr, self, "index_state", "loading…")
        try:
            from engine.index import SearchIndex  # (the heavy imports: in the worker, not at start)

            index = SearchIndex.for_vault(self.opened, progress=progress)
        except MemlinkError as exc:
            self.call_from_thread(setattr, self, "index_state", "unavailable")
            self.call_from_thread(self.notify, safe_markup(exc), title="Index unavailable", severity="error")
            return
        self._index_progress = None
        self.call_from_thread(setattr, self, "index_state", f"fresh · {index.status()['notes_indexed']} notes")
        report = index.last_sync
        for notice in report.notices if report else []:
            self.call_from_thread(self.notify, safe_markup(notice), title="Embedding model", severity="warning", timeout=10)
        if report and report.changed:
            self.call_from_thread(
                self.notify, f"indexed {counted(report.changed, 'changed note')} in {report.seconds:.1f}s", timeout=3
            )

    def notes_shown(self) -> None:
        """The first screen with notes is up: now check the LLM provider (once)."""
        self.count_badges()
        if self.health is None and not any(w.group == "provider" for w in self.workers):
            self.check_provider()

    def sync_index(self) -> None:
        """After the browser read the catalog: load the index the first time, later pick
        up edits made outside memlink."""
        from engine.index import SearchIndex  # (loaded by the startup worker by now)

        index = self.vault.peek(SearchIndex) if self.vault else None
        if index is None and self.index_state == "not loaded":
            self.prepare_index()
        elif index is not None:
            self.run_worker(lambda: self._sync(index), thread=True, group="index", exclusive=True)

    def _sync(self, index) -> None:
        self.call_from_thread(setattr, self, "index_state", "syncing…")
        index.sync(progress=lambda d, t: setattr(self, "_index_progress", f"syncing {d}/{t}"))
        self._index_progress = None
        self.call_from_thread(setattr, self, "index_state", f"fresh · {index.status()['notes_indexed']} notes")

    def on_worker_state_changed(self, event) -> None:
        self._count_queue()
        if event.worker.is_finished and event.worker.group in ("dream", "import", "commit"):
            self.vault_changed()  # they wrote notes: the tree, the lists and the counts follow

    # -- live refresh -------------------------------------------------------------------------------
    def vault_changed(self) -> None:
        """Notes changed (this app's work, another process, an editor): the panes that list
        notes re-read them, keeping their cursor; the pane bar recounts once the browser
        has synced the catalog (CatalogSynced)."""
        for pane in ("browser", "reports"):
            self._tell(pane, VaultChanged(None))
        self.count_badges()

    _stop_watching: threading.Event | None = None

    def watch_vault(self) -> None:
        """Watch the vault's files (watchfiles: inotify and its kin, polling where there is
        none): notes, sidecars, link logs and chat session logs written by anything —
        another memlink in a terminal, an editor — refresh the panes within about a second. A daemon thread,
        not a worker: it runs for the app's life (stopped on unmount), and waiting for the
        workers to finish must not wait for it."""
        self._stop_watching = threading.Event()
        threading.Thread(target=self._watch, args=(self.opened.root, self._stop_watching), daemon=True,
                         name="memlink-watch").start()

    def _watch(self, root: Path, stop: threading.Event) -> None:
        from watchfiles import watch

        try:
            for changes in watch(root, watch_filter=partial(_vault_file, root), debounce=700, stop_event=stop,
                                 ignore_permission_denied=True, raise_interrupt=False):
                self._from_watcher(self.files_changed, {path for _change, path in changes})
        except (OSError, RuntimeError) as exc:  # no watcher here (limits, odd filesystems): r still reloads
            self._from_watcher(self.notify, f"live refresh is off: {safe_markup(exc)}; r in the browser re-reads "
                               "the vault", severity="warning", timeout=8)

    def files_changed(self, paths: set[str]) -> None:
        """What the watcher saw: a chat session log written elsewhere (`memlink import-chat`)
        refreshes the chat pane's list; notes and links refresh the panes that list notes."""
        logs = {p for p in paths if _session_log(self.opened.root, p)}
        if logs:
            self._tell("chat", VaultChanged(None))
        if paths - logs:
            self.vault_changed()

    def _from_watcher(self, fn, *args, **kwargs) -> None:
        try:
            self.call_from_thread(fn, *args, **kwargs)
        except RuntimeError:
            pass  # the app is closing

    def _count_queue(self) -> None:
        progress = self._index_progress
        if progress:
            self.index_state = progress
        self._extracting[:] = [t for t in self._extracting if t.is_alive()]
        busy = sorted({w.group for w in self.workers if w.group in BACKGROUND_GROUPS and not w.is_finished})
        running = sum(1 for w in self.workers if w.group in BACKGROUND_GROUPS and not w.is_finished)
        self.queue_depth = len(self._extracting) + running
        self.running = ", ".join([*(RUNNING_WORDS.get(g, g) for g in busy), *(["extracting"] if self._extracting else [])])

    # -- the status line and the pane bar -----------------------------------------------------------
    def _status(self) -> Status:
        return Status(self.provider_line, self.index_state, self.queue_depth, self.vault_path,
                      read_only=bool(self.vault and self.vault.read_only), badges=self.badges, running=self.running)

    badges: reactive[tuple[tuple[str, str], ...]] = reactive(())
    running: reactive[str] = reactive("")
    lint_counts: tuple[int, int] | None = None  # (errors, contradictions) of the last lint seen
    _seen_reports: SeenReports | None = None  # the reports there when the reports pane was last shown

    def _seen(self) -> SeenReports:
        if self._seen_reports is None:
            self._seen_reports = SeenReports(self.opened)
        return self._seen_reports

    def count_badges(self) -> None:
        """What waits in each pane: notes, reports new since the reports pane was last
        shown (in this run or an earlier one: memlink_tui/seen.py), lint errors and open
        contradictions (the last lint run, or the digest it left; "not checked" before
        any). From the catalog as the app holds it: no walk of the vault."""
        if self.vault is None:
            return
        notes = self.vault.catalog.all()
        reports = {e.uri for e in notes if e.memory_type == "report"}
        new = self._seen().new(reports)  # (written while the pane is up, by its D too: new until shown again)
        if self.lint_counts is None:
            self.lint_counts = _digest_counts(self.vault.root / "dashboards" / "digest.json")
        badges = [("browser", f"{len(notes)}")]
        if new:
            badges.append(("reports", f"{new} new"))
        if self.lint_counts is None:
            badges.append(("lint", "not checked"))  # (no badge would read as nothing to fix)
        else:
            errors, contradictions = self.lint_counts
            lint = ", ".join(t for t in (counted(errors, "error") if errors else "",
                                         f"{contradictions} to review" if contradictions else "") if t)  # short form: "2 5"
            if lint:
                badges.append(("lint", lint))
        self.badges = tuple(badges)

    def watch_badges(self) -> None:
        self._publish_status()

    def watch_running(self) -> None:
        self._publish_status()

    def _publish_status(self) -> None:
        for pane in self.panes.values():
            pane.post_message(StatusChanged(self._status()))

    def watch_provider_line(self) -> None:
        self._publish_status()

    def watch_index_state(self) -> None:
        self._publish_status()

    def watch_queue_depth(self) -> None:
        self._publish_status()

    # -- crashes -------------------------------------------------------------------------------
    crash_log: Path | None = None

    def _handle_exception(self, error: Exception) -> None:
        """An unhandled exception: its traceback goes to a file under the data folder
        (``crash_log``; the CLI names it and exits non-zero), then Textual exits as it
        does. Overrides Textual's private hook: it is the one place every unhandled
        error of the app passes."""
        self.crash_log = save_crash(error)
        super()._handle_exception(error)

    @work(thread=True, exclusive=True, group="inbox")
    def import_inbox(self) -> None:
        """Import what the inbox folder holds (engine.extract.inbox); say what came in, and
        each file that failed once, not every minute."""
        from engine.extract.inbox import import_inbox, inbox_folder, waiting

        vault = self.opened
        news: list[str] = []
        try:
            if not waiting(inbox_folder(vault)):
                return
            result, moved = import_inbox(vault)
        except (MemlinkError, OSError) as exc:
            problems = [f"inbox: {exc}"]
        else:
            problems = [f["error"] for f in result.failed + result.pending]
            model = result.model_line()  # (set once by a first import: news; else a hint, said once)
            news += [model] if model and result.model_set else []
            problems += [model] if model and not result.model_set else []
            problems += [f"{e['path']}: {e['source']} was edited in the vault; left as it is" for e in result.edited]
            if moved:
                news.append(f"inbox: {len(moved)} file{'s' * (len(moved) != 1)} imported")
                self.call_from_thread(self._tell, "browser", VaultChanged(None))
        news += [p for p in problems if p not in self._inbox_told]
        self._inbox_told.update(problems)
        if news:
            self.call_from_thread(self.notify, safe_markup("\n".join(news)), title="Inbox", timeout=8)

    @work(thread=True, exclusive=True, group="checkpoint")
    def checkpoint(self) -> None:
        from engine.index import SearchIndex  # (loaded by the startup worker by now)

        index = self.opened.peek(SearchIndex)
        if index is not None:
            index.checkpoint()

    def on_unmount(self) -> None:
        if self._stop_watching is not None:
            self._stop_watching.set()
        if self.vault is not None:
            # Closing flushes the search index under the vault lock, which a worker still
            # writing holds (a dream, a commit): quitting does not wait for it. The index
            # is derived, synced again next time.
            self.vault.config.lock_timeout = 0
            self.vault.close()
