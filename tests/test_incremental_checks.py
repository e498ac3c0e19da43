"""Incremental lint and check: after any change, an incremental run finds exactly what a
full run finds, and remakes findings only for the notes the change touched. The memo of
the last run is kept in the vault's store (engine.lint.memo)."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import sqlite3

import pytest

from engine import Vault
from engine.lint.checks import CHECKS, CheckContext
from engine.lint.memo import CheckMemo, check_run
from engine.lint.report import lint, write_dashboards
from engine.model.uris import uri_dir
from engine.storage.catalog import Catalog

TODAY = dt.date(2026, 12, 1)


def _key(findings):
    return sorted((f.check, f.severity, f.uri, f.message, f.other or "", f.code) for f in findings)


def run(vault, *, today=TODAY, full=False):
    """A run's findings, read before any other run."""
    return check_run(vault, today=today, full=full).page()


def same_as_full(vault):
    """Run incrementally, then whole; both must agree."""
    incremental = run(vault)
    assert _key(incremental) == _key(run(vault, full=True))
    return incremental


def scope_of_next_run(vault, today=TODAY):
    """The plan the next run makes (after the sync it starts with)."""
    vault.sync()
    return CheckMemo(vault).plan(CheckContext(vault, today))


def entity_notes(vault) -> list[str]:
    return sorted(e.uri for e in vault.catalog.all("entity"))


def a_process(vault):
    """The vault as a new `memlink` process opens it."""
    vault.close()
    return Vault.open(vault.root)


def test_every_kind_of_change_gives_the_full_result_and_a_small_scope(sample):
    vault = sample
    same_as_full(vault)
    notes = entity_notes(vault)
    a, b, c = notes[:3]

    assert scope_of_next_run(vault).scope == set()  # nothing changed: nothing remade

    vault.link(a, b, "related_to", weight=0.2)  # a new link: low weight, both ends
    plan = scope_of_next_run(vault)
    assert plan.scope is not None and {a, b} <= plan.scope and len(plan.scope) < len(notes)
    assert any(f.check == "low_weight" and f.uri == a and f.other == b for f in same_as_full(vault))

    vault.unlink(a, b)
    assert not any(f.check == "low_weight" and f.uri == a and f.other == b for f in same_as_full(vault))

    new = vault.write_note("entity", {"name": "Nobody Links Here", "content": "alone"})
    assert new.uri in scope_of_next_run(vault).scope
    assert any(f.check == "orphans" and f.uri == new.uri for f in same_as_full(vault))

    vault.link(new.uri, c, "contradicts", description="they disagree")
    found = same_as_full(vault)
    assert not any(f.check == "orphans" and f.uri == new.uri for f in found)
    assert any(f.check == "contradictions" and f.uri == new.uri for f in found)

    # A note edited by hand so that it no longer parses, then deleted by hand: the links
    # into it dangle, and the findings about them are at the other end.
    path = vault.root / c
    path.write_text("no frontmatter any more\n", encoding="utf-8")
    plan = scope_of_next_run(vault)
    assert plan.scope is not None and {c, new.uri} <= plan.scope
    assert any(f.code == "malformed_note" and f.uri == c for f in same_as_full(vault))
    path.unlink()
    assert any(f.code == "dangling_link" and f.uri == new.uri for f in same_as_full(vault))

    vault.delete_note(new.uri)
    same_as_full(vault)
    assert scope_of_next_run(vault).scope == set()


def test_every_link_written_between_two_runs_is_in_the_next_scope(sample):
    vault = sample
    same_as_full(vault)
    notes = entity_notes(vault)
    for other in notes[1:6]:
        vault.link(notes[0], other, "related_to", weight=0.2)
    plan = scope_of_next_run(vault)
    assert plan.scope is not None and set(notes[:6]) <= plan.scope
    found = same_as_full(vault)
    assert sum(f.check == "low_weight" and f.uri == notes[0] for f in found) >= 5
    assert scope_of_next_run(vault).scope == set()  # seen: not in the scope after
    vault.unlink(notes[0], notes[1])  # and the next change is seen as before
    assert {notes[0], notes[1]} <= scope_of_next_run(vault).scope
    assert not any(f.check == "low_weight" and f.uri == notes[0] and f.other == notes[1] for f in same_as_full(vault))


