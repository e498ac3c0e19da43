"""Export, backup and restore (docs/DESIGN.md, "Export and backup")."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import tarfile
from pathlib import Path
from urllib.parse import unquote

import pytest
from conftest import SAMPLE, ingested, make_pair, memlink

import engine.storage.sidecars as sidecars
from engine import Vault, VaultLocked
from engine.export import ExportError, backup_vault, export_markdown, export_vault, restore_archive
from engine.lint.memo import check
from engine.model.links import SIDECAR
from engine.storage.sidecars import SIDECAR_LOG


def _copy_sample(tmp_path: Path, name: str = "sample") -> Path:
    target = tmp_path / name
    shutil.copytree(SAMPLE, target, ignore=shutil.ignore_patterns(".memlink"))
    return target


def _content(root: Path) -> dict[str, bytes]:
    """Every file of a vault but its derived state, by vault-relative path."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel == ".memlink" or rel.startswith(".memlink/") or not path.is_file():
            continue
        out[rel] = path.read_bytes()
    return out


def _link_ids(root: Path) -> set[tuple[str, str]]:
    """(id, direction) of every entry the plain `.relations.json` files hold (another
    tool's view: no log read)."""
    out = set()
    for path in root.rglob(SIDECAR):
        if ".memlink" not in path.parts:
            out |= {(e["id"], e["direction"]) for e in json.loads(path.read_text(encoding="utf-8"))}
    return out


def _errors(root: Path) -> list:
    vault = Vault.open(root)
    try:
        return [p for p in check(vault, full=True) if p.severity == "error"]
    finally:
        vault.close()


# -- export -----------------------------------------------------------------------------------------
def test_export_copies_the_content_without_derived_state_and_opens_as_a_vault(tmp_path):
    root = _copy_sample(tmp_path)
    vault = Vault.open(root)
    vault.sync()  # derived state exists: .memlink/ with its catalog and link index
    with vault.writing():
        pass  # and its lock
    assert (root / ".memlink").is_dir() and len(vault.catalog) > 0
    (root / "entities" / ".caroline.md.1234abcd.~memlink.tmp").write_text("half a write")
    (root / "sessions" / "x.jsonl.lock").write_text("")
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    outside = tmp_path / "secret.txt"
    outside.write_text("not the vault's")
    (root / "entities" / "leak.md").symlink_to(outside)
    (root / "shortcut").symlink_to(root / "entities")
    source = _content(root)

    report = export_vault(vault, tmp_path / "out")
    out = tmp_path / "out"
    exported = _content(out)
    expected = {rel: data for rel, data in source.items()
                if not rel.endswith((".~memlink.tmp", ".lock")) and not rel.startswith((".git/", "shortcut/"))
                and rel != "entities/leak.md"}
    assert exported == expected  # notes, sidecars, sessions, memlink.yaml: byte for byte
    assert not (out / ".memlink").exists() and not (out / ".git").exists()
    assert dict(report.skipped) == {"entities/leak.md": "a symlink to outside the vault", ".git/": "a hidden folder (not part of the vault)",
                                    "shortcut": "a symlinked folder (memlink does not enter it)"}
    assert report.files == len(expected) and report.folded == []
    copy = Vault.open(out)
    assert (report.notes, report.links) == (len(copy.catalog), copy.links.stats(top=0)[0]) and report.notes == 72
    assert _errors(out) == []
    assert _content(root) == source  # the source is untouched
    assert not list(tmp_path.glob(".out.*"))  # no temp folder left beside the export


