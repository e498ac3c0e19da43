"""The app on its edges: every pane on an empty vault, crashes that leave a
log and a non-zero exit, the demo from an installed copy."""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from conftest import open_at, settle, typed_at_once

from memlink_tui.app import MemlinkApp
from memlink_tui.messages import NoteChanged


async def test_every_pane_opens_on_a_vault_made_at_first_run(tmp_path):
    app = MemlinkApp(None, vault_path=tmp_path / "new")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("n")
        await settle(app, pilot)
        await pilot.press("3")  # the key that crashed here
        await settle(app, pilot)
        assert app.current_mode == "graph"
        for pane in ("browser", "chat", "reports", "lint", "graph"):
            await app.run_action(f"go('{pane}')")
            await settle(app, pilot)
            assert app.current_mode == pane
    assert app.return_code in (None, 0) and app.crash_log is None


async def test_an_unhandled_error_is_saved_to_a_log_and_the_app_exits_non_zero(vault, monkeypatch):
    def boom(self) -> None:
        raise RuntimeError("boom in the help key")

    monkeypatch.setattr(MemlinkApp, "action_help", boom)
    app = MemlinkApp(vault)
    with pytest.raises(RuntimeError, match="boom"):
        async with app.run_test() as pilot:
            await pilot.press("question_mark")
            await pilot.pause()
    assert app.return_code == 1
    assert app.crash_log is not None and "boom in the help key" in app.crash_log.read_text()


def test_the_cli_names_the_crash_log_and_exits_non_zero(vault, monkeypatch, capsys):
    from memlink_tui.cli import main

    def crashed_run(self, **_options) -> None:
        self.crash_log = Path("/tmp/crash-x.log")
        self._return_code = 1

    monkeypatch.setattr(MemlinkApp, "run", crashed_run)
    monkeypatch.setattr("memlink_tui.cli.app._no_terminal", lambda: None)  # (pytest's output is no terminal)
    assert main(["--vault", str(vault.root)]) == 1
    assert "the traceback is in /tmp/crash-x.log" in capsys.readouterr().err


def test_the_sample_vault_is_found_beside_an_installed_package(tmp_path, monkeypatch):
    import shutil

    import memlink_tui
    from memlink_tui import paths

    installed = tmp_path / "site-packages" / "memlink_tui"
    installed.mkdir(parents=True)
    (installed / "__init__.py").write_text("")
    shutil.copytree(paths.sample_vault(), installed / "sample_vault", ignore=shutil.ignore_patterns(".memlink"))
    monkeypatch.setattr(memlink_tui, "__file__", str(installed / "__init__.py"))
    assert paths.sample_vault() == installed / "sample_vault"
    copy = paths.copy_sample_vault(tmp_path / "demo")
    assert (copy / "memlink.yaml").is_file() and len(list(copy.rglob("*.md"))) >= 72


# -- the pane bar --------------------------------------------------------------------------------
def bar_text(app) -> str:
    from widgets import PaneBar

    return str(app.screen.query_one(PaneBar).render())


async def test_the_pane_bar_names_every_pane_and_follows_the_current_one(sample):
    from widgets import PaneBar

    app = MemlinkApp(sample)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        for pane in ("browser", "graph", "reports", "lint", "chat"):
            await app.run_action(f"go('{pane}')")
            await settle(app, pilot)
            bar = app.screen.query_one(PaneBar)
            assert bar.current == pane and bar.region.y == 0
            text = bar_text(app)
            for label in ("1 Memory", "2 Chat", "3 Graph", "4 Reports", "5 Lint"):
                assert label in text, (pane, text)
            assert len(text) <= 80
        assert "1 Memory 72" in bar_text(app)


async def test_a_click_on_the_pane_bar_goes_to_that_pane(sample):
    from widgets import PaneBar

    app = MemlinkApp(sample)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        text = bar_text(app)
        bar = app.screen.query_one(PaneBar)
        await pilot.click(PaneBar, offset=(bar.styles.padding.left + text.index("5 Lint") + 2, 0))
        await settle(app, pilot)
        assert app.current_mode == "lint"


async def test_the_bar_shows_new_reports_and_what_lint_found(sample):
    app = MemlinkApp(sample)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        assert "new" not in bar_text(app)
        assert "5 Lint not checked" in bar_text(app)  # (the sample has never been linted)
        await app.run_action("go('lint')")
        await settle(app, pilot)
        assert "5 Lint 5 to review" in bar_text(app)  # the sample's five contradictions
        sample.write_note("report", {"question": "What changed in October?", "answer": "Things."})
        app.post_message(NoteChanged(None))
        await settle(app, pilot)
        assert "4 Reports 1 new" in bar_text(app)
        await app.run_action("go('reports')")
        await settle(app, pilot)
        assert "1 new" not in bar_text(app)  # seen


async def test_reports_a_dream_writes_while_the_reports_pane_is_up_stay_new_until_it_is_shown_again(sample):
    from conftest import set_llm

    vault = set_llm(sample.root, provider="rules")
    before = len(vault.catalog.all("report"))
    app = MemlinkApp(vault)
    async with app.run_test(size=(120, 36)) as pilot:
        await open_at(app, pilot, "reports")
        await pilot.press("D")
        await settle(app, pilot)
        written = len(vault.catalog.all("report")) - before
        assert written > 1 and f"4 Reports {written} new" in bar_text(app)
        await app.run_action("go('browser')")
        await settle(app, pilot)
        assert f"4 Reports {written} new" in bar_text(app)
        await app.run_action("go('reports')")
        await settle(app, pilot)
        assert "new" not in bar_text(app)


async def test_which_reports_were_seen_outlives_a_restart(sample):
    """A report not yet looked at is still new after the app restarts, one seen stays
    seen, and one a dream wrote while the app was closed is new when it opens."""
    from engine import Vault

    async def bar_after_start(vault, then: str | None = None) -> str:
        app = MemlinkApp(vault)
        async with app.run_test(size=(120, 36)) as pilot:
            await settle(app, pilot)
            if then == "write":
                vault.write_note("report", {"question": "What changed in October?", "answer": "Things."})
                app.post_message(NoteChanged(None))
                await settle(app, pilot)
            shown = bar_text(app)
            if then == "look":
                await app.run_action("go('reports')")
                await settle(app, pilot)
        return shown

    assert "4 Reports 1 new" in await bar_after_start(sample, then="write")
    assert "4 Reports 1 new" in await bar_after_start(Vault.open(sample.root), then="look")
    assert "new" not in await bar_after_start(Vault.open(sample.root))
    Vault.open(sample.root).write_note("report", {"question": "What changed in November?", "answer": "Less."})
    assert "4 Reports 1 new" in await bar_after_start(Vault.open(sample.root))


async def test_the_footer_lists_the_keys_that_work_everywhere_first(sample):
    app = MemlinkApp(sample)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        for pane in ("browser", "lint", "graph"):
            await app.run_action(f"go('{pane}')")
            await settle(app, pilot)
            shown = [b.binding.action for b in app.screen.active_bindings.values() if b.binding.show]
            assert shown[:3] == ["quit", "search", "help"], (pane, shown)


async def test_help_starts_with_the_keys_that_work_everywhere_written_as_people_write_them(sample):
    from textual.widgets import Static

    from memlink_tui.screens.help import HelpScreen

    app = MemlinkApp(sample)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = str(app.screen.query_one(Static).render())
        assert text.startswith("Everywhere")
        first = text.split("\n\n")[0]
        for key in ("/ ", "? ", "ctrl+p", "2, c", "ctrl+←"):
            assert key in first, (key, first)
        assert "slash" not in text and "question_mark" not in text


