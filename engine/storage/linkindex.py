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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from ..errors import SidecarError
from ..model.links import SIDECAR, Edge, LinkType, Rejected, StoredLink, legacy_links, sort_out
from ..model.uris import PathResolver, uri_dir
from .atomic import atomic_write_text, parallel_writes, remove_file
from .sidecars import (
    SIDECAR_LOG,
    FolderFiles,
    LinkOp,
    PutLink,
    RemoveLink,
    folder_stamp,
    owner_of,
    read_folder,
    sidecar_rel,
    write_folder,
)
from .store import KEY_ID, KEY_IDS, Store, Writer

if TYPE_CHECKING:
    from .transaction import Transaction

Direction = str  # "links" | "backlinks" | "both"
SIDES: tuple[Literal["links"], Literal["backlinks"]] = ("links", "backlinks")  # a record's direction by its ``side``
# A record as read (what _link takes): its place in storage order, then its fields.
_FIELDS = ("l.id, l.side, f.key, t.key, l.link_type, l.weight, l.t_field, l.t_line_ranges, l.match_text, l.description, "
           "l.created_at, l.legacy")
_SELECT = f"SELECT l.rowid, {_FIELDS} FROM links l JOIN keys f ON f.id = l.from_id JOIN keys t ON t.id = l.to_id"
_ENDS = "SELECT f.key, t.key FROM links l JOIN keys f ON f.id = l.from_id JOIN keys t ON t.id = l.to_id"
_INSERT = "INSERT INTO links VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
# Reading a note's records: ``o`` holds the notes asked for (id, key); each arm is one way
# a record belongs to one (its links side, its backlinks side, a legacy entry into it),
# and joins only the key of the record's other end. (CROSS JOIN: ``o`` first, whatever
# the planner would guess, so each note is one index lookup.)
_NOTES = "WITH o(id, key) AS (SELECT id, key FROM keys WHERE key IN ({})) "
_ARMS = {
    "links": ("o.key, x.key", "l.from_id = o.id AND l.side = 0", "l.to_id"),
    "backlinks": ("x.key, o.key", "l.to_id = o.id AND l.side = 1", "l.from_id"),
    "legacy": ("x.key, o.key", "l.to_id = o.id AND l.legacy = 1", "l.from_id"),
}


_FAR_COUNT = ", x.links"  # (``x``: a record's other end, in ``_owned``; its count of records, ``counts``)
NO_FILES = "-|-"  # a folder without link files (engine.storage.sidecars.folder_stamp)


def home(owner: str) -> str:
    """The folder whose sidecar holds a note's records (a legacy folder-level entry's
    owner is its folder)."""
    return uri_dir(owner) if owner.endswith(".md") else owner


def _row(ids: dict[str, int], folder: str, r: dict) -> tuple:
    """A record's row, from its fields (``_fields``, or an entry that validated with its
    defaults filled in: a big folder's records are not made into models to be stored).
    A record in another folder than its owner's is ``stray``: it is not that note's."""
    side = 0 if r["direction"] == "links" else 1
    owner = r["from_uri"] if side == 0 else r["to_uri"]
    stray = int(folder != (owner.rpartition("/")[0] if owner.endswith(".md") else owner))  # (home, inline: 600k a build)
    return (ids[folder], r["id"], side, ids[r["from_uri"]], ids[r["to_uri"]], str(r["link_type"]),
            float(r["weight"]), None if r["t_field"] == _FIELD else r["t_field"], r["t_line_ranges"], r["match_text"],
            r["description"], r["created_at"], 1 if r.get("legacy") else 0, stray)


def _fields(link: StoredLink) -> dict:
    return {**link.__dict__, "link_type": link.link_type.value}


