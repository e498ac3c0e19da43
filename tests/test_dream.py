"""The dream pass: each topic signal gives the right report; a second run with nothing
new creates nothing; two dreams do not run at once."""

from __future__ import annotations


import pytest
from filelock import FileLock

from engine.dream import DreamBusy, dream


def reports(v):
    return sorted(e.uri for e in v.list_notes("report"))


def test_signals_each_give_a_report_and_a_second_run_writes_nothing(vault):
    w = vault.write_note
    veg = w("preference", {"topic": "Vegetarian diet", "sentiment": "like", "content": "Eats no meat.\nNo fish either."}).uri
    fish = w("event", {"event_name": "Fish dinner", "date": "2026-10-14", "content": "Ate West Lake fish at the party."}).uri
    vault.link(fish, veg, "contradicts", match_text="Ate West Lake fish", t_line_ranges="2", description="ate fish")
    v1 = w("preference", {"topic": "Editor VS Code", "content": "Uses VS Code."}).uri
    v2 = w("preference", {"topic": "Editor Helix", "content": "Tries Helix."}).uri
    v3 = w("preference", {"topic": "Editor Zed", "content": "Switched to Zed."}).uri
    vault.link(v2, v1, "evolved_from")
    vault.link(v3, v2, "evolved_from")
    cand = w("report_candidate", {"question": "Which kiln fits a small flat?", "status": "pending"}).uri
    w("entity", {"name": "Kiln studio", "content": "The studio kiln fires to cone 6."})

    first = dream(vault)
    kinds = sorted(t["kind"] for t in first.topics)
    assert kinds == ["candidate", "conflict", "evolution"]
    written = reports(vault)
    conflict = next(u for u in written if u.startswith("reports/which-holds"))
    body = vault.read_note(conflict).body
    assert '"Ate West Lake fish at the party."' in body and '"No fish either."' in body and "content line 2" in body
    assert {l.to_uri for l in vault.get_file_links(conflict, "links")} == {fish, veg}
    evolution = next(u for u in written if u.startswith("reports/how-did"))
    assert vault.read_note(evolution).fields["source_uris"] == [v1, v2, v3]  # oldest first
    done = vault.read_note(cand)
    assert done.fields["status"] == "done" and done.fields["report_uri"] in written
    assert (vault.root / "DREAMS.md").exists() and vault.check() == []

    again = dream(vault)
    assert again.topics == [] and again.written == [] and reports(vault) == written
    assert "Nothing new" in (vault.root / "DREAMS.md").read_text()


def test_changed_source_re_researches_the_report(vault):
    src = vault.write_note("entity", {"name": "Atlas", "content": "Go-live 15 November."}, updated_at="2026-09-01T00:00:00+00:00").uri
    rep = vault.write_note("report", {"question": "When is go-live?", "answer": "15 November.", "source_uris": [src]},
                           updated_at="2026-09-02T00:00:00+00:00").uri
    vault.link(rep, src, "derived_from")
    assert dream(vault).written == []
    vault.write_note("entity", {"name": "Atlas", "content": "Go-live moved to 12 January."})
    result = dream(vault)
    assert [t["kind"] for t in result.topics] == ["re-research"] and result.written == [rep]
    assert "12 January" in vault.read_note(rep).fields["answer"]
    assert dream(vault).written == []


def test_reports_are_never_evidence(vault):
    a = vault.write_note("report", {"question": "Q?", "answer": "A", "source_uris": []}).uri
    b = vault.write_note("entity", {"name": "B", "content": "b"}).uri
    vault.link(a, b, "contradicts")
    assert dream(vault, dry_run=True).topics == []


