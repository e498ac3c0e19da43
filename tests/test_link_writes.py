"""A person's link write never replaces a link silently: the CLI, the app and MCP refuse a
pair linked already (naming the link, changing nothing) unless asked to update it, and an
update changes only what it was given and is undone by `memlink undo`."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import SAMPLE, memlink
from test_mcp import server

from engine import LinkError, Vault
from engine.lint.memo import check
from engine.review.actions import ACTION_LOG, undo
from engine.review.linkwrite import LinkExists, remove_link, write_link
from engine.review.move import move_note
from engine.storage.jsonl import read_jsonl
from engine.storage.writes import person_links

A, B = "entities/berth-planner-v2.md", "entities/havenlink.md"  # linked in the sample vault: belongs_to 0.90


def sidecars(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob(".relations*")) if ".memlink" not in p.parts}


def the_link(vault: Vault):
    return next(l for l in vault.links.of(A, "links") if l.to_uri == B)


def test_a_pair_linked_already_is_refused_naming_the_link_and_nothing_changes(sample):
    before, old = sidecars(sample.root), the_link(sample)
    with pytest.raises(LinkExists) as refused:
        write_link(sample, A, B, "related_to", weight=0.3, description="a second opinion")
    message = str(refused.value)
    assert old.id in message and "belongs_to 0.90" in message and "--update" in message
    assert refused.value.existing == [old]
    assert sidecars(sample.root) == before and the_link(sample) == old


def test_an_update_changes_only_the_fields_given_and_undo_puts_the_link_back(sample):
    before, old = sidecars(sample.root), the_link(sample)
    updated = write_link(sample, A, B, update=True, weight=0.4)
    assert updated.weight == 0.4 and updated.id == old.id
    assert updated.model_copy(update={"weight": old.weight}) == old  # type, description, anchor, ranges kept
    assert the_link(Vault.open(sample.root)) == updated
    back = next(l for l in sample.links.of(B, "backlinks") if l.from_uri == A)
    assert back.same_record(updated)  # both sides
    assert "update-link" in undo(sample)
    assert sidecars(sample.root) == before and the_link(Vault.open(sample.root)) == old
    assert [f for f in check(Vault.open(sample.root)) if f.severity == "error"] == []


def test_a_pair_an_old_uris_reason_entry_links_is_refused_and_its_update_keeps_the_reason(sample):
    profile, tom = "profile.md", "entities/tom-vermeulen.md"  # the sample's `{uris, reason}` entry
    before = sidecars(sample.root)
    with pytest.raises(LinkExists, match=r"related_to 1.00 \"Tom is Lena's partner.\" \(rel_legacy_1\)"):
        write_link(sample, profile, tom, "related_to")
    assert write_link(sample, profile, tom, update=True).legacy  # nothing asked to change: nothing written
    assert sidecars(sample.root) == before
    updated = write_link(sample, profile, tom, update=True, weight=0.8)
    assert (updated.weight, updated.description, updated.legacy) == (0.8, "Tom is Lena's partner.", False)
    assert [(l.id, l.legacy) for l in Vault.open(sample.root).links.of(profile, "links") if l.to_uri == tom] == \
        [(updated.id, False)]
    assert "update-link" in undo(sample)
    assert sidecars(sample.root) == before


def test_an_update_can_change_the_type_and_an_unchanged_one_writes_nothing(sample):
    before, old = sidecars(sample.root), the_link(sample)
    assert write_link(sample, A, B, update=True, weight=old.weight) == old
    assert sidecars(sample.root) == before
    changed = write_link(sample, A, B, "related_to", update=True)
    assert changed.link_type.value == "related_to" and changed.description == old.description


def test_a_new_link_needs_a_type_and_an_update_of_no_link_makes_one(sample):
    a, b = "entities/mochi.md", "preferences/coffee.md"
    with pytest.raises(LinkError, match="needs a link type"):
        write_link(sample, a, b)
    with pytest.raises(LinkError, match="has no link to preferences/coffee.md to update"):
        write_link(sample, a, b, update=True, weight=0.3)
    made = write_link(sample, a, b, "related_to", update=True, description="made by an update")
    assert made.weight == 1.0 and [l.id for l in sample.links.of(a, "links") if l.to_uri == b] == [made.id]


def test_an_empty_anchor_in_an_update_removes_the_anchor_and_the_cli_does_the_same(sample):
    anchored = write_link(sample, A, B, update=True, match_text="Delta Container Terminal")
    assert anchored.match_text == "Delta Container Terminal"
    assert write_link(sample, A, B, update=True, weight=0.5).match_text == "Delta Container Terminal"  # None: kept
    cleared = write_link(sample, A, B, update=True, match_text="")
    assert cleared.match_text is None and cleared.id == anchored.id and the_link(sample).match_text is None
    write_link(sample, A, B, update=True, match_text="Maasvlakte")
    root = sample.root
    sample.close()
    done = memlink("link", A, B, "--update", "--match-text", "", vault=root)
    assert done.returncode == 0, done.stderr
    assert the_link(Vault.open(root)).match_text is None


def test_an_update_by_link_id_changes_that_link_whatever_its_new_type(sample):
    other = sample.link(A, B, "related_to", weight=0.2, description="the second link")
    old = next(l for l in sample.links.of(A, "links") if l.to_uri == B and l.id != other.id)
    # Without the id the new type names neither link: refused, nothing written.
    with pytest.raises(LinkError, match=r"name the one to update by its link type, or by its id \(`memlink link --id`"):
        write_link(sample, A, B, "caused_by", update=True)
    changed = write_link(sample, A, B, "caused_by", update=True, link_id=old.id)
    assert changed.id == old.id and changed.link_type.value == "caused_by"
    assert next(l for l in sample.links.of(A, "links") if l.id == other.id) == other
    before = sidecars(sample.root)
    with pytest.raises(LinkError, match="no link link_gone"):
        write_link(sample, A, B, update=True, weight=0.1, link_id="link_gone")
    assert sidecars(sample.root) == before


def test_the_cli_updates_one_of_two_links_of_a_type_by_its_id(sample):
    other = sample.link(A, B, the_link(sample).link_type.value, weight=0.2, description="the second link")
    root = sample.root
    sample.close()
    before = sidecars(root)
    refused = memlink("link", A, B, "--update", "--weight", "0.4", vault=root)
    assert refused.returncode == 1 and other.id in refused.stderr and "--id" in refused.stderr, refused.stderr
    assert memlink("link", A, B, "--id", other.id, vault=root).returncode == 2  # (an id names a link to change)
    assert sidecars(root) == before
    done = memlink("link", A, B, "--update", "--id", other.id, "--weight", "0.4", vault=root)
    assert done.returncode == 0 and other.id in done.stdout, done.stderr
    assert next(l for l in Vault.open(root).links.of(A, "links") if l.id == other.id).weight == 0.4


def test_the_cli_refuses_without_update_and_its_update_is_undone(sample):
    root = sample.root
    sample.close()
    before = sidecars(root)
    refused = memlink("link", A, B, "--type", "related_to", vault=root)
    assert refused.returncode == 1 and "already" in refused.stderr and "--update" in refused.stderr
    assert sidecars(root) == before
    done = memlink("link", A, B, "--update", "--description", "a product of Havenlink", vault=root)
    assert done.returncode == 0 and "updated" in done.stdout, done.stderr
    link = the_link(Vault.open(root))
    assert link.description == "a product of Havenlink" and link.weight == 0.9
    assert memlink("undo", vault=root).returncode == 0
    assert sidecars(root) == before


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and ".memlink" not in p.parts}


def test_a_new_link_and_a_removed_one_are_undone_to_every_byte(sample):
    """A link removed by mistake comes back with its type, weight and description."""
    root, a, b = sample.root, "entities/mochi.md", "entities/hangzhou.md"
    sample.close()
    before = files(root)
    assert memlink("link", a, b, "--type", "caused_by", "--weight", "0.4", "--description", "named after", vault=root).returncode == 0
    linked = files(root)
    assert linked != before
    assert memlink("undo", vault=root).returncode == 0 and files(root) == before
    assert memlink("link", a, b, "--type", "caused_by", "--weight", "0.4", "--description", "named after", vault=root).returncode == 0
    relinked = files(root)
    removed = memlink("unlink", a, b, vault=root)
    assert removed.returncode == 0 and "removed 1 link" in removed.stdout
    undone = memlink("undo", vault=root)
    assert undone.returncode == 0 and "unlink" in undone.stdout, undone.stderr
    assert files(root) == relinked
    link = next(l for l in Vault.open(root).links.of(a, "links") if l.to_uri == b)
    assert (link.link_type.value, link.weight, link.description) == ("caused_by", 0.4, "named after")
    assert [e for e in check(Vault.open(root)) if e.severity == "error"] == []


def test_removing_a_folder_s_own_legacy_entry_or_a_link_to_a_deleted_note_is_undone(sample):
    import json

    root = sample.root
    sidecar = root / "entities" / ".relations.json"
    entries = json.loads(sidecar.read_text(encoding="utf-8"))
    sidecar.write_text(json.dumps([*entries, {"uris": [B], "reason": "the folder's own"}], indent=2), encoding="utf-8")
    made = write_link(sample, "entities/mochi.md", "entities/hangzhou.md", "related_to", description="named after")
    sample.close()
    before = files(root)
    removed = memlink("unlink", "entities", B, vault=root)  # (the folder's own entry: no note at its end)
    assert removed.returncode == 0 and "removed 1 link" in removed.stdout, removed.stderr
    assert memlink("undo", vault=root).returncode == 0 and files(root) == before
    (root / "entities" / "hangzhou.md").unlink()  # deleted by hand: the link dangles
    removed = memlink("unlink", "entities/mochi.md", "entities/hangzhou.md", vault=root)
    assert removed.returncode == 0 and "removed 1 link" in removed.stdout, removed.stderr
    assert memlink("undo", vault=root).returncode == 0
    assert [l.id for l in Vault.open(root).links.of("entities/mochi.md", "links") if l.to_uri == "entities/hangzhou.md"] == [made.id]


def test_an_agent_is_never_handed_the_action_of_a_change_made_after_its_own(sample, monkeypatch):
    """Another process's change logged between an agent's write and its reply is not
    returned as the agent's (undoing it would reverse the user's change): the agent gets
    the id of its own write, which it may not undo while the user's change is last."""
    import engine.review.linkwrite as linkwrite
    from memlink_mcp.server import MemlinkTools

    a, b = "entities/mochi.md", "entities/hangzhou.md"
    write = linkwrite.write_link

    def and_then_the_user(vault, *args, **kwargs):
        made = write(vault, *args, **kwargs)
        linkwrite.remove_link(vault, A, B)  # the user, in another process, meanwhile
        return made

    monkeypatch.setattr(linkwrite, "write_link", and_then_the_user)
    tools = MemlinkTools(sample)
    mine = tools.link(a, b, "related_to")["action"]
    logged = {r["id"]: r.get("action") for r in read_jsonl(sample.root / ACTION_LOG)}
    assert logged[mine] == "link" and list(logged.values())[-1] == "unlink"
    refused = tools.guarded(tools.undo)(mine)
    assert refused.is_error and "not the last action" in refused.structured_content["error"]["message"]
    assert not any(i in refused.structured_content["error"]["message"] for i in logged if i != mine)
    monkeypatch.setattr(linkwrite, "write_link", write)
    assert tools.link(a, "entities/havenlink.md", "related_to")["action"] is not None  # its own, when it is last


