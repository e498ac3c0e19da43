"""The link index (engine/storage/linkindex.py) over the sidecar files (engine/storage/sidecars.py): big
sidecars take appended log lines and are compacted; the index in `.memlink/index.sqlite`
follows the files (edits by other tools, other processes, a deleted or corrupt index)
and names in the change feed each note whose records changed; what it reads back is
what the sidecars hold; bad entries are still reported with their place, and a
read-only vault writes nothing (docs/DESIGN.md, "Vault format", "The link index")."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import engine.storage.sidecars as sidecars
from engine import Vault
from engine.graph import LinkGraph, canonical
from engine.lint.memo import check
from engine.model.links import SIDECAR, Sidecar, StoredLink
from engine.model.uris import PathResolver
from engine.storage.linkindex import NO_FILES, LinkIndex
from engine.storage.sidecars import SIDECAR_LOG, PutLink, folder_stamp, folder_text, read_folder, sidecar_rel
from engine.storage.store import DB_FILE, Store

_ROWS = ("SELECT d.key, l.id, l.side, f.key, t.key, l.link_type, l.weight, l.t_field, l.t_line_ranges, "
         "l.match_text, l.description, l.created_at, l.legacy FROM links l JOIN keys d ON d.id = l.folder "
         "JOIN keys f ON f.id = l.from_id JOIN keys t ON t.id = l.to_id")


# -- what the index holds, and what a fresh one read from the files would ---------------------------
def link_folders(root: Path) -> set[str]:
    """Every folder of the vault holding a sidecar or a link log ('' is the vault root)."""
    out = set()
    for name in (SIDECAR, SIDECAR_LOG):
        for path in Path(root).rglob(name):
            rel = path.parent.relative_to(root)
            if not any(part.startswith(".") for part in rel.parts):
                out.add(rel.as_posix() if rel.parts else "")
    return out


def indexed(store: Store, folders: set[str] | None = None) -> dict[str, list[tuple]]:
    """The index's rows by folder, as stored (nothing is compared with the files first):
    each folder it knows, its state (broken, set aside) and its records in any order."""
    out: dict[str, list[tuple]] = {}
    for folder, broken, aside in store.rows("SELECT folder, broken, aside FROM folders WHERE stamp != ?", (NO_FILES,)):
        if folders is None or folder in folders:
            kept = json.loads(aside)  # entries set aside: legacy ones and those that do not validate
            out[folder] = [("state", broken, json.dumps([kept.get("legacy", []), kept.get("rejected", [])]))]
    for row in store.rows(_ROWS):
        if folders is None or row[0] in folders:  # (a row of a folder without files is one too many)
            out.setdefault(row[0], []).append(row[1:])
    return {f: sorted(rows, key=repr) for f, rows in out.items()}


def trusted(root: Path, store: Store) -> set[str]:
    """The folders whose files are as the index last saw them (it answers from its rows
    without reading them again)."""
    resolve = PathResolver(root)
    return {f for f, stamp in store.rows("SELECT folder, stamp FROM folders") if stamp == folder_stamp(resolve.folder(f))}


def rebuilt(root: Path) -> dict[str, list[tuple]]:
    """The index a fresh build from the files gives."""
    fresh = LinkIndex(PathResolver(root), Store(None), lambda: None)
    fresh.refresh(sorted(link_folders(root)))
    return indexed(fresh.store)


def assert_in_step(v: Vault) -> None:
    """The vault's index, as it stands, is what a build from the files gives."""
    assert indexed(v.store) == rebuilt(v.root)


# -- fixtures and helpers --------------------------------------------------------------------------------
@pytest.fixture
def small_log_mode(monkeypatch):
    """Sidecars over 600 bytes take appends; no compaction unless a test asks for it."""
    monkeypatch.setattr(sidecars, "LOG_MODE_BYTES", 600)
    monkeypatch.setattr(sidecars, "COMPACT_RATIO", 100.0)


def people(v: Vault, n: int = 8) -> list[str]:
    return [v.write_note("entity", {"name": f"Person {i}", "kind": "person", "content": "one\ntwo"}).uri for i in range(n)]