def test_big_folders_link_logs_are_folded_into_plain_sidecars_without_touching_the_source(vault, tmp_path, monkeypatch):
    monkeypatch.setattr(sidecars, "LOG_MODE_BYTES", 600)
    monkeypatch.setattr(sidecars, "COMPACT_RATIO", 100.0)
    uris = [vault.write_note("entity", {"name": f"Person {i}", "kind": "person", "content": f"Person {i} works here."}).uri
            for i in range(8)]
    for a in uris:
        for b in uris:
            if a < b:
                vault.link(a, b, "related_to", description=f"{a} knows {b}")
    vault.unlink(uris[0], uris[1])
    log = vault.root / "entities" / SIDECAR_LOG
    assert log.is_file(), "the folder is in log mode"
    source = _content(vault.root)
    links = {(link.id, d) for link in vault.links.all() for d in ("links", "backlinks")}

    report = export_vault(vault, tmp_path / "out")
    out = tmp_path / "out"
    assert report.folded == ["entities/.relations.json"]
    assert not (out / "entities" / SIDECAR_LOG).exists()
    assert _link_ids(out) == links  # every link, on both sides, in the plain sidecar alone
    assert _content(vault.root) == source and log.is_file()  # no compaction in the source
    assert _errors(out) == []
    copy = Vault.open(out)
    assert {(l.id, l.to_uri) for l in copy.links.all()} == {(l.id, l.to_uri) for l in vault.links.all()}


