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


def fit_columns(ws, first_row: int = 2) -> None:
    """Set each column's width to its longest cell from ``first_row`` on (row 1 holds the
    sheet title and description, which may overflow); ``ws`` is an xlsx_cells.Sheet."""
    widths: dict[int, int] = {}
    for r, cells in ws.rows.items():
        if r < first_row:
            continue
        for col, (_, w) in cells.items():
            w = NUMBER_WIDTH if w is None else w  # a number, or a formula showing one
            if w > widths.get(col, 0):
                widths[col] = w
    if ws.title == "About":
        widths[1] = max(widths.get(1, 0), 16)
    for col, w in widths.items():
        ws.ws.column_dimensions[get_column_letter(col)].width = min(w + 2, MAX_WIDTH)


def print_setup(sheet) -> None:
    """Landscape, fit to one page wide (as many pages tall as needed), titles repeated."""
    ws = sheet.ws
    ws.page_setup.orientation = "landscape"
    ws.page_setup.paperSize = ws.PAPERSIZE_A4
    ws.page_setup.fitToWidth = 1
    ws.page_setup.fitToHeight = 0
    ws.sheet_properties.pageSetUpPr.fitToPage = True
    ws.print_options.gridLines = False
    ws.page_margins.left = ws.page_margins.right = 0.4
    ws.page_margins.top = ws.page_margins.bottom = 0.5
    if sheet.max_row > 2 and ws.title not in ("About", "Charts"):
        ws.print_title_rows = "1:2"
    ws.oddFooter.center.text = "&A - page &P of &N"


__all__ = ["fit_columns", "print_setup"]
