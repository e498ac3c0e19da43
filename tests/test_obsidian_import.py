"""Importing an Obsidian vault: its links read by Obsidian's rules (one small page per
rule: tests/data/obsidian-mini, whose README lists the cases), a generated vault of a few
hundred notes checked by an independent resolver, and ingest as a sync (edit, revert,
move, delete, prune, undo, dry run)."""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import random
import re
import shutil
import urllib.parse
from pathlib import Path

import pytest
from conftest import ingested, memlink, set_llm
from test_linked_pages import write

from engine import Vault
from engine.extract.batch import ingest_batch
from engine.extract.rules import RulesExtractor
from engine.model.blocks import VIEW_OPEN

MINI = Path(__file__).parent / "data" / "obsidian-mini" / "vault"
RULES = RulesExtractor()


def cli_vault(tmp_path: Path) -> Path:
    root = tmp_path / "v"
    assert memlink("init", vault=root).returncode == 0
    set_llm(root, provider="rules")
    return root


def out_links(v: Vault, uri: str) -> dict[str, str | None]:
    """to -> line ranges of the note's outgoing links."""
    return {l.to_uri: l.t_line_ranges for l in v.links.of(uri, "links")}


# -- the mini vault: one page per rule --------------------------------------------------------
@pytest.fixture(scope="module")
def mini(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mini")
    v = Vault.init(tmp / "vault", name="test")
    result = ingest_batch(v, [MINI], extractor=RULES)
    return v, result


def s(rel: str) -> str:
    return f"sources/vault/{rel}.md"


LINKS = [  # (case, from, to, line ranges of the anchor or None)
    (1, "Alpha", "Beta", None),
    (2, "Alpha", "Gamma", "3-5"),  # the section "## Section" of Gamma's text
    (3, "Alpha", "Delta", "1"),  # the line holding ^blk
    (4, "Alpha", "Epsilon", None),
    (5, "Alpha", "Zeta", None),
    (6, "Alpha", "Eta", None),
    (7, "Alpha", "Folder/Theta", None),
    (8, "Alpha", "Folder/Iota", None),
    (9, "Alpha", "Café", None),
    (13, "Indexes/Matemática", "Notes/Funções", None),
    (14, "Concepts/variance", "Concepts/sampling", None),
    (15, "Concepts/calculus", "Concepts/math", None),
]


@pytest.mark.parametrize("case,src,dst,lines", LINKS, ids=[f"case-{c[0]}" for c in LINKS])
def test_each_link_of_the_mini_vault_is_the_one_obsidian_makes(mini, case, src, dst, lines):
    v, _ = mini
    assert out_links(v, s(src)).get(s(dst), "absent") == lines


def test_the_file_name_wins_over_a_heading_and_an_alias(mini):
    v, _ = mini
    assert set(out_links(v, s("Indexes/Matemática"))) == {s("Notes/Funções"), s("Notes/ULA")}  # case 13
    assert set(out_links(v, s("Concepts/variance"))) == {s("Concepts/sampling")}  # case 14
    assert set(out_links(v, s("Concepts/calculus"))) == {s("Concepts/math")}  # case 15


def test_code_attachments_and_frontmatter_are_not_references(mini):
    v, result = mini
    assert not result.unresolved and not result.ambiguous  # cases 10, 11, 12
    assert result.attachments == 1 and result.copied == ["sources/vault/Attachments/diagram.png"]  # case 11
    assert (v.root / "sources/vault/Attachments/diagram.png").read_bytes() == (MINI / "Attachments/diagram.png").read_bytes()
    assert out_links(v, s("Tagged")) == {s("Alpha"): None}  # case 12: only its text's [[Alpha]]
    tagged = v.read_note(s("Tagged"))
    assert tagged.extra["tags"] == ["topics/alpha"]  # at the top of the frontmatter, where Obsidian reads them
    assert tagged.extra["properties"] == {"permalink": "folder/tagged"}  # the rest of its frontmatter, as written
    assert "[[Inline Code Example]]" not in json.dumps(result.to_json())  # case 10


def test_an_alias_only_match_is_said_and_tag_like_aliases_are_no_names(mini):
    v, result = mini
    assert result.by_alias == [{"file": str(MINI / "Alpha.md"), "line": 11, "ref": "[[Ω]]", "to": s("Omega")}]
    assert v.read_note(s("Omega")).extra["aliases"] == ["Ω"]
    assert "aliases" not in v.read_note(s("Concepts/learning math")).extra  # "#learning/math" is a tag, not a name


@pytest.mark.parametrize("rel,title", [("Shell notes", "Shell notes"), ("Section clash", "Section clash"),
                                       ("20-20-20 rule", "20-20-20 rule"), ("Café", "Café"),
                                       ("Beta", "Beta"), ("Concepts/math", "Mathematics")],
                         ids=["16-code-comment", "17-section", "18-hyphens", "19-accent", "heading", "frontmatter"])
def test_titles_are_the_file_name_or_the_frontmatter_title(mini, rel, title):
    v, _ = mini
    assert v.read_note(s(rel)).fields["title"] == title


def test_the_imported_vault_keeps_every_page_where_obsidian_finds_it(mini):
    v, _ = mini
    pages = sorted(p.relative_to(MINI).as_posix() for p in MINI.rglob("*.md"))
    assert all(v.exists(f"sources/vault/{rel}") for rel in pages)
    assert memlink("check", vault=v.root).returncode == 0


# -- a generated vault of a few hundred notes, read by an independent resolver ---------------
ATTACH = (".png", ".pdf", ".canvas")


def obsidian_target(link: str, source: str, files: list[str]) -> str | None:
    """Where Obsidian's rules send a link written in ``source`` (paths relative to the
    vault, with extensions), written apart from memlink's resolver: a relative path from
    the source's folder, a path from the root or the end of one, then a unique file name
    (the source's folder first, else the shortest path); case-insensitive."""
    target = urllib.parse.unquote(link.split("#", 1)[0]).rstrip("\\").strip()
    if not target:
        return None
    name = target if target.lower().endswith((".md", *ATTACH)) else target + ".md"
    lower = {f.lower(): f for f in files}
    if name.startswith(("./", "../")):
        return lower.get(posixpath.normpath(posixpath.join(posixpath.dirname(source), name)).lower())
    if name.lower() in lower:
        return lower[name.lower()]
    ends = [f for f in files if f.lower().endswith("/" + name.lower())]
    if not ends:
        return None
    here = [f for f in ends if posixpath.dirname(f) == posixpath.dirname(source)]
    if here:
        return here[0]
    depth = min(f.count("/") for f in ends)
    best = [f for f in ends if f.count("/") == depth]
    return best[0] if len(best) == 1 else None


_CODE = re.compile(r"```.*?```|`[^`\n]+`", re.S)
_LINK = re.compile(r"!?\[\[([^\]|\n]+)(?:\|[^\]\n]*)?\]\]|(?<!!)\[[^\]\n]+\]\(([^)\s]+)\)")


def links_in(text: str) -> list[str]:
    """The link targets a page's own text writes (not in code)."""
    text = _CODE.sub("", text)
    return [m[1] or m[2] for m in _LINK.finditer(text)]


def generate_vault(root: Path, n: int = 300, seed: int = 7) -> dict[str, str]:
    """An Obsidian-like vault: folders, the same heading ("References") in many notes,
    `#` comments in code blocks, aliases (some tag-like), hierarchical tags, permalinks,
    inline code, attachments, embeds, relative and folder links, a few missing targets."""
    rnd = random.Random(seed)
    folders = ["", "Projects", "Projects/Archive", "People", "Concepts", "Concepts/Math", "Daily"]
    names = [f"{rnd.choice(['Note', 'Idea', 'Topic', 'Plan'])} {i}" for i in range(n)]
    for i in range(1, n, 9):
        names[i] = f"{i}-{i + 1}-{i + 2} rule"  # hyphens kept
    for i in range(2, n, 11):
        names[i] = f"Café {i}"
    rels = [posixpath.join(rnd.choice(folders), f"{name}.md") for name in names]
    for k, folder in zip(range(3, n, 40), folders, strict=False):  # one name in several folders
        rels[k] = posixpath.join(folder, "Index.md")
    (root / "Attachments").mkdir(parents=True)
    files = {"Attachments/diagram.png": b"\x89PNG\r\n\x1a\n", "Attachments/Ceph.pdf": b"%PDF-1.4\n",
             "board.canvas": b'{"nodes": []}'}
    for rel, data in files.items():
        (root / rel).write_bytes(data)
    texts: dict[str, str] = {}
    for i, rel in enumerate(rels):
        front = []
        if i % 5 == 0:
            front += ["aliases:", f"  - Alias {i}"] + (["  - '#area/topic'"] if i % 10 == 0 else [])
        if i % 3 == 0:
            front += ["tags:", f"  - area/sub{i % 7}", "  - status/open"]
        if i % 4 == 0:
            front += [f"permalink: {posixpath.dirname(rel) or 'root'}/page-{i}"]
        if i % 17 == 0:
            front += [f"title: Custom title {i}"]
        lines = (["---", *front, "---"] if front else []) + [f"Text of page {i}. ^b{i}", ""]
        for _ in range(rnd.randint(2, 6)):
            j = rnd.randrange(n)
            stem, there = posixpath.splitext(posixpath.basename(rels[j]))[0], posixpath.dirname(rels[j])
            form = rnd.randrange(7)
            if form == 0:
                lines.append(f"See [[{stem}]].")
            elif form == 1:
                lines.append(f"A section: [[{stem}#References]].")
            elif form == 2:
                lines.append(f"A block: ![[{stem}#^b{j}]]")
            elif form == 3:
                lines.append(f"Shown: [[{stem}|the page]].")
            elif form == 4 and there:
                lines.append(f"Folder: [[{there}/{stem}]].")
            elif form == 5 and there == posixpath.dirname(rel):
                lines.append(f"Here: [[./{stem}|{stem}]].")
            else:
                up = posixpath.relpath(rels[j], posixpath.dirname(rel) or ".")
                lines.append(f"Markdown: [{stem}]({urllib.parse.quote(up)}).")
        lines += ["", "Image: ![[diagram.png]]; a PDF: [[Ceph.pdf]]; a board: [[board.canvas]].",
                  f"Inline code: `[[Not a link {i}]]` and `#tag/inline`.", "", "```bash", "# References", f"echo [[Code {i}]]",
                  "```", "", "## References", "", f"- [[{stem if (stem := names[(i + 1) % n]) else ''}]]"]
        if i % 50 == 7:
            lines.append(f"- [[Ghost {i}]]")  # truly missing: reported
        text = "\n".join(lines) + "\n"
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        texts[rel] = text
    return texts


def vault_files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                  if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts))