def test_export_waits_for_the_write_lock(tmp_path):
    root = _copy_sample(tmp_path)
    writer = Vault.open(root)
    exporter = Vault.open(root)
    exporter.config.lock_timeout = 0.1
    with writer.writing():
        with pytest.raises(VaultLocked):
            export_vault(exporter, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    export_vault(exporter, tmp_path / "out")  # once the writer is done
    assert (tmp_path / "out" / "profile.md").is_file()


def test_export_finishes_a_change_a_killed_writer_left_first(vault, tmp_path, monkeypatch):
    from engine.storage import journal

    a, b = make_pair(vault)

    def killed(*_args, **_kwargs):
        raise RuntimeError("killed after the journal landed, before any file")

    with monkeypatch.context() as patch:
        patch.setattr(journal, "apply_ops", killed)
        with pytest.raises(RuntimeError):
            vault.link(a.uri, b.uri, "related_to", description="pending")
    assert vault.journal.pending() and vault.links.of(a.uri, "links") == []

    stale = Vault.open(vault.root, read_only=True)  # cannot replay: copies the files as they are, and says so
    report = export_vault(stale, tmp_path / "as-is")
    assert "cannot be finished on a read-only vault" in report.warnings[0]
    assert _link_ids(tmp_path / "as-is") == set()

    export_vault(vault, tmp_path / "out")  # takes the lock, which replays the journal first
    assert not vault.journal.pending()
    link = vault.links.of(a.uri, "links")[0]
    assert _link_ids(tmp_path / "out") == {(link.id, "links"), (link.id, "backlinks")}
    assert _errors(tmp_path / "out") == []


def test_a_read_only_vault_exports_without_a_lock_and_writes_nothing_in_it(tmp_path):
    root = _copy_sample(tmp_path)
    vault = Vault.open(root, read_only=True)
    export_vault(vault, tmp_path / "out")
    assert not (root / ".memlink").exists()
    assert _content(tmp_path / "out") == _content(root)


def test_export_refuses_a_bad_destination_naming_it(tmp_path):
    root = _copy_sample(tmp_path)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    (tmp_path / "afile").write_text("x")
    for dest, words in ((busy, "exists and is not empty"), (root / "sub", "is inside the vault"),
                        (root, "is inside the vault"), (tmp_path / "afile", "is not a folder")):
        r = memlink("export", str(dest), vault=root)
        assert r.returncode == 1, r.stderr
        assert r.stderr.startswith("memlink: error: ") and str(dest) in r.stderr and words in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
    assert not (root / "sub").exists() and sorted(p.name for p in busy.iterdir()) == ["keep.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    r = memlink("export", str(empty), "--json", vault=root)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["dest"] == str(empty) and (empty / "profile.md").is_file()


# -- plain markdown ---------------------------------------------------------------------------------
_MD_LINK = re.compile(r"(?<!!)\[(?:[^\]\\]|\\.)*\]\(([^)\s]+)\)")


def test_markdown_export_shows_every_link_and_every_relative_target_exists(tmp_path):
    root = _copy_sample(tmp_path)
    r = memlink("export", str(tmp_path / "md"), "--markdown", vault=root)
    assert r.returncode == 0, r.stderr
    out = tmp_path / "md"
    vault = Vault.open(root)
    notes = {e.uri for e in vault.catalog.all()}
    pages = {p.relative_to(out).as_posix(): p.read_text(encoding="utf-8") for p in out.rglob("*.md")}
    assert set(pages) == notes | {"README.md"}

    def targets(uri: str) -> set[str]:
        base = (out / uri).parent
        return {os.path.normpath(base / unquote(t)) for t in _MD_LINK.findall(pages[uri])}

    links = list(vault.links.all())
    assert len(links) > 100
    for link in links:
        from_page, to_page = pages[link.from_uri], pages[link.to_uri]
        assert str(out / link.to_uri) in targets(link.from_uri), (link.from_uri, link.to_uri)
        assert str(out / link.from_uri) in targets(link.to_uri), ("backlink", link.to_uri, link.from_uri)
        assert f"({link.link_type.value}, weight {link.weight:.2f}" in from_page.split("## Links", 1)[1]
        assert f"({link.link_type.value}, weight {link.weight:.2f}" in to_page.split("## Backlinks", 1)[1]
        if link.description:
            assert " ".join(link.description.split()) in from_page
    for uri, text in pages.items():
        assert not text.startswith("---"), f"{uri} carries frontmatter"
        for target in _MD_LINK.findall(text):
            assert not re.match(r"^[a-z]+:", target), (uri, target)
            assert (out / uri).parent.joinpath(unquote(target)).resolve().is_file(), (uri, target)
    # links rendered inline in the body, at their anchor
    profile = pages["profile.md"].split("## Links", 1)[0]
    assert "[Havenlink](entities/havenlink.md)" in profile
    index_targets = {os.path.normpath(out / unquote(t)) for t in _MD_LINK.findall(pages["README.md"])}
    assert index_targets == {str(out / uri) for uri in notes}
    assert "notes as markdown" in r.stdout


def test_markdown_export_leaves_links_to_missing_notes_as_text(vault, tmp_path):
    a = vault.write_note("entity", {"name": "Ada", "kind": "person", "content": "Ada knows Bob."})
    b = vault.write_note("entity", {"name": "Bob", "kind": "person", "content": "Bob."})
    vault.link(a.uri, b.uri, "related_to", match_text="Bob", description="friends")
    vault.path(b.uri).unlink()  # deleted by hand: the link now points nowhere
    report = export_markdown(vault, tmp_path / "md")
    page = (tmp_path / "md" / a.uri).read_text(encoding="utf-8")
    assert "`entities/bob.md` (no such note)" in page and "](bob.md)" not in page
    assert report.notes == 1


def test_markdown_pages_have_one_title_no_markers_and_only_links_that_resolve(tmp_path):
    root = _copy_sample(tmp_path)
    vault = Vault.open(root)
    note = vault.write_note("entity", {"name": "Reading list", "content": "Books to read."})
    with vault.path(note.uri).open("a", encoding="utf-8") as f:  # written by hand, as in Obsidian
        f.write("\nSee [[Havenlink]], [[entities/mochi|our cat]], [[profile#Work]], ![[Hangzhou]] and [[Nowhere]].\n")
    vault.close()
    assert memlink("export", str(tmp_path / "md"), "--markdown", vault=root).returncode == 0
    out = tmp_path / "md"
    pages = {p.relative_to(out).as_posix(): p.read_text(encoding="utf-8") for p in out.rglob("*.md")}
    for uri, text in pages.items():
        assert "<!--" not in text and "[[" not in text, uri
        assert len([line for line in text.splitlines() if line.startswith("# ")]) == 1, uri
        for target in _MD_LINK.findall(text):
            assert (out / uri).parent.joinpath(unquote(target.partition("#")[0])).resolve().is_file(), (uri, target)
    page = pages[note.uri]
    assert ("See [Havenlink](havenlink.md), [our cat](mochi.md), [profile](../profile.md#work), [Hangzhou](hangzhou.md) "
            "and Nowhere.") in page


def test_markdown_export_carries_the_files_pages_embed_and_shows_them(tmp_path):
    from engine.extract.batch import ingest_batch
    from engine.extract.rules import RulesExtractor

    src = tmp_path / "notes"
    (src / "att").mkdir(parents=True)
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
    (src / "att" / "pic.png").write_bytes(png)
    (src / "att" / "song.mp3").write_bytes(b"ID3")
    (src / "Page.md").write_text("Image: ![[pic.png|200]] and ![alt](att/pic.png) and [[pic.png]]; ![[song.mp3]].\n",
                                 encoding="utf-8")
    vault = Vault.init(tmp_path / "vault", name="test")
    ingest_batch(vault, [src], extractor=RulesExtractor())
    vault.close()
    (tmp_path / "vault" / "sources" / ".DS_Store").write_bytes(b"\0")
    assert memlink("export", str(tmp_path / "md"), "--markdown", vault=tmp_path / "vault").returncode == 0
    out = tmp_path / "md"
    assert (out / "sources/notes/att/pic.png").read_bytes() == png
    page = (out / "sources/notes/Page.md").read_text(encoding="utf-8")
    assert "Image: ![pic.png](att/pic.png) and ![alt](att/pic.png) and [pic.png](att/pic.png); [song.mp3](att/song.mp3)." in page
    assert not (out / "memlink.yaml").exists() and not list(out.rglob(SIDECAR)) and not list(out.rglob(".DS_Store"))


def exported(tmp_path: Path, pages: dict[str, str], page: str) -> str:
    """A folder of these pages (path -> text) ingested with the rules into a new vault, the
    vault exported as markdown: the text of ``page`` there."""
    from engine.extract.batch import ingest_batch
    from engine.extract.rules import RulesExtractor

    src = tmp_path / "notes"
    for rel, text in pages.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text, encoding="utf-8")
    vault = Vault.init(tmp_path / "vault", name="test")
    ingest_batch(vault, [src], extractor=RulesExtractor())
    vault.close()
    assert memlink("export", str(tmp_path / "md"), "--markdown", vault=tmp_path / "vault").returncode == 0
    return (tmp_path / "md" / "sources/notes" / page).read_text(encoding="utf-8")


def test_markdown_export_links_a_heading_where_the_page_names_one_and_an_embedded_note_as_a_link(tmp_path):
    page = exported(tmp_path, {"Gamma.md": "Intro.\n\n## Soil & Water\nText.\n", "Eps.md": "E.\n",
                               "Alpha.md": "See [[Gamma#Soil & Water]] and ![[Eps]].\n\nAlso [[Gamma#Soil & Water|the soil]] "
                                           "and [[Gamma#^block1|a block]].\n"}, "Alpha.md")
    assert "See [Gamma](Gamma.md#soil--water) and [Eps](Eps.md)." in page, page
    assert "Also [the soil](Gamma.md#soil--water) and [a block](Gamma.md)." in page, page


def test_markdown_export_keeps_code_as_written(tmp_path):
    """A wikilink inside a code block or inline code is code, not a link (as in Obsidian):
    the exported page shows the code byte for byte; the link beside it becomes a link."""
    code = 'print("[[Jane]]")  # [[not a link]]'
    page = exported(tmp_path, {"Jane.md": "Jane leads the team.\n",
                               "Page.md": f"Owner: [[Jane]].\n\n```python\n{code}\n```\n\n```dataview\nLIST WHERE x = "
                                          "[[Jane]]\n```\n\nInline `[[Jane|code]]` too.\n"}, "Page.md")
    assert "Owner: [Jane](Jane.md)." in page
    assert f"```python\n{code}\n```" in page
    assert "```dataview\nLIST WHERE x = [[Jane]]\n```" in page
    assert "Inline `[[Jane|code]]` too." in page


# -- backup and restore -----------------------------------------------------------------------------
def test_backup_then_restore_gives_the_same_vault(tmp_path):
    root = _copy_sample(tmp_path)
    home = tmp_path / "home"
    r = memlink("backup", vault=root, env={"MEMLINK_HOME": str(home)})
    assert r.returncode == 0, r.stderr
    archive = Path(r.stdout.strip())
    assert archive.parent == home / "backups"  # the documented default place
    assert re.fullmatch(r"memlink-backup-Sample-vault-Lena-s-memories-\d{8}-\d{6}\.tar\.gz", archive.name)
    assert archive.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in archive.parent.iterdir()] == [archive.name]  # no temp file left
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        top = names[0].split("/")[0]
        manifest = json.loads(tar.extractfile(f"{top}/manifest.json").read())  # type: ignore[union-attr]
        assert not any("/.memlink/" in n for n in names)
        for f in manifest["files"]:
            data = tar.extractfile(f"{top}/vault/{f['path']}").read()  # type: ignore[union-attr]
            assert hashlib.sha256(data).hexdigest() == f["sha256"] and len(data) == f["size"]
    assert {f["path"] for f in manifest["files"]} == set(_content(root))

    dest = tmp_path / "restored"
    r = memlink("restore", str(archive), str(dest), "--json")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["files"] == len(manifest["files"]) and [p for p in result["check"] if p["severity"] == "error"] == []
    restored = _content(dest)
    assert restored == _content(root)  # notes, sidecars, sessions: byte for byte
    assert any(rel.startswith("sessions/") for rel in restored) and any(rel.endswith(SIDECAR) for rel in restored)
    assert _errors(dest) == []

    from engine.retrieve.search import search

    for query in ("celadon glaze", "advisory lock incident", "who is Lena's partner"):
        original = search(Vault.open(root), query, k=3)
        again = search(Vault.open(dest), query, k=3)
        assert original and again and original[0].uri == again[0].uri, query


