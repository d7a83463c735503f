"""Excel workbooks with live formulas: one sheet per formula file, every quantity a formula.

Layout (sheet order):

``Outputs``
    the scenario's reported quantities, each ``=node`` pointing at its node,
    with unit, a display-unit column and a description. Opened first.
``Inputs``
    one row per input: name, value (a cell carrying the workbook-level defined
    name equal to the input's name, input-styled, drop-down for choices,
    validation for bounds), unit, allowed values, where the value came from
    (default / preset file:line / ``--set``), the value's citation, doc, and
    where the input is declared.
one sheet per formula file (``model-transformer``, ...)
    one row per node: name, value (a **live formula** in terms of defined
    names, e.g. ``=layers*params_per_layer+embedding_params``; the cell is
    named after the node), unit, display value, the formula as written in the
    YAML, doc, source, declaration. A node the scenario overrides becomes an
    input-styled number with a comment quoting the formula it replaced.
``Sensitivity``
    elasticities of the main outputs with respect to every input, as **live
    formulas**: exact derivatives chained over the graph on two helper sheets,
    ``Partials`` (one row per edge: d node / d dependency, printed from sympy)
    and ``Adjoints`` (reverse-mode accumulation, one column per output).
``About``
    flopsheet version, scenario, presets, formula-library hash, date, and how
    to recalculate.

All values are in coherent base units (s, byte, FLOP, token, USD, ...); the
unit column says which. Text cells are always stored as text, never as
formulas, whatever they start with (``=``, ``+``, ``-``, ``@``): a hostile
``doc:`` cannot inject a formula.
"""
from __future__ import annotations

import datetime as _dt
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from flopsheet import __version__, units
from flopsheet.atomic import check_target
from flopsheet.audit import origin as value_origin
from flopsheet.errors import FlopsheetError
from flopsheet.evaluate import Model, Result
from flopsheet.library import Library
from flopsheet.scenario import Scenario, resolve

from . import numfmt
from .printer import ExcelPrintError, check_choices, number, print_tree
from .xlsx_cells import Sheet, Styles, _cell_number, put_number, put_text
from .xlsx_textcache import TextCache
from .xlsx_ties import near_ties

#: Sheet names the exporter uses itself (formula sheets never take them).
OUTPUTS, INPUTS, SENSITIVITY, PARTIALS, ADJOINTS, ABOUT = (
    "Outputs", "Inputs", "Sensitivity", "Partials", "Adjoints", "About")
LISTS, CHARTS = "Lists", "Charts"
RESERVED_SHEETS = {OUTPUTS, INPUTS, SENSITIVITY, PARTIALS, ADJOINTS, ABOUT, LISTS, CHARTS,
                   "History"}

#: The Sensitivity sheet covers at most this many outputs (the first of the Outputs sheet).
MAX_SENSITIVITY_OUTPUTS = 40

#: First data row of the table sheets (row 1: title, row 2: headers).
FIRST_ROW = 3


RECALC_HELP = (
    "Excel: the workbook is flagged to recalculate fully when opened; force it with "
    "Ctrl+Alt+F9. LibreOffice Calc: Data > Calculate > Recalculate Hard (Ctrl+Shift+F9), or "
    "set Tools > Options > LibreOffice Calc > Formula > Recalculation on file load: Always. "
    "Edit the yellow Input cells (base units, see the unit column); every other number is a "
    "formula. Re-run the edited inputs in Python: flopsheet import-xlsx THIS.xlsx -o "
    "edited.yaml && flopsheet run edited.yaml")


class ExcelExportError(FlopsheetError):
    """The scenario cannot be exported as a workbook (e.g. arrays of values)."""


@dataclass
class ExportInfo:
    """What was written: the path, sheet names and where each named value lives."""

    path: Path
    sheets: list[str]
    cells: dict[str, tuple[str, str]]  # defined name -> (sheet, "B3")
    result: Result
    outputs: list[str]
    sensitivity_outputs: list[str]
    formulas: int = 0
    snapshots: list[str] = field(default_factory=list)  # derivatives written as numbers
    near_ties: dict[str, str] = field(default_factory=dict)  # node -> why (see near_ties)
    cached: dict[tuple[str, str], Any] = field(default_factory=dict)  # (sheet, cell) -> value


