"""Column widths that fit the text and a print setup that fits the page width.

Widths follow the longest cell of each column (names are never cut; long prose columns
such as doc and source are capped and wrap in print), every table sheet prints landscape,
one page wide, with its title and header rows repeated on each page.
"""
from __future__ import annotations

from openpyxl.utils import get_column_letter

#: Width (characters) above which a column is capped; its cells wrap.
MAX_WIDTH = 70
NUMBER_WIDTH = 14


def _width(value) -> int:
    if value is None:
        return 0
    if isinstance(value, str):
        if value.startswith("="):
            return NUMBER_WIDTH  # a formula cell shows a number
        return max(len(line) for line in value.split("\n"))
    return NUMBER_WIDTH


def fit_columns(ws, first_row: int = 2) -> None:
    """Set each column's width to its longest cell from ``first_row`` on (row 1 holds the
    sheet title and description, which may overflow)."""
    widths: dict[int, int] = {}
    for row in ws.iter_rows(min_row=first_row):
        for c in row:
            w = _width(c.value)
            if w > widths.get(c.column, 0):
                widths[c.column] = w
    if ws.title == "About":
        widths[1] = max(widths.get(1, 0), 16)
    for col, w in widths.items():
        ws.column_dimensions[get_column_letter(col)].width = min(w + 2, MAX_WIDTH)


def print_setup(ws) -> None:
    """Landscape, fit to one page wide (as many pages tall as needed), titles repeated."""
    ws.page_setup.orientation = "landscape"
    ws.page_setup.paperSize = ws.PAPERSIZE_A4
    ws.page_setup.fitToWidth = 1
    ws.page_setup.fitToHeight = 0
    ws.sheet_properties.pageSetUpPr.fitToPage = True
    ws.print_options.gridLines = False
    ws.page_margins.left = ws.page_margins.right = 0.4
    ws.page_margins.top = ws.page_margins.bottom = 0.5
    if ws.max_row > 2 and ws.title not in ("About", "Charts"):
        ws.print_title_rows = "1:2"
    ws.oddFooter.center.text = "&A - page &P of &N"


__all__ = ["fit_columns", "print_setup"]
