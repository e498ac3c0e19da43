"""Turn memories: what extraction made of each chat turn (its summary, outcome and
triples), kept in the vault beside the session's log as `sessions/<id>.memories.json`,
one small TinyDB document a session (docs/DESIGN.md, "Turn memory"). They are data, not
derived state: an LLM wrote them, and deleting `.memlink/` keeps them. A turn's write
costs its session's file, never the history. Stable SHA-256 ids: a turn memory from its
session and sorted source message ids, a term from its normalised text, a triple from
memory + subject + predicate + object, so a replay creates nothing new."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tinydb import TinyDB
from tinydb.storages import Storage

from ..storage.atomic import atomic_write_text
from .contract import TurnExtraction
from .events import TurnMemoryRecord
from .log import Turn

if TYPE_CHECKING:
    from ..storage.vault import Vault

SUFFIX = ".memories.json"


class AtomicJSONStorage(Storage):
    """TinyDB's storage as one JSON file written atomically (temp + fsync + rename); in
    ``memory`` (a dict by path) when the vault is read-only."""

    def __init__(self, path: str | Path, memory: dict[str, str] | None = None):
        self.path = Path(path)
        self.memory = memory

    def read(self) -> dict | None:
        if self.memory is not None and str(self.path) in self.memory:
            return json.loads(self.memory[str(self.path)])
        try:
            data = json.loads(self.path.read_text(encoding="utf-8") or "{}")
        except FileNotFoundError:
            return None
        except (ValueError, OSError):
            return None  # (an unreadable file: `memlink check` names it; extraction writes it anew)
        return data if isinstance(data, dict) else None

    def write(self, data: dict) -> None:
        text = json.dumps(data, ensure_ascii=False, indent=1)
        if self.memory is not None:
            self.memory[str(self.path)] = text
            return
        atomic_write_text(self.path, text + "\n")

    def close(self) -> None:
        pass


class _Written:
    """A read-only vault's turn memories, written in this process only."""

    def __init__(self, _vault: Vault) -> None:
        self.files: dict[str, str] = {}


def sha(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:24]


def norm_term(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def term_id(text: str) -> str:
    return sha("term", norm_term(text).lower())


def memory_id(turn: Turn) -> str:
    return sha("turn", turn.session, *sorted(turn.source_ids))


def lost_sessions(vault: Vault) -> list[str]:
    """Sessions with a log but no turn memories: never extracted (a log imported by hand,
    or from before memories were kept beside it) and made from the log with the rules
    (``importer.restore_turns``). A listing and a stat each."""
    folder = vault.root / "sessions"
    logs = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    store = TurnStore(vault)
    return [p.stem for p in logs if not store.has(p.stem)]


class TurnStore:
    """Writes take ``TurnMemoryRecord`` models (checked once, when made); reads give the
    raw rows, which recall scans in its inner loops."""

    def __init__(self, vault: Vault):
        self.vault = vault
        self.folder = vault.root / "sessions"
        self._memory = vault.shared(_Written, _Written).files if vault.read_only else None

    def _db(self, session: str) -> TinyDB:
        return TinyDB(self.folder / f"{session}{SUFFIX}", storage=AtomicJSONStorage, memory=self._memory)

    def rows(self, session: str) -> list[dict[str, Any]]:
        """The session's turn memories (raw rows, in order)."""
        data = self._db(session).storage.read() or {}
        return list((data.get("turns") or {}).values())

    _rows = rows

    def _write(self, session: str, rows: list[dict[str, Any]]) -> None:
        """Replace the session's turn memories in one atomic write of its file (never a
        truncate and an insert: a kill between the two would lose them all), under the
        vault's write lock."""
        storage = self._db(session).storage
        data = storage.read() or {}
        data["turns"] = {str(n): row for n, row in enumerate(rows, 1)}
        if self.vault.read_only:
            storage.write(data)
        else:
            with self.vault.writing():
                storage.write(data)
        # Recall follows the change feed: its index syncs this session on its next question.
        self.vault.store.try_write("the change feed", lambda w: w.changed("turn-memories", [session]))

    def has(self, session: str) -> bool:
        """Whether the session has a turn memories file (extraction ran for it)."""
        path = self.folder / f"{session}{SUFFIX}"
        return (self._memory is not None and str(path) in self._memory) or path.is_file()

    def keep(self, session: str) -> None:
        """Give the session a turn memories file (an empty one if it has no turn memories
        yet), so that a session without one means it was never extracted."""
        if not self.has(session):
            self._write(session, self._rows(session))

    def get(self, session: str, mem_id: str) -> dict[str, Any] | None:
        return next((r for r in self._rows(session) if r["id"] == mem_id), None)

    def summaries(self, session: str) -> dict[str, str]:
        """The session's turn summaries, by turn memory id."""
        return {r["id"]: r["summary"] for r in self._rows(session)}

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

    def stamps(self) -> dict[str, str]:
        """Each session's turn memories file as it is now (inode, mtime, size; in memory,
        its size and hash), by session: the turn index reads only those that moved."""
        out: dict[str, str] = {}
        if self.folder.is_dir():
            for entry in os.scandir(self.folder):
                if entry.name.endswith(SUFFIX) and entry.is_file():
                    st = entry.stat()
                    out[entry.name[: -len(SUFFIX)]] = f"{st.st_ino}:{st.st_mtime_ns}:{st.st_size}"
        for path, text in (self._memory or {}).items():
            name = Path(path).name
            out[name[: -len(SUFFIX)]] = f"memory:{len(text)}:{hashlib.sha256(text.encode()).hexdigest()[:12]}"
        return dict(sorted(out.items()))

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
        return [row for session in self.stamps() for row in self.rows(session)]
