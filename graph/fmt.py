"""Human-readable numbers: engineering notation with units, and aligned tables."""
from __future__ import annotations

import math
import re

import numpy as np

from . import units

_SI = {-24: "y", -21: "z", -18: "a", -15: "f", -12: "p", -9: "n", -6: "µ", -3: "m", 0: "",
       3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E", 21: "Z", 24: "Y"}
_BIN = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
_TIME = [(365.25 * 86400, "yr"), (86400, "d"), (3600, "h"), (60, "min")]


def _num(x: float, digits: int = 4) -> str:
    s = f"{x:.{digits}g}"
    return s if "e" not in s else f"{x:.{digits - 1}e}"


def eng(x: float, unit: str, digits: int = 4) -> str:
    """``x`` with an SI prefix on ``unit`` so the mantissa is in [1, 1000)."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g} {unit}".rstrip()
    e3 = int(math.floor(math.log10(abs(x)) / 3) * 3)
    e3 = max(min(e3, 24), -24)
    m = x / 10 ** e3
    if abs(float(_num(m, digits))) >= 1000 and e3 < 24:  # rounding carried to 1000
        e3 += 3
        m = x / 10 ** e3
    return f"{_num(m, digits)} {_SI[e3]}{unit}".rstrip()


def format_value(x, dim=None, display: str | None = None, digits: int = 4) -> str:
    """Format a value held in coherent units of ``dim`` for people."""
    if dim == units.BOOL:
        return "yes" if bool(np.asarray(x)) else "no"
    x = float(np.asarray(x))
    if display:
        _, factor = units.parse_unit(display)
        y = x / factor
        return f"{y:,.0f} {display}" if 1e4 <= abs(y) < 1e12 else f"{_num(y, digits)} {display}"
    if dim is None or dim == units.DIMENSIONLESS:
        if x == int(x) and abs(x) < 1e6:
            return str(int(x))
        if x == 0 or 1e-3 <= abs(x) < 1e6:
            return _num(x, digits)
        e3 = int(math.floor(math.log10(abs(x)) / 3) * 3)
        return f"{_num(x / 10 ** e3, digits)}e{e3}"
    if dim == units.parse_unit("s")[0] and abs(x) >= 60:
        for factor, name in _TIME:
            if abs(x) >= factor:
                return f"{_num(x / factor, digits)} {name}"
    if dim == units.parse_unit("byte")[0] and abs(x) >= 1024:
        k = min(int(math.log(abs(x), 1024)), len(_BIN) - 1)
        return f"{_num(x / 1024 ** k, digits)} {_BIN[k]}B"
    # bytes read better as B in compound units: 1.6 TB/s, 3 GB per token
    return eng(x, re.sub(r"\bbyte\b", "B", units.dim_str(dim)), digits)


def table(rows: list[list[str]], headers: list[str], right: set[int] = frozenset()) -> str:
    """Columns aligned to their widest cell; ``right`` holds right-aligned column numbers."""
    cols = list(zip(*([headers] + rows))) if rows else [[h] for h in headers]
    widths = [max(len(str(c)) for c in col) for col in cols]

    def line(cells):
        out = []
        for i, c in enumerate(cells):
            c = str(c)
            out.append(c.rjust(widths[i]) if i in right else c.ljust(widths[i]))
        return "  ".join(out).rstrip()

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), sep] + [line(r) for r in rows])
