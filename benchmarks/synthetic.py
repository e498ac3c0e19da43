"""Synthetic vaults for benchmarks: N notes of realistic-looking text over all built-in
types, with a skewed (preferential-attachment) link-degree distribution and all six link
types. Files are written directly with the engine's own serialisers (no fsync, no
journal), each note as memlink writes a new one (its fields' view between the view
markers): the result is a valid vault, produced fast enough for N = 100k. The vault's
LLM provider is the zero-LLM rules one (no Ollama is asked).

A variant gives a share of the notes names that begin with the same word (``shared`` =
0.4, ``first_word`` = "Meeting": 40k of 100k notes called "Meeting …"), the case where
one word of a question begins thousands of names.

``generate_chat`` writes a long generated conversation (JSONL for `memlink import-chat`)
with questions whose answer is a known turn.

    from synthetic import generate_fast
    generate_fast(Path("/tmp/v"), 10_000)
    generate_fast(Path("/tmp/m"), 10_000, shared=0.4)

    .venv/bin/python benchmarks/synthetic.py /tmp/v --notes 10000 [--shared 0.4] [--first-word Meeting]
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import re
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.index.embed import bundled_model_path  # noqa: E402
from engine.model.config import CONFIG_FILE, LLMConfig, VaultConfig, dump_config  # noqa: E402
from engine.model.links import SIDECAR, LinkType, Sidecar, StoredLink  # noqa: E402
from engine.model.notes import Note, new_body, render_note_body, serialize_note  # noqa: E402
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


def note_fields(text: TextMaker, i: int, topic: int, first_word: str = "") -> tuple[str, dict]:
    """A note's type and fields; its name begins with ``first_word`` when one is given."""
    kind = i % 10
    body = text.body(topic)
    title = text.title(topic, i)
    if first_word:
        title = f"{first_word} {title}"
    if kind < 4:
        return "event", {"event_name": title, "date": f"202{4 + i % 3}-{1 + i % 12:02d}-{1 + i % 28:02d}", "content": body}
    if kind < 7:
        return "entity", {"name": title, "kind": text.rng.choice(["person", "place", "project", "organisation"]), "content": body}
    if kind < 9:
        return "preference", {"topic": title, "sentiment": text.rng.choice(["like", "dislike"]), "content": body}
    return "source", {"title": title, "kind": "document", "content": body}


def generate_fast(root: Path, notes: int, links_per_note: float = 3.0, seed: int = 7, *, shared: float = 0.0,
                  first_word: str = "Meeting") -> dict:
    """Write a vault of ``notes`` notes; returns {"uris", "topics", "links", "text",
    "shared"}. ``shared``: the share of the notes whose name begins with ``first_word``
    (picked by a generator of their own: the rest of the vault is the same as without)."""
    rng = random.Random(seed)
    text = TextMaker(rng)
    types = TypeRegistry.builtin()
    root.mkdir(parents=True)
    config = VaultConfig(name=f"synthetic {notes}", llm=LLMConfig(provider="rules"))
    (root / CONFIG_FILE).write_text(dump_config(config))
    same = set(random.Random(seed + 1).sample(range(notes), round(notes * shared))) if shared > 0 else set()
    uris, topics = [], []
    stamp = "2026-01-01T00:00:00+00:00"
    for i in range(notes):
        topic = rng.randrange(len(text.topics))
        mtype, fields = note_fields(text, i, topic, first_word if i in same else "")
        schema = types.get(mtype)
        fields = schema.validate_fields(fields, complete=True)
        uri = schema.note_uri(fields)
        note = Note(uri, mtype, fields, stamp, stamp, new_body(render_note_body(schema, fields, stamp, stamp)))
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
    return {"uris": uris, "topics": topics, "links": len(seen), "text": text, "shared": sorted(uris[i] for i in same)}


PEOPLE = ["Astrid Holm", "Bram Visser", "Chen Wei", "Dara Okafor", "Emil Novak", "Farah Aziz", "Gus Moreno", "Hana Sato"]


def generate_chat(path: Path, turns: int, *, per_session: int = 100, seed: int = 5) -> list[dict]:
    """Write a generated conversation of ``turns`` turns (a user message and an answer
    each, in sessions of ``per_session`` turns) as JSONL for `memlink import-chat`. Every
    50th turn states who handles something; returns a question about each such turn:
    {"query", "expected": [[question id, answer id]]}."""
    rng = random.Random(seed)
    text = TextMaker(rng)
    lines, questions = [], []
    for i in range(turns):
        q_id, a_id = f"chat-{2 * i:06d}", f"chat-{2 * i + 1:06d}"
        if i % 50 == 7:
            person, thing = rng.choice(PEOPLE), " ".join(rng.sample(text.topics[rng.randrange(200)], 2))
            q = f"Note that {person} is handling the {thing} for the {rng.choice(['harbour', 'studio', 'garden'])} project."
            a = f"Noted: {person} handles the {thing}."
            questions.append({"query": f"who handles the {thing}", "expected": [[q_id, a_id]]})
        else:
            q = text.sentence(rng.randrange(200), rng.randint(8, 16))
            a = text.sentence(rng.randrange(200), rng.randint(6, 12))
        ts = f"2026-{1 + i * 12 // turns:02d}-01T10:00:00Z"
        session = f"chat-{i // per_session:04d}"
        lines.append(json.dumps({"session": session, "id": q_id, "role": "user", "content": q, "ts": ts}))
        lines.append(json.dumps({"session": session, "id": a_id, "role": "assistant", "content": a, "ts": ts}))
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return questions


def main() -> None:
    ap = argparse.ArgumentParser(description="Write a synthetic vault (a new folder).")
    ap.add_argument("root", type=Path)
    ap.add_argument("--notes", type=int, default=1000)
    ap.add_argument("--links-per-note", type=float, default=3.0)
    ap.add_argument("--shared", type=float, default=0.0, help="share of the notes whose name begins with --first-word")
    ap.add_argument("--first-word", default="Meeting")
    args = ap.parse_args()
    meta = generate_fast(args.root, args.notes, args.links_per_note, shared=args.shared, first_word=args.first_word)
    print(f"{args.root}: {args.notes} notes, {meta['links']} links, {len(meta['shared'])} named {args.first_word!r} …")


if __name__ == "__main__":
    main()
