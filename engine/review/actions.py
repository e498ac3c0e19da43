"""Reviewing a contradiction (a `contradicts` link between A and B; docs/DESIGN.md,
"Units of work"):

- keep A: B's disputed claim is superseded — A evolved_from B, and B records the claim
  (its field and lines, `valid_until`, `superseded_by`) under `superseded_claims`. Only
  when the claim is the whole note does B get `valid_until`/`superseded_by` itself (and so
  rank lower). Nothing is deleted. keep B: the same the other way.
- merge: A (the note the user chose to keep) takes the merged text and evolved_from B,
  the new link keeping the disputed lines of B (and the anchor text, if A still has it);
  B is superseded by A only when both are of the same memory type; every link into A
  that is not the disputed one is kept (re-anchored to the whole field when its lines
  are gone).
- dismiss: not a real conflict — the link becomes related_to.
- research: a report_candidate asks how to reconcile them.

`preview` stages an action and describes what it would change (a `Plan`: notes, fields
and links on both sides) without writing; `review` stages the same action, checks it
against the plan the user saw, and commits it with its action-log record (the texts of
the notes it touches, and each link record it changes as it was and as it left it) as one
unit of work; `undo` puts the last action back, unless those changed since, in one unit
of work too."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from ..errors import MemlinkError, NoteNotFound
from ..model.lineranges import format_ranges, parse_ranges, segments
from ..model.links import StoredLink
from ..model.notes import parse_note, serialize_note
from ..model.uris import uri_dir
from ..storage.journal import DeleteFile, WriteFile, WriteSidecar
from ..storage.jsonl import keep_newest, read_jsonl
from ..storage.sidecars import PutLink, RemoveLegacy, RemoveLink, folder_text, read_folder, rewritten_whole
from ..storage.transaction import sidecar_rel, text_hash
from ..storage.writes import PERSON_LINKS

if TYPE_CHECKING:
    from ..storage.transaction import Transaction
    from ..storage.vault import Vault

ACTIONS = ("keep-a", "keep-b", "merge", "dismiss", "research")
PERSONS_ACTIONS = ("link", "update-link", "unlink", "move")  # the actions that record a person's links (PERSON_LINKS)
ACTION_LOG = ".memlink/review/actions.jsonl"  # vault-relative: a journal op appends to it
# Bytes of undo history (~900 actions, each with the texts it replaced); past it the log
# keeps its newer half.
UNDO_HISTORY_MAX = 4_000_000


class ReviewError(MemlinkError):
    pass


class FieldChange(BaseModel):
    name: str  # a field, or a frontmatter key outside the fields (valid_until, superseded_claims…)
    before: Any = None
    after: Any = None


class NoteChange(BaseModel):
    uri: str
    change: Literal["create", "edit", "delete"]
    fields: list[FieldChange] = []


class LinkChange(BaseModel):
    change: Literal["add", "remove", "edit"]
    id: str  # "new" for a link the action adds (its id is made when it is written)
    link_type: str
    from_uri: str
    to_uri: str
    t_field: str | None = None
    t_line_ranges: str | None = None
    sides: list[str]  # the sidecar files this change writes (both sides for a whole link)
    before: dict[str, Any] | None = None  # for an edit: the attributes that change, as they were
    after: dict[str, Any] | None = None


class Plan(BaseModel):
    """What one review action will change, computed by staging it and not committing."""

    action: str
    a: str
    b: str
    message: str
    notes: list[NoteChange]
    links: list[LinkChange]
    files: list[str]  # vault-relative files written (notes and sidecars)
    basis: dict[str, str | None]  # hashes of A and B as the plan saw them: a later edit voids it

    def lines(self) -> list[str]:
        """The plan for a person to read before confirming."""
        out = [f"{self.action}: {self.message}"]
        for n in self.notes:
            # (a note whose fields stay as they were changes in its generated Links block alone)
            out.append(f"  note {n.change}: {n.uri}{' (its Links block)' if n.change == 'edit' and not n.fields else ''}")
            for f in n.fields:
                out.append(f"    {f.name}: {_short(f.before)} -> {_short(f.after)}")
        for link in self.links:
            where = f" [{link.t_field} {link.t_line_ranges}]" if link.t_line_ranges else ""
            out.append(f"  link {link.change}: {link.from_uri} -{link.link_type}-> {link.to_uri}{where}")
            if link.change == "edit" and link.before is not None:
                out.append(f"    {_short(link.before)} -> {_short(link.after)}")
            out.append(f"    sides: {', '.join(link.sides)}")
        return out


@dataclass
class ReviewResult:
    action: str
    message: str
    touched: list[str]
    plan: Plan | None = None


class _Preview(Exception):
    """Raised inside the transaction so a preview commits nothing."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan


