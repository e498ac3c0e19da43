"""The link index: every record of every folder's sidecar, by note, in the store's
``links`` table (docs/DESIGN.md, "The link index"). Derived: the sidecars are the truth.

One way to read links, this class: a note's records (``of``, ``of_many``), a folder's
(``folder``), every link (``all``) as ``StoredLink``; what a walk follows as ``Edge``
(``edges``, ``graph_edges``). Inside a unit of work every read sees what it staged.

Each read first compares the sidecar files of the folders it touches with the stamps
the index recorded for them (a stat or two each) and re-reads a folder that changed
behind its back (edited by another tool, or written by a process killed before its
index update). memlink's own writes update the rows right after the files land
(``apply``), in one store transaction, and name the notes whose links changed in the
store's change feed."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from ..model.links import SIDECAR, Edge, LinkType, Rejected, StoredLink, legacy_links, sort_out
from ..model.uris import PathResolver, uri_dir
from .atomic import atomic_write_text, remove_file
from .sidecars import (
    SIDECAR_LOG,
    LinkOp,
    PutLink,
    RemoveLink,
    folder_stamp,
    read_folder,
    sidecar_rel,
    write_folder,
)
from .store import KEY_ID, KEY_IDS, Store, Writer

if TYPE_CHECKING:
    from .transaction import Transaction

Direction = str  # "links" | "backlinks" | "both"
SIDES: tuple[Literal["links"], Literal["backlinks"]] = ("links", "backlinks")  # a record's direction by its ``side``
# A record as read: its place in storage order, its folder, then what _link takes.
_SELECT = ("SELECT l.rowid, d.key, l.id, l.side, f.key, t.key, l.link_type, l.weight, l.t_field, l.t_line_ranges, "
           "l.match_text, l.description, l.created_at, l.legacy FROM links l JOIN keys d ON d.id = l.folder "
           "JOIN keys f ON f.id = l.from_id JOIN keys t ON t.id = l.to_id")
_ENDS = "SELECT f.key, t.key FROM links l JOIN keys f ON f.id = l.from_id JOIN keys t ON t.id = l.to_id"
_INSERT = "INSERT INTO links VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"
NO_FILES = "-|-"  # a folder without link files (engine.storage.sidecars.folder_stamp)


def home(owner: str) -> str:
    """The folder whose sidecar holds a note's records (a legacy folder-level entry's
    owner is its folder)."""
    return uri_dir(owner) if owner.endswith(".md") else owner


def _row(ids: dict[str, int], folder: str, r: dict) -> tuple:
    """A record's row, from its fields (``_fields``, or an entry that validated with its
    defaults filled in: a big folder's records are not made into models to be stored)."""
    return (ids[folder], r["id"], SIDES.index(r["direction"]), ids[r["from_uri"]], ids[r["to_uri"]], str(r["link_type"]),
            float(r["weight"]), None if r["t_field"] == _FIELD else r["t_field"], r["t_line_ranges"], r["match_text"],
            r["description"], r["created_at"], 1 if r.get("legacy") else 0)


def _fields(link: StoredLink) -> dict:
    return {**link.__dict__, "link_type": link.link_type.value}


def _owner(row: tuple) -> str:
    """The note whose side a read record (``_SELECT``) is."""
    return row[4] if row[3] == 0 else row[5]


def _at_home(row: tuple) -> bool:
    """A read record that is in its owner's folder (a record in another folder's sidecar
    is not that note's)."""
    return row[1] == home(_owner(row))


def _link(row: tuple) -> StoredLink:
    """A record as read (``_SELECT``; it validated when indexed: not checked again)."""
    (_seq, _folder, link_id, side, from_uri, to_uri, link_type, weight, t_field, ranges, match_text, description,
     created_at, legacy) = row
    return StoredLink.model_construct(
        id=link_id, from_uri=from_uri, to_uri=to_uri, direction=SIDES[side],
        link_type=LinkType.named(link_type), weight=weight, t_field=t_field or _FIELD,
        t_line_ranges=ranges, match_text=match_text, description=description, created_at=created_at,
        legacy=bool(legacy))


