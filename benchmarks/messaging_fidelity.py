"""The same conversations imported three ways recall the same: each conversation of a
LoCoMo-shaped file (LoCoMo, REALTALK) rendered as a WhatsApp Android export (a message a
line, dated by its session's date and time) and as a Telegram Desktop result.json,
imported with `memlink import-chat --me <speaker_a>`, beside the JSON Lines import
benchmarks/locomo.py makes with --speaker. For each question, `memlink recall --k 5`'s
hits in each vault (their messages named by dia_id again: the exports' ids are their own);
any-evidence@5 for each beside the strong baseline (locomo.py's) at the same message
budget (as many messages as that import's 5 turns held), every message an import left
out, and every question whose hits differ from the JSON Lines import's. A control, "jsonl by day": the JSON Lines import with
the exports' chat sessions (a calendar day) and time stamps (ISO), which the exports'
imports should match but for ties in rank.

    .venv/bin/python benchmarks/messaging_fidelity.py ../shared/data/realtalk-dev/realtalk-dev.json [--limit N]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import locomo  # noqa: E402

from engine import Vault  # noqa: E402
from engine.model.text import tokenize  # noqa: E402
from engine.sessions.log import read_events  # noqa: E402


def when(date: str) -> dt.datetime:
    """A session's date and time as LoCoMo writes it: "10:42 pm on 29 December, 2023"."""
    return dt.datetime.strptime(date, "%I:%M %p on %d %B, %Y")


def whatsapp(sample: dict) -> str:
    """The conversation as WhatsApp for Android exports it (month first, 12-hour clock)."""
    return "".join(f"{when(r['ts']):%m/%d/%y, %I:%M %p} - {r['speaker']}: {r['content']}\n"
                   for r in locomo.transcript(sample, speaker=True))


def telegram(sample: dict) -> dict:
    """The conversation as Telegram Desktop exports one chat."""
    conv = sample["conversation"]
    ids = {conv["speaker_a"]: "user1", conv["speaker_b"]: "user2"}
    return {"name": sample["sample_id"], "type": "personal_chat", "id": 1, "messages": [
        {"id": n, "type": "message", "date": when(r["ts"]).isoformat(), "from": r["speaker"],
         "from_id": ids[r["speaker"]], "text": r["content"]}
        for n, r in enumerate(locomo.transcript(sample, speaker=True), 1)]}


def build(sample: dict, root: Path, fmt: str) -> tuple[Path, dict[str, str]]:
    """A fresh vault holding the conversation imported as ``fmt`` ("jsonl": as locomo.py
    --speaker imports it), and its message ids → dia_ids (its messages in order)."""
    where = root / fmt
    where.mkdir(parents=True, exist_ok=True)
    if fmt == "jsonl":
        vault_root, _ = locomo.build(sample, where, speaker=True)
        return vault_root, {}
    if fmt == "jsonl by day":
        by_day = dict(sample, sample_id=f"{sample['sample_id']}-by-day")
        records = [dict(r, session=f"{sample['sample_id']}-{when(r['ts']).date()}", ts=when(r["ts"]).isoformat())
                   for r in locomo.transcript(sample, speaker=True)]
        original, locomo.transcript = locomo.transcript, lambda _sample, speaker=False: records
        try:
            vault_root, _ = locomo.build(by_day, where, speaker=True)
        finally:
            locomo.transcript = original
        return vault_root, {}
    vault = Vault.init(where / "vault", name=sample["sample_id"])
    cfg = yaml.safe_load((vault.root / "memlink.yaml").read_text())
    cfg["llm"] = {"provider": "rules"}  # as locomo.build: the zero-LLM rules provider
    (vault.root / "memlink.yaml").write_text(yaml.safe_dump(cfg))
    vault.close()
    if fmt == "whatsapp":
        chat = where / f"WhatsApp Chat with {sample['sample_id']}.txt"
        chat.write_text(whatsapp(sample), encoding="utf-8")
    else:
        chat = where / "result.json"
        chat.write_text(json.dumps(telegram(sample), ensure_ascii=False, indent=1), encoding="utf-8")
    locomo.memlink("import-chat", str(chat), "--me", sample["conversation"]["speaker_a"], "--json", vault=vault.root)
    vault = Vault.open(vault.root)
    try:
        events = [e for path in sorted((vault.root / "sessions").glob("*.jsonl")) for e in read_events(vault, path.stem)]
    finally:
        vault.close()
    ids: dict[str, str] = {}
    left = iter(events)
    event = next(left, None)
    for record in locomo.transcript(sample, speaker=True):  # the messages in order; an import leaves out only
        if event is not None and (event.content, event.speaker) == (record["content"].strip(), record["speaker"]):
            ids[event.key] = record["id"]
            event = next(left, None)
        else:  # ... what its app would not show as a message (WhatsApp: "This message was deleted.")
            print(f"{sample['sample_id']} {fmt}: {record['id']} left out: {record['content'][:60]!r}")
    assert event is None and len(ids) == len(events), (fmt, event)
    return vault.root, ids