def log_lines(v: Vault, folder: str) -> list[bytes]:
    return (v.root / folder / SIDECAR_LOG).read_bytes().splitlines()


def errors(v: Vault) -> list:
    return [f for f in check(v) if f.severity == "error"]


def db(v: Vault) -> Path:
    return v.root / ".memlink" / DB_FILE


def remove_db(v: Vault) -> None:
    for suffix in ("", "-journal"):
        Path(f"{db(v)}{suffix}").unlink(missing_ok=True)


def records(v: Vault, folder: str) -> list[str]:
    """A folder's records as the index reads them, comparable across writes."""
    return sorted(l.model_dump_json() for l in v.links.folder(folder).links)


# -- log mode --------------------------------------------------------------------------------------------
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
    assert {l.to_uri for l in vault.links.of(p[0], "links")} == set(p[2:6])
    assert [l.id for l in vault.links.of(p[5], "backlinks")] == [added.id]
    assert {l.to_uri for l in vault.links.folder("entities").links if l.direction == "links"} == set(p[2:6])
    again = Vault.open(vault.root)
    remove_db(vault)
    assert {l.to_uri for l in Vault.open(vault.root).links.of(p[0], "links")} == set(p[2:6])
    assert {l.to_uri for l in again.links.of(p[0], "links")} == set(p[2:6])
    assert errors(vault) == []
    assert_in_step(vault)


def test_compaction_folds_the_log_into_the_list(vault, small_log_mode, monkeypatch):
    p = people(vault)
    for other in p[1:5]:
        vault.link(p[0], other, "related_to", weight=0.5)
    vault.link(p[0], p[5], "related_to", weight=0.9)
    assert (vault.root / "entities" / SIDECAR_LOG).exists()
    before = records(vault, "entities")
    monkeypatch.setattr(sidecars, "COMPACT_RATIO", 0.01)
    vault.unlink(p[0], p[2])  # appended, then the log is over 1% of the list: compacted
    assert not (vault.root / "entities" / SIDECAR_LOG).exists()
    rows = json.loads((vault.root / "entities" / SIDECAR).read_text())
    assert len(rows) == 2 * 4 and [r["weight"] for r in rows] == sorted((r["weight"] for r in rows), reverse=True)
    after = records(vault, "entities")
    assert len(after) == len(before) - 2 and set(after) < set(before)
    assert errors(vault) == []
    assert_in_step(vault)


def test_a_folder_that_shrank_folds_its_log_on_the_next_write(vault, small_log_mode, monkeypatch):
    p = people(vault)
    for other in p[1:6]:
        vault.link(p[0], other, "related_to")
    assert (vault.root / "entities" / SIDECAR_LOG).exists()
    monkeypatch.setattr(sidecars, "LOG_MODE_BYTES", 10_000_000)
    vault.link(p[1], p[2], "related_to")
    assert not (vault.root / "entities" / SIDECAR_LOG).exists()
    assert len(json.loads((vault.root / "entities" / SIDECAR).read_text())) == 2 * 6
    assert errors(vault) == []
    assert_in_step(vault)


def test_a_torn_log_line_is_ignored_and_cut_before_the_next_append(vault, small_log_mode):
    p = people(vault)
    for other in p[1:6]:
        vault.link(p[0], other, "related_to")
    log = vault.root / "entities" / SIDECAR_LOG
    whole = log.read_bytes()
    with open(log, "ab") as fh:  # what a writer killed mid-append leaves
        fh.write(b'{"tx": "dead", "ops": [{"op": "remove_link", "id": "x"')
    fresh = Vault.open(vault.root)
    assert {l.to_uri for l in fresh.links.of(p[0], "links")} == set(p[1:6])
    assert errors(fresh) == []
    fresh.link(p[0], p[6], "related_to")
    assert log.read_bytes().startswith(whole) and b"dead" not in log.read_bytes()
    assert all(json.loads(line) for line in log_lines(fresh, "entities"))
    assert {l.to_uri for l in fresh.links.of(p[0], "links")} == set(p[1:7])
    assert_in_step(fresh)


