"""Which inputs matter: rank by the effect of a *typical change* of each input,
|d out / d in| x typical change, not by elasticity alone.

An elasticity (% per %) is zero for an input whose value is zero (an overlap fraction of
0, an fp8 peak on a GPU without fp8) even when a small change of it would move the output a
lot. The typical change of an input is 10 % of its value; for a zero value, 10 % of its
allowed range when both bounds are finite, one step for a whole number, 10 % of its
library default, else one unit for a count; a quantity with a unit that is 0 here and by
default with an open range has no scale and ranks last. The effect is the first-order change of the output for that
change (exact derivative times the change), also as a fraction of the output.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: The typical change, as a fraction of a value or of a range.
STEP = 0.10


@dataclass
class Impact:
    name: str
    value: float
    change: float  # the typical change, in the input's coherent unit
    why: str  # how the change was chosen
    derivative: float
    elasticity: float | None  # None where the input or the output is 0
    effect: float  # derivative * change, output units
    relative: float | None  # effect / output, None when the output is 0


def typical_change(item, x: float) -> tuple[float, str]:
    """The change of an input a study would typically consider, and why that one."""
    if x != 0 and math.isfinite(x):
        return STEP * abs(x), "10 % of its value"
    lo, hi = getattr(item, "bounds", (None, None))
    if lo is not None and hi is not None and hi > lo:
        return STEP * (hi - lo), f"10 % of its range [{lo:g}, {hi:g}]"
    if getattr(item, "integer", False):
        return 1.0, "one step"
    d = getattr(item, "default", 0)
    if isinstance(d, (int, float)) and d != 0 and math.isfinite(d):
        return STEP * abs(d), "10 % of its default"
    if getattr(item, "unit", "1") in ("1", ""):
        return 1.0, "one unit"
    # a quantity with a unit, 0 here and by default, no bounded range: no scale to judge a
    # typical change by (one m^2 of I/O die is no typical change); ranked last, derivative shown
    return math.nan, "no scale (0 here and by default, range open)"


def impacts(lib, result, sens) -> list[Impact]:
    """Every input (and overridden node) of ``sens`` ranked by |effect|, largest first."""
    y = float(sens.value)
    out = []
    for n, d in sens.derivatives.items():
        x = float(np.asarray(result[n]))
        dx, why = typical_change(lib.item(n), x)
        eff = d * dx
        el = sens.elasticities.get(n)
        if el is not None and (x == 0 or y == 0 or not math.isfinite(el)):
            el = None
        out.append(Impact(n, x, dx, why, d, el, eff, eff / y if y else None))
    out.sort(key=lambda i: (not math.isfinite(i.effect),
                            -abs(i.effect) if math.isfinite(i.effect) else 0.0, i.name))
    return out


__all__ = ["Impact", "impacts", "typical_change", "STEP"]
