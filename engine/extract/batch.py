"""`memlink ingest PATH…`: files and folders of text and markdown, imported as one batch.

1. Collect: folders are walked recursively (hidden files and folders left out); only
   regular text and markdown files are taken from a folder. Symbolic links, FIFOs and
   other special files are reported as skipped (never followed, never opened), as is
   anything whose real path leaves the folder given. A path inside the vault is refused.
2. Every file becomes a `sources/` note first, named by its title, recording the path it
   was imported from (relative to the folder given, or to the files' common folder) as an
   alias, and its kind (from its frontmatter `type`, else its folder: people/ → person).
3. Then, with every page of the batch a note, memories are extracted from each file (the
   batch's page titles are known names, so a mention links the page instead of making an
   entity) and the references of each file are resolved — markdown links, wikilinks and
   bare slugs — into typed two-sided links carrying the relation the text states. The
   batch's own pages come first (a path another import also used resolves to this
   batch's page), then the page next to the referring one; references that resolve to
   nothing, or to several pages nothing tells apart, are reported with file and line.
   With an LLM provider the link types are then refined by the model
   (engine.extract.linktype). After ``llm.max_failures`` failed model answers in a row
   (a hung or broken model) the rest of the batch goes to the rules, and the batch says so
   (``fallback``).

A file lands in two units of work (docs/DESIGN.md, "Units of work"). First its source
note, marked pending (`extraction: pending` in its frontmatter). Then, after the model
was asked (never while the vault is locked), one transaction holds its memories, all its
links, its audit record and the removal of the mark: they land together or not at all.
A source still marked pending — the model failed, the disk was full, the process was
killed — is reported by `memlink check` and finished by the next ingest, commit or dream
(`retry_pending`), from the note's own text. Its SHA-256 is recorded (so that a re-run
skips it) only once it is finished. A failure names the file and the batch goes on."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import posixpath
import re
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from ..errors import MemlinkError
from ..model.notes import PENDING, PENDING_KEY, is_pending, serialize_note, split_frontmatter
from ..model.yamlio import safe_load
from ..retrieve.names import TEXT_SUFFIXES, NameIndex, Scope, path_key
from .autolink import find_references, reference_link
from .context import ExtractContext
from .documents import DOCUMENT_SUFFIXES, Converted, document_fields, read_input
from .inputs import IngestResult, InputError, choose_extractor
from .linktype import refine_links
from .loop import ExtractLoop, LLMExtractor
from .updater import MemoryUpdater, Resolved, RunReport, link_entry, resolve_operations, write_links

if TYPE_CHECKING:

    from ..storage.vault import Vault
    from .inputs import Extractor

# Folder names that say what the pages in them are (GBrain's brain layout and the like).
FOLDER_KINDS = {
    "people": "person", "person": "person", "persons": "person", "contacts": "person",
    "companies": "company", "company": "company", "orgs": "company", "organisations": "company",
    "organizations": "company", "meetings": "meeting", "meeting": "meeting", "calls": "meeting",
}


@dataclass
class Page:
    path: Path  # as given or found in a folder: how it is reported
    alias: str  # the path it was imported from, relative to the batch's root
    real: Path | None = None  # the file to read (resolved, checked to be a regular file)
    root: int = 0  # which of the paths given it came from
    text: str = ""
    body: str = ""  # the text without its frontmatter
    title: str = ""
    kind: str = "document"
    sha: str = ""
    uri: str | None = None
    known: str | None = None  # "already imported as …"
    wiki: bool = True  # extract memories (not --no-wiki)
    names: list[str] = field(default_factory=list)  # its frontmatter's `aliases` (Obsidian): other names
    tags: list[str] = field(default_factory=list)  # its frontmatter's `tags`, without '#'
    document: Converted | None = None  # a PDF, HTML page or DOCX converted (engine.extract.documents)

    @property
    def note(self) -> str:
        """The uri of the page's note, once pass 1 has written it."""
        assert self.uri is not None, f"{self.path} has no note yet"
        return self.uri


