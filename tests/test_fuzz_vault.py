"""A fuzzed vault never crashes memlink: a copy of the sample vault
is corrupted in many ways with a fixed seed (bad YAML, binary notes, NUL bytes, symlinks
out of the vault, a huge file, broken and hostile sidecars, names that are not UTF-8),
then every reader and the safe repairs run. Something refused is a MemlinkError with a
message; anything else is a crash."""

from __future__ import annotations

import json
import os
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conftest import SAMPLE, memlink

from engine import MemlinkError, Vault
from engine.dream import dream
from engine.graph import LinkGraph
from engine.lint.memo import check
from engine.lint.report import fix, lint
from engine.model.links import SIDECAR
from engine.retrieve.search import search

SEED = 1313
HUGE = 20 * 1024 * 1024


def _sidecars(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob(SIDECAR) if ".memlink" not in p.parts)


def _notes(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.md") if ".memlink" not in p.parts and p.is_file())


def fuzz(root: Path, outside: Path, rng: random.Random) -> None:
    """Corrupt the vault at ``root``; ``outside`` is a folder next to it, not in it."""
    outside.mkdir()
    (outside / "secret.md").write_text("---\nmemory_type: entity\nname: Secret\n---\nnot yours\n")
    notes = _notes(root)
    rng.shuffle(notes)
    bad_yaml, binary, nul, truncated = notes[0:3], notes[3:5], notes[5:7], notes[7:9]
    for p in bad_yaml:
        p.write_text("---\nname: [unclosed\n  : : :\n---\nbody\n", encoding="utf-8")
    for p in binary:
        p.write_bytes(bytes(rng.randrange(256) for _ in range(4096)))
    for p in nul:
        text = p.read_bytes()
        p.write_bytes(text[: len(text) // 2] + b"\x00\x00" + text[len(text) // 2:])
    for p in truncated:
        p.write_bytes(p.read_bytes()[:7])
    (root / "entities" / "escape.md").symlink_to(outside / "secret.md")
    (root / "entities" / "dangling.md").symlink_to(root / "nowhere.md")
    (root / "outward").symlink_to(outside, target_is_directory=True)
    (root / "entities" / "huge.md").write_bytes(b"---\nmemory_type: entity\nname: Huge\n---\n" + b"word " * (HUGE // 5))
    (root / "entities" / "empty.md").write_bytes(b"")
    (root / "entities" / "yaml-list.md").write_text("---\n- a\n- b\n---\nbody\n")
    os.mkdir(root / "entities" / "folder.md")  # a folder named like a note
    name = os.fsdecode(b"entities/caf\xe9-latin1.md")  # a name that is not UTF-8
    (root / name).write_text("---\nmemory_type: entity\nname: Cafe\n---\nlatin-1 name\n")

    cars = _sidecars(root)
    rng.shuffle(cars)
    hostile = ["../../etc/passwd", "/etc/passwd", "entities/../../x.md", "C:\\x.md", ".memlink/x.md", "a\x00b.md", "", "outward/secret.md"]
    for i, p in enumerate(cars):
        text = p.read_text(encoding="utf-8")
        kind = i % 8
        if kind == 0:
            p.write_text(text[: rng.randrange(1, max(2, len(text)))], encoding="utf-8")  # truncated
        elif kind == 1:
            p.write_bytes(bytes(rng.randrange(256) for _ in range(512)))  # garbage, not UTF-8
        elif kind == 2:
            rows = json.loads(text)
            for row in rows[:4]:
                row[rng.choice(["from_uri", "to_uri"])] = rng.choice(hostile)
            p.write_text(json.dumps(rows))
        elif kind == 3:
            rows = json.loads(text)
            junk: list[Any] = [None, 7, "x", [], {"id": "only"}, {"uris": "nope"}, {"uris": ["../up.md"]},
                               dict(rows[0], weight=float("nan")) if rows else {}, dict(rows[0], from_uri=[1]) if rows else {},
                               dict(rows[0], direction="sideways") if rows else {}, dict(rows[0], link_type=3) if rows else {}]
            p.write_text(json.dumps(rows + junk))
        elif kind == 4:
            p.write_text(json.dumps({"not": "a list"}))
        elif kind == 5:
            p.write_text("[" * 100000 + "]" * 100000)  # deeper than any parser's recursion limit
        # kinds 6 and 7: left as they are
    (root / "profile.md").with_name(SIDECAR).unlink(missing_ok=True)
    (root / SIDECAR).symlink_to("/etc/passwd")  # a sidecar that points out of the vault
    (root / "reports" / SIDECAR).unlink(missing_ok=True)
    (root / "reports" / SIDECAR).mkdir()  # a folder where a sidecar should be


def _safely(crashes: list[str], what: str, fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except MemlinkError as exc:
        assert str(exc).strip(), f"{what}: a refusal without a message"
        return None
    except Exception as exc:  # noqa: BLE001 - anything else is the crash this test counts
        crashes.append(f"{what}: {type(exc).__name__}: {exc}"[:300])
        return None


def test_a_fuzzed_vault_never_crashes(tmp_path):
    root = tmp_path / "vault"
    shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns(".memlink"))
    fuzz(root, tmp_path / "outside", random.Random(SEED))
    crashes: list[str] = []
    vault = _safely(crashes, "open", lambda: Vault.open(root))
    assert vault is not None, crashes
    _safely(crashes, "sync", vault.sync)
    assert "entities/escape.md" not in vault.catalog  # a symlink out is no note
    catalog = {*vault.catalog.uris(), *vault.catalog.errors()}
    for query in ("editor", "Lena", "\x00", "a" * 5000):
        _safely(crashes, f"search {query[:10]!r}", lambda q=query: search(vault, q, k=5))
    for uri in sorted(catalog):
        _safely(crashes, f"show {uri!r}", lambda u=uri: (vault.read_note(u), vault.render_note(u)))
        _safely(crashes, f"links {uri!r}", lambda u=uri: vault.links.of(u))
    _safely(crashes, "all_links", lambda: list(vault.links.all()))
    _safely(crashes, "graph", lambda: LinkGraph.build(vault).ppr())
    _safely(crashes, "lint", lambda: lint(vault))
    found = _safely(crashes, "check", lambda: check(vault)) or []
    _safely(crashes, "dream --dry-run", lambda: dream(vault, dry_run=True))
    _safely(crashes, "lint --fix", lambda: fix(vault))
    _safely(crashes, "check after fix", lambda: check(vault))
    assert crashes == [], "\n".join(crashes)
    assert any(p.code == "malformed_sidecar" for p in found)
    assert (tmp_path / "outside" / "secret.md").read_text().endswith("not yours\n")  # nothing written out there
    assert sorted(p.name for p in (tmp_path / "outside").iterdir()) == ["secret.md"]


def test_the_cli_on_a_fuzzed_vault_never_crashes(tmp_path):
    root = tmp_path / "vault"
    shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns(".memlink"))
    fuzz(root, tmp_path / "outside", random.Random(SEED + 1))
    for args in (("check",), ("search", "editor"), ("links", "profile.md"), ("show", "profile.md"),
                 ("lint", "--fix"), ("check", "--fix"), ("dream", "--dry-run", "--provider", "rules")):
        run = memlink(*args, vault=root)
        assert "Traceback" not in run.stderr, (args, run.stderr[-2000:])
        assert run.returncode in (0, 1, 3), (args, run.returncode, run.stderr[-2000:])
