"""What a new user meets first: the command line's own help, version and refusals, an
empty vault's panes saying how to begin, the keys and `?`, quitting, and the demo copy."""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import REPO, memlink, set_llm, settle
from rich.text import Text
from textual.content import Content
from textual.widgets import Input, ListView, Static

from engine import Vault
from engine.extract.updater import RunReport
from memlink_tui.app import MemlinkApp
from widgets.safe import safe_markup


def memlink_process(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memlink_tui", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=120, stdin=subprocess.DEVNULL,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


# -- the command line ---------------------------------------------------------------------------
def test_version_comes_from_the_package():
    from importlib.metadata import version

    r = memlink_process("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"memlink {version('memlink')}"


def test_every_command_has_a_description_and_every_option_a_help():
    from memlink_tui.cli import parser

    top = parser()
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    missing = [f"memlink {a.dest}" for a in top._actions if not a.help and a is not sub]
    for name, command in sub.choices.items():
        if not command.description:
            missing.append(f"memlink {name}: no description")
        missing += [f"memlink {name} {a.dest}" for a in command._actions if not a.help]
    assert missing == []


def test_the_app_in_a_pipe_says_why_and_writes_no_escape_codes(tmp_path):
    assert memlink("--vault", str(tmp_path / "v"), "init").returncode == 0
    for args in (["--vault", str(tmp_path / "v")], ["--vault", str(tmp_path / "v"), "app"], ["demo"]):
        r = memlink_process(*args, env={"MEMLINK_HOME": str(tmp_path / "home")})
        assert r.returncode != 0, args
        assert r.stdout == "" and "\x1b" not in r.stderr, args
        assert "memlink opens a terminal app; stdout is not a terminal" in r.stderr, args
    assert not (tmp_path / "home").exists(), "a refused demo copies nothing"


def test_asking_an_empty_question_gets_a_plain_message(tmp_path):
    assert memlink("--vault", str(tmp_path / "v"), "init").returncode == 0
    r = memlink("--vault", str(tmp_path / "v"), "ask", "  ")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("memlink: error: the question is empty") and "validation" not in r.stderr
    assert not list((tmp_path / "v").glob("report_candidates/*.md"))


def test_counts_take_the_right_number():
    one = RunReport(provider="rules", created=["a.md"], links_added=[{}])
    assert one.summary() == "1 note created, 0 changed, 1 link added"
    assert RunReport(provider="rules").summary() == "0 notes created, 0 changed, 0 links added"


def test_the_demo_is_one_copy_reused_until_asked_for_a_fresh_one(tmp_path):
    home = {"MEMLINK_HOME": str(tmp_path / "home")}
    first = memlink("demo", "--no-app", env=home)
    assert first.returncode == 0, first.stderr
    copy = Path(first.stdout.strip().split(" to ", 1)[1])
    Vault.open(copy).write_note("entity", {"name": "Someone new"})
    again = memlink("demo", "--no-app", env=home)
    assert again.returncode == 0 and f"the demo copy is at {copy}" in again.stdout and "--fresh" in again.stdout
    assert [p.name for p in (tmp_path / "home").iterdir()] == ["demo"]
    assert (copy / "entities" / "someone-new.md").exists(), "what the user changed in the demo stays"
    fresh = memlink("demo", "--no-app", "--fresh", env=home)
    assert fresh.returncode == 0 and "copied to" in fresh.stdout
    assert [p.name for p in (tmp_path / "home").iterdir()] == ["demo"]
    assert not (copy / "entities" / "someone-new.md").exists() and (copy / "memlink.yaml").exists()


# -- text shown as it is --------------------------------------------------------------------------
def test_data_shows_literally_whatever_brackets_it_holds():
    rng = random.Random(7)
    for _ in range(5000):
        text = "".join(rng.choice("[]/ab#@{}= ") for _ in range(rng.randint(0, 14)))
        markup = safe_markup(text)
        assert Content.from_markup(markup).plain == text, text  # Static, Label, notify
        assert Text.from_markup(markup).plain == text, text  # DataTable cells, Tree labels


async def test_the_review_preview_shows_no_stray_escapes(sample):
    contradiction = next(l for l in sample.links.all() if l.link_type.value == "contradicts" and l.direction == "links")
    app = MemlinkApp(sample)
    async with app.run_test(size=(150, 42)) as pilot:
        await settle(app, pilot)
        app.go("browser", contradiction.from_uri)
        await settle(app, pilot)
        await pilot.press("x")
        await settle(app, pilot)
        await pilot.press("left_square_bracket")
        await settle(app, pilot)
        shown = str(app.screen.query_one("#review-status", Static).render())
        assert "y applies" in shown and "\\" not in shown and "[/" not in shown


# -- keys and help --------------------------------------------------------------------------------
async def test_help_lists_every_key_under_plain_names_as_text(sample):
    from memlink_tui.screens.help import HelpScreen

    app = MemlinkApp(sample)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await pilot.press("5")
        await settle(app, pilot)
        keys = {k for k, b in app.screen.active_bindings.items()}
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = str(app.screen.query_one(Static).render())
    heads = [line for line in text.splitlines() if line and not line.startswith(" ")]
    assert heads == ["Everywhere", "5 Lint", "In the list"]
    assert "  [    " in text and "Keep A (left)" in text and "[/b]" not in text and "\\[" not in text
    assert "z                      Maximise" in text.split("\n\n")[0]  # the pane base's, with the app's
    from memlink_tui.screens.help import people_key

    listed = {k.strip() for line in text.splitlines() if line.startswith("  ") for k in line[2:24].split(", ")}
    assert {people_key(key) for key in keys} <= listed


async def test_a_message_may_begin_with_a_digit_and_an_empty_box_still_searches(sample):
    """"5 days ago" is a message: a digit switching panes would send its letters to another
    pane's keys (a review applied by its "y")."""
    from memlink_tui.screens.search import SearchScreen

    app = MemlinkApp(set_llm(sample.root, provider="rules"))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await pilot.press("c")
        await settle(app, pilot)
        box = app.screen.query_one("#message", Input)
        assert app.screen.focused is box and box.value == ""
        await pilot.press(*"5 days ago")
        await settle(app, pilot)
        assert app.current_mode == "chat" and box.value == "5 days ago"
        box.value = ""
        await pilot.press("slash")  # search, as everywhere
        await pilot.pause()
        assert isinstance(app.screen, SearchScreen)
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press(*"at 3/")
        await settle(app, pilot)
        assert app.current_mode == "chat" and box.value == "at 3/"


async def test_ctrl_l_focuses_the_sessions_and_a_new_session_is_listed_at_once(tmp_path):
    Vault.init(tmp_path / "v")
    app = MemlinkApp(set_llm(tmp_path / "v", provider="rules"))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await pilot.press("c")
        await settle(app, pilot)
        chat = app.screen
        sessions = chat.query_one("#sessions", ListView)
        assert len(sessions.children) == 0
        await pilot.press(*"I love green tea from Hangzhou.", "enter")
        await pilot.pause()
        assert [item.name for item in sessions.children] == [chat.chat.session]
        await settle(app, pilot)
        assert [item.name for item in sessions.children] == [chat.chat.session]
        await pilot.press("ctrl+l")
        assert chat.focused is sessions


# -- an empty vault -------------------------------------------------------------------------------
async def test_an_empty_vault_says_in_each_pane_how_to_begin(tmp_path):
    Vault.init(tmp_path / "v")
    app = MemlinkApp(set_llm(tmp_path / "v", provider="rules"))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        browser = str(app.screen.query_one("#note-meta", Static).render())
        assert "Your vault is empty" in browser
        for hint in ("c  chat", "ctrl+s", "i  import", "memlink import-chat FILE", "memlink ingest FOLDER", "/ searches"):
            assert hint in browser, hint
        await pilot.press("c")
        await settle(app, pilot)
        chat = " ".join(str(s.render()) for s in app.screen.query("#transcript Static"))
        assert "Type below and press enter" in chat and "ctrl+s saves the session to memory" in chat
        await pilot.press("escape", "3")  # (out of the message box: a digit there is text)
        await settle(app, pilot)
        tree = app.screen.query_one("#neighbours")
        assert tree.border_title == "Links · no links yet"
        assert "No links yet: chat (c), import" in str(app.screen.query_one("#path", Static).render())
        await pilot.press("4")
        await settle(app, pilot)
        assert "No questions or reports yet" in app.screen.query_one("#report-body").source


# -- quitting ---------------------------------------------------------------------------------------
async def test_q_quits_without_waiting_for_a_worker_that_holds_the_vault_lock(sample, monkeypatch):
    """A dream (or commit) still writing holds the vault lock; closing the vault flushes
    the search index under it. Quitting does not wait: the index is synced next time."""
    from memlink_tui.screens.link_editor import Confirm

    monkeypatch.setenv("MEMLINK_LOCK_TIMEOUT", "600")
    vault = Vault.open(sample.root)
    release, holding = threading.Event(), threading.Event()
    watchdog = threading.Timer(120, release.set)  # only if quitting waited: the test fails below
    watchdog.start()

    def writer() -> None:
        with vault.writing():
            holding.set()
            release.wait()

    app = MemlinkApp(vault)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(app, pilot)
            vault.write_note("entity", {"name": "Someone new"})  # the index has a change to flush
            app.run_worker(writer, thread=True, group="dream")
            while not (holding.is_set() and app.running):
                await pilot.pause(0.05)
            await pilot.press("q")
            while not isinstance(app.screen, Confirm):
                await pilot.pause(0.05)
            await pilot.press("y")
        assert not app.is_running and not release.is_set(), "the app waited for the worker to end"
    finally:
        watchdog.cancel()
        release.set()


@pytest.mark.slow
def test_the_process_ends_when_the_app_quits_with_a_worker_still_busy(tmp_path):
    """The app's own event loop, then the process ended at once: neither waits for a
    thread worker that never finishes."""
    Vault.init(tmp_path / "v")
    script = f"""
import threading
from engine import Vault
from memlink_tui.app import MemlinkApp
from memlink_tui.cli import end_now
from memlink_tui.cli.app import run_until_quit

never = threading.Event()
class Busy(MemlinkApp):
    def on_notes_shown(self, message):  # (Textual runs MemlinkApp's handler too)
        if not any(w.group == "dream" for w in self.workers):
            self.run_worker(self.work, thread=True, group="dream")
    def work(self):
        self.call_from_thread(self.exit)
        never.wait()
code = run_until_quit(Busy(Vault.open({str(tmp_path / 'v')!r})), headless=True)
print("quit", code, flush=True)
end_now(code, wait=False)
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0 and "quit 0" in r.stdout, r.stderr


# -- the README's walkthrough -----------------------------------------------------------------------
def walkthrough() -> list[tuple[str, list[str]]]:
    """The commands of the README's "Your first own memories", in order, each with the
    `+ path` lines its comments promise."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Your first own memories", 1)[1].split("\n## ", 1)[0]
    steps: list[tuple[str, list[str]]] = []
    for block in re.findall(r"```bash\n(.*?)```", section, flags=re.S):
        for line in block.splitlines():
            command, _, comment = line.partition("#")
            if command.strip().startswith("memlink "):
                steps.append((command.strip(), []))
            if steps and re.match(r"\s*\+ \S", comment):
                steps[-1][1].append(comment.strip())
    return steps


@pytest.mark.slow
def test_the_readme_walkthrough_does_what_it_says(tmp_path):
    """init → import a chat → commit → search → chat → lint → review → dream, without
    Ollama, as the README writes them: each command runs, and writes the notes its
    comments name."""
    import shlex

    text = (REPO / "README.md").read_text(encoding="utf-8")
    transcript = re.search(r"cat > chat.jsonl <<'EOF'\n(.*?)\nEOF", text, flags=re.S)
    assert transcript is not None
    (tmp_path / "chat.jsonl").write_text(transcript.group(1) + "\n", encoding="utf-8")
    env = {"MEMLINK_VAULT": str(tmp_path / "memories"), "OLLAMA_HOST": "http://127.0.0.1:9"}
    steps = walkthrough()
    assert [s[0].split()[1] for s in steps][:4] == ["init", "import-chat", "commit", "commit"]
    assert {"search", "chat", "lint", "review", "dream"} <= {s[0].split()[1] for s in steps}
    for command, promised in steps:
        args = [a.replace("chat.jsonl", str(tmp_path / "chat.jsonl")) for a in shlex.split(command)[1:]]
        r = memlink(*args, env=env)
        assert r.returncode in ((0, 3) if args[0] == "lint" else (0,)), (command, r.stderr)
        for line in promised:
            assert line in r.stdout, (command, line, r.stdout)
