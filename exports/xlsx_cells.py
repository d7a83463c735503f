"""The cells of one worksheet, kept as ready-made sheet XML: text that stays text (never a
formula, whatever its first character), numbers as Excel stores them, formulas with Python's
value as their cached value, and cell styles.

openpyxl would build a Cell object per cell and serialise each through ElementTree, which
was most of an export's time; the exporter's cells are of three simple kinds, so each is
rendered to its ``<c>`` element when it is written. openpyxl still writes everything else of
the package (styles, names, validations, comments, charts, print setup), and
:mod:`flopsheet.exports.xlsx_package` puts these cells into the sheets it wrote.

Cached values: openpyxl would write every formula with an empty value, so a viewer that
never recalculates (a file previewer, a mail client, pandas) would show blanks. Each formula
cell here carries Python's own value: numbers as ``<v>repr</v>``, text as ``t="str"``,
conditions as ``t="b"``, errors as ``t="e"``. The workbook keeps ``fullCalcOnLoad``, so Excel
and LibreOffice still recalculate on opening; the tests prove the cached values equal what
LibreOffice computes.
"""
from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

MAX_TEXT = 32767  # Excel's limit for one cell's text

#: Values that are spreadsheet errors rather than text.
ERRORS = {"#N/A", "#NUM!", "#DIV/0!", "#VALUE!", "#REF!", "#NAME?", "#NULL!"}

_ILLEGAL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")  # not allowed in XML 1.0


def _xml_text(s: str) -> str:
    """``s`` escaped as XML character data (``&``, ``<``, ``>``)."""
    if "&" in s:
        s = s.replace("&", "&amp;")
    if "<" in s:
        s = s.replace("<", "&lt;")
    if ">" in s:
        s = s.replace(">", "&gt;")
    return s


def _cell_number(v) -> int | float | bool:
    a = np.asarray(v)
    if a.dtype == bool:
        return bool(a)
    x = float(a)
    if x.is_integer() and abs(x) < 2 ** 53:
        return int(x)
    return x


def _encode(value: Any) -> tuple[str, str]:
    """(type attribute or "", escaped <v> text) of a number, condition, text or error."""
    if isinstance(value, str):
        if value in ERRORS:
            return "e", value
        return "str", _xml_text(_ILLEGAL.sub("\ufffd", value))
    if isinstance(value, float):  # np.float64 too
        x = float(value)
    elif isinstance(value, (bool, np.bool_)) or np.asarray(value).dtype == bool:
        return "b", "1" if bool(value) else "0"
    else:
        x = float(np.asarray(value))
    if not math.isfinite(x):
        return "e", "#NUM!"
    if x.is_integer() and abs(x) < 2 ** 53:
        return "", str(int(x))
    return "", repr(x)  # the shortest text that reads back as the same double


class Styles:
    """Cell style -> index in the workbook's style table (openpyxl's own tables, so the
    styles.xml it writes lists every style the cells use)."""

    def __init__(self, wb):
        from openpyxl.worksheet.worksheet import Worksheet
        self._scratch = Worksheet(wb)  # never added to the workbook; carries style lookups
        self._ids: dict[tuple, int] = {}

    def id(self, named=None, fmt=None, bold=False, font=None, fill=None, wrap=False) -> int:
        key = (named, fmt, bold, font, fill, wrap)
        sid = self._ids.get(key)
        if sid is None:
            from openpyxl.cell.cell import Cell
            from openpyxl.styles import Alignment, Font
            c = Cell(self._scratch)
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
            sid = self._ids[key] = c.style_id if c.has_style else 0
        return sid


_LETTERS: dict[int, str] = {}


def column_letter(col: int) -> str:
    """Column 1 -> "A", 28 -> "AB"."""
    s = _LETTERS.get(col)
    if s is None:
        n, s = col, ""
        while n:
            n, r = divmod(n - 1, 26)
            s = chr(65 + r) + s
        _LETTERS[col] = s
    return s


class Sheet:
    """One worksheet: the openpyxl worksheet ``ws`` (views, columns, validations, comments,
    charts, print setup) and its cells as XML, ``rows[row][col] = (xml, width)`` where
    width is the characters the cell needs (text: its longest line; numbers: None)."""

    def __init__(self, ws, styles: Styles):
        self.ws, self.title, self._styles = ws, ws.title, styles
        self.rows: dict[int, dict[int, tuple[str, int | None]]] = {}

    def _put(self, row: int, col: int, body: str, width, style) -> str:
        coord = f"{column_letter(col)}{row}"
        sid = self._styles.id(**style) if style else 0
        s = f' s="{sid}"' if sid else ""
        self.rows.setdefault(row, {})[col] = (f'<c r="{coord}"{s}{body}</c>', width)
        return coord

    def text(self, row: int, col: int, text: Any, **style) -> str:
        """Text that stays text (an inline string): never a formula, whatever it starts with."""
        s = _ILLEGAL.sub("\ufffd", str(text))
        if len(s) > MAX_TEXT:
            s = s[: MAX_TEXT - 1] + "\u2026"
        if not s:  # an empty text is no value: only the style remains
            return self._put(row, col, ">", 0, style)
        space = ' xml:space="preserve"' if s != s.strip() else ""
        width = max(len(line) for line in s.split("\n"))
        return self._put(row, col, f' t="inlineStr"><is><t{space}>{_xml_text(s)}</t></is>',
                         width, style)

    def number(self, row: int, col: int, value, **style) -> str:
        t, v = _encode(_cell_number(value))
        t = f' t="{t}"' if t else ""
        return self._put(row, col, f"{t}><v>{v}</v>", None, style)

    def formula(self, row: int, col: int, formula: str, cached, **style) -> str:
        """``=formula`` with ``cached`` (Python's value of it) as its cached value."""
        if _ILLEGAL.search(formula):
            raise ValueError(f"formula holds a character XML cannot: {formula[:80]!r}")
        t, v = _encode(cached)
        t = f' t="{t}"' if t else ""
        return self._put(row, col, f"{t}><f>{_xml_text(formula)}</f><v>{v}</v>", None, style)

    def comment(self, row: int, col: int, text: str) -> None:
        """A note on the cell (openpyxl writes the comment parts; the cell stays ours)."""
        from openpyxl.comments import Comment
        self.ws.cell(row=row, column=col).comment = Comment(text, "flopsheet")

    @property
    def max_row(self) -> int:
        return max(self.rows, default=0)

    @property
    def max_col(self) -> int:
        return max((max(r) for r in self.rows.values() if r), default=0)

    def dimension(self) -> str:
        if not self.rows:
            return "A1:A1"
        lo = min(min(r) for r in self.rows.values() if r)
        return f"{column_letter(lo)}{min(self.rows)}:{column_letter(self.max_col)}{self.max_row}"

    def xml(self) -> str:
        """The ``<sheetData>`` element: rows in order, each row's cells by column."""
        out = ["<sheetData>"]
        for r in sorted(self.rows):
            cells = self.rows[r]
            out.append(f'<row r="{r}">')
            out.extend(cells[c][0] for c in sorted(cells))
            out.append("</row>")
        out.append("</sheetData>")
        return "".join(out)


def put_text(ws: Sheet, row: int, col: int, text: Any, **style) -> str:
    """Write text that stays text: never a formula, whatever its first character."""
    return ws.text(row, col, text, **style)


def put_number(ws: Sheet, row: int, col: int, value: float, **style) -> str:
    return ws.number(row, col, value, **style)


__all__ = ["Sheet", "Styles", "put_text", "put_number", "ERRORS", "MAX_TEXT"]