async def test_q_asks_first_while_background_work_runs(sample):
    import threading

    from memlink_tui.screens.link_editor import Confirm

    release = threading.Event()
    app = MemlinkApp(sample)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        app.run_worker(lambda: release.wait(10), thread=True, group="dream")
        assert await wait_for(pilot, lambda: "dreaming" in app.running, 15)  # the queue timer notices it
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, Confirm) and app.is_running
        await pilot.press("n")
        await pilot.pause()
        assert not isinstance(app.screen, Confirm) and app.is_running
        release.set()
        await settle(app, pilot)
        assert await wait_for(pilot, lambda: app.running == "", 15)
        await pilot.press("q")  # nothing running: quits at once
        await pilot.pause()
        assert not app.is_running


async def test_the_palette_and_ctrl_t_offer_the_same_themes(sample):
    app = MemlinkApp(sample)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Theme" not in titles and "Quit" in titles
        from memlink_tui.commands import ThemeCommands

        palette = sorted(t.removeprefix("Theme: ") for t, _cb, _help in ThemeCommands.entries(
            type("P", (), {"app": app})()))  # the palette's theme entries
        cycled = []
        for _ in app.memlink_themes:
            await pilot.press("ctrl+t")
            cycled.append(app.theme)
        assert sorted(cycled) == palette


# -- chat -------------------------------------------------------------------------------------------
@asynccontextmanager
async def chatting(vault):
    """The app on ``vault`` with Ollama's stand-in (tests/ollama_stub.py), in the chat pane:
    (stub, app, pilot, the pane)."""
    from conftest import set_llm
    from ollama_stub import OllamaStub

    with OllamaStub() as stub:
        app = MemlinkApp(set_llm(vault.root, model="tiny", host=stub.host, timeout=5))
        async with app.run_test(size=(120, 36)) as pilot:
            await open_at(app, pilot, "chat")
            yield stub, app, pilot, app.screen


async def test_chat_starts_a_new_session_says_a_broken_stream_plainly_and_asks_again(sample):
    from textual.widgets import Static

    from engine.sessions.log import read_events
    from memlink_tui.screens.chat import ChatScreen

    old = {p.stem for p in (sample.root / "sessions").glob("*.jsonl")}
    async with chatting(sample) as (stub, app, pilot, screen):
        assert isinstance(screen, ChatScreen) and screen.chat.session not in old
        stub.script += [("cut", "Half an"), ("json", "The whole answer, at last.")]
        await pilot.press(*"Where is the kiln key?", "enter")
        await settle(app, pilot)
        answers = screen.query(".assistant")
        shown = str(answers.last(Static).render())
        assert "Half an" in shown and "broke off before the answer was complete" in shown and "ctrl+y" in shown
        assert "RemoteProtocolError" not in shown
        await pilot.press("ctrl+y")
        await settle(app, pilot)
        assert str(answers.last(Static).render()) == "The whole answer, at last."
        session = screen.chat.session
    events = read_events(sample, session)
    assert [(e.role, e.content) for e in events if e.role in ("user", "assistant")] == [
        ("user", "Where is the kiln key?"), ("assistant", "The whole answer, at last.")]


async def test_escape_stops_a_reply_being_written(sample):
    from textual.widgets import Static

    from engine.sessions.log import read_events

    async with chatting(sample) as (stub, app, pilot, screen):
        stub.script.append(("hang", 5.0))  # then answers "{}"
        await pilot.press(*"Slow one?", "enter")
        assert await wait_for(pilot, lambda: any(w.group == "chat" and not w.is_finished for w in screen.workers), 15)
        await pilot.press("escape")  # (while the reply is being written, however slow the machine)
        await settle(app, pilot)
        assert app.current_mode == "chat"  # escape stopped the reply; it did not leave the pane
        assert "stopped; ctrl+y asks again" in str(screen.query(".assistant").last(Static).render())
        session = screen.chat.session
    assert [e.role for e in read_events(sample, session) if e.role in ("user", "assistant")] == ["user"]


async def test_a_message_sent_while_a_reply_is_written_waits_and_a_retry_stays_in_its_session(sample):
    import threading

    from textual.widgets import Input, Static

    from engine.sessions.log import read_events

    async with chatting(sample) as (stub, app, pilot, screen):
        written = threading.Event()  # (the first reply is being written until this is set)
        stub.script += [("held", "Tea first, slowly.", written), ("status", 500, "down")]
        await pilot.press(*"About tea?", "enter")
        assert await wait_for(pilot, lambda: bool(screen._replying_workers()), 15)
        await pilot.press(*"About cats?", "enter")  # (while the first reply is being written)
        assert "a reply is being written" in str(screen.query_one("#status", Static).render())
        assert screen.query_one("#message", Input).value == "About cats?"  # kept, to send once it answered
        written.set()
        await settle(app, pilot)
        first = screen.chat.session
        screen.query_one("#message", Input).value = ""
        await pilot.press(*"Failing one?", "enter")
        await settle(app, pilot)
        assert "ctrl+y asks again" in str(screen.query(".assistant").last(Static).render())
        await pilot.press("ctrl+n")  # another conversation: ctrl+y no longer answers the first one's question here
        await settle(app, pilot)
        stub.script.append(("json", "An answer for the failed question."))
        await pilot.press("ctrl+y")
        await settle(app, pilot)
        second = screen.chat.session
    said = [(e.role, e.content) for e in read_events(sample, first) if e.role in ("user", "assistant")]
    assert said == [("user", "About tea?"), ("assistant", "Tea first, slowly."), ("user", "Failing one?")]
    assert [e for e in read_events(sample, second) if e.role == "assistant"] == []


# -- live refresh -------------------------------------------------------------------------------------
async def wait_for(pilot, check, seconds: float = 8.0) -> bool:
    for _ in range(int(seconds / 0.2)):
        if check():
            return True
        await pilot.pause(0.2)
    return check()


async def test_a_note_written_by_another_process_shows_up_without_a_key(sample):
    from engine import Vault
    from widgets import NoteTree

    app = MemlinkApp(sample)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        tree = app.screen.query_one(NoteTree)
        assert tree.border_title == "Notes · 72"
        await pilot.pause(0.5)  # the watcher is up
        other = Vault.open(sample.root)  # the CLI in another terminal
        other.write_note("entity", {"name": "Ada Outside", "kind": "person", "content": "Written elsewhere."})
        assert await wait_for(pilot, lambda: tree.border_title == "Notes · 73")
        assert await wait_for(pilot, lambda: "1 Memory 73" in bar_text(app))


def test_the_watch_filter_keeps_to_notes_and_links(tmp_path):
    from memlink_tui.app import _vault_file

    root = tmp_path
    keep = ["entities/ada.md", "entities/.relations.json", "events/2026/01/02/x.md", "entities/.relations.log.jsonl",
            "sessions/s.jsonl"]
    drop = [".memlink/catalog.sqlite", "entities/.ada.md.1234.~memlink.tmp", "dashboards/lint.md", "sessions/s.memories.json",
            "sessions/.s.jsonl.1234.~memlink.tmp", ".obsidian/workspace.md", "entities/notes.txt"]
    assert [p for p in keep if _vault_file(root, None, str(root / p))] == keep
    assert [p for p in drop if _vault_file(root, None, str(root / p))] == []


