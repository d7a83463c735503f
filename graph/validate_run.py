"""Evaluating validation points on one compiled library (fitting calibration inputs on them is
graph/validate_fit.py)."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from .errors import FlopsheetError, ScenarioError, UnknownNameError
from .evaluate import Model
from .library import Library, load_library
from .names import suggest
from .scenario import compose, resolve
from .units import convert_value
from .validate_points import Point, validation_dir
from .validate_report import Report, Row

#: conditions checked for training points; a false one is shown beside the row (not an error)
CHECKS = {"parallel_config_valid": "breaks a divisibility rule", "fits_in_memory": "exceeds HBM"}


#: the input whose origin names a point's hardware preset (every templates/hardware file sets it)
HARDWARE_MARK = "peak_flops_bf16"


def point_tags(sc, values: dict) -> dict[str, str]:
    """What ``--by`` groups a point's rows on: the hardware preset that sets its BF16 peak
    (the last hardware preset applied when the point sets the peak itself; ``-`` when none is)
    and whether its model routes tokens to experts."""
    def stem(origin: str) -> str:  # "templates/hardware/gb200.yaml:6" -> "gb200"
        return Path(origin.split(":", 1)[0]).stem
    mark = sc.values.get(HARDWARE_MARK)
    if mark is not None and "templates/hardware/" in mark.origin:
        hardware = stem(mark.origin)
    else:
        chain = [f for f in sc.chain if "templates/hardware/" in f]
        hardware = stem(chain[-1]) if chain else "-"
    return {"hardware": hardware, "moe": "moe" if values.get("experts", 0) > 0 else "dense"}


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

    def measured(self, p: Point, e) -> float:
        """An expect row's measured value in its node's coherent units."""
        return convert_value(f"{e.value} {e.unit}", self.lib.item(e.node).dim, file=p.file,
                             line=p.line, node=p.id)

    def evaluate_point(self, p: Point, overrides: dict | None = None) -> list[Row]:
        """Rows of one supported point; ``overrides`` (encoded values) apply on top (what-if runs)."""
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
                tags = point_tags(sc, values)
                checks = [c for c in CHECKS if p.category == "training" and c in self.lib]
                outs = sorted({r.expect.node for r in group} | ({"n_gpus"} if p.gpus else set())
                              | set(checks))
                key = hashlib.sha256(json.dumps(values, sort_keys=True,
                                                default=str).encode()).hexdigest()
                res = self.model.evaluate(values, outputs=outs)
                flags = [CHECKS[c] for c in checks if not res.scalar(c)]
                if p.gpus and res.scalar("n_gpus") != p.gpus:
                    raise ScenarioError(f"tp x pp x dp x cp = {res.scalar('n_gpus'):g} GPUs, but "
                                        f"the source ran on {p.gpus}", file=p.file, line=p.line,
                                        node=p.id)
                for r in group:
                    scale = self.unit_scale(r.expect.node, r.expect.unit, p)
                    measured = self.measured(p, r.expect)
                    pred = res.scalar(r.expect.node)
                    r.predicted, r.measured = pred / scale, measured / scale
                    r.error = pred / measured - 1 if measured else None
                    r.flags = flags
                    r.inputs_key = key
                    r.tags = tags
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
