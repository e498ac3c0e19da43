"""One bad file is one finding, never the vault's end: every reader of notes, sidecars and
settings bounds nesting, number size and file size, reads regular files only, and names
the file (and line); a YAML alias bomb is refused before it is expanded; templates are
bounded; `check --fix` keeps every sidecar line that still reads; file names are printed
escaped."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
import yaml
from conftest import memlink

from engine import Vault
from engine.errors import SchemaError, VaultError
from engine.lint.memo import check
from engine.lint.report import fix
from engine.model.blocks import links_span
from engine.model.links import REJECTED, SIDECAR
from engine.model.templates import render_template
from engine.model.text import printable_path
from engine.model.yamlio import safe_load
from engine.storage.jsonl import read_jsonl

LAUGHS = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8))
DEEP_FRONTMATTER = ("---\nmemory_type: entity\nfields:\n  name: Deep\n  content: " + "[" * 600 + "]" * 600 +
                    "\ncreated_at: '2026-01-01T00:00:00+00:00'\n---\nbody\n")
NESTED_KEYS = "---\nmemory_type: entity\n" + "".join(" " * i + f"k{i}:\n" for i in range(600)) + " " * 600 + "v: 1\n---\n"


def _refused(text: str) -> str:
    with pytest.raises(yaml.YAMLError) as caught:
        safe_load(text)
    return str(caught.value)


def test_yaml_that_would_hang_or_exhaust_a_reader_is_refused_with_its_line():
    assert _refused(LAUGHS) == "line 6: aliases repeat more than 100,000 values"
    assert _refused("x: " + "[" * 600 + "]" * 600) == "line 1: nested more than 64 levels deep"
    assert _refused("a: 1\nw: " + "1" * 5000) == "line 2: a number of more than 4,300 digits"
    assert "cannot be read" in _refused("d: 2024-02-30")  # the loader's own ValueError
    assert safe_load("a: &x {q: 1}\nb: *x\nn: " + "9" * 4300) == {"a": {"q": 1}, "b": {"q": 1}, "n": int("9" * 4300)}


def test_a_billion_laughs_memlink_yaml_is_refused_at_once_naming_the_file(vault):
    (vault.root / "memlink.yaml").write_text(LAUGHS, encoding="utf-8")
    start = time.monotonic()
    with pytest.raises(VaultError) as caught:
        Vault.open(vault.root)
    assert time.monotonic() - start <= 2  # the requirement is a bound: a bomb costs no expansion
    message = str(caught.value)
    assert message.startswith("memlink.yaml: ") and "aliases repeat" in message and "lol" not in message
    run = memlink("search", "tea", vault=vault.root)
    assert run.returncode == 1 and "memlink.yaml" in run.stderr and "Traceback" not in run.stderr


def test_bad_memory_type_and_settings_files_are_refused_naming_them(vault, tmp_path):
    folder = vault.root / "memory_types"
    folder.mkdir()
    (folder / "bomb.yaml").write_text(LAUGHS, encoding="utf-8")
    with pytest.raises(SchemaError, match=r"^memory_types/bomb\.yaml: not valid YAML: line 6: aliases"):
        Vault.open(vault.root)
    (folder / "bomb.yaml").unlink()
    os.mkfifo(folder / "pipe.yaml")
    with pytest.raises(SchemaError, match=r"^memory_types/pipe\.yaml: cannot be read \(not a regular file \(a named pipe\)"):
        Vault.open(vault.root)

    from memlink_tui.settings import SettingsFile

    settings = tmp_path / "settings.yaml"
    settings.write_text(LAUGHS, encoding="utf-8")
    loaded = SettingsFile(settings)
    assert loaded.error is not None and "unreadable settings (line 6: aliases repeat" in loaded.error


def _type_with_template(vault: Vault, template: str) -> Vault:
    folder = vault.root / "memory_types"
    folder.mkdir(exist_ok=True)
    (folder / "odd.yaml").write_text(yaml.safe_dump({
        "memory_type": "odd", "directory": "odd", "filename": "{{ name | slug }}.md", "title_field": "name",
        "fields": [{"name": "name"}], "content_template": template}), encoding="utf-8")
    return Vault.open(vault.root)


@pytest.mark.parametrize("template", [
    "{{ name * 1000000000 }}",  # text multiplied past the bound
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",  # loop work
    "{% set ns = namespace(s=name) %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
    "{{ '{:>999999999}'.format(name) }}",  # a width of a gigabyte
    "{{ name.center(1000000000) }}",
    "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",  # recursion
    "{{ 10 ** 100000000 }}",
    "{{ 1 / 0 }}",
])
def test_a_template_cannot_raise_or_exhaust_memory(vault, template):
    odd = _type_with_template(vault, template)
    with pytest.raises(SchemaError) as caught:
        odd.write_note("odd", {"name": "x"})
    assert str(caught.value).startswith("memory_types/odd.yaml: content_template ")
    assert not (vault.root / "odd").exists()


def test_a_template_within_the_bounds_renders_as_before():
    template = "{% for x in items %}{{ loop.index }}. {{ x | upper }}{% endfor %} · {{ items | join(', ') }} · {{ n * 2 }}"
    assert render_template(template, {"items": ["a", "b"], "n": 21}) == "1. A2. B · a, b · 42"


def _sidecar_with_a_long_weight(root: Path, folder: str) -> tuple[Path, int, int]:
    """Give one entry of a folder's sidecar a 5,000-digit weight: (path, its line, entries)."""
    path = root / folder / SIDECAR
    lines = path.read_text(encoding="utf-8").split("\n")
    entry = json.loads(lines[2].rstrip(","))
    entry["weight"] = 0.5
    lines[2] = json.dumps(entry, ensure_ascii=False).replace('"weight": 0.5', '"weight": ' + "7" * 5000) + ","
    path.write_text("\n".join(lines), encoding="utf-8")
    return path, 3, len(lines) - 3


