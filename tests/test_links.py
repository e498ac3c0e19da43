import json

import pytest
from conftest import make_pair

from engine import LinkError, LinkType, SidecarError, StoredLink, Vault
from engine.lint.memo import check
from engine.model.lineranges import correct_ranges, parse_ranges
from engine.model.links import links_merge
from engine.storage.render import render_links


def sidecar(v: Vault, folder: str) -> list[dict]:
    return json.loads((v.root / folder / ".relations.json").read_text())


def test_link_lands_identically_on_both_sides(vault):
    a, b = make_pair(vault)
    link = vault.link(b.uri, a.uri, "belongs_to", weight=0.9, match_text="User", t_line_ranges="1-2", description="pref of Caroline")
    (fwd,) = sidecar(vault, "preferences")
    (back,) = sidecar(vault, "entities")
    assert fwd["direction"] == "links" and back["direction"] == "backlinks"
    fwd.pop("direction"), back.pop("direction")
    assert fwd == back
    assert fwd["link_type"] == "belongs_to" and fwd["from_uri"] == b.uri and fwd["to_uri"] == a.uri
    assert set(fwd) == {"id", "from_uri", "to_uri", "link_type", "weight", "t_field", "t_line_ranges", "match_text", "description", "created_at"}
    assert vault.links.of(b.uri, "links") == [link]
    assert [l.direction for l in vault.links.of(a.uri, "backlinks")] == ["backlinks"]
    assert vault.links.of(a.uri, "links") == []
    assert len(vault.links.of(b.uri, "both")) == 1
    assert check(vault) == []


def test_merge_rules(vault):
    a, b = make_pair(vault)
    first = vault.link(b.uri, a.uri, "related_to", weight=0.4, description="first", t_line_ranges="1")
    second = vault.link(b.uri, a.uri, "belongs_to", weight=0.2, description="second", t_line_ranges="1")
    assert second.id == first.id and second.created_at == first.created_at
    assert second.weight == 0.4  # max wins
    assert second.link_type is LinkType.BELONGS_TO and second.description == "second"  # latest wins
    other = vault.link(b.uri, a.uri, "related_to", weight=0.8, t_line_ranges="2")  # other range = other link
    links = vault.links.of(b.uri, "links")
    assert [l.id for l in links] == [other.id, first.id]  # weight descending
    assert [e["weight"] for e in sidecar(vault, "entities")] == [0.8, 0.4]
    assert check(vault) == []


def test_links_merge_function():
    def mk(w, t="related_to", d="", r=None, direction="links"):
        return StoredLink(id=f"l{w}", from_uri="a.md", to_uri="b.md", direction=direction, link_type=t, weight=w, t_line_ranges=r, description=d, created_at="x")

    out = links_merge([mk(0.5, d="old")], [mk(0.3, t="contradicts", d="new"), mk(0.9, r="2"), mk(0.1, direction="backlinks")])
    assert [(l.weight, l.link_type.value, l.description) for l in out] == [(0.9, "related_to", ""), (0.5, "contradicts", "new"), (0.1, "related_to", "")]


def test_unlink_removes_both_sides(vault):
    a, b = make_pair(vault)
    vault.link(b.uri, a.uri, "belongs_to")
    vault.link(b.uri, a.uri, "contradicts", t_line_ranges="2")
    assert vault.unlink(b.uri, a.uri, "contradicts") == 1
    assert [l.link_type.value for l in vault.links.of(a.uri, "backlinks")] == ["belongs_to"]
    assert vault.unlink(b.uri, a.uri) == 1
    assert not (vault.root / "preferences" / ".relations.json").exists()
    assert not (vault.root / "entities" / ".relations.json").exists()
    with pytest.raises(LinkError, match="no link"):
        vault.unlink(b.uri, a.uri)


