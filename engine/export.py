"""Export, backup and restore (docs/DESIGN.md, "Export and backup").

What leaves the vault is its content, never its derived state: notes, link sidecars (a
big folder's link log folded into its `.relations.json`, read through the link store;
the source vault is not changed), session logs, `memlink.yaml`, memory types, and any
other plain file a person keeps there. Left out: `.memlink/` (rebuilt by the next open;
a backup carries what of it a person made and no file says: ``STATE_FILES``, ``HINTS``),
temp files (`*.~memlink.tmp`), lock files (`*.lock`), hidden folders (memlink never reads
them) and symlinks leading out of the vault or to folders. The files are read under the
vault's write lock, after any journal was replayed, so no half-written change is copied
(a read-only vault is read without the lock).

- ``export_vault``: the same content as a new vault folder.
- ``export_markdown``: every note as plain markdown (one title, the body as a reader sees
  it with its links inline and wikilinks made relative markdown links, embeds shown as
  images or links, Links and Backlinks lists with relative links), the files they embed
  or link (images, PDFs) at their paths, plus a `README.md` index.
- ``backup_vault``: a dated `.tar.gz` with a manifest (path, size, sha256 of each file),
  written atomically.
- ``restore_archive``: checks every member (regular files under one folder only: no
  absolute paths, no `..`, no links or device files) and every hash against the manifest
  before writing anything, then writes a new vault folder.
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import stat
import tarfile
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from . import version
from .errors import MemlinkError, SidecarError
from .model.config import CONFIG_FILE
from .model.files import IMAGE_SUFFIXES
from .model.links import SIDECAR, StoredLink
from .model.text import first_few, mask_code, printable_path
from .model.uris import utf8_name
from .storage.atomic import TMP_SUFFIX, atomic_writer, fsync_dir, temp_beside
from .storage.render import heading_slug, render_links
from .storage.sidecars import SIDECAR_LOG, folder_text, sidecar_rel
from .storage.store import DB_FILE, STATE_DIR, Store
from .storage.walk import NON_NOTE_DIRS

if TYPE_CHECKING:
    from .storage.vault import Vault

FORMAT = "memlink-backup"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"  # in the archive's top folder, beside vault/
SUMS = "SHA256SUMS"  # the same hashes for `sha256sum -c`
VAULT_DIR = "vault"  # the vault's files sit under <top>/vault/ in the archive
LOCK_SUFFIX = ".lock"
MARKDOWN_INDEX = "README.md"  # never a note at the vault root (engine.storage.vault.NON_NOTE_FILES)
# What of `.memlink/` a backup carries: made by a person's actions and derived from no file
# (docs/DESIGN.md, "Export and backup"). The dream's handled topics, review actions with
# their undo records, which links a person wrote or changed, the searches the dream reads,
# what each extraction run made (the provenance check reads it), changes set aside as
# failed. The rest is derived or bookkeeping of this copy.
STATE_FILES = ("dream/state.json", "review/actions.jsonl", "review/person-links.jsonl", "search-log.jsonl",
               "audit/*.jsonl", "journal/*.failed")
# The store's hint tables (what ingest imported, by SHA-256; legacy commit marks), carried
# as one JSON file that restore writes into the new vault's database, never to disk.
HINTS = "hints.json"
HINT_TABLES = {"ingested": 3, "commits": 2}  # table: columns


class ExportError(MemlinkError):
    """An export, backup or restore that cannot be done (a bad destination, a refused archive)."""


# -- what leaves the vault ----------------------------------------------------------------------
@dataclass(frozen=True)
class Item:
    """One file of the vault's content: read from ``path``, or ``data`` made here (a
    sidecar with its link log folded in)."""

    rel: str
    path: Path | None
    data: bytes | None
    mode: int
    mtime: float

    def read(self) -> bytes:
        if self.data is not None:
            return self.data
        assert self.path is not None
        return self.path.read_bytes()


@dataclass
class Snapshot:
    items: list[Item] = field(default_factory=list)
    folded: list[str] = field(default_factory=list)  # sidecars whose link log was folded in
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (place, why) left out
    warnings: list[str] = field(default_factory=list)


@contextmanager
def snapshot(vault: Vault, *, state: bool = False) -> Iterator[Snapshot]:
    """The vault's content, listed (and read, inside the block) under its write lock, so
    no other memlink writer changes a file while it is copied; entering the lock replays
    any pending journal first. A read-only vault is read as it is, without a lock.
    ``state``: with the files of `.memlink/` a person made (``STATE_FILES``, ``HINTS``)."""
    if vault.read_only and vault.journal.pending():
        warning = ("a change in flight is recorded in .memlink/journal/ and cannot be finished on a read-only vault; "
                   "the copy holds the files as they are (run `memlink check` on it)")
    else:
        warning = ""
    with nullcontext() if vault.read_only else vault.writing():
        snap = _collect(vault)
        if state:
            _collect_state(vault, snap)
        if warning:
            snap.warnings.insert(0, warning)
        yield snap


def _inside(root: str, path: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _collect(vault: Vault) -> Snapshot:
    snap = Snapshot()
    root = str(vault.root)
    stack: list[tuple[str, str]] = [(root, "")]
    while stack:
        dirpath, rel = stack.pop()
        try:
            with os.scandir(dirpath) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            snap.skipped.append((rel or ".", f"cannot be listed ({exc.strerror or exc})"))
            continue
        names = {e.name for e in entries}
        prefix = f"{rel}/" if rel else ""
        log_path = os.path.join(dirpath, SIDECAR_LOG)
        fold = SIDECAR_LOG in names and not os.path.islink(log_path)
        subdirs: list[tuple[str, str]] = []
        for entry in entries:
            name = entry.name
            here = prefix + name
            if not utf8_name(name):
                snap.skipped.append((prefix + name.encode("utf-8", "surrogateescape").decode("utf-8", "replace"),
                                     "its name is not UTF-8"))
                continue
            if rel == "" and name == STATE_DIR:
                continue  # derived state
            if name.endswith(TMP_SUFFIX) or name.endswith(LOCK_SUFFIX):
                continue  # a write in flight or a lock: never content
            if entry.is_symlink():
                target = os.path.realpath(entry.path)
                if not _inside(root, target):
                    snap.skipped.append((here, "a symlink to outside the vault"))
                    continue
                if os.path.isdir(target):
                    snap.skipped.append((here, "a symlinked folder (memlink does not enter it)"))
                    continue
                if name == SIDECAR_LOG:
                    snap.skipped.append((here, "a symlinked link log (not read)"))
                    continue
            try:
                st = os.stat(entry.path)  # a symlink inside the vault: its target, copied as a file
            except OSError as exc:
                snap.skipped.append((here, f"cannot be read ({exc.strerror or exc})"))
                continue
            if stat.S_ISDIR(st.st_mode):
                if name.startswith("."):
                    snap.skipped.append((here + "/", "a hidden folder (not part of the vault)"))
                else:
                    subdirs.append((entry.path, here))
                continue
            if not stat.S_ISREG(st.st_mode):
                snap.skipped.append((here, "not a regular file"))
                continue
            if fold and name in (SIDECAR, SIDECAR_LOG):
                continue  # written below, folded
            snap.items.append(Item(here, Path(entry.path), None, st.st_mode & 0o777, st.st_mtime))
        if fold:
            _fold(vault, snap, rel, dirpath)
        stack.extend(reversed(subdirs))
    snap.items.sort(key=lambda i: i.rel)
    return snap


def _collect_state(vault: Vault, snap: Snapshot) -> None:
    """The files of `.memlink/` a person made (``STATE_FILES``) and the hint tables."""
    for pattern in STATE_FILES:
        for path in sorted(vault.state_dir.glob(pattern)):
            try:
                st = path.lstat()
            except OSError as exc:
                snap.skipped.append((f"{STATE_DIR}/{path.name}", f"cannot be read ({exc.strerror or exc})"))
                continue
            if stat.S_ISREG(st.st_mode):
                snap.items.append(Item(f"{STATE_DIR}/{path.relative_to(vault.state_dir).as_posix()}", path, None,
                                       st.st_mode & 0o777, st.st_mtime))
    hints = {table: [list(row) for row in vault.store.rows(f"SELECT * FROM {table} ORDER BY 1")] for table in HINT_TABLES}
    if any(hints.values()):
        snap.items.append(Item(f"{STATE_DIR}/{HINTS}", None, json.dumps(hints, ensure_ascii=False).encode(), 0o600,
                               time.time()))
    snap.items.sort(key=lambda i: i.rel)


def _state_problem(rel: str) -> str | None:
    """Why a backup's file cannot be restored into `.memlink/` (derived state is made
    afresh, never restored), or None."""
    if not rel.startswith(f"{STATE_DIR}/"):
        return None
    inner = rel[len(STATE_DIR) + 1:]
    if inner == HINTS or any(fnmatchcase(inner, p) and inner.count("/") == p.count("/") for p in STATE_FILES):
        return None
    return f"in {STATE_DIR}/ but not a file a backup carries (derived state is made afresh)"


def _restore_hints(archive: Path, folder: Path, data: bytes) -> None:
    """The hint tables of a backup, written into the new vault's database."""
    try:
        hints = json.loads(data.decode("utf-8"))
        rows = {t: [tuple(r) for r in hints.get(t, [])] for t in HINT_TABLES}
        if not all(isinstance(v, str) and len(r) == HINT_TABLES[t] for t, table in rows.items() for r in table for v in r):
            raise ValueError("rows of the wrong shape")
    except (ValueError, TypeError, AttributeError, UnicodeDecodeError) as exc:
        raise ExportError(f"{archive}: {STATE_DIR}/{HINTS} cannot be read ({exc}); nothing was restored") from None
    (folder / STATE_DIR).mkdir(exist_ok=True)
    store = Store(folder / STATE_DIR / DB_FILE)
    try:
        with store.write() as w:
            for table, table_rows in rows.items():
                marks = ", ".join("?" * HINT_TABLES[table])
                w.executemany(f"INSERT OR REPLACE INTO {table} VALUES ({marks})", table_rows)
    finally:
        store.close()


