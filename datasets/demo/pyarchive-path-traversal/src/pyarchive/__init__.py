"""pyarchive: create, list and extract zip archives, keeping file modes."""

from pyarchive._archive import (
    ArchiveError,
    Member,
    create_archive,
    extract_all,
    list_members,
)

__all__ = ["ArchiveError", "Member", "create_archive", "extract_all", "list_members"]
__version__ = "0.3.1"
