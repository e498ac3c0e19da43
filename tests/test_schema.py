import pytest

from engine import SchemaError, TypeRegistry, Vault
from engine.model.schema import parse_type_yaml

BUILTINS = {"profile", "preference", "entity", "event", "report", "report_candidate", "source"}


def test_builtin_types_load():
    reg = TypeRegistry.builtin()
    assert set(reg.names()) == BUILTINS
    assert all(t.link_enabled for t in reg)
    assert reg.get("profile").note_uri({"name": "x"}) == "profile.md"


def test_event_goes_into_dated_folder(vault):
    note = vault.write_note("event", {"event_name": "Code review", "date": "2026-09-03", "content": "x"})
    assert note.uri == "events/2026/09/03/code-review.md"


def test_cjk_titles_keep_their_characters(vault):
    note = vault.write_note("entity", {"name": "王小明", "content": "同事"})
    assert note.uri == "entities/王小明.md"


def test_unknown_field_is_a_clear_error(vault):
    with pytest.raises(SchemaError, match="unknown field 'colour'"):
        vault.write_note("entity", {"name": "A", "colour": "red"})


def test_wrong_type_is_a_clear_error(vault):
    with pytest.raises(SchemaError, match="expected a list"):
        vault.write_note("entity", {"name": "A", "aliases": "not a list"})
    with pytest.raises(SchemaError, match="expected a date"):
        vault.write_note("event", {"event_name": "E", "date": "next tuesday"})


def test_missing_required_field(vault):
    with pytest.raises(SchemaError, match="required field"):
        vault.write_note("event", {"event_name": "E", "date": "2026-01-01", "content": "x"} | {"event_name": ""})


def test_unknown_memory_type(vault):
    with pytest.raises(SchemaError, match="unknown memory type"):
        vault.write_note("recipe", {"name": "x"})


def test_bad_type_definitions_are_rejected():
    base = "memory_type: t\nfilename: x.md\ntitle_field: a\ncontent_template: '{{ a }}'\n"
    with pytest.raises(SchemaError, match="sum needs"):
        parse_type_yaml(base + "fields:\n  - {name: a, field_type: string, merge_op: sum}\n", "t.yaml")
    with pytest.raises(SchemaError, match="field_type"):
        parse_type_yaml(base + "fields:\n  - {name: a, field_type: blob}\n", "t.yaml")
    with pytest.raises(SchemaError, match="colour: Extra inputs"):
        parse_type_yaml(base + "colour: red\nfields:\n  - {name: a}\n", "t.yaml")
    with pytest.raises(SchemaError, match="not valid YAML"):
        parse_type_yaml("memory_type: [", "t.yaml")


def test_vault_can_add_and_override_types(tmp_path):
    v = Vault.init(tmp_path / "v")
    (v.root / "memory_types").mkdir()
    (v.root / "memory_types" / "recipe.yaml").write_text(
        "memory_type: recipe\ndirectory: recipes\nfilename: '{{ title | slug }}.md'\ntitle_field: title\n"
        "link_enabled: false\nfields:\n  - {name: title, required: true}\n  - {name: servings, field_type: integer, merge_op: sum}\n"
        "content_template: |\n  # {{ title }}\n  Serves {{ servings }}\n"
    )
    (v.root / "memory_types" / "entity.yaml").write_text(
        "memory_type: entity\ndirectory: people\nfilename: '{{ name | slug }}.md'\ntitle_field: name\n"
        "fields:\n  - {name: name, merge_op: immutable}\ncontent_template: 'Person: {{ name }}'\n"
    )
    v = Vault.open(v.root)
    note = v.write_note("recipe", {"title": "Dal", "servings": 2})
    assert note.uri == "recipes/dal.md" and "Serves 2" in note.body
    assert v.write_note("recipe", {"title": "Dal", "servings": 3}).fields["servings"] == 5
    assert v.write_note("entity", {"name": "Ana"}).uri == "people/ana.md"
    assert v.schema("recipe").link_enabled is False


def test_sandbox_refuses_attribute_escapes(tmp_path):
    v = Vault.init(tmp_path / "v")
    (v.root / "memory_types").mkdir()
    for i, expr in enumerate(["''.__class__.__mro__[1].__subclasses__()", "cycler.__init__.__globals__", "name.__class__"]):
        (v.root / "memory_types" / f"evil{i}.yaml").write_text(
            f"memory_type: evil{i}\ndirectory: evil\nfilename: 'e{i}.md'\ntitle_field: name\n"
            f"fields:\n  - {{name: name}}\ncontent_template: \"{{{{ {expr} }}}}\"\n"
        )
    v = Vault.open(v.root)
    for i in range(3):
        with pytest.raises(SchemaError, match="unsafe|undefined|failed to render"):
            v.write_note(f"evil{i}", {"name": "x"})
        assert not (v.root / "evil" / f"e{i}.md").exists()
