"""`memlink ingest PATH…`: files and folders of text and markdown, imported as one batch.

1. Collect: folders are walked recursively (hidden files and folders left out); regular
   text and markdown files are its pages, images, PDFs and canvases its attachments
   (``ATTACHMENT_SUFFIXES``), copied beside the pages. Symbolic links, FIFOs and other
   special files are reported as skipped (never followed, never opened), as is anything
   whose real path leaves the folder given. A path inside the vault is refused.
2. Every file becomes a `sources/` note first, at its path in the folder given under
   ``sources/<the folder's name>/`` (a file given alone: ``sources/<its name>``), titled
   as Obsidian names it (frontmatter `title`, else the file name), with its `aliases` and
   `tags` at the top of its frontmatter and its kind (frontmatter `type`, else a tag or
   its folder: people/ → person). That path is the file's identity (a note there from
   another file still there goes to ``name-2.md``): ingesting the folder again syncs it —
   a changed file's note is rewritten (unless its text, title, names, tags or properties
   are no longer those imported, ``imported`` in its frontmatter, or its view was edited:
   then it is reported and left),
   an unchanged one left, a deleted or renamed one reported (``prune`` moves a renamed
   file's note and removes the notes of files gone but edited ones), from wherever the
   folder now is.
3. Then, with every page of the batch a note, memories are extracted from each file (the
   batch's page titles are known names, so a mention links the page instead of making an
   entity) and the references of each file are resolved as Obsidian resolves them
   (engine.retrieve.names.NameIndex.lookup_file: relative path, path, file name; an
   alias or title only when nothing else matches, and reported) — markdown links,
   wikilinks, embeds (of a page, or of a document imported as one) and bare slugs, and
   the wikilinks of its properties (``related: "[[Beta]]"``: the link's description names
   the property); not code, other frontmatter or attachments — into typed two-sided links carrying the relation
   the text states and the heading or block they point to (as line ranges of the target). A changed file's links its earlier text
   stated and its text no longer does are removed in the same unit of work (a link a
   person made stays as they made it). References that resolve to nothing (a note, or a
   file that is not a page), or to several pages nothing tells apart, are reported with
   file and line.
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
(`retry_pending`), from the note's own text. Its SHA-256 is recorded only once it is
finished. A failure names the file and the batch goes on."""

from __future__ import annotations

import datetime as dt
import os
import posixpath
import re
import stat
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import yaml

from ..errors import MemlinkError, UriError
from ..index import choose_model, model_line
from ..model.blocks import strip_links_block, view_span
from ..model.files import ATTACHMENT_SUFFIXES, DOCUMENT_SUFFIXES
from ..model.imported import IMPORTED_KEY, OBSIDIAN_KEYS, edited_since_import, imported_sha, text_sha
from ..model.notes import PENDING, PENDING_KEY, TOP_KEYS, Note, is_pending, serialize_note, split_frontmatter
from ..model.text import words
from ..model.uris import normalize_uri
from ..model.yamlio import MAX_DEPTH, CoreLoader, nesting, safe_load
from ..retrieve.names import TEXT_SUFFIXES, NameIndex, Scope, file_names, path_key
from ..review.actions import log_action
from ..storage.writes import PersonLinks, person_links
from .autolink import Reference, find_property_references, find_references, reference_link, stated
from .context import ExtractContext
from .documents import DOCUMENT_KEYS, Converted, copy_in, copy_state, document_fields, read_input
from .inputs import IngestResult, InputError, choose_extractor
from .linktype import refine_links
from .loop import ExtractLoop, LLMExtractor
from .rules import source_day
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
    moved_from: str = ""  # the path its note had when a person moved it in the vault, its links still there
    wiki: bool = True  # extract memories (not --no-wiki)
    names: list[str] = field(default_factory=list)  # its frontmatter's `aliases` (Obsidian): other names
    tags: list[str] = field(default_factory=list)  # its frontmatter's `tags`, without '#'
    properties: dict[str, Any] = field(default_factory=dict)  # the rest of its frontmatter (Obsidian's properties)
    warning: str = ""  # what the import could not read of the file, said with its report
    restamp: bool = False  # an unchanged page whose note holds other properties or an older hash (``_restamp``)
    new_properties: bool = False  # … its file's properties changed since the import (its text did not): taken in place
    heading: str = ""  # the `# ` line that opens its text, if any: a name memlink knows it by, never its title
    top: str | None = None  # the folder given it came from (its name), None for files given one by one
    target: str = ""  # the uri of its note: sources/<folder given>/<its path there>.md
    state: str = ""  # new | changed | unchanged | edited (``_plan``) | renamed (left) or moved (``prune``)
    before: str | None = None  # a changed note's text as it was: the links it stated are ingest's own
    before_properties: dict[str, Any] = field(default_factory=dict)  # ... and its properties as they were
    stated_before: set[tuple[str, str]] = field(default_factory=set)  # (to, match_text or description) of those links
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
    unresolved: list[dict] = field(default_factory=list)  # {file, line, ref}: to notes that do not exist
    missing_files: list[dict] = field(default_factory=list)  # {file, line, ref}: to files (images, PDFs…) not there
    ambiguous: list[dict] = field(default_factory=list)  # {file, line, ref, candidates}
    links_added: list[dict] = field(default_factory=list)  # every new link: page-to-page and derived notes'
    links_removed: list[dict] = field(default_factory=list)  # {from, to}: links a changed file no longer states
    links_kept_for_you: list[dict] = field(default_factory=list)  # {from, to}: … a person changed since: kept
    by_alias: list[dict] = field(default_factory=list)  # {file, line, ref, to}: resolved only through an alias
    attachments: int = 0  # links to the import's files that are not pages (images, PDFs…)
    copied: list[str] = field(default_factory=list)  # attachments copied (or, in a dry run, to copy) into the vault
    changed: list[str] = field(default_factory=list)  # notes of files whose text changed since their import
    edited: list[dict] = field(default_factory=list)  # {path, source}: edited in the vault since import, left alone
    deleted: list[dict] = field(default_factory=list)  # {source, path}: notes of files no longer in the folder given
    renamed: list[dict] = field(default_factory=list)  # {from, to}: a note's text found again under another path
    relinked: list[dict] = field(default_factory=list)  # {from, to}: notes a person moved in the vault; their links follow
    pruned: list[str] = field(default_factory=list)  # notes of deleted files removed (``prune``)
    pruned_links: list[dict] = field(default_factory=list)  # {from, to, type}: their links to notes that stay, removed too
    dry_run: bool = False
    problems: list[str] = field(default_factory=list)
    fallback: str = ""  # why the model was given up and the rules extracted the rest, or ""
    model: str = ""  # an embedding model that reads the pages, where the default does not (``choose_model``) ...
    model_set: bool = False  # ... set in memlink.yaml by this import (the first into an empty vault)
    seconds: float = 0.0

    def to_json(self) -> dict:
        return {
            "files": [{"path": r.path, "source": r.source_uri, "skipped": r.skipped,
                       "report": r.report.to_json() if r.report else None} for r in self.files],
            "skipped": self.skipped, "failed": self.failed, "pending": self.pending, "unresolved": self.unresolved,
            "missing_files": self.missing_files,
            "ambiguous": self.ambiguous, "links_added": self.links_added, "page_links": len(self.page_links()),
            "links_removed": self.links_removed, "links_kept_for_you": self.links_kept_for_you, "by_alias": self.by_alias, "attachments": self.attachments,
            "copied": self.copied, "changed": self.changed, "edited": self.edited, "deleted": self.deleted,
            "renamed": self.renamed, "relinked": self.relinked, "pruned": self.pruned, "pruned_links": self.pruned_links, "dry_run": self.dry_run,
            "problems": self.problems, "fallback": self.fallback, "model": self.model, "model_set": self.model_set,
            "seconds": round(self.seconds, 3),
        }

    def extend(self, other: BatchResult) -> None:
        """Add another batch's findings to this one (every list; the counts added)."""
        for name, value in vars(other).items():
            if isinstance(value, list):
                getattr(self, name).extend(value)
        self.attachments += other.attachments
        self.seconds += other.seconds
        self.fallback = self.fallback or other.fallback
        if not self.model:
            self.model, self.model_set = other.model, other.model_set

    def model_line(self) -> str:
        return model_line(self.model, self.model_set)

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
                             "a note in the vault is read as it is, once its frontmatter names its memory_type and "
                             "fields (`memlink check` says what is missing)")


