"""Linked pages: a seeded world of people, companies and meetings pages (linked_world.py)
ingested into a fresh vault with the rules provider (no LLM), then the questions "Who
works at / invested in / advises / attended X?" asked of `memlink search`, of plain BM25
over the page files and of BM25 + name match, in the same run; the seeds the relation
cues were tuned on are reported apart from held-out seeds (which add wordings no cue was
written for). "What does X build?" for every company checks that the index page linking
every page (a hub) does not outrank X's own page.

    .venv/bin/python benchmarks/linked_pages.py [--seed N [--held-out]] [--ablations] [--verbose]

A hit is a person's page in the top 5: the note imported from that person's file, or an
entity note with that person's name. P@5 = hits / results shown (at most 5; no results
= 0); P@5/5 = hits / 5; R@5 = hits / min(5, answers).

Why both precisions: a "Who works at X?" answer lists only the people X's links name, so
memlink often shows fewer than 5 results. P@5 (over what is shown) is the share of what a
reader sees that is right — it rewards not padding the list with noise; P@5/5 (over 5
slots, as BM25 always fills them) is the comparable number across systems, and is capped
by the answers there are (mean ~2.3 per question, so a perfect system scores well under
1.0). A system that shows only its one sure answer scores high on the first and low on
the second; one that pads to 5 the other way round: read them together. Also: ingest time, references
resolved / unresolved, relations of the page links against the hidden facts, and the
precision of the entities the rules extractor made."""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from linked_world import Question, World, generate  # noqa: E402

from engine import Vault  # noqa: E402
from engine.extract.batch import BatchResult, ingest_batch  # noqa: E402
from engine.extract.rules import RulesExtractor  # noqa: E402
from engine.index import SearchIndex  # noqa: E402
from engine.index.keywords import KeywordIndex  # noqa: E402
from engine.model.relations import relations_of  # noqa: E402
from engine.retrieve.search import search  # noqa: E402

K = 5
ROUTES = {  # name -> search keyword arguments (ablations)
    "memlink search": {},
    "  without note-name seeding": {"use_names": False},
    "  without grouping derived notes": {"group": False},
    "  without the graph": {"use_graph": False},
    "  keyword route only, no graph": {"routes": ("keyword",), "use_graph": False, "use_names": False, "group": False},
}


def page_of(vault: Vault, world: World) -> dict[str, str]:
    """vault URI -> the page path it stands for (an entity note with a person's name: that person's)."""
    by_name = {page.title.lower(): path for path, page in world.pages.items() if page.kind == "person"}
    out = {}
    for entry in vault.catalog.all():
        if entry.memory_type == "source":
            for alias in entry.aliases:
                if alias in world.pages:
                    out[entry.uri] = alias
        elif entry.memory_type == "entity" and entry.title.lower() in by_name:
            out[entry.uri] = by_name[entry.title.lower()]
    return out


def score(results: list[list[str]], world: World) -> dict[str, float]:
    p = p5 = r = 0.0
    for q, got in zip(world.questions, results, strict=True):
        hits = len(set(got[:K]) & set(q.gold))
        p += hits / len(got[:K]) if got else 0.0
        p5 += hits / K
        r += hits / min(K, len(q.gold))
    n = len(world.questions)
    return {"P@5": p / n, "P@5/5": p5 / n, "R@5": r / n}


def bm25(questions: list[Question], index: KeywordIndex, world: World | None = None) -> list[list[str]]:
    """Plain BM25 (tantivy, the same tokenizer as memlink's keyword index) over the page
    files; with ``world``, BM25 + name match: of the top 50, the pages that hold the name
    of a page the question names come first, people's pages (folder people/) first among
    them for a "Who …?" question."""
    out = []
    for q in questions:
        got = [u for u, _ in index.search(index.tokens(q.text), 50 if world else K, {"body": 1.0})]
        if world is not None:
            named = [p.title for p in world.pages.values() if p.title in q.text]
            has = {u for u in got if any(name in world.pages[u].text() for name in named)}
            who = q.text.startswith("Who")
            got = sorted(got, key=lambda u: (u not in has, who and not u.startswith("people/")))
        out.append(got[:K])
    return out


