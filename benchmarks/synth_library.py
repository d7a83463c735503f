"""A synthetic, deterministic formula library for benchmarks.

``generate(n_nodes=2000, n_inputs=200, n_files=20, levels=20, seed=...)`` returns
``raw``: a list of ``(shown_path, topic, yaml_text)`` triples for
:func:`flopsheet.library.build_library`, plus a :class:`SynthInfo` describing
what was generated (value intervals, levels, suggested outputs).

Design of the synthetic graph
-----------------------------
* Inputs: two categorical inputs (``choices``) and numeric inputs. About 85 %
  are dimensionless counts/ratios (unit ``1``); the rest carry byte, s, byte/s,
  FLOP, FLOP/s, token, token/s, USD, USD/s, J, J/s, FLOP/token, byte/token at
  realistic magnitudes. Every numeric input has ``bounds: [default/2,
  2*default]`` (some are ``integer: true``); sweeps sample inside the bounds.
* Nodes are laid out in ``levels`` levels (depth ~20). Every node of level L
  uses one node of level L-1 (its "primary" parent), so chains are ``levels``
  deep, and 1-3 further names from anywhere below (inputs included).
* Formula templates: weighted means, harmonic-style ``p*q/(p + q)``, geometric
  means (``sqrt``), sums, ``max(p - q, r)``, products and ratios (``p*q``,
  ``p/q``, ``p*q/r``), powers (``p**2/q``, ``p**1.5``), ``ceil(p/q)*r``,
  ``(floor(p/q) + 1)*r``, ``min``/``max`` of 2-3 terms, ``select`` on a
  categorical input (with and without ``otherwise=``), ``if_`` on an inline
  comparison or on a condition node (unit ``bool``), ``r*log(1 + p/q)``,
  ``r*exp(-p/q)``, ``log2(1 + p)``. Condition nodes (``a <= b``, ``(a > b) and
  (c < d)``, ``not (a > b)``) make up ~3 % of the nodes. The last node,
  ``headline_total_ratio`` (depth levels+1), averages the top level's
  dimensionless nodes: a deep output that depends on most of the graph.
* Units are coherent by construction: sums/min/max/select/if_ branches share a
  dimension, ratios inside log/exp/ceil/floor are dimensionless, products only
  produce dimensions from an allowed set.
* Every quantity carries a conservative interval [lo, hi] (interval arithmetic
  on monotone templates, starting from the input bounds). A template whose
  result would leave [1e-30, 1e30] or span more than 12 decades is not used, so
  every configuration inside the input bounds evaluates to finite, positive
  values (no overflow, no log of a non-positive number, no division by zero).
"""
from __future__ import annotations

import json
import math
import random
import subprocess
from pathlib import Path
from dataclasses import dataclass, field

BASES = ("s", "byte", "FLOP", "token", "USD", "m", "J")


def _d(**kw) -> tuple:
    return tuple(kw.get(b, 0) for b in BASES)


DIMLESS = _d()
#: dimension -> (coherent unit text, word used in names)
DIMS: dict[tuple, tuple[str, str]] = {
    DIMLESS: ("1", "ratio"),
    _d(byte=1): ("byte", "bytes"),
    _d(s=1): ("s", "time"),
    _d(byte=1, s=-1): ("byte/s", "bandwidth"),
    _d(FLOP=1): ("FLOP", "flops"),
    _d(FLOP=1, s=-1): ("FLOP/s", "flop_rate"),
    _d(token=1): ("token", "tokens"),
    _d(token=1, s=-1): ("token/s", "token_rate"),
    _d(USD=1): ("USD", "cost"),
    _d(USD=1, s=-1): ("USD/s", "cost_rate"),
    _d(J=1): ("J", "energy"),
    _d(J=1, s=-1): ("J/s", "power"),
    _d(FLOP=1, token=-1): ("FLOP/token", "flops_per_token"),
    _d(byte=1, token=-1): ("byte/token", "bytes_per_token"),
}
#: log10 of a typical default per dimension (inputs are drawn around it)
TYPICAL = {
    DIMLESS: (-0.3, 0.9), _d(byte=1): (6, 10), _d(s=1): (-5, -1), _d(byte=1, s=-1): (10, 12.5),
    _d(FLOP=1): (9, 14), _d(FLOP=1, s=-1): (12, 15), _d(token=1): (3, 6),
    _d(token=1, s=-1): (3, 6), _d(USD=1): (0, 2), _d(USD=1, s=-1): (-4, -2), _d(J=1): (0, 3),
    _d(J=1, s=-1): (2, 3.5), _d(FLOP=1, token=-1): (8, 11), _d(byte=1, token=-1): (2, 4),
}

