"""The app's second pass (issue #15): every pane on an empty vault, crashes that leave a
log and a non-zero exit, the demo from an installed copy."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlink_tui.app import MemlinkApp
from memlink_tui.messages import NoteChanged


async def settle(app, pilot) -> None:
    for _ in range(3):
        await app.workers.wait_for_complete()
        await pilot.pause()


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

    def crashed_run(self) -> None:
        self.crash_log = Path("/tmp/crash-x.log")
        self._return_code = 1

    monkeypatch.setattr(MemlinkApp, "run", crashed_run)
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
