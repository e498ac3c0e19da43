"""`memlink ingest PATH…`: files and folders of text and markdown, imported as one batch.

1. Collect: folders are walked recursively (hidden files and folders left out); only
   text and markdown files are taken from a folder, the others are reported as skipped.
2. Every file becomes a `sources/` note first, named by its title, recording the path it
   was imported from (relative to the folder given, or to the files' common folder) as an
   alias, and its kind (from its frontmatter `type`, else its folder: people/ → person).
3. Then, with every page of the batch a note, memories are extracted from each file (the
   batch's page titles are known names, so a mention links the page instead of making an
   entity) and the references of each file are resolved — markdown links, wikilinks and
   bare slugs — into typed two-sided links carrying the relation the text states. With
   an LLM provider the link types are then refined by the model (engine.extract.linktype).
   References that resolve to nothing are reported with file and line.

Each step is as safe as a single-file ingest: every note write and every file's links
are atomic (both sides or neither); a failure names the file and the batch goes on."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import posixpath
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from tinydb import Query

from ..errors import MemlinkError
from ..names import NameIndex
from .autolink import find_references, reference_link
from .context import ExtractContext
from .updater import RunReport, link_entry, write_links
from ..yamlio import safe_load

TEXT_SUFFIXES = {".md", ".markdown", ".mdown", ".txt", ".text"}
# Folder names that say what the pages in them are (GBrain's brain layout and the like).
FOLDER_KINDS = {
    "people": "person", "person": "person", "persons": "person", "contacts": "person",
    "companies": "company", "company": "company", "orgs": "company", "organisations": "company",
    "organizations": "company", "meetings": "meeting", "meeting": "meeting", "calls": "meeting",
}
_FRONT = re.compile(r"\A---[ \t]*\n(.*?\n)---[ \t]*(?:\n|\Z)", re.S)


@dataclass
class Page:
    path: Path
    alias: str  # the path it was imported from, relative to the batch's root
    text: str = ""
    body: str = ""  # the text without its frontmatter
    title: str = ""
    kind: str = "document"
    sha: str = ""
    uri: str | None = None
    known: str | None = None  # "already imported as …"


@dataclass
class BatchResult:
    files: list = field(default_factory=list)  # IngestResult, one per file imported or known
    skipped: list[dict] = field(default_factory=list)  # {path, why}: not text, already imported
    failed: list[dict] = field(default_factory=list)  # {path, error}
    unresolved: list[dict] = field(default_factory=list)  # {file, line, ref}
    links_added: list[dict] = field(default_factory=list)  # page-to-page links
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_json(self) -> dict:
        return {
            "files": [{"path": r.path, "source": r.source_uri, "skipped": r.skipped,
                       "report": r.report.to_json() if r.report else None} for r in self.files],
            "skipped": self.skipped, "failed": self.failed, "unresolved": self.unresolved,
            "links_added": self.links_added, "problems": self.problems, "seconds": round(self.seconds, 3),
        }


# -- collecting -----------------------------------------------------------------------------
def collect(paths: list[Path]) -> tuple[list[Page], list[dict], list[dict]]:
    """(pages to read, skipped, failed). A folder is its files' root; files given one by
    one share their common folder as root."""
    pages: list[Page] = []
    skipped: list[dict] = []
    failed: list[dict] = []
    files = [Path(p) for p in paths if Path(p).is_file()]
    root = Path(os.path.commonpath([str(f.resolve().parent) for f in files])) if files else None
    for arg in map(Path, paths):
        if arg.is_dir():
            for dirpath, dirnames, filenames in os.walk(arg):
                dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
                for name in sorted(filenames):
                    if name.startswith("."):
                        continue
                    path = Path(dirpath) / name
                    if path.suffix.lower() not in TEXT_SUFFIXES:
                        skipped.append({"path": str(path), "why": f"not a text or markdown file ({path.suffix or 'no suffix'})"})
                        continue
                    pages.append(Page(path, path.relative_to(arg).as_posix()))
        elif arg.is_file():
            pages.append(Page(arg, arg.resolve().relative_to(root).as_posix()))
        else:
            failed.append({"path": str(arg), "error": f"{arg}: no such file or folder"})
    return pages, skipped, failed


def read_page(page: Page) -> None:
    from .inputs import read_text_file

    page.text = read_text_file(page.path)
    page.sha = hashlib.sha256(page.text.encode("utf-8")).hexdigest()
    page.body, meta = page.text, {}
    if m := _FRONT.match(page.text):
        try:
            loaded = safe_load(m.group(1))
        except yaml.YAMLError:
            loaded = None
        if isinstance(loaded, dict):
            meta, page.body = loaded, page.text[m.end():]
    page.title = _title(meta, page.body, page.path)
    kind = meta.get("type") or meta.get("kind")
    if isinstance(kind, str) and kind.strip():
        page.kind = kind.strip().lower()
    else:
        folders = [FOLDER_KINDS.get(part.lower()) for part in page.alias.split("/")[:-1]]
        page.kind = next((k for k in reversed(folders) if k), "document")


def _title(meta: dict, body: str, path: Path) -> str:
    if isinstance(meta.get("title"), str) and meta["title"].strip():
        return meta["title"].strip()
    for line in body.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return path.stem.replace("_", " ").replace("-", " ").strip() or path.name


# -- the batch ------------------------------------------------------------------------------
def ingest_batch(vault, paths: list[Path], *, wiki: bool = True, extractor=None, progress=None) -> BatchResult:
    from .inputs import IngestResult, InputError, choose_extractor, run_extraction

    started = time.perf_counter()
    pages, skipped, failed = collect(paths)
    result = BatchResult(skipped=skipped, failed=failed)
    ok: list[Page] = []
    for page in pages:
        try:
            read_page(page)
        except InputError as exc:
            result.failed.append({"path": str(page.path), "error": str(exc)})
            continue
        ok.append(page)
    if extractor is None and ok:
        extractor, _health = choose_extractor(vault)
    reports: dict[str, RunReport] = {}
    # Pass 1: every file a note, before any reference is resolved.
    table = vault.state.db("ingested").table("files")
    written: list[Page] = []
    for page in ok:
        try:
            reports[page.alias] = _write_source(vault, table, page, wiki, extractor)
        except MemlinkError as exc:
            result.failed.append({"path": str(page.path), "error": f"{page.path}: {exc}"})
            continue
        written.append(page)
    # Pass 2: memories from each new file, with the batch's pages as known names. Their
    # links wait, to be written with the references' links.
    known = {page.title.lower(): page.uri for page in written}
    common = {w for page in written for w in re.findall(r"(?<![\w'-])[a-z][a-z'-]+", page.body)}
    specs: dict[str, list[tuple]] = {page.alias: [] for page in written}
    for i, page in enumerate(written):
        if progress:
            progress(i, 2 * len(written))
        if page.known or not wiki:
            continue
        ctx = ExtractContext("resource", page.body, dt.date.today(), base=posixpath.dirname(page.alias),
                             known_names=dict(known), common_words=common)
        ctx.source_page = ctx.add(vault.read_note(page.uri))
        try:
            report = run_extraction(vault, ctx, extractor, f"resource {page.alias}", deferred=specs[page.alias])
        except MemlinkError as exc:
            reports[page.alias].problems.append(f"{page.path}: extraction failed: {exc}")
            continue
        own = reports[page.alias]
        own.created += report.created
        own.changed += report.changed
        own.problems += report.problems
    # Pass 3: each file's references, resolved against the whole batch and the vault.
    names = NameIndex.for_vault(vault)
    for i, page in enumerate(written):
        if progress:
            progress(len(written) + i, 2 * len(written))
        specs[page.alias] += _references(vault, page, names, reports[page.alias], extractor, result)
    _write_batch_links(vault, written, specs, reports, result)
    for page in written:
        report = reports[page.alias]
        result.files.append(IngestResult(str(page.path), page.uri, None if page.known else report, skipped=page.known))
        if page.known:
            result.skipped.append({"path": str(page.path), "why": page.known})
        result.problems += report.problems
    if progress:
        progress(2 * len(written), 2 * len(written))
    result.seconds = time.perf_counter() - started
    return result


def _write_batch_links(vault, written: list[Page], specs: dict[str, list[tuple]], reports: dict, result: BatchResult) -> None:
    """All the batch's links in one transaction (one rewrite per sidecar); if that fails,
    file by file, so that the failure names its file and the other files' links land."""
    try:
        done: dict[str, list] = {}
        flat = [spec for page in written for spec in specs[page.alias]]
        links = write_links(vault, flat) if flat else []
        at = 0
        for page in written:
            n = len(specs[page.alias])
            done[page.alias] = links[at : at + n]
            at += n
    except MemlinkError:
        done = {}
        for page in written:
            try:
                done[page.alias] = write_links(vault, specs[page.alias]) if specs[page.alias] else []
            except MemlinkError as exc:
                reports[page.alias].problems.append(f"{page.path}: links not written: {exc}")
    for alias, links in done.items():
        for link, new in links:
            if not new:
                reports[alias].links_kept += 1
                continue
            entry = link_entry(link)
            reports[alias].links_added.append(entry)
            result.links_added.append(entry)