@dataclass
class Attachment:
    """A file of a folder given that is not a page (an image, a PDF, a canvas): copied
    beside the pages, so that their links and embeds still find it."""
    path: Path  # as found: how it is reported
    real: Path
    rel: str  # its path in the folder given
    root: int  # which of the paths given
    target: str  # where it goes in the vault: sources/<folder given>/<its path there>


def root_name(folder: Path) -> str:
    """The name a folder given is kept under in ``sources/`` (its identity: the same
    folder ingested from another place is the same import)."""
    return Path(os.path.realpath(folder)).name.lstrip(".") or "import"


def collect(paths: list[Path], vault_root: Path | None = None
            ) -> tuple[list[Page], list[Attachment], list[dict], list[dict], set[tuple[int, str]]]:
    """(pages to read, attachments, skipped, failed, unseen). A folder is its files' root;
    files given one by one share their common folder as root. In a folder only regular
    files are taken: a symbolic link or a special file (FIFO, socket, device) is skipped,
    named, and so is a file whose real path is outside the folder, or the vault when a
    folder holds it. A folder that cannot be listed fails, named; ``unseen`` holds it as
    (which path given, its path there): its files' notes are not known to be gone."""
    pages: list[Page] = []
    attachments: list[Attachment] = []
    skipped: list[dict] = []
    failed: list[dict] = []
    unseen: set[tuple[int, str]] = set()

    def skip(path: Path, why: str) -> None:
        skipped.append({"path": str(path), "why": why})

    files = [Path(p) for p in paths if Path(p).is_file()]
    root = Path(os.path.commonpath([str(f.resolve().parent) for f in files])) if files else None
    for n, arg in enumerate(map(Path, paths)):
        if arg.is_dir():
            top = Path(os.path.realpath(arg))
            top_name = root_name(top)

            def unlisted(exc: OSError, arg: Path = arg, top: Path = top, n: int = n) -> None:
                rel = Path(exc.filename).relative_to(top).as_posix() if exc.filename else "."
                failed.append({"path": str(arg / rel), "error": f"{arg / rel}: a folder that cannot be read "
                                                                f"({exc.strerror or exc}); its files' notes are left as they are"})
                unseen.add((n, "" if rel == "." else f"{rel}/"))

            for dirpath, dirnames, filenames in os.walk(top, onerror=unlisted):  # never follows a linked folder
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
                    suffix = path.suffix.lower()
                    if suffix not in TEXT_SUFFIXES + DOCUMENT_SUFFIXES and suffix not in ATTACHMENT_SUFFIXES:
                        skip(shown, f"not a text or markdown file ({path.suffix or 'no suffix'})")
                        continue
                    real = Path(os.path.realpath(path))
                    if not _inside(real, top):
                        skip(shown, f"outside the folder given ({real})")
                        continue
                    rel = path.relative_to(top).as_posix()
                    if suffix in ATTACHMENT_SUFFIXES:
                        attachments.append(Attachment(shown, real, rel, n, f"sources/{top_name}/{rel}"))
                    else:
                        pages.append(Page(shown, rel, real, root=n, top=top_name))
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
    return pages, attachments, skipped, failed, unseen


def read_page(page: Page, max_bytes: int | None = None) -> None:
    page.text, page.document = read_input(page.real or page.path, follow=False, max_bytes=max_bytes)
    page.sha = text_sha(page.text)
    page.body, meta = page.text, {}
    front, body = split_frontmatter(page.text)
    if front is not None and body is not None:
        why = ""
        try:
            loaded = safe_load(front, CoreLoader)  # (as Obsidian reads it: "NO" and "01234" are text)
        except yaml.YAMLError as exc:
            loaded, why = None, f"cannot be read: {' '.join(str(exc).split())}"
        if isinstance(loaded, dict):
            meta, page.body = loaded, body
        elif loaded is not None:  # (None: empty, or comments only)
            why = f"is a {type(loaded).__name__}, not properties"
        if why:
            page.warning = (f"{page.path}: its frontmatter {why}; imported as text, without a title, aliases, tags "
                            f"or properties from it")
        if isinstance(loaded, dict) and (deep := nesting(loaded)) >= MAX_DEPTH:  # (its note keeps them a level deeper)
            raise InputError(f"{page.path}: its frontmatter nests {deep} levels deep; a note keeps at most {MAX_DEPTH - 1}")
    page.title = _title(meta, page.path)
    # (an alias written as a tag, "#learning/math", is not a name Obsidian links by)
    page.names = [n for n in _strings(meta.get("aliases") or meta.get("alias")) if n != page.title and not n.startswith("#")]
    first = page.body.lstrip().split("\n", 1)[0]
    if first.startswith("# ") and first[2:].strip() not in (page.title, *page.names):
        page.heading = first[2:].strip()  # ("# Mia Brown" over mia.md: what a question calls it)
    if page.document is not None and page.heading and not isinstance(meta.get("title"), str):
        page.title, page.heading = page.heading, ""  # a document's own title (an HTML page's <title>)
    # (a tag holds no space: "#alpha #beta/gamma" is two)
    page.tags = [t.lstrip("#") for t in _strings(meta.get("tags") or meta.get("tag"), r"[,\s]+") if t.lstrip("#")]
    said = next((k for k in ("type", "kind") if isinstance(meta.get(k), str) and meta[k].strip()), None)
    # (the other of the two, when both are there, stays one of its properties)
    page.properties = {str(k): v for k, v in meta.items() if k not in _READ_KEYS or k in ("type", "kind") and k != said}
    if said is not None:
        page.kind = meta[said].strip().lower()
    else:  # an Obsidian vault's meaning: a tag (#person, #people/…), else the nearest folder (People/)
        hints = [t.split("/")[0] for t in page.tags] + list(reversed(page.alias.split("/")[:-1]))
        kinds = [FOLDER_KINDS.get(h.lower()) or (h.lower() if h.lower() in FOLDER_KINDS.values() else None)
                 for h in hints]
        page.kind = next((k for k in kinds if k), "document")


