"""The catalog (the store's ``notes`` and ``names`` tables, one row a note file), its sync
with the files, read-only vaults, the walk, and the fast frontmatter reader, which must
always agree with the YAML loader."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import os
import random
import shutil
import sqlite3
from collections import defaultdict
from collections.abc import Iterable
from contextlib import closing
from pathlib import Path

import pytest
import yaml
from conftest import make_pair

import engine.storage.catalog
from engine import Vault
from engine.errors import UriError
from engine.model.frontmatter import fast_load, load_frontmatter
from engine.model.links import SIDECAR
from engine.model.notes import Note, _NoteDumper, serialize_note
from engine.model.text import words
from engine.model.uris import utf8_name
from engine.model.yamlio import safe_load
from engine.retrieve.names import NameIndex
from engine.storage import walk
from engine.storage.atomic import TMP_SUFFIX
from engine.storage.catalog import CatalogEntry, content_hash
from engine.storage.store import DB_FILE, SCHEMA_VERSION, Store
from engine.storage.walk import NON_NOTE_DIRS, NON_NOTE_FILES, vault_files

BO = "---\nmemory_type: entity\ncreated_at: '2026-01-01T00:00:00+00:00'\nfields:\n  name: Bo\n  kind: person\n---\n"


def db_path(vault: Vault) -> Path:
    return vault.root / ".memlink" / DB_FILE


def files_under(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def stored_rows(vault: Vault, sql: str) -> list[tuple]:
    """Rows of the database file as another process reads them."""
    store = Store(db_path(vault))
    try:
        return store.rows(sql)
    finally:
        store.close()


def count_reads(monkeypatch) -> list[str]:
    """Every note file the catalog parses (a note read from disk)."""
    parsed: list[str] = []
    real = engine.storage.catalog.parse_note
    monkeypatch.setattr(engine.storage.catalog, "parse_note", lambda text, uri, types: parsed.append(uri) or real(text, uri, types))
    return parsed


def edit(vault: Vault, uri: str, old: str, new: str, stamp: int) -> None:
    """A hand edit (vim, Obsidian), with an mtime of its own: the walk sees a new stamp
    however fast the test runs."""
    path = vault.root / uri
    path.write_text(path.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")
    os.utime(path, ns=(stamp, stamp))


# -- one row per note ---------------------------------------------------------------------------
def test_writing_a_note_writes_its_row_and_deleting_it_removes_the_row(vault):
    ana = vault.write_note("entity", {"name": "Ana", "kind": "person"}).uri
    bo = vault.write_note("entity", {"name": "Bo", "kind": "person"}).uri
    vault.sync()
    mark = vault.store.mark()
    cy = vault.write_note("entity", {"name": "Cy", "kind": "person"}).uri
    since = vault.store.since(mark)
    assert not since.everything and since.keys == {"note": {cy}}
    vault.delete_note(cy)
    after = vault.store.since(since.mark)
    assert not after.everything and after.keys == {"note": {cy}}
    assert stored_rows(vault, "SELECT k.key FROM notes n JOIN keys k ON k.id = n.id ORDER BY k.key") == [(ana,), (bo,)]
    assert sorted(vault.catalog.uris()) == [ana, bo]


def write_every_kind_of_note(vault: Vault) -> dict[str, str]:
    """Notes that between them set every catalog field away from its default."""
    ana = vault.write_note("entity", {"name": "Ana", "kind": "Person", "aliases": ["Annie", "A. N."]}).uri
    bo = vault.write_note("entity", {"name": "Ana B", "kind": "person"}).uri
    vault.supersede(ana, bo, "2026-01-02")
    (vault.root / "entities" / "broken.md").write_text("no frontmatter\n")
    (vault.root / "entities" / "half.md").write_text(  # an extraction not finished (engine.model.notes.is_pending)
        "---\nmemory_type: entity\ncreated_at: '2026-01-01T00:00:00+00:00'\nupdated_at: '2026-01-03T00:00:00+00:00'\n"
        "extraction: pending\nfields:\n  name: Half\n  kind: company\n"
        f"superseded_claims:\n- {{field: content, lines: '1', superseded_by: {bo}}}\n---\nNot done.\n")
    return {"ana": ana, "bo": bo, "broken": "entities/broken.md", "half": "entities/half.md"}


def test_a_row_round_trips_every_field(vault):
    uris = write_every_kind_of_note(vault)
    vault.sync()
    live = {e.uri: e for e in vault.catalog.all()}
    vault.close()
    fresh = Vault.open(vault.root)
    stored = {e.uri: e for e in fresh.catalog.stored()}  # the rows, as written (no walk)
    assert stored == live and set(stored) == {uris["ana"], uris["bo"], uris["half"]}
    for uri, entry in stored.items():  # and as the file says now
        assert entry == fresh.catalog.entry_now(uri)
        data = (vault.root / uri).read_bytes()
        st = (vault.root / uri).stat()
        assert (entry.sha, entry.mtime_ns, entry.size) == (content_hash(data), st.st_mtime_ns, st.st_size)
    ana, half = stored[uris["ana"]], stored[uris["half"]]
    assert (ana.title, ana.memory_type, ana.aliases, ana.kind, ana.superseded) == ("Ana", "entity", ["Annie", "A. N."], "person", True)
    assert (half.title, half.kind, half.pending, half.updated_at) == ("Half", "company", True, "2026-01-03T00:00:00+00:00")
    assert half.superseded_in_part and not half.superseded and not ana.superseded_in_part
    assert "no YAML frontmatter" in fresh.catalog.errors()[uris["broken"]]
    # every field was set away from its default by some row (so each was round-tripped)
    defaults = CatalogEntry("", "", "", "", "", 0, 0)
    unset = [f.name for f in dataclasses.fields(CatalogEntry)
             if f.name != "error" and all(getattr(e, f.name) == getattr(defaults, f.name) for e in stored.values())]
    assert unset == []


def test_another_process_reads_the_same_catalog_from_the_table_without_reading_a_note(vault, monkeypatch):
    write_every_kind_of_note(vault)
    for i in range(40):
        vault.write_note("entity", {"name": f"Person {i}", "kind": "person", "aliases": [f"P{i}"]})
    vault.sync()
    cat = vault.catalog
    want = (cat.all(), sorted(cat.uris()), len(cat), cat.errors(), cat.shas(), cat.superseded(), cat.type_counts(),
            {u: cat.memory_type(u) for u in cat.uris()})
    vault.close()
    parsed = count_reads(monkeypatch)
    fresh = Vault.open(vault.root)
    cat = fresh.catalog
    assert (cat.all(), sorted(cat.uris()), len(cat), cat.errors(), cat.shas(), cat.superseded(), cat.type_counts(),
            {u: cat.memory_type(u) for u in cat.uris()}) == want
    assert parsed == ["entities/broken.md"]  # (a note that did not parse is read again: below)
    some = sorted(cat.uris())[:3]
    assert {u: cat.get(u) for u in some} == {e.uri: e for e in want[0] if e.uri in some} == cat.entries(some)
    assert cat.get("entities/broken.md") is None and "entities/broken.md" not in cat and cat.get("entities/nobody.md") is None


def test_superseded_notes_agree_with_their_rows_after_a_supersede_and_a_hand_edit(vault):
    notes = [vault.write_note("entity", {"name": n, "kind": "person"}).uri for n in ("Ana", "Bo", "Cy", "Di")]
    vault.supersede(notes[0], notes[1], "2026-01-02")
    vault.close()
    reopened = Vault.open(vault.root)
    assert reopened.catalog.superseded() == {notes[0]}
    assert [reopened.catalog.get(u).superseded for u in notes] == [True, False, False, False]
    reopened.supersede(notes[2], notes[3], "2026-01-03")
    edit(reopened, notes[0], "valid_until", "was_until", 1)  # a hand edit drops the mark
    reopened.sync()
    assert reopened.catalog.superseded() == {e.uri for e in reopened.catalog.all() if e.superseded} == {notes[2]}
    reopened.close()
    assert Vault.open(vault.root).catalog.superseded() == {notes[2]}


def test_a_sync_reads_only_changed_files_and_writes_only_changed_rows(vault, monkeypatch):
    ana, bo, cy = (vault.write_note("entity", {"name": n, "kind": "person"}).uri for n in ("Ana", "Bo", "Cy"))
    vault.sync()
    vault.close()
    parsed = count_reads(monkeypatch)
    fresh = Vault.open(vault.root)
    mark = fresh.store.mark()
    synced = fresh.sync()
    assert parsed == [] and synced.changed == synced.removed == frozenset()
    since = fresh.store.since(mark)
    assert not since.everything and since.keys == {}  # nothing written
    edit(fresh, bo, "name: Bo", "name: Bob", 1)
    (fresh.root / cy).unlink()
    synced = fresh.sync()
    assert parsed == [bo] and (synced.changed, synced.removed) == ({bo}, {cy})
    since = fresh.store.since(since.mark)
    assert not since.everything and since.keys == {"note": {bo, cy}}
    assert fresh.catalog.get(bo).title == "Bob" and cy not in fresh.catalog
    # touched, not changed: read again, its row follows the new stamp, nothing "changed"
    edit(fresh, ana, "", "", 2)
    synced = fresh.sync()
    assert parsed == [bo, ana] and synced.changed == synced.removed == frozenset()
    assert fresh.store.since(since.mark).keys == {"note": {ana}} and fresh.catalog.get(ana).mtime_ns == 2


def test_a_note_that_did_not_parse_is_read_again(vault, monkeypatch):
    """A note of a type the vault did not define is an error; every sync reads it again
    (its file untouched), and once the type is defined it parses."""
    (vault.root / "recipes").mkdir()
    (vault.root / "recipes" / "soup.md").write_text(
        "---\nmemory_type: recipe\ncreated_at: '2026-01-01T00:00:00+00:00'\nfields:\n  name: Soup\n---\nLeek soup.\n")
    opened = Vault.open(vault.root)
    assert "recipes/soup.md" in opened.catalog.errors()
    opened.close()
    parsed = count_reads(monkeypatch)
    again = Vault.open(vault.root)
    again.sync()
    again.sync()
    assert parsed == ["recipes/soup.md"] * 2 and "recipes/soup.md" in again.catalog.errors()
    again.close()
    entity = (Path(__file__).parents[1] / "engine" / "memory_types" / "entity.yaml").read_text(encoding="utf-8")
    (vault.root / "memory_types").mkdir()
    (vault.root / "memory_types" / "recipe.yaml").write_text(
        entity.replace("memory_type: entity", "memory_type: recipe").replace("directory: entities", "directory: recipes"))
    defined = Vault.open(vault.root)
    entry = defined.catalog.get("recipes/soup.md")
    assert entry is not None and not entry.error and (entry.memory_type, entry.title) == ("recipe", "Soup")
    assert defined.catalog.errors() == {}


def test_sync_hands_over_the_bodies_it_read(vault):
    a = vault.write_note("entity", {"name": "Ana", "kind": "person", "content": "Ana bakes bread."})
    vault.close()
    db_path(vault).unlink()  # a never-seen vault: every note is read
    fresh = Vault.open(vault.root)
    bodies: dict = {}
    fresh.sync(bodies=bodies)
    assert set(bodies) == {a.uri}
    sha, body = bodies[a.uri]
    assert sha == fresh.catalog.get(a.uri).sha and "Ana bakes bread." in body and body == fresh.read_note(a.uri).text
    again: dict = {}
    fresh.sync(bodies=again)
    assert again == {}  # nothing was read: nothing handed over


# -- rebuilt when missing, damaged or of another schema version ------------------------------------
@pytest.mark.parametrize("version", [SCHEMA_VERSION - 1, SCHEMA_VERSION + 1], ids=["older", "newer"])
def test_a_catalog_of_another_schema_version_is_rebuilt(vault, version):
    vault.write_note("entity", {"name": "Ana", "kind": "person"})
    vault.sync()
    vault.close()
    with closing(sqlite3.connect(db_path(vault))) as db:
        db.execute("UPDATE notes SET title = 'stale'")
        db.execute(f"PRAGMA user_version={version}")
        db.commit()
    fresh = Vault.open(vault.root)
    assert fresh.catalog.stored() == []  # the old rows are not trusted
    assert [e.title for e in fresh.catalog.all()] == ["Ana"]
    fresh.close()
    assert stored_rows(vault, "SELECT title FROM notes") == [("Ana",)]
    assert stored_rows(vault, "PRAGMA user_version") == [(SCHEMA_VERSION,)]


def test_a_catalog_damaged_while_closed_is_rebuilt(vault):
    vault.write_note("entity", {"name": "Ana", "kind": "person"})
    vault.close()
    db_path(vault).write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)
    fresh = Vault.open(vault.root)
    assert fresh.catalog.stored() == []
    assert [e.uri for e in fresh.catalog.all()] == ["entities/ana.md"]
    fresh.write_note("entity", {"name": "Bo", "kind": "person"})
    fresh.close()
    assert stored_rows(vault, "SELECT k.key FROM notes n JOIN keys k ON k.id = n.id ORDER BY k.key") == [("entities/ana.md",), ("entities/bo.md",)]


def test_a_catalog_damaged_while_open_is_rebuilt(vault, caplog):
    ana = vault.write_note("entity", {"name": "Ana", "kind": "person"}).uri
    assert vault.catalog.uris() == [ana]
    generation = vault.store.generation
    db_path(vault).write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)  # under the open connection
    with caplog.at_level(logging.WARNING, logger="engine.storage.store"):
        assert vault.catalog.stored() == []  # the read goes on, on a database made afresh
    assert "damaged" in caplog.text and vault.store.generation != generation
    assert [e.uri for e in vault.catalog.all()] == [ana]  # derived again (the first question after a rebuild syncs)
    vault.write_note("entity", {"name": "Bo", "kind": "person"})
    vault.close()
    assert stored_rows(vault, "SELECT k.key FROM notes n JOIN keys k ON k.id = n.id ORDER BY k.key") == [(ana,), ("entities/bo.md",)]


def open_with_a_writer_elsewhere(vault: Vault) -> tuple[Vault, sqlite3.Connection]:
    """The vault open again, and another process in the middle of a write to its database
    (the vault waits for it 50 ms, not 30 s)."""
    vault.close()
    opened = Vault.open(vault.root)
    opened.store.timeout = 0.05  # (before its first question opens the connection)
    other = sqlite3.connect(db_path(vault), isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    return opened, other


def test_a_catalog_locked_by_another_process_is_left_alone_and_the_command_goes_on(vault, caplog):
    ana = vault.write_note("entity", {"name": "Ana", "kind": "person"}).uri
    opened, other = open_with_a_writer_elsewhere(vault)
    generation = opened.store.generation
    (vault.root / "entities" / "bo.md").write_text(BO)
    with caplog.at_level(logging.WARNING, logger="engine.storage.store"):
        synced = opened.sync()  # waits, gives up writing, neither raises nor discards the database
    assert synced.changed == {"entities/bo.md"} and "not written now" in caplog.text
    # Not written, not known: this process's view is the table's, and its next sync reads the file again.
    assert "entities/bo.md" not in opened.catalog and [e.uri for e in opened.catalog.stored()] == [ana]
    other.execute("COMMIT")
    other.close()
    assert opened.store.generation == generation and db_path(vault).is_file()
    opened.close()
    fresh = Vault.open(vault.root)  # the next process writes the row
    assert fresh.catalog.get("entities/bo.md").title == "Bo"
    assert stored_rows(vault, "SELECT k.key FROM notes n JOIN keys k ON k.id = n.id ORDER BY k.key") == [(ana,), ("entities/bo.md",)]


def test_a_catalog_write_skipped_while_locked_is_made_by_the_next_sync(vault):
    vault.write_note("entity", {"name": "Ana", "kind": "person"})
    opened, other = open_with_a_writer_elsewhere(vault)
    (vault.root / "entities" / "bo.md").write_text(BO)
    opened.sync()
    other.execute("COMMIT")
    other.close()
    opened.sync()  # the database can be written again
    assert opened.catalog.get("entities/bo.md") is not None
    assert [e.uri for e in opened.catalog.all()] == ["entities/ana.md", "entities/bo.md"]


def test_deleting_memlink_while_a_vault_is_closed_is_safe(vault):
    a, b = make_pair(vault)
    vault.link(a.uri, b.uri, "related_to")
    vault.close()
    shutil.rmtree(vault.root / ".memlink")
    fresh = Vault.open(vault.root)
    assert sorted(e.uri for e in fresh.catalog.all()) == sorted([a.uri, b.uri])
    assert [link.to_uri for link in fresh.links.of(a.uri, "links")] == [b.uri]
    assert db_path(vault).is_file()


# -- read-only vaults ---------------------------------------------------------------------------
def test_a_read_only_vault_reads_the_stored_catalog_and_writes_nothing(vault):
    vault.write_note("entity", {"name": "Ana", "kind": "person"})
    vault.sync()
    vault.close()
    (vault.root / "entities" / "bo.md").write_text(BO)  # written by hand since
    before = files_under(vault.root)
    ro = Vault.open(vault.root, read_only=True)
    assert [e.uri for e in ro.catalog.stored()] == ["entities/ana.md"]  # from the file, without syncing
    assert ro.sync().changed == {"entities/bo.md"}
    assert ro.catalog.uris() == ["entities/ana.md", "entities/bo.md"] and ro.catalog.get("entities/bo.md").title == "Bo"
    ro.close()
    assert files_under(vault.root) == before  # no journal, no row written


def test_a_read_only_vault_without_a_catalog_keeps_it_in_memory(vault):
    vault.write_note("entity", {"name": "Ana", "kind": "person"})
    vault.close()
    db_path(vault).unlink()
    before = files_under(vault.root)
    ro = Vault.open(vault.root, read_only=True)
    assert [e.uri for e in ro.catalog.all()] == ["entities/ana.md"]
    ro.close()
    assert files_under(vault.root) == before and not db_path(vault).exists()


# -- the walk ---------------------------------------------------------------------------------
def reference_walk(root: Path) -> list[str]:
    """The walk as os.walk + os.stat list it: notes and sidecars outside hidden and non-note
    folders, temp files anywhere outside hidden folders."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        rel = "" if rel == "." else rel.replace(os.sep, "/")
        notes = rel.split("/")[0] not in NON_NOTE_DIRS
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and utf8_name(d))
        for name in sorted(filenames):
            if not utf8_name(name):
                continue
            if not name.endswith(TMP_SUFFIX):
                if not notes or (rel == "" and name in NON_NOTE_FILES):
                    continue
                if not ((name.endswith(".md") and not name.startswith(".")) or name == SIDECAR):
                    continue
            try:
                os.stat(os.path.join(dirpath, name))
            except OSError:
                continue
            out.append(f"{rel}/{name}" if rel else name)
    return out