# --------------------------------------------------------------------- helpers
def sheet_names(lib: Library) -> dict[str, str]:
    """Formula file topic -> sheet name: at most 31 characters, unique (case-insensitively),
    none of Excel's forbidden characters, never one of the exporter's own sheet names."""
    used = {s.lower() for s in RESERVED_SHEETS}
    out = {}
    for f in lib.files:
        base = re.sub(r"[\[\]:*?/\\]", "-", f.topic).strip("'") or "sheet"
        name = base[:31]
        k = 2
        while name.lower() in used:
            suffix = f"~{k}"
            name = base[: 31 - len(suffix)] + suffix
            k += 1
        used.add(name.lower())
        out[f.topic] = name
    return out


def _ref(sheet: str, coord: str) -> str:
    col, row = re.match(r"([A-Z]+)(\d+)", coord).groups()
    return "'" + sheet.replace("'", "''") + f"'!${col}${row}"


def _display(item) -> tuple[str, float] | None:
    if not getattr(item, "display", None):
        return None
    _, factor = units.parse_unit(item.display)
    return item.display, float(factor)


def _cached(value):
    """A cell's cached value as the writer stores it (numbers, bools, text, error codes)."""
    if isinstance(value, str):
        return value
    if isinstance(value, float):  # np.float64 too
        return float(value)
    a = np.asarray(value)
    return bool(a) if a.dtype == bool else float(a)


def _per(lib: Library, out: str, inp: str) -> str:
    o, i = units.dim_str(lib.item(out).dim), units.dim_str(lib.item(inp).dim)
    return o if i == "1" else f"{o} per {i}"