def _links_blocks_follow_the_links(vault: Vault, folder: str) -> None:
    """Each note of the folder lists in its Links block exactly the notes it links to."""
    for uri in [u for u in vault.catalog.uris() if u.startswith(folder + "/")]:
        body = vault.read_text(uri).split("---", 2)[2]
        span = links_span(body)
        shown = set(re.findall(r"\[\[([^|\]]+)\|", body[span[0]:span[1]])) if span else set()
        assert shown == {l.to_uri.removesuffix(".md") for l in vault.links.of(uri, "links")}, uri


def test_check_fix_keeps_every_readable_line_of_a_sidecar_and_names_the_rest(sample):
    before = {(l.id, l.direction) for l in sample.links.all() if not l.legacy}
    path, line, entries = _sidecar_with_a_long_weight(sample.root, "preferences")
    vault = Vault.open(sample.root)
    found = [p for p in check(vault) if p.severity == "error"]
    assert [(p.code, p.uri) for p in found] == [("malformed_sidecar", f"preferences/{SIDECAR}")]
    assert f"line {line}: a number of more than 4,300 digits" in found[0].message
    done = fix(vault)
    said = next(d for d in done if d.startswith(f"preferences/{SIDECAR} did not read whole"))
    assert f"kept the {entries - 1} entries that read; dropped 1 to preferences/{REJECTED}" in said
    assert f"preferences/{SIDECAR} line {line}: a number of more than 4,300 digits" in said
    lost = read_jsonl(path.with_name(REJECTED))
    assert [(r["sidecar"], r["line"]) for r in lost] == [(SIDECAR, line)] and "7" * 5000 in lost[0]["text"]
    fresh = Vault.open(sample.root)
    assert not [p for p in check(fresh) if p.severity == "error"]
    # The dropped entry's twin survived in its other folder: its side was restored from it.
    assert {(l.id, l.direction) for l in fresh.links.all() if not l.legacy} == before
    _links_blocks_follow_the_links(fresh, "preferences")