@dataclass
class BatchResult:
    files: list = field(default_factory=list)  # IngestResult, one per file imported or known
    skipped: list[dict] = field(default_factory=list)  # {path, why}: not text, already imported
    failed: list[dict] = field(default_factory=list)  # {path, error}: nothing written
    pending: list[dict] = field(default_factory=list)  # {path, source, error}: source note written, not its memories
    unresolved: list[dict] = field(default_factory=list)  # {file, line, ref}
    ambiguous: list[dict] = field(default_factory=list)  # {file, line, ref, candidates}
    links_added: list[dict] = field(default_factory=list)  # every new link: page-to-page and derived notes'
    problems: list[str] = field(default_factory=list)
    fallback: str = ""  # why the model was given up and the rules extracted the rest, or ""
    seconds: float = 0.0

    def to_json(self) -> dict:
        return {
            "files": [{"path": r.path, "source": r.source_uri, "skipped": r.skipped,
                       "report": r.report.to_json() if r.report else None} for r in self.files],
            "skipped": self.skipped, "failed": self.failed, "pending": self.pending, "unresolved": self.unresolved,
            "ambiguous": self.ambiguous, "links_added": self.links_added, "page_links": len(self.page_links()),
            "problems": self.problems, "fallback": self.fallback, "seconds": round(self.seconds, 3),
        }

    def page_links(self) -> list[dict]:
        """The new links between the batch's pages (source notes), not those of the notes
        extracted from them."""
        pages = {r.source_uri for r in self.files}
        return [l for l in self.links_added if l["from"] in pages and l["to"] in pages]


# -- collecting -----------------------------------------------------------------------------
def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def refuse_vault_paths(vault: Vault, paths: list[Path]) -> None:
    """Files already in the vault are its notes, not resources to import."""
    for arg in map(Path, paths):
        real = Path(os.path.realpath(arg))
        if _inside(real, vault.root):
            raise InputError(f"{arg} is inside the vault ({vault.root}); ingest imports files from outside it — "
                             f"notes in the vault are indexed as they are")


def collect(paths: list[Path], vault_root: Path | None = None) -> tuple[list[Page], list[dict], list[dict]]:
    """(pages to read, skipped, failed). A folder is its files' root; files given one by
    one share their common folder as root. In a folder only regular files are taken: a
    symbolic link or a special file (FIFO, socket, device) is skipped, named, and so is
    a file whose real path is outside the folder, or the vault when a folder holds it."""
    pages: list[Page] = []
    skipped: list[dict] = []
    failed: list[dict] = []

    def skip(path: Path, why: str) -> None:
        skipped.append({"path": str(path), "why": why})

    files = [Path(p) for p in paths if Path(p).is_file()]
    root = Path(os.path.commonpath([str(f.resolve().parent) for f in files])) if files else None
    for n, arg in enumerate(map(Path, paths)):
        if arg.is_dir():
            top = Path(os.path.realpath(arg))
            for dirpath, dirnames, filenames in os.walk(top):  # never follows a linked folder
                here = Path(dirpath)
                keep = []
                for d in sorted(dirnames):
                    if d.startswith("."):
                        continue
                    if (here / d).is_symlink():
                        skip(arg / (here / d).relative_to(top), "a symbolic link (not followed)")
                    elif here / d == vault_root:
                        skip(arg / (here / d).relative_to(top), "the vault itself")
                    else:
                        keep.append(d)
                dirnames[:] = keep
                for name in sorted(filenames):
                    if name.startswith("."):
                        continue
                    path = here / name
                    shown = arg / path.relative_to(top)
                    try:
                        st = os.lstat(path)
                    except OSError as exc:
                        failed.append({"path": str(shown), "error": f"{shown}: cannot read ({exc.strerror})"})
                        continue
                    if stat.S_ISLNK(st.st_mode):
                        skip(shown, "a symbolic link (not followed)")
                        continue
                    if not stat.S_ISREG(st.st_mode):
                        skip(shown, "not a regular file (a FIFO, socket or device)")
                        continue
                    if path.suffix.lower() not in TEXT_SUFFIXES + DOCUMENT_SUFFIXES:
                        skip(shown, f"not a text or markdown file ({path.suffix or 'no suffix'})")
                        continue
                    real = Path(os.path.realpath(path))
                    if not _inside(real, top):
                        skip(shown, f"outside the folder given ({real})")
                        continue
                    pages.append(Page(shown, path.relative_to(top).as_posix(), real, root=n))
        elif arg.is_file():
            real = arg.resolve()
            if not stat.S_ISREG(os.stat(real).st_mode):
                skip(arg, "not a regular file (a FIFO, socket or device)")
                continue
            assert root is not None  # set above: this file is one of ``files``
            pages.append(Page(arg, real.relative_to(root).as_posix(), real, root=-1))  # files given share a root
        elif os.path.exists(arg):
            skip(arg, "not a regular file (a FIFO, socket or device)")
        else:
            failed.append({"path": str(arg), "error": f"{arg}: no such file or folder"})
    return pages, skipped, failed


