"""Saving a workbook: openpyxl writes the package (styles, names, validations, comments,
charts, print setup) into memory, each sheet's cells (:class:`~.xlsx_cells.Sheet`, rendered
as XML when written) go into the ``<sheetData>`` it left empty, and the result is written
atomically. Every part carries the export date as its time stamp, so the same scenario
exported on the same date gives the same bytes."""
from __future__ import annotations

import io
import posixpath
import re
import zipfile
from pathlib import Path
from typing import Mapping

from .atomic import atomic_path
from .xlsx_cells import Sheet

_NS = {"m": "http://schemas.openxmlformats.org/spreadsheetml/2006/main",
       "r": "http://schemas.openxmlformats.org/officeDocument/2006/relationships",
       "p": "http://schemas.openxmlformats.org/package/2006/relationships"}
_SHEET_DATA = re.compile(r"<sheetData\s*/>|<sheetData>.*?</sheetData>", re.S)
_DIMENSION = re.compile(r'<dimension ref="[^"]*"\s*/>')
_CORE_TIME = re.compile(r"(<dcterms:(?:created|modified)\b[^>]*>)[^<]*(</dcterms:)")


def _sheet_parts(z: zipfile.ZipFile) -> dict[str, str]:
    """Part name in the package (``xl/worksheets/sheet3.xml``) -> sheet title."""
    import xml.etree.ElementTree as ET
    wb = ET.fromstring(z.read("xl/workbook.xml"))
    rels = ET.fromstring(z.read("xl/_rels/workbook.xml.rels"))
    target = {r.get("Id"): r.get("Target") for r in rels.findall("p:Relationship", _NS)}
    out = {}
    for s in wb.findall("m:sheets/m:sheet", _NS):
        t = target.get(s.get(f"{{{_NS['r']}}}id"), "")
        part = t.lstrip("/") if t.startswith("/") else posixpath.normpath("xl/" + t)
        out[part] = s.get("name")
    return out


def _with_cells(xml: str, sheet: Sheet) -> str:
    """Sheet XML from openpyxl with ``sheet``'s cells as its sheetData."""
    parts = _SHEET_DATA.split(xml)
    if len(parts) != 2:
        raise RuntimeError(f"sheet {sheet.title!r}: expected one <sheetData> in openpyxl's XML")
    xml = parts[0] + sheet.xml() + parts[1]
    return _DIMENSION.sub(f'<dimension ref="{sheet.dimension()}" />', xml, count=1)


def save(wb, sheets: Mapping[str, Sheet], path: str | Path, date: str) -> None:
    """Write workbook ``wb`` with the cells of ``sheets`` (title -> Sheet) to ``path``
    atomically; ``date`` (ISO, the export date) stamps the parts and the document times."""
    import datetime as _dt
    day = _dt.date.fromisoformat(date)
    stamp = (max(day.year, 1980), day.month, day.day, 0, 0, 0)  # zip times start in 1980
    buf = io.BytesIO()
    wb.save(buf)
    with zipfile.ZipFile(buf) as zin, atomic_path(Path(path), suffix=".xlsx") as tmp:
        parts = _sheet_parts(zin)
        missing = set(sheets) - set(parts.values())
        if missing:
            raise RuntimeError(f"sheets not in the package: {sorted(missing)}")
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zout:
            for info in zin.infolist():
                data = zin.read(info.filename)
                title = parts.get(info.filename)
                if title in sheets:
                    data = _with_cells(data.decode("utf-8"), sheets[title]).encode("utf-8")
                elif info.filename == "docProps/core.xml":
                    data = _CORE_TIME.sub(rf"\g<1>{day.isoformat()}T00:00:00Z\g<2>",
                                          data.decode("utf-8")).encode("utf-8")
                out = zipfile.ZipInfo(info.filename, date_time=stamp)
                out.compress_type = zipfile.ZIP_DEFLATED
                out.external_attr = info.external_attr
                zout.writestr(out, data)


__all__ = ["save"]