async def test_a_chat_session_imported_elsewhere_joins_the_sessions_list(sample):
    """`memlink import-chat` in another terminal writes a session log; what the watcher
    hands the app then lists it in the chat pane, the list's cursor staying on its session."""
    import json

    from textual.widgets import ListView

    from engine import Vault
    from engine.sessions.importer import RulesTurnExtractor, import_chat

    app = MemlinkApp(sample)
    async with app.run_test(size=(120, 36)) as pilot:
        await open_at(app, pilot, "chat")
        sessions = app.screen.query_one("#sessions", ListView)
        sessions.index = 1
        before = [item.name for item in sessions.children]
        chat = sample.root.parent / "chat.jsonl"
        chat.write_text(json.dumps({"session": "2027-01-05-from-a-shell", "id": "m1", "role": "user",
                                    "content": "I moved the kiln to the garage.", "ts": "2027-01-05T09:00:00"}) + "\n")
        import_chat(Vault.open(sample.root), chat, RulesTurnExtractor())  # (another process, as far as the app knows)
        log = sample.root / "sessions" / "2027-01-05-from-a-shell.jsonl"
        app.files_changed({str(log)})  # what the watcher passes on for it
        await settle(app, pilot)
        assert [item.name for item in sessions.children] == [*before, "2027-01-05-from-a-shell"]
        assert sessions.highlighted_child is not None and sessions.highlighted_child.name == before[1]


# -- small terminals ------------------------------------------------------------------------------------
async def test_below_the_smallest_size_a_pane_says_so_and_comes_back(sample):
    from textual.widgets import Static

    from widgets import NoteTree

    app = MemlinkApp(sample)
    async with app.run_test(size=(50, 15)) as pilot:
        await settle(app, pilot)
        notice = app.screen.query_one("#too-small", Static)
        assert notice.display and "too small" in str(notice.render()) and "60×16" in str(notice.render())
        assert not app.screen.query_one(NoteTree).display or not app.screen.query_one(NoteTree).region.area
        await pilot.resize_terminal(80, 24)
        await settle(app, pilot)
        assert not notice.display and app.screen.query_one(NoteTree).region.area


async def test_at_80x24_a_short_note_shows_whole_under_its_header(sample):
    from widgets import NoteView

    app = MemlinkApp(sample)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_at(app, pilot, "browser", "preferences/coffee.md")
        view = app.screen.query_one(NoteView)
        assert view.max_scroll_y == 0  # (its last line, "it wrecks her sleep", in sight)
        assert "topic:" not in str(view.query_one("#note-meta").render())  # (the title heads the header once)


async def test_a_pane_too_small_for_a_moment_gives_the_focus_back_to_where_it_was(sample):
    from textual.widgets import Input

    app = MemlinkApp(sample)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_at(app, pilot, "chat")
        box = app.screen.query_one("#message", Input)
        assert app.focused is box
        await pilot.resize_terminal(50, 14)
        await settle(app, pilot)
        await pilot.resize_terminal(80, 24)
        await settle(app, pilot)
        await pilot.press("q", "u", "i", "c", "k")
        await settle(app, pilot)
        assert app.focused is box and box.value == "quick" and app.is_running


def drawn(app, widget) -> list[str]:
    """The lines the screen shows inside ``widget``'s box, its border left out."""
    box = widget.region.shrink(widget.styles.gutter)
    rows = app.screen._compositor.render_strips()[box.y:box.bottom]
    return [strip.crop(box.x, box.right).text.rstrip() for strip in rows]


async def test_at_80x24_the_sessions_list_shows_each_chat_session_s_whole_name(sample):
    """Sessions of one day differ only after the date: the narrow list wraps a name at
    its hyphens rather than cutting every one of them to the same first characters."""
    import json

    from textual.widgets import ListView

    names = ["2026-12-05-planning-the-lisbon-cello-masterclass-weekend", "2026-12-05-planning-the-lisbon-flat-rental"]
    for n, name in enumerate(names):
        (sample.root / "sessions" / f"{name}.jsonl").write_text(json.dumps(
            {"session": name, "id": f"m{n}", "role": "user", "content": "Lisbon.", "ts": "2026-12-05T10:00:00"}) + "\n")
    app = MemlinkApp(sample)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_at(app, pilot, "chat")
        sessions = app.screen.query_one("#sessions", ListView)
        sessions.scroll_end(animate=False)  # (the two are the last in the list)
        await pilot.pause()
        shown = "".join(drawn(app, sessions))
        assert all(name in shown for name in names), drawn(app, sessions)


async def test_at_80x24_the_reports_list_shows_each_title_whole(sample):
    """A question's title is longer than the narrow list: it wraps, as the chat sessions
    list wraps names, rather than being cut at the list's edge."""
    from textual.widgets import ListView

    titles = [e.title for kind in ("report_candidate", "report") for e in sample.catalog.all(kind)]
    app = MemlinkApp(sample)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_at(app, pilot, "reports")
        queue = app.screen.query_one("#queue", ListView)
        shown = " ".join(" ".join(drawn(app, queue)).split())
        assert titles and all(title in shown for title in titles), drawn(app, queue)


async def test_the_sessions_list_marks_the_open_chat_session_after_focus_leaves_it(sample):
    """Picked with enter, the session stays marked (a bar beside its name) while the
    message box has the focus, and the cursor moving in the list does not move the mark."""
    from textual.widgets import Input, ListView

    app = MemlinkApp(sample)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_at(app, pilot, "chat")
        await pilot.press("ctrl+l", "down", "down", "enter")
        await settle(app, pilot)
        screen = app.screen
        sessions = screen.query_one("#sessions", ListView)
        assert isinstance(screen.focused, Input)
        name = screen.chat.session

        def marked() -> str:
            return "".join(line[1:].strip() for line in drawn(app, sessions) if line.startswith("▊"))

        assert marked() == name and name in sorted(p.stem for p in (sample.root / "sessions").glob("*.jsonl"))
        await pilot.press("ctrl+l", "down", "tab")  # the cursor on another session, then away: not opened
        await settle(app, pilot)
        assert screen.chat.session == name and marked() == name


async def test_at_80x24_the_note_body_and_every_finding_column_show(sample):
    from textual.widgets import DataTable

    from widgets import NoteView

    app = MemlinkApp(sample)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_at(app, pilot, "browser", "entities/berth-planner-v2.md")
        view = app.screen.query_one(NoteView)
        assert view.region.height >= 10  # fields and the start of the body, not the fields alone
        await app.run_action("go('lint')")
        await settle(app, pilot)
        table = app.screen.query_one("#findings", DataTable)
        widths = [c.width for c in table.columns.values()]
        assert len(widths) == 4 and sum(widths) + 8 <= table.region.width and widths[3] >= 16


@pytest.mark.parametrize(("size", "sides"), [((80, 24), False), ((120, 36), True)])
async def test_a_short_screen_reviews_a_contradiction_from_its_quoted_lines_beside_every_finding(sample, size, sides):
    """At 24 rows the two notes below the card would leave the findings two rows; the card
    quotes both lines in dispute, so they give way. A note of any other finding still shows."""
    from textual.widgets import DataTable

    app = MemlinkApp(sample)
    async with app.run_test(size=size) as pilot:
        await app.run_action("go('lint')")
        await settle(app, pilot)
        assert "Why they disagree" in str(app.screen.query_one("#review-card").render())
        table = app.screen.query_one("#findings", DataTable)
        assert table.region.height - 3 >= 5  # every contradiction's row (border and header aside)
        assert bool(app.screen.query_one("#sides").region.area) is sides
        table.focus()
        await pilot.press(*["down"] * 5)  # past the contradictions: no pair, the notes show below
        await settle(app, pilot)
        assert "Why they disagree" not in str(app.screen.query_one("#review-card").render())
        assert app.screen.query_one("#sides").region.area


