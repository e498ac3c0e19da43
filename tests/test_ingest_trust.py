"""Ingest is all or nothing (docs/DESIGN.md, "Units of work"): a file whose extraction did
not finish stays a pending source that `check` reports and the next ingest or commit
finishes; files past `ingest.max_bytes` are refused before they are read; the write
commands exit 5 when some items failed and 1 when they could not run."""

from __future__ import annotations

import json
import shutil
import tracemalloc
from pathlib import Path

import pytest
import yaml
from conftest import memlink, set_llm
from ollama_stub import OllamaStub
from test_linked_pages import answer, cli_vault, links_of, write

from engine import Vault
from engine.extract.batch import ingest_batch, pending_sources
from engine.extract.rules import RulesExtractor
from engine.lint.memo import check_run

PAGES = {
    "companies/acme.md": ("# Acme\n\nAcme employs [Mia](../people/mia.md).\n\n"
                          "On 3 March 2024 Jordan Lee signed the Kestrel Ventures term sheet in Berlin.\n"),
    "people/mia.md": "# Mia\n\nEngineer.\n",
}


def pending_findings(root: Path) -> list[str]:
    r = memlink("check", "--json", vault=root)
    assert r.returncode == 0, r.stderr  # a pending source is a warning, not a broken vault
    return [f["uri"] for f in json.loads(r.stdout) if f["code"] == "pending_extraction"]


def fail_the_first_extraction(root: Path, pages: Path) -> None:
    """Ingest with a model whose first answer is not JSON: acme's memories fail, mia lands."""
    with OllamaStub() as stub:
        v = set_llm(root, provider="ollama", model="tiny", host=stub.host, timeout=3)
        stub.script += [("json", "{not json"), ("json", answer(v))]
        v.close()
        r = memlink("ingest", str(pages), vault=root)
    assert r.returncode == 5, r.stderr
    assert ("Written: the source note sources/pages/companies/acme.md, marked pending; not written: its memories and links. "
            "The next ingest, commit or dream retries it") in r.stderr
    assert "1 files imported, 1 pending" in r.stdout


@pytest.mark.parametrize("retry", ["ingest", "commit", "dream"])
def test_a_failed_extraction_stays_pending_until_the_next_run_finishes_it(tmp_path, retry):
    root = cli_vault(tmp_path)
    pages = write(tmp_path / "pages", PAGES)
    fail_the_first_extraction(root, pages)
    v = Vault.open(root)
    assert v.exists("sources/pages/companies/acme.md") and links_of(v, "sources/pages/companies/acme.md") == {}  # its links wait with its memories
    assert pending_sources(v) == ["sources/pages/companies/acme.md"]
    v.close()
    assert pending_findings(root) == ["sources/pages/companies/acme.md"]

    set_llm(root, provider="rules").close()
    if retry == "ingest":
        r = memlink("ingest", str(pages), vault=root)
        assert "acme.md: skipped" not in r.stdout  # not "already imported": it never was
    elif retry == "dream":
        r = memlink("dream", "--json", vault=root)
        assert json.loads(r.stdout)["maintenance"]["sources_finished"] == 1
    else:
        (root / "sessions").mkdir(exist_ok=True)
        (root / "sessions/s1.jsonl").write_text(json.dumps(
            {"session": "s1", "id": "1", "role": "user", "content": "I like green tea.", "ts": "2026-11-01T10:00:00Z"}) + "\n")
        r = memlink("commit", "s1", vault=root)
        assert "(pending import, finished)" in r.stdout
    assert r.returncode == 0, r.stderr
    v = Vault.open(root)
    assert links_of(v, "sources/pages/companies/acme.md")["sources/pages/people/mia.md"][0] == "belongs_to"
    assert any(e.uri.startswith("events/") for e in v.catalog.all())  # acme's memories landed
    assert pending_sources(v) == []
    v.close()
    assert pending_findings(root) == []
    assert memlink("check", vault=root).returncode == 0


def test_a_pending_source_survives_deleting_the_derived_state(tmp_path):
    """The mark lives in the note, not in `.memlink/`: deleting it loses no unfinished file."""
    root = cli_vault(tmp_path)
    pages = write(tmp_path / "pages", PAGES)
    fail_the_first_extraction(root, pages)
    shutil.rmtree(root / ".memlink")
    assert pending_findings(root) == ["sources/pages/companies/acme.md"]
    set_llm(root, provider="rules").close()
    v = Vault.open(root)
    result = ingest_batch(v, [], extractor=RulesExtractor())  # the file itself is not needed again
    assert [f.source_uri for f in result.files] == ["sources/pages/companies/acme.md"] and not result.pending
    assert links_of(v, "sources/pages/companies/acme.md")["sources/pages/people/mia.md"][0] == "belongs_to"
    assert pending_sources(v) == []


def test_pending_sources_are_known_from_the_catalog_and_a_hand_edit_is_seen(tmp_path, monkeypatch):
    """Whether a source is pending is kept in its catalog row: the check and the retry
    read no note file to find them (seconds at 100k notes). Marked or cleared by hand, in
    another editor, the next process sees it."""
    import datetime as dt


    root = cli_vault(tmp_path)
    fail_the_first_extraction(root, write(tmp_path / "pages", PAGES))
    path = root / "sources/pages/companies/acme.md"
    v = Vault.open(root)
    v.sync()
    monkeypatch.setattr(Vault, "read_note", lambda self, uri: pytest.fail(f"read {uri}"))
    assert pending_sources(v) == ["sources/pages/companies/acme.md"]
    found = [f.uri for f in check_run(v, today=dt.date(2026, 12, 1), full=True).page() if f.code == "pending_extraction"]
    assert found == ["sources/pages/companies/acme.md"]
    monkeypatch.undo()
    v.close()
    text = path.read_text(encoding="utf-8")
    assert "extraction: pending" in text
    path.write_text(text.replace("extraction: pending", "extraction: done"), encoding="utf-8")  # cleared by hand
    assert pending_findings(root) == [] and pending_sources(Vault.open(root)) == []
    path.write_text(text, encoding="utf-8")
    assert pending_findings(root) == ["sources/pages/companies/acme.md"]


