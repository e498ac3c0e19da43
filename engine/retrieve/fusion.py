"""One way to fuse ranked routes into one score per candidate (docs/DESIGN.md, "Search").
Search adds the cosine as it is and BM25 relative to its best hit; recall adds the same
and a small graph bonus relative to its best. Each is a ``RouteHits``: its hits best
first, how their scores are normalised, and its weight."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Norm = Literal["rank", "max", "raw"]


@dataclass(frozen=True)
class RouteHits:
    """A route's hits, best first, as (candidate, score).

    ``norm``: "rank" scores a hit 1 / (rrf_k + rank), whatever its own score (routes whose
    scores are not comparable); "max" divides by the route's best score, so its best hit
    is 1.0; "raw" takes the score as it is (a cosine is already on a common scale)."""

    hits: Sequence[tuple[str, float]]
    norm: Norm = "raw"
    weight: float = 1.0
    rrf_k: int = 60


def fuse(routes: Sequence[RouteHits]) -> dict[str, float]:
    """Σ weight × normalised score over the routes a candidate appears in. Candidates come
    in the order first met (routes in order, hits in order): callers that sort stably
    break ties by it."""
    out: dict[str, float] = {}
    for route in routes:
        top = max((s for _, s in route.hits), default=0.0) if route.norm == "max" else 0.0
        for rank, (key, score) in enumerate(route.hits, 1):
            if route.norm == "rank":
                value = route.weight * (1.0 / (route.rrf_k + rank))
            elif route.norm == "max":
                value = route.weight * score / top if top else 0.0
            else:
                value = route.weight * score
            out[key] = out.get(key, 0.0) + value
    return out
