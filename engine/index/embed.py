"""Embedders: text → L2-normalised float32 vectors. model2vec by default, loaded from a
folder shipped in the package (engine/models/), never downloaded at run time.

Two models are bundled (docs/DESIGN.md, "Search": the embedding model): the default, English
``minilm-l6-m2v-256``, and ``multilingual-e5-small-m2v-192`` (Latin, CJK, kana and Hangul
scripts), chosen with ``embedding.model: multilingual`` in memlink.yaml. The index records
the model's name, so a switch rebuilds it.

Text whose tokens are all unknown to the model embeds to an all-zero vector; callers
must not put such vectors in the vector index (``nonzero`` tells them apart).
"""

from __future__ import annotations

import json
import logging
import os
import re
import unicodedata
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from model2vec.model import StaticModel
    from tokenizers import Tokenizer

log = logging.getLogger(__name__)

BUNDLED_MODEL = "minilm-l6-m2v-256"  # the default
MULTILINGUAL_MODEL = "multilingual-e5-small-m2v-192"
# Names `embedding.model` may give for a bundled model, besides the folder names themselves.
BUNDLED_ALIASES = {"english": BUNDLED_MODEL, "multilingual": MULTILINGUAL_MODEL}
BUNDLED_MODELS = (BUNDLED_MODEL, MULTILINGUAL_MODEL)
# How much higher a bundled model's cosines run than the default's for text of the same
# relatedness, added to the gates that ask "is there a real match?" of raw cosines: recall's
# min_evidence and search's min_confident_similarity (search's min_vector_similarity noise
# floor is left alone: raising it cost English vector hits). The multilingual model inherits e5's narrow cosine range: on the
# sample vault an unrelated question's best note scores 0.58 on average (0.34 with the
# English model), and at the default gate recall answered 10 of 30 unrelated questions
# (benchmarks/multilingual.py; docs/DESIGN.md, "Search": the embedding model).
COSINE_SHIFT = {MULTILINGUAL_MODEL: 0.2}
# The scripts a bundled model was trained on, where it is not all of Unicode's (the first
# word of a letter's Unicode name). A question written mostly in another script is not
# embedded: the English model's vectors of Chinese text are noise that outranks the
# keyword hits (benchmarks/multilingual.py; docs/DESIGN.md, "Search": the embedding model).
SCRIPTS = {BUNDLED_MODEL: frozenset({"LATIN"})}


class Embedder(Protocol):
    name: str
    dims: int

    def encode(self, texts: list[str]) -> np.ndarray:
        """(len(texts), dims) float32, rows L2-normalised or all zero."""


def cosine_shift(embedder: Embedder) -> float:
    """The embedder's ``COSINE_SHIFT`` (0 for the default model and any other)."""
    return float(getattr(embedder, "cosine_shift", 0.0))


def reads(embedder: Embedder, text: str) -> bool:
    """Whether the model reads ``text``: at least half its letters are in a script it was
    trained on (``SCRIPTS``; a model not listed reads every script)."""
    return _in_scripts(text, getattr(embedder, "scripts", None))


def _in_scripts(text: str, scripts: frozenset[str] | None) -> bool:
    if scripts is None or text.isascii():
        return True
    letters = [c for c in unicodedata.normalize("NFKC", text) if c.isalpha()]  # (NFKC: fullwidth Latin is Latin)
    return 2 * sum(c.isascii() or unicodedata.name(c, "").partition(" ")[0] in scripts for c in letters) >= len(letters)


