"""Recall's evidence gate, its fusion and its message budget, on small chats shaped like
real ones (benchmarks/locomo.py measures them on LoCoMo and REALTALK)."""

from __future__ import annotations

import json

from conftest import memlink

from engine.sessions.extract import RulesTurnExtractor
from engine.sessions.importer import import_chat
from engine.sessions.recall import RecallParams, TurnMemory

FILLER = ["The meeting moved to Tuesday.", "Did you get the groceries?", "The train was late again.",
          "I repainted the hallway blue.", "My sister called about the holidays.", "The printer is out of ink."]


def imported(vault, tmp_path, lines: list[tuple[str, str]], speakers: tuple[str, str] | None = None,
             filler: list[str] = FILLER) -> TurnMemory:
    """A chat imported as `memlink import-chat` reads it: (role, text) lines, one session,
    filler turns around them; with ``speakers``, each message carries its speaker's name."""
    rows = [("user", t) if i % 2 == 0 else ("assistant", "Okay.") for i, t in enumerate(filler * 2)] + lines
    records = [{"session": "s", "id": f"m{i}", "role": role, "content": text, "ts": "2026-11-01T10:00:00Z",
                **({"speaker": speakers[role != "user"]} if speakers else {})} for i, (role, text) in enumerate(rows, 1)]
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    import_chat(vault, path, RulesTurnExtractor())
    return TurnMemory.for_vault(vault)


def test_a_strong_match_on_the_vector_route_alone_is_answered(vault, tmp_path):
    memory = imported(vault, tmp_path, [("user", "Finally saw that new movie at the theater."), ("assistant", "Fun!")])
    question = "Which cinema film did we watch?"  # no word in common with what was said
    hits = memory.recall(question, k=1)
    assert hits and "theater" in hits[0].question
    memory.params = RecallParams(strong_cosine=1.0)  # a strong cosine alone is not enough: silenced
    assert memory.recall(question, k=1) == []


def test_a_name_the_messages_never_use_does_not_silence(vault, tmp_path):
    """Real people seldom write each other's names; the question names a speaker all the same."""
    memory = imported(vault, tmp_path, [("user", "I had the flu and a bad cough all week."),
                                        ("assistant", "Get well soon.")], speakers=("Paola", "Kevin"))
    question = "What illnesses did Paola have?"  # neither "Paola" nor "illnesses" was ever written
    hits = memory.recall(question, k=1)
    assert hits and "flu" in hits[0].question
    memory.params = RecallParams(named_evidence=RecallParams().min_evidence)  # the name counts for nothing
    assert memory.recall(question, k=1) == []
    for unrelated in ("What is the half-life of carbon-14?", "How does TCP congestion control work?"):
        assert memory.recall(unrelated, k=5) == [], unrelated


def test_how_a_question_is_put_is_not_what_it_asks(vault, tmp_path):
    """"am" and the name a question asks for are its frame: the chat says "my sister
    Maria", never "name"."""
    memory = imported(vault, tmp_path, [("user", "I'm planning a trip to Lisbon in June with my sister Maria."),
                                        ("assistant", "Lisbon in June is lovely."),
                                        ("user", "I'm allergic to peanuts."), ("assistant", "Noted, avoid satay.")],
                      filler=[t for t in FILLER if "sister" not in t])
    for question, said in [("What is my sister's name?", "Maria"), ("What am I allergic to?", "peanuts")]:
        hits = memory.recall(question, k=1)
        assert hits and said in hits[0].question, question
    for unrelated in ("What is the name of the capital of Kyrgyzstan?", "What am I supposed to pay for a visa to Peru?"):
        assert memory.recall(unrelated, k=5) == [], unrelated


def test_a_strong_vector_match_outranks_weak_keyword_matches(vault, tmp_path):
    memory = imported(vault, tmp_path, [
        ("user", "I need to buy a new watch strap."), ("assistant", "Leather or metal?"),
        ("user", "Can you watch the kids on Friday?"), ("assistant", "Sure."),
        ("user", "The train was late."), ("assistant", "Again?"), ("user", "Finally saw that new movie at the theater."), ("assistant", "Fun!")])
    hits = memory.recall("Which cinema film did we watch?", k=3)
    assert "theater" in hits[0].question, [h.question for h in hits]
    # BM25 relative to the best hit however little of the question it holds, the cosine
    # counted once: a turn sharing one common word ("watch") wins.
    memory.params = RecallParams(vector_weight=1.0, coverage_power=0.0, meaning_weight=0.0)
    assert "theater" not in memory.recall("Which cinema film did we watch?", k=3)[0].question