def relation_accuracy(vault: Vault, world: World) -> tuple[int, int, int, int]:
    """Links between two pages whose description names a relation: how many agree with
    the hidden facts (the person and the page stand in that relation), and how many of
    the facts such a link states."""
    path = {e.uri: e.aliases[0] for e in vault.catalog.all("source") if e.aliases}
    facts = {(rel, a, b) for rel, pairs in world.facts.items() for a, b in pairs}
    right = total = 0
    stated: set[tuple] = set()
    for link in vault.links.all():
        if link.from_uri not in path or link.to_uri not in path:
            continue
        for rel, from_subject in relations_of(link.description):
            subject, obj = (link.from_uri, link.to_uri) if from_subject else (link.to_uri, link.from_uri)
            total += 1
            right += (rel.name, path[subject], path[obj]) in facts
            stated.add((rel.name, path[subject], path[obj]))
    asked = {f for f in facts if f[0] != "mentions"}
    return right, total, len(asked & stated), len(asked)


def derived_slots(vault: Vault, world: World, index, kwargs: dict) -> float:
    """Searching a page's name (every company and person): the share of top-5 slots that
    notes derived from pages (events, entities) take instead of pages."""
    taken = shown = 0
    for page in world.pages.values():
        if page.kind not in ("person", "company"):
            continue
        hits = search(vault, page.title, k=K, index=index, snippets=False, **kwargs)
        shown += len(hits)
        taken += sum(1 for h in hits if h.memory_type != "source")
    return taken / shown if shown else 0.0


def mrr(results: list[list[str]], questions: list[Question]) -> float:
    """Mean reciprocal rank of the page that answers (0 past the top 5)."""
    total = 0.0
    for q, got in zip(questions, results, strict=True):
        rank = next((i for i, u in enumerate(got[:K], 1) if u in q.gold), None)
        total += 1.0 / rank if rank else 0.0
    return total / len(questions) if questions else 0.0


def ingest_pages(pages: Path, root: Path) -> tuple[Vault, BatchResult, float, SearchIndex]:
    """A fresh vault at ``root`` with the folder ``pages`` ingested by the rules, as
    `memlink ingest` does, its search index synced; and the seconds the ingest took."""
    vault = Vault.init(root)
    started = time.perf_counter()
    batch = ingest_batch(vault, [pages], extractor=RulesExtractor())
    ingest_s = time.perf_counter() - started
    index = SearchIndex.for_vault(vault)
    index.sync()
    return vault, batch, ingest_s, index


def measure(seed: int, held_out: bool, ablations: bool, verbose: bool) -> dict:
    world = generate(seed, held_out=held_out)
    with tempfile.TemporaryDirectory() as tmp:
        pages, root = Path(tmp) / "pages", Path(tmp) / "vault"
        world.write(pages)
        vault, batch, ingest_s, index = ingest_pages(pages, root)
        pages_of = page_of(vault, world)
        rows = {}
        for name, kwargs in ROUTES.items() if ablations else [("memlink search", {})]:
            results, found = [], []
            for q in world.questions:
                hits = search(vault, q.text, k=K, index=index, snippets=False, **kwargs)
                results.append([pages_of.get(h.uri, h.uri) for h in hits])
                if verbose and name == "memlink search" and set(q.gold) - set(results[-1]):
                    print(f"  seed {seed} missed {sorted(set(q.gold) - set(results[-1]))}: {q.text} -> {results[-1]}")
            for q in world.lookups:
                found.append([pages_of.get(h.uri, h.uri) for h in search(vault, q.text, k=K, index=index,
                                                                        snippets=False, **kwargs)])
            rows[name] = score(results, world) | {"lookup MRR": mrr(found, world.lookups)}
            if ablations:
                rows[name]["derived"] = derived_slots(vault, world, index, kwargs)
        keyword = KeywordIndex(Path(tmp) / "bm25", ("body",))
        for path, page in world.pages.items():
            keyword.put(path, {"body": page.text()})  # the text as it is, no title field
        keyword.flush()
        rows["plain BM25 over the pages"] = (score(bm25(world.questions, keyword), world)
                                             | {"lookup MRR": mrr(bm25(world.lookups, keyword), world.lookups)})
        rows["BM25 + name match"] = (score(bm25(world.questions, keyword, world), world)
                                     | {"lookup MRR": mrr(bm25(world.lookups, keyword, world), world.lookups)})
        entities = [e.title for e in vault.catalog.all("entity")]
        right, total, covered, facts = relation_accuracy(vault, world)
        vault.close()
    page_links = [l for l in batch.links_added if l["from"].startswith("sources/") and l["to"].startswith("sources/")]
    return {"world": world, "rows": rows, "ingest_s": ingest_s, "files": len(batch.files), "page_links": len(page_links),
            "links": len(batch.links_added), "unresolved": len(batch.unresolved), "ambiguous": len(batch.ambiguous),
            "relations": (right, total, covered, facts), "entities": entities}