def model_for(texts: list[str]) -> str | None:
    """The bundled model for a vault whose text these are (messages, say), when its
    settings name none: the multilingual one when the default does not read most of them
    (at most 400, evenly spaced, are looked at; one with no letter has no say), else None
    (the default)."""
    step = -(-len(texts) // 400) or 1
    sample = [t for t in texts[::step] if any(c.isalpha() for c in t)]
    unread = sum(not _in_scripts(t, SCRIPTS[BUNDLED_MODEL]) for t in sample)
    return "multilingual" if 2 * unread > len(sample) else None


def query_vector(embedder: Embedder, text: str) -> np.ndarray:
    """A question's vector; all zero (no vector hit, no cosine) when the model does not
    read it (``reads``)."""
    if not reads(embedder, text):
        return np.zeros(embedder.dims, dtype=np.float32)
    return embedder.encode([text])[0]


def normalise(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    out = np.zeros_like(matrix)
    np.divide(matrix, norms, out=out, where=norms > 1e-8)
    return out


def nonzero(matrix: np.ndarray) -> np.ndarray:
    """Boolean mask of rows that carry meaning (not all-zero)."""
    return np.linalg.norm(matrix, axis=1) > 1e-6


def load_static_model(source: str | Path) -> StaticModel:
    """A model2vec StaticModel. A local folder in model2vec's own layout is read directly
    (safetensors + tokenizers into StaticModel), as ``from_pretrained`` does for it minus
    the model-card parsing, which imports huggingface_hub and costs half a second on
    every CLI start; anything else (a hub id in the local cache, another layout) goes
    through ``from_pretrained``."""
    folder = Path(source)
    files = [folder / n for n in ("model.safetensors", "tokenizer.json", "config.json")]
    if not all(f.is_file() for f in files):
        from model2vec import StaticModel  # (the package's whole import: only for a model of another layout)

        return StaticModel.from_pretrained(str(source))
    # model2vec's model module alone, safetensors and tokenizers: what loading a bundled
    # model needs, imported when a model is loaded (not by every module that embeds nothing).
    from model2vec.model import StaticModel
    from safetensors import safe_open
    from tokenizers import Tokenizer

    with safe_open(str(files[0]), framework="numpy") as tensors:
        names = set(tensors.keys())
        vectors = tensors.get_tensor("embeddings")
        weights = tensors.get_tensor("weights") if "weights" in names else None
        mapping = tensors.get_tensor("mapping") if "mapping" in names else None
    config = json.loads(files[2].read_text(encoding="utf-8"))
    tokenizer = Tokenizer.from_file(str(files[1]))
    kwargs = dict(vectors=vectors, config=config, normalize=config.get("normalize", False), weights=weights,
                  token_mapping=mapping, max_length=config.get("max_length", 512))
    from model2vec import __version__ as m2v_version  # (model2vec is imported by now: see above)

    if m2v_version in FAST_INIT_VERSIONS:
        return _static_model(StaticModel, tokenizer, files[1], **kwargs)
    return StaticModel(tokenizer=tokenizer, **kwargs)


# model2vec versions whose StaticModel.__init__ ``_static_model`` reproduces, and whose
# ``encode`` of one text ``Model2VecEmbedder._one`` does (tests compare them on both
# bundled models); any other version takes the library's own ways.
FAST_INIT_VERSIONS = {"0.10.0"}
# What the tokenizers library's ``enable_truncation(max_length)`` sets (model2vec's
# ``encode`` calls it): a tokenizer that truncates otherwise takes ``encode``.
_TRUNCATION = {"stride": 0, "strategy": "longest_first", "direction": "right"}


def _static_model(cls: type[StaticModel], tokenizer: Tokenizer, tokenizer_file: Path, *, vectors: np.ndarray,
                  config: dict, normalize: bool, weights: np.ndarray | None, token_mapping: np.ndarray | None,
                  max_length: int | None) -> StaticModel:
    """What ``StaticModel.__init__`` (model2vec 0.10) makes, without its costs that a
    tokenizer just read from its file does not need: a deep copy of the tokenizer (its
    JSON written and parsed again) and, for a Unigram vocabulary, one more JSON dump and
    parse to find the unknown token — 0.6 s of a CLI start with the 100k-token
    multilingual model."""
    vocab = tokenizer.get_vocab()
    tokens = [""] * len(vocab)
    for token, i in vocab.items():
        tokens[i] = token
    if token_mapping is None and len(vectors) != len(tokens):
        raise ValueError(f"Number of tokens ({len(tokens)}) does not match number of vectors ({len(vectors)}).")
    model = cls.__new__(cls)
    model.tokens = tuple(tokens)
    model.embedding = vectors
    model.weights = weights
    model.token_mapping = token_mapping
    padding = tokenizer.padding
    if padding is not None:  # no padding, keeping the pad token
        tokenizer.enable_padding(pad_id=padding["pad_id"], pad_token=padding["pad_token"],
                                 pad_type_id=padding["pad_type_id"], length=0)
    model.tokenizer = tokenizer
    model.unk_token_id = _unk_token_id(tokenizer, tokenizer_file)
    model.median_token_length = int(np.median([len(t) for t in tokens]))
    model.config = {**config}
    model.base_model_name = None
    model.language = None
    model.max_length = max_length
    model.normalize = normalize
    return model


def _unk_token_id(tokenizer: Tokenizer, tokenizer_file: Path) -> int | None:
    unk = getattr(tokenizer.model, "unk_token", None)
    if hasattr(tokenizer.model, "unk_token"):  # WordPiece, BPE, WordLevel
        return None if unk is None else tokenizer.token_to_id(unk)
    # Unigram: the model section's unk_id (added tokens carry no such key).
    found = re.search(r'"unk_id"\s*:\s*(\d+|null)', tokenizer_file.read_text(encoding="utf-8"))
    return int(found.group(1)) if found and found.group(1) != "null" else None


class Model2VecEmbedder:
    def __init__(self, source: str | Path, name: str | None = None):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for the network
        self.model = load_static_model(source)
        self.name = name or str(source)
        self.dims = int(self.model.dim)
        self.cosine_shift = COSINE_SHIFT.get(self.name, 0.0)
        self.scripts = SCRIPTS.get(self.name)
        from model2vec import __version__ as m2v_version  # (imported by load_static_model)

        self._known_version = m2v_version in FAST_INIT_VERSIONS  # (_plain)

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dims), dtype=np.float32)
        if len(texts) == 1 and self._plain():
            return normalise(self._one(texts[0]))
        return normalise(self.model.encode(list(texts), show_progress_bar=False))

    def _plain(self) -> bool:
        """A model whose sentence vector is the plain mean of its tokens' rows (no token
        mapping, no weights), its tokenizer cutting at the model's max length as
        ``StaticModel.encode`` sets it, in a model2vec version whose ``encode`` ``_one``
        follows (FAST_INIT_VERSIONS: the versions checked, as for the fast load)."""
        m = self.model
        return (self._known_version and m.token_mapping is None and m.weights is None
                and m.max_length is not None and m.tokenizer.truncation == _TRUNCATION | {"max_length": m.max_length})

    def _one(self, text: str) -> np.ndarray:
        """``StaticModel.encode([text])`` for a plain model, step by step as it does it,
        without its batching and progress machinery: a search embeds one question, and
        that machinery cost as much as the embedding (tests/test_recall.py checks the two
        agree to the bit)."""
        m = self.model
        assert m.max_length is not None  # (_plain)
        ids = m.tokenize([text[: m.max_length * m.median_token_length]])[0]
        dtype = np.dtype(np.float32) if m.embedding.dtype == np.int8 else m.embedding.dtype
        out = np.zeros((1, m.dim), dtype=dtype)
        if ids:
            out[[0]] = m.embedding[np.array([ids], dtype=np.int64)].mean(axis=1)
        if m.normalize:
            out32 = out.astype(np.float32)
            return (out32 / (np.linalg.norm(out32, axis=1, keepdims=True) + 1e-32)).astype(out.dtype)
        return out


