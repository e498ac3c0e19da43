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
