"""Every lint check has a fixture that trips it; --fix repairs only what is safe."""

from __future__ import annotations

import datetime as dt
import json

from conftest import make_pair

from engine import Vault
from engine.lint.memo import check
from engine.lint.report import fix, lint, write_dashboards


def findings(vault, check):
    return [f for f in lint(vault, today=dt.date(2026, 12, 1)).findings if f.check == check]


def test_structure(vault):
    (vault.root / "entities" / "bad.md").write_text("no frontmatter\n")
    (vault.root / "entities" / "alien.md").write_text("---\nmemory_type: alien\ncreated_at: '2026-01-01T00:00:00+00:00'\nfields: {}\n---\n")
    msgs = " ".join(f.message for f in findings(vault, "structure"))
    assert "no YAML frontmatter" in msgs and "unknown memory type" in msgs
    assert all(f.severity == "error" for f in findings(vault, "structure"))


def test_link_checks(vault):
    a, b = make_pair(vault)
    vault.link(b.uri, a.uri, "belongs_to", match_text="type hints", t_line_ranges="3")
    vault.write_note("preference", {"topic": "Python code style", "content": "Completely different now."})  # match_text gone
    car = vault.root / "entities" / ".relations.json"
    entries = json.loads(car.read_text())
    entries[0]["t_line_ranges"] = "40"  # out of bounds, on both sides
    car.write_text(json.dumps(entries))
    prefs = vault.root / "preferences" / ".relations.json"
    p_entries = json.loads(prefs.read_text())
    p_entries[0]["t_line_ranges"] = "40"
    p_entries.append({**p_entries[0], "id": "dangling", "to_uri": "entities/ghost.md"})
    prefs.write_text(json.dumps(p_entries))
    codes = " ".join(f.code for f in findings(vault, "links"))  # the code is its own field now
    for code in ("match_text_missing", "bad_line_range", "dangling_link", "one_sided_link"):
        assert code in codes


def test_two_sides_that_differ_are_reported_with_what_differs_and_where(vault):
    a, b = make_pair(vault)
    vault.link(b.uri, a.uri, "belongs_to", description="one")
    car = vault.root / "entities" / ".relations.json"  # (the side in a's folder)
    entries = json.loads(car.read_text())
    entries[0].update(weight=0.2, description="edited by hand")
    car.write_text(json.dumps(entries))
    found = [f for f in findings(vault, "links") if f.code == "mismatched_link"]
    assert len(found) == 1 and "differ in weight, description" in found[0].message
    assert "entities/.relations.json" in found[0].message and "preferences/.relations.json" in found[0].message


def test_self_link_is_reported(vault):
    a, _ = make_pair(vault)
    link = {"id": "self", "from_uri": a.uri, "to_uri": a.uri, "link_type": "related_to", "weight": 1.0,
            "t_field": "content", "created_at": "2026-01-01"}
    (vault.root / "entities" / ".relations.json").write_text(json.dumps([{**link, "direction": "links"}, {**link, "direction": "backlinks"}]))
    assert any("links to itself" in f.message for f in findings(vault, "links"))


def test_provenance_questions_weights_freshness_orphans_contradictions(vault):
    a, b = make_pair(vault)
    vault.write_note("report", {"question": "Why?", "answer": "Because."})
    vault.write_note("report_candidate", {"question": "What next?", "status": "pending"})
    vault.write_note("report_candidate", {"question": "Which kiln?", "status": "answered_partly"})  # no model yet: open
    vault.write_note("report_candidate", {"question": "Why so?", "status": "done"})
    vault.write_note("entity", {"name": "Old"}, created_at="2026-01-01T00:00:00+00:00", updated_at="2026-01-01T00:00:00+00:00")
    vault.link(b.uri, a.uri, "contradicts", weight=0.2, description="they disagree")
    assert [f.message for f in findings(vault, "provenance") if f.uri == "reports/why.md"] == ["report without sources"]
    assert any(f.uri == a.uri and "no source" in f.message for f in findings(vault, "provenance"))
    assert sorted(f.uri for f in findings(vault, "open_questions")) == ["report_candidates/what-next.md",
                                                                         "report_candidates/which-kiln.md"]
    assert [(f.uri, f.other) for f in findings(vault, "low_weight")] == [(b.uri, a.uri)]
    assert [(f.uri, f.other, f.message) for f in findings(vault, "contradictions")] == [(b.uri, a.uri, "they disagree")]
    stale = {f.uri: f for f in findings(vault, "freshness")}
    assert stale["entities/old.md"].severity == "warning" and "stale" in stale["entities/old.md"].message
    assert {f.uri for f in findings(vault, "orphans")} >= {"entities/old.md", "reports/why.md"}
    assert a.uri not in {f.uri for f in findings(vault, "orphans")}