def test_a_replayed_journal_appends_its_log_line_once(vault, small_log_mode):
    from engine.storage.journal import apply_ops

    p = people(vault)
    for other in p[1:6]:
        vault.link(p[0], other, "related_to")
    link = vault.links.of(p[0], "links")[0].model_copy(update={"description": "replayed"})
    ops = [PutLink(folder="entities", link=link), PutLink(folder="entities", link=link.as_direction("backlinks"))]
    n = len(log_lines(vault, "entities"))
    apply_ops(vault.root, ops, vault.links, "journal-1")
    apply_ops(vault.root, ops, vault.links, "journal-1")  # a replay after a kill that followed the append
    assert len(log_lines(vault, "entities")) == n + 1
    assert [l.description for l in vault.links.of(p[0], "links") if l.id == link.id] == ["replayed"]
    assert [l.description for l in vault.links.of(link.to_uri, "backlinks") if l.id == link.id] == ["replayed"]
    assert_in_step(vault)


# -- the index follows the files -------------------------------------------------------------------------
def test_another_tools_edit_of_a_sidecar_is_picked_up(vault):
    p = people(vault, 3)
    vault.link(p[0], p[1], "related_to", description="before")
    assert vault.links.of(p[0], "links")[0].description == "before"  # indexed
    path = vault.root / "entities" / SIDECAR
    rows = json.loads(path.read_text())
    for row in rows:
        row["description"] = "edited in another editor"
    path.write_text(json.dumps(rows, indent=2))  # not our format, and no rename
    assert vault.links.of(p[0], "links")[0].description == "edited in another editor"
    assert vault.links.of(p[1], "backlinks")[0].description == "edited in another editor"
    assert_in_step(vault)


def test_a_write_by_another_vault_object_is_seen_without_reopening(vault, small_log_mode):
    p = people(vault)
    app = Vault.open(vault.root)  # the app and a CLI process, each with its own vault object
    assert app.links.of(p[0]) == []
    graph = LinkGraph.for_vault(app)
    assert graph.out_edges(p[0]) == ()
    for other in p[1:7]:
        vault.link(p[0], other, "related_to")
    assert {l.to_uri for l in app.links.of(p[0], "links")} == set(p[1:7])
    # what app keeps from the links (its graph) follows too
    assert {e.to_uri for e in LinkGraph.for_vault(app).out_edges(p[0])} == set(p[1:7])
    vault.unlink(p[0], p[1])
    assert {e.to_uri for e in LinkGraph.for_vault(app).out_edges(p[0])} == set(p[2:7])


def test_a_deleted_or_corrupt_index_is_rebuilt(vault):
    p = people(vault, 3)
    vault.link(p[0], p[1], "related_to")
    vault.close()
    remove_db(vault)
    fresh = Vault.open(vault.root)
    assert [l.to_uri for l in fresh.links.of(p[0], "links")] == [p[1]]
    assert db(vault).exists()
    fresh.close()
    db(vault).write_bytes(b"this is not a database" * 100)
    Path(f"{db(vault)}-journal").unlink(missing_ok=True)
    broken = Vault.open(vault.root)
    assert [l.to_uri for l in broken.links.of(p[0], "links")] == [p[1]]
    broken.link(p[1], p[2], "related_to")
    assert errors(broken) == []
    assert_in_step(broken)
    assert [p.name for p in (vault.root / ".memlink").glob("*.sqlite*")] == [DB_FILE]


