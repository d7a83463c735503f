"""A small on-disk cache of what loading and compiling a formula library produces.

Entries are JSON (data, never code or pickles) preceded by an HMAC-SHA256 of their bytes
under a random key kept in the cache folder (mode 0600). An entry that fails the check
(corrupt, truncated, written by another engine version or copied from elsewhere) is
ignored and rebuilt; every entry read is also checked for shape by its reader. Keys
cover the formula files' text and the engine's own source, so any change to either
misses the cache.

Folder: ``$FLOPSHEET_CACHE_DIR``, else the user cache folder (``$XDG_CACHE_HOME`` or
``~/.cache``) + ``/flopsheet``. ``FLOPSHEET_CACHE_DIR=off`` turns the cache off. Any
error writing is ignored: the cache only ever saves time.

Size: after each write the folder is kept under ``$FLOPSHEET_CACHE_MAX_MB`` (default 256 MiB)
by deleting the entries used least recently (a read refreshes an entry's mtime), down to
three quarters of the cap; each formula change adds about 1.5 MB of entries.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import sys
import tempfile
from functools import lru_cache
from pathlib import Path

MAX_ENTRY = 64 * 2**20  # bytes; a larger file is not ours
DEFAULT_MAX_TOTAL_MB = 256
_SECRET = "secret.key"


@lru_cache(maxsize=1)
def folder() -> Path | None:
    env = os.environ.get("FLOPSHEET_CACHE_DIR")
    if env is not None:
        return None if env.strip().lower() in ("", "off", "0", "none") else Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "flopsheet"


@lru_cache(maxsize=1)
def engine_hash() -> str:
    """Hash of the engine's source (every module of this package) and the Python version."""
    h = hashlib.sha256(sys.version.encode())
    here = Path(__file__).resolve().parent
    for p in sorted(here.glob("*.py")):
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def key(kind: str, digest: str) -> str:
    h = hashlib.sha256(f"{kind}\0{digest}\0{engine_hash()}".encode()).hexdigest()
    return f"{kind}-{h[:40]}"


@lru_cache(maxsize=1)
def _secret() -> bytes | None:
    d = folder()
    if d is None:
        return None
    path = d / _SECRET
    try:
        d.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            data = path.read_bytes()
            return data if len(data) == 32 else None
        with os.fdopen(fd, "wb") as f:
            data = os.urandom(32)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        return data
    except OSError:
        return None


def _mac(secret: bytes, body: bytes) -> bytes:
    return hmac.new(secret, body, hashlib.sha256).hexdigest().encode()


def load_bytes(name: str, suffix: str = ".bin") -> bytes | None:
    """The bytes saved under ``name`` if their HMAC proves this user's engine wrote them."""
    secret = _secret()
    if secret is None:
        return None
    try:
        path = folder() / f"{name}{suffix}"
        if path.stat().st_size > MAX_ENTRY:
            return None
        raw = path.read_bytes()
    except OSError:
        return None
    mac, _, body = raw.partition(b"\n")
    if not hmac.compare_digest(mac, _mac(secret, body)):
        return None
    try:
        os.utime(path)  # recently used: pruned last
    except OSError:
        pass
    return body


def load(name: str):
    """The object saved under ``name``, or None (missing, not ours, or the cache is off)."""
    body = load_bytes(name, ".json")
    if body is None:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return None


def save(name: str, obj) -> None:
    """Write ``obj`` (JSON) atomically: a temporary file beside it, fsync, rename."""
    try:
        body = json.dumps(obj, separators=(",", ":"), allow_nan=True).encode()
    except (TypeError, ValueError):
        return
    save_bytes(name, body, ".json")


def save_bytes(name: str, body: bytes, suffix: str = ".bin") -> None:
    secret = _secret()
    if secret is None:
        return
    d = folder()
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=d, prefix=f".{name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(_mac(secret, body) + b"\n" + body)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, d / f"{name}{suffix}")
        tmp = None
        prune(d, keep=f"{name}{suffix}")
    except OSError:
        pass
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def max_total_bytes() -> int:
    try:
        mb = float(os.environ.get("FLOPSHEET_CACHE_MAX_MB", DEFAULT_MAX_TOTAL_MB))
    except ValueError:
        mb = DEFAULT_MAX_TOTAL_MB
    return int(max(mb, 1) * 2**20)


def prune(d: Path, keep: str = "") -> None:
    """Delete the least recently used entries until the folder holds at most 3/4 of the cap
    (only when it is above the cap, so most writes cost one directory scan)."""
    cap = max_total_bytes()
    entries = []
    for entry in os.scandir(d):
        if entry.name == _SECRET or entry.name.startswith(".") or not entry.is_file():
            continue
        st = entry.stat()
        entries.append((st.st_mtime, st.st_size, entry.path, entry.name == keep))
    total = sum(e[1] for e in entries)
    if total <= cap:
        return
    for _, size, path, kept in sorted(entries):
        if total <= cap * 3 // 4:
            break
        if kept:
            continue
        try:
            os.unlink(path)
            total -= size
        except OSError:
            pass
