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


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
@pytest.mark.skipif(not MEMLINK.exists(), reason="the memlink script is not installed next to this Python")
def test_first_journey_in_tmux():
    env = dict(os.environ, MEMLINK=str(MEMLINK))
    result = subprocess.run([str(REPO / "tools" / "tmux_journey.sh")], capture_output=True, text=True,
                            env=env, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "journey passed" in result.stdout
