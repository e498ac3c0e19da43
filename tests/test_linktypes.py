"""Link types as data: the built-in table, the LinkType name, and a seventh type declared
in a vault's memlink.yaml flowing through linking, the graph, search's forced follow, the
rules extractor and the LLM output contract."""

from __future__ import annotations

import json
import math
import pickle

import pytest
from conftest import make_pair
from pydantic import ValidationError
from test_extract import session

from engine import LinkError, LinkType, Vault, VaultError
from engine.extract.linktype import choices_model
from engine.extract.operations import operations_model
from engine.extract.rules import RulesExtractor, link_type_for
from engine.graph import LinkGraph
from engine.lint.memo import check
from engine.model.config import SearchConfig
from engine.model.linktypes import builtin_table
from engine.retrieve.search import propagation_params, search
from engine.sessions.commit import commit_session

SUPPORTS = """
link_types:
  - name: supports
    label: supports
    inverse: supported by
    description: the from-note is evidence for the to-note
    forward: {weight: 0.55, continue: false, max_depth: 1}
    backward: {weight: 0.35, continue: false, max_depth: 1}
    forced_follow: true
    cue_rank: 0
    cues: ['\\bbacks up\\b', '\\bis evidence for\\b']
"""


def with_config(v: Vault, extra: str) -> Vault:
    path = v.root / "memlink.yaml"
    path.write_text(path.read_text(encoding="utf-8") + extra, encoding="utf-8")
    return Vault.open(v.root)


@pytest.fixture
def seventh(vault: Vault) -> Vault:
    return with_config(vault, SUPPORTS)


# -- the built-in table -----------------------------------------------------------------------
def test_the_builtin_table_holds_the_six_types_with_their_weights():
    table = builtin_table()
    assert [t.value for t in table.names()] == ["related_to", "belongs_to", "caused_by", "derived_from",
                                                "contradicts", "evolved_from"]
    flows = {(t.value, d): (f.weight, f.cont, f.max_depth) for (t, d), f in table.propagation().items()}
    assert flows == {
        ("contradicts", "links"): (0.8, False, 1), ("contradicts", "backlinks"): (0.8, False, 1),
        ("belongs_to", "links"): (0.7, True, 3), ("belongs_to", "backlinks"): (0.7, True, 3),
        ("caused_by", "links"): (0.5, True, 2), ("caused_by", "backlinks"): (0.3, False, 1),
        ("derived_from", "links"): (0.2, False, 1), ("derived_from", "backlinks"): (0.6, False, 1),
        ("evolved_from", "links"): (0.3, False, 1), ("evolved_from", "backlinks"): (0.9, True, 5),
        ("related_to", "links"): (0.4, False, 1), ("related_to", "backlinks"): (0.4, False, 1),
    }
    assert table.forced_follow() == (LinkType.CONTRADICTS, LinkType.EVOLVED_FROM)
    assert (table.role("conflict"), table.role("supersedes"), table.role("provenance"), table.role("default"),
            table.role("membership")) == (LinkType.CONTRADICTS, LinkType.EVOLVED_FROM, LinkType.DERIVED_FROM,
                                          LinkType.RELATED_TO, LinkType.BELONGS_TO)
    assert (table.phrase("evolved_from", "links"), table.phrase("evolved_from", "backlinks")) == ("evolved from", "evolved into")


@pytest.mark.parametrize("sentence, expected", [
    ("I no longer drink it because of the caffeine", "evolved_from"),  # the stronger cue wins
    ("That is not true, says Mia", "contradicts"),
    ("We moved because of the rent", "caused_by"),
    ("Mia works at Acme", "belongs_to"),
    ("According to Mia it rains", "derived_from"),
    ("我不再喝咖啡", "evolved_from"),
    ("I used to drink espresso", "evolved_from"),
    ("Span and div tags can be used to apply CSS snippets", "related_to"),  # a tool's use, not a past habit
    ("You will get used to the new layout", "related_to"),
    ("I'm used to the noise; it's used to mask the fan", "related_to"),
    ("We are getting used to it", "related_to"),
    ("Lunch with Mia", "related_to"),
])
def test_the_rules_cascade_reads_the_table_cues(sentence, expected):
    assert link_type_for(sentence) == expected


def test_link_type_is_an_interned_name():
    assert LinkType("contradicts") is LinkType.CONTRADICTS
    assert LinkType(LinkType.EVOLVED_FROM) is LinkType.EVOLVED_FROM
    assert LinkType.CONTRADICTS == "contradicts" and LinkType.CONTRADICTS.value == "contradicts"
    assert type(LinkType.CONTRADICTS.value) is str
    assert pickle.loads(pickle.dumps(LinkType.BELONGS_TO)) is LinkType.BELONGS_TO
    assert json.dumps({"t": LinkType.CAUSED_BY}) == '{"t": "caused_by"}'
    assert {"related_to", "contradicts"} <= {t.value for t in LinkType}
    with pytest.raises(ValueError, match="unknown link type"):
        LinkType("likes")
    with pytest.raises(ValueError):
        LinkType.named("Not A Name")