@pytest.mark.parametrize("edit", ["entry added", "twin removed", "unreadable"])
def test_a_sidecar_edited_by_another_tool_gives_the_full_result(sample, edit):
    """A sidecar another tool changed is read again whole, which makes the next run full
    (saying why), and it finds what a full run finds: an entry added (a link with one side), the other side of a link
    removed in another folder (the finding is about the note at the side that stayed),
    a file that cannot be read. The run after that one has nothing to remake."""
    vault = sample
    same_as_full(vault)
    links = vault.links.all()
    if edit == "twin removed":  # a link whose two sides sit in two folders
        link = next(l for l in links if uri_dir(l.from_uri) != uri_dir(l.to_uri))
        car = vault.root / uri_dir(link.to_uri) / ".relations.json"
        entries = [e for e in json.loads(car.read_text(encoding="utf-8"))
                   if not (e["id"] == link.id and e["direction"] == "backlinks")]
        car.write_text(json.dumps(entries), encoding="utf-8")
        about, code, marker = link.from_uri, "one_sided_link", link.id
    else:
        car = vault.root / uri_dir(links[0].from_uri) / ".relations.json"
        entries = json.loads(car.read_text(encoding="utf-8"))
        if edit == "entry added":
            entries.append({**next(e for e in entries if e["direction"] == "links"), "id": "only-here"})
            car.write_text(json.dumps(entries), encoding="utf-8")
            about, code, marker = entries[-1]["from_uri"], "one_sided_link", "only-here"
        else:
            car.write_text("[{not json", encoding="utf-8")
            about, code, marker = car.relative_to(vault.root).as_posix(), "malformed_sidecar", ""
    plan = scope_of_next_run(vault)
    assert plan.scope is None and "sidecar" in plan.reason, plan  # (the twins of its records may have changed too)
    found = same_as_full(vault)
    assert any(f.code == code and f.uri == about and marker in f.message for f in found)
    if edit != "unreadable":
        assert scope_of_next_run(vault).scope == set()


def _drop_memo_rows(vault):
    with vault.store.write() as w:
        w.execute("DELETE FROM findings")
        w.execute("DELETE FROM checked")
        w.execute("DELETE FROM meta WHERE key LIKE 'checks.%'")


@pytest.mark.parametrize("loss", ["rows", "database", "garbage", "version"])
def test_a_lost_memo_means_one_full_run(sample, loss):
    """The memo's rows deleted, the database deleted, a file that is no database or a
    database of another version: the next run is full, with the same findings, and the
    one after it is incremental again."""
    vault = sample
    before = _key(lint(vault, today=TODAY).findings)
    if loss == "rows":
        _drop_memo_rows(vault)
    else:
        vault.close()
        db = vault.state_dir / "index.sqlite"
        if loss == "database":
            db.unlink()
        elif loss == "garbage":
            db.write_bytes(b"not a database " * 100)
        else:
            with sqlite3.connect(db) as conn:
                conn.execute("PRAGMA user_version = 99")
            conn.close()
        vault = Vault.open(vault.root)
    plan = scope_of_next_run(vault)
    assert plan.scope is None and plan.reason == "no memo"
    assert _key(lint(vault, today=TODAY).findings) == before
    assert scope_of_next_run(vault).scope == set()
    assert _key(run(vault)) == before


def test_an_incremental_run_rewrites_only_the_rows_about_its_scope(sample):
    """One edit remakes the findings of a few notes; every other row of the memo stays
    as it was (at 100k notes the memo holds ~300k rows)."""
    vault = sample
    same_as_full(vault)
    scoped = {c.name for c in CHECKS if c.scoped}  # (an unscoped check's rows are all written each run)

    def rows():  # a row written again gets a new rowid
        return {(rowid, uri) for rowid, uri, source in vault.store.rows(
            "SELECT f.rowid, k.key, f.source FROM findings f JOIN keys k ON k.id = f.uri")
                if source in scoped}

    before = rows()
    notes = entity_notes(vault)
    vault.link(notes[0], notes[1], "related_to", weight=0.2)  # a low-weight link: a new finding
    scope = scope_of_next_run(vault).scope
    assert scope is not None and notes[0] in scope
    incremental = run(vault)
    after = rows()
    assert {r for r in before if r[1] not in scope} == {r for r in after if r[1] not in scope}
    assert {r for r in before if r[1] not in scope}  # (there are rows outside it)
    assert {r for r in after if r[1] in scope} - before  # the scope's rows are new
    assert any(f.check == "low_weight" and f.uri == notes[0] and f.other == notes[1] for f in incremental)
    assert _key(incremental) == _key(run(vault, full=True))


