"""Write a generated validation family file, or check that the committed one is current - shared by the
family writers in tools/ (vtrain_family.py, mpt_family.py)."""
from __future__ import annotations

from pathlib import Path


def write_or_check(out: Path, text: str, argv: list[str], tool: str, point_prefix: str) -> int:
    """With --check: 0 if ``out`` already holds ``text``, else 1. Otherwise write it atomically."""
    if "--check" in argv:
        ok = out.exists() and out.read_text(encoding="utf-8") == text
        print(f"{out}: {'up to date' if ok else f'stale, run tools/{tool}'}")
        return 0 if ok else 1
    from flopsheet.atomic import atomic_write
    atomic_write(out, text)
    print(f"wrote {out} ({text.count('  ' + point_prefix)} points)")
    return 0
