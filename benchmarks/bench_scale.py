"""The scale summary: every command on synthetic vaults of each size, memlink beside a
simple baseline doing the same work in the same run, one markdown table per size on
stdout (progress on stderr). Written against the CLI and the public API only, so it
keeps measuring as the internals change.

    .venv/bin/python benchmarks/bench_scale.py --sizes 1000,10000 --work /tmp/memlink-scale

Vaults (``benchmarks/synthetic.py``), generated once under --work and reused across runs:
``v<N>`` stays as generated (never opened: the "never-seen vault"); ``r<N>-<T>turns`` is
a copy indexed once, with a generated chat of T (--turns) turns imported (`memlink
import-chat`), for the search and recall rows; ``m<N>-<word>-<share>`` is the variant in
which --shared-first-word of the notes (0.4: 40k of 100k) have names beginning with the
same word ("Meeting …"), indexed, for its search row. A built copy is made under another
name and renamed when it is ready, so it counts as built when its
``.memlink/index.sqlite`` is there. The rows that write run on a fresh copy of ``v<N>``,
deleted afterwards. Nothing outside the repository and --work is read or written (the
user's memlink settings, data folder and temporary files point into --work too).

Rows (memlink | baseline):
- first open of a never-seen vault: `memlink reindex` (catalog, link index, search
  index), with its peak RSS | read + parse every note and sidecar, embed every body with
  the raw model2vec model, build raw hnswlib + tantivy indexes
- first lint of the copy, lint after one change, full lint (`--full`: every check run
  again, the derived state kept): `memlink lint` | a full scan: read every note (yaml)
  and sidecar (json)
- dream (rules): `memlink dream --provider rules` | the same full scan
- doctor: one `memlink doctor` process | a process loading the raw model and doing the
  full scan
- commit of one chat turn: a session of one turn written through the engine's session
  log (``append_events``), then one `memlink commit` process (rules provider) | a
  process reading the session's log and writing one note file atomically
- link write: one `memlink link` process | a process doing json.loads + append +
  atomic rewrite (temp file, fsync, rename) of both sidecars; and ``vault.link`` in a
  process of its own, p50 after a first write | the same json.loads + append + rewrite
- note write in process: ``vault.write_note`` of an existing note, p50 | read the file,
  append a line, rewrite it atomically
- `.memlink/` size (apparent: the sum of its files' sizes) after the first open and
  after all the rows that write | the notes' and sidecars' apparent size
- search processes on the indexed copy, cold (the first after `memlink reindex`) and
  warm (median of 5), with the warm ones' peak RSS: `memlink search` | a process loading
  the raw hnswlib + tantivy files and querying both
- search in process (a process of its own for each side), p50 / p95 over the queries,
  the median of three runs of each side taken in turn: ``engine.retrieve.search.search``
  | embed + hnswlib knn + tantivy query; then the same on ``m<N>-…`` with questions whose
  first word begins the shared names
- vector recall@10: memlink's hnswlib file (its M, ef_construction, ef) against an exact
  scan of the same vectors, and each one's time a query
- recall: one `memlink recall` process, the first and then warm (median of 3) | a
  process reading every session log and scoring every turn by BM25; recall in process
  p50 / p95 | BM25 over every turn (token counts made beforehand)
- once per run, a search process on a copy of the sample vault (the figure a big
  vault's search process is compared with)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # small products stall under threaded BLAS

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO))

MEMLINK = [sys.executable, "-m", "memlink_tui"]
SIDECAR = ".relations.json"
DB = Path(".memlink") / "index.sqlite"  # a built copy has it
TARGETS = {  # at 100k notes
    "first open of a never-seen vault": "≤ 45 s", "commit of one chat turn, one process": "≤ 1.5 s",
    "doctor, one process": "≤ 1.5 s", "search process, warm": "≤ 1.5 s",
    "peak RSS, search process": "≤ 800 MB", "search in process p50 / p95": "≤ 3 ms / ≤ 20 ms",
    "link write, one process": "≤ 1.5 s", "link write, in process p50": "≤ 20 ms",
    "lint after one change": "≤ 1.5 s", "full lint (--full)": "≤ 15 s", "dream (rules)": "≤ 5 s at 10k",
    "`.memlink/` size after the first open": "≤ the notes and sidecars",
    "`.memlink/` size after the rows that write": "≤ the vault's files",
    "recall, one process": "≤ 1.5 s", "search in process p50 / p95, 40%": "≤ 6 ms p50",
}


def target(row: str) -> str:
    """The target of a row: the longest name in TARGETS the row's name begins with."""
    return max(((k, t) for k, t in TARGETS.items() if row.startswith(k)), default=("", ""), key=lambda kt: len(kt[0]))[1]

