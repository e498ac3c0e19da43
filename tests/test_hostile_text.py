"""Hostile text never reaches the terminal raw: escape sequences (ESC[2J, an OSC 52
clipboard write, an OSC 8 hyperlink, 8-bit CSI), a bare carriage return and bidi
overrides in note titles and bodies, link descriptions, chat messages, search snippets and
model output are dropped before the CLI prints or the app draws; in the app, Rich markup in
note text shows literally."""

from __future__ import annotations

import html
import json
import os
import sys

import forkserver
import pytest
from conftest import REPO, set_llm, settle
from ollama_stub import OllamaStub

from engine import LinkType, Vault
from engine.model.text import printable
from engine.sessions.extract import RulesTurnExtractor
from engine.sessions.importer import extract_pending
from engine.sessions.log import append_events

# One of each: clear screen, clipboard write, hidden hyperlink, bare CR, RLO, an isolate,
# an 8-bit CSI, and Rich markup.
HOSTILE = ("\x1b[2J" "\x1b]52;c;cm0gLXJmIH4=\x07" "\x1b]8;;http://evil.example/\x1b\\here\x1b]8;;\x1b\\"
           " over\rwrite \u202egnp.exe\u202c \u2066iso\u2069 \x9b2J [red]loud[/red]")
BIDI = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def unsafe(text: str) -> list[str]:
    """The characters of ``text`` a terminal would act on (newline and tab are fine)."""
    return sorted({c for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f or c in BIDI})


def test_printable_drops_every_kind_of_sequence_and_keeps_the_words():
    shown = printable(HOSTILE)
    assert unsafe(shown) == []
    assert "here" in shown and "over" in shown and "write" in shown and "[red]loud[/red]" in shown
    assert "evil.example" not in shown and "cm0gLXJm" not in shown  # the hidden payloads go too
    assert printable("a\r\nb\tc") == "a\nb\tc"
    assert printable("\x1b]not closed") == "not closed"  # an unterminated string hides nothing


def test_printable_json_keeps_the_data_and_shows_none_of_it_raw():
    from engine.model.text import printable_json

    text = printable_json(json.dumps({"t": HOSTILE}, ensure_ascii=False))
    assert unsafe(text) == []
    assert json.loads(text) == {"t": HOSTILE}


def hostile_vault(root) -> Vault:
    vault = Vault.init(root, name="hostile")
    a = vault.write_note("entity", {"name": f"Alpha {HOSTILE}", "kind": "person",
                                    "content": f"Alpha harbour crane.\n{HOSTILE}\nAlpha again."})
    b = vault.write_note("entity", {"name": "Beta", "kind": "person", "content": "Beta knows Alpha."})
    vault.link(b.uri, a.uri, LinkType("related_to"), description=f"why {HOSTILE}")
    # A chat whose user message and (model-written) answer are hostile, with its turn memory.
    append_events(vault, "s", [
        {"session": "s", "id": "s-1", "role": "user", "content": f"Paint the fence {HOSTILE}", "ts": "2026-11-01T10:00:00Z"},
        {"session": "s", "id": "s-2", "role": "assistant", "content": f"Fence painted {HOSTILE}", "ts": "2026-11-01T10:00:01Z"},
    ])
    extract_pending(vault, ["s"], RulesTurnExtractor(), final=True)
    return vault


