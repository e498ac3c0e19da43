"""Documents `memlink ingest` reads besides text and markdown: PDF (pypdf), HTML
(BeautifulSoup + markdownify), DOCX (mammoth, then markdownify) and CSV (as text)
(docs/DESIGN.md, "Units of work": documents).

Each becomes markdown text for a source note; a PDF's pages are kept as line ranges of
that text. A document whose text cannot be had is refused with the file named, before
anything is written: an encrypted PDF, a scanned one (no text layer), a file the converter
cannot read. The original file is copied into the vault beside its source note
(``keep_original``)."""

from __future__ import annotations

import hashlib
import io
import logging
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..model.files import DOCUMENT_SUFFIXES
from ..model.lineranges import format_ranges
from ..storage.atomic import atomic_write_bytes
from .inputs import InputError, read_file_bytes, read_text_file

if TYPE_CHECKING:
    from ..storage.vault import Vault

# A PDF page with fewer letters than this is taken as having no text layer.
MIN_PAGE_LETTERS = 1


@dataclass
class Converted:
    """A document as text: markdown, and for a PDF each page's lines in it ("3-9"; None:
    a page without text), page 1 first."""

    text: str
    pages: list[str | None] | None = None


def is_document(path: Path) -> bool:
    return path.suffix.lower() in DOCUMENT_SUFFIXES


def read_input(path: Path, *, follow: bool = True, max_bytes: int | None = None) -> tuple[str, Converted | None]:
    """A file's text for ingest: a text or markdown file as it is, a document converted
    (with what the conversion knows: ``Converted``). InputError naming the file otherwise."""
    if not is_document(path):
        return read_text_file(path, follow=follow, max_bytes=max_bytes), None
    converted = read_document(path, follow=follow, max_bytes=max_bytes)
    return converted.text, converted


def read_document(path: Path, *, follow: bool = True, max_bytes: int | None = None) -> Converted:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return Converted(read_text_file(path, follow=follow, max_bytes=max_bytes))
    data = read_file_bytes(path, follow=follow, max_bytes=max_bytes)
    try:
        if suffix == ".pdf":
            converted = _pdf(path, data)
        elif suffix == ".docx":
            converted = Converted(_docx(data))
        else:
            converted = Converted(_html(data))
    except InputError:
        raise
    except Exception as exc:  # a converter's own failure on a damaged file: named, nothing written
        raise InputError(f"{path}: cannot be read as {suffix[1:].upper()} ({type(exc).__name__}: {exc})") from None
    if not converted.text.strip():
        raise InputError(f"{path}: no text found in it; nothing was imported")
    return converted


def _pdf(path: Path, data: bytes) -> Converted:
    from pypdf import PdfReader

    # pypdf logs what it repairs in a damaged file ("EOF marker not found") to stderr:
    # memlink says in one line what it could not read, the rest is noise in its output.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted:
        raise InputError(f"{path}: the PDF is encrypted; decrypt it first (nothing was imported)")
    lines: list[str] = []
    pages: list[str | None] = []
    for page in reader.pages:
        text = _clean(page.extract_text() or "")
        if sum(c.isalpha() for c in text) < MIN_PAGE_LETTERS:
            pages.append(None)
            continue
        if lines:
            lines.append("")  # a blank line between pages
        start = len(lines) + 1
        lines += text.split("\n")
        pages.append(format_ranges([(start, len(lines))]))
    if not any(pages):
        raise InputError(f"{path}: the PDF has no text layer (a scan?); run OCR on it first (nothing was imported)")
    return Converted("\n".join(lines), pages)