# -- bad entries -------------------------------------------------------------------------------------------
def test_bad_entries_in_a_log_mode_folder_are_reported_with_their_place(vault, small_log_mode):
    from engine.lint.report import fix

    p = people(vault)
    for other in p[1:6]:
        vault.link(p[0], other, "related_to")
    rows = read_folder(vault.root, vault.root / "entities", "entities").rows  # the list with the log applied
    bad = dict(rows[0], id="link_evil", from_uri="../../etc/passwd")
    with open(vault.root / "entities" / SIDECAR_LOG, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"tx": "by hand", "ops": [{"op": "put_link", "link": bad}]}) + "\n")
    found = [f for f in check(Vault.open(vault.root)) if f.code == "malformed_sidecar"]
    assert len(found) == 1 and found[0].uri == f"entities/{SIDECAR}"
    assert f"entry {len(rows)} (link_evil)" in found[0].message and "contains '..'" in found[0].message
    assert all("etc/passwd" not in l.from_uri for l in vault.links.all())
    with pytest.raises(Exception, match="link_evil"):
        vault.link(p[0], p[7], "related_to")  # a write would keep it: refused until moved aside
    assert any("moved 1 bad entry" in line for line in fix(vault))
    assert not (vault.root / "entities" / SIDECAR_LOG).exists()  # folded into the cleaned list
    assert errors(vault) == [] and len(vault.links.of(p[0], "links")) == 5
    assert_in_step(vault)


def test_a_log_line_that_is_not_a_record_makes_the_folder_unreadable_not_the_vault(vault, small_log_mode):
    p = people(vault)
    for other in p[1:6]:
        vault.link(p[0], other, "related_to")
    event = vault.write_note("event", {"event_name": "Sea trip", "date": "2026-09-01", "content": "x"}).uri
    vault.link(event, p[0], "related_to")
    with open(vault.root / "entities" / SIDECAR_LOG, "a", encoding="utf-8") as fh:
        fh.write("garbage\n")
    fresh = Vault.open(vault.root)
    assert fresh.links.of(p[0]) == []  # its links are unreadable; nothing raises
    assert [l.to_uri for l in fresh.links.of(event, "links")] == [p[0]]  # other folders read on
    found = [f for f in check(fresh) if f.code == "malformed_sidecar"]
    assert len(found) == 1 and "line" in found[0].message
    assert fresh.links.folder("entities").broken is not None


# -- the change feed -----------------------------------------------------------------------------------------
def test_the_change_feed_names_each_note_whose_records_were_written_or_removed(vault):
    p = people(vault, 3)
    store = vault.store
    start = store.mark()
    vault.link(p[0], p[1], "related_to")
    got = store.since(start)
    assert not got.everything and got.of("link") == {p[0], p[1]}
    mid = got.mark
    vault.unlink(p[0], p[1])
    assert store.since(mid).of("link") == {p[0], p[1]}
    assert store.since(store.mark()).of("link") == set()
    vault.link(p[1], p[2], "related_to")
    later = store.mark()
    path = vault.root / "entities" / SIDECAR
    path.write_text(path.read_text().replace('"weight": 1.0', '"weight": 0.5'))
    vault.links.of(p[0])  # the edit is noticed on read: the folder is re-read whole
    assert store.since(later).of("link") == {p[1], p[2]}
    vault.close()
    remove_db(vault)
    fresh = Vault.open(vault.root)
    assert fresh.store.since(later).everything  # a rebuilt index: start over
    assert fresh.store.generation != later[0]


# -- read-only ------------------------------------------------------------------------------------------------
def test_a_read_only_vault_reads_links_and_writes_nothing(vault, small_log_mode):
    p = people(vault)
    for other in p[1:7]:
        vault.link(p[0], other, "related_to")
    assert (vault.root / "entities" / SIDECAR_LOG).exists()
    vault.close()
    remove_db(vault)

    def tree() -> dict[str, tuple[int, int]]:
        return {str(q.relative_to(vault.root)): (q.stat().st_size, q.stat().st_mtime_ns)
                for q in vault.root.rglob("*") if q.is_file()}

    before = tree()
    ro = Vault.open(vault.root, read_only=True)
    assert {l.to_uri for l in ro.links.of(p[0], "links")} == set(p[1:7])
    assert len(list(ro.links.all())) == 6 and errors(ro) == []
    assert tree() == before and not db(vault).exists()