def test_link_validation(vault, tmp_path):
    a, b = make_pair(vault)
    with pytest.raises(LinkError, match="itself"):
        vault.link(a.uri, a.uri, "related_to")
    with pytest.raises(LinkError, match="does not exist"):
        vault.link(a.uri, "entities/ghost.md", "related_to")
    with pytest.raises(LinkError, match="unknown link type"):
        vault.link(b.uri, a.uri, "likes")
    with pytest.raises(LinkError, match="t_field"):
        vault.link(b.uri, a.uri, "related_to", t_field="colour")
    with pytest.raises(LinkError, match="past the end"):
        vault.link(b.uri, a.uri, "related_to", t_line_ranges="4-9")
    with pytest.raises(LinkError, match="bad line range"):
        vault.link(b.uri, a.uri, "related_to", t_line_ranges="5-2")
    with pytest.raises(LinkError, match="weight"):
        vault.link(b.uri, a.uri, "related_to", weight=1.5)
    assert not (vault.root / "entities" / ".relations.json").exists()


def test_link_enabled_false_blocks_links(tmp_path):
    v = Vault.init(tmp_path / "v")
    (v.root / "memory_types").mkdir()
    (v.root / "memory_types" / "scratch.yaml").write_text(
        "memory_type: scratch\ndirectory: scratch\nfilename: '{{ text | slug }}.md'\ntitle_field: text\nlink_enabled: false\n"
        "fields:\n  - {name: text}\ncontent_template: '{{ text }}'\n"
    )
    v = Vault.open(v.root)
    s = v.write_note("scratch", {"text": "hello"})
    a, _ = make_pair(v)
    with pytest.raises(LinkError, match="linking disabled"):
        v.link(a.uri, s.uri, "related_to")


def test_legacy_entries_read_as_related_to(vault):
    a, b = make_pair(vault)
    (vault.root / "preferences" / ".relations.json").write_text(json.dumps([
        {"id": "rel_1", "from_uri": b.uri, "uris": [a.uri], "reason": "old style relation", "created_at": "2025-01-01T00:00:00+00:00"}
    ]))
    (link,) = vault.links.of(b.uri, "links")
    assert (link.link_type, link.weight, link.description, link.direction, link.legacy) == (LinkType.RELATED_TO, 1.0, "old style relation", "links", True)
    assert check(vault) == []
    # A new-format write of the same pair supersedes the legacy entry; writes are new format only.
    vault.link(b.uri, a.uri, "belongs_to", weight=0.7)
    entries = sidecar(vault, "preferences")
    assert len(entries) == 1 and "uris" not in entries[0] and entries[0]["link_type"] == "belongs_to"
    assert check(vault) == []


def test_legacy_entry_unlink(vault):
    a, b = make_pair(vault)
    (vault.root / "preferences" / ".relations.json").write_text(json.dumps([{"id": "r", "from_uri": b.uri, "uris": [a.uri, "profile.md"], "reason": "x"}]))
    assert vault.unlink(b.uri, a.uri) == 1
    assert sidecar(vault, "preferences") == [{"id": "r", "from_uri": b.uri, "uris": ["profile.md"], "reason": "x"}]


def test_legacy_targets_are_every_legacy_links_far_end(vault):
    """``legacy_targets`` (an incremental lint's orphan check) names the notes the
    folders' legacy entries link to, as the index holds them."""
    a, b = make_pair(vault)
    (vault.root / "preferences" / ".relations.json").write_text(json.dumps([
        {"id": "r", "from_uri": b.uri, "uris": [a.uri, "profile.md"], "reason": "x"},
        {"id": "folder-level", "uris": [a.uri], "reason": "no from_uri: the folder relates"},
    ]))
    (vault.root / "entities" / ".relations.json").write_text(json.dumps([{"id": "q", "from_uri": a.uri, "uris": [b.uri], "reason": "y"}]))
    everyone = [a.uri, b.uri, "profile.md", "entities/nobody.md"]
    held = {l.to_uri for l in vault.links.all() if l.legacy}
    assert vault.links.legacy_targets(everyone) == held == {a.uri, b.uri, "profile.md"}
    vault.unlink(b.uri, a.uri)
    assert a.uri in vault.links.legacy_targets(everyone)  # (still the folder-level entry's)
    vault.unlink(a.uri, b.uri)
    assert b.uri not in vault.links.legacy_targets(everyone)


