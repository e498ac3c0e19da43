"""Moving and renaming a note: the file goes, every link into and out of it follows on both
sides with its anchor and line ranges, in one unit of work that `memlink undo` reverts
byte for byte; a target that exists or a path outside the vault is refused, nothing
changed. Through the engine, the CLI, MCP and the app's `M`."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import forkserver
import pytest
from conftest import SAMPLE, ingested, memlink, open_at, settle
from test_crash_safety import ENV, REPO, REVIEW_WORKER, age_temp_files, assert_files_whole
from test_mcp import server

from engine import Vault
from engine.lint.memo import check
from engine.lint.report import fix
from engine.review.actions import ACTION_LOG, last_action, undo
from engine.review.move import MoveError, move_note

OLD = "entities/havenlink.md"  # linked both ways in the sample vault, some links anchored or ranged
NEW = "projects/havenlink-bv.md"


def files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".memlink" not in p.parts}


def errors(vault: Vault) -> list:
    return [f for f in check(vault) if f.severity == "error"]


def shape(links, old: str, new: str) -> list[tuple]:
    """A note's links as comparable rows, with ``old`` spelled ``new``."""
    def swap(uri: str) -> str:
        return new if uri == old else uri
    return sorted((l.id, l.direction, swap(l.from_uri), swap(l.to_uri), l.link_type.value, l.weight, l.t_field,
                   l.t_line_ranges, l.match_text, l.description, l.created_at) for l in links)


def test_a_move_retargets_every_link_on_both_sides_and_undo_restores_every_byte(sample):
    before = files(sample.root)
    links = sample.links.of(OLD)
    assert any(l.t_line_ranges for l in links) and any(l.match_text for l in links)
    text = sample.read_text(OLD)
    result = move_note(sample, OLD, NEW)
    assert result.moved_file and result.links == len({l.id for l in links})
    fresh = Vault.open(sample.root)
    assert not fresh.exists(OLD) and fresh.read_text(NEW) == text
    assert shape(fresh.links.of(NEW), OLD, NEW) == shape(links, OLD, NEW)  # ids, anchors, line ranges kept
    for link in links:  # the other side of each link names the new path
        other, side = (link.from_uri, "links") if link.to_uri == OLD else (link.to_uri, "backlinks")
        mirrored = [l for l in fresh.links.of(other, side) if l.id == link.id]
        assert [(l.from_uri, l.to_uri) for l in mirrored] == [
            (NEW if link.from_uri == OLD else link.from_uri, NEW if link.to_uri == OLD else link.to_uri)]
        assert OLD not in [l.from_uri for l in fresh.links.of(other)] + [l.to_uri for l in fresh.links.of(other)]
    assert errors(fresh) == []
    assert last_action(fresh)["action"] == "move"
    assert undo(fresh) == f"undid move on {OLD} / {NEW}"
    assert files(sample.root) == before
    assert errors(Vault.open(sample.root)) == []


@pytest.mark.parametrize("old, new", [("entities/klei-vuur.md", "entities/klei.md"),
                                      ("entities/mochi.md", "entities/mochi-cat.md")])
def test_a_rename_in_its_own_folder_undoes_to_every_byte(sample, old, new):
    """The note's records stay in the same sidecar under another name: undo puts each back
    (whichever of the two names sorts first), never drops one, and is not refused."""
    before = files(sample.root)
    move_note(sample, old, new)
    assert errors(Vault.open(sample.root)) == []
    undo(Vault.open(sample.root))
    assert files(sample.root) == before
    assert errors(Vault.open(sample.root)) == []


def test_a_move_out_of_or_into_a_folder_whose_sidecar_cannot_be_read_is_refused(sample):
    sidecar = sample.root / "entities" / ".relations.json"
    lines = sidecar.read_text(encoding="utf-8").splitlines(keepends=True)
    sidecar.write_text("".join(lines[:4]) + lines[4].replace('{"id"', '{"id" oops', 1) + "".join(lines[5:]), encoding="utf-8")
    before = files(sample.root)
    for old, new in (("entities/mochi.md", "entities/mochi-cat.md"), ("preferences/coffee.md", "entities/coffee.md")):
        with pytest.raises(MoveError, match="entities/.relations.json: not valid JSON.*nothing was moved"):
            move_note(Vault.open(sample.root), old, new)
    assert files(sample.root) == before