def cli(root, *args: str) -> tuple[int, str, str]:
    run = forkserver.run([sys.executable, "-m", "memlink_tui", "--vault", str(root), *args], capture_output=True,
                         cwd=REPO, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    return run.returncode, run.stdout.decode("utf-8"), run.stderr.decode("utf-8")


def test_the_cli_prints_no_escape_sequence_bidi_override_or_bare_cr(tmp_path):
    vault = hostile_vault(tmp_path / "v")
    alpha = next(e.uri for e in vault.catalog.all() if e.title.startswith("Alpha"))
    vault.close()
    runs = {
        "show": ("show", alpha), "show --json": ("show", alpha, "--json"),
        "search": ("search", "alpha harbour crane"), "search --json": ("search", "alpha harbour crane", "--json"),
        "recall": ("recall", "paint the fence"), "recall --json": ("recall", "paint the fence", "--json"),
        "links": ("links", alpha), "links --json": ("links", alpha, "--json"),
        "lint": ("lint",), "lint --json": ("lint", "--json"),
    }
    for name, args in runs.items():
        code, out, err = cli(vault.root, *args)
        assert code in (0, 3), (name, err)
        assert unsafe(out) == [] and unsafe(err) == [], name
    # What was printed is still the data: the words, and in JSON every character.
    assert "here" in cli(vault.root, "show", alpha)[1] and "[red]loud[/red]" in cli(vault.root, "show", alpha)[1]
    assert HOSTILE in json.loads(cli(vault.root, "show", alpha, "--json")[1])["title"]
    assert "Fence painted" in cli(vault.root, "recall", "paint the fence")[1]
    assert any("why" in line and "here" in line for line in cli(vault.root, "links", alpha)[1].splitlines())
    # The dashboards lint wrote are read with `cat` too: the titles' words, none of their escapes.
    pages = {p.name: p.read_text(encoding="utf-8") for p in (vault.root / "dashboards").glob("*.md")}
    assert pages and all(unsafe(text) == [] for text in pages.values())
    assert any("Alpha" in text for text in pages.values())


def screen_text(app) -> str:
    """Everything the app draws, as text (the SVG screenshot, unescaped)."""
    return html.unescape(app.export_screenshot()).replace("\xa0", " ")


async def test_the_app_draws_no_escape_sequence_and_shows_markup_literally(tmp_path):
    from textual.widgets import Input

    from memlink_tui.app import MemlinkApp
    from memlink_tui.screens.chat import ChatScreen
    from memlink_tui.screens.search import SearchScreen
    from widgets import NoteTree

    hostile_vault(tmp_path / "v").close()
    with OllamaStub() as stub:
        vault = set_llm(tmp_path / "v", model="tiny", host=stub.host, timeout=5)
        alpha = next(e.uri for e in vault.catalog.all() if e.title.startswith("Alpha"))
        app = MemlinkApp(vault)
        async with app.run_test(size=(160, 50)) as pilot:
            await settle(app, pilot)
            screen = app.screen
            await screen.open_note(alpha)  # title and body in the note view, the link table, the tree
            await settle(app, pilot)
            tree = screen.query_one(NoteTree)
            assert any(str(n.label).startswith("Alpha") for n in tree._leaves.values())
            for label in (str(n.label) for n in tree._leaves.values()):
                assert unsafe(label) == []
            shown = screen_text(app)
            assert unsafe(shown) == [] and "[red]loud[/red]" in shown and "here" in shown

            await pilot.press("slash")  # a search whose snippet holds the hostile line
            await settle(app, pilot)
            assert isinstance(app.screen, SearchScreen)
            app.screen.query_one(Input).value = ""
            await pilot.press(*"alpha harbour crane", "enter")
            await settle(app, pilot)
            shown = screen_text(app)
            assert "Alpha" in shown and unsafe(shown) == [] and "[red]loud[/red]" in shown
            await pilot.press("escape")
            await settle(app, pilot)

            await pilot.press("c")  # chat: the model answers with hostile text
            await settle(app, pilot)
            assert isinstance(app.screen, ChatScreen)
            await pilot.press("ctrl+n")
            stub.script.append(("json", f"Model says {HOSTILE}"))
            await pilot.press(*"paint the fence", "enter")
            await settle(app, pilot)
            answers = [str(w.render()) for w in app.screen.query(".assistant")]
            assert any("Model says" in a for a in answers)
            assert all(unsafe(a) == [] for a in answers)
            shown = screen_text(app)
            assert "Model says" in shown and unsafe(shown) == [] and "[red]loud[/red]" in shown
            assert "Fence painted" in shown  # the recalled turn, listed under recall



def test_printable_text_is_passed_as_it_is_and_nothing_printable_is_ever_removed():
    from engine.model.text import _ESCAPES, printable

    assert not [hex(c) for c in range(0x110000) if chr(c).isprintable() and _ESCAPES.match(chr(c))]
    clean = "Plain words, 汉字, émigré — 100%"
    assert printable(clean) is clean or printable(clean) == clean
    assert printable("a\x1b[2Jb") == "ab" and printable("tab\there") == "tab\there"


def test_a_title_with_escape_sequences_gives_a_file_name_without_their_payload():
    from engine.model.templates import slugify

    title = "Evil \x1b]52;c;SGVsbG8=\x07 notes \x1b]8;;http://x.example\x07link\x1b]8;;\x07 \x1b[2J here"
    assert slugify(title) == "evil-notes-link-here"


def test_notes_made_from_a_chat_hold_no_escape_sequence_and_keep_its_words(tmp_path):
    """A message carrying terminal escapes (a paste, an export) is kept in its log as it
    arrived; the notes made from it, and what the chat logs of typed text, hold the words only."""
    from engine.sessions.chat import ChatSession
    from engine.sessions.commit import commit_session

    vault = Vault.init(tmp_path / "v", name="v")
    said = f"I prefer \x1b[31mOolong tea\x1b[0m in the morning {HOSTILE}"
    append_events(vault, "s", [
        {"session": "s", "id": "s-1", "role": "user", "content": said, "ts": "2026-11-01T10:00:00Z"},
        {"session": "s", "id": "s-2", "role": "assistant", "content": "Noted.", "ts": "2026-11-01T10:00:01Z"},
    ])
    assert commit_session(vault, "s") is not None
    made = [p for p in vault.root.rglob("*.md") if "Oolong" in p.read_text(encoding="utf-8")]
    assert made and all(unsafe(p.read_text(encoding="utf-8")) == [] for p in made)
    assert any("# Oolong tea in the morning" in p.read_text(encoding="utf-8") for p in made)
    ChatSession(vault, "typed").prepare(f"I love Gouda cheese {HOSTILE} from Kaasmarkt")
    logged = [json.loads(line) for line in (vault.root / "sessions" / "typed.jsonl").read_text(encoding="utf-8").splitlines()]
    typed = logged[0]["content"]
    assert typed.startswith("I love Gouda cheese") and typed.endswith("from Kaasmarkt") and unsafe(typed) == []
    from engine.errors import MemlinkError

    with pytest.raises(MemlinkError, match="holds no text"):  # escapes alone: nothing to ask, nothing logged
        ChatSession(vault, "escapes").prepare("\x1b[31m\x07")
    assert not (vault.root / "sessions" / "escapes.jsonl").exists()


def test_an_imported_file_name_cannot_fake_a_line_of_ingest_output(tmp_path):
    vault = Vault.init(tmp_path / "v", name="v")
    vault.close()
    src = tmp_path / "docs"
    src.mkdir()
    (src / "evil\nFAKE: 99 files imported\x1b[2J.txt").write_text("Some text.\n", encoding="utf-8")
    code, out, err = cli(vault.root, "ingest", str(src))
    assert code == 0, err
    assert unsafe(out) == [] and not any(line.startswith("FAKE") for line in out.splitlines())
    assert "evil\\nFAKE: 99 files imported\\x1b[2J.txt" in out