@pytest.mark.parametrize("size", [(80, 24), (120, 36)])
async def test_a_review_preview_and_the_merge_editor_leave_the_findings_several_rows(sample, size):
    """What an action will change, or the merge text, shows beside several findings, the
    one acted on among them; the preview's first line (its keys) is in sight."""
    from textual.widgets import DataTable, TextArea

    def findings_shown(table) -> int:
        return table.region.height - 3  # (its border and header aside)

    app = MemlinkApp(sample)
    async with app.run_test(size=size) as pilot:
        await app.run_action("go('lint')")
        await settle(app, pilot)
        table = app.screen.query_one("#findings", DataTable)
        table.focus()
        await pilot.press("down")  # the second contradiction
        await settle(app, pilot)
        await pilot.press("left_square_bracket")
        await settle(app, pilot)
        assert app.screen.pending is not None
        assert findings_shown(table) >= 5 and table.scroll_y <= table.cursor_row < table.scroll_y + findings_shown(table)
        assert any(line.lstrip("│ ").startswith("y applies this") for line in drawn(app, app.screen))
        await pilot.press("escape", "e")  # the merge editor
        await settle(app, pilot)
        box = app.screen.query_one("#merge-text", TextArea)
        assert box.has_focus and box.region.height - 2 >= 5 and findings_shown(table) >= 5
        assert app.screen.region.contains_region(box.region)


async def test_at_80x24_search_gives_its_results_every_row(sample):
    app = MemlinkApp(sample)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await pilot.press("slash", *"celadon glaze", "enter")
        await settle(app, pilot)
        results = app.screen.query_one("#search-results")
        assert results.region.height >= 24 - 7  # all but the box, the field and the status line


async def test_a_link_s_type_shows_whole_legacy_entries_too(sample):
    from widgets.link_table import LinkTable

    app = MemlinkApp(sample)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_at(app, pilot, "browser", "profile.md")  # Tom: a legacy entry of the sidecar
        table = app.screen.query_one(LinkTable)
        types = [str(table.get_cell_at((row, 1))) for row in range(table.row_count)]
        assert "related_to (legacy)" in types
        assert list(table.columns.values())[1].width >= len("related_to (legacy)")


async def test_z_maximises_the_focused_panel_and_puts_it_back(sample):
    from widgets import NoteTree

    app = MemlinkApp(sample)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        tree = app.screen.query_one(NoteTree)
        assert tree.has_focus
        await pilot.press("z")
        await pilot.pause()
        assert app.screen.maximized is tree and tree.region.width == 80  # it fills the pane
        await pilot.press("z")
        await pilot.pause()
        assert app.screen.maximized is None
        await pilot.press("enter")  # the note view, a scrolling panel, too
        await settle(app, pilot)
        note = app.screen.query_one("#note")
        note.focus()
        await pilot.press("z")
        await pilot.pause()
        assert app.screen.maximized is note and note.region.width == 80


# -- the link editor ------------------------------------------------------------------------------------
async def link_editor_on(app, pilot, source: str):
    """The link editor (k) opened in the browser on ``source``."""
    from memlink_tui.screens.link_editor import LinkEditor

    await open_at(app, pilot, "browser", source)
    await pilot.press("k")
    await pilot.pause()
    assert isinstance(app.screen, LinkEditor)
    return app.screen


async def test_the_link_editor_never_writes_from_the_search_and_confirms_a_summary(sample):
    from textual.widgets import Input, Select, Static

    from memlink_tui.screens.link_editor import Confirm

    source = "preferences/coffee.md"
    before = sample.links.of(source, "both")
    app = MemlinkApp(sample)
    async with app.run_test(size=(120, 36)) as pilot:
        editor = await link_editor_on(app, pilot, source)
        await pilot.press(*"pieter de", "enter")  # enter on the search row: on to the type, nothing written
        await pilot.pause()
        assert editor.target == "entities/pieter-de-vries.md"  # the person, before any report naming him
        assert isinstance(editor.focused, Select) and sample.links.of(source, "both") == before
        await pilot.press("tab")  # the weight
        assert editor.focused is editor.query_one("#link-weight", Input)
        await pilot.press("enter", "enter", *"met at the roastery", "enter")  # weight, anchor, why: the summary
        await pilot.pause()
        assert isinstance(app.screen, Confirm)
        summary = str(app.screen.query_one(Static).render())
        assert "Pieter de Vries" in summary and "related_to" in summary and "1.00" in summary and "met at the roastery" in summary
        await pilot.press("n")  # back to the form, nothing written
        await pilot.pause()
        assert app.screen is editor and sample.links.of(source, "both") == before
        await pilot.press("ctrl+s")
        await pilot.pause()
        await pilot.press("y")
        await settle(app, pilot)
    made = [l for l in sample.links.of(source, "links") if l.to_uri == "entities/pieter-de-vries.md"]
    assert len(made) == 1 and made[0].description == "met at the roastery" and made[0].weight == 1.0  # as `memlink link`


async def test_at_80x24_the_whole_link_editor_shows(sample):
    """Its title (which note links), every field and the keys line, inside the screen."""
    from textual.containers import Vertical
    from textual.widgets import Static

    from memlink_tui.screens.link_editor import LinkEditor

    app = MemlinkApp(sample)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_at(app, pilot, "browser", "preferences/coffee.md")
        await pilot.press("k")
        await pilot.pause()
        editor = app.screen
        assert isinstance(editor, LinkEditor)
        form = editor.query_one(Vertical)
        assert app.screen.region.contains_region(form.region), form.region
        assert form.scroll_y == 0 and form.max_scroll_y == 0  # nothing scrolled out of sight
        keys = editor.query(Static).last()
        assert "esc cancels" in str(keys.render()) and form.region.contains_region(keys.region)


async def test_the_link_editor_keeps_what_was_typed_just_before_tab_and_ctrl_s(sample):
    """Tab moves to the next field at once, so what follows it goes there; the summary is
    made from what the fields hold once they have taken every key, and y writes that."""
    from textual.widgets import Input, Static

    from memlink_tui.screens.link_editor import Confirm

    source = "preferences/coffee.md"
    app = MemlinkApp(sample)
    async with app.run_test(size=(80, 24)) as pilot:
        editor = await link_editor_on(app, pilot, source)
        await typed_at_once(app, pilot, *"pieter de", "enter", "tab", "tab", *"coffee", "tab", *"met at the roastery", "ctrl+s")
        assert isinstance(app.screen, Confirm)
        assert editor.query_one("#link-anchor", Input).value == "coffee"
        assert editor.query_one("#link-why", Input).value == "met at the roastery"
        summary = str(app.screen.query_one(Static).render())
        assert "Pieter de Vries" in summary and "anchor: coffee" in summary and "why: met at the roastery" in summary
        await pilot.press("y")
        await settle(app, pilot)
    made = [l for l in sample.links.of(source, "links") if l.to_uri == "entities/pieter-de-vries.md"]
    assert len(made) == 1 and made[0].description == "met at the roastery" and made[0].match_text == "coffee"