def preview(vault: Vault, a: str, b: str, action: str, text: str | None = None, *,
            today: dt.date | None = None) -> Plan:
    """What ``review`` with the same arguments would change, without writing anything."""
    try:
        with vault.transaction() as tx:
            raise _Preview(_stage(vault, tx, a, b, action, text, today))
    except _Preview as done:
        return done.plan
    raise AssertionError("unreachable")  # pragma: no cover


def review(vault: Vault, a: str, b: str, action: str, *, text: str | None = None,
           today: dt.date | None = None, expect: Plan | None = None) -> ReviewResult:
    """Apply one review action and record it (with what undo needs) in the action log,
    all in one unit of work. With ``expect`` (the plan the user confirmed) nothing is
    written unless the action would change exactly that."""
    with vault.transaction() as tx:
        plan = _stage(vault, tx, a, b, action, text, today)
        if expect is not None and plan != expect:
            raise ReviewError("the notes changed since the preview; look at the new preview first")
        log_action(vault, tx, action, a, b, plan.message)
    return ReviewResult(action, plan.message, plan.files, plan)


def log_action(vault: Vault, tx: Transaction, action: str, a: str, b: str, message: str) -> str:
    """Record what ``tx`` staged as an undoable action on notes ``a`` and ``b``, in the
    same unit of work (``undo`` puts it back); returns the action's id. Staged from a clean
    unit of work, so the files on disk are what the action replaces. The two notes are
    kept even when unchanged: undo refuses once they were edited since, as the decision
    was made on their texts. A file's text is kept as the part the action replaced
    (``edits``: a thousand Links blocks naming a moved note are a thousand lines, not a
    thousand notes), or whole (``before``) when it was made or deleted. Links are kept one
    record at a time (a sidecar can hold tens of thousands), with their place in a sidecar
    small enough to be rewritten whole, so undo puts the file back as it was; a legacy
    entry the action touched keeps its whole sidecar."""
    files = _touched(tx)
    whole = sorted({sidecar_rel(op.folder) for op in tx.ops() if isinstance(op, RemoveLegacy)})
    before: dict[str, str | None] = {}
    edits: dict[str, list] = {}
    after: dict[str, str | None] = {}
    for rel in sorted({f for f in files if not _is_sidecar(f)} | {a, b} | set(whole)):
        if rel in whole:
            folder = rel[: -len(sidecar_rel(""))].rstrip("/")
            old = folder_text(vault.root, vault.resolve.folder(folder), folder)
        else:
            old = _disk_text(vault, rel)
        new = tx.text_after(rel)
        after[rel] = text_hash(new)
        if old is None or new is None:
            before[rel] = old
        else:
            edits[rel] = _edit(old, new)
    # The folders it makes files in that are not there yet: undo removes them, once empty.
    made = [rel for rel, text in before.items() if text is None and after[rel] is not None]
    folders = sorted({str(f) for rel in made for f in PurePosixPath(rel).parents if str(f) != "." and not vault.path(str(f)).exists()},
                     key=len, reverse=True)
    keep_newest(vault.root / ACTION_LOG, UNDO_HISTORY_MAX)  # (under the vault lock, as every write of the log)
    row = tx.append(ACTION_LOG, {"at": _now(), "action": action, "a": a, "b": b, "message": message, "before": before,
                                 "edits": edits, "after": after, "links": _link_records(vault, tx, whole),
                                 **({"folders": folders} if folders else {})})
    return str(row["id"])


