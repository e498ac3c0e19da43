"""The app through Textual's Pilot, on a copy of the sample vault."""

from __future__ import annotations

from conftest import open_at, settle

from memlink_tui.app import MemlinkApp
from memlink_tui.screens.browser import BrowserScreen
from widgets import LinkTable, NoteTree, NoteView


def first_note_with_outgoing_links(vault) -> str:
    for entry in sorted(vault.catalog.all(), key=lambda e: e.uri):
        if vault.links.of(entry.uri, "links"):
            return entry.uri
    raise AssertionError("sample vault has no outgoing links")


async def test_the_first_key_in_the_note_tree_acts_on_its_first_row(sample):
    app = MemlinkApp(sample)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        tree = app.screen.query_one(NoteTree)
        first = tree.root.children[0]
        assert tree.has_focus and tree.cursor_node is first
        was = first.is_expanded
        await pilot.press("space")
        await settle(app, pilot)
        assert first.is_expanded != was


async def test_open_sample_vault_and_follow_a_link_by_keyboard(sample):
    app = MemlinkApp(sample)
    async with app.run_test(size=(140, 45)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, BrowserScreen)
        tree = screen.query_one(NoteTree)
        assert tree.has_focus
        start = first_note_with_outgoing_links(sample)
        # Walk the tree with the keyboard to the note: expand its branch, move to it, enter.
        mtype = sample.read_note(start).memory_type
        branch = next(n for n in tree.root.children if str(n.label).startswith(f"{mtype} "))
        tree.move_cursor(branch)
        await pilot.press("space")
        await settle(app, pilot)
        leaf = next(n for n in branch.children if n.data == start)
        while tree.cursor_node is not leaf:
            await pilot.press("down")
        await pilot.press("enter")
        await settle(app, pilot)
        assert screen.current == start
        table = screen.query_one(LinkTable)
        assert table.row_count == len(sample.links.of(start, "both"))
        await pilot.press("l")
        assert table.has_focus
        target = table.selected_uri
        outgoing = sample.links.of(start, "links")[0]
        assert target == outgoing.to_uri  # outgoing links are listed first, strongest first
        await pilot.press("enter")
        await settle(app, pilot)
        assert screen.current == target
        view = screen.query_one(NoteView)
        assert sample.title(sample.read_note(target)) in str(view.query_one("#note-meta").render())
        await pilot.press("backspace")
        await settle(app, pilot)
        assert screen.current == start
        await pilot.press("f")
        await settle(app, pilot)
        assert screen.current == target
        # Escape puts a maximised panel back first, then goes back, as in the other panes.
        for key, maximised, at in (("z", True, target), ("escape", False, target), ("escape", False, start)):
            await pilot.press(key)
            await settle(app, pilot)
            assert (screen.maximized is not None) == maximised and screen.current == at, key


async def test_rendered_links_in_the_note_body(sample):
    app = MemlinkApp(sample)
    async with app.run_test(size=(140, 45)) as pilot:
        await pilot.pause()
        screen = app.screen
        uri = next(
            l.from_uri for l in sample.links.all() if l.match_text and not l.legacy
        )
        await screen.open_note(uri)
        await pilot.pause()
        assert screen.current == uri
        rendered = sample.render_note(uri)
        assert rendered.rendered, "expected at least one rendered link"


async def test_slash_searches_from_anywhere_and_enter_opens_the_hit(sample):
    from memlink_tui.screens.search import SearchScreen
    from widgets import SearchResults

    app = MemlinkApp(sample)
    async with app.run_test(size=(140, 45)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.press("slash")
        await pilot.pause()
        assert isinstance(app.screen, SearchScreen)
        await pilot.press(*"celadon glaze", "enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        results = app.screen.query_one(SearchResults)
        assert results.option_count > 0
        first = app.screen.last_hits[0]
        assert first.routes and first.snippet
        await pilot.press("down")
        assert results.has_focus
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, BrowserScreen)
        assert app.screen.current == first.uri


async def test_graph_explorer_neighbours_ppr_and_path(sample):
    from textual.widgets import DataTable, Static, Tree

    from memlink_tui.screens.graph import GraphScreen

    app = MemlinkApp(sample)
    start = first_note_with_outgoing_links(sample)
    async with app.run_test(size=(140, 45)) as pilot:
        await settle(app, pilot)
        browser = app.screen
        await browser.open_note(start)
        await pilot.press("g")
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, GraphScreen)
        tree = screen.query_one("#neighbours", Tree)
        groups = [str(n.label) for n in tree.root.children]
        links = sample.links.of(start, "both")
        assert sum(int(g.rsplit("(", 1)[1].rstrip(")")) for g in groups) == len({(l.link_type, l.direction, l.to_uri if l.direction == "links" else l.from_uri) for l in links})
        assert screen.query_one("#ppr", DataTable).row_count > 0
        # Keyboard: first neighbour, mark it, second neighbour, path.
        await pilot.press("down", "down")
        first = tree.cursor_node.data
        assert first
        await pilot.press("m")
        await pilot.press("down")
        while tree.cursor_node.data is None or tree.cursor_node.data == first:
            await pilot.press("down")
        await pilot.press("p")
        assert "hop" in str(screen.query_one("#path", Static).render())
        target = tree.cursor_node.data
        # → goes a hop deeper (the neighbour's own links), ← back out.
        node = tree.cursor_node
        await pilot.press("right")
        assert node.is_expanded and node.children
        await pilot.press("right")
        assert tree.cursor_node is node.children[0]
        await pilot.press("left", "left")  # the group closes, then back on the neighbour
        assert tree.cursor_node is node and node.is_expanded
        await pilot.press("left")
        assert tree.cursor_node is node and not node.is_expanded
        await pilot.press("o")
        await settle(app, pilot)
        assert app.screen is browser
        await app.workers.wait_for_complete()
        await settle(app, pilot)
        assert browser.current == target


