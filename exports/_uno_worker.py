"""Recalculate spreadsheets in headless LibreOffice; a helper process for flopsheet.

This file runs under the interpreter that has LibreOffice's ``uno`` module
(Debian's ``python3-uno`` belongs to ``/usr/bin/python3``), never inside
flopsheet's own environment, so it imports nothing from flopsheet and only the
standard library besides ``uno``.

Usage: ``/usr/bin/python3 _uno_worker.py SOFFICE PROFILE_DIR PIPE_NAME``.
It starts ``soffice --headless`` with a private profile, connects over a named
pipe, prints one JSON line ``{"ok": true, ...}`` when ready, then answers one
JSON request per input line with one JSON response line:

``{"cmd": "recalc", "path": P, "set": {name: value}, "save_as": Q, "formulas": bool,
"sheets": [title, ...]}``
    load workbook P, write the given values into the cells of those defined
    names (numbers with setValue, text with setString), call ``calculateAll()``
    (LibreOffice may otherwise trust the cached values of an .xlsx), read every
    defined name's cell back, optionally store the recalculated workbook as
    .xlsx at Q, close it. Response: ``{"ok": true, "values": {name: cell}}``
    with ``cell`` one of ``{"v": number}``, ``{"s": text}``,
    ``{"err": code, "s": shown}`` or ``{"empty": true}`` (and ``"f"``, the
    formula as LibreOffice shows it, when ``formulas`` is set), and ``"sheets"``:
    the used area of each listed sheet as rows of values.
``{"cmd": "quit"}``
    close LibreOffice and exit.

Errors are answered as ``{"ok": false, "error": text}``; the process stays up.
soffice is started in this process's process group, so the parent can end
both with one ``killpg`` of the group it created.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time
import traceback
import xml.etree.ElementTree as ET
import zipfile

uno = PropertyValue = NoConnectException = None  # bound by _import_uno(): importing this
# module elsewhere (documentation tools, test collectors) must not need LibreOffice


def _import_uno():
    global uno, PropertyValue, NoConnectException
    import uno as _uno  # provided by LibreOffice (python3-uno)
    from com.sun.star.beans import PropertyValue as _pv
    from com.sun.star.connection import NoConnectException as _nce
    uno, PropertyValue, NoConnectException = _uno, _pv, _nce

CONNECT_TIMEOUT = float(os.environ.get("FLOPSHEET_LO_START_TIMEOUT", "90"))

# com.sun.star.sheet.FormulaResult constants
_RESULT_VALUE, _RESULT_STRING, _RESULT_ERROR = 1, 2, 4


def _props(**kw):
    out = []
    for k, v in kw.items():
        p = PropertyValue()
        p.Name, p.Value = k, v
        out.append(p)
    return tuple(out)


def _send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _start(soffice, profile, pipe):
    cmd = [soffice, "--headless", "--invisible", "--nologo", "--norestore", "--nodefault",
           "--nolockcheck", "--nofirststartwizard",
           "-env:UserInstallation=" + uno.systemPathToFileUrl(os.path.abspath(profile)),
           "--accept=pipe,name=%s;urp;StarOffice.ComponentContext" % pipe]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    local = uno.getComponentContext()
    resolver = local.ServiceManager.createInstanceWithContext(
        "com.sun.star.bridge.UnoUrlResolver", local)
    deadline = time.monotonic() + CONNECT_TIMEOUT
    while True:
        try:
            ctx = resolver.resolve(
                "uno:pipe,name=%s;urp;StarOffice.ComponentContext" % pipe)
            break
        except NoConnectException:
            if proc.poll() is not None:
                raise RuntimeError("soffice exited with code %s before accepting a connection"
                                   % proc.returncode)
            if time.monotonic() > deadline:
                raise RuntimeError("soffice did not accept a connection within %.0f s"
                                   % CONNECT_TIMEOUT)
            time.sleep(0.1)
    desktop = ctx.ServiceManager.createInstanceWithContext("com.sun.star.frame.Desktop", ctx)
    return proc, desktop


def _cell_of(doc, name):
    ranges = doc.NamedRanges
    if not ranges.hasByName(name):
        raise KeyError("the workbook has no defined name `%s`" % name)
    return ranges.getByName(name).getReferredCells().getCellByPosition(0, 0)


def _read(cell, formulas):
    kind = cell.getType().value  # EMPTY, VALUE, TEXT, FORMULA
    out = {}
    if kind == "EMPTY":
        out["empty"] = True
    elif kind == "VALUE":
        out["v"] = cell.getValue()
    elif kind == "TEXT":
        out["s"] = cell.getString()
    else:
        err = cell.getError()
        rtype = cell.FormulaResultType2
        if err or rtype == _RESULT_ERROR:
            out["err"] = int(err)
            out["s"] = cell.getString()
        elif rtype == _RESULT_STRING:
            out["s"] = cell.getString()
        else:
            out["v"] = cell.getValue()
        if formulas:
            out["f"] = cell.getFormula()
    return out


_REF = re.compile(r"^(?:'((?:[^']|'')+)'|([^'!]+))!\$?([A-Z]{1,3})\$?([0-9]+)$")


def _xlsx_names(path):
    """Defined names of an .xlsx that point at one cell: name -> (sheet, col, row), 0-based.
    Read from the file itself: asking LibreOffice name by name costs a bridge call each."""
    out = {}
    try:
        with zipfile.ZipFile(path) as z:
            root = ET.fromstring(z.read("xl/workbook.xml"))
    except (OSError, KeyError, zipfile.BadZipFile, ET.ParseError):
        return None
    ns = root.tag[: root.tag.index("}") + 1] if root.tag.startswith("{") else ""
    for dn in root.iter(ns + "definedName"):
        if dn.get("localSheetId") is not None:
            continue
        m = _REF.match((dn.text or "").strip())
        if not m:
            continue
        sheet = (m.group(1) or "").replace("''", "'") or m.group(2)
        col = 0
        for ch in m.group(3):
            col = col * 26 + ord(ch) - 64
        out[dn.get("name")] = (sheet, col - 1, int(m.group(4)) - 1)
    return out


def _read_names(doc, path, formulas):
    """Every defined name's cell: one data-array call per sheet, cell calls only where a
    value needs a closer look (text, errors, formulas)."""
    names = _xlsx_names(path)
    values = {}
    ranges = doc.NamedRanges
    if names is None:
        names = {}
    by_sheet = {}
    for name, (sheet, col, row) in names.items():
        by_sheet.setdefault(sheet, []).append((name, col, row))
    sheets = doc.getSheets()
    for title, items in by_sheet.items():
        if not sheets.hasByName(title):
            continue
        sheet = sheets.getByName(title)
        last_col = max(c for _, c, _ in items)
        last_row = max(r for _, _, r in items)
        area = sheet.getCellRangeByPosition(0, 0, last_col, last_row)
        data = area.getDataArray()
        for name, col, row in items:
            v = data[row][col]
            if isinstance(v, float) and not formulas:
                values[name] = {"v": v}
            else:
                values[name] = _read(area.getCellByPosition(col, row), formulas)
    for name in ranges.getElementNames():  # names the file parse did not cover
        if name in values:
            continue
        try:
            cell = ranges.getByName(name).getReferredCells().getCellByPosition(0, 0)
        except Exception:  # a name that refers to no cell range
            continue
        values[name] = _read(cell, formulas)
    return values


def _sheet_values(doc, title):
    """The used area of one sheet as rows of numbers, texts, None (empty) and
    ``{"err": code}`` (error cells)."""
    sheets = doc.getSheets()
    if not sheets.hasByName(title):
        raise KeyError("the workbook has no sheet `%s`" % title)
    sheet = sheets.getByName(title)
    cursor = sheet.createCursor()
    cursor.gotoEndOfUsedArea(False)
    end = cursor.getRangeAddress()
    area = sheet.getCellRangeByPosition(0, 0, end.EndColumn, end.EndRow)
    data = area.getDataArray()
    rows = []
    for r, line in enumerate(data):
        out = []
        for c, v in enumerate(line):
            if isinstance(v, str):
                cell = area.getCellByPosition(c, r)
                kind = cell.getType().value
                if kind == "EMPTY":
                    v = None
                elif kind == "FORMULA" and cell.getError():
                    v = {"err": int(cell.getError())}
            out.append(v)
        rows.append(out)
    return rows


def _recalc(desktop, req):
    url = uno.systemPathToFileUrl(os.path.abspath(req["path"]))
    doc = desktop.loadComponentFromURL(url, "_blank", 0, _props(Hidden=True))
    if doc is None:
        raise RuntimeError("LibreOffice could not open %s" % req["path"])
    try:
        for name, value in (req.get("set") or {}).items():
            cell = _cell_of(doc, name)
            if isinstance(value, str):
                cell.setString(value)
            else:
                cell.setValue(float(value))
        doc.calculateAll()
        values = _read_names(doc, req["path"], bool(req.get("formulas")))
        sheets = {}
        for title in req.get("sheets") or []:
            sheets[title] = _sheet_values(doc, title)
        if req.get("save_as"):
            out = uno.systemPathToFileUrl(os.path.abspath(req["save_as"]))
            doc.storeToURL(out, _props(FilterName="Calc MS Excel 2007 XML"))
        return {"ok": True, "values": values, "sheets": sheets}
    finally:
        doc.close(True)


def main():
    soffice, profile, pipe = sys.argv[1:4]
    proc = None
    desktop = None
    try:
        _import_uno()
        proc, desktop = _start(soffice, profile, pipe)
        _send({"ok": True, "ready": True})
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                req = json.loads(line)
                if req.get("cmd") == "quit":
                    break
                if req.get("cmd") != "recalc":
                    raise ValueError("unknown command %r" % req.get("cmd"))
                _send(_recalc(desktop, req))
            except Exception as e:  # answer and keep serving
                _send({"ok": False, "error": "%s: %s" % (type(e).__name__, e),
                       "trace": traceback.format_exc()})
    except Exception as e:
        _send({"ok": False, "error": "%s: %s" % (type(e).__name__, e)})
    finally:
        if desktop is not None:
            try:
                desktop.terminate()
            except Exception:
                pass
        if proc is not None:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        # the profile folder is this helper's alone; remove it even if the parent is gone
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    main()
