"""What a person does with memlink, end to end, from the keyboard (Textual's Pilot)."""

from __future__ import annotations

from conftest import set_llm, settle
from ollama_stub import OllamaStub
from textual.widgets import DataTable, ListView, Markdown, OptionList, Static

from memlink_tui.app import MemlinkApp
from memlink_tui.paths import copy_sample_vault
from memlink_tui.screens.browser import BrowserScreen
from memlink_tui.screens.chat import ChatScreen
from memlink_tui.screens.graph import GraphScreen
from memlink_tui.screens.importer import ImportScreen
from memlink_tui.screens.lint import LintScreen
from memlink_tui.screens.reports import AskScreen, ReportScreen
from memlink_tui.screens.search import SearchScreen
from widgets import LinkTable

SIZE = (150, 45)



async def test_demo_search_open_hit_follow_link_graph_and_back(tmp_path):
    vault = set_llm(copy_sample_vault(tmp_path / "demo"), provider="rules")
    app = MemlinkApp(vault)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        browser = app.screen
        assert isinstance(browser, BrowserScreen)
        await pilot.press("slash", *"celadon glaze", "enter")
        await settle(app, pilot)
        assert isinstance(app.screen, SearchScreen)
        hit = app.screen.last_hits[0].uri
        await pilot.press("down", "enter")
        await settle(app, pilot)
        assert app.screen is browser and browser.current == hit
        await pilot.press("l")
        table = browser.query_one(LinkTable)
        assert table.has_focus and table.row_count > 0
        linked = table.selected_uri
        await pilot.press("enter")
        await settle(app, pilot)
        assert browser.current == linked
        await pilot.press("g")
        await settle(app, pilot)
        assert isinstance(app.screen, GraphScreen) and app.screen.center == linked
        await pilot.press("backspace")
        await settle(app, pilot)
        assert app.screen is browser and browser.current == linked
        await pilot.press("b")
        await settle(app, pilot)
        assert browser.current == hit
        await pilot.press("f", "f")  # forward again: the linked note, then the graph
        await settle(app, pilot)
        assert isinstance(app.screen, GraphScreen) and app.screen.center == linked


async def test_review_a_contradiction_keep_a_then_undo(sample):
    contradiction = next(l for l in sample.links.all() if l.link_type.value == "contradicts" and l.direction == "links")
    app = MemlinkApp(sample)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(app, pilot)
        app.go("browser", contradiction.from_uri)
        await settle(app, pilot)
        await pilot.press("x")  # this note's contradictions, in review
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, LintScreen)
        table = screen.query_one("#findings", DataTable)
        assert table.has_focus and table.row_count >= 1
        a, b = screen.pair
        assert contradiction.from_uri in (a, b)
        await pilot.press("left_square_bracket")  # keep A: first what it will change, nothing written yet
        await pilot.pause()
        assert "y applies" in str(screen.query_one("#review-status", Static).render())
        assert "superseded_claims" not in sample.read_note(b).extra and "superseded_by" not in sample.read_note(b).extra
        await pilot.press("y")
        await pilot.pause()
        assert "superseded" in str(screen.query_one("#review-status", Static).render())
        dropped = sample.read_note(b).extra  # the disputed claim, or the whole note when that is the claim
        assert dropped.get("superseded_by") == a or [c["superseded_by"] for c in dropped["superseded_claims"]] == [a]
        await pilot.press("u")  # first what it undoes
        await pilot.pause()
        assert "y applies" in str(screen.query_one("#review-status", Static).render())
        assert sample.read_note(b).extra == dropped
        await pilot.press("y")
        await pilot.pause()
        assert "undid keep-a" in str(screen.query_one("#review-status", Static).render())
        assert "superseded_by" not in sample.read_note(b).extra and "superseded_claims" not in sample.read_note(b).extra
        assert "superseded_by" not in sample.read_note(a).extra


