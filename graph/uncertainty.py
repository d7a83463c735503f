"""Uncertainty: propagate input spreads by seeded Monte Carlo; global (Sobol) and local sensitivity.

Inputs carry a spread in a scenario (``{value: 0.75, range: [0.6, 0.85]}``, see
graph/distributions.py). Samples are drawn as uniform numbers (random or Latin
hypercube, seeded) and mapped through each input's inverse CDF, then evaluated
as one zipped grid in chunks - the sweep machinery, so rows whose value is not
finite are masked, never fatal. Sobol first and total order indices come from
SALib's Saltelli design drawn on the unit cube and mapped the same way (the
indices are unchanged by the monotone map), shown beside the exact local
elasticities at the nominal point (graph/sensitivity.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

import numpy as np

from .chunks import model_for
from .distributions import Spread, parse_spread, uniforms
from .errors import FlopsheetError
from .grid import Axis, Grid
from .scenario import Scenario, resolve, scenario_of
from .sweeps import make_job

MAX_SAMPLES = 5_000_000


@dataclass
class OutputStats:
    name: str
    nominal: float
    mean: float
    sd: float
    percentiles: dict[float, float]
    masked: int = 0
    sobol: dict[str, tuple[float, float, float, float]] = field(default_factory=dict)
    elasticity: dict[str, float] = field(default_factory=dict)


def spreads_of(sc, model) -> list[Spread]:
    out = []
    for name, v in sc.values.items():
        if v.spread:
            from .scenario import split_origin
            file, line = split_origin(v.origin)
            enc = lambda x, n=name, f=file, ln=line: model.encode(n, x, file=f, line=ln)  # noqa
            out.append(parse_spread(name, {"value": v.raw, **v.spread}, enc, file=file, line=line))
    return out


def _evaluate(sc, spreads, u, outputs, formulas, dask, quiet):
    from .runner import execute
    grid = Grid([[Axis(s.name, list(s.ppf(u[:, j])), "sampled") for j, s in enumerate(spreads)]])
    job = make_job(sc, grid, outputs, formulas=formulas, max_configs=MAX_SAMPLES * 10)
    return execute(job, dask=dask, quiet=quiet, label="monte carlo")


def propagate(scenario: str | Scenario, outputs: list[str] | str, *, n: int = 10_000,
              seed: int = 0, method: str = "lhs", percentiles: Iterable[float] = (5, 50, 95),
              sets: list[str] | None = None, formulas: str | None = None, sobol_n: int = 0,
              local: bool = True, dask: str | None = None, quiet: bool = True
              ) -> list[OutputStats]:
    """Monte Carlo statistics of ``outputs`` under the scenario's input spreads.

    With ``sobol_n`` > 0, SALib's Saltelli design of base size ``sobol_n`` (a power
    of two; ``sobol_n * (d + 2)`` evaluations) gives first and total order indices.
    """
    if not 1 <= n <= MAX_SAMPLES:
        raise FlopsheetError(f"--samples {n}: must be in 1..{MAX_SAMPLES:,}")
    outputs = [outputs] if isinstance(outputs, str) else list(outputs)
    model = model_for(formulas)
    sc = scenario_of(scenario, sets)
    spreads = spreads_of(sc, model)
    if not spreads:
        raise FlopsheetError(f"{sc.path}: no value carries a spread (write e.g. "
                             "`gemm_efficiency: {value: 0.75, range: [0.6, 0.85]}`)")
    for s in spreads:
        sc.values.pop(s.name)
    nominal_vals = resolve(sc, model)
    nominal_vals.update({s.name: s.center for s in spreads})
    nom = model.evaluate(nominal_vals, check=False)
    cols = _evaluate(sc, spreads, uniforms(n, len(spreads), method=method, seed=seed), outputs,
                     formulas, dask, quiet)
    ok = cols["reason"] == 0
    pcts = list(percentiles)
    stats = []
    for o in outputs:
        y = cols[o][ok]
        if not len(y):
            raise FlopsheetError(f"{o}: no sample gave a finite value")
        stats.append(OutputStats(o, float(np.asarray(nom[o])), float(y.mean()),
                                 float(y.std(ddof=1)) if len(y) > 1 else 0.0,
                                 dict(zip(pcts, map(float, np.percentile(y, pcts)))),
                                 int((~ok).sum())))
    if sobol_n:
        _sobol(stats, sc, spreads, outputs, sobol_n, seed, formulas, dask, quiet)
    if local:
        from .sensitivity import Differentiator
        diff = Differentiator(model)
        for st in stats:
            if st.name in model.lib.nodes:
                e = diff.gradient(nom, st.name).elasticities
                st.elasticity = {s.name: float(e.get(s.name, 0.0)) for s in spreads}
    return stats


def _sobol(stats, sc, spreads, outputs, base_n, seed, formulas, dask, quiet):
    from SALib.analyze import sobol as analyze
    from SALib.sample import sobol as sample
    if base_n & (base_n - 1):
        raise FlopsheetError(f"--sobol {base_n}: must be a power of two")
    d = len(spreads)
    problem = {"num_vars": d, "names": [s.name for s in spreads], "bounds": [[0.0, 1.0]] * d}
    u = sample.sample(problem, base_n, calc_second_order=False, seed=seed)
    u = np.clip(u, 1e-12, 1 - 1e-12)  # the ends of the unit cube map to +-inf for a normal
    cols = _evaluate(sc, spreads, u, outputs, formulas, dask, quiet)
    for st in stats:
        y = cols[st.name]
        if not np.isfinite(y).all():
            st.sobol = {}
            continue
        r = analyze.analyze(problem, y, calc_second_order=False, seed=seed,
                            print_to_console=False)
        st.sobol = {s.name: (float(r["S1"][j]), float(r["S1_conf"][j]), float(r["ST"][j]),
                             float(r["ST_conf"][j])) for j, s in enumerate(spreads)}