# -- one key map ---------------------------------------------------------------------------------------
def test_no_pane_key_shadows_a_key_that_works_everywhere():
    from textual.binding import Binding

    from memlink_tui.app import MemlinkApp as App
    from memlink_tui.screens.browser import BrowserScreen
    from memlink_tui.screens.chat import ChatScreen
    from memlink_tui.screens.graph import GraphScreen
    from memlink_tui.screens.lint import LintScreen
    from memlink_tui.screens.reports import ReportScreen

    def keys(cls) -> set[str]:
        return {k.strip() for b in cls.__dict__.get("BINDINGS", []) for k in (b if isinstance(b, Binding) else Binding(*b)).key.split(",")}

    everywhere = keys(App)
    for pane in (BrowserScreen, ChatScreen, GraphScreen, ReportScreen, LintScreen):
        assert not keys(pane) & everywhere, (pane.__name__, keys(pane) & everywhere)


def test_a_letter_means_one_kind_of_action_in_every_pane():
    """The same key does the same kind of thing wherever it works: its description starts
    with the same word in every pane (a asks, e edits, d dismisses, esc goes back)."""
    from textual.binding import Binding

    from memlink_tui.screens.browser import BrowserScreen
    from memlink_tui.screens.chat import ChatScreen
    from memlink_tui.screens.graph import GraphScreen
    from memlink_tui.screens.lint import LintScreen
    from memlink_tui.screens.reports import ReportScreen

    kinds: dict[str, dict[str, str]] = {}
    for pane in (BrowserScreen, ChatScreen, GraphScreen, ReportScreen, LintScreen):
        for b in pane.__dict__.get("BINDINGS", []):
            b = b if isinstance(b, Binding) else Binding(*b)
            for key in b.key.split(","):
                kinds.setdefault(key.strip(), {})[pane.__name__] = (b.description or b.action).split()[0].strip(":").lower()
    mixed = {key: where for key, where in kinds.items() if len(set(where.values())) > 1}
    assert not mixed, mixed
    assert set(kinds["escape"].values()) == {"back"} and set(kinds["a"].values()) == {"ask"}


# -- the review card -----------------------------------------------------------------------------------
def test_a_dispute_says_why_and_which_lines(sample):
    from engine.review.actions import ReviewError, dispute

    d = dispute(sample, "events/2026/10/29/11-with-pieter.md", "entities/pieter-de-vries.md")
    assert d.reason.startswith("Pieter now says mornings")
    where, text = d.lines["entities/pieter-de-vries.md"]
    assert where == "content lines 2" and "late in the day" in text
    assert "first thing in the morning" in d.lines["events/2026/10/29/11-with-pieter.md"][1]
    with pytest.raises(ReviewError):
        dispute(sample, "entities/pieter-de-vries.md", "entities/hangzhou.md")


async def test_the_lint_pane_shows_the_card_for_a_contradiction(sample):
    from textual.widgets import DataTable, Static

    app = MemlinkApp(sample)
    async with app.run_test(size=(120, 36)) as pilot:
        await open_at(app, pilot, "lint")
        await pilot.press("enter")  # contradictions: into the findings
        table = app.screen.query_one("#findings", DataTable)
        row = next(i for i, key in enumerate(table.rows) if "11-with-pieter" in key.value)
        table.move_cursor(row=row)
        await settle(app, pilot)
        card = str(app.screen.query_one("#review-card", Static).render())
        assert "Why they disagree: Pieter now says mornings" in card
        assert "content lines 2" in card and "late in the day" in card and "keep A" in card


async def test_a_whole_note_contradiction_card_says_what_each_note_says_at_80x24(sample):
    """At 80×24 the notes below the card are out of sight: the card itself quotes them."""
    from textual.widgets import Static

    a = sample.write_note("preference", {"topic": "Espresso", "sentiment": "like", "content": "I love espresso."})
    b = sample.write_note("preference", {"topic": "Espresso now", "sentiment": "dislike", "content": "I hate espresso now."})
    sample.link(b.uri, a.uri, "contradicts", weight=0.8, description="says dislike where the earlier note says like")
    app = MemlinkApp(sample)
    async with app.run_test(size=(80, 24)) as pilot:
        table = await lint_findings(app, pilot)
        row = next(i for i, key in enumerate(table.rows) if "espresso-now" in key.value)
        table.move_cursor(row=row)
        await settle(app, pilot)
        card = str(app.screen.query_one("#review-card", Static).render())
        assert "the whole note: I hate espresso now." in card and "the whole note: I love espresso." in card, card


async def lint_findings(app, pilot):
    """The lint pane opened, in its worst-first findings: their table."""
    from textual.widgets import DataTable

    await open_at(app, pilot, "lint")
    await pilot.press("enter")
    return app.screen.query_one("#findings", DataTable)


async def test_merge_refuses_a_pair_that_is_no_contradiction_and_a_review_stays_at_its_row(sample):
    from textual.widgets import DataTable, ListView, Static, TextArea

    app = MemlinkApp(sample)
    async with app.run_test(size=(120, 36)) as pilot:
        await open_at(app, pilot, "lint")
        screen = app.screen
        checks = screen.query_one("#checks", ListView)
        checks.index = [item.name for item in checks.children].index("low_weight")
        await settle(app, pilot)
        table = screen.query_one("#findings", DataTable)
        table.focus()
        table.move_cursor(row=0)
        await settle(app, pilot)
        await pilot.press("e")
        await pilot.pause()
        assert not screen.query_one("#merge-text", TextArea).display  # (no editor to write into first)
        assert "merge is for a contradiction" in str(screen.query_one("#review-status", Static).render())
        checks.index = [item.name for item in checks.children].index("contradictions")
        await settle(app, pilot)
        table.focus()
        table.move_cursor(row=1)
        await settle(app, pilot)
        following = table.get_row_at(2)
        await pilot.press("d", "y")  # dismiss the second pair
        await settle(app, pilot)
        assert table.cursor_row == 1 and table.get_row_at(1) == following  # (the next pair, not back at the first)


async def test_a_hint_under_the_card_goes_when_another_row_is_chosen(sample):
    from textual.widgets import Static

    app = MemlinkApp(sample)
    async with app.run_test(size=(120, 36)) as pilot:
        table = await lint_findings(app, pilot)
        await pilot.press("u")  # (nothing done yet)
        await settle(app, pilot)
        status = app.screen.query_one("#review-status", Static)
        assert "nothing to undo" in str(status.render())
        table.move_cursor(row=table.cursor_row + 1)
        await settle(app, pilot)
        assert "nothing to undo" not in str(status.render())