def make_tree(vault: Vault, tmp_path: Path) -> None:
    """Notes, a sidecar, temp files, hidden and non-note folders, and symlinks of every kind."""
    root = vault.root
    note = vault.write_note("entity", {"name": "Ana", "kind": "person"})
    other = vault.write_note("preference", {"topic": "tea", "sentiment": "like", "content": "Likes tea."})
    vault.link(note.uri, other.uri, "related_to")
    for rel in ("entities/deep/er/x.md", "entities/deep/a.md", ".hidden/h.md", "entities/.h.md", "sessions/s.md",
                "README.md", "DREAMS.md", "notes.txt", "z.md", "events/2026/01/02/e.md", "sub/README.md",
                f"entities/.ana.md.1a2b3c4d{TMP_SUFFIX}", f"sessions/.s.json.5e6f7a8b{TMP_SUFFIX}",
                f".memlink.yaml.0c0c0c0c{TMP_SUFFIX}", f".hidden/.h.md.9d9d9d9d{TMP_SUFFIX}"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "o.md").write_text("x")
    os.symlink(outside, root / "entities" / "linked-folder")
    os.symlink(root / "z.md", root / "entities" / "linked-note.md")
    os.symlink(root / "missing.md", root / "entities" / "dangling.md")
    os.symlink(root / "entities", root / "folder-named.md")


