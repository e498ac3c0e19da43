"""Keyword index: BM25 through tantivy, stored on disk in `.memlink/index/keywords/`.
Tantivy's own en_stem tokenizer splits and stems the text (fast, in Rust); CJK runs are
expanded to unigrams + bigrams first. engine.text.tokenize makes the same tokens in
Python (Snowball English both sides) for queries and for notes not yet committed.

A tantivy commit costs tens of milliseconds (fsync), too much for every single-note edit,
so single updates wait in a small in-memory delta: searches leave out the delta's stale
tantivy documents and score the delta's new versions with the same BM25 formula and
tantivy's collection statistics. ``flush`` writes the delta in one commit (at checkpoints).
Writes are idempotent (delete the note's document, add it again) so replaying an update
after a crash never duplicates a note. The writer is opened per flush and dropped after
its commit: tantivy allows one writer per index across processes."""

from __future__ import annotations

import hashlib
import math
import re
import shutil
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

import tantivy

from ..text import cjk_expand, tokenize

TITLE_BOOST = 2.0
K1, B = 1.2, 0.75  # tantivy's BM25 parameters


_WORDS = re.compile(r"\w+")


def bm25_idf(df: int, n: int) -> float:
    """BM25's idf (tantivy's): a word in fewer of the n documents weighs more; one in none
    weighs most."""
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def field_length(text: str) -> int:
    """Tokens as tantivy counts them for BM25 length normalisation (stopwords included)."""
    return _WORDS.subn("", cjk_expand(text))[1]  # counted in C, no list of words made


def note_key(uri: str) -> int:
    """A note's number in the keyword index (its ``key`` fast field): 64 bits of a hash of
    its URI. A search reads its hits' numbers from a column and finds their URIs in a map,
    instead of loading each hit's stored document (docs/DESIGN.md, "Search")."""
    return int.from_bytes(hashlib.blake2b(uri.encode("utf-8"), digest_size=8).digest(), "little")


def _learn(by_key: dict[int, str | None], uri: str) -> None:
    """Map ``uri``'s key to it; a key two URIs share maps to None (their documents say)."""
    key = note_key(uri)
    by_key[key] = uri if by_key.get(key, uri) == uri else None


def _schema() -> tantivy.Schema:
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("uri", stored=True, tokenizer_name="raw")
    sb.add_unsigned_field("key", fast=True)
    sb.add_text_field("mtype", stored=True, tokenizer_name="raw")
    sb.add_text_field("title", stored=False, tokenizer_name="en_stem")
    sb.add_text_field("body", stored=False, tokenizer_name="en_stem")
    return sb.build()


def _document(uri: str, memory_type: str, title: str, body: str) -> tantivy.Document:
    doc = tantivy.Document(uri=uri, mtype=memory_type, title=cjk_expand(title), body=cjk_expand(body))
    doc.add_unsigned("key", note_key(uri))  # (as a keyword argument it would be taken for a float)
    return doc


class _Doc:
    __slots__ = ("mtype", "title", "body", "title_len", "body_len", "title_text", "body_text")

    def __init__(self, mtype: str, title: list[str], body: list[str], title_text: str, body_text: str):
        self.mtype = mtype
        self.title, self.body = Counter(title), Counter(body)
        self.title_len, self.body_len = field_length(title_text), field_length(body_text)
        self.title_text, self.body_text = title_text, body_text