def _fold(vault: Vault, snap: Snapshot, folder: str, dirpath: str) -> None:
    """A folder with a link log: one `.relations.json` holding the list with the log
    applied (the link store reads it; nothing in the vault is written)."""
    where = sidecar_rel(folder)
    try:
        text = folder_text(vault.root, vault.resolve.folder(folder), folder)
    except SidecarError as exc:
        snap.warnings.append(f"{exc}; its {SIDECAR} and {SIDECAR_LOG} are copied as they are")
        for name in (SIDECAR, SIDECAR_LOG):
            path = Path(dirpath) / name
            try:
                st = path.stat()
            except OSError:
                continue
            if _inside(str(vault.root), os.path.realpath(path)) and stat.S_ISREG(st.st_mode):
                snap.items.append(Item(f"{folder}/{name}" if folder else name, path, None, st.st_mode & 0o777, st.st_mtime))
        return
    if text is not None:
        try:
            mode = (Path(dirpath) / SIDECAR).stat().st_mode & 0o777
        except OSError:
            mode = 0o644
        snap.items.append(Item(where, None, text.encode("utf-8"), mode, time.time()))
    snap.folded.append(where)


# -- destinations -------------------------------------------------------------------------------
def _check_outside(vault: Vault, dest: Path, what: str) -> Path:
    real = Path(os.path.realpath(dest.expanduser()))
    if _inside(str(vault.root), str(real)):
        raise ExportError(f"{what} {dest} is inside the vault {vault.root}; choose a folder outside it")
    return real