def test_a_move_into_a_folder_keeps_the_file_name(sample):
    (sample.root / "archive").mkdir()
    assert move_note(sample, OLD, "archive").new == "archive/havenlink.md"
    assert move_note(sample, "archive/havenlink.md", "old/").new == "old/havenlink.md"


@pytest.mark.parametrize("target, error, says", [
    ("entities/mochi.md", MoveError, "exists already"),
    ("../outside.md", MoveError, "within the vault"),
    ("/tmp/abs.md", MoveError, "absolute"),
    ("entities/havenlink.txt", MoveError, "ends in .md"),
    ("sessions/havenlink.md", MoveError, "no notes there"),
    ("README.md", MoveError, "no notes there"),
    (OLD, MoveError, "already at that path"),
])
def test_a_move_is_refused_with_the_reason_and_nothing_changes(sample, target, error, says):
    before = files(sample.root)
    with pytest.raises(error, match=says):
        move_note(sample, OLD, target)
    assert files(sample.root) == before and last_action(sample) is None


def test_undoing_a_move_into_new_folders_leaves_no_empty_folder_behind(sample):
    """Only the folders the move made go: an empty folder of the person's own stays."""
    (sample.root / "archive" / "2024").mkdir(parents=True)
    folders = sorted(p for p in sample.root.rglob("*") if p.is_dir() and ".memlink" not in p.parts)
    move_note(sample, "entities/mochi.md", "entities/pets/cats/mochi.md")
    assert (sample.root / "entities/pets/cats/mochi.md").is_file()
    undo(sample)
    assert sorted(p for p in sample.root.rglob("*") if p.is_dir() and ".memlink" not in p.parts) == folders
    move_note(sample, "entities/mochi.md", "archive/2024/mochi.md")
    undo(sample)
    assert sorted(p for p in sample.root.rglob("*") if p.is_dir() and ".memlink" not in p.parts) == folders


def test_a_note_that_does_not_parse_is_refused_naming_it_not_where_it_was_going(sample):
    note = sample.root / "entities" / "mochi.md"
    note.write_text(note.read_text(encoding="utf-8").replace("memory_type: entity", "memory_type: [entity", 1),
                    encoding="utf-8")
    before = files(sample.root)
    with pytest.raises(MoveError) as refused:
        move_note(sample, "entities/mochi.md", "entities/cat.md")
    assert "cannot move entities/mochi.md: entities/mochi.md: frontmatter is not valid YAML" in str(refused.value)
    assert "cat.md:" not in str(refused.value) and files(sample.root) == before


def test_wikilinks_in_note_text_are_listed_and_rewritten_only_when_asked(sample):
    source = "entities/mochi.md"
    note = sample.read_note(source)
    body = note.body.rstrip("\n") + ("\n\nSee [[entities/havenlink|the firm]] and [[havenlink#History]] and [[Other]].\n"
                                      "Jane works at [[havenlink]].\n")
    sample.write_note("entity", note.fields, uri=source, replace=True, body=body)
    sample.link(source, OLD, "related_to")
    result = move_note(sample, OLD, NEW)
    assert [(m.uri, m.text) for m in result.mentions] == [
        (source, "[[entities/havenlink|the firm]]"), (source, "[[havenlink#History]]"), (source, "[[havenlink]]")]
    assert "[[entities/havenlink|the firm]]" in sample.read_text(source)  # the person's words are not touched
    undo(sample)
    result = move_note(sample, OLD, NEW, rewrite_text=True)
    assert result.rewritten == [source]
    text = sample.read_note(source).text
    assert "[[projects/havenlink-bv|the firm]]" in text and "[[projects/havenlink-bv#History]]" in text
    assert "Jane works at [[projects/havenlink-bv|havenlink-bv]]." in text  # (it reads the new name, not a path)
    assert "[[Other]]" in text
    undo(sample)
    assert "[[entities/havenlink|the firm]]" in sample.read_text(source) and sample.exists(OLD)


