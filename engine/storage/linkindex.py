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
from typing import TYPE_CHECKING

from ..model.links import SIDECAR, Edge, LinkType, Rejected, StoredLink, legacy_links, sort_out
from ..model.uris import PathResolver, uri_dir
from .atomic import atomic_write_text, remove_file
from .sidecars import SIDECAR_LOG, LinkOp, PutLink, RemoveLink, folder_stamp, read_folder, sidecar_rel, write_folder
from .store import Store, Writer

if TYPE_CHECKING:
    from .transaction import Transaction

Direction = str  # "links" | "backlinks" | "both"
_COLUMNS = ("id, direction, owner, from_uri, to_uri, link_type, weight, t_field, t_line_ranges, match_text, "
            "description, created_at, legacy")
_INSERT = f"INSERT INTO links (folder, {_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
NO_FILES = "-|-"  # a folder without link files (engine.storage.sidecars.folder_stamp)


def home(owner: str) -> str:
    """The folder whose sidecar holds a note's records (a legacy folder-level entry's
    owner is its folder)."""
    return uri_dir(owner) if owner.endswith(".md") else owner


def owner_of(link: StoredLink) -> str:
    """The note whose side a record is: the from-note of a link, the to-note of a backlink."""
    return link.from_uri if link.direction == "links" else link.to_uri


def _row(folder: str, link: StoredLink) -> tuple:
    return (folder, link.id, link.direction, owner_of(link), link.from_uri, link.to_uri, link.link_type.value,
            link.weight, link.t_field, link.t_line_ranges, link.match_text, link.description, link.created_at,
            1 if link.legacy else 0)