def test_a_second_dream_gets_a_clear_busy_error(vault):
    from test_cli import memlink

    lock = FileLock(str(vault.state_dir / "dream.lock"))
    with lock:
        with pytest.raises(DreamBusy, match="another dream"):
            dream(vault, wait=0.1)
        r = memlink("dream", vault=vault.root, env={"MEMLINK_VAULT": str(vault.root)})
        assert r.returncode == 4 and "another dream is running" in r.stderr
    r = memlink("dream", "--dry-run", vault=vault.root)
    assert r.returncode == 0 and "dry run" in r.stdout


def test_hub_topics_and_new_notes_next_to_a_reports_sources(vault):
    hub = vault.write_note("entity", {"name": "Studio", "content": "The ceramics studio."}).uri
    e1 = vault.write_note("event", {"event_name": "Glaze night", "date": "2026-11-01", "content": "Glazed bowls."}).uri
    e2 = vault.write_note("event", {"event_name": "Kiln day", "date": "2026-11-02", "content": "Fired the kiln."}).uri
    vault.link(e1, hub, "belongs_to")
    vault.link(e2, hub, "belongs_to")
    first = dream(vault)
    hub_report = next(u for u in first.written if "around-studio" in u)
    assert {l.to_uri for l in vault.get_file_links(hub_report, "links")} == {hub, e1, e2}
    assert dream(vault).written == []
    e3 = vault.write_note("event", {"event_name": "Open day", "date": "2026-11-20", "content": "Visitors at the studio."}).uri
    vault.link(e3, hub, "related_to")
    again = dream(vault)
    assert [t["kind"] for t in again.topics] == ["re-research"] and again.written == [hub_report]
    assert e3 in vault.read_note(hub_report).fields["source_uris"]


def test_topics_searched_often_but_poorly_covered_become_questions(vault):
    from engine.search import search

    vault.write_note("entity", {"name": "Studio", "content": "The ceramics studio."})
    for _ in range(3):
        search(vault, "sourdough starter feeding", log=True)
    search(vault, "ceramics studio", log=True)
    result = dream(vault)
    assert "What do I know about sourdough starter feeding?" in [t["question"] for t in result.topics]
    assert not any("ceramics studio" in t["question"] for t in result.topics)
    assert dream(vault).topics == []  # asked once only


def test_dream_with_ollama_and_a_concurrent_writer(vault):
    import json
    import subprocess
    import sys

    import yaml

    from conftest import REPO
    from ollama_stub import OllamaStub

    a = vault.write_note("entity", {"name": "A", "content": "Says yes."}).uri
    b = vault.write_note("entity", {"name": "B", "content": "Says no."}).uri
    vault.link(a, b, "contradicts", description="yes vs no")
    with OllamaStub() as stub:
        cfg = yaml.safe_load((vault.root / "memlink.yaml").read_text())
        cfg["llm"] = {"provider": "ollama", "model": "tiny", "host": stub.host, "timeout": 5}
        (vault.root / "memlink.yaml").write_text(yaml.safe_dump(cfg))
        stub.script.append(("json", json.dumps({"answer": "They disagree; A is newer.", "conflicts": ["yes vs no"]})))
        proc = subprocess.Popen([sys.executable, "-m", "memlink_tui", "--vault", str(vault.root), "dream", "--json"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO,
                                env={**__import__("os").environ, "PYTHONPATH": str(REPO)})
        for i in range(10):  # the app keeps writing meanwhile
            n = vault.write_note("event", {"event_name": f"Write {i}", "date": "2026-11-01", "content": "x"}).uri
            vault.link(n, a, "related_to")
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    result = json.loads(out)
    assert result["provider"] == "ollama:tiny"
    conflict = "reports/which-holds-a-or-b.md"
    assert conflict in result["written"]
    assert "They disagree; A is newer." in vault.read_note(conflict).fields["answer"]
    prompt = next(r["body"]["messages"][0]["content"] for r in stub.requests if "Which holds" in r["body"]["messages"][0]["content"])
    assert "Links among them" in prompt and "-contradicts->" in prompt
    assert [p for p in vault.check() if p.severity == "error"] == []