def test_a_wikilink_naming_the_note_by_the_end_of_its_path_or_in_another_case_is_found(tmp_path):
    """Obsidian reads [[Garden/Tomatoes]] and [[tomatoes]] as the page at …/Garden/Tomatoes.md
    (the shorter of two such paths): left as they were, they would lead to the other
    Tomatoes page once it moves. A link to that other page is not about this one."""
    root, _ = ingested(tmp_path, {"Projects/Garden/Tomatoes.md": "# Tomatoes\n\n## Watering\nWater every 3 days.\n",
                                  "Archive/Projects/Garden/Tomatoes.md": "Old 2024 season notes.\n",
                                  "Home.md": "See [[Projects/Garden/Tomatoes#Watering|watering]] and [[tomatoes]], "
                                             "and [[Archive/Projects/Garden/Tomatoes|the old notes]].\n"})
    shutil.rmtree(tmp_path / "src")  # (the vault's own pages now: no file of theirs decides their text)
    old, new = "sources/src/Projects/Garden/Tomatoes.md", "sources/src/Projects/Garden/Tomato plants.md"
    r = memlink("mv", old, new, vault=root)
    assert r.returncode == 0 and "[[Projects/Garden/Tomatoes#Watering|watering]]" in r.stdout and "[[tomatoes]]" in r.stdout, r.stdout
    assert "the old notes" not in r.stdout, r.stdout
    assert memlink("undo", vault=root).returncode == 0
    assert memlink("mv", "--rewrite-wikilinks", old, new, vault=root).returncode == 0
    home = (root / "sources/src/Home.md").read_text()
    assert ("[[sources/src/Projects/Garden/Tomato plants#Watering|watering]] and "
            "[[sources/src/Projects/Garden/Tomato plants|Tomato plants]], "
            "and [[Archive/Projects/Garden/Tomatoes|the old notes]].") in home, home
    assert memlink("undo", vault=root).returncode == 0
    r = memlink("mv", "--rewrite-wikilinks", "sources/src/Archive/Projects/Garden/Tomatoes.md",
                "sources/src/Archive/Tomatoes 2024.md", vault=root)
    assert r.returncode == 0, r.stderr
    home = (root / "sources/src/Home.md").read_text()
    assert ("See [[Projects/Garden/Tomatoes#Watering|watering]] and [[tomatoes]], "
            "and [[sources/src/Archive/Tomatoes 2024|the old notes]].") in home, home


def test_a_rewrite_to_a_name_no_wikilink_can_hold_is_refused_before_anything_moves(sample):
    before = files(sample.root)
    with pytest.raises(MoveError, match=r"a wikilink cannot hold '#' '\['.*nothing was moved"):
        move_note(sample, OLD, "entities/Havenlink #1 [firm].md", rewrite_text=True)
    assert files(sample.root) == before
    assert move_note(sample, OLD, "entities/Havenlink #1 [firm].md").moved_file  # (without rewriting: a name as any)


def test_a_relative_wikilink_is_found_from_its_note_s_folder(tmp_path):
    root, _ = ingested(tmp_path, {"Garden/Tomatoes.md": "Tomato notes.\n", "Notes/Log.md": "Log.\n",
                                  "Notes/Home.md": "See [[../Garden/Tomatoes]] and [[./Log]].\n"})
    shutil.rmtree(tmp_path / "src")
    r = memlink("mv", "--rewrite-wikilinks", "sources/src/Garden/Tomatoes.md", "sources/src/Garden/Tomato plants.md",
                vault=root)
    assert r.returncode == 0, r.stderr
    home = (root / "sources/src/Notes/Home.md").read_text()
    assert "See [[sources/src/Garden/Tomato plants|Tomato plants]] and [[./Log]]." in home, home