# The table's order (rows are measured in another: the lint rows need a copy not linted yet).
ORDER = ["first open", "commit", "doctor", "search process", "peak RSS", "search in process", "vector recall", "link write",
         "note write", "recall", "lint after one change", "first lint", "full lint", "dream", "`.memlink/` size", ""]

# -- the baselines' programs ---------------------------------------------------------------------
# Raw hnswlib + tantivy over memlink's own index files, and one query through both.
RAW_LOAD = r'''
import glob, json, os, sys, time
import hnswlib, tantivy
from model2vec import StaticModel
root, model, ef, queries = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
folder = os.path.join(root, ".memlink", "index")
m = StaticModel.from_pretrained(model)
vi = hnswlib.Index(space="cosine", dim=m.dim)
vi.load_index(max(glob.glob(os.path.join(folder, "notes-vectors-*.bin")), key=os.path.getmtime))
vi.set_ef(ef)
ix = tantivy.Index.open(os.path.join(folder, "notes"))
searcher = ix.searcher()
def one(q):
    vi.knn_query(m.encode([q]), k=30)
    hits = searcher.search(ix.parse_query(q, ["text"]), 30).hits
    return [searcher.doc(a)["id"][0] for _, a in hits[:10]]
'''
RAW_QUERY = RAW_LOAD + r'''
for q in queries:
    print(one(q)[:3])
'''
TIMED_RUNS = 3  # processes timed per side for the in-process rows
# Each query timed in a fresh process: five queries to warm up, then each query once (ms).
TIMED = r'''
for q in queries[:5]:
    one(q)
out = []
for q in queries:
    t = time.perf_counter(); one(q); out.append((time.perf_counter() - t) * 1000)
print(json.dumps(out))
'''
RAW_TIMED = RAW_LOAD + TIMED
MINE_TIMED = r'''
import json, sys, time
from pathlib import Path
from engine import Vault
from engine.index import SearchIndex
from engine.retrieve.search import search
vault = Vault.open(Path(sys.argv[1]))
index = SearchIndex.for_vault(vault)
queries = sys.argv[2:]
def one(q):
    search(vault, q, k=10, index=index)
''' + TIMED

# hnswlib's answers against an exact scan of the same vectors (memlink's saved file).
VECTOR_RECALL = r'''
import glob, json, os, statistics, sys, time
import hnswlib, numpy as np
from model2vec import StaticModel
root, model, ef, queries = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
m = StaticModel.from_pretrained(model)
vi = hnswlib.Index(space="cosine", dim=m.dim)
vi.load_index(max(glob.glob(os.path.join(root, ".memlink", "index", "notes-vectors-*.bin")), key=os.path.getmtime))
vi.set_ef(ef)
labels = np.array(vi.get_ids_list())
matrix = np.asarray(vi.get_items(labels), dtype=np.float32)
matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
found = total = 0
ann, exact = [], []
for q in queries:
    vec = m.encode([q])[0].astype(np.float32)
    if not np.any(vec):
        continue
    vec /= np.linalg.norm(vec)
    t = time.perf_counter(); best = set(labels[np.argsort(-(matrix @ vec))[:10]].tolist()); exact.append(time.perf_counter() - t)
    t = time.perf_counter(); got, _ = vi.knn_query(vec[None, :], k=10); ann.append(time.perf_counter() - t)
    found += len(best & set(got[0].tolist()))
    total += 10
print(json.dumps({"recall": found / max(1, total), "vectors": len(labels),
                  "ann_ms": statistics.median(ann) * 1000, "exact_ms": statistics.median(exact) * 1000}))
'''

