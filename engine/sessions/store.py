"""Turn memories in TinyDB, one shard per session (a turn's write costs its session's
file, not the history). Stable SHA-256 ids: a turn memory from its session and sorted
source message ids, a term from its normalised text, a triple from memory + subject +
predicate + object, so a replay creates nothing new. A turn memory holds its triples, so
replacing a turn's triples is one atomic write."""

from __future__ import annotations

import hashlib
import json
import re
from typing import TYPE_CHECKING, Any

from .contract import TurnExtraction
from .events import TurnMemoryRecord
from .log import Turn

if TYPE_CHECKING:
    from ..vault import Vault


def sha(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:24]


def norm_term(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def term_id(text: str) -> str:
    return sha("term", norm_term(text).lower())


def memory_id(turn: Turn) -> str:
    return sha("turn", turn.session, *sorted(turn.source_ids))


def _shard(session: str) -> str:
    return "turns-" + re.sub(r"[^a-z0-9_.-]", "_", session.lower())[:80] + "-" + sha(session)[:6]


def lost_sessions(vault: Vault) -> list[str]:
    """Sessions with a log but no shard: their turn memories were lost (`.memlink/` deleted)
    and are rebuilt from the log (``importer.restore_turns``). A listing and a stat each."""
    folder = vault.root / "sessions"
    logs = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    store = TurnStore(vault)
    return [p.stem for p in logs if not store.has(p.stem)]


class TurnStore:
    """Writes take ``TurnMemoryRecord`` models (checked once, when made); reads give the
    raw rows, which recall scans in its inner loops."""

    def __init__(self, vault: Vault):
        self.vault = vault

    def _rows(self, session: str) -> list[dict[str, Any]]:
        """The session's turn memories as stored (raw rows, in order)."""
        data = self.vault.state.db(_shard(session)).storage.read() or {}
        return list((data.get("turns") or {}).values())

    def _write(self, session: str, rows: list[dict[str, Any]]) -> None:
        """Replace the session's turn memories in one atomic write of its shard (never a
        truncate and an insert: a kill between the two would lose them all). Writes edit
        the raw rows, as the catalog does; TinyDB is only used to read."""
        storage = self.vault.state.db(_shard(session)).storage
        data = storage.read() or {}
        data["turns"] = {str(n): row for n, row in enumerate(rows, 1)}
        storage.write(data)

    def has(self, session: str) -> bool:
        """Whether the session has a shard (extraction ran for it, or it was restored)."""
        return self.vault.state.exists(_shard(session))

    def keep(self, session: str) -> None:
        """Give the session a shard (an empty one if it has no turn memories yet), so that
        a session without one means its derived state was lost."""
        if not self.has(session):
            self._write(session, self._rows(session))

    def get(self, session: str, mem_id: str) -> dict[str, Any] | None:
        return next((r for r in self._rows(session) if r["id"] == mem_id), None)

    def ids(self, session: str) -> set[str]:
        return {r["id"] for r in self._rows(session)}

    def put(self, turn: Turn, extraction: TurnExtraction) -> TurnMemoryRecord:
        doc = self.doc(turn, extraction)
        self.put_many([doc])
        return doc

    def put_many(self, docs: list[TurnMemoryRecord]) -> None:
        """Many turn memories: each session's shard written once."""
        by_session: dict[str, list[dict[str, Any]]] = {}
        for doc in docs:
            by_session.setdefault(doc.session, []).append(doc.model_dump())
        for session, rows in by_session.items():
            keep = {r["id"]: r for r in self._rows(session)}
            keep.update({r["id"]: r for r in rows})
            self._write(session, list(keep.values()))

    def prune(self, session: str, keep: set[str]) -> int:
        """Drop the session's turn memories whose turn is gone from the projection (a turn
        that grew, e.g. an answer imported after its question). Returns how many."""
        rows = self._rows(session)
        stay = [r for r in rows if r["id"] in keep]
        if len(stay) != len(rows):
            self._write(session, stay)
        return len(rows) - len(stay)

    def signature(self) -> list[list[Any]]:
        """What the shards look like (name and stamp): equal signatures mean nothing was
        written since (every write is an atomic rename, or a new text in memory)."""
        return [[name, *stamp] for name, stamp in self.vault.state.shards("turns-")]

    def stamps(self) -> dict[str, str]:
        """Each shard's stamp by name (a stat each): a shard whose stamp is unchanged was not
        written since, so the turn index reads only the shards whose stamp moved."""
        return {name: json.dumps(list(stamp)) for name, stamp in self.vault.state.shards("turns-")}

    def shard_rows(self, name: str) -> list[dict[str, Any]]:
        """The turn memories of one shard (by its name, as ``stamps`` gives it)."""
        data = self.vault.state.db(name).storage.read() or {}
        return list((data.get("turns") or {}).values())

    def doc(self, turn: Turn, extraction: TurnExtraction) -> TurnMemoryRecord:
        mem = memory_id(turn)
        triples: list[dict[str, str]] = []
        for t in extraction.triples:
            s, o = norm_term(t.subject), norm_term(t.object)
            p = norm_term(t.predicate)
            triples.append({"id": sha("triple", mem, term_id(s), p, term_id(o)), "subject": s, "subject_id": term_id(s),
                            "predicate": p, "object": o, "object_id": term_id(o)})
        # One validation of the whole record (its triples too): cheaper than a model per triple.
        return TurnMemoryRecord.model_validate({
            "id": mem, "session": turn.session, "ts": turn.ts, "summary": extraction.summary,
            "outcome": extraction.outcome.value, "sources": turn.source_ids,
            "question": turn.question["content"], "answer": turn.answer["content"], "triples": triples,
            "pos": turn.pos, "speakers": sorted({m.speaker for m in turn.messages if m.speaker is not None}),
        })

    def all(self) -> list[dict[str, Any]]:
        out = []
        for name, _stamp in self.vault.state.shards("turns-"):
            data = self.vault.state.db(name).storage.read() or {}
            out += list((data.get("turns") or {}).values())
        return out