class KeywordIndex:
    def __init__(self, folder: Path | None, known: Callable[[], Iterable[str]] | None = None):
        """The index in ``folder``, or in memory when None (a read-only vault). ``known``
        gives the URIs of the notes it holds (read once, on the first search): their keys
        name hits without loading their documents; without it, or for a key it does not
        know, the document is read."""
        self.schema = _schema()
        self._known = known
        self._by_key: dict[int, str | None] | None = None  # note_key -> uri (None: two notes share it)
        self._writer: tantivy.IndexWriter | None = None
        self.pending: dict[str, _Doc | None] = {}  # None = deleted, not yet flushed
        # Running token counts, for the average field lengths of BM25 on pending notes.
        self.stats = {"docs": 0, "title_tokens": 0, "body_tokens": 0}
        if folder is None:
            self.recreated = True
            self.index = tantivy.Index(self.schema)
            return
        self.folder = Path(folder)
        self.recreated = not (self.folder / "meta.json").exists()
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            self.index = tantivy.Index(self.schema, path=str(self.folder), reuse=True)
        except ValueError:
            self.recreated = True
            # An index of another layout (or damaged): it is derived data, start over.
            shutil.rmtree(self.folder)
            self.folder.mkdir(parents=True)
            self.index = tantivy.Index(self.schema, path=str(self.folder), reuse=True)

    @classmethod
    def wipe(cls, folder: Path | None, known: Callable[[], Iterable[str]] | None = None) -> KeywordIndex:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
        return cls(folder, known)

    def _learn(self, uri: str) -> None:
        if self._by_key is not None:
            _learn(self._by_key, uri)

    def _uris_by_key(self) -> dict[int, str | None]:
        if self._by_key is None:
            by_key: dict[int, str | None] = {}  # (made apart, then set: another thread may search meanwhile)
            for uri in self._known() if self._known is not None else ():
                _learn(by_key, uri)
            self._by_key = by_key
        return self._by_key

    def _w(self) -> tantivy.IndexWriter:
        if self._writer is None:
            self._writer = self.index.writer(heap_size=50_000_000, num_threads=1)
        return self._writer

    def _count(self, title_len: int, body_len: int) -> None:
        self.stats["docs"] += 1
        self.stats["title_tokens"] += title_len
        self.stats["body_tokens"] += body_len

    def put(self, uri: str, memory_type: str, title: str, body: str, *, direct: bool = False) -> None:
        """Index a note. ``direct`` writes to tantivy now (bulk indexing, then ``flush``);
        otherwise the note waits in the in-memory delta."""
        self._count(field_length(title), field_length(body))
        self._learn(uri)
        if direct:
            w = self._w()
            w.delete_documents_by_term("uri", uri)
            w.add_document(_document(uri, memory_type, title, body))
            self.pending.pop(uri, None)
        else:
            self.pending[uri] = _Doc(memory_type, tokenize(title), tokenize(body), title, body)

    def remove(self, uri: str) -> None:
        self.pending[uri] = None

    def flush(self) -> None:
        """Write the delta and any direct writes to tantivy in one commit."""
        if not self.pending and self._writer is None:
            return
        w = self._w()
        for uri, doc in self.pending.items():
            w.delete_documents_by_term("uri", uri)
            if doc is not None:
                w.add_document(_document(uri, doc.mtype, doc.title_text, doc.body_text))
        w.commit()
        w.wait_merging_threads()
        self._writer = None  # releases tantivy's writer lock
        self.pending.clear()
        self.index.reload()

    # -- querying ---------------------------------------------------------------------------
    def search(self, query: str, k: int, types: set[str] | None = None) -> list[tuple[str, float]]:
        """The k best notes by BM25."""
        tokens = sorted(set(tokenize(query)))
        if not tokens:
            return []
        Q, Occur = tantivy.Query, tantivy.Occur
        clauses = []
        for tok in tokens:
            clauses.append((Occur.Should, Q.boost_query(Q.term_query(self.schema, "title", tok), TITLE_BOOST)))
            clauses.append((Occur.Should, Q.term_query(self.schema, "body", tok)))
        query_obj = Q.boolean_query(clauses)
        if types:
            type_q = Q.boolean_query([(Occur.Should, Q.term_query(self.schema, "mtype", t)) for t in types])
            query_obj = Q.boolean_query([(Occur.Must, query_obj), (Occur.Must, type_q)])
        searcher = self.index.searcher()
        hits = searcher.search(query_obj, k + len(self.pending), count=False).hits
        by_key = self._uris_by_key()
        keys = searcher.fast_field_values("key", [addr for _, addr in hits]) if hits and by_key else [None] * len(hits)
        scored = []
        for (score, addr), key in zip(hits, keys, strict=True):
            uri = by_key.get(key) if isinstance(key, int) else None
            if uri is None:  # a note this process has not seen (another one indexed it), or a shared key
                uri = searcher.doc(addr)["uri"][0]
            if uri not in self.pending:  # its tantivy version is stale
                scored.append((uri, float(score)))
        if self.pending:
            scored += self._score_pending(searcher, tokens, types)
        scored.sort(key=lambda x: -x[1])
        return scored[:k]

    def _score_pending(self, searcher: tantivy.Searcher, tokens: list[str], types: set[str] | None) -> list[tuple[str, float]]:
        """BM25 for notes not yet committed, with the collection's statistics."""
        n = max(1, searcher.num_docs + sum(1 for d in self.pending.values() if d is not None))
        docs = max(1, self.stats["docs"])
        avg = {"title": max(1.0, self.stats["title_tokens"] / docs), "body": max(1.0, self.stats["body_tokens"] / docs)}
        idf = {}
        for field in ("title", "body"):
            for tok in tokens:
                df = searcher.doc_freq(field, tok) + sum(
                    1 for d in self.pending.values() if d is not None and getattr(d, field)[tok]
                )
                idf[field, tok] = bm25_idf(df, n)
        out = []
        for uri, doc in self.pending.items():
            if doc is None or (types and doc.mtype not in types):
                continue
            score = 0.0
            for field, boost, length in (("title", TITLE_BOOST, doc.title_len), ("body", 1.0, doc.body_len)):
                counts = getattr(doc, field)
                for tok in tokens:
                    tf = counts[tok]
                    if tf:
                        norm = tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / avg[field]))
                        score += boost * idf[field, tok] * norm
            if score > 0:
                out.append((uri, score))
        return out

    def count(self) -> int:
        return self.index.searcher().num_docs

    def doc_freq(self, tokens: list[str]) -> tuple[dict[str, int], int]:
        """({token: how many notes hold it}, how many notes there are), for tokens as
        ``tokenize`` makes them. A note counts once whether the token is in its title or
        its body (the larger of the two counts); notes not yet committed are counted too."""
        searcher = self.index.searcher()
        live = [d for d in self.pending.values() if d is not None]
        n = searcher.num_docs + len(live)
        out = {}
        for tok in tokens:
            stored = max(searcher.doc_freq("title", tok), searcher.doc_freq("body", tok))
            out[tok] = stored + sum(1 for d in live if d.title[tok] or d.body[tok])
        return out, n
