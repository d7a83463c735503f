"""Fit a few global calibration constants of one hardware generation on validation families.

All points of the chosen families are evaluated in one vectorized call of the graph (one array
element per point), so a least-squares fit (scipy.optimize.least_squares on log(predicted /
measured)) takes seconds, not minutes. Nothing is written back: the fitted values go into the
hardware presets by hand, with this command as their source.

    python tools/calibrate.py --on vtrain-multi --fit gemm_efficiency,kernel_launch_overhead
"""
from __future__ import annotations

import argparse
import sys

import numpy as np


def point_arrays(validator, points):
    """(values as arrays, expected node, measured value in node units) over the counted rows."""
    from flopsheet.scenario import resolve
    from flopsheet.units import convert_value
    cols, nodes, measured, ids = [], [], [], []
    for p in points:
        if not p.supported or p.category != "training":
            continue
        for e in p.expects:
            if not e.counted:
                continue
            vals = resolve(validator.scenario(p, e.values), validator.model)
            cols.append(vals)
            nodes.append(e.node)
            measured.append(convert_value(f"{e.value} {e.unit}", validator.lib.item(e.node).dim))
            ids.append(p.id)
    groups: dict = {}  # points setting the same names (inputs and overridden nodes) evaluate together
    for i, c in enumerate(cols):
        groups.setdefault(tuple(sorted(c)), []).append(i)
    batches = [(idx, {k: np.array([float(cols[i][k]) for i in idx]) for k in keys})
               for keys, idx in groups.items()]
    return batches, nodes, np.array(measured), ids


def predict(validator, batches, nodes, overrides=None):
    out = np.empty(len(nodes))
    for idx, values in batches:
        v = dict(values)
        for k, x in (overrides or {}).items():
            v[k] = np.full(len(idx), float(x))
        want = sorted({nodes[i] for i in idx})
        res = validator.model.evaluate(v, outputs=want, check=False)
        for j, i in enumerate(idx):
            out[i] = np.broadcast_to(np.asarray(res[nodes[i]], dtype=float), (len(idx),))[j]
    return out


def summary(err):
    a = np.abs(err)
    return f"median {np.median(a):.1%}  p90 {np.percentile(a, 90):.1%}  worst {err[np.argmax(a)]:+.1%}"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--on", required=True, help="families (comma-separated) to fit on")
    ap.add_argument("--fit", required=True, help="global inputs to fit (comma-separated)")
    ap.add_argument("--check", default="", help="families to report the fitted values on (held out)")
    ap.add_argument("--loss", default="soft_l1", help="least_squares loss: soft_l1 (robust to the few "
                    "outlying measurements, scale 5 %%) or linear")
    ap.add_argument("--dump", action="store_true", help="print every fitted row's error")
    ap.add_argument("--set", action="append", default=[], help="name=value applied before fitting")
    ap.add_argument("--only", action="append", default=[], help="keep only the points whose id contains one "
                    "of these (comma-separated) substrings, e.g. b200 for one generation's rows of a mixed family; "
                    "repeated, a point must pass every --only")
    a = ap.parse_args(argv)
    from scipy.optimize import least_squares

    from flopsheet.library import load_library
    from flopsheet.validate import Validator, load_points
    validator = Validator(load_library())
    pts = load_points()
    fams = set(a.on.split(","))
    keep = [[s for s in group.split(",") if s] for group in a.only]
    pts = [p for p in pts if all(any(s in p.id for s in group) for group in keep)]
    fixed = {k: float(v) for k, v in (s.split("=") for s in a.set)}
    values, nodes, meas, ids = point_arrays(validator, [p for p in pts if p.family in fams])
    names = a.fit.split(",")
    lib = validator.lib
    x0 = np.array([float(lib.inputs[n].default) for n in names])
    scale = np.where(x0 != 0, np.abs(x0), 1.0)
    lo = [(lib.inputs[n].bounds[0] if lib.inputs[n].bounds[0] is not None else -np.inf) / s
          for n, s in zip(names, scale)]
    hi = [(lib.inputs[n].bounds[1] if lib.inputs[n].bounds[1] is not None else np.inf) / s
          for n, s in zip(names, scale)]

    def resid(z):
        pred = predict(validator, values, nodes, {**fixed, **dict(zip(names, z * scale))})
        return np.log(pred / meas)

    before = predict(validator, values, nodes, fixed) / meas - 1  # the shipped (preset) values
    sol = least_squares(resid, x0 / scale, bounds=(lo, hi), x_scale=1.0, diff_step=1e-3,
                        loss=a.loss, f_scale=0.05)
    after = np.expm1(resid(sol.x))
    print(f"fit on {a.on}{''.join(f' (ids with {o})' for o in a.only)} ({len(meas)} rows)")
    for n, x, y in zip(names, x0, sol.x * scale):
        print(f"  {n}: {x:.4g} -> {y:.4g}")
    if a.dump:
        for i, b, f in sorted(zip(ids, before, after), key=lambda t: t[2]):
            print(f"    {f:+7.1%}  (was {b:+7.1%})  {i}")
    print(f"  before: {summary(before)}")
    print(f"  after:  {summary(after)}")
    for fam in filter(None, a.check.split(",")):
        v2, n2, m2, _ = point_arrays(validator, [p for p in pts if p.family == fam])
        b = predict(validator, v2, n2, fixed) / m2 - 1
        f = predict(validator, v2, n2, {**fixed, **dict(zip(names, sol.x * scale))}) / m2 - 1
        print(f"  held out {fam}: before {summary(b)} | fitted {summary(f)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