def test_markdown_links_to_the_note_are_listed_and_rewritten_as_they_were_written(tmp_path):
    """A markdown link relative to its note's folder stays relative; one from the root stays
    so; one that names the end of a path names as much of the new one; <…>, %-escapes, .md,
    #places and titles are kept as written. A web address that happens to end the same way,
    a link in code and an escaped bracket are no links to the note."""
    home = ("See [the pests](../Garden/Tomatoes.md#Pests), [here](<Garden/Tomatoes.md>), [bare](Garden/Tomatoes),\n"
            "[root](/Garden/Tomatoes.md \"Tomatoes\"), [web](https://example.com/Garden/Tomatoes.md) and "
            "[[Garden/Tomatoes]].\n")
    beds = "The [bed plan](Tomatoes.md) and `[code](Tomatoes.md)` and \\[not\\](Tomatoes.md).\n"
    root, _ = ingested(tmp_path, {"Garden/Tomatoes.md": "Tomato notes.\n\n## Pests\nHornworms.\n",
                                  "Garden/Beds.md": beds, "Notes/Home.md": home})
    shutil.rmtree(tmp_path / "src")
    old, new = "sources/src/Garden/Tomatoes.md", "sources/src/Garden/Tomato plants.md"
    before = files(root)
    r = memlink("mv", old, new, "--json", vault=root)
    assert r.returncode == 0, r.stderr
    listed = [(m["uri"].rsplit("/", 1)[-1], m["text"]) for m in json.loads(r.stdout)["mentions"]]
    assert listed == [
        ("Beds.md", "[bed plan](Tomatoes.md)"),
        ("Home.md", "[the pests](../Garden/Tomatoes.md#Pests)"), ("Home.md", "[here](<Garden/Tomatoes.md>)"),
        ("Home.md", "[bare](Garden/Tomatoes)"), ("Home.md", '[root](/Garden/Tomatoes.md "Tomatoes")'),
        ("Home.md", "[[Garden/Tomatoes]]")]
    assert home in (root / "sources/src/Notes/Home.md").read_text()  # listed, not changed
    assert memlink("undo", vault=root).returncode == 0
    assert files(root) == before
    r = memlink("mv", "--rewrite-wikilinks", old, new, vault=root)
    assert r.returncode == 0, r.stderr
    assert ("See [the pests](../Garden/Tomato%20plants.md#Pests), [here](<Garden/Tomato plants.md>), "
            "[bare](Garden/Tomato%20plants),\n[root](/sources/src/Garden/Tomato%20plants.md \"Tomatoes\"), "
            "[web](https://example.com/Garden/Tomatoes.md) and [[sources/src/Garden/Tomato plants|Tomato plants]].\n"
            ) in (root / "sources/src/Notes/Home.md").read_text()
    vault = Vault.open(root)
    page = vault.read_note("sources/src/Garden/Beds.md")
    said = "The [bed plan](Tomato%20plants.md) and `[code](Tomatoes.md)` and \\[not\\](Tomatoes.md)."
    assert said in page.fields["content"] and said in page.text  # (its field and the view that shows it)
    vault.close()
    assert "0 errors, 0 warnings" in memlink("check", vault=root).stdout
    assert memlink("undo", vault=root).returncode == 0
    assert files(root) == before


def test_a_note_whose_field_holds_the_link_quoted_by_yaml_is_left_as_written_and_named(tmp_path):
    """A field YAML writes quoted (a line that ends in a space) holds a markdown link's
    title escaped: the file's text cannot be changed where the field is, and a view drawn
    from the field at the next write would bring the old link back. The note is left as
    it is and named; the other notes are rewritten, and the move goes on."""
    beds = "Raised beds, a line that ends in a space \nThe [bed plan](Tomatoes.md \"Pests\").\n"
    root, _ = ingested(tmp_path, {"Garden/Tomatoes.md": "Tomato notes.\n", "Garden/Beds.md": beds,
                                  "Garden/Log.md": "Water the [tomatoes](Tomatoes.md).\n"})
    shutil.rmtree(tmp_path / "src")
    assert '\\"Pests\\"' in (root / "sources/src/Garden/Beds.md").read_text()  # (the field as YAML quotes it)
    written = lambda: (root / "sources/src/Garden/Beds.md").read_text().split("<!-- memlink:links")[0]  # noqa: E731
    before = written()  # (its Links block is memlink's: it follows the move)
    r = memlink("mv", "--rewrite-wikilinks", "sources/src/Garden/Tomatoes.md", "sources/src/Garden/Tomato plants.md",
                vault=root)
    assert r.returncode == 0, r.stderr
    assert "1 note left as written" in r.stdout and "sources/src/Garden/Beds.md" in r.stdout.split("left as written, to")[1]
    assert written() == before
    assert "Water the [tomatoes](Tomato%20plants.md)." in (root / "sources/src/Garden/Log.md").read_text()


def test_a_link_that_hung_on_a_rewritten_wikilink_hangs_on_the_name_it_now_shows(tmp_path):
    """The page's text now says "Tomato plants" where it said "Tomatoes": the link's anchor
    follows, so `check` finds nothing missing."""
    root, _ = ingested(tmp_path, {"Tomatoes.md": "Tomato notes.\n", "Log.md": "Water the [[Tomatoes]] daily.\n"})
    shutil.rmtree(tmp_path / "src")
    r = memlink("mv", "--rewrite-wikilinks", "sources/src/Tomatoes.md", "sources/src/Tomato plants.md", vault=root)
    assert r.returncode == 0, r.stderr
    assert "[[sources/src/Tomato plants|Tomato plants]] daily" in (root / "sources/src/Log.md").read_text()
    r = memlink("check", vault=root)
    assert "0 errors, 0 warnings" in r.stdout, r.stdout


