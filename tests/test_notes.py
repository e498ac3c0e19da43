import os
import re

import pytest

from engine import NoteError, NoteNotFound, UriError, Vault
from engine.lint.memo import check
from engine.model.notes import parse_note


def test_note_roundtrip_keeps_unknown_frontmatter(vault):
    note = vault.write_note("entity", {"name": "Ana", "content": "Ana codes."})
    path = vault.path(note.uri)
    text = path.read_text()
    path.write_text(text.replace("memory_type: entity", "memory_type: entity\ntags: [work]"))
    vault.write_note("entity", {"name": "Ana", "content": "Ana codes in Go."})
    again = vault.read_note(note.uri)
    assert again.extra == {"tags": ["work"]}
    assert "Ana codes in Go." in again.body and again.fields["content"] == "Ana codes in Go."


def test_a_write_keeps_the_comments_and_key_order_a_person_gave_the_frontmatter(vault):
    note = vault.write_note("entity", {"name": "Ana", "content": "Ana codes.\nShe runs."})
    path = vault.path(note.uri)
    text = path.read_text()
    mine = "# people I work with\ntags: [work, go]  # from the offsite\n"
    path.write_text(text.replace("---\n", "---\n" + mine, 1))
    vault.write_note("entity", {"name": "Ana", "content": "Ana codes in Go.\nShe runs."})
    after = path.read_text()
    assert after.startswith("---\n" + mine + "memory_type: entity\n")
    again = vault.read_note(note.uri)
    assert again.extra == {"tags": ["work", "go"]} and again.fields["content"] == "Ana codes in Go.\nShe runs."
    other = vault.write_note("entity", {"name": "Bo", "content": "Bo codes."})
    vault.supersede(note.uri, other.uri, "2026-12-01")  # a key memlink adds: the person's lines stay
    assert path.read_text().startswith("---\n" + mine) and vault.read_note(note.uri).extra["superseded_by"] == other.uri


@pytest.mark.parametrize(
    "text, message",
    [
        ("# just markdown\n", "no YAML frontmatter"),
        ("---\nmemory_type: entity\n", "not closed"),
        ("---\nmemory_type: [\n---\n", "not valid YAML"),
        ("---\nfields: {}\n---\n", "no memory_type"),
        ("---\nmemory_type: gizmo\ncreated_at: '2026-01-01T00:00:00+00:00'\n---\n", "unknown memory type"),
        ("---\nmemory_type: entity\ncreated_at: '2026-01-01T00:00:00+00:00'\nfields: {name: A, wings: 2}\n---\n", "unknown field"),
        ("---\nmemory_type: entity\ncreated_at: yesterday\nfields: {name: A}\n---\n", "ISO 8601"),
    ],
)
def test_malformed_notes_give_clear_errors(vault, text, message):
    with pytest.raises(NoteError, match=message):
        parse_note(text, "entities/x.md", vault.types)


def test_malformed_note_is_reported_by_check_and_not_listed(vault):
    (vault.root / "entities" / "broken.md").write_text("no frontmatter here\n")
    problems = check(vault)
    assert [p.code for p in problems] == ["malformed_note"]
    assert vault.catalog.all() == []


def test_missing_note(vault):
    with pytest.raises(NoteNotFound):
        vault.read_note("entities/nobody.md")


@pytest.mark.parametrize("uri", ["/etc/passwd", "../outside.md", "entities/../../x.md", "a\\b.md", ".memlink/db/catalog.json", "", "C:/x.md"])
def test_paths_escaping_or_hidden_are_rejected(vault, uri):
    with pytest.raises(UriError):
        vault.read_note(uri)
    with pytest.raises(UriError):
        vault.link(uri, "profile.md", "related_to")