def read_page(page: Page, max_bytes: int | None = None) -> None:

    page.text, page.document = read_input(page.real or page.path, follow=False, max_bytes=max_bytes)
    page.sha = hashlib.sha256(page.text.encode("utf-8")).hexdigest()
    page.body, meta = page.text, {}
    front, body = split_frontmatter(page.text)
    if front is not None and body is not None:
        try:
            loaded = safe_load(front)
        except yaml.YAMLError:
            loaded = None
        if isinstance(loaded, dict):
            meta, page.body = loaded, body
    page.title = _title(meta, page.body, page.path)
    page.names = [n for n in _strings(meta.get("aliases") or meta.get("alias")) if n != page.title]
    page.tags = [t.lstrip("#") for t in _strings(meta.get("tags") or meta.get("tag")) if t.lstrip("#")]
    kind = meta.get("type") or meta.get("kind")
    if isinstance(kind, str) and kind.strip():
        page.kind = kind.strip().lower()
    else:  # an Obsidian vault's meaning: a tag (#person, #people/…), else the nearest folder (People/)
        hints = [t.split("/")[0] for t in page.tags] + list(reversed(page.alias.split("/")[:-1]))
        kinds = [FOLDER_KINDS.get(h.lower()) or (h.lower() if h.lower() in FOLDER_KINDS.values() else None)
                 for h in hints]
        page.kind = next((k for k in kinds if k), "document")


def _strings(value: object) -> list[str]:
    """A frontmatter list or comma-separated string, as clean strings (Obsidian accepts both)."""
    items = value if isinstance(value, list) else str(value).split(",") if isinstance(value, str) else []
    return list(dict.fromkeys(str(v).strip() for v in items if isinstance(v, (str, int, float)) and str(v).strip()))


def _title(meta: dict, body: str, path: Path) -> str:
    if isinstance(meta.get("title"), str) and meta["title"].strip():
        return meta["title"].strip()
    for line in body.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return path.stem.replace("_", " ").replace("-", " ").strip() or path.name


# -- the batch ------------------------------------------------------------------------------

def pending_sources(vault: Vault) -> list[str]:
    """The uris of the source notes whose extraction has not finished."""
    return [e.uri for e in vault.catalog.all("source") if e.pending]  # (the catalog's: no file is read)


def retry_pending(vault: Vault, extractor: Extractor | None = None) -> BatchResult:
    """Finish every source left pending by an ingest that failed or was killed (the
    ``commit`` and ``dream`` commands call this first; ``ingest`` does it as part of its
    batch)."""
    return ingest_batch(vault, [], extractor=extractor)


