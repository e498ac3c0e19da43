"""Snapshot tests: each pane on the sample vault, rendered and compared with the SVG in
tests/__snapshots__/. Stable by construction: the vault path is shown under a fixed
HOME, the provider is the rules one, lint's "today" is pinned, notifications are
cleared and the input cursor does not blink. After a deliberate UI change, review and
refresh them with `./dev test tests/test_snapshots.py --snapshot-update`."""

from __future__ import annotations

import datetime as dt
import shutil

import pytest
from conftest import SAMPLE, set_llm
from textual.widgets import Input

from engine import Vault
from memlink_tui.app import MemlinkApp
from memlink_tui.screens.lint import LintScreen

SIZE = (150, 42)
NOTE = "entities/man-met-bril-koffie.md"
STUDIO = "How much is the membership at the studio?"


@pytest.fixture
def snap_vault(tmp_path, monkeypatch) -> Vault:
    monkeypatch.setenv("HOME", str(tmp_path))  # the status line shows ~/sample
    monkeypatch.setattr(LintScreen, "today", dt.date(2026, 9, 1))
    target = tmp_path / "sample"
    shutil.copytree(SAMPLE, target, ignore=shutil.ignore_patterns(".memlink"))
    return set_llm(target, provider="rules")


async def steady(pilot) -> None:
    """Every worker done and the status line saying so: a run that a live refresh (the
    file watcher, which is not a worker) starts late is waited for too, within 10 s."""
    app = pilot.app
    for _ in range(3):
        await app.workers.wait_for_complete()
        await pilot.pause()
    for _ in range(50):
        if not app.running and not any(not w.is_finished for w in app.workers):
            break
        await app.workers.wait_for_complete()
        await pilot.pause(0.2)
    for field in app.screen.query(Input):
        field.cursor_blink = False
    app.clear_notifications()
    await pilot.pause()


def journey(*steps):
    """run_before for snap_compare: settle, then each step (a key list or a callable)."""

    async def run(pilot):
        await steady(pilot)
        for step in steps:
            if callable(step):
                step(pilot.app)
            else:
                await pilot.press(*step)
            await steady(pilot)

    return run


def test_browser(snap_compare, snap_vault):
    app = MemlinkApp(snap_vault)
    assert snap_compare(app, terminal_size=SIZE, run_before=journey(lambda a: a.go("browser", NOTE)))


def test_search(snap_compare, snap_vault):
    app = MemlinkApp(snap_vault)
    assert snap_compare(app, terminal_size=SIZE, run_before=journey(["slash", *"celadon glaze", "enter"]))


def test_graph(snap_compare, snap_vault):
    app = MemlinkApp(snap_vault)
    assert snap_compare(app, terminal_size=SIZE, run_before=journey(lambda a: a.go("browser", NOTE), ["g"]))


def test_chat(snap_compare, snap_vault, monkeypatch):
    monkeypatch.setattr("memlink_tui.screens.chat.new_session_id", lambda: "2026-12-01-090000-new")
    app = MemlinkApp(snap_vault)
    assert snap_compare(app, terminal_size=SIZE,
                        run_before=journey(*PANE_JOURNEYS["chat"]))


def test_reports(snap_compare, snap_vault):
    app = MemlinkApp(snap_vault)
    assert snap_compare(app, terminal_size=SIZE, run_before=journey(["R"]))


def test_lint_review(snap_compare, snap_vault):
    contradiction = next(l for l in snap_vault.links.all() if l.link_type.value == "contradicts" and l.direction == "links")
    app = MemlinkApp(snap_vault)
    assert snap_compare(app, terminal_size=SIZE,
                        run_before=journey(lambda a: a.go("browser", contradiction.from_uri), ["x"]))


def test_help(snap_compare, snap_vault):
    app = MemlinkApp(snap_vault)
    assert snap_compare(app, terminal_size=SIZE, run_before=journey(["question_mark"]))


def test_first_run(snap_compare, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    app = MemlinkApp(None, vault_path=tmp_path / "memlink-vault")
    assert snap_compare(app, terminal_size=SIZE, run_before=journey())


SMALL = (80, 24)
PANE_JOURNEYS = {
    "browser": (lambda a: a.go("browser", NOTE),),
    "chat": (["c"], lambda a: a.screen.open_session("2026-11-20-weekly-review"), [*STUDIO, "enter"]),  # answered from memory
    "graph": (lambda a: a.go("browser", NOTE), ["g"]),
    "reports": (["R"],),
    "lint": (["L"],),
    "help": (["question_mark"],),
    "link_editor": (lambda a: a.go("browser", NOTE), ["k", *"Tom"]),  # (the first match: the target, shown chosen)
}


@pytest.mark.parametrize("pane", list(PANE_JOURNEYS))
def test_every_pane_at_80x24(snap_compare, snap_vault, monkeypatch, pane):
    monkeypatch.setattr("memlink_tui.screens.chat.new_session_id", lambda: "2026-12-01-090000-new")
    app = MemlinkApp(snap_vault)
    assert snap_compare(app, terminal_size=SMALL, run_before=journey(*PANE_JOURNEYS[pane]))


def test_an_empty_vault_at_80x24(snap_compare, tmp_path, monkeypatch):
    """What `memlink init` then `memlink` shows: the ways to a first memory."""
    monkeypatch.setenv("HOME", str(tmp_path))
    Vault.init(tmp_path / "memories")
    app = MemlinkApp(set_llm(tmp_path / "memories", provider="rules"))
    assert snap_compare(app, terminal_size=SMALL, run_before=journey())