def test_a_generated_obsidian_vault_still_resolves_in_obsidian_after_import(tmp_path):
    src = tmp_path / "garden"
    texts = generate_vault(src)
    v = Vault.init(tmp_path / "vault", name="test")
    result = ingest_batch(v, [src], extractor=RULES)
    assert not result.failed and not result.pending
    source_files = vault_files(src)
    in_vault = vault_files(v.root)
    # Every link of the pages' own text, resolved by Obsidian in the folder and in the vault.
    total = same = 0
    truly_missing = []
    for rel, text in texts.items():
        uri = f"sources/garden/{rel}"
        note = v.read_note(uri)
        assert note.fields["content"] == text.split("---\n", 2)[-1].strip() if text.startswith("---") else text.strip()
        for link in links_in(note.fields["content"]):
            there = obsidian_target(link, rel, source_files)
            if there is None:
                truly_missing.append(link)
                continue
            total += 1
            same += obsidian_target(link, uri, in_vault) == f"sources/garden/{there}"
    assert total > 1000 and same / total >= 0.98, (same, total)
    # Titles: the file name or the frontmatter's title, never a heading.
    for rel, text in texts.items():
        title = v.read_note(f"sources/garden/{rel}").fields["title"]
        m = re.search(r"^title: (.*)$", text.split("\n---\n", 1)[0], re.M) if text.startswith("---") else None
        assert title == (m[1] if m else posixpath.splitext(posixpath.basename(rel))[0])
    # False "unresolved" reports: permalinks, tags, inline code, code blocks, attachments.
    traps = sum(4 + text.count("permalink:") + text.count("  - area/") + text.count("status/") for text in texts.values())
    reported = [re.sub(r"^!?\[\[|[#|].*$|\]\]$", "", u["ref"]) for u in result.unresolved]
    assert sorted(reported) == sorted(truly_missing)  # every true one is reported …
    false = [r for r in reported if r not in truly_missing]
    assert traps > 1000 and len(false) <= 0.05 * traps  # … and (next to none of) the rest
    # Re-ingesting after removing one link from one file removes that link.
    def once(rel: str) -> tuple[str, str] | None:
        m = re.search(r"See \[\[([^\]]+)\]\]", texts[rel])
        if m is None or texts[rel].count(m[1]) != 1 or obsidian_target(m[1], rel, source_files) in (None, rel):
            return None
        return m[1], f"sources/garden/{obsidian_target(m[1], rel, source_files)}"
    rel, (target, there) = next((r, hit) for r in texts if (hit := once(r)))
    uri = f"sources/garden/{rel}"
    assert there in out_links(v, uri)
    (src / rel).write_text(texts[rel].replace(f"See [[{target}]].", "See nothing."), encoding="utf-8")
    again = ingest_batch(v, [src], extractor=RULES)
    assert again.changed == [uri] and there not in out_links(v, uri)
    assert {"from": uri, "to": there} in again.links_removed


# -- ingest as a sync --------------------------------------------------------------------------
def snapshot(root: Path) -> str:
    """A hash of every file of the vault but its derived state."""
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if path.is_file() and rel.parts[0] != ".memlink":
            h.update(str(rel).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def test_a_link_a_person_changed_is_neither_rewritten_nor_removed_by_a_reimport(tmp_path):
    root = cli_vault(tmp_path)
    src = write(tmp_path / "docs", {"Apollo.md": "# Apollo\n\nApollo is run by [[Jane Doe]].\n",
                                    "Jane Doe.md": "# Jane Doe\n\nAn engineer.\n"})
    apollo, jane = "sources/docs/Apollo.md", "sources/docs/Jane Doe.md"
    assert memlink("ingest", str(src), vault=root).returncode == 0
    r = memlink("link", apollo, jane, "--update", "--description", "Jane leads Apollo since 2024", vault=root)
    assert r.returncode == 0, r.stderr

    def the_link() -> tuple[str, float]:
        link = next(l for l in Vault.open(root).links.of(apollo, "links") if l.to_uri == jane)
        return link.description, link.weight

    # The file changes around the reference: the description the person wrote stays.
    (src / "Apollo.md").write_text("# Apollo\n\nApollo is run by [[Jane Doe]]. Budget: 2M.\n", encoding="utf-8")
    r = memlink("ingest", str(src), "--json", vault=root)
    assert r.returncode == 0 and json.loads(r.stdout)["changed"] == [apollo]
    assert the_link() == ("Jane leads Apollo since 2024", 0.6)
    # The file no longer names her: the link stays, and the import says so.
    (src / "Apollo.md").write_text("# Apollo\n\nApollo is run by Jane. Budget: 3M.\n", encoding="utf-8")
    r = memlink("ingest", str(src), vault=root)
    assert r.returncode == 0, r.stderr
    assert (f"{apollo} -> {jane}: its file no longer states it; kept, as a person changed it (`memlink unlink` "
            "removes it)") in r.stdout and " removed," not in r.stdout
    assert the_link() == ("Jane leads Apollo since 2024", 0.6)
    # Narrowed by the person to lines of her note: the file still names her, so nothing is said, nor linked twice.
    assert memlink("link", apollo, jane, "--update", "--t-lines", "1", vault=root).returncode == 0
    (src / "Apollo.md").write_text("# Apollo\n\nApollo is run by [[Jane Doe]]. Budget: 4M.\n", encoding="utf-8")
    r = memlink("ingest", str(src), vault=root)
    assert r.returncode == 0 and "kept, as a person changed it" not in r.stdout
    assert [l.t_line_ranges for l in Vault.open(root).links.of(apollo, "links")] == ["1"]
    # A link the import made and no one changed still goes with its reference.
    (src / "Jane Doe.md").write_text("# Jane Doe\n\nAn engineer on [[Apollo]].\n", encoding="utf-8")
    assert memlink("ingest", str(src), vault=root).returncode == 0
    (src / "Jane Doe.md").write_text("# Jane Doe\n\nAn engineer.\n", encoding="utf-8")
    out = json.loads(memlink("ingest", str(src), "--json", vault=root).stdout)
    assert out["links_removed"] == [{"from": jane, "to": apollo}] and out["links_kept_for_you"] == []


def test_a_pair_a_person_unlinked_is_not_linked_again_by_a_reimport_until_they_link_it(tmp_path):
    root = cli_vault(tmp_path)
    src = write(tmp_path / "g", {"Kickoff.md": '---\nattendees: ["[[Ann]]"]\n---\nKickoff with [[Bob]].\n',
                                 "Ann.md": "Ann.\n", "Bob.md": "Bob.\n"})
    kickoff, ann, bob = "sources/g/Kickoff.md", "sources/g/Ann.md", "sources/g/Bob.md"
    assert memlink("ingest", str(src), vault=root).returncode == 0
    for target in (ann, bob):
        assert memlink("unlink", kickoff, target, vault=root).returncode == 0
    # A property added in Obsidian, then the text changed around the reference: neither link comes back.
    (src / "Kickoff.md").write_text('---\nattendees: ["[[Ann]]"]\ndate: 2024-03-05\n---\nKickoff with [[Bob]].\n',
                                    encoding="utf-8")
    assert memlink("ingest", str(src), vault=root).returncode == 0
    (src / "Kickoff.md").write_text('---\nattendees: ["[[Ann]]"]\ndate: 2024-03-05\n---\nKickoff with [[Bob]], late.\n',
                                    encoding="utf-8")
    out = json.loads(memlink("ingest", str(src), "--json", vault=root).stdout)
    assert out["changed"] == [kickoff] and out["links_added"] == []
    assert out_links(Vault.open(root), kickoff) == {}
    # The person links the pair again: it is linked.
    assert memlink("link", kickoff, bob, "--type", "related_to", vault=root).returncode == 0
    assert set(out_links(Vault.open(root), kickoff)) == {bob}


def test_a_file_whose_properties_alone_changed_is_reported_changed_with_the_links_it_gained_and_lost(tmp_path):
    root = cli_vault(tmp_path)
    src = write(tmp_path / "g", {"Kickoff.md": '---\nproject: "[[Apollo]]"\n---\nKickoff.\n',
                                 "Apollo.md": "Apollo.\n", "Hermes.md": "Hermes.\n"})
    kickoff = "sources/g/Kickoff.md"
    assert memlink("ingest", str(src), vault=root).returncode == 0
    (src / "Kickoff.md").write_text('---\nproject: "[[Hermes]]"\n---\nKickoff.\n', encoding="utf-8")
    dry = json.loads(memlink("ingest", str(src), "--dry-run", "--json", vault=root).stdout)
    assert dry["changed"] == [kickoff] and all(s["path"] != str(src / "Kickoff.md") for s in dry["skipped"])
    r = memlink("ingest", str(src), vault=root)
    assert r.returncode == 0 and "Kickoff.md: skipped" not in r.stdout
    assert f"  ~ {kickoff}: its file changed since the last import; updated" in r.stdout
    assert f"  - {kickoff} -> sources/g/Apollo.md: its file no longer states it; removed" in r.stdout
    assert f"-> {kickoff} -[related_to · referenced in the project property]-> sources/g/Hermes.md" in r.stdout
    assert set(out_links(Vault.open(root), kickoff)) == {"sources/g/Hermes.md"}


def test_a_folder_inside_one_imported_before_syncs_the_same_notes(tmp_path):
    v = Vault.init(tmp_path / "vault", name="test")
    src = write(tmp_path / "g7", {"People/Ann.md": "Ann. Knows [[Bob]].\n", "People/Bob.md": "Bob.\n",
                                  "Projects/X.md": "X. See [[Ann]].\n"})
    ingest_batch(v, [src], extractor=RULES)
    ann = v.read_note("sources/g7/People/Ann.md")
    (src / "People" / "Bob.md").write_text("Bob moved to Berlin.\n", encoding="utf-8")
    write(src, {"People/Cy.md": "Cy works with [[Ann]].\n"})
    result = ingest_batch(v, [src / "People"], extractor=RULES, prune=True)
    assert result.changed == ["sources/g7/People/Bob.md"] and not result.deleted and not result.pruned
    assert [f.source_uri for f in result.files if not f.skipped] == ["sources/g7/People/Bob.md", "sources/g7/People/Cy.md"]
    assert sorted(p.relative_to(v.root / "sources").as_posix() for p in (v.root / "sources").rglob("*.md")) == [
        "g7/People/Ann.md", "g7/People/Bob.md", "g7/People/Cy.md", "g7/Projects/X.md"]
    assert v.read_note("sources/g7/People/Ann.md") == ann  # its kind and folder as the first import said
    assert "sources/g7/People/Ann.md" in out_links(v, "sources/g7/People/Cy.md")
    ingest_batch(v, [src / "People" / "Aaron.md" if (src / "People" / "Aaron.md").exists() else
                     write(src, {"People/Aaron.md": "Aaron.\n"}) / "People" / "Aaron.md"], extractor=RULES)
    ingest_batch(v, [src / "People"], extractor=RULES)  # (a file of it imported alone since: still that import's folder)
    assert not (v.root / "sources" / "People").exists()


def test_notes_a_person_moved_stay_where_they_put_them_when_the_imported_folder_moves(tmp_path):
    root = cli_vault(tmp_path)
    src = write(tmp_path / "old" / "garden", {"Ann.md": "Ann is here.\n", "Ideas.md": "Ideas: ask [[Ann]].\n"})
    assert memlink("ingest", str(src), vault=root).returncode == 0
    for old, new in (("sources/garden/Ideas.md", "sources/garden/Archive/Ideas 2024.md"),
                     ("sources/garden/Ann.md", "entities/ann.md")):
        assert memlink("mv", old, new, vault=root).returncode == 0
    moved = tmp_path / "new" / "garden"  # (a new machine, a restored backup)
    moved.parent.mkdir()
    src.rename(moved)
    (moved / "Ann.md").write_text("Ann is here. She moved to Berlin.\n", encoding="utf-8")
    out = json.loads(memlink("ingest", str(moved), "--prune", "--json", vault=root).stdout)
    assert out["changed"] == ["entities/ann.md"] and not out["renamed"] and not out["deleted"] and not out["pruned"]
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md") if ".memlink" not in p.parts) == [
        "entities/ann.md", "sources/garden/Archive/Ideas 2024.md"]
    assert "Berlin" in Vault.open(root).read_note("entities/ann.md").fields["content"]