def test_check_fix_salvages_a_truncated_sidecar_and_its_notes_links_blocks(sample):
    folder = "entities"
    path = sample.root / folder / SIDECAR
    lines = path.read_text(encoding="utf-8").split("\n")
    cut = len(lines) // 2
    path.write_text("\n".join(lines[:cut]) + "\n" + lines[cut][: len(lines[cut]) // 2], encoding="utf-8")
    vault = Vault.open(sample.root)
    done = fix(vault)
    assert any(d.startswith(f"{folder}/{SIDECAR} did not read whole") and f"kept the {cut - 1} entries" in d for d in done)
    lost = read_jsonl(path.with_name(REJECTED))
    assert [r["line"] for r in lost] == [cut + 1] and lost[0]["text"] == lines[cut][: len(lines[cut]) // 2]
    kept = json.loads(path.read_text(encoding="utf-8"))
    assert {json.dumps(r, sort_keys=True) for r in (json.loads(l.rstrip(",")) for l in lines[1:cut])} <= \
        {json.dumps(r, sort_keys=True) for r in kept}  # every line that read is still there
    fresh = Vault.open(sample.root)
    assert not [p for p in check(fresh) if p.severity == "error"]
    _links_blocks_follow_the_links(fresh, folder)


def test_a_note_nested_too_deep_is_one_finding(sample):
    (sample.root / "entities" / "deep.md").write_text(DEEP_FRONTMATTER, encoding="utf-8")
    (sample.root / "entities" / "keys.md").write_text(NESTED_KEYS, encoding="utf-8")
    vault = Vault.open(sample.root)
    errors = {p.uri: p.message for p in check(vault) if p.severity == "error"}
    assert set(errors) == {"entities/deep.md", "entities/keys.md"}
    assert "nested more than 64 levels deep" in errors["entities/deep.md"]
    assert "nested more than 64 levels deep" in errors["entities/keys.md"]


def test_a_page_whose_frontmatter_its_note_could_not_hold_is_refused_and_one_that_fits_imported(vault, tmp_path):
    """A page's other frontmatter is kept a level deeper in its note (``properties``): a
    page nested as deep as a reader allows would make a note no reader opens."""
    from engine.extract.batch import ingest_batch
    from engine.extract.rules import RulesExtractor
    from engine.model.yamlio import MAX_DEPTH

    def page(levels: int) -> str:  # frontmatter nested ``levels`` mappings deep
        return ("---\n" + "".join(" " * i + f"k{i}:\n" for i in range(levels - 1)) + " " * (levels - 1) + "v: 1\n---\n"
                "# Deep\n\nA page about deep things.\n")

    folder = tmp_path / "pages"
    folder.mkdir()
    (folder / "deepest.md").write_text(page(MAX_DEPTH), encoding="utf-8")
    (folder / "deep.md").write_text(page(MAX_DEPTH - 1), encoding="utf-8")
    result = ingest_batch(vault, [folder], extractor=RulesExtractor())
    assert [f["error"] for f in result.failed] == [f"{folder / 'deepest.md'}: its frontmatter nests {MAX_DEPTH} levels "
                                                   f"deep; a note keeps at most {MAX_DEPTH - 1}"]
    assert not result.pending and [f.source_uri for f in result.files] == ["sources/pages/deep.md"]
    assert not vault.exists("sources/pages/deepest.md")
    assert vault.read_note("sources/pages/deep.md").extra["properties"]["k0"]["k1"]


def test_only_regular_files_are_read_and_odd_names_are_findings(sample):
    entities = sample.root / "entities"
    os.mkfifo(entities / "fifo.md")
    (sample.root / "odd").mkdir()
    os.mkfifo(sample.root / "odd" / SIDECAR)
    latin = entities / os.fsdecode(b"caf\xe9.md")
    latin.write_text("---\nmemory_type: entity\nfields:\n  name: Cafe\n---\n", encoding="utf-8")
    vault = Vault.open(sample.root)
    errors = {p.uri: p for p in check(vault) if p.severity == "error"}
    assert errors["entities/fifo.md"].code == "unreadable_file"
    assert "a named pipe" in errors["entities/fifo.md"].message
    assert errors["entities/caf\\udce9.md"].code == "unreadable_file"
    assert "not UTF-8" in errors["entities/caf\\udce9.md"].message
    assert errors[f"odd/{SIDECAR}"].code == "unreadable_file"
    with pytest.raises(Exception, match="not a regular file"):
        vault.read_note("entities/fifo.md")  # asked for by name: refused at once, never waited on


def test_a_newline_in_a_file_name_is_printed_escaped(sample):
    note = sample.write_note("entity", {"name": "Two Lines", "content": "tea"})
    odd = sample.root / "entities" / "two\nlines.md"
    (sample.root / note.uri).rename(odd)
    assert printable_path("entities/two\nlines.md") == "entities/two\\nlines.md"
    (sample.root / "entities" / "bad\nyaml.md").write_text("---\nmemory_type: [\n---\n", encoding="utf-8")
    run = memlink("check", vault=sample.root)
    assert run.returncode == 3
    assert "entities/bad\\nyaml.md" in run.stdout
    assert not any(line.startswith("yaml.md") for line in run.stdout.splitlines())
    run = memlink("search", "Two Lines", vault=sample.root)
    assert run.returncode == 0 and "entities/two\\nlines.md" in run.stdout
    titled = sample.write_note("entity", {"name": "Kiln\nlog", "content": "The kiln log of the studio."})
    run = memlink("search", "kiln log studio", vault=sample.root)  # a title on two lines is printed on one
    assert "Kiln log  (entity" in run.stdout and not any(line.startswith("log") for line in run.stdout.splitlines())
    assert titled.uri in run.stdout


@pytest.mark.slow
def test_one_vault_with_every_bad_file_every_command_finishes_and_check_names_each(sample):
    """A 600-level frontmatter note, a 5,000-digit sidecar weight, a named pipe, a name
    that is not UTF-8, a malformed and a torn session line, in one vault: search, recall, lint, doctor and check each finish
    within 10 s with their documented exit codes (3: problems found), and check names
    each bad file."""
    root = sample.root
    (root / "entities" / "deep.md").write_text(DEEP_FRONTMATTER, encoding="utf-8")
    _sidecar_with_a_long_weight(root, "preferences")
    os.mkfifo(root / "entities" / "fifo.md")
    (root / "entities" / os.fsdecode(b"caf\xe9.md")).write_text("---\nmemory_type: entity\n---\n", encoding="utf-8")
    sessions = sorted((root / "sessions").glob("*.jsonl"))
    lines = sessions[0].read_text(encoding="utf-8").splitlines(keepends=True)
    sessions[0].write_text("".join([lines[0], "{not json\n", *lines[1:]]), encoding="utf-8")  # malformed, mid-file
    with sessions[1].open("a", encoding="utf-8") as fh:
        fh.write('{"role": "user", "content": "cut sh')  # torn: a crash mid-append
    for warm in (("reindex",), ("recall", "tea")):  # (the indexes' first build is not what is timed)
        assert memlink(*warm, vault=root).returncode == 0, warm
    expected = {("search", "tea"): 0, ("recall", "tea"): 0, ("lint",): 3, ("doctor",): 3, ("check",): 3}
    for args, code in expected.items():
        start = time.monotonic()
        run = memlink(*args, vault=root)
        assert time.monotonic() - start <= 10, args
        assert run.returncode == code, (args, run.stdout[-2000:], run.stderr[-2000:])
        assert "Traceback" not in run.stderr, args
    shown = memlink("check", vault=root).stdout
    for name in ("entities/deep.md", f"preferences/{SIDECAR}", "entities/fifo.md", "entities/caf\\udce9.md",
                 f"sessions/{sessions[0].name}", f"sessions/{sessions[1].name}"):
        assert name in shown, name


@pytest.mark.parametrize("mode", [0o000, 0o644], ids=["no-permission", "listed-not-entered"])
def test_a_folder_that_cannot_be_read_is_reported_and_its_notes_and_links_are_kept(sample, mode):
    """Not being able to list a folder is not its notes being gone: check names the folder,
    check --fix removes no link, and once it can be read again nothing is amiss."""
    from conftest import run_unprivileged

    root = str(sample.root)
    sidecars = {p: p.read_bytes() for p in sample.root.rglob(".relations.json")}
    assert memlink("check", vault=sample.root).returncode == 0  # indexed while readable
    (sample.root / "preferences").chmod(mode)
    try:
        shown = run_unprivileged("--vault", root, "check")
        fixed = run_unprivileged("--vault", root, "check", "--fix")
    finally:
        (sample.root / "preferences").chmod(0o755)
    for run in (shown, fixed):
        assert "preferences/: a folder that cannot be read" in run.stdout, run.stdout + run.stderr
        assert "dangling_link" not in run.stdout and "one_sided_link" not in run.stdout
    assert {p: p.read_bytes() for p in sample.root.rglob(".relations.json")} == sidecars
    assert memlink("check", vault=sample.root).returncode == 0


def test_ingest_prune_leaves_the_notes_of_a_source_folder_it_cannot_read(sample, tmp_path):
    from conftest import run_unprivileged

    other = tmp_path / "elsewhere" / "docs"  # a folder of the same name first: ours is imported as docs-2
    other.mkdir(parents=True)
    (other / "first.txt").write_text("Gamma text.\n", encoding="utf-8")
    assert memlink("ingest", str(other), vault=sample.root).returncode == 0
    src = tmp_path / "docs"
    (src / "locked").mkdir(parents=True)
    (src / "open.txt").write_text("Alpha text.\n", encoding="utf-8")
    (src / "locked" / "kept.txt").write_text("Beta text.\n", encoding="utf-8")
    assert memlink("ingest", str(src), vault=sample.root).returncode == 0
    (src / "locked").chmod(0)
    try:
        run = run_unprivileged("--vault", str(sample.root), "ingest", "--prune", str(src))
    finally:
        (src / "locked").chmod(0o755)
    assert f"{src / 'locked'}: a folder that cannot be read" in run.stdout + run.stderr
    assert (sample.root / "sources" / "docs-2" / "locked" / "kept.md").exists(), run.stdout


def test_an_entry_set_aside_keeps_what_was_written_when_json_cannot_hold_its_value(sample):
    """check --fix moves a bad entry to the folder's rejected file; a weight of 1e999 (read
    as infinity) is kept as the line the person wrote, and every line stays strict JSON."""
    sidecar = sample.root / "entities" / SIDECAR
    lines = sidecar.read_text(encoding="utf-8").split("\n")
    lines[1] = lines[1].replace('"weight": ', '"weight": 1e999, "was": ', 1)
    sidecar.write_text("\n".join(lines), encoding="utf-8")
    fix(Vault.open(sample.root))

    def strict(text: str) -> dict:
        return json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} in the rejected file"))

    kept = [strict(line) for line in (sample.root / "entities" / REJECTED).read_text(encoding="utf-8").splitlines()]
    assert [k["text"] for k in kept] == [lines[1].rstrip(",")]
