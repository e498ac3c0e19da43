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

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, TypeVar

import numpy as np

if TYPE_CHECKING:
    from ..index.embed import Embedder

K = TypeVar("K")  # what the texts are keyed by
LEAD = 48  # leading dimensions of the first pass
SHORTLIST = 200  # rows the first pass keeps per word


@dataclass(frozen=True)
class Vocabulary:
    words: tuple[str, ...]
    rows: np.ndarray  # the words' int8 or float rows, as the model holds them
    lead: np.ndarray  # float32, the leading dimensions of each row, scaled by the row's full norm
    norms: np.ndarray  # float32, each row's norm
    at: dict[str, int]  # word -> its place in ``words``


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


def held_in_meaning(embedder: Embedder, asked: dict[str, float], texts: dict[K, str],
                    min_cosine: float) -> dict[K, float]:
    """How much of the asked words' weight each text holds in meaning: Σ weight × the best
    cosine of the word with a word of the text (none below ``min_cosine``) / Σ weight. "Which
    cinema film" and "a movie at the theater" share no word, and hold each other's words
    in meaning. Word vectors are the model's rows: an asked word it has no row for is
    embedded, a text's word without one is left out (embedding the candidates' slang and
    typos per question cost more than the rest). Nothing for an embedder that is not a
    static model of word rows (``_vocabulary``)."""
    vocab = _vocabulary(embedder)
    total = sum(asked.values())
    if vocab is None or not total:
        return {}
    # (Words in the order they come, not a set's: the sums then add alike in every process.)
    at = vocab.at
    found = {key: ws for key, text in texts.items() if (ws := [w for w in dict.fromkeys(WORDS.findall(text.lower())) if w in at])}
    if not found:
        return {}
    column: dict[str, int] = {}
    flat = [column.setdefault(w, len(column)) for ws in found.values() for w in ws]
    starts = np.cumsum([0, *(len(ws) for ws in found.values())])[:-1]
    words = list(asked)
    sims = _word_vectors(embedder, vocab, words) @ _word_vectors(embedder, vocab, list(column)).T
    best = np.maximum.reduceat(sims[:, flat], starts, axis=1)  # (asked words, texts)
    weights = np.array([asked[w] for w in words], dtype=np.float32)
    held = weights @ np.where(best >= min_cosine, best, 0.0) / total
    return dict(zip(found, held.tolist(), strict=True))


def _word_vectors(embedder: Embedder, vocab: Vocabulary, words: list[str]) -> np.ndarray:
    """Unit vectors of words: the model's rows, or embedded when it has none."""
    at = np.array([vocab.at.get(w, -1) for w in words])
    known = at >= 0
    out = np.empty((len(words), vocab.rows.shape[1]), dtype=np.float32)
    out[known] = vocab.rows[at[known]].astype(np.float32) / vocab.norms[at[known], None]
    if not known.all():
        out[~known] = _unit(embedder.encode([w for w, k in zip(words, known, strict=True) if not k]))
    return out


WORDS = re.compile(r"[^\W\d_]{3,}")  # words of three letters or more (as ``_read_vocabulary`` keeps)


def _unit(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float32)
    return matrix / (np.linalg.norm(matrix, axis=1, keepdims=True) + 1e-9)


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
    ordered = tuple(words[i].lower() for i in order)
    return Vocabulary(ordered, rows, lead, norms, {w: i for i, w in enumerate(ordered)})
