"""Input distributions for sampled sweeps and Monte Carlo: parsed from YAML, sampled by inverse CDF.

A spread is written beside a value in a scenario or as a sweep axis::

    gemm_efficiency: {value: 0.75, range: [0.6, 0.85]}              # uniform over the range
    gemm_efficiency: {value: 0.75, distribution: triangular, range: [0.6, 0.85]}  # mode = value
    gemm_efficiency: {value: 0.75, distribution: normal, sd: 0.05}  # mean = value
    gemm_efficiency: {value: 0.75, distribution: normal, sd: 0.05, range: [0.6, 0.9]}  # truncated

Numbers are in the input's units as written (text with units such as `80 GiB` is
converted by the model's encoder). Sampling maps uniform numbers u in (0, 1)
through the inverse CDF, so the same code serves plain random sampling,
Latin hypercube and Sobol/Saltelli designs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .errors import ScenarioError

KINDS = ("uniform", "normal", "triangular", "loguniform")
SPREAD_KEYS = {"range", "distribution", "sd"}


@dataclass
class Spread:
    name: str
    kind: str
    center: float  # the nominal value (mode of triangular, mean of normal)
    low: float | None = None
    high: float | None = None
    sd: float | None = None

    def ppf(self, u: np.ndarray) -> np.ndarray:
        """Inverse CDF at ``u`` (uniform numbers in (0, 1))."""
        u = np.asarray(u, dtype=float)
        if self.kind == "uniform":
            return self.low + (self.high - self.low) * u
        if self.kind == "loguniform":
            return np.exp(math.log(self.low) + (math.log(self.high) - math.log(self.low)) * u)
        if self.kind == "triangular":
            a, c, b = self.low, self.center, self.high
            fc = (c - a) / (b - a)
            return np.where(u < fc, a + np.sqrt(u * (b - a) * (c - a)),
                            b - np.sqrt((1 - u) * (b - a) * (b - c)))
        from scipy.special import ndtr, ndtri  # normal, truncated to the range if given
        if self.low is None:
            return self.center + self.sd * ndtri(u)
        lo = ndtr((self.low - self.center) / self.sd)
        hi = ndtr((self.high - self.center) / self.sd)
        return self.center + self.sd * ndtri(lo + (hi - lo) * u)

    def salib(self) -> tuple[list[float], str]:
        """(bounds, dist) in SALib's problem vocabulary."""
        if self.kind == "uniform":
            return [self.low, self.high], "unif"
        if self.kind == "loguniform":
            return [math.log(self.low), math.log(self.high)], "unif"  # sampled in log space
        if self.kind == "triangular":
            return [self.low, self.high, (self.center - self.low) / (self.high - self.low)], \
                "triang"
        if self.low is not None:
            return [self.low, self.high, self.center, self.sd], "truncnorm"
        return [self.center, self.sd], "norm"


def parse_spread(name: str, spec: dict, encode, *, file=None, line=None) -> Spread:
    """A spread from ``{value, range, distribution, sd}`` (or an axis's ``low/high/mean``).

    ``encode(x)`` converts one written number or text with a unit to coherent units.
    """
    def err(msg):
        return ScenarioError(msg, file=file, line=line, node=name)

    kind = str(spec.get("distribution") or "uniform")
    if kind not in KINDS:
        raise err(f"distribution `{kind}` is not one of {', '.join(KINDS)}")
    center = spec.get("value", spec.get("mean", spec.get("mode")))
    rng = spec.get("range")
    if rng is None and ("low" in spec or "high" in spec):
        rng = [spec.get("low"), spec.get("high")]
    if rng is not None:
        if not isinstance(rng, (list, tuple)) or len(rng) != 2 or None in rng:
            raise err("`range:` must be [low, high]")
        low, high = (float(encode(x)) for x in rng)
        if not low < high:
            raise err(f"`range:` [{rng[0]}, {rng[1]}] is empty (low must be below high)")
    else:
        low = high = None
    c = float(encode(center)) if center is not None else None
    sd = spec.get("sd")
    if kind in ("uniform", "loguniform", "triangular") and low is None:
        raise err(f"a {kind} distribution needs `range: [low, high]`")
    if kind == "loguniform" and low <= 0:
        raise err("a loguniform range must be above 0")
    if kind == "triangular":
        if c is None or not low <= c <= high:
            raise err("a triangular distribution needs its `value` (the mode) inside `range:`")
    if kind == "normal":
        if c is None or sd is None:
            raise err("a normal distribution needs `value` (the mean) and `sd`")
        sd = float(encode(sd)) if not isinstance(sd, (int, float)) else float(sd)
        if not sd > 0 or not math.isfinite(sd):
            raise err("`sd` must be a positive number")
    if c is None:
        c = (low + high) / 2
    return Spread(name, kind, c, low, high, sd)


def uniforms(n: int, d: int, *, method: str = "random", seed: int = 0) -> np.ndarray:
    """``n`` x ``d`` numbers in (0, 1): plain random or Latin hypercube, reproducible by seed."""
    rng = np.random.default_rng(seed)
    if method == "random":
        return rng.random((n, d))
    if method in ("lhs", "latin-hypercube", "latin_hypercube"):
        strata = np.argsort(rng.random((n, d)), axis=0)  # a random permutation per column
        return (strata + rng.random((n, d))) / n
    raise ScenarioError(f"sampling method `{method}` is not random or lhs")
