"""Spreadsheet semantics shared by every evaluation path (numpy arrays and plain floats).

``ceil``/``floor``: the argument is first rounded to 15 significant digits, as Excel and
LibreOffice do, so ``ceil(0.1*3/0.1)`` is 3 in all three places (IEEE arithmetic alone
would give 4). Comparisons and MOD treat two doubles as equal when they differ by less
than 2^-48 of their size (LibreOffice's rtl::math::approxEqual), so Python and the
workbook branch alike on near ties.

Each function has an array form (``ss_*``, numpy, broadcasting) and a scalar form
(``s_*``, the ``math`` module: ~10x faster for one configuration). The scalar forms
compute exactly what the array forms compute; tests hold them to it.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

#: LibreOffice treats two doubles as equal when they differ by less than 2^-48 of their size.
APPROX = 2.0 ** -48
_APPROX = APPROX  # older name


def _round15(x):
    """x rounded to 15 significant digits, halves away from zero (as spreadsheets round)."""
    x = np.asarray(x, dtype=float)
    with np.errstate(all="ignore"):
        mag = np.floor(np.log10(np.abs(np.where(x == 0, 1.0, x))))
        scale = 10.0 ** (14 - mag)
        r = np.sign(x) * np.floor(np.abs(x) * scale + 0.5) / scale
    return np.where(np.isfinite(r), r, x)


def _approx_equal(a, b):
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    return (a == b) | (np.abs(a - b) < np.maximum(np.abs(a), np.abs(b)) * APPROX)


@lru_cache(maxsize=4096)
def tie_band(c: float) -> tuple[float, float] | None:
    """(lo, hi): the doubles ``a`` that equal ``c`` within 2^-48 are exactly lo <= a <= hi.

    Found by stepping one double at a time from ``c`` with the scalar test itself (the band
    is ~2^-48 of ``c`` wide, a few dozen doubles), so comparing an array with one number is
    one or two numpy comparisons instead of nine operations; NaN is in no band, as before.
    None for a non-finite ``c`` (the general path handles it).
    """
    if not math.isfinite(c):
        return None
    ends = []
    for toward in (-math.inf, math.inf):
        x = c
        for _ in range(_BAND_STEPS):
            y = math.nextafter(x, toward)
            if not s_eq(y, c):
                break
            x = y
        else:
            return None  # wider than expected (cannot happen for doubles); general path
        ends.append(x)
    return ends[0], ends[1]


_BAND_STEPS = 256


_BAND_KINDS = frozenset("iub")
_NUMBER_TYPES = frozenset({float, int, bool, np.float64, np.int64, np.bool_})


def _is_number(x) -> bool:
    t = type(x)
    return t in _NUMBER_TYPES or (t is np.ndarray and x.ndim == 0)


def _band(a, b):
    """(array, (lo, hi), swapped) when one operand is a number and the other an array of
    float64, integers or booleans (the comparison is then a threshold test; numpy converts
    the integers to float64 as the general path does), else None."""
    if type(a) is np.ndarray and a.ndim:
        if _plain(a) and _is_number(b):
            band = tie_band(float(b))
            return None if band is None else (a, band, False)
    elif type(b) is np.ndarray and b.ndim and _plain(b) and _is_number(a):
        band = tie_band(float(a))
        return None if band is None else (b, band, True)
    return None


def _plain(x) -> bool:
    return x.dtype == np.float64 or (x.dtype.kind in _BAND_KINDS and x.dtype.itemsize <= 8)


def _numbers(a, b):
    """Both operands as Python floats when both are single numbers, else None."""
    if _is_number(a) and _is_number(b):
        return float(a), float(b)
    return None


def ss_eq(a, b):
    t = _band(a, b)
    if t is not None:
        x, (lo, hi), _ = t
        return x == lo if lo == hi else (x >= lo) & (x <= hi)
    f = _numbers(a, b)
    if f is not None:  # the scalar form: the same IEEE operations on two doubles
        return np.bool_(s_eq(*f))
    return _approx_equal(a, b)


def ss_ne(a, b):
    return ~ss_eq(a, b)


def ss_lt(a, b):
    t = _band(a, b)
    if t is not None:  # below the band of b / above the band of a
        x, (lo, hi), swapped = t
        return x > hi if swapped else x < lo
    f = _numbers(a, b)
    if f is not None:
        return np.bool_(s_lt(*f))
    return (np.asarray(a) < np.asarray(b)) & ~_approx_equal(a, b)


def ss_le(a, b):
    t = _band(a, b)
    if t is not None:
        x, (lo, hi), swapped = t
        return x >= lo if swapped else x <= hi
    f = _numbers(a, b)
    if f is not None:
        return np.bool_(s_le(*f))
    return (np.asarray(a) <= np.asarray(b)) | _approx_equal(a, b)


def ss_gt(a, b):
    return ss_lt(b, a)


def ss_ge(a, b):
    return ss_le(b, a)


def ss_mod(a, b):
    """MOD with spreadsheet semantics: a - b*floor(a/b), a result within 2^-48 of a is 0."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    r = a - b * ss_floor(a / b)
    return np.where(np.abs(r) < np.abs(a) * APPROX, 0.0, r)