# A link's two sides the plain way: load each folder's sidecar, append, rewrite it
# atomically (temp file, fsync, rename).
RAW_LINK = r'''
import json, os, sys, time
from pathlib import Path
def raw_link(root, a, b, k):
    for uri, direction in ((a, "links"), (b, "backlinks")):
        path = root / os.path.dirname(uri) / ".relations.json"
        rows = json.loads(path.read_text(encoding="utf-8")) if path.exists() else []
        rows.append({"id": f"bench_{k}", "from_uri": a, "to_uri": b, "direction": direction,
                     "link_type": "related_to", "weight": 0.5, "created_at": "2026-12-01T00:00:00+00:00"})
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write("[\n" + ",\n".join(json.dumps(r) for r in rows) + "\n]\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
def raw_write(path):
    text = path.read_text(encoding="utf-8") + "One more line.\n"
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
'''
RAW_LINK_ONCE = RAW_LINK + r'''
raw_link(Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4])
'''
# Writes timed in a process of their own: links (after a first one), then note writes (ms).
RAW_WRITES = RAW_LINK + r'''
root, pairs, notes = Path(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3])
links, writes = [], []
for k, (a, b) in enumerate(pairs[1:]):
    t = time.perf_counter(); raw_link(root, a, b, f"w{k}"); links.append((time.perf_counter() - t) * 1000)
for uri in notes:
    t = time.perf_counter(); raw_write(root / uri); writes.append((time.perf_counter() - t) * 1000)
print(json.dumps({"links": links, "writes": writes}))
'''
MINE_WRITES = r'''
import json, sys, time
from pathlib import Path
from engine import Vault
root, pairs, notes = Path(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3])
vault = Vault.open(root)
vault.link(*pairs[0], "related_to")  # the first write reads what a write needs: not what is measured
links, writes = [], []
for a, b in pairs[1:]:
    t = time.perf_counter(); vault.link(a, b, "related_to"); links.append((time.perf_counter() - t) * 1000)
for uri in notes:
    note = vault.read_note(uri)
    content = str(note.fields.get("content", "")) + "\nOne more line."
    t = time.perf_counter(); vault.write_note(note.memory_type, {"content": content}, uri=uri)
    writes.append((time.perf_counter() - t) * 1000)
vault.close()
print(json.dumps({"links": links, "writes": writes}))
'''

# What a commit must at least do: read the session's log, write one note file atomically.
RAW_COMMIT = r'''
import json, os, sys
import yaml
root, session, out = sys.argv[1], sys.argv[2], sys.argv[3]
with open(os.path.join(root, "sessions", session + ".jsonl"), encoding="utf-8") as fh:
    turn = [json.loads(line) for line in fh if line.strip()]
text = "\n".join(f"{e['role']}: {e['content']}" for e in turn)
front = yaml.safe_dump({"memory_type": "event", "fields": {"event_name": session, "content": text}})
tmp = out + ".tmp"
with open(tmp, "w", encoding="utf-8") as fh:
    fh.write(f"---\n{front}---\n{text}\n")
    fh.flush()
    os.fsync(fh.fileno())
os.replace(tmp, out)
'''

# What doctor must at least do: load the model, read every note and sidecar.
RAW_DOCTOR = r'''
import sys
sys.path.insert(0, sys.argv[3])
from bench_scale import full_scan
from model2vec import StaticModel
StaticModel.from_pretrained(sys.argv[2])
full_scan(sys.argv[1])
'''

# BM25 over every turn of the session logs: (turns, token counts) read, then a scan a query.
TURNS = r'''
import glob, json, math, os, re, sys, time
from collections import Counter
def tokens(text):
    return re.findall(r"[a-z0-9]+", text.lower())
def read_turns(root):
    turns = []
    for path in sorted(glob.glob(os.path.join(root, "sessions", "*.jsonl"))):
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                e = json.loads(line)
                if e["role"] == "user" or not turns:
                    turns.append([])
                turns[-1].append(e["content"])
    return [Counter(tokens(" ".join(t))) for t in turns]
def bm25(docs, query, k=5):
    n = len(docs)
    avg = sum(sum(c.values()) for c in docs) / max(1, n)
    terms = set(tokens(query))
    df = Counter(t for c in docs for t in terms if t in c)
    idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in terms}
    scores = []
    for i, c in enumerate(docs):
        length = sum(c.values())
        s = sum(idf[t] * c[t] * 2.2 / (c[t] + 1.2 * (0.25 + 0.75 * length / avg)) for t in terms if t in c)
        if s:
            scores.append((-s, i))
    return sorted(scores)[:k]
'''
RAW_RECALL_ONCE = TURNS + r'''
print(bm25(read_turns(sys.argv[1]), sys.argv[2]))
'''
RAW_RECALL_TIMED = TURNS + r'''
docs, queries = read_turns(sys.argv[1]), sys.argv[2:]
def one(q):
    bm25(docs, q)
''' + TIMED
MINE_RECALL_TIMED = r'''
import json, sys, time
from pathlib import Path
from engine import Vault
from engine.sessions.recall import TurnMemory
vault = Vault.open(Path(sys.argv[1]))
memory = TurnMemory.for_vault(vault)
queries = sys.argv[2:]
def one(q):
    memory.recall(q, k=5)
''' + TIMED

