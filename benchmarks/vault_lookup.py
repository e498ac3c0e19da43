"""Lookups in a real vault of linked pages: does the page that answers come first?

Give it any folder of Markdown pages that link each other (an Obsidian vault, a wiki
export). It is ingested into a fresh vault with the rules provider (no LLM), as
`memlink ingest` does, and section headings that only one page holds ("Change the
default attachment location", "Search operators") are asked as queries, as written, up
to PER_PAGE of each page, in page order. The page holding one is its answer; nothing
else counts (not the notes derived from it, not a page linking to it). Headings of fewer
than two words, and headings that are a page's file name, are not asked. Hidden files
and folders (".trash/", ".obsidian/") are left out, as ingest leaves them. Pages are
split in two halves by a hash of their path, so a change looked at on one half can be
judged on the other.

Reported per half and for all, memlink search beside two baselines in the same run:
plain BM25 over the page files (tantivy, the tokenizer memlink's keyword index uses), and
BM25 over the page files with their file name as a title field boosted ×2. Hit@1, hit@5
and MRR (the reciprocal rank of the answer, 0 past the top 5), and "a hub above": the
share of questions with a hub (a page linking at least HUB_LINKS others) ranked above the
answer, or anywhere in the top 5 when the answer is not there.

    .venv/bin/python benchmarks/vault_lookup.py VAULT_FOLDER [--ablations] [--verbose]
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from linked_pages import ingest_pages  # noqa: E402

from engine import Vault  # noqa: E402
from engine.index.keywords import KeywordIndex  # noqa: E402
from engine.model.text import words  # noqa: E402
from engine.retrieve.search import search  # noqa: E402

K = 5
ROUTES = {  # name -> search keyword arguments (--ablations)
    "memlink search": {},
    "  without note-name seeding": {"use_names": False},
    "  without the graph": {"use_graph": False},
    "  keyword route only": {"routes": ("keyword",)},
    "  vector route only": {"routes": ("vector",)},
}
HUB_LINKS = 20  # a page linking this many others is a hub
PER_PAGE = 5  # headings asked of each page at most: a long reference page does not outweigh the rest
_HEADING = re.compile(r"^#{2,6}\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")


@dataclass(frozen=True)
class Lookup:
    text: str
    page: str  # the page's path in the folder, e.g. "Plugins/Search.md"
    half: str  # "A" or "B"


def headings(text: str) -> list[str]:
    """A page's section headings (## and deeper), outside code blocks, markup dropped."""
    out, fence = [], ""
    for line in text.splitlines():
        m = _FENCE.match(line)
        if m:  # (a block ends at a fence of its own kind, at least as long)
            if not fence:
                fence = m.group(1)
            elif m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = ""
            continue
        m = None if fence else _HEADING.match(line)
        if m:
            plain = re.sub(r"\[\[([^\]|]*\|)?([^\]]*)\]\]", r"\2", m.group(1))  # [[a|b]] -> b
            plain = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", lambda x: x.group(1) or "", plain).strip()
            if plain:
                out.append(plain)
    return out


def page_texts(folder: Path) -> dict[str, str]:
    """The folder's Markdown pages (path in the folder -> text), hidden ones left out."""
    return {f.relative_to(folder).as_posix(): f.read_text(encoding="utf-8", errors="replace")
            for f in sorted(folder.rglob("*.md"))
            if not any(part.startswith(".") for part in f.relative_to(folder).parts)}


def half_of(path: str) -> str:
    return "A" if hashlib.sha1(path.encode()).digest()[0] % 2 == 0 else "B"


def lookups(pages: dict[str, str]) -> list[Lookup]:
    """Up to PER_PAGE headings of each page, in page order: those of two words or more
    that no other page holds and that are not a page's file name (a heading "Daily notes"
    asks for the page of that name as much as for the section)."""
    titles = {tuple(words(Path(page).stem)) for page in pages}
    held: dict[str, set[str]] = {}
    for page, text in pages.items():
        for h in headings(text):
            held.setdefault(h.lower(), set()).add(page)
    out = []
    for page, text in pages.items():
        asked = [h for h in dict.fromkeys(headings(text))
                 if len(words(h)) >= 2 and tuple(words(h)) not in titles and held[h.lower()] == {page}]
        out += [Lookup(h, page, half_of(page)) for h in asked[:PER_PAGE]]
    return out