@pytest.mark.parametrize("by_fd", [True, False], ids=["folder descriptors", "paths (no scandir of a descriptor)"])
def test_the_walk_lists_what_os_walk_lists(vault, tmp_path, monkeypatch, by_fd):
    monkeypatch.setattr(walk, "_BY_FD", by_fd)
    make_tree(vault, tmp_path)
    found = sorted(vault_files(str(vault.root), SIDECAR))
    listed = [uri for uri, *_ in found]
    assert listed == sorted(reference_walk(vault.root))
    assert f"sessions/.s.json.5e6f7a8b{TMP_SUFFIX}" in listed and "sessions/s.md" not in listed
    stats = {uri: os.stat(vault.root / uri) for uri in listed}  # (a symlinked note: its target's)
    assert found == [(uri, stats[uri].st_mtime_ns, stats[uri].st_size) for uri in listed]


def test_a_symlinked_note_leading_outside_is_an_error_not_read(vault, tmp_path):
    (tmp_path / "secret.md").write_text(
        "---\nmemory_type: entity\ncreated_at: '2026-01-01T00:00:00+00:00'\nfields: {name: Secret}\n---\n")
    os.symlink(tmp_path / "secret.md", vault.root / "entities" / "escape.md")
    inside = vault.write_note("entity", {"name": "Ana", "kind": "person"})
    os.symlink(vault.path(inside.uri), vault.root / "entities" / "alias.md")
    bodies: dict = {}
    vault.sync(bodies=bodies)
    assert "outside the vault" in vault.catalog.errors()["entities/escape.md"]
    assert "entities/escape.md" not in vault.catalog and "entities/escape.md" not in bodies
    assert vault.catalog.get("entities/alias.md").title == "Ana" and "entities/alias.md" not in vault.catalog.errors()


