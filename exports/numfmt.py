"""Excel number formats chosen from a quantity's unit and magnitude, never from the exact
exported value (so an edited input never shows ``0`` because the old value was whole).

* the ``value`` column holds coherent base units at full precision: percent for fractions
  declared ``display: "%"``, grouped integers for whole-number inputs, engineering notation
  (``##0.000E+0``, exponent a multiple of 3) outside [1e-3, 1e6), else four decimals at most;
* the ``shown`` column divides by the unit :func:`flopsheet.fmt.pick_unit` picks (the
  declared display unit, or the SI prefix that suits the magnitude: ms, GiB, TFLOP/s, MWh)
  and carries the unit in its format: ``#,##0.00" ms"``.
"""
from __future__ import annotations

import math

import numpy as np

from flopsheet import units
from flopsheet.fmt import pick_unit

GENERAL = "General"
PERCENT = "0.0%"
INT = "#,##0"
ENG = "##0.000E+0"
DECIMAL = "#,##0.0###"


def _scalar(v) -> float | None:
    a = np.asarray(v)
    if a.dtype == bool or a.dtype.kind in "USO":
        return None
    return float(a)


def value_format(item, value) -> str:
    """Format of a base-unit value cell of input/node ``item``."""
    dim = getattr(item, "dim", None)
    x = _scalar(value)
    if x is None or dim == units.BOOL or getattr(item, "is_choice", False):
        return GENERAL
    if getattr(item, "display", None) == "%":
        return PERCENT
    if getattr(item, "integer", False):
        return INT
    if getattr(item, "labels", None):
        return "0"
    if x == 0 or not math.isfinite(x):
        return GENERAL
    if 1e-3 <= abs(x) < 1e6:
        return DECIMAL
    return ENG


def _quoted(unit: str) -> str:
    return '" ' + unit.replace('"', "") + '"'


def shown(item, value) -> tuple[str, float, str] | None:
    """``(unit, factor, format)`` of the ``shown`` cell (``value / factor``), or None when the
    value reads as it is (plain numbers, conditions, choices, labelled codes)."""
    dim = getattr(item, "dim", None)
    x = _scalar(value)
    if (x is None or dim == units.BOOL or getattr(item, "is_choice", False)
            or getattr(item, "labels", None)):
        return None
    unit, factor = pick_unit(x, dim, getattr(item, "display", None))
    if not unit:
        return None
    if unit == "%":
        return unit, factor, '0.0" %"'
    if unit == "USD":
        return unit, factor, '#,##0" USD"'
    y = abs(x / factor)
    body = "#,##0.00" if y == 0 or y >= 1 else "0.000##"
    return unit, factor, body + _quoted(unit)


__all__ = ["value_format", "shown", "PERCENT", "INT", "ENG", "DECIMAL", "GENERAL"]