PRECISION = ("input_precision_mode", ["fp32", "bf16", "fp8"])
RECOMPUTE = ("input_recompute_mode", ["none", "selective", "full"])

TOPICS = ["memory", "compute", "comms", "pipeline", "attention", "mlp", "optimizer", "storage",
          "network", "power", "cost", "scheduling", "inference", "kvcache", "embedding",
          "moe", "checkpoint", "dataload", "precision", "cluster"]

LO_LIMIT, HI_LIMIT, MAX_DECADES = 1e-30, 1e30, 12.0


def add(a, b):
    return tuple(x + y for x, y in zip(a, b))


def sub(a, b):
    return tuple(x - y for x, y in zip(a, b))


def scale(a, k):
    return tuple(x * k for x in a)


@dataclass
class Quantity:
    name: str
    dim: tuple | str  # dimension tuple, or "bool"
    lo: float
    hi: float
    level: int  # 0 for inputs
    kind: str  # "input", "choice", template name, or "cond"
    expr: str = ""
    default: float | str | None = None
    integer: bool = False
    file: int = 0


@dataclass
class SynthInfo:
    quantities: dict[str, Quantity]
    inputs: list[str]
    nodes: list[str]
    choice_inputs: dict[str, list[str]]
    top_level: list[str] = field(default_factory=list)
    headline: str = ""  # the deep output node used for gradients

    def numeric_inputs(self) -> list[str]:
        return [n for n in self.inputs if self.quantities[n].kind == "input"]