def _link(row: tuple) -> StoredLink:
    """A record as the index holds it (it validated when indexed: not checked again)."""
    (link_id, direction, _owner, from_uri, to_uri, link_type, weight, t_field, ranges, match_text, description,
     created_at, legacy) = row
    return StoredLink.model_construct(
        id=link_id, from_uri=from_uri, to_uri=to_uri, direction=direction,
        link_type=LinkType.named(link_type), weight=weight, t_field=t_field,
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
        for row in self.store.rows_in(f"SELECT folder, {_COLUMNS} FROM links WHERE owner IN ({{}}) ORDER BY rowid", owners):
            if row[0] == home(row[3]):
                out[row[3]][row[2]].append(_link(row[1:]))
        return out

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
            columns = "folder, owner, direction, id, from_uri, to_uri, link_type, weight, description"
            rows = self.store.rows_in(f"SELECT {columns} FROM links WHERE owner IN ({{}}) ORDER BY rowid", unstaged)
            # A legacy entry has no backlink record: its edge into its target is read from its links side.
            rows += [(f, o, "backlinks", *rest) for f, o, _d, *rest in self.store.rows_in(
                f"SELECT {columns} FROM links WHERE legacy = 1 AND to_uri IN ({{}}) ORDER BY rowid", unstaged)]
            for folder, owner, direction, link_id, from_uri, to_uri, type_name, weight, description in rows:
                link_type = LinkType.known(type_name)
                if link_type is None or folder != home(owner):
                    continue
                at = owner if direction == "links" else to_uri
                out[at][0 if direction == "links" else 1].append(Edge(link_id, from_uri, to_uri, link_type, weight, description))
        return out

    def graph_edges(self) -> list[Edge]:
        """Every link of the vault as an edge, once (its links side), of a known type."""
        self.refresh()
        out = []
        for folder, owner, link_id, from_uri, to_uri, type_name, weight, description in self.store.rows(
                "SELECT folder, owner, id, from_uri, to_uri, link_type, weight, description FROM links "
                "WHERE direction = 'links' ORDER BY rowid"):
            link_type = LinkType.known(type_name)
            if link_type is not None and folder == home(owner):
                out.append(Edge(link_id, from_uri, to_uri, link_type, weight, description))
        return out

    def all(self, types: Iterable[LinkType | str] | None = None) -> list[StoredLink]:
        """Every link of the vault, once (its links side; legacy entries included, as
        the default type), or those of these types."""
        self.refresh()
        names = None if types is None else sorted({str.__str__(t) for t in types})
        sql = f"SELECT folder, {_COLUMNS} FROM links WHERE direction = 'links'"
        rows = self.store.rows(sql + " ORDER BY rowid") if names is None else self.store.rows_in(
            sql + " AND link_type IN ({}) ORDER BY rowid", names)
        return [_link(row[1:]) for row in rows if row[0] == home(row[3])]

    def folder(self, folder: str, *, records: bool = True) -> FolderLinks:
        """A folder's sidecar as indexed (brought in step with its files first); without
        ``records``, only what is wrong with it (a big folder holds 180k records)."""
        self.refresh([folder])
        state = self.store.row("SELECT broken, aside FROM folders WHERE folder = ?", (folder,))
        if state is None:
            return FolderLinks()
        broken, aside = state
        links = [_link(row) for row in self.store.rows(f"SELECT {_COLUMNS} FROM links WHERE folder = ? ORDER BY rowid",
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
        return {u for (u,) in self.store.rows_in("SELECT to_uri FROM links WHERE legacy = 1 AND to_uri IN ({})", list(uris))}

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
        types = dict(self.store.rows("SELECT link_type, count(*) FROM links WHERE direction = 'links' "
                                     "GROUP BY link_type ORDER BY count(*) DESC, link_type"))
        degree = [(u, n) for u, n in self.store.rows(
            "SELECT owner, count(*) FROM links GROUP BY owner ORDER BY count(*) DESC, owner LIMIT ?", (top,))]
        stats = (sum(types.values()), types, degree)
        text = json.dumps({"mark": list(since.mark), "top": top, "stats": stats}, ensure_ascii=False)
        self.store.try_write("the link counts", lambda w: w.execute("INSERT OR REPLACE INTO meta VALUES ('links.stats', ?)",
                                                                    (text,)))
        return stats

    def record(self, folder: str, link_id: str, direction: str) -> StoredLink | None:
        """The record with this id and direction in a folder's sidecar (a link's other
        side, a record an operation names), as on disk."""
        self.refresh([folder])
        row = self.store.row(f"SELECT {_COLUMNS} FROM links WHERE folder = ? AND id = ? AND direction = ? AND legacy = 0 "
                             "ORDER BY rowid DESC", (folder, link_id, direction))
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
        rows: list[tuple] = []
        state: tuple[str, str | None, str] = (NO_FILES, None, "{}")
        if files is not None:
            good, legacy, rejected = sort_out(files.rows)
            links = [StoredLink.model_construct(**_filled(files.rows[i] if canonical is None else canonical))
                     for i, _id, _direction, _owner, canonical in good]
            for raw in legacy:
                try:
                    links += legacy_links(raw, folder)
                except ValueError:
                    continue  # a folder-level entry at the vault root names no note
            rows = [_row(folder, l) for l in links]
            aside = json.dumps({"legacy": legacy, "rejected": [r.model_dump(mode="json") for r in rejected]},
                               ensure_ascii=False)
            state = (files.stamp, files.broken, aside)

        def work(w: Writer) -> None:
            before = {u for pair in w.execute("SELECT from_uri, to_uri FROM links WHERE folder = ?", (folder,)) for u in pair}
            w.execute("DELETE FROM links WHERE folder = ?", (folder,))
            w.executemany(_INSERT, rows)
            if state[0] == NO_FILES:
                w.execute("DELETE FROM folders WHERE folder = ?", (folder,))
            else:
                w.execute("INSERT OR REPLACE INTO folders VALUES (?, ?, ?, ?)", (folder, *state))
            w.changed("link", {*before, *(r[4] for r in rows), *(r[5] for r in rows)})  # (both ends of each record)
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
            for op in ops:
                if isinstance(op, PutLink):
                    link = op.link
                    ends.update(u for pair in w.execute(
                        "SELECT from_uri, to_uri FROM links WHERE folder = ? AND id = ? AND direction = ?",
                        (folder, link.id, link.direction)) for u in pair)
                    w.execute("DELETE FROM links WHERE folder = ? AND direction = ? AND legacy = 0 AND (id = ? OR (owner = ? "
                              "AND from_uri = ? AND to_uri = ? AND t_field = ? AND coalesce(t_line_ranges, '') = ?))",
                              (folder, link.direction, link.id, owner_of(link), link.from_uri, link.to_uri, link.t_field,
                               link.t_line_ranges or ""))
                    w.execute(_INSERT, _row(folder, link))
                    ends.update((link.from_uri, link.to_uri))
                elif isinstance(op, RemoveLink):
                    ends.update(u for pair in w.execute(
                        "SELECT from_uri, to_uri FROM links WHERE folder = ? AND id = ? AND direction = ?",
                        (folder, op.id, op.direction)) for u in pair)
                    w.execute("DELETE FROM links WHERE folder = ? AND id = ? AND direction = ? AND legacy = 0",
                              (folder, op.id, op.direction))
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


_DEFAULTS = {"t_field": "content", "t_line_ranges": None, "match_text": None, "description": ""}


def _filled(raw: dict) -> dict:
    """An entry that validated (``sort_out``) as StoredLink's fields: its defaults filled
    in, its type a LinkType, its weight a float (what validation gives)."""
    out = {**_DEFAULTS, **raw}
    out["link_type"] = LinkType.named(raw["link_type"])
    out["weight"] = float(raw["weight"])
    return out
