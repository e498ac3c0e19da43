"""memlink's UI-free core. Never imports textual, widgets or memlink_tui.

The names below are imported when first asked for (PEP 562): a process that needs one
module does not pay for the rest, ~0.2 s of pydantic models and Jinja templates."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .errors import (
        LinkError,
        MemlinkError,
        MergeError,
        NoteError,
        NoteNotFound,
        SchemaError,
        SidecarError,
        UriError,
        VaultError,
        VaultLocked,
    )
    from .lint.checks import Finding
    from .model.links import LinkType, StoredLink, StoredWikiLink, WikiLink
    from .model.notes import Note
    from .model.schema import MemoryTypeSchema, TypeRegistry
    from .storage.catalog import CatalogEntry
    from .storage.vault import Vault

_FROM = {
    "Finding": "lint.checks", "CatalogEntry": "storage.catalog", "Vault": "storage.vault", "Note": "model.notes",
    "MemoryTypeSchema": "model.schema", "TypeRegistry": "model.schema",
    **dict.fromkeys(("LinkType", "StoredLink", "StoredWikiLink", "WikiLink"), "model.links"),
    **dict.fromkeys(("LinkError", "MemlinkError", "MergeError", "NoteError", "NoteNotFound", "SchemaError",
                     "SidecarError", "UriError", "VaultError", "VaultLocked"), "errors"),
}


def __getattr__(name: str) -> Any:
    module = _FROM.get(name)
    if module is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def version() -> str:
    """memlink's installed version ("unknown" when run from a source tree not installed)."""
    from importlib.metadata import PackageNotFoundError  # (~10 ms: only when the version is asked for)
    from importlib.metadata import version as installed

    try:
        return installed("memlink")
    except PackageNotFoundError:
        return "unknown"


__all__ = [
    "CatalogEntry", "LinkError", "LinkType", "MemlinkError", "MemoryTypeSchema", "MergeError", "Note",
    "NoteError", "NoteNotFound", "Finding", "SchemaError", "SidecarError", "StoredLink", "StoredWikiLink",
    "TypeRegistry", "UriError", "Vault", "VaultError", "VaultLocked", "WikiLink", "version",
]
