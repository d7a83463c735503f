"""``flopsheet validate``: published measurements as a re-runnable accuracy report.

Every published data point (``../shared/validation/published.yaml``) lives in a
*family file* under ``templates/validation/`` (one per source family) as a
scenario - ``use:`` presets plus ``values:`` - and the numbers its source
reports::

    doc: Narayanan et al. SC21, Table 1.
    source: default citation of the points below
    category: training                 # default for the points
    tolerance: 0.10                    # default |error| a row is expected to stay within
    points:
      train-megatron-sc21-1.7b:        # the id in published.yaml
        description: GPT 1.7B on 32 A100
        source: ...                    # where the measured numbers come from
        use: [sc21-table1-1.7b, validation/assumptions/megatron-lm-2021]
        values: {micro_batch: 16}      # the point's own inputs, as in a scenario
        gpus: 32                       # checked against n_gpus
        expect:                        # what the source reports, each against one node
          - {metric: achieved_tflops_per_gpu, node: achieved_flops_per_gpu, value: 137, unit: TFLOP/s}
          - {metric: pct_of_peak, node: hfu, value: 44, unit: "%", counted: false}
        not_compared:                  # reported numbers left out, and why
          aggregate_pflops: per-system rescaling of achieved_tflops_per_gpu

An ``expect`` row may carry its own ``values:`` (a variant of the point, e.g.
another recompute setting), a ``tolerance`` and ``counted: false`` for a
number the source derived from another row of the same point (shown and
checked, but kept out of the statistics so one measurement is not counted
twice). A point the library cannot express yet carries ``unsupported:
<reason>`` instead of being dropped; it is listed and counted.

Statistics per category are over the counted rows of supported points: the
median and 90th percentile of |error| and the worst signed error, where
error = predicted / measured - 1. Assumptions a source leaves open live in
the points (or in ``templates/validation/assumptions/``, one preset per
family); calibration constants are global and never set here.
"""
from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .errors import FlopsheetError, ScenarioError, UnknownNameError
from .evaluate import Model
from .fmt import table
from .library import Library, load_library
from .names import suggest
from .scenario import bundled_templates, compose, resolve
from .units import convert_value
from .yamlio import read_mapping, read_text

CATEGORIES = ["training", "inference", "memory", "collective", "cost"]
FAMILY_KEYS = {"doc", "source", "category", "tolerance", "points"}
POINT_KEYS = {"description", "source", "category", "use", "values", "gpus", "expect",
              "not_compared", "unsupported", "note"}
EXPECT_KEYS = {"metric", "node", "value", "unit", "tolerance", "counted", "values", "note"}
DEFAULT_TOLERANCE = 0.10
#: conditions checked for training points; a false one is shown beside the row (not an error)
CHECKS = {"parallel_config_valid": "breaks a divisibility rule", "fits_in_memory": "exceeds HBM"}
COMMAND = "flopsheet validate --markdown"


def validation_dir() -> Path:
    return bundled_templates() / "validation"


# ----------------------------------------------------------------------------- loading
@dataclass
class Expect:
    metric: str
    node: str | None
    value: Any
    unit: str
    tolerance: float
    counted: bool = True
    values: dict = field(default_factory=dict)
    note: str = ""


@dataclass
class Point:
    id: str
    family: str
    file: str  # shown path, e.g. templates/validation/sc21-table1.yaml
    line: int | None
    category: str
    description: str
    source: str
    use: list[str]
    values: dict
    expects: list[Expect]
    gpus: int | None = None
    not_compared: dict = field(default_factory=dict)
    unsupported: str | None = None
    note: str = ""
    near: Path | None = None  # folder `use:` references are looked up beside (the family's)

    @property
    def supported(self) -> bool:
        return self.unsupported is None


def _err(msg, file, line=None, node=None):
    return ScenarioError(msg, file=file, line=line, node=node)


