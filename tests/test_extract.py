"""The write path: rules and Ollama extraction, resolve + apply, auto-links, commit,
ingest, quarantine, idempotent replay, line ranges after edits."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
import yaml
from conftest import uncommitted
from ollama_stub import OllamaStub

from engine import Vault
from engine.extract.batch import ingest
from engine.extract.inputs import InputError
from engine.extract.loop import ExtractionRejected
from engine.extract.operations import operations_model
from engine.extract.rules import RulesExtractor
from engine.lint.memo import check
from engine.sessions.commit import commit_session

RULES = RulesExtractor()


def snapshot(v: Vault) -> dict[str, str]:
    return {p.relative_to(v.root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in v.root.rglob("*") if p.is_file() and ".memlink" not in p.parts}


def session(v: Vault, name: str, lines: list[tuple[str, str]], day: str = "2026-11-29") -> None:
    with open(v.root / "sessions" / f"{name}.jsonl", "w", encoding="utf-8") as fh:
        for i, (role, content) in enumerate(lines):
            fh.write(json.dumps({"session": name, "id": f"{name}-{i:03d}", "role": role, "content": content,
                                 "ts": f"{day}T10:{i:02d}:00+00:00"}) + "\n")


def test_rules_on_the_sample_sessions(sample):
    uncommitted(sample.root)
    report = commit_session(sample, "2026-08-11-evening-setup", RULES)
    assert "preferences/明前龙井.md" in report.created
    tea = sample.links.of("preferences/明前龙井.md", "links")
    assert {(l.to_uri, l.link_type.value) for l in tea} >= {("profile.md", "belongs_to"), ("entities/hangzhou.md", "related_to")}
    assert all(l.match_text in sample.read_note("preferences/明前龙井.md").body for l in tea if l.match_text)
    report = commit_session(sample, "2026-11-20-weekly-review", RULES)
    kiln = "report_candidates/small-electric-kilns-for-home.md"
    assert kiln in report.created
    assert sample.read_note(kiln).fields["status"] == "pending"
    assert [p for p in check(sample) if p.severity == "error"] == []


def test_replay_creates_nothing_new(sample):
    uncommitted(sample.root)
    setup = sample.root / "sessions" / "2026-08-11-evening-setup.jsonl"
    replay = setup.with_name("replay.jsonl")
    replay.write_bytes(setup.read_bytes())  # the same turns under another session id
    commit_session(sample, "2026-08-11-evening-setup", RULES)
    assert commit_session(sample, "2026-08-11-evening-setup", RULES) is None  # nothing new
    before = snapshot(sample)
    again = commit_session(sample, "replay", RULES)  # the same input extracted again
    assert again.created == [] and again.changed == [] and again.links_added == []
    assert {k: v for k, v in snapshot(sample).items() if k != "sessions/replay.jsonl"} == \
        {k: v for k, v in before.items() if k != "sessions/replay.jsonl"}


def test_a_commit_is_recorded_in_the_session_log_with_its_notes(ollama_vault):
    """Which turns were extracted is in the vault itself: with `.memlink/` deleted, a
    second commit asks the model nothing and adds no note and no link, though the model
    would word the same turn differently."""
    v, stub = ollama_vault
    for name in ("First pottery class", "Pottery lessons begin"):
        stub.script.append(("json", answer(v, event=[{"page_id": 100, "event_name": name, "date": "2026-11-24",
                                                      "content": "Started pottery classes."}],
                                           links=[{"f": 100, "t": 1, "t_field": "content", "t_line_ranges": "1",
                                                   "link_type": "belongs_to", "weight": 0.9, "match_text": "pottery",
                                                   "description": "her hobby"}])))
    report = commit_session(v, "s")
    assert report.created == ["events/2026/11/24/first-pottery-class.md"]
    asked = len(stub.requests)
    marks = [json.loads(line) for line in v.path("sessions/s.jsonl").read_text().splitlines()][2:]
    assert [(m["kind"], m["upto"]) for m in marks] == [("commit", "s-001")]
    before = snapshot(v)
    v.close()
    shutil.rmtree(v.root / ".memlink")
    v = Vault.open(v.root)
    assert commit_session(v, "s") is None
    assert len(stub.requests) == asked and snapshot(v) == before
    # A new turn is committed on its own, after the mark.
    with open(v.path("sessions/s.jsonl"), "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"session": "s", "id": "s-009", "role": "user", "content": "I bought clay.", "ts": "2026-11-25T10:00:00+00:00"}) + "\n")
    assert commit_session(v, "s") is not None
    assert "I bought clay." in stub.requests[-1]["body"]["messages"][0]["content"]
    assert "I started pottery classes" not in stub.requests[-1]["body"]["messages"][0]["content"]


def test_a_commit_that_lost_the_race_writes_nothing(ollama_vault, monkeypatch):
    """Two commits of one session at once: the one that lands second finds the other's
    mark under the lock and writes nothing (its turns are the other's)."""
    import engine.sessions.commit as commit

    v, stub = ollama_vault
    stub.script.append(("json", answer(v, event=[{"page_id": 100, "event_name": "Pottery", "date": "2026-11-24",
                                                  "content": "Started pottery classes."}])))
    real = commit.ExtractLoop.run

    def run_and_meanwhile_another_commit(self, ctx):
        ops = real(self, ctx)
        monkeypatch.setattr(commit.ExtractLoop, "run", real)
        assert commit_session(Vault.open(v.root), "s", RULES) is not None  # lands first
        return ops

    monkeypatch.setattr(commit.ExtractLoop, "run", run_and_meanwhile_another_commit)
    before = snapshot(v)
    assert commit_session(v, "s") is None
    lines = [json.loads(line) for line in v.path("sessions/s.jsonl").read_text().splitlines()]
    assert [l.get("kind") for l in lines] == [None, None, "commit"]
    assert "events/2026/11/24/pottery.md" not in snapshot(v) and snapshot(v) != before


def test_contradiction_and_change_of_mind(vault):
    vault.write_note("preference", {"topic": "Coffee", "sentiment": "like", "content": "Loves coffee."})
    vault.write_note("preference", {"topic": "Jazz", "sentiment": "like", "content": "Jazz while cooking."})
    session(vault, "s1", [("user", "I hate coffee."), ("assistant", "Noted."),
                          ("user", "I no longer like jazz, it got boring."), ("assistant", "OK.")])
    report = commit_session(vault, "s1", RULES)
    hate = next(u for u in report.created if u.startswith("preferences/coffee-2026"))
    assert [(l.to_uri, l.link_type.value) for l in vault.links.of(hate, "links")] == [("preferences/coffee.md", "contradicts")]
    jazz = next(u for u in report.created if "jazz" in u and u != "preferences/jazz.md")
    assert ("preferences/jazz.md", "evolved_from") in {(l.to_uri, l.link_type.value) for l in vault.links.of(jazz, "links")}


def test_a_change_of_view_said_as_chats_say_it_and_no_preference_about_a_person(vault):
    vault.write_note("preference", {"topic": "Coffee", "sentiment": "like", "content": "Loves coffee."})
    session(vault, "s1", [("user", "I hate coffee these days"), ("assistant", "Noted."),
                          ("user", "I love you too, see you tonight"), ("assistant", "x"),
                          ("user", "I hate you lol"), ("assistant", "y"),
                          ("user", "I love matcha now, it is gentler"), ("assistant", "z")])
    report = commit_session(vault, "s1", RULES)
    assert sorted(u for u in report.created if u.startswith("preferences/")) == [
        "preferences/coffee-2026-11-29.md", "preferences/matcha.md"], report.created
    assert [(l.to_uri, l.link_type.value) for l in vault.links.of("preferences/coffee-2026-11-29.md", "links")
            if l.to_uri.startswith("preferences/")] == [("preferences/coffee.md", "contradicts")]


def test_dated_events_research_requests_and_chinese(vault):
    vault.write_note("entity", {"name": "Noor El Mansouri", "kind": "person", "content": "Studio friend."})
    session(vault, "s2", [
        ("user", "Yesterday I met Noor El Mansouri at the studio and we glazed six bowls."),
        ("user", "Can you help me research wood-fired kilns near Utrecht?"),
        ("user", "我不喜欢袋泡茶。帮我研究一下杭州的茶园"),
    ], day="2026-11-29")
    report = commit_session(vault, "s2", RULES)
    event = next(u for u in report.created if u.startswith("events/2026/11/28/"))
    note = vault.read_note(event)
    assert note.fields["participants"] == ["Noor El Mansouri"]
    assert ("entities/noor-el-mansouri.md") in {l.to_uri for l in vault.links.of(event, "links")}
    assert any(u.startswith("report_candidates/wood-fired-kilns-near-utrecht") for u in report.created)
    assert "preferences/袋泡茶.md" in report.created
    assert vault.read_note("preferences/袋泡茶.md").fields["sentiment"] == "dislike"
    assert any(u.startswith("report_candidates/") and "杭州" in u for u in report.created)


def test_ingest_markdown_with_references(vault, tmp_path):
    vault.write_note("entity", {"name": "Atlas", "kind": "project", "content": "The harbour rewrite."})
    doc = tmp_path / "notes.md"
    doc.write_text("# Offsite notes\n\nWe reviewed [[Atlas]] and [the plan](entities/ghost.md).\n"
                   "```\n[[Not a link]]\n```\nI like short standups.\n")
    result = ingest(vault, doc, extractor=RULES)
    src = result.source_uri
    assert src == "sources/notes.md"  # its file name
    assert ("entities/atlas.md", "Atlas") in {(l.to_uri, l.match_text) for l in vault.links.of(src, "links")}
    assert f"{doc}:3: [the plan](entities/ghost.md)" in result.report.unresolved  # file:line: reference
    assert not any("Not a link" in r for r in result.report.unresolved)  # code fences ignored
    pref = "preferences/short-standups.md"
    assert pref in result.report.created
    assert (src, "derived_from") in {(l.to_uri, l.link_type.value) for l in vault.links.of(pref, "links")}
    again = ingest(vault, doc, extractor=RULES)
    assert again.skipped == f"already imported as {src}"


def test_ingest_rejects_binary_and_no_wiki_extracts_nothing(vault, tmp_path):
    binary = tmp_path / "photo.md"
    binary.write_bytes(b"\x89PNG\x00\x00garbage")
    with pytest.raises(InputError, match="binary"):
        ingest(vault, binary, extractor=RULES)
    assert not list((vault.root / "sources").glob("*.md"))
    doc = tmp_path / "mail.txt"
    doc.write_text("I love long lunches.\n")
    result = ingest(vault, doc, wiki=False, extractor=RULES)
    assert result.report.created == ["sources/mail.md"]
    assert not list((vault.root / "preferences").glob("*.md"))
    assert vault.read_note("sources/mail.md").fields["in_wiki"] is False


# -- the Ollama path, through the real client against a loopback server -----------------------
@pytest.fixture
def ollama_vault(vault):
    stub = OllamaStub()
    stub.__enter__()
    cfg = yaml.safe_load((vault.root / "memlink.yaml").read_text())
    cfg["llm"] = {"provider": "ollama", "model": "tiny", "host": stub.host, "timeout": 3}
    (vault.root / "memlink.yaml").write_text(yaml.safe_dump(cfg))
    v = Vault.open(vault.root)
    v.write_note("profile", {"name": "Lena", "content": "Engineer in Rotterdam.\nLikes tea."})
    session(v, "s", [("user", "I started pottery classes on Tuesday."), ("assistant", "Nice!")])
    yield v, stub
    stub.__exit__()


def answer(v: Vault, **parts) -> str:
    keys = [t.memory_type for t in v.types if t.link_enabled]
    return json.dumps({**{k: [] for k in keys}, "links": [], **parts})


def test_ollama_commit_writes_notes_and_links(ollama_vault):
    v, stub = ollama_vault
    stub.script.append(("json", answer(v, event=[{"page_id": 100, "event_name": "First pottery class", "date": "2026-11-24",
                                                  "content": "Started pottery classes."}],
                                       links=[{"f": 100, "t": 1, "t_field": "content", "t_line_ranges": "1", "link_type": "belongs_to",
                                               "weight": 0.9, "match_text": "pottery", "description": "her hobby"}])))
    report = commit_session(v, "s")
    assert report.provider == "ollama:tiny"
    assert report.created == ["events/2026/11/24/first-pottery-class.md"]
    (link,) = v.links.of("events/2026/11/24/first-pottery-class.md", "links")
    assert (link.to_uri, link.t_line_ranges, link.match_text) == ("profile.md", "1", "pottery")
    prompt = stub.requests[-1]["body"]["messages"][0]["content"]
    assert "[page:1] profile · profile.md" in prompt and "I started pottery classes" in prompt
    assert stub.requests[-1]["body"]["format"] == operations_model(v.types, [t.memory_type for t in v.types if t.link_enabled]).model_json_schema()


@pytest.mark.parametrize("bad", [
    "not json at all, sorry",
    json.dumps({"event": [], "links": []}),  # missing keys
    "EXTRA",  # an extra top-level field
    "BADENUM",  # a link type that does not exist
    "UNKNOWNPAGE",  # a link to a page that was never shown
])
def test_invalid_ollama_output_is_quarantined_and_changes_nothing(ollama_vault, bad):
    v, stub = ollama_vault
    link = {"f": 100, "t": 1, "t_field": "content", "t_line_ranges": None, "link_type": "belongs_to", "weight": 0.5,
            "match_text": None, "description": ""}
    item = {"page_id": 100, "event_name": "Class", "date": "2026-11-24", "content": "x"}
    if bad == "EXTRA":
        bad = answer(v, event=[item], mood="great")
    elif bad == "BADENUM":
        bad = answer(v, event=[item], links=[{**link, "link_type": "inspired_by"}])
    elif bad == "UNKNOWNPAGE":
        bad = answer(v, event=[item], links=[{**link, "t": 55}])
    stub.script.append(("json", bad))
    before = snapshot(v)
    with pytest.raises(ExtractionRejected, match="nothing was changed"):
        commit_session(v, "s")
    assert snapshot(v) == before
    kept = list((v.state_dir / "quarantine").glob("*.json"))
    assert len(kept) == 1 and json.loads(kept[0].read_text())["raw"]
    assert "commit" not in v.path("sessions/s.jsonl").read_text()  # still uncommitted: a retry can succeed


def test_line_ranges_follow_a_patch_that_moves_lines_and_the_llm_matcher(ollama_vault):
    v, stub = ollama_vault
    v.write_note("entity", {"name": "Kiln", "content": "Electric.\nCone 6.\nIn the studio."})
    v.link("profile.md", "entities/kiln.md", "related_to", t_line_ranges="2")
    # The model patches the kiln note: a line goes in on top, so "Cone 6." moves to line 3.
    stub.script.append(("json", answer(v, entity=[{"page_id": 2, "content": {"search": "Electric.", "replace": "New: top loader.\nElectric."}}])))
    v.config.llm.provider = "ollama"
    session(v, "s3", [("user", "The kiln note needs the top loader detail; we use the Kiln a lot.")])
    # page 2 is the kiln (mentioned by name); the edit is a search/replace patch
    with pytest.raises(ExtractionRejected):
        commit_session(v, "s3")  # strict schema: content must be text, an edit object is not allowed
    stub.script.append(("json", answer(v, entity=[{"page_id": 2, "content": "New: top loader.\nElectric.\nCone 6.\nIn the studio."}])))
    commit_session(v, "s3")
    (link,) = v.links.of("profile.md", "links")
    assert link.t_line_ranges == "3"
    # Rewritten beyond exact matching: the LLM matcher is asked where the passage went.
    stub.script.append(("json", answer(v, entity=[{"page_id": 2, "content": "Top loader, electric, fires to cone six.\nStudio."}])))
    stub.script.append(("json", json.dumps({"t_line_ranges": "1"})))
    session(v, "s4", [("user", "Update the Kiln: top loader, electric, fires to cone six, in the studio.")])
    commit_session(v, "s4")
    (link,) = v.links.of("profile.md", "links")
    assert link.t_line_ranges == "1"
    assert "Find where these passages are now" in stub.requests[-1]["body"]["messages"][0]["content"]


def test_a_long_page_of_unpunctuated_lines_is_joined_reading_each_line_a_few_times(monkeypatch):
    """A log of lines with no end punctuation is one paragraph, joined by reading each line a
    bounded number of times — not the paragraph so far once per line, which makes a large
    page's import take minutes. (What the patterns read is counted, not time.)"""
    import re

    from engine.extract import rules

    read = 0

    class Counted:
        def __init__(self, target):
            self.target = target

        def __getattr__(self, name):
            def call(*args, **kwargs):
                nonlocal read
                read += sum(len(a) for a in args if isinstance(a, str))
                return getattr(self.target, name)(*args, **kwargs)
            return call

    monkeypatch.setattr(rules, "re", Counted(re))
    for name, value in list(vars(rules).items()):
        if isinstance(value, re.Pattern):
            monkeypatch.setattr(rules, name, Counted(value))
    lines = [f"entry {i} sensor reading nominal" for i in range(2000)]
    page = "# Log\n" + "\n".join(lines) + "\n"
    assert rules.prose(page) == "# Log\n" + " ".join(lines) + "\n"
    assert read < 30 * len(page)


def test_a_note_is_never_created_after_it_was_updated(vault):
    import datetime as dt

    from engine.model.notes import parse_timestamp

    tomorrow = (dt.datetime.now(dt.UTC) + dt.timedelta(days=1)).date().isoformat()  # a clock ahead, or noon not yet here
    session(vault, "s-ahead", [("user", "I love Longquan celadon glazes."), ("assistant", "Noted.")], day=tomorrow)
    report = commit_session(vault, "s-ahead", RULES)
    assert report is not None and report.created
    for uri in report.created:
        note = vault.read_note(uri)
        assert parse_timestamp(note.created_at, "c") <= parse_timestamp(note.updated_at, "u"), uri


def test_html_in_an_imported_page_is_no_sentence_to_extract(vault, tmp_path):
    """An embed's tags and attributes (a video's "padding:56.29% 0 0 0;position:relative")
    and a script are not prose: nothing is made of them; the text between tags is read."""
    from engine.extract.batch import ingest_batch
    from engine.extract.rules import prose

    assert prose('<div style="padding:56.29% 0 0 0;position:relative;"><iframe src="x"></iframe></div>\n'
                 "I love <b>green</b> tea.<script>var a = 1;</script>").strip() == "I love green tea."
    pages = tmp_path / "pages"
    pages.mkdir()
    (pages / "Video.md").write_text('# Video\n\n<div style="padding:56.29% 0 0 0;position:relative;">'
                                    '<iframe src="https://player.example/1" style="position:absolute;top:0;left:0;width:100%;'
                                    'height:100%;" frameborder="0"></iframe></div>\n\nWatch it on Friday 29 March 2024.\n')
    ingest_batch(vault, [pages], extractor=RulesExtractor())
    made = [e for e in vault.catalog.all() if e.memory_type != "source"]
    assert not [e.title for e in made if any(w in e.title.lower() for w in ("position", "padding", "div", "iframe"))]