def test_malformed_sidecar_is_a_clear_error_and_nothing_changes(vault):
    a, b = make_pair(vault)
    (vault.root / "entities" / ".relations.json").write_text("[{\"to_uri\": 3}]")
    with pytest.raises(SidecarError, match="entities/.relations.json"):
        vault.link(b.uri, a.uri, "related_to")
    assert not (vault.root / "preferences" / ".relations.json").exists()
    assert [p.code for p in check(vault)] == ["malformed_sidecar"]


def test_rendering_rules():
    def mk(text, to, w=1.0, direction="links"):
        return StoredLink(id=to, from_uri="a.md", to_uri=to, direction=direction, link_type="related_to", weight=w, match_text=text, created_at="x")

    text = "Python code style matters. I write Python daily. Caroline agrees."
    out = render_links(text, [mk("Python", "py.md"), mk("Python code style", "style.md"), mk("Nobody", "n.md"), mk("Caroline", "c.md", direction="backlinks")])
    assert out.text == "[Python code style](style.md) matters. I write [Python](py.md) daily. Caroline agrees."
    assert [l.to_uri for l in out.missing] == ["n.md"]
    twice = render_links("Ana met Ana.", [mk("Ana", "ana.md")])
    assert twice.text == "[Ana](ana.md) met [Ana](ana.md)."
    # An imported page's own link syntax is never nested into: its shown text becomes the link.
    page = "Sara joined [[basalt-labs|Basalt Labs]], then [Bluefin](../companies/bluefin) and [[Other]]. ![Bluefin](x.png)"
    out = render_links(page, [mk("Basalt Labs", "sources/basalt-labs.md"), mk("Bluefin", "sources/bluefin.md")])
    assert out.text == ("Sara joined [Basalt Labs](sources/basalt-labs.md), then [Bluefin](sources/bluefin.md) and "
                        "[[Other]]. ![Bluefin](x.png)")
    # Where the page writes the anchor as a link, only there: the same word elsewhere stays a word.
    out = render_links("Beta is late. See [[Beta]].", [mk("Beta", "sources/Beta.md")])
    assert out.text == "Beta is late. See [Beta](sources/Beta.md)." and out.rendered and not out.missing
    # A path a destination cannot hold as it is (an Obsidian page's spaces) is %-escaped;
    # the rest stays readable, and a markdown reader gives back the path.
    spaced = render_links("See the internal link and 杭州.", [mk("internal link", "sources/Linking notes/Internal links (100%).md"),
                                                            mk("杭州", "entities/杭州.md")])
    assert spaced.text == "See the [internal link](sources/Linking%20notes/Internal%20links%20%28100%25%29.md) and [杭州](entities/杭州.md)."
    from urllib.parse import unquote

    from markdown_it import MarkdownIt

    hrefs = [t.attrs["href"] for tok in MarkdownIt().parseInline(spaced.text) for t in tok.children or [] if t.type == "link_open"]
    assert [unquote(str(h)) for h in hrefs] == ["sources/Linking notes/Internal links (100%).md", "entities/杭州.md"]


def test_render_note_uses_outgoing_links_only(vault):
    a, b = make_pair(vault)
    vault.link(b.uri, a.uri, "belongs_to", match_text="type hints")
    vault.link(a.uri, b.uri, "related_to", match_text="tea")
    assert "[type hints](entities/caroline.md)" in vault.render_note(b.uri).text
    assert "[tea](preferences/python-code-style.md)" in vault.render_note(a.uri).text
    assert "type hints" not in vault.render_note(a.uri).text
    assert "[" not in vault.read_note(b.uri).text  # content itself stays pure (the generated Links block aside)


def test_line_range_function():
    old = "alpha\nbeta\ngamma\ndelta"
    new = "zero\nalpha\nbeta\ngamma\ndelta"
    assert correct_ranges("2-3", old, new) == "3-4"
    assert correct_ranges("1,4", old, new) == "2,5"
    assert correct_ranges("2", old, "alpha\ngamma") is None
    assert correct_ranges("2", old, old) == "2"
    assert parse_ranges("3-5, 8") == [(3, 5), (8, 8)]

    class Semantic:
        def __init__(self):
            self.calls = []

        def relocate(self, segments, new_text):
            self.calls.append(segments)
            return "1"

    m = Semantic()
    assert correct_ranges("2", old, "BETA!\nx", m) == "1"
    assert m.calls == [["beta"]]