async def test_re_centring_the_graph_puts_the_cursor_on_the_new_centre(sample):
    from textual.widgets import Tree

    app = MemlinkApp(sample)
    start = first_note_with_outgoing_links(sample)
    async with app.run_test(size=(140, 45)) as pilot:
        await settle(app, pilot)
        await app.screen.open_note(start)
        await pilot.press("g")
        await settle(app, pilot)
        tree = app.screen.query_one("#neighbours", Tree)
        while tree.cursor_node.data is None or tree.cursor_node.data == start:
            await pilot.press("down")
        neighbour = tree.cursor_node.data
        await pilot.press("h")
        await app.workers.wait_for_complete()
        await settle(app, pilot)
        assert app.screen.center == neighbour and tree.cursor_node is tree.root and tree.root.data == neighbour
        await pilot.press("o")
        await app.workers.wait_for_complete()
        await settle(app, pilot)
        assert app.screen.current == neighbour


async def test_chat_pane_without_ollama_says_why(vault):
    import socket

    import yaml
    from textual.widgets import Static

    from engine import Vault
    from memlink_tui.screens.chat import ChatScreen

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = yaml.safe_load((vault.root / "memlink.yaml").read_text())
    cfg["llm"] = {"host": f"http://127.0.0.1:{port}", "timeout": 2}
    (vault.root / "memlink.yaml").write_text(yaml.safe_dump(cfg))
    app = MemlinkApp(Vault.open(vault.root))
    async with app.run_test(size=(150, 45)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.press("c")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, ChatScreen)
        status = str(app.screen.query_one("#status", Static).render())
        assert "No chat model" in status and "ollama serve" in status and "keep working" in status


async def test_lint_pane_lists_checks_and_shows_both_sides_of_a_contradiction(sample):
    from textual.widgets import DataTable, ListView

    from memlink_tui.screens.lint import LintScreen

    app = MemlinkApp(sample)
    async with app.run_test(size=(160, 50)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.press("L")
        await settle(app, pilot)  # the pane lints in a worker; on a loaded machine that outlasts one pause
        screen = app.screen
        assert isinstance(screen, LintScreen)
        checks = screen.query_one("#checks", ListView)
        index = [i.name for i in checks.children].index("contradictions")
        checks.index = index
        await pilot.pause()
        await pilot.press("enter")
        table = screen.query_one("#findings", DataTable)
        assert table.has_focus and table.row_count == 5  # review itself: tests/test_journeys.py
        await pilot.pause()
        a, b = screen.pair
        assert "A: " + a in str(screen.query_one("#box-a").border_title)
        assert "B: " + b in str(screen.query_one("#box-b").border_title)


async def test_help_lists_the_keys_and_the_palette_opens_a_note_by_title(sample):
    from textual.widgets import Static

    from memlink_tui.screens.help import HelpScreen

    app = MemlinkApp(sample)
    async with app.run_test(size=(140, 45)) as pilot:
        await app.workers.wait_for_complete()
        browser = app.screen
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = str(app.screen.query_one(Static).render())
        assert "Graph" in text and "Reload" in text and "Search" in text
        await pilot.press("escape")
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"Man Met Bril")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.screen is browser and browser.current == "entities/man-met-bril-koffie.md"


# -- the app and its panes talk through messages --------------------------------------------------
# Textual's own App API a pane may use; anything else on the app is state another pane or
# the app owns, and reaches a pane by message (memlink_tui/messages.py).
TEXTUAL_APP_API = {"push_screen", "pop_screen", "notify", "exit", "call_from_thread", "suspend", "run_action"}