# -- review and undo -------------------------------------------------------------------------------------------
def test_review_and_undo_in_a_log_mode_folder_put_every_record_back(vault, small_log_mode):
    from engine.review.actions import review, undo

    p = people(vault)
    for other in p[2:7]:
        vault.link(p[0], other, "related_to")
    vault.link(p[0], p[1], "contradicts", weight=0.8, description="they disagree")
    assert (vault.root / "entities" / SIDECAR_LOG).exists()
    sides = records(vault, "entities")
    review(vault, p[0], p[1], "dismiss")
    assert [l.link_type.value for l in vault.links.of(p[0], "links") if l.to_uri == p[1]] == ["related_to"]
    undo(vault)
    assert records(vault, "entities") == sides
    assert errors(vault) == []
    assert_in_step(vault)


def test_the_review_log_holds_link_records_not_whole_sidecars(vault):
    from engine.review.actions import ACTION_LOG, review

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


# -- what the index reads back is what the sidecars hold -------------------------------------------------------------
def held(v: Vault) -> dict[str, list[StoredLink]]:
    """Each owner's records as the sidecar files hold them (list and log), parsed by the
    link model: a note's links and backlinks, a folder's legacy folder-level entries."""
    out: dict[str, list[StoredLink]] = {}
    for folder in link_folders(v.root):
        text = folder_text(v.root, v.resolve.folder(folder), folder) or "[]"
        for link in Sidecar.parse(text, sidecar_rel(folder), folder).all_links(folder):
            owner = link.from_uri if link.direction == "links" else link.to_uri
            out.setdefault(owner, []).append(link)
    return out


def assert_reads_back(v: Vault) -> None:
    """``links.of`` and ``links.all`` give what the sidecars hold: every field, of the same
    types, the legacy flag too."""
    want = held(v)
    assert want
    got = v.links.of_many(want)
    for owner, links in want.items():
        def key(l: StoredLink) -> tuple:
            return l.direction, l.id, l.to_uri

        mine = sorted(got[owner], key=key)
        assert mine == sorted(links, key=key), owner
        assert [(l.model_dump(mode="json"), l.legacy, type(l.weight)) for l in mine] == \
            [(l.model_dump(mode="json"), l.legacy, type(l.weight)) for l in sorted(links, key=key)], owner
    every = sorted((l.model_dump_json(), l.legacy) for ls in want.values() for l in ls if l.direction == "links")
    assert sorted((l.model_dump_json(), l.legacy) for l in v.links.all()) == every


def test_what_is_written_reads_back_as_the_sidecar_holds_it(vault, small_log_mode):
    p = people(vault, 4)
    event = vault.write_note("event", {"event_name": "Sea trip", "date": "2026-09-01", "content": "Sailed.\nSwam.\nSlept."}).uri
    vault.link(p[0], p[1], "related_to", weight=0.35, t_line_ranges="2", match_text="one",
               description="collègues — « depuis 2019 »\nsecond line", created_at="2026-01-02T03:04:05+00:00")
    vault.link(p[1], event, "caused_by", weight=1.0, t_field="content", t_line_ranges="1-2,3")
    vault.link(event, p[2], "belongs_to", weight=0.0)
    vault.link(p[3], p[0], "contradicts", weight=0.5, description="")
    assert_reads_back(vault)  # rows written by this process as it wrote the files
    vault.close()
    remove_db(vault)
    assert_reads_back(Vault.open(vault.root))  # rows built from the files


