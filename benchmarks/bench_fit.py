"""Calibration fits (flopsheet validate --fit): predicting every validation row, and one fit, new vs old.

    python benchmarks/bench_fit.py                  # old = the commit before the rows were batched by overrides
    python benchmarks/bench_fit.py --old bcac292

Runs the same timing code in two child processes, on this checkout and on the package at git revision ``--old``
(extracted by ``bench_startup.old_package``). Each phase is warmed up first (the graph compiles once per output
set), then timed as the median of repeated runs:

- ``predict`` of every counted validation row (what each step of a least-squares fit evaluates);
- one fit: gemm_efficiency and attention_efficiency on the B200 rows of every family (``--on all --only b200``).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_startup import old_package  # noqa: E402

OLD = "bcac292"

CHILD = r'''
import json, statistics, timeit
from flopsheet.validate import Validator, load_points
from flopsheet.validate_fit import collect, predict, solve
v = Validator(); points = load_points()
rows = collect(v, points)
fit_rows = collect(v, [p for p in points if "b200" in p.id and p.category == "training"])
def med(f, repeat):
    f()
    return statistics.median(timeit.repeat(f, number=1, repeat=repeat))
out = {"rows": len(rows), "batches": len(rows.batches)}
out["predict every row"] = med(lambda: predict(v, rows, {}), 5)
out["fit 2 constants on the B200 rows"] = med(
    lambda: solve(v, fit_rows, ["gemm_efficiency", "attention_efficiency"], {}, "linear", "row"), 3)
print(json.dumps(out))
'''


def run(env) -> dict:
    p = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(p.stderr[-2000:])
    return json.loads(p.stdout.splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", default=OLD)
    args = ap.parse_args()
    base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    with tempfile.TemporaryDirectory(prefix="bench-fit-") as tmp:
        old_env = dict(base, PYTHONPATH=str(old_package(args.old, Path(tmp))), FLOPSHEET_CACHE_DIR="off")
        new = run(base)
        old = run(old_env)
    print(f"validate --fit: medians, new vs old ({args.old}); load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs")
    print(f"  rows {new['rows']} (old {old['rows']}), batches {new['batches']} (old {old['batches']})")
    for k in new:
        if k not in ("rows", "batches"):
            print(f"  {k:<36} new {new[k]:8.3f} s   old {old[k]:8.3f} s   ratio {old[k] / new[k]:5.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
