"""Code comments point to docs/DESIGN.md, never to the seed documents (which are not in
the repository): no "seed 000"-style citation, no bare "§3.2.5"-style section number, and
every `docs/DESIGN.md, "Heading"` pointer names a heading the file has."""

from __future__ import annotations

import re

from conftest import REPO

SCANNED = ("engine", "memlink_tui", "widgets", "benchmarks", "tools", "tests")
DESIGN = REPO / "docs" / "DESIGN.md"

SEED_CITATION = re.compile(r"seed 0|§\d")  # a lone "§" is fine: autolink masks with it
POINTER = re.compile(r'docs/DESIGN\.md,?\s*"([^"]+)"')  # `docs/DESIGN.md, "Search"` (or without the comma)


def sources() -> list[tuple[str, str]]:
    out = []
    for top in SCANNED:
        for path in sorted((REPO / top).rglob("*.py")):
            if ".venv" in path.parts or "__pycache__" in path.parts or path.name == "test_habits.py":
                continue  # this file spells out the citations it looks for
            out.append((path.relative_to(REPO).as_posix(), path.read_text(encoding="utf-8")))
    return out


def headings() -> set[str]:
    return {line[3:].strip() for line in DESIGN.read_text(encoding="utf-8").splitlines() if line.startswith("## ")}


def test_the_patterns_catch_what_they_should():
    assert SEED_CITATION.search("(seed 000 §3.4.2)") and SEED_CITATION.search("rules of §3.2.5")
    assert SEED_CITATION.search("seed 002 §五")
    assert not SEED_CITATION.search('chars[a:b] = "§" * n') and not SEED_CITATION.search("a seed round")
    assert POINTER.findall('(docs/DESIGN.md, "Link types") and docs/DESIGN.md\n"Search"') == ["Link types", "Search"]


def test_design_notes_exist_with_their_sections():
    assert DESIGN.is_file()
    assert {"Vault format", "Link types", "Search", "Dream", "Turn memory"} <= headings()


def test_code_does_not_cite_the_seed_documents():
    docs = [(name, (REPO / name).read_text(encoding="utf-8")) for name in ("README.md", "docs/DESIGN.md")]
    found = [f"{rel}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}"
             for rel, text in sources() + docs for m in SEED_CITATION.finditer(text)]
    found += [f"{rel}: shared/seeds" for rel, text in docs if "shared/seeds" in text]
    assert not found, "point to docs/DESIGN.md instead:\n" + "\n".join(found)


def test_every_design_pointer_names_an_existing_heading():
    known = headings()
    # A name wrapped over two lines (of a docstring, or of a comment) reads as one.
    pointers = [(rel, " ".join(name.replace("#", " ").split())) for rel, text in sources() for name in POINTER.findall(text)]
    assert pointers, "the scan finds the pointers"
    wrong = [f"{rel}: {name!r}" for rel, name in pointers if name not in known]
    assert not wrong, f"docs/DESIGN.md has no such heading (it has {sorted(known)}):\n" + "\n".join(wrong)