def test_line_ranges_follow_edits_on_both_sides(vault):
    a, b = make_pair(vault)
    vault.link(b.uri, a.uri, "belongs_to", t_line_ranges="2-3")
    vault.write_note("entity", {"name": "Caroline", "content": {"search": "Caroline leads Atlas.", "replace": "Intro line.\nCaroline leads Atlas."}})
    (fwd,) = vault.links.of(b.uri, "links")
    (back,) = vault.links.of(a.uri, "backlinks")
    assert fwd.t_line_ranges == back.t_line_ranges == "3-4"
    assert check(vault) == []


def test_link_whose_passage_vanished_is_removed_on_both_sides(vault):
    a, b = make_pair(vault)
    vault.link(b.uri, a.uri, "belongs_to", t_line_ranges="2")
    kept = vault.link(b.uri, a.uri, "related_to")  # no line range: unaffected
    vault.write_note("entity", {"name": "Caroline", "content": "Caroline leads Atlas.\nShe runs on Sundays."})
    assert [l.id for l in vault.links.of(b.uri, "links")] == [kept.id]
    assert [l.id for l in vault.links.of(a.uri, "backlinks")] == [kept.id]


def test_pluggable_matcher_is_used_by_the_vault(vault):
    a, b = make_pair(vault)
    vault.link(b.uri, a.uri, "belongs_to", t_line_ranges="2")

    class AlwaysFirst:
        def relocate(self, segments, new_text):
            return "1"

    vault.matcher = AlwaysFirst()
    vault.write_note("entity", {"name": "Caroline", "content": "Completely rewritten."})
    (fwd,) = vault.links.of(b.uri, "links")
    assert fwd.t_line_ranges == "1"


def test_delete_note_removes_its_links_everywhere(vault):
    a, b = make_pair(vault)
    c = vault.write_note("entity", {"name": "Atlas", "kind": "project"})
    vault.link(b.uri, a.uri, "belongs_to")
    vault.link(a.uri, c.uri, "belongs_to")
    assert vault.delete_note(a.uri) == 2
    assert vault.links.of(b.uri) == [] and vault.links.of(c.uri) == []
    assert check(vault) == []


def test_deleting_a_note_an_old_format_entry_names_removes_that_entry(sample):
    """profile.md's {uris, reason} entry names Tom: it goes with him, and nothing dangles."""
    removed = sample.delete_note("entities/tom-vermeulen.md")
    assert "rel_legacy_1" not in (sample.root / ".relations.json").read_text()
    assert removed == 7 and not [f for f in check(sample) if f.severity == "error"]


def test_legacy_entry_without_id_can_be_unlinked(vault):
    a, b = make_pair(vault)
    (vault.root / "preferences" / ".relations.json").write_text(json.dumps([{"from_uri": b.uri, "uris": [a.uri], "reason": "x"}]))
    assert vault.unlink(b.uri, a.uri) == 1
    assert not (vault.root / "preferences" / ".relations.json").exists()


def test_line_ranges_match_whole_lines_nearest_their_old_place():
    old = "Likes cats\nTea\nWalks daily"
    assert correct_ranges("2", old, "Teaches pottery\nLikes cats\nTea\nWalks daily") == "3"  # not inside "Teaches"
    assert correct_ranges("1", "x\ny\nx", "x\ny\nz\nx") == "1"  # the occurrence nearest the old line


def test_a_sidecar_with_a_path_outside_the_vault_is_rejected(vault):
    a, b = make_pair(vault)
    (vault.root / "entities" / ".relations.json").write_text(json.dumps([
        {"id": "x", "from_uri": "../elsewhere/n.md", "to_uri": a.uri, "direction": "backlinks", "link_type": "related_to",
         "weight": 1.0, "created_at": "2026-01-01"}
    ]))
    assert vault.links.of(a.uri) == []  # readers skip the bad entry
    with pytest.raises(SidecarError, match="contains '..'"):
        vault.link(b.uri, a.uri, "related_to")  # a write would rewrite that sidecar: refused
    assert not (vault.root / "preferences" / ".relations.json").exists()  # refused before it began


