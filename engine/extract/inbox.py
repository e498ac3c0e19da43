"""The inbox: a folder (``ingest.inbox`` in memlink.yaml) whose files are imported by
`memlink ingest --inbox` and by the app in the background (docs/DESIGN.md, "Units of work":
the inbox). Its files are new ones: one named as a file imported before becomes a note of
its own (``name-2.md``), never a later text of the earlier one. A file imported whole moves
to the inbox's ``done/`` folder, keeping its path under the inbox; one that failed stays
where it is, named in the result, and is tried again next time. A copy edited in the vault
is left as it is (``edited`` in the result; the app says so). Killed between the import
and the move, the next run finds the file imported already and just moves it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from .batch import BatchResult, ingest_batch
from .inputs import InputError

if TYPE_CHECKING:
    from ..storage.vault import Vault
    from .inputs import Extractor

DONE = "done"


def inbox_folder(vault: Vault) -> Path:
    """The vault's inbox folder, or InputError saying why there is none to read."""
    setting = vault.config.ingest.inbox
    if not setting:
        raise InputError("no inbox: set ingest.inbox in memlink.yaml to a folder outside the vault")
    folder = Path(os.path.realpath(vault.root / Path(setting).expanduser()))
    if folder == vault.root or vault.root in folder.parents:
        raise InputError(f"ingest.inbox ({setting}) is inside the vault; the inbox must be a folder outside it")
    if not folder.is_dir():
        raise InputError(f"ingest.inbox: {folder} is not a folder")
    return folder


def waiting(folder: Path) -> list[Path]:
    """What the inbox holds to import: its entries but ``done/`` and hidden ones."""
    return sorted(p for p in folder.iterdir() if not p.name.startswith(".") and p.name != DONE)


def import_inbox(vault: Vault, *, wiki: bool = True, extractor: Extractor | None = None) -> tuple[BatchResult, list[str]]:
    """Import the inbox's files as one batch; move each one imported (or known already) to
    ``done/``. Returns the batch and the files moved (as paths under the inbox)."""
    folder = inbox_folder(vault)
    entries = waiting(folder)
    if not entries:
        return BatchResult(), []
    result = ingest_batch(vault, entries, wiki=wiki, extractor=extractor, fresh=True)
    unfinished = {Path(os.path.realpath(f["path"])) for f in result.failed + result.pending}
    moved = []
    for r in result.files:
        path = Path(os.path.realpath(r.path))
        if path in unfinished or not path.is_file() or folder not in path.parents:
            continue
        rel = path.relative_to(folder)
        target = _free(folder / DONE / rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, target)
        moved.append(rel.as_posix())
    return result, moved


def _free(path: Path) -> Path:
    """``path``, or ``name-2.ext``… when a file of that name is done already."""
    n, candidate = 2, path
    while candidate.exists():
        candidate, n = path.with_name(f"{path.stem}-{n}{path.suffix}"), n + 1
    return candidate