def link_counts(pages: dict[str, str]) -> dict[str, int]:
    """How many distinct targets each page's [[links]] and (links) name."""
    return {page: len(set(re.findall(r"\[\[([^\]|#]+)", text)) | set(re.findall(r"\]\(([^)#\s]+\.md)", text)))
            for page, text in pages.items()}


def scores(ranked: list[list[str]], asked: list[Lookup], hubs: set[str]) -> dict[str, float]:
    n = len(asked) or 1
    top1 = top5 = rr = hub_above = 0.0
    for got, q in zip(ranked, asked, strict=True):
        rank = next((i for i, p in enumerate(got[:K], 1) if p == q.page), None)
        top1 += rank == 1
        top5 += rank is not None
        rr += 1.0 / rank if rank else 0.0
        above = got[: (rank or K + 1) - 1][:K]
        hub_above += any(p in hubs for p in above)
    return {"hit@1": top1 / n, "hit@5": top5 / n, "MRR": rr / n, "hub above": hub_above / n}


def page_of(vault: Vault) -> dict[str, str]:
    """Vault URI of an imported page -> the page's path in the folder."""
    return {e.uri: alias for e in vault.catalog.all("source") for alias in e.aliases if alias.endswith(".md")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("folder", type=Path, help="a folder of linked Markdown pages (an Obsidian vault)")
    ap.add_argument("--ablations", action="store_true", help="also memlink without each of its parts")
    ap.add_argument("--verbose", action="store_true", help="print each memlink miss at rank 1")
    args = ap.parse_args()
    texts = page_texts(args.folder)
    asked = lookups(texts)
    counts = link_counts(texts)
    hubs = {p for p, c in counts.items() if c >= HUB_LINKS}
    with tempfile.TemporaryDirectory() as tmp:
        pages, root = Path(tmp) / "pages", Path(tmp) / "vault"
        shutil.copytree(args.folder, pages)
        vault, batch, ingest_s, index = ingest_pages(pages, root)
        mapped = page_of(vault)
        rows: dict[str, dict[str, dict[str, float]]] = {}
        ranked: dict[str, list[list[str]]] = {}
        for name, kwargs in ROUTES.items() if args.ablations else [("memlink search", {})]:
            ranked[name] = []
            for q in asked:
                hits = search(vault, q.text, k=K, index=index, snippets=False, **kwargs)
                ranked[name].append([mapped.get(h.uri, h.uri) for h in hits])
                got = ranked[name][-1]
                if args.verbose and name == "memlink search" and (not got or got[0] != q.page):
                    print(f"  {q.text!r} -> {q.page}: {got}")
        plain = KeywordIndex(Path(tmp) / "bm25", ("body",))
        titled = KeywordIndex(Path(tmp) / "bm25t", ("title", "body"))
        for page, text in texts.items():
            plain.put(page, {"body": text})
            titled.put(page, {"title": Path(page).stem, "body": text})
        plain.flush()
        titled.flush()
        ranked |= {
            "plain BM25 over the pages": [[u for u, _ in plain.search(plain.tokens(q.text), K, {"body": 1.0})]
                                          for q in asked],
            "BM25, file name as title ×2": [[u for u, _ in titled.search(titled.tokens(q.text), K,
                                                                          {"title": 2.0, "body": 1.0})] for q in asked],
        }
        for half in ("A", "B", "all"):
            keep = [i for i, q in enumerate(asked) if half in (q.half, "all")]
            rows[half] = {name: scores([r[i] for i in keep], [asked[i] for i in keep], hubs)
                          for name, r in ranked.items()}
        vault.close()
    print(f"{args.folder}: {len(counts)} pages, {len(hubs)} hubs (≥ {HUB_LINKS} links), {len(asked)} headings asked "
          f"(half A {sum(q.half == 'A' for q in asked)}, half B {sum(q.half == 'B' for q in asked)}); ingest "
          f"{ingest_s:.1f} s, {len(batch.links_added)} links, {len(batch.unresolved)} unresolved")
    print()
    print("| half | route | hit@1 | hit@5 | MRR | a hub above the answer |")
    print("|---|---|---|---|---|---|")
    for half, by_route in rows.items():
        for name, s in by_route.items():
            print(f"| {half} | {name} | {s['hit@1']:.3f} | {s['hit@5']:.3f} | {s['MRR']:.3f} | {s['hub above']:.3f} |")


if __name__ == "__main__":
    main()
