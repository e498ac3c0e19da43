"""The app as a workstation: pane keys, palette actions, themes and the remembered
settings, provider switching, the status line, first run, the paged note tree, and
"ask about this note" in chat."""

from __future__ import annotations

from pathlib import Path

import yaml
from conftest import set_llm, settle
from ollama_stub import OllamaStub
from textual.app import App
from textual.widgets import Input, Select

from engine import CatalogEntry, Vault
from memlink_tui.app import History, Location, MemlinkApp
from memlink_tui.screens.browser import BrowserScreen
from memlink_tui.screens.chat import ChatScreen
from memlink_tui.screens.first_run import FirstRunScreen
from memlink_tui.screens.graph import GraphScreen
from memlink_tui.screens.lint import LintScreen
from memlink_tui.screens.reports import ReportScreen
from memlink_tui.settings import SettingsFile, config_dir
from memlink_tui.theming import load_themes
from widgets import NoteTree, StatusBar
from widgets.note_tree import PAGE

SIZE = (150, 45)



async def palette(pilot, text: str) -> None:
    """Open the palette, type, wait until the first hit is ours, press enter."""
    from textual.command import CommandList

    await pilot.press("ctrl+p")
    await pilot.pause()
    await pilot.press(*text)
    results = pilot.app.screen.query_one(CommandList)
    for _ in range(100):  # the providers answer asynchronously
        await pilot.pause(0.05)
        if results.option_count and text.lower() in str(results.get_option_at_index(0).prompt).lower():
            break
    await pilot.press("enter")


def test_history_goes_back_and_forward_and_a_new_visit_clears_forward():
    h = History()
    a, b, c = Location("browser", "a.md"), Location("graph", "a.md"), Location("chat")
    h.visit(a)
    h.visit(b)
    assert h.go_back(c) == b and h.go_back(b) == a and h.go_back(a) is None
    assert h.go_forward(a) == b
    h.visit(b)
    assert h.go_forward(c) is None


async def test_number_keys_reach_every_pane_and_escape_comes_back(sample):
    app = MemlinkApp(sample)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        for key, cls in (("2", ChatScreen), ("3", GraphScreen), ("4", ReportScreen), ("5", LintScreen)):
            await pilot.press("1")
            await settle(app, pilot)
            assert isinstance(app.screen, BrowserScreen)
            await pilot.press(key)
            await settle(app, pilot)
            assert isinstance(app.screen, cls), key
            await pilot.press("escape")
            await settle(app, pilot)
            assert isinstance(app.screen, BrowserScreen)
        graph = app.panes["graph"]
        assert graph.center, "with no note open the graph starts at the best-linked note"


