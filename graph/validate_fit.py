"""Fitting global calibration inputs on validation points (``flopsheet validate --fit``).

Every counted row of the chosen points is evaluated in one vectorized call of the graph per set of
formula nodes the rows override (one array element per row; an input a row leaves unset takes its
default), so a least-squares fit - scipy.optimize.least_squares on log(predicted / measured), within
the inputs' bounds - takes seconds, not minutes. Nothing is
written back: a fitted value goes into a preset by hand, with the command as its source.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from .errors import FlopsheetError, ScenarioError, UnknownNameError
from .names import suggest
from .scenario import resolve
from .validate_points import Point
from .validate_report import error_stats
from .validate_run import Validator

#: least_squares losses: linear is the mean squared log error; soft_l1 (scale 5 %) is robust to the
#: few outlying measurements of a family
LOSSES = ("linear", "soft_l1")
#: how the fit set's rows weigh: each row once, or each family once (its rows share 1 between them,
#: so a weak-scaling table of 90 rows counts as much as a paper's single run)
WEIGHTS = ("row", "family")
#: ``--on all``: fit on every family (narrowed by ``--only``)
ALL = "all"


@dataclass
class Rows:
    """The counted rows of some points as arrays: inputs grouped by the names they set."""
    batches: list  # (row indices, {input name: values}) - rows overriding the same formula nodes
    nodes: list    # the expected node of each row
    measured: np.ndarray  # in the node's units
    ids: list      # the point id of each row
    families: list  # the family of each row

    def __len__(self) -> int:
        return len(self.nodes)

    def subset(self, keep: np.ndarray) -> "Rows":
        """The rows where ``keep`` is true, in their order."""
        new = np.cumsum(keep) - 1  # each kept row's index among the kept ones
        batches = []
        for idx, values in self.batches:
            sel = [j for j, i in enumerate(idx) if keep[i]]
            if sel:
                batches.append(([int(new[idx[j]]) for j in sel],
                                {k: v[sel] for k, v in values.items()}))
        pick = lambda xs: [x for x, k in zip(xs, keep) if k]  # noqa: E731
        return Rows(batches, pick(self.nodes), self.measured[keep], pick(self.ids),
                    pick(self.families))


def collect(validator: Validator, points: list[Point]) -> Rows:
    """The counted rows of the supported ``points``; a row the library cannot evaluate (its
    ``flopsheet validate`` problem) is left out, as the report's statistics leave it out."""
    cols, nodes, measured, ids, families = [], [], [], [], []
    for p in points:
        if not p.supported:
            continue
        for e in p.expects:
            if not e.counted or e.node not in validator.lib:
                continue
            try:
                vals = resolve(validator.scenario(p, e.values), validator.model)
                value = validator.measured(p, e)
            except FlopsheetError:
                continue
            if not value:
                continue
            cols.append(vals)
            nodes.append(e.node)
            measured.append(value)
            ids.append(p.id)
            families.append(p.family)
    return Rows(_batches(validator, cols), nodes, np.array(measured, dtype=float), ids, families)


def _batches(validator: Validator, cols: list[dict]) -> list:
    """The rows' values as few vectorized batches: an input a row leaves unset takes the value the graph gives it
    anyway (its default), so rows differ only in the formula nodes they override, and each set of those is one
    batch - one graph call per batch and fit step instead of one per set of names the scenarios happen to write."""
    defaults = validator.model.defaults()
    fill = {k for c in cols for k in c if k in validator.lib.inputs and defaults.get(k) is not None}
    groups: dict = {}
    for i, c in enumerate(cols):
        groups.setdefault(tuple(sorted(set(c) - fill)), []).append(i)
    names = sorted(fill)
    return [(idx, {k: np.array([float(cols[i].get(k, defaults.get(k))) for i in idx]) for k in names + list(own)})
            for own, idx in groups.items()]


def predict(validator: Validator, rows: Rows, overrides: dict | None = None) -> np.ndarray:
    """Predicted value of every row (node units), with ``overrides`` (encoded values) on top."""
    out = np.empty(len(rows))
    for idx, values in rows.batches:
        v = dict(values)
        for k, x in (overrides or {}).items():
            v[k] = np.full(len(idx), float(x))
        res = validator.model.evaluate(v, outputs=sorted({rows.nodes[i] for i in idx}), check=False)
        for j, i in enumerate(idx):
            out[i] = np.broadcast_to(np.asarray(res[rows.nodes[i]], dtype=float), (len(idx),))[j]
    return out