def test_unlink_by_id_removes_only_that_link(vault):
    a, b = make_pair(vault)
    first = vault.link(b.uri, a.uri, "related_to", weight=0.4, t_line_ranges="1")
    other = vault.link(b.uri, a.uri, "related_to", weight=0.8, t_line_ranges="2")
    assert first.id != other.id
    assert vault.unlink(b.uri, a.uri, "related_to", link_id=first.id) == 1
    assert [l.id for l in vault.links.of(b.uri, "links")] == [other.id]
    assert [l.id for l in vault.links.of(a.uri, "backlinks")] == [other.id]


def test_a_note_written_during_a_catalog_sync_is_not_lost(vault, monkeypatch):
    import threading

    import engine.storage.catalog

    a, _b = make_pair(vault)
    vault.sync()
    walk = engine.storage.catalog.vault_files
    started, written = threading.Event(), threading.Event()

    def slow_walk(root, sidecar, *skipped):
        for item in walk(root, sidecar, *skipped):
            started.set()
            written.wait(5)
            yield item

    recording = threading.Event()
    record = engine.storage.catalog.Catalog.record
    monkeypatch.setattr(engine.storage.catalog, "vault_files", slow_walk)
    monkeypatch.setattr(engine.storage.catalog.Catalog, "record", lambda self, *a: (recording.set(), record(self, *a))[1])
    syncing = threading.Thread(target=vault.sync)
    syncing.start()
    started.wait(5)
    writer = threading.Thread(target=lambda: vault.write_note("entity", {"name": "Written mid-sync", "kind": "thing", "content": "x"}))
    writer.start()
    recording.wait(5)  # the note is on disk, its row waits for the sync under way
    written.set()
    syncing.join(10)
    writer.join(10)
    uri = "entities/written-mid-sync.md"
    assert uri in vault.catalog
    assert uri in {e.uri for e in Vault.open(vault.root).catalog.stored()}


def test_two_vault_objects_on_one_folder_keep_one_catalog(vault):
    """The app and the CLI write the same catalog table; neither may break the other."""
    other = Vault.open(vault.root)
    vault.sync()
    other.sync()
    names = [f"Thing {i}" for i in range(6)]
    written = [(vault if i % 2 else other).write_note("entity", {"name": n, "kind": "thing", "content": "x"}).uri
               for i, n in enumerate(names)]
    assert set(written) <= {e.uri for e in Vault.open(vault.root).catalog.stored()}


# -- the link index's fast path (engine.model.links.plainly_valid) agrees with StoredLink ------------
_TRICKY: dict[str, list] = {
    "id": ["link_1", "", 7, None, ["x"]],
    "from_uri": ["entities/a.md", "./entities/a.md", "entities//a.md", " entities/a.md", "/abs.md", "../up.md",
                 "entities/.hidden.md", "", 3, None],
    "to_uri": ["preferences/b.md", "preferences/./b.md", "a\\b.md", "x\x00.md", True, None],
    "direction": ["links", "backlinks", "both", "", None, 1],
    "link_type": ["related_to", "belongs_to", "made_up_type", "Bad-Type", "", 5, None],
    "weight": [0, 1, 0.5, 1.0, -0.0, 1.5, -0.1, True, False, "0.5", None, float("nan"), float("inf"), 10 ** 400],
    "t_field": ["content", "title", "", 1, None],
    "t_line_ranges": [None, "1", "1-3", "1-3,5", "3-1", "1 - 3", "01", "x", "", 2],
    "match_text": [None, "User", "", 0],
    "description": ["", "why", None, 1.5],
    "created_at": ["2026-01-01T00:00:00+00:00", "", 0, None],
}