def cross_pane_access(source: str) -> list[str]:
    """Where a screen or widget module reads or sets what another object owns: an app
    attribute outside Textual's API, ``getattr``/``setattr`` on the app, an assignment
    through ``.app``, or ``query_one`` on anything but itself."""
    import ast

    def is_app(node: ast.AST) -> bool:
        return isinstance(node, ast.Attribute) and node.attr == "app"

    def through_app(node: ast.AST) -> bool:
        while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
            node = node.func if isinstance(node, ast.Call) else node.value
            if is_app(node):
                return True
        return False

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and is_app(node.value) and node.attr not in TEXTUAL_APP_API:
            found.append(f"line {node.lineno}: .app.{node.attr}")
        elif isinstance(node, ast.Call) and any(is_app(a) for a in node.args):
            # getattr/setattr/watch on the app read its state; type(self.app) is its class (help's keys)
            if not (isinstance(node.func, ast.Name) and node.func.id == "type"):
                found.append(f"line {node.lineno}: the app passed to a call")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found += [f"line {node.lineno}: assignment through .app" for t in targets if through_app(t)]
            if is_app(node.value):  # an alias (app = self.app) would hide what is read from it
                found.append(f"line {node.lineno}: the app under another name")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "query_one"
              and not (isinstance(node.func.value, ast.Name) and node.func.value.id == "self")):
            found.append(f"line {node.lineno}: query_one on another object")
    return found


def test_no_pane_or_widget_reads_or_sets_another_objects_attributes():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    modules = sorted((root / "memlink_tui" / "screens").glob("*.py")) + sorted((root / "widgets").glob("*.py"))
    assert len(modules) > 10
    offenders = {str(p.relative_to(root)): hits for p in modules if (hits := cross_pane_access(p.read_text()))}
    assert offenders == {}


def test_the_scan_catches_each_kind_of_poke():
    pokes = [
        "self.app.provider",
        "self.app.current_note = uri",
        "getattr(self.app, 'health', None)",
        "app.query_one(ChatScreen).extracting = []",
        "screen.query_one('#x').value",
        "self.app.go('browser', uri)",
        "app = self.app",
        "self.watch(self.app, 'queue_depth', self._changed)",
    ]
    assert [line for line in pokes if not cross_pane_access(line)] == []
    allowed = ["self.app.call_from_thread(self.notify, 'x')", "self.app.push_screen(Help(), done)",
               "self.query_one('#x').border_title = 'x'", "self.post_message(Navigate('graph'))",
               "self._listed(type(self.app), inherited=False)"]
    assert [line for line in allowed if cross_pane_access(line)] == []


def labels(node) -> list[str]:
    return [str(node.label)] + [label for child in node.children for label in labels(child)]


async def test_a_note_saved_in_the_editor_refreshes_the_browser(sample, tmp_path, monkeypatch):
    import sys

    from memlink_tui.messages import NoteChanged, VaultChanged

    editor = tmp_path / "rename.py"
    editor.write_text("import sys, pathlib\np = pathlib.Path(sys.argv[1])\n"
                      "p.write_text(p.read_text().replace('name: Man Met Bril Koffie', 'name: Renamed Roastery'))\n")
    monkeypatch.setenv("VISUAL", f"{sys.executable} {editor}")
    uri = "entities/man-met-bril-koffie.md"
    messages: list = []
    app = MemlinkApp(sample)
    async with app.run_test(size=(140, 45), message_hook=messages.append) as pilot:
        await settle(app, pilot)
        app.go("browser", uri)
        await settle(app, pilot)
        browser = app.screen
        tree = browser.query_one(NoteTree)
        assert "Renamed Roastery" not in labels(tree.root)
        await pilot.press("e")
        for _ in range(50):  # the save runs in a worker, the reload in another
            await settle(app, pilot)
            if "Renamed Roastery" in labels(tree.root):
                break
        assert {m.uri for m in messages if isinstance(m, NoteChanged)} == {uri}  # seen by the screen, then the app
        assert any(isinstance(m, VaultChanged) for m in messages)
        assert "Renamed Roastery" in labels(tree.root)
        assert "Renamed Roastery" in str(browser.query_one(NoteView).query_one("#note-meta").render())


