"""Validation results: rows (predicted vs measured), per-category statistics, and the
text, Markdown, JSON and .xlsx renderings of ``flopsheet validate``.

Each row says what happened in words: ``within 10 %`` or ``off by +177 %`` against the
row's tolerance, then any check the configuration fails (``exceeds HBM``); never ``ok``
beside a large error.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field

import numpy as np

from .fmt import table
from .units import parse_unit
from .validate_points import Expect, Point


def error_stats(errs) -> dict:
    """Median and 90th percentile of |error| and the signed error of the worst row (its index in
    ``errs``); Nones when there is no row."""
    errs = np.asarray(errs, dtype=float)
    if not len(errs):
        return {"median_abs_error": None, "p90_abs_error": None, "worst_error": None, "worst": None}
    a = np.abs(errs)
    k = int(np.argmax(a))
    return {"median_abs_error": float(np.median(a)), "p90_abs_error": float(np.percentile(a, 90)),
            "worst_error": float(errs[k]), "worst": k}


@dataclass
class Row:
    point: Point
    expect: Expect
    predicted: float | None = None  # in the expect's unit
    measured: float | None = None   # in the expect's unit
    error: float | None = None      # predicted / measured - 1
    problem: str | None = None      # an error (bad point), not an inaccuracy
    flags: list[str] = field(default_factory=list)  # e.g. the configuration breaks a rule
    inputs_key: str | None = None   # digest of the resolved inputs: equal keys, equal predictions
    tags: dict[str, str] = field(default_factory=dict)  # what --by groups on besides the family

    @property
    def within(self) -> bool:
        return self.error is not None and abs(self.error) <= self.expect.tolerance

    @property
    def note(self) -> str:
        """What the files say about this row's error - its expect's note, else its point's."""
        return self.expect.note or self.point.note


def optimism(error: float, unit: str) -> float | None:
    """``error`` (predicted / measured - 1) turned so that positive means the model promises more
    than was measured: a higher rate or ratio as it stands (a unit per time, or none), a shorter
    time, smaller memory, lower cost or power as measured / predicted - 1. None for a unit that
    does not parse or a prediction of zero."""
    try:
        exponents = dict(parse_unit(unit)[0].items())
    except ValueError:
        return None
    spent = "[currency]" in exponents or "[energy]" in exponents  # USD/h and W are not speeds
    if not exponents or (exponents.get("[time]", 0) < 0 and not spent):
        return error
    return -error / (1 + error) if error > -1 else None


#: what ``flopsheet validate --by`` groups rows on: the point's family, the hardware preset
#: that sets its peak (validate_run.point_tags) or whether its model routes experts
BY_KEYS = ("family", "hardware", "moe")
#: |error| beyond which a row is counted apart in a breakdown (the accuracy target holds every
#: training row within it)
LARGE_ERROR = 0.20