_READ_KEYS = frozenset({"title", "aliases", "alias", "tags", "tag", "type", "kind"})  # a file's frontmatter read above


def _strings(value: object, sep: str = ",") -> list[str]:
    """A frontmatter list, a string of items split at ``sep`` (a regex), or one number, as
    clean strings (Obsidian accepts each: ``aliases: 42`` is the name "42")."""
    items = value if isinstance(value, list) else re.split(sep, value) if isinstance(value, str) else [value]
    return list(dict.fromkeys(str(v).strip() for v in items
                              if isinstance(v, (str, int, float)) and not isinstance(v, bool) and str(v).strip()))


def _title(meta: dict, path: Path) -> str:
    """Obsidian's name for a page: its frontmatter's `title`, else its file name as written
    (a heading names a section, never the page), in the Unicode form text is typed in (a
    Mac's file names write "é" as "e" and an accent: searched as typed, it would not match)."""
    if isinstance(meta.get("title"), str) and meta["title"].strip():
        return meta["title"].strip()
    return unicodedata.normalize("NFC", path.stem.strip() or path.name)


def _place(pages: list[Page], result: BatchResult) -> list[Page]:
    """Each page's note path: its path in the folder given, under ``sources/<folder's
    name>/`` (files given one by one: under ``sources/``), with ``.md`` for its suffix, so
    that Obsidian resolves the links the pages' own text holds as it did in the folder
    (docs/DESIGN.md, "Ingest"). Pages whose path is not a valid note path fail, named."""
    placed: list[Page] = []
    taken: set[str] = set()
    for page in pages:
        stem = posixpath.splitext(page.alias)[0]
        for name in (f"{stem}.md", f"{page.alias}.md"):  # (notes.md and notes.txt side by side)
            target = f"sources/{page.top}/{name}" if page.top is not None else f"sources/{name}"
            if target.lower() not in taken:
                break
        try:
            page.target = normalize_uri(unicodedata.normalize("NFC", target))  # (a Mac's "e" and accent: typed as one)
        except UriError as exc:
            result.failed.append({"path": str(page.path), "error": f"{page.path}: cannot be kept in the vault ({exc})"})
            continue
        taken.add(page.target.lower())
        placed.append(page)
    return placed


def _plan(vault: Vault, page: Page, taken: set[str], fresh: bool = False) -> str:
    """What the page's file is to its note: new, changed, unchanged, or changed while its
    note was edited in the vault (then the note is left as it is). A note at its path that
    came from another file (``_other_file``) is that file's: the page goes to ``name-2.md``, …"""
    stem, n = page.target[: -len(".md")], 1
    while True:
        if n == 1 and not vault.exists(page.target) and (known := _imported_as(vault, page) or _moved(vault, page)):
            if vault.links.of(page.target):  # (moved by hand, not by `memlink mv`: its links follow it in this sync)
                page.moved_from = page.target
            page.target = known  # this file, imported before with its folder (or alone), or its note moved: not a second note
        if not vault.exists(page.target):
            return "new"
        note = vault.read_note(page.target)
        if note.memory_type != "source":
            raise InputError(f"{page.path}: {page.target} is already a {note.memory_type} note in the vault")
        if not _other_file(note, page, fresh):
            break
        while page.target.lower() in taken or page.target == note.uri:
            n += 1
            page.target = f"{stem}-{n}.md"
    taken.add(page.target.lower())
    if is_pending(note):
        return "changed"
    same = note.fields.get("content") == page.body.strip() and _says_the_same(note, page)
    properties = (note.extra.get("properties") or {}) == page.properties
    if same and properties:  # (the note says what the file says, whoever wrote it: most files of a sync)
        page.restamp = note.extra.get(IMPORTED_KEY) not in (_agreed(page), text_sha(page.body.strip()))
        return "unchanged"
    if edited_since_import(note, vault.schema("source")):
        return "edited"  # left as it is
    if not same:
        return "changed"
    page.restamp = page.new_properties = True  # (only its properties changed in the file: taken in place)
    return "unchanged"


def _agreed(page: Page) -> str:
    """The ``imported`` hash of a note that holds what the page's file says."""
    return imported_sha(page.body.strip(), page.title, _file_keys(page))


def _file_keys(page: Page) -> dict[str, object]:
    """What an Obsidian vault's file says beyond its text, kept where Obsidian reads it (the
    top of the note's frontmatter): its names and tags, the folder it came from and the rest
    of its frontmatter as written (``properties``: a permalink, a status, a rating)."""
    folder = posixpath.dirname(page.alias)
    return {k: v for k, v in (("folder", folder), ("aliases", page.names), ("tags", page.tags),
                              ("properties", page.properties)) if v}


def _says_the_same(note: Note, page: Page) -> bool:
    """Whether the note holds what the file's frontmatter says: its title, names and tags
    (its other properties are no input to extraction: ``_restamp``)."""
    keys = [k for k in OBSIDIAN_KEYS if k != "properties"]
    return (note.fields.get("title") == page.title
            and {k: note.extra[k] for k in keys if k in note.extra} == {k: v for k, v in _file_keys(page).items() if k in keys})


