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
