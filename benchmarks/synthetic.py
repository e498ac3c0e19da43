"""A synthetic vault generator for benchmarks and big-vault tests.

Notes are spread over all built-in types (events in dated folders); links are typed and
weighted at random between them. Deterministic for a given seed.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine import Vault  # noqa: E402
from engine.links import LinkType  # noqa: E402

WORDS = (
    "atlas berth crane dock ferry glaze harbour kiln ledger market noodle orbit pottery quay rail "
    "schedule tea tide vessel wharf yard zinc budget deploy review meeting lunch train garden"
).split()


def sentence(rng: random.Random, n: int = 12) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def note_fields(rng: random.Random, i: int) -> tuple[str, dict]:
    body = "\n".join(sentence(rng) for _ in range(rng.randint(2, 6)))
    kind = i % 10
    if kind < 4:
        day = 1 + i % 28
        return "event", {"event_name": f"Event {i}", "date": f"2026-{1 + i % 12:02d}-{day:02d}", "content": body}
    if kind < 7:
        return "entity", {"name": f"Entity {i}", "kind": rng.choice(["person", "place", "project"]), "content": body}
    if kind < 9:
        return "preference", {"topic": f"Topic {i}", "sentiment": rng.choice(["like", "dislike"]), "content": body}
    return "source", {"title": f"Source {i}", "kind": "document", "content": body}


def generate(root: Path, notes: int, links_per_note: float = 3.0, seed: int = 7) -> Vault:
    rng = random.Random(seed)
    vault = Vault.init(root, name=f"synthetic {notes}")
    uris = [vault.write_note(*note_fields(rng, i)).uri for i in range(notes)]
    for _ in range(int(notes * links_per_note)):
        a, b = rng.sample(uris, 2)
        vault.link(a, b, rng.choice(list(LinkType)), weight=round(rng.uniform(0.1, 1.0), 2))
    return vault
