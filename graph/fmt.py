"""Human-readable numbers: engineering notation in the domain's units, and tables.

One rule picks the unit a value is shown in, for the terminal, the workbook's
``shown`` column, plots and the report alike (:func:`pick_unit`): a declared
``display:`` unit wins (``%`` for fractions, ``GiB`` for memory); otherwise the
coherent unit with the SI prefix that puts the number in [1, 1000), with the
names people use: W for J/s, kWh/MWh for energy, B for bytes, min/h/d for long
times, USD with thousands separators.
"""
from __future__ import annotations

import math
import re

import numpy as np

from . import units

_SI = {-24: "y", -21: "z", -18: "a", -15: "f", -12: "p", -9: "n", -6: "µ", -3: "m", 0: "",
       3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E", 21: "Z", 24: "Y"}
_BIN = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
_TIME = [(365.25 * 86400, "yr"), (86400, "d"), (3600, "h"), (60, "min")]
#: Coherent unit text (units.dim_str) -> the name people use for it.
_NAMES = {"J/s": "W", "J/s/USD": "W/USD"}
#: output formats of the commands that print tables (`--format`)
FORMATS = ("table", "json", "csv", "markdown")
_ENERGY = [(3.6e12, "GWh"), (3.6e9, "MWh"), (3.6e6, "kWh")]


def _num(x: float, digits: int = 4) -> str:
    s = f"{x:.{digits}g}"
    return s if "e" not in s else f"{x:.{digits - 1}e}"


def eng(x: float, unit: str, digits: int = 4) -> str:
    """``x`` with an SI prefix on ``unit`` so the mantissa is in [1, 1000)."""
    e3, _ = _prefix(x, digits)
    return f"{_num(x / 10 ** e3, digits)} {_SI[e3]}{unit}".rstrip()


def _prefix(x: float, digits: int = 4) -> tuple[int, str]:
    if x == 0 or not math.isfinite(x):
        return 0, ""
    e3 = int(math.floor(math.log10(abs(x)) / 3) * 3)
    e3 = max(min(e3, 24), -24)
    if abs(float(_num(x / 10 ** e3, digits))) >= 1000 and e3 < 24:  # rounding carried
        e3 += 3
    return e3, _SI[e3]


def unit_name(dim) -> str:
    """The coherent unit of ``dim`` as people write it (W, not J/s; B, not byte)."""
    s = units.dim_str(dim)
    s = _NAMES.get(s, s)
    return re.sub(r"\bbyte\b", "B", s)


def pick_unit(x: float, dim, display: str | None = None) -> tuple[str, float]:
    """The unit to show ``x`` (coherent units of ``dim``) in, and its factor: the value
    shown is ``x / factor``. Returns ``("", 1.0)`` for plain numbers."""
    if display:
        return display, float(units.parse_unit(display)[1])
    if dim is None or dim == units.DIMENSIONLESS or dim == units.BOOL:
        return "", 1.0
    base = units.dim_str(dim)
    ax = abs(x) if math.isfinite(x) else 0.0
    if base == "s" and ax >= 60:
        for factor, name in _TIME:
            if ax >= factor:
                return name, factor
    if base == "byte" and ax >= 1024:
        k = min(int(math.log(ax, 1024)), len(_BIN) - 1)
        return f"{_BIN[k]}B", float(1024 ** k)
    if base == "J" and ax >= 3.6e6:
        for factor, name in _ENERGY:
            if ax >= factor:
                return name, factor
    if base == "USD":
        return "USD", 1.0
    if base in ("byte", "token", "FLOP") and ax < 1:  # counted things: 0.2 B, not 200 mB
        return unit_name(dim), 1.0
    name = unit_name(dim)
    if base.startswith("1/") or name == "1":
        return name, 1.0
    e3, p = _prefix(x)
    return f"{p}{name}", float(10 ** e3)


def format_value(x, dim=None, display: str | None = None, digits: int = 4,
                 labels: dict | None = None) -> str:
    """Format a value held in coherent units of ``dim`` for people.

    ``labels`` maps whole-number codes to names (a node's ``labels:``), so a
    categorical result prints as ``ring``, not ``1``."""
    if dim == units.BOOL:
        return "yes" if bool(np.asarray(x)) else "no"
    x = float(np.asarray(x))
    if labels and x.is_integer() and int(x) in labels:
        return str(labels[int(x)])
    unit, factor = pick_unit(x, dim, display)
    y = x / factor
    if unit == "%":
        return f"{y:.1f} %" if abs(y) >= 0.1 or y == 0 else f"{_num(y, 2)} %"
    if unit == "USD":
        return f"{y:,.0f} USD" if abs(y) >= 100 else f"{y:,.2f} USD"
    if not unit:
        if x == int(x) and abs(x) < 1e6:
            return f"{int(x):,}" if abs(x) >= 1e4 else str(int(x))
        if x == 0 or 1e-3 <= abs(x) < 1e6:
            return _num(x, digits)
        e3 = int(math.floor(math.log10(abs(x)) / 3) * 3)
        return f"{_num(x / 10 ** e3, digits)}e{e3}"
    if display and 1e4 <= abs(y) < 1e12:
        return f"{y:,.0f} {unit}"
    return f"{_num(y, digits)} {unit}"


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


def markdown(rows: list[list[str]], headers: list[str], right: set[int] = frozenset()) -> str:
    """A GitHub-flavoured Markdown table (``|`` in cells escaped)."""
    def cell(c):
        return str(c).replace("|", "\\|").replace("\n", " ")
    align = ["---:" if i in right else "---" for i in range(len(headers))]
    out = ["| " + " | ".join(cell(h) for h in headers) + " |", "| " + " | ".join(align) + " |"]
    out += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def csv_text(rows: list[list], headers: list[str]) -> str:
    """CSV (RFC 4180 quoting) of a table."""
    import csv
    import io
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(headers)
    w.writerows(rows)
    return buf.getvalue()