def test_fix_restores_one_sided_links_and_drops_links_to_missing_notes(vault):
    a, b = make_pair(vault)
    c = vault.write_note("entity", {"name": "Gone"})
    vault.link(b.uri, a.uri, "belongs_to")
    vault.link(b.uri, c.uri, "related_to")
    (vault.root / "entities" / ".relations.json").unlink()  # both backlink sides lost
    vault.path(c.uri).unlink()  # and one target deleted by hand
    done = fix(vault)
    assert any("restored the backlinks side" in d for d in done) and any("a note is missing" in d for d in done)
    assert lint(vault).errors == 0
    assert [l.to_uri for l in vault.links.of(b.uri, "links")] == [a.uri]


def test_dashboards_and_digest(sample):
    report = lint(sample)
    written = write_dashboards(sample, report)
    assert "dashboards/contradictions.md" in written and "dashboards/digest.json" in written
    digest = json.loads((sample.root / "dashboards" / "digest.json").read_text())
    assert digest["notes"] == 72 and digest["per_type"]["event"] == 30 and len(digest["contradictions"]) == 5
    assert "Vegetarian diet" in (sample.root / "dashboards" / "contradictions.md").read_text()
    assert [p for p in check(sample) if p.severity == "error"] == []  # dashboards are not notes
    # The digest's text is json's, however it is made (orjson, json for what it refuses).
    from engine.lint.report import _json_text

    text = (sample.root / "dashboards" / "digest.json").read_text(encoding="utf-8")
    assert text == json.dumps(digest, ensure_ascii=False, indent=2) + "\n"
    odd = {"a": "x\u2028\x1f\x7f\"\\é😀", "lone": "\ud800", "n": [1, None, True]}
    assert _json_text(odd) == json.dumps(odd, ensure_ascii=False, indent=2) + "\n"


def test_the_digest_lists_the_first_contradictions_and_counts_them_all(sample, monkeypatch):
    import engine.lint.report

    monkeypatch.setattr(engine.lint.report, "DASHBOARD_ROWS", 2)
    with lint(sample) as report:
        digest = engine.lint.report.digest(sample, report)
        worst = report.page(["contradictions"], 2)
    assert [(c["a"], c["b"]) for c in digest["contradictions"]] == [(f.uri, f.other) for f in worst]
    assert len(worst) == 2 and digest["health"]["checks"]["contradictions"] == 5


def test_check_is_the_integrity_part_of_the_same_run_with_the_same_errors(vault):
    from engine.lint.checks import CHECKS, Finding

    a, b = make_pair(vault)
    vault.link(b.uri, a.uri, "belongs_to", weight=0.2)
    (vault.root / "entities" / ".relations.json").unlink()  # a one-sided link
    (vault.root / "entities" / "bad.md").write_text("no frontmatter\n")  # a malformed note
    (vault.root / "sessions" / "s1.jsonl").write_text('{"session": "s1"}\n')  # a malformed session log
    report = lint(vault, today=dt.date(2026, 12, 1))
    checked = check(vault)
    assert all(isinstance(f, Finding) for f in checked + report.findings)
    lint_errors = sorted((f.code, f.uri, f.message) for f in report.findings if f.severity == "error")
    check_errors = sorted((f.code, f.uri, f.message) for f in checked if f.severity == "error")
    assert check_errors == lint_errors and {c for c, _u, _m in check_errors} == {"one_sided_link", "malformed_note", "malformed_session"}
    assert {f.check for f in checked} <= {"structure", "links"}  # no hygiene findings (low weight, provenance...)
    assert {f.check for f in report.findings} >= {"low_weight", "provenance"}
    assert any(not c.integrity for c in CHECKS) and all(c.integrity for c in CHECKS if c.name in ("link_records", "titles"))