def test_a_folder_of_the_same_name_never_takes_the_note_of_another_import_s_file(tmp_path):
    root = cli_vault(tmp_path)
    a = write(tmp_path / "a" / "garden", {"Ann.md": "Ann from A.\n"})
    b = write(tmp_path / "b" / "garden", {"Other.md": "Other from B.\n"})
    for folder in (a, b):
        assert memlink("ingest", str(folder), vault=root).returncode == 0
    assert memlink("mv", "sources/garden/Ann.md", "entities/ann.md", vault=root).returncode == 0
    shutil.rmtree(a)
    write(b, {"Ann.md": "Ann from B.\n"})
    assert memlink("ingest", str(b), vault=root).returncode == 0
    v = Vault.open(root)
    assert v.read_note("entities/ann.md").fields["content"] == "Ann from A."
    assert v.read_note("sources/garden-2/Ann.md").fields["content"] == "Ann from B."


def test_the_reingest_journey_edit_revert_move_delete_prune_undo(tmp_path):
    root = cli_vault(tmp_path)
    src = tmp_path / "a" / "notes"
    shutil.copytree(MINI, src)
    alpha = "sources/notes/Alpha.md"
    r = memlink("ingest", str(src), vault=root)
    assert r.returncode == 0 and "0 unresolved references, 1 matched by an alias only, 1 attachment links (1 files copied)" in r.stdout
    assert f"{src / 'Alpha.md'}:11: [[Ω]] matched sources/notes/Omega.md by an alias only" in r.stdout
    assert s("Café").replace("vault", "notes") in out_links(Vault.open(root), alpha)
    first = snapshot(root)
    # A dry run writes nothing.
    text = (src / "Alpha.md").read_text(encoding="utf-8")
    (src / "Alpha.md").write_text(text.replace("Non-ASCII: [[Café]].", "Non-ASCII: none."), encoding="utf-8")
    r = memlink("ingest", str(src), "--dry-run", "--json", vault=root)
    assert r.returncode == 0 and json.loads(r.stdout)["changed"] == [alpha]
    assert snapshot(root) == first
    # Edit a link out: the link goes.
    r = memlink("ingest", str(src), "--json", vault=root)
    out = json.loads(r.stdout)
    assert out["changed"] == [alpha] and out["links_removed"] == [{"from": alpha, "to": "sources/notes/Café.md"}]
    assert "sources/notes/Café.md" not in out_links(Vault.open(root), alpha)
    assert "sources/notes/Café.md" not in {l.from_uri for l in Vault.open(root).links.of("sources/notes/Café.md", "backlinks")}
    # Revert: imported again, the link is back.
    (src / "Alpha.md").write_text(text, encoding="utf-8")
    out = json.loads(memlink("ingest", str(src), "--json", vault=root).stdout)
    assert out["changed"] == [alpha] and "sources/notes/Café.md" in out_links(Vault.open(root), alpha)
    # The same folder from another place: the same notes, nothing new.
    moved = tmp_path / "b" / "notes"
    moved.parent.mkdir()
    shutil.move(src, moved)
    before = sorted(Vault.open(root).catalog.uris())
    out = json.loads(memlink("ingest", str(moved), "--json", vault=root).stdout)
    assert not out["changed"] and not out["deleted"] and sorted(Vault.open(root).catalog.uris()) == before
    assert all(f["skipped"] for f in out["files"])
    # Delete one file, rename another: reported; --prune moves and removes; undo puts them back.
    (moved / "Eta.md").unlink()
    (moved / "Zeta.md").rename(moved / "Zeta renamed.md")
    out = json.loads(memlink("ingest", str(moved), "--dry-run", "--json", vault=root).stdout)
    assert [d["source"] for d in out["deleted"]] == ["sources/notes/Eta.md"]
    assert out["renamed"] == [{"from": "sources/notes/Zeta.md", "to": "sources/notes/Zeta renamed.md",
                               "path": str(moved / "Zeta renamed.md")}]
    r = memlink("ingest", str(moved), vault=root)
    assert "Eta.md: no longer in the folder; sources/notes/Eta.md kept (--prune removes it)" in r.stdout
    r = memlink("ingest", str(moved), "--dry-run", "--prune", vault=root)
    assert "sources/notes/Eta.md would be removed" in r.stdout and "dry run, nothing written" in r.stdout
    assert Vault.open(root).exists("sources/notes/Eta.md")
    r = memlink("ingest", str(moved), "--prune", vault=root)
    assert r.returncode == 0 and "sources/notes/Eta.md removed" in r.stdout
    v = Vault.open(root)
    assert not v.exists("sources/notes/Eta.md") and not v.exists("sources/notes/Zeta.md")
    assert v.exists("sources/notes/Zeta renamed.md")
    assert memlink("undo", vault=root).returncode == 0  # the removal
    v = Vault.open(root)
    assert v.exists("sources/notes/Eta.md") and "sources/notes/Eta.md" in out_links(v, alpha)
    assert v.exists("sources/notes/Zeta renamed.md")  # (the move stays: its note was synced from the file since)
    assert memlink("check", vault=root).returncode == 0


