"""Writing one cell: text that stays text (never a formula, whatever its first character),
formulas, numbers as Excel stores them, and cell styles."""
from __future__ import annotations

import re
from typing import Any

import numpy as np

MAX_TEXT = 32767  # Excel's limit for one cell's text


_ILLEGAL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")


def put_text(ws, row: int, col: int, text: Any, **style):
    """Write text that stays text: never a formula, whatever its first character."""
    s = _ILLEGAL.sub("\ufffd", str(text))
    if len(s) > MAX_TEXT:
        s = s[: MAX_TEXT - 1] + "\u2026"
    c = ws.cell(row=row, column=col)
    c.value = s
    c.data_type = "s"  # openpyxl made `=...` a formula; a text cell it is
    _style(c, **style)
    return c


def put_formula(ws, row: int, col: int, formula: str, **style):
    c = ws.cell(row=row, column=col)
    c.value = "=" + formula
    _style(c, **style)
    return c


def put_number(ws, row: int, col: int, value: float, **style):
    c = ws.cell(row=row, column=col)
    c.value = _cell_number(value)
    _style(c, **style)
    return c


def _cell_number(v) -> int | float | bool:
    a = np.asarray(v)
    if a.dtype == bool:
        return bool(a)
    x = float(a)
    if x.is_integer() and abs(x) < 2 ** 53:
        return int(x)
    return x


def _style(c, *, named=None, fmt=None, bold=False, font=None, fill=None, wrap=False):
    from openpyxl.styles import Alignment, Font
    if named:
        c.style = named
    if fmt:
        c.number_format = fmt
    if bold:
        c.font = Font(bold=True)
    if font is not None:
        c.font = font
    if fill is not None:
        c.fill = fill
    if wrap:
        c.alignment = Alignment(wrap_text=True, vertical="top")
