"""The lint pane: counts per check, the findings of the chosen check (enter opens the
note) — first "worst first": errors, contradictions and other warnings one by one, then a
row per grouped check (freshness, provenance…) that enter expands —, and review mode for contradictions: both sides shown, single keys act —
[ keep A (left), ] keep B (right), e edit both into one (merge), d dismiss, a ask (research),
u undo the vault's last action. An action first shows what it
will change (engine.review.actions.preview); y applies exactly that, escape cancels. Merge opens an
editor holding both texts; ctrl+s previews the merged text, escape from that preview goes back
to the editor, and text edited there is kept (per pair) until the merge or another review of
the pair is applied."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from rich.cells import cell_len
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Footer, Label, ListItem, ListView, Markdown, Static, TextArea

from engine import MemlinkError, Vault
from engine.lint.report import GROUPED, LintReport, lint, rank, write_dashboards
from engine.model.text import printable_path
from widgets.keys import keys_taken
from widgets.safe import safe_markup, safe_path
from widgets.status_bar import Status

from ..messages import Linted
from .pane import Pane

MAX_ROWS = 1000
GROUP = "group"  # the key of a grouped check's row: group|check|
RANKED = "worst first"  # the checks list's first entry: every check, ranked, grouped ones one row each


class Pending(NamedTuple):
    """An action previewed and waiting for y."""

    pair: tuple[str, str] | None  # the pair it was previewed on; None: undo, which is about the vault, not the row
    action: str
    apply: Callable[[], str]  # writes it; returns what to tell


class LintScreen(Pane):
    PANE = "lint"
    UNSENT = "Merge text written in Lint is not applied"
    today = None  # the date freshness is judged at; None: today (tests pin it)

    BINDINGS = [
        Binding("escape", "back", "Back"),
        # Letters keep one meaning across panes (a asks, e edits, b goes back): the two
        # sides are kept with the brackets that point at them.
        Binding("left_square_bracket", "review('keep-a')", "Keep A (left)", key_display="["),
        Binding("right_square_bracket", "review('keep-b')", "Keep B (right)", key_display="]"),
        Binding("e", "merge", "Edit both into one (merge)"),
        Binding("d", "review('dismiss')", "Dismiss"),
        Binding("a", "review('research')", "Ask: research it"),
        Binding("u", "undo", "Undo"),
        Binding("y", "confirm", "Apply", show=False),
        Binding("ctrl+s", "merge_preview", "Save the merge (previewed first)", show=False, priority=True),
        Binding("ctrl+f", "merge_swap", "Flip which note keeps the merge", show=False, priority=True),
    ]
    DEFAULT_CSS = """
    LintScreen #checks { width: 28; border: round $panel; }
    LintScreen #checks:focus { border: round $accent; }
    LintScreen #findings { height: 1fr; min-height: 8; border: round $panel; }  /* (five findings at least) */
    LintScreen #findings:focus { border: round $accent; }
    LintScreen #sides { height: 1fr; }
    LintScreen .side { width: 1fr; border: round $panel; padding: 0 1; }
    LintScreen #review { height: auto; max-height: 50%; }  /* the card and what an action will change */
    LintScreen #review-status { height: auto; padding: 0 1; }
    LintScreen #review-card { height: auto; padding: 0 1; }
    LintScreen #merge-text { display: none; height: 12; }
    /* A short screen: a preview or the merge editor takes the notes' place, and the editor,
       which holds both texts, the card's. */
    LintScreen.-short.-acting #sides { display: none; }
    LintScreen.-short.-merging #review-card { display: none; }
    LintScreen.-short #merge-text { height: 1fr; }
    """

    def __init__(self, vault: Vault, status: Status | None = None) -> None:
        super().__init__(vault, status)
        self.report: LintReport | None = None
        self.pair: tuple[str, str] | None = None
        self.focus_note: str | None = None  # findings shown only for this note (x in the browser)
        self.pending: Pending | None = None  # until y or escape
        self._passing = False  # the status line holds a hint another row makes stale
        self.merge_into = 0  # which note of the pair keeps the merged text (0: A, 1: B); ctrl+f swaps
        self.merge_start = ""  # the editor's text as it opened: both notes' texts
        self.drafts: dict[tuple[str, str], tuple[str, int]] = {}  # merge text edited and not applied, per pair

    def compose(self) -> ComposeResult:
        yield self.pane_bar()
        with Horizontal():
            yield ListView(id="checks")
            with Vertical():
                yield DataTable(id="findings", cursor_type="row", zebra_stripes=True)
                with VerticalScroll(id="review"):
                    yield Static("", id="review-card")
                    yield Static("", id="review-status")
                yield TextArea(id="merge-text")
                with Horizontal(id="sides"):
                    yield VerticalScroll(Markdown("", open_links=False, id="side-a"), classes="side", id="box-a")
                    yield VerticalScroll(Markdown("", open_links=False, id="side-b"), classes="side", id="box-b")
        yield self.status_bar()
        yield Footer()

    def on_mount(self) -> None:
        self._columns(self.size.width)
        self.query_one("#checks").border_title = "Checks"
        self.set_focus(self.query_one("#checks"))

    def on_resize(self, event) -> None:
        row = self.query_one("#findings", DataTable).cursor_row  # (new columns clear the table)
        if self._columns(event.size.width) and self.report is not None:
            view = self.query_one("#checks", ListView)
            if view.highlighted_child is not None and view.highlighted_child.name:
                self._fill(view.highlighted_child.name, row)

    _widths: tuple[int, ...] = ()

    def _columns(self, width: int) -> bool:
        """Fixed column widths (auto widths render at the header's width) that share the
        pane's width: the finding's message always keeps a column. True when they changed."""
        checks = 20 if width < 100 else 28  # the checks list's width (the app's -narrow breakpoint, themes/memlink.tcss)
        room = max(40, width - checks - 6)  # less borders and cell padding
        note = max(14, room * 30 // 100)
        other = max(10, room * 22 // 100)
        widths = (8, note, other, max(16, room - 8 - note - other - 8))
        if widths == self._widths:
            return False
        self._widths = widths
        table = self.query_one("#findings", DataTable)
        table.clear(columns=True)
        for label, w in zip(("severity", "note", "other", "finding"), widths, strict=True):
            table.add_column(label, width=w)
        return True

    @property
    def location_uri(self) -> str | None:
        return self.focus_note

    async def show_location(self, uri: str | None) -> None:
        """With a note: its contradictions, ready to review; without: every check."""
        self.focus_note = uri
        self.rerun(select="contradictions" if uri else None, review=bool(uri))

    def rerun(self, select: str | None = None, review: bool = False) -> None:
        """Lint again (and refresh the dashboards) in a worker — a big vault takes seconds —
        then keep the chosen check in view."""
        view = self.query_one("#checks", ListView)
        current = view.highlighted_child.name if view.highlighted_child is not None else None
        view.border_title = "Checks · linting…"
        row = self.query_one("#findings", DataTable).cursor_row if select in (None, current) else None
        self._lint(select or current, review, row)

    @work(thread=True, exclusive=True, group="lint")
    def _lint(self, select: str | None, review: bool, row: int | None = None) -> None:
        try:
            with lint(self.vault, today=self.today) as report:
                write_dashboards(self.vault, report)
                report.by_check()  # read whole here, in the worker: the pane pages through it
        except MemlinkError as exc:
            self.app.call_from_thread(self.notify, str(exc).splitlines()[0], title="Lint failed", severity="error")
            return
        self.app.call_from_thread(self._linted, report, select, review, row)  # type: ignore[arg-type]  # textual's typing infers Never for an async callback

    async def _linted(self, report: LintReport, select: str | None, review: bool, row: int | None = None) -> None:
        self.report = report
        self.post_message(Linted(report.errors, report.counts.get("contradictions", 0)))
        view = self.query_one("#checks", ListView)
        names = [RANKED, *sorted(report.by_check())]
        await view.clear()
        await view.extend(ListItem(Label(f"{c} ({len(report.by_check()[c])})" if c != RANKED else c), name=c)
                          for c in names)
        view.border_title = f"Checks · {report.errors} errors"
        target = select if select in names else RANKED
        if target:
            with self.prevent(ListView.Highlighted):  # (filled here, once: the event would fill it again, at its first row)
                view.index = names.index(target)
            self._expanded = None
            self._fill(target)
            table = self.query_one("#findings", DataTable)
            if row and table.row_count:  # (the same list again, after a review: at the next pair, not the first)
                table.move_cursor(row=min(row, table.row_count - 1))
        if review:
            table = self.query_one("#findings", DataTable)
            if not table.row_count:
                self._status(f"no open contradictions involve {safe_markup(self.focus_note or '')}")
            self.set_focus(table if table.row_count else view)

    @on(ListView.Highlighted, "#checks")
    def _check(self, event: ListView.Highlighted) -> None:
        if event.item is None or not event.item.name or self.report is None:
            return
        self._expanded = None  # chosen in the list: escape goes back there
        self._fill(event.item.name)

    _expanded: int | None = None  # the worst-first row the shown check was expanded from

    def _pick(self, check: str, row: int | None = None) -> None:
        """Show ``check`` in the checks list and its findings, at ``row`` when given."""
        view = self.query_one("#checks", ListView)
        with self.prevent(ListView.Highlighted):  # (filled here)
            view.index = [item.name for item in view.children].index(check)
        self._fill(check)
        if row is not None:
            self.query_one("#findings", DataTable).move_cursor(row=row)

    def _fill(self, check: str, row: int | None = None) -> None:
        """List the findings of ``check``; ``row``: the one to stay on when the same list
        is drawn again (a resize), its pair and preview kept."""
        table = self.query_one("#findings", DataTable)
        table.clear()
        if row is None:
            # No pair until a row of this list is highlighted: keys never act on one it does not show.
            self._choose(None)
            self.call_later(self._show, "", "")
        focus = self.focus_note
        assert self.report is not None  # filled only once a lint has run
        by_check = self.report.by_check()
        if check == RANKED:
            found = sorted((f for c, fs in by_check.items() if c not in GROUPED for f in fs), key=rank)
        else:
            found = by_check.get(check, [])
        rows = [(i, f) for i, f in enumerate(found) if not focus or focus in (f.uri, f.other)]
        note_w, other_w = self._widths[1], self._widths[2]
        for i, f in rows[:MAX_ROWS]:  # a big vault can have tens of thousands of findings
            table.add_row(safe_markup(f.severity), _tail(f.uri, note_w), _tail(f.other or "", other_w), safe_markup(f.text),
                          key=f"{i}|{f.uri}|{f.other or ''}")
        if check == RANKED and not focus:
            for g in self.report.groups():  # enter expands a group: its check is chosen
                table.add_row(safe_markup(g.worst), safe_markup(g.check), "", f"{g.text} · enter lists them", key=f"{GROUP}|{g.check}|")
        more = f" · first {MAX_ROWS} of {len(rows)} (all in dashboards/)" if len(rows) > MAX_ROWS else ""
        table.border_title = check + (f" · involving {focus}" if focus else "") + more
        if row is not None:
            table.move_cursor(row=row)

    @on(ListView.Selected, "#checks")
    def _enter_check(self, event: ListView.Selected) -> None:
        self.set_focus(self.query_one("#findings", DataTable))

    @on(DataTable.RowHighlighted, "#findings")
    async def _row(self, event: DataTable.RowHighlighted) -> None:
        if event.cursor_row != event.data_table.cursor_row:
            return  # the cursor has moved on (a redraw passes the first row on its way back)
        key = event.row_key.value
        assert key is not None  # every row is added with its key
        _i, uri, other = key.split("|", 2)
        if _i == GROUP:
            uri = other = ""
        self._choose((uri, other) if other else None)
        await self._show(uri, other)
        if self.pair is not None:
            self._card(*self.pair)

    def _choose(self, pair: tuple[str, str] | None) -> None:
        """The pair the review keys act on; a preview made for another pair is dropped
        (y never applies what the screen no longer shows), and the merge editor closes, its
        text kept with the pair it was written for."""
        if pair != self.pair and self.query_one("#merge-text", TextArea).display:
            self._status(self._close_editor())
        if self.pending is not None and self.pending.pair not in (None, pair):
            self.pending = None
            self._status("preview dropped: another row is chosen", passing=True)
        elif pair != self.pair and self._passing:
            self._status("")
        self.pair = pair
        self.query_one("#review-card", Static).update("")
        self.remove_class("-quoted")

    def _card(self, a: str, b: str) -> None:
        """Why the two notes disagree (the link's description) and the lines in dispute,
        highlighted, above the two notes; then the keys that act on it."""
        from engine.review.actions import dispute

        card = self.query_one("#review-card", Static)
        try:
            d = dispute(self.vault, a, b)
        except MemlinkError:
            card.update("")
            return  # not a contradiction (another check's pair): the two notes are enough
        lines = [f"[b]Why they disagree:[/b] {safe_markup(d.reason) if d.reason else '[dim](the link gives no reason)[/dim]'}"]
        for side, uri in (("A", a), ("B", b)):
            part = d.lines.get(uri)
            if part is None:  # (what it says, so a short screen, which shows no note below, is not blind)
                lines.append(f"[b]{side}[/b] [dim]the whole note:[/dim] {safe_markup(self._says(uri))}")
            else:
                where, text = part
                lines.append(f"[b]{side}[/b] [dim]{safe_markup(where)}:[/dim] [reverse]{safe_markup(text.strip())}[/reverse]")
        lines.append("[dim]\\[ keep A · ] keep B · e merge · d dismiss · a research — each shows what it will write first[/dim]")
        card.update("\n".join(lines))
        self.set_class(len(d.lines) == 2, "-quoted")  # (both lines in dispute shown: a short screen needs no notes below)

    def _says(self, uri: str, most: int = 160) -> str:
        """The start of a note's text, on one line."""
        try:
            note = self.vault.read_note(uri)
        except MemlinkError:
            return ""
        text = " ".join(note.field_text(self.vault.schema(note.memory_type).text_field).split())
        return text if len(text) <= most else text[: most - 1].rstrip() + "…"

    async def _show(self, a: str, b: str) -> None:
        for side, uri in (("a", a), ("b", b)):
            box = self.query_one(f"#box-{side}")
            try:
                text = self.vault.render_note(uri).text if uri and self.vault.exists(uri) else ""
            except MemlinkError as exc:
                text = f"*{exc}*"
            await self.query_one(f"#side-{side}", Markdown).update(text)
            box.border_title = f"{side.upper()}: {uri}" if uri else side.upper()

    @on(DataTable.RowSelected, "#findings")
    def _open(self, event: DataTable.RowSelected) -> None:
        key = event.row_key.value
        assert key is not None  # every row is added with its key
        kind, uri, _other = key.split("|", 2)
        if kind == GROUP:  # expand: the group's check, its findings one by one
            self._pick(uri)
            self._expanded = event.cursor_row
            return
        self.go("browser", uri)

    def _status(self, text: str, passing: bool = False) -> None:
        """Say ``text`` under the review card; ``passing``: only until another row is chosen
        (a hint, not what an action did)."""
        self._passing = passing
        status = self.query_one("#review-status", Static)
        status.update(text)
        self._make_room()
        review = self.query_one("#review", VerticalScroll)
        if self.pending is not None:  # its first line, the keys, in sight (the card scrolls above it)
            self.call_after_refresh(review.scroll_to_widget, status, top=True, animate=False)
        else:
            review.scroll_home(animate=False)

    def _make_room(self) -> None:
        """Which of the notes and the card give way on a short screen (the CSS above)."""
        editing = self.query_one("#merge-text", TextArea).display
        self.set_class(editing, "-merging")
        self.set_class(editing or self.pending is not None, "-acting")

    async def action_review(self, action: str, text: str | None = None, swap: bool = False) -> None:
        """Show what the action will change; nothing is written until y. ``swap``: B is the
        review's A (a merge kept in B)."""
        from engine.review.actions import preview, review

        if self.pair is None:
            self._status("choose a contradiction (two notes) first", passing=True)
            return
        a, b = reversed(self.pair) if swap else self.pair
        try:
            plan = preview(self.vault, a, b, action, text=text)
        except MemlinkError as exc:
            self.pending = None
            self._status(f"[red]{safe_markup(str(exc))}[/red]")
            return

        def apply() -> str:  # refused if the notes changed since the preview
            return review(self.vault, a, b, action, text=text, expect=plan).message

        self._propose(Pending(self.pair, action, apply), plan.lines())

    def action_undo(self) -> None:
        """Undo the vault's last action, whichever pane or command made it: shown first."""
        from engine.review.actions import entry_id, last_action, undo

        entry = last_action(self.vault)
        if entry is None:
            self._status("nothing to undo", passing=True)
            return
        self._propose(Pending(None, "undo", lambda: undo(self.vault, entry_id(entry))),
                      [f"undo {entry['action']} on {entry.get('a')} / {entry.get('b')} ({entry.get('at')}):",
                       f"  {entry.get('message') or ''}"])

    def _propose(self, pending: Pending, lines: list[str]) -> None:
        """Show what y will do; nothing is written until then."""
        self.pending = pending
        # The keys first: on a short screen the end of a long preview is below the fold.
        back = "escape goes back to the merge text" if pending.action == "merge" else "escape cancels"
        self._status(f"[b]y[/b] applies this, {back}:\n" + "\n".join(safe_markup(line) for line in lines))

    async def action_confirm(self) -> None:
        if self.pending is None:
            return
        pending, self.pending = self.pending, None
        try:
            message = pending.apply()
        except MemlinkError as exc:
            self._status(f"[red]{safe_markup(str(exc))}[/red]")
            return
        if pending.pair is not None:
            self.drafts.pop(pending.pair, None)  # the pair is reviewed: its merge text has served
        # (the card above moves on to the next pair: this line is about the one just reviewed;
        # the key first, as in a preview: on a short screen the end of the message is below the fold)
        self._status(f"[b]done[/b] with the pair reviewed last ([b]u[/b] undoes): {safe_markup(message)}"
                     if pending.pair is not None else safe_markup(message))
        self.rerun()

    def action_merge(self) -> None:
        """Open the editor with both texts (A's, then B's), to be edited into one."""
        if self.pair is None:
            self._status("choose a contradiction (two notes) first", passing=True)
            return
        from engine.review.actions import contradictions_between

        if not contradictions_between(self.vault, *self.pair):
            self._status("merge is for a contradiction: these two notes are not linked as one", passing=True)
            return  # (before the editor: as keep A/B and dismiss refuse, not after the person wrote the text)
        texts = []
        for uri in self.pair:
            try:
                note = self.vault.read_note(uri)
            except MemlinkError as exc:
                self._status(f"[red]{safe_markup(str(exc))}[/red]")
                return
            texts.append(note.field_text(self.vault.schema(note.memory_type).text_field).strip())
        self.merge_start = "\n\n".join(texts)
        box = self.query_one("#merge-text", TextArea)
        box.text, self.merge_into = self.drafts.get(self.pair, (self.merge_start, 0))
        self._open_editor()

    def _open_editor(self) -> None:
        """Show the merge editor with its text as left, and its keys."""
        self.pending = None  # the editor hides a preview: y no longer applies it
        box = self.query_one("#merge-text", TextArea)
        self._merge_title()
        box.display = True
        self.set_focus(box)
        # (the editor's title is cut on a narrow screen, and the footer shows the editor's keys)
        self._status("[b]ctrl+s[/b] previews the merge · [b]ctrl+f[/b] the other note keeps it · "
                     "[b]escape[/b] closes it, keeping the text")

    def _close_editor(self) -> str:
        """Hide the merge editor; text edited there is kept for e to open again. Returns
        what to tell."""
        assert self.pair is not None  # the editor opens on a pair
        box = self.query_one("#merge-text", TextArea)
        box.display = False
        self._make_room()
        self.set_focus(self.query_one("#findings", DataTable))
        if (box.text, self.merge_into) == (self.merge_start, 0):
            self.drafts.pop(self.pair, None)
            return "merge cancelled: nothing was changed"
        self.drafts[self.pair] = (box.text, self.merge_into)
        return "nothing was changed; the merge text is kept: e opens it again"

    @property
    def unsent(self) -> bool:
        """Merge text kept for later, or being written (the editor open, its text changed)."""
        box = self.query_one("#merge-text", TextArea)
        return bool(self.drafts) or bool(box.display and self.pair and box.text != self.merge_start)

    def _merge_title(self) -> None:
        assert self.pair is not None  # the editor opens on a pair
        side, uri = "AB"[self.merge_into], self.pair[self.merge_into]
        self.query_one("#merge-text", TextArea).border_title = (
            f"merged text kept in {side} ({safe_markup(uri)}) · ctrl+f keeps the other · ctrl+s previews · escape keeps it for later")

    def action_merge_swap(self) -> None:
        """The other note of the pair keeps the merged text (the one merged into survives)."""
        if self.query_one("#merge-text", TextArea).display and self.pair is not None:
            self.merge_into = 1 - self.merge_into
            self._merge_title()

    async def action_merge_preview(self) -> None:
        box = self.query_one("#merge-text", TextArea)
        if not box.display or self.pair is None:
            return
        await keys_taken(box)  # what was typed just before ctrl+s is in the preview
        await self.action_review("merge", box.text, swap=bool(self.merge_into))
        if self.pending is not None:  # (a text refused stays in the editor, the reason above it)
            self._close_editor()

    async def action_back(self) -> None:
        """Escape steps back: out of a review, then from a check to the list the pane
        opened on, then out of the pane."""
        if not self.cancel_review() and not self._step_back():
            await self.run_action("app.back")

    def _step_back(self) -> bool:
        """From a check's findings to worst first (a note's contradictions, for a note): on
        the row it was expanded from, or in the checks list it was chosen in. False when
        that list is shown already."""
        view = self.query_one("#checks", ListView)
        names = [item.name for item in view.children]
        home = "contradictions" if self.focus_note and "contradictions" in names else RANKED
        shown = view.highlighted_child.name if view.highlighted_child is not None else None
        if self.report is None or shown in (None, home):
            return False
        row, self._expanded = self._expanded, None
        self._pick(home, row)
        if row is None:
            self.set_focus(view)
        return True

    def cancel_review(self) -> bool:
        """Escape: close the merge editor, or drop a preview (a merge's goes back to its
        editor); False when there was neither."""
        if self.query_one("#merge-text", TextArea).display:
            self._status(self._close_editor())
            return True
        if self.pending is not None:
            if self.pending.action == "merge":
                self._open_editor()
            else:
                self.pending = None
                self._status("cancelled: nothing was changed", passing=True)
            return True
        return False


def _tail(path: str, width: int) -> str:
    """A path cut to its end when longer than its column: notes of one folder differ by
    their names ("…/Internal links.md"), not by the folder they share."""
    shown = printable_path(path)
    if cell_len(shown) <= width:
        return safe_path(shown)
    cut = len(shown)
    while cut > 0 and cell_len(shown[cut - 1:]) <= width - 1:  # (a CJK character takes two cells)
        cut -= 1
    return safe_path("…" + shown[cut:])
