"""Bad input is refused where it enters, with its place named, and nothing is written:
`import-chat` (a reused message id with other content, an unknown role, content that is
not text) and `link --match-text` (an anchor the from-note does not contain)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import make_pair, memlink

from engine import Vault
from engine.errors import LinkError


def write_lines(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def msg(i: str, role: str = "user", content: object = "hello", session: str = "s1") -> dict:
    return {"session": session, "id": i, "role": role, "content": content, "ts": "2026-11-01T10:00:00"}


def session_files(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((root / "sessions").glob("*.jsonl"))} if (root / "sessions").exists() else {}


@pytest.mark.parametrize("case, line, words", [
    ("duplicate id", 3, "message id '1'"),
    ("unknown role", 2, "unknown role 'wizard'"),
    ("number content", 2, "content"),
    ("list content", 2, "content"),
])
def test_import_chat_refuses_bad_lines_naming_the_line_and_imports_nothing(tmp_path, case, line, words):
    root = tmp_path / "v"
    assert memlink("init", vault=root).returncode == 0
    good = [msg("1"), msg("2", "assistant", "hi there")]
    if case == "duplicate id":
        records = good + [msg("1", content="something else entirely")]
    elif case == "unknown role":
        records = [good[0], msg("2", "wizard", "abracadabra")]
    elif case == "number content":
        records = [good[0], msg("2", "assistant", 42)]
    else:
        records = [good[0], msg("2", "assistant", ["a", "list"])]
    r = memlink("import-chat", str(write_lines(tmp_path / "chat.jsonl", records)), vault=root)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"line {line}" in r.stderr and words in r.stderr and "nothing was imported" in r.stderr, r.stderr
    assert session_files(root) == {}


def test_import_chat_names_the_line_that_is_not_utf8_and_imports_nothing(tmp_path):
    root = tmp_path / "v"
    assert memlink("init", vault=root).returncode == 0
    path = write_lines(tmp_path / "chat.jsonl", [msg("1"), msg("2", "assistant", "cafe")])
    path.write_bytes(path.read_bytes().replace(b"cafe", b"caf\xe9"))
    r = memlink("import-chat", str(path), vault=root)
    assert r.returncode != 0 and "line 2: not UTF-8 text" in r.stderr, r.stderr
    assert "saved as UTF-8, e.g. `iconv -f cp1252 -t utf-8`" in r.stderr  # (how to bring it in)
    assert session_files(root) == {}


def test_a_reused_id_against_the_log_is_refused_but_a_replay_is_fine(tmp_path):
    root = tmp_path / "v"
    assert memlink("init", vault=root).returncode == 0
    first = write_lines(tmp_path / "a.jsonl", [msg("1"), msg("2", "assistant", "hi there")])
    assert memlink("import-chat", str(first), vault=root).returncode == 0
    before = session_files(root)
    assert memlink("import-chat", str(first), vault=root).returncode == 0  # the same messages again: a replay
    assert session_files(root) == before
    changed = write_lines(tmp_path / "b.jsonl", [msg("3"), msg("2", "assistant", "a rewritten answer")])
    r = memlink("import-chat", str(changed), vault=root)
    assert r.returncode == 1 and "line 2" in r.stderr and "session's log" in r.stderr, r.stderr
    assert session_files(root) == before  # message 3 was not appended either


def test_system_and_tool_roles_still_import(tmp_path):
    root = tmp_path / "v"
    assert memlink("init", vault=root).returncode == 0
    records = [msg("0", "system", "be brief"), msg("1"), msg("2", "tool", "42"), msg("3", "assistant", "hi")]
    r = memlink("import-chat", str(write_lines(tmp_path / "c.jsonl", records)), vault=root)
    assert r.returncode == 0, r.stderr
    assert len((root / "sessions" / "s1.jsonl").read_text().splitlines()) == 4


def test_link_refuses_an_anchor_that_is_not_in_the_note(tmp_path):
    root = tmp_path / "v"
    assert memlink("init", vault=root).returncode == 0
    a, b = make_pair(Vault.open(root))
    sidecars = {p: p.read_bytes() for p in root.rglob(".relations.json")}
    r = memlink("link", b.uri, a.uri, "--type", "belongs_to", "--match-text", "no such words here", vault=root)
    assert r.returncode == 1 and "anchor 'no such words here' is not in the text" in r.stderr, r.stderr
    assert {p: p.read_bytes() for p in root.rglob(".relations.json")} == sidecars
    vault = Vault.open(root)
    with pytest.raises(LinkError, match="not in the text"):
        vault.link(b.uri, a.uri, "belongs_to", match_text="no such words here")
    assert vault.links.of(b.uri) == []
    assert memlink("link", b.uri, a.uri, "--type", "belongs_to", "--match-text", "User", vault=root).returncode == 0


def test_a_message_with_unicode_line_separators_imports_and_reads_back(tmp_path):
    """Logs are written with ensure_ascii=False: U+2028, U+0085 and a form feed inside a
    message stay inside its line instead of cutting the log into unreadable halves."""
    from engine.sessions.log import read_events

    root = tmp_path / "v"
    assert memlink("init", vault=root).returncode == 0
    text = "one\u2028two\x85three\x0cfour\rfive"
    r = memlink("import-chat", str(write_lines(tmp_path / "u.jsonl", [msg("1", content=text)])), vault=root)
    assert r.returncode == 0, r.stderr
    assert [e.content for e in read_events(Vault.open(root), "s1")] == [text]