async def test_review_keys_act_only_on_the_pair_the_lint_pane_shows(sample):
    """A preview is dropped when another row is chosen, and a list without a contradiction
    (x on a note that has none) leaves no pair, no card and nothing to apply."""
    from textual.widgets import DataTable, Static

    def notes_text(vault) -> dict:
        return {p: p.read_bytes() for p in vault.root.rglob("*.md") if "dashboards" not in p.parts}

    before = notes_text(sample)
    app = MemlinkApp(sample)
    async with app.run_test(size=(120, 36)) as pilot:
        await open_at(app, pilot, "lint")
        await pilot.press("enter")
        table = app.screen.query_one("#findings", DataTable)
        rows = [i for i, key in enumerate(table.rows) if key.value.split("|")[2]]
        table.move_cursor(row=rows[0])
        await settle(app, pilot)
        await pilot.press("left_square_bracket")
        assert app.screen.pending is not None
        shown = str(app.screen.query_one("#review-status", Static).render())
        assert shown.startswith("y applies this, escape cancels")  # the keys first: a short screen shows them
        table.move_cursor(row=rows[1])
        await settle(app, pilot)
        assert app.screen.pending is None
        assert "preview dropped" in str(app.screen.query_one("#review-status", Static).render())
        await pilot.press("y")
        await settle(app, pilot)
        app.go("lint", "preferences/coffee.md")  # x in the browser: its contradictions (none)
        await settle(app, pilot)
        assert "involving preferences/coffee.md" in str(table.border_title) and not table.row_count
        assert app.screen.pair is None and not str(app.screen.query_one("#review-card", Static).render()).strip()
        await pilot.press("left_square_bracket")
        assert app.screen.pending is None
    assert notes_text(sample) == before  # nothing was applied


async def test_escape_in_the_lint_pane_goes_back_to_worst_first_before_leaving(sample):
    """A check chosen in the list: escape goes back to worst first in the list. A group
    expanded from worst first: escape goes back to its row. Then escape leaves the pane."""
    from textual.widgets import DataTable, ListView

    from memlink_tui.screens.lint import GROUP, RANKED

    app = MemlinkApp(sample)
    async with app.run_test(size=(120, 36)) as pilot:
        await open_at(app, pilot, "lint")
        screen = app.screen
        checks, table = screen.query_one("#checks", ListView), screen.query_one("#findings", DataTable)
        await pilot.press("down", "enter")  # a check, then into its findings
        await settle(app, pilot)
        assert checks.highlighted_child.name != RANKED and screen.focused is table
        await pilot.press("escape")
        await settle(app, pilot)
        assert app.current_mode == "lint" and checks.highlighted_child.name == RANKED and screen.focused is checks
        await pilot.press("enter")
        group = next(i for i, key in enumerate(table.rows) if key.value.startswith(GROUP))
        table.move_cursor(row=group)
        await pilot.press("enter")  # expand the group
        await settle(app, pilot)
        assert checks.highlighted_child.name != RANKED
        await pilot.press("escape")
        await settle(app, pilot)
        assert checks.highlighted_child.name == RANKED and table.cursor_row == group and screen.focused is table
        await pilot.press("escape")
        await settle(app, pilot)
        assert app.current_mode == "browser"


async def test_a_review_preview_survives_a_resize(sample):
    """A resize draws the findings again at the new width: the row stays highlighted and
    its preview pending, and y applies it."""
    from textual.widgets import DataTable, Static

    app = MemlinkApp(sample)
    async with app.run_test(size=(120, 36)) as pilot:
        await open_at(app, pilot, "lint")
        await pilot.press("enter")
        table = app.screen.query_one("#findings", DataTable)
        row = [i for i, key in enumerate(table.rows) if key.value.split("|")[2]][1]  # not the first row: a redraw starts there
        table.move_cursor(row=row)
        await settle(app, pilot)
        pair = app.screen.pair
        await pilot.press("left_square_bracket")
        assert app.screen.pending is not None
        await pilot.resize_terminal(150, 40)
        await settle(app, pilot)
        assert table.cursor_row == row and app.screen.pair == pair and app.screen.pending is not None
        assert str(app.screen.query_one("#review-status", Static).render()).startswith("y applies this")
        await pilot.press("y")
        await settle(app, pilot)
        shown = str(app.screen.query_one("#review-status", Static).render())
        assert shown.startswith("done with the pair reviewed last (u undoes): ")  # (the key in sight on a short screen)
    a, b = pair  # keep A applied to the pair shown: B (or its claim) is superseded by A
    dropped = sample.read_note(b).extra
    assert dropped.get("superseded_by") == a or [c["superseded_by"] for c in dropped["superseded_claims"]] == [a]


async def test_import_picks_a_file_in_the_folder_tree(sample, tmp_path):
    from textual.widgets import DirectoryTree, Static

    from memlink_tui.screens.importer import ImportScreen

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "kiln-notes.md").write_text("# Kiln notes\n\nThe studio kiln fires to cone 6 on Tuesdays.\n")
    app = MemlinkApp(sample)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        app.push_screen(ImportScreen(sample, start=folder))
        await pilot.pause()
        await pilot.press("ctrl+o")
        await pilot.pause()
        tree = app.screen.query_one(DirectoryTree)
        assert tree.has_focus
        for _ in range(20):  # the folder is read in a worker
            await pilot.pause(0.1)
            if tree.root.children:
                break
        tree.move_cursor(next(n for n in tree.root.children if n.data.path.name == "kiln-notes.md"))
        await pilot.press("enter")  # (the tree's folder loader runs for its life: no waiting for every worker)
        result = app.screen.query_one("#import-result", Static)
        assert await wait_for(pilot, lambda: "kiln-notes" in str(result.render()), 20)
        assert "importing" not in str(result.render())
    assert any("kiln-notes" in e.uri for e in sample.catalog.all("source"))


async def test_a_failed_turn_extraction_can_be_redone_with_the_rules(sample):

    from engine.sessions.store import TurnStore

    async with chatting(sample) as (stub, app, pilot, screen):
        stub.script += [("json", "The kiln key hangs by the door."), ("json", "this is not the JSON asked for")]
        await pilot.press(*"Where is the kiln key?", "enter")
        assert await wait_for(pilot, lambda: any("ctrl+g" in n.message for n in app._notifications), 15)
        session = screen.chat.session
        assert not [r for r in TurnStore(sample).all() if r.get("session") == session]
        await pilot.press("ctrl+g")
        assert await wait_for(pilot, lambda: any("updated with the rules" in n.message for n in app._notifications), 15)
    assert [r for r in TurnStore(sample).all() if r.get("session") == session]


async def test_the_chosen_report_stays_marked_when_the_list_is_not_focused(sample):
    from textual.widgets import ListView

    app = MemlinkApp(sample)
    async with app.run_test(size=(120, 36)) as pilot:
        await open_at(app, pilot, "reports")
        queue = app.screen.query_one("#queue", ListView)
        queue.index = 1
        app.screen.set_focus(None)
        await pilot.pause()
        assert not queue.has_focus
        chosen, other = queue.children[1], queue.children[0]
        assert chosen.has_class("-highlight")
        base = app.screen.query_one("#queue").background_colors[1]
        chosen_bg, other_bg = base + chosen.styles.background, base + other.styles.background
        assert abs(chosen_bg.brightness - other_bg.brightness) > 0.05, (chosen_bg, other_bg)


async def test_a_reply_shows_word_by_word_as_it_streams(sample):
    import threading

    from textual.widgets import Static

    async with chatting(sample) as (stub, app, pilot, screen):
        words = "one two three four five six seven eight".split()
        step = threading.Semaphore(0)  # (the stand-in writes the next word when released)
        stub.script.append(("stepped", " ".join(words), step))
        await pilot.press(*"Count for me", "enter")

        def shown() -> str:
            answers = screen.query(".assistant")
            return str(answers.last(Static).render()).strip() if answers else ""

        for n in range(1, len(words) + 1):  # each word on screen before the next is written
            assert await wait_for(pilot, lambda n=n: shown() == " ".join(words[:n]), 30), (n, shown())
            step.release()


