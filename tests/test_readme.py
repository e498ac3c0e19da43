"""The README is for users, short and current: its key map and command reference are
generated from the code (a test each keeps them in step), it stays under 600 lines, and
neither it nor docs/BENCHMARKS.md tells how the project was developed (history belongs
in git)."""

from __future__ import annotations

import re

import pytest
from conftest import REPO

README = REPO / "README.md"
BENCHMARKS = REPO / "docs" / "BENCHMARKS.md"
DOCS = (README, BENCHMARKS)
MAX_LINES = 600

# Words of a development diary, anywhere (code included): whole words, any case.
DIARY = re.compile(r"\bre-?run(?:s|ning)?\b|\brounds?\b|\bissues?\s*#|\bissue\s+\d|\b(?:eighth|ninth|tenth)\b", re.I)
# In prose (code blocks and spans left out, where `#1` is a rank and `../` a link's form):
ISSUE_NUMBER = re.compile(r"(?<![\w&])#\d+\b")  # "#34"; an HTML entity (&#39;) is not one
OUTSIDE = re.compile(r"\.\./")  # a path above the repository
# "session" is the product's chat session only: "chat session(s)", or the app's "New session".
SESSION = re.compile(r"\bsessions?\b", re.I)
PRODUCT_SESSION = re.compile(r"\b(?:chat|new)\s+sessions?\b", re.I)


def prose(text: str) -> str:
    """The text without fenced code blocks and code spans (line breaks kept)."""
    text = re.sub(r"^```.*?^```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def diary(text: str) -> list[str]:
    """Where a text speaks of how it was made, as 'line: words'."""
    body = prose(text)
    found = [(line_of(text, m.start()), m.group(0)) for m in DIARY.finditer(text)]
    found += [(line_of(body, m.start()), m.group(0)) for m in ISSUE_NUMBER.finditer(body)]
    found += [(line_of(body, m.start()), m.group(0)) for m in OUTSIDE.finditer(body)]
    found += [(line_of(text, m.start()), m.group(0)) for m in re.finditer(r"(?<![\w.~])/tmp/|\bshared/", text)]
    product = {m.end() for m in PRODUCT_SESSION.finditer(body)}
    found += [(line_of(body, m.start()), m.group(0)) for m in SESSION.finditer(body) if m.end() not in product]
    return [f"{line}: {words!r}" for line, words in sorted(found)]


def test_the_diary_check_catches_what_it_should():
    for text in ("Latest run: the tenth session's final code", "Re-run at the end of the reach round",
                 "as issue #14 asks", "the issue 34 target", "(#34)", "see ../shared/MEASURED.md",
                 "memlink --vault /tmp/rw search", "a rerun", "in this session", "Sessions 3 and 4"):
        assert diary(text), text
    for text in ("the app's chat sessions", "`ctrl+n` New session", "*New chat session*", "around the background",
                 "found by: `vector #1 (0.97)`", "run it again", "`[Mia](../people/mia)`",
                 "```\n{\"session\": \"s1\"}\n```\n", "`--session SESSION`", "`sessions/<id>.jsonl`"):
        assert not diary(text), text


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_the_docs_tell_no_development_history(doc):
    found = diary(doc.read_text(encoding="utf-8"))
    assert not found, f"{doc.name} speaks of how it was developed (say it for users, or leave it to git):\n" + "\n".join(found)


def test_the_readme_is_short():
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"README.md has {lines} lines (at most {MAX_LINES}): move details to docs/"


def test_the_readme_key_map_is_the_bindings():
    from memlink_tui.keymap import keymap

    assert keymap() in README.read_text(encoding="utf-8"), \
        "README's key map is out of date: paste `python -m memlink_tui.keymap` into it"


def test_the_readme_command_reference_is_the_parser():
    from memlink_tui.cli.reference import reference

    assert reference() in README.read_text(encoding="utf-8"), \
        "README's command reference is out of date: paste `python -m memlink_tui.cli.reference` into it"


def test_the_command_reference_lists_every_command_and_option(tmp_path, monkeypatch):
    from memlink_tui.cli import parser
    from memlink_tui.cli.reference import reference

    text = reference()
    sub = next(a for a in parser()._actions if a.choices and isinstance(a.choices, dict))
    for name, command in sub.choices.items():
        row = next((line for line in text.splitlines() if re.match(rf"\| `memlink {name}[ `]", line)), None)
        assert row is not None, name
        for action in command._actions:
            for flag in action.option_strings:
                if flag.startswith("--") and flag not in ("--help", "--vault"):
                    assert f"`{flag}" in row, (name, flag)
    # The same text on every machine: the per-user data folder is not spelled out.
    monkeypatch.setenv("MEMLINK_HOME", str(tmp_path / "elsewhere"))
    assert reference() == text and str(tmp_path) not in text


def test_every_benchmark_command_in_the_docs_exists():
    named = {m for doc in DOCS for m in re.findall(r"benchmarks/[\w/]+\.(?:py|yaml|txt)", doc.read_text(encoding="utf-8"))}
    assert "benchmarks/bench_scale.py" in named
    missing = sorted(path for path in named if not (REPO / path).is_file())
    assert not missing, missing
    assert "docs/BENCHMARKS.md" in README.read_text(encoding="utf-8")
