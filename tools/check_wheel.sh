#!/usr/bin/env bash
# A wheel that installs anywhere (CI runs this): build it from this checkout without
# packaging warnings, install it into a fresh venv, then copy the demo vault and run the
# doctor from a folder outside the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PY" -m pip wheel . --no-deps --disable-pip-version-check -w "$tmp/wheel" >"$tmp/build.log" 2>&1 \
  || { cat "$tmp/build.log" >&2; exit 1; }
if grep -q "would be ignored\|is absent from the .packages. configuration" "$tmp/build.log"; then
  echo "packaging warnings while building the wheel:" >&2
  grep -A3 "is absent from" "$tmp/build.log" >&2
  exit 1
fi
"$PY" -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$tmp"/wheel/*.whl
cd "$tmp"  # nothing of the repository on any path from here
export MEMLINK_HOME="$tmp/home" MEMLINK_CONFIG_HOME="$tmp/config"
"$tmp/venv/bin/memlink" demo --no-app --vault "$tmp/demo"
test -f "$tmp/demo/memlink.yaml"
"$tmp/venv/bin/memlink" doctor --vault "$tmp/demo"
"$tmp/venv/bin/memlink" search "hot desk booking" --vault "$tmp/demo" >/dev/null
# Both bundled embedding models came with the wheel and load from it, offline.
HF_HUB_OFFLINE=1 "$tmp/venv/bin/python" -c "
from engine.index.embed import BUNDLED_MODELS, load_embedder
for name in BUNDLED_MODELS:
    c = load_embedder(name)
    assert c.notice is None and c.embedder.name == name, c.notice
"
echo "wheel: built without warnings, installed, demo copied and doctor ran outside the repository"