async def test_add_a_research_question_dream_and_read_the_report(sample):
    question = "What glaze recipes did Noor suggest?"
    app = MemlinkApp(sample)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("R")
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, ReportScreen)
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(app.screen, AskScreen)
        await pilot.press(*question, "enter")
        await pilot.pause()
        queue = screen.query_one("#queue", ListView)
        assert queue.highlighted_child.name == "report_candidates/what-glaze-recipes-did-noor-suggest.md"
        await pilot.press("D")
        await settle(app, pilot)
        status = str(screen.query_one("#dream-status", Static).render())
        assert "+ reports/what-glaze-recipes-did-noor-suggest.md" in status
        assert queue.highlighted_child.name.startswith("reports/")  # the first new report is selected
        names = [item.name for item in queue.children]
        queue.focus()
        for _ in range(len(names)):  # walk down to ours, as a person would
            if queue.highlighted_child.name == "reports/what-glaze-recipes-did-noor-suggest.md":
                break
            await pilot.press("down" if names.index("reports/what-glaze-recipes-did-noor-suggest.md") > queue.index else "up")
        await pilot.pause()
        body = screen.query_one("#report-body", Markdown).source
        assert question in body
        await pilot.press("enter")  # read it in the browser, with its links
        await settle(app, pilot)
        browser = app.screen
        assert isinstance(browser, BrowserScreen) and browser.current == "reports/what-glaze-recipes-did-noor-suggest.md"
        links = sample.links.of(browser.current, "links")
        assert links and all(l.link_type.value == "derived_from" for l in links)
        assert browser.query_one(LinkTable).row_count >= len(links)


async def test_import_a_file_and_see_the_diff(sample, tmp_path):
    doc = tmp_path / "trip.md"
    doc.write_text("# Kyoto trip ideas\n\nI love quiet temples. Talk to [[Tom Vermeulen]] about dates.\n")
    app = MemlinkApp(sample)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        browser = app.screen
        await pilot.press("i")
        await pilot.pause()
        assert isinstance(app.screen, ImportScreen)
        await pilot.press(*str(doc), "enter")
        await settle(app, pilot)
        shown = str(app.screen.query_one("#import-result", Static).render())
        assert "+ sources/trip.md" in shown and "+ preferences/quiet-temples.md" in shown
        assert "entities/tom-vermeulen.md" in shown
        await pilot.press("escape")
        await settle(app, pilot)
        assert app.screen is browser and browser.current == "sources/trip.md"


async def test_chat_turn_recalls_a_past_turn_and_opens_it(sample):
    from engine.sessions.importer import RulesTurnExtractor, extract_pending

    with OllamaStub() as stub:
        vault = set_llm(sample.root, model="tiny", host=stub.host, timeout=5)
        extract_pending(vault, ["2026-08-11-evening-setup"], RulesTurnExtractor())
        app = MemlinkApp(vault)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            assert "LLM: ollama tiny" in app.provider_line
            await pilot.press("c")
            await settle(app, pilot)
            screen = app.screen
            assert isinstance(screen, ChatScreen)
            assert "chat model" in str(screen.query_one("#status", Static).render())
            await pilot.press("ctrl+n")
            stub.script.append(("json", "Your flat white is at Man Met Bril."))
            await pilot.press(*"Where do I get my flat white?", "enter")
            await settle(app, pilot)
            assert str(list(screen.query(".assistant"))[-1].render()) == "Your flat white is at Man Met Bril."
            chats = [r["body"] for r in stub.requests if r["path"] == "/api/chat" and r["body"].get("stream")]
            sent = chats[-1]["messages"]
            # recall went in, as quoted data in a user message (docs/DESIGN.md, "Turn memory")
            assert any("| " in m["content"] and "flat white" in m["content"] and "BEGIN MEMORY" in m["content"]
                       and m["role"] == "user" for m in sent[:-1])
            listed = screen.query_one("#recall-list", OptionList)
            prompts = [str(listed.get_option_at_index(i).prompt) for i in range(listed.option_count)]
            # The sample's other session logs are recalled too (their turn memories are
            # rebuilt from the logs), so the flat-white turn need not be this session's first hit.
            past = next(i for i, p in enumerate(prompts) if "2026-08-11-evening-setup" in p and "flat white" in p.lower())
            await pilot.press("ctrl+r")
            assert listed.has_focus
            listed.highlighted = past
            await pilot.press("enter")  # open the recalled turn's session
            await settle(app, pilot)
            assert screen.chat.session == "2026-08-11-evening-setup"
            assert any("flat white" in str(w.render()).lower() for w in screen.query(".user"))