@dataclass
class Report:
    points: list[Point]
    rows: list[Row]
    problems: list[tuple[str, str]]  # (point id, message)

    def stats(self, category: str | None = None, family: str | None = None) -> dict:
        """Counts and error statistics of a category (or family; None: all points)."""
        keep = lambda p: category in (None, p.category) and family in (None, p.family)  # noqa: E731
        pts = [p for p in self.points if keep(p)]
        rows = [r for r in self.rows if keep(r.point) and r.expect.counted and r.error is not None]
        out = {"points": len(pts), "supported": sum(p.supported for p in pts),
               "unsupported": sum(not p.supported for p in pts), "compared": len(rows),
               "worst_point": None, "worst_id": None, "worst_metric": None,
               "within_tolerance": sum(r.within for r in rows)}
        summary = error_stats([r.error for r in rows])
        k = summary.pop("worst")
        out.update(summary)
        if k is not None:
            worst = rows[k]
            out.update(worst_id=worst.point.id, worst_metric=worst.expect.metric,
                       worst_point=f"{worst.point.id} ({worst.expect.metric})")
        return out

    def repeats(self, category: str | None = None) -> list[list[Row]]:
        """Groups of counted rows that compare one node (in one unit) of the same resolved inputs
        measured by different points (another release, another run): the model predicts one
        value for all of them, so the spread of their measurements is scatter no prediction can
        follow."""
        groups: dict[tuple, list[Row]] = {}
        for r in self.rows:
            if (r.expect.counted and r.error is not None and r.inputs_key is not None
                    and category in (None, r.point.category)):
                groups.setdefault((r.inputs_key, r.expect.node, r.expect.unit), []).append(r)
        return [g for g in groups.values() if len({r.point.id for r in g}) > 1]

    def repeat_stats(self, category: str | None = None) -> dict:
        """How far repeat measurements of one configuration differ: per group the largest over
        the smallest measured value, minus 1 (compared rows have a nonzero measurement); its
        median and maximum over the groups, and each group's point ids."""
        groups = self.repeats(category)
        spreads = [max(r.measured for r in g) / min(r.measured for r in g) - 1 for g in groups]
        return {"configurations": len(groups),
                "median_spread": float(np.median(spreads)) if spreads else None,
                "max_spread": max(spreads) if spreads else None,
                "groups": [sorted({r.point.id for r in g}) for g in groups]}

    def breakdown(self, by: str, category: str | None = None) -> list[dict]:
        """Error statistics of the counted rows of a category (None: all) per group of ``by``
        (BY_KEYS), largest group first: rows, median and p90 of |error|, the worst signed error,
        how many rows lie beyond LARGE_ERROR and the median bias (the median of ``optimism``:
        positive when the group's predictions are rosier than its measurements)."""
        if by not in BY_KEYS:
            raise ValueError(f"--by takes one of {', '.join(BY_KEYS)}, not `{by}`")
        groups: dict[str, list[Row]] = {}
        for r in self.rows:
            if r.expect.counted and r.error is not None and category in (None, r.point.category):
                key = r.point.family if by == "family" else r.tags.get(by, "-")
                groups.setdefault(key, []).append(r)
        out = []
        for key, rows in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            errs = [r.error for r in rows]
            st = error_stats(errs)
            st.pop("worst")
            rosier = [x for r in rows if (x := optimism(r.error, r.expect.unit)) is not None]
            out.append({"group": key, "compared": len(errs),
                        "beyond_large_error": sum(abs(e) > LARGE_ERROR for e in errs), **st,
                        "median_bias": float(np.median(rosier)) if rosier else None})
        return out

    def worst(self, n: int = 5, category: str | None = None) -> list[Row]:
        rows = [r for r in self.rows if r.expect.counted and r.error is not None
                and category in (None, r.point.category)]
        return sorted(rows, key=lambda r: -abs(r.error))[:n]



# ------------------------------------------------------------------------------ output
def _pct(x: float | None, signed: bool = True) -> str:
    if x is None:
        return "-"
    return f"{x * 100:+.1f}%" if signed else f"{x * 100:.1f}%"


def _num(x: float | None) -> str:
    """Four significant digits, in fixed notation between 0.001 and a million."""
    if x is None or not math.isfinite(x):
        return "-"
    if x == 0 or not 1e-3 <= abs(x) < 1e6:
        return f"{x:.4g}"
    return f"{x:.{max(0, 3 - math.floor(math.log10(abs(x))))}f}"


def _percent(x: float, signed: bool) -> str:
    return f"{x * 100:+.0f} %" if signed else f"{x * 100:.0f} %"


def status(r: Row) -> str:
    """What happened to a row, in words: ``within 10 %``, ``off by +177 % (tolerance 10 %)``,
    ``error: ...``, then each check the configuration fails (``exceeds HBM``)."""
    if r.problem:
        words = "error (message below)"
    elif r.error is None:
        words = "not compared"
    elif r.within:
        words = f"within {_percent(r.expect.tolerance, False)}"
    else:
        words = (f"off by {_percent(r.error, True)} "
                 f"(tolerance {_percent(r.expect.tolerance, False)})")
    return "; ".join([words] + list(r.flags))


def rows_table(report: Report) -> str:
    body = []
    for r in report.rows:
        e = r.expect
        body.append([r.point.id, f"{e.metric} -> {e.node}" + ("" if e.counted else " (not counted)"),
                     _num(r.predicted), _num(r.measured), e.unit, _pct(r.error), status(r)])
    return table(body, ["point", "metric -> node", "predicted", "measured", "unit", "error",
                        "status"], right={2, 3, 5})