# -- citations and saving one reply -----------------------------------------------------------------
STUDIO = "How much is the membership at the studio?"


async def test_a_reply_shows_its_citations_and_ctrl_r_enter_opens_the_cited_note(sample):
    from memlink_tui.screens.chat import Reply

    async with chatting(sample) as (stub, app, pilot, screen):
        stub.script.append(("json", "It is €95 a month [1]. [9] is not a citation."))
        await pilot.press(*STUDIO, "enter")
        await settle(app, pilot)
        reply = screen.query("#transcript Reply").last(Reply)
        assert "entities/klei-vuur.md" in [i.source for i in reply.items]
        content = reply.visual
        cited = [s for s in content.spans if "@click=cite(1)" in str(s.style)]
        assert len(cited) == 1 and content.plain[cited[0].start:cited[0].end] == "[1]"  # a link, styled apart
        assert not [s for s in content.spans if "cite(9)" in str(s.style)]  # no item 9: plain text
        first = reply.items[0]
        await pilot.press("ctrl+r")
        await pilot.pause()
        recall = screen.query_one("#recall-list")
        assert recall.has_focus and recall.highlighted == 0
        await pilot.press("enter")
        await settle(app, pilot)
        assert app.current_mode == ("browser" if first.kind == "note" else "chat")
        if first.kind == "note":
            assert app.screen.current == first.source


async def test_a_reopened_conversation_keeps_each_reply_s_citations(sample):
    from memlink_tui.screens.chat import Reply

    async with chatting(sample) as (stub, app, pilot, screen):
        stub.script.append(("json", "It is €95 a month [1]."))
        await pilot.press(*STUDIO, "enter")
        await settle(app, pilot)
        session, given = screen.chat.session, screen.query("#transcript Reply").last(Reply).items
        screen.open_session("2026-09-03-morning-planning")
        await settle(app, pilot)
        screen.open_session(session)  # as the session list opens it, another day
        await settle(app, pilot)
        assert screen.query_one("#recall-list").option_count == len(given)  # (the last reply's, at once)
        reply = screen.query("#transcript Reply").last(Reply)
        assert [(i.kind, i.source, i.where, i.title) for i in reply.items] == [(i.kind, i.source, i.where, i.title)
                                                                             for i in given]
        assert [s for s in reply.visual.spans if "@click=cite(1)" in str(s.style)]  # [1] is a link again
        reply.focus()
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert screen.query_one("#recall-list").option_count == len(given)
        reply.action_cite(1)  # what a click on [1] runs
        await settle(app, pilot)
        assert app.current_mode == ("browser" if given[0].kind == "note" else "chat")


async def test_ctrl_r_on_a_reply_given_nothing_says_so_and_a_missing_conversation_is_not_opened(sample):
    from textual.widgets import OptionList, Static

    from engine.sessions.memory import MemoryItem
    from memlink_tui.screens.chat import Reply

    async with chatting(sample) as (stub, app, pilot, screen):
        stub.script.append(("json", "It is €95 a month [1]."))
        await pilot.press(*STUDIO, "enter")
        await settle(app, pilot)
        await pilot.press("ctrl+r")  # the studio reply's items
        await pilot.pause()
        assert screen.query_one("#recall-list", OptionList).option_count > 0
        session = screen.chat.session
        nothing = Reply("Nothing to say.")
        await screen.query_one("#transcript").mount(nothing)
        nothing.focus()
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert screen.query_one("#recall-list", OptionList).option_count == 0  # not the studio reply's, left over
        assert "No memory is kept for this reply" in str(screen.query_one("#recall-text", Static).render())
        gone = Reply("see [1]", items=[MemoryItem("turn", "2020-01-01-no-such-talk", "m1", "t", "x", "r", 1.0)])
        await screen.query_one("#transcript").mount(gone)
        gone.action_cite(1)
        await settle(app, pilot)
        assert screen.chat.session == session and "read only" not in str(screen.query_one("#transcript").border_title)
        assert any("no longer in the vault" in str(n.message) for n in app._notifications)


async def test_a_save_says_what_it_saved_and_asking_about_a_note_without_a_model_says_so(sample, monkeypatch):
    from conftest import set_llm
    from textual.widgets import Static

    from engine.extract.inputs import RulesExtractor

    monkeypatch.setattr("engine.sessions.commit.choose_extractor", lambda v: (RulesExtractor(), None))
    app = MemlinkApp(set_llm(sample.root, provider="rules"))
    async with app.run_test(size=(120, 36)) as pilot:
        await open_at(app, pilot, "chat", "entities/klei-vuur.md")  # a on a note in the browser
        screen = app.screen
        status = screen.query_one("#status", Static)
        said = str(status.render())
        assert "asking about" in said and "no chat model" in said and "goes to the model" not in said
        await pilot.press(*"Hello there.", "enter")
        await settle(app, pilot)
        await pilot.press("ctrl+s")
        await settle(app, pilot)
        assert str(status.render()) == "nothing new to save: no memories found in it"
        await pilot.press("ctrl+s")
        await settle(app, pilot)
        assert str(status.render()) == "nothing new to save: no turns since the last save"


async def test_saving_a_chat_session_with_no_message_says_there_is_nothing_yet(sample):
    from textual.widgets import Static

    app = MemlinkApp(sample)
    async with app.run_test(size=(120, 36)) as pilot:
        await open_at(app, pilot, "chat")
        await pilot.press("ctrl+n", "ctrl+s")
        await settle(app, pilot)
        assert str(app.screen.query_one("#status", Static).render()) == "nothing to save yet: this session has no message"


async def test_quitting_with_a_chat_message_not_sent_asks_first(sample):
    from textual.widgets import Input

    from memlink_tui.screens.link_editor import Confirm

    app = MemlinkApp(sample)
    async with app.run_test(size=(120, 36)) as pilot:
        await open_at(app, pilot, "chat")
        box = app.screen.query_one("#message", Input)
        await pilot.press(*"Half a thought", "ctrl+q")
        await pilot.pause()
        assert isinstance(app.screen, Confirm) and "not sent" in app.screen.question
        await pilot.press("n")
        await pilot.pause()
        assert app.return_code is None and box.value == "Half a thought"
        app.push_screen(Confirm("Remove the link?"))  # another question up: ctrl+q still asks
        await pilot.pause()
        await pilot.press("ctrl+q")
        await pilot.pause()
        assert app.return_code is None and "not sent" in app.screen.question
        await pilot.press("n", "escape")  # (both questions answered no)
        await pilot.pause()
        box.value = ""
        await pilot.press("ctrl+q")  # nothing typed: quits at once
        await pilot.pause()
        assert app.return_code == 0


async def test_a_dismiss_preview_says_what_it_does_once(sample):
    from textual.widgets import Static

    app = MemlinkApp(sample)
    async with app.run_test(size=(120, 36)) as pilot:
        table = await lint_findings(app, pilot)
        table.move_cursor(row=[i for i, key in enumerate(table.rows) if key.value.split("|")[2]][0])
        await settle(app, pilot)
        await pilot.press("d")
        shown = str(app.screen.query_one("#review-status", Static).render())
        assert "dismiss: not a contradiction, now related_to" in shown and "dismissed" not in shown


