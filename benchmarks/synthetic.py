"""Synthetic vaults for benchmarks: N notes of realistic-looking text over all built-in
types, with a skewed (preferential-attachment) link-degree distribution and all six link
types. Files are written directly with the engine's own serialisers (no fsync, no
journal): the result is a valid vault, produced fast enough for N = 100k.

    from synthetic import generate_fast
    generate_fast(Path("/tmp/v"), 10_000)
"""

from __future__ import annotations

import itertools
import json
import random
import re
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine import Vault  # noqa: E402
from engine.index.embed import bundled_model_path  # noqa: E402
from engine.model.config import CONFIG_FILE, VaultConfig, dump_config  # noqa: E402
from engine.model.links import SIDECAR, LinkType, Sidecar, StoredLink  # noqa: E402
from engine.model.notes import Note, render_note_body, serialize_note  # noqa: E402
from engine.model.schema import TypeRegistry  # noqa: E402
from engine.model.uris import uri_dir  # noqa: E402

LINK_MIX = [  # how often each type occurs (related_to dominates, as in real vaults)
    (LinkType.RELATED_TO, 40), (LinkType.BELONGS_TO, 25), (LinkType.CAUSED_BY, 10),
    (LinkType.DERIVED_FROM, 10), (LinkType.EVOLVED_FROM, 8), (LinkType.CONTRADICTS, 7),
]


def vocabulary() -> list[str]:
    """Real English words: the whole-word entries of the bundled model's vocabulary, in
    vocabulary order (roughly most frequent first, as in the WordPiece training corpus)."""
    vocab = json.loads((bundled_model_path() / "tokenizer.json").read_text())["model"]["vocab"]
    return sorted((w for w in vocab if re.fullmatch(r"[a-z]{2,12}", w)), key=vocab.get)


class TextMaker:
    def __init__(self, rng: random.Random, topics: int = 200):
        words = vocabulary()
        # Frequent words are frequent (Zipf over vocabulary order); each topic draws on
        # its own set of rarer content words, as real notes on one subject do.
        self.common = words[:1500]
        rest = words[1500:]
        rng.shuffle(rest)
        self.topics = [rest[i * 40 : (i + 1) * 40] for i in range(topics)]
        self.rng = rng
        # Zipf-like weights: a few words are very frequent, most are rare.
        self.common_cum = list(itertools.accumulate(1.0 / (i + 1) for i in range(len(self.common))))

    def sentence(self, topic: int, n: int) -> str:
        r = self.rng
        topic_words = self.topics[topic]
        common = r.choices(self.common, cum_weights=self.common_cum, k=n)
        picks = [r.choice(topic_words) if r.random() < 0.45 else common[j] for j in range(n)]
        return " ".join(picks).capitalize() + "."

    def body(self, topic: int) -> str:
        return "\n".join(self.sentence(topic, self.rng.randint(8, 18)) for _ in range(self.rng.randint(2, 7)))

    def title(self, topic: int, i: int) -> str:
        return " ".join(self.rng.choice(self.topics[topic]) for _ in range(2)).title() + f" {i}"


def note_fields(text: TextMaker, i: int, topic: int) -> tuple[str, dict]:
    kind = i % 10
    body = text.body(topic)
    title = text.title(topic, i)
    if kind < 4:
        return "event", {"event_name": title, "date": f"202{4 + i % 3}-{1 + i % 12:02d}-{1 + i % 28:02d}", "content": body}
    if kind < 7:
        return "entity", {"name": title, "kind": text.rng.choice(["person", "place", "project", "organisation"]), "content": body}
    if kind < 9:
        return "preference", {"topic": title, "sentiment": text.rng.choice(["like", "dislike"]), "content": body}
    return "source", {"title": title, "kind": "document", "content": body}


def generate_fast(root: Path, notes: int, links_per_note: float = 3.0, seed: int = 7) -> dict:
    """Write a vault of ``notes`` notes; returns {"uris", "topics", "links"}."""
    rng = random.Random(seed)
    text = TextMaker(rng)
    types = TypeRegistry.builtin()
    root.mkdir(parents=True)
    (root / CONFIG_FILE).write_text(dump_config(VaultConfig(name=f"synthetic {notes}")))
    uris, topics = [], []
    stamp = "2026-01-01T00:00:00+00:00"
    for i in range(notes):
        topic = rng.randrange(len(text.topics))
        mtype, fields = note_fields(text, i, topic)
        schema = types.get(mtype)
        fields = schema.validate_fields(fields, complete=True)
        uri = schema.note_uri(fields)
        note = Note(uri, mtype, fields, stamp, stamp, render_note_body(schema, fields, stamp, stamp))
        path = root / uri
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(serialize_note(note, schema), encoding="utf-8")
        uris.append(uri)
        topics.append(topic)
    # Preferential attachment: targets are picked in proportion to (1 + links so far),
    # mostly within the same topic, giving a few hubs and a long tail.
    by_topic = defaultdict(list)
    for n, t in enumerate(topics):
        by_topic[t].append(n)
    targets: list[int] = list(range(notes))
    cars: dict[str, Sidecar] = defaultdict(Sidecar)
    seen = set()
    kinds, weights = zip(*LINK_MIX, strict=True)
    for k in range(int(notes * links_per_note)):
        a = rng.randrange(notes)
        b = rng.choice(targets) if rng.random() < 0.5 else rng.choice(by_topic[topics[a]])
        if a == b or (a, b) in seen:
            continue
        seen.add((a, b))
        targets.append(b)
        link = StoredLink(id=f"link_{k:08x}", from_uri=uris[a], to_uri=uris[b], direction="links",
                          link_type=rng.choices(kinds, weights)[0], weight=round(rng.uniform(0.2, 1.0), 2),
                          created_at=stamp)
        cars[uri_dir(uris[a])].entries.append(link)
        cars[uri_dir(uris[b])].entries.append(link.as_direction("backlinks"))
    for folder, car in cars.items():
        (root / folder / SIDECAR).write_text(car.dump(), encoding="utf-8")
    return {"uris": uris, "topics": topics, "links": len(seen), "text": text}


def generate(root: Path, notes: int, links_per_note: float = 3.0, seed: int = 7) -> Vault:
    """A small vault written through the engine API (atomic writes, journal, lock)."""
    rng = random.Random(seed)
    text = TextMaker(rng)
    vault = Vault.init(root, name=f"synthetic {notes}")
    uris = []
    for i in range(notes):
        mtype, fields = note_fields(text, i, rng.randrange(len(text.topics)))
        uris.append(vault.write_note(mtype, fields).uri)
    kinds, weights = zip(*LINK_MIX, strict=True)
    for _ in range(int(notes * links_per_note)):
        a, b = rng.sample(uris, 2)
        vault.link(a, b, rng.choices(kinds, weights)[0], weight=round(rng.uniform(0.2, 1.0), 2))
    return vault
