"""Cold start of the command line: median wall time of N fresh processes, new vs old code.

    python benchmarks/bench_startup.py                      # `flopsheet run`, 7 runs each
    python benchmarks/bench_startup.py --runs 11 --old b1619cb
    python benchmarks/bench_startup.py -- sensitivity --of step_time
    python benchmarks/bench_startup.py -- export -o /tmp/x.xlsx

Each run is a new Python process (`python -c "from flopsheet.cli import main; main(argv)"`),
so imports, loading the library and compiling count, as for a user. Three variants run
interleaved (so machine load hits them alike):

- new, warm cache: this checkout with its disk cache filled by a first, untimed run
  (the common case: the formula files did not change since the last run);
- new, no cache: this checkout with ``FLOPSHEET_CACHE_DIR=off`` (first run after a change);
- old: the package at git revision ``--old`` (default: the commit before issue 10),
  extracted to a temporary folder and put first on ``PYTHONPATH``.

Prints the median and min of each and the ratio old / new. User + system CPU time is
printed too: on a shared machine it moves less than wall time.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import io
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OLD_DEFAULT = "b1619cb"


def old_package(rev: str, into: Path) -> Path:
    """`flopsheet` as at ``rev``: graph/ as the package, exports/formulas/templates inside."""
    data = subprocess.run(["git", "-C", str(REPO), "archive", rev], capture_output=True,
                          check=True).stdout
    src = into / "src"
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        tf.extractall(src)
    pkg = into / "pkg" / "flopsheet"
    shutil.copytree(src / "graph", pkg)
    for sub in ("exports", "formulas", "templates"):
        shutil.copytree(src / sub, pkg / sub)
    return pkg.parent


def timed(argv: list[str], env: dict, cwd: str) -> tuple[float, float]:
    code = f"import sys\nfrom flopsheet.cli import main\nsys.exit(main({argv!r}))"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode:
        raise SystemExit(f"{argv} failed: {p.stderr.strip()[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--old", default=OLD_DEFAULT, help=f"git revision (default {OLD_DEFAULT})")
    ap.add_argument("argv", nargs="*", default=["run"], help="flopsheet arguments (after --)")
    args = ap.parse_args()
    argv = args.argv or ["run"]
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        tmp = Path(tmp)
        base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        variants = {
            "new, warm cache": dict(base, FLOPSHEET_CACHE_DIR=str(tmp / "cache")),
            "new, no cache": dict(base, FLOPSHEET_CACHE_DIR="off"),
            f"old ({args.old})": dict(base, PYTHONPATH=str(old_package(args.old, tmp)),
                                       FLOPSHEET_CACHE_DIR="off"),
        }
        for env in variants.values():  # untimed: fills the cache, writes .pyc files
            timed(argv, env, str(tmp))
        wall = {k: [] for k in variants}
        cpu = {k: [] for k in variants}
        for _ in range(args.runs):
            for k, env in variants.items():
                w, c = timed(argv, env, str(tmp))
                wall[k].append(w)
                cpu[k].append(c)
    load = os.getloadavg()[0]
    print(f"flopsheet {' '.join(argv)}: {args.runs} cold processes each, interleaved; "
          f"load average {load:.1f} on {os.cpu_count()} CPUs")
    for k in variants:
        print(f"  {k:<22} wall median {statistics.median(wall[k]):6.3f} s  min "
              f"{min(wall[k]):6.3f} s   cpu median {statistics.median(cpu[k]):6.3f} s")
    new, old = "new, warm cache", f"old ({args.old})"
    print(f"  ratio old / new (warm cache): wall {statistics.median(wall[old]) / statistics.median(wall[new]):.1f}x, "
          f"cpu {statistics.median(cpu[old]) / statistics.median(cpu[new]):.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
