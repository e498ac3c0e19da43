"""The link store (engine/linkstore.py): big sidecars take appended log lines and are
compacted, the index in `.memlink/links.sqlite` follows the files (edits by other tools,
other processes, a deleted or corrupt index), bad entries are still reported with their
place, and a read-only vault writes nothing (docs/DESIGN.md, "Vault format")."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import engine.linkstore as linkstore
from engine import Vault
from engine.links import SIDECAR
from engine.linkstore import SIDECAR_LOG, LinkStore


@pytest.fixture
def small_log_mode(monkeypatch):
    """Sidecars over 600 bytes take appends; no compaction unless a test asks for it."""
    monkeypatch.setattr(linkstore, "LOG_MODE_BYTES", 600)
    monkeypatch.setattr(linkstore, "COMPACT_RATIO", 100.0)


def people(v: Vault, n: int = 8) -> list[str]:
    return [v.write_note("entity", {"name": f"Person {i}", "kind": "person", "content": "one\ntwo"}).uri for i in range(n)]


def rebuilt(v: Vault) -> dict:
    """The index a fresh rebuild from the files gives."""
    fresh = LinkStore(v.root, v.resolve, None)
    fresh.refresh()
    return fresh.indexed_rows()


def log_lines(v: Vault, folder: str) -> list[bytes]:
    return (v.root / folder / SIDECAR_LOG).read_bytes().splitlines()


def errors(v: Vault) -> list:
    return [f for f in v.check() if f.severity == "error"]


def test_a_big_folder_takes_log_lines_and_reads_them(vault, small_log_mode):
    p = people(vault)
    for other in p[1:3]:
        vault.link(p[0], other, "related_to", weight=0.5)
    base = vault.root / "entities" / SIDECAR
    assert base.stat().st_size > 600 and not (vault.root / "entities" / SIDECAR_LOG).exists()
    text = base.read_bytes()
    vault.link(p[0], p[3], "related_to", weight=0.5)
    vault.link(p[0], p[4], "related_to", weight=0.5)
    added = vault.link(p[0], p[5], "belongs_to", weight=0.7)
    vault.unlink(p[0], p[1])
    assert base.read_bytes() == text  # the list is not rewritten
    lines = [json.loads(line) for line in log_lines(vault, "entities")]
    assert [[op["op"] for op in line["ops"]] for line in lines] == [["put_link"] * 2] * 3 + [["remove_link"] * 2]
    assert len({line["tx"] for line in lines}) == 4  # one line per transaction
    assert {l.to_uri for l in vault.get_file_links(p[0], "links")} == set(p[2:6])
    assert [l.id for l in vault.get_file_links(p[5], "backlinks")] == [added.id]
    assert {l.to_uri for l in vault.relations("entities") if l.direction == "links"} == set(p[2:6])
    again = Vault.open(vault.root)
    (vault.root / ".memlink" / "links.sqlite").unlink()
    assert {l.to_uri for l in Vault.open(vault.root).get_file_links(p[0], "links")} == set(p[2:6])
    assert {l.to_uri for l in again.get_file_links(p[0], "links")} == set(p[2:6])
    assert errors(vault) == [] and vault.linkstore.indexed_rows() == rebuilt(vault)


def test_compaction_folds_the_log_into_the_list(vault, small_log_mode, monkeypatch):
    p = people(vault)
    for other in p[1:5]:
        vault.link(p[0], other, "related_to", weight=0.5)
    vault.link(p[0], p[5], "related_to", weight=0.9)
    assert (vault.root / "entities" / SIDECAR_LOG).exists()
    before = sorted(l.model_dump_json() for l in vault.relations("entities"))
    monkeypatch.setattr(linkstore, "COMPACT_RATIO", 0.01)
    vault.unlink(p[0], p[2])  # appended, then the log is over 1% of the list: compacted
    assert not (vault.root / "entities" / SIDECAR_LOG).exists()
    rows = json.loads((vault.root / "entities" / SIDECAR).read_text())
    assert len(rows) == 2 * 4 and [r["weight"] for r in rows] == sorted((r["weight"] for r in rows), reverse=True)
    after = sorted(l.model_dump_json() for l in vault.relations("entities"))
    assert len(after) == len(before) - 2
    assert errors(vault) == [] and vault.linkstore.indexed_rows() == rebuilt(vault)


def test_a_folder_that_shrank_folds_its_log_on_the_next_write(vault, small_log_mode, monkeypatch):
    p = people(vault)
    for other in p[1:6]:
        vault.link(p[0], other, "related_to")
    assert (vault.root / "entities" / SIDECAR_LOG).exists()
    monkeypatch.setattr(linkstore, "LOG_MODE_BYTES", 10_000_000)
    vault.link(p[1], p[2], "related_to")
    assert not (vault.root / "entities" / SIDECAR_LOG).exists()
    assert len(json.loads((vault.root / "entities" / SIDECAR).read_text())) == 2 * 6
    assert errors(vault) == []


def test_a_torn_log_line_is_ignored_and_cut_before_the_next_append(vault, small_log_mode):
    p = people(vault)
    for other in p[1:6]:
        vault.link(p[0], other, "related_to")
    log = vault.root / "entities" / SIDECAR_LOG
    whole = log.read_bytes()
    with open(log, "ab") as fh:  # what a writer killed mid-append leaves
        fh.write(b'{"tx": "dead", "ops": [{"op": "remove_link", "id": "x"')
    fresh = Vault.open(vault.root)
    assert {l.to_uri for l in fresh.get_file_links(p[0], "links")} == set(p[1:6])
    assert errors(fresh) == []
    fresh.link(p[0], p[6], "related_to")
    assert log.read_bytes().startswith(whole) and b"dead" not in log.read_bytes()
    assert all(json.loads(line) for line in log_lines(fresh, "entities"))
    assert {l.to_uri for l in fresh.get_file_links(p[0], "links")} == set(p[1:7])


def test_a_replayed_journal_appends_its_log_line_once(vault, small_log_mode):
    from engine.journal import apply_ops
    from engine.linkstore import PutLink

    p = people(vault)
    for other in p[1:6]:
        vault.link(p[0], other, "related_to")
    link = vault.get_file_links(p[0], "links")[0].model_copy(update={"description": "replayed"})
    ops = [PutLink(folder="entities", link=link), PutLink(folder="entities", link=link.as_direction("backlinks"))]
    n = len(log_lines(vault, "entities"))
    apply_ops(vault.root, ops, vault.linkstore, "journal-1")
    apply_ops(vault.root, ops, vault.linkstore, "journal-1")  # a replay after a kill that followed the append
    assert len(log_lines(vault, "entities")) == n + 1
    assert [l.description for l in vault.get_file_links(p[0], "links") if l.id == link.id] == ["replayed"]
    assert vault.linkstore.indexed_rows() == rebuilt(vault)


def test_another_tools_edit_of_a_sidecar_is_picked_up(vault):
    p = people(vault, 3)
    vault.link(p[0], p[1], "related_to", description="before")
    assert vault.get_file_links(p[0], "links")[0].description == "before"  # indexed
    path = vault.root / "entities" / SIDECAR
    rows = json.loads(path.read_text())
    for row in rows:
        row["description"] = "edited in another editor"
    path.write_text(json.dumps(rows, indent=2))  # not our format, and no rename
    assert vault.get_file_links(p[0], "links")[0].description == "edited in another editor"
    assert vault.get_file_links(p[1], "backlinks")[0].description == "edited in another editor"
    assert vault.linkstore.indexed_rows() == rebuilt(vault)


def test_a_settled_block_reads_each_folder_as_of_one_moment(vault):
    p = people(vault, 3)
    vault.link(p[0], p[1], "related_to", description="before")
    path = vault.root / "entities" / SIDECAR
    with vault.linkstore.settled():
        assert vault.link_rows(p[0])[0]["description"] == "before"
        rows = json.loads(path.read_text())
        for row in rows:
            row["description"] = "edited in another editor"
        path.write_text(json.dumps(rows, indent=2))
        assert vault.link_rows(p[0])[0]["description"] == "before"  # compared once, at the first read
        with vault.linkstore.settled():  # nested: the same moment
            assert vault.link_rows(p[1])[0]["description"] == "before"
    assert vault.link_rows(p[0])[0]["description"] == "edited in another editor"
    with vault.linkstore.settled():  # a new block sees the files as they are at its first read
        assert vault.link_rows(p[1])[0]["description"] == "edited in another editor"


def test_link_counts_are_kept_until_a_link_changes(vault):
    """stats() is kept by the index's change number: a write, another tool's edit or a
    rebuild counts again; nothing else does."""
    p = people(vault, 4)
    vault.link(p[0], p[1], "related_to")
    store = vault.linkstore
    assert store.stats()[:2] == (1, {"related_to": 1})
    assert store.stats()[:2] == (1, {"related_to": 1})  # kept
    vault.link(p[1], p[2], "caused_by")
    assert store.stats()[:2] == (2, {"related_to": 1, "caused_by": 1})
    path = vault.root / "entities" / SIDECAR
    rows = [r for r in json.loads(path.read_text()) if r["link_type"] != "caused_by"]
    path.write_text(json.dumps(rows, indent=2))
    assert store.stats()[:2] == (1, {"related_to": 1})
    (vault.root / ".memlink" / "links.sqlite").unlink()
    other = Vault.open(vault.root)
    other.link(p[2], p[3], "caused_by")
    assert other.linkstore.stats()[:2] == (2, {"related_to": 1, "caused_by": 1})


def test_a_settled_block_walks_the_folders_once(vault):
    p = people(vault, 2)
    vault.link(p[0], p[1], "related_to")
    store = vault.linkstore
    with store.settled():
        assert store.folders() == ["entities"]
        event = vault.write_note("event", {"event_name": "Sea trip", "date": "2026-09-01", "content": "x"}).uri
        vault.link(event, p[0], "related_to")
        assert store.folders() == ["entities"]  # walked once in the block
    assert store.folders() == sorted(["entities", event.rsplit("/", 1)[0]])


def test_a_write_by_another_vault_object_is_seen_without_reopening(vault, small_log_mode):
    p = people(vault)
    app = Vault.open(vault.root)  # the app and a CLI process, each with its own vault object
    assert app.get_file_links(p[0]) == []
    version = app.links_version
    for other in p[1:7]:
        vault.link(p[0], other, "related_to")
    assert {l.to_uri for l in app.get_file_links(p[0], "links")} == set(p[1:7])
    assert app.links_version != version  # caches keyed on it (the link graph) go stale


def test_a_deleted_or_corrupt_index_is_rebuilt(vault):
    p = people(vault, 3)
    vault.link(p[0], p[1], "related_to")
    db = vault.root / ".memlink" / "links.sqlite"
    vault.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    fresh = Vault.open(vault.root)
    assert [l.to_uri for l in fresh.get_file_links(p[0], "links")] == [p[1]]
    assert db.exists()
    fresh.close()
    db.write_bytes(b"this is not a database" * 100)
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    broken = Vault.open(vault.root)
    assert [l.to_uri for l in broken.get_file_links(p[0], "links")] == [p[1]]
    broken.link(p[1], p[2], "related_to")
    assert errors(broken) == [] and broken.linkstore.indexed_rows() == rebuilt(broken)


def test_a_first_build_of_many_folders_equals_folder_by_folder_and_keeps_its_indexes(vault):
    import sqlite3

    ents = people(vault, 4)
    srcs = [vault.write_note("source", {"title": f"Page {i}", "content": "text"}).uri for i in range(3)]
    for s in srcs:
        for e in ents[:3]:
            vault.link(s, e, "derived_from")
    vault.link(ents[0], ents[3], "related_to")
    vault.close()
    db = vault.root / ".memlink" / "links.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    whole = Vault.open(vault.root)
    whole.linkstore.refresh()  # every folder at once, into an empty table
    by_folder = LinkStore(vault.root, whole.resolve, None)
    for folder in sorted(whole.linkstore.folders()):
        by_folder.refresh([folder])
    assert whole.linkstore.indexed_rows() == by_folder.indexed_rows() != {}
    with sqlite3.connect(db) as raw:
        names = {n for (n,) in raw.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert {"links_owner", "links_folder"} <= names
    assert [l.from_uri for l in whole.get_file_links(ents[0], "backlinks")] == srcs


def test_two_first_builds_at_once_and_a_reader_meanwhile_leave_one_index(vault, monkeypatch):
    """Two processes building an empty index at once (reindex's second process and the
    app, say) and a third reading meanwhile: one copy of every record, each reader on
    the file (not moved into memory), and what a build from the files gives."""
    import threading

    ents = people(vault, 6)
    srcs = [vault.write_note("source", {"title": f"Page {i}", "content": "text"}).uri for i in range(3)]
    for s in srcs:
        for e in ents[:4]:
            vault.link(s, e, "derived_from")
    vault.close()
    db = vault.root / ".memlink" / "links.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    stores = [LinkStore(vault.root, vault.resolve, db) for _ in range(3)]
    first_folder = threading.Event()
    release = threading.Event()
    real = LinkStore._reindex

    def slow(self, conn, folder, *, empty=False):
        real(self, conn, folder, empty=empty)
        if self is stores[0] and empty:  # the first builder holds its transaction here for a while
            first_folder.set()
            release.wait(10)

    monkeypatch.setattr(LinkStore, "_reindex", slow)
    results: dict[str, object] = {}

    def run(name, fn):
        try:
            results[name] = fn()
        except Exception as exc:  # reported below
            results[name] = exc

    builder = threading.Thread(target=run, args=("first", stores[0].refresh))
    builder.start()
    assert first_folder.wait(10)
    others = [threading.Thread(target=run, args=("second", stores[1].refresh)),
              threading.Thread(target=run, args=("reader", lambda: stores[2].rows_of("entities", ents[0])))]
    for t in others:
        t.start()
    threading.Timer(0.5, release.set).start()
    for t in [builder, *others]:
        t.join(30)
    assert not any(isinstance(r, Exception) for r in results.values()), results
    assert all(s.path == db for s in stores)  # nobody fell back to memory
    assert results["second"] == 0  # it found the first build done: nothing left to read
    assert len(results["reader"]) == 3  # Person 0's three backlinks
    monkeypatch.undo()
    assert stores[0].indexed_rows() == rebuilt(Vault.open(vault.root))
    import sqlite3

    with sqlite3.connect(db) as raw:
        assert raw.execute("SELECT count(*) FROM links").fetchone()[0] == \
            raw.execute("SELECT count(*) FROM (SELECT DISTINCT folder, id, direction, owner FROM links)").fetchone()[0]
    for s in stores:
        s.close()


def test_bad_entries_in_a_log_mode_folder_are_reported_with_their_place(vault, small_log_mode):
    p = people(vault)
    for other in p[1:6]:
        vault.link(p[0], other, "related_to")
    rows = vault.linkstore.materialized("entities")  # the list with the log applied
    bad = dict(rows[0], id="link_evil", from_uri="../../etc/passwd")
    with open(vault.root / "entities" / SIDECAR_LOG, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"tx": "by hand", "ops": [{"op": "put_link", "link": bad}]}) + "\n")
    found = [f for f in Vault.open(vault.root).check() if f.code == "malformed_sidecar"]
    assert len(found) == 1 and found[0].uri == f"entities/{SIDECAR}"
    assert f"entry {len(rows)} (link_evil)" in found[0].message and "contains '..'" in found[0].message
    assert all("etc/passwd" not in l.from_uri for l in vault.all_links())
    with pytest.raises(Exception, match="link_evil"):
        vault.link(p[0], p[7], "related_to")  # a write would keep it: refused until moved aside
    from engine.lint import fix

    assert any("moved 1 bad entry" in line for line in fix(vault))
    assert not (vault.root / "entities" / SIDECAR_LOG).exists()  # folded into the cleaned list
    assert errors(vault) == [] and len(vault.get_file_links(p[0], "links")) == 5


def test_a_log_line_that_is_not_a_record_makes_the_folder_unreadable_not_the_vault(vault, small_log_mode):
    p = people(vault)
    for other in p[1:6]:
        vault.link(p[0], other, "related_to")
    with open(vault.root / "entities" / SIDECAR_LOG, "a", encoding="utf-8") as fh:
        fh.write("garbage\n")
    fresh = Vault.open(vault.root)
    assert fresh.get_file_links(p[0]) == []  # its links are unreadable; nothing raises
    found = [f for f in fresh.check() if f.code == "malformed_sidecar"]
    assert len(found) == 1 and "line" in found[0].message


def test_changes_since_names_each_record_written_or_removed(vault):
    p = people(vault, 3)
    store = vault.linkstore
    start = store.seq()
    link = vault.link(p[0], p[1], "related_to")
    got = store.changes_since(start)
    assert not got.everything and got.links == {("entities", link.id, "links"), ("entities", link.id, "backlinks")}
    mid = got.seq
    vault.unlink(p[0], p[1])
    assert store.changes_since(mid).links == {("entities", link.id, "links"), ("entities", link.id, "backlinks")}
    assert store.changes_since(store.seq()).links == set()
    vault.link(p[1], p[2], "related_to")
    later = store.seq()
    path = vault.root / "entities" / SIDECAR
    path.write_text(path.read_text().replace('"weight": 1.0', '"weight": 0.5'))
    vault.get_file_links(p[1])  # the edit is noticed on read: the folder is re-read whole
    assert store.changes_since(later).folders == {"entities"}
    vault.close()
    (vault.root / ".memlink" / "links.sqlite").unlink()
    fresh = Vault.open(vault.root)
    assert fresh.linkstore.changes_since(later).everything  # a rebuilt index: start over
    assert fresh.linkstore.seq() > later


def test_a_read_only_vault_reads_links_and_writes_nothing(vault, small_log_mode):
    p = people(vault)
    for other in p[1:7]:
        vault.link(p[0], other, "related_to")
    vault.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{vault.root / '.memlink' / 'links.sqlite'}{suffix}").unlink(missing_ok=True)

    def tree() -> dict[str, tuple[int, int]]:
        return {str(q.relative_to(vault.root)): (q.stat().st_size, q.stat().st_mtime_ns)
                for q in vault.root.rglob("*") if q.is_file()}

    before = tree()
    ro = Vault.open(vault.root, read_only=True)
    assert {l.to_uri for l in ro.get_file_links(p[0], "links")} == set(p[1:7])
    assert len(list(ro.all_links())) == 6 and errors(ro) == []
    assert tree() == before and not (vault.root / ".memlink" / "links.sqlite").exists()


def test_review_and_undo_in_a_log_mode_folder_put_every_record_back(vault, small_log_mode):
    from engine.review import review, undo

    p = people(vault)
    for other in p[2:7]:
        vault.link(p[0], other, "related_to")
    vault.link(p[0], p[1], "contradicts", weight=0.8, description="they disagree")
    assert (vault.root / "entities" / SIDECAR_LOG).exists()
    sides = sorted(l.model_dump_json() for l in vault.relations("entities"))
    review(vault, p[0], p[1], "dismiss")
    assert [l.link_type.value for l in vault.get_file_links(p[0], "links") if l.to_uri == p[1]] == ["related_to"]
    undo(vault)
    assert sorted(l.model_dump_json() for l in vault.relations("entities")) == sides
    assert errors(vault) == [] and vault.linkstore.indexed_rows() == rebuilt(vault)


def test_the_review_log_holds_link_records_not_whole_sidecars(vault):
    from engine.review import ACTION_LOG, review

    p = people(vault, 40)
    for i in range(1, 40):
        vault.link(p[0], p[i], "related_to")
    vault.link(p[1], p[2], "contradicts")
    review(vault, p[1], p[2], "dismiss")
    record = json.loads((vault.root / ACTION_LOG).read_text().splitlines()[-1])
    assert not any(rel.endswith(SIDECAR) for rel in record["before"])
    assert {(r["direction"], r["before"] is None, r["after"] is None) for r in record["links"]} == {
        ("links", True, False), ("backlinks", True, False), ("links", False, True), ("backlinks", False, True)}
    assert len(json.dumps(record)) < os.path.getsize(vault.root / "entities" / SIDECAR) / 4


def test_a_warm_processs_walks_see_a_hand_edit_once_its_folder_is_compared_again(vault, monkeypatch):
    """A warm process compares a folder with its files at most once a second: a note its
    walks read within that second after a hand edit shows the index's links, and once a
    later read compares the folder again and re-reads it, the walks' view of the links
    (kept across searches) is made again, so that note shows the edit too."""
    monkeypatch.setattr(LinkStore, "WARM_AFTER", 0)
    clock = [100.0]
    monkeypatch.setattr(linkstore, "_clock", lambda: clock[0])
    a, b, c, d = people(vault, 4)
    for src in (a, c, d):
        vault.link(src, b, "related_to", weight=1.0)

    def weights(uri: str) -> list[float]:
        with vault.linkstore.settled():
            return [e.weight for e in vault.services.links.out_edges(uri)]

    assert weights(a) == [1.0]
    path = vault.root / "entities" / SIDECAR
    rows = json.loads(path.read_text())
    for row in rows:
        if row["from_uri"] == c:
            row["weight"] = 0.25
    path.write_text(json.dumps(rows, indent=2))  # by hand
    clock[0] += 0.5
    assert weights(c) == [1.0]  # (the folder was compared half a second ago)
    clock[0] += 0.6
    assert weights(d) == [1.0]  # this read compares the folder again and re-reads it
    assert weights(c) == [0.25] and weights(a) == [1.0]


def test_a_warm_process_walks_from_its_mirror_in_step_with_every_write(vault, small_log_mode, monkeypatch):
    """Once a process has walked (``WARM_AFTER``), a walk reads every note's ends from
    memory, no index lookup; what it reads stays what a fresh index from the files says
    through writes of this process, of another one, edits by hand (within a second:
    ``RECHECK_AFTER``), and change records dropped before the mirror saw them."""
    monkeypatch.setattr(LinkStore, "WARM_AFTER", 1)
    clock = [100.0]  # (stands still unless moved: writes through the index show at once)
    monkeypatch.setattr(linkstore, "_clock", lambda: clock[0])
    p = people(vault, 6)
    srcs = [vault.write_note("source", {"title": f"Page {i}", "content": "text"}).uri for i in range(2)]
    notes = p + srcs
    vault.link(srcs[0], p[0], "derived_from")
    store = vault.linkstore
    asked: list[str] = []
    store._conn().set_trace_callback(asked.append)

    types = ("derived_from", "related_to", "caused_by")

    def walk() -> dict:
        with store.settled():
            ends = {u: sorted(e) for u, e in vault.link_ends_of(notes).items()}
            for name in types:  # (the mirror's links by type follow it)
                ends |= {(u, name): sorted(e) for u, e in vault.link_ends_of_type(notes, name).items()}
            return ends

    def from_files() -> dict:
        fresh = LinkStore(vault.root, vault.resolve, None)
        by_folder: dict[str, list[str]] = {}
        for u in notes:
            by_folder.setdefault(u.rsplit("/", 1)[0], []).append(u)
        ends = {u: sorted(e) for u, e in fresh.ends_of_many(by_folder).items()}
        for name in types:
            ends |= {(u, name): sorted(e for e in got if e[0] == "links" and e[2] == name) for u, got in list(ends.items())
                     if isinstance(u, str)}
        return ends

    assert walk() == from_files()
    asked.clear()
    assert walk() == from_files() and not [q for q in asked if "FROM ends WHERE owner IN" in q]  # from memory
    assert set(store._mirror.typed) == set(types)
    vault.link(p[0], p[1], "related_to", description="mine")  # this process
    assert walk() == from_files()
    other = Vault.open(vault.root)  # another process
    other.link(p[2], srcs[1], "caused_by")
    other.link(srcs[1], p[3], "derived_from")
    assert walk() == from_files()
    path = vault.root / "entities" / SIDECAR
    rows = json.loads(path.read_text())
    rows[0]["weight"] = 0.25
    path.write_text(json.dumps(rows, indent=2))  # by hand
    assert walk() != from_files()  # the folder was compared with its files less than a second ago
    clock[0] += LinkStore.RECHECK_AFTER - 0.01
    assert walk() != from_files()
    clock[0] += 0.01
    assert walk() == from_files()
    other.unlink(p[0], p[1])
    other.linkstore.forget_changes(other.linkstore.seq())  # (the checks' memo saw them first)
    assert walk() == from_files()
    assert any(walk().values())
    # Change records dropped before the mirror saw them, then a later write in the same
    # folder whose records the mirror can follow: the dropped ones are not lost.
    vault.link(p[4], p[5], "related_to")
    vault.linkstore.forget_changes(vault.linkstore.seq())
    vault.link(p[2], p[3], "related_to")
    assert walk() == from_files()
    # Inside one walk: a folder first compared with the index by another read, after
    # another process wrote it, is not answered from a mirror older than that.
    with store.settled():
        vault.link_ends_of([srcs[0]])  # (the mirror is brought up to date for this walk)
        other.link(p[4], p[1], "related_to")
        rows = vault.link_rows_of([p[4]])
        ends = vault.link_ends_of([p[4]])
    assert len(ends[p[4]]) == len(rows[p[4]]) == 2 and p[1] in {e[1] for e in ends[p[4]]}