def default_date() -> str:
    """Export date (UTC, ISO); ``SOURCE_DATE_EPOCH`` fixes it for reproducible files."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch and epoch.strip().isdigit():
        t = _dt.datetime.fromtimestamp(int(epoch), tz=_dt.timezone.utc)
    else:
        t = _dt.datetime.now(tz=_dt.timezone.utc)
    return t.date().isoformat()


def default_outputs(lib: Library, sc: Scenario | None) -> list[str]:
    if sc is not None and sc.report:
        return [n for n in sc.report if n in lib]
    from flopsheet.cli import HEADLINE
    return [n for n in HEADLINE if n in lib]


def export_workbook(path: str | os.PathLike, lib: Library, sc: Scenario | None = None, *,
                    model: Model | None = None, values: Mapping[str, Any] | None = None,
                    outputs: Iterable[str] | None = None, sensitivity: bool = True,
                    date: str | None = None) -> ExportInfo:
    """Write the workbook of scenario ``sc`` (or the library defaults) to ``path``.

    ``values`` are encoded scenario values (default: ``resolve(sc, model)``);
    ``outputs`` the quantities of the Outputs sheet (default: the scenario's
    ``report:`` list, else the headline outputs).
    """
    from openpyxl import Workbook

    check_target(path)  # an odd -o path fails before any work
    model = model or Model(lib)
    if values is None:
        values = resolve(sc, model) if sc is not None else {}
    for k, v in values.items():
        if np.ndim(v) != 0:
            raise ExcelExportError("a workbook holds one configuration, but this value is a "
                                   f"list of {np.size(v)}; pick one with --set {k}=VALUE",
                                   node=k)
    check_choices({n: i.choices for n, i in lib.inputs.items() if i.is_choice})
    result = model.evaluate(values)
    outs = list(outputs) if outputs is not None else default_outputs(lib, sc)
    for o in outs:
        lib.item(o)
    names = sheet_names(lib)

    ties = near_ties(lib, result)
    wb = Workbook()
    wb.remove(wb.active)
    w = _Writer(wb, lib, sc, model, result, names)
    w.ties = ties
    w.outputs_sheet = w.sheet(OUTPUTS)
    w.inputs()
    for f in lib.files:
        w.formula_sheet(f)
    w.outputs(outs)
    sens_outs: list[str] = []
    if sensitivity:
        sens_outs = [o for o in outs if o in lib.nodes and not lib.nodes[o].is_bool]
        sens_outs = sens_outs[:MAX_SENSITIVITY_OUTPUTS]
        if sens_outs:
            w.sensitivity(sens_outs)
    from .xlsx_charts import charts_sheet
    charts_sheet(w, outs)
    date = date or default_date()
    w.about(outs, sens_outs, date)
    if w.texts is not None:
        w.texts.save()
    from .xlsx_layout import fit_columns, print_setup
    for ws in w.sheets.values():
        fit_columns(ws)
        print_setup(ws)
    wb.active = 0
    wb.calculation.fullCalcOnLoad = True  # Excel/LibreOffice recompute; viewers use the cache
    path = Path(path)
    from .xlsx_package import save
    save(wb, w.sheets, path, date)
    return ExportInfo(path=path, sheets=list(wb.sheetnames), cells=w.cells, result=result,
                      outputs=outs, sensitivity_outputs=sens_outs, formulas=w.n_formulas,
                      snapshots=w.snapshots, near_ties=ties, cached=w.cached)


class _Writer:
    def __init__(self, wb, lib: Library, sc, model: Model, result: Result, names):
        from openpyxl.styles import Font, PatternFill
        self.wb, self.lib, self.sc, self.model, self.result = wb, lib, sc, model, result
        self.sheet_of_topic = names
        self.texts: TextCache | None = None  # printed node formulas (node_text)
        self.cells: dict[str, tuple[str, str]] = {}
        self.n_formulas = 0
        self.snapshots: list[str] = []
        self.choices = {n: i.choices for n, i in lib.inputs.items() if i.is_choice}
        self.head_font = Font(bold=True, color="FFFFFF")
        self.head_fill = PatternFill("solid", fgColor="44546A")
        self.title_font = Font(bold=True, size=13)
        self.snap_fill = PatternFill("solid", fgColor="FCE4D6")
        self.outputs_sheet = None
        self.ties: dict[str, str] = {}
        self.cached: dict[tuple[str, str], Any] = {}  # Python's value of every formula cell
        self.styles = Styles(wb)
        self.sheets: dict[str, Sheet] = {}  # title -> cells, in the workbook's sheet order

    # ------------------------------------------------------------- plumbing
    def sheet(self, title: str, index: int | None = None) -> Sheet:
        ws = Sheet(self.wb.create_sheet(title, index), self.styles)
        self.sheets[title] = ws
        return ws

    def name(self, ws, name: str, coord: str) -> None:
        from openpyxl.workbook.defined_name import DefinedName
        self.wb.defined_names[name] = DefinedName(name, attr_text=_ref(ws.title, coord))
        self.cells[name] = (ws.title, coord)

    def formula(self, ws: Sheet, row, col, text, value, **style) -> None:
        """A live formula whose cached value is ``value`` (Python's, see xlsx_cells)."""
        self.n_formulas += 1
        cached = _cached(value)
        self.cached[(ws.title, ws.formula(row, col, text, cached, **style))] = cached

    def table(self, ws, title: str, doc: str, headers: list[str], widths: list[int]):
        put_text(ws, 1, 1, title, font=self.title_font)
        put_text(ws, 1, 2, doc)
        for j, h in enumerate(headers, start=1):
            put_text(ws, 2, j, h, font=self.head_font, fill=self.head_fill)
        from openpyxl.utils import get_column_letter
        for j, wdt in enumerate(widths, start=1):
            ws.ws.column_dimensions[get_column_letter(j)].width = wdt

    def finish(self, ws, ncols: int, last_row: int, freeze="B3"):
        from openpyxl.utils import get_column_letter
        ws.ws.freeze_panes = freeze
        ws.ws.auto_filter.ref = f"A2:{get_column_letter(ncols)}{max(last_row, 2)}"

    def display_cells(self, ws, row, col, name, item):
        """The value in the unit people read (declared display unit, else by magnitude)."""
        v = self.result[name]
        labels = getattr(item, "labels", None)
        if labels and sorted(labels) == list(range(len(labels))):  # codes 0..n-1: their names
            texts = [labels[k] for k in range(len(labels))]
            code = int(float(np.asarray(v)))
            quoted = ",".join('"' + t.replace('"', '""') + '"' for t in texts)
            self.formula(ws, row, col, f"CHOOSE({name}+1,{quoted})",
                         texts[code] if 0 <= code < len(texts) else "#VALUE!")
            put_text(ws, row, col + 1, "name")
            return
        sh = numfmt.shown(item, v)
        if sh is None:
            return
        unit, factor, fmt = sh
        self.formula(ws, row, col, f"{name}/{number(factor)}" if factor != 1 else name,
                     float(np.asarray(v)) / factor, fmt=fmt)
        put_text(ws, row, col + 1, unit)

    # --------------------------------------------------------------- Inputs
    def inputs(self) -> None:
        from .xlsx_inputs import write_inputs
        write_inputs(self)

    # --------------------------------------------------------- formula sheets
    def node_text(self, n: str) -> tuple[str, str]:
        """(Excel formula, formula as written) of node ``n``, printed once and kept on disk
        (parsing and printing every formula was half of an export)."""
        if self.texts is None:
            self.texts = TextCache(self.lib, "xlsx-formulas", 2)
        node = self.lib.nodes[n]

        def make():
            return (print_tree(node.parsed.tree, choices=self.choices, node=n,
                               file=node.file, line=node.line), node.parsed.text)
        excel, written = self.texts.get(n, make)
        if not (isinstance(excel, str) and isinstance(written, str)):
            excel, written = make()  # not what we wrote
        return excel, written

    def formula_sheet(self, f) -> None:
        lib, res = self.lib, self.result
        ws = self.sheet(self.sheet_of_topic[f.topic])
        headers = ["name", "value", "unit", "shown", "shown unit", "formula (YAML)", "from",
                   "doc", "source", "declared in"]
        self.table(ws, f.topic, f.doc, headers, [30, 16, 12, 12, 8, 60, 16, 60, 50, 34])
        row = FIRST_ROW
        for n in f.nodes:
            node = lib.nodes[n]
            put_text(ws, row, 1, n, bold=True)
            coord = f"B{row}"
            v = res[n]
            fmt = numfmt.value_format(node, v)
            if n in res.overridden:
                try:
                    replaced = "=" + self.node_text(n)[0]
                except ExcelPrintError:
                    replaced = node.text
                org = value_origin(lib, self.sc, n)
                put_number(ws, row, 2, v, named="Input", fmt=fmt)
                ws.comment(row, 2, f"Overridden by the scenario ({org}): this number replaces "
                                   f"the formula {replaced}")
                put_text(ws, row, 7, f"overridden: {org}")
            else:
                text, _ = self.node_text(n)
                self.formula(ws, row, 2, text, v, named="Calculation", fmt=fmt)
                put_text(ws, row, 7, "formula")
                if n in self.ties:
                    ws.comment(row, 2,
                        f"Near-tie at the exported values: {self.ties[n]}. flopsheet compares "
                        f"as LibreOffice does (equal within 2^-48); a spreadsheet that rounds "
                        f"differently may take the other branch than flopsheet's value "
                        f"({_cell_number(v)!r}).")
                    put_text(ws, row, 7, "formula (near-tie, see comment)")
            self.name(ws, n, coord)
            put_text(ws, row, 3, node.unit)
            self.display_cells(ws, row, 4, n, node)
            put_text(ws, row, 6, node.text)  # the formula as written (whitespace normalised)
            put_text(ws, row, 8, node.doc)
            put_text(ws, row, 9, node.source)
            put_text(ws, row, 10, f"{node.file}:{node.line}")
            row += 1
        self.finish(ws, len(headers), row - 1)

    # ---------------------------------------------------------------- Outputs
    def outputs(self, outs: list[str]) -> None:
        lib, res = self.lib, self.result
        ws = self.outputs_sheet
        title = "Outputs"
        doc = (f"Scenario {self.sc.name}: {self.sc.doc}" if self.sc is not None
               else "Library defaults (no scenario).")
        headers = ["name", "value", "unit", "shown", "shown unit", "doc", "sheet"]
        self.table(ws, title, doc + " Every value is a live formula pointing at its node.",
                   headers, [30, 18, 12, 14, 8, 70, 22])
        row = FIRST_ROW
        for n in outs:
            item = lib.item(n)
            put_text(ws, row, 1, n, bold=True)
            fmt = numfmt.value_format(item, res[n])
            shown_v = (item.choices[int(np.asarray(res[n]))]
                       if getattr(item, "is_choice", False) else res[n])
            self.formula(ws, row, 2, n, shown_v, named="Output", fmt=fmt)
            put_text(ws, row, 3, "choice" if getattr(item, "is_choice", False) else item.unit)
            self.display_cells(ws, row, 4, n, item)
            note = " (overridden by the scenario)" if n in res.overridden else ""
            put_text(ws, row, 6, item.doc + note)
            topic = next(f.topic for f in lib.files if n in f.nodes or n in f.inputs)
            put_text(ws, row, 7, INPUTS if n in lib.inputs else self.sheet_of_topic[topic])
            row += 1
        self.finish(ws, len(headers), row - 1)

    # ------------------------------------------------------------ Sensitivity
    def sensitivity(self, outs: list[str]) -> None:
        from .xlsx_sensitivity import write_sensitivity
        write_sensitivity(self, outs)

    # ------------------------------------------------------------------ About
    def about(self, outs, sens_outs, date: str) -> None:
        lib, sc, res = self.lib, self.sc, self.result
        ws = self.sheet(ABOUT)
        ws.ws.column_dimensions["A"].width = 24
        ws.ws.column_dimensions["B"].width = 110
        sets = [f"{k}={v.raw}" for k, v in sc.values.items() if v.origin == "--set"] if sc else []
        rows = [
            ("flopsheet", f"flopsheet {__version__}: LLM training/inference performance and "
                          "cost as an auditable calculation graph."),
            ("scenario", sc.name if sc else "(library defaults)"),
            ("scenario file", sc.path if sc else ""),
            ("scenario doc", sc.doc if sc else ""),
            ("presets applied", " <- ".join(reversed(sc.chain)) if sc else ""),
            ("--use", ", ".join(sc.uses) if sc else ""),
            ("--set", ", ".join(sets)),
            ("overridden nodes", ", ".join(sorted(res.overridden))),
            ("near-ties", ", ".join(self.ties) + " (a comparison or % on numbers equal to 13 "
                          "digits: flopsheet and LibreOffice agree; a spreadsheet that rounds "
                          "differently may branch otherwise; see the cell comments)"
             if self.ties else "none"),
            ("formula library", f"{len(lib.files)} files, {len(lib.inputs)} inputs, "
                                f"{len(lib.nodes)} nodes"),
            ("library hash", lib.digest),
            ("exported", date),
            ("values", "Coherent base units: s, byte, FLOP, token, USD, m, J and their products; "
                       "the unit column of each sheet says which. `shown` columns convert to "
                       "a display unit."),
            ("formulas", "Every node is a live formula in terms of defined names (Formulas > "
                         "Name Manager lists them). ceil/floor are CEILING.MATH/FLOOR.MATH "
                         "(Excel 2013 or later, LibreOffice)."),
            ("sensitivity", "Live formulas (sheets Sensitivity, Partials, Adjoints)."
                            if sens_outs else "not exported"),
            ("recalculate", RECALC_HELP),
        ]
        put_text(ws, 1, 1, "About", font=self.title_font)
        for i, (k, v) in enumerate(rows, start=2):
            put_text(ws, i, 1, k, bold=True)
            put_text(ws, i, 2, v, wrap=(k == "recalculate"))


__all__ = ["export_workbook", "ExportInfo", "ExcelExportError", "put_text", "sheet_names",
           "near_ties",
           "default_outputs", "RECALC_HELP"]