def _tampered(archive: Path, target: Path, change) -> Path:
    """A copy of ``archive`` with its members passed through ``change(info, data) ->
    [(info, data), ...]``."""
    with tarfile.open(archive) as src, tarfile.open(target, "w:gz") as dst:
        for info in src.getmembers():
            data = src.extractfile(info).read() if info.isreg() else b""  # type: ignore[union-attr]
            for new_info, new_data in change(info, data):
                if new_info.isreg():
                    new_info.size = len(new_data)
                    dst.addfile(new_info, io.BytesIO(new_data))
                else:
                    dst.addfile(new_info)
    return target


def _member(name: str, data: bytes = b"", kind: bytes = tarfile.REGTYPE, linkname: str = "") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.size = kind, linkname, len(data)
    return info, data


def test_a_tampered_or_hostile_archive_is_refused_naming_the_member_and_writes_nothing(tmp_path):
    root = _copy_sample(tmp_path)
    archive = Path(backup_vault(Vault.open(root), tmp_path / "backups").path)
    top = archive.name.removesuffix(".tar.gz")
    profile = f"{top}/vault/profile.md"

    def edit(info, data):
        return [(info, data.replace(b"Rotterdam", b"Amsterdam") if info.name == profile else data)]

    def plus(*extra):
        def change(info, data):
            return [(info, data)] + (list(extra) if info.name.endswith("manifest.json") else [])
        return change

    cases = {
        "changed": (edit, profile, "does not match the manifest"),
        "traversal": (plus(_member(f"{top}/vault/../../evil.md", b"x")), f"{top}/vault/../../evil.md", "climbs out"),
        "absolute": (plus(_member("/tmp/evil.md", b"x")), "/tmp/evil.md", "an absolute path"),
        "symlink": (plus(_member(f"{top}/vault/link.md", kind=tarfile.SYMTYPE, linkname="/etc/passwd")),
                    f"{top}/vault/link.md", "a symlink"),
        "device": (plus(_member(f"{top}/vault/dev", kind=tarfile.CHRTYPE)), f"{top}/vault/dev", "a device file"),
        "extra": (plus(_member(f"{top}/vault/extra.md", b"x")), f"{top}/vault/extra.md", "not listed in"),
        "missing": (lambda info, data: [] if info.name == profile else [(info, data)], profile, "missing from the archive"),
    }
    for label, (change, member, words) in cases.items():
        bad = _tampered(archive, tmp_path / f"{label}.tar.gz", change)
        dest = tmp_path / "dest" / label
        with pytest.raises(ExportError) as caught:
            restore_archive(bad, dest)
        message = str(caught.value)
        assert member in message and words in message and "nothing was restored" in message, (label, message)
        assert not dest.exists() and not dest.parent.exists(), label
        assert not (tmp_path / "evil.md").exists() and not Path("/tmp/evil.md").exists()
    # the CLI: one line on stderr, exit 1
    r = memlink("restore", str(tmp_path / "traversal.tar.gz"), str(tmp_path / "cli"))
    assert r.returncode == 1 and r.stderr.startswith("memlink: error: ") and "climbs out" in r.stderr
    assert not (tmp_path / "cli").exists()
    # the untouched archive still restores
    assert restore_archive(archive, tmp_path / "fine").files > 100