def _check_new_folder(dest: Path) -> None:
    if dest.exists() or dest.is_symlink():
        if not dest.is_dir():
            raise ExportError(f"{dest} exists and is not a folder; choose a new folder")
        names = sorted(p.name for p in dest.iterdir())
        if names:  # named, so nobody wonders what a restore or export did to it: nothing
            held = "a memlink vault" if CONFIG_FILE in names else "files"
            names.sort(key=lambda n: n != CONFIG_FILE)  # a vault's settings named first
            shown = first_few([printable_path(n) for n in names], 3)
            raise ExportError(f"{dest} exists and is not empty (it holds {held}: {shown}); nothing in it was replaced: "
                              "choose a new or empty folder")


@contextmanager
def _new_folder(dest: Path) -> Iterator[Path]:
    """A temp folder beside ``dest``, renamed to ``dest`` when the block ends well and
    removed when it raises: a failed export or restore leaves no half-written folder."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_beside(dest)
    tmp.mkdir()
    try:
        yield tmp
        _check_new_folder(dest)  # still free?
        if dest.exists():
            dest.rmdir()  # empty (checked above)
        os.rename(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    fsync_dir(dest.parent)


def _write_file(folder: Path, rel: str, data: bytes, mode: int, mtime: float | None) -> None:
    path = folder.joinpath(*rel.split("/"))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with open(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.chmod(path, (mode & 0o777) | 0o600)  # never less than the owner's read and write
    if mtime is not None:
        os.utime(path, (mtime, mtime))


# -- export ---------------------------------------------------------------------------------------
UNREADABLE = ("cannot be read", "cannot be listed", "not a readable note")  # why a place left out failed


def failed(skipped: list[tuple[str, str]]) -> list[str]:
    """The places left out because they could not be read (not those that are no part
    of the vault: a hidden folder, a link out of it): the rest landed whole, exit 5."""
    return [place for place, why in skipped if why.startswith(UNREADABLE)]


@dataclass
class ExportReport:
    dest: str
    files: int = 0
    bytes: int = 0
    folded: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: int = 0  # notes copied (a markdown export: rendered)
    links: int = 0  # links (a markdown export: listed, each once on its from-note)

    def to_json(self) -> dict[str, Any]:
        return {"dest": self.dest, "files": self.files, "bytes": self.bytes, "folded": self.folded,
                "skipped": [{"path": p, "why": w} for p, w in self.skipped], "failed": failed(self.skipped),
                "warnings": self.warnings, "notes": self.notes, "links": self.links}


def export_vault(vault: Vault, dest: Path) -> ExportReport:
    """Write the vault's content (no derived state) to the new folder ``dest``: a vault
    memlink opens, with every big folder's link log folded into its sidecar."""
    real = _check_outside(vault, dest, "the export folder")
    _check_new_folder(real)
    report = ExportReport(str(real))
    with snapshot(vault) as snap, _new_folder(real) as tmp:
        for item in snap.items:
            data = item.read()
            _write_file(tmp, item.rel, data, item.mode, item.mtime)
            report.files += 1
            report.bytes += len(data)
            report.notes += item.rel in vault.catalog
        report.links = vault.links.stats(top=0)[0]
        report.folded, report.skipped, report.warnings = snap.folded, snap.skipped, snap.warnings
    return report