def test_each_count_of_a_sync_counts_only_what_it_names(tmp_path):
    root = cli_vault(tmp_path)
    src = write(tmp_path / "notes", {**{f"{n}.md": f"page {n} says little.\n" for n in "abcd"},
                                     "home.md": "see [[ghost]] and [[index]].\n", "x/index.md": "one.\n",
                                     "y/index.md": "two.\n"})
    r = memlink("ingest", str(src), vault=root)
    assert f"{src / 'home.md'}: 1 note created, 0 changed, 0 links added, 1 reference to missing notes, 1 ambiguous" in r.stdout
    (src / "a.md").rename(src / "a2.md")
    (src / "b.md").rename(src / "b2.md")
    (src / "c.md").unlink()
    (src / "d.md").unlink()
    r = memlink("ingest", str(src), "--dry-run", vault=root)
    assert "0 new, 0 changed, 3 unchanged or skipped, 0 edited in the vault, 2 deleted, 2 renamed" in r.stdout
    out = json.loads(memlink("ingest", str(src), "--dry-run", "--json", vault=root).stdout)
    assert (len(out["files"]), len(out["skipped"]), len(out["deleted"]), len(out["renamed"])) == (0, 3, 2, 2)
    (src / "home.md").write_text("see [[ghost]], [[phantom]] and [[index]].\n", encoding="utf-8")
    r = memlink("ingest", str(src), vault=root)
    assert f"{src / 'home.md'}: 0 notes created, 1 changed, 0 links added, 2 references to missing notes, 1 ambiguous" in r.stdout
    (src / "home.md").write_text("see [[ghost]], [[phantom]] and [[index]] again.\n", encoding="utf-8")
    out = json.loads(memlink("ingest", str(src), "--json", vault=root).stdout)
    report = next(f["report"] for f in out["files"] if f["source"] == "sources/notes/home.md")
    assert [len(report[k]) for k in ("created", "changed", "unresolved", "ambiguous")] == [0, 1, 2, 1]
    assert (len(out["unresolved"]), len(out["ambiguous"])) == (2, 1)


def test_a_note_edited_in_the_vault_is_reported_and_left(tmp_path):
    root = cli_vault(tmp_path)
    src = tmp_path / "notes"
    shutil.copytree(MINI, src)
    assert memlink("ingest", str(src), vault=root).returncode == 0
    note = root / "sources/notes/Beta.md"
    head, body = note.read_text(encoding="utf-8").split("\n---\n", 1)
    mine = head + "\n---\n" + body.replace("Beta text.", "Beta text, and a line I wrote.")  # in Obsidian: the body
    note.write_text(mine, encoding="utf-8")
    (src / "Beta.md").write_text("# Beta\n\nBeta text, changed at the source.\n", encoding="utf-8")
    out = json.loads(memlink("ingest", str(src), "--json", vault=root).stdout)
    assert out["edited"] == [{"path": str(src / "Beta.md"), "source": "sources/notes/Beta.md"}]
    assert note.read_text(encoding="utf-8") == mine


def test_files_given_one_by_one_keep_their_names(tmp_path):
    v = Vault.init(tmp_path / "vault", name="test")
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "Offsite notes.md").write_text("# Agenda\n\nWe met.\n", encoding="utf-8")
    result = ingest_batch(v, [tmp_path / "in" / "Offsite notes.md"], extractor=RULES)
    assert [f.source_uri for f in result.files] == ["sources/Offsite notes.md"]
    assert v.read_note("sources/Offsite notes.md").fields["title"] == "Offsite notes"
    os.replace(tmp_path / "in", tmp_path / "elsewhere")  # the same file from another place: the same note
    again = ingest_batch(v, [tmp_path / "elsewhere" / "Offsite notes.md"], extractor=RULES)
    assert again.files[0].skipped == "already imported as sources/Offsite notes.md"


def test_another_folder_of_the_same_name_is_another_import(tmp_path):
    v = Vault.init(tmp_path / "vault", name="test")
    one = tmp_path / "one" / "notes"
    two = tmp_path / "two" / "notes"
    for folder, text in ((one, "First folder."), (two, "Second folder.")):
        folder.mkdir(parents=True)
        (folder / "Plan.md").write_text(text + "\n", encoding="utf-8")
    ingest_batch(v, [one], extractor=RULES)
    result = ingest_batch(v, [two], extractor=RULES)  # the first folder is still there: not this one, moved
    assert [f.source_uri for f in result.files] == ["sources/notes-2/Plan.md"] and not result.deleted
    assert v.read_note("sources/notes/Plan.md").fields["content"] == "First folder."
    assert ingest_batch(v, [one], extractor=RULES).files[0].skipped == "already imported as sources/notes/Plan.md"


def mcp_edit(v: Vault, uri: str, text: str) -> None:
    """What memlink_mcp's edit_note does: the note's text field rewritten, its view rendered again."""
    note = v.read_note(uri)
    with v.transaction():
        v.write_note(note.memory_type, {**note.fields, "content": text}, uri=uri, replace=True)


def test_another_file_of_the_same_name_gets_its_own_note(tmp_path):
    v = Vault.init(tmp_path / "vault", name="test")
    for folder, text in (("a", "Buy milk."), ("b", "Call the bank.")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "todo.md").write_text(text + "\n", encoding="utf-8")
    ingest_batch(v, [tmp_path / "a" / "todo.md"], extractor=RULES)
    result = ingest_batch(v, [tmp_path / "b" / "todo.md"], extractor=RULES)  # a/todo.md is still there
    assert [f.source_uri for f in result.files] == ["sources/todo-2.md"] and not result.changed
    assert v.read_note("sources/todo.md").fields["content"] == "Buy milk."
    assert v.read_note("sources/todo-2.md").fields["content"] == "Call the bank."
    again = ingest_batch(v, [tmp_path / "b" / "todo.md"], extractor=RULES)
    assert again.files[0].skipped == "already imported as sources/todo-2.md"


def test_an_edit_made_through_memlink_survives_a_sync_of_the_unchanged_file(tmp_path):
    v = Vault.init(tmp_path / "vault", name="test")
    src = tmp_path / "notes"
    shutil.copytree(MINI, src)
    ingest_batch(v, [src], extractor=RULES)
    mcp_edit(v, "sources/notes/Beta.md", "# Beta\n\nBeta text, and what I added.")
    result = ingest_batch(v, [src], extractor=RULES)
    assert result.edited == [{"path": str(src / "Beta.md"), "source": "sources/notes/Beta.md"}] and not result.changed
    assert v.read_note("sources/notes/Beta.md").fields["content"] == "# Beta\n\nBeta text, and what I added."
    (src / "Beta.md").write_text("# Beta\n\nChanged at the source.\n", encoding="utf-8")  # both changed: still left
    assert ingest_batch(v, [src], extractor=RULES).edited[0]["source"] == "sources/notes/Beta.md"
    assert "what I added" in v.read_note("sources/notes/Beta.md").fields["content"]


def test_names_tags_and_properties_edited_in_the_vault_survive_a_sync(tmp_path):
    """What Obsidian's properties panel changes in the vault's copy is a person's edit, as
    the text is: kept and reported while the file says otherwise; a file whose keys alone
    changed (dates and lists among them) still comes in when nobody edited the copy."""
    from engine.model.notes import serialize_note

    v = Vault.init(tmp_path / "vault", name="test")
    src = write(tmp_path / "notes", {
        "Finance.md": "---\ntags: [area]\naliases: [Money]\nreviewed: 2024-02-03\nrating: 3\n---\nMortgage rate.\n",
        "Garden.md": "---\ntags: [home]\nrating: 1\nplanted: 2024-04-01\n---\nTomatoes.\n"})
    ingest_batch(v, [src], extractor=RULES)
    uri = "sources/notes/Finance.md"
    note = v.read_note(uri)
    note.extra = {**note.extra, "tags": ["area", "important"], "properties": {**note.extra["properties"], "rating": 5}}
    with v.transaction() as tx:
        tx.put_text(uri, serialize_note(note, v.schema("source"), v.read_text(uri)), note)
    mine = v.read_text(uri)
    result = ingest_batch(v, [src], extractor=RULES)  # the file unchanged
    assert result.edited == [{"path": str(src / "Finance.md"), "source": uri}] and not result.changed
    assert v.read_text(uri) == mine
    (src / "Finance.md").write_text("---\ntags: [area, budget]\n---\nMortgage rate.\n", encoding="utf-8")
    assert ingest_batch(v, [src], extractor=RULES).edited[0]["source"] == uri
    assert v.read_text(uri) == mine
    (src / "Garden.md").write_text("---\ntags: [home, summer]\nrating: 2\nplanted: 2024-04-02\n---\nTomatoes.\n",
                                   encoding="utf-8")
    again = ingest_batch(v, [src], extractor=RULES)
    assert again.changed == ["sources/notes/Garden.md"]
    garden = v.read_note("sources/notes/Garden.md")
    assert garden.extra["tags"] == ["home", "summer"] and garden.extra["properties"]["rating"] == 2
    # A note whose hash is of its text alone (imported before the keys were counted) takes the file's keys.
    garden.extra = {**garden.extra, "imported": hashlib.sha256(b"Tomatoes.").hexdigest(), "tags": ["home"]}
    with v.transaction() as tx:
        tx.put_text(garden.uri, serialize_note(garden, v.schema("source"), v.read_text(garden.uri)), garden)
    assert ingest_batch(v, [src], extractor=RULES).changed == [garden.uri]
    assert v.read_note(garden.uri).extra["tags"] == ["home", "summer"]


