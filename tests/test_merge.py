import pytest

from engine import MergeError, SchemaError


def test_patch_replaces_and_edits(vault):
    vault.write_note("entity", {"name": "Ana", "content": "Ana lives in Lisbon.\nShe codes in Go."})
    note = vault.write_note("entity", {"name": "Ana", "content": {"search": "Lisbon", "replace": "Porto"}})
    assert note.fields["content"] == "Ana lives in Porto.\nShe codes in Go."
    note = vault.write_note("entity", {"name": "Ana", "content": [{"search": "Go", "replace": "Rust"}, {"search": "Porto", "replace": "Braga"}]})
    assert note.fields["content"] == "Ana lives in Braga.\nShe codes in Rust."
    assert vault.write_note("entity", {"name": "Ana", "content": "new"}).fields["content"] == "new"


def test_search_replace_errors_change_nothing(vault):
    vault.write_note("entity", {"name": "Ana", "content": "a b a"})
    before = vault.path("entities/ana.md").read_text()
    with pytest.raises(MergeError, match="not found"):
        vault.write_note("entity", {"name": "Ana", "content": {"search": "zzz", "replace": "y"}})
    with pytest.raises(MergeError, match="ambiguous"):
        vault.write_note("entity", {"name": "Ana", "content": {"search": "a", "replace": "y"}})
    assert vault.path("entities/ana.md").read_text() == before


def test_sum_adds_numbers_and_unions_lists(vault):
    vault.write_note("event", {"event_name": "Run", "date": "2026-09-01", "participants": ["Ana", "Bo"]})
    note = vault.write_note("event", {"event_name": "Run", "date": "2026-09-01", "participants": ["Bo", "Cy"]})
    assert note.fields["participants"] == ["Ana", "Bo", "Cy"]


def test_immutable_rejects_change(vault):
    vault.write_note("event", {"event_name": "Run", "date": "2026-09-01"})
    vault.write_note("event", {"event_name": "Run", "date": "2026-09-01", "location": "park"})  # same value is fine
    with pytest.raises(MergeError, match="immutable"):
        vault.write_note("event", {"event_name": "Run", "date": "2026-09-02"}, uri="events/2026/09/01/run.md")


def test_update_keeps_created_at_and_bumps_updated_at(vault):
    first = vault.write_note("entity", {"name": "Ana"}, created_at="2026-01-01T00:00:00+00:00", updated_at="2026-01-01T00:00:00+00:00")
    second = vault.write_note("entity", {"name": "Ana", "content": "x"})
    assert second.created_at == first.created_at and second.updated_at > first.updated_at


def test_type_mismatch_on_existing_uri(vault):
    vault.write_note("entity", {"name": "Ana"})
    with pytest.raises(SchemaError, match="is a entity note"):
        vault.write_note("preference", {"topic": "x", "content": "y"}, uri="entities/ana.md")
