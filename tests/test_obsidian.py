"""An Obsidian-friendly vault (docs/DESIGN.md, "Vault format": the body): text written
under the frontmatter is kept across every write; the view and the Links block are
delimited, generated blocks; the Links block lists each note's outgoing links as
[[wikilinks]] that Obsidian resolves, is regenerated from the sidecars in the same unit
of work as the link write, round-trips, is ignored by search and anchors, and can be
turned off."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from urllib.parse import unquote

import pytest
import yaml
from conftest import SAMPLE, make_pair, set_llm

from engine import Vault
from engine.dream import dream
from engine.errors import LinkError
from engine.lint.memo import check
from engine.model.blocks import LINKS_CLOSE, LINKS_PREFIX, VIEW_CLOSE, VIEW_OPEN, links_span
from engine.model.notes import split_frontmatter
from engine.review.actions import review, undo
from engine.storage.obsidian import regenerate

MINE = "\nMy own line, typed in Obsidian: call Ana on Friday.\n"
ABOVE = "A line I typed above everything.\n\n"


def body(v: Vault, uri: str) -> str:
    return split_frontmatter(v.path(uri).read_text(encoding="utf-8"))[1] or ""


def hand_edit(v: Vault, uri: str) -> None:
    """Type a line above the view and one at the end of the note, as a person would."""
    path = v.path(uri)
    head, rest = path.read_text(encoding="utf-8").split("\n---\n", 1)
    path.write_text(f"{head}\n---\n{ABOVE}{rest}{MINE}", encoding="utf-8")


def kept(v: Vault, uri: str) -> bool:
    text = body(v, uri)
    return text.startswith(ABOVE) and MINE.strip() in text


def block_of(v: Vault, uri: str) -> str:
    text = body(v, uri)
    span = links_span(text)
    return text[span[0] : span[1]] if span else ""


def set_links_block(root: Path, on: bool) -> Vault:
    cfg = yaml.safe_load((root / "memlink.yaml").read_text())
    cfg["obsidian"] = {"links_block": on}
    (root / "memlink.yaml").write_text(yaml.safe_dump(cfg, allow_unicode=True))
    return Vault.open(root)


# -- (1) the body is the user's ---------------------------------------------------------------
def test_a_hand_edit_survives_a_link_a_field_edit_and_an_unlink(vault):
    a, b = make_pair(vault)
    hand_edit(vault, a.uri)
    vault.link(a.uri, b.uri, "related_to", weight=0.7, description="likes tea")
    assert kept(vault, a.uri)
    assert "[[preferences/python-code-style|Python code style]]" in block_of(vault, a.uri)
    vault.write_note("entity", {"content": "Caroline leads Atlas.\nShe likes green tea."}, uri=a.uri)
    assert kept(vault, a.uri) and "She likes green tea." in body(vault, a.uri)
    assert "[[preferences/python-code-style" in block_of(vault, a.uri)  # the block stays
    vault.unlink(a.uri, b.uri)
    assert kept(vault, a.uri) and LINKS_PREFIX not in body(vault, a.uri)  # no links: no block
    assert body(vault, a.uri).count(VIEW_OPEN) == 1


def test_an_older_note_migrates_without_losing_a_byte(vault):
    a, _b = make_pair(vault)
    path = vault.path(a.uri)
    old = path.read_text(encoding="utf-8").replace(VIEW_OPEN + "\n", "").replace("\n" + VIEW_CLOSE, "")
    old = old.replace("\n---\n", f"\n---\n{ABOVE}", 1) + MINE  # a note of an older memlink, edited by hand
    path.write_text(old, encoding="utf-8")
    vault.write_note("entity", {"content": "Caroline leads Atlas and Borealis."}, uri=a.uri)
    text = body(vault, a.uri)
    assert text.startswith(ABOVE + VIEW_OPEN) and text.rstrip().endswith(MINE.strip())
    assert "Caroline leads Atlas and Borealis." in text and "She runs on Sundays" not in text


def test_deleted_markers_and_an_edited_view_keep_every_line(vault):
    a, _b = make_pair(vault)
    path = vault.path(a.uri)
    head, rest = path.read_text(encoding="utf-8").split("\n---\n", 1)
    rest = rest.replace(VIEW_OPEN + "\n", "").replace(VIEW_CLOSE, "").replace("She likes tea.", "She loves tea.")
    path.write_text(f"{head}\n---\n{rest}")
    vault.write_note("entity", {"content": "Caroline leads Atlas."}, uri=a.uri)
    text = body(vault, a.uri)
    assert text.startswith(VIEW_OPEN) and "She loves tea." in text and "She runs on Sundays." in text  # theirs, kept
    path.write_text(path.read_text().replace("Caroline leads Atlas.\n" + VIEW_CLOSE, "Caroline leads Atlas!\n" + VIEW_CLOSE))
    vault.write_note("entity", {"content": "Caroline leads Atlas today."}, uri=a.uri)
    assert "Caroline leads Atlas!" in body(vault, a.uri) and "Caroline leads Atlas today." in body(vault, a.uri)


def test_a_field_holding_a_marker_line_ends_no_block_and_the_note_does_not_grow(vault):
    """Text pasted from a note's body ("line a / <!-- /memlink:view --> / line b") is field
    text: the view ends where memlink ends it, and each later write renders it once."""
    a, b = make_pair(vault)
    content = f"line a\n{VIEW_CLOSE}\nline b\n{LINKS_CLOSE}\n{VIEW_OPEN}"
    for more in ("", "\n\nappended 1", "\n\nappended 1\n\nappended 2"):
        vault.write_note("entity", {"content": content + more}, uri=a.uri)
    vault.link(a.uri, b.uri, "related_to")
    text = body(vault, a.uri)
    assert text.count("line b") == 1 and text.count("appended 1") == 1, text
    assert vault.read_note(a.uri).fields["content"] == content + more  # the field holds what was written
    assert not [f for f in check(vault) if f.severity != "info"]


def test_a_hand_edit_survives_a_review_action_and_its_undo(sample):
    v = sample
    a, b = "events/2026/10/14/妈妈六十大寿.md", "entities/周秀兰.md"  # the sample's contradiction
    pair = [l for l in v.links.of(a, "links") if l.to_uri == b and l.link_type.value == "contradicts"]
    if not pair:
        a, b = b, a
    hand_edit(v, a)
    hand_edit(v, b)
    before = {u: v.path(u).read_bytes() for u in (a, b)}
    review(v, a, b, "keep-a")
    assert kept(v, a) and kept(v, b)
    assert "evolved_from [[" + b[:-3] in block_of(v, a) and "contradicts [[" + b[:-3] not in block_of(v, a)
    undo(v)
    assert {u: v.path(u).read_bytes() for u in (a, b)} == before  # byte for byte
    assert not [f for f in check(v) if f.severity == "error"]


def test_a_hand_edit_survives_a_dream(tmp_path):
    v = Vault.init(tmp_path / "v", name="t")
    v = set_llm(v.root, provider="rules")
    w = v.write_note
    cand = w("report_candidate", {"question": "Which kiln fits a small flat?", "status": "pending"}).uri
    w("entity", {"name": "Kiln studio", "content": "The studio kiln fires to cone 6 and fits a small flat."})
    hand_edit(v, cand)
    dream(v)
    note = v.read_note(cand)
    assert note.fields["status"] != "pending" and kept(v, cand)
    report = note.fields["report_uri"]
    assert f"[[{report[:-3]}|" in block_of(v, cand)  # the dream's link, in the same write


# -- (2) the Links block round-trips ----------------------------------------------------------
def test_the_links_block_round_trips_and_is_never_read_back(vault):
    a, b = make_pair(vault)
    vault.link(a.uri, b.uri, "related_to", weight=0.7, description="x" * 200)  # a long description is left out
    vault.link(b.uri, a.uri, "belongs_to", weight=0.9, description="Caroline's rule")
    hand_edit(vault, a.uri)
    text = vault.path(a.uri).read_bytes()
    vault.write_note("entity", {"content": a.fields["content"]}, uri=a.uri)  # unchanged: no write
    assert vault.refresh_links_blocks([a.uri, b.uri]) == []  # regenerated: the same text
    assert regenerate(vault).rewritten == []
    assert vault.path(a.uri).read_bytes() == text
    assert "x" * 90 not in block_of(vault, a.uri)
    assert block_of(vault, b.uri).splitlines()[-2] == "- belongs_to [[entities/caroline|Caroline]] (0.9) — Caroline's rule"
    # an edit inside the block is not a link: the next regeneration puts the block back
    path = vault.path(b.uri)
    path.write_text(path.read_text().replace("belongs_to [[entities/caroline|Caroline]]", "related_to [[entities/bob|Bob]]"))
    assert [l.link_type.value for l in vault.links.of(b.uri, "links")] == ["belongs_to"]
    assert vault.refresh_links_blocks([b.uri]) == [b.uri]
    assert "belongs_to [[entities/caroline|Caroline]]" in block_of(vault, b.uri) and "Bob" not in body(vault, b.uri)


def test_text_below_the_block_stays_below_it(vault):
    a, b = make_pair(vault)
    vault.link(a.uri, b.uri, "related_to")
    path = vault.path(a.uri)
    path.write_text(path.read_text() + "\nWritten under the links.\n")
    vault.link(a.uri, b.uri, "related_to", weight=0.5)  # merged: weight max stays 1
    vault.link(a.uri, b.uri, "caused_by", weight=0.6)
    text = body(vault, a.uri)
    assert text.index(LINKS_CLOSE) < text.index("Written under the links.") and "caused_by [[" in text


def test_search_snippets_and_anchors_ignore_the_links_block(vault):
    from engine.index import SearchIndex
    from engine.retrieve.search import search

    a = vault.write_note("entity", {"name": "Ana", "content": "Ana bakes bread on Sundays."})
    z = vault.write_note("entity", {"name": "Zyzzyva Corp", "content": "A company that makes kilns."})
    index = SearchIndex.for_vault(vault)
    index.sync()
    calls = []
    encode = index.embedder.encode
    index.embedder.encode = lambda texts: calls.append(list(texts)) or encode(texts)  # type: ignore[method-assign]
    vault.link(a.uri, z.uri, "belongs_to", description="works there")
    assert "[[entities/zyzzyva-corp|Zyzzyva Corp]]" in block_of(vault, a.uri)
    assert calls == [] and index.sync().changed == 0  # the Links block alone is not re-embedded
    hits = search(vault, "zyzzyva", k=5, routes=("keyword",), use_graph=False, use_names=False, index=index)
    assert [h.uri for h in hits] == [z.uri]  # the block's text is not indexed as Ana's
    assert "memlink" not in vault.read_body(a.uri) and "Zyzzyva" not in vault.read_note(a.uri).text
    with pytest.raises(LinkError):
        vault.link(a.uri, z.uri, "related_to", match_text="Zyzzyva Corp")  # only in the block: not an anchor


# -- (3) Obsidian resolves every edge ---------------------------------------------------------
WIKI = re.compile(r"\[\[([^\]|#^]+)(?:\|([^\]]*))?\]\]")
MDLINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+\.md)\)")


def obsidian_resolve(target: str, notes: dict[str, dict]) -> str | None:
    """How Obsidian finds a link's note: the vault-relative path (with or without .md),
    else the one note with that file name, else a note whose frontmatter `aliases` has it."""
    for cand in (target, target + ".md"):
        if cand in notes:
            return cand
    base = target.rsplit("/", 1)[-1]
    named = [u for u in notes if Path(u).stem == base or Path(u).name == base]
    if len(named) == 1:
        return named[0]
    aliased = [u for u, meta in notes.items() if target in (meta.get("aliases") or [])]
    return aliased[0] if len(aliased) == 1 else None


def obsidian_edges(root: Path) -> list[tuple[str, str, str]]:
    notes: dict[str, dict] = {}
    texts: dict[str, str] = {}
    for path in root.rglob("*.md"):
        rel = path.relative_to(root).as_posix()
        if rel.startswith((".", "sessions/", "dashboards/")) or rel in ("README.md", "DREAMS.md"):
            continue
        front, _body = split_frontmatter(path.read_text(encoding="utf-8"))
        notes[rel] = yaml.safe_load(front or "") or {}
        texts[rel] = _body or ""
    edges = []
    for uri, text in texts.items():
        span = links_span(text)
        if span is None:
            continue
        for line in text[span[0] : span[1]].splitlines():
            m = re.match(r"- (\w+) (.*) \([\d.]+\)", line)
            if not m:
                continue
            link_type, shown = m.groups()
            w = WIKI.search(shown)
            target = w.group(1) if w else unquote(MDLINK.search(shown).group(1))  # type: ignore[union-attr]
            resolved = obsidian_resolve(target, notes)
            assert resolved is not None, f"{uri}: Obsidian cannot resolve {shown}"
            edges.append((uri, resolved, link_type))
    return sorted(edges)


def test_obsidian_finds_every_outgoing_edge_of_the_sample_vault(tmp_path):
    root = tmp_path / "sample"
    shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns(".memlink"))
    v = Vault.open(root)
    regenerate(v)
    sidecar = sorted((l.from_uri, l.to_uri, l.link_type.value) for l in v.links.all())
    assert sidecar and obsidian_edges(root) == sidecar  # every edge, and no other
    assert regenerate(v).rewritten == []


def test_the_sample_vault_in_the_repository_is_regenerated():
    """The demo opens in Obsidian with its edges: `memlink obsidian` was run on it."""
    v = Vault.open(SAMPLE, read_only=True)
    assert obsidian_edges(SAMPLE) == sorted((l.from_uri, l.to_uri, l.link_type.value) for l in v.links.all())


def test_an_unsafe_path_becomes_a_markdown_link(vault):
    a, b = make_pair(vault)
    odd = vault.write_note("entity", {"name": "C#", "content": "A language."}, uri="entities/c#lang [x].md")
    vault.link(a.uri, odd.uri, "related_to")
    assert "[C#](entities/c%23lang%20%5Bx%5D.md)" in block_of(vault, a.uri)  # Obsidian decodes the path
    assert obsidian_edges(vault.root) == [(a.uri, odd.uri, "related_to")]


# -- (4) turned off ---------------------------------------------------------------------------
def test_turned_off_the_blocks_go_and_hand_edits_stay(vault):
    a, b = make_pair(vault)
    vault.link(a.uri, b.uri, "related_to")
    hand_edit(vault, a.uri)
    off = set_links_block(vault.root, False)
    assert regenerate(off).rewritten == [a.uri]
    assert LINKS_PREFIX not in body(off, a.uri) and kept(off, a.uri)
    off.link(b.uri, a.uri, "related_to")
    assert LINKS_PREFIX not in body(off, b.uri)
    assert obsidian_edges(off.root) == []
    on = set_links_block(vault.root, True)
    assert sorted(regenerate(on).rewritten) == sorted([a.uri, b.uri]) and kept(on, a.uri)
    assert len(obsidian_edges(on.root)) == 2


def test_turned_off_a_write_removes_the_block(vault):
    a, b = make_pair(vault)
    vault.link(a.uri, b.uri, "related_to")
    off = set_links_block(vault.root, False)
    off.write_note("entity", {"content": "Caroline leads Atlas."}, uri=a.uri)
    assert LINKS_PREFIX not in body(off, a.uri)


def test_the_cli_regenerates(tmp_path):
    from memlink_tui.cli import main

    root = tmp_path / "sample"
    shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns(".memlink"))
    for path in root.rglob("*.md"):  # as an older memlink wrote them: no blocks
        text = path.read_text(encoding="utf-8")
        if LINKS_PREFIX in text:
            span = links_span(text)
            assert span is not None
            text = text[: span[0]].rstrip("\n") + "\n" + text[span[1] :]
        path.write_text(text.replace(VIEW_OPEN + "\n", "").replace("\n" + VIEW_CLOSE, ""), encoding="utf-8")
    assert main(["--vault", str(root), "obsidian", "--dry-run"]) == 0
    assert not obsidian_edges(root)
    assert main(["--vault", str(root), "obsidian"]) == 0
    assert obsidian_edges(root) and main(["--vault", str(root), "check"]) == 0


def test_the_notes_of_a_folder_whose_links_cannot_be_read_keep_their_blocks(tmp_path):
    root = tmp_path / "sample"
    shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns(".memlink"))
    sidecar = root / "entities" / ".relations.json"
    sidecar.write_text(sidecar.read_text(encoding="utf-8").replace('{"id"', '{"id" oops', 1), encoding="utf-8")
    before = {p: p.read_bytes() for p in root.rglob("*.md")}
    done = regenerate(Vault.open(root))
    assert done.rewritten == [] and list(done.unreadable) == ["entities"]
    assert "the notes in entities left alone: entities/.relations.json: not valid JSON" in done.summary()
    assert {p: p.read_bytes() for p in root.rglob("*.md")} == before


def test_a_note_that_is_a_symbolic_link_is_left_alone_and_the_rest_regenerated(tmp_path):
    import os

    root = tmp_path / "sample"
    shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns(".memlink"))
    os.symlink("mochi.md", root / "entities" / "mochi-link.md")
    note = root / "profile.md"
    note.write_text(note.read_text(encoding="utf-8").replace(LINKS_PREFIX, "<!-- stale -->" + LINKS_PREFIX, 1),
                    encoding="utf-8")  # (a note after the link whose block needs writing)
    done = regenerate(Vault.open(root), batch=10)
    assert done.symlinks == ["entities/mochi-link.md"] and "profile.md" in done.rewritten
    assert (root / "entities" / "mochi-link.md").is_symlink()


# -- importing an Obsidian vault --------------------------------------------------------------
def test_ingesting_an_obsidian_vault_keeps_folders_tags_aliases_and_links(vault, tmp_path):
    from engine.extract.batch import ingest_batch
    from engine.extract.rules import RulesExtractor

    src = tmp_path / "MyObsidian"
    files = {
        "People/Pieter de Vries.md": "---\naliases: [Pieter, PdV]\ntags: [colleague]\n---\n"
                                     "Pieter works at [[Havenlink]]. He leads BPv2 with [[Marieke]].\n",
        "People/Marieke Bos.md": "---\naliases: Marieke\n---\nMarieke is the customer's project lead.\n",
        "Companies/Havenlink.md": "---\ntags: [company, logistics]\n---\nA port software company.\n",
        "Projects/BPv2.md": "---\ntags:\n  - '#person'\n---\nThe berth planner; [[PdV]] runs it.\n",
    }
    for rel, text in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text, encoding="utf-8")
    result = ingest_batch(vault, [src], wiki=False, extractor=RulesExtractor())
    uris = {Path(f.path).stem: f.source_uri for f in result.files}
    pieter = vault.read_note(uris["Pieter de Vries"])
    assert pieter.fields["kind"] == "person" and pieter.extra["folder"] == "People"  # the folder's meaning
    assert pieter.extra["tags"] == ["colleague"] and pieter.extra["aliases"] == ["Pieter", "PdV"]  # where Obsidian reads them
    assert vault.read_note(uris["Havenlink"]).fields["kind"] == "company"  # from the folder (and its tag)
    assert vault.read_note(uris["BPv2"]).fields["kind"] == "person"  # a tag says more than a folder
    out = {l.to_uri: l.link_type.value for l in vault.links.of(uris["Pieter de Vries"], "links")}
    assert out[uris["Havenlink"]] == "belongs_to" and uris["Marieke Bos"] in out  # [[Marieke]]: an alias
    assert uris["Pieter de Vries"] in {l.to_uri for l in vault.links.of(uris["BPv2"], "links")}  # [[PdV]]
    assert not result.unresolved
    assert f"[[{uris['Havenlink'][:-3]}|Havenlink]]" in block_of(vault, uris["Pieter de Vries"])


def test_a_note_with_crlf_line_ends_keeps_them_when_its_links_block_changes(tmp_path):
    root = tmp_path / "sample"
    shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns(".memlink"))
    note = root / "entities" / "mochi.md"
    crlf = note.read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
    note.write_bytes(crlf)
    v = Vault.open(root)
    v.link("entities/mochi.md", "entities/hangzhou.md", "related_to")
    data = note.read_bytes()
    assert b"[[entities/hangzhou|Hangzhou]]" in data and data.count(b"\n") == data.count(b"\r\n")
    v.unlink("entities/mochi.md", "entities/hangzhou.md")
    assert note.read_bytes() == crlf
