"""A memlink command that SIGKILLs itself at a chosen file step.

Usage: python fault_worker.py KILL_AT ARGS...   (ARGS as for `memlink`)

Every file step the command takes from Python — an fsync, a rename, a removal — counts;
the process kills itself, for real, just before step KILL_AT (1-based; 0: never). When it
ends by itself it writes "steps: N" as the last line of stderr, so a caller can choose
kill points within the command's length.
"""

import atexit
import os
import signal
import sys
import threading

import crash_worker  # noqa: F401 (the sidecars' test thresholds from the environment)

steps = 0
KILL_AT = int(sys.argv[1])


counted = threading.Lock()  # (files are written from several threads at once)


def counting(fn):
    def step(*args, **kwargs):
        global steps
        with counted:
            steps += 1
            now = steps
        if now == KILL_AT:
            os.kill(os.getpid(), signal.SIGKILL)
        return fn(*args, **kwargs)
    return step


for name in ("fsync", "replace", "rename", "unlink", "rmdir"):
    setattr(os, name, counting(getattr(os, name)))
atexit.register(lambda: sys.stderr.write(f"steps: {steps}\n"))

from memlink_tui.cli import main  # noqa: E402 (after the counting is in place)

sys.exit(main(sys.argv[2:]))