def _restamp(vault: Vault, page: Page) -> None:
    """A file whose text, title, names and tags its note holds already may still have other
    properties than the note (changed since, or imported before they were kept): the note
    takes the file's, in place; nothing is extracted again. Its ``imported`` hash becomes
    the file's, so a later change of the file is not taken for an edit in the vault (nor a
    person's edit that made the note say what the file says)."""
    if not page.restamp:
        return
    note = vault.read_note(page.target)
    with vault.transaction() as tx:
        note.extra = {**note.extra, IMPORTED_KEY: _agreed(page)}
        if (note.extra.get("properties") or {}) != page.properties:
            extra = {k: v for k, v in note.extra.items() if k != "properties"}
            note.extra = {**extra, "properties": page.properties} if page.properties else extra
        tx.put_text(note.uri, serialize_note(note, vault.schema("source"), vault.read_text(note.uri)), note)


def _other_file(note: Note, page: Page, fresh: bool) -> bool:
    """Whether a source note with another text came from another file than the page's: its
    ``origin`` is another file, still there, or the batch's files are all new (``fresh``:
    the inbox, whose files imported before moved to done/)."""
    if note.fields.get("content") == page.body.strip():
        return False
    if fresh:
        return True
    origin = str(note.fields.get("origin") or "")
    return bool(origin) and origin != str(page.real or "") and os.path.exists(origin)


def _claim(vault: Vault, folder: Path, name: str, taken: set[str]) -> str:
    """The folder's name in ``sources/``: its own, unless the notes there came from another
    folder of that name that still exists (then ``name-2``, …). Notes whose files are gone
    from where they were are this folder's, moved."""
    real, n, claimed = os.path.realpath(folder), 1, name
    while True:
        prefix = f"sources/{claimed}/"
        mine = None
        if claimed not in taken:
            for entry in [e for e in vault.catalog.all("source") if e.uri.startswith(prefix)][:20]:
                origin = str(vault.read_note(entry.uri).fields.get("origin") or "")
                if origin.startswith(real + os.sep):
                    mine = True
                    break
                if origin and os.path.exists(origin):
                    mine = False  # another folder of that name, still there
            if mine is not False:
                return claimed
        n += 1
        claimed = f"{name}-{n}"


def _name_roots(vault: Vault, paths: list[Path], pages: list[Page], attachments: list[Attachment]) -> dict[int, str]:
    """Each folder given's place in ``sources/`` (where it went before, ``_earlier_place``,
    else ``_claim``), set on its pages and attachments."""
    names: dict[int, str] = {}
    inner: dict[int, tuple[str, str]] = {}  # root -> (the earlier import's name, the folder's path in it)
    for n, path in enumerate(map(Path, paths)):
        if path.is_dir():
            place = _earlier_place(vault, path)
            if place is not None and "/" in place:
                name, _, inside = place.partition("/")
                inner[n] = (name, inside)
            names[n] = place or _claim(vault, path, root_name(path), set(names.values()))
    for page in pages:
        if page.root in inner:  # (its path as the earlier import has it: its folders tell its kind, as they did)
            page.top, page.alias = inner[page.root][0], f"{inner[page.root][1]}/{page.alias}"
        elif page.root in names:
            page.top = names[page.root]
        elif (earlier := _earlier_file_place(vault, page)) is not None:  # (a file of a folder imported before, alone)
            page.top, page.alias = earlier
    for att in attachments:
        att.target = f"sources/{names[att.root]}/{att.rel}"
    return names


def _earlier_file_place(vault: Vault, page: Page) -> tuple[str, str] | None:
    """Where a file given alone went when it was imported with its folder (the ingest
    registry, by its path: its text may have changed since): that import's name and the
    file's path in it, so its note is the same and its folders tell its kind as they did."""
    rows = vault.store.rows("SELECT uri FROM ingested WHERE path = ?", (str(page.real or page.path),))
    places = {uri for (uri,) in rows if uri.startswith("sources/") and uri.count("/") > 1 and vault.exists(uri)}
    if len(places) != 1:
        return None
    name, _, inside = places.pop().removeprefix("sources/").partition("/")
    return name, posixpath.join(posixpath.dirname(inside), page.path.name)


def _earlier_place(vault: Vault, folder: Path) -> str | None:
    """Where in ``sources/`` the files of ``folder`` went when it was imported before, read
    from the ingest registry: its own name there (``notes-2``), or, for a folder inside a
    folder imported before, that import's name and the folder's path under it
    (``notes/People``). Then its files are the notes they were: not a second copy under
    ``sources/People/``, and not the notes of another folder of the same name."""
    real = os.path.realpath(folder)
    for uri, path in vault.store.rows("SELECT uri, path FROM ingested WHERE substr(path, 1, ?) = ? ORDER BY path",
                                      (len(real) + 1, real + os.sep)):
        rel = Path(path).relative_to(real).with_suffix(".md").as_posix()
        if not uri.startswith("sources/") or not uri.lower().endswith(f"/{rel}".lower()):
            continue  # (a note moved since, or a file given alone)
        place = uri[len("sources/"): -len(rel) - 1]
        if place:
            return place
    return None


def _gone(vault: Vault, names: dict[int, str], targets: set[str]) -> list[dict]:
    """The notes of an earlier import of the folders given whose files are no longer there."""
    prefixes = tuple(f"sources/{name}/" for name in names.values())
    return [{"source": e.uri, "path": next((a for a in e.aliases if "/" in a or "." in a), e.uri)}
            for e in vault.catalog.all("source") if prefixes and e.uri.startswith(prefixes) and e.uri not in targets]


def _renamed(vault: Vault, pages: list[Page], gone: list[dict]) -> list[dict]:
    """New pages whose text is a gone note's: the same file, moved or renamed."""
    texts: dict[str, str] = {}
    for g in gone:
        content = vault.read_note(g["source"]).fields.get("content")
        if isinstance(content, str):
            texts.setdefault(content, g["source"])
    return [{"from": texts[page.body.strip()], "to": page.target, "path": str(page.path)}
            for page in pages if page.state == "new" and page.body.strip() in texts]


def _copy_attachments(vault: Vault, attachments: list[Attachment], result: BatchResult, dry_run: bool) -> None:
    """Copy the folders' attachments beside their pages (``copy_in``: one already there with
    the same bytes is left, one edited in the vault is kept and reported)."""
    limit = vault.config.ingest.max_bytes
    for att in attachments:
        try:
            data = att.real.read_bytes() if limit is None or att.real.stat().st_size <= limit else None
            if data is None:
                result.skipped.append({"path": str(att.path), "why": f"too large to copy (ingest.max_bytes is {limit:,})"})
                continue
            done = copy_state(vault, data, att.target) if dry_run else copy_in(vault, data, att.target)
            if done == "edited":
                result.edited.append({"path": str(att.path), "source": att.target, "why": "kept (edited)"})
            elif done in ("copied", "copy"):  # (done, or in a dry run to do)
                result.copied.append(att.target)
        except (OSError, UriError) as exc:
            result.failed.append({"path": str(att.path), "error": f"{att.path}: not copied ({_why(exc)})"})