def default(validator: Validator, name: str) -> float:
    """An input's library default as the graph takes it (a choice as its index)."""
    return float(validator.model.encode(name, validator.lib.inputs[name].default))


def shipped(validator: Validator, rows: Rows, name: str) -> list[float]:
    """The distinct values the rows' scenarios give ``name`` (its library default where unset)."""
    vals = {float(x) for _, v in rows.batches for x in v.get(name, [default(validator, name)])}
    return sorted(vals)


def sharing(validator: Validator, rows: Rows, values: dict) -> np.ndarray:
    """Which rows give every input in ``values`` one of the values listed for it - the rows that
    share a fitted constant (the same generation's preset, or the library default)."""
    mask = np.zeros(len(rows), dtype=bool)
    for idx, v in rows.batches:
        ok = np.ones(len(idx), dtype=bool)
        for name, allowed in values.items():
            got = v.get(name, np.full(len(idx), default(validator, name)))
            ok &= np.isin(np.round(got, 12), np.round(allowed, 12))
        mask[idx] = ok
    return mask


def stats(err: np.ndarray, ids: list) -> dict:
    """The error statistics of some rows (as the report's) and the worst row's point."""
    out = error_stats(err)
    k = out.pop("worst")
    return {"compared": len(err), **out, "worst_id": None if k is None else ids[k]}


def row_weights(rows: Rows, weight: str) -> np.ndarray:
    """Each row's weight in the fit, averaging 1: all 1 (``row``), or 1 / (its family's rows in
    the fit set) scaled so the weights still sum to the row count (``family``)."""
    if weight == "row":
        return np.ones(len(rows))
    counts = Counter(rows.families)
    w = np.array([1.0 / counts[f] for f in rows.families])
    return w * len(rows) / w.sum()


def weighted_loss(loss: str, weights: np.ndarray):
    """The robust loss of scipy.optimize.least_squares (rho of z = (residual / f_scale)^2 with its
    first two derivatives) with each row's term multiplied by its weight."""
    def rho(z):
        if loss == "soft_l1":
            t = 1 + z
            out = np.vstack([2 * (np.sqrt(t) - 1), t ** -0.5, -0.5 * t ** -1.5])
        else:
            out = np.vstack([z, np.ones_like(z), np.zeros_like(z)])
        return out * weights
    return rho


def on_names(on: str) -> set[str]:
    """The families or point ids ``--on`` names (comma-separated; ``all`` for every family)."""
    return {f.strip() for f in on.split(",") if f.strip()}


def fit_points(points: list[Point], on: str, only: list[list[str]] | None = None) -> list[Point]:
    """The supported ``points`` of the families (or point ids) ``on`` - ``all`` for every family -
    whose id contains one substring of every group in ``only``."""
    fams = on_names(on)
    every = fams == {ALL}
    keep = lambda p: all(any(s in p.id for s in group) for group in (only or []))  # noqa: E731
    train = [p for p in points
             if p.supported and (every or p.family in fams or p.id in fams) and keep(p)]
    if not train:
        raise ScenarioError(f"--on `{on}`{' with --only' if only else ''} selects no supported "
                            f"point (families: {', '.join(sorted({p.family for p in points}))})")
    return train


def check_names(validator: Validator, names: list[str], fixed: dict | None, loss: str,
                weight: str) -> None:
    """The fitted names are numeric inputs not also held; the loss and weighting are known."""
    lib = validator.lib
    for n in names:
        if n not in lib.inputs or lib.inputs[n].is_choice:
            raise UnknownNameError(f"--fit: `{n}` is not a numeric input" + suggest(n, lib.inputs))
    both = sorted(set(names) & set(fixed or {}))
    if both:
        raise ScenarioError(f"`{both[0]}` is both fitted (--fit) and held (--set)")
    if loss not in LOSSES:
        raise ScenarioError(f"--loss must be one of {', '.join(LOSSES)}, not `{loss}`")
    if weight not in WEIGHTS:
        raise ScenarioError(f"--weight must be one of {', '.join(WEIGHTS)}, not `{weight}`")


