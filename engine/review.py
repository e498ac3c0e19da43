"""Reviewing a contradiction (a `contradicts` link between A and B):

- keep A: B is superseded — A evolved_from B, B gets `valid_until` and `superseded_by`
  in its frontmatter; nothing is deleted. keep B: the same the other way.
- merge: A's content becomes the merged text, B is superseded by A.
- dismiss: not a real conflict — the link becomes related_to.
- research: a report_candidate asks how to reconcile them.

Every action snapshots the files it touches first; `undo` puts the last action back,
unless those files changed since."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass

from .atomic import atomic_write_text
from .errors import MemlinkError
from .journal import DeleteFile, WriteFile, WriteSidecar, file_hash
from .links import SIDECAR
from .notes import serialize_note
from .uris import uri_dir

ACTIONS = ("keep-a", "keep-b", "merge", "dismiss", "research")


class ReviewError(MemlinkError):
    pass


@dataclass
class ReviewResult:
    action: str
    message: str
    touched: list[str]


def _files(vault, uris: list[str]) -> list[str]:
    """Paths (vault-relative) an action may change: the notes and their folders' sidecars."""
    out = []
    for uri in uris:
        out.append(uri)
        folder = uri_dir(uri)
        out.append(f"{folder}/{SIDECAR}" if folder else SIDECAR)
    return sorted(set(out))


def _read(vault, rel: str) -> str | None:
    path = vault.root / rel
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def _supersede(vault, old_uri: str, new_uri: str, today: str) -> None:
    note = vault.read_note(old_uri)
    note.extra = {**note.extra, "valid_until": today, "superseded_by": new_uri}
    with vault.writing():
        vault._commit([WriteFile(uri=old_uri, text=serialize_note(note, vault.schema(note.memory_type)),
                                 before=file_hash(vault.path(old_uri)))], links_changed=False)
    vault._catalog = None  # the catalog's superseded flag follows on the next sync


def review(vault, a: str, b: str, action: str, *, text: str | None = None, today: dt.date | None = None) -> ReviewResult:
    if action not in ACTIONS:
        raise ReviewError(f"unknown action {action!r} (one of: {', '.join(ACTIONS)})")
    day = (today or dt.date.today()).isoformat()
    pair = [l for l in vault.get_file_links(a, "links") if l.to_uri == b and l.link_type.value == "contradicts"]
    pair += [l for l in vault.get_file_links(b, "links") if l.to_uri == a and l.link_type.value == "contradicts"]
    if not pair:
        raise ReviewError(f"no contradicts link between {a} and {b}")
    link = pair[0]
    title_a, title_b = vault.title(vault.read_note(a)), vault.title(vault.read_note(b))
    question = f"How do {title_a} and {title_b} fit together?"
    candidate = vault.schema("report_candidate").note_uri({"question": question}) if action == "research" else None
    files = _files(vault, [a, b] + ([candidate] if candidate else []))
    before = {rel: _read(vault, rel) for rel in files}

    if action in ("keep-a", "keep-b", "merge"):
        keep, drop = (a, b) if action in ("keep-a", "merge") else (b, a)
        if action == "merge":
            if not text or not text.strip():
                raise ReviewError("merge needs the merged text")
            schema = vault.schema(vault.read_note(keep).memory_type)
            vault.write_note(schema.memory_type, {schema.text_field: text.strip()}, uri=keep)
        vault.unlink(link.from_uri, link.to_uri, "contradicts")
        vault.link(keep, drop, "evolved_from", weight=link.weight, description=f"review {day}: kept over the contradicting note")
        _supersede(vault, drop, keep, day)
        message = f"kept {keep}; {drop} is superseded (valid until {day})"
    elif action == "dismiss":
        vault.unlink(link.from_uri, link.to_uri, "contradicts")
        vault.link(link.from_uri, link.to_uri, "related_to", weight=link.weight, match_text=link.match_text,
                   description=f"review {day}: not a contradiction — {link.description}".strip(" —"))
        message = "dismissed: the link is now related_to"
    else:
        vault.write_note("report_candidate", {"question": question, "status": "pending",
                                              "user_requirement": f"Reconcile: {link.description}".strip()})
        vault.link(candidate, a, "related_to", description="contradiction to research")
        vault.link(candidate, b, "related_to", description="contradiction to research")
        message = f"research question added: {candidate}"

    after = {rel: _hash(_read(vault, rel)) for rel in files}
    entry = {"at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "action": action, "a": a, "b": b,
             "message": message, "before": before, "after": after}
    log = vault.state_dir / "review" / "actions.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry, ensure_ascii=False) + "\n")
    return ReviewResult(action, message, files)


def _hash(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode("utf-8")).hexdigest()


def undo(vault) -> str:
    """Reverse the last review action, if its files are as the action left them."""
    log = vault.state_dir / "review" / "actions.jsonl"
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    if not lines:
        raise ReviewError("nothing to undo")
    entry = json.loads(lines[-1])
    ops = []
    for rel, text in entry["before"].items():
        now = _hash(_read(vault, rel))
        if now != entry["after"][rel]:
            raise ReviewError(f"cannot undo: {rel} changed since the {entry['action']} action")
        current = file_hash(vault.root / rel)
        if rel.endswith(SIDECAR):
            folder = rel[: -len(SIDECAR)].rstrip("/")
            ops.append(WriteSidecar(folder=folder, text=text, before=current))
        elif text is None:
            if current is not None:
                ops.append(DeleteFile(uri=rel, before=current))
        else:
            ops.append(WriteFile(uri=rel, text=text, before=current))
    with vault.writing():  # all files back together, or none (journaled)
        vault._commit(ops, links_changed=True)
    vault._catalog = None
    vault.links_version += 1
    atomic_write_text(log, "".join(line + "\n" for line in lines[:-1]))
    return f"undid {entry['action']} on {entry['a']} / {entry['b']}"
