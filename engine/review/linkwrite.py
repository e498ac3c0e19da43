"""A person's link write: `memlink link`, the app's `k`, the MCP `link` tool (docs/DESIGN.md,
"Units of work": link writes).

A link between two notes that are linked already is never replaced silently: the write is
refused with the existing link named, unless the caller asks to update it. An update
changes only the fields given (the rest are kept). Every write and removal is logged as a
review action, so `memlink undo` puts the links back as they were (a removed link with its
type, weight and description). A link written or changed here is the person's, and a pair
unlinked here stays unlinked (``PERSON_LINKS``): the machine's link writes and an import's
sync leave them as they are. (The extraction, ingest and the dream link
through ``Vault.link_many``, which merges by the link rules of docs/DESIGN.md, "Vault
format".)"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import LinkError
from ..model.links import LinkType, StoredLink
from ..model.text import printable
from ..model.uris import normalize_uri
from ..storage.writes import PERSON_LINKS, new_link, put_ops, remove_ops, unlink
from .actions import log_action

if TYPE_CHECKING:
    from ..storage.vault import Vault


NEW_LINK_WEIGHT = 1.0  # a link a person writes by hand states what they know: full weight unless they say less


class LinkExists(LinkError):
    """The two notes are linked already (the link is named in the message)."""

    def __init__(self, message: str, existing: list[StoredLink]) -> None:
        super().__init__(message)
        self.existing = existing


def describe(link: StoredLink) -> str:
    why = f" {link.description!r}" if link.description else ""
    return f"{link.link_type.value} {link.weight:.2f}{why} ({link.id})"


def links_between(vault: Vault, from_uri: str, to_uri: str) -> list[StoredLink]:
    """The links ``from_uri`` has to ``to_uri``: what a new link between them would meet
    (an old ``{uris, reason}`` entry naming the pair too)."""
    return [l for l in vault.links.of(normalize_uri(from_uri), "links") if l.to_uri == normalize_uri(to_uri)]


def write_link(vault: Vault, from_uri: str, to_uri: str, link_type: LinkType | str | None = None, *,
               update: bool = False, weight: float | None = None, t_field: str | None = None,
               t_line_ranges: str | None = None, match_text: str | None = None,
               description: str | None = None, link_id: str | None = None,
               actions: list[str] | None = None) -> StoredLink:
    """Link ``from_uri`` to ``to_uri`` on both sides, or, with ``update``, change the link
    they have (the one with ``link_id``, else the one of ``link_type``): only the fields
    given, the rest as they are (``match_text=""`` removes the anchor), undoable with
    `memlink undo`. Without ``update`` a pair linked already is refused (``LinkExists``),
    nothing written. The description is kept as one line of text (terminal escapes and
    controls left out). Returns the link as written; the id of the action logged, if any,
    goes to ``actions``."""
    from_uri, to_uri = normalize_uri(from_uri), normalize_uri(to_uri)
    if description is not None:
        description = " ".join(printable(description).split())
    logged = actions if actions is not None else []
    # The check and the write in one unit of work, under the write lock: two processes
    # linking the same pair at once cannot both find it free.
    with vault.transaction() as tx:
        existing = links_between(vault, from_uri, to_uri)
        if link_id is not None and not any(l.id == link_id for l in existing):
            raise LinkError(f"{from_uri} has no link {link_id} to {to_uri} (it was changed or removed since); "
                            "nothing was written")
        if not existing:
            if link_type is None:
                raise LinkError(f"{from_uri} has no link to {to_uri} to update; nothing was written (a new link needs a "
                                "link type)" if update else "a new link needs a link type")
            made = vault.link(from_uri, to_uri, link_type, weight=NEW_LINK_WEIGHT if weight is None else weight, t_field=t_field,
                              t_line_ranges=t_line_ranges, match_text=match_text or None, description=description or "")
            logged.append(log_action(vault, tx, "link", from_uri, to_uri, f"linked {from_uri} -> {to_uri} ({made.id})"))
            tx.append(PERSON_LINKS, {"link": made.id, "from": from_uri, "to": to_uri, "action": logged[-1]})
            return made
        if not update:
            listed = "; ".join(describe(l) for l in existing)
            raise LinkExists(f"{from_uri} is linked to {to_uri} already: {listed}. Nothing was written; "
                             "to change that link, write it again as an update (`memlink link --update`; over MCP, update: true)", existing)
        if link_id is not None:
            chosen = [l for l in existing if l.id == link_id]
        elif len(existing) > 1:
            chosen = [l for l in existing if link_type is None or l.link_type == link_type]
        else:
            chosen = existing
        if len(chosen) != 1:
            raise LinkError(f"{from_uri} has {len(existing)} links to {to_uri} ({'; '.join(describe(l) for l in existing)}); "
                            "name the one to update by its link type, or by its id (`memlink link --id`; over MCP, "
                            "link_id); nothing was written")
        old = chosen[0]
        if match_text and match_text not in vault.read_note(from_uri).text:
            raise LinkError(f"cannot link: the anchor {match_text!r} is not in the text of {from_uri}")
        new_field = t_field or (None if old.legacy else old.t_field)  # (an old entry names no field: the text)
        checked = new_link(vault, from_uri, to_uri, link_type or old.link_type, weight=old.weight if weight is None else weight,
                           t_field=new_field,
                           t_line_ranges=t_line_ranges if t_line_ranges is not None else
                           (old.t_line_ranges if new_field == old.t_field and not old.legacy else None),
                           match_text=old.match_text if match_text is None else match_text or None,
                           description=old.description if description is None else description, created_at=old.created_at)
        # (an old entry's id names the entry, which may hold other targets: the link gets its own)
        updated = checked if old.legacy else checked.model_copy(update={"id": old.id})
        changed = sorted(k for k in ("link_type", "weight", "t_field", "t_line_ranges", "match_text", "description")
                         if getattr(old, k) != getattr(updated, k))
        if not changed:
            return old  # nothing to change: nothing written, nothing to undo
        tx.link_ops(remove_ops(old) + put_ops(updated))
        logged.append(log_action(vault, tx, "update-link", from_uri, to_uri,
                                 f"updated the link {from_uri} -> {to_uri} ({old.id}): {', '.join(changed)}"))
        tx.append(PERSON_LINKS, {"link": updated.id, "from": from_uri, "to": to_uri, "action": logged[-1]})
        return updated


def remove_link(vault: Vault, from_uri: str, to_uri: str, link_type: LinkType | str | None = None, *,
                link_id: str | None = None, actions: list[str] | None = None) -> int:
    """Remove the links from ``from_uri`` to ``to_uri`` (of one type, or all; or the one
    with ``link_id``) on both sides, undoable with `memlink undo`. Returns how many; none
    found is an error, nothing written. The id of the action logged goes to ``actions``."""
    from_uri, to_uri = normalize_uri(from_uri), normalize_uri(to_uri)
    with vault.transaction() as tx:
        n = unlink(vault, tx, from_uri, to_uri, link_type, link_id)
        # (the notes the undo record keeps: a legacy entry's folder, or a note deleted since, is none)
        a, b = (u if vault.exists(u) else None for u in (from_uri, to_uri))
        a, b = a or b or from_uri, b or a or to_uri
        done = log_action(vault, tx, "unlink", a, b, f"removed {n} link{'s' if n != 1 else ''} {from_uri} -> {to_uri}")
        tx.append(PERSON_LINKS, {"removed": True, "from": from_uri, "to": to_uri, "action": done})
    if actions is not None:
        actions.append(done)
    return n
