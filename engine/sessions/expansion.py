"""Words near in meaning to a question's words, by the static embedding model's own word
vectors (docs/DESIGN.md, "Turn memory": reworded questions). A question asking about
"ceramics lessons" when the history says "pottery class" shares no word with it; the
model's row for "ceramics" lies close to the row for "pottery", so recall can look for
that word too.

Only whole words of the model's vocabulary are candidates, read once per model and
process (by the first question that needs them). The search is in two steps so a
question stays within recall's time: a first pass on each row's leading PCA dimensions
(model2vec orders them by variance) keeps a short list, scored then on all dimensions."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ..index.embed import Embedder

LEAD = 48  # leading dimensions of the first pass
SHORTLIST = 200  # rows the first pass keeps per word


@dataclass(frozen=True)
class Vocabulary:
    words: tuple[str, ...]
    rows: np.ndarray  # the words' int8 or float rows, as the model holds them
    lead: np.ndarray  # float32, the leading dimensions of each row, scaled by the row's full norm


def near_words(embedder: Embedder, words: list[str], k: int, min_cosine: float) -> dict[str, list[str]]:
    """For each word, up to ``k`` other vocabulary words whose rows have a cosine of at least
    ``min_cosine`` with the word's vector, nearest first. Nothing for an embedder that is not
    a static model of word rows (``_vocabulary``)."""
    vocab = _vocabulary(embedder)
    if vocab is None or not words:
        return {}
    vecs = np.vstack([embedder.encode([w])[0] for w in words])
    rough = vocab.lead @ np.ascontiguousarray(vecs[:, :LEAD].T)  # (vocabulary, words)
    keep = min(SHORTLIST, len(vocab.words) - 1)
    shortlists = np.argpartition(-rough, keep, axis=0)[:keep]
    out: dict[str, list[str]] = {}
    for j, word in enumerate(words):
        if not vecs[j].any():
            continue
        short = np.sort(shortlists[:, j])
        rows = vocab.rows[short].astype(np.float32)
        exact = rows @ vecs[j] / (np.linalg.norm(rows, axis=1) + 1e-9)
        order = np.argsort(-exact, kind="stable")  # (ties: the lower row first)
        found = [vocab.words[short[i]] for i in order if exact[i] >= min_cosine]
        out[word] = [w for w in found if w != word][:k]
    return out


def _vocabulary(embedder: Embedder) -> Vocabulary | None:
    """The vocabulary of a static model whose rows are its tokens' vectors as they are (no
    token mapping); None for any other embedder."""
    model = getattr(embedder, "model", None)
    if model is None or not hasattr(model, "embedding") or getattr(model, "token_mapping", None) is not None:
        return None
    return _read_vocabulary(model)


@lru_cache(maxsize=2)
def _read_vocabulary(model: object) -> Vocabulary | None:
    """The model's whole words of three letters or more and their rows, by token id. Only
    a WordPiece vocabulary (the English model's) gives words: the multilingual model's
    SentencePiece pieces are mostly fragments (its nearest to "hoops" are "hoop", "hopp",
    "hope")."""
    tokenizer = model.tokenizer  # type: ignore[attr-defined]
    if type(tokenizer.model).__name__ != "WordPiece":
        return None
    embedding = model.embedding  # type: ignore[attr-defined]
    vocab = tokenizer.get_vocab()
    # A word's later pieces ("##ing") are not words: isalpha() leaves them out.
    words = [t for t, i in vocab.items() if len(t) >= 3 and t.isalpha() and i < len(embedding)]
    if not words:
        return None
    ids = np.array([vocab[t] for t in words])
    order = np.argsort(ids, kind="stable")
    rows = embedding[ids[order]]
    norms = np.sqrt(np.einsum("ij,ij->i", rows, rows, dtype=np.float32)) + 1e-9
    lead = np.ascontiguousarray(rows[:, :LEAD].astype(np.float32) / norms[:, None])
    return Vocabulary(tuple(words[i].lower() for i in order), rows, lead)