def solve(validator: Validator, fit_rows: Rows, names: list[str], fixed: dict, loss: str,
          weight: str) -> dict[str, float]:
    """The values of ``names`` that fit ``fit_rows`` (scipy.optimize.least_squares on the log
    error, from the median of their shipped values, within the inputs' bounds), ``fixed``
    (encoded values) held."""
    from scipy.optimize import least_squares

    lib = validator.lib
    start = np.array([float(np.median(shipped(validator, fit_rows, n))) for n in names])
    scale = np.where(start != 0, np.abs(start), 1.0)
    bound = lambda b, inf: inf if b is None else float(b)  # noqa: E731
    lo = [bound(lib.inputs[n].bounds[0], -np.inf) / s for n, s in zip(names, scale)]
    hi = [bound(lib.inputs[n].bounds[1], np.inf) / s for n, s in zip(names, scale)]

    def resid(z):
        pred = predict(validator, fit_rows, {**fixed, **dict(zip(names, z * scale))})
        return np.log(np.maximum(pred, 1e-300) / fit_rows.measured)

    sol = least_squares(resid, np.clip(start / scale, lo, hi), bounds=(lo, hi), diff_step=1e-3,
                        loss=weighted_loss(loss, row_weights(fit_rows, weight)), f_scale=0.05)
    return dict(zip(names, map(float, sol.x * scale)))


def fit(validator: Validator, points: list[Point], names: list[str], on: str,
        only: list[list[str]] | None = None, fixed: dict | None = None,
        loss: str = "linear", weight: str = "row") -> dict:
    """Fit the global inputs ``names`` on the counted rows of the families (or point ids) ``on``
    among ``points`` (``all``: every family), keeping those whose id contains one substring of
    every group in ``only``; ``fixed`` (a number or a choice name per input) is held for the fit
    and both reports. Reports the fitted values and the error before (the shipped values) and
    after, on the fit set and on the held-out rows: the other supported ``points`` whose
    scenarios give the fitted and the set inputs the fit set's shipped values (the rows the
    refitted constants would move). ``weight`` family gives each family of the fit set one vote,
    however many rows it has."""
    check_names(validator, names, fixed, loss, weight)
    train = fit_points(points, on, only)
    chosen = {id(p) for p in train}
    rest = [p for p in points if p.supported and id(p) not in chosen]
    held = dict(fixed or {})
    fixed = encode_fixed(validator, held)
    fit_rows, rest_rows = collect(validator, train), collect(validator, rest)
    if not len(fit_rows):
        raise ScenarioError(f"--on `{on}`: the selected points have no counted row to fit")
    ships = {n: shipped(validator, fit_rows, n) for n in names}
    fitted = solve(validator, fit_rows, names, fixed, loss, weight)
    err = lambda rows, ov: predict(validator, rows, ov) / rows.measured - 1  # noqa: E731
    before, after = err(fit_rows, fixed), err(fit_rows, {**fixed, **fitted})
    # held out: the other rows that ship the fit set's values of every fitted and set input
    same = {**ships, **{n: shipped(validator, fit_rows, n) for n in fixed}}
    held_rows = rest_rows.subset(sharing(validator, rest_rows, same))
    held_before, held_after = err(held_rows, fixed), err(held_rows, {**fixed, **fitted})
    return {"names": list(names), "shipped": ships, "fitted": fitted,
            "fixed": {n: str(v) for n, v in held.items()}, "loss": loss, "weight": weight,
            "fit_on": sorted({p.family for p in train} if on_names(on) == {ALL} else on_names(on)),
            "only": only or [],
            "fit_points": len(train), "rest_points": len(rest),
            "held_points": len(set(held_rows.ids)),
            "fit_before": stats(before, fit_rows.ids), "fit_after": stats(after, fit_rows.ids),
            "held_before": stats(held_before, held_rows.ids),
            "held_after": stats(held_after, held_rows.ids),
            "fit_rows": [{"point": i, "before": float(b), "after": float(a)}
                         for i, b, a in zip(fit_rows.ids, before, after)],
            "held_rows": [{"point": i, "before": float(b), "after": float(a)}
                          for i, b, a in zip(held_rows.ids, held_before, held_after)]}


def encode_fixed(validator: Validator, fixed: dict) -> dict:
    """Held inputs as the graph takes them (a number, with a unit if it has one, or a choice
    name), checked against the inputs' bounds and choices."""
    out = {}
    for name, value in fixed.items():
        if name not in validator.lib.inputs:
            raise UnknownNameError(f"--set: `{name}` is not an input"
                                   + suggest(name, validator.lib.inputs))
        out[name] = float(validator.model.encode(name, value))
    return out