def test_an_imported_page_whose_file_is_there_keeps_its_text_and_its_sync(tmp_path):
    """Its file decides its text: a rewrite there would be a copy the next sync takes for a
    person's edit, and the page would never take its file's changes again."""
    root, _ = ingested(tmp_path, {"Tomatoes.md": "Tomato notes.\n", "Log.md": "Water the [[Tomatoes]] daily.\n"})
    src = tmp_path / "src"
    r = memlink("mv", "--rewrite-wikilinks", "sources/src/Tomatoes.md", "sources/src/Tomato plants.md", vault=root)
    assert r.returncode == 0, r.stderr
    assert "1 imported page still names sources/src/Tomatoes.md: the file it was imported from decides its text" in r.stdout
    assert r.stdout.count(f"[[Tomatoes]]  (from {src / 'Log.md'})") == 1, r.stdout  # (listed where its view shows it)
    assert Vault.open(root).read_note("sources/src/Log.md").text.strip().endswith("Water the [[Tomatoes]] daily.")
    assert "0 errors, 0 warnings" in memlink("check", vault=root).stdout
    (src / "Log.md").write_text("Water the [[Tomatoes]] every 2 days.\n")
    r = memlink("ingest", str(src), "--no-wiki", vault=root)
    assert r.returncode == 0 and "sources/src/Log.md: its file changed since the last import; updated" in r.stdout, r.stdout
    assert [l.to_uri for l in Vault.open(root).links.of("sources/src/Log.md", "links")] == ["sources/src/Tomato plants.md"]


def test_an_imported_page_a_person_edited_is_theirs_and_is_rewritten(tmp_path):
    """A sync leaves a page edited in the vault as it is: its file no longer decides its text."""
    root, _ = ingested(tmp_path, {"Tomatoes.md": "Tomato notes.\n", "Log.md": "Water the [[Tomatoes]] daily.\n"})
    v = Vault.open(root)
    note = v.read_note("sources/src/Log.md")
    v.write_note("source", {**note.fields, "content": "Water the [[Tomatoes]] daily. Mulch in June."},
                 uri=note.uri, replace=True)
    v.close()
    r = memlink("mv", "--rewrite-wikilinks", "sources/src/Tomatoes.md", "sources/src/Tomato plants.md", vault=root)
    assert r.returncode == 0 and "imported page" not in r.stdout, r.stdout
    assert "[[sources/src/Tomato plants|Tomato plants]] daily" in Vault.open(root).read_note("sources/src/Log.md").text


@pytest.mark.parametrize("old, new", [("profile.md", "people/lena.md"), ("entities/tom-vermeulen.md", "people/tom.md")])
def test_an_old_format_link_entry_moves_with_its_note_as_a_two_sided_link(sample, old, new):
    """The sample vault's profile holds an old {uris, reason} entry naming Tom: moving either
    note rewrites it as a link of the new path, on both sides; undo puts every byte back."""
    before = files(sample.root)
    move_note(sample, old, new)
    a, b = ("people/lena.md", "entities/tom-vermeulen.md") if old == "profile.md" else ("profile.md", "people/tom.md")
    [link] = [l for l in sample.links.of(a, "links") if l.to_uri == b]
    assert not link.legacy and link.description == "Tom is Lena's partner."
    assert [l.id for l in sample.links.of(b, "backlinks") if l.from_uri == a] == [link.id]
    root_records = sample.root / ".relations.json"
    assert not root_records.exists() or "rel_legacy_1" not in root_records.read_text()
    assert errors(sample) == []
    undo(sample)
    assert files(sample.root) == before


