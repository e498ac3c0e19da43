"""Keywords: BM25 through tantivy, one wrapper for every index that matches words (the
notes, the turns), each in a folder of its own under `.memlink/index/`.

Tantivy's en_stem tokenizer splits and stems the text (in Rust); CJK runs are expanded to
unigrams and bigrams first. engine.model.text.tokenize makes the same tokens in Python
(Snowball English both sides) for queries. Writes wait in memory until ``flush`` (a
tantivy commit costs tens of milliseconds): the owner flushes under the vault's write
lock before it searches and at its checkpoints. Each write deletes the key's document
and adds it again, so replaying one after a crash never duplicates it. The writer is
opened per flush and dropped after its commit: tantivy allows one writer per index
across processes."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import tantivy

from ..model.text import cjk_expand, tokenize
from ..storage.atomic import full_disk_cause


def bm25_idf(df: int, n: int) -> float:
    """BM25's idf (tantivy's): a word in fewer of the n documents weighs more; one in none
    weighs most."""
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


class KeywordIndex:
    def __init__(self, folder: Path | None, fields: tuple[str, ...]) -> None:
        """The index in ``folder`` (made when missing, made afresh when it is not one of
        these ``fields``), or in memory when None. Each document has a key (``id``), a tag
        (``tag``: a memory type, to filter by) and these text fields."""
        self.fields = fields
        sb = tantivy.SchemaBuilder()
        # Only term queries are asked (BM25 needs each term's frequency, not its positions).
        sb.add_text_field("id", stored=True, tokenizer_name="raw", index_option="basic")
        sb.add_text_field("tag", stored=False, tokenizer_name="raw", index_option="basic")
        for name in fields:
            sb.add_text_field(name, stored=False, tokenizer_name="en_stem", index_option="freq")
        self.schema = sb.build()
        self.pending: dict[str, tuple[dict[str, str], str] | None] = {}  # key -> (texts, tag); None: removed
        self.made = False  # made here, empty (not opened)
        self.folder = folder
        if folder is None:
            self.made = True
            self.index = tantivy.Index(self.schema)
            return
        self.made = not (folder / "meta.json").exists()
        folder.mkdir(parents=True, exist_ok=True)
        try:
            self.index = tantivy.Index(self.schema, path=str(folder), reuse=True)
        except ValueError as exc:  # another layout, or damaged: derived, start over
            if full_disk_cause(exc) is not None:
                raise  # (not damaged: the owner keeps its index in memory for now)
            self.made = True
            shutil.rmtree(folder)
            folder.mkdir(parents=True)
            self.index = tantivy.Index(self.schema, path=str(folder), reuse=True)

    def wipe(self) -> KeywordIndex:
        """The same index, empty."""
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
        return KeywordIndex(self.folder, self.fields)

    # -- writing ---------------------------------------------------------------------------------
    def put(self, key: str, texts: dict[str, str], tag: str = "") -> None:
        self.pending[key] = (texts, tag)

    def remove(self, key: str) -> None:
        self.pending[key] = None

    def flush(self) -> None:
        """Write what waits in one commit (the caller holds the vault's write lock)."""
        if not self.pending:
            return
        writer = self.index.writer(heap_size=50_000_000, num_threads=1)
        # A commit killed part-way leaves files no commit names; the next one may want the
        # same file name (a segment's deletes at the same opstamp) and tantivy will not
        # overwrite a file. Tantivy collects them only after a commit, so collect first.
        writer.garbage_collect_files()
        for key, doc in self.pending.items():
            writer.delete_documents_by_term("id", key)
            if doc is not None:
                texts, tag = doc
                writer.add_document(tantivy.Document(id=key, tag=tag, **{f: cjk_expand(texts.get(f, "")) for f in self.fields}))
        writer.commit()
        writer.wait_merging_threads()
        self.pending.clear()
        self.index.reload()

    # -- querying --------------------------------------------------------------------------------
    def search(self, tokens: list[str], k: int, boosts: dict[str, float], tags: set[str] | None = None) -> list[tuple[str, float]]:
        """The k best documents by BM25 over the fields in ``boosts`` (each weighted), for
        tokens as ``tokenize`` makes them; only those tagged one of ``tags`` when given."""
        tokens = sorted(set(tokens))
        if not tokens or not k:
            return []
        Q, Occur = tantivy.Query, tantivy.Occur
        clauses = []
        for tok in tokens:
            for name, boost in boosts.items():
                term = Q.term_query(self.schema, name, tok)
                clauses.append((Occur.Should, term if boost == 1.0 else Q.boost_query(term, boost)))
        query = Q.boolean_query(clauses)
        if tags:
            tagged = Q.boolean_query([(Occur.Should, Q.term_query(self.schema, "tag", t)) for t in sorted(tags)])
            query = Q.boolean_query([(Occur.Must, query), (Occur.Must, tagged)])
        searcher = self.index.searcher()
        hits = searcher.search(query, k, count=False).hits
        return [(searcher.doc(addr)["id"][0], float(score)) for score, addr in hits]

    def count(self) -> int:
        return self.index.searcher().num_docs

    def doc_freq(self, tokens: list[str], fields: tuple[str, ...] | None = None) -> tuple[dict[str, int], int]:
        """({token: how many documents hold it in any of ``fields``, counted in the one
        holding it most}, how many documents there are)."""
        searcher = self.index.searcher()
        names = fields or self.fields
        return {t: max(searcher.doc_freq(f, t) for f in names) for t in tokens}, searcher.num_docs

    def tokens(self, text: str) -> list[str]:
        """A query's tokens, as the index makes them of a document."""
        return tokenize(text)