# -- plain markdown -------------------------------------------------------------------------------
def _href(from_uri: str, to_uri: str) -> str:
    """A relative markdown link from one exported note to another (percent-encoded)."""
    rel = os.path.relpath(to_uri, os.path.dirname(from_uri) or ".")
    return quote(PurePosixPath(rel).as_posix(), safe="/")


def _label(text: str) -> str:
    return " ".join(text.split()).replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")


def _flat(text: str) -> str:
    return " ".join(text.split())


def _link_line(vault: Vault, link: StoredLink, here: str, titles: dict[str, str], direction: str) -> str:
    other = link.to_uri if direction == "links" else link.from_uri
    phrase = vault.config.link_table().phrase(link.link_type.value, "links" if direction == "links" else "backlinks")
    where = f"[{_label(titles[other])}]({_href(here, other)})" if other in titles else f"`{other}` (no such note)"
    detail = f"{link.link_type.value}, weight {link.weight:.2f}"
    if link.t_line_ranges:  # the passage of the to-note it points at
        detail += f", {link.t_field} lines {link.t_line_ranges}" + ("" if direction == "links" else " here")
    line = f"- *{phrase}* {where} ({detail})"
    if link.description:
        line += f": {_flat(link.description)}"
    return line


class _Names:
    """What a wikilink's target may name among the exported notes and files (an image,
    a PDF): a path (from the vault root or the note's folder, ``.md`` optional), else a
    unique file name, else a unique title."""

    def __init__(self, titles: dict[str, str], files: list[str] | None = None) -> None:
        files = files or []
        self.uris = set(titles) | set(files)
        self.stems: dict[str, list[str]] = {}
        self.titles: dict[str, list[str]] = {}
        for uri, title in titles.items():
            self.stems.setdefault(PurePosixPath(uri).stem.lower(), []).append(uri)
            self.titles.setdefault(_flat(title).lower(), []).append(uri)
        for rel in files:
            self.stems.setdefault(PurePosixPath(rel).name.lower(), []).append(rel)

    def find(self, target: str, here: str) -> str | None:
        target = target.strip()
        for path in (target, os.path.normpath(os.path.join(os.path.dirname(here), target))):
            path = path.lstrip("/")
            for uri in (path, f"{path}.md"):
                if uri in self.uris:
                    return uri
        for names, key in ((self.stems, PurePosixPath(target).name.removesuffix(".md").lower()), (self.titles, target.lower())):
            found = names.get(key, [])
            if len(found) == 1:
                return found[0]
        return None


