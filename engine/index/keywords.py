"""Keyword index: BM25 through tantivy, over tokens from engine.text.tokenize (English
words stemmed, CJK unigrams + bigrams), stored on disk in `.memlink/index/keywords/`.

Writes are idempotent (delete the note's document, add it again), so replaying an update
after a crash never duplicates a note. The writer is opened per batch and dropped after
its commit: tantivy allows one writer per index across processes."""

from __future__ import annotations

import shutil
from pathlib import Path

import tantivy

from ..text import tokenize

TITLE_BOOST = 2.0


def _schema() -> tantivy.Schema:
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("uri", stored=True, tokenizer_name="raw")
    sb.add_text_field("mtype", stored=True, tokenizer_name="raw")
    sb.add_text_field("title", stored=False, tokenizer_name="whitespace")
    sb.add_text_field("body", stored=False, tokenizer_name="whitespace")
    return sb.build()


class KeywordIndex:
    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.schema = _schema()
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            self.index = tantivy.Index(self.schema, path=str(self.folder), reuse=True)
        except ValueError:
            # An index of another layout (or damaged): it is derived data, start over.
            shutil.rmtree(self.folder)
            self.folder.mkdir(parents=True)
            self.index = tantivy.Index(self.schema, path=str(self.folder), reuse=True)
        self._writer = None

    @classmethod
    def wipe(cls, folder: Path) -> "KeywordIndex":
        shutil.rmtree(folder, ignore_errors=True)
        return cls(folder)

    def _w(self):
        if self._writer is None:
            self._writer = self.index.writer(heap_size=50_000_000, num_threads=1)
        return self._writer

    def put(self, uri: str, memory_type: str, title: str, body: str) -> None:
        w = self._w()
        w.delete_documents_by_term("uri", uri)
        w.add_document(tantivy.Document(
            uri=uri, mtype=memory_type, title=" ".join(tokenize(title)), body=" ".join(tokenize(body))
        ))

    def remove(self, uri: str) -> None:
        self._w().delete_documents_by_term("uri", uri)

    def commit(self) -> None:
        if self._writer is not None:
            self._writer.commit()
            self._writer.wait_merging_threads()
            self._writer = None  # releases tantivy's writer lock
            self.index.reload()

    def search(self, query: str, k: int, types: set[str] | None = None) -> list[tuple[str, float]]:
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
        hits = searcher.search(query_obj, k).hits
        return [(searcher.doc(addr)["uri"][0], float(score)) for score, addr in hits]

    def count(self) -> int:
        return self.index.searcher().num_docs