def _edit(old: str, new: str) -> list:
    """``[start, end, replaced]``: ``old`` is ``new[:start] + replaced + new[end:]``."""
    start, most = 0, min(len(old), len(new))
    while start < most:  # the longest common head, by halves (each comparison is one C call)
        mid = (start + most + 1) // 2
        if old[:mid] == new[:mid]:
            start = mid
        else:
            most = mid - 1
    tail, most = 0, min(len(old), len(new)) - start
    while tail < most:
        mid = (tail + most + 1) // 2
        if old[len(old) - mid:] == new[len(new) - mid:]:
            tail = mid
        else:
            most = mid - 1
    return [start, len(new) - tail, old[start:len(old) - tail]]


def contradictions_between(vault: Vault, a: str, b: str) -> list[StoredLink]:
    """The links that say ``a`` and ``b`` contradict each other (the table's conflict
    role), either way: what a review resolves."""
    conflict = vault.config.link_table().role("conflict")
    return [l for x, y in ((a, b), (b, a)) for l in vault.links.of(x, "links") if l.to_uri == y and l.link_type is conflict]


def _stage(vault: Vault, tx: Transaction, a: str, b: str, action: str, text: str | None,
           today: dt.date | None) -> Plan:
    """Stage the action in ``tx`` and describe it."""
    if action not in ACTIONS:
        raise ReviewError(f"unknown action {action!r} (one of: {', '.join(ACTIONS)})")
    if tx.ops():
        raise ReviewError("a review action runs in its own unit of work")
    day = (today or dt.date.today()).isoformat()
    table = vault.config.link_table()  # link types by role (docs/DESIGN.md, "Link types")
    conflict, supersedes, default = table.role("conflict"), table.role("supersedes"), table.role("default")
    pair = contradictions_between(vault, a, b)
    if not pair:
        for uri in (a, b):
            if not vault.exists(uri):
                raise NoteNotFound(f"no note at {uri}; nothing was changed")
        raise ReviewError(f"no contradicts link between {a} and {b}")
    link = pair[0]

    if action == "merge":
        if not text or not text.strip():
            raise ReviewError("merge needs the merged text")
        message = _merge(vault, tx, link, a, b, text.strip(), day)
    elif action in ("keep-a", "keep-b"):
        keep, drop = (a, b) if action == "keep-a" else (b, a)
        vault.unlink(link.from_uri, link.to_uri, conflict, link_id=link.id)
        claim = disputed_claim(vault, link, drop)
        if claim is None:
            vault.link(keep, drop, supersedes, weight=link.weight,
                       description=f"review {day}: kept over the contradicting note")
            until = _valid_until(vault, keep, drop, day)
            vault.supersede(drop, keep, until)
            message = f"kept {keep}; {drop} is superseded (valid until {until})"
        else:
            vault.link(keep, drop, supersedes, weight=link.weight, t_field=claim["field"], t_line_ranges=claim["lines"],
                       description=f"review {day}: kept over the contradicting claim")
            until = _valid_until(vault, keep, drop, day)
            _supersede_claim(vault, tx, drop, {**claim, "valid_until": until, "superseded_by": keep})
            where = f"{claim['field']} line {claim['lines']}" if claim["lines"] else claim["field"]
            message = f"kept {keep}; the claim in {drop} ({where}) is superseded (valid until {until})"
    elif action == "dismiss":
        vault.unlink(link.from_uri, link.to_uri, conflict, link_id=link.id)
        # An anchor the from-note no longer holds (edited since) is dropped, not refused:
        # dismissing a false contradiction must not fail on a stale anchor.
        anchor = link.match_text if link.match_text and link.match_text in vault.read_note(link.from_uri).text else None
        vault.link(link.from_uri, link.to_uri, default, weight=link.weight, match_text=anchor,
                   t_field=link.t_field, t_line_ranges=link.t_line_ranges,
                   description=f"review {day}: not a contradiction — {link.description}".strip(" —"))
        message = "not a contradiction, now related_to"
    else:
        title_a, title_b = vault.title(vault.read_note(a)), vault.title(vault.read_note(b))
        asks = [f"How do {x} and {y} fit together?" for x, y in ((title_a, title_b), (title_b, title_a))]
        # (the pair asked about the other way round before: that question)
        question = next((q for q in asks if vault.exists(vault.schema("report_candidate").note_uri({"question": q}))),
                        asks[0])
        candidate = vault.schema("report_candidate").note_uri({"question": question})
        asked = {"question": question, "status": "pending", "user_requirement": f"Reconcile: {link.description}".strip()}
        if vault.exists(candidate) and all(vault.read_note(candidate).fields.get(k) == v for k, v in asked.items()):
            # (asked again while open: an action that changes nothing would be the next one undo takes back)
            raise ReviewError(f"asked already: {candidate} is waiting for the next dream; nothing was changed")
        vault.write_note("report_candidate", asked)  # (a question answered before: open again)
        vault.link(candidate, a, default, description="contradiction to research")
        vault.link(candidate, b, default, description="contradiction to research")
        message = f"research question added: {candidate}"
    return _describe(vault, tx, action, a, b, message)


