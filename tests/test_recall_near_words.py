"""Recall of questions worded unlike the history: words near in meaning to a question's rare
words (engine.sessions.expansion) are looked for too."""

from __future__ import annotations

import numpy as np

from engine.index.embed import load_embedder
from engine.sessions.expansion import near_words
from engine.sessions.recall import RecallParams, TurnMemory
from tests.test_recall import chat

LINES = [("user", "I just signed up for a pottery class, starting next week!"), ("assistant", "Love that, have fun."),
         ("user", "My sister is visiting on the weekend."), ("assistant", "Nice, say hi from me."),
         ("user", "Lessons at the gym are getting pricey."), ("assistant", "Maybe look for a cheaper one."),
         ("user", "When did you sign the kids up for swimming?"), ("assistant", "Last spring, they love it.")]


def test_the_models_word_vectors_give_near_words():
    english = load_embedder("english").embedder
    near = near_words(english, ["ceramics", "children"], 5, 0.5)
    assert "pottery" in near["ceramics"] and "kids" in near["children"]
    assert "ceramics" not in near["ceramics"]
    # The multilingual model's SentencePiece pieces are fragments of words: no near words;
    # nor from an embedder that is no static model.
    assert near_words(load_embedder("multilingual").embedder, ["ceramics"], 5, 0.5) == {}

    class Hashing:
        name, dims = "hashing", 8

        def encode(self, texts):
            return np.ones((len(texts), 8), dtype=np.float32) / np.sqrt(8)

    assert near_words(Hashing(), ["ceramics"], 5, 0.5) == {}


def test_a_reworded_question_finds_the_turn_by_a_near_word(vault):
    chat(vault, "s", LINES)
    question = "At what point did I enrol in ceramics lessons?"  # the history says "pottery class"
    ungated = dict(min_evidence=-9.0, named_evidence=-9.0)  # (a history this short tells the gate little)
    hits = TurnMemory(vault, params=RecallParams(**ungated)).recall(question, k=3)
    assert hits[0].sources == ["s-1", "s-2"]
    assert any(r.startswith("near words") for r in hits[0].routes)
    without = TurnMemory(vault, params=RecallParams(near_weight=0.0, **ungated)).recall(question, k=3)
    assert without[0].sources != ["s-1", "s-2"]


def test_words_the_history_holds_are_not_expanded(vault):
    chat(vault, "s", LINES)
    hits = TurnMemory(vault).recall("When does the pottery class start?", k=3)
    assert hits[0].sources == ["s-1", "s-2"]
    assert not [r for h in hits for r in h.routes if r.startswith("near words")]
