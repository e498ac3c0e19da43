"""`memlink mcp`: the vault over the Model Context Protocol, driven by the SDK's own client
over stdio (a real `memlink mcp` process), every tool, a resource, structured errors and
read-only mode."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import forkserver
from conftest import REPO, SAMPLE, memlink, set_llm
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from engine import Vault
from engine.lint.memo import check
from engine.review.actions import ACTION_LOG
from engine.storage.jsonl import read_jsonl

TOOLS = {"search", "recall", "context", "show_note", "graph_query", "recent", "list_reports", "lint_digest", "add_memory",
         "write_note", "edit_note", "delete_note", "undo", "link", "unlink", "ask", "move"}
READS = {"search", "recall", "context", "show_note", "graph_query", "recent", "list_reports", "lint_digest"}
MOCHI = "entities/mochi.md"


def server(root: Path, *flags: str) -> Client:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OLLAMA_HOST": "http://127.0.0.1:9",
           "MEMLINK_CONFIG_HOME": str(root.parent / "config")}
    argv, env = forkserver.command([sys.executable, "-m", "memlink_tui", "--vault", str(root), "mcp", *flags], env)
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=str(REPO))
    return Client(params, read_timeout_seconds=120)


def a_vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns(".memlink"))
    set_llm(root, provider="rules").close()  # the zero-LLM rules extract: no model needed
    return root


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".memlink" not in p.parts}


async def test_every_tool_answers_through_the_sdk_client(tmp_path):
    root = a_vault(tmp_path)
    async with server(root) as client:
        listed = await client.list_tools()
        assert {t.name for t in listed.tools} == TOOLS
        assert all(t.input_schema and t.description for t in listed.tools)

        found = (await client.call_tool("search", {"query": "celadon glaze", "k": 5})).structured_content
        assert found["hits"] and all(h["routes"] and h["route"] for h in found["hits"])  # the routes, explained
        assert any("celadon" in h["title"].lower() for h in found["hits"])

        recalled = (await client.call_tool("recall", {"question": "Where do I get my flat white?"})).structured_content
        assert any("flat white" in (t["question"] + t["answer"]).lower() for t in recalled["turns"])

        # What the chat model gets for a question: notes and turns, numbered for citing.
        context = (await client.call_tool("context", {"question": "How much is the membership at the studio?"}))
        items = context.structured_content["items"]
        assert [i["n"] for i in items] == list(range(1, len(items) + 1))
        studio = next(i for i in items if i["source"] == "entities/klei-vuur.md")
        assert studio["kind"] == "note" and "€95" in studio["text"] and studio["cite"].startswith("entities/klei-vuur.md:")
        assert all(i["route"] for i in items)
        flat_white = {"question": "Where do I get my flat white?"}
        anywhere = (await client.call_tool("context", flat_white)).structured_content["items"]
        turn = next(i for i in anywhere if i["kind"] == "turn" and "flat white" in i["text"].lower())
        # Asked inside that chat session, its last turns are what the asker sees already: left out.
        inside = (await client.call_tool("context", {**flat_white, "session": turn["source"]})).structured_content
        assert turn["where"] not in [i["where"] for i in inside["items"]]
        bad = await client.call_tool("context", {**flat_white, "session": "../etc"})
        assert bad.is_error and "bad session id" in bad.structured_content["error"]["message"]

        note = (await client.call_tool("show_note", {"uri": MOCHI})).structured_content
        assert note["uri"] == MOCHI and note["memory_type"] == "entity" and note["backlinks"]

        walk = (await client.call_tool("graph_query", {"uri": MOCHI, "depth": 2})).structured_content
        assert {n["uri"] for n in walk["neighbours"]} >= {l["from_uri"] for l in note["backlinks"]}

        queue = (await client.call_tool("list_reports", {})).structured_content
        assert queue["questions"] and all(q["status"] for q in queue["questions"]) and queue["reports"]

        digest = (await client.call_tool("lint_digest", {})).structured_content
        assert digest["notes"] == len(Vault.open(root).catalog.all()) and digest["links"] > 0

        made = (await client.call_tool("add_memory", {"text": "I prefer oolong tea over green tea in the evening."}))
        assert not made.is_error, made.content
        assert made.structured_content["provider"] == "rules" and made.structured_content["created"]
        again = (await client.call_tool("search", {"query": "oolong tea evening"})).structured_content
        assert set(made.structured_content["created"]) & {h["uri"] for h in again["hits"]}
        undone = await client.call_tool("undo", {"action": made.structured_content["action"]})
        assert not undone.is_error, undone.content
        assert not any((root / uri).exists() for uri in made.structured_content["created"])
        made = (await client.call_tool("add_memory", {"text": "I prefer oolong tea over green tea in the evening."}))
        assert made.structured_content["created"]

        link = (await client.call_tool("link", {"from_uri": MOCHI, "to_uri": "preferences/coffee.md",
                                                 "link_type": "related_to", "weight": 0.4,
                                                 "description": "linked by an agent"})).structured_content
        assert link["link_type"] == "related_to"
        vault = Vault.open(root)
        assert [l.id for l in vault.links.of(MOCHI, "links") if l.to_uri == "preferences/coffee.md"] == [link["id"]]
        assert [l.id for l in vault.links.of("preferences/coffee.md", "backlinks") if l.from_uri == MOCHI] == [link["id"]]
        removed = (await client.call_tool("unlink", {"from_uri": MOCHI, "to_uri": "preferences/coffee.md"}))
        assert removed.structured_content["removed"] == 1 and removed.structured_content["action"]

        asked = (await client.call_tool("ask", {"question": "Which vet does Mochi see?"})).structured_content
        assert asked["uri"].startswith("report_candidates/") and (root / asked["uri"]).is_file()

        text = (await client.read_resource(f"memlink://note/{MOCHI}")).contents[0]
        assert text.text == (root / MOCHI).read_text(encoding="utf-8")

        # Errors are structured: the kind of failure and the engine's sentence naming the place.
        missing = await client.call_tool("show_note", {"uri": "entities/nobody.md"})
        assert missing.is_error and missing.structured_content["error"]["type"] == "NoteNotFound"
        assert "entities/nobody.md" in missing.structured_content["error"]["message"]
        bad = await client.call_tool("link", {"from_uri": MOCHI, "to_uri": "profile.md", "link_type": "loves"})
        assert bad.is_error and "link_type" in bad.content[0].text and "related_to" in bad.content[0].text  # the enum
        escape = await client.call_tool("show_note", {"uri": "../../etc/passwd"})
        assert escape.is_error and escape.structured_content["error"]["type"] in ("UriError", "NoteNotFound")
        assert json.loads(escape.content[0].text)["error"] == escape.structured_content["error"]
    assert [f for f in check(Vault.open(root)) if f.severity == "error"] == []


async def test_read_only_mode_offers_only_the_reading_tools_and_refuses_every_write(tmp_path):
    root = a_vault(tmp_path)
    before = files(root)
    async with server(root, "--read-only") as client:
        assert "(read-only: no tool writes)" in client.instructions
        listed = await client.list_tools()
        assert {t.name for t in listed.tools} == READS
        assert all(t.annotations.read_only_hint for t in listed.tools)
        found = (await client.call_tool("search", {"query": "celadon glaze"})).structured_content
        assert found["hits"]
        for tool, args in (("link", {"from_uri": MOCHI, "to_uri": "profile.md", "link_type": "related_to"}),
                           ("unlink", {"from_uri": "profile.md", "to_uri": MOCHI}),
                           ("add_memory", {"text": "I like rooibos."}),
                           ("ask", {"question": "Who is Mochi's vet?"}),
                           ("write_note", {"memory_type": "entity", "title": "Ineke"}),
                           ("edit_note", {"uri": MOCHI, "text": "She sleeps on the boiler."}),
                           ("delete_note", {"uri": MOCHI}),
                           ("undo", {"action": "0" * 32})):
            refused = await client.call_tool(tool, args)
            assert refused.is_error, tool
            error = refused.structured_content["error"]
            assert error["type"] == "VaultReadOnly" and "nothing was changed" in error["message"], (tool, error)
    assert files(root) == before


def test_the_mcp_server_never_imports_textual():
    code = ("import sys; import memlink_mcp.server, memlink_tui.cli; "
            "assert not [m for m in sys.modules if m.split('.')[0] == 'textual'], 'textual imported'")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert run.returncode == 0, run.stderr


async def test_arguments_out_of_bounds_are_refused_naming_them_and_escapes_are_not_stored(tmp_path):
    root = a_vault(tmp_path)
    before = files(root)
    async with server(root) as client:
        listed = {t.name: t.input_schema for t in (await client.list_tools()).tools}
        k = listed["search"]["properties"]["k"]
        assert k["minimum"] == 1 and k["maximum"] == 100  # the bounds are in the schema agents read
        for tool, args, name in (("search", {"query": "tea", "k": -1}, "k"),
                                 ("search", {"query": "tea", "k": 10**6}, "k"),
                                 ("recall", {"question": "tea", "k": 0}, "k"),
                                 ("context", {"question": "tea " * 1_000}, "question"),
                                 ("search", {"query": "tea " * 1_000_000}, "query"),
                                 ("graph_query", {"uri": MOCHI, "depth": -3}, "depth"),
                                 ("add_memory", {"text": "x" * 300_000}, "text"),
                                 ("add_memory", {"text": "I like tea.", "day": "yesterday"}, "day"),
                                 ("link", {"from_uri": MOCHI, "to_uri": "profile.md", "weight": 7}, "weight"),):
            refused = await client.call_tool(tool, args)
            assert refused.is_error, (tool, args)
            message = refused.content[0].text
            assert name in message and len(message) < 2_000, (tool, message[:300])
        assert files(root) == before  # nothing was written
        # What the disk refuses is said, with the path, as the command line says it.
        refused = await client.call_tool("write_note", {"uri": f"entities/{'b' * 300}.md", "memory_type": "entity",
                                                        "title": "Long", "text": "A long name."})
        assert refused.is_error and "File name too long" in refused.content[0].text, refused.content
        assert files(root) == before
        made = await client.call_tool("add_memory", {"text": "I like \x1b]0;owned\x07rooibos \x1b[1mtea\x1b[0m.\u202e"})
        assert not made.is_error, made.content
        for uri in made.structured_content["created"]:
            text = (root / uri).read_text(encoding="utf-8")
            assert "rooibos" in text.lower() and not any(c in text for c in "\x1b\x07\u202e"), text


async def test_every_argument_is_described_and_the_vaults_names_are_enums(tmp_path):
    root = a_vault(tmp_path)
    vault = Vault.open(root)
    async with server(root) as client:
        listed = {t.name: t.input_schema for t in (await client.list_tools()).tools}
    for tool, schema in listed.items():
        for name, prop in schema.get("properties", {}).items():
            assert len(prop.get("description") or "") > 10, (tool, name, prop)
            assert len(prop["title"]) > 2 and not re.match(r"^[A-Z]\b", prop["title"]), (tool, name, prop["title"])
    links = [t.value for t in vault.config.link_table().names()]
    assert listed["link"]["properties"]["link_type"]["anyOf"][0]["enum"] == links
    assert listed["unlink"]["properties"]["link_type"]["anyOf"][0]["enum"] == links
    assert listed["graph_query"]["properties"]["types"]["anyOf"][0]["items"]["enum"] == links
    kinds = vault.types.names()
    assert listed["write_note"]["properties"]["memory_type"]["enum"] == kinds and "entity" in kinds
    assert listed["search"]["properties"]["types"]["anyOf"][0]["items"]["enum"] == kinds
    assert set(listed["edit_note"]["properties"]["mode"]["enum"]) == {"append", "replace"}


async def test_resources_list_pages_through_every_note(tmp_path):
    from memlink_mcp.server import PAGE

    root = a_vault(tmp_path)
    notes = [e.uri for e in Vault.open(root).catalog.all()]
    assert len(notes) > PAGE  # more than one page
    async with server(root) as client:
        seen, cursor, pages = [], None, 0
        while True:
            page = await client.list_resources(cursor=cursor)
            pages += 1
            seen += [str(r.uri) for r in page.resources]
            cursor = page.next_cursor
            if cursor is None:
                break
        assert pages == -(-len(notes) // PAGE)
        assert seen == [f"memlink://note/{uri}" for uri in notes]
        text = (await client.read_resource(seen[-1])).contents[0].text
        assert text == (root / notes[-1]).read_text(encoding="utf-8")


async def test_write_edit_delete_and_undo_a_note(tmp_path):
    root = a_vault(tmp_path)
    async with server(root) as client:
        async def call(tool: str, **args: object) -> dict:
            result = await client.call_tool(tool, args)
            assert not result.is_error, (tool, result.content)
            return result.structured_content

        made = await call("write_note", memory_type="entity", title="Ineke Bos",
                          text="Neighbour; feeds Mochi when Lena and Tom travel.")
        uri = made["uri"]
        assert uri == "entities/ineke-bos.md" and "feeds Mochi" in (root / uri).read_text(encoding="utf-8")
        again = await client.call_tool("write_note", {"memory_type": "entity", "title": "Ineke Bos", "text": "x"})
        assert again.is_error and "exists already" in again.structured_content["error"]["message"]
        assert (await call("recent", limit=3))["notes"][0]["uri"] == uri
        assert [h["uri"] for h in (await call("search", query="Ineke Bos neighbour"))["hits"]][:1] == [uri]
        event = await call("write_note", memory_type="event", title="Key handover", text="Ineke got the spare key.",
                           day="2026-10-03")  # (a type with a date: the day given)
        assert event["uri"] == "events/2026/10/03/key-handover.md"
        await call("undo", action=event["action"])
        twice = await client.call_tool("undo", {"action": event["action"]})
        assert twice.is_error and "was undone already" in twice.structured_content["error"]["message"]

        # Text a person wrote below the generated view survives every edit.
        path = root / uri
        path.write_text(path.read_text(encoding="utf-8") + "\nMy own note: she has a key.\n", encoding="utf-8")
        appended = await call("edit_note", uri=uri, text="She also waters the plants.")
        shown = await call("show_note", uri=uri)
        assert shown["fields"]["content"] == ("Neighbour; feeds Mochi when Lena and Tom travel.\n\n"
                                              "She also waters the plants.")
        before = path.read_bytes()
        stale = await client.call_tool("edit_note", {"uri": uri, "text": "Moved away.", "mode": "replace",
                                                     "old_text": "Neighbour; feeds Mochi when Lena and Tom travel."})
        assert stale.is_error and "old_text does not match" in stale.structured_content["error"]["message"]
        empty = await client.call_tool("edit_note", {"uri": uri, "text": " \x1b[0m "})
        assert empty.is_error and "nothing to append" in empty.structured_content["error"]["message"]
        assert path.read_bytes() == before  # nothing changed
        replaced = await call("edit_note", uri=uri, text="Neighbour at number 12.", mode="replace",
                              old_text=shown["fields"]["content"])
        text = path.read_text(encoding="utf-8")
        assert "Neighbour at number 12." in text and "waters" not in text and "My own note: she has a key." in text

        # Deleting takes the note and its links; undo brings both back as they were.
        kept = files(root)
        backlinks = [l["from_uri"] for l in (await call("show_note", uri=MOCHI))["backlinks"]]
        assert backlinks
        gone = await call("delete_note", uri=MOCHI)
        assert gone["links_removed"] >= len(backlinks) and not (root / MOCHI).exists()
        missing = await client.call_tool("show_note", {"uri": MOCHI})
        assert missing.is_error
        undone = memlink("undo", vault=root)  # the command line's undo, as the tool's: the same action log
        assert undone.returncode == 0 and "delete_note" in undone.stdout, undone.stdout + undone.stderr
        assert files(root) == kept
        assert [l["from_uri"] for l in (await call("show_note", uri=MOCHI))["backlinks"]] == backlinks
        # Undo goes back one action at a time: the replace, then the append; the note itself
        # is not taken back, as a person wrote in it after it was made.
        await call("undo", action=replaced["action"])
        assert "waters the plants" in path.read_text(encoding="utf-8")
        await call("undo", action=appended["action"])
        refused = await client.call_tool("undo", {"action": made["action"]})
        assert refused.is_error and "changed since the write_note action" in refused.structured_content["error"]["message"]
        assert path.read_text(encoding="utf-8").endswith("My own note: she has a key.\n")
    assert [f for f in check(Vault.open(root)) if f.severity == "error"] == []


async def test_undo_takes_back_only_the_clients_own_write_while_it_is_the_last_action(tmp_path):
    root = a_vault(tmp_path)
    async with server(root) as client:
        made = (await client.call_tool("write_note", {"memory_type": "entity", "title": "Ineke Bos"})).structured_content
        # The user moves a note afterwards: the client's undo must not reverse that move.
        moved = memlink("mv", MOCHI, "entities/mochi-cat.md", vault=root)
        assert moved.returncode == 0, moved.stdout + moved.stderr
        after_move = files(root)
        refused = await client.call_tool("undo", {"action": made["action"]})
        assert refused.is_error
        message = refused.structured_content["error"]["message"]
        assert "not the last action" in message and "move" in message and "nothing was changed" in message
        users = next(r["id"] for r in reversed(read_jsonl(root / ACTION_LOG)) if r.get("action") == "move")
        assert users not in message  # (the user's action is not named by its id)
        unknown = await client.call_tool("undo", {"action": "0" * 32})  # an id none of its writes returned: refused
        message = unknown.structured_content["error"]["message"]
        assert unknown.is_error and "not an action a write of this session returned" in message
        assert "nothing was changed" in message
        # The user's own action, whatever its id: never the client's to undo.
        theirs = await client.call_tool("undo", {"action": users})
        assert theirs.is_error and "not an action a write of this session returned" in theirs.structured_content["error"]["message"]
        assert files(root) == after_move
        # Its own move, the last action, it may take back.
        mine = (await client.call_tool("move", {"old_uri": "entities/mochi-cat.md", "new_uri": MOCHI})).structured_content
        done = await client.call_tool("undo", {"action": mine["action"]})
        assert not done.is_error, done.content
        assert (root / "entities/mochi-cat.md").read_bytes() == after_move["entities/mochi-cat.md"]
        assert not (root / MOCHI).exists()


async def test_write_note_is_refused_where_memlink_keeps_no_notes(tmp_path):
    root = a_vault(tmp_path)
    before = files(root)
    async with server(root) as client:
        for uri in ("dashboards/x.md", "sessions/x.md", "memory_types/x.md", "README.md", "DREAMS.md", "notes/x.txt"):
            refused = await client.call_tool("write_note", {"memory_type": "entity", "title": "Ineke", "uri": uri})
            assert refused.is_error, uri
            message = refused.structured_content["error"]["message"]
            assert uri in message and "nothing was changed" in message, message
        made = await client.call_tool("write_note", {"memory_type": "entity", "title": "Ineke", "uri": "people/./ineke.md"})
        assert not made.is_error and made.structured_content["uri"] == "people/ineke.md"
    assert {k: v for k, v in files(root).items() if not k.startswith("people/")} == before


def test_an_edit_or_a_new_note_is_checked_under_the_write_lock_so_a_change_made_meanwhile_is_kept(tmp_path, monkeypatch):
    """What another writer (a person's editor, the app) changes while an agent's call
    waits for the vault's lock is read by that call, never written over."""
    from memlink_mcp.server import MemlinkTools

    root = a_vault(tmp_path)
    vault = Vault.open(root)
    tools = MemlinkTools(vault)
    opened = type(vault).transaction

    def meanwhile(change):
        def transaction(self, *args, **kwargs):
            change()  # (made while the call waited for the lock)
            monkeypatch.setattr(type(vault), "transaction", opened)
            return opened(self, *args, **kwargs)
        monkeypatch.setattr(type(vault), "transaction", transaction)

    def persons_line():
        note = root / MOCHI
        note.write_text(note.read_text(encoding="utf-8").replace("content: ", "content: The person's line. ", 1),
                        encoding="utf-8")

    meanwhile(persons_line)
    tools.edit_note(MOCHI, "The agent's line.")
    content = Vault.open(root).read_note(MOCHI).fields["content"]
    assert "The person's line." in content and "The agent's line." in content
    meanwhile(lambda: (root / "entities/garden.md").write_text("my garden\n", encoding="utf-8"))
    refused = tools.guarded(tools.write_note)("entity", "Garden", uri="entities/garden.md")
    message = refused.structured_content["error"]["message"]
    assert refused.is_error and "is there already, a file that is not a note" in message and "no YAML frontmatter" in message
    assert (root / "entities/garden.md").read_text(encoding="utf-8") == "my garden\n"


def test_writes_refuse_what_they_would_ignore_and_keep_text_out_of_paths_and_links(tmp_path):
    from memlink_mcp.server import MemlinkTools

    root = a_vault(tmp_path)
    tools = MemlinkTools(Vault.open(root))
    before = files(root)
    for call, says in ((lambda: tools.edit_note(MOCHI, "x", mode="append", old_text="wrong"), "old_text is for mode replace"),
                       (lambda: tools.recall("tea", session="../../etc/passwd"), "bad session id"),
                       (lambda: tools.add_memory("I like tea.", day="2026-13-45"), "day '2026-13-45' is not a day"),
                       (lambda: tools.write_note("entity", "Odd", uri="entities/haven\x1b[31mlink\u202eexe.md"),
                        "no control or direction characters"),
                       (lambda: tools.write_note("entity", "Odd", uri="entities/ spaced .md"), "no space at the start"),
                       (lambda: tools.move(MOCHI, "entities/mo\nchi.md"), "no control or direction characters")):
        refused = tools.guarded(call)()
        assert refused.is_error and says in refused.structured_content["error"]["message"], refused.content
        assert "\x1b" not in refused.structured_content["error"]["message"]
    assert files(root) == before
    for name in ("entities/👩\u200d💻 dev.md", "entities/می\u200cخواهم.md", "entities/a\u00a0b.md"):  # (joiners, a no-break space)
        assert tools.guarded(tools.write_note)("entity", "Fine", uri=name)["uri"] == name
    linked = tools.link(MOCHI, "entities/hangzhou.md", "related_to", description="from\nthe \x1b]0;owned\x07cat\u202e")
    assert linked["description"] == "from the cat"
    asked = tools.ask("Where \x1b[2Jis\u202e Mochi?", requirement="\x07")
    text = (root / asked["uri"]).read_text(encoding="utf-8")
    assert "Where is Mochi?" in text and not any(c in text for c in "\x1b\x07\u202e")
    quiet = tools.add_memory("Ok.")  # (nothing the rules take as a memory)
    assert quiet["action"] is None and any("found nothing to remember" in p for p in quiet["problems"])


async def test_no_answer_holds_an_escape_sequence_a_control_or_a_bidi_override(tmp_path):
    """A note, a chat, a link's description or the agent's own argument may hold them: every
    string an answer (or an error) carries is printable, as the command line prints it."""
    from test_hostile_text import HOSTILE, hostile_vault, unsafe

    root = tmp_path / "vault"
    vault = hostile_vault(root)
    alpha = next(e.uri for e in vault.catalog.all() if e.title.startswith("Alpha"))
    vault.close()
    calls = [("show_note", {"uri": alpha}), ("search", {"query": "Alpha harbour crane"}),
             ("context", {"question": "Alpha harbour crane"}), ("recall", {"question": "Paint the fence"}),
             ("recent", {}), ("graph_query", {"uri": alpha}), ("search", {"query": f"harbour {HOSTILE}"}),
             ("show_note", {"uri": f"entities/{HOSTILE}.md"})]
    async with server(root) as client:
        for tool, args in calls:
            answer = await client.call_tool(tool, args)
            said = [answer.structured_content] + [c.text for c in answer.content]
            said += [json.loads(t) for t in said[1:] if t.startswith(("{", "["))]  # (a JSON text: its strings)
            assert [s for s in strings(said) if unsafe(s)] == [], (tool, args)
        # The text as shown is the text to replace.
        shown = (await client.call_tool("show_note", {"uri": alpha})).structured_content["fields"]["content"]
        replaced = await client.call_tool("edit_note", {"uri": alpha, "mode": "replace", "old_text": shown,
                                                        "text": "Alpha harbour crane, cleaned."})
        assert not replaced.is_error and "control or bidi characters" in replaced.structured_content["replaced_unshown"]


def strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in strings(k) + strings(v)]
    return [s for v in value for s in strings(v)] if isinstance(value, list) else []
