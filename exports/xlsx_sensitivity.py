"""The Sensitivity sheet of a workbook and its helpers, Partials (every edge's derivative as a
live formula) and Adjoints (derivatives chained in reverse order): elasticities that follow
any edit of the inputs."""
from __future__ import annotations

import math
import weakref
from typing import Any

import numpy as np

from flopsheet.evaluate import Model

from . import numfmt
from .excel import ADJOINTS, FIRST_ROW, PARTIALS, SENSITIVITY, _per, put_number, put_text
from .printer import ExcelPrintError, print_sympy
from .xlsx_textcache import TextCache


_DIFFS: "weakref.WeakKeyDictionary[Model, Any]" = weakref.WeakKeyDictionary()


def _differentiator(model: Model):
    """One Differentiator per model, so repeated exports reuse its compiled partials."""
    from flopsheet.sensitivity import Differentiator
    d = _DIFFS.get(model)
    if d is None:
        d = _DIFFS[model] = Differentiator(model)
    return d


#: Prefix of a stored partial whose Excel text could not be printed (the reason follows).
_UNPRINTABLE = "\0unprintable: "


def _printed_partial(expr, choices, node) -> tuple[bool, str, str]:
    """(is zero, Excel formula text or the reason it has none, sympy text) of one partial."""
    from sympy import sstr
    if expr == 0:
        return (True, "", "0")
    try:
        text = print_sympy(expr, choices=choices, node=node.name, file=node.file,
                           line=node.line)
    except ExcelPrintError as e:
        text = _UNPRINTABLE + e.detail
    return (False, text, sstr(expr, order="none"))  # unsorted: 10x faster than str()