def _valid_until(vault: Vault, keep: str, drop: str, day: str) -> str:
    """The day the superseded note stopped holding: the later of the two notes' days — the
    kept one's when it is the newer ("I hate espresso now", said on 20 February, ends "I love
    espresso" then), the dropped one's own when it is (it never held) —, never after the
    review's ``day``."""
    said = max(vault.read_note(uri).created_at[:10] for uri in (keep, drop))
    return min(said, day)


def _merge(vault: Vault, tx: Transaction, link: StoredLink, keep: str, drop: str, text: str, day: str) -> str:
    """``keep`` (the note the user chose, A) takes the merged text and evolved_from
    ``drop``, the new link keeping the disputed link's anchors that still hold: the lines
    of ``drop`` in dispute, the anchor text if ``keep``'s new text still has it. ``drop``
    is superseded only when it is a note of the same type: an event merged into a person's
    note does not make the person (or the event) out of date."""
    table = vault.config.link_table()
    claim = disputed_claim(vault, link, drop)  # (read before the texts change)
    types = {uri: vault.catalog.memory_type(uri) for uri in (keep, drop)}
    vault.unlink(link.from_uri, link.to_uri, table.role("conflict"), link_id=link.id)
    _rewrite_keeping_links(vault, tx, keep, text)
    t_field = claim["field"] if claim else (link.t_field if drop == link.to_uri else None)
    anchor = link.match_text if keep == link.from_uri and link.match_text and link.match_text in vault.read_note(keep).text else None
    vault.link(keep, drop, table.role("supersedes"), weight=link.weight, t_field=t_field,
               t_line_ranges=claim["lines"] if claim else None, match_text=anchor,
               description=f"review {day}: merged into this note")
    if types[keep] != types[drop]:
        return (f"merged into {keep}; {drop} stays current ({_a(types[drop])} is not superseded by "
                f"{_a(types[keep])})")
    until = _valid_until(vault, keep, drop, day)
    vault.supersede(drop, keep, until)
    return f"merged into {keep}; {drop} is superseded (valid until {until})"


@dataclass
class Dispute:
    """What a contradiction review shows: why the two notes disagree (the contradicts
    link's description) and, for each note, the lines in dispute (None: the whole note)."""

    reason: str
    lines: dict[str, tuple[str, str] | None]  # uri -> (where, "the disputed text"), e.g. ("content lines 2-3", …)


def dispute(vault: Vault, a: str, b: str) -> Dispute:
    """The contradiction between ``a`` and ``b`` as a review card shows it (ReviewError
    when no contradicts link joins them)."""
    conflict = vault.config.link_table().role("conflict")
    pair = [l for l in vault.links.of(a, "links") if l.to_uri == b and l.link_type is conflict]
    pair += [l for l in vault.links.of(b, "links") if l.to_uri == a and l.link_type is conflict]
    if not pair:
        raise ReviewError(f"no contradicts link between {a} and {b}")
    link = pair[0]
    lines: dict[str, tuple[str, str] | None] = {}
    for uri in (a, b):
        claim = disputed_claim(vault, link, uri)
        if claim is None:
            lines[uri] = None
            continue
        text = vault.read_note(uri).field_text(claim["field"])
        picked = segments(text, parse_ranges(claim["lines"])) if claim["lines"] else [text]
        lines[uri] = (f"{claim['field']} lines {claim['lines']}" if claim["lines"] else claim["field"],
                      "\n".join(picked or []))
    return Dispute(reason=link.description, lines=lines)


