"""Printed Excel text kept on disk between exports, so an export need not parse and print
every formula and partial derivative again."""
from __future__ import annotations

from pathlib import Path


class TextCache:
    """Printed Excel text kept on disk between exports (HMAC-checked JSON via
    graph/diskcache.py, keyed by the formulas and this printer's source; every entry is
    checked again on load, and anything unexpected is printed anew)."""

    def __init__(self, lib, kind: str, width: int):
        import hashlib
        from flopsheet import diskcache
        here = Path(__file__)  # the printers' source, read without importing sympy
        src = b"".join((here.with_name(f)).read_bytes()
                       for f in (here.name, "printer.py", "printer_sympy.py"))
        self.key = diskcache.key(kind, lib.digest_full + hashlib.sha256(src).hexdigest())
        self.width, self.dirty = width, False
        rec = diskcache.load(self.key)
        self.items: dict[str, list] = {}
        if isinstance(rec, dict) and all(isinstance(v, list) and len(v) == width
                                         for v in rec.values()):
            self.items = rec

    def get(self, key: str, make) -> list:
        hit = self.items.get(key)
        if hit is None:
            hit = self.items[key] = list(make())
            self.dirty = True
        return hit

    def save(self) -> None:
        if self.dirty:
            from flopsheet import diskcache
            diskcache.save(self.key, self.items)
            self.dirty = False
