"""The catalog in SQLite (one row per note), its sync with the files, read-only vaults,
and the fast frontmatter reader, which must always agree with the YAML loader."""

from __future__ import annotations

import datetime as dt
import os
import random
import sqlite3
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

import engine.walk
from engine import Vault
from engine.catalog import CATALOG_FILE, LAYOUT, CatalogStore
from engine.frontmatter import fast_load, load_frontmatter
from engine.links import SIDECAR
from engine.notes import Note, _NoteDumper, serialize_note
from engine.uris import utf8_name
from engine.walk import NON_NOTE_DIRS, NON_NOTE_FILES, Prewalk, Seen, vault_files, walk_digest
from engine.yamlio import safe_load


def db_path(vault: Vault) -> Path:
    return vault.root / ".memlink" / CATALOG_FILE


def files_under(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# -- one row per note ---------------------------------------------------------------------------
def test_recording_a_note_writes_one_row_and_a_delete_removes_one(vault, monkeypatch):
    vault.write_note("entity", {"name": "Ana", "kind": "person"})
    vault.write_note("entity", {"name": "Bo", "kind": "person"})
    vault.sync_catalog()
    calls = []
    real = CatalogStore.write

    def spy(self, rows, gone=()):
        rows, gone = list(rows), list(gone)
        calls.append(([e.uri for e in rows], [g[0] for g in gone]))
        return real(self, rows, gone)

    monkeypatch.setattr(CatalogStore, "write", spy)
    note = vault.write_note("entity", {"name": "Cy", "kind": "person"})
    assert calls == [([note.uri], [])]
    calls.clear()
    vault.delete_note(note.uri)
    assert calls == [([], [note.uri])]
    stored = CatalogStore(db_path(vault)).load()
    assert sorted(stored) == ["entities/ana.md", "entities/bo.md"]


def test_a_row_round_trips_every_field(vault):
    note = vault.write_note("entity", {"name": "Ana", "kind": "Person", "aliases": ["Annie", "A. N."]})
    vault.supersede(note.uri, vault.write_note("entity", {"name": "Ana B", "kind": "person"}).uri, "2026-01-02")
    (vault.root / "entities" / "broken.md").write_text("no frontmatter\n")
    live = vault.sync_catalog()
    stored = CatalogStore(db_path(vault)).load()
    assert stored == live
    assert stored[note.uri].aliases == ["Annie", "A. N."] and stored[note.uri].kind == "person"
    assert stored[note.uri].superseded is True
    assert "no YAML frontmatter" in (stored["entities/broken.md"].error or "")


def test_superseded_is_answered_from_stamps_as_the_entries_say(vault, monkeypatch):
    """A search asks every note it scores whether it is superseded: a catalog loaded as
    stamps answers from the table's set, and it agrees with the entries before and after
    a note is superseded in this process or edited by hand."""
    notes = [vault.write_note("entity", {"name": n, "kind": "person"}).uri for n in ("Ana", "Bo", "Cy", "Di")]
    vault.supersede(notes[0], notes[1], "2026-01-02")
    reopened = Vault.open(vault.root)
    loaded = reopened.sync_catalog()
    filled = []
    real = CatalogStore.entries
    monkeypatch.setattr(CatalogStore, "entries", lambda self, uris: filled.extend(uris) or real(self, uris))
    assert [loaded.is_superseded(u) for u in notes] == [True, False, False, False]
    assert filled == [] and loaded.is_superseded("entities/nobody.md") is False
    reopened.supersede(notes[2], notes[3], "2026-01-03")
    path = reopened.root / notes[0]  # a hand edit drops the mark
    path.write_text(path.read_text(encoding="utf-8").replace("valid_until", "was_until"), encoding="utf-8")
    now = reopened.sync_catalog()
    expect = [CatalogStore(db_path(reopened)).load()[u].superseded for u in notes]
    assert [now.is_superseded(u) for u in notes] == expect == [False, False, True, False]


def test_a_search_builds_only_the_entries_it_shows(vault, monkeypatch):
    from engine.search import search

    for i in range(60):
        vault.write_note("entity", {"name": f"Harbor pilot {i}", "kind": "person", "content": f"pilot {i} of the harbor"})
    vault.services.open_index()  # indexed once; the next process loads it
    reopened = Vault.open(vault.root)
    index = reopened.services.open_index()
    filled: list[str] = []
    real = CatalogStore.entries
    monkeypatch.setattr(CatalogStore, "entries", lambda self, uris: filled.extend(uris) or real(self, uris))
    hits = search(reopened, "harbor pilot", k=5, index=index)
    shown = {h.uri for h in hits} | {e.uri for h in hits for e in h.evidence}
    assert hits and set(filled) <= shown and len(filled) == len(set(filled))


def test_no_change_sync_writes_nothing_and_reads_only_changed_files(vault, monkeypatch):
    for name in ("Ana", "Bo", "Cy"):
        vault.write_note("entity", {"name": name, "kind": "person"})
    vault.sync_catalog()
    import engine.vault as vault_module

    parsed = []
    real_parse = vault_module.parse_note
    monkeypatch.setattr(vault_module, "parse_note", lambda text, uri, types: parsed.append(uri) or real_parse(text, uri, types))
    written = []
    monkeypatch.setattr(CatalogStore, "write", lambda self, rows, gone=(), snapshot=None: written.append((list(rows), list(gone))))
    fresh = Vault.open(vault.root)
    fresh.sync_catalog()
    assert parsed == [] and written == []  # (from the snapshot the first sync left: next test)
    path = vault.path("entities/bo.md")
    path.write_text(path.read_text().replace("name: Bo", "name: Bob"))
    os.utime(path, ns=(1, 1))
    assert fresh.sync_catalog()["entities/bo.md"].title == "Bob"
    assert parsed == ["entities/bo.md"]
    assert [[e.uri for e in rows] for rows, _gone in written] == [["entities/bo.md"]]


def _state(catalog) -> dict:
    return {u: (e.memory_type, e.title, e.sha, e.error, e.superseded, catalog.is_superseded(u)) for u, e in catalog.items()}


def test_an_unchanged_vault_opens_from_the_snapshot_of_the_last_sync(vault, monkeypatch):
    """A process's first sync leaves a snapshot of what it saw, in the same write as any
    rows it changed; the next process whose walk lists the same files takes the stamps
    from it (no rows loaded, no file compared) and has the same catalog, and one whose
    walk differs compares the files with the snapshot's stamps instead of loading the
    rows. Any other write removes it; a damaged snapshot means the rows are loaded."""
    notes = [vault.write_note("entity", {"name": n, "kind": "person"}).uri for n in ("Ana", "Bo", "Cy")]
    vault.supersede(notes[0], notes[1], "2026-01-02")
    assert CatalogStore(db_path(vault)).snapshot() is None  # the writes of this process left none
    (vault.root / "entities" / "broken.md").write_text("no frontmatter\n")
    Vault.open(vault.root).sync_catalog()  # records broken.md, and leaves a snapshot with it
    assert CatalogStore(db_path(vault)).snapshot() is not None
    expect = _state(Vault.open(vault.root).sync_catalog())
    assert expect["entities/broken.md"][3] and expect[notes[0]][5]  # (broken; superseded)

    loads = []
    real_load = CatalogStore.load
    monkeypatch.setattr(CatalogStore, "load", lambda self: loads.append(1) or real_load(self))
    assert _state(Vault.open(vault.root).sync_catalog()) == expect and loads == []
    assert Vault.open(vault.root).sync_catalog().is_superseded(notes[0]) and loads == []

    path = vault.path(notes[2])  # edited by hand: compared with the snapshot's stamps, the edit seen
    path.write_text(path.read_text().replace("name: Cy", "name: Cyd"))
    os.utime(path, ns=(2, 2))
    assert Vault.open(vault.root).sync_catalog()[notes[2]].title == "Cyd" and loads == []
    expect[notes[2]] = _state(Vault.open(vault.root).sync_catalog())[notes[2]]
    assert expect[notes[2]][1] == "Cyd"
    assert _state(Vault.open(vault.root).sync_catalog()) == expect and loads == []
    # Superseded notes follow the rows a sync wrote: one no longer superseded, one now.
    vault.path(notes[0]).write_text(vault.path(notes[0]).read_text().replace("valid_until", "was_valid_until"))
    os.utime(vault.path(notes[0]), ns=(3, 3))
    assert not Vault.open(vault.root).sync_catalog().is_superseded(notes[0]) and loads == []
    with_table = CatalogStore(db_path(vault)).load()
    assert not Vault.open(vault.root).sync_catalog().is_superseded(notes[0]) and not with_table.is_superseded(notes[0])
    loads.clear()

    db = sqlite3.connect(db_path(vault))  # damaged: not used
    db.execute("UPDATE walk_snapshot SET data = substr(data, 1, length(data) - 1) || x'00'")
    db.commit()
    db.close()
    assert CatalogStore(db_path(vault)).snapshot() is None
    assert _state(Vault.open(vault.root).sync_catalog())[notes[2]] == expect[notes[2]] and loads == [1]

    writer = Vault.open(vault.root)
    writer.write_note("entity", {"name": "Di", "kind": "person"})  # a write removes it
    assert CatalogStore(db_path(vault)).snapshot() is None
    assert "entities/di.md" in Vault.open(vault.root).sync_catalog() and loads == [1, 1]


def test_a_note_that_did_not_parse_is_read_again_though_the_snapshot_matches(vault):
    """A note of a type the vault did not define is an error; define the type, the file
    untouched, and the next process reads the note as a sync always did."""
    (vault.root / "recipes").mkdir()
    (vault.root / "recipes" / "soup.md").write_text(
        "---\nmemory_type: recipe\ncreated_at: '2026-01-01T00:00:00+00:00'\nfields:\n  name: Soup\n---\nLeek soup.\n")
    assert Vault.open(vault.root).sync_catalog()["recipes/soup.md"].error
    assert Vault.open(vault.root).sync_catalog()["recipes/soup.md"].error  # from the snapshot, read again
    entity = (Path(__file__).parents[1] / "engine" / "memory_types" / "entity.yaml").read_text(encoding="utf-8")
    (vault.root / "memory_types").mkdir()
    (vault.root / "memory_types" / "recipe.yaml").write_text(
        entity.replace("memory_type: entity", "memory_type: recipe").replace("directory: entities", "directory: recipes"))
    entry = Vault.open(vault.root).sync_catalog()["recipes/soup.md"]
    assert not entry.error and entry.memory_type == "recipe" and entry.title == "Soup"


def test_a_catalog_read_from_its_table_builds_entries_as_asked_and_equals_a_full_one(vault):
    for i in range(80):
        vault.write_note("entity", {"name": f"Person {i}", "kind": "person", "aliases": [f"P{i}"]})
    (vault.root / "entities" / "broken.md").write_text("no frontmatter\n")
    full = dict(vault.sync_catalog().items())
    fresh = Vault.open(vault.root)
    lazy = fresh.catalog()
    assert len(lazy) == len(full) and set(lazy) == set(full)
    assert all(lazy.is_good(u) == (not e.error) for u, e in full.items())
    assert lazy.good_shas() == {u: e.sha for u, e in full.items() if not e.error}
    some = sorted(full)[:3]
    assert [lazy[u] for u in some] == [full[u] for u in some]  # one at a time
    assert dict(lazy.items()) == full  # then the rest in one read


def test_an_entry_whose_row_went_away_is_read_from_its_file(vault):
    note = vault.write_note("entity", {"name": "Ana", "kind": "person", "aliases": ["Annie"]})
    vault.sync_catalog()
    fresh = Vault.open(vault.root)
    lazy = fresh.catalog()  # stamps only, so far
    with sqlite3.connect(db_path(vault)) as db:
        db.execute("DELETE FROM notes WHERE uri = ?", (note.uri,))
    entry = lazy[note.uri]
    assert (entry.title, entry.aliases, entry.error) == ("Ana", ["Annie"], None)


def test_a_commit_leaves_nothing_beside_the_catalog(vault):
    """`.memlink/` holds still between writes, even while the vault stays open (a dry run
    compares it byte for byte): no -wal/-shm/-journal file left to be folded back later."""
    vault.write_note("entity", {"name": "Ana", "kind": "person"})
    vault.sync_catalog()
    names = sorted(p.name for p in (vault.root / ".memlink").iterdir())
    assert [n for n in names if n.startswith("catalog")] == [CATALOG_FILE]
    before = files_under(vault.root / ".memlink")
    vault.close()
    assert files_under(vault.root / ".memlink") == before


def test_sync_hands_over_the_bodies_it_read(vault):
    a = vault.write_note("entity", {"name": "Ana", "kind": "person", "content": "Ana bakes bread."})
    vault.close()
    db_path(vault).unlink()  # a never-seen vault: every note is read
    fresh = Vault.open(vault.root)
    bodies: dict = {}
    catalog = fresh.sync_catalog(bodies=bodies)
    assert set(bodies) == {a.uri}
    sha, body = bodies[a.uri]
    assert sha == catalog[a.uri].sha and "Ana bakes bread." in body and body == fresh.read_note(a.uri).text
    again: dict = {}
    fresh.sync_catalog(bodies=again)
    assert again == {}  # nothing was read: nothing handed over


# -- rebuilt when missing, damaged or of another layout ------------------------------------------
def test_old_tinydb_shards_are_removed_and_ignored(vault):
    vault.write_note("entity", {"name": "Ana", "kind": "person"})
    vault.close()
    db = vault.root / ".memlink" / "db"
    db.mkdir(parents=True, exist_ok=True)
    (db / "catalog-07.json").write_text('{"notes": {"1": {"uri": "entities/ghost.md"}}}')
    fresh = Vault.open(vault.root)
    assert [e.uri for e in fresh.list_notes()] == ["entities/ana.md"]
    assert not list(db.glob("catalog-*.json"))


def test_a_catalog_of_an_older_layout_is_re_derived(vault):
    vault.write_note("entity", {"name": "Ana", "kind": "person"})
    vault.sync_catalog()
    vault.close()
    with sqlite3.connect(db_path(vault)) as db:
        db.execute("UPDATE notes SET title = 'stale'")
        db.execute(f"PRAGMA user_version={LAYOUT - 1}")
    db.close()
    fresh = Vault.open(vault.root)
    assert [e.title for e in fresh.stored_notes()] == []  # the old rows are not trusted
    assert [e.title for e in fresh.list_notes()] == ["Ana"]
    fresh.close()
    assert [e.title for e in CatalogStore(db_path(vault)).load().values()] == ["Ana"]


def test_a_catalog_damaged_while_open_is_rebuilt(vault):
    vault.write_note("entity", {"name": "Ana", "kind": "person"})
    vault.close()
    db_path(vault).write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)
    for suffix in ("-wal", "-shm"):
        Path(f"{db_path(vault)}{suffix}").unlink(missing_ok=True)
    fresh = Vault.open(vault.root)
    assert fresh.stored_notes() == []
    assert [e.uri for e in fresh.list_notes()] == ["entities/ana.md"]
    fresh.write_note("entity", {"name": "Bo", "kind": "person"})
    fresh.close()
    assert sorted(CatalogStore(db_path(vault)).load()) == ["entities/ana.md", "entities/bo.md"]


