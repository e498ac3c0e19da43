"""Documents: `memlink ingest` reads PDF, HTML, DOCX and CSV files made here, their text
searchable, the original kept beside its source note, a PDF's pages recorded as line
ranges; an encrypted or scanned PDF is refused with the file named and nothing changed;
the inbox folder is imported and its files moved to done/."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest
import yaml
from conftest import memlink, set_llm

from engine import Vault
from engine.extract.documents import page_of, read_document
from engine.extract.inbox import import_inbox
from engine.extract.inputs import InputError


def make_pdf(pages: list[list[str]], password: str | None = None) -> bytes:
    """A PDF whose pages hold these lines as real text (Helvetica), optionally encrypted."""
    from pypdf import PdfWriter
    from pypdf.generic import DictionaryObject, NameObject, StreamObject

    writer = PdfWriter()
    font = writer._add_object(DictionaryObject({NameObject("/Type"): NameObject("/Font"),
                                                NameObject("/Subtype"): NameObject("/Type1"),
                                                NameObject("/BaseFont"): NameObject("/Helvetica")}))
    for lines in pages:
        page = writer.add_blank_page(612, 792)
        ops = ["BT", "/F1 12 Tf", "14 TL", "72 720 Td"]
        ops += [f"({line.replace('(', '[').replace(')', ']')}) Tj T*" for line in lines]
        stream = StreamObject()
        stream.set_data("\n".join([*ops, "ET"]).encode("latin-1"))
        page[NameObject("/Contents")] = writer._add_object(stream)
        page[NameObject("/Resources")] = DictionaryObject({NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})})
    if password:
        writer.encrypt(password, algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def make_docx(paragraphs: list[str]) -> bytes:
    """A minimal Word document, written as its zip of XML parts."""
    ns = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    body = "".join(f"<w:p><w:r><w:t>{p}</w:t></w:r></w:p>" for p in paragraphs)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("[Content_Types].xml",
                   '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
                   '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
                   '<Default Extension="xml" ContentType="application/xml"/>'
                   '<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.'
                   'wordprocessingml.document.main+xml"/></Types>')
        z.writestr("_rels/.rels",
                   '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
                   '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
                   'officeDocument" Target="word/document.xml"/></Relationships>')
        z.writestr("word/document.xml", f'<?xml version="1.0"?><w:document {ns}><w:body>{body}</w:body></w:document>')
    return out.getvalue()


HTML = """<!doctype html><html><head><title>Quay opening hours</title><style>p {color: red}</style>
<script>alert("not text")</script></head><body><nav>Home | About</nav><main><h1>Quay opening hours</h1>
<p>The north quay opens at <b>six</b> on weekdays.</p><ul><li>Forklifts by booking</li></ul></main>
<footer>cookie banner</footer></body></html>"""


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "harbour-report.pdf").write_bytes(make_pdf([["Harbour report", "The crane rental costs 400 euro a day."],
                                                         ["The dredging contract runs until March."]]))
    (folder / "quay.html").write_text(HTML, encoding="utf-8")
    (folder / "minutes.docx").write_bytes(make_docx(["Board minutes", "The tugboat Zeemeeuw needs new propellers."]))
    (folder / "berths.csv").write_text("berth,length\nNorth-7,240\n", encoding="utf-8")
    return folder


def source_of(vault: Vault, title_part: str):
    for entry in vault.catalog.all("source"):
        if title_part in entry.uri:
            return vault.read_note(entry.uri)
    raise AssertionError(f"no source note for {title_part}")


def test_pdf_html_docx_and_csv_are_ingested_searchable_with_pdf_pages_and_originals_kept(tmp_path, docs):
    root = tmp_path / "vault"
    assert memlink("init", vault=root).returncode == 0
    set_llm(root, provider="rules")
    r = memlink("ingest", str(docs), "--json", vault=root)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert not result["failed"] and len(result["files"]) == 4
    vault = Vault.open(root)
    pdf = source_of(vault, "harbour-report")
    assert pdf.extra["pages"] == {1: "1-2", 2: "4"}
    lines = pdf.fields["content"].split("\n")
    assert "crane rental" in lines[1] and "dredging" in lines[3]
    assert page_of(pdf.extra["pages"], 4) == 2 and page_of(pdf.extra["pages"], 1) == 1
    assert (root / pdf.extra["original"]).read_bytes() == (docs / "harbour-report.pdf").read_bytes()
    assert pdf.extra["original"] == pdf.uri[:-3] + ".pdf"
    html = source_of(vault, "quay")
    assert "north quay opens at **six**" in html.fields["content"] and "alert" not in html.fields["content"]
    assert "cookie banner" not in html.fields["content"] and html.fields["title"] == "Quay opening hours"
    assert "pages" not in html.extra and (root / html.extra["original"]).is_file()
    for query, expected in (("crane rental euro", pdf.uri), ("dredging contract", pdf.uri), ("north quay weekdays", html.uri),
                            ("tugboat propellers", source_of(vault, "minutes").uri), ("North-7 berth", None)):
        found = memlink("search", query, "--json", vault=root)
        assert found.returncode == 0, found.stderr
        uris = [h["uri"] for h in json.loads(found.stdout)]
        assert (expected in uris) if expected else any("berths" in u for u in uris), (query, uris)
    again = memlink("ingest", str(docs), "--json", vault=root)  # nothing twice
    assert again.returncode == 0 and all(f["skipped"] for f in json.loads(again.stdout)["files"])


REFUSED = {  # (made in the test: an encrypted PDF's bytes differ each time, and test ids must not)
    "locked.pdf": (lambda: make_pdf([["secret plans"]], password="pw"), "encrypted"),
    "scan.pdf": (lambda: make_pdf([[]]), "no text layer"),
    "broken.pdf": (lambda: b"%PDF-1.4 not really", "cannot be read as PDF"),
    "broken.docx": (lambda: b"PK not a zip", "cannot be read as DOCX"),
}


@pytest.mark.parametrize(("data", "said"), [
    ('<html><head><meta charset="iso-8859-1"><title>Dessert</title></head><body><p>La cr\xe8me br\xfbl\xe9e de Zo\xeb'
     '</p></body></html>'.encode("latin-1"), "La crème brûlée de Zoë"),
    ("<p>Caf\xe9 on the quay, no charset declared.</p>".encode("cp1252"), "Café on the quay"),
    ("\ufeff<p>Caf\xe9 with a byte-order mark.</p>".encode("utf-8"), "Café with a byte-order mark"),
    (b"<html><head><title>Hint sheet</title></head><body><h2>Hints</h2><nav><p>Wifi: blue sticker.</p></nav>"
     b"<footer>Safe: 12-34-56</footer></body></html>", "# Hint sheet\n\n## Hints\n\nWifi: blue sticker.\n\nSafe: 12-34-56"),
    (b"<html><body><svg><title>icon</title></svg><h1>Real title</h1><p>Text.</p></body></html>", "# Real title\n\nText."),
], ids=["declared-latin-1", "undeclared-cp1252", "utf-8-bom", "no-main-part", "an-icon-s-title"])
def test_an_html_page_is_read_in_its_own_encoding_whole_when_it_has_no_main_part(tmp_path, data, said):
    from engine.extract.documents import read_document

    (tmp_path / "page.html").write_bytes(data)
    text = read_document(tmp_path / "page.html").text
    assert said in text and "\ufffd" not in text and "\ufeff" not in text and "icon" not in text


def test_an_html_page_in_utf_16_without_a_byte_order_mark_is_refused_naming_it(tmp_path):
    from engine.extract.documents import read_document
    from engine.extract.inputs import InputError

    (tmp_path / "wide.html").write_bytes("<html><body><p>Hello there.</p></body></html>".encode("utf-16-le"))
    with pytest.raises(InputError, match="wide.html: cannot be read as HTML .*NUL characters"):
        read_document(tmp_path / "wide.html")


@pytest.mark.parametrize("name", list(REFUSED))
def test_a_document_without_text_is_refused_naming_the_file_and_nothing_changes(tmp_path, name):
    make, says = REFUSED[name]
    data = make()
    root = tmp_path / "vault"
    assert memlink("init", vault=root).returncode == 0
    set_llm(root, provider="rules")
    doc = tmp_path / name
    doc.write_bytes(data)
    before = sorted(p.relative_to(root) for p in root.rglob("*") if ".memlink" not in p.parts)
    r = memlink("ingest", str(doc), vault=root)
    assert r.returncode != 0 and name in r.stderr and says in r.stderr, r.stderr
    assert sorted(p.relative_to(root) for p in root.rglob("*") if ".memlink" not in p.parts) == before
    with pytest.raises(InputError, match=says):
        read_document(doc)


def inbox_vault(tmp_path: Path) -> tuple[Path, Path]:
    """A vault with the rules provider whose memlink.yaml names ../inbox, and that folder."""
    root = tmp_path / "vault"
    assert memlink("init", vault=root).returncode == 0
    cfg = yaml.safe_load((root / "memlink.yaml").read_text())
    cfg["llm"] = {"provider": "rules"}
    cfg["ingest"] = {"inbox": "../inbox"}
    (root / "memlink.yaml").write_text(yaml.safe_dump(cfg))
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    return root, inbox


def test_the_inbox_is_imported_and_its_files_move_to_done(tmp_path, docs):
    root, inbox = inbox_vault(tmp_path)
    (inbox / "quay.html").write_text(HTML, encoding="utf-8")
    (inbox / "locked.pdf").write_bytes(make_pdf([["x"]], password="pw"))
    (inbox / "done").mkdir()
    (inbox / "done" / "old.md").write_text("# Old\n\nAlready imported long ago.\n")
    r = memlink("ingest", "--inbox", vault=root)
    assert r.returncode == 5 and "locked.pdf" in r.stderr and "encrypted" in r.stderr, r.stdout + r.stderr
    assert (inbox / "done" / "quay.html").is_file() and not (inbox / "quay.html").exists()
    assert (inbox / "locked.pdf").is_file()  # failed: left where it was, tried again next time
    vault = Vault.open(root)
    assert "north quay" in source_of(vault, "quay").fields["content"]
    assert not any("old" in e.uri for e in vault.catalog.all("source"))  # done/ is not read again
    (inbox / "locked.pdf").unlink()
    result, moved = import_inbox(vault)
    assert moved == [] and result.files == []


def test_ingest_without_paths_or_inbox_is_a_usage_error(tmp_path):
    root = tmp_path / "vault"
    assert memlink("init", vault=root).returncode == 0
    r = memlink("ingest", vault=root)
    assert r.returncode == 2 and "--inbox" in r.stderr
    r = memlink("ingest", "--inbox", vault=root)
    assert r.returncode == 1 and "ingest.inbox" in r.stderr


async def test_the_app_imports_the_inbox_in_the_background(tmp_path):
    from conftest import settle

    from memlink_tui.app import MemlinkApp

    root = tmp_path / "vault"
    Vault.init(root)
    cfg = yaml.safe_load((root / "memlink.yaml").read_text())
    cfg["llm"] = {"provider": "rules"}
    cfg["ingest"] = {"inbox": str(tmp_path / "inbox")}
    (root / "memlink.yaml").write_text(yaml.safe_dump(cfg))
    (tmp_path / "inbox").mkdir()
    (tmp_path / "inbox" / "minutes.docx").write_bytes(make_docx(["Board minutes", "The tugboat needs new propellers."]))
    vault = Vault.open(root)
    app = MemlinkApp(vault)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        await app.workers.wait_for_complete([app.import_inbox()])
        await settle(app, pilot)
    assert (tmp_path / "inbox" / "done" / "minutes.docx").is_file()
    assert "propellers" in source_of(Vault.open(root), "minutes").fields["content"]


def test_a_new_inbox_file_named_as_an_earlier_one_gets_its_own_note(tmp_path):
    root, inbox = inbox_vault(tmp_path)
    (inbox / "notes.md").write_text("Monday: the boiler was serviced.\n", encoding="utf-8")
    assert memlink("ingest", "--inbox", vault=root).returncode == 0
    (inbox / "notes.md").write_text("Tuesday: the roof was fixed.\n", encoding="utf-8")
    assert memlink("ingest", "--inbox", vault=root).returncode == 0
    vault = Vault.open(root)
    assert vault.read_note("sources/notes.md").fields["content"] == "Monday: the boiler was serviced."
    assert vault.read_note("sources/notes-2.md").fields["content"] == "Tuesday: the roof was fixed."
    assert (inbox / "done" / "notes.md").is_file() and (inbox / "done" / "notes-2.md").is_file()
    # Files given with --inbox: what their sync found is reported with the inbox's.
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "plan.md").write_text("The plan.\n", encoding="utf-8")
    assert memlink("ingest", str(tmp_path / "folder"), vault=root).returncode == 0
    (tmp_path / "folder" / "plan.md").write_text("The plan, changed.\n", encoding="utf-8")
    out = json.loads(memlink("ingest", "--inbox", str(tmp_path / "folder"), "--json", vault=root).stdout)
    assert out["changed"] == ["sources/folder/plan.md"]


def test_a_documents_original_edited_in_the_vault_is_kept(tmp_path):
    from engine.extract.batch import ingest_batch
    from engine.extract.rules import RulesExtractor

    vault = Vault.init(tmp_path / "vault", name="test")
    page = tmp_path / "page.html"
    page.write_text("<html><body><p>The first text.</p></body></html>", encoding="utf-8")
    ingest_batch(vault, [page], extractor=RulesExtractor())
    original = vault.root / "sources/page.html"
    original.write_text("<p>Mine.</p>", encoding="utf-8")
    page.write_text("<html><body><p>The second text.</p></body></html>", encoding="utf-8")
    result = ingest_batch(vault, [page], extractor=RulesExtractor())
    assert result.changed == ["sources/page.md"]
    assert result.edited == [{"path": str(page), "source": "sources/page.html", "why": "kept (edited)"}]
    assert original.read_text(encoding="utf-8") == "<p>Mine.</p>"


def test_a_page_that_embeds_or_links_an_imported_pdf_links_to_its_note(tmp_path):
    root = tmp_path / "v"
    assert memlink("init", vault=root).returncode == 0
    set_llm(root, provider="rules")
    src = tmp_path / "src"
    (src / "attachments").mkdir(parents=True)
    (src / "attachments" / "quarterly report.pdf").write_bytes(make_pdf([["Quarterly revenue grew."]]))
    (src / "Home.md").write_text("Embedded: ![[quarterly report.pdf]]\n", encoding="utf-8")
    (src / "Finance.md").write_text("Budget: ![the report](attachments/quarterly%20report.pdf)\n", encoding="utf-8")
    (src / "Plan.md").write_text("See [[quarterly report.pdf#page=1|the report]].\n", encoding="utf-8")
    out = json.loads(memlink("ingest", str(src), "--json", vault=root).stdout)
    assert out["attachments"] == 0 and not out["unresolved"]
    pdf = "sources/src/attachments/quarterly report.md"
    backlinks = {l.from_uri for l in Vault.open(root).links.of(pdf, "backlinks")}
    assert backlinks == {"sources/src/Home.md", "sources/src/Finance.md", "sources/src/Plan.md"}
    assert pdf not in memlink("lint", "--check", "orphans", vault=root).stdout


def test_a_damaged_pdf_is_named_in_one_line_without_the_readers_own_messages(tmp_path):
    root = tmp_path / "v"
    assert memlink("init", vault=root).returncode == 0
    set_llm(root, provider="rules")
    bad = tmp_path / "broken.pdf"
    bad.write_bytes(b"not a pdf at all")
    import os
    import subprocess
    import sys

    from conftest import REPO

    # (a process of its own: pytest captures what the PDF reader logs in this one)
    r = subprocess.run([sys.executable, "-m", "memlink_tui", "--vault", str(root), "ingest", str(bad)], cwd=REPO,
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert r.returncode != 0
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert [line for line in lines if "broken.pdf" in line] and all(line.startswith(("memlink:", "provider:")) for line in lines), lines


def test_text_files_and_chat_exports_with_a_byte_order_mark_are_read(tmp_path):
    """UTF-16 as Windows saves "Unicode" text, and UTF-8 with a byte-order mark."""
    root = tmp_path / "vault"
    assert memlink("init", vault=root).returncode == 0
    set_llm(root, provider="rules")
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "wide.txt").write_bytes("Notes on the café: the kiln fires on Fridays.\n".encode("utf-16"))
    (folder / "wider.txt").write_bytes("Notes on the glaze: celadon wants reduction.\n".encode("utf-32"))
    (folder / "marked.md").write_bytes("\ufeff# Glazes\n\nCeladon needs a reduction firing.\n".encode("utf-8"))
    r = memlink("ingest", str(folder), vault=root)
    assert r.returncode == 0, r.stderr
    vault = Vault.open(root)
    assert "the kiln fires on Fridays" in source_of(vault, "wide.").fields["content"]
    assert "celadon wants reduction" in source_of(vault, "wider").fields["content"]
    marked = source_of(vault, "marked")
    assert not marked.fields["content"].startswith("\ufeff") and "Glazes" in marked.fields["aliases"]
    chat = tmp_path / "chat.jsonl"
    chat.write_bytes(("\ufeff" + json.dumps({"session": "s", "id": "1", "role": "user", "content": "I moved to Delft.",
                                             "ts": "2026-11-01T10:00:00Z"}) + "\n").encode("utf-8"))
    r = memlink("import-chat", str(chat), vault=root)
    assert r.returncode == 0, r.stderr