def _near(x, below):
    """Where x lies within rounding distance (1e-13 relative) above ``below``."""
    return (x - below) <= 1e-13 * np.maximum(np.abs(x), 1.0)


def ss_ceil(x):
    """Ceiling with spreadsheet semantics (argument rounded to 15 significant digits).

    Only arguments a hair above an integer can round down onto it, so the exact rounding
    runs on those alone (a plain ceil elsewhere: ~20x faster on large arrays). Whether
    any argument is that close is first asked with reductions (no temporaries but one).
    """
    x = np.asarray(x, dtype=float)
    c = np.ceil(x)
    if x.ndim and _none_near(x - c, x, below=False):
        return c
    near = _near(x, c - 1)
    if not near.any():
        return c
    return np.where(near, np.ceil(_round15(x)), c)


def ss_floor(x):
    """Floor with spreadsheet semantics (argument rounded to 15 significant digits)."""
    x = np.asarray(x, dtype=float)
    f = np.floor(x)
    if x.ndim and _none_near(x - f, x, below=True):
        return f
    near = _near(-x, -(f + 1))  # a hair below the next integer
    if not near.any():
        return f
    return np.where(near, np.floor(_round15(x)), f)


def _none_near(frac, x, below: bool) -> bool:
    """True when no element is within rounding distance of the integer ``_near`` asks about.

    ``frac`` is x - ceil(x) (in (-1, 0]) or x - floor(x) (in [0, 1)); an element is near
    when 1 + frac (ceil) or 1 - frac (floor) is at most 1e-13*max(|x|, 1). Asked here for
    the largest such tolerance with a factor 2 to spare for rounding, so this is a superset
    test: False sends the array through the exact per-element path. A NaN or infinity
    anywhere makes the reductions NaN and the answer False.
    """
    if not x.size:
        return False
    tol = 2e-13 * max(1.0, float(x.max()), -float(x.min()))
    if below:
        return bool(frac.max() < 1.0 - tol)
    return bool(frac.min() > tol - 1.0)


# ----------------------------------------------------------------- scalar forms
# Inputs are finite floats (the generated scalar code checks before calling); anything
# odd raises, and the caller falls back to the array path, which reports it.
def s_add(a: float, b: float) -> float:
    """a + b as a spreadsheet adds: operands that cancel to within 2^-48 give exactly 0
    (LibreOffice's rtl::math::approxAdd), not the rounding residue IEEE leaves."""
    if ((a < 0 < b) or (b < 0 < a)) and abs(a + b) < max(abs(a), abs(b)) * APPROX:
        return 0.0
    return a + b


def s_round15(x: float) -> float:
    if x == 0:
        return x
    mag = math.floor(math.log10(abs(x)))
    scale = 10.0 ** (14 - mag)
    r = math.copysign(math.floor(abs(x) * scale + 0.5) / scale, x)
    return r if math.isfinite(r) else x


def s_ceil(x: float) -> float:
    c = float(math.ceil(x))
    if (x - (c - 1)) <= 1e-13 * max(abs(x), 1.0):
        return float(math.ceil(s_round15(x)))
    return c


def s_floor(x: float) -> float:
    f = float(math.floor(x))
    if (-x + (f + 1)) <= 1e-13 * max(abs(x), 1.0):
        return float(math.floor(s_round15(x)))
    return f


# (written out rather than built on s_eq: one configuration calls these thousands of times)
def s_eq(a, b) -> bool:
    return a == b or abs(a - b) < max(abs(a), abs(b)) * APPROX


def s_ne(a, b) -> bool:
    return not (a == b or abs(a - b) < max(abs(a), abs(b)) * APPROX)


def s_lt(a, b) -> bool:
    return a < b and not (b - a < max(abs(a), abs(b)) * APPROX)


def s_le(a, b) -> bool:
    return a <= b or a - b < max(abs(a), abs(b)) * APPROX


def s_gt(a, b) -> bool:
    return a > b and not (a - b < max(abs(a), abs(b)) * APPROX)


def s_ge(a, b) -> bool:
    return a >= b or b - a < max(abs(a), abs(b)) * APPROX


def s_mod(a: float, b: float) -> float:
    r = a - b * s_floor(a / b)
    return 0.0 if abs(r) < abs(a) * APPROX else r


# ------------------------------------------------- derivatives of abs and max/min (gradients)
def s_sign(x):
    return 0.0 if x == 0 else math.copysign(1.0, x)


def s_winner(i, sign, *args):
    """1.0 if args[i] is the first maximum of sign*args, else 0.0 (derivative of max/min)."""
    vals = [sign * a for a in args]
    return 1.0 if vals.index(max(vals)) == int(i) else 0.0


def winner(i, sign, *args):
    stacked = np.stack(np.broadcast_arrays(*[sign * np.asarray(a, dtype=float) for a in args]))
    return (np.argmax(stacked, axis=0) == int(i)).astype(float)
