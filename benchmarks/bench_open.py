"""Opening a vault: the first open of a never-seen vault (catalog + search index), the
catalog's load and no-change sync, and the cost of recording one note in the catalog —
each beside a simple baseline doing the same work in the same run.

    .venv/bin/python benchmarks/bench_open.py --sizes 1000,10000,100000 [--cache DIR]

Baselines: a full scan (os.walk, read every file, PyYAML's C loader on the frontmatter,
sha256) then model2vec on every body at once, one hnswlib add_items with the same
parameters and threads, one tantivy commit; the catalog rows as one JSON file
(json.loads into the same entries); os.walk + os.stat of every file; and the catalog as it
was before (64 TinyDB JSON shards, one shard rewritten atomically per note recorded).
Times are wall seconds with CPU seconds beside them (the machine may be shared).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import yaml  # noqa: E402
from engine.state import AtomicJSONStorage  # noqa: E402
from synthetic import generate_fast  # noqa: E402

from engine import Vault  # noqa: E402
from engine.index.embed import BUNDLED_MODEL, bundled_model_path, load_static_model, normalise  # noqa: E402
from engine.storage.catalog import CATALOG_FILE, CatalogEntry, CatalogStore  # noqa: E402

SHARDS = 64  # the TinyDB catalog's shard count


class Clock:
    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def __str__(self) -> str:
        return f"{time.perf_counter() - self.wall:7.2f} s (cpu {time.process_time() - self.cpu:6.2f})"

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.wall


def line(what: str, memlink: str, baseline: str) -> None:
    print(f"  {what:<34} memlink {memlink:<28} baseline {baseline}")


def vault_for(cache: Path, n: int) -> Path:
    root = cache / f"v{n}"
    if not (root / ".generated").exists():
        shutil.rmtree(root, ignore_errors=True)
        clock = Clock()
        generate_fast(root, n)
        (root / ".generated").write_text("ok")
        print(f"  generated {n} notes in {clock}")
    return root


def forget(root: Path) -> None:
    shutil.rmtree(root / ".memlink", ignore_errors=True)


# -- baselines --------------------------------------------------------------------------------
def scan(root: Path) -> tuple[dict[str, tuple], list[tuple[str, str, str, str]]]:
    """Every note read and its frontmatter parsed with PyYAML's C loader: the rows a catalog
    holds and (uri, type, title, body) for indexing."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    rows: dict[str, tuple] = {}
    docs = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            if not name.endswith(".md"):
                continue
            path = os.path.join(dirpath, name)
            uri = os.path.relpath(path, root)
            data = open(path, "rb").read()
            _, front, body = data.decode("utf-8").split("---\n", 2)
            meta = yaml.load(front, Loader=loader)
            fields = meta["fields"]
            title = str(fields.get("name") or fields.get("topic") or fields.get("event_name") or fields.get("title") or uri)
            st = os.stat(path)
            rows[uri] = (meta["memory_type"], title, st.st_mtime_ns, st.st_size, hashlib.sha256(data).hexdigest()[:20])
            docs.append((uri, meta["memory_type"], title, body))
    return rows, docs


def baseline_first_open(root: Path, work: Path, hnsw: dict) -> tuple[str, str]:
    import hnswlib
    import tantivy

    clock = Clock()
    _rows, docs = scan(root)
    scanned = str(clock)
    model = load_static_model(bundled_model_path())
    vectors = normalise(model.encode([d[3] for d in docs], show_progress_bar=False))
    index = hnswlib.Index(space="cosine", dim=vectors.shape[1])
    index.init_index(max_elements=len(docs), M=hnsw["M"], ef_construction=hnsw["ef_construction"])
    index.add_items(vectors, list(range(len(docs))), num_threads=2)
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("uri", stored=True, tokenizer_name="raw")
    sb.add_text_field("mtype", stored=True, tokenizer_name="raw")
    sb.add_text_field("title", stored=False, tokenizer_name="en_stem")
    sb.add_text_field("body", stored=False, tokenizer_name="en_stem")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    kw = tantivy.Index(sb.build(), path=str(work))
    writer = kw.writer(heap_size=50_000_000, num_threads=1)
    for uri, mtype, title, body in docs:
        writer.add_document(tantivy.Document(uri=uri, mtype=mtype, title=title, body=body))
    writer.commit()
    writer.wait_merging_threads()
    return scanned, str(clock)