_WIKILINK = re.compile(r"(!?)\[\[([^\]|#^]*)(?:#([^\]|]*)|\^[^\]|]*)?(?:\|([^\]]*))?\]\]")


def _plain_wikilinks(text: str, here: str, names: _Names) -> str:
    """Obsidian's ``[[target|shown]]`` (and embeds ``![[…]]``) as a relative markdown link
    when the target is an exported note, else as its text: any viewer reads the page. A
    wikilink in code is code: left as written."""
    if "[[" not in text:
        return text
    clean = mask_code(text)

    def repl(m: re.Match) -> str:
        if clean[m.start():m.end()] != m.group(0):
            return m.group(0)
        target, heading, shown = m.group(2), m.group(3), m.group(4)
        uri = names.find(target, here) if target.strip() else None
        if uri and m.group(1) and PurePosixPath(uri).suffix.lower() in IMAGE_SUFFIXES:  # shown where it was embedded
            return f"![{_label(PurePosixPath(uri).name)}]({_href(here, uri)})"  # (its "|200" is a size)
        label = _label(shown or target.strip() or m.group(0))
        place = f"#{heading_slug(heading)}" if heading and heading.strip() and not heading.startswith("^") else ""
        return f"[{label}]({_href(here, uri)}{place})" if uri else label

    return _WIKILINK.sub(repl, text)


def render_markdown(vault: Vault, uri: str, titles: dict[str, str],
                    legacy_in: dict[str, list[StoredLink]] | None = None, names: _Names | None = None) -> tuple[str, int]:
    """One note as plain markdown, and how many outgoing links it lists: title, a line of
    facts, the body with its links inline (links to notes that are not exported stay
    text), then Links and Backlinks lists with relative links. ``legacy_in``: old
    ``{uris, reason}`` entries by target (they have no backlink side of their own)."""
    note = vault.read_note(uri)
    links = vault.links.of(note.uri, "links")
    backlinks = vault.links.of(note.uri, "backlinks") + (legacy_in or {}).get(note.uri, [])
    shown = [l for l in links if l.to_uri in titles]
    # What a reader sees (no view markers, no Links block: its wikilinks are the lists
    # below), with the links at their anchors and hand-written wikilinks as markdown links.
    body = render_links(note.text, shown, lambda l: _href(note.uri, l.to_uri), headings=True).text
    body = _plain_wikilinks(body, note.uri, names or _Names(titles)).strip("\n")
    out: list[str] = []
    if not body.lstrip().startswith("# "):
        out += [f"# {_flat(titles.get(note.uri) or vault.title(note))}", ""]
    facts = [note.memory_type, f"created {note.created_at}", f"updated {note.updated_at}"]
    until, by = note.extra.get("valid_until"), note.extra.get("superseded_by")
    if until:
        later = f" by [{_label(titles[str(by)])}]({_href(note.uri, str(by))})" if by in titles else (f" by `{by}`" if by else "")
        facts.append(f"superseded{later} from {until}")
    if body:
        out += [body, ""]
    out += [f"*{' · '.join(facts)} · `{note.uri}`*", ""]
    for heading, rows, direction in (("Links", links, "links"), ("Backlinks", backlinks, "backlinks")):
        out += [f"## {heading}", ""]
        out += [_link_line(vault, l, note.uri, titles, direction) for l in rows] or ["(none)"]
        out.append("")
    return "\n".join(out), len(links)


def export_markdown(vault: Vault, dest: Path) -> ExportReport:
    """Every note as plain markdown at its own path in the new folder ``dest``, plus
    `README.md` listing them by type, and the files they may embed or link (``_attachment``):
    readable anywhere, no frontmatter, no sidecars. Not a vault (session logs and settings
    are not included)."""
    real = _check_outside(vault, dest, "the export folder")
    _check_new_folder(real)
    report = ExportReport(str(real))
    with snapshot(vault) as snap, _new_folder(real) as tmp:
        report.warnings = snap.warnings
        vault.sync()
        for uri, error in vault.catalog.errors().items():
            report.skipped.append((uri, f"not a readable note ({error})"))
        good = vault.catalog.all()
        titles = {e.uri: e.title or e.uri for e in good}
        legacy_in: dict[str, list[StoredLink]] = {}
        for link in vault.links.all():
            if link.legacy:
                legacy_in.setdefault(link.to_uri, []).append(link)
        files = [item for item in snap.items if _attachment(item.rel)]
        for item in files:  # (what the notes embed and link: images, PDFs, a canvas)
            data = item.read()
            _write_file(tmp, item.rel, data, item.mode, item.mtime)
            report.files += 1
            report.bytes += len(data)
        names = _Names(titles, [item.rel for item in files])
        for entry in good:
            text, n = render_markdown(vault, entry.uri, titles, legacy_in, names)
            data = text.encode("utf-8")
            _write_file(tmp, entry.uri, data, 0o644, None)
            report.files += 1
            report.notes += 1
            report.links += n
            report.bytes += len(data)
        index = _markdown_index(vault, good, titles).encode("utf-8")
        _write_file(tmp, MARKDOWN_INDEX, index, 0o644, None)
        report.files += 1
        report.bytes += len(index)
    return report