def test_a_note_that_is_a_symlink_is_never_replaced_by_a_copy(vault):
    """A write would replace the link by a file of its own (two notes drifting apart): it
    is refused, naming the note the link points to, and nothing changes."""
    inside = vault.write_note("entity", {"name": "Ana", "kind": "person"})
    other = vault.write_note("entity", {"name": "Bo", "kind": "person"})
    alias = vault.root / "entities" / "alias.md"
    os.symlink(vault.path(inside.uri).name, alias)
    vault.sync()
    with pytest.raises(UriError, match="entities/alias.md is a symbolic link .*write the note it points to"):
        vault.link("entities/alias.md", other.uri, "related_to")
    assert alias.is_symlink() and vault.links.of("entities/alias.md") == []
    with pytest.raises(UriError, match="symbolic link"):
        vault.write_note("entity", {"name": "Ana", "kind": "person", "content": "New."}, uri="entities/alias.md")
    assert alias.is_symlink()


# -- what notes are called ------------------------------------------------------------------------
class NamesFromEveryTitle:
    """The names table built from every note's title and aliases in memory (as the name
    tables were before they were a table): ``named`` as ``Catalog.named`` answers it."""

    def __init__(self, entries: Iterable[CatalogEntry]) -> None:
        self.titles: dict[str, set[str]] = defaultdict(set)
        self.by_first: dict[str, set[str]] = defaultdict(set)
        for entry in entries:
            for name in [entry.title, *entry.aliases]:
                key = " ".join(words(name))
                if key:
                    self.titles[key].add(entry.uri)
                    if " " in key:
                        self.by_first[key.split()[0]].add(key)

    def named(self, keys: Iterable[str], firsts: Iterable[str] = (), most: int = 0) -> dict[str, set[str]]:
        out = {key: set(self.titles[key]) for key in keys if key in self.titles}
        for first in firsts:
            begin = {key: set(self.titles[key]) for key in self.by_first.get(first, ())}
            if sum(map(len, begin.values())) <= most:
                out.update(begin)
        return out