class _Gen:
    def __init__(self, seed: int, n_nodes: int, n_inputs: int, n_files: int, levels: int):
        self.rng = random.Random(seed)
        self.n_nodes, self.n_inputs, self.n_files, self.levels = n_nodes, n_inputs, n_files, levels
        self.q: dict[str, Quantity] = {}
        self.pool: dict[tuple, list[str]] = {d: [] for d in DIMS}  # numeric names usable now
        self.bools: list[str] = []
        self.counter = 0

    # ----------------------------------------------------------------- inputs
    def make_inputs(self):
        rng = self.rng
        names = []
        for cname, choices in (PRECISION, RECOMPUTE):
            self.q[cname] = Quantity(cname, DIMLESS, 0, len(choices) - 1, 0, "choice",
                                     default=choices[1], file=len(names) % self.n_files)
            names.append(cname)
        n_num = self.n_inputs - 2
        dimmed = [d for d in DIMS if d != DIMLESS]
        n_dimmed = max(len(dimmed), round(0.15 * n_num))
        dims = [dimmed[i % len(dimmed)] for i in range(n_dimmed)] + [DIMLESS] * (n_num - n_dimmed)
        for i, dim in enumerate(dims):
            lo10, hi10 = TYPICAL[dim]
            integer = dim == DIMLESS and rng.random() < 0.3
            if integer:
                default = float(rng.choice([2, 4, 6, 8, 12, 16, 24, 32]))
            else:
                default = float(f"{10 ** rng.uniform(lo10, hi10):.4g}")
            word = "count" if integer else DIMS[dim][1]
            name = f"input_{i + 1:04d}_{word}"
            q = Quantity(name, dim, default / 2, default * 2, 0, "input", default=default,
                         integer=integer, file=(len(names)) % self.n_files)
            self.q[name] = q
            self.pool[dim].append(name)
            names.append(name)
        return names

    # ------------------------------------------------------------------ nodes
    def pick(self, dim, exclude, prefer_recent=True):
        cands = [n for n in self.pool.get(dim, ()) if n not in exclude]
        if not cands:
            return None
        if prefer_recent and self.rng.random() < 0.5:
            cands = cands[-min(len(cands), 300):]
        return self.rng.choice(cands)

    def partner_dim(self, pdim, op):
        """A dimension for a product/ratio partner keeping the result in DIMS."""
        opts = []
        for d, names in self.pool.items():
            if not names:
                continue
            r = add(pdim, d) if op == "mul" else sub(pdim, d)
            if r in DIMS:
                opts.append(d)
        if not opts:
            return None
        if DIMLESS in opts and self.rng.random() < 0.8:
            return DIMLESS
        return self.rng.choice(opts)

    def template(self, p: Quantity):
        """One formula using primary parent p: (expr, dim, lo, hi, kind) or None."""
        rng = self.rng
        P = p.name
        used = {P}
        kinds = ["wmean", "harm", "geo", "sum", "submax", "prod", "ratio", "prodratio", "pow",
                 "ceil", "floor", "minmax", "select", "select_other", "if_inline", "if_bool",
                 "log", "exp", "log2"]
        weights = [8, 6, 4, 6, 4, 10, 8, 8, 3, 5, 3, 7, 4, 3, 4, 3, 3, 2, 2]
        kind = rng.choices(kinds, weights)[0]

        def need(dim):
            n = self.pick(dim, used)
            if n is None:
                raise LookupError
            used.add(n)
            return self.q[n]

        try:
            if kind == "wmean":
                q = need(p.dim)
                a, b = rng.choice([(1, 1), (3, 1), (1, 3), (2, 1)])
                return (f"({a}*{P} + {b}*{q.name})/{a + b}", p.dim, (a * p.lo + b * q.lo) / (a + b),
                        (a * p.hi + b * q.hi) / (a + b), kind)
            if kind == "harm":
                q = need(p.dim)
                f = lambda x, y: x * y / (x + y)  # noqa: E731
                return (f"{P}*{q.name}/({P} + {q.name})", p.dim, f(p.lo, q.lo), f(p.hi, q.hi), kind)
            if kind == "geo":
                q = need(p.dim)
                return (f"sqrt({P}*{q.name})", p.dim, math.sqrt(p.lo * q.lo),
                        math.sqrt(p.hi * q.hi), kind)
            if kind == "sum":
                q, r = need(p.dim), need(p.dim)
                return (f"{P} + {q.name} + {r.name}", p.dim, p.lo + q.lo + r.lo,
                        p.hi + q.hi + r.hi, kind)
            if kind == "submax":
                q, r = need(p.dim), need(p.dim)
                return (f"max({P} - {q.name}, {r.name})", p.dim, max(p.lo - q.hi, r.lo),
                        max(p.hi - q.lo, r.hi), kind)
            if kind in ("prod", "ratio", "prodratio"):
                if kind == "prod":
                    d = self.partner_dim(p.dim, "mul")
                    if d is None:
                        return None
                    q = need(d)
                    return (f"{P}*{q.name}", add(p.dim, d), p.lo * q.lo, p.hi * q.hi, kind)
                if kind == "ratio":
                    d = self.partner_dim(p.dim, "div")
                    if d is None:
                        return None
                    q = need(d)
                    return (f"{P}/{q.name}", sub(p.dim, d), p.lo / q.hi, p.hi / q.lo, kind)
                d1 = self.partner_dim(p.dim, "mul")
                if d1 is None:
                    return None
                q = need(d1)
                d2 = self.partner_dim(add(p.dim, d1), "div")
                if d2 is None:
                    return None
                r = need(d2)
                return (f"{P}*{q.name}/{r.name}", sub(add(p.dim, d1), d2), p.lo * q.lo / r.hi,
                        p.hi * q.hi / r.lo, kind)
            if kind == "pow":
                if p.dim == DIMLESS and rng.random() < 0.5:
                    return (f"{P}**1.5", DIMLESS, p.lo ** 1.5, p.hi ** 1.5, kind)
                d = sub(scale(p.dim, 2), p.dim)  # p**2/q with q of p's dimension
                q = need(d)
                return (f"{P}**2/{q.name}", p.dim, p.lo ** 2 / q.hi, p.hi ** 2 / q.lo, kind)
            if kind in ("ceil", "floor"):
                q = need(p.dim)
                r = need(DIMLESS if rng.random() < 0.7 else rng.choice(
                    [d for d in DIMS if self.pool[d]]))
                if kind == "ceil":
                    return (f"ceil({P}/{q.name})*{r.name}", r.dim,
                            math.ceil(p.lo / q.hi) * r.lo, math.ceil(p.hi / q.lo) * r.hi, kind)
                return (f"(floor({P}/{q.name}) + 1)*{r.name}", r.dim,
                        (math.floor(p.lo / q.hi) + 1) * r.lo, (math.floor(p.hi / q.lo) + 1) * r.hi,
                        kind)
            if kind == "minmax":
                others = [need(p.dim) for _ in range(rng.choice([1, 1, 2]))]
                fn = rng.choice(["min", "max"])
                agg = min if fn == "min" else max
                args = ", ".join([P] + [o.name for o in others])
                return (f"{fn}({args})", p.dim, agg([p.lo] + [o.lo for o in others]),
                        agg([p.hi] + [o.hi for o in others]), kind)
            if kind == "select":
                c, (a, b) = PRECISION[0], (4, 2)
                return (f"select({c}, fp32={a}*{P}, bf16={b}*{P}, fp8={P})", p.dim, p.lo, 4 * p.hi,
                        kind)
            if kind == "select_other":
                q, r = need(p.dim), need(p.dim)
                return (f"select({RECOMPUTE[0]}, none={P}, selective={q.name}, otherwise={r.name})",
                        p.dim, min(p.lo, q.lo, r.lo), max(p.hi, q.hi, r.hi), kind)
            if kind == "if_inline":
                q = need(p.dim)
                d = DIMLESS if rng.random() < 0.7 else rng.choice([d for d in DIMS if self.pool[d]])
                r, s = need(d), need(d)
                op = rng.choice([">", "<", ">=", "<="])
                return (f"if_({P} {op} {q.name}, {r.name}, {s.name})", d, min(r.lo, s.lo),
                        max(r.hi, s.hi), kind)
            if kind == "if_bool":
                if not self.bools:
                    return None
                cond = rng.choice(self.bools[-200:])
                q = need(p.dim)
                return (f"if_({cond}, {P}, {q.name})", p.dim, min(p.lo, q.lo), max(p.hi, q.hi),
                        kind)
            if kind == "log":
                q = need(p.dim)
                r = need(DIMLESS if rng.random() < 0.7 else rng.choice(
                    [d for d in DIMS if self.pool[d]]))
                return (f"{r.name}*log(1 + {P}/{q.name})", r.dim, r.lo * math.log1p(p.lo / q.hi),
                        r.hi * math.log1p(p.hi / q.lo), kind)
            if kind == "exp":
                q = need(p.dim)
                r = need(DIMLESS if rng.random() < 0.7 else rng.choice(
                    [d for d in DIMS if self.pool[d]]))
                return (f"{r.name}*exp(-{P}/{q.name})", r.dim, r.lo * math.exp(-p.hi / q.lo),
                        r.hi * math.exp(-p.lo / q.hi), kind)
            if kind == "log2":
                if p.dim != DIMLESS:
                    return None
                return (f"log2(1 + {P})", DIMLESS, math.log2(1 + p.lo), math.log2(1 + p.hi), kind)
        except LookupError:
            return None
        raise AssertionError(kind)

    def condition(self, p: Quantity):
        rng = self.rng
        q = self.pick(p.dim, {p.name})
        if q is None:
            return None
        form = rng.choice(["cmp", "cmp", "and", "not"])
        if form == "cmp":
            return f"{p.name} <= {q}"
        if form == "not":
            return f"not ({p.name} > {q})"
        r = self.pick(DIMLESS, {p.name, q})
        s = self.pick(DIMLESS, {p.name, q, r})
        if r is None or s is None:
            return None
        return f"({p.name} > {q}) and ({r} < {s})"

    def make_nodes(self):
        rng = self.rng
        n = self.n_nodes - 1  # the last node is the headline output (see headline())
        per_level = [n // self.levels + (1 if i < n % self.levels else 0)
                     for i in range(self.levels)]
        prev_level = [n for d, ns in self.pool.items() for n in ns]  # inputs for level 1
        names = []
        for level, count in enumerate(per_level, start=1):
            new = []
            prev_dimless = [n for n in prev_level if self.q[n].dim == DIMLESS]
            prev_dimmed = [n for n in prev_level if self.q[n].dim != DIMLESS]
            for _ in range(count):
                self.counter += 1
                idx = self.counter
                for _attempt in range(200):
                    src = prev_dimless if (rng.random() < 0.85 or not prev_dimmed) else prev_dimmed
                    p = self.q[rng.choice(src)]
                    if rng.random() < 0.03 and level > 1:
                        text = self.condition(p)
                        if text is None:
                            continue
                        name = f"node_{idx:04d}_ok"
                        q = Quantity(name, "bool", 0, 1, level, "cond", expr=text,
                                     file=idx % self.n_files)
                        break
                    t = self.template(p)
                    if t is None:
                        continue
                    expr, dim, lo, hi, kind = t
                    if not (lo >= LO_LIMIT and hi <= HI_LIMIT and lo > 0
                            and math.log10(hi / lo) <= MAX_DECADES):
                        continue
                    name = f"node_{idx:04d}_{DIMS[dim][1]}"
                    q = Quantity(name, dim, lo, hi, level, kind, expr=expr, file=idx % self.n_files)
                    break
                else:
                    raise RuntimeError("generator could not place a node")
                self.q[name] = q
                new.append(name)
                names.append(name)
            for n in new:
                q = self.q[n]
                if q.dim == "bool":
                    self.bools.append(n)
                else:
                    self.pool[q.dim].append(n)
            prev_level = [n for n in new if self.q[n].dim != "bool"]
        names.append(self.headline(prev_level))
        return names

    def headline(self, top):
        """A headline output (like step_time): the mean of the top level's dimensionless nodes."""
        parts = [self.q[n] for n in top if self.q[n].dim == DIMLESS][:24]
        k = len(parts)
        q = Quantity("headline_total_ratio", DIMLESS, sum(p.lo for p in parts) / k,
                     sum(p.hi for p in parts) / k, self.levels + 1, "headline",
                     expr="(" + " + ".join(p.name for p in parts) + f")/{k}", file=0)
        self.q[q.name] = q
        return q.name