def _check_keys(d: dict, allowed: set, what: str, file, line, node=None):
    for k in d:
        if k not in allowed:
            raise _err(f"unknown key `{k}` in {what}" + suggest(str(k), allowed)
                       + f" (allowed: {', '.join(sorted(allowed))})", file, line, node)


def _shown(path: Path) -> str:
    try:
        return "templates/" + path.resolve().relative_to(bundled_templates().resolve()).as_posix()
    except ValueError:
        return str(path)


def load_family(path: Path) -> list[Point]:
    """The points of one family file (see the module docstring for its format)."""
    path = Path(path)
    shown = _shown(path)
    data, lines = read_mapping(read_text(path, shown), shown, "validation family")
    _check_keys(data, FAMILY_KEYS, "a validation family", shown, 1)
    family = path.stem
    category = data.get("category")
    tol = float(data.get("tolerance", DEFAULT_TOLERANCE))
    fsource = str(data.get("source") or "").strip()
    points = data.get("points")
    if not isinstance(points, dict) or not points:
        raise _err("`points:` must be a mapping of point id -> point", shown, lines.get(("points",)))
    out = []
    for pid, body in points.items():
        line = lines.get(("points", pid))
        if not isinstance(body, dict):
            raise _err("a point is a mapping (use, values, expect, ...)", shown, line, str(pid))
        _check_keys(body, POINT_KEYS, f"point `{pid}`", shown, line, str(pid))
        cat = body.get("category", category)
        if cat not in CATEGORIES:
            raise _err(f"category `{cat}` is not one of {', '.join(CATEGORIES)}", shown, line, str(pid))
        unsupported = body.get("unsupported")
        if unsupported is not None:
            unsupported = str(unsupported).strip()
            if not unsupported:
                raise _err("`unsupported:` needs a reason", shown, line, str(pid))
        raw_expects = body.get("expect") or []
        if not isinstance(raw_expects, list) or not all(isinstance(e, dict) for e in raw_expects):
            raise _err("`expect:` must be a list of {metric, node, value, unit}", shown, line, str(pid))
        expects = []
        for e in raw_expects:
            _check_keys(e, EXPECT_KEYS, f"an `expect` row of `{pid}`", shown, line, str(pid))
            for k in ("metric", "value", "unit") + (() if unsupported else ("node",)):
                if e.get(k) is None:
                    raise _err(f"an `expect` row needs `{k}`", shown, line, str(pid))
            vals = e.get("values") or {}
            if not isinstance(vals, dict):
                raise _err("`values:` of an `expect` row must be a mapping", shown, line, str(pid))
            expects.append(Expect(metric=str(e["metric"]), node=e.get("node"), value=e["value"],
                                  unit=str(e["unit"]), tolerance=float(e.get("tolerance", tol)),
                                  counted=bool(e.get("counted", True)), values=vals,
                                  note=str(e.get("note") or "")))
        if unsupported is None and not any(e.counted for e in expects):
            raise _err("a supported point needs at least one counted `expect` row", shown, line,
                       str(pid))
        if not isinstance(body.get("values") or {}, dict):
            raise _err("`values:` must be a mapping of name -> value", shown, line, str(pid))
        gpus = body.get("gpus")
        if gpus is not None and (not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 1):
            raise _err("`gpus:` must be a whole number of GPUs", shown, line, str(pid))
        nc = body.get("not_compared") or {}
        if not isinstance(nc, dict):
            raise _err("`not_compared:` must map a reported metric to the reason it is left out",
                       shown, line, str(pid))
        use = body.get("use") or []
        out.append(Point(id=str(pid), family=family, file=shown, line=line, category=cat,
                         description=str(body.get("description") or "").strip(),
                         source=str(body.get("source") or fsource).strip(),
                         use=[use] if isinstance(use, str) else list(use),
                         values=body.get("values") or {}, expects=expects,
                         gpus=gpus, not_compared={str(k): str(v) for k, v in nc.items()},
                         unsupported=unsupported, note=str(body.get("note") or "").strip(),
                         near=path.parent))
    return out