# -- a seventh type ---------------------------------------------------------------------------
def test_a_declared_type_links_on_both_sides(seventh):
    a, b = make_pair(seventh)
    link = seventh.link(b.uri, a.uri, "supports", weight=0.9, description="evidence")
    assert link.link_type is LinkType("supports")
    for folder, direction in (("preferences", "links"), ("entities", "backlinks")):
        rows = json.loads((seventh.root / folder / ".relations.json").read_text(encoding="utf-8"))
        assert [(r["link_type"], r["direction"], r["id"]) for r in rows] == [("supports", direction, link.id)]
    assert [l.link_type.value for l in seventh.links.of(a.uri, "backlinks")] == ["supports"]
    assert [p for p in check(seventh) if p.severity == "error"] == []
    from engine.lint.report import lint

    assert [f for f in lint(seventh).findings if f.check == "links"] == []  # lint knows the type too


def test_a_vault_that_does_not_declare_it_refuses_it(seventh, tmp_path):
    assert "supports" in seventh.config.link_table()  # declared (and so named) in this process
    other = Vault.init(tmp_path / "other", name="other")
    a, b = make_pair(other)
    with pytest.raises(LinkError, match=r"unknown link type 'supports' \(one of: related_to, .*evolved_from\)"):
        other.link(b.uri, a.uri, "supports")
    ops = operations_model(other.types, None, other.config.link_table())
    with pytest.raises(ValidationError, match="unknown link type"):
        ops.model_validate({**{k: [] for k in ops.model_fields if k != "links"},
                            "links": [{"f": 1, "t": 2, "t_field": "content", "link_type": "supports"}]})


def test_the_graph_propagates_with_its_weights(seventh):
    a, b = make_pair(seventh)
    seventh.link(b.uri, a.uri, "supports", weight=0.8)
    params = propagation_params(seventh.config.search, seventh.config.link_table())
    graph = LinkGraph.for_vault(seventh)
    forward = graph.propagate({b.uri: 1.0}, params)[a.uri]
    assert forward.score == pytest.approx(0.55 * 0.8 * 0.85 / math.sqrt(1))
    assert forward.via[0].link.link_type is LinkType("supports") and forward.via[0].direction == "links"
    backward = graph.propagate({a.uri: 1.0}, params)[b.uri]
    assert backward.score == pytest.approx(0.35 * 0.8 * 0.85)
    assert LinkType("supports") in params.forced_follow  # forced_follow: true in its row
    # Without the vault's table nothing flows over it.
    assert b.uri not in graph.propagate({a.uri: 1.0}, propagation_params(SearchConfig()))


def test_search_always_follows_it_when_its_row_says_so(seventh):
    seventh.write_note("preference", {"topic": "Tea", "content": "Drinks green tea every afternoon."})
    seventh.write_note("event", {"event_name": "Lab visit", "date": "2026-09-02", "content": "Saw a study on caffeine."})
    seventh.link("events/2026/09/02/lab-visit.md", "preferences/tea.md", "supports", weight=0.1)
    hits = search(seventh, "green tea afternoon", k=1, routes=("keyword",))
    assert hits[0].uri == "preferences/tea.md"
    forced = [h for h in hits if h.routes and h.routes[0].kind == "forced"]
    assert [h.uri for h in forced] == ["events/2026/09/02/lab-visit.md"]
    assert "supports" in forced[0].route


def test_the_rules_extractor_types_a_mention_with_its_cue(seventh):
    table = seventh.config.link_table()
    assert table.type_for("This backs up what Caroline said") is LinkType("supports")
    assert link_type_for("This backs up what Caroline said") == "related_to"  # the built-ins have no such cue
    seventh.write_note("entity", {"name": "Caroline", "kind": "person", "content": "A friend."})
    session(seventh, "s1", [("user", "I like green tea, which backs up what Caroline said."), ("assistant", "Noted.")])
    report = commit_session(seventh, "s1", RulesExtractor())
    tea = next(u for u in report.created if u.startswith("preferences/"))
    assert [(l.to_uri, l.link_type.value) for l in seventh.links.of(tea, "links")] == [("entities/caroline.md", "supports")]