# The relation cues and the answer route were written looking at these worlds (seed 101
# with the held-out wordings too: its misses were looked at) …
TUNE_SEEDS = ((7, False), (8, False), (101, True))
# … and never at these, which add wordings no cue was written for.
HELD_OUT_SEEDS = (201, 202, 203)


def table(runs: list[dict], title: str) -> None:
    names = list(runs[0]["rows"])
    questions = sum(len(r["world"].questions) for r in runs)
    print(f"{title}: seeds {', '.join(str(r['seed']) for r in runs)} ({questions} questions)")
    print()
    print(f"| {'route':<34} | P@5  | P@5/5 | R@5  | lookup MRR ¹ |" + (" derived-note slots ² |" if "derived" in runs[0]["rows"][names[0]] else ""))
    print(f"|{'-' * 36}|------|-------|------|--------------|" + ("----------------------|" if "derived" in runs[0]["rows"][names[0]] else ""))
    for name in names:
        mean = {m: statistics.mean(r["rows"][name][m] for r in runs) for m in runs[0]["rows"][name]}
        line = f"| {name:<34} | {mean['P@5']:.2f} | {mean['P@5/5']:.2f}  | {mean['R@5']:.2f} | {mean['lookup MRR']:.2f}         |"
        if "derived" in mean:
            line += f" {mean['derived']:.2f}{' ' * 16} |"
        print(line)
    print()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, action="append", help="measure only this seed (repeatable); default: "
                    "the tuning seeds and the held-out seeds, reported apart")
    ap.add_argument("--held-out", action="store_true", help="with --seed: add the held-out wordings")
    ap.add_argument("--ablations", action="store_true", help="also memlink without each of its parts")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    groups = ([("seeds asked for", [(s, args.held_out) for s in args.seed])] if args.seed else
              [("tuned on", list(TUNE_SEEDS)), ("held out", [(s, True) for s in HELD_OUT_SEEDS])])
    for title, seeds in groups:
        runs = [measure(seed, held_out, args.ablations, args.verbose) | {"seed": seed} for seed, held_out in seeds]
        table(runs, title)
        for r in runs:
            right, total, covered, facts = r["relations"]
            good = sum(1 for e in r["entities"] if e in r["world"].names)
            gold = [len(q.gold) for q in r["world"].questions]
            print(f"seed {r['seed']}: {len(r['world'].pages)} pages, {len(gold)} questions (answers per question: "
                  f"mean {statistics.mean(gold):.2f}); ingest {r['ingest_s']:.1f} s for {r['files']} files; "
                  f"{r['page_links']} page-to-page links ({r['links']} in all), unresolved {r['unresolved']}, "
                  f"ambiguous {r['ambiguous']}; relations on page links: {right}/{total} agree with the hidden "
                  f"facts, stating {covered}/{facts} of them; rules entities: {good}/{len(r['entities'])} real names")
        print()
    print("¹ \"What does X build?\" for every company: reciprocal rank of X's own page; an index page links every page")
    if args.ablations:
        print("² searching a page's name: the share of the top 5 taken by notes derived from pages (not pages)")


if __name__ == "__main__":
    main()
