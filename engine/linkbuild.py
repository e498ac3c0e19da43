"""The whole link index built by a second process (docs/DESIGN.md, "Vault format").

`memlink reindex` on a vault never opened builds three things: the catalog and the
search index, which hold this process, and the link index (reading and validating every
sidecar: ~11 s at 100k notes), which needs nothing from them. A second process builds
the link index meanwhile, on the other core (a thread would share one interpreter).
A first build is one SQLite transaction (``LinkStore.refresh``), so a second builder
or a reader elsewhere sees the empty index or the whole one; and the result needs no
trust: the caller brings the index in step itself afterwards, which re-reads only what
the second process did not (everything, if it failed)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

@dataclass
class Built:
    folders: int  # read from their sidecars by the second process
    seconds: float


class LinkBuild:
    """A second process building a vault's link index (``python -m engine.linkbuild``)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self._proc = proc

    @classmethod
    def start(cls, root: Path, index_path: Path | None) -> LinkBuild | None:
        """A build under way, or None when it cannot run elsewhere: an index kept in
        memory (a read-only vault), an interpreter that is not Python's, no process to
        be had. The caller then builds it itself."""
        name = os.path.basename(sys.executable or "").lower()
        if index_path is None or not name.startswith(("python", "pypy")):
            return None
        try:
            # -P: the current folder is not put on the path (a project of the user's with
            # an `engine` package of its own would be imported instead of ours).
            proc = subprocess.Popen([sys.executable, "-P", "-m", "engine.linkbuild", str(root), str(index_path)],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError:
            return None
        return cls(proc)

    def finish(self, timeout: float = 900.0) -> Built | None:
        """Wait for the build: what it did, or None if it failed or took too long (it is
        stopped, its transaction rolled back; the caller's own refresh then does it all)."""
        try:
            out, err = self._proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            log.warning("the link index build in a second process took over %.0f s: stopped", timeout)
            return None
        if self._proc.returncode != 0:
            last = err.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no message"]
            log.warning("the link index build in a second process failed (exit %s): %s", self._proc.returncode, last[0])
            return None
        try:
            said = json.loads(out)
            return Built(int(said["folders"]), float(said["seconds"]))
        except (ValueError, KeyError, TypeError):
            return None

    def stop(self) -> None:
        """End the build now (the caller gave up on it)."""
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.communicate()


def main(argv: list[str]) -> int:
    from .linkstore import LinkStore
    from .uris import PathResolver

    root, index_path = Path(argv[0]), Path(argv[1])
    started = time.perf_counter()
    store = LinkStore(root, PathResolver(root), index_path)
    try:
        folders = store.refresh()
        if store.path is None:  # the file could not be written (a full disk): nothing was built for the caller
            print("the link index file could not be written", file=sys.stderr)
            return 1
    finally:
        store.close()
    print(json.dumps({"folders": folders, "seconds": round(time.perf_counter() - started, 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