def test_legacy_entries_and_entries_with_defaults_left_out_read_back_as_the_sidecar_holds_them(vault):
    p = people(vault, 4)
    vault.link(p[2], p[3], "related_to")
    path = vault.root / "entities" / SIDECAR
    rows = json.loads(path.read_text())
    by_hand = {"id": "link_byhand", "from_uri": p[0], "to_uri": p[1], "link_type": "belongs_to", "weight": 1,
               "created_at": "2025-05-05"}  # another tool: optional keys left out, an integer weight
    odd = {"id": "link_odd", "from_uri": f"./{p[1]}", "to_uri": p[3], "link_type": "caused_by", "weight": 0.25,
           "t_line_ranges": "2, 1", "match_text": None, "created_at": "2025-05-06"}  # paths and ranges not as memlink writes them
    rows += [dict(by_hand, direction="links"), dict(by_hand, direction="backlinks"),
             dict(odd, direction="links"), dict(odd, direction="backlinks"),
             {"uris": [p[1], p[2]], "reason": "old style", "from_uri": p[0], "id": "legacy_a"},
             {"uris": [p[3]], "reason": "the folder's own"}]
    path.write_text(json.dumps(rows, indent=1, ensure_ascii=False))
    assert_reads_back(vault)
    mine = vault.links.of(p[0], "links")
    got = {l.id: l for l in mine if not l.legacy}
    assert got["link_byhand"].t_field == "content" and got["link_byhand"].description == ""
    assert got["link_byhand"].weight == 1.0 and isinstance(got["link_byhand"].weight, float)
    assert got["link_byhand"].t_line_ranges is None and got["link_byhand"].match_text is None
    assert sorted(l.to_uri for l in mine if l.legacy) == [p[1], p[2]]
    assert all(l.link_type.value == "related_to" and l.description == "old style" for l in mine if l.legacy)
    odd_read = [l for l in vault.links.of(p[3], "backlinks") if l.id == "link_odd"]
    canonical_ranges = StoredLink.model_validate(dict(odd, direction="backlinks")).t_line_ranges
    assert canonical_ranges != odd["t_line_ranges"]
    assert [(l.from_uri, l.t_line_ranges) for l in odd_read] == [(p[1], canonical_ranges)]
    assert [l.to_uri for l in vault.links.of("entities", "links")] == [p[3]]  # the folder-level entry
    vault.close()
    remove_db(vault)
    assert_reads_back(Vault.open(vault.root))


# -- edges for a walk ---------------------------------------------------------------------------------------------------
def test_the_edges_a_walk_reads_are_those_of_the_whole_graph(vault):
    p = people(vault, 5)
    srcs = [vault.write_note("source", {"title": f"Page {i}", "content": "text"}).uri for i in range(3)]
    event = vault.write_note("event", {"event_name": "Sea trip", "date": "2026-09-01", "content": "x"}).uri
    for i, s in enumerate(srcs):
        for e in p[: 3 + i]:
            vault.link(s, e, "derived_from", weight=round(0.3 + 0.1 * i, 2), description=f"from page {i}")
    vault.link(p[0], p[1], "related_to", weight=0.9)
    vault.link(p[0], p[1], "caused_by", t_line_ranges="1", weight=0.4)  # a second link between the same pair
    vault.link(event, p[0], "belongs_to")
    vault.link(p[4], event, "contradicts", weight=0.6)
    gone = vault.write_note("entity", {"name": "Gone", "kind": "person", "content": "x"}).uri
    vault.link(p[2], gone, "related_to")
    vault.path(gone).unlink()  # deleted by hand: a link to a note that is not there
    path = vault.root / "entities" / SIDECAR
    rows = json.loads(path.read_text())
    unknown = {"id": "link_unknown", "from_uri": p[3], "to_uri": p[4], "link_type": "mentored_by", "weight": 1.0,
               "created_at": "2025-01-01"}
    rows += [dict(unknown, direction="links"), dict(unknown, direction="backlinks")]  # a type nobody declared
    path.write_text(json.dumps(rows))
    vault.sync()

    notes = set(vault.catalog.uris())
    graph = LinkGraph.build(vault)
    edges = vault.links.edges(sorted(notes))
    assert set(edges) == notes
    for uri in sorted(notes):
        out, inc = edges[uri]
        assert canonical([e for e in out if e.to_uri in notes], "to_uri") == list(graph.out_edges(uri)), uri
        assert canonical([e for e in inc if e.from_uri in notes], "from_uri") == list(graph.in_edges(uri)), uri
    assert sum(len(graph.out_edges(u)) for u in notes) == 3 + 4 + 5 + 2 + 2
    assert not any(e.id == "link_unknown" for u in notes for e in graph.out_edges(u))