@dataclass
class FolderLinks:
    """A folder's sidecar as the index read it: its good records (both directions; legacy
    entries read as links, flagged), its legacy entries as written, the entries that do not
    validate, and why the files cannot be read at all (then nothing else is known)."""

    links: list[StoredLink] = field(default_factory=list)
    legacy: list[dict] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    broken: str | None = None

    def problem(self, folder: str) -> str | None:
        """Why a link write into this folder must not go ahead: its files cannot be read,
        or hold entries nobody has looked at (never rewritten around). None when whole."""
        if self.broken:
            return self.broken
        if self.rejected:
            bad = self.rejected[0]
            return f"{sidecar_rel(folder)}: {bad.label}: {bad.cause} (`memlink check --fix` moves bad entries aside)"
        return None


class LinkIndex:
    def __init__(self, resolve: PathResolver, store: Store, staged: Callable[[], Transaction | None],
                 note_folders: Callable[[], Iterable[str]] = tuple) -> None:
        self.resolve = resolve
        self.store = store
        self._staged = staged  # this thread's open unit of work, if any
        self._note_folders = note_folders  # the folders holding notes (the catalog's): where sidecars may appear

    # -- reading ---------------------------------------------------------------------------------
    def of(self, uri: str, direction: Direction = "both", *, as_staged: bool = True) -> list[StoredLink]:
        """A note's links ("links"), backlinks ("backlinks") or both, as its folder's
        sidecar holds them, strongest first. ``as_staged=False``: as on disk, whatever
        this thread's unit of work staged."""
        return self.of_many([uri], direction, as_staged=as_staged)[uri]

    def of_many(self, uris: Iterable[str], direction: Direction = "both", *,
                as_staged: bool = True) -> dict[str, list[StoredLink]]:
        """``of`` for several notes, in one read."""
        uris = list(dict.fromkeys(uris))
        wanted = ("links", "backlinks") if direction == "both" else (direction,)
        tx = self._staged() if as_staged else None
        staged = {(u, d): v for u in uris for d in wanted
                  if tx is not None and (v := tx.note_links(home(u), u, d)) is not None}
        unread = [u for u in uris if any((u, d) not in staged for d in wanted)]
        stored = self._read(unread) if unread else {}
        out = {}
        for uri in uris:
            links = [l for d in wanted for l in (staged[(uri, d)] if (uri, d) in staged else stored[uri][d])]
            out[uri] = sorted(links, key=lambda l: -l.weight)
        return out

    def _read(self, owners: list[str]) -> dict[str, dict[str, list[StoredLink]]]:
        """The owners' records on disk, by direction, in storage order."""
        self.refresh({home(o) for o in owners})
        out: dict[str, dict[str, list[StoredLink]]] = {o: {"links": [], "backlinks": []} for o in owners}
        for row in self._owned(owners):
            if _at_home(row):
                out[_owner(row)][SIDES[row[3]]].append(_link(row))
        return out

    def _owned(self, owners: list[str]) -> list[tuple]:
        """The records of these notes' sides, in storage order."""
        rows = self.store.rows_in(f"{_SELECT} WHERE l.side = 0 AND l.from_id IN {KEY_IDS}", owners)
        rows += self.store.rows_in(f"{_SELECT} WHERE l.side = 1 AND l.to_id IN {KEY_IDS}", owners)
        return sorted(rows)

    def edges(self, uris: Iterable[str]) -> dict[str, tuple[list[Edge], list[Edge]]]:
        """What a walk follows from each note: its links out and its backlinks in, as
        edges (types this process does not know are left out), in storage order."""
        uris = list(dict.fromkeys(uris))
        out: dict[str, tuple[list[Edge], list[Edge]]] = {}
        tx = self._staged()
        unstaged = []
        for uri in uris:
            if tx is not None and any(tx.note_links(home(uri), uri, d) is not None for d in ("links", "backlinks")):
                links = self.of(uri)
                out[uri] = ([_edge(l) for l in links if l.direction == "links" and LinkType.known(l.link_type.value)],
                            [_edge(l) for l in links if l.direction == "backlinks" and LinkType.known(l.link_type.value)])
            else:
                unstaged.append(uri)
                out[uri] = ([], [])
        if unstaged:
            self.refresh({home(u) for u in unstaged})
            for row in self._owned(unstaged):
                link_type = LinkType.known(row[6])
                if link_type is not None and _at_home(row):
                    out[_owner(row)][row[3]].append(_edge_of(row, link_type))
            # A legacy entry has no backlink record: its edge into its target is read from its links side.
            for row in self.store.rows_in(f"{_SELECT} WHERE l.legacy = 1 AND l.to_id IN {KEY_IDS} ORDER BY l.rowid",
                                          unstaged):
                link_type = LinkType.known(row[6])
                if link_type is not None and _at_home(row):
                    out[row[5]][1].append(_edge_of(row, link_type))
        return out

    def graph_edges(self) -> list[Edge]:
        """Every link of the vault as an edge, once (its links side), of a known type."""
        self.refresh()
        out = []
        for row in self.store.rows(f"{_SELECT} WHERE l.side = 0 ORDER BY l.rowid"):
            link_type = LinkType.known(row[6])
            if link_type is not None and _at_home(row):
                out.append(_edge_of(row, link_type))
        return out

    def all(self, types: Iterable[LinkType | str] | None = None) -> list[StoredLink]:
        """Every link of the vault, once (its links side; legacy entries included, as
        the default type), or those of these types."""
        self.refresh()
        names = None if types is None else sorted({str.__str__(t) for t in types})
        sql = f"{_SELECT} WHERE l.side = 0"
        rows = self.store.rows(sql + " ORDER BY l.rowid") if names is None else self.store.rows_in(
            sql + " AND l.link_type IN ({}) ORDER BY l.rowid", names)
        return [_link(row) for row in rows if _at_home(row)]

    def folder(self, folder: str, *, records: bool = True) -> FolderLinks:
        """A folder's sidecar as indexed (brought in step with its files first); without
        ``records``, only what is wrong with it (a big folder holds 180k records)."""
        self.refresh([folder])
        state = self.store.row("SELECT broken, aside FROM folders WHERE folder = ?", (folder,))
        if state is None:
            return FolderLinks()
        broken, aside = state
        links = [_link(row) for row in self.store.rows(f"{_SELECT} WHERE l.folder = {KEY_ID} ORDER BY l.rowid",
                                                       (folder,))] if records else []
        stored = json.loads(aside)
        return FolderLinks(links, stored.get("legacy", []),
                           [Rejected.model_validate(r) for r in stored.get("rejected", [])], broken)

    def problems(self) -> dict[str, FolderLinks]:
        """Every folder whose files cannot be read or hold entries that do not validate
        (without its records), every folder brought in step first."""
        self.refresh()
        out = {}
        for folder, broken, aside in self.store.rows("SELECT folder, broken, aside FROM folders ORDER BY folder"):
            stored = json.loads(aside)
            if broken or stored.get("rejected"):
                out[folder] = FolderLinks([], stored.get("legacy", []),
                                          [Rejected.model_validate(r) for r in stored.get("rejected", [])], broken)
        return out

    def legacy_targets(self, uris: Iterable[str]) -> set[str]:
        """Those of ``uris`` a legacy entry links to (it has no backlink record)."""
        return {u for (u,) in self.store.rows_in(
            f"SELECT k.key FROM links l JOIN keys k ON k.id = l.to_id WHERE l.legacy = 1 AND l.to_id IN {KEY_IDS}", list(uris))}

    def stats(self, top: int = 10) -> tuple[int, dict[str, int], list[tuple[str, int]]]:
        """How many links there are, how many of each type, and the ``top`` notes with the
        most records (links and backlinks), as indexed. Counting 600k records takes a fifth
        of a second, most of a lint after one note edit at 100k notes: the counts are kept
        in the store with the change feed's mark, and counted again once a link changed."""
        row = self.store.row("SELECT value FROM meta WHERE key = 'links.stats'")
        kept = json.loads(row[0]) if row else {}
        mark = kept.get("mark")
        since = self.store.since((str(mark[0]), int(mark[1])) if isinstance(mark, list) and len(mark) == 2 else None)
        if kept.get("top") == top and not since.any("link", "folder"):
            count, types, degree = kept["stats"]
            return count, types, [(u, n) for u, n in degree]
        types = dict(self.store.rows("SELECT link_type, count(*) FROM links WHERE side = 0 "
                                     "GROUP BY link_type ORDER BY count(*) DESC, link_type"))
        degree = [(u, n) for u, n in self.store.rows(
            "SELECT k.key, n FROM (SELECT owner, count(*) AS n FROM (SELECT from_id AS owner FROM links WHERE side = 0 "
            "UNION ALL SELECT to_id FROM links WHERE side = 1) GROUP BY owner) JOIN keys k ON k.id = owner "
            "ORDER BY n DESC, k.key LIMIT ?", (top,))]
        stats = (sum(types.values()), types, degree)
        text = json.dumps({"mark": list(since.mark), "top": top, "stats": stats}, ensure_ascii=False)
        self.store.try_write("the link counts", lambda w: w.execute("INSERT OR REPLACE INTO meta VALUES ('links.stats', ?)",
                                                                    (text,)))
        return stats

    def record(self, folder: str, link_id: str, direction: str) -> StoredLink | None:
        """The record with this id and direction in a folder's sidecar (a link's other
        side, a record an operation names), as on disk."""
        self.refresh([folder])
        row = self.store.row(f"{_SELECT} WHERE l.folder = {KEY_ID} AND l.id = ? AND l.side = ? AND l.legacy = 0 "
                             "ORDER BY l.rowid DESC", (folder, link_id, SIDES.index(direction)))
        return _link(row) if row else None

    def folders(self) -> list[str]:
        """Every folder that holds link files."""
        self.refresh()
        return [f for (f,) in self.store.rows("SELECT folder FROM folders WHERE stamp != ? ORDER BY folder", (NO_FILES,))]


    # -- keeping in step with the files ---------------------------------------------------------------
    def refresh(self, folders: Iterable[str] | None = None, sidecars: Iterable[str] | None = None) -> int:
        """Re-read the folders (default: every folder indexed before, and those ``sidecars``
        names, e.g. a walk's) whose files differ from what was indexed; how many were."""
        if folders is None:
            wanted = {f for (f,) in self.store.rows("SELECT folder FROM folders")}
            wanted |= {uri_dir(s) for s in sidecars} if sidecars is not None else set(self._note_folders())
        else:
            wanted = set(folders)
        if not wanted:
            return 0
        known = dict(self.store.rows_in("SELECT folder, stamp FROM folders WHERE folder IN ({})", sorted(wanted)))
        stale = [f for f in sorted(wanted) if known.get(f, NO_FILES) != self._stamp(f)]
        for folder in stale:
            self._reindex(folder)
        return len(stale)

    def _stamp(self, folder: str) -> str:
        try:
            return folder_stamp(self.resolve.folder(folder))
        except (OSError, ValueError):
            return NO_FILES

    def _reindex(self, folder: str) -> None:
        """Read a folder's files again and replace its rows."""
        try:
            files = read_folder(self.resolve.root, self.resolve.folder(folder), folder)
        except (OSError, ValueError):
            files = None  # (a folder that is no folder now: its rows go)
        records: list[dict] = []
        state: tuple[str, str | None, str] = (NO_FILES, None, "{}")
        if files is not None:
            good, legacy, rejected = sort_out(files.rows)
            records = [{**_DEFAULTS, **(files.rows[i] if canonical is None else canonical)}
                       for i, _id, _direction, _owner, canonical in good]
            for raw in legacy:
                try:
                    records += map(_fields, legacy_links(raw, folder))
                except ValueError:
                    continue  # a folder-level entry at the vault root names no note
            aside = json.dumps({"legacy": legacy, "rejected": [r.model_dump(mode="json") for r in rejected]},
                               ensure_ascii=False)
            state = (files.stamp, files.broken, aside)

        def work(w: Writer) -> None:
            before = {u for pair in w.execute(f"{_ENDS} WHERE l.folder = {KEY_ID}", (folder,)) for u in pair}
            w.execute(f"DELETE FROM links WHERE folder = {KEY_ID}", (folder,))
            ends = {u for r in records for u in (r["from_uri"], r["to_uri"])}
            ids = w.ids([folder, *ends])
            w.executemany(_INSERT, [_row(ids, folder, r) for r in records])
            if state[0] == NO_FILES:
                w.execute("DELETE FROM folders WHERE folder = ?", (folder,))
            else:
                w.execute("INSERT OR REPLACE INTO folders VALUES (?, ?, ?, ?)", (folder, *state))
            w.changed("link", before | ends)  # (both ends of each record)
            w.changed("folder", [folder])  # read whole from its files: what links into it may have changed too

        self.store.try_write(f"the link index of {sidecar_rel(folder)}", work)

    # -- writing (the journal's link operations) ----------------------------------------------------
    def apply(self, ops: list[LinkOp], tx: str | None) -> None:
        """Apply link operations to the sidecars, folder by folder, and bring the index
        along in the same step. Idempotent, like every journal operation."""
        by_folder: dict[str, list[LinkOp]] = {}
        for op in ops:
            by_folder.setdefault(op.folder, []).append(op)
        for folder, mine in by_folder.items():
            path = self.resolve.folder(folder)
            was = self.store.row("SELECT stamp FROM folders WHERE folder = ?", (folder,))
            in_step = (was[0] if was else NO_FILES) == folder_stamp(path)
            write_folder(self.resolve.root, path, folder, mine, tx)
            if in_step and all(isinstance(op, (PutLink, RemoveLink)) for op in mine):
                self._record(folder, mine, folder_stamp(path))
            else:
                self._reindex(folder)

    def _record(self, folder: str, ops: list[LinkOp], stamp: str) -> None:
        """The index rows of a folder that was in step, after these operations (not read
        again from the files: a big folder's list is megabytes)."""
        def work(w: Writer) -> None:
            ends: set[str] = set()  # both ends of each record written or removed: a finding about either may change
            fid = w.ids([folder])[folder]
            for op in ops:
                if isinstance(op, PutLink):
                    link = op.link
                    ids = w.ids([folder, link.from_uri, link.to_uri])
                    side = SIDES.index(link.direction)
                    ends.update(u for pair in w.execute(f"{_ENDS} WHERE l.folder = ? AND l.id = ? AND l.side = ?",
                                                        (fid, link.id, side)) for u in pair)
                    w.execute("DELETE FROM links WHERE folder = ? AND side = ? AND legacy = 0 AND (id = ? OR (from_id = ? "
                              "AND to_id = ? AND coalesce(t_field, ?) = ? AND coalesce(t_line_ranges, '') = ?))",
                              (fid, side, link.id, ids[link.from_uri], ids[link.to_uri], _FIELD, link.t_field,
                               link.t_line_ranges or ""))
                    w.execute(_INSERT, _row(ids, folder, _fields(link)))
                    ends.update((link.from_uri, link.to_uri))
                elif isinstance(op, RemoveLink):
                    side = SIDES.index(op.direction)
                    ends.update(u for pair in w.execute(f"{_ENDS} WHERE l.folder = ? AND l.id = ? AND l.side = ?",
                                                        (fid, op.id, side)) for u in pair)
                    w.execute("DELETE FROM links WHERE folder = ? AND id = ? AND side = ? AND legacy = 0",
                              (fid, op.id, side))
            w.execute("UPDATE folders SET stamp = ? WHERE folder = ?", (stamp, folder))
            if w.execute("SELECT changes()").fetchone()[0] == 0:
                w.execute("INSERT INTO folders VALUES (?, ?, NULL, ?)", (folder, stamp, "{}"))
            w.changed("link", ends)

        if not self.store.try_write(f"the link index of {sidecar_rel(folder)}", work):
            return  # (the stamp is left as it was: the next read re-reads the folder)

    def restore(self, folder: str, text: str | None) -> None:
        """Put a folder's whole sidecar back (undo, ``check --fix``): the list as ``text``
        (None: no list), no log."""
        path = self.resolve.folder(folder)
        if text is None:
            remove_file(path / SIDECAR)
        else:
            atomic_write_text(path / SIDECAR, text)
        remove_file(path / SIDECAR_LOG)
        self._reindex(folder)


def _edge(link: StoredLink) -> Edge:
    return Edge(link.id, link.from_uri, link.to_uri, link.link_type, link.weight, link.description)


def _edge_of(row: tuple, link_type: LinkType) -> Edge:
    """A read record (``_SELECT``) as an edge."""
    return Edge(row[2], row[4], row[5], link_type, row[7], row[11])


_FIELD = "content"  # the target field of almost every link: stored as NULL
_DEFAULTS = {"t_field": _FIELD, "t_line_ranges": None, "match_text": None, "description": ""}