# -- the batch ------------------------------------------------------------------------------

def pending_sources(vault: Vault) -> list[str]:
    """The uris of the source notes whose extraction has not finished."""
    return [e.uri for e in vault.catalog.all("source", pending=True)]  # (the catalog's: no file is read)


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
                          wiki=note.fields.get("in_wiki") is not False, properties=_properties(note)))
    return pages


def ingest_batch(vault: Vault, paths: list[Path], *, wiki: bool = True, extractor: Extractor | None = None,
                 progress: Callable[[int, int], object] | None = None, dry_run: bool = False,
                 prune: bool = False, fresh: bool = False) -> BatchResult:
    """Import (or sync again) the files and folders ``paths``. ``dry_run``: say what would
    change and write nothing. ``prune``: move the notes of renamed files to their new paths
    (``move_note``), then remove the notes of files no longer in a folder given but those
    edited in the vault, in one unit of work (``memlink undo`` puts them back). ``fresh``:
    the files are new ones (the inbox), never a later text of a note already there."""
    started = time.perf_counter()
    refuse_vault_paths(vault, paths)
    found, attachments, skipped, failed, unseen = collect(paths, vault.root)
    result = BatchResult(skipped=skipped, failed=failed, dry_run=dry_run)
    roots = _name_roots(vault, paths, found, attachments)
    placed = _place(found, result)
    ok: list[Page] = []
    taken = {page.target.lower() for page in placed}
    for page in placed:
        page.wiki = wiki
        try:
            read_page(page, vault.config.ingest.max_bytes)
            page.state = _plan(vault, page, taken, fresh)
        except InputError as exc:
            if page.top is not None and page.path.suffix.lower() == ".pdf":
                # A PDF in a folder whose text cannot be read (scanned, encrypted) is still
                # what the folder's pages link to and embed: copied as an attachment, said why.
                attachments.append(Attachment(page.path, page.real or page.path, page.alias, page.root,
                                              f"sources/{page.top}/{page.alias}"))
                result.skipped.append({"path": str(page.path), "why": f"kept as an attachment only: {exc}"})
            else:
                result.failed.append({"path": str(page.path), "error": str(exc)})
            continue
        except MemlinkError as exc:
            result.failed.append({"path": str(page.path), "error": str(exc)})
            continue
        ok.append(page)
    hidden = tuple(f"sources/{roots[n]}/{rel}" for n, rel in unseen if n in roots)  # (where its notes are)
    gone = [g for g in _gone(vault, roots, {page.target for page in placed}) if not g["source"].startswith(hidden)]
    result.renamed = _renamed(vault, ok, gone)
    moved = {pair["from"] for pair in result.renamed}
    result.deleted = [g for g in gone if g["source"] not in moved]  # (a renamed file is not also a deleted one)
    if not prune or dry_run:  # (a renamed file's note stays where it is until --prune moves it: never a second copy)
        waiting = {pair["to"]: pair["from"] for pair in result.renamed}
        for page in ok:
            if page.state == "new" and page.target in waiting:
                page.state, page.uri = "renamed", waiting[page.target]
                page.known = f"the file of {page.uri}, renamed: its note stays there until --prune moves it"
    result.relinked = [{"from": page.moved_from, "to": page.target} for page in ok if page.moved_from]
    _copy_attachments(vault, attachments, result, dry_run)
    doomed = _prunable(vault, result) if prune else []
    if dry_run:
        for page in ok:
            _dry(page, result)
        result.pruned, result.pruned_links = doomed, _links_of(vault, doomed)  # (would be)
        result.seconds = time.perf_counter() - started
        return result
    # (not in a dry run, which writes nothing; before pass 1, while a first import's vault is still empty)
    result.model, result.model_set = choose_model(vault, [page.body for page in ok if page.state == "new"])
    _relink_moved(vault, result)
    if prune:
        _move_renamed(vault, ok, result)
    # Pass 1: every file a source note, marked pending, before any reference is resolved.
    written: list[Page] = []
    reports: dict[int, RunReport] = {}  # id(page) -> its report
    for page in ok:
        try:
            reports[id(page)] = _write_source(vault, page, result)
        except (MemlinkError, OSError) as exc:  # (one file's place in the vault, not the rest of the batch)
            result.failed.append({"path": str(page.path), "error": f"{page.path}: {_why(exc)}"})
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
    # by one would have. References are read as Obsidian reads them in the file's own
    # folder given (engine.retrieve.names.NameIndex.lookup_file), then the vault's names.
    known = {page.title.lower(): page.note for page in written}
    common = {w for page in written for w in re.findall(r"(?<![\w'-])[a-z][a-z'-]+", page.body)}
    by_root: dict[int, dict[str, str]] = {}
    for page in written:
        by_root.setdefault(page.root, {})[path_key(page.alias)] = page.note
    stems = {root: file_names(keys) for root, keys in by_root.items()}
    files: dict[int, set[str]] = {}
    for att in attachments:
        files.setdefault(att.root, set()).update((att.rel.lower(), att.rel.rsplit("/", 1)[-1].lower()))
    contents = {page.note: page.body.strip() for page in written}
    batch = {page.note for page in written}
    unfinished: dict[int, str] = {}  # id(page) -> why its memories and links did not land
    persons = person_links(vault)  # (read once: a person's say on links, which the import's writes leave alone)
    for i, page in enumerate(written):
        if progress:
            progress(i, len(written))
        if page.state in ("edited", "renamed"):
            continue
        plan: tuple[Resolved, ExtractContext] | None = None
        try:
            step = "memories not extracted"
            if page.wiki and not page.known:
                day = source_day(page.alias, page.text)  # (never the day of import)
                ctx = ExtractContext("resource", page.body, day or dt.date.today(), base=posixpath.dirname(page.alias),
                                     known_names=dict(known), common_words=common, day_known=day is not None)
                ctx.source_page = ctx.add(vault.read_note(page.note))
                assert extractor is not None  # chosen above
                reports[id(page)].provider = extractor.name  # (the rules, once the model was given up)
                plan = (resolve_operations(ExtractLoop(vault, extractor).run(ctx), ctx), ctx)
            step = "references not resolved"
            scope = Scope(by_root[page.root], batch, posixpath.dirname(path_key(page.alias)), files.get(page.root, set()),
                          stems[page.root])
            refs = _references(vault, page, NameIndex.for_vault(vault), scope, reports[id(page)], extractor, result,
                               contents)
            step = "nothing of its memories and links was written"
            _land(vault, page, plan, refs, reports[id(page)], result, persons)
        except (MemlinkError, OSError) as exc:
            unfinished[id(page)] = f"{step}: {_why(exc)}"
    # Only now is a file done: its SHA-256 is recorded.
    for page in written:
        if id(page) not in unfinished and not page.known and page.sha and page.uri:
            _remember(vault, page.sha, page.uri, str(page.real or page.path))
    for page in written:
        report = reports[id(page)]
        if page.warning:
            report.problems.insert(0, page.warning)
        if id(page) in unfinished:
            why = unfinished[id(page)]
            result.pending.append({"path": str(page.path), "source": page.note, "error": why})
            report.problems.append(f"{page.path}: {why}. Written: the source note {page.note}, marked pending "
                                   f"(`memlink check` lists it); the next ingest, commit or dream retries it")
        said = page.known if not page.new_properties else None  # (taken in: not skipped)
        result.files.append(IngestResult(str(page.path), page.uri, None if said else report, skipped=said))
        if page.known and page.state not in ("renamed", "edited") and not page.new_properties:  # (said in result.renamed, .edited, .changed)
            result.skipped.append({"path": str(page.path), "why": page.known})
        result.problems += report.problems
    uris = [uri for uri in doomed if vault.exists(uri)]  # (a renamed file's note was moved)
    if uris:
        result.pruned_links = _links_of(vault, uris)
        with vault.transaction() as tx:  # one unit of work, recorded so that `memlink undo` puts them back
            for uri in uris:
                vault.delete_note(uri)
            log_action(vault, tx, "prune", uris[0], uris[-1], f"removed {len(uris)} notes of files no longer there")
        result.pruned = uris
    if progress:
        progress(len(written), len(written))
    result.fallback = extractor.fallback if extractor is not None else ""
    result.seconds = time.perf_counter() - started
    return result


