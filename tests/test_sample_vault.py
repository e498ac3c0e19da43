"""The sample vault is believable and passes the app's own consistency checks."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import Counter

import networkx as nx
import pytest
from conftest import SAMPLE

from engine import Vault
from engine.lint.memo import check


@pytest.fixture(scope="module")
def v() -> Vault:
    import shutil
    import tempfile
    from pathlib import Path

    tmp = Path(tempfile.mkdtemp())
    shutil.copytree(SAMPLE, tmp / "s", ignore=shutil.ignore_patterns(".memlink"))
    return Vault.open(tmp / "s")


def test_passes_its_own_checks(v):
    assert check(v) == []


def test_note_counts(v):
    counts = Counter(e.memory_type for e in v.catalog.all())
    assert counts["profile"] == 1
    assert counts["preference"] >= 10
    assert counts["entity"] >= 15
    assert counts["event"] >= 25
    assert counts["report"] == 2
    assert counts["report_candidate"] == 3


def test_links_cover_every_type_with_contradictions_and_chains(v):
    links = list(v.links.all())
    assert len(links) >= 80
    types = Counter(l.link_type.value for l in links)
    assert set(types) == {"related_to", "belongs_to", "caused_by", "derived_from", "contradicts", "evolved_from"}
    assert types["contradicts"] >= 3
    evolved = nx.DiGraph([(l.from_uri, l.to_uri) for l in links if l.link_type.value == "evolved_from"])
    chains = [c for c in nx.weakly_connected_components(evolved) if nx.dag_longest_path_length(evolved.subgraph(c)) >= 2]
    assert len(chains) >= 2, "expected at least two evolved_from chains of two or more steps"
    pairs = {frozenset((l.from_uri, l.to_uri)) for l in links if l.link_type.value == "contradicts"}
    assert len(pairs) >= 3
    assert sum(1 for l in links if l.legacy) == 1


def test_some_notes_are_old_and_some_are_chinese(v):
    now = dt.datetime.now(dt.UTC)
    old = [e for e in v.catalog.all() if now - dt.datetime.fromisoformat(e.created_at) > dt.timedelta(days=90)]
    assert len(old) >= 3
    cjk = [e for e in v.catalog.all() if re.search(r"[\u4e00-\u9fff]", v.read_note(e.uri).body)]
    assert len(cjk) >= 3


def test_session_logs(v):
    files = sorted((v.root / "sessions").glob("*.jsonl"))
    assert len(files) >= 3
    turns = 0
    for path in files:
        events = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        for e in events:
            assert {"session", "id", "role", "content", "ts"} <= set(e)
            assert e["session"] == path.stem
        turns += sum(1 for e in events if e["role"] == "user")
    assert turns >= 30