async def test_mcp_unlink_is_undone_by_the_action_it_returns(tmp_path):
    root = tmp_path / "vault"
    shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns(".memlink"))
    before = files(root)
    async with server(root) as client:
        removed = await client.call_tool("unlink", {"from_uri": A, "to_uri": B})
        assert not removed.is_error and removed.structured_content["removed"] == 1 and removed.structured_content["action"]
        assert files(root) != before
        undone = await client.call_tool("undo", {"action": removed.structured_content["action"]})
        assert not undone.is_error and "unlink" in undone.structured_content["undone"]
    assert files(root) == before


async def test_mcp_refuses_a_pair_linked_already_unless_update(tmp_path):
    root = tmp_path / "vault"
    shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns(".memlink"))
    before = sidecars(root)
    async with server(root) as client:
        refused = await client.call_tool("link", {"from_uri": A, "to_uri": B, "link_type": "related_to"})
        assert refused.is_error and refused.structured_content["error"]["type"] == "LinkExists"
        assert sidecars(root) == before
        updated = await client.call_tool("link", {"from_uri": A, "to_uri": B, "update": True, "weight": 0.5})
        assert not updated.is_error and updated.structured_content["weight"] == 0.5
        assert updated.structured_content["link_type"] == "belongs_to"
        undone = await client.call_tool("undo", {"action": updated.structured_content["action"]})
        assert not undone.is_error and "update-link" in undone.structured_content["undone"]
        again = await client.call_tool("link", {"from_uri": A, "to_uri": B, "update": True, "weight": 0.5})
        assert again.structured_content["action"]
    assert "update-link" in undo(Vault.open(root))
    assert sidecars(root) == before


