"""Recall quality on real long conversations: LoCoMo, by the method in
../shared/data/locomo-dev/README.md, with a plain BM25 baseline in the same run.

For each conversation: a fresh vault, the messages imported with `memlink import-chat`
(speaker_a → user, speaker_b → assistant, id = dia_id, ts = the session's date string,
image captions appended), the questions answered by `memlink recall --batch FILE --k K
--json` in one process each for K = 5 and 10, and any-evidence@K turns scored per
category. The baseline is BM25 (k1 1.2, b 0.75, lower-case alphanumeric tokens, a small
stop list) over single messages at 2K messages (a turn holds two).

Then, in this process on the same vaults: the memory context chat gives the model
(`engine.sessions.memory.memory_context`, with `chat.turns` = K and notes on as
configured; every chat session first saved to memory with the rules, so there are notes to
add), scored by its turn items the same way: notes added beside the turns must not push
evidence out; the ablation rows (each route alone and the
fusion with and without the graph), the evidence gate (how many of a set of questions
about things never discussed recall nothing, and how many real questions it silences),
and latency (per question, and one `memlink recall` process from a cold start).

Budgets in messages: `memlink recall --messages B` (the best turns and windows of turns
holding at most B messages) beside the strong baseline at B messages, B = 10 and 20; and
the conversations the recall knobs were tuned on (TUNED_ON) apart from the others.

With --paraphrases FILE (benchmarks/locomo_paraphrases.json): the questions of that file,
reworded to share few words with their evidence, in place of the dataset's, by split
("tune": looked at while tuning; "held-out" and "held-out-2", a second set written later:
never), memlink beside the strong baseline at the same message budgets.

    .venv/bin/python benchmarks/locomo.py ../shared/data/locomo-dev/locomo-dev.json [--limit N]
    .venv/bin/python benchmarks/locomo.py ../shared/data/realtalk-dev/realtalk-dev.json --speaker
    .venv/bin/python benchmarks/locomo.py ../shared/data/locomo-dev/locomo-dev.json --paraphrases benchmarks/locomo_paraphrases.json
    .venv/bin/python benchmarks/locomo.py benchmarks/zh_companion.json --unrelated benchmarks/zh_unrelated_questions.txt
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from engine import Vault  # noqa: E402
from engine.sessions.commit import commit_session  # noqa: E402
from engine.sessions.memory import memory_context  # noqa: E402
from engine.sessions.recall import RecallParams, TurnMemory  # noqa: E402

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
STOP = frozenset("a an and are as at be by for from has have i in is it of on or that the this to was were what when "
                 "where which who will with you did do does how".split())
UNRELATED = REPO / "benchmarks" / "unrelated_questions.txt"
# The conversations the recall knobs (RecallParams) were tuned on; the others were only measured.
TUNED_ON = frozenset({"conv-26", "conv-41", "conv-43", "realtalk-1", "realtalk-3", "realtalk-5"})
BUDGETS = (10, 20)  # message budgets: `memlink recall --messages B` beside the strong baseline at B messages
MEMLINK = [sys.executable, "-m", "memlink_tui"]


def transcript(sample: dict, speaker: bool = False) -> list[dict]:
    """The import-chat records; with ``speaker`` each carries its speaker's name as given
    (the REALTALK method)."""
    conv = sample["conversation"]
    records, n = [], 1
    while f"session_{n}" in conv:
        date = conv[f"session_{n}_date_time"]
        for m in conv[f"session_{n}"]:
            text = m["text"] + (f" [image: {m['blip_caption']}]" if m.get("blip_caption") else "")
            records.append({"session": f"{sample['sample_id']}-session_{n}", "id": m["dia_id"],
                            "role": "user" if m["speaker"] == conv["speaker_a"] else "assistant",
                            "content": text, "ts": date, **({"speaker": m["speaker"]} if speaker else {})})
        n += 1
    return records


def strong_docs(sample: dict) -> tuple[list[str], list[list[str]]]:
    """The strong baseline's documents: one a message, "speaker: text" + the session's date
    + the ±1 neighbouring messages of its session, stemmed (the README's method)."""
    from engine.model.text import tokenize

    conv = sample["conversation"]
    ids, docs, n = [], [], 1
    while f"session_{n}" in conv:
        said = [f"{m['speaker']}: {m['text']}" for m in conv[f"session_{n}"]]
        for i, m in enumerate(conv[f"session_{n}"]):
            ids.append(m["dia_id"])
            docs.append(tokenize(" ".join([*said[max(0, i - 1): i + 2], conv[f"session_{n}_date_time"]])))
        n += 1
    return ids, docs


def questions(sample: dict, paraphrases: list[dict] | None = None) -> list[dict]:
    """The sample's questions (whitespace collapsed); with ``paraphrases``, those of its
    questions reworded (each keeps its question's category and evidence), their split as
    the category."""
    if paraphrases is not None:
        return [dict(question=p["question"], evidence=p["evidence"], category=p["split"])
                for p in paraphrases if p["id"].split("#")[0] == sample["sample_id"]]
    return [dict(q, question=" ".join(str(q["question"]).split())) for q in sample["qa"]]


# -- the baseline ------------------------------------------------------------------------------
def bm25_tokens(text: str) -> list[str]:
    return [t for t in re.findall(r"[a-z0-9]+", text.lower()) if t not in STOP]


class BM25:
    def __init__(self, docs: list[list[str]], k1: float = 1.2, b: float = 0.75):
        self.tf = [Counter(d) for d in docs]
        self.len = [len(d) for d in docs]
        self.avg = sum(self.len) / max(1, len(docs))
        df = Counter(t for d in self.tf for t in d)
        self.idf = {t: math.log(1 + (len(docs) - n + 0.5) / (n + 0.5)) for t, n in df.items()}
        self.k1, self.b = k1, b

    def top(self, query: list[str], k: int) -> list[int]:
        scores = [0.0] * len(self.tf)
        for t in set(query):
            if t in self.idf:
                for i, tf in enumerate(self.tf):
                    f = tf.get(t)
                    if f:
                        scores[i] += self.idf[t] * f * (self.k1 + 1) / (f + self.k1 * (1 - self.b + self.b * self.len[i] / self.avg))
        return sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:k]