def load_points(root: Path | None = None) -> list[Point]:
    """Every validation point of the bundled family files, in file order."""
    root = root or validation_dir()
    points: list[Point] = []
    seen: dict[str, str] = {}
    for path in sorted(root.glob("*.yaml")):
        for p in load_family(path):
            if p.id in seen:
                raise _err(f"point `{p.id}` is also in {seen[p.id]}", p.file, p.line, p.id)
            seen[p.id] = p.file
            points.append(p)
    order = {c: i for i, c in enumerate(CATEGORIES)}
    return sorted(points, key=lambda p: order[p.category])  # stable: file order within a category


# -------------------------------------------------------------------------- evaluation
@dataclass
class Row:
    point: Point
    expect: Expect
    predicted: float | None = None  # in the expect's unit
    measured: float | None = None   # in the expect's unit
    error: float | None = None      # predicted / measured - 1
    problem: str | None = None      # an error (bad point), not an inaccuracy
    flags: list[str] = field(default_factory=list)  # e.g. the configuration breaks a rule

    @property
    def within(self) -> bool:
        return self.error is not None and abs(self.error) <= self.expect.tolerance


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
        errs = np.array([r.error for r in rows], dtype=float)
        out = {"points": len(pts), "supported": sum(p.supported for p in pts),
               "unsupported": sum(not p.supported for p in pts), "compared": len(rows),
               "median_abs_error": None, "p90_abs_error": None, "worst_error": None,
               "worst_point": None, "worst_id": None, "worst_metric": None,
               "within_tolerance": sum(r.within for r in rows)}
        if len(rows):
            a = np.abs(errs)
            worst = rows[int(np.argmax(a))]
            out.update(median_abs_error=float(np.median(a)),
                       p90_abs_error=float(np.percentile(a, 90)),
                       worst_error=float(worst.error), worst_id=worst.point.id,
                       worst_metric=worst.expect.metric,
                       worst_point=f"{worst.point.id} ({worst.expect.metric})")
        return out

    def worst(self, n: int = 5, category: str | None = None) -> list[Row]:
        rows = [r for r in self.rows if r.expect.counted and r.error is not None
                and category in (None, r.point.category)]
        return sorted(rows, key=lambda r: -abs(r.error))[:n]


class Validator:
    """Evaluates validation points on one compiled library (cached in-process)."""

    def __init__(self, lib: Library | None = None):
        self.lib = lib or load_library()
        self.model = Model(self.lib)

    def scenario(self, p: Point, extra: dict | None = None):
        values = dict(p.values)
        values.update(extra or {})
        return compose(p.id, p.file, p.use, values, near=p.near or validation_dir(),
                       default_source=p.source, line=p.line, doc=p.description)

    def unit_scale(self, node: str, unit: str, p: Point) -> float:
        return convert_value(f"1 {unit}", self.lib.item(node).dim, file=p.file, line=p.line,
                             node=p.id)

    def evaluate_point(self, p: Point, overrides: dict | None = None) -> list[Row]:
        """Rows of one supported point; ``overrides`` (encoded values) apply on top (for --fit)."""
        rows = [Row(p, e) for e in p.expects]
        groups: dict[str, list[Row]] = {}
        for r in rows:
            groups.setdefault(json.dumps(r.expect.values, sort_keys=True, default=str), []).append(r)
        for group in groups.values():
            try:
                for r in group:
                    if r.expect.node not in self.lib:
                        raise UnknownNameError(f"`expect` names unknown node `{r.expect.node}`"
                                               + suggest(str(r.expect.node), self.lib.names()),
                                               file=p.file, line=p.line, node=p.id)
                sc = self.scenario(p, group[0].expect.values)
                values = resolve(sc, self.model)
                values.update(overrides or {})
                checks = [c for c in CHECKS if p.category == "training" and c in self.lib]
                outs = sorted({r.expect.node for r in group} | ({"n_gpus"} if p.gpus else set())
                              | set(checks))
                res = self.model.evaluate(values, outputs=outs)
                flags = [CHECKS[c] for c in checks if not res.scalar(c)]
                if p.gpus and res.scalar("n_gpus") != p.gpus:
                    raise ScenarioError(f"tp x pp x dp x cp = {res.scalar('n_gpus'):g} GPUs, but "
                                        f"the source ran on {p.gpus}", file=p.file, line=p.line,
                                        node=p.id)
                for r in group:
                    scale = self.unit_scale(r.expect.node, r.expect.unit, p)
                    measured = convert_value(f"{r.expect.value} {r.expect.unit}",
                                             self.lib.item(r.expect.node).dim, file=p.file,
                                             line=p.line, node=p.id)
                    pred = res.scalar(r.expect.node)
                    r.predicted, r.measured = pred / scale, measured / scale
                    r.error = pred / measured - 1 if measured else None
                    r.flags = flags
                    if not measured:
                        r.problem = "measured value is 0: no relative error (compare another metric)"
            except FlopsheetError as e:
                for r in group:
                    r.problem = e.render()
        return rows

    def run(self, points: list[Point], overrides: dict | None = None) -> Report:
        rows, problems = [], []
        for p in points:
            if not p.supported:
                continue
            for r in self.evaluate_point(p, overrides):
                rows.append(r)
                if r.problem:
                    problems.append((p.id, r.problem))
        return Report(points, rows, problems)


