"""memlink's UI-free core. Never imports textual, widgets or memlink_tui.

The names below are imported when first asked for (PEP 562): a process that needs one
module (``engine.walk``, started before anything else by the CLI) does not pay for the
rest, ~0.2 s of pydantic models and Jinja templates."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .catalog import CatalogEntry
    from .checks import Finding
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
    from .links import LinkType, StoredLink, StoredWikiLink, WikiLink
    from .notes import Note
    from .schema import MemoryTypeSchema, TypeRegistry
    from .vault import Vault

_FROM = {
    "Finding": "checks", "CatalogEntry": "catalog", "Vault": "vault", "Note": "notes",
    "MemoryTypeSchema": "schema", "TypeRegistry": "schema",
    **dict.fromkeys(("LinkType", "StoredLink", "StoredWikiLink", "WikiLink"), "links"),
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
    from importlib.metadata import PackageNotFoundError
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
