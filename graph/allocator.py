"""Keep freed array memory in the process while chunks are evaluated (glibc malloc only).

A chunk of 25k rows makes ~1,000 temporary arrays of 200 KB each. With glibc's default
settings such a block comes from ``mmap`` or, once freed, is handed back to the system
(the heap top is trimmed past 2x the block size), so the next array page-faults its
memory in again: measured on the training graph, about a third of a chunk's CPU time
went to those page faults (`python benchmarks/bench_search.py`, issue 14). Raising the
mmap and trim thresholds lets freed blocks be reused; the cost is that up to
``TRIM_THRESHOLD`` of freed memory stays with the process until it exits.

Applied once per process by :func:`flopsheet.chunks.run_chunk` (in-process and on Dask
workers). Elsewhere (another C library, no ``mallopt``) nothing changes, and
``FLOPSHEET_MALLOC_TUNE=0`` turns it off.
"""
from __future__ import annotations

import os

MMAP_THRESHOLD = 32 * 2**20  # bytes: glibc's largest allowed value on 64-bit systems
TRIM_THRESHOLD = 256 * 2**20  # bytes of free heap kept before any is returned
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc <malloc.h>

_done: bool | None = None


def keep_freed_memory() -> bool:
    """Set glibc's mmap and trim thresholds once; True when they are set."""
    global _done
    if _done is None:
        _done = False
        if os.environ.get("FLOPSHEET_MALLOC_TUNE", "1").strip() != "0":
            try:
                import ctypes
                libc = ctypes.CDLL(None)
                if hasattr(libc, "gnu_get_libc_version"):  # glibc: mallopt means what we say
                    _done = bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
                                 and libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
            except (OSError, AttributeError, ImportError):
                _done = False
    return _done