def _link(row: Sequence) -> StoredLink:
    """A record as read (``_SELECT``; it validated when indexed: not checked again)."""
    (_seq, link_id, side, from_uri, to_uri, link_type, weight, t_field, ranges, match_text, description,
     created_at, legacy) = row
    return StoredLink.trusted({
        "id": link_id, "from_uri": from_uri, "to_uri": to_uri, "direction": SIDES[side],
        "link_type": LinkType.named(link_type), "weight": weight, "t_field": t_field or _FIELD,
        "t_line_ranges": ranges, "match_text": match_text, "description": description, "created_at": created_at,
        "legacy": bool(legacy)})


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

    def of_many(self, uris: Iterable[str], direction: Direction = "both", *, as_staged: bool = True,
                anchored: bool = False, compare: bool = True) -> dict[str, list[StoredLink]]:
        """``of`` for several notes, in one read; ``anchored``: only the links with a
        ``match_text`` (what a snippet renders). ``compare=False``: as the index holds
        them, the folders' files not compared first (a search: see ``edges``)."""
        uris = list(dict.fromkeys(uris))
        wanted = ("links", "backlinks") if direction == "both" else (direction,)
        tx = self._staged() if as_staged else None
        staged = {(u, d): v for u in uris for d in wanted
                  if tx is not None and (v := tx.note_links(home(u), u, d)) is not None}
        unread = [u for u in uris if any((u, d) not in staged for d in wanted)]
        stored: dict[str, dict[str, list[StoredLink]]] = {u: {"links": [], "backlinks": []} for u in unread}
        if unread:
            if compare:
                self.refresh({home(u) for u in unread})
            for owner, _arm, *row in self._owned(unread, direction, _FIELDS, " AND l.match_text IS NOT NULL" if anchored else ""):
                stored[owner][SIDES[row[2]]].append(_link(row))
        out = {}
        for uri in uris:
            links = [l for d in wanted for l in (staged[(uri, d)] if (uri, d) in staged else stored[uri][d])
                     if l.match_text or not anchored]
            out[uri] = sorted(links, key=lambda l: -l.weight)
        return out

    def legacy_into(self, uri: str) -> list[StoredLink]:
        """The old-format entries that name ``uri`` as a target (they have no record on its
        side), every folder's files compared first: they may be in any folder."""
        self.refresh()
        return [_link(row) for row in self.store.rows(
            f"{_SELECT} WHERE l.to_id = (SELECT id FROM keys WHERE key = ?) AND l.legacy = 1 AND l.stray = 0 "
            "ORDER BY l.rowid", (uri,))]

    def _owned(self, owners: list[str], direction: Direction, columns: str, where: str = "",
               args: Sequence[object] = (), *, legacy: bool = False) -> list[tuple]:
        """Rows ``(owner, arm, rowid, *columns)`` of these notes' records (``direction``:
        "links", "backlinks" or both; with ``legacy``, the legacy entries into them too),
        those ``where`` also holds of (with its ``args``), in storage order by arm, in one
        statement. In ``columns``, ``f.key`` and ``t.key`` name the record's ends."""
        arms = [a for a in ("links", "backlinks") if direction in (a, "both")] + ["legacy"] * legacy
        parts = []
        for arm in arms:
            ends, on, other = _ARMS[arm]
            f, t = ends.split(", ")
            parts.append(f"SELECT o.key, {arms.index(arm)}, l.rowid, {columns.replace('f.key', f).replace('t.key', t)} "
                         f"FROM o CROSS JOIN links l ON {on} JOIN keys x ON x.id = {other} WHERE l.stray = 0{where}")
        rows = self.store.rows_in(_NOTES + " UNION ALL ".join(parts), owners, list(args) * len(parts)) if parts else []
        return [(owner, arms[arm], *rest) for owner, arm, *rest in sorted(rows, key=lambda r: (r[1], r[2]))]

    def edges(self, uris: Iterable[str], direction: Direction = "both", types: Iterable[LinkType] | None = None,
              compare: bool = True, far_counts: dict[str, int] | None = None) -> dict[str, tuple[list[Edge], list[Edge]]]:
        """What a walk follows from each note: its links out and its backlinks in (or only
        one ``direction``; only links of these ``types``), as edges (types this process
        does not know are left out), in storage order. ``compare=False``: as the index
        holds them, without comparing the folders' files first: what the last sync of the
        vault left (it compares every folder) and this process's writes since, the same
        moment as the catalog a search walks over. ``far_counts``, when given, receives
        ``counts`` of the notes at the far ends of the stored records read, in the same
        statement (a walk's hub test asks them of every note it reaches)."""
        uris = list(dict.fromkeys(uris))
        names = None if types is None else sorted({t.value for t in types})
        where = "" if names is None else f" AND l.link_type IN ({','.join('?' * len(names))})"
        out: dict[str, tuple[list[Edge], list[Edge]]] = {}
        tx = self._staged()
        unstaged = []
        for uri in uris:
            if tx is not None and any(tx.note_links(home(uri), uri, d) is not None for d in ("links", "backlinks")):
                links = [l for l in self.of(uri, direction) if LinkType.known(l.link_type.value)
                         and (names is None or l.link_type.value in names)]
                out[uri] = ([_edge(l) for l in links if l.direction == "links"],
                            [_edge(l) for l in links if l.direction == "backlinks"])
            else:
                unstaged.append(uri)
                out[uri] = ([], [])
        if unstaged:
            if compare:
                self.refresh({home(u) for u in unstaged})
            columns = "l.id, f.key, t.key, l.link_type, l.weight, l.description" + (_FAR_COUNT if far_counts is not None else "")
            # (A legacy entry has no backlink record: its edge into its target is read from its links side.)
            for owner, arm, _seq, link_id, from_uri, to_uri, type_name, weight, description, *far in self._owned(
                    unstaged, direction, columns, where, names or (), legacy=direction != "links"):
                if far_counts is not None:
                    far_counts[to_uri if arm == "links" else from_uri] = far[0]
                link_type = LinkType.known(type_name)
                if link_type is not None:
                    out[owner][arm != "links"].append(Edge(link_id, from_uri, to_uri, link_type, weight, description))
        return out

    def counts(self, uris: Iterable[str]) -> dict[str, int]:
        """How many links each note has, out and in, as the index holds them (the count
        kept with each note's key: no record read; a link into a note deleted since
        counts too)."""
        uris = list(dict.fromkeys(uris))
        if not uris:
            return {}
        return dict(self.store.rows_in("SELECT key, links FROM keys WHERE key IN ({})", uris))

    def graph_edges(self) -> list[Edge]:
        """Every link of the vault as an edge, once (its links side), of a known type."""
        self.refresh()
        out = []
        for _seq, link_id, from_uri, to_uri, type_name, weight, description in self.store.rows(
                "SELECT l.rowid, l.id, f.key, t.key, l.link_type, l.weight, l.description FROM links l "
                "JOIN keys f ON f.id = l.from_id JOIN keys t ON t.id = l.to_id WHERE l.side = 0 AND l.stray = 0 "
                "ORDER BY l.rowid"):
            link_type = LinkType.known(type_name)
            if link_type is not None:
                out.append(Edge(link_id, from_uri, to_uri, link_type, weight, description))
        return out

    def all(self, types: Iterable[LinkType | str] | None = None) -> list[StoredLink]:
        """Every link of the vault, once (its links side; legacy entries included, as
        the default type), or those of these types."""
        self.refresh()
        names = None if types is None else sorted({str.__str__(t) for t in types})
        sql = f"{_SELECT} WHERE l.side = 0 AND l.stray = 0"
        rows = self.store.rows(sql + " ORDER BY l.rowid") if names is None else self.store.rows_in(
            sql + " AND l.link_type IN ({}) ORDER BY l.rowid", names)
        return [_link(row) for row in rows]

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
        return self.records(folder, [link_id], direction).get(link_id)

    def records(self, folder: str, link_ids: Iterable[str], direction: str) -> dict[str, StoredLink]:
        """``record`` for several ids, in one read: the records found, by id."""
        self.refresh([folder])
        rows = self.store.rows_in(f"{_SELECT} WHERE l.id IN ({{}}) AND l.folder = {KEY_ID} AND l.side = ? "
                                  "AND l.legacy = 0 ORDER BY l.rowid", link_ids, (folder, SIDES.index(direction)))
        return {link.id: link for link in map(_link, rows)}  # (the last of an id, should there be two)

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
        stale = [f for f in sorted(wanted) if (stamp := self._stamp(f)) is not None and known.get(f, NO_FILES) != stamp]
        for folder in stale:
            self._reindex(folder)
        return len(stale)

    def _stamp(self, folder: str) -> str | None:
        """The folder's link files' stamp; None when it cannot be told (a folder this
        process may not read: its links stay as last read, not dropped as gone)."""
        try:
            return folder_stamp(self.resolve.folder(folder))
        except (FileNotFoundError, NotADirectoryError, ValueError):
            return NO_FILES
        except OSError:
            return None

    def _reindex(self, folder: str) -> None:
        """Read a folder's files again and replace its rows."""
        try:
            files = read_folder(self.resolve.root, self.resolve.folder(folder), folder)
        except (OSError, ValueError):
            files = None  # (a folder that is no folder now: its rows go)
        records: list[dict] = []
        state: tuple[str, str | None, str] = (NO_FILES, None, "{}")
        if files is not None:
            try:
                good, legacy, rejected = sort_out(files.rows)
            except SidecarError as exc:  # an entry nested too deep to be kept: the file cannot be read
                files = FolderFiles(base=files.base, log=files.log, broken=f"{sidecar_rel(folder)}: {exc}")
                good, legacy, rejected = [], [], []
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
        """Apply link operations to the sidecars, each folder's at once, several folders
        at once (``parallel_writes``), then bring the index along: the rows of the
        folders that were in step in one store transaction, the others read again.
        Idempotent, like every journal operation."""
        by_folder: dict[str, list[LinkOp]] = {}
        for op in ops:
            by_folder.setdefault(op.folder, []).append(op)
        if not by_folder:
            return
        paths = {folder: self.resolve.folder(folder) for folder in by_folder}
        known = dict(self.store.rows_in("SELECT folder, stamp FROM folders WHERE folder IN ({})", list(by_folder)))
        in_step = {folder for folder, mine in by_folder.items() if known.get(folder, NO_FILES) == folder_stamp(paths[folder])
                   and all(isinstance(op, (PutLink, RemoveLink)) for op in mine)}
        parallel_writes(lambda folder: write_folder(self.resolve.root, paths[folder], folder, by_folder[folder], tx),
                        list(by_folder))
        if in_step:
            self._record({f: by_folder[f] for f in by_folder if f in in_step}, {f: folder_stamp(paths[f]) for f in in_step})
        for folder in by_folder:
            if folder not in in_step:
                self._reindex(folder)

    def _record(self, ops: dict[str, list[LinkOp]], stamps: dict[str, str]) -> None:
        """The index rows of folders that were in step, after these operations (not read
        again from the files: a big folder's list is megabytes): each folder's operations
        reduced to the records that go and the records put, then one statement per kind
        for them all."""
        gone: list[tuple[str, str, int]] = []  # (folder, id, side) of every record an operation replaces or removes
        puts: list[tuple[str, StoredLink]] = []
        every: dict[tuple, tuple[str, StoredLink]] = {}  # every put, by folder and key: each replaces its key's record
        for folder, mine in ops.items():
            last: dict[tuple[str, int], StoredLink | None] = {}  # (id, side) -> the record left (None: removed)
            keyed: dict[tuple, str] = {}  # (key, side) -> the id of the record put with that key
            for op in mine:
                if isinstance(op, PutLink):
                    link, side = op.link, SIDES.index(op.link.direction)
                    every.setdefault((folder, side, link.key), (folder, link))
                    other = keyed.get((link.key, side), link.id)
                    was = last.get((other, side)) if other != link.id else None
                    if was is not None and was.key == link.key:
                        last[(other, side)] = None  # (a record put earlier with its key goes)
                    last.pop((link.id, side), None)  # (put again: its row comes last, as in the file)
                    last[(link.id, side)] = link
                    keyed[(link.key, side)] = link.id
                elif isinstance(op, RemoveLink):
                    last[(op.id, SIDES.index(op.direction))] = None
            gone += [(folder, link_id, side) for link_id, side in last]
            puts += [(folder, link) for link in last.values() if link is not None]

        def work(w: Writer) -> None:
            ids = w.ids([*ops, *(u for _f, link in every.values() for u in (link.from_uri, link.to_uri))])
            # Both ends of each record written or removed: a finding about either may change.
            ends = {u for _f, link in puts for u in (link.from_uri, link.to_uri)}
            ends.update(u for pair in w.execute(
                "SELECT f.key, t.key FROM json_each(?) g CROSS JOIN links l JOIN keys f ON f.id = l.from_id "
                "JOIN keys t ON t.id = l.to_id WHERE l.folder = json_extract(g.value, '$[0]') "
                "AND l.id = json_extract(g.value, '$[1]') AND l.side = json_extract(g.value, '$[2]')",
                (json.dumps([[ids[f], i, s] for f, i, s in gone], ensure_ascii=False),)) for u in pair)
            w.executemany("DELETE FROM links WHERE folder = ? AND id = ? AND side = ? AND legacy = 0",
                          [(ids[f], i, s) for f, i, s in gone])
            # The record any put replaced under another id, the same link (found through its owner's
            # index), even when a later operation of the unit put that link again or removed it.
            for side in (0, 1):
                w.executemany(f"DELETE FROM links WHERE {'from_id' if side == 0 else 'to_id'} = ? AND side = {side} "
                              "AND folder = ? AND legacy = 0 AND from_id = ? AND to_id = ? AND coalesce(t_field, ?) = ? "
                              "AND coalesce(t_line_ranges, '') = ?",
                              [(ids[owner_of(link)], ids[f], ids[link.from_uri], ids[link.to_uri], _FIELD, link.t_field,
                                link.t_line_ranges or "") for f, link in every.values() if SIDES.index(link.direction) == side])
            w.executemany(_INSERT, [_row(ids, f, _fields(link)) for f, link in puts])
            w.executemany("UPDATE folders SET stamp = ? WHERE folder = ?", [(stamp, f) for f, stamp in stamps.items()])
            w.executemany("INSERT OR IGNORE INTO folders VALUES (?, ?, NULL, '{}')", list(stamps.items()))
            w.changed("link", ends)

        # (Not written: the stamps are left as they were, so the next read re-reads the folders.)
        self.store.try_write("the link index", work)

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


_FIELD = "content"  # the target field of almost every link: stored as NULL
_DEFAULTS = {"t_field": _FIELD, "t_line_ranges": None, "match_text": None, "description": ""}
