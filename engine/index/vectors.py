"""Vectors: hnswlib (cosine), one wrapper for every index that embeds (the notes' chunks,
the turns). Each vector has a label; the store's ``vectors`` table maps a label to its
key (a note's uri, a turn's id) and part (a note's chunk), so opening reads no map and
a query names its hits with one lookup.

A key's vectors are replaced whole (old labels marked deleted, their slots reused
through ``allow_replace_deleted``); the index grows by resizing. ``save`` writes the
hnswlib file under a new name, then records it with the label changes in the caller's
store transaction; the old file goes after the commit (``saved``), the new one when the
transaction fails (``discard``). A crash in between leaves the old file and the old map,
which still agree."""

from __future__ import annotations

import errno
import json
import uuid
from pathlib import Path

import hnswlib
import numpy as np

from ..storage.atomic import TMP_SUFFIX, remove_file
from ..storage.store import KEY_IDS, Store, Writer
from .embed import nonzero

# Live vectors up to which a failed hnswlib query falls back to an exact scan (~3 ms per 1k).
EXACT_FALLBACK = 20_000


class VectorIndex:
    def __init__(self, space: str, store: Store, folder: Path | None, dims: int, *, M: int = 16,
                 ef_construction: int = 100, ef_search: int = 200, capacity: int = 1024) -> None:
        """An empty index of ``space`` ("notes", "turns"); ``folder`` None: in memory only
        (a read-only vault)."""
        self.space, self.store, self.folder, self.dims = space, store, folder, dims
        self.params = {"M": M, "ef_construction": ef_construction, "ef_search": ef_search}
        self.index = self._new(max(capacity, 16))
        self.next_label = 0
        # Label changes since the last save: label -> (key, part), None: deleted.
        self._pending: dict[int, tuple[str, int] | None] = {}
        self._added: dict[str, list[int]] = {}  # the live labels added since the last save, by key
        self._live = 0

    def _new(self, capacity: int) -> hnswlib.Index:
        index = hnswlib.Index(space="cosine", dim=self.dims)
        index.init_index(max_elements=capacity, M=self.params["M"], ef_construction=self.params["ef_construction"],
                         allow_replace_deleted=True)
        index.set_ef(self.params["ef_search"])
        index.set_num_threads(1)
        return index

    @property
    def meta_key(self) -> str:
        return f"{self.space}.vectors"

    # -- persistence ----------------------------------------------------------------------------
    def load(self) -> bool:
        """Open the saved snapshot; False when there is none usable (the caller rebuilds)."""
        row = self.store.row("SELECT value FROM meta WHERE key = ?", (self.meta_key,))
        if row is None or self.folder is None:
            return False
        try:
            meta = json.loads(row[0])
            if meta["dims"] != self.dims or meta["params"] != self.params:
                return False
            index = hnswlib.Index(space="cosine", dim=self.dims)
            index.load_index(str(self.folder / meta["file"]), max_elements=int(meta["max_elements"]),
                             allow_replace_deleted=True)
        except (OSError, RuntimeError, ValueError, KeyError, TypeError):
            return False
        index.set_ef(self.params["ef_search"])
        index.set_num_threads(1)
        self.index, self.next_label = index, int(meta["next_label"])
        self._pending.clear()
        self._added.clear()
        live = self.store.row("SELECT count(*) FROM vectors WHERE space = ?", (self.space,))
        self._live = live[0] if live else 0
        return True

    def save(self, w: Writer) -> str | None:
        """Write a snapshot under a new name and stage, in ``w``'s transaction, the label
        changes and the name. Returns the name, for ``saved`` once ``w`` commits (or
        ``discard`` when it does not): until then this index is as it was. Raises OSError,
        with nothing written, when the file cannot be (a full disk)."""
        if self.folder is None:
            return None
        name = f"{self.space}-vectors-{uuid.uuid4().hex[:10]}.bin"
        tmp = self.folder / f"{name}{TMP_SUFFIX}"
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            self.index.save_index(str(tmp))
            if tmp.stat().st_size < self._least_size():  # (hnswlib does not check its writes)
                raise OSError(errno.ENOSPC, "the vector snapshot was cut short", str(tmp))
            tmp.replace(self.folder / name)
        except OSError:
            tmp.unlink(missing_ok=True)
            raise
        except RuntimeError as exc:  # (hnswlib's, when it cannot open the file)
            tmp.unlink(missing_ok=True)
            raise OSError(str(exc)) from exc
        w.executemany("DELETE FROM vectors WHERE space = ? AND label = ?", [(self.space, l) for l in self._pending])
        ids = w.ids(sorted({kp[0] for kp in self._pending.values() if kp is not None}))
        w.executemany("INSERT INTO vectors VALUES (?, ?, ?, ?)",
                      [(self.space, l, ids[kp[0]], kp[1]) for l, kp in self._pending.items() if kp is not None])
        meta = {"file": name, "dims": self.dims, "params": self.params, "next_label": self.next_label,
                "max_elements": self.index.get_max_elements()}
        w.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (self.meta_key, json.dumps(meta)))
        return name

    def saved(self, name: str | None) -> None:
        """The transaction that recorded ``name`` (``save``) committed: it is this index's
        snapshot now, and every other snapshot of its space is removed: the one it
        replaces, and one no record names any more (a rebuild after a change of model or
        settings never loaded the old one). The caller holds the lock its saves are made
        under, so no other snapshot of the space is being written."""
        if name is None or self.folder is None:
            return
        self._pending.clear()
        self._added.clear()
        for path in self.folder.glob(f"{self.space}-vectors-*.bin"):
            if path.name != name:
                self.drop_file(path.name)

    def discard(self, name: str | None) -> None:
        """The transaction that would have recorded ``name`` did not commit: its file goes,
        and the label changes wait for the next save."""
        self.drop_file(name)

    def _least_size(self) -> int:
        """The fewest bytes hnswlib's file of this index takes: its header, then each
        element's data at level 0 and the size of its upper levels' links."""
        links0 = self.params["M"] * 2 * 4 + 4
        return 96 + self.index.element_count * (links0 + self.dims * 4 + 8 + 4)

    def drop_file(self, name: str | None) -> None:
        if name is not None and self.folder is not None:
            remove_file(self.folder / name)

    def wipe(self) -> None:
        """Start empty (a rebuild): the snapshot and its labels are dropped at the next save."""
        self.index = self._new(1024)
        self.next_label, self._live = 0, 0
        self._pending = {l: None for (l,) in self.store.rows("SELECT label FROM vectors WHERE space = ?", (self.space,))}
        self._added.clear()

    # -- writing ------------------------------------------------------------------------------------
    def _labels(self, keys: list[str]) -> dict[str, list[int]]:
        """The live labels of these keys (saved, then as changed since)."""
        out: dict[str, list[int]] = {k: [] for k in keys}
        for label, key in self.store.rows_in(
                f"SELECT v.label, k.key FROM vectors v JOIN keys k ON k.id = v.key WHERE v.key IN {KEY_IDS} AND v.space = ?",
                keys, (self.space,)):
            if label not in self._pending:
                out[key].append(label)
        for key in keys:
            out[key] += self._added.get(key, [])
        return out

    def put_many(self, items: list[tuple[str, np.ndarray]], threads: int = 1) -> int:
        """Each key's vectors (one row a part), replacing what the key had. All-zero rows
        (nothing the model knows) are left out. Returns how many went in."""
        if not items:
            return 0
        self.remove([key for key, _ in items])
        matrix = items[0][1] if len(items) == 1 else np.concatenate([vectors for _key, vectors in items])
        keep = nonzero(matrix) if len(matrix) else np.zeros(0, dtype=bool)
        labels: list[int] = []
        at = 0
        for key, vectors in items:
            for part in np.flatnonzero(keep[at : at + len(vectors)]).tolist():
                self._pending[self.next_label] = (key, part)
                self._added.setdefault(key, []).append(self.next_label)
                labels.append(self.next_label)
                self.next_label += 1
            at += len(vectors)
        if labels:
            need = self.index.element_count + len(labels)
            if need > self.index.get_max_elements():
                self.index.resize_index(max(need, int(self.index.get_max_elements() * 1.5) + 16))
            self.index.add_items(matrix[keep], np.asarray(labels), num_threads=threads, replace_deleted=True)
            self._live += len(labels)
        return len(labels)

    def remove(self, keys: list[str]) -> None:
        for key, labels in self._labels(keys).items():
            self._added.pop(key, None)
            for label in labels:
                try:
                    self.index.mark_deleted(label)
                except RuntimeError:
                    pass  # (not in this snapshot: a map ahead of its file after a crash)
                self._pending[label] = None
                self._live -= 1

    # -- querying -------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._live

    def query(self, vector: np.ndarray, k: int) -> list[tuple[str, float, int]]:
        """Up to ``k`` keys by their best vector's cosine similarity: (key, similarity, part)."""
        if not self._live or not nonzero(vector[None, :])[0]:
            return []
        want = min(self._live, max(k * 3, k + 8))
        found, dists = self._knn(vector, want, k)
        labels, sims = found.tolist(), [1.0 - d for d in dists.tolist()]
        best: dict[str, tuple[float, int]] = {}
        # Nearest first: a key's first vector met is its best, and once k keys are met
        # every later one is of one of them or of a key that would rank below them. The
        # labels are named k at a time (most notes have one vector: k names are enough).
        for at in range(0, len(labels), k):
            named = self._named(labels[at : at + k])
            for label, sim in zip(labels[at : at + k], sims[at : at + k], strict=True):
                kp = named.get(label)
                if kp is not None and kp[0] not in best and len(best) < k:
                    best[kp[0]] = (sim, kp[1])
            if len(best) == k:
                break
        return [(key, sim, part) for key, (sim, part) in best.items()]

    def _named(self, labels: list[int]) -> dict[int, tuple[str, int]]:
        out: dict[int, tuple[str, int]] = {}
        for label, key, part in self.store.rows_in(
                "SELECT v.label, k.key, v.part FROM vectors v JOIN keys k ON k.id = v.key WHERE v.label IN ({}) AND v.space = ?",
                [l for l in labels if l not in self._pending], (self.space,)):
            out[label] = (key, part)
        for label in labels:
            kp = self._pending.get(label)
            if kp is not None:
                out[label] = kp
        return out

    def _knn(self, vector: np.ndarray, want: int, k: int) -> tuple[np.ndarray, np.ndarray]:
        """hnswlib's nearest live labels. Once slots of deleted vectors are reused, a graph
        full of near-duplicates can fail to reach ``want`` live items, and hnswlib raises
        instead of returning fewer. Then ask for fewer, down to ``k``; below that, scan a
        small index exactly (a large one keeps halving: fewer hits beat a crash)."""
        while want >= 1:
            try:
                found, dists = self.index.knn_query(vector[None, :], k=want)
                return found[0].astype(np.int64), dists[0]
            except RuntimeError:
                if want <= k and self._live <= EXACT_FALLBACK:
                    return self._exact(vector, want)
                want = max(want // 2, k) if want > k else want // 2
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)

    def _exact(self, vector: np.ndarray, want: int) -> tuple[np.ndarray, np.ndarray]:
        saved = [l for (l,) in self.store.rows("SELECT label FROM vectors WHERE space = ?", (self.space,))]
        live = [l for l in saved if l not in self._pending] + [l for l, kp in self._pending.items() if kp is not None]
        if not live:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        rows = self.vectors_of(live)
        norms = np.linalg.norm(rows, axis=1) * float(np.linalg.norm(vector)) + 1e-12
        dists = 1.0 - rows @ vector / norms
        order = np.argsort(dists, kind="stable")[:want]
        return np.asarray(live, dtype=np.int64)[order], dists[order]

    def vectors_of(self, labels: list[int]) -> np.ndarray:
        return np.asarray(self.index.get_items(labels, return_type="numpy"), dtype=np.float32)

    def cosines(self, vector: np.ndarray, keys: list[str]) -> dict[str, float]:
        """Each key's first vector's cosine with ``vector`` (the vectors are normalised)."""
        pairs = [(key, labels[0]) for key, labels in self._labels(keys).items() if labels]
        if not pairs:
            return {}
        sims = self.vectors_of([l for _, l in pairs]) @ vector
        return {key: float(s) for (key, _), s in zip(pairs, sims, strict=True)}