def test_restore_refuses_a_vault_option_it_would_not_use(tmp_path):
    root = _copy_sample(tmp_path)
    archive = Path(backup_vault(Vault.open(root), tmp_path / "b").path)
    other = tmp_path / "meant"
    r = memlink("restore", str(archive), str(tmp_path / "dest"), vault=other)
    assert r.returncode == 2 and r.stderr.startswith("memlink: error: restore unpacks into DEST"), r.stderr
    assert str(other) in r.stderr
    assert not (tmp_path / "dest").exists() and not other.exists()


def test_restore_refuses_a_non_empty_destination_and_what_is_not_an_archive(tmp_path):
    root = _copy_sample(tmp_path)
    archive = Path(backup_vault(Vault.open(root), tmp_path / "b").path)
    with pytest.raises(ExportError, match="exists and is not empty"):
        restore_archive(archive, root)
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"not gzip at all")
    with pytest.raises(ExportError, match="not a readable .tar.gz"):
        restore_archive(junk, tmp_path / "d")
    with pytest.raises(ExportError, match="no archive at"):
        restore_archive(tmp_path / "nope.tar.gz", tmp_path / "d")
    assert not (tmp_path / "d").exists()


def test_backup_refuses_a_folder_inside_the_vault_and_never_overwrites_an_archive(tmp_path):
    import datetime as dt

    root = _copy_sample(tmp_path)
    vault = Vault.open(root)
    with pytest.raises(ExportError, match="inside the vault"):
        backup_vault(vault, root / "backups")
    assert not (root / "backups").exists()
    now = dt.datetime(2026, 12, 1, 9, 30, 0)
    first = backup_vault(vault, tmp_path / "b", now=now).path
    second = backup_vault(vault, tmp_path / "b", now=now).path
    assert first != second and Path(first).is_file() and second.endswith("-20261201-093000-2.tar.gz")
    vault.config.name = "周琳娜的记忆"  # no letters a file name keeps: the folder's name
    assert Path(backup_vault(vault, tmp_path / "b", now=now).path).name == "memlink-backup-sample-20261201-093000.tar.gz"


