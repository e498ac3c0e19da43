"""A review action or an undo that SIGKILLs itself at a chosen step of its commit.

Usage: python review_crash_worker.py VAULT (keep-a|keep-b|merge|dismiss|research|undo|link|move) A B KILL_AT

Every file operation of the journal (writing the journal, each file it applies, the log
append, removing the journal), of the sidecars (a sidecar rewritten, a link-log line
appended, a log removed) and of the link index (a whole sidecar put back) is a step; the
process kills itself, for real, just before step KILL_AT (1-based). Prints "done" when
the action finished before that step.
"""

import itertools
import os
import signal
import sys

import crash_worker  # noqa: F401 (sets the sidecars' test thresholds from the environment)

import engine.storage.journal as journal
import engine.storage.linkindex as linkindex
import engine.storage.sidecars as sidecars
from engine import Vault
from engine.review.actions import review, undo

steps = itertools.count(1)  # (one step each, also when files are written from several threads)


def killing(fn):
    def step(*args, **kwargs):
        if next(steps) == int(sys.argv[5]):
            os.kill(os.getpid(), signal.SIGKILL)
        return fn(*args, **kwargs)
    return step


def main() -> None:
    root, action, a, b = sys.argv[1:5]
    for name in ("atomic_write_text", "remove_file", "append_jsonl"):
        setattr(journal, name, killing(getattr(journal, name)))
    for name in ("atomic_write_text", "remove_file", "append_bytes"):  # the sidecars' own writes
        setattr(sidecars, name, killing(getattr(sidecars, name)))
    for name in ("atomic_write_text", "remove_file"):  # a whole sidecar put back (undo)
        setattr(linkindex, name, killing(getattr(linkindex, name)))
    vault = Vault.open(root)
    if action == "undo":
        undo(vault)
    elif action == "move":
        from engine.review.move import move_note

        move_note(vault, a, b)
    elif action == "link":
        vault.link(a, b, "caused_by", weight=0.6, description="killed or not")
    else:
        review(vault, a, b, action, text="Merged: both are true at different times.")
    print("done", flush=True)


if __name__ == "__main__":
    main()