def test_a_catalog_locked_by_another_process_is_left_alone(vault):
    note = vault.write_note("entity", {"name": "Ana", "kind": "person"})
    vault.close()
    entry = CatalogStore(db_path(vault)).load()[note.uri]
    other = sqlite3.connect(db_path(vault), isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process in the middle of a write
    store = CatalogStore(db_path(vault), timeout=0.05)
    entry.title = "Changed"
    store.put(entry)  # waits, gives up, and neither raises nor discards the database
    other.execute("COMMIT")
    other.close()
    assert CatalogStore(db_path(vault)).load()[note.uri].title == "Ana"
    store.put(entry)
    assert CatalogStore(db_path(vault)).load()[note.uri].title == "Changed"


def test_deleting_the_catalog_while_a_vault_is_closed_is_safe(vault):
    vault.write_note("entity", {"name": "Ana", "kind": "person"})
    vault.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db_path(vault)}{suffix}").unlink(missing_ok=True)
    fresh = Vault.open(vault.root)
    assert [e.uri for e in fresh.list_notes()] == ["entities/ana.md"]
    assert db_path(vault).is_file()


# -- read-only vaults ---------------------------------------------------------------------------
def test_a_read_only_vault_reads_the_stored_catalog_and_writes_nothing(vault):
    vault.write_note("entity", {"name": "Ana", "kind": "person"})
    vault.sync_catalog()
    vault.close()
    before = files_under(vault.root)
    ro = Vault.open(vault.root, read_only=True)
    assert [e.uri for e in ro.stored_notes()] == ["entities/ana.md"]  # from the file, without syncing
    (vault.root / "entities" / "bo.md").write_text(
        "---\nmemory_type: entity\ncreated_at: '2026-01-01T00:00:00+00:00'\nfields:\n  name: Bo\n  kind: person\n---\n")
    before["entities/bo.md"] = (vault.root / "entities" / "bo.md").read_bytes()
    assert sorted(ro.sync_catalog()) == ["entities/ana.md", "entities/bo.md"]
    ro.close()
    assert files_under(vault.root) == before  # no journal, no row written