def disputed_claim(vault: Vault, link: StoredLink, uri: str) -> dict[str, Any] | None:
    """The part of ``uri`` the contradicts ``link`` disputes, as {field, lines}; None when
    it is the whole note. On the target side it is the link's t_field and t_line_ranges;
    on the source side the text-field lines holding the link's match_text."""
    note = vault.read_note(uri)
    text_field = vault.schema(note.memory_type).text_field
    if link.to_uri == uri:
        field = link.t_field or text_field
        if field != text_field:
            return {"field": field, "lines": link.t_line_ranges}
        if not link.t_line_ranges:
            return None
        ranges = parse_ranges(link.t_line_ranges)
    elif link.match_text:
        ranges = [(n, n) for n, line in enumerate(note.field_text(text_field).split("\n"), 1) if link.match_text in line]
        if not ranges:
            return None
    else:
        return None
    count = len(note.field_text(text_field).split("\n"))
    covered = {n for s, e in ranges for n in range(s, e + 1)}
    if covered >= set(range(1, count + 1)):
        return None
    return {"field": text_field, "lines": format_ranges(ranges)}


def _supersede_claim(vault: Vault, tx: Transaction, uri: str, claim: dict[str, Any]) -> None:
    note = vault.read_note(uri)
    claims = list(note.extra.get("superseded_claims") or [])
    note.extra = {**note.extra, "superseded_claims": claims + [claim]}
    tx.put_text(uri, serialize_note(note, vault.schema(note.memory_type), vault.read_text(uri)), note)


def _rewrite_keeping_links(vault: Vault, tx: Transaction, uri: str, text: str) -> None:
    """Replace the note's text field. Links into it whose lines the new text no longer
    holds would be removed by the range correction; a merge keeps them, pointing at the
    whole field instead."""
    incoming = {l.id: l for l in vault.links.of(uri, "backlinks") if not l.legacy}
    schema = vault.schema(vault.read_note(uri).memory_type)
    vault.write_note(schema.memory_type, {schema.text_field: text}, uri=uri)
    left = {l.id for l in vault.links.of(uri, "backlinks")}
    for link in incoming.values():
        if link.id not in left:
            kept = link.model_copy(update={"t_line_ranges": None})
            tx.link_ops([PutLink(folder=uri_dir(kept.from_uri), link=kept.as_direction("links")),
                         PutLink(folder=uri_dir(kept.to_uri), link=kept.as_direction("backlinks"))])


def _is_sidecar(rel: str) -> bool:
    return rel.endswith(sidecar_rel(""))


def _touched(tx: Transaction) -> list[str]:
    out: set[str] = set()
    for op in tx.ops():
        if isinstance(op, (WriteFile, DeleteFile)):
            out.add(op.uri)
        elif isinstance(op, (PutLink, RemoveLink, RemoveLegacy, WriteSidecar)):
            out.add(sidecar_rel(op.folder))
    return sorted(out)


def _disk_text(vault: Vault, rel: str) -> str | None:
    """A file's text as on disk, its line endings as they are (undo puts back every byte)."""
    try:
        return (vault.root / rel).read_bytes().decode("utf-8")
    except FileNotFoundError:
        return None


def _link_records(vault: Vault, tx: Transaction, whole: list[str]) -> list[dict[str, Any]]:
    """Each link record the action changes: folder, id, direction, the entry before (with
    its place in its folder's list, when that sidecar is rewritten whole on each write;
    ``was``: only the fields it changes, when the action leaves one with its id) and a
    digest of the entry after (None: no entry). Folders kept whole (``whole``) are left
    out."""
    out: list[dict[str, Any]] = []
    places: dict[str, dict[tuple[Any, Any], int] | None] = {}
    for change in tx.link_changes():
        if sidecar_rel(change.folder) in whole:
            continue
        if change.folder not in places:
            path = vault.resolve.folder(change.folder)
            places[change.folder] = None if not rewritten_whole(path) else {
                (r.get("id"), r.get("direction")): i for i, r in enumerate(read_folder(vault.root, path, change.folder).rows)
                if isinstance(r, dict) and "uris" not in r}
        place = places[change.folder]
        record: dict[str, Any] = {"folder": change.folder, "id": change.id, "direction": change.direction,
                                  "at": place.get((change.id, change.direction)) if place is not None and change.before else None}
        before, after = change.before, change.after
        if before is not None and after is not None:
            record["was"] = before.model_dump(mode="json", include={k for k in type(before).model_fields
                                                                     if getattr(before, k) != getattr(after, k)})
        else:
            record["before"] = None if before is None else before.model_dump(mode="json")
        record["after"] = None if after is None else _digest(after)
        out.append(record)
    return out