async def test_an_edit_of_the_title_heading_in_the_editor_renames_the_note_and_one_of_a_generated_line_is_refused(
        sample, tmp_path, monkeypatch):
    import sys

    editor = tmp_path / "edit.py"
    editor.write_text("import os, sys, pathlib\np = pathlib.Path(sys.argv[1])\n"
                      "p.write_text(p.read_text().replace(os.environ['OLD'], os.environ['NEW'], 1))\n")
    monkeypatch.setenv("VISUAL", f"{sys.executable} {editor}")
    uri = "preferences/coffee.md"
    app = MemlinkApp(sample)
    async with app.run_test(size=(140, 45)) as pilot:
        await open_at(app, pilot, "browser", uri)
        monkeypatch.setenv("OLD", "\n# Coffee\n")
        monkeypatch.setenv("NEW", "\n# Coffee (morning only)\n")
        await pilot.press("e")
        for _ in range(50):  # (the save runs in a worker)
            await settle(app, pilot)
            if sample.read_note(uri).fields["topic"] != "Coffee":
                break
        note = sample.read_note(uri)
        assert note.fields["topic"] == "Coffee (morning only)" and note.text.count("One flat white") == 1, note.body
        before = sample.path(uri).read_bytes()
        monkeypatch.setenv("OLD", "drinks · neutral")
        monkeypatch.setenv("NEW", "drinks · loved")
        await pilot.press("e")
        for _ in range(20):
            await settle(app, pilot)
        assert sample.path(uri).read_bytes() == before
        assert any("Edit not saved" in (n.title or "") for n in app._notifications)


async def test_a_note_moved_elsewhere_while_open_is_said_gone_and_e_does_not_stop_the_app(sample, tmp_path, monkeypatch):
    import sys

    from engine.review.move import move_note

    ran = tmp_path / "editor-ran"
    monkeypatch.setenv("VISUAL", f"{sys.executable} -c \"import pathlib; pathlib.Path({str(ran)!r}).touch()\"")
    uri = "entities/man-met-bril-koffie.md"
    app = MemlinkApp(sample)
    async with app.run_test(size=(140, 45)) as pilot:
        await settle(app, pilot)
        app.go("browser", uri)
        await settle(app, pilot)
        move_note(sample, uri, "entities/roastery.md")  # (another process, as the app sees it)
        await pilot.press("r")
        await settle(app, pilot)
        browser = app.screen
        assert "is no longer in the vault" in str(browser.query_one(NoteView).query_one("#note-meta").render())
        assert browser.query_one(LinkTable).row_count == 0
        await pilot.press("e")
        await settle(app, pilot)
        assert app.is_running and not ran.exists()
        assert [n.message for n in app._notifications][-1] == "Open a note first."


async def test_graph_key_asks_the_app_to_navigate_and_the_graph_reports_its_centre(sample):
    from memlink_tui.messages import Navigate, NoteFocused
    from memlink_tui.screens.graph import GraphScreen

    start = first_note_with_outgoing_links(sample)
    messages: list = []
    app = MemlinkApp(sample)
    async with app.run_test(size=(140, 45), message_hook=messages.append) as pilot:
        await settle(app, pilot)
        app.go("browser", start)
        await settle(app, pilot)
        await pilot.press("g")
        await settle(app, pilot)
        assert isinstance(app.screen, GraphScreen)
        assert Navigate("graph", start) in [m for m in messages if isinstance(m, Navigate)]
        assert [m.uri for m in messages if isinstance(m, NoteFocused)][-1] == start
        assert app.current_note == start



async def test_a_catalog_worker_that_finishes_after_the_tree_is_gone_changes_nothing(sample):
    """The browser's catalog worker hands its result to the UI thread; when the app is
    closing by then (the tree already removed), that is a no-op, not a crash (seen once
    in CI, under load)."""
    app = MemlinkApp(sample)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, BrowserScreen)
        entries = sample.catalog.all()
        await screen.query_one(NoteTree).remove()
        screen._catalog_ready(entries, NoteTree.signature_of(entries))
        screen._show_tree(entries, NoteTree.signature_of(entries))
        assert not screen.query(NoteTree)


async def test_a_save_the_chosen_model_fails_is_made_with_the_rules_on_ctrl_g(vault):
    import socket

    from conftest import set_llm
    from textual.widgets import Static

    from engine.sessions.log import append_events
    from memlink_tui.screens.chat import ChatScreen

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    vault = set_llm(vault.root, provider="ollama", host=f"http://127.0.0.1:{port}", timeout=2)
    append_events(vault, "s", [
        {"session": "s", "id": "q1", "role": "user", "content": "I love mangosteen.", "ts": "2026-11-30T10:00:00Z"},
        {"session": "s", "id": "a1", "role": "assistant", "content": "Noted.", "ts": "2026-11-30T10:00:30Z"}])
    app = MemlinkApp(vault)
    async with app.run_test(size=(150, 45)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.press("c")
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, ChatScreen)
        screen.open_session("s")
        await pilot.press("ctrl+s")
        await app.workers.wait_for_complete()
        await pilot.pause()
        status = str(screen.query_one("#status", Static).render())
        assert "commit failed" in status and "ctrl+g saves it with the rules provider" in status
        assert not vault.exists("preferences/mangosteen.md")
        await pilot.press("ctrl+g")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert "committed" in str(screen.query_one("#status", Static).render())
    assert vault.exists("preferences/mangosteen.md")