def test_names_looked_up_in_the_table_equal_the_names_built_from_every_title(sample):
    """A search looks a question's names up in the catalog's names table instead of
    building name tables from every title; both give the same notes."""
    entries = sample.catalog.all()
    built = NamesFromEveryTitle(entries)
    titles = [e.title for e in entries] + [a for e in entries for a in e.aliases]
    rng = random.Random(3)
    questions = []
    for title in titles:
        typo = title[:-1] if len(title) > 6 else title
        questions += [f"what about {title}?", f"Tell me of {typo} and {rng.choice(titles)}", title.lower()]
    for key in built.titles:
        assert sample.catalog.named([key]) == {key: built.titles[key]}, key
    looked_up, from_titles = NameIndex(sample.catalog), NameIndex(built)
    assert any(from_titles.named_in(q) for q in questions)
    for q in questions:
        assert looked_up.named_in(q) == from_titles.named_in(q), q
    sample.write_note("entity", {"name": "Zebedee Quartermaine", "aliases": ["ZQ Holdings"]})
    fresh = NameIndex.for_vault(sample)  # (follows the change feed: made again after the write)
    want = NameIndex(NamesFromEveryTitle(sample.catalog.all())).named_in("Was ZQ Holdings right?")
    assert [n.uri for n in fresh.named_in("Was ZQ Holdings right?")] == [n.uri for n in want] == ["entities/zebedee-quartermaine.md"]