def _digest(link: StoredLink) -> str:
    """A link entry's fingerprint: undo puts a record back only while it is as the action left it."""
    return hashlib.sha256(link.model_dump_json().encode("utf-8")).hexdigest()[:16]


def _describe(vault: Vault, tx: Transaction, action: str, a: str, b: str, message: str) -> Plan:
    """Compare what the transaction staged with the files on disk."""
    files = _touched(tx)
    notes: list[NoteChange] = []
    for rel in files:
        if _is_sidecar(rel):
            continue
        old, new = _disk_text(vault, rel), tx.text_after(rel)
        if old != new:
            notes.append(_note_change(vault, rel, old, new))
    links: dict[str, LinkChange] = {}
    for c in sorted(tx.link_changes(), key=lambda c: (sidecar_rel(c.folder), c.id, c.direction)):
        rel = sidecar_rel(c.folder)
        change = "add" if c.before is None else "remove" if c.after is None else "edit"
        shown = c.after or c.before
        assert shown is not None
        entry = links.setdefault(shown.id, LinkChange(
            change=change, id=shown.id, link_type=shown.link_type.value, from_uri=shown.from_uri,
            to_uri=shown.to_uri, t_field=shown.t_field, t_line_ranges=shown.t_line_ranges, sides=[]))
        if rel not in entry.sides:  # both ends in one folder: one file, named once
            entry.sides.append(rel)
        if change == "edit" and c.before is not None and c.after is not None:
            old_d, new_d = c.before.model_dump(mode="json"), c.after.model_dump(mode="json")
            diff = sorted(k for k in old_d if old_d[k] != new_d.get(k))
            entry.before = {k: old_d[k] for k in diff}
            entry.after = {k: new_d.get(k) for k in diff}
    for entry in links.values():
        if entry.change == "add":
            entry.id = "new"
    basis = {uri: text_hash(_disk_text(vault, uri)) for uri in (a, b)}
    return Plan(action=action, a=a, b=b, message=message, notes=notes,
                links=sorted(links.values(), key=lambda l: (l.change, l.from_uri, l.to_uri, l.id)), files=files,
                basis=basis)


def _note_change(vault: Vault, uri: str, old: str | None, new: str | None) -> NoteChange:
    if new is None:
        return NoteChange(uri=uri, change="delete")
    after = parse_note(new, uri, vault.types)
    before = parse_note(old, uri, vault.types) if old is not None else None
    names = list(after.fields) + [k for k in (before.fields if before else {}) if k not in after.fields]
    fields = [FieldChange(name=k, before=before.fields.get(k) if before else None, after=after.fields.get(k))
              for k in names if (before.fields.get(k) if before else None) != after.fields.get(k)]
    old_extra = before.extra if before else {}
    fields += [FieldChange(name=k, before=old_extra.get(k), after=after.extra.get(k))
               for k in sorted(set(old_extra) | set(after.extra)) if old_extra.get(k) != after.extra.get(k)]
    return NoteChange(uri=uri, change="edit" if before else "create", fields=fields)


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
    text = text.replace("\n", "⏎")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def entry_id(entry: dict[str, Any]) -> str:
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
        if "action" in entry and isinstance(entry.get("before"), dict) and entry_id(entry) not in undone:
            return entry
    return None