def _prunable(vault: Vault, result: BatchResult) -> list[str]:
    """The notes of gone files ``prune`` removes: not one edited in the vault (kept, and
    reported as edited)."""
    doomed = []
    for gone in result.deleted:
        note = vault.read_note(gone["source"])
        if edited_since_import(note, vault.schema("source")) or _written_beside(note):
            result.edited.append({"path": gone["path"], "source": gone["source"], "why": "kept (edited)"})
            continue
        doomed.append(gone["source"])
    return doomed


def _links_of(vault: Vault, doomed: list[str]) -> list[dict]:
    """The links between the notes ``prune`` removes and notes that stay (a person's among
    them): they go with the notes, and the output names them."""
    gone, out = set(doomed), []
    for links in vault.links.of_many(doomed).values():
        for link in links:
            if (link.to_uri if link.direction == "links" else link.from_uri) not in gone:
                out.append({"from": link.from_uri, "to": link.to_uri, "type": link.link_type.value})
    return out


def _written_beside(note: Note) -> bool:
    """Whether a person added to a source note what ingest never writes: text above or
    below its view (outside the Links block), or a frontmatter key of their own. (A
    re-import keeps both; removing the note would lose them.)"""
    body = strip_links_block(note.body)
    span = view_span(body)
    if span is not None and (body[: span[0]] + body[span[1] :]).strip():
        return True
    return any(key not in _INGEST_AND_REVIEW_KEYS for key in note.extra)


def _relink_moved(vault: Vault, result: BatchResult) -> None:
    """The links of each note a person moved in the vault (by hand, or Obsidian's rename)
    follow it to where it is (``move_note`` of a note moved by hand: one unit of work
    each, undoable), before the sync links its file: never a second link beside a dangling one."""
    from ..review.move import move_note

    for pair in list(result.relinked):
        try:
            move_note(vault, pair["from"], pair["to"])
        except MemlinkError as exc:
            result.relinked.remove(pair)
            result.problems.append(f"the links of {pair['from']} did not follow its note to {pair['to']} ({exc})")


def _move_renamed(vault: Vault, pages: list[Page], result: BatchResult) -> None:
    """Move the note of each renamed file to the file's new path (``move_note``: its links
    kept, one unit of work each); its fields are then rewritten from the file."""
    from ..review.move import move_note

    by_target = {page.target: page for page in pages}
    for pair in result.renamed:
        page = by_target.get(pair["to"])
        if page is None or page.state != "new" or not vault.exists(pair["from"]):
            continue
        try:
            move_note(vault, pair["from"], pair["to"])
        except MemlinkError as exc:
            result.problems.append(f"{page.path}: the note of its old path {pair['from']} was not moved ({exc})")
            continue
        page.state = "moved"
        pair["moved"] = True


def _dry(page: Page, result: BatchResult) -> None:
    """What a real run would do with the page, in the result, nothing written (a renamed
    file is said in ``result.renamed`` alone)."""
    if page.state == "unchanged" and not page.new_properties:
        result.skipped.append({"path": str(page.path), "why": f"already imported as {page.target}"})
    elif page.state == "edited":
        result.edited.append({"path": str(page.path), "source": page.target})
    elif page.state != "renamed":
        if page.state == "changed" or page.new_properties:
            result.changed.append(page.target)
        result.files.append(IngestResult(str(page.path), page.target, None))


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError) and not isinstance(exc, MemlinkError):
        return f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else "")
    return str(exc)