def test_a_file_whose_properties_alone_changed_still_brings_its_next_text(tmp_path):
    v = Vault.init(tmp_path / "vault", name="test")
    src = write(tmp_path / "notes", {"P.md": "---\nstatus: draft\nscores: {1: low, top: high, 2024-01-01: a}\n---\nFirst text.\n"})
    ingest_batch(v, [src], extractor=RULES)
    again = ingest_batch(v, [src], extractor=RULES)  # (keys of every kind hash the same way again)
    assert not again.edited and not again.changed and not again.failed
    (src / "P.md").write_text("---\nstatus: done\n---\nFirst text.\n", encoding="utf-8")
    ingest_batch(v, [src], extractor=RULES)
    assert v.read_note("sources/notes/P.md").extra["properties"] == {"status": "done"}
    (src / "P.md").write_text("---\nstatus: done\n---\nSecond text.\n", encoding="utf-8")
    result = ingest_batch(v, [src], extractor=RULES)
    assert result.changed == ["sources/notes/P.md"] and not result.edited
    assert v.read_note("sources/notes/P.md").fields["content"] == "Second text."


def test_a_search_for_nothing_but_a_one_word_alias_finds_its_page(tmp_path):
    from engine.retrieve.search import search

    v = Vault.init(tmp_path / "vault", name="test")
    src = write(tmp_path / "notes", {"Finance.md": "---\naliases: [Money]\n---\nMortgage rate.\n",
                                     "Garden.md": "Tomatoes and beans.\n"})
    ingest_batch(v, [src], extractor=RULES)
    for query in ("Money", "money"):
        assert [h.uri for h in search(v, query)][:1] == ["sources/notes/Finance.md"], query
    assert "sources/notes/Finance.md" not in [h.uri for h in search(v, "money for beans")]  # (a word, there)


def test_a_frontmatter_that_cannot_be_read_is_said_with_its_file(tmp_path):
    v = Vault.init(tmp_path / "vault", name="test")
    src = write(tmp_path / "notes", {"Leap.md": "---\naliases: [Leap Page\ndate: 2024-02-29\n---\nBody.\n",
                                     "List.md": "---\n- a\n- b\n---\nList page.\n", "Plain.md": "---\ntags: [x]\n---\nFine.\n"})
    result = ingest_batch(v, [src], extractor=RULES)
    assert not result.failed and len(result.files) == 3
    assert result.problems == [
        f"{src / 'Leap.md'}: its frontmatter cannot be read: line 2, column 5: while parsing a flow sequence; did not "
        "find expected ',' or ']'; imported as text, without a title, aliases, tags or properties from it",
        f"{src / 'List.md'}: its frontmatter is a list, not properties; imported as text, without a title, aliases, "
        "tags or properties from it"]
    assert "aliases: [Leap Page" in v.read_note("sources/notes/Leap.md").fields["content"]  # (kept, as text)


def test_a_link_a_person_made_is_neither_rewritten_nor_removed_by_a_sync(tmp_path):
    from engine.review.linkwrite import write_link

    v = Vault.init(tmp_path / "vault", name="test")
    src = write(tmp_path / "notes", {"A.md": "Alpha text.\n", "B.md": "Beta text.\n"})
    ingest_batch(v, [src], extractor=RULES)
    a, b = "sources/notes/A.md", "sources/notes/B.md"
    write_link(v, a, b, "caused_by", weight=0.9, description="my own link")
    mine = [(l.link_type.value, l.weight, l.description) for l in v.links.of(a, "links")]
    (src / "A.md").write_text("Alpha text. See [[B]].\n", encoding="utf-8")
    ingest_batch(v, [src], extractor=RULES)
    assert [(l.link_type.value, l.weight, l.description) for l in v.links.of(a, "links")] == mine
    (src / "A.md").write_text("Alpha text.\n", encoding="utf-8")
    result = ingest_batch(v, [src], extractor=RULES)
    assert not result.links_removed
    assert [(l.link_type.value, l.weight, l.description) for l in v.links.of(a, "links")] == mine


def test_a_sync_removes_only_the_links_ingest_made(tmp_path):
    from engine.review.linkwrite import write_link

    v = Vault.init(tmp_path / "vault", name="test")
    src = tmp_path / "notes"
    shutil.copytree(MINI, src)
    ingest_batch(v, [src], extractor=RULES)
    alpha = "sources/notes/Alpha.md"
    write_link(v, alpha, "sources/notes/Tagged.md", "related_to", match_text="Alpha links to")  # by hand
    text = (src / "Alpha.md").read_text(encoding="utf-8")
    (src / "Alpha.md").write_text(text.replace("Non-ASCII: [[Café]].", "Non-ASCII: none."), encoding="utf-8")
    result = ingest_batch(v, [src], extractor=RULES)
    assert result.links_removed == [{"from": alpha, "to": "sources/notes/Café.md"}]
    assert "sources/notes/Tagged.md" in out_links(v, alpha)


def test_an_attachment_edited_in_the_vault_is_kept(tmp_path):
    v = Vault.init(tmp_path / "vault", name="test")
    src = write(tmp_path / "notes", {"Page.md": "See ![[board.canvas]] and ![[pic.svg]].\n",
                                     "board.canvas": '{"nodes": []}', "pic.svg": "<svg/>"})
    assert sorted(ingest_batch(v, [src], extractor=RULES).copied) == ["sources/notes/board.canvas", "sources/notes/pic.svg"]
    (v.root / "sources/notes/board.canvas").write_text('{"nodes": ["mine"]}', encoding="utf-8")  # in Obsidian
    (src / "board.canvas").write_text('{"nodes": ["theirs"]}', encoding="utf-8")
    (src / "pic.svg").write_text("<svg></svg>", encoding="utf-8")  # changed at the source only: copied again
    dry = ingest_batch(v, [src], extractor=RULES, dry_run=True)  # (says what the run does)
    result = ingest_batch(v, [src], extractor=RULES)
    for said in (dry, result):
        assert said.edited == [{"path": str(src / "board.canvas"), "source": "sources/notes/board.canvas",
                                "why": "kept (edited)"}]
        assert said.copied == ["sources/notes/pic.svg"]
    assert (v.root / "sources/notes/board.canvas").read_text(encoding="utf-8") == '{"nodes": ["mine"]}'
    assert (v.root / "sources/notes/pic.svg").read_text(encoding="utf-8") == "<svg></svg>"