def test_an_old_format_entry_beside_a_link_of_the_same_pair_leaves_that_link_as_it_is(sample):
    mine = sample.link("profile.md", "entities/tom-vermeulen.md", "related_to", weight=0.7,
                       description="Tom lives with Lena.")
    records = sample.root / ".relations.json"  # (the link took the old entry's place: it is put back by hand)
    entries = json.loads(records.read_text())
    entries.append({"id": "rel_legacy_1", "from_uri": "profile.md", "uris": ["entities/tom-vermeulen.md"],
                    "reason": "Tom is Lena's partner.", "created_at": "2026-08-11T18:58:00+00:00"})
    records.write_text(json.dumps(entries, ensure_ascii=False))
    assert sorted(l.legacy for l in sample.links.of("profile.md", "links") if l.to_uri == "entities/tom-vermeulen.md") == [
        False, True]
    move_note(sample, "entities/tom-vermeulen.md", "people/tom.md")
    [link] = [l for l in sample.links.of("profile.md", "links") if l.to_uri == "people/tom.md"]
    assert (link.id, link.weight, link.description) == (mine.id, 0.7, "Tom lives with Lena.")
    assert "rel_legacy_1" not in (sample.root / ".relations.json").read_text()
    assert errors(sample) == []


def test_a_note_moved_by_hand_keeps_its_links_through_check_fix_and_mv_relinks_them(sample):
    links = sample.links.of(OLD)
    sample.close()
    (sample.root / "archive").mkdir()
    shutil.move(sample.root / OLD, sample.root / "archive/havenlink.md")
    vault = Vault.open(sample.root)
    done = fix(vault)
    assert any("archive/havenlink.md" in line and "memlink mv" in line for line in done), done
    assert len(Vault.open(sample.root).links.of(OLD)) == len(links)  # not deleted
    r = memlink("mv", OLD, "archive/havenlink.md", vault=sample.root)
    assert r.returncode == 0 and "relinked" in r.stdout, r.stderr
    vault = Vault.open(sample.root)
    assert shape(vault.links.of("archive/havenlink.md"), OLD, "archive/havenlink.md") == shape(links, OLD, "archive/havenlink.md")
    assert errors(vault) == []


def test_a_note_renamed_by_hand_is_recognised_by_its_content_and_keeps_its_links(sample):
    links = sample.links.of(OLD)
    sample.sync()  # the catalog knows the note's content hash
    sample.close()
    (sample.root / "archive").mkdir()
    shutil.move(sample.root / OLD, sample.root / "archive/the-firm.md")
    done = fix(Vault.open(sample.root))
    assert any("archive/the-firm.md" in line and "memlink mv" in line for line in done), done
    assert len(Vault.open(sample.root).links.of(OLD)) == len(links)
    assert move_note(Vault.open(sample.root), OLD, "archive/the-firm.md").links == len({l.id for l in links})
    assert errors(Vault.open(sample.root)) == []


def test_a_note_renamed_by_hand_is_still_recognised_after_other_commands_saw_it_gone(sample):
    links = sample.links.of(OLD)
    sample.sync()
    sample.close()
    shutil.move(sample.root / OLD, sample.root / "entities/the firm.md")  # (renamed in Obsidian)
    assert memlink("search", "havenlink", vault=sample.root).returncode == 0  # (its sync sees the note gone)
    r = memlink("check", "--fix", vault=sample.root)
    assert "it looks moved to entities/the firm.md" in r.stdout, r.stdout
    assert f"`memlink mv {OLD} 'entities/the firm.md'`" in r.stdout
    assert len(Vault.open(sample.root).links.of(OLD)) == len(links)


def test_only_a_gone_note_links_still_name_is_remembered_by_its_content(sample):
    sample.delete_note(OLD)  # (its links go with it: nothing will look for where it went)
    assert sample.catalog.last_sha(OLD) is None
    assert sample.store.rows("SELECT * FROM gone") == []


def test_the_cli_moves_lists_mentions_and_undoes(sample):
    root = sample.root
    sample.close()
    before = files(root)
    refused = memlink("mv", OLD, "entities/mochi.md", vault=root)
    assert refused.returncode == 1 and "exists already" in refused.stderr and files(root) == before
    done = memlink("mv", OLD, NEW, vault=root)
    assert done.returncode == 0 and f"moved {OLD} -> {NEW}" in done.stdout, done.stderr
    shown = memlink("show", NEW, vault=root)
    assert shown.returncode == 0 and "Havenlink" in shown.stdout
    assert memlink("undo", vault=root).returncode == 0
    assert files(root) == before


