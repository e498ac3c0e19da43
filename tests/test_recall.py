"""Recall on real conversation shapes: the whole turn, its date and its neighbours are
indexed; greetings seed nothing; the indexes persist with the store; the same question
gives the same answer in every process; nonsense recalls nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import forkserver
import numpy as np
import pytest

from engine import Vault
from engine.index.embed import BUNDLED_MODELS, Model2VecEmbedder, bundled_model_path, load_static_model, normalise
from engine.sessions.extract import RulesTurnExtractor
from engine.sessions.importer import extract_pending, import_chat
from engine.sessions.log import append_events
from engine.sessions.recall import TurnMemory
from engine.sessions.store import TurnStore

REPO = Path(__file__).resolve().parent.parent
LOCOMO = REPO.parent / "shared" / "data" / "locomo-dev" / "locomo-dev.json"


def chat(vault, session: str, lines: list[tuple[str, str]], ts: str = "2026-11-01T10:00:00Z") -> None:
    events = [{"session": session, "id": f"{session}-{i}", "role": role, "content": text, "ts": ts}
              for i, (role, text) in enumerate(lines, 1)]
    append_events(vault, session, events)
    extract_pending(vault, [session], RulesTurnExtractor(), final=True)


def test_the_whole_answer_is_recalled_not_its_first_sentence(vault):
    chat(vault, "s", [("user", "How did the weekend go?"),
                      ("assistant", "Thanks! Got the tattoo on Saturday. It stands for freedom and my new job."),
                      ("user", "Did you water the ferns?"), ("assistant", "Yes, all of them.")])
    hits = TurnMemory.for_vault(vault).recall("what does the tattoo stand for", k=1)
    assert [h.sources for h in hits] == [["s-1", "s-2"]]
    assert hits[0].answer.endswith("my new job.")  # the exact original text


def test_neighbouring_turns_carry_context_and_dates_are_words(vault):
    chat(vault, "may", [("user", "I finally went to the Ed Sheeran concert."), ("assistant", "How was it?"),
                        ("user", "Amazing, we danced all night."), ("assistant", "Love that.")],
         ts="1:56 pm on 8 May, 2023")
    chat(vault, "june", [("user", "We baked bread with the kids."), ("assistant", "Yum!")], ts="2023-06-20T09:00:00")
    memory = TurnMemory.for_vault(vault)
    hits = memory.recall("How was the Ed Sheeran concert?", k=2)
    assert ["may-3", "may-4"] in [h.sources for h in hits]  # "Amazing…" names no concert: its neighbour does
    assert memory.recall("what did we do in June 2023", k=1)[0].sources == ["june-1", "june-2"]


def test_greetings_and_speaker_names_seed_nothing(vault):
    turn_lines = [("user", "Hey Caroline! Thanks Nate for the tip."), ("assistant", "Hey Mel Brown! Sure thing.")]
    chat(vault, "s", turn_lines + [("user", "Lunch with Noor El Mansouri at the studio"), ("assistant", "Noted.")])
    memory = TurnMemory.for_vault(vault)
    terms = sorted(memory.term_text.values())
    assert "Mel Brown" in terms and "Noor El Mansouri" in terms
    assert not [t for t in terms if t.split()[0] in ("Hey", "Thanks")]
    hits = memory.recall("What did Noor say about lunch?", k=3)
    assert hits[0].sources == ["s-3", "s-4"] and any("graph" in r for r in hits[0].routes)


def test_a_question_naming_the_vault_s_owner_asks_about_what_she_said(vault, monkeypatch):
    """She says "I" in her chats: her name counts neither as missing content nor as what
    a turn is about (the one turn greeting her by name)."""
    vault.write_note("profile", {"name": "Lena Zhou", "aliases": ["LZ", "Rose"]})
    chat(vault, "s", [("user", "Hi, let's set you up. I work on berth planning in Rotterdam."),
                      ("assistant", "Nice to meet you, Lena. Welcome, Lena Zhou!"),
                      ("user", "The celadon glaze test tiles came out too glossy."), ("assistant", "Try a satin base."),
                      ("user", "Book the dentist for Tuesday"), ("assistant", "Done, 9:30 on Tuesday."),
                      ("user", "Water the ferns on Friday"), ("assistant", "Noted."),
                      ("user", "Planted the rose by the shed."), ("assistant", "Lovely."),
                      ("user", "Planted the tulips by the gate."), ("assistant", "Lovely.")])
    memory = TurnMemory.for_vault(vault)

    def walked(*_args, **_kwargs):  # (the catalog of 100k notes is a walk of 100k files: a recall process reads one)
        raise AssertionError("recall read the catalog to find the owner")

    monkeypatch.setattr("engine.storage.catalog.Catalog.all", walked)
    for question in ("What glaze is Lena testing?", "What glaze is LZ testing?", "What is Lena's glaze test?"):
        assert [h.sources for h in memory.recall(question, k=1)] == [["s-3", "s-4"]], question
    assert [h.sources for h in memory.recall("Who is Lena Zhou?", k=1)] == [["s-1", "s-2"]]  # nothing else asked
    assert [h.sources for h in memory.recall("When did I water the rose?", k=1)] == [["s-9", "s-10"]]  # a rose, no Rose


def test_only_the_owner_s_names_as_written_count_as_naming_her(vault):
    """Not a month her name shares, nor her surname alone (her father's too)."""
    vault.write_note("profile", {"name": "June Park", "aliases": ["JP"]})
    chat(vault, "s", [("user", "We travelled to Porto in March."), ("assistant", "Nice."),
                      ("user", "We travelled to Lisbon in June."), ("assistant", "Lovely."),
                      ("user", "My birthday party is at the lake."), ("assistant", "Fun."),
                      ("user", "Dad's birthday: Mr Park turns 70 on 3 May."), ("assistant", "Noted.")])
    memory = TurnMemory.for_vault(vault)
    assert [h.sources for h in memory.recall("Where did we travel in June?", k=1)] == [["s-3", "s-4"]]
    assert [h.sources for h in memory.recall("When is Mr Park's birthday?", k=1)] == [["s-7", "s-8"]]
    assert [h.sources for h in memory.recall("Where is JP's birthday party?", k=1)] == [["s-5", "s-6"]]


def test_nonsense_recalls_nothing(vault):
    chat(vault, "s", [("user", "Book the dentist for Tuesday"), ("assistant", "Done, 9:30 on Tuesday.")])
    memory = TurnMemory.for_vault(vault)
    assert memory.recall("xyzzyqq", k=5) == []
    assert memory.recall("quantum chromodynamics lecture notes", k=5) == []
    assert memory.recall("when is the dentist", k=5)


def test_indexes_persist_and_sync_only_what_changed(vault, monkeypatch):
    chat(vault, "s", [("user", "Plan the Kyoto trip"), ("assistant", "Three days, temples first.")])
    chat(vault, "other", [("user", "Water the ferns"), ("assistant", "Done.")])
    first = TurnMemory(vault)
    assert (vault.state_dir / "index" / "turns").is_dir() and vault.store.rows("SELECT count(*) FROM turns") == [(2,)]
    read: list[str] = []
    real_rows = TurnStore.rows
    monkeypatch.setattr(TurnStore, "rows", lambda self, session: (read.append(session), real_rows(self, session))[1])
    again = TurnMemory(vault)  # nothing changed: loaded, no turn memories read
    assert read == [] and again.recall("Kyoto trip", k=1)[0].memory_id == first.recall("Kyoto trip", k=1)[0].memory_id
    chat(vault, "s", [("user", "Plan the Kyoto trip"), ("assistant", "Three days, temples first."),
                      ("user", "And a ryokan near Gion?"), ("assistant", "Booked one for two nights.")])
    later = TurnMemory(vault)
    assert read == ["s"]  # the changed session's alone
    assert later.recall("ryokan in Gion", k=1)[0].sources == ["s-3", "s-4"]
    assert later.recall("water the ferns", k=1)[0].sources == ["other-1", "other-2"]
    vault.close()
    (vault.state_dir / "index.sqlite").write_bytes(b"not a database")  # derived: rebuilt, never fatal
    assert TurnMemory(vault).recall("ryokan in Gion", k=1)[0].sources == ["s-3", "s-4"]


def test_fast_model_load_matches_model2vec():
    from model2vec import StaticModel

    texts = ["When did Caroline go to the support group?", "xyzzyqq", "我喜欢茶", ""]
    ours = load_static_model(bundled_model_path()).encode(texts)
    theirs = StaticModel.from_pretrained(str(bundled_model_path())).encode(texts)
    assert np.array_equal(ours, theirs)


@pytest.mark.parametrize("name", BUNDLED_MODELS)
def test_one_text_is_embedded_as_model2vec_embeds_it(name):
    """A single text (a search's question) skips model2vec's batching: the vector must
    be the library's to the bit, for every bundled model, long, empty, unknown or CJK."""
    from model2vec import StaticModel

    ours = Model2VecEmbedder(bundled_model_path(name), name=name)
    theirs = StaticModel.from_pretrained(str(bundled_model_path(name)))
    assert ours._plain()
    texts = ["When did Caroline go to the support group?", "xyzzyqq", "我喜欢茶", "", " ", "🙂", "a",
             "glaze " * 700, "Ünïcödé ÅÄÖ café, naïve — über 20:00!", "word " * 600 + "tail"]
    for text in texts:
        one = ours.encode([text])
        assert one.shape == (1, ours.dims) and one.dtype == np.float32
        assert np.array_equal(one, normalise(theirs.encode([text]))), text[:40]
        assert np.array_equal(one[0], ours.encode([text, "another text"])[0]), text[:40]  # the batched way


@pytest.mark.skipif(not LOCOMO.is_file(), reason="needs ../shared/data/locomo-dev")
def test_recall_is_the_same_in_every_process(tmp_path):
    sys.path.insert(0, str(REPO / "benchmarks"))
    import locomo

    sample = json.loads(LOCOMO.read_text(encoding="utf-8"))[0]
    root, _ = locomo.build(sample, tmp_path)
    questions = tmp_path / "q.txt"
    questions.write_text("".join(q["question"] + "\n" for q in locomo.questions(sample)[:60]))
    outputs = []
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONHASHSEED=seed)
        run = subprocess.run([sys.executable, "-m", "memlink_tui", "--vault", str(root), "recall", "--batch",
                              str(questions), "--k", "5", "--json"], capture_output=True, text=True, env=env, timeout=120)
        assert run.returncode == 0, run.stderr
        outputs.append([[h["memory_id"] for h in json.loads(line)["hits"]] for line in run.stdout.splitlines()])
    assert len(outputs[0]) == 60 and outputs[0] == outputs[1]
    assert sum(1 for hits in outputs[0] if hits) >= 55