# -- what a person made besides notes ---------------------------------------------------------------
def _state(root: Path) -> dict[str, bytes]:
    """The files of ``.memlink/`` nothing derives from the notes: the dream's handled
    topics, review actions and their undo records, the links a person wrote, the searches,
    the extraction audit."""
    state = root / ".memlink"
    out = {}
    for pattern in ("dream/state.json", "review/*.jsonl", "search-log.jsonl", "audit/*.jsonl"):
        out |= {p.relative_to(state).as_posix(): p.read_bytes() for p in state.glob(pattern)}
    return out


def _topics(root: Path) -> list[str]:
    r = memlink("dream", "--dry-run", "--json", vault=root)
    assert r.returncode == 0, r.stderr
    return [t["question"] for t in json.loads(r.stdout)["topics"]]


def test_a_restored_vault_keeps_the_dream_state_review_history_searches_and_ingest_registry(tmp_path):
    root = _copy_sample(tmp_path)
    src = tmp_path / "kiln-folder"
    (src / "img").mkdir(parents=True)
    (src / "kiln.md").write_text("# Kiln\n\nThe kiln fires at 1240 C.\n![[img/kiln.png]]\n", encoding="utf-8")
    (src / "img" / "kiln.png").write_bytes(b"\x89PNG first")
    assert memlink("ingest", str(src), "--no-wiki", vault=root).returncode == 0
    for _ in range(3):  # searched often, found nothing: a question for the dream
        assert memlink("search", "harpsichord tuning", vault=root).returncode == 0
    assert memlink("dream", "--provider", "rules", vault=root).returncode == 0
    r = memlink("review", "events/2026/10/29/11-with-pieter.md", "entities/pieter-de-vries.md", "--action", "dismiss",
                vault=root)
    assert r.returncode == 0, r.stderr
    r = memlink("link", "entities/hangzhou.md", "entities/havenlink.md", "--type", "related_to", vault=root)
    assert r.returncode == 0, r.stderr
    r = memlink("undo", vault=root)  # (the link's undo; the review stays the last action)
    assert r.returncode == 0, r.stderr
    state, topics = _state(root), _topics(root)
    assert {"dream/state.json", "review/actions.jsonl", "review/person-links.jsonl", "search-log.jsonl"} <= set(state)

    r = memlink("backup", "--to", str(tmp_path / "b"), vault=root)
    assert r.returncode == 0, r.stderr
    dest = tmp_path / "restored"
    r = memlink("restore", r.stdout.strip(), str(dest))
    assert r.returncode == 0, r.stderr
    assert _state(dest) == state
    assert _topics(dest) == topics  # the dream does not answer again what it answered
    # the dismissal is still the last action, so undo takes it back on the restored vault
    r = memlink("undo", vault=dest)
    assert r.returncode == 0 and "dismiss" in r.stdout, r.stderr
    # the attachment changed at its source: a re-import updates the copy ingest put there
    (src / "img" / "kiln.png").write_bytes(b"\x89PNG second")
    r = memlink("ingest", str(src), "--no-wiki", vault=dest)
    assert r.returncode == 0 and "edited in the vault" not in r.stdout + r.stderr, r.stdout + r.stderr
    assert (dest / "sources" / "kiln-folder" / "img" / "kiln.png").read_bytes() == b"\x89PNG second"
    # and the restored vault answers at once
    r = memlink("search", "kiln fires", "--json", vault=dest)
    assert r.returncode == 0 and json.loads(r.stdout), r.stderr
    assert memlink("lint", vault=dest).returncode == 0
    r = memlink("recall", "advisory lock", "--json", vault=dest)
    assert r.returncode == 0 and json.loads(r.stdout), r.stderr