# -- scoring -----------------------------------------------------------------------------------
class Tally:
    def __init__(self):
        self.found, self.total = Counter(), Counter()

    def add(self, category: int, ok: bool) -> None:
        self.found[category] += ok
        self.total[category] += 1

    def overall(self) -> float:
        return sum(self.found.values()) / max(1, sum(self.total.values()))

    def row(self, categories: dict = CATEGORIES) -> list[str]:
        return [f"{self.overall():.3f}"] + [f"{self.found[c] / self.total[c]:.3f}" if self.total[c] else "-" for c in categories]


def shown(message: str, text: str) -> bool:
    """Whether a context item's text shows a message: a stretch of 30 characters of it
    (all of a shorter one)."""
    return any(message[i:i + 30] in text for i in range(0, max(1, len(message) - 29), 15))


def found(hits_sources: list[list[str]], evidence: list[str]) -> bool:
    ids = {s for sources in hits_sources for s in sources}
    return any(e in ids for e in evidence)


def memlink(*args: str, vault: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([*MEMLINK, "--vault", str(vault), *args], capture_output=True, text=True, env=env, check=True)


def build(sample: dict, root: Path, speaker: bool = False) -> tuple[Path, float]:
    vault = Vault.init(root / sample["sample_id"], name=sample["sample_id"])
    cfg = yaml.safe_load((vault.root / "memlink.yaml").read_text())
    cfg["llm"] = {"provider": "rules"}  # the zero-LLM rules provider, as the method says
    (vault.root / "memlink.yaml").write_text(yaml.safe_dump(cfg))
    vault.close()
    chat = root / f"{sample['sample_id']}.jsonl"
    chat.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in transcript(sample, speaker)))
    started = time.perf_counter()
    memlink("import-chat", str(chat), "--json", vault=vault.root)
    return vault.root, time.perf_counter() - started