def full_scan(root: str | Path) -> int:
    """Read every note (frontmatter through yaml) and every sidecar (json): what any
    whole-vault command must at least do."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    n = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            path = os.path.join(dirpath, name)
            if name == SIDECAR:
                with open(path, encoding="utf-8") as fh:
                    n += len(json.load(fh))
            elif name.endswith(".md"):
                with open(path, encoding="utf-8") as fh:
                    text = fh.read()
                if text.startswith("---"):
                    yaml.load(text.split("---", 2)[1], Loader=loader)
                n += 1
    return n


def raw_build(root: Path, out: Path) -> None:
    """Read every note, embed its body (raw model2vec), build hnswlib and tantivy."""
    import hnswlib
    import numpy as np
    import tantivy
    from model2vec import StaticModel

    from engine.index.embed import bundled_model_path
    from engine.model.config import load_config

    hnsw = load_config(root).search.hnsw()  # (memlink's own parameters: the same index built)
    full_scan(root)
    uris, bodies = [], []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            if name.endswith(".md"):
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8") as fh:
                    bodies.append(fh.read().split("---", 2)[-1])
                uris.append(os.path.relpath(path, root))
    model = StaticModel.from_pretrained(str(bundled_model_path()))
    vectors = model.encode(bodies)
    vi = hnswlib.Index(space="cosine", dim=vectors.shape[1])
    vi.init_index(max_elements=len(uris), M=hnsw["M"], ef_construction=hnsw["ef_construction"])
    vi.add_items(vectors, np.arange(len(uris)), num_threads=2)
    out.mkdir(parents=True, exist_ok=True)
    vi.save_index(str(out / "vectors.bin"))
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("uri", stored=True, tokenizer_name="raw")
    sb.add_text_field("body", stored=False, tokenizer_name="en_stem")
    index = tantivy.Index(sb.build(), path=str(out))
    writer = index.writer(heap_size=50_000_000, num_threads=1)
    for uri, body in zip(uris, bodies, strict=True):
        writer.add_document(tantivy.Document(uri=uri, body=body))
    writer.commit()
    writer.wait_merging_threads()


# -- measuring ---------------------------------------------------------------------------------
def proc(args: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Run one process: (wall seconds, its peak RSS in MB, stdout). Fails loudly."""
    # GNU time reports the child's own peak; a child's ru_maxrss from wait4 would count
    # the pages it shares with this (big) process from before its exec.
    gnu_time = shutil.which("time") or ("/usr/bin/time" if os.path.exists("/usr/bin/time") else None)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile("r", suffix=".rss") as rss:
        run = [gnu_time, "-f", "%M", "-o", rss.name, *args] if gnu_time else args
        t = time.perf_counter()
        p = subprocess.Popen(run, stdout=out, stderr=err, env=env)
        _pid, status, usage = os.wait4(p.pid, 0)
        took = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text = out.read().decode("utf-8", "replace")
        peak = usage.ru_maxrss / 1024
        if gnu_time:
            lines = [l for l in rss.read().split() if l.strip().isdigit()]
            peak = int(lines[-1]) / 1024 if lines else peak
        if p.returncode not in (0, 3, 5):  # lint and doctor exit 3 with findings, dream 5 when a topic failed
            raise RuntimeError(f"{' '.join(args[:4])}… exited {p.returncode}: {err.read().decode()[-2000:]}")
    return took, peak, text


def py(program: str, *args: str) -> list[str]:
    """A command line running ``program`` in a fresh Python."""
    return [sys.executable, "-c", program, *args]


def json_of(program: str, *args: str) -> object:
    """What ``program`` prints as its last line (JSON), run in a fresh Python."""
    out = subprocess.run(py(program, *args), env=ENV, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def warm_disk(root: Path) -> None:
    """A warm disk for the search rows: every file under the vault's ``.memlink/`` read
    once (memlink's index files and the baseline's alike: they are the same files) and
    every note stat-ed (a search process's walk). The rows before them read the whole
    vault several times over, and this machine's memory reclaim drops cold pages."""
    for dirpath, _dirs, files in os.walk(root):
        inside = Path(dirpath).is_relative_to(root / ".memlink")
        for name in files:
            path = os.path.join(dirpath, name)
            if not inside:
                os.stat(path)
                continue
            with open(path, "rb") as fh:
                while fh.read(1 << 24):
                    pass


def timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))]


def apparent(root: Path, keep: Callable[[str], bool] = lambda name: True, hidden: bool = True) -> int:
    """The sum of the sizes of the files under ``root`` that ``keep`` takes (by name);
    ``hidden`` False: hidden folders left out."""
    total = 0
    for dirpath, dirnames, filenames in os.walk(root):
        if not hidden:
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        total += sum(os.stat(os.path.join(dirpath, f)).st_size for f in filenames if keep(f))
    return total


def mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def note_paths(root: Path) -> list[str]:
    notes = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        notes += [os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".md")]
    return notes


def queries_for(root: Path, n: int, seed: int = 3, first_word: str = "") -> list[str]:
    """Questions made of a note's title words and a word of its body (of the notes whose
    name begins with ``first_word`` when one is given)."""
    rng = random.Random(seed)
    notes = note_paths(root)
    if first_word:
        notes = [p for p in notes if Path(p).stem.startswith(first_word.lower() + "-")]
    out = []
    for path in rng.sample(notes, min(n, len(notes))):
        words = [w for w in Path(path).stem.split("-") if w.isalpha()]
        body = [w.strip(".,").lower() for w in Path(path).read_text(encoding="utf-8").split("---", 2)[-1].split()]
        body = [w for w in body if w.isalpha()] or ["note"]
        out.append(" ".join(words[:2] + [rng.choice(body)]))
    return out


def recall_queries(chat: Path, asked: list[dict], n: int, seed: int = 4) -> list[str]:
    """The chat's questions with a known answer, then questions of three words of a
    user's message, up to ``n``."""
    rng = random.Random(seed)
    said = [json.loads(line)["content"] for line in chat.read_text(encoding="utf-8").splitlines()]
    out = [q["query"] for q in asked][: n // 2]
    while len(out) < n:
        words = [w.strip(".,").lower() for w in rng.choice(said[::2]).split() if len(w) > 3]
        out.append(" ".join(rng.sample(words, min(3, len(words)))) or "kiln")
    return out


def build(target: Path, make: Callable[[Path], None]) -> float:
    """``target`` made by ``make`` under another name and renamed once whole (so a copy
    cut short is never taken for a built one); the seconds it took (0: built already)."""
    if (target / DB).exists():
        return 0.0
    shutil.rmtree(target, ignore_errors=True)
    part = target.with_name(target.name + ".part")
    shutil.rmtree(part, ignore_errors=True)
    took = timed(lambda: make(part))
    part.rename(target)
    return took


def ensure_vaults(work: Path, n: int, turns: int, shared: float, first_word: str) -> dict:
    """v<N> (as generated, never opened), r<N>-<T>turns (indexed, a chat of ``turns``
    turns imported), m<N>-<word>-<share> (the shared-first-word variant, indexed; None
    when ``shared`` is 0), the chat's questions, and the seconds generating took."""
    from synthetic import generate_chat, generate_fast

    base, ready, chat = work / f"v{n}", work / f"r{n}-{turns}turns", work / f"chat-{turns}turns.jsonl"
    took = 0.0
    if not (base / ".generated").exists():
        shutil.rmtree(base, ignore_errors=True)
        took += timed(lambda: generate_fast(base, n))
        (base / ".generated").write_text("ok")
    asked = generate_chat(chat, turns)  # (the same file each time: it is seeded)

    def indexed(part: Path) -> None:
        shutil.copytree(base, part, ignore=shutil.ignore_patterns(".generated"))
        proc([*MEMLINK, "reindex", "--vault", str(part)], ENV)
        proc([*MEMLINK, "import-chat", "--vault", str(part), str(chat)], ENV)

    took += build(ready, indexed)
    variant = work / f"m{n}-{first_word.lower()}-{shared:g}" if shared > 0 else None

    def shared_names(part: Path) -> None:
        generate_fast(part, n, shared=shared, first_word=first_word)
        proc([*MEMLINK, "reindex", "--vault", str(part)], ENV)

    if variant is not None:
        took += build(variant, shared_names)
    return {"base": base, "ready": ready, "shared": variant, "chat": chat, "asked": asked, "took": took}


ENV: dict[str, str] = {}


def write_rows(n: int, work: Path, base: Path, row: Callable[[str, str, str], None]) -> None:
    """The rows that write, on a fresh copy of the never-seen vault ``base``."""
    from engine import Vault
    from engine.index.embed import bundled_model_path
    from engine.sessions.log import append_events

    model = str(bundled_model_path())
    fresh = work / f"fresh{n}"
    shutil.rmtree(fresh, ignore_errors=True)
    shutil.copytree(base, fresh, ignore=shutil.ignore_patterns(".generated", ".memlink"))  # (never opened: no derived state)
    os.sync()  # (the copy on disk first: neither side pays for writing back the copy's pages)
    scratch = Path(tempfile.mkdtemp(prefix="scratch-", dir=work))
    try:
        files = apparent(fresh, lambda name: name.endswith(".md") or name == SIDECAR, hidden=False)
        s, rss, _ = proc([*MEMLINK, "reindex", "--vault", str(fresh)], ENV)
        b = timed(lambda: raw_build(fresh, scratch / "raw"))
        shutil.rmtree(scratch / "raw", ignore_errors=True)
        row("first open of a never-seen vault", f"{s:.1f} s ({rss:.0f} MB peak)", f"{b:.1f} s")
        opened = apparent(fresh / ".memlink")

        scan = timed(lambda: full_scan(fresh))
        s, _, _ = proc([*MEMLINK, "lint", "--vault", str(fresh)], ENV)
        row("first lint of the copy", f"{s:.2f} s", f"{scan:.2f} s")
        one = sorted(Path(fresh, "entities").glob("*.md"))[n % 7]
        one.write_text(one.read_text(encoding="utf-8") + "\nOne more line.\n", encoding="utf-8")
        s, _, _ = proc([*MEMLINK, "lint", "--vault", str(fresh)], ENV)
        row("lint after one change", f"{s:.2f} s", f"{timed(lambda: full_scan(fresh)):.2f} s")
        s, _, _ = proc([*MEMLINK, "lint", "--full", "--vault", str(fresh)], ENV)
        row("full lint (--full)", f"{s:.2f} s", f"{timed(lambda: full_scan(fresh)):.2f} s")
        s, _, _ = proc([*MEMLINK, "dream", "--provider", "rules", "--vault", str(fresh)], ENV)
        row("dream (rules)", f"{s:.2f} s", f"{timed(lambda: full_scan(fresh)):.2f} s")
        s, _, _ = proc([*MEMLINK, "doctor", "--vault", str(fresh)], ENV)
        b, _, _ = proc(py(RAW_DOCTOR, str(fresh), model, str(REPO / "benchmarks")), ENV)
        row("doctor, one process", f"{s:.2f} s", f"{b:.2f} s")

        session = "bench-one-turn"
        vault = Vault.open(fresh)
        append_events(vault, session, [
            {"session": session, "id": "q1", "role": "user", "ts": "2026-12-01T10:00:00Z",
             "content": "I moved to Lisbon last spring and I prefer green tea in the mornings."},
            {"session": session, "id": "a1", "role": "assistant", "ts": "2026-12-01T10:00:05Z",
             "content": "Noted: Lisbon, and green tea in the mornings."}])
        vault.close()
        s, _, _ = proc([*MEMLINK, "commit", "--vault", str(fresh), session], ENV)
        b, _, _ = proc(py(RAW_COMMIT, str(fresh), session, str(scratch / "commit.md")), ENV)
        row("commit of one chat turn, one process", f"{s:.2f} s", f"{b:.2f} s")

        ents = sorted(str(p.relative_to(fresh)) for p in Path(fresh, "entities").glob("*.md"))
        linked = {(r["from_uri"], r["to_uri"]) for r in json.loads((fresh / "entities" / SIDECAR).read_text(encoding="utf-8"))}
        rng = random.Random(9)
        pairs: list[tuple[str, str]] = []
        while len(pairs) < 32:
            a, b_ = rng.sample(ents, 2)
            if (a, b_) not in linked and (b_, a) not in linked and (a, b_) not in pairs and (b_, a) not in pairs:
                pairs.append((a, b_))
        cli = [proc([*MEMLINK, "link", "--vault", str(fresh), "--type", "related_to", a, b_], ENV)[0]
               for a, b_ in pairs[:3]]
        raw_cli = [proc(py(RAW_LINK_ONCE, str(fresh), a, b_, f"p{k}"), ENV)[0] for k, (a, b_) in enumerate(pairs[3:6])]
        row("link write, one process", f"{statistics.median(cli):.2f} s", f"{statistics.median(raw_cli):.2f} s")
        notes = [str(Path(p).relative_to(fresh)) for p in random.Random(5).sample(note_paths(fresh), 24)]
        mine = json_of(MINE_WRITES, str(fresh), json.dumps(pairs[6:19]), json.dumps(notes[:12]))
        raw = json_of(RAW_WRITES, str(fresh), json.dumps(pairs[19:32]), json.dumps(notes[12:]))
        assert isinstance(mine, dict) and isinstance(raw, dict)
        row("link write, in process p50", f"{statistics.median(mine['links']):.1f} ms", f"{statistics.median(raw['links']):.1f} ms")
        row("note write, in process p50", f"{statistics.median(mine['writes']):.1f} ms", f"{statistics.median(raw['writes']):.1f} ms")
        row("`.memlink/` size after the first open", mb(opened), f"{mb(files)} of notes and sidecars")
        row("`.memlink/` size after the rows that write", mb(apparent(fresh / ".memlink")),
            f"{mb(apparent(fresh, hidden=False))} of the vault's files then (with the chat sessions)")
    finally:
        shutil.rmtree(fresh, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)


def in_process(label: str, mine: str, raw: str, root: Path, raw_args: list[str], queries: list[str],
               row: Callable[[str, str, str], None]) -> None:
    """Each query timed in a process of each side, TIMED_RUNS runs in turn: the median of
    their p50s and of their p95s (this machine's speed moves from minute to minute)."""
    runs: dict[str, list[list[float]]] = {"mine": [], "raw": []}
    for _ in range(TIMED_RUNS):
        runs["mine"].append(json_of(mine, str(root), *queries))  # type: ignore[arg-type]
        runs["raw"].append(json_of(raw, str(root), *raw_args, *queries))  # type: ignore[arg-type]
    for side, times in runs.items():
        print(f"  ({label}, {side}: p50 of each run {', '.join(f'{statistics.median(t):.2f}' for t in times)} ms)",
              file=sys.stderr)

    def typical(side: str) -> str:
        p50 = statistics.median(statistics.median(t) for t in runs[side])
        p95 = statistics.median(pct(t, .95) for t in runs[side])
        return f"{p50:.2f} / {p95:.2f} ms"

    row(label, typical("mine"), typical("raw"))


def run(n: int, work: Path, nq: int, turns: int, shared: float, first_word: str, search_only: bool = False) -> None:
    from engine.index.embed import bundled_model_path
    from engine.model.config import load_config

    made = ensure_vaults(work, n, turns, shared, first_word)
    base, ready = made["base"], made["ready"]
    rows: list[tuple[str, str, str]] = []

    def row(name: str, mine: str, baseline: str) -> None:
        rows.append((name, mine, baseline))
        print(f"  {name}: {mine} | {baseline}", file=sys.stderr, flush=True)

    queries = queries_for(ready, nq)
    model = str(bundled_model_path())
    ef = str(load_config(ready).search.hnsw()["ef_search"])  # (the raw side queries as memlink does)
    if not search_only:
        write_rows(n, work, base, row)

    # Search processes on the indexed copy: the first after a reindex, then warm.
    proc([*MEMLINK, "reindex", "--vault", str(ready)], ENV)
    warm_disk(ready)  # (the rows above pushed the index files and the notes' inodes out of the caches)
    cold, _, _ = proc([*MEMLINK, "search", "--vault", str(ready), queries[0]], ENV)
    raw_cold, _, _ = proc(py(RAW_QUERY, str(ready), model, ef, queries[0]), ENV)
    warm = [proc([*MEMLINK, "search", "--vault", str(ready), q], ENV) for q in queries[1:6]]
    raw_warm = [proc(py(RAW_QUERY, str(ready), model, ef, q), ENV) for q in queries[1:6]]
    row("search process, warm", f"{statistics.median(w[0] for w in warm):.2f} s",
        f"{statistics.median(w[0] for w in raw_warm):.2f} s")
    row("search process, cold (the first after `memlink reindex`)", f"{cold:.2f} s", f"{raw_cold:.2f} s")
    row("peak RSS, search process", f"{max(w[1] for w in warm):.0f} MB", f"{max(w[1] for w in raw_warm):.0f} MB")

    # In a process of its own (this one holds hundreds of MB of earlier rows, and Python's
    # collector then slows every allocation), against raw hnswlib + tantivy in another.
    warm_disk(ready)
    in_process("search in process p50 / p95", MINE_TIMED, RAW_TIMED, ready, [model, ef], queries, row)
    variant = made["shared"]
    if variant is not None:
        named = queries_for(variant, nq, first_word=first_word)
        warm_disk(variant)
        in_process(f"search in process p50 / p95, {shared:.0%} of the names begin with “{first_word}”",
                   MINE_TIMED, RAW_TIMED, variant, [model, ef], named, row)
    vectors = json_of(VECTOR_RECALL, str(ready), model, ef, *queries)
    assert isinstance(vectors, dict)
    row(f"vector recall@10 (hnswlib, ef {ef}) vs an exact scan ({vectors['vectors']:,} vectors)",
        f"{vectors['recall']:.3f} ({vectors['ann_ms']:.2f} ms a query)", f"1.000 ({vectors['exact_ms']:.2f} ms a query)")

    # Recall over the imported chat.
    asked = recall_queries(made["chat"], made["asked"], min(nq, 100))
    first, _, _ = proc([*MEMLINK, "recall", "--vault", str(ready), asked[0]], ENV)
    again = [proc([*MEMLINK, "recall", "--vault", str(ready), q], ENV)[0] for q in asked[1:4]]
    raw_recall = [proc(py(RAW_RECALL_ONCE, str(ready), q), ENV)[0] for q in asked[1:4]]
    row(f"recall, one process ({turns:,} turns)", f"{statistics.median(again):.2f} s (the first {first:.2f} s)",
        f"{statistics.median(raw_recall):.2f} s")
    in_process("recall in process p50 / p95", MINE_RECALL_TIMED, RAW_RECALL_TIMED, ready, [], asked, row)

    note = f"vaults generated and indexed in {made['took']:.0f} s" if made["took"] else "vaults cached"
    print(f"\n### {n:,} notes\n\n({note}; {len(queries)} queries; this process's peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB)\n")
    print("| measure | memlink | baseline | target at 100k |")
    print("|---|---|---|---|")
    for name, mine_s, base_s in sorted(rows, key=lambda r: next(i for i, p in enumerate(ORDER) if r[0].startswith(p))):
        print(f"| {name} | {mine_s} | {base_s} | {target(name)} |")
    sys.stdout.flush()


def sample_search(work: Path) -> None:
    """One search process on a copy of the sample vault (warm, median of 5), beside the raw
    hnswlib + tantivy process on the same copy: what a big vault's search process is
    compared with."""
    from engine.index.embed import bundled_model_path
    from engine.model.config import load_config

    sample = work / "sample"

    def copy(part: Path) -> None:
        shutil.copytree(REPO / "sample_vault", part, ignore=shutil.ignore_patterns(".memlink"))
        proc([*MEMLINK, "reindex", "--vault", str(part)], ENV)

    build(sample, copy)
    proc([*MEMLINK, "search", "--vault", str(sample), "kiln"], ENV)
    warm_disk(sample)
    mine = [proc([*MEMLINK, "search", "--vault", str(sample), "kiln glaze"], ENV)[0] for _ in range(5)]
    model = str(bundled_model_path())
    ef = str(load_config(sample).search.hnsw()["ef_search"])
    raw = [proc(py(RAW_QUERY, str(sample), model, ef, "kiln glaze"), ENV)[0] for _ in range(5)]
    notes = len(note_paths(sample))
    print(f"### The sample vault ({notes} notes)\n\n| measure | memlink | baseline |\n|---|---|---|\n"
          f"| search process, warm | {statistics.median(mine):.2f} s | {statistics.median(raw):.2f} s |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000", help="comma-separated note counts (default 1000,10000)")
    ap.add_argument("--work", type=Path, required=True,
                    help="where the generated vaults are kept between runs (everything this writes goes here)")
    ap.add_argument("--queries", type=int, default=200, help="search questions a size (default 200)")
    ap.add_argument("--turns", type=int, default=0, help="chat turns imported for the recall rows (default: a tenth of "
                    "the notes, at least 200)")
    ap.add_argument("--shared-first-word", type=float, default=0.4, metavar="SHARE",
                    help="share of the notes whose names begin with --first-word in the variant vault (default 0.4; 0: "
                    "no variant)")
    ap.add_argument("--first-word", default="Meeting", help="the word those names begin with (default Meeting)")
    ap.add_argument("--search-only", action="store_true", help="only the search and recall rows")
    args = ap.parse_args()
    if not 0 <= args.shared_first_word < 1:
        ap.error("--shared-first-word is a share: 0 to below 1")
    if not re.fullmatch(r"[A-Za-z]+", args.first_word):
        ap.error("--first-word: one word of letters")
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    # Byte-compile memlink's own modules first: an installed memlink has its .pyc files,
    # while a checkout run with PYTHONDONTWRITEBYTECODE set would compile ~50 modules in
    # every process timed (~0.1 s each).
    import compileall

    for package in ("engine", "memlink_tui", "memlink_mcp", "widgets"):
        compileall.compile_dir(str(REPO / package), quiet=2)
    ENV.update(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONPATH=str(REPO),
               MEMLINK_CONFIG_HOME=str(work / "config"), MEMLINK_HOME=str(work / "home"))
    ENV.pop("MEMLINK_VAULT", None)
    scratch = work / "tmp"  # temporary files, this process's and its children's, go under --work too
    scratch.mkdir(exist_ok=True)
    ENV["TMPDIR"] = tempfile.tempdir = str(scratch)
    sample_search(work)
    for n in (int(s) for s in args.sizes.split(",") if s.strip()):
        turns = args.turns or max(200, n // 10)
        run(n, work, args.queries, turns, args.shared_first_word, args.first_word, args.search_only)


if __name__ == "__main__":
    main()