def test_a_repair_sees_a_note_another_process_wrote(vault):
    """fix removes links to notes that do not exist: under the write lock it syncs again,
    so a note and link another process made after this one's catalog was read stay."""
    from engine.lint.report import fix

    a = vault.write_note("entity", {"name": "Ana", "kind": "person"}).uri
    vault.sync()
    other = Vault.open(vault.root)
    b = other.write_note("entity", {"name": "Bo", "kind": "person"}).uri
    other.link(a, b, "related_to")
    other.close()
    assert not any("removed" in line for line in fix(vault))
    assert [link.to_uri for link in vault.links.of(a, "links")] == [b]
    assert b in vault.catalog


# -- the fast frontmatter reader -------------------------------------------------------------------
FAST = [
    "memory_type: entity\ncreated_at: '2026-01-01T00:00:00+00:00'\nfields:\n  name: Ana\n  kind: person",
    "a: |-\n  one\n\n  two\n    indented\nb: x",
    "a: |\n  one\n  two\n\n\nb: 'it''s'",
    "fields:\n  aliases:\n  - Annie\n  - 'yes'\n  - A. N.\n  n: 3\n  f: 0.5\n  ok: true\n  offline: no\n  none: null\n  empty:\nz: ~",
    "a:\n  b:\n    c: deep\n  d: e\nf: []\ng: {}",
    "question: a long question that wraps\n  over two lines, as the dumper writes it\nstatus: pending",
    "url: http://example.com/a#b\ntext: a:b c#d (x) [y] {z}, é中",
    "seq:\n  - indented\n  - items\nafter: 1",
    "q: 'quoted '' and wrapped:   \n    over '' lines'\nn: 1",
]
GIVE_UP = [
    "a: 2026-01-01",  # a date
    "yes: 1",  # a boolean key
    'a: "double"',
    "a: 'multi\n\n  line'",  # a blank line in a quoted scalar
    "a: 'multi\nb: line'",  # a continuation no deeper than its key
    "a: |\n  clip at the end",  # the final line break at the end of the text
    "a: |+\n  keep\n",
    "a: >\n  folded",
    "a: &x 1\nb: *x",
    "a: !!str 1",
    "a: x # comment",
    "# comment\na: x",
    "a: x\n\nb: y",
    "a: x\n    continued: not a key",
    "a: [1, 2]",
    "a: 017",  # octal
    "a: 1_000",
    "a: .inf",
    "a:\tb",
    "a: x\r\nb: y",
    "a: |2-\n   indented first",
    "a: |-\n  x\n   \n  y",  # a line of spaces inside a literal
    "- a\n- b",
    "a: b: c",
    "...",
    "a: 12:30",
    "a: -1",
    "a: x\u2028y",
]


