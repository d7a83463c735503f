"""The ``Charts`` sheet: breakdowns of the outputs that are sums (step time into compute,
bubble and exposed communication; memory into weights, gradients, optimizer states and
activations), each as a small live table and a stacked bar chart of it.

Which outputs are sums comes from the formulas (:mod:`flopsheet.exports.breakdown`), so
any scenario gets the charts its outputs support, training or inference.
"""
from __future__ import annotations

import numpy as np

from flopsheet.fmt import pick_unit

from .breakdown import OTHER, breakdown
from .printer import number

#: At most this many charts.
MAX_CHARTS = 4


def chartable(lib, result, outs: list[str]) -> list[str]:
    """Outputs (the scenario's, then the headline ones) that break down into parts."""
    from flopsheet.cli import HEADLINE
    seen, out = set(), []
    for o in list(outs) + [h for h in HEADLINE if h in lib.nodes]:
        if o in seen or o not in lib.nodes or o in result.overridden:
            continue
        seen.add(o)
        parts = breakdown(lib, result, o, depth=2)
        total = abs(float(np.asarray(result[o])))
        if len(parts) >= 2 and total > 0 and abs(parts.get(OTHER, 0.0)) <= 0.25 * total:
            out.append(o)  # the named parts explain the total
    return out[:MAX_CHARTS]


def charts_sheet(w, outs: list[str]) -> None:
    """Add the Charts sheet to writer ``w`` (an ``excel._Writer``) when anything breaks down."""
    from openpyxl.chart import BarChart, Reference
    lib, res = w.lib, w.result
    names = chartable(lib, res, outs)
    if not names:
        return
    from .excel import CHARTS, put_text
    ws = w.sheet(CHARTS)
    put_text(ws, 1, 1, "Charts", font=w.title_font)
    put_text(ws, 1, 2, "Breakdowns of the outputs that are sums of other quantities; the "
                       "tables are live formulas, the charts follow them.")
    row = 3
    for o in names:
        parts = breakdown(lib, res, o, depth=2)
        item = lib.nodes[o]
        unit, factor = pick_unit(float(np.asarray(res[o])), item.dim, item.display)
        put_text(ws, row, 1, f"{o} ({unit or item.unit})", font=w.head_font, fill=w.head_fill)
        put_text(ws, row, 2, "value", font=w.head_font, fill=w.head_fill)
        first = row + 1
        r = first
        for part, v in parts.items():
            put_text(ws, r, 1, part)
            if part == OTHER:
                text = f"({o}-(" + "+".join(p for p in parts if p != OTHER) + f"))/{number(factor)}"
            else:
                text = f"{part}/{number(factor)}"
            w.formula(ws, r, 2, text, v / factor, fmt="#,##0.000")
            r += 1
        chart = BarChart()
        chart.type = "bar"
        chart.grouping = "stacked"
        chart.overlap = 100
        chart.title = f"{o} breakdown"
        chart.y_axis.title = unit or item.unit
        chart.height, chart.width = 7, 18
        from openpyxl.chart.series import SeriesLabel
        for i, part in enumerate(parts, start=first):
            ref = Reference(ws.ws, min_col=2, min_row=i)
            chart.add_data(ref, titles_from_data=False)
            chart.series[-1].tx = SeriesLabel(v=str(part))
        chart.x_axis.delete = True
        chart.legend.position = "b"
        ws.ws.add_chart(chart, f"D{row}")
        row = max(r + 1, row + 16)


__all__ = ["charts_sheet", "chartable"]
