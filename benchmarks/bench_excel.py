"""Excel export speed and size: `python3 benchmarks/bench_excel.py [--runs N] [--recalc]`.

Exports every bundled scenario once (lists of values pinned to their first value) to find
the largest workbook, then times the export of that scenario N times and prints the
median: cold (the per-library cache of partial derivatives cleared before each run, as in a
fresh `flopsheet export`) and warm (cache kept, as when one process exports several
scenarios). With --recalc it also times one headless-LibreOffice recalculation.
"""
from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path


def one_config(name):
    from flopsheet.scenario import load_scenario
    sc = load_scenario(name)
    for k, v in list(sc.values.items()):
        if isinstance(v.raw, list):
            sc.values[k] = dataclasses.replace(v, raw=v.raw[0])
    return sc


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7, help="timed exports (default 7)")
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
    cold, warm = [], []
    for _ in range(args.runs):
        # printed formulas and partials also come from the disk cache: FLOPSHEET_CACHE_DIR=off
        # measures them printed anew
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
    print(f"export time     median {statistics.median(cold):.3f} s cold, "
          f"{statistics.median(warm):.3f} s warm ({args.runs} runs each)")
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
