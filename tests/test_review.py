"""Reviewing contradictions: keep A / keep B / merge / dismiss / research, and undo."""

from __future__ import annotations

import hashlib
import json
from contextlib import asynccontextmanager

import pytest

from engine import Vault
from engine.lint.memo import check
from engine.retrieve.search import search
from engine.review.actions import ACTION_LOG, ReviewError, last_action, preview, review, undo


def files(v):
    return {p.relative_to(v.root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in v.root.rglob("*") if p.is_file() and ".memlink" not in p.parts}


@pytest.fixture
def pair(vault):
    a = vault.write_note("preference", {"topic": "Coffee", "sentiment": "like", "content": "Loves a morning flat white."})
    b = vault.write_note("event", {"event_name": "Quit coffee", "date": "2026-11-01", "content": "Stopped drinking coffee entirely."})
    vault.link(b.uri, a.uri, "contradicts", weight=0.8, description="quit what she loves")
    return vault, a.uri, b.uri


def test_keep_a_supersedes_b_and_undo_puts_everything_back(pair):
    v, a, b = pair
    said = preview(v, a, b, "keep-a").lines()  # (A's fields stay: only its Links block changes, and the preview says so)
    assert f"  note edit: {a} (its Links block)" in said and any(line.startswith(f"  note edit: {b}") for line in said)
    before = files(v)
    result = review(v, a, b, "keep-a")
    assert "superseded" in result.message
    note_b = v.read_note(b)
    assert note_b.extra["superseded_by"] == a and "valid_until" in note_b.extra
    assert note_b.fields["content"] == "Stopped drinking coffee entirely."  # nothing deleted
    assert [(l.to_uri, l.link_type.value) for l in v.links.of(a, "links")] == [(b, "evolved_from")]
    assert not [l for l in v.links.of(b, "links") if l.link_type.value == "contradicts"]
    assert check(v) == []
    assert undo(v).startswith("undid keep-a")
    assert files(v) == before
    with pytest.raises(ReviewError, match="nothing to undo"):
        undo(v)


def test_superseded_notes_rank_lower(pair):
    v, a, b = pair
    scores = {h.uri: h.score for h in search(v, "coffee", k=5, use_graph=False)}
    review(v, a, b, "keep-a")
    hits = search(v, "coffee", k=5, use_graph=False)
    after = {h.uri: h.score for h in hits}
    assert after[b] == pytest.approx(scores[b] * 0.5)
    shown = {h.uri: h.to_json() for h in hits}  # (and says so: the CLI, MCP and the app show it)
    assert shown[b].get("superseded") is True and "superseded" not in shown[a]
    from conftest import memlink

    r = memlink("search", "coffee", vault=v.root)
    assert f"{b} · superseded)" in r.stdout and f"{a} · superseded" not in r.stdout, r.stdout


def test_merge_dismiss_research(pair):
    v, a, b = pair
    with pytest.raises(ReviewError, match="merged text"):
        review(v, a, b, "merge")
    review(v, a, b, "merge", text="Used to love coffee; quit in November.")
    assert v.read_note(a).fields["content"] == "Used to love coffee; quit in November."
    assert "superseded_by" not in v.read_note(b).extra  # an event is not superseded by a preference
    assert [(l.to_uri, l.link_type.value) for l in v.links.of(a, "links")] == [(b, "evolved_from")]
    undo(v)
    review(v, a, b, "dismiss")
    assert [(l.to_uri, l.link_type.value) for l in v.links.of(b, "links")] == [(a, "related_to")]
    undo(v)
    result = review(v, a, b, "research")
    candidate = result.message.split(": ", 1)[1]
    assert v.read_note(candidate).fields["status"] == "pending"
    assert {l.to_uri for l in v.links.of(candidate, "links")} == {a, b}
    with pytest.raises(ReviewError, match=f"asked already: {candidate}"):
        review(v, a, b, "research")
    with pytest.raises(ReviewError, match=f"asked already: {candidate}"):
        review(v, b, a, "research")  # the same pair, named the other way round
    undo(v)
    assert not v.exists(candidate) and check(v) == []


def test_a_research_question_answered_since_is_opened_again(pair):
    v, a, b = pair
    candidate = review(v, a, b, "research").message.split(": ", 1)[1]
    v.write_note("report_candidate", v.read_note(candidate).fields | {"status": "done"})
    review(v, a, b, "research")
    assert v.read_note(candidate).fields["status"] == "pending"  # the next dream takes it up again
    assert "research" in undo(v) and v.read_note(candidate).fields["status"] == "done"


def test_undo_refuses_when_files_changed_since(pair):
    v, a, b = pair
    review(v, a, b, "dismiss")
    v.write_note("preference", {"topic": "Coffee", "content": "Edited by hand afterwards."})
    with pytest.raises(ReviewError, match="changed since"):
        undo(v)


def test_an_action_undone_already_is_named_so_even_when_none_is_left(pair):
    v, a, b = pair
    review(v, a, b, "dismiss")
    action = last_action(v)["id"]
    undo(v, action)
    with pytest.raises(ReviewError, match=f"action {action} was undone already"):
        undo(v, action)
    with pytest.raises(ReviewError, match="nothing to undo"):
        undo(v)


def test_cli_review_and_undo(pair):
    from conftest import memlink

    v, a, b = pair
    v.close()
    r = memlink("review", a, b, "--action", "keep-b", vault=v.root)
    assert r.returncode == 0 and f"kept {b}" in r.stdout
    assert memlink("undo", vault=v.root).stdout.startswith("undid keep-b")
    other = v.write_note("entity", {"name": "Ana", "content": "A friend."}).uri
    r = memlink("review", a, other, "--action", "dismiss", vault=v.root)
    assert r.returncode == 1 and "no contradicts link" in r.stderr
    r = memlink("review", a, "profile.md", "--action", "dismiss", vault=v.root)
    assert r.returncode == 1 and "no note at profile.md" in r.stderr
    r = memlink("review", a, b, "--action", "merge", vault=v.root)  # a usage error: what it needs is named
    assert r.returncode == 2 and "--action merge needs --text" in r.stderr
    r = memlink("review", a, b, "--action", "keep-a", "--text", "mine", vault=v.root)
    assert r.returncode == 2 and "--action keep-a takes none" in r.stderr


# -- review you can trust -------------------------------------------------------------------------
MUM = "entities/周秀兰.md"
DINNER = "events/2026/10/14/妈妈六十大寿.md"  # contradicts MUM's line 2 (the birthday)


def link_sides(v):
    """Every sidecar entry, as (id, direction, the whole entry)."""
    return sorted((l.id, l.direction, l.model_dump_json()) for l in v.links.all())


def test_merge_keeps_every_link_not_in_dispute_and_undo_restores_every_side(sample):
    v = sample
    before_files, before_links = files(v), link_sides(v)
    others = {(l.id, l.from_uri) for l in v.links.of(MUM, "both") if l.link_type.value != "contradicts"}
    assert len(others) >= 5  # Mum has links that have nothing to do with the birthday
    review(v, MUM, DINNER, "merge", text="Mum's birthday is on 12 October.")
    kept = {(l.id, l.from_uri) for l in v.links.of(MUM, "both")}
    assert others <= kept  # nothing unrelated was lost, on either side
    assert not [f for f in check(v) if f.severity == "error"]
    undo(v)
    assert link_sides(v) == before_links
    assert files(v) == before_files
    assert check(v) == []


def test_keep_supersedes_the_disputed_claim_not_the_whole_note(sample):
    v = sample
    scores = {h.uri: h.score for h in search(v, "周秀兰", k=10, use_graph=False)}
    result = review(v, DINNER, MUM, "keep-a", today=__import__("datetime").date(2026, 12, 1))
    mum = v.read_note(MUM)
    assert "valid_until" not in mum.extra and "superseded_by" not in mum.extra  # Mum as a whole still holds
    # (valid until the dinner's note said otherwise, 15 October: not the day of the review)
    assert mum.extra["superseded_claims"] == [{"field": "content", "lines": "2", "valid_until": "2026-10-15",
                                               "superseded_by": DINNER}]
    assert "content line 2" in result.message
    assert not v.catalog.get(MUM).superseded and MUM not in v.catalog.superseded()
    after = {h.uri: h.score for h in search(v, "周秀兰", k=10, use_graph=False)}
    assert after[MUM] == pytest.approx(scores[MUM])  # not ranked ×0.5
    link = next(l for l in v.links.of(MUM, "backlinks") if l.link_type.value == "evolved_from")
    assert (link.from_uri, link.t_field, link.t_line_ranges) == (DINNER, "content", "2")


async def test_what_a_review_superseded_is_said_where_the_note_is_read(sample, pair):
    """The superseded claim, and a note superseded whole, are named in `memlink show` and
    in the app's note header; an entry edited into another shape says nothing."""
    from conftest import memlink, open_at, settle

    from memlink_tui.app import MemlinkApp
    from widgets import NoteView

    v = sample
    review(v, DINNER, MUM, "keep-a", today=__import__("datetime").date(2026, 12, 1))
    said = f"content line 2: superseded by {DINNER} (valid until 2026-10-15)"
    assert v.read_note(MUM).superseded() == [said]
    r = memlink("show", MUM, vault=v.root)
    assert r.returncode == 0 and f"  {said}\n" in r.stdout
    # In search it ranks as before, and says so; a note with nothing superseded says nothing.
    hits = {h.uri: h for h in search(v, "周秀兰", k=10, use_graph=False)}
    assert hits[MUM].superseded_in_part and not hits[MUM].superseded and hits[MUM].to_json()["superseded_in_part"]
    assert not any(h.supersession for u, h in hits.items() if u != MUM)
    r = memlink("search", "周秀兰", vault=v.root)
    assert f"(entity · {MUM} · superseded in part)" in r.stdout, r.stdout
    listed = {h["uri"]: h for h in json.loads(memlink("search", "周秀兰", "--json", vault=v.root).stdout)}
    assert listed[MUM].get("superseded_in_part") is True
    undo(v)
    assert not next(h for h in search(v, "周秀兰", k=10, use_graph=False) if h.uri == MUM).superseded_in_part
    review(v, DINNER, MUM, "keep-a", today=__import__("datetime").date(2026, 12, 1))
    app = MemlinkApp(v)
    async with app.run_test(size=(120, 36)) as pilot:
        await open_at(app, pilot, "browser", MUM)
        await settle(app, pilot)
        assert said in str(app.screen.query_one(NoteView).query_one("#note-meta").render())

    other, a, b = pair
    other.supersede(a, b, "2026-11-01")
    assert other.read_note(a).superseded() == [f"this note: superseded by {b} (valid until 2026-11-01)"]
    assert other.read_note(a).superseded(whole=False) == [] and not other.catalog.get(a).superseded_in_part
    note = other.read_note(b)
    note.extra = {"superseded_claims": ["not a claim", {"field": "content"}, {"superseded_by": 3}]}
    assert note.superseded() == []


def test_a_claim_of_the_source_side_is_its_match_text_line(vault):
    a = vault.write_note("entity", {"name": "Ada", "content": "Ada lives in Leiden.\nBorn 3 May."}).uri
    b = vault.write_note("event", {"event_name": "Party", "date": "2026-05-04", "content": "Cake.\nAda's birthday, 4 May."}).uri
    vault.link(b, a, "contradicts", match_text="birthday, 4 May", t_line_ranges="2")
    review(vault, a, b, "keep-a")
    assert vault.read_note(b).extra["superseded_claims"][0]["lines"] == "2"
    assert "valid_until" not in vault.read_note(b).extra


def test_whole_note_claim_supersedes_the_note(pair):
    v, a, b = pair  # the link has no ranges: the claim is the whole note
    review(v, a, b, "keep-a")
    assert v.read_note(b).extra["superseded_by"] == a and "superseded_claims" not in v.read_note(b).extra


@pytest.mark.parametrize("action", ["keep-a", "keep-b", "merge", "dismiss", "research"])
def test_preview_writes_nothing_and_is_what_review_does(sample, action):
    v = sample
    text = "Merged." if action == "merge" else None
    before = files(v)
    plan = preview(v, MUM, DINNER, action, text=text)
    assert files(v) == before and not (v.root / ACTION_LOG).exists()
    assert plan.files and plan.lines()[0].startswith(action)
    result = review(v, MUM, DINNER, action, text=text, expect=plan)
    assert result.plan == plan
    changed = {rel for rel, digest in files(v).items() if before.get(rel) != digest}
    assert changed == set(plan.files)  # every file it wrote was in the plan, and only those
    for link in plan.links:  # both sides of every link change are named
        assert {rel.rsplit("/", 1)[0] if "/" in rel else "" for rel in link.sides} >= {
            f for f in (link.from_uri.rsplit("/", 1)[0], link.to_uri.rsplit("/", 1)[0])}


def test_review_refuses_when_the_notes_changed_since_the_preview(pair):
    v, a, b = pair
    plan = preview(v, a, b, "keep-a")
    v.write_note("event", {"content": "Stopped drinking coffee, mostly."}, uri=b)
    with pytest.raises(ReviewError, match="changed since the preview"):
        review(v, a, b, "keep-a", expect=plan)


def test_cli_dry_run_prints_the_plan_and_writes_nothing(sample):
    from conftest import memlink

    v = sample
    v.close()
    before = files(v)
    r = memlink("review", MUM, DINNER, "--action", "merge", "--text", "Merged.", "--dry-run", vault=v.root)
    assert r.returncode == 0, r.stderr
    assert f"note edit: {MUM}" in r.stdout and "link remove:" in r.stdout and "sides:" in r.stdout
    assert files(v) == before
    r = memlink("review", MUM, DINNER, "--action", "merge", "--text", "Merged.", vault=v.root)
    assert r.returncode == 0
    assert memlink("undo", vault=v.root).returncode == 0
    assert memlink("check", vault=v.root).returncode == 0
    assert files(v) == before


@asynccontextmanager
async def mum_s_contradiction(vault):
    """The app at 160×50 in the Lint pane on the contradiction of Mum's note (x in the browser)."""
    from conftest import open_at, settle

    from memlink_tui.app import MemlinkApp

    app = MemlinkApp(vault)
    async with app.run_test(size=(160, 50)) as pilot:
        await open_at(app, pilot, "browser", MUM)
        await pilot.press("x")
        await settle(app, pilot)
        yield app, pilot, app.screen


async def test_app_merge_starts_from_both_texts_and_previews_before_writing(sample):
    from conftest import settle
    from textual.widgets import Static, TextArea

    from memlink_tui.screens.lint import LintScreen

    v = sample
    async with mum_s_contradiction(v) as (app, pilot, screen):
        assert isinstance(screen, LintScreen) and set(screen.pair) == {MUM, DINNER}
        a, b = screen.pair
        before, links_before = files(v), link_sides(v)  # once lint has written the dashboards
        disputed = {l.id for l in v.links.of(a, "both") if l.link_type.value == "contradicts" and b in (l.from_uri, l.to_uri)}
        await pilot.press("e")
        await pilot.pause()
        box = screen.query_one("#merge-text", TextArea)
        assert box.display and box.has_focus
        keys = str(screen.query_one("#review-status", Static).render())  # (the editor's title is cut when narrow)
        assert "ctrl+s previews the merge" in keys and "escape closes" in keys
        text_a = v.read_note(a).fields["content"].strip()
        text_b = v.read_note(b).fields["content"].strip()
        assert box.text == f"{text_a}\n\n{text_b}"  # both texts, several lines, not an empty input
        await pilot.press("escape")  # cancel: nothing written
        await pilot.pause()
        assert not box.display and files(v) == before
        await pilot.press("e")
        await pilot.pause()
        box.text = box.text.replace("10月12日", "10月14日")
        await pilot.press("ctrl+s")
        await pilot.pause()
        status = str(screen.query_one("#review-status", Static).render())
        assert f"note edit: {a}" in status and "y applies this, escape goes back to the merge text" in status
        assert files(v) == before  # the preview wrote nothing
        await pilot.press("y")
        await settle(app, pilot)
        assert v.read_note(a).fields["content"] == box.text.strip()
        assert "stays current" in str(screen.query_one("#review-status", Static).render())  # an event and a person
        assert {i for i, _d, _e in links_before} - {l.id for l in v.links.all()} == disputed  # only it is gone
        await pilot.press("u")
        await pilot.press("y")
        await settle(app, pilot)
    assert link_sides(v) == links_before
    assert {k: h for k, h in files(v).items() if not k.startswith("dashboards/")} == {
        k: h for k, h in before.items() if not k.startswith("dashboards/")}


def test_dismiss_survives_an_anchor_the_note_no_longer_holds(vault):
    """The contradicts link's match_text was edited out of its note: dismiss still works,
    the related_to link simply has no anchor."""
    from engine.review.actions import review

    a = vault.write_note("entity", {"name": "Alpha", "content": "Meets on Mondays."})
    b = vault.write_note("entity", {"name": "Beta", "content": "Meets on Tuesdays."})
    vault.link(a.uri, b.uri, "contradicts", match_text="Mondays")
    vault.write_note("entity", {"content": "Meets weekly."}, uri=a.uri)
    review(vault, a.uri, b.uri, "dismiss")
    [link] = vault.links.of(a.uri, "links")
    assert link.link_type.value == "related_to" and link.match_text is None


def test_merging_notes_of_one_type_supersedes_the_other_and_keeps_the_anchor(vault):
    a = vault.write_note("preference", {"topic": "Coffee", "content": "Loves a morning flat white.\nTakes it with oat milk."}).uri
    b = vault.write_note("preference", {"topic": "Tea", "content": "Drinks green tea.\nNo coffee after noon."}).uri
    vault.link(a, b, "contradicts", match_text="flat white", t_line_ranges="2", description="coffee after noon?")
    before = files(vault)
    review(vault, a, b, "merge", text="Loves a morning flat white; no coffee after noon.")
    assert vault.read_note(b).extra["superseded_by"] == a
    (merged,) = [l for l in vault.links.of(a, "links") if l.to_uri == b]
    assert merged.link_type.value == "evolved_from"
    assert (merged.t_field, merged.t_line_ranges, merged.match_text) == ("content", "2", "flat white")
    assert check(vault) == []
    undo(vault)
    assert files(vault) == before


def test_merging_an_event_into_a_person_leaves_the_person_current(sample):
    """The note merged into is the one the user chose (A); the other, of another type, is
    not superseded, so it ranks as before."""
    v = sample
    scores = {h.uri: h.score for h in search(v, "Mum birthday", k=10, use_graph=False)}
    result = review(v, MUM, DINNER, "merge", text="Mum's birthday is on 12 October.")
    assert MUM in result.message and "stays current" in result.message
    assert v.read_note(MUM).fields["content"] == "Mum's birthday is on 12 October."
    for uri in (MUM, DINNER):
        assert "superseded_by" not in v.read_note(uri).extra and "valid_until" not in v.read_note(uri).extra
    assert v.catalog.superseded() == frozenset()
    after = {h.uri: h.score for h in search(v, "Mum birthday", k=10, use_graph=False)}
    assert after.get(DINNER, 0) >= scores.get(DINNER, 0) * 0.9
    (merged,) = [l for l in v.links.of(MUM, "links") if l.to_uri == DINNER and l.link_type.value == "evolved_from"]
    assert merged.t_field == "content"


async def test_app_merge_can_keep_the_other_note(sample):
    from conftest import settle
    from textual.widgets import Static, TextArea


    async with mum_s_contradiction(sample) as (app, pilot, screen):
        a, b = screen.pair
        await pilot.press("e")
        await pilot.pause()
        box = screen.query_one("#merge-text", TextArea)
        assert f"kept in A ({a})" in str(box.border_title)
        await pilot.press("ctrl+f")
        assert f"kept in B ({b})" in str(box.border_title)
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert f"note edit: {b}" in str(screen.query_one("#review-status", Static).render())
        assert screen.pair == (a, b)  # the pair shown is unchanged
        await pilot.press("y")
        await settle(app, pilot)
    assert sample.read_note(b).fields["content"] == box.text.strip()


async def test_app_merge_text_survives_escape(sample):
    """Escape never throws typed merge text away: from the preview it goes back to the
    editor, from the editor it keeps the text for e to open again; the editor's keys
    leave the screen with it."""
    from textual.widgets import Static, TextArea


    v = sample
    async with mum_s_contradiction(v) as (app, pilot, screen):
        before = files(v)

        def status() -> str:
            return str(screen.query_one("#review-status", Static).render())

        await pilot.press("e")
        await pilot.pause()
        box = screen.query_one("#merge-text", TextArea)
        await pilot.press(*"Merged. ")
        typed = box.text
        assert typed.startswith("Merged. ")
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert "y applies" in status() and not box.display
        await pilot.press("escape")  # back from the preview: into the editor, the text as typed
        await pilot.pause()
        assert box.display and box.has_focus and box.text == typed
        assert "ctrl+s previews the merge" in status()
        await pilot.press("escape")  # out of the editor: the text is kept
        await pilot.pause()
        assert not box.display and "ctrl+s" not in status() and "e opens it again" in status()
        await pilot.press("e")
        await pilot.pause()
        assert box.display and box.text == typed
        await pilot.press("escape")
        await pilot.pause()
    assert files(v) == before  # nothing was written


async def test_app_merge_keeps_what_was_typed_just_before_ctrl_s(sample):
    """Typed fast (or pasted) and ctrl+s at once: the preview is of the text with those
    words, and y writes them."""
    from conftest import settle, typed_at_once
    from textual.widgets import TextArea

    async with mum_s_contradiction(sample) as (app, pilot, screen):
        a, _b = screen.pair
        await pilot.press("e")
        await pilot.pause()
        box = screen.query_one("#merge-text", TextArea)
        await typed_at_once(app, pilot, *"Merged. ", "ctrl+s")
        assert box.text.startswith("Merged. ") and screen.pending is not None
        await pilot.press("y")
        await settle(app, pilot)
    assert sample.read_note(a).fields["content"].startswith("Merged. ")


async def test_app_undo_shows_what_it_undoes_and_waits_for_y(sample):
    """u undoes the vault's last action whichever pane or command made it: a link edited
    in the memory pane too. It first says which action that is; escape keeps it."""
    from conftest import open_at, settle
    from textual.widgets import Static

    from engine.review.linkwrite import write_link
    from memlink_tui.app import MemlinkApp

    v = sample
    link = next(l for l in v.links.all() if l.link_type.value == "related_to" and l.direction == "links")
    write_link(v, link.from_uri, link.to_uri, "related_to", update=True, description="edited elsewhere")
    app = MemlinkApp(v)
    async with app.run_test(size=(160, 50)) as pilot:
        await open_at(app, pilot, "lint")
        screen = app.screen

        def status() -> str:
            return str(screen.query_one("#review-status", Static).render())

        def description() -> str | None:
            return next(l for l in v.links.of(link.from_uri, "links") if l.id == link.id).description

        await pilot.press("u")
        await settle(app, pilot)
        assert status().startswith("y applies this, escape cancels")
        assert "update-link" in status() and f"updated the link {link.from_uri} -> {link.to_uri}" in status()
        assert description() == "edited elsewhere"
        await pilot.press("escape")
        await settle(app, pilot)
        assert "cancelled" in status() and description() == "edited elsewhere"
        await pilot.press("u")
        await pilot.pause()
        await pilot.press("y")
        await settle(app, pilot)
        assert "undid update-link" in status() and description() == link.description


async def test_q_asks_first_while_merge_text_is_kept_for_later(sample):
    from conftest import typed_at_once
    from textual.widgets import Static

    from memlink_tui.screens.link_editor import Confirm

    async with mum_s_contradiction(sample) as (app, pilot, screen):
        await pilot.press("e")
        await pilot.pause()
        await typed_at_once(app, pilot, *"Merged. ")
        await pilot.press("escape")  # closed, the text kept for e to open again
        await pilot.pause()
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, Confirm) and app.is_running
        assert "Merge text written in Lint is not applied: quitting loses it." in str(app.screen.query_one(Static).render())
        await pilot.press("n")
        await pilot.pause()
        await pilot.press("e")
        await pilot.pause()
        assert screen.query_one("#merge-text").text.startswith("Merged. ")


