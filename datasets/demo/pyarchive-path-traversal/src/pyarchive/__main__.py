"""Command line: python3 -m pyarchive {list,create,extract} ...

Exit status: 0 success, 1 archive error, 2 usage error.
"""

from __future__ import annotations

import argparse
import sys

from pyarchive import ArchiveError, create_archive, extract_all, list_members


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pyarchive")
    commands = parser.add_subparsers(dest="command", required=True)
    listing = commands.add_parser("list", help="list an archive's entries")
    listing.add_argument("archive")
    create = commands.add_parser("create", help="archive a directory")
    create.add_argument("archive")
    create.add_argument("root")
    extract = commands.add_parser("extract", help="extract an archive into a directory")
    extract.add_argument("archive")
    extract.add_argument("dest")
    extract.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)

    try:
        if args.command == "list":
            for member in list_members(args.archive):
                kind = "d" if member.is_dir else "-"
                print(f"{kind} {member.mode:04o} {member.size:>10} {member.name}")
        elif args.command == "create":
            for name in create_archive(args.archive, args.root):
                print(name)
        else:
            for path in extract_all(args.archive, args.dest, overwrite=args.overwrite):
                print(path)
    except ArchiveError as error:
        print(f"pyarchive: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