def _attachment(rel: str) -> bool:
    """A file of the vault's content the exported notes may show or link: not a note,
    not memlink's own (sidecars, session logs, settings, memory types, dashboards), not a
    hidden one (``.DS_Store``, an editor's swap file)."""
    path = PurePosixPath(rel)
    return (path.suffix.lower() != ".md" and path.name not in (SIDECAR, SIDECAR_LOG) and rel != CONFIG_FILE
            and path.parts[0] not in NON_NOTE_DIRS and not path.name.startswith("."))


def _markdown_index(vault: Vault, entries: list, titles: dict[str, str]) -> str:
    out = [f"# {_flat(vault.config.name)}", "",
           f"{len(entries)} notes exported from a memlink vault on {dt.date.today().isoformat()}.", ""]
    by_type: dict[str, list] = {}
    for e in entries:
        by_type.setdefault(e.memory_type, []).append(e)
    for kind in sorted(by_type):
        out += [f"## {kind}", ""]
        for e in sorted(by_type[kind], key=lambda e: (titles[e.uri].lower(), e.uri)):
            out.append(f"- [{_label(titles[e.uri])}]({_href(MARKDOWN_INDEX, e.uri)})")
        out.append("")
    return "\n".join(out)


# -- backup ---------------------------------------------------------------------------------------
@dataclass
class BackupReport:
    path: str
    files: int
    bytes: int
    sha256: str  # of the archive itself
    folded: list[str]
    skipped: list[tuple[str, str]]
    warnings: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "files": self.files, "bytes": self.bytes, "sha256": self.sha256,
                "folded": self.folded, "skipped": [{"path": p, "why": w} for p, w in self.skipped],
                "failed": failed(self.skipped), "warnings": self.warnings}


def archive_stem(vault: Vault, now: dt.datetime | None = None) -> str:
    def slug(text: str) -> str:
        return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")

    name = slug(vault.config.name) or slug(vault.root.name) or "vault"  # a name in other scripts: the folder's
    return f"memlink-backup-{name}-{(now or dt.datetime.now()).strftime('%Y%m%d-%H%M%S')}"


def _sums_line(digest: str, path: str) -> str:
    """One `sha256sum` line (a name with a backslash or newline escaped as it does)."""
    if "\\" in path or "\n" in path:
        return f"\\{digest}  {path.replace(chr(92), chr(92) * 2).replace(chr(10), chr(92) + 'n')}"
    return f"{digest}  {path}"


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int, mtime: float) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime, info.type = len(data), mode & 0o777, int(mtime), tarfile.REGTYPE
    tar.addfile(info, io.BytesIO(data))


