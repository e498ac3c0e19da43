"""The `memlink` CLI through its real entry point, in a process of its own (forked from one
with memlink imported: tests/forkserver.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import forkserver
from conftest import REPO, SAMPLE, make_pair

from engine import Vault


def memlink(*args: str, vault: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "memlink_tui"]
    if vault is not None:
        cmd += ["--vault", str(vault)]
    return forkserver.run(cmd + list(args), capture_output=True, text=True, cwd=REPO, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


def test_init_link_show_links_unlink_check(tmp_path):
    root = tmp_path / "v"
    assert memlink("init", vault=root).returncode == 0
    a, b = make_pair(Vault.open(root))
    r = memlink("link", b.uri, a.uri, "--type", "belongs_to", "--weight", "0.8", "--match-text", "User",
                "--description", "whose preference", "--t-field", "content", "--t-lines", "1-2", "--json", vault=root)
    assert r.returncode == 0, r.stderr
    link = json.loads(r.stdout)
    assert link["link_type"] == "belongs_to" and link["t_line_ranges"] == "1-2" and link["weight"] == 0.8

    shown = json.loads(memlink("show", b.uri, "--json", vault=root).stdout)
    assert shown["memory_type"] == "preference" and shown["fields"]["topic"] == "Python code style"
    assert "[User](entities/caroline.md)" in shown["rendered"] and "[User]" not in shown["body"]
    assert [l["id"] for l in shown["links"]] == [link["id"]] and shown["backlinks"] == []

    back = json.loads(memlink("links", a.uri, "--direction", "backlinks", "--json", vault=root).stdout)
    assert [(l["direction"], l["from_uri"]) for l in back] == [("backlinks", b.uri)]
    text = memlink("links", a.uri, vault=root).stdout
    assert "<- belongs_to" in text and "whose preference" in text

    assert memlink("check", vault=root).returncode == 0
    r = memlink("unlink", b.uri, a.uri, "--type", "belongs_to", vault=root)
    assert r.returncode == 0 and "removed 1 link" in r.stdout
    assert json.loads(memlink("links", a.uri, "--json", vault=root).stdout) == []


def test_errors_are_one_line_on_stderr_with_nonzero_exit(tmp_path):
    root = tmp_path / "v"
    memlink("init", vault=root)
    cases = [
        ("show", "../../etc/passwd"),
        ("show", "entities/nobody.md"),
        ("link", "profile.md", "entities/x.md", "--type", "related_to"),
        ("unlink", "profile.md", "entities/x.md"),
    ]
    for args in cases:
        r = memlink(*args, vault=root)
        assert r.returncode == 1, args
        assert r.stderr.startswith("memlink: error: ") and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = memlink("show", "x.md", vault=tmp_path / "missing")
    assert r.returncode == 1 and "does not exist" in r.stderr
    r = memlink("init", vault=root)
    assert r.returncode == 1 and "already a memlink vault" in r.stderr
    r = memlink("link", "a.md", "b.md", "--type", "likes", vault=root)
    assert r.returncode == 2 and "unknown link type 'likes' (one of: related_to" in r.stderr  # a usage error
    vault = Vault.open(root)
    ana = vault.write_note("entity", {"name": "Ana", "content": "A friend."}).uri
    vault.close()
    r = memlink("show", ana[:-3], vault=root)  # (as Obsidian writes a path)
    assert r.returncode == 1 and f"no note at {ana[:-3]} ({ana} is one" in r.stderr
    r = memlink("review", ana, "entities/nobody.md", "--action", "keep-a", vault=root)
    assert r.returncode == 1 and "no note at entities/nobody.md" in r.stderr  # (not "no contradicts link between")
    for args, says in [(("lint", "--check", "bogus"), "see `memlink lint --help`"),
                       (("recall", "tea", "--k", "0"), "see `memlink recall --help`"),
                       (("link", "a.md"), "the following arguments are required: TO"), (("bogus",), "see `memlink --help`"),
                       (("link", "a.md", "b.md", "--type", "related_to", "--weight", "1.5"), "a weight is from 0 to 1"),
                       (("link", "a.md", "b.md", "--type", "related_to", "--t-lines", "5-2"), "may not run backwards")]:
        r = memlink(*args, vault=root)  # (argparse's own: the same one line, not its usage first)
        assert r.returncode == 2 and r.stderr.startswith("memlink: error: ") and says in r.stderr, (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_check_exits_3_on_errors(tmp_path):
    root = tmp_path / "v"
    memlink("init", vault=root)
    (root / "entities" / "bad.md").write_text("nope\n")
    r = memlink("check", vault=root)
    assert r.returncode == 3 and "malformed_note" in r.stdout
    assert "entities/bad.md: no YAML frontmatter" in r.stdout and "bad.md: entities/bad.md" not in r.stdout  # (named once)


def test_vault_from_environment(tmp_path):
    root = tmp_path / "envvault"
    assert memlink("init", env={"MEMLINK_VAULT": str(root)}).returncode == 0
    assert (root / "memlink.yaml").exists()


def test_demo_copies_the_sample_vault_and_leaves_the_original_alone(tmp_path):
    before = sorted((p.relative_to(SAMPLE).as_posix(), p.stat().st_mtime_ns) for p in SAMPLE.rglob("*"))
    r = memlink("demo", "--no-app", env={"MEMLINK_HOME": str(tmp_path / "home")})
    assert r.returncode == 0, r.stderr
    copy = Path(r.stdout.strip().split(" to ", 1)[1])
    assert copy.parent == tmp_path / "home" and (copy / "memlink.yaml").exists()
    assert memlink("check", vault=copy).returncode == 0
    Vault.open(copy).write_note("entity", {"name": "Someone new"})
    after = sorted((p.relative_to(SAMPLE).as_posix(), p.stat().st_mtime_ns) for p in SAMPLE.rglob("*"))
    assert before == after
    assert not (SAMPLE / ".memlink").exists()


def _listed_commands() -> list[str]:
    """The subcommands `memlink --help` lists, in its order."""
    out = memlink("--help").stdout
    block = out.split("  COMMAND\n", 1)[1].split("\n\n", 1)[0]
    return [line.split()[0] for line in block.splitlines() if line.startswith("    ") and not line.startswith("     ")]


def test_every_listed_command_is_registered_by_exactly_one_group_module():
    import argparse

    from memlink_tui.cli import GROUPS

    listed = _listed_commands()
    assert "search" in listed and "dream" in listed and len(listed) == len(set(listed)) >= 20
    owners: dict[str, list[str]] = {}
    for group in GROUPS:
        sub = argparse.ArgumentParser().add_subparsers(dest="command")
        group.register(sub, argparse.ArgumentParser(add_help=False))
        for name, parser in sub.choices.items():
            owners.setdefault(name, []).append(group.__name__)
            handler = parser.get_default("func")
            assert handler is not None and handler.__module__ == group.__name__, (name, handler)
    assert sorted(owners) == sorted(listed)
    assert {name: len(groups) for name, groups in owners.items() if len(groups) != 1} == {}


def test_only_the_wiring_module_opens_vaults_and_picks_the_provider():
    import ast

    package = REPO / "memlink_tui" / "cli"
    offenders = []
    for path in sorted(package.glob("*.py")):
        if path.name == "wiring.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Vault" \
                    and node.attr in ("open", "init"):
                offenders.append(f"{path.name}: Vault.{node.attr}")
            if isinstance(node, ast.ImportFrom) and node.module and node.module.endswith("llm.registry"):
                offenders.append(f"{path.name}: imports {node.module}")
    assert offenders == []
    wiring = (package / "wiring.py").read_text(encoding="utf-8")
    assert "Vault.open(" in wiring and "engine.llm.registry import selection" in wiring


def test_the_provider_is_chosen_once_per_process(tmp_path, monkeypatch):
    from engine.llm import registry
    from memlink_tui.cli import wiring

    calls = []
    real = registry.choose

    def counting(cfg):
        calls.append(cfg.provider)
        return real(cfg)

    monkeypatch.setattr(registry, "choose", counting)
    monkeypatch.setattr(registry, "REGISTRY", registry.ProviderRegistry())
    vault = Vault.init(tmp_path / "v")
    vault.config.llm.provider = "rules"
    first = wiring.provider(vault)
    assert first.llm is None and first.health.provider == "rules"
    assert wiring.provider(vault) is first and wiring.provider(vault, force="rules") is first
    assert registry.selection(vault.config.llm) is first  # the CLI and the engine read the same choice
    assert calls == ["rules"]


def test_unknown_command_is_a_usage_error_listing_commands_in_help_order():
    r = memlink("no-such-command")
    assert r.returncode == 2
    choices = r.stderr.split("choose from ", 1)[1].split(")", 1)[0].replace("'", "").split(", ")
    assert choices == _listed_commands()


def test_ask_files_a_research_question_once(tmp_path):
    root = tmp_path / "v"
    assert memlink("init", vault=root).returncode == 0
    first = memlink("ask", "Which coffee grinder should I buy?", "--requirement", "under 200 euros", vault=root)
    assert first.returncode == 0, first.stderr
    uri = first.stdout.strip()
    assert uri.startswith("report_candidates/") and (root / uri).is_file()
    note = Vault.open(root).read_note(uri)
    assert note.fields["status"] == "pending" and note.fields["user_requirement"] == "under 200 euros"
    again = memlink("ask", "which coffee grinder  should I buy", vault=root)
    assert again.stdout.strip() == uri
    assert len(list((root / "report_candidates").glob("*.md"))) == 1
    assert memlink("ask", "  ", vault=root).returncode == 2


def test_link_types_a_vault_declares_work_from_the_cli(tmp_path):
    from test_linktypes import SUPPORTS

    root = tmp_path / "v"
    assert memlink("init", vault=root).returncode == 0
    a, b = make_pair(Vault.open(root))
    (root / "memlink.yaml").write_text((root / "memlink.yaml").read_text(encoding="utf-8") + SUPPORTS, encoding="utf-8")
    r = memlink("link", b.uri, a.uri, "--type", "supports", "--json", vault=root)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["link_type"] == "supports"
    rows = json.loads(memlink("graph-query", a.uri, "--type", "supports", "--json", vault=root).stdout)
    assert [(row["uri"], row["link_type"]) for row in rows] == [(b.uri, "supports")]
    assert memlink("unlink", b.uri, a.uri, "--type", "supports", vault=root).returncode == 0
    assert Vault.open(root).links.of(b.uri) == []


def test_one_shot_commands_raise_the_collector_threshold_and_the_app_keeps_it(monkeypatch, tmp_path):
    """A one-shot command holds millions of objects until it exits: it collects rarely.
    The app and the MCP server live on and keep CPython's defaults."""
    import gc

    import memlink_tui.cli as cli

    default = gc.get_threshold()
    monkeypatch.setattr(cli, "run", lambda handler, args: 0)  # parse and set up only
    try:
        for argv, raised in ((["--vault", str(tmp_path), "lint"], True), (["--vault", str(tmp_path), "search", "x"], True),
                             (["--vault", str(tmp_path)], False), (["--vault", str(tmp_path), "mcp"], False),
                             (["demo"], False)):
            gc.set_threshold(*default)
            assert cli.main(argv) == 0
            assert (gc.get_threshold() == cli.ONE_SHOT_GC) is raised, argv
    finally:
        gc.set_threshold(*default)


def test_lint_lists_the_first_of_each_check_and_all_of_them_with_all(tmp_path):
    root = tmp_path / "v"
    assert memlink("init", vault=root).returncode == 0
    for i in range(25):
        (root / "entities" / f"bad-{i:02}.md").write_text("no frontmatter\n")
    shown = memlink("lint", vault=root)
    every = memlink("lint", "--all", vault=root)
    assert shown.returncode == every.returncode == 3
    listed = [line for line in shown.stdout.splitlines() if line.startswith("error   structure")]
    assert len(listed) == 20 and "… and 5 more structure: `memlink lint --all` lists every one" in shown.stdout
    assert len([line for line in every.stdout.splitlines() if line.startswith("error   structure")]) == 25
    assert "more structure" not in every.stdout and every.stdout.splitlines()[-1].startswith("25 errors;")
