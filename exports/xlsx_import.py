"""Read an exported workbook back into a scenario (``flopsheet import-xlsx``).

An architect edits the Inputs sheet (or types a number over a formula) in
Excel or LibreOffice; this reads the workbook's defined names back:

* every input's named cell gives its value (numbers in base units, a choice's
  text, or text with a unit such as ``80 GiB``); it is written to the scenario
  when it differs from the library default or did not come from the default;
* every node whose named cell holds a number instead of a formula is an
  override (exactly like ``--set node=value``);
* the Outputs sheet's names become the scenario's ``report:`` list.

Values are checked by the engine (units, bounds, choices); an error names the
input and the workbook cell. The result is a scenario YAML file that
``flopsheet run`` accepts, with nothing to resolve (no ``use:``).
"""
from __future__ import annotations

import math
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from flopsheet.errors import FlopsheetError, InputValueError, ResourceLimitError, SchemaError
from flopsheet.evaluate import Model
from flopsheet.library import Library
from flopsheet.scenario import parse_set

from .excel import ABOUT, FIRST_ROW, INPUTS, OUTPUTS
from .printer import ExcelPrintError, print_tree


@dataclass
class Imported:  # noqa: D101 - documented below
    """A scenario read from a workbook."""

    values: dict[str, Any]  # name -> raw value as written to the scenario
    overrides: list[str]  # nodes given a number instead of their formula
    report: list[str]
    doc: str
    sources: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    digest: str = ""
    doc_head: str = ""
    based_on: str = ""  # the scenario file the workbook came from, when found
    base: dict | None = None  # that file with the workbook's changes (xlsx_rebase)
    changed: list[str] = field(default_factory=list)

    def yaml(self) -> str:
        if self.base is not None:
            data = dict(self.base)
            data["doc"] = (f"Edited in workbook {self.doc_head}, exported from {self.based_on}. "
                           + str(data.get("doc") or "")).strip()
            return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100000)
        vals: dict[str, Any] = {}
        for k, v in self.values.items():
            src = self.sources.get(k)
            vals[k] = {"value": v, "source": src} if src else v
        data: dict[str, Any] = {"doc": self.doc, "values": vals}
        if self.report:
            data["report"] = list(self.report)
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100000)


def _destination(wb, name: str):
    dn = wb.defined_names.get(name)
    if dn is None:
        return None
    for title, coord in dn.destinations:
        if title in wb.sheetnames:
            return wb[title][coord.replace("$", "")]
    return None


def _headers(ws) -> dict[str, int]:
    return {str(c.value).strip(): c.column for c in ws[2] if c.value is not None}


