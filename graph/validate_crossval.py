"""Leave-one-family-out cross-validation of a calibration fit (``flopsheet validate --fit ...
--cross-validate``).

A constant fitted on a set of families is only as good as its prediction of a family it has not
seen - which is how an unpublished or held-out measurement meets it. For each family of the fit
set in turn the fit is redone on the other families and the left-out family's rows are predicted
with the values that fit found. The report sets those cross-validated errors beside the errors
with the shipped values, per family and over all rows, so a refit is adopted for the families it
would predict better, not for the rows it was fitted to.
"""
from __future__ import annotations

import numpy as np

from .errors import ScenarioError
from .validate_fit import check_names, collect, encode_fixed, fit_points, predict, solve, stats
from .validate_points import Point
from .validate_run import Validator


def cross_validate(validator: Validator, points: list[Point], names: list[str], on: str,
                   only: list[list[str]] | None = None, fixed: dict | None = None,
                   loss: str = "linear", weight: str = "row", tick=None) -> dict:
    """Leave each family of the fit set (``on``, ``only`` as for ``fit``) out in turn, fit
    ``names`` on the others and predict its rows. Returns, per family and over all rows, the
    error with the shipped values and the cross-validated error; ``tick(i, n, family)`` (if
    given) is called as the i-th of the n families' fits starts."""
    check_names(validator, names, fixed, loss, weight)
    held = dict(fixed or {})
    fixed = encode_fixed(validator, held)
    rows = collect(validator, fit_points(points, on, only))
    families = sorted(set(rows.families))
    if len(families) < 2:
        raise ScenarioError(f"--cross-validate needs a fit set of two families or more; --on "
                            f"`{on}` gives {', '.join(families) or 'no counted row'}")
    shipped_err = predict(validator, rows, fixed) / rows.measured - 1
    crossed = np.empty(len(rows))
    per_family = []
    for i, family in enumerate(families, 1):
        if tick:
            tick(i, len(families), family)
        out = np.array([f == family for f in rows.families])
        fitted = solve(validator, rows.subset(~out), names, fixed, loss, weight)
        left = rows.subset(out)
        crossed[out] = predict(validator, left, {**fixed, **fitted}) / left.measured - 1
        per_family.append({"family": family, "rows": int(out.sum()), "fitted": fitted,
                           "shipped_median_abs_error": float(np.median(np.abs(shipped_err[out]))),
                           "crossed_median_abs_error": float(np.median(np.abs(crossed[out])))})
    shipped_medians = [f["shipped_median_abs_error"] for f in per_family]
    crossed_medians = [f["crossed_median_abs_error"] for f in per_family]
    return {"names": list(names), "fixed": {n: str(v) for n, v in held.items()}, "loss": loss,
            "weight": weight, "only": only or [], "families": per_family,
            "shipped": stats(shipped_err, rows.ids), "crossed": stats(crossed, rows.ids),
            "family_median_shipped": float(np.median(shipped_medians)),
            "family_median_crossed": float(np.median(crossed_medians)),
            "families_better": int(sum(c < s for s, c in zip(shipped_medians, crossed_medians))),
            "families_worse": int(sum(c > s for s, c in zip(shipped_medians, crossed_medians))),
            "rows": [{"point": i, "family": f, "shipped": float(s), "crossed": float(c)}
                     for i, f, s, c in zip(rows.ids, rows.families, shipped_err, crossed)]}


__all__ = ["cross_validate"]