def _yaml_str(s: str) -> str:
    return json.dumps(s)  # a JSON string is a valid YAML double-quoted scalar


def _unit(dim) -> str:
    return "bool" if dim == "bool" else DIMS[dim][0]


def generate(n_nodes: int = 2000, n_inputs: int = 200, n_files: int = 20, levels: int = 20,
             seed: int = 20240611):
    """Return ``(raw, info)``; ``raw`` feeds :func:`flopsheet.library.build_library`."""
    g = _Gen(seed, n_nodes, n_inputs, n_files, levels)
    inputs = g.make_inputs()
    nodes = g.make_nodes()
    raw = []
    for f in range(n_files):
        topic = TOPICS[f % len(TOPICS)] + ("" if f < len(TOPICS) else f"_{f // len(TOPICS)}")
        lines = [f"doc: {_yaml_str(f'Synthetic benchmark topic {topic} (generated, seed {seed}).')}"]
        ins = [n for n in inputs if g.q[n].file == f]
        if ins:
            lines.append("inputs:")
        for n in ins:
            q = g.q[n]
            lines.append(f"  {n}:")
            if q.kind == "choice":
                choices = dict([PRECISION, RECOMPUTE])[n]
                lines.append(f"    choices: [{', '.join(choices)}]")
                lines.append(f"    default: {q.default}")
            else:
                lines.append(f"    unit: {_yaml_str(_unit(q.dim))}")
                lines.append(f"    default: {q.default!r}")
                lines.append(f"    bounds: [{q.lo!r}, {q.hi!r}]")
                if q.integer:
                    lines.append("    integer: true")
            lines.append(f"    doc: {_yaml_str(f'Synthetic input {n}.')}")
            lines.append(f"    source: {_yaml_str('derived: synthetic benchmark input')}")
        ns = [n for n in nodes if g.q[n].file == f]
        if ns:
            lines.append("nodes:")
        for n in ns:
            q = g.q[n]
            lines.append(f"  {n}:")
            lines.append(f"    expr: {_yaml_str(q.expr)}")
            lines.append(f"    unit: {_yaml_str(_unit(q.dim))}")
            lines.append(f"    doc: {_yaml_str(f'Synthetic {q.kind} node at depth {q.level}.')}")
            lines.append(f"    source: {_yaml_str('derived: synthetic benchmark formula')}")
        text = "\n".join(lines) + "\n"
        raw.append((f"synthetic/{topic}.yaml", f"synthetic/{topic}", text))
    top = [n for n in nodes if g.q[n].level == levels and g.q[n].dim != "bool"]
    info = SynthInfo(g.q, inputs, nodes, dict([PRECISION, RECOMPUTE]), top, nodes[-1])
    return raw, info


