"""Formula libraries from several places: the bundled formulas plus the user's files.

``flopsheet --formulas PATH`` (repeatable; a folder of YAML files or one file) *adds* to the
bundled library; ``--formulas-only`` makes the given paths the whole library. Names stay
global: a user file that redefines a bundled name is refused as a duplicate, with both
places named.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from .errors import SchemaError
from .yamlio import read_text

#: Stands for the bundled formula folder in a list of roots.
BUNDLED = "<bundled>"


def _files(root: Path) -> list[tuple[Path, str]]:
    """(file, topic) pairs of one root: a folder's ``*.yaml`` (topic = relative path) or
    one file (topic = its stem)."""
    if root.is_file():
        return [(root, root.stem)]
    if not root.is_dir():
        raise SchemaError(f"formula file or folder `{root}` does not exist")
    paths = sorted(p for p in root.rglob("*.yaml") if p.is_file())
    if not paths:
        raise SchemaError(f"no *.yaml formula files under `{root}`")
    return [(p, p.relative_to(root).as_posix()[: -len(".yaml")]) for p in paths]


def load_many(roots) -> "Library":  # noqa: F821 - see library.py
    """One library from several roots (``BUNDLED`` or ``None`` for the bundled folder)."""
    from .library import _CACHE, build_library, bundled_formulas
    raw, topics = [], set()
    digest = hashlib.sha256()
    for root in roots:
        bundled = root in (None, BUNDLED)
        base = bundled_formulas() if bundled else Path(root)
        for p, topic in _files(base):
            shown = f"formulas/{p.relative_to(base).as_posix()}" if bundled else str(p)
            text = read_text(p, shown)
            if topic in topics:  # two files with one topic: keep both sheets apart
                topic = f"{base.name}/{topic}"
            topics.add(topic)
            digest.update(shown.encode() + b"\0" + text.encode() + b"\0")
            raw.append((shown, topic, text))
    key = ("|".join(str(r) for r in roots), digest.hexdigest())
    lib = _CACHE.get(key)
    if lib is None:
        lib = _CACHE[key] = build_library(raw, digest=key[1][:16], root=key[0])
    return lib


def roots_from_args(paths: list[str] | None, only: bool) -> list[str] | None:
    """The ``load_library`` argument for ``--formulas`` paths (None: the bundled library)."""
    if not paths:
        if only:
            raise SchemaError("--formulas-only needs at least one --formulas PATH")
        return None
    return list(paths) if only else [BUNDLED] + list(paths)


__all__ = ["load_many", "roots_from_args", "BUNDLED"]
