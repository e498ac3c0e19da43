"""Reviewing contradictions: keep A / keep B / merge / dismiss / research, and undo."""

from __future__ import annotations

import hashlib

import pytest

from engine.review import ReviewError, review, undo
from engine.search import search


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
    before = files(v)
    result = review(v, a, b, "keep-a")
    assert "superseded" in result.message
    note_b = v.read_note(b)
    assert note_b.extra["superseded_by"] == a and "valid_until" in note_b.extra
    assert note_b.fields["content"] == "Stopped drinking coffee entirely."  # nothing deleted
    assert [(l.to_uri, l.link_type.value) for l in v.get_file_links(a, "links")] == [(b, "evolved_from")]
    assert not [l for l in v.get_file_links(b, "links") if l.link_type.value == "contradicts"]
    assert v.check() == []
    assert undo(v).startswith("undid keep-a")
    assert files(v) == before
    with pytest.raises(ReviewError, match="nothing to undo"):
        undo(v)


def test_superseded_notes_rank_lower(pair):
    v, a, b = pair
    scores = {h.uri: h.score for h in search(v, "coffee", k=5, use_graph=False)}
    review(v, a, b, "keep-a")
    after = {h.uri: h.score for h in search(v, "coffee", k=5, use_graph=False)}
    assert after[b] == pytest.approx(scores[b] * 0.5)


def test_merge_dismiss_research(pair):
    v, a, b = pair
    with pytest.raises(ReviewError, match="merged text"):
        review(v, a, b, "merge")
    review(v, a, b, "merge", text="Used to love coffee; quit in November.")
    assert v.read_note(a).fields["content"] == "Used to love coffee; quit in November."
    assert v.read_note(b).extra["superseded_by"] == a
    undo(v)
    review(v, a, b, "dismiss")
    assert [(l.to_uri, l.link_type.value) for l in v.get_file_links(b, "links")] == [(a, "related_to")]
    undo(v)
    result = review(v, a, b, "research")
    candidate = result.message.split(": ", 1)[1]
    assert v.read_note(candidate).fields["status"] == "pending"
    assert {l.to_uri for l in v.get_file_links(candidate, "links")} == {a, b}
    undo(v)
    assert not v.exists(candidate) and v.check() == []


def test_undo_refuses_when_files_changed_since(pair):
    v, a, b = pair
    review(v, a, b, "dismiss")
    v.write_note("preference", {"topic": "Coffee", "content": "Edited by hand afterwards."})
    with pytest.raises(ReviewError, match="changed since"):
        undo(v)


def test_cli_review_and_undo(pair):
    from test_cli import memlink

    v, a, b = pair
    v.close()
    r = memlink("review", a, b, "--action", "keep-b", vault=v.root)
    assert r.returncode == 0 and f"kept {b}" in r.stdout
    assert memlink("undo", vault=v.root).stdout.startswith("undid keep-b")
    r = memlink("review", a, "profile.md", "--action", "dismiss", vault=v.root)
    assert r.returncode == 1 and "no contradicts link" in r.stderr
