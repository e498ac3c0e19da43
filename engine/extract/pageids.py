"""PageIdMap: URI ↔ page id inside one ExtractLoop run (docs/DESIGN.md, "Dream", on its extraction context). Existing pages
get 1–99, pages the model creates 100+. Ids are never stored."""

from __future__ import annotations

from ..errors import MemlinkError

MAX_EXISTING = 99
FIRST_NEW = 100


class PageIdMap:
    def __init__(self) -> None:
        self._by_uri: dict[str, int] = {}
        self._by_id: dict[int, str] = {}
        self._next_new = FIRST_NEW

    def get_or_assign(self, uri: str) -> int:
        """URI → page id; the first call assigns the next free id in 1–99."""
        if uri in self._by_uri:
            return self._by_uri[uri]
        page_id = len(self._by_uri) + 1
        if page_id > MAX_EXISTING:
            raise MemlinkError(f"more than {MAX_EXISTING} existing pages in one extraction")
        self._by_uri[uri] = page_id
        self._by_id[page_id] = uri
        return page_id

    def next_new_page_id(self) -> int:
        page_id = self._next_new
        self._next_new += 1
        return page_id

    def existing(self) -> dict[int, str]:
        return dict(self._by_id)

    def __contains__(self, page_id: int) -> bool:
        return page_id in self._by_id
