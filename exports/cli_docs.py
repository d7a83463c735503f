"""``flopsheet docs -o docs/``: the formula reference generated from the YAML."""
from __future__ import annotations

import sys


def register(sub, *, common) -> None:
    d = sub.add_parser("docs", help="write the formula reference (Markdown) generated from the "
                       "formula files")
    d.add_argument("-o", "--output", default="docs", metavar="DIR",
                   help="folder to write DIR/reference/*.md into (default: docs)")
    common(d, scenario=False)
    d.set_defaults(func=cmd_docs)


def cmd_docs(args) -> int:
    from flopsheet.library import load_library
    from .docs import write
    lib = load_library(args.formulas)
    files = write(lib, args.output)
    print(f"wrote {len(files)} pages to {args.output}/reference "
          f"({len(lib.nodes)} nodes, {len(lib.inputs)} inputs)", file=sys.stderr)
    return 0


__all__ = ["register", "cmd_docs"]
