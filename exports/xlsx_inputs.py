"""The Inputs sheet of a workbook: every input's value cell (the defined name the formulas
use), with drop-downs for choices and bounds checked on entry."""
from __future__ import annotations

import numpy as np

from flopsheet.audit import origin as value_origin
from flopsheet.audit import value_source

from . import numfmt
from .excel import FIRST_ROW, INPUTS, LISTS
from .printer import number
from .xlsx_cells import put_number, put_text


def write_inputs(w) -> None:
    """The Inputs sheet of workbook writer ``w``: one row per input, drop-downs for choices,
    bounds checked on entry."""
    from openpyxl.worksheet.datavalidation import DataValidation
    lib, res = w.lib, w.result
    ws = w.sheet(INPUTS)
    headers = ["name", "value", "unit", "shown", "shown unit", "allowed", "from",
               "value source", "doc", "declared in", "sheet"]
    w.table(ws, "Inputs", "Leaves of the calculation graph. Edit the value column "
               "(input-styled cells, coherent base units as the unit column says); each value "
               "cell is the defined name of its input, which the formulas use.",
               headers, [26, 16, 10, 12, 8, 22, 30, 40, 60, 34, 20])
    row = FIRST_ROW
    lists: dict[tuple, DataValidation] = {}
    for f in lib.files:
        for n in f.inputs:
            inp = lib.inputs[n]
            put_text(ws, row, 1, n, bold=True)
            coord = f"B{row}"
            if inp.is_choice:
                text = inp.choices[int(np.asarray(res[n]))]
                put_text(ws, row, 2, text, named="Input")
                key = tuple(inp.choices)
                dv = lists.get(key)
                if dv is None:
                    dv = lists[key] = choice_validation(w, inp.choices)
                    ws.ws.add_data_validation(dv)
                dv.add(coord)
                allowed = " | ".join(inp.choices)
            else:
                v = res[n]
                put_number(ws, row, 2, v, named="Input", fmt=numfmt.value_format(inp, v))
                allowed = bounds_text(inp)
                dv = bounds_validation(inp)
                if dv is not None:
                    ws.ws.add_data_validation(dv)
                    dv.add(coord)
                w.display_cells(ws, row, 4, n, inp)
            w.name(ws, n, coord)
            put_text(ws, row, 3, "choice" if inp.is_choice else inp.unit)
            put_text(ws, row, 6, allowed)
            org = value_origin(lib, w.sc, n)
            put_text(ws, row, 7, "default" if org.startswith("default") else org)
            put_text(ws, row, 8, value_source(lib, w.sc, n))
            put_text(ws, row, 9, inp.doc)
            put_text(ws, row, 10, f"{inp.file}:{inp.line}")
            put_text(ws, row, 11, w.sheet_of_topic[f.topic])
            row += 1
    w.finish(ws, len(headers), row - 1)


def choice_validation(w, choices):
    from openpyxl.worksheet.datavalidation import DataValidation
    text = ",".join(choices)
    if len(text) <= 250:
        formula = f'"{text}"'
    else:  # Excel caps inline lists at 255 characters: use a range on a hidden sheet
        ws = w.sheets[LISTS] if LISTS in w.sheets else w.sheet(LISTS)
        ws.ws.sheet_state = "hidden"
        col = ws.max_col + 1
        from openpyxl.utils import get_column_letter
        for i, c in enumerate(choices, start=1):
            put_text(ws, i, col, c)
        letter = get_column_letter(col)
        formula = f"'{LISTS}'!${letter}$1:${letter}${len(choices)}"
    return DataValidation(type="list", formula1=formula, allow_blank=False,
                          showErrorMessage=True, errorTitle="Not a choice",
                          error="Pick one of the listed choices.")


def bounds_text(inp) -> str:
    lo, hi = inp.bounds
    parts = []
    if lo is not None or hi is not None:
        if lo is not None and lo == hi:
            parts.append(f"fixed at {number(lo)}")
        else:
            parts.append(f"[{'-inf' if lo is None else number(lo)}, "
                         f"{'inf' if hi is None else number(hi)}]")
    if inp.integer:
        parts.append("whole number")
    return ", ".join(parts)


def bounds_validation(inp):
    from openpyxl.worksheet.datavalidation import DataValidation
    lo, hi = inp.bounds
    if lo is None and hi is None and not inp.integer:
        return None
    kind = "whole" if inp.integer else "decimal"
    if lo is not None and hi is not None:
        dv = DataValidation(type=kind, operator="between", formula1=number(lo),
                            formula2=number(hi))
    elif lo is not None:
        dv = DataValidation(type=kind, operator="greaterThanOrEqual", formula1=number(lo))
    elif hi is not None:
        dv = DataValidation(type=kind, operator="lessThanOrEqual", formula1=number(hi))
    else:
        dv = DataValidation(type=kind, operator="between", formula1="-1E+15",
                            formula2="1E+15")
    dv.showErrorMessage = True
    dv.errorTitle = "Out of bounds"
    dv.error = f"Allowed: {bounds_text(inp)}"
    return dv