def _land(vault: Vault, page: Page, plan: tuple[Resolved, ExtractContext] | None, refs: list[tuple],
          report: RunReport, result: BatchResult, persons: PersonLinks) -> None:
    """One file's memories (``plan``), its references' links and its memories' links, the
    audit record and the end of its pending mark, in one transaction. A file that changed
    loses the links to pages its text no longer references, but a person's (``persons``)."""
    links = list(refs)
    named = {to for frm, to, _t, _spec in refs if frm == page.note}  # (the notes the file names now)
    gone: list = []
    moved: set[str] = set()
    with vault.transaction() as tx:
        if plan is not None:
            resolved, ctx = plan
            source = f"resource {page.alias}"
            run = MemoryUpdater(vault).apply_operations(resolved, ctx, report.provider, source, deferred=links)
            report.created += [u for u in run.created if u not in report.created]
            report.changed += run.changed
            report.problems += run.problems
        if page.before is not None:  # (only the links its earlier text and properties stated: never a person's)
            links = _theirs_kept(vault, page, links)
            now = {(to, spec.get("t_line_ranges") or "") for frm, to, _t, spec in links if frm == page.note}
            unstated = [old for old in vault.links.of(page.note, "links")
                        if (old.to_uri, old.match_text or old.description) in page.stated_before
                        and (old.to_uri, old.t_line_ranges or "") not in now]
            theirs = [old for old in unstated if old.id not in persons.ids]
            for old in theirs:
                vault.unlink(old.from_uri, old.to_uri, link_id=old.id)
            # (a note the text still links, elsewhere in it: its link follows the text, nothing removed; an
            # undo putting the old one back would leave the pair linked twice)
            moved = {old.to_uri for old in theirs if old.to_uri in named}
            gone += [old for old in theirs if old.to_uri not in moved]
            result.links_removed += [{"from": old.from_uri, "to": old.to_uri} for old in gone]
            result.links_kept_for_you += [{"from": old.from_uri, "to": old.to_uri} for old in unstated
                                          if old.id in persons.ids and old.to_uri not in named]
        landed = write_links(vault, links, persons) if links else []
        note = vault.read_note(page.note)
        if is_pending(note):
            note.extra = {k: v for k, v in note.extra.items() if k != PENDING_KEY}
            tx.put_text(page.note, serialize_note(note, vault.schema("source"), vault.read_text(page.note)), note)
        if gone:  # `memlink undo` puts the links back
            log_action(vault, tx, "sync", page.note, page.note, f"{len(gone)} links {page.alias} no longer states removed")
    for link, new in landed:
        if not new or link.from_uri == page.note and link.to_uri in moved:
            report.links_kept += 1
            continue
        entry = link_entry(link)
        report.links_added.append(entry)
        result.links_added.append(entry)


def _theirs_kept(vault: Vault, page: Page, specs: list[tuple]) -> list[tuple]:
    """The specs without those that would rewrite a link of the note its earlier text did
    not state (a person's, made by hand): the text naming the same note leaves it as it is."""
    theirs = {(l.to_uri, l.t_field, l.t_line_ranges or "") for l in vault.links.of(page.note, "links")
              if (l.to_uri, l.match_text or l.description) not in page.stated_before}
    if not theirs:
        return specs
    kept = []
    for spec in specs:
        frm, to, _type, fields = spec
        if frm == page.note and any(t == to for t, _f, _r in theirs):
            t_field = fields.get("t_field") or vault.schema(vault.read_note(to).memory_type).text_field
            if (to, t_field, fields.get("t_line_ranges") or "") in theirs:
                continue
        kept.append(spec)
    return kept


def _imported_as(vault: Vault, page: Page) -> str | None:
    """The note this very file (its path and text) was imported as, if it is still there."""
    row = vault.store.row("SELECT uri FROM ingested WHERE sha = ? AND path = ?", (page.sha, str(page.real or page.path)))
    return row[0] if row and vault.exists(row[0]) else None


def _moved(vault: Vault, page: Page) -> str | None:
    """The note of this very file that a person moved elsewhere in the vault (``memlink
    mv``): a source note named by the file's path in its folder (its names keep it) that
    came from this file (its ``origin``; or from the file at the same path in the folder
    where it was, when that one is gone: the folder moved)."""
    real = str(page.real or page.path)
    key = " ".join(words(page.alias))
    depth = len(PurePosixPath(page.alias).parts) + 1  # (the file's path in its folder, and the folder's name)
    for uri in sorted(vault.catalog.named([key]).get(key, ())):
        note = vault.read_note(uri)
        origin = str(note.fields.get("origin") or "")
        if note.memory_type == "source" and (origin == real or origin and Path(origin).parts[-depth:] == Path(
                real).parts[-depth:] and not os.path.exists(origin) and _imported_under(vault, origin, page.top)):
            return uri
    return None


def _imported_under(vault: Vault, path: str, top: str | None) -> bool:
    """Whether the file at ``path`` was imported into ``sources/<top>/`` (the ingest
    registry: where its note was put), so a folder of the same name elsewhere, another
    import, does not take its note."""
    row = vault.store.row("SELECT uri FROM ingested WHERE path = ? LIMIT 1", (path,))
    return row is not None and row[0].startswith(f"sources/{top}/" if top is not None else "sources/")


def _remember(vault: Vault, sha: str, uri: str, path: str) -> None:
    """That a text (its SHA-256) was imported as ``uri`` from ``path`` (the store's
    ``ingested`` table: a record of what was imported; the vault's notes decide)."""
    vault.store.try_write("the ingest registry", lambda w: w.execute(
        "INSERT OR REPLACE INTO ingested VALUES (?, ?, ?)", (sha, uri, path)))


def _write_source(vault: Vault, page: Page, result: BatchResult) -> RunReport:
    """The page's source note, marked pending until its memories and links land. A file
    whose note holds its text already is not imported again; one whose note a person
    edited in the vault since its import is left as it is, and said so."""
    if page.state == "renamed":
        return RunReport("none")
    page.uri = page.target
    if page.state == "unchanged":
        page.known = f"already imported as {page.target}"
        if page.new_properties:  # (its text was imported already: nothing is extracted again)
            result.changed.append(page.target)
        if page.restamp:  # (its properties may have changed: the links they stated are ingest's own)
            _read_before(vault, page)
        _restamp(vault, page)
        return RunReport("none")
    if page.state == "edited":
        result.edited.append({"path": str(page.path), "source": page.target})
        page.known = (f"{page.target} was edited in the vault since its import: left as it is "
                      f"(move your text out of it, or the file's change into it)")
        return RunReport("none")
    if page.state == "changed":
        result.changed.append(page.target)
    if page.state in ("changed", "moved"):
        _read_before(vault, page)
    return _new_source(vault, page, page.target, str(page.real or page.path.resolve()), page.body.strip(), result)


def _read_before(vault: Vault, page: Page) -> None:
    """The text and properties the page's note holds before this import rewrites it."""
    note = vault.read_note(page.target)
    page.before, page.before_properties = str(note.fields.get("content") or ""), _properties(note)


def _properties(note: Note) -> dict[str, Any]:
    """A source note's properties (the rest of its file's frontmatter, as imported)."""
    kept = note.extra.get("properties")
    return kept if isinstance(kept, dict) else {}