@pytest.mark.parametrize("text", FAST)
def test_the_fast_reader_reads_the_plain_layout_as_yaml_does(text):
    fast = fast_load(text)
    assert fast is not None
    assert fast == safe_load(text) and repr(fast) == repr(safe_load(text))


@pytest.mark.parametrize("text", GIVE_UP)
def test_the_fast_reader_leaves_anything_else_to_yaml(text):
    assert fast_load(text) is None
    try:
        want = safe_load(text)
    except yaml.YAMLError:
        with pytest.raises(yaml.YAMLError):
            load_frontmatter(text)
    else:
        assert load_frontmatter(text) == want


PIECES = ["a", "b", "word", " ", "  ", ":", ": ", "#", " #", "'", "''", '"', "-", "- ", "?", "|", ">", "\n", "\n\n",
          "yes", "no", "null", "~", "true", "1", "0", "1.5", "2026-01-01", "1e3", "0x1f", "1_000", ".inf", "<<", "=",
          "[", "]", "{", "}", ",", "&a", "*a", "!t", "%", "@", "`", "é", "中文", "  x", "...", "\\", ".5", "+1", "-1",
          "08", "12:30", "\t", "\u2028", "\x85"]


def random_value(r: random.Random, depth: int = 0):
    k = r.random()
    if depth < 2 and k < 0.12:
        return {r.choice(["name", "kind", "a-b", "_x", "yes", "1", "é"]): random_value(r, depth + 1) for _ in range(r.randint(0, 3))}
    if depth < 2 and k < 0.25:
        return [random_value(r, 2) for _ in range(r.randint(0, 3))]
    if k < 0.35:
        return r.choice([0, 7, -3, 0.5, 1e-5, True, False, None, dt.date(2026, 1, 2)])
    if k < 0.45:
        return "long words " * r.randint(5, 20) + "".join(r.choice(PIECES) for _ in range(3))
    return "".join(r.choice(PIECES[: 20 if k < 0.8 else None]) for _ in range(r.randint(1, 10)))


