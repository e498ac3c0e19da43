"""engine/ is UI-free: importing every engine module must not pull in textual."""

import subprocess
import sys

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
