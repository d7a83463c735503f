"""Atomic writes for the exports: the engine's one implementation (``flopsheet.atomic``:
a temporary file beside the target, fsync, rename; odd targets refused in one line)."""
from __future__ import annotations

import os
from pathlib import Path

from flopsheet.atomic import atomic_path, atomic_write


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    return atomic_write(path, data)


def write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write(path, text)


__all__ = ["atomic_path", "atomic_write", "write_bytes", "write_text"]
