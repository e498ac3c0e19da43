"""The one derived database, `.memlink/index.sqlite`: everything memlink derives from the
vault's files (besides the search libraries' own files) lives in it, it is rebuilt when it
is of another schema version or not a database, its change feed says what was written,
and a read-only vault writes nothing. Also the sync's removal of temp files a killed
writer left."""

from __future__ import annotations

import ast
import os
import re
import sqlite3
import time
from contextlib import closing
from pathlib import Path

import pytest
from conftest import REPO, make_pair

import engine.storage.store
from engine import Vault
from engine.lint.report import lint
from engine.retrieve.search import search
from engine.sessions.recall import TurnMemory
from engine.storage.atomic import STALE_TEMP, TMP_SUFFIX
from engine.storage.store import DB_FILE, EVERYTHING, FEED_KEEP, SCHEMA_VERSION, Since, Store, StoreBusy

QUESTION = "Who leads the Berth Planner v2 project?"
RECALLED = "what did we talk about glazes"
SIDE_FILES = ("-journal", "-wal", "-shm")


def db_path(vault: Vault) -> Path:
    return vault.root / ".memlink" / DB_FILE


def databases(folder: Path) -> list[str]:
    """Every SQLite file (and a file beside one) under ``folder``."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                  if ".sqlite" in p.name or p.name.endswith((".db", *SIDE_FILES)))


def use(vault: Vault) -> tuple[list[str], dict[str, int], list[str]]:
    """A search, a lint and a recall: what each found."""
    hits = [h.uri for h in search(vault, QUESTION, k=5)]
    counts = lint(vault).counts
    recalled = [h.memory_id for h in TurnMemory.for_vault(vault).recall(RECALLED, k=3)]
    return hits, counts, recalled


def tree(root: Path) -> dict[str, bytes | None]:
    """Every folder (None) and file (its bytes) under ``root``, hidden ones too."""
    out: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            out[os.path.relpath(os.path.join(dirpath, name), root) + "/"] = None
        for name in filenames:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, root)] = f.read()
    return out


def rebuild_checks(vault: Vault) -> tuple[str, str, tuple[str, int]]:
    """A note and one link, synced, the vault closed: (from, to, the feed's mark)."""
    a, b = make_pair(vault)
    vault.link(a.uri, b.uri, "related_to")
    vault.sync()
    mark = vault.store.mark()
    vault.close()
    return a.uri, b.uri, mark


def assert_derived_again(vault: Vault, a: str, b: str, mark: tuple[str, int]) -> None:
    fresh = Vault.open(vault.root)
    assert fresh.store.generation != mark[0] and fresh.store.since(mark).everything
    assert fresh.catalog.get(a).title == "Caroline" and sorted(fresh.catalog.uris()) == sorted([a, b])
    assert [link.to_uri for link in fresh.links.of(a, "links")] == [b]
    assert [link.from_uri for link in fresh.links.of(b, "backlinks")] == [a]
    fresh.close()
    with closing(sqlite3.connect(db_path(vault))) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


# -- one database ---------------------------------------------------------------------------------
def test_a_search_a_lint_and_a_recall_keep_their_state_in_one_database(sample):
    hits, counts, recalled = use(sample)
    assert hits and counts and recalled
    memlink = sample.root / ".memlink"
    assert databases(memlink) == [DB_FILE]  # nothing beside it between writes, the vault still open
    for table in ("notes", "names", "links", "folders", "findings", "checked", "indexed", "vectors", "turns"):
        assert sample.store.row(f"SELECT count(*) FROM {table}")[0] > 0, table  # noqa: S608 (fixed names)
    before = db_path(sample).read_bytes()
    sample.close()
    assert databases(memlink) == [DB_FILE] and db_path(sample).read_bytes() == before  # nothing left to fold back
    again = Vault.open(sample.root)
    assert use(again) == (hits, counts, recalled)
    again.close()
    assert databases(memlink) == [DB_FILE]


def test_the_engine_has_one_schema_version():
    """One SCHEMA_VERSION (the store's PRAGMA user_version) and no other database or
    derived file keeping a version of its own. The export's FORMAT/FORMAT_VERSION name
    the backup archive's manifest, which is no derived state."""
    found = set()
    for path in sorted((REPO / "engine").rglob("*.py")):
        rel = path.relative_to(REPO / "engine").as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
            for target in targets:
                if isinstance(target, ast.Name) and re.search(r"(VERSION|LAYOUT|FORMAT)$", target.id):
                    found.add((rel, target.id))
    assert found == {("storage/store.py", "SCHEMA_VERSION"), ("export.py", "FORMAT"), ("export.py", "FORMAT_VERSION")}
    versioned = [p.relative_to(REPO / "engine").as_posix() for p in sorted((REPO / "engine").rglob("*.py"))
                 if "user_version" in p.read_text(encoding="utf-8").lower()]
    assert versioned == ["storage/store.py"]


# -- rebuilt ------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", [SCHEMA_VERSION - 1, SCHEMA_VERSION + 1], ids=["older", "newer"])
def test_a_database_of_another_schema_version_is_rebuilt_and_derived_again(vault, version):
    a, b, mark = rebuild_checks(vault)
    with closing(sqlite3.connect(db_path(vault))) as db:  # rows that must not be trusted
        db.execute("UPDATE notes SET title = 'stale'")
        db.execute("DELETE FROM links")
        db.execute(f"PRAGMA user_version={version}")
        db.commit()
    assert_derived_again(vault, a, b, mark)


@pytest.mark.parametrize("content", [b"not a database\n" * 300, b"SQLite format 3\x00" + b"\xff" * 4000],
                         ids=["text", "damaged"])
def test_a_file_that_is_not_a_database_is_rebuilt_and_derived_again(vault, content):
    a, b, mark = rebuild_checks(vault)
    db_path(vault).write_bytes(content)
    assert_derived_again(vault, a, b, mark)


# -- the change feed ------------------------------------------------------------------------------
def write(store: Store, kind: str, keys: list[str]) -> None:
    with store.write() as w:
        w.execute("INSERT OR REPLACE INTO meta VALUES ('test', ?)", (",".join(keys),))
        w.changed(kind, keys)


def test_the_change_feed_names_the_keys_written(tmp_path):
    store = Store(tmp_path / DB_FILE)
    assert store.since(None).everything  # never read: everything
    mark = store.mark()
    assert store.since(mark) == Since(mark)
    with store.write() as w:
        w.changed("note", ["a.md", "b.md"])
        w.changed("link", ["a.md"])
        w.changed("note", ["a.md"])
    since = store.since(mark)
    assert not since.everything and since.keys == {"note": {"a.md", "b.md"}, "link": {"a.md"}}
    assert since.of("link") == {"a.md"} and since.of("turn") == set()
    assert since.any("turn", "link") and not since.any("turn", "turn-memories")
    assert since.mark == store.mark() != mark and store.since(since.mark).keys == {}
    with pytest.raises(RuntimeError), store.write() as w:  # a block that raises records nothing
        w.changed("note", ["c.md"])
        raise RuntimeError
    assert store.since(since.mark) == Since(since.mark)
    store.close()


def test_the_change_feed_names_the_notes_and_link_owners_a_vault_write_changed(vault):
    a, b = make_pair(vault)
    mark = vault.store.mark()
    vault.link(a.uri, b.uri, "related_to")
    since = vault.store.since(mark)
    assert since.of("link") == {a.uri, b.uri} and since.of("note") == {a.uri}  # (a's Links block)
    vault.write_note("entity", {"name": "Dana", "kind": "person"})
    assert vault.store.since(since.mark).keys == {"note": {"entities/dana.md"}}


def test_a_mark_of_another_database_means_everything(tmp_path):
    one, other = Store(tmp_path / "one" / DB_FILE), Store(tmp_path / "other" / DB_FILE)
    write(one, "note", ["a.md"])
    write(other, "note", ["a.md"])
    assert one.mark()[1] == other.mark()[1] and one.generation != other.generation
    assert other.since(one.mark()).everything and one.since(one.mark()) == Since(one.mark())
    one.close()
    other.close()


def test_a_reader_fallen_behind_the_feed_sees_everything(tmp_path, monkeypatch):
    monkeypatch.setattr(engine.storage.store, "FEED_KEEP", 8)
    store = Store(tmp_path / DB_FILE)
    mark = store.mark()
    write(store, "note", ["first.md"])
    later = store.mark()
    for i in range(7):
        write(store, "note", [f"n{i}.md"])
    since = store.since(mark)  # eight changes after it: all still in the feed
    assert not since.everything and since.of("note") == {"first.md"} | {f"n{i}.md" for i in range(7)}
    write(store, "link", ["x.md"])
    assert store.since(mark).everything  # the ninth pushed the first out
    assert store.since(later) == Since(store.mark(), keys={"note": {f"n{i}.md" for i in range(7)}, "link": {"x.md"}})
    assert store.row("SELECT count(*) FROM changes")[0] == 8
    store.close()


def test_a_bulk_write_records_everything(tmp_path):
    store = Store(tmp_path / DB_FILE)
    mark = store.mark()
    listed = [f"n{i}.md" for i in range(FEED_KEEP // 2)]
    write(store, "note", listed)
    since = store.since(mark)
    assert not since.everything and since.of("note") == set(listed)
    write(store, "note", [*listed, "one-more.md"])
    assert store.since(since.mark).everything
    assert store.rows("SELECT kind, key FROM changes WHERE seq > ?", (since.mark[1],)) == [("note", EVERYTHING)]
    store.close()


def test_a_sync_of_many_notes_records_everything(vault, monkeypatch):
    monkeypatch.setattr(engine.storage.store, "FEED_KEEP", 8)
    vault.write_note("entity", {"name": "Ana", "kind": "person"})
    text = (vault.root / "entities" / "ana.md").read_text(encoding="utf-8")
    mark = vault.store.mark()
    for name in ("Bo", "Cy", "Di", "Ed", "Flo"):  # written by hand: five rows in one sync
        (vault.root / "entities" / f"{name.lower()}.md").write_text(text.replace("Ana", name), encoding="utf-8")
    assert len(vault.sync().changed) == 5
    assert vault.store.since(mark).everything


def test_a_write_that_cannot_be_made_raises_store_busy_and_try_write_goes_on(tmp_path, caplog):
    store = Store(tmp_path / DB_FILE, timeout=0.05)
    write(store, "note", ["a.md"])
    mark = store.mark()
    with closing(sqlite3.connect(tmp_path / DB_FILE, isolation_level=None)) as other:
        other.execute("BEGIN IMMEDIATE")  # another process in the middle of a write
        with pytest.raises(StoreBusy), store.write() as w:
            w.changed("note", ["b.md"])
        assert store.try_write("the test rows", lambda w: w.changed("note", ["b.md"])) is False
        assert "the test rows not written now" in caplog.text
        assert store.row("SELECT value FROM meta WHERE key = 'test'") == ("a.md",)  # reads go on
        other.execute("COMMIT")
    assert store.since(mark) == Since(mark) and store.generation == mark[0]  # left alone, not rebuilt
    assert store.try_write("the test rows", lambda w: w.changed("note", ["b.md"])) is True
    assert store.since(mark).keys == {"note": {"b.md"}}
    store.close()


# -- read-only vaults ------------------------------------------------------------------------------
@pytest.mark.parametrize("stored", [True, False], ids=["with-a-database", "without"])
def test_a_read_only_vault_writes_nothing(sample, stored):
    if stored:
        use(sample)
    sample.close()
    (sample.root / "entities" / "new-by-hand.md").write_text(  # something the catalog has not seen
        "---\nmemory_type: entity\ncreated_at: '2026-01-01T00:00:00+00:00'\nfields:\n  name: Wilhelmina Ostrander\n"
        "  kind: person\n---\nWilhelmina Ostrander leads the Berth Planner v2 project.\n")
    before = tree(sample.root)
    ro = Vault.open(sample.root, read_only=True)
    assert ro.sync().changed >= {"entities/new-by-hand.md"}
    hits, counts, _recalled = use(ro)
    assert "entities/new-by-hand.md" in hits and counts
    ro.close()
    assert tree(sample.root) == before  # the listing and every byte
    assert databases(sample.root / ".memlink") == ([DB_FILE] if stored else [])


def test_a_read_only_vault_recalls_what_the_vault_recalls(sample):
    recalled = [h.memory_id for h in TurnMemory.for_vault(sample).recall(RECALLED, k=3)]
    sample.close()
    assert recalled
    ro = Vault.open(sample.root, read_only=True)
    assert [h.memory_id for h in TurnMemory.for_vault(ro).recall(RECALLED, k=3)] == recalled
    ro.close()


# -- temp files a killed writer left ----------------------------------------------------------------
def temp_files(vault: Vault) -> tuple[list[Path], list[Path]]:
    """Temp files (a note's, a session file's, the config's): stale ones, as a killed writer
    left them, and young ones, as a live writer's (by mtime, set, never waited for)."""
    now = time.time()
    stale = [vault.root / "entities" / f".ana.md.1a2b3c4d{TMP_SUFFIX}", vault.root / "sessions" / f".s.json.5e6f7a8b{TMP_SUFFIX}",
             vault.root / f".memlink.yaml.0c0c0c0c{TMP_SUFFIX}"]
    young = [vault.root / "entities" / f".bo.md.9d9d9d9d{TMP_SUFFIX}", vault.root / "sessions" / f".t.json.2e2e2e2e{TMP_SUFFIX}"]
    for path, at in [(p, now - STALE_TEMP - 3600) for p in stale] + [(p, now) for p in young]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("half written")
        os.utime(path, (at, at))
    return stale, young


def test_a_sync_removes_stale_temp_files_and_keeps_young_ones(vault):
    vault.write_note("entity", {"name": "Ana", "kind": "person"})
    stale, young = temp_files(vault)
    synced = vault.sync()
    assert [p for p in stale if p.exists()] == [] and all(p.exists() for p in young)
    assert synced.changed == frozenset() and vault.catalog.uris() == ["entities/ana.md"]  # (not notes)


def test_a_dry_run_sync_removes_no_temp_file(vault):
    vault.write_note("entity", {"name": "Ana", "kind": "person"})
    vault.close()
    stale, young = temp_files(vault)
    ro = Vault.open(vault.root, read_only=True)
    ro.sync()
    assert all(p.exists() for p in stale + young)
    ro.close()