def _pending_pages(vault: Vault, taken: set[str]) -> list[Page]:
    """Pages for the pending sources this batch does not import again, read from their
    notes (the file they came from may be gone)."""
    pages = []
    for uri in pending_sources(vault):
        if uri in taken:
            continue
        note = vault.read_note(uri)
        aliases = [a for a in note.fields.get("aliases") or [] if isinstance(a, str)]
        alias = aliases[0] if aliases else uri
        body = str(note.fields.get("content") or "")
        pages.append(Page(Path(alias), alias, None, root=-2, text=body, body=body, title=str(note.fields.get("title") or uri),
                          kind=str(note.fields.get("kind") or "document"), uri=uri,
                          wiki=note.fields.get("in_wiki") is not False))
    return pages


def ingest_batch(vault: Vault, paths: list[Path], *, wiki: bool = True, extractor: Extractor | None = None,
                 progress: Callable[[int, int], object] | None = None) -> BatchResult:

    started = time.perf_counter()
    refuse_vault_paths(vault, paths)
    pages, skipped, failed = collect(paths, vault.root)
    result = BatchResult(skipped=skipped, failed=failed)
    ok: list[Page] = []
    for page in pages:
        page.wiki = wiki
        try:
            read_page(page, vault.config.ingest.max_bytes)
        except InputError as exc:
            result.failed.append({"path": str(page.path), "error": str(exc)})
            continue
        ok.append(page)
    # Pass 1: every file a source note, marked pending, before any reference is resolved.
    written: list[Page] = []
    reports: dict[int, RunReport] = {}  # id(page) -> its report
    in_batch: dict[str, str] = {}  # sha -> uri of a page of this batch with that text
    for page in ok:
        try:
            reports[id(page)] = _write_source(vault, page, in_batch)
        except MemlinkError as exc:
            result.failed.append({"path": str(page.path), "error": f"{page.path}: {exc}"})
            continue
        written.append(page)
    for page in _pending_pages(vault, {page.note for page in written}):
        reports[id(page)] = RunReport("none")
        written.append(page)
    if extractor is None and any(page.wiki and not page.known for page in written):
        extractor, _health = choose_extractor(vault)
    # Pass 2, file by file: ask the model for its memories (with the batch's pages as known
    # names) and resolve its references — nothing written yet, so the model is never asked
    # while the vault is locked —, then land them in one unit of work. Each file's
    # extraction sees the memories of the files before it, as a person importing them one
    # by one would have. References look in the file's own import's pages first, then the
    # whole batch, then the vault.
    known = {page.title.lower(): page.note for page in written}
    common = {w for page in written for w in re.findall(r"(?<![\w'-])[a-z][a-z'-]+", page.body)}
    by_root: dict[int, dict[str, str]] = {}
    for page in written:
        by_root.setdefault(page.root, {})[path_key(page.alias)] = page.note
    batch = {page.note for page in written}
    unfinished: dict[int, str] = {}  # id(page) -> why its memories and links did not land
    for i, page in enumerate(written):
        if progress:
            progress(i, len(written))
        plan: tuple[Resolved, ExtractContext] | None = None
        try:
            step = "memories not extracted"
            if page.wiki and not page.known:
                ctx = ExtractContext("resource", page.body, dt.date.today(), base=posixpath.dirname(page.alias),
                                     known_names=dict(known), common_words=common)
                ctx.source_page = ctx.add(vault.read_note(page.note))
                assert extractor is not None  # chosen above
                reports[id(page)].provider = extractor.name  # (the rules, once the model was given up)
                plan = (resolve_operations(ExtractLoop(vault, extractor).run(ctx), ctx), ctx)
            step = "references not resolved"
            scope = Scope(by_root[page.root], batch, posixpath.dirname(path_key(page.alias)))
            refs = _references(vault, page, NameIndex.for_vault(vault), scope, reports[id(page)], extractor, result)
            step = "nothing of its memories and links was written"
            _land(vault, page, plan, refs, reports[id(page)], result)
        except (MemlinkError, OSError) as exc:
            unfinished[id(page)] = f"{step}: {_why(exc)}"
    # Only now is a file done: its SHA-256 is recorded, and a re-run skips it.
    for page in written:
        if id(page) not in unfinished and not page.known and page.sha and page.uri:
            _remember(vault, page.sha, page.uri, str(page.real or page.path))
    for page in written:
        report = reports[id(page)]
        if id(page) in unfinished:
            why = unfinished[id(page)]
            result.pending.append({"path": str(page.path), "source": page.note, "error": why})
            report.problems.append(f"{page.path}: {why}. Written: the source note {page.note}, marked pending "
                                   f"(`memlink check` lists it); the next ingest, commit or dream retries it")
        result.files.append(IngestResult(str(page.path), page.uri, None if page.known else report, skipped=page.known))
        if page.known:
            result.skipped.append({"path": str(page.path), "why": page.known})
        result.problems += report.problems
    if progress:
        progress(len(written), len(written))
    result.fallback = extractor.fallback if extractor is not None else ""
    result.seconds = time.perf_counter() - started
    return result


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError) and not isinstance(exc, MemlinkError):
        return f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else "")
    return str(exc)


