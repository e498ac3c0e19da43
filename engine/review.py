"""Reviewing a contradiction (a `contradicts` link between A and B):

- keep A: B is superseded — A evolved_from B, B gets `valid_until` and `superseded_by`
  in its frontmatter; nothing is deleted. keep B: the same the other way.
- merge: A's content becomes the merged text, B is superseded by A.
- dismiss: not a real conflict — the link becomes related_to.
- research: a report_candidate asks how to reconcile them.

Every action is one unit of work (engine.transaction) that also appends its record,
with a snapshot of the files it touches, to the action log; `undo` puts the last action
back, unless those files changed since, and records that in the same unit of work."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import MemlinkError
from .jsonl import read_jsonl
from .transaction import sidecar_rel, text_hash
from .uris import uri_dir

if TYPE_CHECKING:
    from .transaction import Transaction
    from .vault import Vault

ACTIONS = ("keep-a", "keep-b", "merge", "dismiss", "research")
ACTION_LOG = ".memlink/review/actions.jsonl"  # vault-relative: a journal op appends to it


class ReviewError(MemlinkError):
    pass


@dataclass
class ReviewResult:
    action: str
    message: str
    touched: list[str]


def _files(uris: list[str]) -> list[str]:
    """Paths (vault-relative) an action may change: the notes and their folders' sidecars."""
    out = []
    for uri in uris:
        out.append(uri)
        out.append(sidecar_rel(uri_dir(uri)))
    return sorted(set(out))


def review(vault: Vault, a: str, b: str, action: str, *, text: str | None = None,
           today: dt.date | None = None) -> ReviewResult:
    """Apply one review action and record it (with what undo needs) in the action log,
    all in one unit of work."""
    if action not in ACTIONS:
        raise ReviewError(f"unknown action {action!r} (one of: {', '.join(ACTIONS)})")
    day = (today or dt.date.today()).isoformat()
    with vault.transaction() as tx:
        table = vault.config.link_table()  # link types by role (docs/DESIGN.md, "Link types")
        conflict, supersedes, default = table.role("conflict"), table.role("supersedes"), table.role("default")
        pair = [l for l in vault.get_file_links(a, "links") if l.to_uri == b and l.link_type is conflict]
        pair += [l for l in vault.get_file_links(b, "links") if l.to_uri == a and l.link_type is conflict]
        if not pair:
            raise ReviewError(f"no contradicts link between {a} and {b}")
        link = pair[0]
        title_a, title_b = vault.title(vault.read_note(a)), vault.title(vault.read_note(b))
        question = f"How do {title_a} and {title_b} fit together?"
        candidate = vault.schema("report_candidate").note_uri({"question": question}) if action == "research" else None
        files = _files([a, b] + ([candidate] if candidate else []))
        before = {rel: tx.text_after(rel) for rel in files}

        if action in ("keep-a", "keep-b", "merge"):
            keep, drop = (a, b) if action in ("keep-a", "merge") else (b, a)
            if action == "merge":
                if not text or not text.strip():
                    raise ReviewError("merge needs the merged text")
                schema = vault.schema(vault.read_note(keep).memory_type)
                vault.write_note(schema.memory_type, {schema.text_field: text.strip()}, uri=keep)
            vault.unlink(link.from_uri, link.to_uri, conflict)
            vault.link(keep, drop, supersedes, weight=link.weight, description=f"review {day}: kept over the contradicting note")
            vault.supersede(drop, keep, day)
            message = f"kept {keep}; {drop} is superseded (valid until {day})"
        elif action == "dismiss":
            vault.unlink(link.from_uri, link.to_uri, conflict)
            vault.link(link.from_uri, link.to_uri, default, weight=link.weight, match_text=link.match_text,
                       description=f"review {day}: not a contradiction — {link.description}".strip(" —"))
            message = "dismissed: the link is now related_to"
        else:
            assert candidate is not None
            vault.write_note("report_candidate", {"question": question, "status": "pending",
                                                  "user_requirement": f"Reconcile: {link.description}".strip()})
            vault.link(candidate, a, default, description="contradiction to research")
            vault.link(candidate, b, default, description="contradiction to research")
            message = f"research question added: {candidate}"

        after = {rel: text_hash(tx.text_after(rel)) for rel in files}
        tx.append(ACTION_LOG, {"at": _now(), "action": action, "a": a, "b": b, "message": message,
                               "before": before, "after": after})
    return ReviewResult(action, message, files)


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _entry_id(entry: dict[str, Any]) -> str:
    """An action's id; entries written before actions had ids are named by their content."""
    if isinstance(entry.get("id"), str):
        return entry["id"]
    return "legacy-" + hashlib.sha256(json.dumps(entry, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()[:16]


def last_action(vault: Vault) -> dict[str, Any] | None:
    """The latest action in the log that has not been undone (an undo is a later record
    naming the action: the log is only ever appended to; docs/DESIGN.md, "Units of work")."""
    records = read_jsonl(vault.root / ACTION_LOG, strict=False)  # a torn line is a lost hint, not a stop
    undone = {r["undo"] for r in records if isinstance(r.get("undo"), str)}
    for entry in reversed(records):
        if "action" in entry and isinstance(entry.get("before"), dict) and _entry_id(entry) not in undone:
            return entry
    return None


def undo(vault: Vault) -> str:
    """Reverse the last review action, if its files are as the action left them: the
    files and the undo record land together."""
    with vault.transaction() as tx:
        entry = last_action(vault)
        if entry is None:
            raise ReviewError("nothing to undo")
        _restore(tx, entry)
        tx.append(ACTION_LOG, {"at": _now(), "undo": _entry_id(entry)})
    return f"undid {entry['action']} on {entry['a']} / {entry['b']}"


def _restore(tx: Transaction, entry: dict[str, Any]) -> None:
    after = entry.get("after") or {}
    for rel in entry["before"]:
        if text_hash(tx.text_after(rel)) != after.get(rel):
            raise ReviewError(f"cannot undo: {rel} changed since the {entry['action']} action")
    for rel, text in entry["before"].items():
        tx.restore(rel, text)