def sample_configs(info: SynthInfo, n: int, seed: int = 7):
    """Encoded arrays (coherent units, choice codes) for n random configurations in bounds."""
    import numpy as np

    rng = np.random.default_rng(seed)
    values = {}
    for name in info.inputs:
        q = info.quantities[name]
        if q.kind == "choice":
            values[name] = rng.integers(0, len(info.choice_inputs[name]), n, dtype=np.int64)
        elif q.integer:
            values[name] = rng.integers(math.ceil(q.lo), math.floor(q.hi) + 1, n).astype(float)
        else:
            values[name] = rng.uniform(q.lo, q.hi, n)
    return values


if __name__ == "__main__":  # print one generated file, for a look
    import collections
    import sys

    raw, info = generate()
    kinds = collections.Counter(q.kind for q in info.quantities.values())
    dims = collections.Counter(_unit(q.dim) for n, q in info.quantities.items() if n in info.nodes)
    print(kinds, dims, file=sys.stderr)
    print(raw[0][2][:3000])


def describe_commit() -> str:
    """The flopsheet commit the benchmark ran on, marked when graph/ has uncommitted edits."""
    repo = str(Path(__file__).resolve().parents[1])
    try:
        commit = subprocess.run(["git", "-C", repo, "log", "-1", "--format=%h %cd", "--date=iso"],
                                capture_output=True, text=True).stdout.strip()
        if subprocess.run(["git", "-C", repo, "status", "--porcelain", "graph"],
                          capture_output=True, text=True).stdout.strip():
            commit += " + uncommitted changes in graph/"
    except OSError:
        commit = "?"
    return commit
