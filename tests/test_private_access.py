"""Nothing outside the vault module reads or writes a private vault attribute: callers use
the vault's public methods (transaction(), supersede(), sync()...)."""

from __future__ import annotations

import ast

from conftest import REPO

SCANNED = ("engine", "memlink_tui", "widgets", "benchmarks", "tools")
VAULT_MODULES = {"engine/storage/vault.py"}


def _is_vault(node: ast.expr) -> bool:
    """``vault``, ``v``, ``some_vault``, or an attribute ``....vault`` (``self.vault``)."""
    if isinstance(node, ast.Name):
        return node.id == "v" or node.id.endswith("vault")
    return isinstance(node, ast.Attribute) and node.attr.endswith("vault")


def private_uses(source: str) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                and _is_vault(node.value)):
            out.append((node.lineno, ast.unparse(node)))
    return sorted(out)


def test_the_scan_finds_private_access():
    code = "vault._commit([])\nself.vault._catalog = None\nv._lock\nsample_vault._tx()\nvault.__class__\nvault.commit()\n"
    assert [use for _line, use in private_uses(code)] == ["vault._commit", "self.vault._catalog", "v._lock", "sample_vault._tx"]


def test_no_private_vault_attribute_is_touched_outside_the_vault_module():
    found = []
    for top in SCANNED:
        for path in sorted((REPO / top).rglob("*.py")) if (REPO / top).is_dir() else []:
            rel = path.relative_to(REPO).as_posix()
            if rel in VAULT_MODULES or ".venv" in path.parts:
                continue
            found += [f"{rel}:{line}: {use}" for line, use in private_uses(path.read_text(encoding="utf-8"))]
    assert found == []