@pytest.mark.skipif(not LOCOMO.is_file(), reason="needs ../shared/data/locomo-dev")
def test_notes_in_the_memory_context_never_push_a_recalled_turn_out(tmp_path):
    """A long real conversation, every session saved to memory: the memory context at
    ``chat.turns: 5`` holds exactly the 5 turns recall gives, notes beside them."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import locomo

    from engine import Vault
    from engine.sessions.memory import memory_context

    sample = json.loads(LOCOMO.read_text(encoding="utf-8"))[0]
    root, _ = locomo.build(sample, tmp_path)
    assert locomo.save_sessions(root, sample) > 0
    locomo.configure(root, turns=5)
    vault = Vault.open(root)
    try:
        memory, with_notes = TurnMemory.for_vault(vault), 0
        for q in locomo.questions(sample):
            items = memory_context(vault, q["question"]).items
            turns = [i.where.split(", ") for i in items if i.kind == "turn"]
            assert sorted(turns) == sorted(h.sources for h in memory.recall(q["question"], k=5)), q["question"]
            with_notes += any(i.kind == "note" for i in items)
        assert with_notes >= 1
    finally:
        vault.close()


def test_import_chat_keeps_every_message_its_image_caption_and_speaker(vault, tmp_path):
    records = [{"session": "s", "id": i, "role": role, "content": text, "ts": "t"} for i, role, text in [
        ("1", "assistant", "Morning!"), ("2", "user", "Hi."), ("3", "user", "I got the job!"),
        ("4", "assistant", "Congrats!"), ("5", "user", "Thanks, starting Monday."), ("6", "assistant", "")]]
    records[2]["caption"] = "a signed letter on a desk"
    records[5]["caption"] = "a cake with candles"  # an image with no text is a message too
    records[4]["speaker"] = "Astrid"
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    report = import_chat(vault, path, RulesTurnExtractor())
    memory = TurnMemory.for_vault(vault)
    assert report.extracted == 3
    assert sorted(s for t in memory.turns.values() for s in t["sources"]) == ["1", "2", "3", "4", "5", "6"]
    hit = memory.recall("signed letter", k=1)[0]
    assert hit.sources == ["2", "3", "4"] and "[image: a signed letter on a desk]" in hit.question
    assert memory.recall("cake with candles", k=1)[0].sources == ["5", "6"]
    assert memory.recall("what did Astrid say about Monday", k=1)[0].sources == ["5", "6"]


def test_recall_never_waits_for_the_vault_lock(vault):
    """Recall is a read: a writer holding the vault (an ingest, a dream run) does not hold
    it up, even when the turn indexes must be built first."""
    import time

    from engine import Vault

    chat(vault, "s", [("user", "Plan the Kyoto trip"), ("assistant", "Three days, temples first.")])
    with vault.writing():
        other = Vault.open(vault.root)
        started = time.monotonic()
        assert TurnMemory(other).recall("Kyoto trip", k=1)[0].sources == ["s-1", "s-2"]
        assert time.monotonic() - started < 10


def test_a_long_lived_recall_follows_other_processes(vault):
    """The app keeps one TurnMemory open; an import in another process that adds turns,
    or grows one (its old memory dropped), shows up on the next recall, never a crash."""
    import time

    from engine import Vault

    append_events(vault, "s", [{"session": "s", "id": "1", "role": "user", "content": "Did you book the ryokan?", "ts": "t"}])
    extract_pending(vault, ["s"], RulesTurnExtractor(), final=True)
    memory = TurnMemory(vault)
    assert memory.recall("ryokan", k=1)[0].sources == ["1"]
    elsewhere = Vault.open(vault.root)  # stands for another process: its own objects and caches
    append_events(elsewhere, "s", [{"session": "s", "id": "2", "role": "assistant", "content": "Yes, in Gion.", "ts": "t"}])
    extract_pending(elsewhere, ["s"], RulesTurnExtractor(), final=True)
    TurnMemory(elsewhere)  # syncs and saves the index; the old one-message turn is gone from it
    time.sleep(1.1)
    assert memory.recall("ryokan in Gion", k=1)[0].sources == ["1", "2"]


def test_processes_building_the_index_at_once_all_answer(tmp_path):
    from engine import Vault

    vault = Vault.init(tmp_path / "v")
    chat(vault, "s", [(("user", "assistant")[i % 2], f"Note {i} about the harbour audit and item {i * 7}")
                      for i in range(80)])
    vault.close()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "memlink_tui", "--vault", str(vault.root), "recall", "harbour audit item 21", "--json"]
    runs = [forkserver.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(3)]
    outs = [r.communicate(timeout=120) for r in runs]
    assert [r.returncode for r in runs] == [0, 0, 0], [e for _, e in outs]
    assert len({json.dumps([h["memory_id"] for h in json.loads(o)]) for o, _ in outs}) == 1


def test_recalled_text_never_reaches_the_terminal_as_escape_sequences(vault, tmp_path):
    from conftest import memlink

    chat(vault, "s", [("user", "Paint the \x1b[2Jfence \x1b]52;c;cm0gLXJmIH4=\x07green"), ("assistant", "Done \x1b[31mred\x1b[0m.")])
    vault.close()
    out = memlink("recall", "paint the fence", vault=vault.root)
    assert out.returncode == 0 and "fence" in out.stdout
    assert "\x1b" not in out.stdout and "\x07" not in out.stdout


def test_a_recalled_turn_says_when_it_was_said(vault):
    """("When did I…?" is answered by the day, whatever the session is called.)"""
    from conftest import memlink

    chat(vault, "imported-7", [("user", "I finally went to the Ed Sheeran concert."), ("assistant", "How was it?")],
         ts="1:56 pm on 8 May, 2023")
    assert [h.when for h in TurnMemory.for_vault(vault).recall("Ed Sheeran concert", k=1)] == ["1:56 pm on 8 May, 2023"]
    vault.close()
    out = memlink("recall", "Ed Sheeran concert", vault=vault.root)
    assert out.returncode == 0 and "imported-7  said 2023-05-08" in out.stdout, out.stdout
    shown = json.loads(memlink("recall", "Ed Sheeran concert", "--json", vault=vault.root).stdout)
    assert shown[0]["when"] == "1:56 pm on 8 May, 2023"


def test_a_long_message_is_shown_where_it_holds_the_question_s_words(vault):
    from conftest import memlink

    chat(vault, "b", [("user", "Lorem ipsum. " * 5000 + "The launch code word is PELICAN-42. " + "More. " * 5000),
                      ("assistant", "ok")])
    vault.close()
    out = memlink("recall", "what is the launch code word", vault=vault.root)
    assert out.returncode == 0 and "The launch code word is PELICAN-42." in out.stdout, out.stdout[:600]
    vault = Vault.open(vault.root)
    chat(vault, "c", [("user", "#1 priority is the visa for Peru."), ("assistant", "Noted.")])  # (short: as said)
    vault.close()
    out = memlink("recall", "visa for Peru", vault=vault.root)
    assert ": #1 priority is the visa for Peru.\n" in out.stdout, out.stdout


def test_a_bad_session_id_anywhere_in_a_transcript_imports_nothing(vault, tmp_path):
    from engine.errors import MemlinkError

    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps({"session": "good", "id": "1", "role": "user", "content": "hi", "ts": "t"}) + "\n"
                    + json.dumps({"session": "../escape", "id": "2", "role": "user", "content": "hi", "ts": "t"}) + "\n")
    with pytest.raises(MemlinkError, match="line 2: bad session id"):
        import_chat(vault, path, RulesTurnExtractor())
    assert not (vault.root / "sessions" / "good.jsonl").exists()