def _new_source(vault: Vault, page: Page, uri: str, origin: str, content: str, result: BatchResult) -> RunReport:
    """Write (or rewrite) the page's source note, marked pending, in one transaction."""
    schema = vault.schema("source")
    names = [page.alias, *filter(None, [page.heading])]
    old = vault.read_note(uri) if vault.exists(uri) else None  # imported before but not finished, or changed since
    if old is not None and page.state == "changed":  # (its other names stay: a person's, or headings links may name)
        had = [a for a in old.fields.get("aliases") or [] if isinstance(a, str)]
        names = [*had, *(a for a in names if a not in had)]
    fields = {"title": page.title, "kind": page.kind, "aliases": names, "origin": origin, "in_wiki": page.wiki,
              "content": content}
    keep = _file_keys(page)
    if page.document is not None:  # the original beside the note; a PDF's pages as line ranges
        fields_, kept = document_fields(vault, page.real or page.path, uri, page.document)
        keep.update(fields_)
        if kept:
            result.edited.append({"path": str(page.path), "source": fields_["original"], "why": "kept (edited)"})
    with vault.transaction() as tx:
        # (A file renamed, or its frontmatter changed: its title may be another; the file decides.)
        note = vault.write_note("source", fields, uri=uri, replace=page.state in ("moved", "changed"))
        wanted = {**{k: v for k, v in note.extra.items() if k not in OBSIDIAN_KEYS}, **keep,
                  IMPORTED_KEY: imported_sha(content, note.fields.get("title"), keep), PENDING_KEY: PENDING}
        if note.extra != wanted:
            note.extra = wanted
            tx.put_text(note.uri, serialize_note(note, schema, vault.read_text(note.uri)), note)
    page.uri = note.uri
    report = RunReport("none")
    if old is None:
        report.created.append(note.uri)
    elif old.fields != note.fields or old.extra.get(IMPORTED_KEY) != note.extra.get(IMPORTED_KEY):
        report.changed.append({"uri": note.uri, "before": old.fields, "after": note.fields})
    return report


# The top-level keys memlink itself writes on a source note: ingest's, and a review's.
_INGEST_AND_REVIEW_KEYS = frozenset({IMPORTED_KEY, PENDING_KEY, *OBSIDIAN_KEYS, *DOCUMENT_KEYS, "valid_until",
                                     "superseded_by", "superseded_claims"})
# A file's properties that hold no links: Obsidian's own (a permalink, CSS classes; its
# names and tags are read apart) and memlink's (a note of a memlink vault, imported).
_NOT_LINKS = frozenset({"permalink", "cssclasses", "cssclass", *TOP_KEYS, *_INGEST_AND_REVIEW_KEYS})


def _link_properties(properties: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in properties.items() if k not in _NOT_LINKS}


def _references(vault: Vault, page: Page, names: NameIndex, scope: Scope, report: RunReport, extractor: Extractor | None,
                result: BatchResult, contents: dict[str, str]) -> list[tuple]:
    """The link specs of a file's references — its text's, then its properties' to the
    notes its text does not link (one link per target) —; the unresolved and ambiguous ones
    are reported, and those found only through an alias. The rest of its frontmatter
    (tags, permalinks…) holds no reference."""
    head = len(page.text) - len(page.body)
    text = re.sub(r"[^\n]", " ", page.text[:head]) + page.body
    base = posixpath.dirname(page.alias)
    refs = find_references(vault, page.note, text, base=base, names=names, scope=scope)
    props = find_property_references(vault, page.note, _link_properties(page.properties), page.text[:head], base,
                                     names, scope)
    result.attachments += refs.attachments + props.attachments
    if page.before is not None:
        before = [*find_references(vault, page.note, page.before, base=base, names=names, scope=scope).found,
                  *find_property_references(vault, page.note, _link_properties(page.before_properties), "", base,
                                            names, scope).found]
        page.stated_before = {(ref.target, stated(ref)) for ref in before}
    for miss in sorted([*props.missing, *refs.missing], key=lambda m: m.line):
        where = {"file": str(page.path), "line": miss.line, "ref": miss.raw}
        if miss.candidates:
            result.ambiguous.append({**where, "candidates": list(miss.candidates)})
            report.ambiguous.append(f"{page.path}:{miss.line}: {miss.raw} (ambiguous: {', '.join(miss.candidates)})")
        elif miss.file:
            result.missing_files.append(where)
            report.missing_files.append(f"{page.path}:{miss.line}: {miss.raw}")
        else:
            result.unresolved.append(where)
            report.unresolved.append(f"{page.path}:{miss.line}: {miss.raw}")
    for hit in [*props.by_alias, *refs.by_alias]:
        result.by_alias.append({"file": str(page.path), "line": hit.line, "ref": hit.raw, "to": hit.candidates[0]})

    def spec_of(ref: Reference) -> tuple:
        link_type, spec = reference_link(ref, page.kind, names.kind(ref.target), vault.config.link_table())
        if ref.anchor:
            if ref.target not in contents:
                contents[ref.target] = str(vault.read_note(ref.target).fields.get("content") or "")
            spec["t_line_ranges"] = anchor_lines(contents[ref.target], ref.anchor)
        return (page.uri, ref.target, link_type, spec)

    specs = [spec_of(ref) for ref in refs.found]
    if isinstance(extractor, LLMExtractor) and not extractor.breaker.tripped and specs:
        specs = refine_links(vault, extractor.provider, page, specs, report, extractor.breaker)
    linked = {ref.target for ref in refs.found}  # (a property's link keeps its description: no sentence to refine)
    return specs + [spec_of(ref) for ref in props.found if ref.target not in linked]


_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def anchor_lines(text: str, anchor: str) -> str | None:
    """The lines of ``text`` a link's anchor points to, as a line range: a block
    (``^id``: its line) or a heading (its section, to the next heading of its level or
    above); None when the text has no such block or heading."""
    lines = text.split("\n")
    if anchor.startswith("^"):
        hit = next((i for i, l in enumerate(lines) if l.rstrip().endswith(f" {anchor}") or l.strip() == anchor), None)
        return None if hit is None else str(hit + 1)
    wanted = anchor.rsplit("#", 1)[-1].strip().lower()  # (Obsidian's ``[[Note#Part#Sub]]``: the last one)
    for i, line in enumerate(lines):
        m = _HEADING.match(line)
        if m and m[2].strip().lower() == wanted:
            end = next((j for j in range(i + 1, len(lines)) if (n := _HEADING.match(lines[j])) and len(n[1]) <= len(m[1])),
                       len(lines))
            while end - 1 > i and not lines[end - 1].strip():
                end -= 1
            return str(i + 1) if end - 1 == i else f"{i + 1}-{end}"
    return None


def ingest(vault: Vault, path: Path, *, wiki: bool = True, extractor: Extractor | None = None) -> IngestResult:
    """One file (a batch of one)."""
    batch = ingest_batch(vault, [Path(path)], wiki=wiki, extractor=extractor)
    if batch.failed:
        raise InputError(batch.failed[0]["error"])
    batch.files[0].model_note = batch.model_line()
    return batch.files[0]