def read_workbook(path: str | Path, lib: Library, model: Model | None = None) -> Imported:
    """Read the inputs and overrides of workbook ``path`` for library ``lib``."""
    from openpyxl import load_workbook
    from openpyxl.utils.exceptions import InvalidFileException

    path = Path(path)
    model = model or Model(lib)
    check_archive(path)
    try:
        wb = load_workbook(path)  # formulas as text: tells formulas from typed numbers
    except (OSError, InvalidFileException, KeyError, ValueError, zipfile.BadZipFile,
            EOFError) as e:
        raise SchemaError(f"cannot read the workbook: {e}", file=str(path)) from None
    if INPUTS not in wb.sheetnames:
        raise SchemaError(f"no `{INPUTS}` sheet: not a flopsheet workbook", file=str(path))
    shown = path.name
    warnings: list[str] = []

    about = {}
    if ABOUT in wb.sheetnames:
        for a, b in wb[ABOUT].iter_rows(min_row=2, max_col=2, values_only=True):
            if a:
                about[str(a)] = "" if b is None else str(b)
    digest = about.get("library hash", "")
    if digest and digest != lib.digest:
        warnings.append(f"the workbook was exported from formula library {digest}; this one is "
                        f"{lib.digest} (values are matched by name)")

    ws_in = wb[INPUTS]
    cols = _headers(ws_in)
    origin_col, source_col = cols.get("from"), cols.get("value source")

    values: dict[str, Any] = {}
    encoded: dict[str, Any] = {}  # every input and override, engine units
    sources: dict[str, str] = {}
    defaults = model.defaults()
    for name, inp in lib.inputs.items():
        cell = _destination(wb, name)
        if cell is None:
            warnings.append(f"`{name}` is not in the workbook; it keeps its default")
            continue
        where = f"{shown}:{cell.parent.title}!{cell.coordinate}"
        raw = cell.value
        if isinstance(raw, str) and raw.startswith("=") and cell.data_type == "f":
            raise InputValueError(f"input cell {cell.parent.title}!{cell.coordinate} holds a "
                                  f"formula ({raw}); type a value", file=shown, node=name)
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            raise InputValueError(f"input cell {cell.parent.title}!{cell.coordinate} is empty",
                                  file=shown, node=name)
        if isinstance(raw, bool):
            raise InputValueError(f"input cell {cell.parent.title}!{cell.coordinate} holds "
                                  f"{raw}, not a number", file=shown, node=name)
        if isinstance(raw, str):
            raw = raw.strip()
        enc = model.encode(name, raw, file=where)
        encoded[name] = enc
        org = ""
        if origin_col and cell.parent is ws_in:
            org = str(ws_in.cell(row=cell.row, column=origin_col).value or "")
        if _same(enc, defaults[name]) and org in ("", "default"):
            continue
        values[name] = _plain(raw)
        if source_col and cell.parent is ws_in:
            src = ws_in.cell(row=cell.row, column=source_col).value
            if src and org not in ("", "default"):
                sources[name] = str(src)

    overrides = []
    choices = {n: i.choices for n, i in lib.inputs.items() if i.is_choice}
    for name in lib.order:
        node = lib.nodes[name]
        cell = _destination(wb, name)
        if cell is None:
            continue
        raw = cell.value
        if cell.data_type == "f" or (isinstance(raw, str) and raw.startswith("=")):
            try:
                ours = print_tree(node.parsed.tree, choices=choices, node=name)
            except ExcelPrintError:
                continue
            if _canon(str(raw)) != _canon("=" + ours):
                warnings.append(f"the formula of `{name}` was edited in the workbook "
                                f"({cell.parent.title}!{cell.coordinate}: {raw}); only values "
                                f"come back into a scenario, so the YAML formula is used")
            continue  # a live formula
        where = f"{shown}:{cell.parent.title}!{cell.coordinate}"
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            raise InputValueError(f"the value cell {cell.parent.title}!{cell.coordinate} of "
                                  f"node `{name}` is empty (restore its formula or type a "
                                  f"number)", file=shown, node=name)
        if node.is_bool or isinstance(raw, bool):
            raise InputValueError(f"`{name}` is a condition; its cell "
                                  f"{cell.parent.title}!{cell.coordinate} must keep its formula",
                                  file=shown, node=name)
        encoded[name] = model.encode(name, raw.strip() if isinstance(raw, str) else raw,
                                     file=where)
        values[name] = _plain(raw.strip() if isinstance(raw, str) else raw)
        overrides.append(name)

    report: list[str] = []
    if OUTPUTS in wb.sheetnames:
        for (a,) in wb[OUTPUTS].iter_rows(min_row=FIRST_ROW, max_col=1, values_only=True):
            if a is None:
                break
            if str(a) in lib:
                report.append(str(a))
            else:
                warnings.append(f"output `{a}` is not in the formula library; dropped")
    scen = about.get("scenario", "")
    doc = about.get("scenario doc", "")
    head = f"Read from workbook {shown}" + (f" (exported from scenario {scen})" if scen else "")
    imp = Imported(values=values, overrides=overrides, report=report,
                   doc=f"{head}. {doc}".strip(), sources=sources, warnings=warnings,
                   digest=digest, doc_head=shown)
    from .xlsx_rebase import find_original, rebase
    original = find_original(about)
    if original is None:
        if scen:
            warnings.append(f"scenario `{scen}` of the workbook was not found; every value is "
                            f"written out (no `use:`)")
        return imp
    try:
        presets = [u.strip() for u in about.get("--use", "").split(",") if u.strip()]
        sets = dict(parse_set(item.strip()) for item in about.get("--set", "").split(", ")
                    if item.strip())
        imp.base, imp.changed = rebase(original, values, overrides, lib, model, encoded, presets,
                                       sets)
        imp.based_on = about.get("scenario file") or str(original)
    except FlopsheetError as e:
        warnings.append(f"could not rebase on {original}: {e.render()}; every value is "
                        f"written out (no `use:`)")
    return imp


#: Bounds on a workbook read back (an .xlsx is a zip: a few kB can inflate to gigabytes).
#: flopsheet's own workbooks are ~30 entries and a few MB uncompressed.
MAX_XLSX_BYTES = 50_000_000  #: on disk
MAX_XLSX_ENTRIES = 2_000
MAX_XLSX_UNCOMPRESSED = 200_000_000


def check_archive(path: Path) -> None:
    """Refuse a file that is not a zip, or whose entries are too many or inflate too far,
    before openpyxl reads any of it."""
    shown = str(path)
    try:
        size = path.stat().st_size
    except OSError as e:
        raise SchemaError(f"cannot read the workbook: {e.strerror or e}", file=shown) from None
    if size > MAX_XLSX_BYTES:
        raise ResourceLimitError(f"workbook is {size:,} bytes; the limit is {MAX_XLSX_BYTES:,}",
                                 file=shown)
    try:
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as e:
        raise SchemaError(f"not an .xlsx workbook (not a zip archive: {e})", file=shown) from None
    if len(infos) > MAX_XLSX_ENTRIES:
        raise ResourceLimitError(f"workbook archive has {len(infos):,} entries; the limit is "
                                 f"{MAX_XLSX_ENTRIES:,}", file=shown)
    total = sum(i.file_size for i in infos)
    if total > MAX_XLSX_UNCOMPRESSED:
        raise ResourceLimitError(f"workbook inflates to {total:,} bytes; the limit is "
                                 f"{MAX_XLSX_UNCOMPRESSED:,}", file=shown)


def _canon(formula: str) -> str:
    return "".join(formula.split()).lower()


def _same(a, b) -> bool:
    a, b = float(np.asarray(a)), float(np.asarray(b))
    return a == b or math.isclose(a, b, rel_tol=1e-15, abs_tol=0.0)


def _plain(v):
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, float) and v.is_integer() and abs(v) < 2 ** 53:
        return int(v)
    return v


__all__ = ["read_workbook", "Imported"]