def summary_rows(report: Report, categories: list[str]) -> list[list[str]]:
    out = []
    for c in categories:
        s = report.stats(c)
        out.append([c, str(s["points"]), str(s["supported"]), str(s["compared"]),
                    _pct(s["median_abs_error"], False), _pct(s["p90_abs_error"], False),
                    _pct(s["worst_error"]), s["worst_point"] or "-"])
    return out


SUMMARY_HEAD = ["category", "points", "supported", "compared", "median |err|", "p90 |err|",
                "worst", "worst point"]


def unsupported_by_reason(points: list[Point]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for p in points:
        if not p.supported:
            out.setdefault(p.unsupported, []).append(p.id)
    return out


def repeat_lines(report: Report, categories: list[str]) -> list[str]:
    """One sentence per category with repeat measurements (Report.repeats)."""
    out = []
    for c in categories:
        st = report.repeat_stats(c)
        if st["configurations"]:
            out.append(f"{c}: {st['configurations']} configurations measured more than once "
                       f"(another release or run, the same inputs) differ by "
                       f"{_pct(st['median_spread'], False)} median, up to "
                       f"{_pct(st['max_spread'], False)} (largest / smallest measured - 1) - "
                       "scatter one prediction cannot follow")
    return out


def _group_cells(g: dict) -> list[str]:
    """A Report.breakdown group as table cells, in the order of GROUP_HEAD."""
    return [g["group"], str(g["compared"]), _pct(g["median_abs_error"], False),
            _pct(g["p90_abs_error"], False), str(g["beyond_large_error"]), _pct(g["worst_error"]),
            _pct(g["median_bias"])]


GROUP_HEAD = ["rows", "median |err|", "p90 |err|", f"beyond {LARGE_ERROR:.0%}", "worst", "bias"]


def breakdown_tables(report: Report, by: str, categories: list[str]) -> list[str]:
    """One table per category with compared rows: its error statistics per group of ``by``."""
    return [table([_group_cells(g) for g in groups], [f"{c} by {by}", *GROUP_HEAD],
                  right=set(range(1, len(GROUP_HEAD) + 1)))
            for c in categories if (groups := report.breakdown(by, c))]


def print_text(report: Report, categories: list[str], file=sys.stdout) -> None:
    w = lambda s="": print(s, file=file)  # noqa: E731
    if report.rows:
        w(rows_table(report))
        w("error = predicted / measured - 1; rows marked (not counted) restate another row of the "
          "same point and stay out of the statistics")
    unsup = [p for p in report.points if not p.supported]
    if unsup:
        w()
        w(table([[p.id, p.category, f"unsupported: {p.unsupported}"] for p in unsup],
                ["point", "category", ""]))
    w()
    w(table(summary_rows(report, categories), SUMMARY_HEAD, right={1, 2, 3, 4, 5, 6}))
    for line in repeat_lines(report, categories):
        w(line)
    worst = report.worst(5)
    if worst:
        w()
        w("worst points:")
        for r in worst:
            w(f"  {_pct(r.error):>8}  {r.point.id}  {r.expect.metric} -> {r.expect.node} "
              f"(predicted {_num(r.predicted)} vs {_num(r.measured)} {r.expect.unit})")
    reasons = unsupported_by_reason(report.points)
    if reasons:
        w()
        w("unsupported, by reason:")
        for reason, ids in sorted(reasons.items(), key=lambda kv: -len(kv[1])):
            w(f"  {len(ids):>3}  {reason}")
    for pid, msg in report.problems:
        print(f"flopsheet: error: {pid}: {msg}", file=sys.stderr)


def markdown(report: Report, categories: list[str]) -> str:
    """The README 'Accuracy' section body: per category, training per hardware preset, then per
    family, then what is unsupported."""
    def worst(st):
        return "-" if st["worst_id"] is None else f"{_pct(st['worst_error'])} `{st['worst_id']}`"

    head = ["category", "points", "supported", "compared", "median \\|err\\|", "p90 \\|err\\|",
            "worst"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in categories:
        st = report.stats(c)
        lines.append("| " + " | ".join([c, str(st["points"]), str(st["supported"]),
                                        str(st["compared"]), _pct(st["median_abs_error"], False),
                                        _pct(st["p90_abs_error"], False), worst(st)]) + " |")
    repeats = repeat_lines(report, categories)
    if repeats:
        lines += [""] + [f"Repeat measurements - {line}." for line in repeats]
    by_hardware = report.breakdown("hardware", "training") if "training" in categories else []
    if by_hardware:
        head = ["training rows by hardware preset", *(h.replace("|", "\\|") for h in GROUP_HEAD)]
        lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(_group_cells(g)) + " |" for g in by_hardware]
    pairs = list(dict.fromkeys((p.family, p.category) for p in report.points
                               if p.category in categories))
    pairs = [fc for fc in pairs if report.stats(fc[1], fc[0])["compared"]]
    if pairs:
        head = ["family", "category", "supported / points", "median \\|err\\|", "worst"]
        lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for f, c in pairs:
            st = report.stats(c, f)
            lines.append("| " + " | ".join([f, c, f"{st['supported']} / {st['points']}",
                                            _pct(st["median_abs_error"], False), worst(st)]) + " |")
    reasons = unsupported_by_reason([p for p in report.points if p.category in categories])
    if reasons:
        lines += ["", "Unsupported points, by reason (listed by `flopsheet validate`, never dropped):", ""]
        for reason, ids in sorted(reasons.items(), key=lambda kv: -len(kv[1])):
            lines.append(f"- {len(ids)}: {reason}")
    return "\n".join(lines)


def to_json(report: Report, categories: list[str], by: str | None = None) -> dict:
    out = {
        "rows": [{"point": r.point.id, "family": r.point.family, "category": r.point.category,
                  **r.tags,
                  "metric": r.expect.metric, "node": r.expect.node, "unit": r.expect.unit,
                  "predicted": r.predicted, "measured": r.measured, "error": r.error,
                  "tolerance": r.expect.tolerance, "within_tolerance": r.within,
                  "counted": r.expect.counted, "flags": r.flags, "problem": r.problem,
                  "note": r.note}
                 for r in report.rows],
        "unsupported": [{"point": p.id, "family": p.family, "category": p.category,
                         "reason": p.unsupported} for p in report.points if not p.supported],
        "categories": {c: report.stats(c) for c in categories},
        "repeats": {c: report.repeat_stats(c) for c in categories},
        "problems": [{"point": pid, "message": m} for pid, m in report.problems],
    }
    if by:
        out["by"] = {"key": by, "large_error": LARGE_ERROR,
                     "categories": {c: report.breakdown(by, c) for c in categories}}
    return out


def _append(ws, values: list) -> None:
    """Append a row whose text stays text: openpyxl stores a string that starts with ``=`` as
    a formula, and ids, sources and reasons come from validation files users share."""
    ws.append(values)
    for cell in ws[ws.max_row]:
        if isinstance(cell.value, str):
            cell.data_type = "s"


def write_xlsx(report: Report, categories: list[str], path: str) -> None:
    """A plain results workbook (numbers, not live formulas: the points are many scenarios)."""
    from openpyxl import Workbook
    wb = Workbook()
    ws = wb.active
    ws.title = "Summary"
    _append(ws, SUMMARY_HEAD)
    for c in categories:
        s = report.stats(c)
        _append(ws, [c, s["points"], s["supported"], s["compared"], s["median_abs_error"],
                     s["p90_abs_error"], s["worst_error"], s["worst_point"]])
    ws = wb.create_sheet("Points")
    _append(ws, ["point", "family", "category", "metric", "node", "predicted", "measured", "unit",
                 "error", "tolerance", "counted", "source", "note"])
    for r in report.rows:
        _append(ws, [r.point.id, r.point.family, r.point.category, r.expect.metric, r.expect.node,
                     r.predicted, r.measured, r.expect.unit, r.error, r.expect.tolerance,
                     r.expect.counted, r.point.source, r.note])
    ws = wb.create_sheet("Unsupported")
    _append(ws, ["point", "family", "category", "reason"])
    for p in report.points:
        if not p.supported:
            _append(ws, [p.id, p.family, p.category, p.unsupported])
    from .atomic import atomic_write
    atomic_write(path, wb.save)