def test_restore_over_a_vault_refuses_naming_what_is_there_and_leaves_it_as_it_was(tmp_path):
    root = _copy_sample(tmp_path)
    archive = backup_vault(Vault.open(root), tmp_path / "b").path
    other = _copy_sample(tmp_path, "other")
    (other / "profile.md").write_text("Mine, written since the backup.\n", encoding="utf-8")
    before = _content(other)
    r = memlink("restore", archive, str(other))
    assert r.returncode == 1 and r.stderr.startswith("memlink: error: "), r.stderr
    assert str(other) in r.stderr and "a memlink vault" in r.stderr and "memlink.yaml" in r.stderr, r.stderr
    assert "nothing in it was replaced" in r.stderr, r.stderr
    assert _content(other) == before and not (other / ".memlink").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp folder left
    # Nor into a new folder inside a vault: its notes would be that vault's, their links misplaced.
    r = memlink("restore", archive, str(other / "restored"))
    assert r.returncode == 1 and f"is inside the vault {other}; restore to a folder outside it" in r.stderr, r.stderr
    assert _content(other) == before


def test_restore_refuses_derived_state_and_a_damaged_ingest_registry_naming_them(tmp_path):
    root = _copy_sample(tmp_path)
    archive = Path(backup_vault(Vault.open(root), tmp_path / "b").path)
    top = archive.name.removesuffix(".tar.gz")

    def listing(rel: str, data: bytes):
        def change(info, old):
            if info.name != f"{top}/manifest.json":
                return [(info, old)]
            manifest = json.loads(old)
            manifest["files"].append({"path": rel, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
            return [(info, json.dumps(manifest).encode()), _member(f"{top}/vault/{rel}", data)]
        return change

    cases = {"derived": (".memlink/index.sqlite", b"SQLite format 3\x00", "derived state is made afresh"),
             "registry": (".memlink/hints.json", b'{"ingested": [["x"]]}', "cannot be read")}
    for label, (rel, data, words) in cases.items():
        bad = _tampered(archive, tmp_path / f"{label}.tar.gz", listing(rel, data))
        dest = tmp_path / "dest" / label
        with pytest.raises(ExportError) as caught:
            restore_archive(bad, dest)
        message = str(caught.value)
        assert rel in message and words in message and "nothing was restored" in message, (label, message)
        assert not dest.exists() and not any(dest.parent.iterdir() if dest.parent.exists() else ()), label


def test_an_export_or_backup_that_could_not_read_a_note_exits_5_naming_it(tmp_path):
    root = _copy_sample(tmp_path)
    (root / "preferences" / "coffee.md").write_text("---\nmemory_type: [unclosed\n---\nMine.\n", encoding="utf-8")
    r = memlink("export", str(tmp_path / "md"), "--markdown", vault=root)
    assert r.returncode == 5 and "left out preferences/coffee.md: not a readable note" in r.stderr, r.stderr
    r = memlink("export", str(tmp_path / "md2"), "--markdown", "--json", vault=root)
    assert r.returncode == 5 and json.loads(r.stdout)["failed"] == ["preferences/coffee.md"]
    assert memlink("export", str(tmp_path / "copy"), vault=root).returncode == 0  # (the file itself is copied whole)


def test_a_markdown_export_links_the_wikilink_not_a_heading_of_the_same_word(tmp_path):
    """[[Pests#Hornworm]] shows "Pests": the heading "## Pests" above it is the author's
    heading, not a second place the link hangs on."""
    root, _ = ingested(tmp_path, {"Tomatoes.md": "# Tomatoes\n\n## Pests\n\nHornworms: see [[Pests#Hornworm]].\n",
                                  "Pests.md": "# Pests\n\n## Hornworm\nPick by hand.\n"})
    assert memlink("export", str(tmp_path / "md"), "--markdown", vault=root).returncode == 0
    text = (tmp_path / "md" / "sources" / "src" / "Tomatoes.md").read_text()
    assert "## Pests\n" in text and "see [Pests](Pests.md#hornworm)." in text, text
