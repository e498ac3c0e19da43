"""Errors the engine raises. Every one carries a one-line, user-facing reason."""


class MemlinkError(Exception):
    """Base class: anything a user can cause and should read about."""


class UriError(MemlinkError):
    """A note path is absolute, escapes the vault, or is otherwise not acceptable."""


class SchemaError(MemlinkError):
    """A memory type definition or a note's fields do not fit the schema."""


class MergeError(SchemaError):
    """A merge operation cannot be applied (immutable change, search text missing...)."""


class NoteError(MemlinkError):
    """A note file is missing or malformed."""


class NoteNotFound(NoteError):
    pass


class SidecarError(MemlinkError):
    """A `.relations.json` sidecar is malformed."""


class LinkError(MemlinkError):
    """A link cannot be created or removed."""


class VaultError(MemlinkError):
    """The vault folder or its settings are unusable."""


class VaultLocked(VaultError):
    """Another process holds the vault's write lock for too long."""


class DiskFull(MemlinkError):
    """The disk filled while a change was being applied: it is recorded in the journal and
    finishes by itself once there is room (docs/DESIGN.md, "Read-only vaults and full disks")."""
