from __future__ import annotations

import contextlib
import gc
import io
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from engine import Vault

REPO = Path(__file__).resolve().parent.parent


def run_unprivileged(*args: str) -> subprocess.CompletedProcess:
    """`memlink ARGS…` in a process of its own that file permissions bind: as root, without
    the capabilities that let root read and write anywhere (skipped where setpriv is missing)."""
    import sys

    drop: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: a folder's permissions bind nobody")
        caps = "-dac_override,-dac_read_search,-fowner"
        drop = [setpriv, "--bounding-set", caps, "--inh-caps", caps]
    return subprocess.run([*drop, sys.executable, "-m", "memlink_tui", *args], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
SAMPLE = REPO / "sample_vault"


@pytest.fixture
def vault(tmp_path: Path) -> Vault:
    """An empty vault in a temp folder."""
    return Vault.init(tmp_path / "vault", name="test")


@pytest.fixture
def sample(tmp_path: Path) -> Vault:
    """A fresh copy of the sample vault."""
    target = tmp_path / "sample"
    shutil.copytree(SAMPLE, target, ignore=shutil.ignore_patterns(".memlink"))
    return Vault.open(target)


def ingested(tmp_path: Path, pages: dict[str, str]) -> tuple[Path, subprocess.CompletedProcess]:
    """A new vault (the rules provider) holding a folder ``src`` of these pages (path -> text),
    imported as sources only: the vault and the import's run. The folder stays, to change
    and import again."""
    src = tmp_path / "src"
    for path, text in pages.items():
        (src / path).parent.mkdir(parents=True, exist_ok=True)
        (src / path).write_text(text, encoding="utf-8")
    root = tmp_path / "v"
    assert memlink("init", vault=root).returncode == 0
    set_llm(root, provider="rules").close()
    return root, memlink("ingest", str(src), "--no-wiki", vault=root)


def memlink(*args: str, vault: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """The `memlink` command line run in this process, as a process of its own would run it:
    its output captured, ``env`` set, and the LLM provider it chose forgotten afterwards
    (the collector's thresholds it raises: ``_collector``). A Python process costs half a
    second of imports; test_cli.py runs the real entry point in a process of its own."""
    from engine.llm.registry import REGISTRY
    from memlink_tui.cli import main

    argv = [*(["--vault", str(vault)] if vault is not None else []), *args]
    out, err = io.StringIO(), io.StringIO()
    chosen, checks = dict(REGISTRY._chosen), REGISTRY.checks
    REGISTRY.forget()
    saved = {name: os.environ.get(name) for name in env or {}}
    os.environ.update(env or {})
    try:
        with contextlib.chdir(REPO), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse: --help, --version, a usage error
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        REGISTRY.forget()
        REGISTRY._chosen.update(chosen)
        REGISTRY.checks = checks
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


def make_pair(v: Vault):
    """Two small notes to link in tests."""
    a = v.write_note("entity", {"name": "Caroline", "kind": "person", "content": "Caroline leads Atlas.\nShe likes tea.\nShe runs on Sundays."})
    b = v.write_note("preference", {"topic": "Python code style", "sentiment": "dislike", "content": "User dislikes type hints.\nUser prefers concise comments."})
    return a, b


@pytest.fixture(autouse=True)
def _user_config(tmp_path_factory, monkeypatch):
    """The app's user settings (theme, provider) and demo copies go to temp folders,
    never the user's own ~/.config or ~/.local/share."""
    monkeypatch.setenv("MEMLINK_CONFIG_HOME", str(tmp_path_factory.mktemp("config")))
    monkeypatch.setenv("MEMLINK_HOME", str(tmp_path_factory.mktemp("data")))


@pytest.fixture(autouse=True)
def _collector():
    """A one-shot command run in this process raises the collector's thresholds for the
    rest of it (memlink_tui.cli.ONE_SHOT_GC); the next test starts from the usual ones."""
    threshold = gc.get_threshold()
    yield
    gc.set_threshold(*threshold)


def set_llm(root: Path, **llm) -> Vault:
    """Rewrite the vault's `llm:` settings (e.g. provider="rules", or a stub's host) and
    open it again."""
    import yaml

    cfg = yaml.safe_load((root / "memlink.yaml").read_text())
    cfg["llm"] = llm
    (root / "memlink.yaml").write_text(yaml.safe_dump(cfg, allow_unicode=True))
    return Vault.open(root)


def uncommitted(root: Path) -> None:
    """The sample vault's chats as if never committed (their commit marks taken out): what
    committing them makes is what these tests look at."""
    for log in (root / "sessions").glob("*.jsonl"):
        lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
        log.write_text("".join(line for line in lines if '"kind": "commit"' not in line), encoding="utf-8")


async def settle(app, pilot) -> None:
    """Let the app's navigation finish: it runs in workers (one at a time) that may start
    more workers; then the screen catches up."""
    from textual.worker import WorkerCancelled

    for _ in range(3):
        try:
            await app.workers.wait_for_complete()
        except WorkerCancelled:
            pass  # an exclusive worker replaced by a newer one, which the next round waits for
        await pilot.pause()


async def typed_at_once(app, pilot, *keys: str) -> None:
    """``keys`` as a terminal sends what is typed fast or pasted: all of them reach the app
    before any is handled (Pilot's press waits for each key to be handled)."""
    from textual import events

    for key in keys:
        app.post_message(events.Key(key, key if len(key) == 1 else None))
    await settle(app, pilot)


async def open_at(app, pilot, pane: str, uri: str | None = None) -> None:
    """The app settled after start, then on ``pane`` (at note ``uri``), settled again."""
    await settle(app, pilot)
    if uri is None:
        await app.run_action(f"go('{pane}')")
    else:
        app.go(pane, uri)
    await settle(app, pilot)