def _land(vault: Vault, page: Page, plan: tuple[Resolved, ExtractContext] | None, refs: list[tuple],
          report: RunReport, result: BatchResult) -> None:
    """One file's memories (``plan``), its references' links and its memories' links, the
    audit record and the end of its pending mark, in one transaction."""
    links = list(refs)
    with vault.transaction() as tx:
        if plan is not None:
            resolved, ctx = plan
            source = f"resource {page.alias}"
            run = MemoryUpdater(vault).apply_operations(resolved, ctx, report.provider, source, deferred=links)
            report.created += [u for u in run.created if u not in report.created]
            report.changed += run.changed
            report.problems += run.problems
        landed = write_links(vault, links) if links else []
        note = vault.read_note(page.note)
        if is_pending(note):
            note.extra = {k: v for k, v in note.extra.items() if k != PENDING_KEY}
            tx.put_text(page.note, serialize_note(note, vault.schema("source")), note)
    for link, new in landed:
        if not new:
            report.links_kept += 1
            continue
        entry = link_entry(link)
        report.links_added.append(entry)
        result.links_added.append(entry)


def _remember(vault: Vault, sha: str, uri: str, path: str) -> None:
    """That a text (its SHA-256) was imported as ``uri`` from ``path`` (the store's
    ``ingested`` table: a hint, so the same text is not imported twice)."""
    vault.store.try_write("the ingest registry", lambda w: w.execute(
        "INSERT OR REPLACE INTO ingested VALUES (?, ?, ?)", (sha, uri, path)))


def _write_source(vault: Vault, page: Page, in_batch: dict[str, str]) -> RunReport:
    """The page's source note, marked pending until its memories and links land. A text
    already imported (recorded as done, a finished note of the same title and text, or
    earlier in this batch) is not imported again: its note gets this path as another
    alias (the text a person added under that note is kept:
    engine.model.notes.rebuild_body). The vault's notes decide, so a deleted `.memlink/`
    (the registry of SHA-256s is a hint kept there) imports nothing twice."""
    seen = vault.store.row("SELECT uri FROM ingested WHERE sha = ?", (page.sha,))
    uri = in_batch.get(page.sha) or (seen[0] if seen and vault.exists(seen[0]) else None)
    origin = str(page.real or page.path.resolve())
    schema = vault.schema("source")
    content = page.body.strip()
    if uri is None:
        uri = schema.note_uri(schema.validate_fields({"title": page.title}, complete=False))
        stem, n = uri[:-3], 2
        while vault.exists(uri):
            note = vault.read_note(uri)
            if note.fields.get("origin") == origin or (not is_pending(note) and note.fields.get("content") == content):
                break  # this path's note, or the same text imported from another path
            uri, n = f"{stem}-{n}.md", n + 1  # another page with the same title: both are kept
        old = vault.read_note(uri) if vault.exists(uri) else None
        if old is None or is_pending(old) or old.fields.get("content") != content:
            return _new_source(vault, page, uri, origin, content, in_batch)
        # Finished before, but its SHA-256 was not recorded (a kill right after it landed,
        # a deleted `.memlink/`).
        _remember(vault, page.sha, uri, origin)
    in_batch.setdefault(page.sha, uri)
    page.uri = uri
    page.known = f"already imported as {uri}"
    if page.alias not in (vault.read_note(page.uri).fields.get("aliases") or []):
        vault.write_note("source", {"aliases": [page.alias]}, uri=page.uri)  # the same text at another path
    return RunReport("none")


