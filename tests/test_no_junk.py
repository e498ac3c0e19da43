"""Memories come from prose only: code, URLs, file and image names make no event or
preference; a preference or event is a whole clause with a whole title; an imported
file's dates come from its text, name or frontmatter, never from the day it is imported."""

from __future__ import annotations

import shutil
from pathlib import Path

from engine.extract.batch import ingest
from engine.extract.rules import RulesExtractor

RULES = RulesExtractor()
MINI = Path(__file__).parent / "data" / "obsidian-mini" / "vault"

JUNK = """# Setup notes

```bash
# I like rm -rf on 2024-01-02, it worked
git commit -m "fixed the bug on 2024-03-01"
```

Run `I prefer tabs over spaces` to check it.
Screenshot: ![I love dark mode](images/2024-05-06-we-shipped-dark-mode.png) and ![[2024-05-07 launched.png]]
Download it from https://example.com/2024-05-06/we-released-it.html when it is ready.
The file report-2024-02-03-released.pdf is attached.
"""


def created(vault, memory_type: str) -> list[str]:
    return [e.uri for e in vault.catalog.all(memory_type)]


def test_the_mini_vault_gives_no_event_or_preference(vault, tmp_path):
    shutil.copytree(MINI, tmp_path / "mini")
    ingest(vault, tmp_path / "mini", extractor=RULES)
    assert len(created(vault, "source")) >= 20
    assert created(vault, "event") == [] and created(vault, "preference") == []


def test_code_urls_and_file_names_make_no_memory(vault, tmp_path):
    (tmp_path / "setup.md").write_text(JUNK, encoding="utf-8")
    ingest(vault, tmp_path / "setup.md", extractor=RULES)
    assert created(vault, "event") == [] and created(vault, "preference") == []


def test_a_preference_is_a_whole_clause_with_a_whole_title(vault, tmp_path):
    (tmp_path / "tea.md").write_text(
        "# Tea\n\nI prefer oolong tea over green tea in the mornings.\n\nHonestly I really like the way\n"
        "the studio keeps its glazes.\n\n- I like\n", encoding="utf-8")
    ingest(vault, tmp_path / "tea.md", extractor=RULES)
    topics = sorted(vault.read_note(u).fields["topic"] for u in created(vault, "preference"))
    assert topics == ["Oolong tea over green tea", "Way the studio keeps its glazes"]


def test_a_preference_s_title_ends_where_a_chat_runs_on_into_a_new_clause(vault, tmp_path):
    (tmp_path / "chat.md").write_text(
        "Me however, I love skiing it's my favorite sport\n\nI enjoy hiking, it relaxes me\n\n"
        "I like going to concerts they are so fun\n\nI like tea, coffee and cake.\n\n"
        # one clause: a relative clause, or a "when …" topic
        "I like movies that are scary.\n\nI don't like movies that are sad.\n\nI enjoy places where you can swim.\n\n"
        "I like when it is sunny.\n", encoding="utf-8")
    ingest(vault, tmp_path / "chat.md", extractor=RULES)
    topics = sorted(vault.read_note(u).fields["topic"] for u in created(vault, "preference"))
    assert topics == ["Going to concerts", "Hiking", "It is sunny", "Movies that are sad", "Movies that are scary",
                      "Places where you can swim", "Skiing", "Tea, coffee and cake"]


def test_an_imported_journal_page_is_dated_by_its_name_or_frontmatter_not_the_import_day(vault, tmp_path):
    (tmp_path / "2024-07-17.md").write_text("Today I wrote the importer for the garden project.\n", encoding="utf-8")
    (tmp_path / "trip.md").write_text("---\ndate: 2023-03-04\n---\nYesterday we shipped the kiln release.\n",
                                      encoding="utf-8")
    (tmp_path / "undated.md").write_text("Today I painted the fence by the shed.\n", encoding="utf-8")
    ingest(vault, tmp_path, extractor=RULES)
    days = {vault.read_note(u).fields["event_name"]: vault.read_note(u).fields["date"] for u in created(vault, "event")}
    assert days == {"Today I wrote the importer for the garden": "2024-07-17",
                    "Yesterday we shipped the kiln release": "2023-03-03"}


def test_a_person_named_in_the_other_order_is_the_one_a_note_names(vault, tmp_path):
    """"Jun Wang" is the Wang Jun (王俊) an entity names: no second person."""
    jun = vault.write_note("entity", {"name": "王俊", "aliases": ["Wang Jun", "Jun"], "kind": "person",
                                      "content": "Data engineer at Havenlink."}).uri
    (tmp_path / "2026-11-03.md").write_text("Yesterday we fired the celadon tiles at the studio with Jun Wang.\n",
                                     encoding="utf-8")
    ingest(vault, tmp_path / "2026-11-03.md", extractor=RULES)
    people = [e.uri for e in vault.catalog.all("entity")]
    assert people == [jun]