def _mutations(seed: int, n: int) -> list:
    import random

    rng = random.Random(seed)
    base = {"id": "link_1", "from_uri": "entities/a.md", "to_uri": "preferences/b.md", "direction": "links",
            "link_type": "related_to", "weight": 0.5, "t_field": "content", "t_line_ranges": None,
            "match_text": None, "description": "", "created_at": "2026-01-01T00:00:00+00:00"}
    out: list = [dict(base)]
    for _ in range(n):
        raw = dict(base)
        for key in rng.sample(sorted(_TRICKY), rng.randint(1, 3)):
            raw[key] = rng.choice(_TRICKY[key])
        if rng.random() < 0.15:
            raw.pop(rng.choice(sorted(raw)))  # a missing key (required or not)
        if rng.random() < 0.05:
            raw[rng.choice(["legacy", "extra", "uris"])] = True
        out.append(raw)
    return out + ["not an object", 3, None, {"uris": ["a.md"], "reason": "old"}]


def test_an_entry_the_fast_path_accepts_is_one_storedlink_accepts_and_dumps_as_written():
    from engine.model.links import StoredLink, plainly_valid

    defaults = {"t_field": "content", "t_line_ranges": None, "match_text": None, "description": ""}
    accepted = 0
    for raw in _mutations(20261203, 4000):
        if isinstance(raw, dict) and plainly_valid(raw):
            accepted += 1
            assert StoredLink.model_validate(raw).model_dump(mode="json") == {**defaults, **raw}, raw
    assert accepted > 100  # the property was put to the test, not vacuously true


def test_the_index_sorts_entries_out_as_storedlink_does():
    """sort_out (the index's fast path) and classify (StoredLink for every entry) agree on
    which entries are good, their ids, directions and owners, the legacy entries and the
    rejected ones with their causes."""
    from engine.model.links import classify, plainly_valid, sort_out

    rows = _mutations(7, 3000)
    good, legacy, rejected = sort_out(rows)
    entries, legacy2, rejected2 = classify(rows)
    assert [(l.id, l.direction, l.from_uri if l.direction == "links" else l.to_uri) for l in entries] == \
        [g[1:4] for g in good]
    # Each good entry's canonical form: None when it is written as StoredLink dumps it.
    assert [None if plainly_valid(rows[g[0]]) else l.model_dump(mode="json") for g, l in zip(good, entries, strict=True)] == \
        [g[4] for g in good]
    assert any(g[4] is not None for g in good) and any(g[4] is None for g in good)
    assert legacy == legacy2
    assert [(r.index, r.cause) for r in rejected] == [(r.index, r.cause) for r in rejected2]
    assert len(entries) > 100 and len(rejected) > 100


def test_every_entry_memlink_writes_takes_the_fast_path(vault):
    from engine.model.links import plainly_valid

    a, b = make_pair(vault)
    vault.link(b.uri, a.uri, "belongs_to", weight=0.9, match_text="User", t_line_ranges="1-2", description="pref")
    vault.link(a.uri, b.uri, "related_to")
    rows = sidecar(vault, "preferences") + sidecar(vault, "entities")
    assert len(rows) == 4 and all(plainly_valid(r) for r in rows)


def test_a_trusted_record_is_the_record_model_construct_makes():
    """The link index makes its records without pydantic's per-field work; they are the
    same records, dump the same and copy the same."""
    fields = {"id": "link_1", "from_uri": "entities/a.md", "to_uri": "events/b.md", "direction": "links",
              "link_type": LinkType.named("related_to"), "weight": 0.5, "t_field": "content", "t_line_ranges": "1-2",
              "match_text": "x", "description": "d", "created_at": "2026-01-01T00:00:00+00:00", "legacy": False}
    assert set(fields) == set(StoredLink.model_fields)
    trusted, built = StoredLink.trusted(dict(fields)), StoredLink.model_construct(**fields)
    assert trusted == built and trusted.model_dump() == built.model_dump()
    assert trusted.model_dump_json() == built.model_dump_json()
    assert trusted.model_copy(update={"weight": 0.9}).weight == 0.9 and trusted.weight == 0.5
    assert trusted.same_record(built.as_direction("backlinks")) and not trusted.same_record(built.model_copy(update={"weight": 1.0}))