def _write_source(vault, table, page: Page, wiki: bool, extractor) -> RunReport:
    seen = table.get(Query().sha256 == page.sha)
    if seen and vault.exists(seen["uri"]):
        page.uri = seen["uri"]
        page.known = f"already imported as {seen['uri']}"
        if page.alias not in (vault.read_note(page.uri).fields.get("aliases") or []):
            vault.write_note("source", {"aliases": [page.alias]}, uri=page.uri)  # the same text at another path
        return RunReport("none")
    origin = str(page.path.resolve())
    schema = vault.schema("source")
    fields = {"title": page.title, "kind": page.kind, "aliases": [page.alias], "origin": origin,
              "in_wiki": wiki, "content": page.body.strip()}
    uri = schema.note_uri(schema.validate_fields({"title": page.title}, complete=False))
    stem, n = uri[:-3], 2
    while vault.exists(uri) and vault.read_note(uri).fields.get("origin") != origin:
        uri, n = f"{stem}-{n}.md", n + 1  # another page with the same title: both are kept
    note = vault.write_note("source", fields, uri=uri)
    table.upsert({"sha256": page.sha, "uri": note.uri, "path": origin}, Query().sha256 == page.sha)
    page.uri = note.uri
    report = RunReport(extractor.name if wiki else "none")
    report.created.append(note.uri)
    return report


def _references(vault, page: Page, names: NameIndex, report: RunReport, extractor, result: BatchResult) -> list[tuple]:
    """The link specs of a file's references; the unresolved ones are reported."""
    refs = find_references(vault, page.uri, page.text, base=posixpath.dirname(page.alias), names=names)
    for miss in refs.missing:
        result.unresolved.append({"file": str(page.path), "line": miss.line, "ref": miss.raw})
        report.unresolved.append(f"{page.path}:{miss.line}: {miss.raw}")
    specs = []
    for ref in refs.found:
        link_type, spec = reference_link(ref, page.kind, names.kind(ref.target))
        specs.append((page.uri, ref.target, link_type, spec))
    provider = getattr(extractor, "provider", None)
    if provider is not None and specs:
        from .linktype import refine_links

        specs = refine_links(vault, provider, page, specs, report)
    return specs