def test_check_and_lint_on_the_command_line_agree(vault):
    from conftest import memlink

    a, b = make_pair(vault)
    vault.link(b.uri, a.uri, "belongs_to")
    (vault.root / "entities" / ".relations.json").unlink()
    vault.close()
    checked, linted = memlink("check", vault=vault.root), memlink("lint", vault=vault.root)
    assert checked.returncode == linted.returncode == 3
    assert "one_sided_link" in checked.stdout and "1 error, 0 warnings" in checked.stdout
    assert "one_sided_link: " in linted.stdout and linted.stdout.splitlines()[-1].startswith("1 errors;")


def test_fix_keeps_the_links_of_a_note_whose_frontmatter_is_broken(vault):
    """A half-done edit in an editor must not cost a note its links (the dream runs fix)."""
    a, b = make_pair(vault)
    vault.link(b.uri, a.uri, "belongs_to")
    path = vault.path(a.uri)
    good = path.read_text(encoding="utf-8")
    path.write_text(good.replace("memory_type:", "memory_type: [broken\nx:", 1), encoding="utf-8")
    assert fix(vault) == []
    problems = check(vault)
    assert [p.code for p in problems if p.severity == "error"] == ["malformed_note"]  # not dangling_link
    path.write_text(good, encoding="utf-8")
    assert [l.to_uri for l in vault.links.of(b.uri, "links")] == [a.uri]
    assert [l.from_uri for l in vault.links.of(a.uri, "backlinks")] == [b.uri]


def test_a_long_dashboard_lists_its_worst_first_and_says_how_many_more(vault, monkeypatch):
    import engine.lint.report as lint_module

    for i in range(5):
        vault.write_note("entity", {"name": f"Lonely {i}", "kind": "person"})  # orphans (warnings)
    monkeypatch.setattr(lint_module, "DASHBOARD_ROWS", 2)
    report = lint(vault)
    orphans = [f for f in report.findings if f.check == "orphans"]
    assert len(orphans) == 5
    write_dashboards(vault, report)
    text = (vault.root / "dashboards" / "orphans.md").read_text()
    assert "5 item(s)." in text and "… and 3 more" in text
    assert sum(1 for line in text.splitlines() if line.startswith("- **")) == 2


def test_two_sides_compare_as_their_records_do():
    """``same_record`` compares a link's two sides as their records do: all keys but the
    direction, defaults filled in."""
    import random

    from engine.model.links import StoredLink

    defaults = {"t_field": "content", "t_line_ranges": None, "match_text": None, "description": ""}

    def reference(a: dict, b: dict) -> bool:
        def plain(row: dict) -> dict:
            return {**defaults, **{k: v for k, v in row.items() if k not in ("direction", "legacy")}}
        return plain(a) == plain(b)

    rng = random.Random(11)
    base = {"id": "link_0001", "from_uri": "a/x.md", "to_uri": "b/y.md", "direction": "links", "link_type": "supports",
            "weight": 0.8, "t_field": "content", "t_line_ranges": None, "match_text": "the \"direction\": \"links\"",
            "description": "", "created_at": "2026-01-01T00:00:00+00:00"}
    checked = 0
    for _ in range(3000):
        a = dict(base)
        b = {**base, "direction": "backlinks"}
        for row in (a, b):
            if rng.random() < 0.3:
                key, values = rng.choice([("weight", [0.8, 0.9, 1]), ("description", ["", "x"]),
                                          ("match_text", [None, "x", base["match_text"]]),
                                          ("t_field", ["content", "name"]), ("to_uri", ["b/y.md", "b/z.md"])])
                row[key] = rng.choice(values)
            if rng.random() < 0.1:
                row.pop(rng.choice(["t_field", "description", "match_text"]), None)
            if rng.random() < 0.05:
                row["legacy"] = True
        one, two = StoredLink.model_validate(a), StoredLink.model_validate(b)
        assert one.same_record(two) == two.same_record(one) == reference(a, b), (a, b)
        checked += one.same_record(two)
    assert checked > 300  # the equal pairs were looked at too