def test_a_file_past_the_size_cap_is_refused_before_it_is_read(tmp_path):
    root = cli_vault(tmp_path)
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "small.md").write_text("# Small\n\nFine.\n")
    with open(folder / "huge.md", "wb") as fh:  # 50 MB, sparse: cheap to make, costly to read
        fh.truncate(50 * 1024 * 1024)
    v = Vault.open(root)
    tracemalloc.start()
    try:
        result = ingest_batch(v, [folder], extractor=RulesExtractor())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    v.close()
    assert peak < 20 * 1024 * 1024  # never read whole
    assert [f.source_uri for f in result.files] == ["sources/in/small.md"]
    assert result.failed == [{"path": str(folder / "huge.md"), "error": (
        f"{folder / 'huge.md'}: too large to import (52,428,800 bytes; the limit is 2,000,000 bytes, "
        "ingest.max_bytes in memlink.yaml)")}]

    cfg = yaml.safe_load((root / "memlink.yaml").read_text())
    cfg["ingest"] = {"max_bytes": 10}
    (root / "memlink.yaml").write_text(yaml.safe_dump(cfg))
    (folder / "huge.md").unlink()
    (folder / "other.md").write_text("# Other\n\nA page of more than ten bytes.\n")
    r = memlink("ingest", str(folder / "other.md"), vault=root)
    assert r.returncode == 5
    assert "other.md: too large to import (" in r.stderr and "the limit is 10 bytes" in r.stderr
    assert not (root / "sources/other.md").exists()


def test_exit_codes_tell_some_failed_from_could_not_run(tmp_path):
    root = cli_vault(tmp_path)
    r = memlink("ingest", str(root / "sources"), vault=root)  # a path in the vault: could not run
    assert r.returncode == 1 and "inside the vault" in r.stderr
    r = memlink("ingest", str(tmp_path / "nowhere.md"), vault=root)  # one item failed
    assert r.returncode == 5 and "no such file or folder" in r.stderr
    assert memlink("commit", "no-such-session", vault=root).returncode == 1

    chat = tmp_path / "chat.jsonl"
    chat.write_text("".join(json.dumps({"session": "s", "id": str(i), "role": role, "content": text,
                                        "ts": "2026-11-01T10:00:00Z"}) + "\n"
                            for i, (role, text) in enumerate([("user", "Remind me about the dentist"), ("assistant", "Done.")])))
    with OllamaStub() as stub:
        set_llm(root, provider="ollama", model="tiny", host=stub.host, timeout=3).close()
        stub.script.append(("json", "Sure! The user wants a dentist reminder."))  # not the contract
        r = memlink("import-chat", str(chat), vault=root, env={"OLLAMA_HOST": stub.host})
    assert r.returncode == 5, r.stdout + r.stderr  # a turn failed; the events were imported
    assert "1 failed" in r.stdout


def test_a_dream_that_cannot_finish_a_pending_source_exits_with_some_failed(tmp_path):
    root = cli_vault(tmp_path)
    pages = write(tmp_path / "pages", PAGES)
    fail_the_first_extraction(root, pages)  # the vault still asks Ollama, whose server is gone now
    r = memlink("dream", "--provider", "rules", "--json", vault=root)
    assert r.returncode == 5, r.stderr  # the source is still pending: cron must see it
    report = json.loads(r.stdout)
    assert report["failed"] == ["sources/pages/companies/acme.md"]
    v = Vault.open(root)
    assert pending_sources(v) == ["sources/pages/companies/acme.md"]


def test_a_file_whose_name_is_as_long_as_names_go_is_imported_with_the_rest(vault, tmp_path):
    """Its note's temp file takes a suffix the name has no room for: the temp name is cut,
    not the import."""
    from engine.extract.rules import RulesExtractor

    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / f"{'b' * 240}.md").write_text("# Long\n\nA page about kilns.\n", encoding="utf-8")
    (folder / "ok.md").write_text("# OK\n\nA fine page.\n", encoding="utf-8")
    result = ingest_batch(vault, [folder], extractor=RulesExtractor())
    assert not result.failed and sorted(f.source_uri for f in result.files) == [f"sources/notes/{'b' * 240}.md",
                                                                               "sources/notes/ok.md"]


def test_a_file_whose_place_in_the_vault_cannot_be_written_fails_alone(tmp_path):
    """A file of the vault stands where the folder of one page's note would be: that page
    fails, named with the cause, and the rest of the folder is imported."""
    root = cli_vault(tmp_path)
    pages = write(tmp_path / "docs", {"a/x.md": "# Alpha\n\nAlpha is about rivers.\n",
                                      "b/y.md": "# Beta\n\nBeta is about hills.\n"})
    (root / "sources/docs").mkdir(parents=True)
    (root / "sources/docs/a").write_text("a file of the user's\n", encoding="utf-8")
    r = memlink("ingest", str(pages), vault=root)
    assert r.returncode == 5 and "Traceback" not in r.stderr, r.stderr
    assert "a/x.md: Not a directory" in r.stderr, r.stderr
    assert "1 files imported" in r.stdout and "1 failed" in r.stdout, r.stdout
    assert (root / "sources/docs/b/y.md").is_file()
    assert (root / "sources/docs/a").read_text(encoding="utf-8") == "a file of the user's\n"
    assert memlink("check", vault=root).returncode == 0
