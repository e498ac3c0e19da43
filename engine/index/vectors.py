"""Vector index: hnswlib (cosine) over note chunks, with a label → (uri, chunk) map.

Incremental: a note's chunks are replaced (old labels marked deleted, their slots reused
through ``allow_replace_deleted``), the index grows by resizing. Saved as one snapshot
(binary + map) by the SearchIndex checkpoint."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import hnswlib
import numpy as np

from ..embed import nonzero

# Chunks up to which a failed hnswlib query falls back to an exact scan (~3 ms per 1k).
EXACT_FALLBACK = 20_000


class VectorIndex:
    def __init__(self, dims: int, *, M: int = 16, ef_construction: int = 100, ef_search: int = 300, capacity: int = 1024):
        self.dims = dims
        self.params = {"M": M, "ef_construction": ef_construction, "ef_search": ef_search}
        self.index = hnswlib.Index(space="cosine", dim=dims)
        self.index.init_index(max_elements=max(capacity, 16), M=M, ef_construction=ef_construction, allow_replace_deleted=True)
        self.index.set_ef(ef_search)
        self.index.set_num_threads(1)
        self._labels: dict[int, tuple[str, int]] = {}
        self._by_uri: dict[str, list[int]] = {}
        # A loaded snapshot's map as read: the labels sorted, each one's note (an index
        # into ``uris``) and chunk, as arrays; turned into the two dicts above only when
        # something needs them (a write, a save). A query looks up its few labels here,
        # so a search process never builds 100k entries.
        self._loaded: tuple[np.ndarray, np.ndarray, np.ndarray, list[str]] | None = None
        self._rows: np.ndarray | None = None  # label -> its row in the loaded map (-1: none), when labels are dense
        self.next_label = 0

    def _unpack(self) -> None:
        loaded, self._loaded, self._rows = self._loaded, None, None
        if loaded is None:
            return
        labels, by_uri = self._labels, self._by_uri
        order, notes, chunks, uris = loaded
        for label, note, chunk in zip(order.tolist(), notes.tolist(), chunks.tolist(), strict=True):
            uri = uris[note]
            labels[label] = (uri, chunk)
            by_uri.setdefault(uri, []).append(label)

    @property
    def labels(self) -> dict[int, tuple[str, int]]:
        """label -> (uri, chunk)."""
        self._unpack()
        return self._labels

    @property
    def by_uri(self) -> dict[str, list[int]]:
        """uri -> its labels."""
        self._unpack()
        return self._by_uri

    def _label(self, label: int) -> tuple[str | None, int]:
        loaded = self._loaded
        if loaded is not None:
            order, notes, chunks, uris = loaded
            i = int(np.searchsorted(order, label))
            if i < len(order) and int(order[i]) == label:
                return uris[int(notes[i])], int(chunks[i])
            return None, 0
        return self._labels.get(label, (None, 0))

    def _labels_of(self, found: np.ndarray) -> Iterator[tuple[str | None, int]]:
        """``_label`` of each of a query's labels, in order, looked up in one numpy pass
        when the map is still as loaded (a query's 30–90 labels; one searchsorted each
        cost more); each label's note is named as the caller reaches it (it may stop)."""
        loaded = self._loaded
        if loaded is None or not len(found):
            return (self._label(int(label)) for label in found)
        order, notes, chunks, uris = loaded
        # hnswlib's labels are uint64, the map's int64: mixed, numpy would compare them as
        # float64 and convert the whole map each query (0.17 ms at 300k chunks; 2 µs so).
        found = found.astype(order.dtype, copy=False)
        if self._rows is not None:  # one look each, not a binary search through the map
            at = self._rows[np.minimum(found, len(self._rows) - 1)]
            hit = (at >= 0) & (found < len(self._rows))
            at = np.maximum(at, 0)
        else:
            at = np.minimum(np.searchsorted(order, found), len(order) - 1)
            hit = order[at] == found
        return ((uris[n], c) if h else (None, 0)
                for h, n, c in zip(hit.tolist(), notes[at].tolist(), chunks[at].tolist(), strict=True))

    def __len__(self) -> int:
        return len(self._loaded[0]) if self._loaded is not None else len(self._labels)

    def _reserve(self, extra: int) -> None:
        need = self.index.element_count + extra
        if need > self.index.get_max_elements():
            self.index.resize_index(max(need, int(self.index.get_max_elements() * 1.5) + 16))

    def put(self, uri: str, vectors: np.ndarray) -> int:
        """Replace ``uri``'s chunks. All-zero rows (nothing the model knows) are skipped.
        Returns how many chunks went in."""
        self.remove(uri)
        return self.put_many([(uri, vectors)])

    def put_many(self, items: list[tuple[str, np.ndarray]], threads: int = 1) -> int:
        """Add chunks for notes not in the index (bulk: one hnswlib call; one norm pass)."""
        if not items:
            return 0
        matrix = items[0][1] if len(items) == 1 else np.concatenate([vectors for _uri, vectors in items])
        keep = nonzero(matrix)
        labels: list[int] = []
        at = 0
        for uri, vectors in items:
            chunks = np.flatnonzero(keep[at : at + len(vectors)])
            at += len(vectors)
            if not len(chunks):
                continue
            mine = self.by_uri.setdefault(uri, [])
            for chunk in chunks.tolist():
                label = self.next_label
                self.next_label += 1
                self.labels[label] = (uri, chunk)
                mine.append(label)
                labels.append(label)
        if labels:
            self._reserve(len(labels))
            self.index.add_items(matrix[keep], np.asarray(labels), num_threads=threads, replace_deleted=True)
        return len(labels)

    def remove(self, uri: str) -> None:
        for label in self.by_uri.pop(uri, []):
            self.labels.pop(label, None)
            self.index.mark_deleted(label)

    def query(self, vector: np.ndarray, k: int) -> list[tuple[str, float, int]]:
        """Up to ``k`` notes by best chunk similarity: (uri, cosine similarity, chunk)."""
        if not len(self) or not nonzero(vector[None, :])[0]:
            return []
        best: dict[str, tuple[float, int]] = {}
        want = min(len(self), max(k * 3, k + 8))
        found, dists = self._knn(vector, want, k)
        # Nearest first (hnswlib's order, and _exact's): a note's first chunk met is its
        # best, and once k notes are met every later chunk is of one of them or of a note
        # that would rank below them.
        for (uri, chunk), dist in zip(self._labels_of(found), dists.tolist(), strict=True):
            if uri is None or uri in best:
                continue
            if len(best) == k:
                break
            best[uri] = (1.0 - dist, chunk)
        return [(uri, sim, chunk) for uri, (sim, chunk) in best.items()]

    def _knn(self, vector: np.ndarray, want: int, k: int) -> tuple[np.ndarray, np.ndarray]:
        """hnswlib's nearest live labels. Once slots of deleted chunks are reused, a graph
        full of near-duplicates can fail to reach ``want`` live items, and hnswlib raises
        instead of returning fewer. Then ask for fewer, down to ``k``; below that, scan a
        small index exactly (a large one keeps halving: fewer hits beat a crash)."""
        while want >= 1:
            try:
                found, dists = self.index.knn_query(vector[None, :], k=want)
                return found[0], dists[0]
            except RuntimeError:
                if want <= k and len(self) <= EXACT_FALLBACK:
                    return self._exact(vector, want)
                want = max(want // 2, k) if want > k else want // 2
        return np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.float32)

    def _exact(self, vector: np.ndarray, want: int) -> tuple[np.ndarray, np.ndarray]:
        labels = np.fromiter(self.labels, dtype=np.uint64, count=len(self.labels))
        rows = np.asarray(self.index.get_items(labels, return_type="numpy"), dtype=np.float32)
        norms = np.linalg.norm(rows, axis=1) * float(np.linalg.norm(vector)) + 1e-12
        dists = 1.0 - rows @ vector / norms
        order = np.argsort(dists, kind="stable")[:want]
        return labels[order], dists[order]

    # -- persistence ------------------------------------------------------------------------
    def save(self, folder: Path, tag: str, uris: list[str]) -> dict:
        """Write the hnswlib snapshot; return its metadata, the map as one flat list of
        numbers: label, note (its place in ``uris``, which the caller keeps), chunk. At
        100k notes a map of strings costs a search process a fifth of a second to read."""
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f"vectors-{tag}.bin.tmp"
        self.index.save_index(str(tmp))
        tmp.replace(folder / f"vectors-{tag}.bin")
        place = {uri: i for i, uri in enumerate(uris)}
        flat: list[int] = []
        for label, (uri, chunk) in sorted(self.labels.items()):
            if uri in place:  # (always: a note's vectors and its place go in and out together)
                flat += (label, place[uri], chunk)
        return {
            "file": f"vectors-{tag}.bin",
            "dims": self.dims,
            "params": self.params,
            "next_label": self.next_label,
            "max_elements": self.index.get_max_elements(),
            "map": flat,
        }

    @classmethod
    def load(cls, folder: Path, meta: dict, uris: list[str]) -> VectorIndex:
        p = meta["params"]
        self = cls(meta["dims"], M=p["M"], ef_construction=p["ef_construction"], ef_search=p["ef_search"])
        self.index = hnswlib.Index(space="cosine", dim=meta["dims"])
        self.index.load_index(str(folder / meta["file"]), max_elements=meta["max_elements"], allow_replace_deleted=True)
        self.index.set_ef(p["ef_search"])
        self.index.set_num_threads(1)
        self.next_label = meta["next_label"]
        flat = meta["map"]
        # Checked whole (a bad map means a rebuild, as before), kept as arrays.
        if not isinstance(flat, list) or len(flat) % 3 or (flat and set(map(type, flat)) != {int}):
            raise ValueError("the vector map is not a list of label, note, chunk numbers")
        table = np.asarray(flat, dtype=np.int64).reshape(-1, 3)
        # (contiguous: a search's searchsorted would copy a strided column every query)
        order, notes, chunks = (np.ascontiguousarray(table[:, i]) for i in range(3))
        if len(table) and (order.min() < 0 or np.any(np.diff(order) <= 0) or notes.min() < 0
                           or notes.max() >= len(uris) or chunks.min() < 0):
            raise ValueError("the vector map names a label twice or a note it does not hold")
        self._loaded = (order, notes, chunks, uris)
        if len(order) and int(order[-1]) < 2 * len(order) + 1024:  # labels about as many as chunks
            self._rows = np.full(int(order[-1]) + 1, -1, dtype=np.int64)
            self._rows[order] = np.arange(len(order))
        return self