def select(points: list[Point], category: str | None = None, family: str | None = None):
    out = points
    if category:
        out = [p for p in out if p.category == category]
    if family:
        fams = {f.strip() for f in family.split(",")}
        known = {p.family for p in points}
        for f in fams - known:
            raise ScenarioError(f"no validation family `{f}`" + suggest(f, known))
        out = [p for p in out if p.family in fams]
    return out


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


def rows_table(report: Report) -> str:
    body = []
    for r in report.rows:
        e = r.expect
        flag = "ERROR" if r.problem else ("ok" if r.within else f"> {e.tolerance:.0%}")
        if r.flags:
            flag += " (" + "; ".join(r.flags) + ")"
        body.append([r.point.id, f"{e.metric} -> {e.node}" + ("" if e.counted else " (not counted)"),
                     _num(r.predicted), _num(r.measured), e.unit, _pct(r.error), flag])
    return table(body, ["point", "metric -> node", "predicted", "measured", "unit", "error", "vs tolerance"],
                 right={2, 3, 5})


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
    """The README 'Accuracy' section body: per category, then per family, then what is unsupported."""
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


def to_json(report: Report, categories: list[str]) -> dict:
    return {
        "rows": [{"point": r.point.id, "family": r.point.family, "category": r.point.category,
                  "metric": r.expect.metric, "node": r.expect.node, "unit": r.expect.unit,
                  "predicted": r.predicted, "measured": r.measured, "error": r.error,
                  "tolerance": r.expect.tolerance, "within_tolerance": r.within,
                  "counted": r.expect.counted, "flags": r.flags, "problem": r.problem}
                 for r in report.rows],
        "unsupported": [{"point": p.id, "family": p.family, "category": p.category,
                         "reason": p.unsupported} for p in report.points if not p.supported],
        "categories": {c: report.stats(c) for c in categories},
        "problems": [{"point": pid, "message": m} for pid, m in report.problems],
    }