@pytest.mark.parametrize("change", ["config", "today"])
def test_what_every_finding_depends_on(sample, change):
    vault = sample
    same_as_full(vault)
    if change == "config":
        cfg = vault.root / "memlink.yaml"
        cfg.write_text(cfg.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
        plan = scope_of_next_run(vault)
        assert plan.scope is None and "configuration" in plan.reason
    else:  # freshness depends on the day: the memo is of one day, another day runs whole
        later = TODAY + dt.timedelta(days=400)
        plan = scope_of_next_run(vault, later)
        assert plan.scope is None and "day" in plan.reason
        found = run(vault, today=later)
        assert _key(found) == _key(run(vault, today=later, full=True))
        assert sum(f.check == "freshness" for f in found) > sum(f.check == "freshness" for f in run(vault))
    same_as_full(vault)
    assert scope_of_next_run(vault).scope == set()


def _files(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("memo", [False, True])
def test_a_read_only_vault_checks_whole_and_writes_nothing(sample, memo):
    """A dry run (or a vault this user cannot write) runs its checks on a database kept
    in memory: with no memo on disk, or one of an earlier state, it finds what a full
    run finds, and no file changes, not even derived state."""
    root = sample.root
    if memo:  # a memo of an earlier state on disk
        run(sample)
        notes = entity_notes(sample)
        sample.link(notes[0], notes[1], "related_to", weight=0.2)
        sample.close()
    else:
        sample.close()
        shutil.rmtree(root / ".memlink", ignore_errors=True)
    files = _files(root)
    vault = Vault.open(root, read_only=True)
    plan = scope_of_next_run(vault)
    found = run(vault)
    assert _key(run(vault)) == _key(found)  # (again, from the memo it keeps in memory)
    vault.close()
    assert _files(root) == files  # nothing written
    assert _key(found) == _key(run(Vault.open(root), full=True))
    if memo:  # (run on a copy of the memo, in memory)
        assert any(f.check == "low_weight" and f.uri == notes[0] and f.other == notes[1] for f in found)
    else:
        assert plan.scope is None


def test_a_note_edited_between_two_processes_is_in_the_next_scope(sample):
    """The usual `memlink lint` after an edit in another editor: the next process's run
    is incremental, the edited note in its scope, with the full result."""
    vault = a_process(sample)
    run(vault)
    note = entity_notes(vault)[0]
    path = vault.root / note
    path.write_text(path.read_text(encoding="utf-8") + "\nEdited in another editor.\n", encoding="utf-8")
    vault = a_process(vault)
    plan = scope_of_next_run(vault)
    assert plan.scope is not None and note in plan.scope and len(plan.scope) < len(vault.catalog) // 2
    same_as_full(vault)
    assert scope_of_next_run(a_process(vault)).scope == set()


def test_a_catalog_synced_by_another_process_since_the_last_run_still_scopes_its_notes(sample):
    """Another process (a search, say) synced the catalog after the edit and before the
    run: the note is still in the scope (notes are compared with those checked, not with
    what a sync just saw)."""
    vault = a_process(sample)
    before = _key(run(vault))
    note = entity_notes(vault)[0]
    (vault.root / note).write_text("no frontmatter any more\n", encoding="utf-8")
    other = a_process(vault)
    other.sync()
    vault = a_process(other)
    plan = scope_of_next_run(vault)
    assert plan.scope is not None and note in plan.scope
    found = same_as_full(vault)
    assert any(f.code == "malformed_note" and f.uri == note for f in found) and _key(found) != before


def test_a_run_planned_before_another_process_saved_is_made_whole_and_leaves_that_memo(sample):
    """Two runs at once (the app's lint pane and `memlink lint`): the one that saves second
    was planned against a memo that is no more. Its rows would sit beside the other run's
    rows of another moment, so it is made whole in memory, and the memo stays the other's."""
    vault = a_process(sample)
    run(vault)
    note = entity_notes(vault)[0]
    path = vault.root / note
    path.write_text(path.read_text(encoding="utf-8") + "\nEdited in another editor.\n", encoding="utf-8")
    late = a_process(vault)
    late.sync()
    ctx = CheckContext(late, TODAY)
    memo = CheckMemo(late)
    plan = memo.plan(ctx)
    ctx.scope = plan.scope
    assert plan.scope is not None and note in plan.scope
    made = {check.name: list(check.run(ctx)) for check in CHECKS}

    other = Vault.open(late.root)
    whole = _key(run(other, full=True))  # saves first
    kept = other.store.rows("SELECT key, value FROM meta WHERE key LIKE 'checks.%' ORDER BY key")
    rows = other.store.rows("SELECT * FROM findings ORDER BY rowid")
    other.close()

    found = memo.save(plan, ctx, made)
    assert _key(found.page()) == whole  # this run, whole
    assert late.store.rows("SELECT key, value FROM meta WHERE key LIKE 'checks.%' ORDER BY key") == kept
    assert late.store.rows("SELECT * FROM findings ORDER BY rowid") == rows  # the memo is the other run's
    assert _key(run(late)) == whole == _key(run(late, full=True))


def test_an_incremental_run_reads_only_the_catalog_entries_it_looks_at(sample, monkeypatch):
    """Planning and running after one edit reads the entries of the notes in scope (and
    the notes at their links' other ends), not the whole catalog: at 100k notes reading
    every entry cost more than the rest of the run."""
    vault = sample
    write_dashboards(vault, lint(vault, today=TODAY), TODAY)
    note = entity_notes(vault)[0]
    (vault.root / note).write_text((vault.root / note).read_text(encoding="utf-8") + "\nOne more line.\n", encoding="utf-8")
    fresh = a_process(vault)
    read: list[str] = []
    whole: list[str | None] = []
    real_entries, real_all = Catalog.entries, Catalog.all

    def entries(self, uris):
        got = real_entries(self, uris)
        read.extend(got)
        return got

    def every(self, memory_type=None):
        whole.append(memory_type)
        return real_all(self, memory_type)

    monkeypatch.setattr(Catalog, "entries", entries)
    monkeypatch.setattr(Catalog, "all", every)
    report = lint(fresh, today=TODAY)
    found = report.findings
    monkeypatch.undo()
    total = len(fresh.catalog)
    assert whole == [], "the run read every entry"
    assert note in read and len(set(read)) < total / 2, f"{len(set(read))} of {total} entries read"
    assert scope_of_next_run(fresh).scope == set()
    assert _key(found) == _key(run(fresh, full=True))