def tinydb_shards(folder: Path, entries: list[CatalogEntry]) -> list[AtomicJSONStorage]:
    """The catalog as it was: 64 TinyDB JSON shards by a hash of the URI."""
    shards: list[dict] = [{"notes": {}} for _ in range(SHARDS)]
    for i, e in enumerate(entries):
        shard = int(hashlib.sha1(e.uri.encode()).hexdigest()[:6], 16) % SHARDS
        shards[shard]["notes"][str(i)] = {k: getattr(e, k) for k in e.__slots__}
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i, data in enumerate(shards):
        storage = AtomicJSONStorage(folder / f"catalog-{i:02d}.json")
        storage.write(data)
        out.append(storage)
    return out


def p50_ms(fn, n: int) -> str:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return f"p50 {statistics.median(times):7.2f} ms (n={n})"


# -- the run ----------------------------------------------------------------------------------
def run(n: int, cache: Path) -> None:
    print(f"\n== {n} notes")
    root = vault_for(cache, n)
    hnsw = Vault.open(root, read_only=True).config.search.hnsw()

    # First open of a never-seen vault: catalog, then catalog + search index.
    forget(root)
    clock = Clock()
    vault = Vault.open(root)
    vault.sync_catalog()
    catalog_first = str(clock)
    vault.close()
    forget(root)
    clock = Clock()
    vault = Vault.open(root)
    index = vault.services.open_index()
    first_open = str(clock)
    chunks = len(index.vectors)
    vault.close()
    scanned, baseline_open = baseline_first_open(root, cache / "baseline-index", hnsw)
    line("catalog, first build", catalog_first, f"{scanned}  (walk + read + yaml C loader)")
    line("first open (catalog + index)", first_open, f"{baseline_open}  (scan + model2vec + hnswlib + tantivy)")
    print(f"  ({chunks} chunks indexed, model {BUNDLED_MODEL}, hnsw {hnsw})")

    # Catalog load and no-change sync, in a new vault object (as a new process has it).
    entries = list(CatalogStore(root / ".memlink" / CATALOG_FILE).load().values())
    as_json = root / ".memlink" / "baseline-catalog.json"
    as_json.write_text(json.dumps([[getattr(e, k) for k in e.__slots__] for e in entries]))
    clock = Clock()
    loaded = Vault.open(root).stored_notes()
    memlink_load = str(clock)
    clock = Clock()
    rows = {r[0]: CatalogEntry(*r) for r in json.loads(as_json.read_text())}
    line("catalog load", memlink_load, f"{clock}  (one JSON file → the same entries)")
    assert len(rows) == len(loaded) == n
    vault = Vault.open(root)
    clock = Clock()
    vault.sync_catalog()
    memlink_sync = str(clock)
    clock = Clock()
    vault.sync_catalog()
    memlink_sync_again = str(clock)
    clock = Clock()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            os.stat(os.path.join(dirpath, name))
    walk = str(clock)
    line("no-change sync (load + walk)", memlink_sync, f"{walk}  (os.walk + os.stat of every file)")
    line("no-change sync, loaded already", memlink_sync_again, walk)

    # Recording one note: one row upserted, against one TinyDB shard rewritten.
    store = CatalogStore(root / ".memlink" / CATALOG_FILE)
    rng = random.Random(1)
    shards = tinydb_shards(cache / f"tinydb-{n}", entries)

    def put_row() -> None:
        e = rng.choice(entries)
        e.mtime_ns += 1
        store.put(e)

    def rewrite_shard() -> None:
        storage = rng.choice(shards)
        data = storage.read() or {"notes": {}}
        rows = data["notes"]
        if rows:
            key = next(iter(rows))
            rows[key]["mtime_ns"] += 1
        storage.write(data)

    line("record one note in the catalog", p50_ms(put_row, 200), p50_ms(rewrite_shard, 40) + "  (TinyDB shard rewrite)")
    store.close()
    vault.close()
    print(f"  peak RSS so far {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000", help="comma-separated note counts")
    ap.add_argument("--cache", type=Path, help="keep generated vaults here between runs")
    args = ap.parse_args()
    cache = args.cache or Path(tempfile.mkdtemp(prefix="memlink-open-"))
    cache.mkdir(parents=True, exist_ok=True)
    print(f"bench_open: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    try:
        for n in (int(s) for s in args.sizes.split(",")):
            run(n, cache)
    finally:
        if args.cache is None:
            shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