def bundled_model_path(name: str = BUNDLED_MODEL) -> Path:
    return Path(str(resources.files("engine.models") / name))


def bundled_name(configured: str) -> str | None:
    """The bundled model a configured name means (an alias such as ``multilingual``, or a
    bundled folder's name), else None."""
    key = configured.strip()
    if key.lower() in BUNDLED_ALIASES:
        return BUNDLED_ALIASES[key.lower()]
    return key if key in BUNDLED_MODELS else None


@dataclass
class EmbedderChoice:
    embedder: Embedder
    notice: str | None  # set when the configured model could not be used


def load_embedder(configured: str | None) -> EmbedderChoice:
    """The configured model2vec model (a bundled one by name or alias, a folder, or a hub id
    in the local cache), else the default bundled one — with a notice saying why."""
    if configured:
        try:
            bundled = bundled_name(configured)
            if bundled is not None:
                return EmbedderChoice(Model2VecEmbedder(bundled_model_path(bundled), name=bundled), None)
            return EmbedderChoice(Model2VecEmbedder(configured, name=configured), None)
        except Exception as exc:  # any load failure → fall back, but say so
            reason = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}" if str(exc) else type(exc).__name__
            notice = f"embedding model {configured!r} could not be loaded ({reason}); using the bundled {BUNDLED_MODEL}"
            log.warning(notice)
            return EmbedderChoice(Model2VecEmbedder(bundled_model_path(), name=BUNDLED_MODEL), notice)
    return EmbedderChoice(Model2VecEmbedder(bundled_model_path(), name=BUNDLED_MODEL), None)
