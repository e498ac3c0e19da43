"""Incremental lint and check: after any change, an incremental run finds exactly what a
full run finds, and remakes findings only for the notes the change touched."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from engine.checkmemo import CheckMemo
from engine.checks import CHECKS, CheckContext, run_checks
from engine.lint import lint

TODAY = dt.date(2026, 12, 1)


def _key(findings):
    return sorted((f.check, f.severity, f.uri, f.message, f.other or "", f.code) for f in findings)


def same_as_full(vault):
    """Run incrementally, then whole; both must agree (and check's errors are lint's)."""
    incremental = run_checks(vault, today=TODAY)
    full = run_checks(vault, today=TODAY, full=True)
    assert _key(incremental) == _key(full)
    return incremental


def scope_of_next_run(vault):
    ctx = CheckContext(vault, TODAY)
    return CheckMemo.for_vault(vault).plan(ctx)


def test_every_kind_of_change_gives_the_full_result_and_a_small_scope(sample):
    vault = sample
    same_as_full(vault)
    notes = sorted(e.uri for e in vault.list_notes() if e.memory_type == "entity")
    a, b, c = notes[:3]

    assert scope_of_next_run(vault).scope == set()  # nothing changed: nothing remade

    vault.link(a, b, "related_to", weight=0.2)  # a new link: low weight, both ends
    plan = scope_of_next_run(vault)
    assert plan.scope is not None and {a, b} <= plan.scope and len(plan.scope) < len(notes)
    assert any(f.check == "low_weight" and f.uri == a and f.other == b for f in same_as_full(vault))

    vault.unlink(a, b)
    assert not any(f.check == "low_weight" and f.uri == a and f.other == b for f in same_as_full(vault))

    new = vault.write_note("entity", {"name": "Nobody Links Here", "content": "alone"})
    assert any(f.check == "orphans" and f.uri == new.uri for f in same_as_full(vault))

    vault.link(new.uri, c, "contradicts", description="they disagree")
    found = same_as_full(vault)
    assert not any(f.check == "orphans" and f.uri == new.uri for f in found)
    assert any(f.check == "contradictions" and f.uri == new.uri for f in found)

    # A note edited by hand so that it no longer parses, then deleted by hand: the links
    # into it dangle, and the findings about them are at the other end.
    path = vault.root / c
    path.write_text("no frontmatter any more\n", encoding="utf-8")
    assert any(f.code == "malformed_note" and f.uri == c for f in same_as_full(vault))
    path.unlink()
    assert any(f.code == "dangling_link" and f.uri == new.uri for f in same_as_full(vault))

    vault.delete_note(new.uri)
    same_as_full(vault)


def test_a_sidecar_edited_by_another_tool_makes_the_next_run_full(sample):
    vault = sample
    same_as_full(vault)
    car = next(p for p in vault.root.rglob(".relations.json"))
    entries = json.loads(car.read_text(encoding="utf-8"))
    entries.append({**entries[0], "id": "only-here"})
    car.write_text(json.dumps(entries), encoding="utf-8")
    plan = scope_of_next_run(vault)
    assert plan.scope is None and "by hand" in plan.reason
    assert any("only-here" in f.message and f.code == "one_sided_link" for f in same_as_full(vault))


def test_a_lost_or_damaged_memo_means_one_full_run(sample):
    vault = sample
    before = _key(lint(vault, today=TODAY).findings)
    (vault.state_dir / "checks.sqlite").write_bytes(b"not a database")
    assert _key(lint(vault, today=TODAY).findings) == before
    assert scope_of_next_run(vault).scope == set()


@pytest.mark.parametrize("damage", ["bytes", "checksum", "shape", "gone", "audit"])
def test_a_damaged_record_of_what_the_last_run_saw_means_one_full_run(sample, damage):
    """The catalog stamps the last run saw are a checksummed file beside the memo, the
    notes the audit named a checksummed row: bytes that do not check out, that check out
    but are not what a run writes, or a file that is gone, make the next run full, with
    the same findings."""
    import hashlib
    import marshal
    import sqlite3

    vault = sample
    before = _key(lint(vault, today=TODAY).findings)
    with sqlite3.connect(vault.state_dir / "checks.sqlite") as db:
        digest = db.execute("SELECT value FROM meta WHERE key = 'stamps'").fetchone()[0]
        stamps = vault.state_dir / f"checks.sqlite-stamps-{digest}"
        data = stamps.read_bytes()
        if damage == "bytes":
            stamps.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
        elif damage == "checksum":
            db.execute("UPDATE meta SET value = ? WHERE key = 'stamps'", ("0" * len(digest),))
        elif damage == "shape":
            data = marshal.dumps(["not", "a", "record"])
            digest = hashlib.blake2b(data, digest_size=16).hexdigest()
            (vault.state_dir / f"checks.sqlite-stamps-{digest}").write_bytes(data)
            db.execute("UPDATE meta SET value = ? WHERE key = 'stamps'", (digest,))
        elif damage == "gone":
            stamps.unlink()
        else:
            db.execute("UPDATE seen SET data = ?", (marshal.dumps({"not": "a list"}),))
            db.execute("UPDATE seen SET sum = ?", (hashlib.blake2b(marshal.dumps({"not": "a list"}), digest_size=16).hexdigest(),))
    assert scope_of_next_run(vault).reason == "the memo could not be read"
    assert _key(lint(vault, today=TODAY).findings) == before
    assert scope_of_next_run(vault).scope == set()


def test_the_memo_keeps_only_findings(sample):
    """A row with a severity that is not one is refused by the table itself."""
    import sqlite3

    vault = sample
    run_checks(vault, today=TODAY)
    with sqlite3.connect(vault.state_dir / "checks.sqlite") as db, pytest.raises(sqlite3.IntegrityError):
        db.execute("INSERT INTO findings VALUES ('orphans', 'orphans', 3, 'entities/x.md', 'm', NULL, '', 1)")


def test_a_memo_of_an_older_layout_is_started_again(sample):
    """The third layout kept marshalled lists in a table `found`: such a memo is dropped
    and the run is full, with the same findings."""
    import sqlite3

    vault = sample
    before = _key(run_checks(vault, today=TODAY, full=True))
    memo = vault.state_dir / "checks.sqlite"
    for suffix in ("", "-wal", "-shm"):
        memo.with_name(memo.name + suffix).unlink(missing_ok=True)
    with sqlite3.connect(memo) as db:
        db.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute("CREATE TABLE found(check_name TEXT PRIMARY KEY, sum TEXT NOT NULL, data BLOB NOT NULL)")
        db.execute("INSERT INTO meta VALUES ('seq', '0')")
    assert _key(run_checks(vault, today=TODAY)) == before
    with sqlite3.connect(memo) as db:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "found" not in tables and "findings" in tables
    assert scope_of_next_run(vault).scope == set()


def test_an_incremental_run_rewrites_only_the_rows_about_its_scope(sample):
    """One edit remakes the findings of a few notes; every other row of the memo stays
    as it was (at 100k notes the memo holds ~300k rows)."""
    import sqlite3

    vault = sample
    same_as_full(vault)
    memo = vault.state_dir / "checks.sqlite"

    scoped = {c.name for c in CHECKS if c.scoped}  # (an unscoped check's rows are all written each run)

    def rows():  # a row written again gets a new rowid
        with sqlite3.connect(memo) as db:
            return {(rowid, uri) for rowid, uri, source in db.execute("SELECT rowid, uri, source FROM findings") if source in scoped}

    before = rows()
    notes = sorted(e.uri for e in vault.list_notes() if e.memory_type == "entity")
    vault.link(notes[0], notes[1], "related_to", weight=0.2)  # a low-weight link: a new finding
    scope = scope_of_next_run(vault).scope
    assert scope is not None and notes[0] in scope
    incremental = run_checks(vault, today=TODAY)
    after = rows()
    assert {r for r in before if r[1] not in scope} == {r for r in after if r[1] not in scope}
    assert {r for r in after if r[1] in scope} - before  # the scope's rows are new
    assert any(f.check == "low_weight" and f.uri == notes[0] and f.other == notes[1] for f in incremental)
    assert _key(incremental) == _key(run_checks(vault, today=TODAY, full=True))


@pytest.mark.parametrize("change", ["config", "today"])
def test_what_every_finding_depends_on(sample, change):
    vault = sample
    same_as_full(vault)
    if change == "config":
        cfg = vault.root / "memlink.yaml"
        cfg.write_text(cfg.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
        assert scope_of_next_run(vault).scope is None
    else:  # freshness depends on the day: the memo is of one day, another day runs whole
        later = TODAY + dt.timedelta(days=400)
        plan = CheckMemo.for_vault(vault).plan(CheckContext(vault, later))
        assert plan.scope is None and "day" in plan.reason
        found = run_checks(vault, today=later)
        assert _key(found) == _key(run_checks(vault, today=later, full=True))
        assert sum(f.check == "freshness" for f in found) > sum(f.check == "freshness" for f in run_checks(vault, today=TODAY))
    same_as_full(vault)


def test_an_incremental_run_builds_only_the_catalog_entries_it_looks_at(sample, monkeypatch):
    """Planning and running after one edit reads the entries of the notes in scope (and
    the notes at their links' other ends), not the whole catalog: at 100k notes building
    every entry cost more than the rest of the run."""
    from engine.catalog import CatalogStore
    from engine.lint import write_dashboards

    vault = sample
    write_dashboards(vault, lint(vault, today=TODAY), TODAY)
    note = sorted(e.uri for e in vault.list_notes() if e.memory_type == "entity")[0]
    (vault.root / note).write_text((vault.root / note).read_text(encoding="utf-8") + "\nOne more line.\n", encoding="utf-8")
    vault.close()
    from engine import Vault

    fresh = Vault.open(sample.root)
    built: list[str] = []
    real = CatalogStore.entries
    monkeypatch.setattr(CatalogStore, "entries", lambda self, uris: built.extend(uris) or real(self, uris))
    report = lint(fresh, today=TODAY)
    assert scope_of_next_run(fresh).scope == set()
    assert note in built and len(built) < len(fresh.catalog()) / 2, f"{len(built)} of {len(fresh.catalog())} entries built"
    assert _key(report.findings) == _key(run_checks(fresh, today=TODAY, full=True))


def test_a_read_only_vault_checks_whole_and_writes_no_memo(sample):
    from engine import Vault

    root = sample.root
    sample.close()
    vault = Vault.open(root, read_only=True)
    run_checks(vault, today=TODAY)
    assert not (root / ".memlink" / "checks.sqlite").exists()


def test_the_run_that_builds_the_link_index_leaves_the_next_run_incremental(sample):
    """The first run indexes every folder; that is part of it, not a change for the next."""
    vault = sample
    (vault.state_dir / "links.sqlite").unlink(missing_ok=True)
    vault.close()
    from engine import Vault

    fresh = Vault.open(vault.root)
    run_checks(fresh, today=TODAY)
    plan = scope_of_next_run(fresh)
    assert plan.scope == set(), plan.reason


def test_the_link_index_keeps_change_records_only_until_the_memo_has_seen_them(sample):
    vault = sample
    same_as_full(vault)
    notes = sorted(e.uri for e in vault.list_notes() if e.memory_type == "entity")

    def change_rows() -> int:
        return vault.linkstore._guard(lambda db: db.execute("SELECT COUNT(*) FROM changes").fetchone()[0])

    for other in notes[1:6]:
        vault.link(notes[0], other, "related_to", weight=0.2)
    assert change_rows() >= 10  # both ends of five links, waiting for the next run
    plan = scope_of_next_run(vault)
    assert plan.scope is not None and notes[0] in plan.scope
    found = same_as_full(vault)  # the incremental run saw them: they go
    assert change_rows() == 0
    assert sum(f.check == "low_weight" and f.uri == notes[0] for f in found) >= 5
    vault.unlink(notes[0], notes[1])  # and the next change is seen as before
    assert notes[0] in scope_of_next_run(vault).scope
    assert not any(f.check == "low_weight" and f.uri == notes[0] and f.other == notes[1] for f in same_as_full(vault))


def a_process(vault):
    """The vault as a new `memlink` process opens it (its first sync is a cold one)."""
    from engine import Vault

    vault.close()
    return Vault.open(vault.root)


def linted_then_edited(sample):
    """A process's lint, then an entity note edited by hand: (that vault, the note)."""
    vault = a_process(sample)
    run_checks(vault, today=TODAY)
    note = sorted(e.uri for e in vault.list_notes() if e.memory_type == "entity")[0]
    path = vault.root / note
    path.write_text(path.read_text(encoding="utf-8") + "\nEdited in another editor.\n", encoding="utf-8")
    return vault, note


def test_a_process_whose_sync_starts_from_the_last_runs_catalog_compares_no_stamp(sample):
    """The usual `memlink lint` after an edit: the process's first sync starts from the
    catalog snapshot the last run saw, so the notes that sync changed are the scope."""
    vault, note = linted_then_edited(sample)
    vault = a_process(vault)
    plan = scope_of_next_run(vault)
    assert plan.scope is not None and note in plan.scope and not plan.compared
    compared = a_process(vault)
    compared.sync_catalog()
    compared.synced = lambda catalog: None  # (the same catalog, every stamp compared)
    assert scope_of_next_run(compared).compared and scope_of_next_run(compared).scope == plan.scope
    assert len(plan.scope) < len(vault.list_notes()) // 2
    vault = a_process(vault)
    same_as_full(vault)
    vault = a_process(vault)
    plan = scope_of_next_run(vault)
    assert plan.scope == set() and not plan.compared  # (the full run above left the memo on this catalog)


def test_a_catalog_synced_by_another_process_since_the_last_run_is_compared_stamp_by_stamp(sample):
    vault = a_process(sample)
    before = _key(run_checks(vault, today=TODAY))
    notes = sorted(e.uri for e in vault.list_notes() if e.memory_type == "entity")
    path = vault.root / notes[0]
    path.write_text("no frontmatter any more\n", encoding="utf-8")
    a_process(vault).sync_catalog()  # (a search, say: its snapshot is not the one the memo saw)
    vault = a_process(vault)
    plan = scope_of_next_run(vault)
    assert plan.scope is not None and notes[0] in plan.scope and plan.compared
    found = same_as_full(vault)
    assert any(f.code == "malformed_note" and f.uri == notes[0] for f in found) and _key(found) != before


def test_a_run_planned_before_another_process_saved_is_made_whole_and_leaves_that_memo(sample):
    """Two runs at once (the app's lint pane and `memlink lint`): the one that saves second
    was planned against a memo that is no more. Its rows would sit beside the other run's
    rows of another moment, so it is made whole in memory, and the memo stays the other's."""
    import sqlite3

    from engine.checkmemo import CheckMemo

    vault, _note = linted_then_edited(sample)
    late = a_process(vault)
    ctx = CheckContext(late, TODAY)
    memo = CheckMemo.for_vault(late)
    plan = memo.plan(ctx)
    ctx.scope = plan.scope
    assert plan.scope is not None
    other = a_process(late)
    run_checks(other, today=TODAY)  # saves first
    with sqlite3.connect(vault.state_dir / "checks.sqlite") as db:
        kept = db.execute("SELECT value FROM meta WHERE key = 'run'").fetchone()
    assert memo.save(plan, ctx, {check.name: list(check.run(ctx)) for check in CHECKS}) is None
    with sqlite3.connect(vault.state_dir / "checks.sqlite") as db:
        assert db.execute("SELECT value FROM meta WHERE key = 'run'").fetchone() == kept
    assert _key(run_checks(late, today=TODAY)) == _key(run_checks(late, today=TODAY, full=True))


def test_a_stamps_file_gone_means_one_full_run_and_keeps_the_memo(sample):
    import sqlite3

    vault = a_process(sample)
    before = _key(run_checks(vault, today=TODAY))
    for path in vault.state_dir.glob("checks.sqlite-stamps-*"):
        path.unlink()
    vault = a_process(vault)
    vault.sync_catalog()
    vault.synced = lambda catalog: None  # (the comparison, which reads the file)
    assert scope_of_next_run(vault).reason == "the memo could not be read"
    with sqlite3.connect(vault.state_dir / "checks.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM findings").fetchone()[0] == len(before)  # not discarded
    assert _key(run_checks(vault, today=TODAY)) == before
    assert len(list(vault.state_dir.glob("checks.sqlite-stamps-*"))) == 1


def test_the_record_of_a_sync_belongs_to_the_catalog_it_made(sample):
    """A journal replayed while a run goes on makes the next sync a first one again: its
    record must not describe the catalog the run checked."""
    vault = a_process(sample)
    checked = vault.sync_catalog()
    assert vault.synced(checked) is not None
    vault._catalog = None  # (what a replay does)
    again = vault.sync_catalog()
    assert vault.synced(checked) is None and vault.synced(again) is not None
