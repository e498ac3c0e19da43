"""`k` in the browser: link the open note to another one. Type part of the target's
title (↓/↑ pick among matches: the exact title first, then titles that start with it,
people, places and projects before reports), then enter moves on to the link type,
weight, the words in this note the link hangs on (optional) and why. Enter on the last
field, or ctrl+s, shows a summary of the link; y writes it on both sides at once, n goes
back to the form. Enter never writes straight from the search. A target the note links
to already fills the form with that link (on enter, or on the first ctrl+s, which keeps
what was typed meanwhile): what is changed there updates that very link (the fields left
as they were are kept, an emptied anchor is removed, and `memlink undo` puts it back).
Dismisses with the target's URI, or None."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList, Select, Static
from textual.widgets.option_list import Option

from engine import MemlinkError, Vault
from engine.model.links import StoredLink
from engine.review.linkwrite import NEW_LINK_WEIGHT, describe, links_between, write_link
from widgets.keys import keys_taken
from widgets.safe import safe_markup, safe_path

MATCHES = 8
# Among matches equally close to what was typed: what a link usually points at first.
TYPE_RANK = {"entity": 0, "profile": 0, "preference": 1, "event": 1, "source": 2, "report_candidate": 3, "report": 3}


class LinkEditor(ModalScreen[str | None]):
    DEFAULT_CSS = """
    LinkEditor { align: center middle; }
    LinkEditor > Vertical { width: 90; max-width: 100%; height: auto; max-height: 100%; border: round $accent;
                            background: $surface; padding: 0 1; }
    LinkEditor #link-matches { height: auto; max-height: 30vh; }  /* (the whole form fits 24 rows) */
    /* the match ↓/↑ chose from the field is the target: shown as chosen, not as a list's blurred row */
    LinkEditor #link-matches > .option-list--option-highlighted {
        color: $block-cursor-foreground; background: $block-cursor-background; text-style: $block-cursor-text-style;
    }
    LinkEditor Horizontal { height: auto; }
    LinkEditor Label { padding: 1 1 0 0; }
    LinkEditor #link-type { width: 24; }
    LinkEditor #link-weight { width: 10; }
    LinkEditor #link-error { color: $error; height: auto; }
    """
    BINDINGS = [
        Binding("escape", "dismiss(None)", "Cancel"),
        Binding("ctrl+s", "save", "Write the link", priority=True),
        # Priority: the field changes as the key comes in, so what is typed next goes there.
        Binding("enter", "next_field", "Next field", show=False, priority=True),
        Binding("tab", "app.focus_next", "Next field", show=False, priority=True),
        Binding("shift+tab", "app.focus_previous", "Previous field", show=False, priority=True),
    ]

    def __init__(self, vault: Vault, source: str):
        super().__init__()
        self.vault = vault
        self.source = source
        self.entries = sorted((e for e in vault.catalog.all() if e.uri != source), key=lambda e: e.title.lower())
        self.target: str | None = None
        self.existing: StoredLink | None = None  # the link to the target the form was filled from
        self.shown: dict[str, str] = {}  # what the form last showed of its own (its defaults, or a link)
        self.matched: str | None = None  # the target text the matches were found for

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Input(placeholder="target note: type part of its title", id="link-target")
            yield OptionList(id="link-matches")
            with Horizontal():
                yield Label("type")
                table = self.vault.config.link_table()  # the vault's types, memlink.yaml's own included
                yield Select([(t.value, t.value) for t in table.names()], value=table.role("default").value,
                             allow_blank=False, id="link-type")
                yield Label("weight")
                yield Input(f"{NEW_LINK_WEIGHT:g}", id="link-weight")
            yield Input(placeholder="anchor: words in this note the link hangs on (optional)", id="link-anchor")
            yield Input(placeholder="why: one line on what the link means (optional)", id="link-why")
            yield Static("", id="link-error")
            yield Static("[dim]enter or tab: next field · ctrl+s (or enter on the last field): review and write · esc cancels[/dim]")

    def on_mount(self) -> None:
        self.shown = self._form()
        title = self.vault.catalog.get(self.source)
        self.query_one(Vertical).border_title = f"Link {safe_markup(title.title if title else self.source)} →"
        self._match("")

    @on(Input.Changed, "#link-target")
    def _typed(self, event: Input.Changed) -> None:
        self._caught_up()  # (the field's text now: a change arriving late is one already matched)

    def _caught_up(self) -> None:
        """The matches for what the target field holds now, unless they are shown already
        (then the one picked with ↓/↑ stays picked)."""
        text = self.query_one("#link-target", Input).value
        if text != self.matched:
            self._match(text)

    def _match(self, text: str) -> None:
        self.matched = text
        words, whole = text.lower().split(), text.strip().lower()

        def rank(e) -> tuple[int, int]:  # the exact title first, then titles starting with it, then the rest
            title = e.title.lower()
            closeness = 0 if title == whole else 1 if title.startswith(whole) else 2 if all(w in title for w in words) else 3
            return closeness, TYPE_RANK.get(e.memory_type, 1)  # among equals: what a link usually points at

        found = sorted((e for e in self.entries if all(w in e.title.lower() or w in e.uri for w in words)), key=rank)[:MATCHES]
        matches = self.query_one("#link-matches", OptionList)
        matches.clear_options()
        matches.add_options(Option(f"{safe_markup(e.title)}  [dim]{e.memory_type} · {safe_path(e.uri)}[/dim]", id=e.uri)
                            for e in found)
        self.target = found[0].uri if found else None
        if found:
            matches.highlighted = 0

    @on(OptionList.OptionHighlighted, "#link-matches")
    def _picked(self, event: OptionList.OptionHighlighted) -> None:
        self.target = event.option.id

    def on_key(self, event) -> None:
        """↓/↑ in the target field move through the matches."""
        if self.focused is self.query_one("#link-target") and event.key in ("down", "up"):
            matches = self.query_one("#link-matches", OptionList)
            if event.key == "down":
                matches.action_cursor_down()
            else:
                matches.action_cursor_up()
            event.stop()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return isinstance(self.focused, Input) if action == "next_field" else True  # (a list's enter picks)

    async def action_next_field(self) -> None:
        """Enter in a field moves to the next one; on the last one it shows the summary."""
        field = self.focused
        await keys_taken(*self.query(Input))
        if field is self.query_one("#link-why"):
            await self.action_save()
        elif field is self.query_one("#link-target"):
            self._caught_up()
            self._fill_from_existing()
            self.set_focus(self.query_one("#link-type", Select))  # (now: focus() waits its turn)
        else:
            self.focus_next()

    def _fail(self, text: str) -> None:
        self.query_one("#link-error", Static).update(safe_markup(text))

    def _linked(self) -> list[StoredLink]:
        return links_between(self.vault, self.source, self.target) if self.target else []

    def _form(self) -> dict[str, str]:
        return {"type": str(self.query_one("#link-type", Select).value),
                **{name: self.query_one(f"#link-{name}", Input).value for name in ("weight", "anchor", "why")}}

    def _fill_from_existing(self, *, keep_typed: bool = False) -> bool:
        """When the note links to the target already, show that link in the form (once per
        target): the form then updates it. With ``keep_typed`` a field the user changed
        keeps what they typed. Returns whether it filled the form now."""
        existing = self._linked()
        if not existing or (self.existing is not None and self.existing.to_uri == self.target):
            if not existing:
                self.existing = None
            return False
        link = self.existing = existing[0]
        now = self._form()
        values = {"type": link.link_type.value, "weight": f"{link.weight:g}", "anchor": link.match_text or "",
                  "why": link.description}
        if keep_typed:
            values = {name: now[name] if now[name] != self.shown.get(name) else value for name, value in values.items()}
        self.query_one("#link-type", Select).value = values["type"]
        for name in ("weight", "anchor", "why"):
            self.query_one(f"#link-{name}", Input).value = values[name]
        self.shown = values
        self._fail(f"already linked: {describe(link)} — change the fields and ctrl+s to update that link")
        return True

    async def action_save(self) -> None:
        await keys_taken(*self.query(Input))  # what was typed just before ctrl+s is in the summary
        self._caught_up()
        if not self.target:
            self._fail("no note matches the target; type part of its title")
            return
        if self._fill_from_existing(keep_typed=True):
            return  # the form now shows the link there is: what the user changes updates it
        try:
            weight = float(self.query_one("#link-weight", Input).value)
        except ValueError:
            self._fail("weight must be a number between 0 and 1")
            return
        anchor = self.query_one("#link-anchor", Input).value.strip() or None
        if anchor and anchor not in self.vault.read_note(self.source).text:
            self._fail(f"the anchor {anchor!r} is not in this note's text; leave it empty or copy words from the note")
            return
        if not 0.0 <= weight <= 1.0:
            self._fail("weight must be a number between 0 and 1")
            return
        target, link_type = self.target, str(self.query_one("#link-type", Select).value)
        why = self.query_one("#link-why", Input).value.strip()
        catalog = self.vault.catalog

        def title(uri: str) -> str:
            entry = catalog.get(uri)
            return entry.title if entry else uri

        old = self.existing if self.existing is not None and self.existing.to_uri == target else None
        summary = (f"{'Update the link' if old else 'Link'} [b]{safe_markup(title(self.source))}[/b] → "
                   f"[b]{safe_markup(title(target))}[/b]\n"
                   f"  {safe_markup(target)}\n"
                   f"  type {safe_markup(link_type)} · weight {weight:.2f}\n"
                   f"  anchor: {safe_markup(anchor) if anchor else '(none: the whole note)'}\n"
                   f"  why: {safe_markup(why) if why else '(none given)'}\n\n"
                   + (f"  was: {safe_markup(describe(old))}\n\nUpdate it (both sides; `memlink undo` reverts)?" if old
                      else "Write this link (both sides; `memlink undo` reverts)?"))

        def answered(yes: bool | None) -> None:
            if yes:
                self._write(target, link_type, weight, anchor, why, old)

        self._fail("")
        self.app.push_screen(Confirm(summary, markup=True), answered)

    def _write(self, target: str, link_type: str, weight: float, anchor: str | None, why: str,
               old: StoredLink | None) -> None:
        try:  # an update names its link (two links to one note: the one shown) and "" clears the anchor
            write_link(self.vault, self.source, target, link_type, update=old is not None, weight=weight,
                       match_text=anchor or "", description=why, link_id=old.id if old else None)
        except (MemlinkError, ValueError) as exc:  # bad weight, unknown note, …: nothing was written
            self._fail(str(exc).splitlines()[0])
            return
        self.dismiss(f"{'updated the link to' if old else 'linked to'} {target}")  # (what the browser says)


class Confirm(ModalScreen[bool]):
    """y / enter confirms, n / esc cancels."""

    DEFAULT_CSS = """
    Confirm { align: center middle; }
    Confirm > Static { width: 80; max-width: 100%; height: auto; border: round $warning; background: $surface; padding: 1 2; }
    """
    BINDINGS = [
        Binding("y,enter", "dismiss(True)", "Yes"),
        Binding("n,escape", "dismiss(False)", "No"),
    ]

    def __init__(self, question: str, *, markup: bool = False):
        super().__init__()
        self.question = question if markup else safe_markup(question)  # markup: the caller escaped its data

    def compose(self) -> ComposeResult:
        yield Static(f"{self.question}\n\n[b]y[/b] yes   [b]n[/b] no")