async def test_mcp_move_tool_moves_and_read_only_refuses(tmp_path):
    root = tmp_path / "vault"
    shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns(".memlink"))
    before = files(root)
    async with server(root, "--read-only") as client:
        refused = await client.call_tool("move", {"old_uri": OLD, "new_uri": NEW})
        assert refused.is_error and refused.structured_content["error"]["type"] == "VaultReadOnly"
    assert files(root) == before
    async with server(root) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools["move"].input_schema["properties"]) == {"old_uri", "new_uri", "rewrite_wikilinks"}
        moved = await client.call_tool("move", {"old_uri": OLD, "new_uri": NEW})
        assert not moved.is_error and moved.structured_content["new"] == NEW
        again = await client.call_tool("move", {"old_uri": OLD, "new_uri": NEW})
        assert again.is_error
    assert Vault.open(root).exists(NEW) and errors(Vault.open(root)) == []


@pytest.mark.parametrize("size", [(120, 36), (80, 24)])
async def test_shift_m_in_the_browser_moves_the_open_note(sample, size):
    from textual.containers import Vertical
    from textual.widgets import Input, Static

    from memlink_tui.app import MemlinkApp
    from memlink_tui.screens.move_dialog import MoveDialog

    app = MemlinkApp(sample)
    async with app.run_test(size=size) as pilot:
        await open_at(app, pilot, "browser", OLD)
        await pilot.press("M")
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, MoveDialog) and dialog.query_one(Input).value == OLD
        box = dialog.query_one(Vertical).region
        assert box.x >= 0 and box.right <= size[0], box  # (whole, its border too, at 80 columns)
        dialog.query_one(Input).value = "entities/mochi.md"
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is dialog and "exists already" in str(dialog.query_one("#move-error", Static).render())
        dialog.query_one(Input).value = NEW
        await pilot.press("enter")
        await settle(app, pilot)
        assert app.screen.current == NEW
    assert sample.exists(NEW) and not sample.exists(OLD)


@pytest.mark.slow
def test_a_move_killed_at_any_step_lands_whole_with_its_undo_record_or_not_at_all(tmp_path):
    template = tmp_path / "template"
    shutil.copytree(SAMPLE, template, ignore=shutil.ignore_patterns(".memlink"))
    before = files(template)
    links = Vault.open(template).links.of(OLD)
    work = tmp_path / "work"
    landed = 0
    for step in range(1, 400):
        if work.exists():
            shutil.rmtree(work)
        shutil.copytree(template, work)
        run = forkserver.run([sys.executable, str(REVIEW_WORKER), str(work), "move", OLD, NEW, str(step)],
                             capture_output=True, env=ENV, cwd=REPO, timeout=120)
        assert_files_whole(work)
        vault = Vault.open(work)  # replays the journal, if the kill left one
        assert errors(vault) == [], f"kill before step {step}"
        age_temp_files(work)  # (notes are written several at once: a kill may leave their temp files)
        vault.sync()  # what a later walk does once they are old
        if last_action(vault) is None:
            assert files(work) == before, f"kill before step {step}: half a move"
        else:
            landed += 1
            assert not vault.exists(OLD) and shape(vault.links.of(NEW), OLD, NEW) == shape(links, OLD, NEW)
            undo(vault)
            assert files(work) == before
        if run.returncode == 0:
            assert run.stdout.strip() == b"done" and step > 3
            break
        assert run.returncode == -9, run.stderr.decode()
    else:
        raise AssertionError("the worker never finished")
    assert landed


def test_a_run_of_link_changes_to_one_note_stages_as_the_same_changes_one_by_one(vault):
    from conftest import make_pair

    from engine.storage.writes import put_ops, remove_ops

    a, b = make_pair(vault)
    first = vault.link(a.uri, b.uri, "related_to", weight=0.5)
    second = vault.link(b.uri, a.uri, "caused_by", weight=0.4)
    heavy, heavier = (first.model_copy(update={"weight": w}) for w in (0.7, 0.9))
    ranged = first.model_copy(update={"id": "link_other", "t_line_ranges": "1"})
    # Runs: three puts into a's records (one id twice: the last wins), three into b's.
    puts = [put_ops(l)[0] for l in (heavy, ranged, heavier)] + [put_ops(l)[1] for l in (heavy, ranged, heavier)]
    one_by_one, at_once = [], []
    for staged, batches in ((one_by_one, [[op] for op in puts + remove_ops(second)]),
                            (at_once, [puts, remove_ops(second)])):
        try:
            with vault.transaction() as tx:
                for ops in batches:
                    tx.link_ops(ops)
                staged += [sorted((l.id, l.direction, l.weight) for l in vault.links.of(u)) for u in (a.uri, b.uri)]
                raise KeyboardInterrupt  # commit nothing
        except KeyboardInterrupt:
            pass
    assert at_once == one_by_one
    assert ("link_other", "links", 0.5) in at_once[0] and (first.id, "links", 0.9) in at_once[0]
    assert second.id not in {row[0] for rows in at_once for row in rows}