def save_sessions(root: Path, sample: dict) -> int:
    """Save every chat session to memory (ctrl+s, `memlink commit`) with the rules, so the vault
    holds the memory notes a user's would and the memory context has notes to add. Returns
    how many notes the vault then holds."""
    vault = Vault.open(root)
    try:
        for session in dict.fromkeys(r["session"] for r in transcript(sample)):
            commit_session(vault, session)
        return sum(1 for _ in root.rglob("*.md"))
    finally:
        vault.close()


def configure(root: Path, **chat: int) -> None:
    """Set the vault's `chat:` settings in its memlink.yaml, as a user would."""
    cfg = yaml.safe_load((root / "memlink.yaml").read_text())
    cfg["chat"] = chat
    (root / "memlink.yaml").write_text(yaml.safe_dump(cfg))


def table(title: str, rows: list[tuple[str, Tally]], categories: dict = CATEGORIES) -> None:
    print(f"\n{title}\n")
    print("| system | all | " + " | ".join(categories.values()) + " |")
    print("|---|" + "---|" * (len(categories) + 1))
    for name, tally in rows:
        print(f"| {name} | " + " | ".join(tally.row(categories)) + " |")


NO_GATE = dict(min_evidence=-9.0, named_evidence=-9.0)
ABLATIONS = [
    ("keyword route only", RecallParams(vector=False, graph=False, meaning_weight=0.0)),
    ("vector route only", RecallParams(keyword=False, graph=False, meaning_weight=0.0)),
    ("keyword + vector", RecallParams(graph=False, meaning_weight=0.0)),
    ("keyword + vector, no own-text BM25 term", RecallParams(graph=False, own_weight=0.0, meaning_weight=0.0)),
    ("every route (the default)", RecallParams()),
    ("… keyword hits not weighed by their share of the question", RecallParams(coverage_power=0.0)),
    ("… cosine counted once (vector weight 1)", RecallParams(vector_weight=1.0)),
    ("… graph weight 0.5", RecallParams(graph_weight=0.5)),
    ("… without the near-words route", RecallParams(near_weight=0.0)),
    ("… without the words held in meaning", RecallParams(meaning_weight=0.0)),
    ("… no evidence gate", RecallParams(**NO_GATE)),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", type=Path, help="locomo-dev.json (or any file of that shape)")
    ap.add_argument("--limit", type=int, default=0, help="only the first N conversations")
    ap.add_argument("--speaker", action="store_true", help="pass each message's speaker name (REALTALK's method)")
    ap.add_argument("--paraphrases", type=Path, help="reworded questions (benchmarks/locomo_paraphrases.json) instead")
    ap.add_argument("--unrelated", type=Path, default=UNRELATED, help="questions about things never discussed, one a line")
    args = ap.parse_args()
    samples = json.loads(args.data.read_text(encoding="utf-8"))[: args.limit or None]
    reworded = json.loads(args.paraphrases.read_text(encoding="utf-8")) if args.paraphrases else None
    categories = ({"tune": "tune split", "held-out": "held-out split", "held-out-2": "second held-out split"}
                  if reworded is not None else CATEGORIES)
    unrelated = [l.strip() for l in args.unrelated.read_text(encoding="utf-8").splitlines() if l.strip() and not l.startswith("#")]
    memlink_at = {5: Tally(), 10: Tally()}
    baseline_at = {5: Tally(), 10: Tally()}
    strong_matched = {5: Tally(), 10: Tally()}  # the strong baseline at memlink's own message count
    strong_at = {5: Tally(), 10: Tally()}  # ... and at 2K messages
    budget = {5: [], 10: []}  # messages memlink's K turns held, per question
    within = {b: Tally() for b in BUDGETS}  # memlink recall --messages B
    strong_within = {b: Tally() for b in BUDGETS}  # the strong baseline at B messages
    split = {part: {"memlink": Tally(), "strong": Tally(), "memlink 10": Tally(), "strong 10": Tally()}
             for part in ("tuned on", "held out")}
    context_at = {5: Tally(), 10: Tally()}
    context_notes = {5: 0, 10: 0}  # contexts holding a note item beside the turns
    context_short = {5: 0, 10: 0}  # contexts with fewer turn items than recall returned
    ablation = {name: Tally() for name, _ in ABLATIONS}
    gated_real, silent_unrelated, seeded, latencies, imports, cold = 0, 0, 0, [], [], []
    n_questions = n_turns = n_notes = 0
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for sample in samples:
            qs = questions(sample, reworded)
            if not qs:
                continue
            vault_root, seconds = build(sample, root, args.speaker)
            imports.append(seconds)
            n_questions += len(qs)
            qfile = root / f"{sample['sample_id']}.txt"
            qfile.write_text("".join(q["question"] + "\n" for q in qs))
            recalled = {}
            for k in (5, 10):
                out = memlink("recall", "--batch", str(qfile), "--k", str(k), "--json", vault=vault_root)
                recalled[k] = [json.loads(l) for l in out.stdout.splitlines()]
                assert len(recalled[k]) == len(qs), "one JSON line per question, in order"
                for q, line in zip(qs, recalled[k], strict=True):
                    memlink_at[k].add(q["category"], found([h["sources"] for h in line["hits"]], q["evidence"]))
            ids, docs = strong_docs(sample)
            strong = BM25(docs)
            from engine.model.text import tokenize

            ranked_strong = [[ids[i] for i in strong.top(tokenize(q["question"]), 60)] for q in qs]
            part = split["tuned on" if sample["sample_id"] in TUNED_ON else "held out"]
            for b in BUDGETS:
                out = memlink("recall", "--batch", str(qfile), "--messages", str(b), "--json", vault=vault_root)
                lines = [json.loads(l) for l in out.stdout.splitlines()]
                for q, line, ranked in zip(qs, lines, ranked_strong, strict=True):
                    assert sum(len(h["sources"]) for h in line["hits"]) <= b
                    within[b].add(q["category"], found([h["sources"] for h in line["hits"]], q["evidence"]))
                    strong_within[b].add(q["category"], found([ranked[:b]], q["evidence"]))
                    if b == 10:
                        part["memlink 10"].add(q["category"], found([h["sources"] for h in line["hits"]], q["evidence"]))
                        part["strong 10"].add(q["category"], found([ranked[:b]], q["evidence"]))
            if reworded is None:
                n_notes += save_sessions(vault_root, sample)
                said = {r["id"]: r["content"] for r in transcript(sample)}
                for k in (5, 10):
                    configure(vault_root, turns=k)
                    vault = Vault.open(vault_root)
                    try:
                        for q, line in zip(qs, recalled[k], strict=True):
                            items = memory_context(vault, q["question"]).items
                            # A message counts where its text is shown: a turn cut to fit the budget
                            # holds only some of its messages.
                            turns = [[m for m in i.where.split(", ") if shown(said.get(m, ""), i.text)]
                                     for i in items if i.kind == "turn"]
                            context_at[k].add(q["category"], found(turns, q["evidence"]))
                            context_notes[k] += any(i.kind == "note" for i in items)
                            context_short[k] += len(turns) < len(line["hits"])
                    finally:
                        vault.close()
                configure(vault_root)
            messages = transcript(sample)
            bm25 = BM25([bm25_tokens(m["content"]) for m in messages])
            for q in qs:
                for k in (5, 10):
                    top = bm25.top(bm25_tokens(q["question"]), 2 * k)
                    baseline_at[k].add(q["category"], found([[messages[i]["id"]] for i in top], q["evidence"]))
            for k in (5, 10):
                for q, line, ranked in zip(qs, recalled[k], ranked_strong, strict=True):
                    held = sum(len(h["sources"]) for h in line["hits"])
                    budget[k].append(held)
                    strong_matched[k].add(q["category"], found([ranked[:held]], q["evidence"]))
                    strong_at[k].add(q["category"], found([ranked[: 2 * k]], q["evidence"]))
                    if k == 5:
                        part["memlink"].add(q["category"], found([h["sources"] for h in line["hits"]], q["evidence"]))
                        part["strong"].add(q["category"], found([ranked[:held]], q["evidence"]))
            vault = Vault.open(vault_root)
            try:
                for name, params in ABLATIONS:
                    memory = TurnMemory(vault, params=params)
                    for q in qs:
                        hits = memory.recall(q["question"], k=5)
                        ablation[name].add(q["category"], found([h.sources for h in hits], q["evidence"]))
                memory = TurnMemory(vault)
                n_turns += len(memory.turns)
                for q in qs:
                    started = time.perf_counter()
                    hits = memory.recall(q["question"], k=5)
                    latencies.append(time.perf_counter() - started)
                    gated_real += not hits
                    seeded += bool(memory.literal_terms(q["question"]))
                silent_unrelated += sum(1 for q in unrelated if not memory.recall(q, k=5))
            finally:
                vault.close()
            started = time.perf_counter()
            memlink("recall", qs[0]["question"], "--json", vault=vault_root)
            cold.append(time.perf_counter() - started)
    n = len(imports)
    what = f"{len(reworded)} reworded questions of" if reworded is not None else "their"
    print(f"{args.data.name}: {n} conversations, {what} {n_questions} questions, {n_turns} turns; zero-LLM rules provider")
    if reworded is None:
        table("any-evidence@K turns (memlink) and @2K messages (BM25 baseline), same run",
              [("memlink recall, K=5", memlink_at[5]), ("memory context, chat.turns=5, its turns", context_at[5]),
               ("BM25 over messages, 10 messages", baseline_at[5]),
               ("memlink recall, K=10", memlink_at[10]), ("memory context, chat.turns=10, its turns", context_at[10]),
               ("BM25 over messages, 20 messages", baseline_at[10])])
    table("the strong baseline (stemmed BM25 over speaker: text + date + ±1 messages) at the same message budget, same run",
          [row for b in BUDGETS for row in ((f"memlink recall --messages {b}", within[b]),
                                            (f"strong baseline, {b} messages", strong_within[b]))]
          + [row for k in (5, 10) for row in (
              (f"memlink recall, K={k}", memlink_at[k]),
              (f"strong baseline, memlink's message budget at K={k} (mean {statistics.mean(budget[k]):.1f})",
               strong_matched[k]))]
          + [(f"strong baseline, {2 * k} messages", strong_at[k]) for k in (5, 10)], categories)
    if reworded is None:
        print("\nTuned on / held out: the conversations the recall knobs were tuned on, and the others")
        for name, tallies in split.items():
            print(f"- {name}: memlink K=5 {tallies['memlink'].overall():.3f} vs strong at its budget "
                  f"{tallies['strong'].overall():.3f}; --messages 10 {tallies['memlink 10'].overall():.3f} vs "
                  f"{tallies['strong 10'].overall():.3f} ({sum(tallies['memlink'].total.values())} questions)")
        print(f"\nMemory context: every chat session saved to memory with the rules first ({n_notes} notes); "
              "notes on as configured (chat.notes, chat.context_tokens)")
        for k in (5, 10):
            print(f"Memory context at chat.turns={k}: {context_notes[k]}/{n_questions} hold a note beside the turns; "
                  f"{context_short[k]}/{n_questions} hold fewer turns than recall returned (chat.context_tokens)")
    table("Ablation: any-evidence@5 turns, by route", [(name, ablation[name]) for name, _ in ABLATIONS], categories)
    print(f"\nGraph route: {seeded}/{n_questions} questions name a term that seeds it")
    print(f"Evidence gate: {silent_unrelated}/{len(unrelated) * n} unrelated questions recall nothing; "
          f"{gated_real}/{n_questions} real questions recall nothing")
    lat = sorted(latencies)
    print(f"Latency: recall p50 {statistics.median(lat) * 1000:.1f} ms, p95 {lat[int(len(lat) * 0.95)] * 1000:.1f} ms "
          f"in process; one `memlink recall` process {statistics.median(cold):.2f} s wall (median); "
          f"import-chat {sum(imports):.1f} s for {n_turns} turns")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