def backup_vault(vault: Vault, to_dir: Path, now: dt.datetime | None = None) -> BackupReport:
    """A dated `.tar.gz` of the vault's content in ``to_dir``: `<stem>/vault/<files>`,
    `<stem>/manifest.json` (path, size, sha256 and mode of each file) and
    `<stem>/SHA256SUMS`. Written to a temp name, fsynced, then renamed; readable by its
    owner only."""
    real = _check_outside(vault, to_dir, "the backup folder")
    if real.exists() and not real.is_dir():
        raise ExportError(f"{to_dir} is not a folder")
    real.mkdir(parents=True, exist_ok=True)
    now = now or dt.datetime.now()
    stem = archive_stem(vault, now)
    final = real / f"{stem}.tar.gz"
    n = 1
    while final.exists():
        n += 1
        final = real / f"{stem}-{n}.tar.gz"
    files: list[dict[str, Any]] = []
    total = 0
    with snapshot(vault, state=True) as snap:
        with atomic_writer(final, mode=0o600) as fh:  # readable by its owner only
            with tarfile.open(fileobj=fh, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
                for item in snap.items:
                    data = item.read()
                    files.append({"path": item.rel, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                                  "mode": f"{item.mode:04o}"})
                    total += len(data)
                    _add(tar, f"{stem}/{VAULT_DIR}/{item.rel}", data, item.mode, item.mtime)
                manifest = {"format": FORMAT, "version": FORMAT_VERSION, "vault": vault.config.name,
                            "created_at": now.astimezone().isoformat(timespec="seconds"),
                            "memlink": version(), "files": files, "folded": snap.folded}
                stamp = now.timestamp()
                _add(tar, f"{stem}/{MANIFEST}", (json.dumps(manifest, ensure_ascii=False, indent=1) + "\n").encode(),
                     0o644, stamp)
                sums = "".join(_sums_line(f["sha256"], f"{VAULT_DIR}/{f['path']}") + "\n" for f in files)
                _add(tar, f"{stem}/{SUMS}", sums.encode("utf-8"), 0o644, stamp)
    digest = hashlib.sha256()
    with open(final, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return BackupReport(str(final), len(files), total, digest.hexdigest(), snap.folded, snap.skipped, snap.warnings)


# -- restore --------------------------------------------------------------------------------------
@dataclass
class RestoreReport:
    dest: str
    files: int
    bytes: int
    vault: str  # the vault's name in the manifest
    created_at: str

    def to_json(self) -> dict[str, Any]:
        return {"dest": self.dest, "files": self.files, "bytes": self.bytes, "vault": self.vault,
                "created_at": self.created_at}


def _kind(member: tarfile.TarInfo) -> str:
    if member.issym():
        return f"a symlink (to {member.linkname!r})"
    if member.islnk():
        return f"a hard link (to {member.linkname!r})"
    if member.ischr() or member.isblk():
        return "a device file"
    if member.isfifo():
        return "a named pipe"
    return f"an unsupported member type ({member.type!r})"


def _path_problem(name: str) -> str | None:
    """Why a member name cannot be written safely under a folder, or None."""
    if not name or "\x00" in name:
        return "an empty name or a NUL byte"
    if "\\" in name:
        return "a backslash in its path"
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        return "an absolute path"
    parts = name.rstrip("/").split("/")
    if ".." in parts:
        return "a path that climbs out of the destination ('..')"
    if any(p in ("", ".") for p in parts):
        return "an empty or '.' path segment"
    return None


def _refuse(archive: Path, member: str, why: str) -> ExportError:
    return ExportError(f"{archive}: member {member!r} is {why}; refused, nothing was restored")


def _read_manifest(archive: Path, tar: tarfile.TarFile, member: tarfile.TarInfo) -> dict[str, Any]:
    try:
        fh = tar.extractfile(member)
        assert fh is not None
        manifest = json.loads(fh.read().decode("utf-8"))
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise ValueError("not a memlink backup manifest")
        if manifest.get("version") != FORMAT_VERSION:
            raise ValueError(f"manifest version {manifest.get('version')!r}; this memlink reads version {FORMAT_VERSION}")
        files = manifest.get("files")
        if not isinstance(files, list) or not all(
                isinstance(f, dict) and isinstance(f.get("path"), str) and isinstance(f.get("size"), int)
                and isinstance(f.get("sha256"), str) for f in files):
            raise ValueError("its file list is malformed")
    except (ValueError, UnicodeDecodeError, AssertionError) as exc:
        raise ExportError(f"{archive}: {member.name}: {exc}; nothing was restored") from None
    return manifest


def _open_archive(archive: Path) -> tuple[tarfile.TarFile, list[tarfile.TarInfo]]:
    try:
        tar = tarfile.open(archive, "r:gz")
    except FileNotFoundError:
        raise ExportError(f"no archive at {archive}") from None
    except IsADirectoryError:
        raise ExportError(f"{archive} is a folder, not an archive") from None
    except (tarfile.TarError, gzip.BadGzipFile, zlib.error, EOFError, OSError) as exc:
        raise ExportError(f"{archive}: not a readable .tar.gz ({exc})") from None
    try:
        return tar, tar.getmembers()
    except (tarfile.TarError, gzip.BadGzipFile, zlib.error, EOFError) as exc:
        tar.close()
        raise ExportError(f"{archive}: the archive is damaged ({exc}); nothing was restored") from None


def restore_archive(archive: Path, dest: Path) -> RestoreReport:
    """Restore a backup into the new folder ``dest``. Every member must be a regular
    file (or a folder) under one top folder, with a relative path that stays inside it;
    the files under `<top>/vault/` must be exactly the manifest's, each with its size and
    sha256. All of that is checked before anything is written; the files then go to a
    temp folder beside ``dest`` (hashes checked again as they are written) that becomes
    ``dest`` only when every one landed."""
    archive = Path(archive).expanduser()
    dest = Path(os.path.realpath(Path(dest).expanduser()))
    held = next((p for p in dest.parents if (p / CONFIG_FILE).is_file()), None)
    if held is not None:  # (its notes would be read as notes of that vault, their links as misplaced)
        raise ExportError(f"{dest} is inside the vault {held}; restore to a folder outside it; nothing was restored")
    _check_new_folder(dest)
    tar, members = _open_archive(archive)
    with tar:
        tops: set[str] = set()
        seen: set[str] = set()
        for m in members:
            why = _path_problem(m.name)
            if why is None and not (m.isreg() or m.isdir()):
                why = _kind(m)
            if why is not None:
                raise _refuse(archive, m.name, why)
            name = m.name.rstrip("/")
            if m.isreg() and name in seen:
                raise _refuse(archive, m.name, "in the archive twice")
            seen.add(name)
            tops.add(name.split("/")[0])
        if len(tops) != 1:
            raise ExportError(f"{archive}: not a memlink backup (expected one top folder, found "
                              f"{', '.join(sorted(tops)) or 'none'}); nothing was restored")
        top = tops.pop()
        by_name = {m.name.rstrip("/"): m for m in members if m.isreg()}
        manifest_member = by_name.get(f"{top}/{MANIFEST}")
        if manifest_member is None:
            raise ExportError(f"{archive}: no {top}/{MANIFEST} in the archive; not a memlink backup, nothing was restored")
        manifest = _read_manifest(archive, tar, manifest_member)
        prefix = f"{top}/{VAULT_DIR}/"
        expected: dict[str, dict[str, Any]] = {}
        for f in manifest["files"]:
            why = _path_problem(f["path"]) or _state_problem(f["path"])
            if why is not None:
                raise ExportError(f"{archive}: {top}/{MANIFEST} lists {f['path']!r}, {why}; refused, nothing was restored")
            expected[prefix + f["path"]] = f
        for name in by_name:
            if name not in expected and name not in (f"{top}/{MANIFEST}", f"{top}/{SUMS}"):
                raise _refuse(archive, name, f"not listed in {top}/{MANIFEST}")
        for name in expected:
            if name not in by_name:
                raise ExportError(f"{archive}: {name} is listed in {top}/{MANIFEST} but missing from the archive; "
                                  "nothing was restored")
        order = sorted(expected, key=lambda n: by_name[n].offset)  # the archive's order: no seeking back
        for name in order:  # first pass: every hash, nothing written
            _verified(archive, tar, by_name[name], expected[name])
        total = 0
        with _new_folder(dest) as tmp:
            for name in order:
                data = _verified(archive, tar, by_name[name], expected[name])
                total += len(data)
                if expected[name]["path"] == f"{STATE_DIR}/{HINTS}":
                    _restore_hints(archive, tmp, data)
                    continue
                _write_file(tmp, expected[name]["path"], data, _mode(expected[name]), by_name[name].mtime)
    return RestoreReport(str(dest), len(order), total, str(manifest.get("vault", "")), str(manifest.get("created_at", "")))


def _mode(entry: dict[str, Any]) -> int:
    """A file's permission bits as the manifest records them ("0644"); anything else: 0644."""
    text = str(entry.get("mode", ""))
    return int(text, 8) & 0o777 if re.fullmatch(r"0?[0-7]{3}", text) else 0o644


def _verified(archive: Path, tar: tarfile.TarFile, member: tarfile.TarInfo, entry: dict[str, Any]) -> bytes:
    fh = tar.extractfile(member)
    assert fh is not None
    data = fh.read()
    if len(data) != entry["size"] or hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise ExportError(f"{archive}: member {member.name!r} does not match the manifest (size or sha256 differs): "
                          "the archive was changed or is damaged; nothing was restored")
    return data