def test_of_several_processes_linking_one_pair_at_once_exactly_one_writes(sample):
    """The check for an existing link and the write are one unit of work under the write
    lock: however the processes interleave, one links and the others are refused."""
    import os
    import subprocess
    import sys

    from conftest import REPO

    a, b = "entities/mochi.md", "entities/hangzhou.md"
    runs = [subprocess.Popen([sys.executable, "-m", "memlink_tui", "--vault", str(sample.root), "link", a, b, "--type", kind,
                              "--description", f"by {kind}"], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for kind in ("related_to", "caused_by", "contradicts", "belongs_to")]
    done = [(run.wait(timeout=120), run.stdout.read(), run.stderr.read()) for run in runs]  # type: ignore[union-attr]
    linked = [out for code, out, _ in done if code == 0]
    assert len(linked) == 1, done
    assert all("already" in err for code, _, err in done if code != 0)
    fresh = Vault.open(sample.root)
    written = [l for l in fresh.links.of(a, "links") if l.to_uri == b]
    assert len(written) == 1 and written[0].id in linked[0] and written[0].link_type.value in linked[0]
    assert [e for e in check(fresh) if e.severity == "error"] == []


def test_a_link_into_a_folder_it_may_not_write_is_refused_before_either_side_is_written(sample):
    """Checked before anything is written: one side that cannot be written leaves the other
    untouched and no journal behind (it used to land on the writable side)."""
    from conftest import run_unprivileged

    before = {p: p.read_bytes() for p in sample.root.rglob("*") if p.is_file() and ".memlink" not in p.parts}
    (sample.root / "entities").chmod(0o555)
    try:
        run = run_unprivileged("--vault", str(sample.root), "link", "preferences/coffee.md", "entities/mochi.md",
                               "--type", "related_to")
    finally:
        (sample.root / "entities").chmod(0o755)
    assert run.returncode != 0 and "cannot write entities: permission denied; nothing was changed" in run.stderr
    assert {p: p.read_bytes() for p in sample.root.rglob("*") if p.is_file() and ".memlink" not in p.parts} == before
    journal = sample.root / ".memlink" / "journal"
    assert not journal.exists() or not any(journal.iterdir())
    assert [e for e in check(Vault.open(sample.root)) if e.severity == "error"] == []


def test_the_machine_s_link_writes_leave_a_link_a_person_changed_as_they_left_it(sample):
    old = the_link(sample)
    # (what extraction and ingest write: the merge rule, "description latest")
    same = {"t_field": old.t_field, "t_line_ranges": old.t_line_ranges, "weight": 0.5}  # (the same link: its key)
    sample.link_many([(A, B, old.link_type.value, {**same, "description": "the machine's words"})], persons=person_links(sample))
    assert the_link(sample).description == "the machine's words"
    mine = write_link(sample, A, B, update=True, description="what I know of them")
    sample.link_many([(A, B, "related_to", {**same, "description": "the machine's words again"})], persons=person_links(sample))
    assert the_link(Vault.open(sample.root)) == mine
    made = write_link(sample, B, "entities/hangzhou.md", "related_to", description="mine from the start")
    sample.link_many([(B, "entities/hangzhou.md", "related_to", {"description": "the machine's"})], persons=person_links(sample))
    assert next(l for l in sample.links.of(B, "links") if l.to_uri == "entities/hangzhou.md") == made
    assert sample.link(B, "entities/hangzhou.md", "caused_by").link_type.value == "caused_by"  # (a review action may)


def test_a_person_s_link_into_lines_that_are_gone_points_at_the_whole_text_instead_of_going(sample):
    target = "entities/mochi.md"
    mine = write_link(sample, "entities/hangzhou.md", target, "related_to", t_line_ranges="1", description="mine")
    note = sample.read_note(target)
    field = sample.schema(note.memory_type).text_field
    sample.write_note(note.memory_type, {**note.fields, field: "Something else entirely."}, uri=target, replace=True)
    kept = next(l for l in sample.links.of(target, "backlinks") if l.id == mine.id)
    assert kept.t_line_ranges is None and kept.description == "mine"
    assert [f for f in check(Vault.open(sample.root)) if f.severity == "error"] == []


def test_what_a_person_s_link_writes_say_is_taken_back_by_undo_and_follows_a_move(sample):
    h, m = "entities/hangzhou.md", "entities/mochi.md"
    remove_link(sample, A, B)
    assert (A, B) in person_links(sample).removed
    undo(sample)  # the unlink taken back: the machine may write that pair again
    assert (A, B) not in person_links(sample).removed
    old = the_link(sample)
    write_link(sample, A, B, update=True, description="mine")
    assert old.id in person_links(sample).ids
    undo(sample)
    assert old.id not in person_links(sample).ids
    write_link(sample, h, m, "related_to")
    remove_link(sample, h, m)
    move_note(sample, m, "entities/mochi-cat.md")  # the unlinked pair goes with the note
    assert sample.link_many([(h, "entities/mochi-cat.md", "related_to", {})], persons=person_links(sample)) == []
    assert not [l for l in sample.links.of(h, "links") if l.to_uri == "entities/mochi-cat.md"]


def test_the_machine_leaves_a_pair_alone_whatever_field_or_lines_the_person_s_link_points_into(sample):
    h, m = "entities/hangzhou.md", "entities/mochi.md"
    mine = write_link(sample, h, m, "related_to", t_line_ranges="1")
    assert sample.link_many([(h, m, "related_to", {"description": "the machine's"})], persons=person_links(sample)) == []
    assert [l.id for l in sample.links.of(h, "links") if l.to_uri == m] == [mine.id]


def test_a_contradiction_found_between_notes_a_person_linked_is_still_said(sample):
    h, m = "entities/hangzhou.md", "entities/mochi.md"
    write_link(sample, h, m, "related_to", description="mine")
    made = sample.link_many([(h, m, "contradicts", {"description": "they disagree"}),
                             (h, m, "caused_by", {"description": "the machine's view"})], persons=person_links(sample))
    assert [l.link_type.value for l in made] == ["contradicts"]