def undo(vault: Vault, action_id: str | None = None) -> str:
    """Reverse the last review action, if its files are as the action left them: the
    files and the undo record land together. With ``action_id`` only when that is the
    last action: a caller undoing its own write never reverses someone else's."""
    with vault.transaction() as tx:
        entry = last_action(vault)
        if action_id is not None and (entry is None or entry_id(entry) != action_id):
            logged = read_jsonl(vault.root / ACTION_LOG, strict=False)
            if not any("action" in r and entry_id(r) == action_id for r in logged):
                raise ReviewError(f"cannot undo action {action_id}: no action of this vault has that id; nothing was changed")
            if any(r.get("undo") == action_id for r in logged):
                raise ReviewError(f"action {action_id} was undone already; nothing was changed")
        if entry is None:
            raise ReviewError("nothing to undo")
        if action_id is not None and entry_id(entry) != action_id:
            raise ReviewError(f"cannot undo action {action_id}: it is not the last action (that is {entry['action']} "
                              f"on {entry['a']} / {entry['b']}, {entry_id(entry)}); nothing was changed")
        _restore(tx, entry)
        tx.append(ACTION_LOG, {"at": _now(), "undo": entry_id(entry)})
        if entry["action"] in PERSONS_ACTIONS:  # (what it said of a person's links no longer holds)
            tx.append(PERSON_LINKS, {"undone": entry_id(entry)})
    for folder in entry.get("folders") or ():  # the folders it made (deepest first), once undo left them empty
        try:
            vault.path(folder).rmdir()  # (only an empty folder goes: one a file was put in since stays)
        except OSError:
            pass
    return f"undid {entry['action']} on {entry['a']} / {entry['b']}"


KEEPING = "a later change is never reversed unseen; take back that change first, or make this one by hand"


def _restore(tx: Transaction, entry: dict[str, Any]) -> None:
    """Put back what an action changed: note texts (and, for actions logged before link
    records were kept one by one, whole sidecars), then each link record it changed."""
    after = entry.get("after") or {}
    edits = entry.get("edits") or {}
    texts = {rel: tx.text_after(rel) for rel in [*entry["before"], *edits]}
    for rel, text in texts.items():
        if text_hash(text) != after.get(rel):
            what = "changed" if text is not None else "was removed or moved"
            raise ReviewError(f"cannot undo: {rel} {what} since the {entry['action']} action; nothing was changed "
                              f"(undo puts back only what is still as the action left it: {KEEPING})")
    records = entry.get("links") or []
    found: dict[tuple[str, str], dict[str, StoredLink]] = {}  # (folder, direction) -> id -> the entry now
    for key in {(r["folder"], r["direction"]) for r in records}:
        found[key] = tx.entries(key[0], [r["id"] for r in records if (r["folder"], r["direction"]) == key], key[1])
    back: list[tuple[dict[str, Any], StoredLink]] = []  # (record, the entry it puts back)
    for r in records:
        now = found[(r["folder"], r["direction"])].get(r["id"])
        left = r["after"]  # a digest, None, or the entry itself (actions logged before digests)
        if isinstance(left, str):
            same = now is not None and _digest(now) == left
        else:
            same = (None if now is None else now.model_dump(mode="json")) == left
        if not same:
            raise ReviewError(f"cannot undo: link {r['id']} in {sidecar_rel(r['folder'])} changed since the "
                              f"{entry['action']} action; nothing was changed (undo puts back only what is still as "
                              f"the action left it: {KEEPING})")
        if "was" in r and now is not None:
            back.append((r, StoredLink.model_validate({**now.model_dump(mode="json"), **r["was"]})))
        elif r.get("before") is not None:
            back.append((r, StoredLink.model_validate(r["before"])))
    for rel, text in entry["before"].items():
        tx.restore(rel, text)
    for rel, (start, end, replaced) in edits.items():
        now_text = texts[rel]
        assert now_text is not None  # (its hash matched a text)
        tx.restore(rel, now_text[:start] + replaced + now_text[end:])
    # Every record the action left goes, then each one it replaced comes back in its old
    # place (in order of place, so each lands where it was).
    ops: list = [RemoveLink(folder=r["folder"], id=r["id"], direction=r["direction"]) for r in records if r["after"]]
    back.sort(key=lambda pair: (pair[0]["folder"], pair[0]["at"] is None, pair[0]["at"] or 0))
    ops += [PutLink(folder=r["folder"], link=was, at=r["at"]) for r, was in back]
    tx.link_ops(ops)


def _a(noun: str | None) -> str:
    """"a source", "an entity"."""
    noun = noun or "note"
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"