def _new_source(vault: Vault, page: Page, uri: str, origin: str, content: str, in_batch: dict[str, str]) -> RunReport:
    """Write (or rewrite) the page's source note, marked pending, in one transaction."""
    schema = vault.schema("source")
    fields = {"title": page.title, "kind": page.kind, "aliases": [page.alias, *page.names], "origin": origin,
              "in_wiki": page.wiki, "content": content}
    existed = vault.exists(uri)  # imported before but not finished, or its file changed since
    # What an Obsidian vault's file says beyond its text, kept where Obsidian reads it: the
    # folder it came from and its tags, in the source note's frontmatter.
    folder = posixpath.dirname(page.alias)
    keep = {k: v for k, v in (("folder", folder), ("tags", page.tags)) if v}
    if page.document is not None:  # the original beside the note; a PDF's pages as line ranges
        keep.update(document_fields(vault, page.real or page.path, uri, page.document))
    with vault.transaction() as tx:
        note = vault.write_note("source", fields, uri=uri)
        wanted = {**note.extra, **keep, PENDING_KEY: PENDING}
        if note.extra != wanted:
            note.extra = wanted
            tx.put_text(note.uri, serialize_note(note, schema), note)
    in_batch[page.sha] = page.uri = note.uri
    report = RunReport("none")
    if not existed:
        report.created.append(note.uri)
    return report


def _references(vault: Vault, page: Page, names: NameIndex, scope: Scope, report: RunReport, extractor: Extractor | None,
                result: BatchResult) -> list[tuple]:
    """The link specs of a file's references; the unresolved and ambiguous ones are reported."""
    refs = find_references(vault, page.note, page.text, base=posixpath.dirname(page.alias), names=names, scope=scope)
    for miss in refs.missing:
        if miss.candidates:
            result.ambiguous.append({"file": str(page.path), "line": miss.line, "ref": miss.raw,
                                     "candidates": list(miss.candidates)})
            report.unresolved.append(f"{page.path}:{miss.line}: {miss.raw} (ambiguous: {', '.join(miss.candidates)})")
        else:
            result.unresolved.append({"file": str(page.path), "line": miss.line, "ref": miss.raw})
            report.unresolved.append(f"{page.path}:{miss.line}: {miss.raw}")
    specs = []
    for ref in refs.found:
        link_type, spec = reference_link(ref, page.kind, names.kind(ref.target), vault.config.link_table())
        specs.append((page.uri, ref.target, link_type, spec))
    if isinstance(extractor, LLMExtractor) and not extractor.breaker.tripped and specs:
        specs = refine_links(vault, extractor.provider, page, specs, report, extractor.breaker)
    return specs


def ingest(vault: Vault, path: Path, *, wiki: bool = True, extractor: Extractor | None = None) -> IngestResult:
    """One file (a batch of one)."""
    batch = ingest_batch(vault, [Path(path)], wiki=wiki, extractor=extractor)
    if batch.failed:
        raise InputError(batch.failed[0]["error"])
    return batch.files[0]