def test_the_llm_output_contract_accepts_it(seventh):
    ops = operations_model(seventh.types, None, seventh.config.link_table())
    schema = json.dumps(ops.model_json_schema())
    assert '"supports"' in schema
    answer = ops.model_validate_json(json.dumps({**{k: [] for k in ops.model_fields if k != "links"},
                                                 "links": [{"f": 1, "t": 2, "t_field": "content", "link_type": "supports"}]}))
    assert answer.links[0].link_type is LinkType("supports")
    # ingest's link-type refinement asks with the same names
    refine = choices_model(seventh.config.link_table())
    assert refine.model_validate({"links": [{"ref": 1, "link_type": "supports", "relation": "backs up"}]}).links[0].link_type == "supports"
    assert '"supports"' in json.dumps(refine.model_json_schema())
    with pytest.raises(ValidationError):
        choices_model(builtin_table()).model_validate({"links": [{"ref": 1, "link_type": "supports", "relation": "x"}]})


# -- reading and declaring ----------------------------------------------------------------------
def test_an_undeclared_type_in_a_sidecar_still_reads(vault):
    a, b = make_pair(vault)
    row = {"id": "link_x", "from_uri": b.uri, "to_uri": a.uri, "link_type": "refutes_maybe", "weight": 0.9,
           "t_field": "content", "t_line_ranges": None, "match_text": None, "description": "", "created_at": "x"}
    for folder, direction in (("preferences", "links"), ("entities", "backlinks")):
        (vault.root / folder / ".relations.json").write_text(json.dumps([{**row, "direction": direction}]), encoding="utf-8")
    vault = Vault.open(vault.root)
    links = vault.links.of(b.uri, "links")
    assert [l.link_type.value for l in links] == ["refutes_maybe"]
    assert vault.config.link_table().unknown(l.link_type for l in links) == ["refutes_maybe"]
    assert not [p for p in check(vault) if p.code == "malformed_sidecar"]
    from engine.lint.report import lint

    flagged = [f for f in lint(vault).findings if f.code == "unknown_link_type"]
    assert [(f.severity, f.uri, f.other) for f in flagged] == [("warning", b.uri, a.uri)]
    graph = LinkGraph.for_vault(vault)  # carries no meaning: nothing flows over it
    assert graph.propagate({b.uri: 1.0}, propagation_params(vault.config.search, vault.config.link_table())) == {}
    assert vault.unlink(b.uri, a.uri) == 1  # and it can be removed
    assert vault.links.of(a.uri) == []


@pytest.mark.parametrize("extra, message", [
    ("link_types:\n  - {name: contradicts, label: a, inverse: b, forward: {weight: 0.1}, backward: {weight: 0.1}}\n",
     "declared twice"),
    ("link_types:\n  - {name: refutes, label: a, inverse: b, roles: [conflict], forward: {weight: 0.1}, backward: {weight: 0.1}}\n",
     "role 'conflict'"),
    ("link_types:\n  - {name: refutes, label: a, inverse: b, cues: ['(unclosed'], forward: {weight: 0.1}, backward: {weight: 0.1}}\n",
     "not a regular expression"),
    ("link_types:\n  - {name: refutes, label: a, inverse: b, forward: {weight: 1.5}, backward: {weight: 0.1}}\n",
     "weight"),
    ("search:\n  forced_follow: [likes]\n", "unknown link type 'likes'"),
])
def test_bad_declarations_are_config_errors(vault, extra, message):
    with pytest.raises(VaultError, match=message):
        with_config(vault, extra)


def test_an_imported_page_reference_is_typed_by_the_vaults_cues(seventh, tmp_path):
    from engine.extract.batch import ingest_batch

    folder = tmp_path / "pages"
    folder.mkdir()
    (folder / "alpha.md").write_text("# Alpha\n\nThe field study is evidence for [[Beta]] on every count.\n", encoding="utf-8")
    (folder / "beta.md").write_text("# Beta\n\nA claim about soil.\n", encoding="utf-8")
    ingest_batch(seventh, [folder], wiki=False)
    links = [l for l in seventh.links.all() if l.to_uri.endswith("beta.md")]
    assert [l.link_type.value for l in links] == ["supports"], [(l.from_uri, l.to_uri, l.link_type) for l in links]


def test_the_extraction_prompt_explains_the_vaults_link_types(seventh):
    import datetime as dt

    from engine.extract.context import ExtractContext
    from engine.extract.loop import messages_for, prefetch

    ctx = ExtractContext("session", "user: The lab visit backs up what Caroline said.", dt.date(2026, 9, 2))
    prefetch(seventh, ctx)
    prompt = messages_for(ctx)[0]["content"]
    assert "  - supports: the from-note is evidence for the to-note" in prompt
    assert "  - evolved_from: the from-note is the newer version of the to-note" in prompt
