"""Communities of the turn term graph (docs/DESIGN.md, "Turn memory"): deterministic label propagation."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import networkx as nx


def label_propagation(g: nx.Graph) -> dict[str, str]:
    """Deterministic label propagation: nodes in sorted order, each takes the label most
    common among its neighbours (by edge weight), ties broken by the smallest label;
    at most as many rounds as nodes."""
    labels = {n: n for n in g.nodes}
    order = sorted(g.nodes)
    for _ in range(max(1, len(order))):
        changed = False
        for node in order:
            votes: dict[str, float] = defaultdict(float)
            for nb, data in g[node].items():
                votes[labels[nb]] += data.get("weight", 1.0)
            if not votes:
                continue
            best = max(votes.values())
            label = min(l for l, v in votes.items() if v == best)
            if label != labels[node] and (votes.get(labels[node], 0) < best or label < labels[node]):
                labels[node] = label
                changed = True
        if not changed:
            break
    return labels