@pytest.mark.parametrize("keep, until", [("newer", "2024-02-20"), ("older", "2024-02-20")])
def test_a_superseded_note_holds_until_the_later_of_the_two_was_said(tmp_path, keep, until):
    """"I hate espresso now" (20 February) ends "I love espresso" (10 January) then, whenever
    the review happens; kept the other way, the newer claim never held."""
    from conftest import memlink

    root = tmp_path / "v"
    assert memlink("init", vault=root).returncode == 0
    chat = tmp_path / "c.jsonl"
    chat.write_text("".join(json.dumps(dict(session=s, id=i, role=r, content=c, ts=t)) + "\n" for s, i, r, c, t in [
        ("c1", "k1", "user", "I love espresso.", "2024-01-10T08:00:00Z"), ("c1", "k2", "assistant", "Noted.", "2024-01-10T08:01:00Z"),
        ("c2", "k3", "user", "I hate espresso now.", "2024-02-20T08:00:00Z"), ("c2", "k4", "assistant", "Noted.", "2024-02-20T08:01:00Z")]))
    assert memlink("import-chat", str(chat), vault=root).returncode == 0
    assert memlink("commit", "--all", vault=root).returncode == 0
    v = Vault.open(root)
    try:
        [pair] = [(l.from_uri, l.to_uri) for l in v.links.all() if l.link_type.value == "contradicts"]
        days = {u: v.read_note(u).created_at[:10] for u in pair}
        newer, older = sorted(pair, key=days.__getitem__, reverse=True)
        kept, dropped = (newer, older) if keep == "newer" else (older, newer)
        review(v, kept, dropped, "keep-a")
        assert v.read_note(dropped).extra["valid_until"] == until
    finally:
        v.close()