def recall(root: Path, ids: dict[str, str], questions: list[dict], qfile: Path) -> list[list[list[str]]]:
    """Each question's hits at K = 5, as lists of dia_ids."""
    out = locomo.memlink("recall", "--batch", str(qfile), "--k", "5", "--json", vault=root)
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(lines) == len(questions)
    return [[[ids.get(s, s) for s in hit["sources"]] for hit in line["hits"]] for line in lines]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", type=Path, help="locomo-dev.json, realtalk-dev.json (or any file of that shape)")
    ap.add_argument("--limit", type=int, default=0, help="only the first N conversations")
    args = ap.parse_args()
    samples = json.loads(args.data.read_text(encoding="utf-8"))[: args.limit or None]
    formats = ("jsonl", "jsonl by day", "whatsapp", "telegram")
    found = {fmt: 0 for fmt in formats}
    strong = {fmt: 0 for fmt in formats}  # the strong baseline at that import's message budget
    same = {fmt: 0 for fmt in formats}
    as_by_day = {fmt: 0 for fmt in formats}  # the same hits as the control
    reordered = {fmt: 0 for fmt in formats}  # ... or the same turns in another order
    total = 0
    with tempfile.TemporaryDirectory() as tmp:
        for sample in samples:
            root = Path(tmp) / sample["sample_id"]
            root.mkdir()
            qs = locomo.questions(sample)
            qfile = root / "questions.txt"
            qfile.write_text("".join(q["question"] + "\n" for q in qs), encoding="utf-8")
            hits = {fmt: recall(*build(sample, root, fmt), qs, qfile) for fmt in formats}
            ids, docs = locomo.strong_docs(sample)
            bm25 = locomo.BM25(docs)
            ranked = [[ids[i] for i in bm25.top(tokenize(q["question"]), 60)] for q in qs]
            for n, q in enumerate(qs):
                total += 1
                for fmt in formats:
                    found[fmt] += locomo.found(hits[fmt][n], q["evidence"])
                    strong[fmt] += locomo.found([ranked[n][: sum(map(len, hits[fmt][n]))]], q["evidence"])
                    same[fmt] += hits[fmt][n] == hits["jsonl"][n]
                    as_by_day[fmt] += hits[fmt][n] == hits["jsonl by day"][n]
                    reordered[fmt] += hits[fmt][n] != hits["jsonl by day"][n] and sorted(hits[fmt][n]) == sorted(
                        hits["jsonl by day"][n])
                    if hits[fmt][n] != hits["jsonl"][n]:
                        print(f"{sample['sample_id']} {fmt}: {q['question']!r}\n  jsonl: {hits['jsonl'][n]}\n"
                              f"  {fmt}: {hits[fmt][n]}")
    print(f"\n{args.data.name}: {len(samples)} conversations, {total} questions; zero-LLM rules provider")
    for fmt in formats:
        print(f"- {fmt}: any-evidence@5 {found[fmt] / max(1, total):.3f} (strong baseline at its message budget "
              f"{strong[fmt] / max(1, total):.3f}); the same hits as the JSON Lines import "
              f"for {same[fmt]}/{total} questions, as the control (jsonl by day) for {as_by_day[fmt]}/{total} "
              f"(+{reordered[fmt]} the same turns in another order)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
