"""Excel export speed and size: `python3 benchmarks/bench_excel.py [--runs N] [--recalc]`.

Exports every bundled scenario once (lists of values pinned to their first value) to find
the largest workbook, then times the export of that scenario.

"export" is what a user waits for: ``flopsheet export SCENARIO -o F.xlsx`` in a fresh
process, from start to the workbook on disk (imports, loading the library, evaluating,
every sheet, writing the file). It is timed N times, interleaved, in two variants:

- warm disk cache (the common case: the formula files did not change since the last run;
  the cache is a private folder filled by one untimed run);
- disk cache off (``FLOPSHEET_CACHE_DIR=off``: the first run after a change of the formulas
  or of the engine, every formula and partial derivative parsed and printed anew).

Each prints the median and min wall time and the median user + system CPU time (on a
shared machine CPU time moves less than wall time). The child processes may write .pyc
files (PYTHONDONTWRITEBYTECODE is dropped), as an installed package has them.

Then, in this process: cold (the per-library cache of symbolic partials cleared before
each run) and warm (kept, as when one process exports several scenarios). With --recalc it
also times one headless-LibreOffice recalculation.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_startup import timed  # noqa: E402 - one fresh-process timer for the benchmarks


def one_config(name):
    from flopsheet.scenario import load_scenario
    sc = load_scenario(name)
    for k, v in list(sc.values.items()):
        if isinstance(v.raw, list):
            sc.values[k] = dataclasses.replace(v, raw=v.raw[0])
    return sc


def export_argv(name: str, path: Path) -> list[str]:
    """``flopsheet export`` of scenario ``name``, lists of values pinned with --set."""
    from flopsheet.scenario import load_scenario
    argv = ["export", name, "-o", str(path)]
    for k, v in load_scenario(name).values.items():
        if isinstance(v.raw, list):
            argv += ["--set", f"{k}={v.raw[0]}"]
    return argv


def fresh_processes(argv: list[str], runs: int, tmp: Path) -> dict[str, tuple[list, list]]:
    base = {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "FLOPSHEET_CACHE_DIR")}
    variants = {"warm disk cache": dict(base, FLOPSHEET_CACHE_DIR=str(tmp / "cache")),
                "disk cache off": dict(base, FLOPSHEET_CACHE_DIR="off")}
    for env in variants.values():  # untimed: fills the cache, writes .pyc files
        timed(argv, env, str(tmp))
    out = {k: ([], []) for k in variants}
    for _ in range(runs):
        for k, env in variants.items():
            w, c = timed(argv, env, str(tmp))
            out[k][0].append(w)
            out[k][1].append(c)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7, help="timed exports of each kind (default 7)")
    ap.add_argument("--scenario", help="time this scenario instead of the largest bundled one")
    ap.add_argument("--out", help="folder for the workbooks (default: a temporary folder)")
    ap.add_argument("--recalc", action="store_true", help="also time a LibreOffice recalculation")
    args = ap.parse_args(argv)

    from flopsheet.evaluate import Model
    from flopsheet.exports import excel
    from flopsheet.library import load_library
    from flopsheet.scenario import bundled_templates

    out = Path(args.out or tempfile.mkdtemp(prefix="bench-excel-"))
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    lib = load_library()
    model = Model(lib)
    t_load = time.perf_counter() - t0

    if args.scenario:
        name = args.scenario
    else:
        sizes = {}
        for p in sorted((bundled_templates() / "scenarios").glob("*.yaml")):
            info = excel.export_workbook(out / f"{p.stem}.xlsx", lib, one_config(p.stem),
                                         model=model)
            sizes[p.stem] = info.path.stat().st_size
        name = max(sizes, key=sizes.get)

    path = out / f"{name}.xlsx"
    with tempfile.TemporaryDirectory(prefix="bench-excel-cli-") as tmp:
        fresh = fresh_processes(export_argv(name, path), args.runs, Path(tmp))
    cold, warm = [], []
    for _ in range(args.runs):
        for k in ("_partial_exprs", "_diff_forms"):  # the engine's shared symbolic partials
            lib.__dict__.pop(k, None)
        t = time.perf_counter()
        info = excel.export_workbook(path, lib, one_config(name), model=model)
        cold.append(time.perf_counter() - t)
        t = time.perf_counter()
        info = excel.export_workbook(path, lib, one_config(name), model=model)
        warm.append(time.perf_counter() - t)
    size = path.stat().st_size
    print(f"library         {len(lib.files)} files, {len(lib.inputs)} inputs, {len(lib.nodes)} "
          f"nodes (load + compile {t_load:.2f} s)")
    print(f"scenario        {name} (largest bundled workbook)" if not args.scenario
          else f"scenario        {name}")
    print(f"workbook        {len(info.sheets)} sheets, {info.formulas} formulas, "
          f"{len(info.sensitivity_outputs)} outputs in the live Sensitivity sheet")
    print(f"export          `flopsheet export {name} -o F.xlsx`, a fresh process each, "
          f"{args.runs} runs interleaved; load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs")
    for k, (walls, cpus) in fresh.items():
        print(f"  {k:<16}  wall median {statistics.median(walls):6.3f} s  min "
              f"{min(walls):6.3f} s   cpu (user+sys) median {statistics.median(cpus):6.3f} s")
    print(f"in-process      export_workbook median {statistics.median(cold):.3f} s cold "
          f"(symbolic partials cleared), {statistics.median(warm):.3f} s warm")
    print(f"file size       {size} bytes ({size / 1024:.0f} KiB)")
    if args.recalc:
        from flopsheet.exports.recalc import LibreOffice
        t = time.perf_counter()
        with LibreOffice() as lo:
            t_start = time.perf_counter() - t
            times = []
            for _ in range(3):
                t = time.perf_counter()
                lo.recalculate(path)
                times.append(time.perf_counter() - t)
        print(f"LibreOffice     start {t_start:.2f} s, recalculate + read back all names "
              f"median {statistics.median(times):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