def write_xlsx(report: Report, categories: list[str], path: str) -> None:
    """A plain results workbook (numbers, not live formulas: the points are many scenarios)."""
    from openpyxl import Workbook
    wb = Workbook()
    ws = wb.active
    ws.title = "Summary"
    ws.append(SUMMARY_HEAD)
    for c in categories:
        s = report.stats(c)
        ws.append([c, s["points"], s["supported"], s["compared"], s["median_abs_error"],
                   s["p90_abs_error"], s["worst_error"], s["worst_point"]])
    ws = wb.create_sheet("Points")
    ws.append(["point", "family", "category", "metric", "node", "predicted", "measured", "unit",
               "error", "tolerance", "counted", "source"])
    for r in report.rows:
        ws.append([r.point.id, r.point.family, r.point.category, r.expect.metric, r.expect.node,
                   r.predicted, r.measured, r.expect.unit, r.error, r.expect.tolerance,
                   r.expect.counted, r.point.source])
    ws = wb.create_sheet("Unsupported")
    ws.append(["point", "family", "category", "reason"])
    for p in report.points:
        if not p.supported:
            ws.append([p.id, p.family, p.category, p.unsupported])
    from .atomic import atomic_write
    atomic_write(path, wb.save)


# ---------------------------------------------------------------------------------- fit
def _nelder_mead(f, x0, bounds, *, step=0.1, xtol=1e-4, max_evals=300):
    """Minimise ``f`` from ``x0`` by Nelder-Mead, every trial point clamped into ``bounds``."""
    lo = np.array([-np.inf if b[0] is None else b[0] for b in bounds], dtype=float)
    hi = np.array([np.inf if b[1] is None else b[1] for b in bounds], dtype=float)
    clamp = lambda x: np.minimum(np.maximum(x, lo), hi)  # noqa: E731
    n = len(x0)
    simplex = [clamp(np.asarray(x0, dtype=float))]
    for i in range(n):
        x = simplex[0].copy()
        x[i] = x[i] * (1 + step) if x[i] else step
        if x[i] > hi[i]:  # at the upper bound: step down instead
            x[i] = simplex[0][i] * (1 - step)
        simplex.append(clamp(x))
    values = [f(x) for x in simplex]
    evals = n + 1
    while evals < max_evals:
        order = np.argsort(values)
        simplex, values = [simplex[i] for i in order], [values[i] for i in order]
        if max(np.max(np.abs(x - simplex[0])) for x in simplex[1:]) < xtol:
            break
        centroid = np.mean(simplex[:-1], axis=0)
        xr = clamp(centroid + (centroid - simplex[-1]))
        fr = f(xr)
        evals += 1
        if fr < values[0]:
            xe = clamp(centroid + 2 * (centroid - simplex[-1]))
            fe = f(xe)
            evals += 1
            simplex[-1], values[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = xr, fr
        else:
            xc = clamp(centroid + 0.5 * (simplex[-1] - centroid))
            fc = f(xc)
            evals += 1
            if fc < values[-1]:
                simplex[-1], values[-1] = xc, fc
            else:  # shrink towards the best point
                simplex = [simplex[0]] + [clamp(simplex[0] + 0.5 * (x - simplex[0]))
                                          for x in simplex[1:]]
                values = [values[0]] + [f(x) for x in simplex[1:]]
                evals += n
    best = int(np.argmin(values))
    return simplex[best], values[best]


def fit(validator: Validator, points: list[Point], names: list[str], on: str) -> dict:
    """Fit global calibration inputs on the families (or point ids) ``on``; report the fitted
    values and the error on the fit set and on the rest of ``points``.

    Minimises the mean squared log error of the counted rows of the fit set (Nelder-Mead within
    the inputs' bounds). Nothing is written back to the templates: the shipped constants stay
    what their sources say.
    """
    lib = validator.lib
    for n in names:
        if n not in lib.inputs or lib.inputs[n].is_choice:
            raise UnknownNameError(f"--fit: `{n}` is not a numeric input"
                                   + suggest(n, lib.inputs))
    fams = {f.strip() for f in on.split(",")}
    train = [p for p in points if p.supported and (p.family in fams or p.id in fams)]
    rest = [p for p in points if p.supported and p not in train]
    if not train:
        raise ScenarioError(f"--on `{on}` selects no supported point (families: "
                            f"{', '.join(sorted({p.family for p in points}))})")
    start = np.array([float(lib.inputs[n].default) for n in names])

    def loss(x):
        rep = validator.run(train, dict(zip(names, map(float, x))))
        errs = [math.log1p(r.error) for r in rep.rows
                if r.expect.counted and r.error is not None and r.error > -1]
        return float(np.mean(np.square(errs))) if errs else float("inf")

    best, _ = _nelder_mead(loss, start, [tuple(lib.inputs[n].bounds) for n in names])
    fitted = dict(zip(names, map(float, best)))
    before = validator.run(train + rest)
    after = validator.run(train + rest, fitted)
    part = lambda rep, pts: Report(pts, [r for r in rep.rows if r.point in pts], [])  # noqa: E731
    return {"names": names, "start": dict(zip(names, map(float, start))), "fitted": fitted,
            "fit_on": sorted(fams), "fit_points": len(train), "rest_points": len(rest),
            "fit_before": part(before, train).stats(), "fit_after": part(after, train).stats(),
            "rest_before": part(before, rest).stats(), "rest_after": part(after, rest).stats()}


# ---------------------------------------------------------------------------------- CLI
def register(sub, *, common) -> None:
    """Add the ``validate`` subcommand to the ``flopsheet`` parser."""
    v = sub.add_parser("validate", help="compare the model with published measurements "
                       "(templates/validation)")
    v.add_argument("--category", choices=CATEGORIES, help="only this category")
    v.add_argument("--family", metavar="F[,G]", help="only these families (file names in "
                   "templates/validation, without .yaml)")
    v.add_argument("--json", action="store_true", help="machine-readable output")
    v.add_argument("--markdown", action="store_true",
                   help="print the per-category accuracy table as Markdown (the README section)")
    v.add_argument("--xlsx", metavar="F", help="also write the results to F (.xlsx)")
    v.add_argument("--fit", metavar="A[,B]", help="fit these global calibration inputs (e.g. "
                   "gemm_efficiency) on the --on families and report the error on the rest; "
                   "nothing is written back")
    v.add_argument("--on", metavar="F[,G]", help="families (or point ids) to fit on, with --fit")
    common(v, scenario=False)
    v.set_defaults(func=cmd_validate)


def cmd_validate(args) -> int:
    lib = load_library(getattr(args, "formulas", None))
    validator = Validator(lib)
    points = select(load_points(), args.category, args.family)
    categories = [args.category] if args.category else CATEGORIES
    if args.fit:
        if not args.on:
            raise ScenarioError("--fit needs --on FAMILY[,FAMILY] (the points to fit on)")
        out = fit(validator, points, [n.strip() for n in args.fit.split(",")], args.on)
        if args.json:
            print(json.dumps(out, indent=2))
            return 0
        print(f"fitted on {', '.join(out['fit_on'])} ({out['fit_points']} points); "
              f"checked on the other {out['rest_points']} supported points (nothing written back)")
        for n in out["names"]:
            print(f"  {n}: {out['start'][n]:.4g} -> {out['fitted'][n]:.4g}")
        rows = []
        for label, key in [("fit set, shipped", "fit_before"), ("fit set, fitted", "fit_after"),
                           ("rest, shipped", "rest_before"), ("rest, fitted", "rest_after")]:
            s = out[key]
            rows.append([label, str(s["compared"]), _pct(s["median_abs_error"], False),
                         _pct(s["p90_abs_error"], False), _pct(s["worst_error"])])
        print(table(rows, ["rows", "compared", "median |err|", "p90 |err|", "worst"],
                       right={1, 2, 3, 4}))
        return 0
    report = validator.run(points)
    if args.xlsx:
        write_xlsx(report, categories, args.xlsx)
    if args.json:
        print(json.dumps(to_json(report, categories), indent=2))
    elif args.markdown:
        print(markdown(report, categories))
    else:
        print_text(report, categories)
    return 1 if report.problems else 0


__all__ = ["Point", "Expect", "Row", "Report", "Validator", "load_points", "load_family",
           "select", "markdown", "register", "cmd_validate", "CATEGORIES"]
