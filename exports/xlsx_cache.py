"""Cached values for the formula cells of a saved workbook.

openpyxl writes every formula with an empty value (``<f>A1*2</f><v/>``), so a viewer that
never recalculates (a file previewer, a mail client, pandas) shows blanks. This adds
Python's own value to each formula cell in the sheet XML of the saved package: numbers as
``<v>repr</v>``, text as ``t="str"``, conditions as ``t="b"``, errors as ``t="e"``. The
workbook keeps ``fullCalcOnLoad``, so Excel and LibreOffice still recalculate on opening;
the tests prove the cached values equal what LibreOffice computes.
"""
from __future__ import annotations

import math
import posixpath
import re
import zipfile
from pathlib import Path
from typing import Any, Mapping
from xml.sax.saxutils import escape

import numpy as np

#: Values that are spreadsheet errors rather than text.
ERRORS = {"#N/A", "#NUM!", "#DIV/0!", "#VALUE!", "#REF!", "#NAME?", "#NULL!"}

_NS = {"m": "http://schemas.openxmlformats.org/spreadsheetml/2006/main",
       "r": "http://schemas.openxmlformats.org/officeDocument/2006/relationships",
       "p": "http://schemas.openxmlformats.org/package/2006/relationships"}
_CELL = re.compile(r'<c r="([A-Z]+[0-9]+)"([^>]*)><f>(.*?)</f><v\s*/></c>', re.S)


def _sheet_parts(z: zipfile.ZipFile) -> dict[str, str]:
    """Sheet title -> part name in the package (``xl/worksheets/sheet3.xml``)."""
    import xml.etree.ElementTree as ET
    wb = ET.fromstring(z.read("xl/workbook.xml"))
    rels = ET.fromstring(z.read("xl/_rels/workbook.xml.rels"))
    target = {r.get("Id"): r.get("Target") for r in rels.findall("p:Relationship", _NS)}
    out = {}
    for s in wb.findall("m:sheets/m:sheet", _NS):
        t = target.get(s.get(f"{{{_NS['r']}}}id"), "")
        part = t.lstrip("/") if t.startswith("/") else posixpath.normpath("xl/" + t)
        out[s.get("name")] = part
    return out


def _encode(value: Any) -> tuple[str, str]:
    """(type attribute or "", escaped <v> text) of one cached value."""
    if isinstance(value, str):
        if value in ERRORS:
            return "e", value
        return "str", escape(value)
    a = np.asarray(value)
    if a.dtype == bool:
        return "b", "1" if bool(a) else "0"
    x = float(a)
    if not math.isfinite(x):
        return "e", "#NUM!"
    if x.is_integer() and abs(x) < 2 ** 53:
        return "", str(int(x))
    return "", repr(x)


def add_cached_values(src: Path, dst: Path, cached: Mapping[tuple[str, str], Any]) -> int:
    """Copy package ``src`` to ``dst`` with ``cached[(sheet, "B3")]`` as the cached value of
    each formula cell. Returns how many cells got one; a formula cell with no entry keeps
    an empty value (and is counted as missing by the caller's tests)."""
    by_sheet: dict[str, dict[str, Any]] = {}
    for (sheet, coord), v in cached.items():
        by_sheet.setdefault(sheet, {})[coord] = v
    n = 0
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        parts = {p: t for t, p in _sheet_parts(zin).items()}
        for info in zin.infolist():
            data = zin.read(info.filename)
            title = parts.get(info.filename)
            if title is not None and title in by_sheet:
                values = by_sheet[title]

                def fill(m, values=values):
                    nonlocal n
                    coord, attrs, f = m.group(1), m.group(2), m.group(3)
                    if coord not in values:
                        return m.group(0)
                    t, v = _encode(values[coord])
                    n += 1
                    attrs = re.sub(r'\st="[^"]*"', "", attrs)
                    tattr = f' t="{t}"' if t else ""
                    return f'<c r="{coord}"{attrs}{tattr}><f>{f}</f><v>{v}</v></c>'

                data = _CELL.sub(fill, data.decode("utf-8")).encode("utf-8")
            zout.writestr(info, data)
    return n


__all__ = ["add_cached_values", "ERRORS"]
