"""The app through Textual's Pilot, on a copy of the sample vault."""

from __future__ import annotations

from memlink_tui.app import MemlinkApp
from memlink_tui.screens.browser import BrowserScreen
from widgets import LinkTable, NoteTree, NoteView


def first_note_with_outgoing_links(vault) -> str:
    for entry in sorted(vault.list_notes(), key=lambda e: e.uri):
        if vault.get_file_links(entry.uri, "links"):
            return entry.uri
    raise AssertionError("sample vault has no outgoing links")


async def test_open_sample_vault_and_follow_a_link_by_keyboard(sample):
    app = MemlinkApp(sample)
    async with app.run_test(size=(140, 45)) as pilot:
        await pilot.pause()
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
        await pilot.pause()
        leaf = next(n for n in branch.children if n.data == start)
        while tree.cursor_node is not leaf:
            await pilot.press("down")
        await pilot.press("enter")
        await pilot.pause()
        assert screen.current == start
        table = screen.query_one(LinkTable)
        assert table.row_count == len(sample.get_file_links(start, "both"))
        await pilot.press("l")
        assert table.has_focus
        target = table.selected_uri
        outgoing = sample.get_file_links(start, "links")[0]
        assert target == outgoing.to_uri  # outgoing links are listed first, strongest first
        await pilot.press("enter")
        await pilot.pause()
        assert screen.current == target
        view = screen.query_one(NoteView)
        assert sample.title(sample.read_note(target)) in str(view.query_one("#note-meta").render())
        await pilot.press("backspace")
        await pilot.pause()
        assert screen.current == start
        await pilot.press("f")
        await pilot.pause()
        assert screen.current == target


async def test_rendered_links_in_the_note_body(sample):
    app = MemlinkApp(sample)
    async with app.run_test(size=(140, 45)) as pilot:
        await pilot.pause()
        screen = app.screen
        uri = next(
            l.from_uri for l in sample.all_links() if l.match_text and not l.legacy
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
        await pilot.pause()
        browser = app.screen
        await browser.open_note(start)
        await pilot.press("g")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, GraphScreen)
        tree = screen.query_one("#neighbours", Tree)
        groups = [str(n.label) for n in tree.root.children]
        links = sample.get_file_links(start, "both")
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
        await pilot.press("o")
        await pilot.pause()
        assert app.screen is browser
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert browser.current == target


async def test_import_a_file_shows_the_diff_then_opens_the_source(sample, tmp_path):
    from textual.widgets import Input, Static

    from memlink_tui.screens.importer import ImportScreen

    doc = tmp_path / "trip.md"
    doc.write_text("# Kyoto trip ideas\n\nI love quiet temples. Talk to [[Tom Vermeulen]] about dates.\n")
    app = MemlinkApp(sample)
    async with app.run_test(size=(140, 45)) as pilot:
        await app.workers.wait_for_complete()
        browser = app.screen
        await pilot.press("i")
        await pilot.pause()
        assert isinstance(app.screen, ImportScreen)
        app.screen.query_one(Input).value = str(doc)
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        shown = str(app.screen.query_one("#import-result", Static).render())
        assert "+ sources/kyoto-trip-ideas.md" in shown and "+ preferences/quiet-temples.md" in shown
        assert "entities/tom-vermeulen.md" in shown
        await pilot.press("escape")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.screen is browser and browser.current == "sources/kyoto-trip-ideas.md"


async def test_chat_pane_streams_a_reply_and_shows_recall(sample):
    import yaml
    from textual.widgets import Input, Static

    from engine import Vault
    from memlink_tui.screens.chat import ChatScreen
    from ollama_stub import OllamaStub

    with OllamaStub() as stub:
        cfg = yaml.safe_load((sample.root / "memlink.yaml").read_text())
        cfg["llm"] = {"model": "tiny", "host": stub.host, "timeout": 5}
        (sample.root / "memlink.yaml").write_text(yaml.safe_dump(cfg))
        vault = Vault.open(sample.root)
        from engine.sessions.importer import extract_pending, RulesTurnExtractor

        extract_pending(vault, ["2026-08-11-evening-setup"], RulesTurnExtractor())
        app = MemlinkApp(vault)
        async with app.run_test(size=(150, 45)) as pilot:
            await app.workers.wait_for_complete()
            await pilot.press("c")
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, ChatScreen)
            await app.workers.wait_for_complete()
            await pilot.pause()
            assert "chat model: ollama:tiny" in str(screen.query_one("#status", Static).render())
            await pilot.press("ctrl+n")
            stub.script.append(("json", "Your flat white is at Man Met Bril."))
            screen.query_one("#message", Input).value = "Where do I get my flat white?"
            await pilot.press("enter")
            await app.workers.wait_for_complete()
            await pilot.pause()
            texts = [str(w.render()) for w in screen.query(".assistant")]
            assert texts[-1] == "Your flat white is at Man Met Bril."
            listed = screen.query_one("#recall-list")
            recall = "\n".join(str(listed.get_option_at_index(i).prompt) for i in range(listed.option_count))
            assert "2026-08-11-evening-setup" in recall and "flat white" in recall.lower()


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


async def test_report_queue_add_question_and_dream(sample):
    from textual.widgets import Input, ListView, Static

    from memlink_tui.screens.reports import AskScreen, ReportScreen

    app = MemlinkApp(sample)
    async with app.run_test(size=(150, 45)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.press("R")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ReportScreen)
        names = [item.name for item in screen.query_one("#queue", ListView).children]
        assert names[0].startswith("report_candidates/")  # pending questions first
        await pilot.press("n")
        await pilot.pause()
        assert isinstance(app.screen, AskScreen)
        app.screen.query_one(Input).value = "What glaze recipes did Noor suggest?"
        await pilot.press("enter")
        await pilot.pause()
        assert "report_candidates/what-glaze-recipes-did-noor-suggest.md" in [i.name for i in screen.query_one("#queue", ListView).children]
        await pilot.press("D")
        await app.workers.wait_for_complete()
        await pilot.pause()
        status = str(screen.query_one("#dream-status", Static).render())
        assert "report(s) written" in status and "+ reports/what-glaze-recipes-did-noor-suggest.md" in status
        assert sample.read_note("report_candidates/what-glaze-recipes-did-noor-suggest.md").fields["status"] == "done"


async def test_lint_pane_reviews_a_contradiction_and_undoes_it(sample):
    from textual.widgets import DataTable, ListView, Static

    from memlink_tui.screens.lint import LintScreen

    app = MemlinkApp(sample)
    async with app.run_test(size=(160, 50)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.press("L")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, LintScreen)
        checks = screen.query_one("#checks", ListView)
        index = [i.name for i in checks.children].index("contradictions")
        checks.index = index
        await pilot.pause()
        await pilot.press("enter")
        table = screen.query_one("#findings", DataTable)
        assert table.has_focus and table.row_count == 5
        await pilot.pause()
        a, b = screen.pair
        await pilot.press("a")
        await pilot.pause()
        assert "superseded" in str(screen.query_one("#review-status", Static).render())
        assert sample.read_note(b).extra.get("superseded_by") == a
        await pilot.press("u")
        await pilot.pause()
        assert "undid keep-a" in str(screen.query_one("#review-status", Static).render())
        assert "superseded_by" not in sample.read_note(b).extra


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
