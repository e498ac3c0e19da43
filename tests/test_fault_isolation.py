"""One bad sidecar entry, or one unreadable sidecar file, never breaks the vault: readers
skip it, `check` names its place and cause once, and `check --fix` moves it to the
rejected file beside the sidecar."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import make_pair, memlink

from engine import Vault
from engine.graph import LinkGraph
from engine.lint.memo import check
from engine.lint.report import fix
from engine.model.links import REJECTED, SIDECAR
from engine.storage.jsonl import read_jsonl

HOSTILE = "../../etc/passwd"


def _entries(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))


def _first_link(vault: Vault) -> dict:
    """A real two-sided link of the sample vault, from its links side."""
    return next(l for l in vault.links.all() if not l.legacy).model_dump(mode="json")


def _spoil_entry(vault: Vault) -> tuple[Path, dict]:
    """Put an entry pointing out of the vault first in the entities/ sidecar."""
    path = vault.root / "entities" / SIDECAR
    rows = _entries(path)
    bad = dict(rows[0], id="link_evil", from_uri=HOSTILE)
    path.write_text(json.dumps([bad, *rows], ensure_ascii=False), encoding="utf-8")
    return path, bad


def _truncate(vault: Vault, folder: str) -> Path:
    path = vault.root / folder / SIDECAR
    text = path.read_text(encoding="utf-8")
    path.write_text(text[: len(text) // 2], encoding="utf-8")
    return path


def _busiest_folder(vault: Vault, but: str = "") -> str:
    """The folder whose sidecar holds the most entries (so its twins are many)."""
    counts = {f: len([l for l in vault.links.folder(f).links if not l.legacy]) for f in vault.links.folders() if f != but}
    return max(counts, key=lambda f: counts[f])


def test_a_hostile_entry_is_skipped_and_reported_with_its_place(sample):
    entity = next(e.uri for e in sample.catalog.all() if e.uri.startswith("entities/") and sample.links.of(e.uri))
    before = sample.links.of(entity)
    _spoil_entry(sample)
    fresh = Vault.open(sample.root)
    assert [l.id for l in fresh.links.of(entity)] == [l.id for l in before]  # the rest of the file still reads
    assert all(HOSTILE not in (l.from_uri, l.to_uri) for l in fresh.links.all())
    problems = [p for p in check(fresh) if p.severity == "error"]
    assert [(p.code, p.uri) for p in problems] == [("malformed_sidecar", f"entities/{SIDECAR}")]
    assert "entry 0 (link_evil)" in problems[0].message and "contains '..'" in problems[0].message
    assert LinkGraph.build(fresh).g.number_of_edges() > 0


def test_each_kind_of_bad_entry_is_named_with_index_and_cause(sample):
    path = sample.root / "entities" / SIDECAR
    rows = _entries(path)
    good = rows[0]
    bad = [
        {k: v for k, v in good.items() if k != "created_at"},  # a missing key
        dict(good, id="t", link_type="not a type!"),  # a bad type
        dict(good, id="d", direction="sideways"),  # a wrong direction
        dict(good, id="w", weight="heavy"),
        42,
    ]
    path.write_text(json.dumps([*rows, *bad]), encoding="utf-8")
    found = [p for p in check(Vault.open(sample.root)) if p.code == "malformed_sidecar"]
    n = len(rows)
    assert [p.message.split(":")[0] for p in found] == [
        f"entry {n} ({good['id']})", f"entry {n + 1} (t)", f"entry {n + 2} (d)", f"entry {n + 3} (w)", f"entry {n + 4}"]
    causes = " ".join(p.message for p in found)
    for word in ("created_at", "link_type", "direction", "weight", "not an object"):
        assert word in causes


def test_an_unreadable_sidecar_is_reported_once_and_its_notes_still_open(sample):
    folder = _busiest_folder(sample)
    _truncate(sample, folder)
    fresh = Vault.open(sample.root)
    notes = [e.uri for e in fresh.catalog.all() if e.uri.rpartition("/")[0] == folder]
    for uri in notes:
        fresh.read_note(uri)
        fresh.render_note(uri)
        fresh.links.of(uri)  # its links from that file are missing, nothing raises
    problems = check(fresh)
    errors = [p for p in problems if p.severity == "error"]
    assert [(p.code, p.uri) for p in errors] == [("malformed_sidecar", f"{folder}/{SIDECAR}")]
    assert not [p for p in problems if p.code == "one_sided_link"]  # no flood from the other sides
    twins = [p for p in problems if p.code == "twin_in_unreadable_sidecar"]
    assert len(twins) == 1 and twins[0].uri == f"{folder}/{SIDECAR}"


def test_check_fix_moves_bad_entries_aside_and_appends(sample):
    path, bad = _spoil_entry(sample)
    run = memlink("check", "--fix", vault=sample.root)
    assert run.returncode == 0, run.stdout + run.stderr
    rejected = path.with_name(REJECTED)
    assert f"entities/{REJECTED}" in run.stdout
    assert "link_evil" not in path.read_text(encoding="utf-8")
    records = read_jsonl(rejected)
    assert [r["entry"] for r in records] == [bad] and "contains '..'" in records[0]["cause"]
    _spoil_entry(Vault.open(sample.root))  # again: the rejected file grows, never overwritten
    assert memlink("check", "--fix", vault=sample.root).returncode == 0
    assert [r["entry"]["id"] for r in read_jsonl(rejected)] == ["link_evil", "link_evil"]
    assert memlink("check", vault=sample.root).returncode == 0


def test_fix_sets_an_unreadable_sidecar_aside_and_restores_its_sides(sample):
    folder = _busiest_folder(sample)
    path = _truncate(sample, folder)
    broken = path.read_bytes()
    vault = Vault.open(sample.root)
    done = fix(vault)
    assert any(f"{folder}/{REJECTED}" in line for line in done)
    kept = read_jsonl(path.with_name(REJECTED))
    lines = broken.decode("utf-8").split("\n")
    assert [(r["line"], r["text"]) for r in kept] == [(len(lines), lines[-1])]  # only the torn line moved aside
    assert not [p for p in check(Vault.open(sample.root)) if p.severity == "error"]


def test_writes_refuse_a_sidecar_with_bad_entries_until_fixed(sample):
    a, b = make_pair(sample)
    path = sample.root / "entities" / SIDECAR
    rows = _entries(path)
    path.write_text(json.dumps([*rows, {"id": "x", "to_uri": 3}]), encoding="utf-8")
    run = memlink("link", b.uri, a.uri, "--type", "related_to", vault=sample.root)
    assert run.returncode != 0 and "check --fix" in run.stderr + run.stdout
    assert _entries(path)[-1] == {"id": "x", "to_uri": 3}  # nothing was dropped
    assert memlink("lint", "--fix", vault=sample.root).returncode in (0, 3)
    assert memlink("link", b.uri, a.uri, "--type", "related_to", vault=sample.root).returncode == 0


def test_cli_readers_work_beside_a_hostile_entry_and_a_truncated_file(sample):
    _spoil_entry(sample)
    folder = _busiest_folder(sample, but="entities")
    _truncate(sample, folder)
    uri = next(e.uri for e in sample.catalog.all() if e.uri.startswith(folder + "/"))
    entity = next(e.uri for e in sample.catalog.all() if e.uri.startswith("entities/"))
    for args in (("search", "editor"), ("show", uri), ("links", entity), ("links", uri), ("graph-query", entity)):
        run = memlink(*args, vault=sample.root)
        assert run.returncode == 0, (args, run.stderr)
        if args[0] in ("show", "links"):  # not silent: the note's links may be incomplete, and where and why
            folder_of = args[1].rsplit("/", 1)[0]
            assert f"memlink: note: {folder_of}/.relations.json: " in run.stderr, (args, run.stderr)
            assert ("not shown" if folder_of == folder else "skipped (") in run.stderr, (args, run.stderr)
    run = memlink("check", vault=sample.root)
    assert run.returncode == 3 and run.stdout.count("one_sided_link") == 0
    assert run.stdout.count("malformed_sidecar") == 2
    dream = memlink("dream", "--dry-run", "--provider", "rules", vault=sample.root)
    assert dream.returncode == 0, dream.stderr
