"""The disk cache only saves time: a corrupt, truncated or foreign entry is ignored and
rebuilt, and a run from the cache prints exactly what a run without it prints."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

CODE = ("import sys\nfrom flopsheet.cli import main\n"
        "sys.exit(main(['run', '--all', '--json']))")


def run(cache):
    env = dict(os.environ, FLOPSHEET_CACHE_DIR=str(cache))
    p = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_cache_is_verified_and_rebuilt(tmp_path):
    plain = run("off")
    cache = tmp_path / "cache"
    assert run(cache) == plain  # builds and fills the cache
    entries = sorted(p for p in cache.iterdir() if p.name != "secret.key")
    assert {p.name.split("-")[0] for p in entries} >= {"library", "trees", "program"}
    assert (cache / "secret.key").stat().st_mode & 0o077 == 0
    assert run(cache) == plain  # from the cache

    # tampered entries: a flipped byte in each body, the MAC left as it was
    for p in entries:
        data = bytearray(p.read_bytes())
        data[-2] ^= 0x01
        p.write_bytes(bytes(data))
    assert run(cache) == plain

    # foreign entries: written under another user's key (copied from elsewhere)
    other = tmp_path / "other"
    assert run(other) == plain
    for p in other.iterdir():
        if p.name != "secret.key":
            shutil.copy(p, cache / p.name)
    (cache / "secret.key").write_bytes(os.urandom(32))
    assert run(cache) == plain

    # garbage and truncated files
    for p in cache.iterdir():
        if p.name != "secret.key":
            p.write_bytes(p.read_bytes()[:50])
    assert run(cache) == plain


def test_cache_is_pruned_least_recently_used_first(tmp_path, monkeypatch):
    from flopsheet import diskcache

    monkeypatch.setenv("FLOPSHEET_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("FLOPSHEET_CACHE_MAX_MB", "1")
    diskcache.folder.cache_clear()
    diskcache._secret.cache_clear()
    try:
        body = b"x" * 300_000  # four of these exceed 1 MiB
        for i, name in enumerate(["a", "b", "c"]):
            diskcache.save_bytes(name, body)
            os.utime(tmp_path / f"{name}.bin", (1000 + i, 1000 + i))
        assert diskcache.load_bytes("a") == body  # a is used again: now the newest of the three
        diskcache.save_bytes("d", body)  # 1.2 MB > 1 MiB: prune to 3/4 MiB, oldest first
        left = sorted(p.name for p in tmp_path.iterdir() if p.name != "secret.key")
        assert left == ["a.bin", "d.bin"]
        assert diskcache.load_bytes("b") is None and diskcache.load_bytes("a") == body
    finally:
        diskcache.folder.cache_clear()
        diskcache._secret.cache_clear()