def test_a_hub_move_writes_each_note_once_syncs_each_folder_once_and_logs_what_it_replaced(vault, monkeypatch):
    story = "\n".join(f"Line {i} of what happened, long enough to matter." for i in range(100))  # ~5 kB a note
    hub = vault.write_note("entity", {"name": "Hub", "kind": "project", "content": "The hub."}).uri
    linking = [vault.write_note(kind, {**fields, "content": story}).uri for i in range(40) for kind, fields in [
        ("entity", {"name": f"Person {i}", "kind": "person"}) if i % 2 else
        ("preference", {"topic": f"Topic {i}", "sentiment": "like"})]]
    for uri in linking:
        vault.link(uri, hub, "related_to")
    before = files(vault.root)
    synced = []
    real = os.fsync

    def counted(fd: int) -> None:
        synced.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counted)
    move_note(vault, hub, "projects/hub.md")
    # Each note and sidecar written once, each folder synced once (not once per file).
    assert len(synced) <= len(linking) + 15, len(synced)
    record = (vault.root / ACTION_LOG).read_text(encoding="utf-8").splitlines()[-1]
    assert len(record) < 1_500 * len(linking)  # the replaced lines, not the notes' whole texts
    assert all(uri in json.loads(record)["edits"] for uri in linking)
    monkeypatch.undo()
    undo(vault)
    assert files(vault.root) == before


def test_a_move_renames_the_kept_note_in_what_names_it_and_keeps_where_it_came_from(vault):
    from engine.lint.checks import provenanced
    from engine.review.actions import review

    a = vault.write_note("preference", {"topic": "Running", "sentiment": "dislike", "content": "Hates running now."})
    b = vault.write_note("preference", {"topic": "River running", "sentiment": "like", "content": "Loves running."})
    vault.link(b.uri, a.uri, "contradicts", weight=0.8, description="changed her mind")
    report = vault.write_note("report", {"question": "How did running change?", "answer": "It did.",
                                         "source_uris": [a.uri, b.uri]})
    vault.link(report.uri, a.uri, "derived_from")
    review(vault, a.uri, b.uri, "keep-a")
    (vault.state_dir / "audit").mkdir(parents=True, exist_ok=True)  # (as an extraction run records what it made)
    (vault.state_dir / "audit" / "2026-01-01.jsonl").write_text(json.dumps({"created": [a.uri, b.uri]}) + "\n")
    with open(vault.root / ACTION_LOG, "a", encoding="utf-8") as log:  # (a line of another shape: a hint lost, no crash)
        log.write(json.dumps({"at": "x", "action": "move", "a": ["q"], "b": "z"}) + "\n")
    before = files(vault.root)
    result = move_note(vault, a.uri, "preferences/running-dislike.md")
    assert vault.read_note(b.uri).extra["superseded_by"] == "preferences/running-dislike.md"
    assert vault.read_note(report.uri).fields["source_uris"] == ["preferences/running-dislike.md", b.uri]
    assert sorted(result.fields) == sorted([b.uri, report.uri]) and "source_uris updated in 2 notes" in result.message()
    shown = vault.read_text(report.uri).split("---", 2)[2]
    assert "preferences/running-dislike.md" in shown and a.uri not in shown  # (the report's view shows its sources)
    assert "preferences/running-dislike.md" in provenanced(vault)  # (lint does not call it a note of unknown origin)
    assert errors(vault) == []
    undo(vault)
    assert files(vault.root) == before
    move_note(vault, a.uri, "preferences/running-dislike.md")
    vault.write_note("report", {"answer": "It changed."}, uri=report.uri)  # (a later write finds no stale view to keep)
    assert vault.read_text(report.uri).count("How did running change?") == 2  # (frontmatter and view, once each)