def test_a_turn_holding_the_questions_words_in_meaning_outranks_one_sharing_a_word(vault, tmp_path):
    """"dog" is held by "beagle puppy" in meaning, in a long turn whose own vector the rest
    of the day dilutes; the turn sharing only "adopt" no longer wins."""
    memory = imported(vault, tmp_path, [
        ("user", "My doctor says my blood pressure is fine now."), ("assistant", "Good news."),
        ("user", "We adopted a new budgeting app at work."), ("assistant", "Fancy."),
        ("user", "Long day at work, meetings all morning, then traffic, and in the evening we finally got "
                 "a tiny beagle puppy from the shelter."), ("assistant", "Lovely!"),
        ("user", "I bought a new car, a red hatchback."), ("assistant", "Nice."),
        ("user", "The dog next door barks all night and I can't sleep."), ("assistant", "Ugh.")])
    hits = memory.recall("Which dog did we adopt?", k=3)
    assert "beagle puppy" in hits[0].question, [h.question for h in hits]
    assert any(r.startswith("its words near the question's") for r in hits[0].routes)
    memory.params = RecallParams(meaning_weight=0.0)
    assert "beagle puppy" not in memory.recall("Which dog did we adopt?", k=3)[0].question


def test_a_window_keeps_the_message_a_turn_was_recalled_for_by_meaning(vault, tmp_path):
    """The cut keeps the message holding the question's words in meaning ("beagle puppy"
    for "dog"), not only the one sharing a weak word with it ("day")."""
    memory = imported(vault, tmp_path, [
        ("user", "Long day at work today."), ("user", "Meetings all morning."), ("user", "Then traffic on the way home."),
        ("user", "Cooked pasta for dinner."), ("user", "In the evening we finally got a tiny beagle puppy from the shelter!"),
        ("assistant", "Lovely!"), ("user", "We adopted a new budgeting app at work."), ("assistant", "Fancy.")])
    question = "Which dog did we adopt that day?"
    burst = next(h for h in memory.recall(question, k=3) if len(h.sources) == 6)
    hits = {h.memory_id: h for h in memory.recall(question, messages=6)}
    assert "beagle puppy" in hits[burst.memory_id].question, hits[burst.memory_id]


BURST = [("user", f"Message {i} of the trip plan.") for i in range(1, 12)] + [("user", "Book the ryokan in Gion for May."),
                                                                             ("assistant", "Booked.")]


def test_a_burst_of_twelve_messages_costs_twelve(vault, tmp_path):
    memory = imported(vault, tmp_path, BURST)
    whole = memory.recall("ryokan in Gion", k=1)[0]
    assert len(whole.sources) == 13  # a turn: the 12 messages sent in a row and the answer
    for budget in (1, 4, 10, 20):
        hits = memory.recall("ryokan in Gion", messages=budget)
        assert hits and sum(len(h.sources) for h in hits) <= budget
        first = hits[0]
        assert first.memory_id == whole.memory_id and "Book the ryokan" in first.question + first.answer
        assert len((first.question + "\n" + first.answer).strip().split("\n")) == len(first.sources)
    assert memory.recall("ryokan in Gion", messages=1)[0].sources == [whole.sources[11]]


def test_a_window_spends_the_budget_on_the_messages_asked_about_and_the_reply(vault, tmp_path):
    """Only the message holding the question's words and the reply to it cost the budget
    (not the burst's message before it): what is left goes to another turn (a whole window
    of 6 would take it all). A message in the middle of a burst comes alone."""
    onsen = [("user", "The onsen opens at six.")]
    memory = imported(vault, tmp_path, BURST[:5] + onsen + BURST[5:]
                      + [("user", "Is the ryokan near the station?"), ("assistant", "Ten minutes.")])
    burst = next(h for h in memory.recall("ryokan in Gion", k=2) if len(h.sources) == 14)
    hits = {h.memory_id: h for h in memory.recall("ryokan in Gion", messages=6)}
    assert hits[burst.memory_id].sources == burst.sources[12:14]  # the booking, "Booked."
    assert hits[burst.memory_id].answer == "Booked."
    assert len(hits) >= 2 and sum(len(h.sources) for h in hits.values()) <= 6
    hits = memory.recall("When does the onsen open?", messages=6)
    assert hits[0].sources == [burst.sources[5]] and hits[0].answer == ""


def test_recall_cli_takes_a_message_budget(vault, tmp_path):
    imported(vault, tmp_path, BURST)
    vault.close()
    out = memlink("recall", "ryokan in Gion", "--messages", "5", "--json", vault=vault.root)
    assert out.returncode == 0, out.stderr
    hits = json.loads(out.stdout)
    assert hits and sum(len(h["sources"]) for h in hits) <= 5 and "Book the ryokan" in hits[0]["question"]
