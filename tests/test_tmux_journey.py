"""The real app in a real terminal: tools/tmux_journey.sh drives it through tmux."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
MEMLINK = Path(sys.executable).parent / "memlink"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
@pytest.mark.skipif(not MEMLINK.exists(), reason="the memlink script is not installed next to this Python")
@pytest.mark.parametrize("size", [(120, 36), (80, 24)])
def test_first_journey_in_tmux(size):
    """Search, open, follow, graph, back; a contradiction reviewed with its card and
    undone; a one-key dream whose reports reach the tree without a key; a chat reply
    streamed word by word by a stand-in Ollama, with a sample session's turn recalled and
    its citation opened with ctrl+r and enter — and at 80×24 a visit to every pane too."""
    cols, rows = size
    env = dict(os.environ, MEMLINK=str(MEMLINK), PYTHON=sys.executable, COLUMNS_OVERRIDE=str(cols), ROWS_OVERRIDE=str(rows))
    tour = ["--journeys", "--tour"] if size == (80, 24) else ["--journeys"]
    result = subprocess.run([str(REPO / "tools" / "tmux_journey.sh"), *tour], capture_output=True, text=True,
                            env=env, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "journey passed" in result.stdout


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
@pytest.mark.skipif(not MEMLINK.exists(), reason="the memlink script is not installed next to this Python")
def test_an_empty_vault_to_a_first_memory_by_the_hints_on_screen():
    """`memlink init`, then the app at 80×24: the empty browser names the chat key, the
    chat names the key that saves, and search finds the memory saved."""
    env = dict(os.environ, MEMLINK=str(MEMLINK), PYTHON=sys.executable, COLUMNS_OVERRIDE="80", ROWS_OVERRIDE="24")
    result = subprocess.run([str(REPO / "tools" / "tmux_journey.sh"), "--first-run"], capture_output=True, text=True,
                            env=env, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "journey passed: an empty vault to a first memory found by search" in result.stdout
