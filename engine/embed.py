"""Embedders: text → L2-normalised float32 vectors. model2vec by default, loaded from a
folder shipped in the package (engine/models/), never downloaded at run time.

Two models are bundled (docs/DESIGN.md, "Embedding model"): the default, English
``minilm-l6-m2v-256``, and ``multilingual-e5-small-m2v-256`` (Latin, CJK, kana and Hangul
scripts), chosen with ``embedding.model: multilingual`` in memlink.yaml. The index records
the model's name, so a switch rebuilds it.

Text whose tokens are all unknown to the model embeds to an all-zero vector; callers
must not put such vectors in the vector index (``nonzero`` tells them apart).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from model2vec.model import StaticModel

log = logging.getLogger(__name__)

BUNDLED_MODEL = "minilm-l6-m2v-256"  # the default
MULTILINGUAL_MODEL = "multilingual-e5-small-m2v-256"
# Names `embedding.model` may give for a bundled model, besides the folder names themselves.
BUNDLED_ALIASES = {"english": BUNDLED_MODEL, "multilingual": MULTILINGUAL_MODEL}
BUNDLED_MODELS = (BUNDLED_MODEL, MULTILINGUAL_MODEL)
# How much higher a bundled model's cosines run than the default's for text of the same
# relatedness, added to the gates that ask "is there a real match?" of raw cosines: recall's
# min_evidence and search's min_confident_similarity (search's min_vector_similarity noise
# floor is left alone: raising it cost English vector hits). The multilingual model inherits e5's narrow cosine range: on the
# sample vault an unrelated question's best note scores 0.58 on average (0.34 with the
# English model), and at the default gate recall answered 10 of 30 unrelated questions
# (benchmarks/multilingual.py; docs/DESIGN.md, "Embedding model").
COSINE_SHIFT = {MULTILINGUAL_MODEL: 0.2}


class Embedder(Protocol):
    name: str
    dims: int

    def encode(self, texts: list[str]) -> np.ndarray:
        """(len(texts), dims) float32, rows L2-normalised or all zero."""


def cosine_shift(embedder: Embedder) -> float:
    """The embedder's ``COSINE_SHIFT`` (0 for the default model and any other)."""
    return float(getattr(embedder, "cosine_shift", 0.0))


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
        from model2vec import StaticModel

        return StaticModel.from_pretrained(str(source))
    import json

    from model2vec.model import StaticModel
    from safetensors import safe_open
    from tokenizers import Tokenizer

    with safe_open(str(files[0]), framework="numpy") as tensors:
        names = set(tensors.keys())
        vectors = tensors.get_tensor("embeddings")
        weights = tensors.get_tensor("weights") if "weights" in names else None
        mapping = tensors.get_tensor("mapping") if "mapping" in names else None
    config = json.loads(files[2].read_text(encoding="utf-8"))
    return StaticModel(vectors=vectors, tokenizer=Tokenizer.from_file(str(files[1])), config=config,
                       normalize=config.get("normalize", False), weights=weights, token_mapping=mapping,
                       max_length=config.get("max_length", 512))


class Model2VecEmbedder:
    def __init__(self, source: str | Path, name: str | None = None):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for the network
        self.model = load_static_model(source)
        self.name = name or str(source)
        self.dims = int(self.model.dim)
        self.cosine_shift = COSINE_SHIFT.get(self.name, 0.0)

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dims), dtype=np.float32)
        return normalise(self.model.encode(list(texts), show_progress_bar=False))


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