def test_the_edges_a_walk_reads_include_a_legacy_entrys_target(vault):
    p = people(vault, 3)
    path = vault.root / "entities" / SIDECAR
    path.write_text(json.dumps([{"uris": [p[1], p[2]], "reason": "old style", "from_uri": p[0]}]))
    vault.sync()
    graph = LinkGraph.build(vault)
    edges = vault.links.edges(p)
    for uri in p:
        out, inc = edges[uri]
        assert canonical(out, "to_uri") == list(graph.out_edges(uri)), uri
        assert canonical(inc, "from_uri") == list(graph.in_edges(uri)), uri


def test_a_walks_edges_follow_writes_here_in_another_vault_object_and_by_hand(vault, small_log_mode):
    """What a walk reads (``links.edges``) is what an index built from the files now
    gives, after a write by this vault object, by another one (another process) and a
    hand edit, with nothing reopened."""
    p = people(vault, 6)
    srcs = [vault.write_note("source", {"title": f"Page {i}", "content": "text"}).uri for i in range(2)]
    notes = p + srcs
    vault.link(srcs[0], p[0], "derived_from")

    def from_files() -> dict:
        fresh = LinkIndex(PathResolver(vault.root), Store(None), lambda: None)
        return fresh.edges(notes)

    def in_step() -> bool:
        """The edges are the files' and each note's link count is the records it holds."""
        edges, held = vault.links.edges(notes), {u: len(vault.links.of(u)) for u in notes}
        far: dict[str, int] = {}
        vault.links.edges(notes, far_counts=far)
        return edges == from_files() and vault.links.counts(notes) == held and far == {u: held[u] for u in far}

    assert in_step()
    vault.link(p[0], p[1], "related_to", description="mine")  # this vault object
    assert in_step()
    other = Vault.open(vault.root)  # another process
    other.link(p[2], srcs[1], "caused_by")
    other.link(srcs[1], p[3], "derived_from")
    assert in_step()
    path = vault.root / "entities" / SIDECAR
    rows = json.loads(folder_text(vault.root, vault.root / "entities", "entities"))
    rows[0]["weight"] = 0.25
    path.write_text(json.dumps(rows, indent=2))  # by hand: the list rewritten, its log left as it is
    assert in_step()
    other.unlink(p[0], p[1])
    assert in_step()
    path.write_text("[]")  # by hand: every record of the folder gone
    assert in_step()
    assert any(vault.links.counts(notes).values())


def test_link_counts_follow_writes_another_tools_edit_and_a_rebuilt_index(vault):
    p = people(vault, 4)
    vault.link(p[0], p[1], "related_to")
    assert vault.links.stats()[:2] == (1, {"related_to": 1})
    vault.link(p[1], p[2], "caused_by")
    assert vault.links.stats()[:2] == (2, {"related_to": 1, "caused_by": 1})
    path = vault.root / "entities" / SIDECAR
    rows = [r for r in json.loads(path.read_text()) if r["link_type"] != "caused_by"]
    path.write_text(json.dumps(rows, indent=2))
    vault.links.refresh()  # (counts are as indexed: a reader brings the folders in step first)
    assert vault.links.stats()[:2] == (1, {"related_to": 1})
    vault.close()
    remove_db(vault)
    other = Vault.open(vault.root)
    other.link(p[2], p[3], "caused_by")
    other.links.refresh()
    count, types, degree = other.links.stats(top=2)
    assert (count, types) == (2, {"related_to": 1, "caused_by": 1})
    assert degree == [(p[0], 1), (p[1], 1)]  # records a note holds, most first, then by name


def test_one_unit_of_work_of_puts_and_removals_leaves_the_index_a_build_from_the_files_gives(vault):
    from engine.storage.writes import put_ops, remove_ops

    p = people(vault, 4)
    first = vault.link(p[0], p[1], "related_to", weight=0.5)
    gone = vault.link(p[2], p[3], "caused_by")
    again = first.model_copy(update={"weight": 0.9})  # the same id put twice: the last stays
    same_key = first.model_copy(update={"id": "link_same_key", "description": "replaces it by key"})
    ranged = first.model_copy(update={"id": "link_ranged", "t_line_ranges": "1"})
    with vault.transaction() as tx:
        tx.link_ops([*put_ops(again), *put_ops(ranged), *remove_ops(gone), *put_ops(same_key), *put_ops(ranged)])
    assert_in_step(vault)
    assert {(l.id, l.weight) for l in vault.links.of(p[0], "links")} == {("link_same_key", 0.5), ("link_ranged", 0.5)}
    assert vault.links.of(p[2]) == []


