"""`ask`: file a research question for the next dream (docs/DESIGN.md, *Dream*)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..model.text import printable

if TYPE_CHECKING:
    from ..storage.vault import Vault


def ask(vault: Vault, question: str, requirement: str | None = None) -> str:
    """File ``question`` as a pending report_candidate and return its uri. A question is
    identified by its note's file name (the slug of its words), so asking it again
    returns the same uri and writes nothing, whatever its status by now."""
    question = " ".join(printable(question).split())  # (text: terminal escapes and controls left out)
    fields: dict[str, object] = {"question": question, "status": "pending"}
    if requirement and printable(requirement).strip():
        fields["user_requirement"] = printable(requirement).strip()
    schema = vault.schema("report_candidate")
    uri = schema.note_uri(schema.validate_fields(fields, complete=True))  # an empty question fails here
    if vault.exists(uri):
        return uri
    return vault.write_note("report_candidate", fields).uri