def test_a_read_only_vault_without_a_catalog_keeps_it_in_memory(vault):
    vault.write_note("entity", {"name": "Ana", "kind": "person"})
    vault.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db_path(vault)}{suffix}").unlink(missing_ok=True)
    before = files_under(vault.root)
    ro = Vault.open(vault.root, read_only=True)
    assert [e.uri for e in ro.list_notes()] == ["entities/ana.md"]
    ro.close()
    assert files_under(vault.root) == before


# -- the walk ---------------------------------------------------------------------------------
def reference_walk(root: Path) -> list[str]:
    """The walk as it was (os.walk + os.stat): the scandir walk must list the same files."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        rel = "" if rel == "." else rel.replace(os.sep, "/")
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and not (rel == "" and d in NON_NOTE_DIRS) and utf8_name(d))
        for name in sorted(filenames):
            if (rel == "" and name in NON_NOTE_FILES) or not utf8_name(name):
                continue
            if (name.endswith(".md") and not name.startswith(".")) or name == SIDECAR:
                try:
                    os.stat(os.path.join(dirpath, name))
                except OSError:
                    continue
                out.append(f"{rel}/{name}" if rel else name)
    return out


def make_tree(vault: Vault, tmp_path: Path) -> None:
    """Notes, a sidecar, hidden and non-note folders, and symlinks of every kind."""
    root = vault.root
    note = vault.write_note("entity", {"name": "Ana", "kind": "person"})
    other = vault.write_note("preference", {"topic": "tea", "sentiment": "like", "content": "Likes tea."})
    vault.link(note.uri, other.uri, "related_to")
    for rel in ("entities/deep/er/x.md", "entities/deep/a.md", ".hidden/h.md", "entities/.h.md", "sessions/s.md",
                "README.md", "DREAMS.md", "notes.txt", "z.md", "events/2026/01/02/e.md", "sub/README.md"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "o.md").write_text("x")
    os.symlink(outside, root / "entities" / "linked-folder")
    os.symlink(root / "z.md", root / "entities" / "linked-note.md")
    os.symlink(root / "missing.md", root / "entities" / "dangling.md")
    os.symlink(root / "entities", root / "folder-named.md")


def test_the_walk_lists_what_os_walk_listed(vault, tmp_path):
    make_tree(vault, tmp_path)
    assert [uri for uri, *_ in vault.iter_vault_files()] == reference_walk(vault.root)


def test_the_walk_in_a_second_process_sees_what_the_walk_here_sees(vault, tmp_path):
    make_tree(vault, tmp_path)
    here = list(vault.iter_vault_files())
    prewalk = Prewalk.start(str(vault.root), SIDECAR)
    assert prewalk is not None
    seen = prewalk.seen()
    assert seen is not None and seen.digest == walk_digest(here)
    assert seen.sidecars == {uri: (mtime, size) for uri, mtime, size in here if uri.endswith(SIDECAR)} != {}
    assert seen.files() == here


def test_the_walk_digest_does_not_depend_on_who_else_holds_its_strings(vault):
    """The second process and this one hash the same list: marshal's back-references
    (written for objects held more than once) must not make their bytes differ."""
    vault.write_note("entity", {"name": "Ana", "kind": "person"})
    here = list(vault.iter_vault_files())
    alone = walk_digest(here)
    held = [uri for uri, _mtime, _size in here]
    assert walk_digest(here) == alone and held


def stale_prewalk(monkeypatch) -> None:
    """A prefetched walk that is over before the caller goes on (as a fast second
    process's is): what it saw is what the vault held when it started."""
    def start(root: str, sidecar: str):
        seen = Seen(list(vault_files(root, sidecar)), sidecar)
        return SimpleNamespace(seen=lambda: seen, close=lambda: None)

    monkeypatch.setattr(Prewalk, "start", staticmethod(start))


def count_walks_here(monkeypatch) -> list[int]:
    walks: list[int] = []
    real = Vault.iter_vault_files
    monkeypatch.setattr(Vault, "iter_vault_files", lambda self: walks.append(1) or real(self))
    return walks


def test_a_prefetched_walk_serves_the_first_sync_but_not_one_after_a_write_here(vault, monkeypatch):
    ana = vault.write_note("entity", {"name": "Ana", "kind": "person"}).uri
    walks = count_walks_here(monkeypatch)
    reader = Vault.open(vault.root)
    reader.prefetch_walk()
    expect = _state(reader.sync_catalog())  # no snapshot yet: the second process's whole list
    assert ana in expect and walks == []
    again = Vault.open(vault.root)
    again.prefetch_walk()
    assert _state(again.sync_catalog()) == expect and walks == []  # its digest matched the snapshot
    stale_prewalk(monkeypatch)
    writer = Vault.open(vault.root)
    writer.prefetch_walk()
    bo = writer.write_note("entity", {"name": "Bo", "kind": "person"}).uri  # after the walk
    assert {ana, bo} <= set(writer.sync_catalog()) and walks == [1]
    for opened in (reader, again, writer):
        opened.close()


def test_no_walk_is_prefetched_while_a_write_is_under_way(vault, monkeypatch):
    """A write begun before the walk starts may land after the walk passed its folder;
    one begun while the second process starts, too."""
    stale_prewalk(monkeypatch)
    opened = Vault.open(vault.root)
    with opened.transaction():
        opened.prefetch_walk()
        ana = opened.write_note("entity", {"name": "Ana", "kind": "person"}).uri
    assert ana in opened.sync_catalog()
    opened.close()

    racing = Vault.open(vault.root)
    stale = Prewalk.start

    def start_while_another_thread_writes(root: str, sidecar: str):
        started = stale(root, sidecar)
        racing.write_note("entity", {"name": "Bo", "kind": "person"})
        return started

    monkeypatch.setattr(Prewalk, "start", staticmethod(start_while_another_thread_writes))
    racing.prefetch_walk()
    assert {ana, "entities/bo.md"} <= set(racing.sync_catalog())
    racing.close()


def test_a_prefetched_walk_too_old_is_not_taken(vault, monkeypatch):
    ana = vault.write_note("entity", {"name": "Ana", "kind": "person"}).uri
    walks = count_walks_here(monkeypatch)
    monkeypatch.setattr(Prewalk, "MAX_AGE", -1.0)
    opened = Vault.open(vault.root)
    opened.prefetch_walk()
    assert ana in opened.sync_catalog() and walks == [1]
    opened.close()


MARK = "b'mlwalk1\\n'"  # (the blobs' mark, engine.walk._MARK)
SEND = ("import marshal, sys\n"
        "def send(v):\n"
        "    data = marshal.dumps(v)\n"
        f"    sys.stdout.buffer.write({MARK} + len(data).to_bytes(8, 'little') + data)\n"
        "    sys.stdout.buffer.flush()\n")
FAKES = {
    "nothing": "import sys\n",
    "a banner first": "print('Welcome to an app that embeds Python')\n" + SEND + "send(('digest', [], ('utf-8', 'surrogateescape')))\n",
    "a summary, then garbage": SEND + "send(('not the digest', [], (sys.getfilesystemencoding(), sys.getfilesystemencodeerrors())))\n"
                               "send([('entities/x.md', 1)])\n",
    "names decoded otherwise": SEND + "send(('digest', [], ('latin-1', 'strict')))\nsend([])\n",
}


@pytest.mark.parametrize("sends", sorted(FAKES))
def test_a_second_process_that_fails_means_the_sync_walks_here(vault, tmp_path, monkeypatch, sends):
    ana = vault.write_note("entity", {"name": "Ana", "kind": "person"}).uri
    fake = tmp_path / "walk.py"
    fake.write_text(FAKES[sends])
    monkeypatch.setattr(engine.walk, "__file__", str(fake))
    walks = count_walks_here(monkeypatch)
    opened = Vault.open(vault.root)
    opened.prefetch_walk()
    assert opened._prewalk is not None  # (started: the fake ran)
    assert set(opened.sync_catalog()) == {ana} and walks == [1]
    opened.close()


def test_a_symlinked_note_leading_outside_is_an_error_not_read(vault, tmp_path):
    (tmp_path / "secret.md").write_text(
        "---\nmemory_type: entity\ncreated_at: '2026-01-01T00:00:00+00:00'\nfields: {name: Secret}\n---\n")
    os.symlink(tmp_path / "secret.md", vault.root / "entities" / "escape.md")
    inside = vault.write_note("entity", {"name": "Ana", "kind": "person"})
    os.symlink(vault.path(inside.uri), vault.root / "entities" / "alias.md")
    catalog = vault.sync_catalog()
    assert "outside the vault" in (catalog["entities/escape.md"].error or "")
    assert catalog["entities/alias.md"].title == "Ana" and not catalog["entities/alias.md"].error


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


def test_names_looked_up_in_the_catalog_table_equal_the_names_built_from_every_title(sample):
    """A search process looks a question's names up in the catalog's names table instead
    of building the name tables from every title; both give the same notes."""
    import random

    from engine.names import NameIndex

    catalog = sample.catalog()
    titles = [e.title for e in catalog.values() if not e.error] + [a for e in catalog.values() for a in e.aliases]
    rng = random.Random(3)
    questions = []
    for title in titles:
        typo = title[:-1] if len(title) > 6 else title
        questions += [f"what about {title}?", f"Tell me of {typo} and {rng.choice(titles)}", title.lower()]
    built, looked_up = NameIndex(catalog), NameIndex(catalog, sample.catalog_store)
    assert any(built.named_in(q) for q in questions)
    for q in questions:
        assert looked_up.named_in(q) == built.named_in(q), q
    assert looked_up._names is None  # nothing was built for the lookups
    sample.write_note("entity", {"name": "Zebedee Quartermaine", "aliases": ["ZQ Holdings"]})
    fresh = NameIndex(sample.catalog(), sample.catalog_store)
    assert [n.uri for n in fresh.named_in("Was ZQ Holdings right?")] == [n.uri for n in NameIndex(sample.catalog()).named_in("Was ZQ Holdings right?")] != []


def test_a_settled_block_walks_the_vault_once_and_sees_its_own_writes(vault, monkeypatch):
    """A command's several syncs (a dream: repair, index, topics, lint) walk the vault
    once; the catalog still has every note the command wrote, a sync asked to walk sees
    another editor's note, and outside the block every sync walks."""
    walks = []
    real = Vault.iter_vault_files
    monkeypatch.setattr(Vault, "iter_vault_files", lambda self: walks.append(1) or real(self))
    with vault.settled():
        vault.sync_catalog()
        mine = vault.write_note("entity", {"name": "Ana", "kind": "person"}).uri
        with vault.settled():  # nested: the same moment
            assert mine in vault.sync_catalog()
        (vault.root / "entities" / "by-hand.md").write_text(vault.path(mine).read_text().replace("Ana", "Hand"))
        assert "entities/by-hand.md" not in vault.sync_catalog() and len(walks) == 1
        assert "entities/by-hand.md" in vault.sync_catalog(walk=True) and len(walks) == 2
    vault.sync_catalog()
    assert len(walks) == 3


def test_a_repair_in_a_settled_block_sees_a_note_another_process_wrote(vault):
    """fix removes links to notes that do not exist: under the write lock it walks again,
    so a note and link another process made after the block's first sync stay."""
    from engine.lint import fix

    a = vault.write_note("entity", {"name": "Ana", "kind": "person"}).uri
    with vault.settled():
        vault.sync_catalog()
        other = Vault.open(vault.root)
        b = other.write_note("entity", {"name": "Bo", "kind": "person"}).uri
        other.link(a, b, "related_to")
        other.close()
        assert not any("removed" in line for line in fix(vault))
    assert [l.to_uri for l in vault.get_file_links(a, "links")] == [b]


def count_walks_begun(monkeypatch) -> list[str]:
    """Every walk begun in a second process (stale ones: over before anything goes on)."""
    begun: list[str] = []
    stale_prewalk(monkeypatch)
    stale = Prewalk.start
    monkeypatch.setattr(Prewalk, "start", staticmethod(lambda root, sidecar: begun.append(root) or stale(root, sidecar)))
    return begun


def test_a_walk_begun_before_the_vault_opened_is_taken_when_nothing_wrote_since(vault, monkeypatch):
    ana = vault.write_note("entity", {"name": "Ana", "kind": "person"}).uri
    begun = count_walks_begun(monkeypatch)
    engine.walk.walk_early(str(vault.root))
    opened = Vault.open(vault.root)
    opened.prefetch_walk()
    assert ana in opened.sync_catalog() and len(begun) == 1  # its own walk was not begun
    assert engine.walk.take_early(str(vault.root)) is None  # taken once
    opened.close()


def test_a_walk_begun_early_is_not_taken_after_a_write_or_a_replayed_journal(vault, monkeypatch):
    from engine.journal import _OPS, WriteFile

    begun = count_walks_begun(monkeypatch)
    engine.walk.walk_early(str(vault.root))
    writer = Vault.open(vault.root)
    bo = writer.write_note("entity", {"name": "Bo", "kind": "person"}).uri  # after the walk
    writer.prefetch_walk()
    assert bo in writer.sync_catalog() and len(begun) == 2
    writer.close()

    journal = vault.state_dir / "journal"
    journal.mkdir(parents=True, exist_ok=True)
    text = "---\nmemory_type: entity\ncreated_at: '2026-01-01T00:00:00+00:00'\nfields:\n  name: Cy\n  kind: person\n---\n"
    (journal / "00000000000000000001-dead.json").write_bytes(_OPS.dump_json([WriteFile(uri="entities/cy.md", text=text)]))
    engine.walk.walk_early(str(vault.root))  # (as a killed writer left it: the walk does not list Cy)
    replayed = Vault.open(vault.root)  # replays the journal: Cy lands after the walk
    replayed.prefetch_walk()
    assert "entities/cy.md" in replayed.sync_catalog() and len(begun) == 4
    replayed.close()


def test_a_walk_begun_early_for_another_folder_is_left_alone(vault, tmp_path, monkeypatch):
    other = tmp_path / "elsewhere"
    other.mkdir()
    begun = count_walks_begun(monkeypatch)
    engine.walk.walk_early(str(other))
    opened = Vault.open(vault.root)
    opened.prefetch_walk()
    opened.sync_catalog()
    assert begun == [str(other), str(vault.root)]
    assert engine.walk.take_early(str(other)) is not None
    opened.close()


def test_superseded_in_answers_as_is_superseded_does_for_stamps_and_entries():
    """``superseded_in`` (a search asks it of every note it scores) answers at once when
    no note of the snapshot is superseded, and as ``is_superseded`` otherwise: a stamp
    from the set loaded with it, an entry from itself, one read later included."""
    from engine.catalog import Catalog, CatalogEntry

    def entry(uri: str, superseded: bool = False) -> CatalogEntry:
        return CatalogEntry(uri, "entity", uri, "", "", 1, 1, "h", superseded=superseded)

    stamps = {f"n{i}.md": (1, 1, "h", None, "entity") for i in range(6)}
    uris = [*stamps, "missing.md"]
    none = Catalog(dict(stamps), None, frozenset())
    assert none.superseded_in(uris) == []
    loaded = Catalog(dict(stamps), None, frozenset({"n2.md"}))
    assert loaded.superseded_in(uris) == ["n2.md"] == [u for u in uris if loaded.is_superseded(u)]
    held = Catalog({**stamps, "n4.md": entry("n4.md", superseded=True)}, None, frozenset())
    assert held.superseded_in(uris) == ["n4.md"]
    later = Catalog(dict(stamps), lambda asked: {u: entry(u, superseded=u == "n5.md") for u in asked}, frozenset())
    assert later.superseded_in(uris) == []
    later.prefetch(["n5.md"])  # (the table says so now: read after the snapshot was loaded)
    assert later.superseded_in(uris) == ["n5.md"] == [u for u in uris if later.is_superseded(u)]
