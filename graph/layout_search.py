"""Search: the best parallel layout of a scenario on N GPUs.

The space comes from a YAML file in ``templates/search/`` - picked by the
scenario (the first bundled space whose ``match:`` names a value the scenario
sets or an output it reports; ``training.yaml`` otherwise) or given with
``--space``. The file holds everything the search uses: which inputs multiply to
the GPU count (every ordered factorization is tried), the other axes and their
values, the rules that drop a row (condition nodes or conditions in the formula
language; the first broken rule is the row's reason), and the direction of each
objective. Candidates are one grid - the
factorizations as one zipped group, crossed with the other axes - evaluated in
chunks like any sweep, so Dask and progress come for free.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import numpy as np

from .chunks import Check, model_for
from .errors import FlopsheetError, ScenarioError
from .grid import DEFAULT_MAX_CONFIGS, Axis, Grid, GridError, axis_values, grid_from_sets
from .names import suggest
from .scenario import Scenario, bundled_templates, find_template, scenario_of
from .sweeps import make_job, where_checks
from .yamlio import read_mapping

SPACE_KEYS = {"doc", "source", "match", "factorize", "expert_axis", "split", "axes", "checks",
              "maximize", "objective", "show", "breakdown"}
DEFAULT_SPACE = "training"
MAX_GPUS = 2**24


@dataclass
class Space:
    path: str
    factorize: list[str]
    axes: dict[str, list]
    checks: list[Check]
    maximize: set[str] = field(default_factory=set)
    objective: str = "step_time"
    show: list[str] = field(default_factory=list)
    breakdown: list[str] = field(default_factory=list)
    expert_axis: str | None = None
    expert_group: list[str] = field(default_factory=lambda: ["dp", "cp"])
    match: list[str] = field(default_factory=list)
    split: dict | None = None  # {of: dp, into: [prefill_gpus, decode_gpus]}


def bundled_spaces() -> list[Path]:
    return sorted((bundled_templates() / "search").glob("*.yaml"))


def space_for(sc) -> Space:
    """The bundled space a scenario is searched in: the first (by file name) whose ``match:``
    names a value the scenario sets or an output it reports; the training space otherwise."""
    used = set(sc.values) | set(sc.report)
    for p in bundled_spaces():
        if p.stem != DEFAULT_SPACE:
            sp = load_space(str(p), shown=f"templates/search/{p.name}")
            if used & set(sp.match):
                return sp
    return load_space()


def default_maximize() -> set[str]:
    """Names maximized by default in any bundled space (`run`/`sweep` --pareto directions)."""
    return set().union(*(load_space(str(p), shown=p.name).maximize for p in bundled_spaces()))


def load_space(ref: str | None = None, *, shown: str | None = None) -> Space:
    bundled = bundled_templates() / "search" / f"{ref or DEFAULT_SPACE}.yaml"
    if ref and not Path(ref).is_file() and not bundled.is_file():
        try:
            find_template(ref)
        except ScenarioError:
            names = [p.stem for p in bundled_spaces()]
            raise ScenarioError(f"no search space `{ref}`" + suggest(ref, names)
                                + f" (bundled: {', '.join(names)}; or a YAML file)") from None
    path = Path(ref) if ref and Path(ref).is_file() else (
        bundled if bundled.is_file() else find_template(ref))  # `inference` or a path
    shown = shown or str(ref or f"templates/search/{DEFAULT_SPACE}.yaml")
    data, lines = read_mapping(path.read_text(encoding="utf-8"), shown, "search space")
    for k in data:
        if k not in SPACE_KEYS:
            raise ScenarioError(f"unknown key `{k}`" + suggest(str(k), SPACE_KEYS), file=shown,
                                line=lines.get((k,)))
    checks = []
    for c in data.get("checks") or []:
        if isinstance(c, str):
            checks.append(Check(c, c))
        elif isinstance(c, dict) and isinstance(c.get("expr"), str):
            checks.append(Check(str(c.get("label") or c["expr"]), c["expr"]))
        else:
            raise ScenarioError("a check is a condition or {label, expr}", file=shown,
                                line=lines.get(("checks",)))
    axes = data.get("axes") or {}
    if not isinstance(axes, dict) or not all(isinstance(v, list) and v for v in axes.values()):
        raise ScenarioError("`axes:` maps names to non-empty lists", file=shown,
                            line=lines.get(("axes",)))
    fac = data.get("factorize") or []
    if not isinstance(fac, list) or not fac:
        raise ScenarioError("`factorize:` lists the inputs whose product is the GPU count",
                            file=shown, line=lines.get(("factorize",)))
    ea = data.get("expert_axis")  # `ep`, or {name: ep, divides: [tp, dp]}
    group = ["dp", "cp"]
    if isinstance(ea, dict):
        if not isinstance(ea.get("name"), str) or not isinstance(ea.get("divides"), list):
            raise ScenarioError("`expert_axis:` is an input name or {name, divides: [inputs]}",
                                file=shown, line=lines.get(("expert_axis",)))
        ea, group = ea["name"], [str(g) for g in ea["divides"]]
    split = data.get("split")
    if split is not None and not (isinstance(split, dict) and isinstance(split.get("of"), str)
                                  and isinstance(split.get("into"), list)
                                  and len(split["into"]) == 2):
        raise ScenarioError("`split:` is {of: a factorized input, into: [two inputs]}",
                            file=shown, line=lines.get(("split",)))
    for k in ("match", "maximize", "show", "breakdown"):
        if not isinstance(data.get(k) or [], list):
            raise ScenarioError(f"`{k}:` is a list of names", file=shown, line=lines.get((k,)))
    if not isinstance(data.get("objective"), str):
        raise ScenarioError("`objective:` names the default objective", file=shown,
                            line=lines.get(("objective",)))
    axes = {str(k): axis_values(v, name=str(k), file=shown, line=lines.get(("axes", k)))
            for k, v in axes.items()}  # ranges such as "1..1024:x2" expand here
    return Space(shown, [str(f) for f in fac], axes, checks,
                 set(data.get("maximize") or []), data["objective"],
                 list(data.get("show") or []), list(data.get("breakdown") or []),
                 ea, group, [str(m) for m in data.get("match") or []], split)


def divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(n ** 0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def factorizations(n: int, k: int) -> np.ndarray:
    """Every ordered k-tuple of positive integers whose product is n (rows of an array)."""
    if k == 1:
        return np.array([[n]], dtype=np.int64)
    rows = [np.concatenate([np.full((len(sub), 1), d), sub], axis=1)
            for d in divisors(n) for sub in [factorizations(n // d, k - 1)]]
    return np.concatenate(rows)


def objective_sense(space: Space, spec: str) -> tuple[str, bool]:
    """``name`` or ``name:min|max`` -> (name, maximize)."""
    name, _, sense = spec.partition(":")
    name = name.strip()
    if sense and sense not in ("min", "max"):
        raise FlopsheetError(f"--objective `{spec}`: the sense is min or max")
    return name, (sense == "max") if sense else name in space.maximize


def build_grid(space: Space, gpus: int, lib, base_values: dict, axes_override=None) -> Grid:
    """The candidate grid: factorizations (with ep for MoE models) x the other axes."""
    if not 1 <= gpus <= MAX_GPUS:
        raise GridError(f"--gpus {gpus}: must be in 1..{MAX_GPUS:,}")
    for n in space.factorize + list(space.axes):
        if n not in lib.inputs:
            raise ScenarioError(f"search axis `{n}` is not an input" + suggest(n, lib.names()),
                                file=space.path)
    sp_ = space.split or {}
    for n in ([sp_["of"]] if sp_ else []) + list(sp_.get("into", [])):
        if n not in (space.factorize if n == sp_["of"] else lib.inputs):
            raise ScenarioError(f"`split:` names `{n}`, which is not "
                                + ("in `factorize:`" if n == sp_["of"] else "an input"),
                                file=space.path)
    for g in space.expert_group if space.expert_axis else ():
        if g not in space.factorize:
            raise ScenarioError(f"expert_axis divides `{g}`, which is not in `factorize:`",
                                file=space.path)
    fac = factorizations(gpus, len(space.factorize))
    cols = {n: fac[:, i] for i, n in enumerate(space.factorize)}
    experts = float(base_values.get("experts", lib.inputs["experts"].default
                                    if "experts" in lib.inputs else 0))
    if space.expert_axis and experts > 0:  # ep over the divisors of the ranks it is taken from
        inner = np.ones(len(fac), dtype=np.int64)
        for g in space.expert_group:
            inner = inner * cols.get(g, 1)
        reps = [divisors(int(x)) for x in inner]
        idx = np.repeat(np.arange(len(fac)), [len(r) for r in reps])
        cols = {n: v[idx] for n, v in cols.items()}
        cols[space.expert_axis] = np.concatenate(reps)
    if space.split:  # one replica count split every way into two pools of GPUs
        cols = split_pools(cols, space.split["of"], space.split["into"],
                           [n for n in space.factorize if n != space.split["of"]])
    group = [Axis(n, v.tolist(), space.path) for n, v in cols.items()]
    axes = dict(space.axes)
    for n in axes_override or {}:
        if n not in lib.inputs:
            raise GridError(f"--axis {n}: not an input" + suggest(n, list(lib.inputs)), node=n)
        if n in cols:
            raise GridError(f"--axis {n}: `{n}` comes from the factorizations of --gpus; "
                            f"restrict it with --where (e.g. \"{n} <= 8\")", node=n)
    axes.update(axes_override or {})
    return Grid([group] + [[Axis(n, list(v), "--axis" if n in (axes_override or {})
                                 else space.path)] for n, v in axes.items()])


def split_pools(cols: dict, of: str, into: list[str], per: list[str]) -> dict:
    """Each row's ``of`` replicas as k + (of - k) for k = 1 .. of-1, the two pools' GPU counts
    (replicas x the product of ``per``) in the ``into`` columns; rows of one replica go."""
    size = np.ones(len(cols[of]), dtype=np.int64)
    for n in per:
        size = size * cols[n]
    reps = [np.arange(1, int(r)) for r in cols[of]]
    idx = np.repeat(np.arange(len(size)), [len(r) for r in reps])
    out = {n: v[idx] for n, v in cols.items()}
    k = np.concatenate(reps).astype(np.int64) if len(idx) else np.zeros(0, dtype=np.int64)
    out[into[0]], out[into[1]] = k * size[idx], (cols[of][idx] - k) * size[idx]
    return out


@dataclass
class SearchResult:
    frame: object  # pandas DataFrame of every candidate (feasible first, ranked)
    objective: str
    maximize: bool
    space: Space
    job: object
    scenario: object
    candidates: int
    feasible: int
    reasons: dict[str, int]


def run_search(scenario: str | Scenario, gpus: int, *, objective: str | None = None,
               where: Iterable[str] = (), sets: list[str] | None = None, space: str | None = None,
               formulas: str | None = None, max_configs: int = DEFAULT_MAX_CONFIGS,
               dask: str | None = None, quiet: bool = True,
               axes: dict[str, list] | None = None, extra_outputs: Iterable[str] = ()
               ) -> SearchResult:
    from .runner import execute, to_frame
    sc = scenario_of(scenario, sets)
    sp = load_space(space) if space else space_for(sc)
    model = model_for(formulas)
    lib = model.lib
    obj, maximize = objective_sense(sp, objective or sp.objective)
    if obj not in lib or getattr(lib.item(obj), "is_bool", False) or (
            obj in lib.inputs and lib.inputs[obj].is_choice):
        raise FlopsheetError(f"--objective `{obj}` is not a numeric node" + suggest(obj,
                             list(lib.nodes)))
    fixed = {k: model.encode(k, v.raw) for k, v in sc.values.items()
             if not isinstance(v.raw, list) and k in ("experts",)}
    grid = build_grid(sp, gpus, lib, fixed, axes)
    for n in grid.names:  # the search sets these; the scenario's own values step aside
        sc.values.pop(n, None)
    extra, _ = grid_from_sets(sc)  # --set lists/ranges of other inputs: crossed as well
    grid.groups += extra.groups
    outs = list(dict.fromkeys([obj] + [o for o in sp.show + sp.breakdown + list(extra_outputs)
                                       if o in lib]))
    job = make_job(sc, grid, outs, formulas=formulas,
                   checks=sp.checks + where_checks(where), max_configs=max_configs)
    cols = execute(job, dask=dask, quiet=quiet, label=f"search {gpus} GPUs")
    df = to_frame(lib, job, cols)
    feasible = df["reason"] == ""
    counts = df.loc[~feasible, "reason"].value_counts()
    ranked = df[feasible].sort_values(obj, ascending=not maximize, kind="stable")
    df = _concat(ranked, df[~feasible])
    return SearchResult(df.reset_index(drop=True), obj, maximize, sp, job, sc, len(feasible),
                        int(feasible.sum()), {str(k): int(v) for k, v in counts.items()})


def _concat(a, b):
    import pandas as pd
    return pd.concat([a, b])


def search(scenario: str | Scenario, gpus: int, objective: str | None = None, *,
           where: Iterable[str] | str = (), sets: list[str] | None = None,
           keep_masked: bool = False, **kw):
    """Every candidate layout of ``scenario`` on ``gpus`` GPUs, best first (a DataFrame).

    Rows that break a rule carry it in ``reason``; they are dropped unless
    ``keep_masked=True`` (then they follow the ranked feasible rows).
    """
    r = run_search(scenario, gpus, objective=objective,
                   where=[where] if isinstance(where, str) else where, sets=sets, **kw)
    return r.frame if keep_masked else r.frame[r.frame["reason"] == ""].reset_index(drop=True)


def runner_up_note(r: SearchResult, lib) -> list[str]:
    """Why the second-best loses: the breakdown terms that differ most from the best."""
    from .audit import show
    ok = r.frame[r.frame["reason"] == ""]
    if len(ok) < 2:
        return []
    a, b = ok.iloc[0], ok.iloc[1]
    diff = [n for n in r.space.breakdown if n in ok.columns]
    changed = [n for n in r.job.grid.names if str(a[n]) != str(b[n])]
    gap = float(b[r.objective]) - float(a[r.objective])
    rel = gap / float(a[r.objective]) if float(a[r.objective]) else float("nan")
    lines = [f"runner-up differs in {', '.join(f'{n} {_v(a[n])} -> {_v(b[n])}' for n in changed)}"
             f"; {r.objective} {show(lib, r.objective, float(b[r.objective]))} vs "
             f"{show(lib, r.objective, float(a[r.objective]))} ({rel:+.2%})"]
    terms = sorted(((float(b[n]) - float(a[n]), n) for n in diff), key=lambda t: -abs(t[0]))
    parts = [f"{n} {'+' if d > 0 else '-'}{show(lib, n, abs(d))}" for d, n in terms[:4] if d]
    if parts:
        lines.append("  largest differences (runner-up minus best): " + ", ".join(parts))
    return lines


def _v(x):
    return str(int(x)) if isinstance(x, (float, np.floating)) and float(x).is_integer() else str(x)