def test_the_fast_reader_agrees_with_yaml_on_random_documents():
    r = random.Random(20261201)
    fast_used = 0
    for i in range(3000):
        doc = {r.choice(["memory_type", "fields", "name", "content", "aliases", "k9", "on"]): random_value(r)
               for _ in range(r.randint(1, 5))}
        if i % 2:
            text = yaml.dump(doc, Dumper=_NoteDumper, allow_unicode=True, sort_keys=False, width=r.choice([30, 100]))
        else:
            text = yaml.safe_dump(doc, allow_unicode=bool(i % 3), sort_keys=False, width=r.choice([30, 80]))
        if i % 5 == 0:  # as a person might have edited it
            lines = text.split("\n")
            at = r.randrange(len(lines))
            lines[at] = r.choice([" ", "", "#c ", "\t"]) + lines[at] if i % 2 else lines[at] + r.choice([" ", " # c", ":"])
            text = "\n".join(lines)
        text = text.rstrip("\n") if i % 3 else text
        fast = fast_load(text)
        if fast is None:
            continue
        fast_used += 1
        want = safe_load(text)
        assert fast == want and repr(fast) == repr(want), text
    assert fast_used > 300  # the fast path is exercised, not always given up


def test_the_notes_memlink_writes_take_the_fast_path(vault):
    r = random.Random(3)
    schema = vault.schema("entity")
    words = ["tea", "é", "中文", "it's", "a: b", "#1", "x#y", "(note)", "[draft]", "yes", "-", "50%", "http://x.y/z"]
    for i in range(300):
        name = f"Name {i} " + " ".join(r.choice(words) for _ in range(r.randint(0, 3)))
        content = "\n".join(" ".join(r.choice(words) for _ in range(r.randint(1, 30))) for _ in range(r.randint(1, 4)))
        fields = schema.validate_fields({"name": name, "kind": "person", "content": content, "aliases": [f"A{i}", "yes"]},
                                        complete=True)
        stamp = "2026-01-01T00:00:00+00:00"
        front = serialize_note(Note("entities/x.md", "entity", fields, stamp, stamp, "body\n"), schema).split("---\n")[1]
        fast = fast_load(front.rstrip("\n"))
        assert fast is not None, front
        assert fast == safe_load(front), front


