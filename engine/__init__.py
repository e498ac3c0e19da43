"""memlink's UI-free core. Never imports textual, widgets or memlink_tui."""

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
from .vault import CatalogEntry, Vault


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