def test_symlink_out_of_the_vault_is_rejected(vault, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("---\nmemory_type: entity\ncreated_at: '2026-01-01T00:00:00+00:00'\nfields: {name: S}\n---\n")
    os.symlink(outside, vault.root / "entities" / "escape")
    with pytest.raises(UriError, match="outside the vault"):
        vault.read_note("entities/escape/secret.md")


def test_deleting_derived_state_loses_nothing(vault):
    import shutil

    vault.write_note("entity", {"name": "Ana"})
    vault.sync()
    shutil.rmtree(vault.root / ".memlink")
    fresh = Vault.open(vault.root)
    assert [e.uri for e in fresh.catalog.all()] == ["entities/ana.md"]
    assert (vault.root / ".memlink" / "index.sqlite").is_file()


def test_catalog_follows_edits_made_outside(vault):
    vault.write_note("entity", {"name": "Ana"})
    assert [e.title for e in vault.catalog.all()] == ["Ana"]
    path = vault.path("entities/ana.md")
    path.write_text(path.read_text().replace("name: Ana", "name: Anabel"))
    os.utime(path, ns=(1, 1))
    assert vault.sync().changed == {"entities/ana.md"} and [e.title for e in vault.catalog.all()] == ["Anabel"]
    path.unlink()
    assert vault.sync().removed == {"entities/ana.md"} and vault.catalog.all() == []


def test_corrupt_catalog_is_rebuilt(vault):
    vault.write_note("entity", {"name": "Ana"})
    vault.sync()
    vault.close()
    (vault.root / ".memlink" / "index.sqlite").write_text("{truncated")
    fresh = Vault.open(vault.root)
    assert [e.uri for e in fresh.catalog.all()] == ["entities/ana.md"]


def test_malformed_session_log_is_reported(vault):
    (vault.root / "sessions" / "s1.jsonl").write_text('{"session": "s1", "id": "1", "role": "user", "content": "hi", "ts": "2026-01-01"}\n{oops\n')
    assert [(p.code, p.uri) for p in check(vault)] == [("malformed_session", "sessions/s1.jsonl")]
    assert "mend or delete the line in a text editor" in check(vault)[0].message  # (what to do: no fix rewrites a log)


def test_text_a_person_typed_under_the_frontmatter_survives_every_write(vault):
    note = vault.write_note("entity", {"name": "Ana", "kind": "person", "content": "Ana codes."})
    path = vault.path(note.uri)
    text = path.read_text()
    head, body = text.split("\n---\n", 1)
    path.write_text(f"{head}\n---\nA line I typed above.\n\n{body}\nMy own notes: call Ana on Friday.\n")
    vault.write_note("entity", {"content": "Ana codes in Go."}, uri=note.uri)  # a merge
    vault.write_note("entity", {"name": "Ana", "kind": "person", "content": "Ana codes in Rust."}, uri=note.uri, replace=True)
    body = vault.read_note(note.uri).body
    assert body.startswith("A line I typed above.\n")
    assert body.rstrip().endswith("My own notes: call Ana on Friday.")
    assert "Ana codes in Rust." in body and "Ana codes in Go." not in body and "Ana codes.\n" not in body
    vault.write_note("entity", {"content": "Ana codes in Rust."}, uri=note.uri)  # nothing new: no write
    assert vault.read_note(note.uri).body == body
    # The generated text itself edited by hand: nothing can be told apart, so all is kept.
    head, body = path.read_text().split("\n---\n", 1)
    path.write_text(f"{head}\n---\n" + body.replace("Ana codes in Rust.", "Ana codes in Rust (I checked)."))
    vault.write_note("entity", {"content": "Ana codes in Zig."}, uri=note.uri)
    body = vault.read_note(note.uri).body
    assert "Ana codes in Zig." in body and "Ana codes in Rust (I checked)." in body and "call Ana on Friday" in body
    vault.write_note("entity", {"content": "Ana codes in C."}, uri=note.uri)  # and it does not pile up
    again = vault.read_note(note.uri).body
    assert again.count("I checked") == 1 and again.count("call Ana on Friday") == 1 and "Ana codes in C." in again


def test_a_note_saved_with_a_byte_order_mark_reads_and_keeps_it(vault):
    note = vault.write_note("entity", {"name": "Ana", "content": "Ana codes."})
    path = vault.path(note.uri)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    vault.sync()
    assert vault.read_note(note.uri).fields["name"] == "Ana" and not [f for f in check(vault) if f.severity == "error"]
    other = vault.write_note("entity", {"name": "Bo", "content": "Bo."})
    vault.link(note.uri, other.uri, "related_to")  # its Links block is rewritten around the rest
    assert path.read_bytes().startswith(b"\xef\xbb\xbf---\n") and "[[entities/bo|Bo]]" in path.read_text(encoding="utf-8")


def test_comments_stay_when_a_key_before_them_goes_and_on_a_list_item_that_changes(vault):
    note = vault.write_note("entity", {"name": "Ana", "kind": "person", "aliases": ["Annie"], "content": "Ana codes."})
    path = vault.path(note.uri)
    text = path.read_text()
    text = text.replace("  - Annie\n", "  - Annie  # what her team calls her\n").replace(
        "  content:", "  # the part I keep short\n  content:")
    path.write_text(text)
    vault.write_note("entity", {"name": "Ana", "aliases": ["Anna"], "content": "Ana codes."}, uri=note.uri, replace=True)
    after = path.read_text()
    assert re.search(r"- Anna +# what her team calls her", after)
    assert "# the part I keep short" in after and "kind:" not in after
    again = vault.read_note(note.uri)
    assert again.fields["aliases"] == ["Anna"] and "kind" not in again.fields


HAND_WRITTEN = """---
memory_type: preference
created_at: '2026-01-10T08:00:00+00:00'
updated_at: '2026-01-10T08:00:00+00:00'
fields:
  topic: Tea
  sentiment: like
  content: I love green tea, especially Longjing.
---
"""


def test_a_note_written_by_hand_with_its_words_in_its_fields_alone_is_searched_shown_linked_and_quoted(vault):
    from conftest import memlink

    from engine.retrieve.search import search
    from engine.review.linkwrite import write_link
    from engine.sessions.memory import memory_context

    (vault.root / "preferences").mkdir(exist_ok=True)
    (vault.root / "preferences" / "tea.md").write_text(HAND_WRITTEN, encoding="utf-8")
    vault.write_note("entity", {"name": "Anna", "kind": "person", "content": "My sister."})
    vault = Vault.open(vault.root)
    assert vault.read_note("preferences/tea.md").text.strip() == "I love green tea, especially Longjing."
    assert [h.uri for h in search(vault, "Longjing")][:1] == ["preferences/tea.md"]
    assert "I love green tea" in memlink("show", "preferences/tea.md", vault=vault.root).stdout
    write_link(vault, "preferences/tea.md", "entities/anna.md", "related_to", match_text="Longjing")
    quoted = [i for i in memory_context(vault, "What do I think of green tea?", turn_count=0).items if i.kind == "note"]
    assert quoted and quoted[0].source == "preferences/tea.md" and "Longjing" in quoted[0].text
    # (read as it is: only the generated Links block is added to the file)
    assert (vault.root / "preferences" / "tea.md").read_text(encoding="utf-8").startswith(HAND_WRITTEN)


def test_a_hand_written_note_may_give_its_day_alone_and_a_missing_time_stamp_says_what_to_add(vault):
    text = HAND_WRITTEN.replace("created_at: '2026-01-10T08:00:00+00:00'", "created_at: 2026-01-10")
    assert parse_note(text, "preferences/tea.md", vault.types).created_at == "2026-01-10T00:00:00+00:00"
    missing = "\n".join(line for line in HAND_WRITTEN.split("\n") if not line.startswith("created_at"))
    with pytest.raises(NoteError, match=r"preferences/tea.md: created_at is missing: add it to the frontmatter, "
                                        r"e.g. created_at: '\d{4}-"):
        parse_note(missing, "preferences/tea.md", vault.types)


def test_an_edit_of_the_visible_title_or_text_is_read_back_only_from_a_view_shown_as_rendered(vault):
    from engine.model.notes import parse_note, view_edit

    def edited(uri: str, old: str, new: str):
        was = vault.read_note(uri)
        text = vault.path(uri).read_text().replace(old, new, 1)
        return view_edit(parse_note(text, uri, vault.types), was, vault.schema("preference"))

    plain = vault.write_note("preference", {"topic": "Tea", "sentiment": "like", "content": "I like green tea."})
    assert edited(plain.uri, "I like green tea.\n<!-- /memlink:view -->", "I like white tea.\n<!-- /memlink:view -->") == {
        "content": "I like white tea."}
    assert edited(plain.uri, "# Tea\n", "# Green tea\n") == {"topic": "Green tea"}
    assert edited(plain.uri, "# Tea\n", "# Green tea\n").keys() == {"topic"}
    both = vault.path(plain.uri).read_text().replace("# Tea\n", "# Green tea\n").replace(
        "I like green tea.\n<!-- /memlink:view -->", "Sencha.\n<!-- /memlink:view -->")
    assert view_edit(parse_note(both, plain.uri, vault.types), vault.read_note(plain.uri), vault.schema("preference")) == {
        "topic": "Green tea", "content": "Sencha."}
    assert edited(plain.uri, "\nlike\n", "\nlove\n") is None  # (a line made of fields a heading or text is not)
    short = vault.write_note("preference", {"topic": "Green tea", "sentiment": "like", "content": "tea"})
    assert edited(short.uri, "\ntea\n<!-- /memlink:view -->", "\ntea, no sugar\n<!-- /memlink:view -->") == {
        "content": "tea, no sugar"}  # (a text whose words the title holds too)
    marked = vault.write_note("preference", {"topic": "Marks", "sentiment": "like",
                                             "content": "First.\n<!-- /memlink:view -->\nLast."})
    assert edited(marked.uri, "Last.\n<!-- /memlink:view -->", "Last, edited.\n<!-- /memlink:view -->") is None
    path = vault.path(plain.uri)  # a view edited by hand before: what is typed stays as typed
    path.write_text(path.read_text().replace("I like green tea.\n<!-- /memlink:view -->", "I like green tea!\n<!-- /memlink:view -->"))
    assert edited(plain.uri, "I like green tea!", "I like white tea.") == {}