def test_past_events_and_imported_files_never_go_stale(sample):
    with lint(sample, today=dt.date(2030, 1, 1), full=True) as report:
        stale = {f.uri: sample.catalog.memory_type(f.uri) for f in report.findings if f.check == "freshness"}
    assert stale and set(stale.values()) <= {"entity", "preference", "profile", "report", "report_candidate"}
    assert not any(uri.startswith(("events/", "sources/")) for uri in stale)


def test_lint_puts_the_demo_contradictions_first_and_groups_the_hygiene_checks(sample):
    from conftest import memlink

    shown = memlink("lint", vault=sample.root)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert [line.split()[1] for line in lines[:5]] == ["contradictions"] * 5  # (no errors in the demo)
    grouped = {line.split()[1]: line for line in lines if "`memlink lint --check" in line}
    assert {"provenance", "low_weight"} <= set(grouped)
    assert grouped["provenance"].startswith("info    provenance      63 info")
    assert not any(line.split()[1] in ("provenance", "low_weight") and "`memlink" not in line for line in lines[:-1])
    every = memlink("lint", "--check", "provenance", vault=sample.root).stdout.splitlines()
    assert len([line for line in every if line.split()[1] == "provenance"]) == 63
    assert not any(line.split()[1] == "contradictions" for line in every[:-1])
    assert len(memlink("lint", "--all", vault=sample.root).stdout.splitlines()) > 63 + 40 + 5
    bad = memlink("lint", "--check", "nonsense", vault=sample.root)
    assert bad.returncode == 2 and "nonsense" in bad.stderr


async def test_the_lint_pane_opens_on_the_contradictions_and_expands_a_group(sample):
    from conftest import open_at, settle
    from textual.widgets import DataTable

    from memlink_tui.app import MemlinkApp

    app = MemlinkApp(sample)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_at(app, pilot, "lint")
        table = app.screen.query_one("#findings", DataTable)
        keys = [key.value for key in table.rows]
        contradictions = {f"{f.uri}|{f.other}" for f in lint(sample).findings if f.check == "contradictions"}
        assert {k.split("|", 1)[1] for k in keys[:5]} == contradictions
        group = next(i for i, k in enumerate(keys) if k == "group|provenance|")
        assert not any(k.split("|")[1] in ("provenance", "low_weight") for k in keys if not k.startswith("group|"))
        app.screen.set_focus(table)
        table.move_cursor(row=group)
        await pilot.press("enter")
        await settle(app, pilot)
        assert table.row_count == 63 and "provenance" in str(table.border_title)


def test_links_check_fix_removes_for_a_note_moved_by_hand_are_put_back_by_undo_and_follow_mv(sample):
    from engine.review.actions import undo
    from engine.review.move import move_note

    before = {l.id for l in sample.links.all()}
    (sample.root / "entities" / "mochi.md").rename(sample.root / "entities" / "cat.md")
    with (sample.root / "entities" / "cat.md").open("a") as f:  # (renamed and edited: nothing tells where it went)
        f.write("She sleeps on the piano.\n")
    found = [f for f in check(sample) if f.code == "dangling_link"]
    assert found and all("`memlink mv entities/mochi.md NEW` relinks it" in f.message for f in found)
    assert any("removed links entry" in line for line in fix(sample))
    assert "undid fix" in undo(sample)
    assert {l.id for l in Vault.open(sample.root).links.all()} == before
    moved = move_note(sample, "entities/mochi.md", "entities/cat.md")
    assert moved.links == 4 and not moved.moved_file
    assert [f for f in check(sample) if f.severity == "error"] == []
