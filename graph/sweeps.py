"""Sweeps: a scenario plus a grid of axes, evaluated in chunks; sweep files; the Python API.

A sweep file is reviewable like a scenario::

    doc: Tensor x pipeline degree for GPT-3 175B on 1024 A100s.
    scenario: gpt3-175b-sc21
    values: {global_batch: 1536}            # fixed overrides (optional)
    axes:
      tp: [1, 2, 4, 8]                      # crossed with the other grid axes
      pp: 1..64:x2                          # a range
      seq_len: {values: [2048, 4096], zip: s}        # axes sharing a zip name are paired
      global_batch: {values: [1536, 768], zip: s}
      gemm_efficiency: {distribution: uniform, range: [0.6, 0.85]}   # sampled
    sample: {method: lhs, n: 256}           # how the sampled axes are drawn (one group of n)
    seed: 1
    constraints: [parallel_config_valid, "memory_per_gpu <= hbm_capacity"]
    outputs: [step_time, memory_per_gpu]
    sort: step_time                          # optional; `-name` sorts descending

Constraints are parsed by the whitelisted formula parser; never evaluated as Python.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from .chunks import Check, Job, model_for, parse_condition
from .distributions import parse_spread, uniforms
from .errors import ScenarioError
from .grid import DEFAULT_MAX_CONFIGS, Axis, Grid, axis_values, grid_from_sets
from .names import suggest
from .scenario import Scenario, Value, load_scenario, resolve, scenario_of
from .yamlio import read_mapping

SWEEP_KEYS = {"doc", "source", "scenario", "values", "axes", "sample", "seed", "constraints", "outputs",
              "sort", "max_configs"}
MAX_SAMPLES = 10_000_000


def make_job(sc, grid: Grid, outputs: list[str], *, formulas: str | None = None,
             checks: Iterable[Check] = (), max_configs: int = DEFAULT_MAX_CONFIGS,
             allow_nodes: bool = False) -> Job:
    """Check names and size, encode the axes and fixed values, and return the job."""
    model = model_for(formulas)
    lib = model.lib
    grid.check_size(max_configs)  # before any encoding or evaluation
    grid.encode(model, allow_nodes=allow_nodes)
    axis_names = set(grid.names)
    fixed = {k: v for k, v in sc.values.items() if k not in axis_names}
    base = resolve(_with_values(sc, fixed), model)
    for o in outputs:
        if o not in lib:
            raise ScenarioError(f"unknown output `{o}`" + suggest(o, lib.names()), node=o)
    checks = list(checks)
    for c in checks:
        parse_condition(lib, c.text, what=c.label)
    return Job(formulas, base, grid, list(outputs), checks)


def _with_values(sc, values: dict[str, Value]):
    from copy import copy
    out = copy(sc)
    out.values = dict(values)
    return out


def where_checks(where: Iterable[str]) -> list[Check]:
    return [Check(f"where {w.strip()}", w.strip()) for w in where if w and w.strip()]


# ------------------------------------------------------------------ sweep files
def load_sweep(path: str, *, formulas: str | None = None,
               max_configs: int | None = None, allow_nodes: bool = False):
    """Read a sweep file; return (job, scenario, settings)."""
    p = Path(path)
    if not p.is_file():
        raise ScenarioError(f"no sweep file `{path}`")
    shown = str(path)
    data, lines = read_mapping(p.read_text(encoding="utf-8"), shown, "sweep file")
    for k in data:
        if k not in SWEEP_KEYS:
            raise ScenarioError(f"unknown key `{k}`" + suggest(str(k), SWEEP_KEYS), file=shown,
                                line=lines.get((k,)))
    if not isinstance(data.get("scenario"), str):
        raise ScenarioError("a sweep file needs `scenario: NAME`", file=shown, line=1)
    sc = load_scenario(data["scenario"])
    for name, v in (data.get("values") or {}).items():
        sc.values[str(name)] = Value(v, f"{shown}:{lines.get(('values', name), 1)}")
    model = model_for(formulas)
    seed = data.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ScenarioError("`seed:` must be an integer", file=shown, line=lines.get(("seed",)))
    grid = _sweep_grid(data.get("axes") or {}, data.get("sample") or {}, seed, model, shown,
                       lines)
    outputs = data.get("outputs") or sc.report
    if not isinstance(outputs, list) or not outputs:
        raise ScenarioError("`outputs:` must be a list of names", file=shown,
                            line=lines.get(("outputs",)))
    cons = data.get("constraints") or []
    if isinstance(cons, str):
        cons = [cons]
    checks = []
    for c in cons:
        if not isinstance(c, str):
            raise ScenarioError("`constraints:` must be a list of conditions", file=shown,
                                line=lines.get(("constraints",)))
        parse_condition(model.lib, c, what="constraints", file=shown,
                        line=lines.get(("constraints",)))
        checks.append(Check(c, c))
    limit = max_configs or data.get("max_configs") or DEFAULT_MAX_CONFIGS
    job = make_job(sc, grid, [str(o) for o in outputs], formulas=formulas, checks=checks,
                   max_configs=int(limit), allow_nodes=allow_nodes)
    return job, sc, {"sort": data.get("sort"), "doc": data.get("doc", "")}


def _sweep_grid(axes: dict, sample: dict, seed: int, model, shown: str, lines) -> Grid:
    if not isinstance(axes, dict) or not axes:
        raise ScenarioError("`axes:` must map input names to values", file=shown,
                            line=lines.get(("axes",)))
    groups: list[list[Axis]] = []
    zips: dict[str, list[Axis]] = {}
    sampled = []
    for name, spec in axes.items():
        name = str(name)
        line = lines.get(("axes", name))
        origin = f"{shown}:{line}" if line else shown
        if isinstance(spec, dict) and "distribution" in spec:
            if name not in model.lib:
                raise ScenarioError(f"unknown axis `{name}`" + suggest(name, model.lib.names()),
                                    file=shown, line=line, node=name)
            enc = lambda x, n=name: model.encode(n, x, file=shown, line=line)  # noqa: E731
            sampled.append((parse_spread(name, spec, enc, file=shown, line=line), origin))
            continue
        zname = None
        if isinstance(spec, dict):
            extra = set(spec) - {"values", "range", "zip"}
            if extra:
                raise ScenarioError(f"unknown axis key `{sorted(extra)[0]}` (allowed: values, "
                                    f"range, zip, distribution)", file=shown, line=line,
                                    node=name)
            zname = spec.get("zip")
            spec = spec.get("values", spec.get("range"))
            if spec is None:
                raise ScenarioError("an axis needs `values:` or `range:`", file=shown,
                                    line=line, node=name)
        ax = Axis(name, axis_values(spec, name=name, file=shown, line=line), origin)
        if zname is not None:
            if str(zname) not in zips:
                zips[str(zname)] = []
                groups.append(zips[str(zname)])
            zips[str(zname)].append(ax)
        else:
            groups.append([ax])
    if sampled:
        n = sample.get("n", 1000) if isinstance(sample, dict) else None
        method = sample.get("method", "lhs") if isinstance(sample, dict) else None
        if not isinstance(n, int) or not 1 <= n <= MAX_SAMPLES:
            raise ScenarioError(f"`sample: n` must be an integer in 1..{MAX_SAMPLES:,}",
                                file=shown, line=lines.get(("sample",)))
        u = uniforms(n, len(sampled), method=str(method), seed=seed)
        groups.append([Axis(sp.name, list(sp.ppf(u[:, j])), origin)
                       for j, (sp, origin) in enumerate(sampled)])
    return Grid(groups)


# ------------------------------------------------------------------ Python API
def sweep(scenario: str | Scenario, grid: dict[str, Any], outputs: list[str] | str, *,
          zip: bool = False, where: Iterable[str] | str = (), sets: list[str] | None = None,
          formulas: str | None = None, max_configs: int = DEFAULT_MAX_CONFIGS,
          dask: str | None = None, quiet: bool = True, keep_masked: bool = False,
          allow_nodes: bool = False):
    """Evaluate ``outputs`` over a grid; returns a pandas DataFrame (one row per config).

    ``grid`` maps input names to lists or range text (``"1..64:x2"``); lists are
    crossed, or paired with ``zip=True``. ``where`` conditions (formula language)
    drop rows; with ``keep_masked=True`` they stay, with their ``reason``.
    """
    from .runner import execute, to_frame
    sc = scenario_of(scenario, sets)
    for k, v in grid.items():
        sc.values[k] = Value(v, "grid")
    g, _ = grid_from_sets(sc, zipped=zip)
    outs = [outputs] if isinstance(outputs, str) else list(outputs)
    job = make_job(sc, g, outs, formulas=formulas,
                   checks=where_checks([where] if isinstance(where, str) else where),
                   max_configs=max_configs, allow_nodes=allow_nodes)
    cols = execute(job, dask=dask, quiet=quiet)
    return to_frame(model_for(formulas).lib, job, cols, keep_masked=keep_masked)
