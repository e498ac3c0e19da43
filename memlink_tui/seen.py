"""Which reports the person has seen (the pane bar's "N new" on Reports), kept per vault
in `.memlink/seen-reports.json`: a report seen stays seen after a restart, and one
written while the app was closed (a dream run by cron, `memlink dream`) is new when it
opens. The first time the app opens a vault, the reports already there count as seen."""

from __future__ import annotations

import json

from engine import Vault
from engine.storage.atomic import atomic_write_text

SEEN_FILE = "seen-reports.json"  # in the vault's `.memlink/`


class SeenReports:
    def __init__(self, vault: Vault) -> None:
        self.path = vault.state_dir / SEEN_FILE
        self.writable = not vault.read_only
        self.seen = self._read()  # None: never recorded for this vault

    def _read(self) -> set[str] | None:
        try:
            seen = json.loads(self.path.read_text(encoding="utf-8"))["seen"]
            return {uri for uri in seen if isinstance(uri, str)}
        except (OSError, ValueError, KeyError, TypeError):
            return None  # (a damaged file is written again whole)

    def new(self, reports: set[str]) -> int:
        """How many of ``reports`` (the vault's reports now) were not seen."""
        if self.seen is None:
            self.mark(reports)
        assert self.seen is not None  # (marked just now)
        return len(reports - self.seen)

    def mark(self, reports: set[str]) -> None:
        """``reports`` are seen (the reports pane was shown); a report gone is forgotten."""
        if reports == self.seen:
            return
        self.seen = set(reports)
        if not self.writable:
            return  # a read-only vault: remembered until the app quits
        try:
            atomic_write_text(self.path, json.dumps({"seen": sorted(reports)}, ensure_ascii=False, indent=1))
        except OSError:
            pass  # (a full disk: remembered until the app quits; the badge is only a count)
