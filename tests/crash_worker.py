"""A writer for the crash tests: links, unlinks and note edits in a tight loop.

Usage: python crash_worker.py VAULT SEED [N]  (N operations, default: forever).
Prints "ready" once the vault is open so the parent knows when to start its clock.
"""

import os
import random
import sys

import engine.storage.sidecars as sidecars
from engine import MemlinkError, Vault

# The kill tests shrink the sidecars' thresholds so that every sidecar takes log lines
# and compaction runs often (docs/DESIGN.md, "Units of work").
if os.environ.get("MEMLINK_TEST_LOG_MODE_BYTES"):
    sidecars.LOG_MODE_BYTES = int(os.environ["MEMLINK_TEST_LOG_MODE_BYTES"])
if os.environ.get("MEMLINK_TEST_COMPACT_RATIO"):
    sidecars.COMPACT_RATIO = float(os.environ["MEMLINK_TEST_COMPACT_RATIO"])


def main() -> None:
    vault = Vault.open(sys.argv[1])
    rng = random.Random(int(sys.argv[2]))
    limit = int(sys.argv[3]) if len(sys.argv) > 3 else None
    notes = [e.uri for e in vault.catalog.all()]
    print("ready", flush=True)
    done = 0
    while limit is None or done < limit:
        a, b = rng.sample(notes, 2)
        roll = rng.random()
        try:
            if roll < 0.55:
                vault.link(a, b, rng.choice(["related_to", "belongs_to", "caused_by", "derived_from", "contradicts", "evolved_from"]),
                           weight=round(rng.random(), 2), t_line_ranges=rng.choice([None, "1", "2", "1-2"]),
                           match_text=rng.choice([None, "line"]), description=f"op {done}")
            elif roll < 0.8:
                vault.unlink(a, b)
            else:
                note = vault.read_note(a)
                lines = note.fields.get("content", "").split("\n")
                rng.shuffle(lines)
                if rng.random() < 0.3:
                    lines[0] = f"fresh line {rng.randint(0, 999)}"
                vault.write_note(note.memory_type, {"content": "\n".join(lines)}, uri=a)
        except MemlinkError:
            pass  # e.g. unlinking a pair with no link
        done += 1


if __name__ == "__main__":
    main()
