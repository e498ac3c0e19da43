"""vault.transaction(): one unit of work, committed through the journal as one step;
reads inside it see its own staged writes; nothing lands when it raises."""

from __future__ import annotations

import hashlib

import pytest
from conftest import make_pair

from engine import MemlinkError, UriError, Vault
from engine.lint.memo import check
from engine.storage.jsonl import read_jsonl


def files(v: Vault) -> dict[str, str]:
    return {p.relative_to(v.root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in v.root.rglob("*") if p.is_file() and ".memlink" not in p.parts}


def count_commits(v: Vault, monkeypatch) -> list[int]:
    commits: list[int] = []
    real = v.journal.commit
    monkeypatch.setattr(v.journal, "commit", lambda ops: (commits.append(len(ops)), real(ops))[1])
    return commits


def test_a_note_written_then_linked_lands_in_one_commit(vault, monkeypatch):
    a, _b = make_pair(vault)
    commits = count_commits(vault, monkeypatch)
    before = files(vault)
    with vault.transaction():
        new = vault.write_note("event", {"event_name": "Atlas launch", "date": "2026-10-01", "content": "Atlas shipped."})
        assert vault.exists(new.uri) and vault.read_note(new.uri).fields["event_name"] == "Atlas launch"
        vault.link(new.uri, a.uri, "related_to", description="launched by her team")
        assert [l.to_uri for l in vault.links.of(new.uri, "links")] == [a.uri]  # staged links are seen
        assert files(vault) == before  # nothing on disk yet
    assert len(commits) == 1
    assert [l.from_uri for l in vault.links.of(a.uri, "backlinks")] == [new.uri]
    assert new.uri in vault.catalog and check(vault) == []


def test_nothing_lands_when_the_block_raises(vault):
    a, b = make_pair(vault)
    heard: list[tuple[str, str]] = []
    vault.listeners.append(lambda event, uri: heard.append((event, uri)))
    before, catalog = files(vault), vault.catalog.all()
    with pytest.raises(RuntimeError):
        with vault.transaction():
            vault.write_note("preference", {"topic": "Python code style", "content": "Changed."}, uri=b.uri)
            vault.link(a.uri, b.uri, "caused_by")
            vault.delete_note(a.uri)
            raise RuntimeError("stop")
    assert files(vault) == before and vault.catalog.all() == catalog and heard == []
    assert not list((vault.state_dir / "journal").glob("*.json"))
    assert vault.read_note(b.uri).fields["content"] == b.fields["content"]


def test_supersede_a_note_the_same_transaction_rewrote(vault):
    _a, b = make_pair(vault)
    with vault.transaction():
        vault.write_note("preference", {"topic": "Python code style", "content": "Rewritten first."}, uri=b.uri)
        vault.supersede(b.uri, "entities/caroline.md", "2026-12-01")
    note = vault.read_note(b.uri)
    assert note.fields["content"] == "Rewritten first." and note.extra["superseded_by"] == "entities/caroline.md"
    assert vault.catalog.get(b.uri).superseded and b.uri in vault.catalog.superseded()


def test_listeners_hear_after_the_commit(vault):
    a, b = make_pair(vault)
    heard: list[tuple[str, str, bool]] = []
    vault.listeners.append(lambda event, uri: heard.append((event, uri, vault.path(uri).exists())))
    with vault.transaction():
        vault.write_note("preference", {"topic": "Python code style", "content": "Once."}, uri=b.uri)
        vault.write_note("preference", {"topic": "Python code style", "content": "Twice."}, uri=b.uri)
        vault.delete_note(a.uri)
        assert heard == []
    assert heard == [("changed", b.uri, True), ("deleted", a.uri, False)]


def test_a_joined_block_that_raises_takes_back_only_its_own_changes(vault):
    a, b = make_pair(vault)
    with vault.transaction():
        vault.link(a.uri, b.uri, "related_to")
        with pytest.raises(MemlinkError):
            with vault.transaction():
                vault.write_note("preference", {"topic": "Python code style", "content": "Inner."}, uri=b.uri)
                vault.link(a.uri, "entities/nobody.md", "related_to")  # fails: no such note
    assert [l.link_type.value for l in vault.links.of(a.uri, "links")] == ["related_to"]
    assert vault.read_note(b.uri).fields["content"] == b.fields["content"]
    assert check(vault) == []


def test_log_records_land_once_with_an_id(vault):
    a, _b = make_pair(vault)
    log = vault.state_dir / "audit" / "test.jsonl"
    with vault.transaction() as tx:
        vault.write_note("entity", {"name": "Caroline", "kind": "person", "content": "Caroline moved."}, uri=a.uri)
        row = tx.append(".memlink/audit/test.jsonl", {"changed": [{"uri": a.uri}]})
        assert not log.exists()
    records = read_jsonl(log)
    assert records == [row] and isinstance(row["id"], str)
    with pytest.raises(UriError):
        with vault.transaction() as tx:
            vault.write_note("entity", {"name": "Caroline", "kind": "person", "content": "Not written."}, uri=a.uri)
            tx.append("notes/escape.jsonl", {"x": 1})  # logs live under .memlink/ only
    assert vault.read_note(a.uri).fields["content"] == "Caroline moved."
    assert not (vault.root / "notes").exists()


def test_a_replayed_journal_appends_its_records_once(vault):
    from engine.storage.journal import AppendRecords, apply_ops

    op = AppendRecords(log=".memlink/review/actions.jsonl", records=[{"id": "r1", "n": 1}, {"id": "r2", "n": 2}])
    apply_ops(vault.root, [op], vault.links)
    apply_ops(vault.root, [op], vault.links)  # a replay after a kill that followed the append
    assert [r["id"] for r in read_jsonl(vault.state_dir / "review" / "actions.jsonl")] == ["r1", "r2"]