def write_sensitivity(w, outs: list[str]) -> None:
    """Partials, Adjoints and Sensitivity sheets of workbook writer ``w`` for outputs ``outs``."""
    from openpyxl.utils import get_column_letter
    from flopsheet.spreadsheet import s_add
    from flopsheet.sensitivity import partial_expr

    lib, res = w.lib, w.result
    diff = _differentiator(w.model)  # partials compiled once per model
    choice = set(w.choices)
    pinned = {n for n, i in lib.inputs.items()
              if i.bounds[0] is not None and i.bounds[0] == i.bounds[1]}
    scopes = {o: lib.ancestors(o) | {o} for o in outs}
    union = set().union(*scopes.values())
    try:
        notes = diff.nonsmooth(res, union)
    except Exception as e:  # noqa: BLE001 - the sheet stays useful without the notes
        notes = [f"the Python engine could not check for non-smooth points "
                 f"({type(e).__name__}: {str(e)[:200]})"]
    cache = TextCache(lib, "xlsx-partials", 3)
    try:  # every edge's value from one generated program (graph/sensitivity.py), kept on
        # disk; per-edge code is the fallback
        fast = diff._partial_values(tuple(outs), res, union, choice)
    except Exception:  # noqa: BLE001 - the per-edge path below says what is wrong
        fast = {}

    # Partials: one row per edge (node -> dependency) the gradients use
    wp = w.sheet(PARTIALS)
    w.table(wp, "Partials", "Helper for Sensitivity: the partial derivative of each node "
               "with respect to each quantity its formula uses, as live formulas (exact, "
               "from sympy; ceil/floor steps count as 0, max/min take the larger/smaller "
               "argument's branch, 1/2 at a tie).",
               ["node", "with respect to", "partial derivative", "as sympy"],
               [30, 30, 24, 80])
    edge_row: dict[tuple[str, str], int] = {}
    pval: dict[tuple[str, str], float] = {}  # Python's value of each partial
    row = FIRST_ROW
    for n in lib.order:
        if n not in union or n in res.overridden or lib.nodes[n].is_bool:
            continue  # conditions have no derivative; their users' branches do
        node = lib.nodes[n]
        for d in node.deps:
            if d in choice or d in pinned or (d in lib.nodes and lib.nodes[d].is_bool):
                continue
            zero, text, expr_text = cache.get(f"{n}\0{d}", lambda: _printed_partial(
                partial_expr(lib, n, d), w.choices, node))
            if not (isinstance(zero, bool) and isinstance(text, str)
                    and isinstance(expr_text, str)):  # not what we wrote: print anew
                zero, text, expr_text = _printed_partial(partial_expr(lib, n, d),
                                                         w.choices, node)
            if zero:
                continue
            put_text(wp, row, 1, n)
            put_text(wp, row, 2, d)
            val = fast.get((n, d))
            if val is None:
                args = [res[x] for x in node.deps]
                try:
                    with np.errstate(all="ignore"):
                        val = float(np.asarray(diff.partial(n, d)(*args)))
                except Exception:  # noqa: BLE001 - not even Python can evaluate it
                    val = None
            pval[(n, d)] = val if val is not None and math.isfinite(val) else math.nan
            if not text.startswith(_UNPRINTABLE):
                w.formula(wp, row, 3, text, pval[(n, d)], fmt=numfmt.GENERAL)
            else:
                e = ExcelPrintError(text[len(_UNPRINTABLE):])
                if val is not None and math.isfinite(val):
                    put_number(wp, row, 3, val, fill=w.snap_fill)
                    why = "Snapshot at export, not a live formula"
                else:
                    w.formula(wp, row, 3, "NA()", "#N/A", fill=w.snap_fill)
                    why = "Not available"
                wp.comment(row, 3, f"{why}: {e.detail}")
                w.snapshots.append(f"d {n} / d {d} ({why.lower()})")
            put_text(wp, row, 4, expr_text)
            edge_row[(n, d)] = row
            row += 1
    w.finish(wp, 4, row - 1, freeze="C3")
    cache.save()

    # Adjoints: d output / d x for every x in scope, accumulated in reverse order
    wa = w.sheet(ADJOINTS)
    cols = {o: get_column_letter(3 + j) for j, o in enumerate(outs)}
    w.table(wa, "Adjoints", "Helper for Sensitivity: derivative of each output (column) "
               "with respect to each quantity (row), by reverse-mode accumulation over the "
               "graph: the sum over the quantity's users of (user's derivative) x (partial "
               "on the Partials sheet). Overridden nodes are leaves.",
               ["quantity", "kind"] + [f"d {o}" for o in outs], [30, 10] + [18] * len(outs))
    rows_names = [n for n in reversed(lib.order) if n in union and not lib.nodes[n].is_bool]
    rows_names += [n for n in lib.inputs if n in union and n not in choice and n not in pinned]
    arow = {n: FIRST_ROW + i for i, n in enumerate(rows_names)}
    users: dict[str, list[str]] = {n: [] for n in rows_names}
    for (n, d) in edge_row:
        if d in users:
            users[d].append(n)
    adj: dict[str, dict[str, float]] = {o: {} for o in outs}  # Python's accumulation
    for n in rows_names:
        r = arow[n]
        put_text(wa, r, 1, n)
        put_text(wa, r, 2, "input" if n in lib.inputs else
                 ("overridden" if n in res.overridden else "node"))
        for o in outs:
            col = 3 + outs.index(o)
            if n not in scopes[o]:
                continue
            if n == o:
                put_number(wa, r, col, 1, fmt="General")
                adj[o][n] = 1.0
                continue
            used = [u for u in users[n] if u in scopes[o]]
            terms = [f"{cols[o]}{arow[u]}*{PARTIALS}!$C${edge_row[(u, n)]}" for u in used]
            total = 0.0
            for k, u in enumerate(used):  # summed as the cell's `+` chain sums
                term = adj[o].get(u, 0.0) * pval[(u, n)]
                total = term if k == 0 else s_add(total, term)
            adj[o][n] = total
            if terms:
                w.formula(wa, r, col, "+".join(terms), adj[o][n], fmt="General")
            else:
                put_number(wa, r, col, 0, fmt="General")
    w.finish(wa, 2 + len(outs), FIRST_ROW + len(rows_names) - 1, freeze="C3")

    # Sensitivity: elasticities, live
    ws = w.sheet(SENSITIVITY, index=w.wb.sheetnames.index(PARTIALS))
    headers = ["input", "value", "unit", "measure"] + outs
    w.table(ws, "Sensitivity", "LIVE formulas, not a snapshot: the elasticity of each "
               "output (column) with respect to each input (row), the % change of the "
               "output per 1 % change of the input, (x / y) dy/dx, from exact derivatives "
               "chained over the graph (sheets Partials and Adjoints). Where the input or "
               "the output is 0 an elasticity does not exist: the cell holds the derivative "
               "dy/dx instead (output unit per input unit; the measure column says which). "
               "They follow any edit of the inputs.", headers, [30, 16, 12, 12] + [18] * len(outs))
    put_text(ws, FIRST_ROW, 1, "output value", bold=True)
    for j, o in enumerate(outs):
        w.formula(ws, FIRST_ROW, 5 + j, o, res[o], named="Output",
                     fmt=numfmt.value_format(lib.item(o), res[o]))
    leaves = [n for n in lib.inputs if n in union and n not in choice and n not in pinned]
    leaves += [n for n in lib.order if n in union and n in res.overridden]
    row = FIRST_ROW + 1
    for n in leaves:
        item = lib.item(n)
        x = float(np.asarray(res[n]))
        put_text(ws, row, 1, n, bold=True)
        w.formula(ws, row, 2, n, x, fmt=numfmt.value_format(item, x))
        put_text(ws, row, 3, item.unit)
        w.formula(ws, row, 4, f'IF({n}=0,"derivative","elasticity")',
                     "derivative" if x == 0 else "elasticity")
        for j, o in enumerate(outs):
            if n not in scopes[o]:
                continue
            y = float(np.asarray(res[o]))
            a = adj[o].get(n, 0.0)
            w.formula(ws, row, 5 + j,
                      f"IF(OR({o}=0,{n}=0),{ADJOINTS}!{cols[o]}{arow[n]},"
                      f"{ADJOINTS}!{cols[o]}{arow[n]}*{n}/{o})",
                      a if (y == 0 or x == 0) else a * x / y,
                      fmt=numfmt.ENG if (y == 0 or x == 0) else "0.0000")
            if y == 0 or x == 0:
                ws.comment(row, 5 + j, f"d {o} / d {n} in {_per(lib, o, n)}: the "
                                       f"{'input' if x == 0 else 'output'} is 0, so no "
                                       "elasticity exists here")
        row += 1
    last = row - 1
    row += 1
    put_text(ws, row, 1, "notes", bold=True)
    put_text(ws, row, 2, "Non-smooth points at the exported values (Python), where a "
             "derivative is one-sided or a step counts as 0:")
    row += 1
    for note in notes:
        put_text(ws, row, 2, note)
        row += 1
    for s in w.snapshots:
        put_text(ws, row, 2, f"derivative not written as a live formula: {s}")
        row += 1
    w.finish(ws, len(headers), last, freeze="E4")
