"""engine/ is UI-free: importing every engine module must not pull in textual."""

import ast
import subprocess
import sys
from pathlib import Path

from conftest import REPO

CODE = """
import importlib, pkgutil, sys
import engine
for mod in pkgutil.walk_packages(engine.__path__, "engine."):
    importlib.import_module(mod.name)
bad = sorted(m for m in sys.modules if m.split(".")[0] in ("textual", "widgets", "memlink_tui"))
print(",".join(bad))
sys.exit(1 if bad else 0)
"""


def test_engine_imports_without_textual():
    proc = subprocess.run([sys.executable, "-c", CODE], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"engine pulled in UI modules: {proc.stdout} {proc.stderr}"


def test_no_ui_import_statements_in_engine():
    offenders = []
    for path in (REPO / "engine").rglob("*.py"):
        for line in path.read_text(encoding="utf-8").splitlines():
            s = line.strip()
            if s.startswith(("import ", "from ")) and s.split()[1].split(".")[0] in ("textual", "widgets", "memlink_tui"):
                offenders.append(f"{path.name}: {s}")
    assert not offenders


def test_the_import_contracts_hold():
    """The engine's layers (pyproject's [tool.importlinter]): no import cycle, no upward
    import, never the app. (`./dev lint` runs the same contracts.)"""
    linter = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(linter)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "broken" in proc.stdout and " 0 broken" in proc.stdout


def test_the_vault_class_stays_small():
    """``Vault`` owns files, locks, the unit of work and the journal; reading notes'
    derived state is the catalog's and the link index's (docs/DESIGN.md, "Layers")."""
    tree = ast.parse((REPO / "engine" / "storage" / "vault.py").read_text(encoding="utf-8"))
    vault = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Vault")
    assert vault.end_lineno is not None and vault.end_lineno - vault.lineno + 1 <= 350
