"""Linked pages: folder ingest, second-pass reference resolution (every form), unresolved
references with file:line, link types and relations (rules cascade, LLM refinement),
headline fragments not made entities, no confident noise, "Who works at X?"."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import REPO, memlink, set_llm
from ollama_stub import OllamaStub

from engine import Vault
from engine.extract.batch import ingest_batch
from engine.extract.rules import RulesExtractor, names_in
from engine.lint.memo import check
from engine.retrieve.search import search

sys.path.insert(0, str(REPO / "benchmarks"))
from linked_world import generate  # noqa: E402

RULES = RulesExtractor()


def write(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text, encoding="utf-8")
    return root


def cli_vault(tmp_path: Path) -> Path:
    """A vault made by `memlink init`, on the rules provider."""
    root = tmp_path / "v"
    assert memlink("init", vault=root).returncode == 0
    set_llm(root, provider="rules")
    return root


def links_of(v: Vault, uri: str) -> dict[str, tuple[str, str]]:
    return {l.to_uri: (l.link_type.value, l.description) for l in v.links.of(uri, "links")}


def test_folder_ingest_skips_non_text_reports_failures_and_unresolved(tmp_path):
    root = cli_vault(tmp_path)
    pages = write(tmp_path / "pages", {
        "people/mia.md": "# Mia Brown\n\nMia works at [Acme](../companies/acme.md).\n\n"
                         "She often quotes [Zed](../people/zed).\n",
        "companies/acme.md": "# Acme\n\nA harbour software company.\n",
        "notes.txt": "Loose notes that mention people/mia.\n",
        "logo.png": b"\x89PNG\r\n",
        "broken.md": b"# Broken\x00\x00",
        ".obsidian/workspace.md": "# not a page\n",
    })
    r = memlink("ingest", str(pages), "--json", vault=root)
    assert r.returncode == 5, r.stderr  # one file failed, the others landed (EXIT_PARTIAL)
    out = json.loads(r.stdout)
    assert sorted(f["source"] for f in out["files"]) == ["sources/pages/companies/acme.md", "sources/pages/notes.md",
                                                          "sources/pages/people/mia.md"]  # where they were
    assert out["skipped"] == [] and out["copied"] == ["sources/pages/logo.png"]  # an attachment, copied beside them
    assert [Path(f["path"]).name for f in out["failed"]] == ["broken.md"] and "broken.md" in out["failed"][0]["error"]
    assert "broken.md" in r.stderr
    assert out["unresolved"] == [{"file": str(pages / "people/mia.md"), "line": 5, "ref": "[Zed](../people/zed)"}]
    v = Vault.open(root)
    mia = v.read_note("sources/pages/people/mia.md")
    assert mia.fields["title"] == "mia"  # the file's name; its heading is another name memlink knows it by
    assert mia.fields["aliases"] == ["people/mia.md", "Mia Brown"]
    assert mia.fields["kind"] == "person"
    assert links_of(v, "sources/pages/notes.md") == {"sources/pages/people/mia.md": ("related_to", "referenced in the text")}
    assert [p for p in check(v) if p.severity == "error"] == []
    text = memlink("ingest", str(pages), vault=root)  # again: everything known, the unresolved still reported
    assert f"{pages / 'people/mia.md'}:5: [Zed](../people/zed)" not in text.stdout  # known files print no report
    assert "3 files imported" not in text.stdout and "0 files imported" in text.stdout


def test_every_reference_form_resolves_in_the_second_pass(vault, tmp_path):
    # a.md is read first and names pages imported after it, in every form.
    pages = write(tmp_path / "pages", {
        "a.md": ("# Alpha\n\n"
                 "- [one](sub/t1.md) and [two](sub/t2)\n"
                 "- [three](/sub/t3.md) and [four](/sub/t4)\n"
                 "- [[Target Five]] and [[t6|the sixth]]\n"
                 "- see sub/t7 and sub/t8.md\n"
                 "- [nine](sub/deeper/../t9.md)\n"
                 "```\n[[Target Five]] [x](sub/nowhere.md)\n```\n"
                 "- [web](https://example.com/sub/t1) and [gone](sub/t10.md) and [[Nobody Here]]\n"),
        **{f"sub/t{i}.md": (("---\naliases: [Target Five]\n---\n" if i == 5 else "") + f"# Target {i}\n\n"
                             + ("Back to [Alpha](../a.md).\n" if i == 1 else "Plain.\n")) for i in range(1, 10)},
    })
    result = ingest_batch(vault, [pages], extractor=RULES)
    uris = {Path(f.path).stem: f.source_uri for f in result.files}
    got = links_of(vault, uris["a"])
    assert set(got) == {uris[f"t{i}"] for i in range(1, 10)}
    assert {(l.to_uri, l.match_text) for l in vault.links.of(uris["a"], "links")} >= {
        (uris["t6"], "the sixth"), (uris["t7"], "sub/t7"), (uris["t5"], "Target Five")}
    assert links_of(vault, uris["t1"]) == {uris["a"]: ("related_to", "referenced in the text")}  # relative "../a.md"
    assert [(u["line"], u["ref"]) for u in result.unresolved] == [(11, "[gone](sub/t10.md)"), (11, "[[Nobody Here]]")]
    assert vault.read_note(uris["t3"]).fields["aliases"] == ["sub/t3.md", "Target 3"]
    assert [p for p in check(vault) if p.severity == "error"] == []


def test_links_carry_the_relation_the_text_states(vault, tmp_path):
    pages = write(tmp_path / "pages", {
        "people/mia-brown.md": "---\ntitle: Mia Brown\ntype: person\n---\n\nMia is the CTO of [Acme](../companies/acme.md).\n",
        "people/bob-stone.md": "# Bob Stone\n\nAn angel investor.\n",
        "people/carla-diaz.md": "# Carla Diaz\n\nLawyer.\n",
        "people/dan-ek.md": "# Dan Ek\n\nSales.\n",
        "companies/acme.md": ("# Acme\n\n[Bob Stone](../people/bob-stone) invested in the seed round.\n"
                              "[[Carla Diaz]] advises the founders on hiring.\n"
                              "[[dan-ek|Dan]] reports to [[Mia Brown]].\n"),
        "meetings/acme-q3-investor-update.md": ("# Acme Q3 investor update\n\nAttendees: [[Mia Brown]], [[Bob Stone]]\n\n"
                                                "[[Carla Diaz]] sent apologies.\n"),
    })
    result = ingest_batch(vault, [pages], extractor=RULES)
    s = {Path(f.path).stem: f.source_uri for f in result.files}.__getitem__
    assert links_of(vault, s("mia-brown"))[s("acme")] == ("belongs_to", "works at")
    acme = links_of(vault, s("acme"))
    assert acme[s("bob-stone")] == ("related_to", "backed by")
    assert acme[s("carla-diaz")] == ("related_to", "advised by")
    meeting = links_of(vault, s("acme-q3-investor-update"))  # "investor" in its title states nothing
    assert meeting[s("mia-brown")] == meeting[s("bob-stone")] == ("belongs_to", "attended by")
    assert meeting[s("carla-diaz")][1] == "referenced in the text"  # sent apologies: not there


def answer(v: Vault) -> str:
    return json.dumps({**{t.memory_type: [] for t in v.types if t.link_enabled}, "links": []})


@pytest.mark.parametrize("reply", ["good", "bad"])
def test_an_llm_refines_the_link_types_or_its_answer_is_quarantined(vault, tmp_path, reply):
    pages = write(tmp_path / "pages", {
        "companies/acme.md": "# Acme\n\nWe see a lot of [Mia](../people/mia.md).\n",
        "people/mia.md": "# Mia\n\nEngineer.\n",
    })
    with OllamaStub() as stub:
        v = set_llm(vault.root, provider="ollama", model="tiny", host=stub.host, timeout=3)
        refined = {"links": [{"ref": 1, "link_type": "belongs_to", "relation": "employs"}]}
        if reply == "bad":
            refined["links"][0]["mood"] = "sure"  # a key the contract does not have
        # File by file: acme's memories, then the types of acme's links, then mia's memories.
        stub.script += [("json", answer(v)), ("json", json.dumps(refined)), ("json", answer(v))]
        result = ingest_batch(v, [pages])
    asked = stub.requests[-2]["body"]
    assert "refers to other pages" in asked["messages"][0]["content"] and asked["format"]["title"] == "LinkChoices"
    got = links_of(v, "sources/pages/companies/acme.md")["sources/pages/people/mia.md"]
    if reply == "good":
        assert got == ("belongs_to", "employs") and not result.problems
    else:
        assert got == ("related_to", "referenced in the text")  # the rules' type, kept
        assert "link types kept from the rules" in result.problems[0]
        assert len(list((v.state_dir / "quarantine").glob("*.json"))) == 1


def test_headline_fragments_are_not_entities(vault, tmp_path):
    assert names_in("Led Series B round on 3 March 2021.") == []
    assert names_in("Why Most Startups Fail") == []
    assert names_in("On 5 June 2024 we met Dana Whitfield at Web Summit.") == ["Dana Whitfield", "Web Summit"]
    doc = write(tmp_path, {"co.md": "# Kestrel Labs\n\n## Why Most Startups Fail\n\n"
                                    "- Led Series B round on 3 March 2021.\n"
                                    "- On 5 June 2024 the team met Dana Whitfield at Web Summit.\n"})
    ingest_batch(vault, [doc / "co.md"], extractor=RULES)
    assert sorted(e.title for e in vault.catalog.all("entity")) == ["Dana Whitfield", "Web Summit"]


def test_nonsense_returns_nothing(sample):
    assert search(sample, "xyzzyqq") == []
    assert search(sample, "xyzzyqq", routes=("vector",)) == []
    assert search(sample, "Man Met Bril")  # a real query still answers
    r = memlink("search", "xyzzyqq", "--json", vault=sample.root)
    assert r.returncode == 0 and json.loads(r.stdout) == []
    assert memlink("search", "xyzzyqq", vault=sample.root).stdout.strip() == "no results"


def test_who_works_at_x_on_a_small_generated_world(vault, tmp_path):
    world = generate(seed=3, people=14, companies=4, meetings=3)
    world.write(tmp_path / "pages")
    ingest_batch(vault, [tmp_path / "pages"], extractor=RULES)
    person = {e.uri: e.aliases[0] for e in vault.catalog.all("source")}
    asked = [q for q in world.questions if q.relation in ("works_at", "invested_in")]
    assert asked
    for q in asked:
        hits = search(vault, q.text, k=5)
        assert all(h.routes[0].kind == "answer" for h in hits)  # only people: not the page the question names
        assert all(person[h.routes[0].via.src] == q.target for h in hits)
        assert sorted(person[h.uri] for h in hits[: len(q.gold)]) == q.gold, q.text  # the sure answers first
    q = asked[0]
    out = json.loads(memlink("search", q.text, "--json", vault=vault.root).stdout)
    first = out[0]["routes"][0]
    assert first["kind"] == "answer" and first["relation"] in ("works at", "employs", "invested in", "backed by")


# -- review fixes: what a folder may hold, crashes, user text, paths and titles across batches --
def test_symlinks_and_special_files_in_a_folder_are_skipped_never_followed(vault, tmp_path):
    import os

    secret = write(tmp_path / "outside", {"secret.md": "# Secret\n\nroot:x:0:0\n"})
    pages = write(tmp_path / "pages", {"people/mia.md": "# Mia\n\nEngineer.\n"})
    (pages / "people" / "link.md").symlink_to(secret / "secret.md")
    (pages / "linked").symlink_to(secret, target_is_directory=True)
    os.mkfifo(pages / "pipe.md")  # reading it would block forever
    result = ingest_batch(vault, [pages], extractor=RULES)
    assert [f.source_uri for f in result.files] == ["sources/pages/people/mia.md"]
    why = {Path(s["path"]).name: s["why"] for s in result.skipped}
    assert why == {"link.md": "a symbolic link (not followed)", "linked": "a symbolic link (not followed)",
                   "pipe.md": "not a regular file (a FIFO, socket or device)"}
    assert not any("root:x" in vault.read_body(e.uri) for e in vault.catalog.all())
    # A FIFO named on the command line is skipped too, not waited on.
    assert [s["why"] for s in ingest_batch(vault, [pages / "pipe.md"], extractor=RULES).skipped] == [
        "not a regular file (a FIFO, socket or device)"]


def test_a_file_swapped_for_a_fifo_or_link_after_collecting_is_refused(tmp_path):
    import os

    from engine.extract.inputs import InputError, read_text_file

    os.mkfifo(tmp_path / "pipe.md")
    with pytest.raises(InputError, match="not a regular file"):
        read_text_file(tmp_path / "pipe.md")
    (tmp_path / "real.md").write_text("# Real\n")
    (tmp_path / "link.md").symlink_to(tmp_path / "real.md")
    with pytest.raises(InputError, match="symbolic link"):
        read_text_file(tmp_path / "link.md", follow=False)
    assert read_text_file(tmp_path / "link.md") == "# Real\n"  # a chat export named by its link still reads


def test_the_vault_cannot_be_ingested_into_itself(vault, tmp_path):
    from engine.extract.inputs import InputError

    vault.write_note("entity", {"name": "Ana", "content": "Ana codes."})
    for inside in (vault.root, vault.root / "entities", vault.root / "entities" / "ana.md"):
        with pytest.raises(InputError, match="inside the vault"):
            ingest_batch(vault, [inside], extractor=RULES)
    r = memlink("ingest", str(vault.root / "entities"), vault=vault.root)
    assert r.returncode != 0 and "inside the vault" in r.stderr
    # A folder that holds the vault: the vault is left out, named.
    write(tmp_path, {"notes/a.md": "# A page\n\nText.\n"})
    result = ingest_batch(vault, [tmp_path], extractor=RULES)
    assert [f.source_uri for f in result.files] == [f"sources/{tmp_path.name}/notes/a.md"]
    assert {"path": str(tmp_path / "vault"), "why": "the vault itself"} in result.skipped


CRASH_PAGES = {
    "companies/acme-robotics.md": ("# Acme Robotics\n\nAcme Robotics employs [Mia Brown](../people/mia-brown.md).\n\n"
                                   "On 3 March 2024 Jordan Lee signed the Kestrel Ventures term sheet in Berlin.\n"),
    "people/mia-brown.md": ("# Mia Brown\n\nMia Brown works at [Acme Robotics](../companies/acme-robotics.md). "
                            "She met Jordan Lee in Berlin on 4 May 2024.\n"),
    "people/bob-stone.md": "# Bob Stone\n\nBob Stone invested in [[Acme Robotics]] on 5 June 2023.\n",
    "meetings/kickoff.md": "# Kickoff\n\nAttendees: [[Mia Brown]], [[Bob Stone]].\n",
}


def state_of(v: Vault) -> tuple[dict, set]:
    notes = {e.uri: v.read_note(e.uri).fields for e in v.catalog.all()}
    links = {(l.from_uri, l.to_uri, l.link_type.value, l.weight, l.match_text, l.description, l.t_field, l.t_line_ranges)
             for l in v.links.all()}
    return notes, links


class Killed(BaseException):
    """The process dying: nothing in the batch catches it."""


@pytest.mark.parametrize("step", ["source:2", "extract:1", "extract:3", "links:1", "after-links:1"])
def test_a_rerun_after_a_crash_anywhere_converges_to_a_clean_run(tmp_path, monkeypatch, step):
    import engine.extract.batch as batch

    pages = write(tmp_path / "pages", CRASH_PAGES)
    clean = Vault.init(tmp_path / "clean")
    ingest_batch(clean, [pages], extractor=RULES)
    want = state_of(clean)
    assert len(want[1]) >= 8 and any(u.startswith("events/") for u in want[0])

    v = Vault.init(tmp_path / "crashed")
    what, nth = step.split(":")
    calls = {"n": 0}

    def dying(original):
        def run(*a, **k):
            calls["n"] += 1
            if what == "after-links":
                original(*a, **k)
                raise Killed()  # the links landed, the files are not recorded as done yet
            if calls["n"] == int(nth):
                raise Killed()
            return original(*a, **k)
        return run

    # A file's memories and links land in one unit of work (_land); a kill before it
    # leaves the source pending, a kill after it leaves the file finished but unrecorded.
    target = {"source": (batch, "_write_source"), "extract": (batch, "resolve_operations"),
              "links": (batch, "write_links"), "after-links": (batch, "_land")}[what]
    with monkeypatch.context() as m:
        m.setattr(*target, dying(getattr(*target)))
        with pytest.raises(Killed):
            ingest_batch(v, [pages], extractor=RULES)
    v.close()
    v = Vault.open(tmp_path / "crashed")
    again = ingest_batch(v, [pages], extractor=RULES)
    assert not again.failed and not again.pending
    # Files land one by one: those that finished before the kill are recognised as imported.
    assert len(again.skipped) == {"source": 0, "extract": int(nth) - 1, "links": int(nth) - 1, "after-links": 1}[what]
    got = state_of(v)
    assert {k: (v, want[0].get(k)) for k, v in got[0].items() if want[0].get(k) != v} == {}
    assert got[1] - want[1] == set() and want[1] - got[1] == set()
    assert got == want
    assert [p for p in check(v) if p.severity == "error"] == []
    third = ingest_batch(v, [pages], extractor=RULES)  # and now it is done
    assert len(third.skipped) == len(CRASH_PAGES) and state_of(v) == want


def test_a_changed_file_keeps_what_the_user_typed_under_its_note(vault, tmp_path):
    first = write(tmp_path / "one", {"notes/plan.md": "# Plan\n\nShip in May.\n"})
    ingest_batch(vault, [first], extractor=RULES)
    path = vault.path("sources/one/notes/plan.md")
    path.write_text(path.read_text() + "\nMy own remark: May is optimistic.\n")
    write(first, {"notes/plan.md": "# Plan\n\nShip in June.\n"})
    result = ingest_batch(vault, [first], extractor=RULES)
    assert result.changed == ["sources/one/notes/plan.md"]
    note = vault.read_note("sources/one/notes/plan.md")
    assert "Ship in June." in note.body and "My own remark: May is optimistic." in note.body


def test_import_paths_resolve_within_their_own_batch_and_collisions_are_reported(vault, tmp_path):
    one = write(tmp_path / "one", {"people/alex.md": "# Alex One\n\nFirst.\n"})
    two = write(tmp_path / "two", {"people/alex.md": "# Alex Two\n\nSecond.\n",
                                   "team.md": "# Team\n\n[Alex](people/alex.md) leads.\n"})
    ingest_batch(vault, [one], extractor=RULES)
    ingest_batch(vault, [two], extractor=RULES)
    assert set(links_of(vault, "sources/two/team.md")) == {"sources/two/people/alex.md"}  # its own batch's page
    # A third import that names people/alex.md without having it: two pages answer, reported.
    three = write(tmp_path / "three", {"notes.md": "# Loose\n\nAsk [Alex](people/alex.md).\n"})
    result = ingest_batch(vault, [three / "notes.md"], extractor=RULES)
    assert result.ambiguous == [{"file": str(three / "notes.md"), "line": 3, "ref": "[Alex](people/alex.md)",
                                 "candidates": ["sources/one/people/alex.md", "sources/two/people/alex.md"]}]
    assert links_of(vault, "sources/notes.md") == {}
    # Two folders in one batch, each with its people/alex.md: each resolves its own.
    v2 = Vault.init(tmp_path / "v2")
    a = write(tmp_path / "a", {"people/alex.md": "# Alex A\n\nA.\n", "team.md": "# Team A\n\n[Alex](people/alex.md).\n"})
    b = write(tmp_path / "b", {"people/alex.md": "# Alex B\n\nB.\n", "team.md": "# Team B\n\n[Alex](people/alex.md).\n"})
    ingest_batch(v2, [a, b], extractor=RULES)
    assert set(links_of(v2, "sources/a/team.md")) == {"sources/a/people/alex.md"}
    assert set(links_of(v2, "sources/b/team.md")) == {"sources/b/people/alex.md"}


def test_a_name_several_pages_have_resolves_next_to_the_referring_page_or_is_reported(vault, tmp_path):
    pages = write(tmp_path / "pages", {"a/dup.md": "# Dup\n\nIn a.\n", "b/dup.md": "# Dup\n\nIn b.\n",
                                       "a/acme.md": "# Acme\n\nSee [[Dup]].\n", "c/other.md": "# Other\n\nSee [[Dup]].\n"})
    result = ingest_batch(vault, [pages], extractor=RULES)
    assert set(links_of(vault, "sources/pages/a/acme.md")) == {"sources/pages/a/dup.md"}  # the one in its folder
    assert links_of(vault, "sources/pages/c/other.md") == {}  # two equally short paths: nothing tells them apart
    [amb] = result.ambiguous
    assert (Path(amb["file"]).name, amb["line"], amb["ref"]) == ("other.md", 3, "[[Dup]]")
    assert sorted(amb["candidates"]) == ["sources/pages/a/dup.md", "sources/pages/b/dup.md"]


def test_reverse_cues_flip_the_relation_when_page_kinds_are_unknown(vault, tmp_path):
    from engine.model.relations import describe, relation_in

    def said(sentence: str, ref: str) -> str | None:
        rel, from_is_subject = relation_in(sentence, "", "", sentence.index(ref))
        return describe(rel, from_is_subject) if rel else None

    assert said("Acme employs [Mia].", "[Mia]") == "employs"
    assert said("Acme hired [Mia] last year.", "[Mia]") == "employs"
    assert said("Acme was backed by [Bob].", "[Bob]") == "backed by"
    assert said("Acme was funded by [Kestrel].", "[Kestrel]") == "backed by"
    assert said("Acme was founded by [Mia].", "[Mia]") == "founded by"
    assert said("Acme is advised by [Carla].", "[Carla]") == "advised by"
    assert said("Bob manages [Mia].", "[Mia]") == "manages"
    assert said("Mia is managed by [Bob].", "[Bob]") == "reports to"  # already the right way round
    assert said("[Acme] employs Mia.", "[Acme]") == "works at"  # the reference is the subject
    assert said("[Acme] was founded by Mia.", "[Acme]") == "founded"
    assert said("Mia was hired by [Acme].", "[Acme]") == "works at"
    assert said("Mia works at [Acme].", "[Acme]") == "works at"
    # A folder with no people/ or companies/ and no frontmatter type.
    pages = write(tmp_path / "pages", {
        "acme.md": "# Acme\n\nAcme employs [[Mia]]. Acme was backed by [[Bob]]. Acme was founded by [[Zoe]].\n",
        "mia.md": "# Mia\n\nEngineer.\n", "bob.md": "# Bob\n\nInvestor.\n", "zoe.md": "# Zoe\n\nFounder.\n",
        "lead.md": "# Lead\n\nLead manages [[Mia]].\n",
    })
    ingest_batch(vault, [pages], extractor=RULES)
    got = links_of(vault, "sources/pages/acme.md")
    assert got["sources/pages/mia.md"][1] == "employs"
    assert got["sources/pages/bob.md"][1] == "backed by"
    assert got["sources/pages/zoe.md"][1] == "founded by"
    assert links_of(vault, "sources/pages/lead.md")["sources/pages/mia.md"][1] == "manages"


def test_real_names_keep_their_first_word_and_openers_are_dropped_only_at_the_start():
    assert names_in("She moved to New Zealand.") == ["New Zealand"]
    assert names_in("She studied at New York University.") == ["New York University"]
    assert names_in("New York University hired her.") == ["New York University"]
    assert names_in("Will Smith joined the board.") == ["Will Smith"]
    assert names_in("We met Will Smith at First Republic Bank.") == ["Will Smith", "First Republic Bank"]
    assert names_in("First Republic Bank failed in 2023.") == ["First Republic Bank"]
    assert names_in("Big Sur is lovely in May.") == ["Big Sur"]
    assert names_in("## Open Questions") == [] and names_in("Recent Press Coverage") == []  # headlines
    assert names_in("Why Mia Brown left is unclear.") == ["Mia Brown"]  # an opener, at the start
    assert names_in("On Monday Mia Brown called.") == ["Mia Brown"]
    assert names_in("Led Series B round on 3 March 2021.") == []


def test_ingest_output_is_printable_and_counts_page_links_honestly(tmp_path):
    root = cli_vault(tmp_path)
    pages = write(tmp_path / "pages", {
        "people/mia.md": "# Mia \x1b]0;owned\x07Brown\x1b[2J\n\nMia works at [Acme](../companies/acme.md). "
                         "See [gone\x1b[31m](nowhere\x9b1m.md).\n\nOn 3 March 2024 Mia met Jordan Lee in Berlin.\n",
        "companies/acme.md": "# Acme\n\nA harbour software company.\n",
    })
    r = memlink("ingest", str(pages), vault=root)
    assert r.returncode == 0, r.stderr
    assert not any(c in r.stdout for c in "\x1b\x07\x9b"), r.stdout
    assert "]0;owned" not in r.stdout and "[gone](nowhere.md)" in r.stdout
    out = json.loads(memlink("ingest", str(pages), "--json", vault=tmp_path / "v").stdout)  # all known: no new links
    assert out["page_links"] == 0
    v = Vault.open(root)
    pages_links = sum(1 for l in v.links.all() if l.from_uri.startswith("sources/") and l.to_uri.startswith("sources/"))
    assert pages_links == 1
    summary = r.stdout.strip().splitlines()[-1]
    derived = sum(1 for _ in v.links.all()) - pages_links
    assert derived > 0 and f"{pages_links} links between pages (+{derived} from extracted notes)" in summary


def test_a_founder_answers_who_works_at_the_company(vault, tmp_path):
    """A page saying "the founder of Cascade" is typed `founded`; founding implies working
    there, so "Who works at Cascade?" answers with the founder as well as the staff."""
    pages = write(tmp_path / "pages", {
        "people/yara-smith.md": "# Yara Smith\n\nYara Smith is the founder of [[Cascade]].\n",
        "people/ivo-berg.md": "# Ivo Berg\n\nIvo works at [[Cascade]] as an engineer.\n",
        "people/lena-moss.md": "# Lena Moss\n\nLena advises [[Cascade]] on pricing.\n",
        "companies/cascade.md": "# Cascade\n\nA logistics start-up.\n",
    })
    ingest_batch(vault, [pages], extractor=RULES)
    p = lambda rel: f"sources/pages/{rel}.md"  # noqa: E731
    assert links_of(vault, p("people/yara-smith"))[p("companies/cascade")][1] == "founded"
    hits = search(vault, "Who works at Cascade?", k=5)
    answers = {h.uri for h in hits if h.routes[0].kind == "answer" and h.routes[0].via is not None}
    assert {p("people/yara-smith"), p("people/ivo-berg")} <= answers
    assert p("people/lena-moss") not in answers  # advising is not working there


@pytest.mark.parametrize(("sentence", "ref", "kinds", "said"), [
    ("Yara Smith is the founder and CEO of [Cascade].", "[Cascade]", ("person", "company"), "founded"),
    ("Cascade was co-founded in 2019 by [Yara Smith].", "[Yara Smith]", ("", ""), "founded by"),
    ("Ivo leads engineering at [Cascade].", "[Cascade]", ("person", "company"), "works at"),
    ("Ivo runs engineering at [Cascade].", "[Cascade]", ("", ""), "works at"),
    ("Cascade raised a Series A led by [Zed Capital].", "[Zed Capital]", ("", ""), "backed by"),
    ("[Zed Capital] participated in the seed round.", "[Zed Capital]", ("company", "company"), "backed by"),
    ("Zed participated in the seed round of [Cascade].", "[Cascade]", ("person", "company"), "invested in"),
    ("Cascade is backed by [Zed].", "[Zed]", ("", ""), "backed by"),
])
def test_sentences_as_web_pages_state_them_give_the_typed_relation(sentence, ref, kinds, said):
    from engine.model.relations import describe, relation_in

    rel, from_is_subject = relation_in(sentence, *kinds, ref_at=sentence.index(ref))
    assert rel is not None and describe(rel, from_is_subject) == said


def test_what_a_relation_implies_is_data_in_the_link_type_table():
    from engine.model.linktypes import builtin_data
    from engine.model.relations import BY_NAME, load_relations

    rows = builtin_data()["relations"]
    assert next(r for r in rows if r["name"] == "founded")["implies"] == ["works_at"]
    assert BY_NAME["founded"].answers(BY_NAME["works_at"]) and not BY_NAME["advises"].answers(BY_NAME["works_at"])
    bad = [{**rows[0], "implies": ["owns"]}]
    with pytest.raises(ValueError, match="implies 'owns'"):
        load_relations(bad, "link_types.yaml")


def test_a_ceo_page_answers_who_works_there_and_who_returns_only_people(vault, tmp_path):
    pages = write(tmp_path / "pages", {
        "people/yara-smith.md": "# Yara Smith\n\nYara Smith is the founder and CEO of [[Cascade]].\n",
        "people/omar-haddad.md": "# Omar Haddad\n\nOmar runs engineering at [[Cascade]].\n",
        "people/lena-moss.md": "# Lena Moss\n\nLena advises [[Cascade]] on pricing.\n",
        "companies/zed-capital.md": "# Zed Capital\n\nA seed fund.\n",
        "companies/cascade.md": ("# Cascade\n\nCascade was co-founded in 2019 by [[Yara Smith]].\n"
                                 "Cascade raised a Series A led by [[Zed Capital]].\n\n"
                                 "- On 3 March 2024 the team shipped routing at Web Summit.\n"),
        "index.md": "# Directory\n\n" + "".join(f"- [[{t}]]\n" for t in
                                                ("Yara Smith", "Omar Haddad", "Lena Moss", "Zed Capital", "Cascade")),
    })
    ingest_batch(vault, [pages], extractor=RULES)
    p = lambda rel: f"sources/pages/{rel}.md"  # noqa: E731
    assert links_of(vault, p("companies/cascade"))[p("companies/zed-capital")][1] == "backed by"
    for question in ("Who works at Cascade?", "Who is on the Cascade team?"):
        hits = search(vault, question, k=5)
        assert {p("people/yara-smith"), p("people/omar-haddad")} <= {h.uri for h in hits}, question
        assert {vault.catalog.get(h.uri).kind for h in hits} == {"person"}, question  # no company, index, event
    out = json.loads(memlink("search", "Who works at Cascade?", "--json", vault=vault.root).stdout)
    assert {h["uri"] for h in out} == {p("people/yara-smith"), p("people/omar-haddad")}


def test_the_real_vault_lookups_ask_headings_only_one_page_holds(tmp_path):
    """benchmarks/vault_lookup.py's questions: a section heading of two words or more that
    no other page holds and that is no page's file name; not one inside a code block, nor
    of a hidden page (ingest leaves those out); at most PER_PAGE a page, in page order."""
    from vault_lookup import PER_PAGE, lookups, page_texts

    many = "\n".join(f"## Step number {i}\ntext" for i in range(PER_PAGE + 2))
    write(tmp_path, {
        "Sync/Set up sync.md": "intro\n## Choose a remote vault\ntext\n## Troubleshooting\n## Daily notes\n"
                               "````\n```\n## Not a heading\n```\n## Still code\n````\n## Shared heading\n",
        "Other.md": "## Shared heading\n## [[Link|Pick a *device*]]\n## Use snake_case names\n",
        "Daily notes.md": "text\n",
        "Long.md": many,
        ".trash/Old.md": "## Choose a remote vault\n## Only in the trash\n",
    })
    asked = [(q.text, q.page) for q in lookups(page_texts(tmp_path))]
    assert ("Choose a remote vault", "Sync/Set up sync.md") in asked
    assert ("Pick a device", "Other.md") in asked and ("Use snake_case names", "Other.md") in asked
    assert not {t for t, _ in asked} & {"Troubleshooting", "Daily notes", "Not a heading", "Still code",
                                        "Shared heading", "Only in the trash"}
    assert [t for t, p in asked if p == "Long.md"] == [f"Step number {i}" for i in range(PER_PAGE)]