def test_a_sidecar_rewrite_keeps_the_line_of_every_entry_it_leaves_alone(vault):
    p = people(vault, 4)
    vault.link(p[0], p[1], "related_to")
    vault.link(p[1], p[2], "related_to")
    path = vault.root / "entities" / SIDECAR
    lines = path.read_text(encoding="utf-8").split("\n")
    # Entries written compactly by hand, or by another tool: still one a line.
    body = [json.dumps(json.loads(l.rstrip(",")), separators=(",", ":")) for l in lines[1:-2]]
    path.write_text("[\n" + ",\n".join(body) + "\n]\n", encoding="utf-8")
    vault.link(p[2], p[3], "related_to")
    after = [l.rstrip(",") for l in path.read_text(encoding="utf-8").split("\n")[1:-2]]
    assert set(body) <= set(after) and len(after) == len(body) + 2  # each untouched entry byte for byte
    assert_in_step(vault)


def test_a_link_put_then_put_again_under_another_key_or_removed_leaves_the_index_as_the_file(vault):
    """A unit of work that puts a link under a new id over an existing one (the same key),
    then corrects its line ranges — or removes it again: the record it replaced goes from
    the index as from the file."""
    from engine.storage.linkindex import home
    from engine.storage.sidecars import RemoveLink

    p = people(vault, 3)
    vault.link(p[0], p[1], "related_to")
    old = vault.links.of(p[0], "links")[0]
    moved = old.model_copy(update={"id": "a" * 12})
    with vault.transaction() as tx:
        tx.link_ops([PutLink(folder=home(p[0]), link=moved),
                     PutLink(folder=home(p[0]), link=moved.model_copy(update={"t_line_ranges": "1"}))])
    assert_in_step(vault)
    assert [(l.id, l.t_line_ranges) for l in vault.links.of(p[0], "links")] == [("a" * 12, "1")]
    vault.link(p[0], p[2], "related_to")
    again = next(l for l in vault.links.of(p[0], "links") if l.to_uri == p[2]).model_copy(update={"id": "b" * 12})
    with vault.transaction() as tx:
        tx.link_ops([PutLink(folder=home(p[0]), link=again)])
        tx.link_ops([RemoveLink(folder=home(p[0]), id=again.id, direction="links")])
    assert_in_step(vault)
    assert p[2] not in {l.to_uri for l in vault.links.of(p[0], "links")}


def test_a_hand_formatted_sidecar_is_rewritten_whole(vault):
    """A sidecar another tool formatted (two entries on a line, an entry over two lines)
    is valid JSON but not one entry a line: a write encodes it again rather than keep
    lines that are not its entries."""
    p = people(vault, 4)
    vault.link(p[0], p[1], "related_to")
    vault.link(p[0], p[2], "related_to")
    side = vault.root / "entities" / SIDECAR
    enc = [json.dumps(r, ensure_ascii=False) for r in json.loads(side.read_text(encoding="utf-8"))]
    legacy = json.dumps({"uris": [p[3]], "from_uri": p[0], "reason": "old", "seen": [{}, {}]}).replace("[{}, {}]", "[{},\n{}]")
    side.write_text("[\n" + enc[0] + ", " + enc[1] + ",\n" + ",\n".join(enc[2:]) + ",\n" + legacy + "\n]\n", encoding="utf-8")
    vault.link(p[1], p[2], "related_to")
    rows = json.loads(side.read_text(encoding="utf-8"))
    assert {(r.get("from_uri"), r.get("to_uri")) for r in rows} >= {(p[1], p[2]), (p[0], p[1]), (p[0], p[2])}
    assert any(r.get("reason") == "old" and r.get("seen") == [{}, {}] for r in rows)
    assert_in_step(vault)