def _clean(text: str) -> str:
    """A page's text: no trailing spaces, no runs of blank lines, no form feeds."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\f", "\n")
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n")


def _html(html: str | bytes) -> str:
    """A page's text as markdown: its <main> or <article> when it has one (a web page's
    menus and footers are not what it says), else its whole body (a page of one's own:
    every line of it is). Bytes are decoded as the page declares (<meta charset>, a
    byte-order mark), else as they read best (UTF-8, Windows-1252…)."""
    from bs4 import BeautifulSoup
    from markdownify import markdownify

    with warnings.catch_warnings():  # (a byte no encoding reads is replaced: said in the text, not on stderr)
        warnings.simplefilter("ignore")
        soup = BeautifulSoup(html, "html.parser")
    if "\x00" in soup.get_text():
        raise ValueError("NUL characters in its text: not an HTML page (UTF-16 with no byte-order mark?)")
    named = next((t for t in soup.find_all("title") if t.find_parent("svg") is None), None)  # (not an icon's)
    title = named.get_text(" ", strip=True) if named else ""
    for tag in soup(["script", "style", "noscript", "template", "head", "iframe", "svg"]):
        tag.decompose()
    main = soup.find("main") or soup.find("article") or soup.body or soup
    text = _clean(markdownify(str(main), heading_style="ATX", strip=["img"]))
    if title and title not in text.split("\n", 1)[0]:
        text = f"# {title}\n\n{text}"
    return text


def _docx(data: bytes) -> str:
    import mammoth

    return _html(mammoth.convert_to_html(io.BytesIO(data)).value)


def copy_state(vault: Vault, data: bytes, rel: str) -> str:
    """What ``copy_in`` finds at ``rel``: "same", "edited", or "copy" (nothing there, or
    bytes ingest put there)."""
    target = vault.path(rel)
    if not target.is_file():
        return "copy"
    there = target.read_bytes()
    if there == data:
        return "same"
    known = vault.store.row("SELECT 1 FROM ingested WHERE sha = ?", (hashlib.sha256(there).hexdigest(),))
    return "copy" if known is not None else "edited"


def copy_in(vault: Vault, data: bytes, rel: str) -> str:
    """Put a file's bytes at ``rel`` in the vault, written atomically (outside the journal:
    a copy is never half a file): "same" when they are there already, "copied", or
    "edited" — the vault's copy holds bytes ingest never put there (a canvas changed in
    Obsidian), so it is left as it is. What was copied is recorded by its SHA-256 (the
    store's ``ingested`` table); without that record (``.memlink/`` deleted) a copy that
    differs is taken as edited: never overwritten."""
    state = copy_state(vault, data, rel)
    if state != "copy":
        return state
    target = vault.path(rel)
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(target, data)
    sha = hashlib.sha256(data).hexdigest()
    vault.store.try_write("the ingest registry", lambda w: w.execute(
        "INSERT OR REPLACE INTO ingested VALUES (?, ?, ?)", (sha, rel, str(target))))
    return "copied"


def keep_original(vault: Vault, source: Path, note_uri: str) -> tuple[str, bool]:
    """Copy a document into the vault beside its source note (``sources/x.md`` ->
    ``sources/x.pdf``, ``copy_in``); (its vault path, whether a copy edited in the vault
    was kept instead)."""
    rel = note_uri[: -len(".md")] + source.suffix.lower()
    return rel, copy_in(vault, source.read_bytes(), rel) == "edited"


DOCUMENT_KEYS = ("original", "pages")  # the frontmatter keys ``document_fields`` writes


def document_fields(vault: Vault, source: Path, note_uri: str, converted: Converted) -> tuple[dict, bool]:
    """What a source note's frontmatter says of its document: ``original`` (the copy in the
    vault) and, for a PDF, ``pages`` ({page: lines of its text}); and whether the copy was
    edited in the vault (then left as it is)."""
    rel, edited = keep_original(vault, source, note_uri)
    fields: dict = {"original": rel}
    if converted.pages is not None:
        fields["pages"] = {n: lines for n, lines in enumerate(converted.pages, 1) if lines}
    return fields, edited


def page_of(pages: list[str | None] | dict | None, line: int) -> int | None:
    """The PDF page (1-based) holding ``line`` of the source note's text, from its
    frontmatter's ``pages``."""
    from ..model.lineranges import parse_ranges

    items = pages.items() if isinstance(pages, dict) else enumerate(pages or [], 1)
    for number, lines in items:
        if isinstance(lines, str) and any(s <= line <= e for s, e in parse_ranges(lines)):
            return int(number)
    return None