def test_prune_keeps_edited_notes_and_moves_renamed_files_notes(tmp_path):
    root = cli_vault(tmp_path)
    src = tmp_path / "notes"
    shutil.copytree(MINI, src)
    assert memlink("ingest", str(src), vault=root).returncode == 0
    v = Vault.open(root)
    mcp_edit(v, "sources/notes/Eta.md", "Eta, with a line of mine.")
    (src / "Eta.md").unlink()
    (src / "Zeta.md").rename(src / "Zeta renamed.md")
    r = memlink("ingest", str(src), "--prune", vault=root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "sources/notes/Eta.md kept (edited)" in r.stdout and "its note moved, links kept" in r.stdout
    v = Vault.open(root)
    assert v.read_note("sources/notes/Eta.md").fields["content"] == "Eta, with a line of mine."
    assert not v.exists("sources/notes/Zeta.md") and v.exists("sources/notes/Zeta renamed.md")
    assert "sources/notes/Zeta renamed.md" in out_links(v, "sources/notes/Alpha.md")  # the link followed the move
    assert v.read_note("sources/notes/Zeta renamed.md").fields["title"] == "Zeta renamed"
    assert memlink("check", vault=root).returncode == 0


def test_prune_keeps_a_note_with_text_or_a_key_a_person_added_beside_the_import(tmp_path):
    """Text above or below the view and a frontmatter key of one's own are edits too: the
    note is kept; one left as ingest wrote it goes."""
    root = cli_vault(tmp_path)
    src = tmp_path / "docs"
    src.mkdir()
    for name in "abcd":
        (src / f"{name}.txt").write_text(f"source {name} says little.\n", encoding="utf-8")
    (src / "e.html").write_text("<html><body><p>A converted page says little.</p></body></html>", encoding="utf-8")
    assert memlink("ingest", str(src), vault=root).returncode == 0
    notes = root / "sources" / "docs"
    with (notes / "a.md").open("a", encoding="utf-8") as f:
        f.write("\nMy own thoughts.\n")
    text = (notes / "b.md").read_text(encoding="utf-8")
    (notes / "b.md").write_text(text.replace("memory_type: source\n", "memory_type: source\nmy_rating: 5\n", 1), encoding="utf-8")
    text = (notes / "c.md").read_text(encoding="utf-8")
    (notes / "c.md").write_text(text.replace(VIEW_OPEN, "A line of mine above.\n\n" + VIEW_OPEN, 1), encoding="utf-8")
    text = (notes / "d.md").read_text(encoding="utf-8")  # a key a review writes is memlink's, not the person's
    (notes / "d.md").write_text(text.replace("memory_type: source\n", "memory_type: source\nvalid_until: '2026-01-01'\n", 1),
                                encoding="utf-8")
    for name in "abcd":
        (src / f"{name}.txt").unlink()
    (src / "e.html").unlink()  # a converted document: its `original` key is ingest's, not a person's
    r = memlink("ingest", str(src), "--prune", vault=root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(p.name for p in notes.glob("*.md")) == ["a.md", "b.md", "c.md"]
    assert all(f"sources/docs/{name}.md kept (edited)" in r.stdout for name in "abc")


def test_a_renamed_file_is_not_imported_twice_before_prune_moves_its_note(tmp_path):
    v = Vault.init(tmp_path / "vault", name="test")
    src = tmp_path / "notes"
    shutil.copytree(MINI, src)
    ingest_batch(v, [src], extractor=RULES)
    (src / "Zeta.md").rename(src / "Zeta renamed.md")
    result = ingest_batch(v, [src], extractor=RULES)
    assert [r["to"] for r in result.renamed] == ["sources/notes/Zeta renamed.md"]
    assert not v.exists("sources/notes/Zeta renamed.md") and v.exists("sources/notes/Zeta.md")
    assert str(src / "Zeta renamed.md") not in [s["path"] for s in result.skipped] and not result.deleted  # (once: renamed)
    assert {f.path: f.skipped for f in result.files}[str(src / "Zeta renamed.md")] == (
        "the file of sources/notes/Zeta.md, renamed: its note stays there until --prune moves it")
    printed = memlink("ingest", str(src), vault=v.root)
    assert "its note stays where it is until --prune moves it" in printed.stdout
    assert "Zeta renamed.md: skipped" not in printed.stdout
    result = ingest_batch(v, [src], extractor=RULES, prune=True)  # a later run: still a rename, moved
    assert result.renamed[0].get("moved") and not result.pruned
    assert not v.exists("sources/notes/Zeta.md") and v.exists("sources/notes/Zeta renamed.md")
    assert "sources/notes/Zeta renamed.md" in out_links(v, "sources/notes/Alpha.md")


def test_a_note_moved_in_the_vault_stays_its_files_note_through_a_sync_and_prune(tmp_path):
    """`memlink mv` of an imported note: the next sync finds the note where the person put
    it (no second copy at the file's path), takes the file's change there, and neither
    reports the file as gone nor lets --prune remove the note."""
    root = cli_vault(tmp_path)
    src = tmp_path / "notes"
    shutil.copytree(MINI, src)
    assert memlink("ingest", str(src), vault=root).returncode == 0
    r = memlink("mv", "sources/notes/Beta.md", "sources/notes/Folder/Beta kept here.md", vault=root)
    assert r.returncode == 0, r.stdout + r.stderr
    r = memlink("ingest", str(src), "--prune", vault=root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no longer in the folder" not in r.stdout and "Beta kept here.md removed" not in r.stdout
    v = Vault.open(root)
    assert not v.exists("sources/notes/Beta.md") and v.exists("sources/notes/Folder/Beta kept here.md")
    with (src / "Beta.md").open("a", encoding="utf-8") as f:
        f.write("\nA line added in Obsidian.\n")
    r = memlink("ingest", str(src), "--prune", vault=root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no longer in the folder" not in r.stdout
    v = Vault.open(root)
    assert not v.exists("sources/notes/Beta.md")
    assert "A line added in Obsidian." in v.read_note("sources/notes/Folder/Beta kept here.md").fields["content"]
    assert "sources/notes/Folder/Beta kept here.md" in out_links(v, "sources/notes/Alpha.md")
    assert memlink("check", vault=root).returncode == 0


def test_a_note_renamed_by_hand_in_the_vault_takes_its_links_along_at_the_next_sync(tmp_path):
    root = cli_vault(tmp_path)
    src = write(tmp_path / "obs", {"Home.md": "See [[Kyoto]].\n", "Kyoto.md": "A city.\n", "Trip.md": "Trip.\n"})
    assert memlink("ingest", str(src), vault=root).returncode == 0
    r = memlink("link", "sources/obs/Trip.md", "sources/obs/Kyoto.md", "--type", "caused_by", "--description",
                "why I went", vault=root)
    assert r.returncode == 0, r.stderr
    (root / "sources/obs/Kyoto.md").rename(root / "sources/obs/Kyōto.md")  # (renamed in Obsidian)
    r = memlink("ingest", str(src), vault=root)
    assert r.returncode == 0, r.stderr
    assert "  > sources/obs/Kyoto.md -> sources/obs/Kyōto.md: its note was moved in the vault; its links followed it" in r.stdout
    v = Vault.open(root)
    assert sorted((l.from_uri, l.link_type.value, l.description) for l in v.links.of("sources/obs/Kyōto.md")) == [
        ("sources/obs/Home.md", "related_to", "referenced in the text"),
        ("sources/obs/Trip.md", "caused_by", "why I went")]
    assert memlink("check", vault=root).returncode == 0


def test_a_link_whose_place_in_the_text_changed_follows_it_and_leaves_nothing_to_undo_twice(tmp_path):
    root = cli_vault(tmp_path)
    src = write(tmp_path / "obs", {"Bob.md": "Helps with [[Garden]].\n", "Garden.md": "Intro.\n\n## Plants\nLavender.\n"})
    assert memlink("ingest", str(src), vault=root).returncode == 0
    (src / "Bob.md").write_text("Notes: [[Garden#Plants|plant list]].\n", encoding="utf-8")
    r = memlink("ingest", str(src), vault=root)
    assert r.returncode == 0 and "no longer states it" not in r.stdout and "1 link added" not in r.stdout, r.stdout
    [link] = Vault.open(root).links.of("sources/obs/Bob.md", "links")
    assert (link.to_uri, link.t_line_ranges) == ("sources/obs/Garden.md", "3-4")
    memlink("undo", vault=root)  # (nothing of the sync's: the pair is not linked twice after it)
    assert len(Vault.open(root).links.of("sources/obs/Bob.md", "links")) == 1


def test_markdown_links_with_spaces_in_angle_brackets_or_parentheses_in_the_path_are_links(tmp_path):
    root, r = ingested(tmp_path, {"Concepts/sampling (signal processing).md": "S.\n",
                                  "Index.md": "A [s](Concepts/sampling%20(signal%20processing).md)\n"
                                              "B [t](<Concepts/sampling (signal processing).md>)\n"})
    assert r.returncode == 0 and "unresolved" not in r.stdout.replace("0 unresolved", ""), r.stdout
    [link] = Vault.open(root).links.of("sources/src/Index.md", "links")
    assert link.to_uri == "sources/src/Concepts/sampling (signal processing).md"


def test_a_frontmatter_change_is_synced(tmp_path):
    v = Vault.init(tmp_path / "vault", name="test")
    src = tmp_path / "notes"
    src.mkdir()
    page = src / "Plan.md"
    page.write_text("---\ntitle: Spring plan\ntags: [garden]\n---\nSow the beans in April.\n", encoding="utf-8")
    ingest_batch(v, [src], extractor=RULES)
    page.write_text("---\ntitle: Spring garden plan\ntags: [garden, beans]\naliases: [Beans]\nstatus: sowing\n"
                    "sown: 2026-04-02\n---\nSow the beans in April.\n", encoding="utf-8")
    result = ingest_batch(v, [src], extractor=RULES)
    assert result.changed == ["sources/notes/Plan.md"] and not result.failed and not result.problems
    note = v.read_note("sources/notes/Plan.md")
    assert note.fields["title"] == "Spring garden plan"
    assert note.extra["tags"] == ["garden", "beans"] and note.extra["aliases"] == ["Beans"]
    assert note.extra["properties"] == {"status": "sowing", "sown": "2026-04-02"}
    assert ingest_batch(v, [src], extractor=RULES).files[0].skipped == "already imported as sources/notes/Plan.md"
    # Another property: taken as it is, nothing extracted again, and said as a change.
    page.write_text(page.read_text(encoding="utf-8").replace("status: sowing", "status: sown"), encoding="utf-8")
    again = ingest_batch(v, [src], extractor=RULES)
    assert again.changed == ["sources/notes/Plan.md"] and not again.files[0].skipped and not again.skipped
    assert again.files[0].report.created == [] and again.files[0].report.changed == []
    assert v.read_note("sources/notes/Plan.md").extra["properties"] == {"status": "sown", "sown": "2026-04-02"}


def test_tags_in_one_string_are_split_and_a_number_alias_is_a_name(tmp_path):
    v = Vault.init(tmp_path / "vault", name="test")
    src = write(tmp_path / "notes", {"Plan.md": '---\ntags: "#alpha #beta/gamma"\naliases: 42\n---\nSow the beans.\n',
                                     "Other.md": "---\ntags: alpha, beta\naliases: yes\n---\nReap.\n"})
    ingest_batch(v, [src], extractor=RULES)
    note = v.read_note("sources/notes/Plan.md")
    assert note.extra["tags"] == ["alpha", "beta/gamma"] and note.extra["aliases"] == ["42"]
    other = v.read_note("sources/notes/Other.md")
    assert other.extra["tags"] == ["alpha", "beta"] and other.extra["aliases"] == ["yes"]  # (as Obsidian reads it)


def test_properties_are_kept_as_obsidian_shows_them(tmp_path):
    v = Vault.init(tmp_path / "vault", name="test")
    src = write(tmp_path / "notes", {"Norway.md": "---\naliases: [NO, Norge]\nzip: 01234\ntime: 12:30\nanswer: yes\n"
                                                  "rating: 4\nscore: 1.5\ndone: true\nat: 2023-01-05T09:30:00\n"
                                                  "type: daily\nkind: diary\n---\nNorway.\n"})
    ingest_batch(v, [src], extractor=RULES)
    note = v.read_note("sources/notes/Norway.md")
    assert note.extra["aliases"] == ["NO", "Norge"] and note.fields["kind"] == "daily"
    assert note.extra["properties"] == {"zip": "01234", "time": "12:30", "answer": "yes", "rating": 4, "score": 1.5,
                                        "done": True, "at": "2023-01-05T09:30:00", "kind": "diary"}


def test_show_gives_a_page_s_own_aliases_tags_and_properties(tmp_path):
    v = Vault.init(tmp_path / "vault", name="test")
    src = write(tmp_path / "notes", {"Finance.md": "---\naliases: [Money]\ntags: [area]\nreviewed: 2024-02-03\n---\nRates.\n"})
    ingest_batch(v, [src], extractor=RULES)
    shown = memlink("show", "sources/notes/Finance.md", vault=v.root).stdout
    assert "  frontmatter:\n" in shown and '    aliases: ["Money"]\n' in shown and '    tags: ["area"]\n' in shown
    assert '    properties: {"reviewed": "2024-02-03"}\n' in shown  # (a date as its text, as in the file)
    data = json.loads(memlink("show", "sources/notes/Finance.md", "--json", vault=v.root).stdout)
    assert data["frontmatter"]["properties"] == {"reviewed": "2024-02-03"} and data["frontmatter"]["tags"] == ["area"]


def test_a_changed_file_keeps_its_notes_other_names(tmp_path):
    v = Vault.init(tmp_path / "vault", name="test")
    src = tmp_path / "garden"
    src.mkdir()
    (src / "Page.md").write_text("# Heading A\n\nFirst text.\n", encoding="utf-8")
    ingest_batch(v, [src], extractor=RULES)
    uri = "sources/garden/Page.md"
    note = v.read_note(uri)
    with v.transaction():  # a name a person added through memlink
        v.write_note("source", {"aliases": ["My own name"]}, uri=uri)
    (src / "Page.md").write_text("# Heading B\n\nSecond text.\n", encoding="utf-8")
    assert ingest_batch(v, [src], extractor=RULES).changed == [uri]
    assert v.read_note(uri).fields["aliases"] == [*note.fields["aliases"], "My own name", "Heading B"]


def test_pointed_at_an_obsidian_vault_memlink_says_how_to_import_it_and_writes_nothing(tmp_path):
    folder = tmp_path / "my-obsidian"
    shutil.copytree(MINI, folder)
    before = sorted(p.relative_to(folder) for p in folder.rglob("*"))
    for args in (["search", "alpha"], ["init"]):
        r = memlink(*args, vault=folder)
        assert r.returncode != 0
        assert f"`memlink --vault NEW ingest {folder}` keeps their folders, links and attachments" in r.stderr
    assert sorted(p.relative_to(folder) for p in folder.rglob("*")) == before
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "ingest" not in memlink("search", "alpha", vault=empty).stderr  # (nothing there to import)


def test_a_link_with_a_folder_that_holds_no_such_page_is_unresolved_not_another_folders_page(tmp_path):
    root = cli_vault(tmp_path)
    src = tmp_path / "help"
    for folder in ("Sync", "Publish"):
        (src / folder).mkdir(parents=True)
    (src / "Sync" / "Security and privacy.md").write_text("# Security and privacy\n\nSync encrypts.\n", encoding="utf-8")
    (src / "Publish" / "Manage sites.md").write_text(
        "# Manage sites\n\n[[Publish/Security and privacy#Add a site password|Set a password]] for a site.\n",
        encoding="utf-8")
    r = memlink("ingest", str(src), vault=root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert out_links(Vault.open(root), "sources/help/Publish/Manage sites.md") == {}
    assert "Publish/Security and privacy" in r.stdout and "by an alias only" not in r.stdout
    from engine.retrieve.names import NameIndex

    names = NameIndex.for_vault(Vault.open(root))  # the end of a real path still names its page
    assert names.lookup_name("Sync/Security and privacy").uri == "sources/help/Sync/Security and privacy.md"
    assert names.lookup_name("help/Sync/Security and privacy").uri == "sources/help/Sync/Security and privacy.md"


def test_a_file_imported_with_its_folder_is_not_imported_again_alone(tmp_path):
    v = Vault.init(tmp_path / "vault", name="test")
    src = write(tmp_path / "notes", {"plan.txt": "The plan: fire the kiln on Friday.\n",
                                     "other.md": "# Other\n\nAnother page.\n"})
    ingest_batch(v, [src], extractor=RULES)
    alone = ingest_batch(v, [src / "plan.txt"], extractor=RULES)
    assert [f.skipped for f in alone.files] == ["already imported as sources/notes/plan.md"]
    assert sorted(e.uri for e in v.catalog.all("source")) == ["sources/notes/other.md", "sources/notes/plan.md"]


def test_a_file_of_a_folder_imported_before_given_alone_after_a_change_updates_its_note(tmp_path):
    v = Vault.init(tmp_path / "vault", name="test")
    src = write(tmp_path / "notes", {"People/Bob.md": "Neighbour.\n", "plan.txt": "Fire the kiln.\n"})
    ingest_batch(v, [src], extractor=RULES)
    (src / "People/Bob.md").write_text("Neighbour. Likes hiking.\n", encoding="utf-8")
    (src / "plan.txt").write_text("Fire the kiln on Friday.\n", encoding="utf-8")
    alone = ingest_batch(v, [src / "People/Bob.md", src / "plan.txt"], extractor=RULES)
    assert sorted(alone.changed) == ["sources/notes/People/Bob.md", "sources/notes/plan.md"], alone.to_json()
    assert sorted(e.uri for e in v.catalog.all("source")) == ["sources/notes/People/Bob.md", "sources/notes/plan.md"]
    bob = v.read_note("sources/notes/People/Bob.md")
    assert bob.fields["content"] == "Neighbour. Likes hiking." and bob.fields["kind"] == "person"
    assert bob.fields["aliases"] == ["People/Bob.md"]


def test_a_file_name_in_a_macs_unicode_form_makes_a_note_path_as_typed(tmp_path):
    import unicodedata

    root = cli_vault(tmp_path)
    src = write(tmp_path / "notes", {unicodedata.normalize("NFD", "Résumé") + ".md": "My CV.\n"})
    assert memlink("ingest", str(src), vault=root).returncode == 0
    shown = memlink("show", "sources/notes/Résumé.md", vault=root)  # (typed: one "é")
    assert shown.returncode == 0 and "My CV." in shown.stdout, shown.stderr
    assert "already imported as sources/notes/Résumé.md" in memlink("ingest", str(src), vault=root).stdout


# -- links in properties ----------------------------------------------------------------------
MEETING = """---
date: 2026-03-02
attendees:
  - "[[Jane Doe]]"
  - "[[Bob]]"
  - "[[Nobody]]"
related: "[[Beta]]"
team: "[[Core]]"
host: "[[Sam]]"
cover: "[[photo.png]]"
permalink: "[[Gamma]]"
cssclasses: ["[[Gamma]]"]
source: "[Gamma](Gamma.md)"
note: "see [[Gamma]] too"
unquoted: [[Gamma]]
---
We met about [[Beta]].
"""


def meeting_folder(root: Path) -> Path:
    return write(root, {"Standup.md": MEETING, "People/Jane Doe.md": "Jane.\n", "People/Bob.md": "Bob.\n",
                        "Beta.md": "Beta.\n", "Core.md": "The core team.\n", "Gamma.md": "Gamma.\n",
                        "x/Sam.md": "One Sam.\n", "y/Sam.md": "Another Sam.\n", "photo.png": b"\x89PNG\r\n"})


def test_wikilinks_in_properties_are_links_as_obsidian_reads_them(tmp_path):
    v = Vault.init(tmp_path / "vault", name="test")
    src = meeting_folder(tmp_path / "notes")
    result = ingest_batch(v, [src], extractor=RULES)
    links = {l.to_uri: (l.link_type.value, l.description, l.match_text)
             for l in v.links.of("sources/notes/Standup.md", "links")}
    assert links == {
        "sources/notes/Beta.md": ("related_to", "referenced in the text", "Beta"),  # the text's link: one per note
        "sources/notes/People/Jane Doe.md": ("related_to", "referenced in the attendees property", None),
        "sources/notes/People/Bob.md": ("related_to", "referenced in the attendees property", None),
        "sources/notes/Core.md": ("belongs_to", "referenced in the team property", None),  # the table's cue "team"
    }
    # A missing or ambiguous one is said with the line of the file that holds it; a file is an attachment link.
    assert result.unresolved == [{"file": str(src / "Standup.md"), "line": 6, "ref": "[[Nobody]]"}]
    assert [(a["line"], a["ref"]) for a in result.ambiguous] == [(9, "[[Sam]]")]
    assert result.attachments == 1
    assert {"from": "sources/notes/Standup.md", "to": "sources/notes/People/Jane Doe.md"}.items() <= \
        next(l for l in result.links_added if l["to"].endswith("Jane Doe.md")).items()


def test_show_and_the_markdown_export_say_a_property_s_link_for_what_it_is(tmp_path):
    v = Vault.init(tmp_path / "vault", name="test")
    ingest_batch(v, [meeting_folder(tmp_path / "notes")], extractor=RULES)
    shown = memlink("show", "sources/notes/Standup.md", vault=v.root).stdout
    assert "sources/notes/People/Bob.md\n       referenced in the attendees property\n" in shown
    data = json.loads(memlink("show", "sources/notes/Standup.md", "--json", vault=v.root).stdout)
    assert data["missing_match_text"] == [] and data["frontmatter"]["properties"]["attendees"][1] == "[[Bob]]"
    assert memlink("export", "--markdown", str(tmp_path / "out"), vault=v.root).returncode == 0
    page = (tmp_path / "out" / "sources/notes/Standup.md").read_text(encoding="utf-8")
    assert "[Bob](People/Bob.md) (related_to, weight 0.60): referenced in the attendees property" in page
    backs = (tmp_path / "out" / "sources/notes/People/Bob.md").read_text(encoding="utf-8")
    assert "[Standup](../Standup.md) (related_to, weight 0.60): referenced in the attendees property" in backs


def test_a_sync_follows_a_page_s_properties_and_keeps_a_person_s_links(tmp_path):
    from engine.review.linkwrite import write_link

    v = Vault.init(tmp_path / "vault", name="test")
    src = meeting_folder(tmp_path / "notes")
    ingest_batch(v, [src], extractor=RULES)
    page, standup = src / "Standup.md", "sources/notes/Standup.md"
    before = snapshot(v.root)
    again = ingest_batch(v, [src], extractor=RULES)
    assert snapshot(v.root) == before and not again.links_added and not again.links_removed  # unchanged: nothing
    write_link(v, standup, "sources/notes/Gamma.md", "caused_by", weight=0.9, description="my own link")
    mine = [(l.link_type.value, l.weight, l.description) for l in v.links.of(standup, "links") if "Gamma" in l.to_uri]
    # Only a property changed: the link it no longer states goes, the note's text is not extracted again.
    page.write_text(MEETING.replace('  - "[[Bob]]"\n', "").replace("unquoted: [[Gamma]]", 'also: "[[Gamma]]"'),
                    encoding="utf-8")
    result = ingest_batch(v, [src], extractor=RULES)
    assert result.links_removed == [{"from": standup, "to": "sources/notes/People/Bob.md"}] and result.changed == [standup]
    assert "sources/notes/People/Jane Doe.md" in out_links(v, standup)
    gamma = [(l.link_type.value, l.weight, l.description) for l in v.links.of(standup, "links") if "Gamma" in l.to_uri]
    assert gamma == mine  # a person's link to the note a property now names: as they made it
    # The text and the properties changed: the same rule.
    page.write_text(MEETING.replace("We met", "We met again").replace('team: "[[Core]]"\n', ""), encoding="utf-8")
    result = ingest_batch(v, [src], extractor=RULES)
    assert result.changed == [standup]
    assert {l["to"] for l in result.links_removed} == {"sources/notes/Core.md"}
    assert set(out_links(v, standup)) == {"sources/notes/Beta.md", "sources/notes/People/Jane Doe.md",
                                          "sources/notes/People/Bob.md", "sources/notes/Gamma.md"}
    gamma = [(l.link_type.value, l.weight, l.description) for l in v.links.of(standup, "links") if "Gamma" in l.to_uri]
    assert gamma == mine


def test_an_embedded_file_that_is_not_there_is_a_missing_file_not_a_missing_note(tmp_path):
    from memlink_tui.screens.importer import diff_markup

    root = cli_vault(tmp_path)
    src = write(tmp_path / "notes", {"Trip.md": "Photos:\n![[missing.png]]\nSee [[Nowhere]].\n"})
    r = memlink("ingest", str(src), vault=root)
    assert f"  ! reference to a missing file: {src / 'Trip.md'}:2: ![[missing.png]]\n" in r.stdout
    assert f"  ! reference to a missing note: {src / 'Trip.md'}:3: [[Nowhere]]\n" in r.stdout
    assert "1 reference to missing notes, 1 reference to missing files" in r.stdout
    assert "1 unresolved references, 1 to missing files" in r.stdout
    (src / "Trip.md").write_text("Photos:\n![[missing.png]]\nSee [[Nowhere]] again.\n", encoding="utf-8")
    out = json.loads(memlink("ingest", str(src), "--json", vault=root).stdout)
    assert out["missing_files"] == [{"file": str(src / "Trip.md"), "line": 2, "ref": "![[missing.png]]"}]
    assert out["unresolved"] == [{"file": str(src / "Trip.md"), "line": 3, "ref": "[[Nowhere]]"}]
    report = ingest_batch(Vault.open(root), [write(tmp_path / "more", {"Day.md": "![[gone.jpg]]\n"})],
                          extractor=RULES).files[0].report
    assert "missing file referenced" in diff_markup(report) and "missing note" not in diff_markup(report)


def test_prune_names_the_links_it_removes_with_a_note_a_person_s_among_them(tmp_path):
    root = tmp_path / "vault"
    assert memlink("init", vault=root).returncode == 0
    src = write(tmp_path / "notes", {"Alpha.md": "Alpha text.\n", "Beta.md": "Beta text.\n"})
    assert memlink("ingest", str(src), vault=root).returncode == 0
    r = memlink("link", "sources/notes/Alpha.md", "sources/notes/Beta.md", "--type", "related_to",
                "--description", "my own reason", vault=root)
    assert r.returncode == 0, r.stderr
    (src / "Beta.md").unlink()
    said = "removed with those notes: their 1 link to notes that stay"
    r = memlink("ingest", str(src), "--prune", "--dry-run", vault=root)
    assert f"would be {said}\n" in r.stdout and "sources/notes/Alpha.md -[related_to]-> sources/notes/Beta.md" in r.stdout
    r = memlink("ingest", str(src), "--prune", vault=root)
    assert f"{said} (`memlink undo` puts them back)" in r.stdout, r.stdout
    assert "sources/notes/Alpha.md -[related_to]-> sources/notes/Beta.md" in r.stdout
    data = json.loads(memlink("ingest", str(src), "--prune", "--json", vault=root).stdout)
    assert data["pruned_links"] == []  # (nothing left to prune)


def test_a_file_name_in_a_macs_unicode_form_is_found_as_typed(tmp_path):
    """A Mac writes "Café.md" as "Cafe" and a combining accent; a link and a search type "é"."""
    import unicodedata

    root, r = ingested(tmp_path, {unicodedata.normalize("NFD", "Café") + ".md": "Coffee, roasted on Fridays.\n",
                                  "Index.md": "See [[Café]].\n"})
    assert r.returncode == 0 and "0 unresolved references" in r.stdout, r.stdout
    v = Vault.open(root)
    try:
        [index] = [e.uri for e in v.catalog.all() if e.title == "Index"]
        [cafe] = [e for e in v.catalog.all() if e.title == "Café"]  # the title as typed
        assert list(out_links(v, index)) == [cafe.uri]
    finally:
        v.close()
    r = memlink("search", "Café", "--json", vault=root)
    assert json.loads(r.stdout)[0]["title"] == "Café", r.stdout


@pytest.mark.parametrize("front, name", [("", "Grinder"), ("---\ntags: [idea]\n---\n", "Grinder"),
                                         ("", "Meeting: Q3, 2024")])
def test_a_page_written_in_the_vault_is_told_what_it_needs_and_is_read_once_it_has_it(tmp_path, front, name):
    root = cli_vault(tmp_path)
    page = root / "Inbox" / f"{name}.md"
    page.parent.mkdir()
    page.write_text(f"{front}# Grinder\n\nBuy a Niche Zero grinder.\n")
    r = memlink("check", vault=root)
    said = re.search(r"a page of your own: `(memory_type: source)`, `(created_at: [0-9-]+)` and `(fields: \{title: [^`]+\})`",
                     r.stdout)
    assert said, r.stdout
    tags = front.split("\n")[1] + "\n" if front else ""
    page.write_text("---\n" + "\n".join(said.groups()) + "\n" + tags + "---\n# Grinder\n\nBuy a Niche Zero grinder.\n")
    r = memlink("check", vault=root)
    assert "0 errors, 0 warnings" in r.stdout, r.stdout
    r = memlink("search", "niche zero grinder", "--json", vault=root)
    assert [(h["uri"], h["title"]) for h in json.loads(r.stdout)][:1] == [(f"Inbox/{name}.md", name)], r.stdout
    r = memlink("ingest", str(page), vault=root)
    assert r.returncode != 0 and "`memlink check` says what is missing" in r.stderr, r.stderr


def test_a_page_holding_a_marker_line_takes_its_file_s_later_change(tmp_path):
    """Its view shows that line escaped; the note still reads as its import left it."""
    root, _ = ingested(tmp_path, {"Markers.md": "How memlink marks a view:\n<!-- /memlink:view -->\nThe end.\n"})
    src = tmp_path / "src"
    (src / "Markers.md").write_text("How memlink marks a view:\n<!-- /memlink:view -->\nThe end, changed.\n")
    r = memlink("ingest", str(src), "--no-wiki", vault=root)
    assert r.returncode == 0 and "edited in the vault" not in r.stdout, r.stdout
    assert "The end, changed." in (root / "sources" / "src" / "Markers.md").read_text()