async def test_without_a_model_the_pane_answers_from_memory_with_citations_that_open(sample):
    from conftest import set_llm

    from memlink_tui.screens.chat import Reply

    app = MemlinkApp(set_llm(sample.root, provider="rules"))
    async with app.run_test(size=(120, 36)) as pilot:
        await open_at(app, pilot, "chat")
        screen = app.screen
        await pilot.press(*STUDIO, "enter")
        await settle(app, pilot)
        reply = screen.query("#transcript Reply").last(Reply)
        shown = reply.visual.plain
        assert "No model wrote this answer" in shown and "€95" in shown and "entities/klei-vuur.md" in shown
        n = [i.source for i in reply.items].index("entities/klei-vuur.md") + 1
        assert [s for s in reply.visual.spans if f"@click=cite({n})" in str(s.style)]
        recall_head = str(screen.query_one("#recall-text").render())
        assert "found (no model)" in recall_head and "given to the model" not in recall_head
        reply.action_cite(n)  # what a click on [n] runs
        await settle(app, pilot)
        assert app.current_mode == "browser" and app.screen.current == "entities/klei-vuur.md"
        screen.open_session("2026-09-03-morning-planning")  # another conversation: its recall is not this one's
        await settle(app, pilot)
        assert "Recall shows here" in str(screen.query_one("#recall-text").render())
        assert screen.query_one("#recall-list").option_count == 0


async def test_a_cited_past_turn_opens_its_session_at_that_turn(sample):
    from engine.sessions.memory import MemoryItem
    from memlink_tui.screens.chat import Reply

    session = sorted(p.stem for p in (sample.root / "sessions").glob("*.jsonl"))[0]
    from engine.sessions.log import message_text, project_turns, read_events

    turns = project_turns(session, read_events(sample, session), final=True)
    turn = turns[len(turns) // 2]  # in the middle: the end of the session does not show it
    async with chatting(sample) as (stub, app, pilot, screen):
        reply = Reply("see [1]", items=[MemoryItem("turn", session, ", ".join(turn.source_ids), "t", "x", "r", 1.0)])
        await screen.query_one("#transcript").mount(reply)
        reply.action_cite(1)
        await settle(app, pilot)
        assert screen.chat.session == session
        transcript = screen.query_one("#transcript")
        await pilot.pause()
        target = [w for w in transcript.children
                  if "user" in w.classes and turn.asked and message_text(turn.asked[0])[:20] in w.visual.plain]
        top, bottom = transcript.scroll_offset.y, transcript.scroll_offset.y + transcript.scrollable_content_region.height
        assert target and top <= target[0].virtual_region.y < bottom  # scrolled to that turn
        assert transcript.scroll_offset.y < transcript.max_scroll_y  # not to the session's end
        assert "read only" in str(transcript.border_title)
        log = (sample.root / "sessions" / f"{session}.jsonl").read_bytes()
        await pilot.press(*"And what about fish?", "enter")  # (read, not continued: the conversation it came from)
        await settle(app, pilot)
        assert screen.chat.session != session and "read only" not in str(transcript.border_title)
        assert (sample.root / "sessions" / f"{session}.jsonl").read_bytes() == log
        assert "And what about fish?" in (sample.root / "sessions" / f"{screen.chat.session}.jsonl").read_text()


async def test_escape_from_a_cited_conversation_goes_back_to_yours_and_ctrl_l_starts_at_it(sample):
    from textual.widgets import Input, ListView

    from engine.sessions.log import project_turns, read_events
    from engine.sessions.memory import MemoryItem
    from memlink_tui.screens.chat import Reply

    session = sorted(p.stem for p in (sample.root / "sessions").glob("*.jsonl"))[0]
    turn = project_turns(session, read_events(sample, session), final=True)[0]
    async with chatting(sample) as (stub, app, pilot, screen):
        mine = screen.chat.session
        reply = Reply("see [1]", items=[MemoryItem("turn", session, ", ".join(turn.source_ids), "t", "x", "r", 1.0)])
        await screen.query_one("#transcript").mount(reply)
        reply.action_cite(1)
        await settle(app, pilot)
        assert screen.chat.session == session
        await pilot.press("ctrl+l")
        await pilot.pause()
        sessions = screen.query_one("#sessions", ListView)
        assert sessions.has_focus and sessions.highlighted_child is not None and sessions.highlighted_child.name == session
        await pilot.press("escape")
        await settle(app, pilot)
        assert app.current_mode == "chat" and screen.chat.session == mine
        assert "read only" not in str(screen.query_one("#transcript").border_title)
        assert screen.query_one("#message", Input).has_focus


async def test_ctrl_o_saves_the_chosen_reply_alone_and_ctrl_s_the_rest(sample, monkeypatch):
    from engine.extract.inputs import RulesExtractor
    from engine.sessions.commit import commit_session, committed
    from engine.sessions.events import COMMIT
    from engine.sessions.log import read_events

    monkeypatch.setattr("engine.sessions.commit.choose_extractor", lambda v: (RulesExtractor(), None))
    async with chatting(sample) as (stub, app, pilot, screen):
        stub.streams = ("json", "Noted.")  # every reply; the model's extraction is refused (503)
        await pilot.press(*"I prefer oolong tea in the morning.", "enter")
        await settle(app, pilot)
        await pilot.press(*"I prefer walking to the studio.", "enter")
        await settle(app, pilot)
        screen.query("#transcript Reply").first().focus()
        await pilot.press("ctrl+o")
        await settle(app, pilot)
        assert "saved one reply" in str(screen.query_one("#status").render())
        session = screen.chat.session
    events = read_events(sample, session)
    said = [e.key for e in events if e.role in ("user", "assistant") and e.kind is None]
    marks = [e for e in events if e.kind == COMMIT]
    assert len(marks) == 1 and marks[0].model_extra["turn"] == said[:2]  # the first question and its reply alone
    start, done, _ = committed(sample, session, events)
    assert start == 0 and done == set(said[:2])  # that turn alone: the session itself is not committed yet
    assert commit_session(sample, session) is not None  # ctrl+s later: the other turn
    assert read_events(sample, session)[-1].model_extra["upto"] == [e.key for e in events if e.kind != COMMIT][-1]


async def test_a_commit_whose_model_answer_does_not_fit_is_saved_with_the_rules_on_ctrl_g(sample):
    from textual.widgets import Static

    async with chatting(sample) as (stub, app, pilot, screen):
        stub.script.append(("json", "Noted, oat milk it is."))
        await pilot.press(*"I love oat milk in my coffee.", "enter")
        await settle(app, pilot)
        stub.script += [("json", '{"memories": [ {"broken": ')] * 6  # (the extraction's answers: none fits)
        await pilot.press("ctrl+s")
        await settle(app, pilot)
        assert "ctrl+g saves it with the rules provider" in str(screen.query_one("#status", Static).render())
        await pilot.press("ctrl+g")
        await settle(app, pilot)
        assert "committed" in str(screen.query_one("#status", Static).render())


async def test_the_palette_shows_a_note_title_holding_markup_as_text_and_runs_none_of_it(sample):
    from textual.command import CommandPalette
    from textual.widgets import OptionList

    sample.write_note("preference", {"topic": "[@click=app.quit]Evil chai[/] [link=http://evil.example]phish[/link]",
                                     "content": "Spiced."})
    app = MemlinkApp(sample)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"Evil chai")
        assert await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette)
                              and app.screen.query_one(OptionList).option_count > 0, 15)
        shown = [str(o.prompt) for o in app.screen.query_one(OptionList).options]
        assert any("[@click=app.quit]Evil chai[/] [link=http://evil.example]phish[/link]" in s for s in shown), shown