async def test_status_line_shows_provider_vault_index_and_queue(sample):
    app = MemlinkApp(set_llm(sample.root, provider="rules"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        for _ in range(50):  # the provider check and the index load finish on their own time
            line = str(app.screen.query_one(StatusBar).render())
            if "LLM: rules" in line and "index fresh" in line and "queue idle" in line:
                break
            await pilot.pause(0.1)
        assert "LLM: rules" in line and str(sample.root.name) in line
        assert "index fresh · 72 notes" in line and "queue idle" in line
        import threading

        gate = threading.Event()
        app.run_worker(lambda: gate.wait(10), thread=True, group="dream")  # a job in the background
        for _ in range(30):
            await pilot.pause(0.1)
            if "queue 1" in str(app.screen.query_one(StatusBar).render()):
                break
        assert "queue 1" in str(app.screen.query_one(StatusBar).render())
        gate.set()
        await settle(app, pilot)
        await pilot.pause(0.6)
        assert "queue idle" in str(app.screen.query_one(StatusBar).render())


async def test_palette_switches_theme_and_the_choice_is_remembered(sample):
    app = MemlinkApp(sample)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.theme == "memlink-dark"
        await palette(pilot, "Theme: memlink-light")
        await pilot.pause()
        assert app.theme == "memlink-light"
        await pilot.press("ctrl+t")
        await pilot.pause()
        assert app.theme == "memlink-terminal"
    saved = yaml.safe_load((config_dir() / "settings.yaml").read_text())
    assert saved == {"theme": "memlink-terminal"}
    again = MemlinkApp(Vault.open(sample.root))
    async with again.run_test(size=SIZE) as pilot:
        await settle(again, pilot)
        assert again.theme == "memlink-terminal"


async def test_a_malformed_settings_file_is_reported_and_never_overwritten(sample):
    path = config_dir() / "settings.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("theme: [unclosed\n")
    app = MemlinkApp(sample)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert any("unreadable settings" in n.message for n in app._notifications)
        await pilot.press("ctrl+t")
        await pilot.pause()
    assert path.read_text() == "theme: [unclosed\n"


def test_theme_files_are_validated_and_user_themes_are_added(tmp_path):
    folder = config_dir() / "themes"
    folder.mkdir(parents=True)
    (folder / "mine.yaml").write_text("name: sepia\nprimary: '#704214'\ndark: false\n")
    (folder / "bad.yaml").write_text("name: broken\nprimary: not-a-colour\n")
    (folder / "extra.yaml").write_text("name: extra\nprimary: red\nsparkle: true\n")
    themes, problems = load_themes()
    names = [t.name for t in themes]
    assert {"memlink-dark", "memlink-light", "memlink-terminal", "sepia"} <= set(names)
    assert "broken" not in names and "extra" not in names
    assert any(p.startswith("bad.yaml") for p in problems) and any(p.startswith("extra.yaml") for p in problems)
    terminal = next(t for t in themes if t.name == "memlink-terminal")
    assert terminal.ansi, "the terminal theme uses the terminal's own colours"


async def test_palette_switches_provider_and_model(sample):
    with OllamaStub(models=["tiny:latest", "other:latest"]) as stub:
        app = MemlinkApp(set_llm(sample.root, model="tiny", host=stub.host, timeout=5))
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            assert app.provider_line == "LLM: ollama tiny"
            await palette(pilot, "Provider: rules")
            await settle(app, pilot)
            assert app.provider_line.startswith("LLM: rules") and app.provider is None
            await palette(pilot, "Model: other")
            await settle(app, pilot)
            assert app.provider_line == "LLM: ollama other:latest" and app.provider is not None
        assert SettingsFile().settings.llm_provider == "ollama"
        assert SettingsFile().settings.llm_model == "other:latest"


async def test_palette_runs_actions_new_session_and_lint(sample):
    app = MemlinkApp(sample)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await palette(pilot, "New chat session")
        await settle(app, pilot)
        assert isinstance(app.screen, ChatScreen)
        existing = {p.stem for p in (sample.root / "sessions").glob("*.jsonl")}
        assert app.screen.chat.session not in existing and not app.screen.chat.turns()
        await pilot.press("escape")
        await settle(app, pilot)
        await palette(pilot, "Run lint")
        await settle(app, pilot)
        assert isinstance(app.screen, LintScreen) and app.screen.report is not None
        assert (sample.root / "dashboards" / "digest.json").is_file()
        await palette(pilot, "Run dream")
        await settle(app, pilot)
        assert isinstance(app.screen, ReportScreen)
        assert "reports written" in str(app.screen.query_one("#dream-status").render())
        assert (sample.root / "DREAMS.md").is_file()


async def test_first_run_offers_an_empty_vault_or_the_demo(tmp_path):
    target = tmp_path / "new-vault"
    app = MemlinkApp(None, vault_path=target)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, FirstRunScreen)
        assert target.name in str(app.screen.query_one("#welcome").render())
        shown = {b.binding.description for b in app.screen.active_bindings.values() if b.binding.show and b.enabled}
        assert "Search" not in shown and "Open the demo" in shown  # (no vault yet: nothing to search)
        await pilot.press("n")
        await settle(app, pilot)
        assert isinstance(app.screen, BrowserScreen) and (target / "memlink.yaml").is_file()
        assert app.vault.root == target and app.vault.catalog.all() == []

    demo = MemlinkApp(None, vault_path=tmp_path / "other")
    async with demo.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("d")
        await settle(demo, pilot)
        assert isinstance(demo.screen, BrowserScreen) and len(demo.vault.catalog.all()) == 72
        assert not (tmp_path / "other").exists(), "the demo is a copy elsewhere; the chosen path stays free"


async def test_ask_about_a_note_sends_it_to_the_model(sample):
    with OllamaStub() as stub:
        vault = set_llm(sample.root, model="tiny", host=stub.host, timeout=5)
        uri = "entities/man-met-bril-koffie.md"
        app = MemlinkApp(vault)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            app.go("browser", uri)
            await settle(app, pilot)
            await pilot.press("a")
            await settle(app, pilot)
            chat = app.screen
            assert isinstance(chat, ChatScreen) and chat.about == uri
            assert "Man Met Bril" in chat.query_one("#message", Input).placeholder
            stub.script.append(("json", "It is a coffee roaster."))
            await pilot.press(*"What is this place?", "enter")
            await settle(app, pilot)
            sent = [r["body"] for r in stub.requests if r["path"] == "/api/chat" and r["body"].get("stream")][-1]
            # the note goes to the model as quoted data in a user message, never as a system one
            about = [m for m in sent["messages"] if "asking about this note" in m["content"]]
            assert about and about[0]["role"] == "user" and "| # Man Met Bril" in about[0]["content"]
            assert sent["messages"][-1] == {"role": "user", "content": "What is this place?"}


class TreeApp(App):
    def compose(self):
        yield NoteTree(id="tree")


async def test_the_note_tree_pages_big_groups():
    entries = [CatalogEntry(f"entities/e{i:05d}.md", "entity", f"Entity {i:05d}", "", "", 0, 0, "x")
               for i in range(3 * PAGE + 50)]
    entries.append(CatalogEntry("profile/me.md", "profile", "Me", "", "", 0, 0, "x"))
    entries.append(CatalogEntry("sources/a.md", "source", "A source", "", "", 0, 0, "x"))
    app = TreeApp()
    async with app.run_test(size=(80, 30)) as pilot:
        tree = app.query_one(NoteTree)
        tree.load(entries)
        await pilot.pause()
        branch = tree._branches["entity"]
        assert len(branch.children) == 0, "leaves are added when a branch opens"
        tree.focus()
        tree.move_cursor(branch)
        await pilot.press("space")
        await pilot.pause()
        assert len(branch.children) == PAGE + 1 and branch.children[-1].data.startswith("\0")
        tree.move_cursor(branch.children[-1])
        await pilot.press("enter")
        await pilot.pause()
        assert len(branch.children) == 2 * PAGE + 1
        assert tree.cursor_node.data == f"entities/e{PAGE:05d}.md"
        deep = f"entities/e{3 * PAGE + 40:05d}.md"
        tree.reveal(deep)
        await pilot.pause()
        assert tree.cursor_node.data == deep
        assert len(branch.children) <= PAGE + 2, "a far jump shows a page around the note"
        assert branch.children[0].data.startswith("\0")  # "… earlier"


async def open_link_editor(app, pilot, source: str, target_text: str) -> None:
    """In the browser on ``source``, press k and type part of the target's title."""
    await settle(app, pilot)
    app.go("browser", source)
    await settle(app, pilot)
    await pilot.press("k")
    await pilot.pause()
    await pilot.press(*target_text)


async def test_link_two_notes_from_the_browser_then_remove_the_link(sample):
    from widgets import LinkTable

    source, target = "preferences/coffee.md", "entities/hangzhou.md"
    assert not [l for l in sample.links.of(source, "links") if l.to_uri == target]
    app = MemlinkApp(sample)
    async with app.run_test(size=SIZE) as pilot:
        await open_link_editor(app, pilot, source, "hangzhou")
        await pilot.press("tab", "tab", "tab")  # matches, type, weight
        app.screen.query_one("#link-weight", Input).value = "0.4"
        app.screen.query_one("#link-why", Input).value = "bought on the trip"
        await pilot.press("ctrl+s")
        await pilot.pause()
        await pilot.press("y")  # the summary: write it
        await settle(app, pilot)
        assert isinstance(app.screen, BrowserScreen)
        made = [l for l in sample.links.of(source, "links") if l.to_uri == target]
        assert len(made) == 1 and made[0].weight == 0.4 and made[0].description == "bought on the trip"
        assert [l for l in sample.links.of(target, "backlinks") if l.from_uri == source]
        table = app.screen.query_one(LinkTable)
        await pilot.press("l")
        row = next(i for i, l in enumerate(table._links) if l.id == made[0].id)
        table.move_cursor(row=row)
        await pilot.press("delete")
        await pilot.pause()
        await pilot.press("y")
        await settle(app, pilot)
        assert not [l for l in sample.links.of(source, "links") if l.to_uri == target]
        assert not [l for l in sample.links.of(target, "backlinks") if l.from_uri == source]


async def test_a_bad_link_writes_nothing(sample):
    source = "preferences/coffee.md"
    before = sample.links.of(source, "both")
    app = MemlinkApp(sample)
    async with app.run_test(size=SIZE) as pilot:
        await open_link_editor(app, pilot, source, "hangzhou")
        app.screen.query_one("#link-weight", Input).value = "7"
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert "weight" in str(app.screen.query_one("#link-error").render()).lower()
        app.screen.query_one("#link-weight", Input).value = "0.5"
        app.screen.query_one("#link-anchor", Input).value = "words not in the note"
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert "not in this note" in str(app.screen.query_one("#link-error").render())
        app.screen.query_one("#link-anchor", Input).value = ""
        app.screen.query_one("#link-target", Input).value = "Man Met Bril Koffie"  # linked already
        await pilot.pause()
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert "already linked" in str(app.screen.query_one("#link-error").render())
    assert sample.links.of(source, "both") == before


async def test_edit_a_note_in_the_editor_is_validated_and_written_through_the_vault(sample, tmp_path, monkeypatch):
    uri = "preferences/coffee.md"
    path = sample.root / uri

    async def edit_with(script: str) -> MemlinkApp:
        editor = tmp_path / "editor.sh"
        editor.write_text("#!/bin/sh\n" + script + "\n")
        editor.chmod(0o755)
        monkeypatch.setenv("VISUAL", str(editor))
        app = MemlinkApp(Vault.open(sample.root))
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            app.go("browser", uri)
            await settle(app, pilot)
            await pilot.press("e")
            await settle(app, pilot)
            app.messages = [n.message for n in app._notifications]
            app.body = str(app.screen.query_one("#note-body").source)
        return app

    # 1. A field edited in the frontmatter: saved, and the body is written from it.
    app = await edit_with("sed -i 's/One flat white in the morning/One cortado in the morning/' \"$1\"")
    assert "One cortado in the morning" in sample.read_note(uri).fields["content"]
    assert "One cortado in the morning" in sample.read_note(uri).body and "cortado" in app.body
    # 1b. The visible text edited where the view shows it: the memory changes with it, once.
    await edit_with("sed -i '/<!-- memlink:view -->/,/<!-- \\/memlink:view -->/ s/One cortado/Two cortados/' \"$1\"")
    note = sample.read_note(uri)
    assert "Two cortados in the morning" in note.fields["content"]
    assert note.body.count("Two cortados") == 1 and "One cortado" not in path.read_text()
    # 2. Text typed under the frontmatter is the user's: kept as typed, the fields as they were.
    fields = sample.read_note(uri).fields
    app = await edit_with("printf '\\nAlso tea.\\n' >> \"$1\"")
    text = path.read_text()
    assert text.rstrip().endswith("Also tea.") and text.count("<!-- memlink:links") == 1
    assert sample.read_note(uri).fields == fields and not any("not saved" in m for m in app.messages)
    before = path.read_text()
    # 3. Broken frontmatter: refused, nothing changes, the edit is kept for the user.
    app = await edit_with("printf 'not: [valid' > \"$1\"")
    assert path.read_text() == before
    kept = [m for m in app.messages if "your edit is kept in" in m]
    assert kept and Path(kept[0].rsplit("kept in ", 1)[1]).read_text() == "not: [valid"


async def test_history_skips_deleted_notes_and_counts_only_real_moves(sample):
    app = MemlinkApp(sample)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("1")  # already in the browser: not a step
        await settle(app, pilot)
        assert app.history.back == []
        for uri in ("preferences/coffee.md", "entities/hangzhou.md", "entities/mochi.md"):
            app.go("browser", uri)
            await settle(app, pilot)
        assert [l.uri for l in app.history.back] == ["preferences/coffee.md", "entities/hangzhou.md"]
        sample.delete_note("entities/hangzhou.md")
        app.action_back()
        app.action_back()  # queued: runs after the first one finished, finds nothing left
        await settle(app, pilot)
        assert app.screen.current == "preferences/coffee.md"  # hangzhou is gone: skipped
        assert app.history.back == [] and [l.uri for l in app.history.forward] == ["entities/mochi.md"]
        app.action_forward()
        await settle(app, pilot)
        assert app.screen.current == "entities/mochi.md"


async def test_asking_about_a_note_ends_with_a_new_session_or_when_the_note_is_gone(sample):
    app = MemlinkApp(sample)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app.go("browser", "preferences/coffee.md")
        await settle(app, pilot)
        await pilot.press("a")
        await settle(app, pilot)
        chat = app.screen
        assert chat.about == "preferences/coffee.md"
        await pilot.press("ctrl+n")
        await pilot.pause()
        assert chat.about is None and "Ask about" not in chat.query_one("#message", Input).placeholder
        await pilot.press("escape")
        await settle(app, pilot)
        await pilot.press("a")
        await settle(app, pilot)
        assert chat.about == "preferences/coffee.md"
        sample.delete_note("preferences/coffee.md")
        await pilot.press(*"still there?", "enter")  # rules provider: no reply, but nothing breaks
        await settle(app, pilot)
        assert chat.about is None
        assert any("no longer exists" in n.message for n in app._notifications)


async def test_settings_are_not_rewritten_at_start_and_hand_edits_survive(sample):
    path = config_dir() / "settings.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# my settings\ntheme: memlink-light\n")
    app = MemlinkApp(sample)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.theme == "memlink-light"
        assert path.read_text() == "# my settings\ntheme: memlink-light\n", "startup must not save"
        path.write_text("theme: memlink-light\nllm_provider: rules\n")  # edited by hand meanwhile
        await pilot.press("ctrl+t")
        await pilot.pause()
    assert yaml.safe_load(path.read_text()) == {"theme": "memlink-terminal", "llm_provider": "rules"}


async def test_an_unwritable_settings_folder_or_bad_bytes_never_crash_the_app(sample, tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("MEMLINK_CONFIG_HOME", str(blocker / "sub"))  # a folder under a file
    app = MemlinkApp(sample)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("ctrl+t")
        await pilot.pause()
        assert app.theme == "memlink-light" and app.is_running
        assert any("not sav" in n.message for n in app._notifications)
    good = tmp_path / "cfg"
    good.mkdir()
    (good / "settings.yaml").write_bytes(b"theme: \xff\xfe\n")
    monkeypatch.setenv("MEMLINK_CONFIG_HOME", str(good))
    app = MemlinkApp(Vault.open(sample.root))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert any("unreadable settings" in n.message for n in app._notifications)
    assert (good / "settings.yaml").read_bytes() == b"theme: \xff\xfe\n"


def test_a_theme_with_a_bad_variable_is_skipped():
    folder = config_dir() / "themes"
    folder.mkdir(parents=True)
    (folder / "odd.yaml").write_text("name: odd\nprimary: '#123456'\nvariables:\n  block-cursor-background: notacolour\n")
    (folder / "fine.yaml").write_text("name: fine\nprimary: '#123456'\nvariables:\n  input-cursor-text-style: bold\n"
                                      "  link-style-hover: bold not underline\n  border: '#81a1c1 35%'\n")
    themes, problems = load_themes()
    assert "odd" not in [t.name for t in themes] and "fine" in [t.name for t in themes]
    assert any("odd.yaml: variables.block-cursor-background" in p for p in problems)


async def test_capital_b_jumps_to_the_backlinks(sample):
    from widgets import LinkTable

    uri = "entities/cone-6-celadon.md"
    app = MemlinkApp(sample)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app.go("browser", uri)
        await settle(app, pilot)
        await pilot.press("B")
        await pilot.pause()
        table = app.screen.query_one(LinkTable)
        assert table.has_focus and table.selected_link.direction == "backlinks"
        linking_here = table.selected_link.from_uri
        assert linking_here != uri
        await pilot.press("enter")
        await settle(app, pilot)
        assert app.screen.current == linking_here


async def test_an_extraction_started_in_chat_shows_in_the_status_line_until_it_ends(sample):
    from memlink_tui.messages import ExtractionStarted, ProviderChanged

    with OllamaStub() as stub:
        app = MemlinkApp(set_llm(sample.root, model="tiny", host=stub.host, timeout=10))
        messages: list = []
        async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
            await settle(app, pilot)
            await pilot.press("c")
            await settle(app, pilot)
            chat = app.screen
            assert isinstance(chat, ChatScreen)
            assert any(isinstance(m, ProviderChanged) and m.provider is not None for m in messages)
            await pilot.press("ctrl+n")  # a fresh session: its one turn is all there is to extract
            stub.script += [("json", "Noted."), ("hang", 2)]  # the reply, then a slow extraction call
            await pilot.press(*"I switched to oat milk.", "enter")
            await settle(app, pilot)
            started = [m for m in messages if isinstance(m, ExtractionStarted)]
            assert started and started[0].thread.is_alive()
            assert "queue 1" in str(chat.query_one(StatusBar).render())
            for _ in range(300):  # not join(): the thread ends by calling into the UI thread
                await pilot.pause(0.1)
                if not started[0].thread.is_alive():
                    break
            assert not started[0].thread.is_alive()
            await pilot.pause(0.6)  # the queue timer's next count
            assert "queue idle" in str(chat.query_one(StatusBar).render())


async def test_the_link_editor_clears_an_anchor_and_keeps_what_was_typed_before_the_link_showed(sample):
    from engine.review.linkwrite import write_link

    source = "preferences/coffee.md"
    old = next(l for l in sample.links.of(source, "links") if sample.catalog.get(l.to_uri).title == "Man Met Bril Koffie")
    write_link(sample, source, old.to_uri, update=True, match_text="flat white")
    app = MemlinkApp(sample)
    async with app.run_test(size=SIZE) as pilot:
        # Tab (not enter) out of the target, a weight typed: the first ctrl+s shows the link
        # there is, with the typed weight kept; the emptied anchor then removes the anchor.
        await open_link_editor(app, pilot, source, "Man Met Bril Koffie")
        await pilot.press("tab")
        app.screen.query_one("#link-weight", Input).value = "0.35"
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert "already linked" in str(app.screen.query_one("#link-error").render())
        assert app.screen.query_one("#link-weight", Input).value == "0.35"
        assert app.screen.query_one("#link-anchor", Input).value == "flat white"
        assert app.screen.query_one("#link-why", Input).value == old.description
        app.screen.query_one("#link-anchor", Input).value = ""
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert "(none: the whole note)" in str(app.screen.query_one("Static").render())
        await pilot.press("y")
        await settle(app, pilot)
        assert isinstance(app.screen, BrowserScreen)
        assert f"updated the link to {old.to_uri}" in [n.message for n in app._notifications]
    (now,) = [l for l in sample.links.of(source, "links") if l.to_uri == old.to_uri]
    assert (now.id, now.weight, now.match_text, now.description) == (old.id, 0.35, None, old.description)


async def test_the_link_editor_updates_the_link_it_shows_when_the_type_changes(sample):
    source = "preferences/coffee.md"
    old = next(l for l in sample.links.of(source, "links") if sample.catalog.get(l.to_uri).title == "Man Met Bril Koffie")
    other = sample.link(source, old.to_uri, "belongs_to", weight=0.2, description="the second link")
    app = MemlinkApp(sample)
    async with app.run_test(size=SIZE) as pilot:
        await open_link_editor(app, pilot, source, "Man Met Bril Koffie")
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen.query_one("#link-why", Input).value == old.description  # the form shows the first link
        app.screen.query_one("#link-type", Select).value = "caused_by"
        await pilot.press("ctrl+s")
        await pilot.pause()
        await pilot.press("y")
        await settle(app, pilot)
        assert isinstance(app.screen, BrowserScreen)
    links = {l.id: l for l in sample.links.of(source, "links") if l.to_uri == old.to_uri}
    assert links[old.id].link_type.value == "caused_by" and links[other.id] == other


async def test_the_link_editor_updates_a_link_the_note_has_and_undo_puts_it_back(sample):
    from engine.review.actions import undo

    source = "preferences/coffee.md"
    old = next(l for l in sample.links.of(source, "links") if sample.catalog.get(l.to_uri).title == "Man Met Bril Koffie")
    sidecars = {p: p.read_bytes() for p in sample.root.rglob(".relations.json")}
    app = MemlinkApp(sample)
    async with app.run_test(size=SIZE) as pilot:
        await open_link_editor(app, pilot, source, "Man Met Bril Koffie")
        await pilot.press("enter")  # the target is linked already: the form shows that link
        await pilot.pause()
        assert "already linked" in str(app.screen.query_one("#link-error").render())
        assert app.screen.query_one("#link-weight", Input).value == f"{old.weight:g}"
        assert app.screen.query_one("#link-why", Input).value == old.description
        app.screen.query_one("#link-weight", Input).value = "0.35"
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert "Update the link" in str(app.screen.query_one("Static").render())
        await pilot.press("y")
        await settle(app, pilot)
        assert isinstance(app.screen, BrowserScreen)
        assert f"updated the link to {old.to_uri}" in [n.message for n in app._notifications]
    (now,) = [l for l in sample.links.of(source, "links") if l.to_uri == old.to_uri]
    assert now.id == old.id and now.weight == 0.35
    assert (now.link_type, now.description, now.match_text) == (old.link_type, old.description, old.match_text)
    undo(sample)
    assert {p: p.read_bytes() for p in sample.root.rglob(".relations.json")} == sidecars


async def test_the_link_editor_shows_a_link_of_an_old_uris_reason_entry_and_its_update_keeps_the_reason(sample):
    app = MemlinkApp(sample)
    async with app.run_test(size=SIZE) as pilot:
        await open_link_editor(app, pilot, "profile.md", "Tom Vermeulen")
        await pilot.press("enter")
        await pilot.pause()
        assert "already linked" in str(app.screen.query_one("#link-error").render())
        assert app.screen.query_one("#link-why", Input).value == "Tom is Lena's partner."
        app.screen.query_one("#link-weight", Input).value = "0.8"
        await pilot.press("ctrl+s")
        await pilot.pause()
        await pilot.press("y")
        await settle(app, pilot)
    (now,) = [l for l in sample.links.of("profile.md", "links") if l.to_uri == "entities/tom-vermeulen.md"]
    assert (now.weight, now.description, now.legacy) == (0.8, "Tom is Lena's partner.", False)


async def test_the_report_queue_says_when_nothing_is_known_yet(sample):
    from textual.widgets import Label, ListView

    from engine.retrieve.search import search

    for _ in range(3):
        search(sample, "sourdough starter hydration", log=True)
    app = MemlinkApp(sample)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await palette(pilot, "Run dream")
        await settle(app, pilot)
        assert isinstance(app.screen, ReportScreen)
        status = str(app.screen.query_one("#dream-status").render())
        assert "nothing known yet (the question stays open): What do I know about sourdough starter hydration?" in status
        def labels() -> list[str]:  # (a refresh of the list may be mounting its rows)
            return [str(label.render()) for item in app.screen.query_one("#queue", ListView).children
                    for label in item.query(Label)]

        for _ in range(50):
            if "[nothing known yet] What do I know about sourdough starter hydration?" in labels():
                break
            await pilot.pause(0.05)
        assert "[nothing known yet] What do I know about sourdough starter hydration?" in labels()
        assert not any("nothing_known_yet" in label for label in labels())


async def test_at_80x24_a_long_dream_outcome_leaves_the_report_list_its_rows(sample):
    """The outcome scrolls in a few lines; the list of questions and reports keeps its room."""
    from textual.widgets import ListView

    for n in range(12):  # a dozen questions: a dozen outcome lines
        sample.write_note("report_candidate", {"question": f"What do I know about topic number {n}?", "status": "pending"})
    app = MemlinkApp(sample)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await app.run_action("go('reports')")
        await settle(app, pilot)
        await pilot.press("D")
        await settle(app, pilot)
        status = app.screen.query_one("#dream-status")
        assert "reports written" in str(status.render()) and status.region.height <= 24 * 30 // 100
        queue = app.screen.query_one("#queue", ListView)
        assert queue.region.height >= 8 and len(queue.children) > 12
