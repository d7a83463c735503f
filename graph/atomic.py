"""Atomic output files: a temporary file beside the target, fsync, then rename.

Every writer (workbooks, scenario YAML, tables, pages, images) goes through
:func:`atomic_write`, so a killed run, a full disk or an exception half-way
never leaves a half-written file: the target is either the old file or the
complete new one. Odd targets (a folder, a parent that is a file, a missing
or unwritable folder) are refused with one line before anything is written.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Callable, Iterator

from .errors import OutputPathError


def check_target(path: str | os.PathLike) -> Path:
    """The target as a Path, or an :class:`OutputPathError` saying why it cannot be written."""
    p = Path(path)
    shown = str(path)
    if not shown or shown.endswith(("/", os.sep)):
        raise OutputPathError("output path is a folder, expected a file name", file=shown)
    if p.is_dir():
        raise OutputPathError("output path is a folder, expected a file name", file=shown)
    parent = p.parent if str(p.parent) else Path(".")
    # walk up: a parent that is a file is its own message
    for anc in [parent, *parent.parents]:
        if anc.exists():
            if not anc.is_dir():
                raise OutputPathError(f"`{anc}` is a file, not a folder", file=shown)
            break
    if not parent.is_dir():
        raise OutputPathError(f"folder `{parent}` does not exist", file=shown)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputPathError(f"folder `{parent}` is not writable", file=shown)
    if p.exists() and not os.access(p, os.W_OK):
        raise OutputPathError("file is not writable", file=shown)
    try:  # the real test (root passes os.access; read-only mounts and /proc do not)
        fd, probe = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".probe", dir=parent)
    except OSError as e:
        raise OutputPathError(f"cannot create a file in `{parent}`: {e.strerror or e}",
                              file=shown) from None
    os.close(fd)
    os.unlink(probe)
    return p


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, suffix: str | None = None) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success fsync it and rename it over ``path``.

    On any exception the temporary file is removed and ``path`` is left as it was.
    """
    target = check_target(path)
    parent = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix or ".tmp",
                                   dir=parent)
    except OSError as e:
        raise OutputPathError(f"cannot create a file here: {e.strerror or e}",
                              file=str(path)) from None
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        with open(tmp_path, "rb+") as f:
            os.fsync(f.fileno())
        # keep the mode a new file would get (mkstemp makes it 0600)
        if target.exists():
            os.chmod(tmp_path, target.stat().st_mode & 0o7777)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp_path, 0o666 & ~umask)
        os.replace(tmp_path, target)
        _fsync_dir(parent)
    except OSError as e:
        _remove(tmp_path)
        raise OutputPathError(f"cannot write: {e.strerror or e}", file=str(path)) from None
    except BaseException:
        _remove(tmp_path)
        raise


def atomic_write(path: str | os.PathLike, data: bytes | str | Callable[[Path], None], *,
                 encoding: str = "utf-8") -> Path:
    """Write ``data`` (bytes, text, or a function that writes a given path) atomically."""
    with atomic_path(path) as tmp:
        if callable(data):
            data(tmp)
        elif isinstance(data, str):
            tmp.write_bytes(data.encode(encoding))
        else:
            tmp.write_bytes(data)
    return Path(path)


def _fsync_dir(d: Path) -> None:
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _remove(p: Path) -> None:
    try:
        p.unlink()
    except OSError:
        pass


__all__ = ["atomic_write", "atomic_path", "check_target", "OutputPathError"]
