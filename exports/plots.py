"""Plots an architect reads faster than tables (matplotlib, Agg backend, PNG or SVG).

Every function takes plain numbers (lists, numpy arrays, or a pandas DataFrame's columns),
writes the image atomically (a temporary file beside the target, then a rename) and
returns a :class:`Plot` holding exactly the numbers it drew, so tests compare plotted data
against evaluated values rather than pixels. The ``*_from_result`` helpers pull those
numbers from an evaluated scenario of any formula library (parts of a sum, operators named
``<op>_flops<suffix>``/``<op>_bytes<suffix>``), so they work for training and inference
alike. matplotlib is imported only when a plot is drawn.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from .atomic import atomic_path

FORMATS = {".png": "png", ".svg": "svg"}
KINDS = ("breakdown", "memory", "roofline", "tornado", "sweep", "pareto")


@dataclass
class Plot:
    """What was drawn: the kind, the file, and the data (name -> numbers)."""
    kind: str
    path: Path | None
    data: dict[str, Any] = field(default_factory=dict)
    unit: str = ""


def _plt():
    try:
        import matplotlib
    except ImportError:
        from flopsheet.errors import FlopsheetError
        raise FlopsheetError("plots need matplotlib: pip install 'flopsheet[plots]'") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    return plt


def save(fig, path) -> Path:
    """Write ``fig`` to ``path`` (format from the suffix: .png or .svg), atomically."""
    path = Path(path)
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        from flopsheet.errors import FlopsheetError
        raise FlopsheetError(f"plot file `{path}`: use a .png or .svg name")
    plt = _plt()
    try:
        with atomic_path(path, suffix=path.suffix) as tmp:
            fig.savefig(tmp, format=fmt, dpi=120, bbox_inches="tight",
                        metadata={"Software": None} if fmt == "png" else {"Date": None})
    finally:
        plt.close(fig)
    return path


def _arr(v) -> np.ndarray:
    return np.atleast_1d(np.asarray(v, dtype=float))


# ------------------------------------------------------------------ generic plots
def stacked_bars(labels: Sequence[str], parts: Mapping[str, Sequence[float]], path, *,
                 unit: str = "", factor: float = 1.0, title: str = "", kind: str = "breakdown",
                 capacity: float | None = None, capacity_label: str = "capacity") -> Plot:
    """One stacked bar per label; ``parts`` name -> one value per label (base units, shown
    divided by ``factor``). ``capacity`` draws a horizontal limit (e.g. HBM)."""
    plt = _plt()
    labels = [str(x) for x in labels]
    data = {k: _arr(v) / factor for k, v in parts.items()}
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(labels) + 4), 4.5))
    bottom = np.zeros(len(labels))
    cmap = plt.get_cmap("tab20")
    for i, (k, v) in enumerate(data.items()):
        v = np.broadcast_to(v, (len(labels),))
        ax.bar(labels, v, bottom=bottom, label=k, color=cmap(i % 20))
        bottom = bottom + v
    if capacity is not None:
        ax.axhline(capacity / factor, color="black", linestyle="--", linewidth=1.2)
        ax.text(-0.45, capacity / factor, f"{capacity_label}", va="bottom", ha="left",
                fontsize=9)
    ax.set_ylabel(unit)
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    if len(labels) > 6:
        plt.setp(ax.get_xticklabels(), rotation=30, ha="right")
    out = {"labels": labels, **{k: np.broadcast_to(v, (len(labels),)).tolist()
                                for k, v in data.items()}, "total": bottom.tolist()}
    if capacity is not None:
        out["capacity"] = capacity / factor
    return Plot(kind, save(fig, path), out, unit)


def line_plot(x: Sequence, ys: Mapping[str, Sequence[float]], path, *, xlabel: str = "",
              ylabel: str = "", title: str = "", logx: bool = False, logy: bool = False,
              kind: str = "sweep") -> Plot:
    """Lines of ``ys`` over ``x`` (numbers, or names such as process nodes / years, which
    are placed evenly in order): sweeps and technology-scaling studies."""
    plt = _plt()
    xs = list(x)
    numeric = all(isinstance(v, (int, float, np.number)) for v in xs)
    pos = np.asarray(xs, dtype=float) if numeric else np.arange(len(xs), dtype=float)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    data = {"x": [float(v) if numeric else str(v) for v in xs]}
    for k, v in ys.items():
        v = _arr(v)
        ax.plot(pos, v, marker="o", label=k)
        data[k] = v.tolist()
    if not numeric:
        ax.set_xticks(pos, [str(v) for v in xs])
    if logx and numeric:
        ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    if len(ys) > 1:
        ax.legend(fontsize=8)
    return Plot(kind, save(fig, path), data, ylabel)


def pareto_front(x: Sequence[float], y: Sequence[float]) -> np.ndarray:
    """Indices of the points no other point beats on both (lower is better on both axes),
    sorted by x."""
    x, y = _arr(x), _arr(y)
    ok = np.isfinite(x) & np.isfinite(y)
    idx = np.flatnonzero(ok)
    idx = idx[np.lexsort((y[idx], x[idx]))]
    front, best = [], math.inf
    for i in idx:
        if y[i] < best:
            front.append(int(i))
            best = y[i]
    return np.asarray(front, dtype=int)


def pareto_plot(x: Sequence[float], y: Sequence[float], path, *, xlabel: str = "",
                ylabel: str = "", title: str = "Pareto front", labels: Sequence[str] = (),
                front: Sequence[int] | None = None) -> Plot:
    """All configurations as dots, the Pareto front (given, or computed: lower is better on
    both axes) as a line with its points labelled."""
    plt = _plt()
    x, y = _arr(x), _arr(y)
    f = np.asarray(front if front is not None else pareto_front(x, y), dtype=int)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.scatter(x, y, s=10, color="0.6", label="configurations")
    ax.plot(x[f], y[f], color="C3", marker="o", label="Pareto front")
    for i in f[:20]:
        if len(labels) > i:
            ax.annotate(str(labels[i]), (x[i], y[i]), fontsize=7, xytext=(3, 3),
                        textcoords="offset points")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return Plot("pareto", save(fig, path),
                {"x": x.tolist(), "y": y.tolist(), "front": f.tolist()}, ylabel)


def tornado(names: Sequence[str], low: Sequence[float], high: Sequence[float], path, *,
            base: float = 0.0, unit: str = "", title: str = "", factor: float = 1.0,
            ticks: Sequence[str] | None = None) -> Plot:
    """Horizontal bars from the output at each input's low value to its high value, widest
    on top, around the base value (``ticks``: axis labels, default the names)."""
    plt = _plt()
    lo, hi = _arr(low) / factor, _arr(high) / factor
    b = base / factor
    order = np.argsort(-np.abs(hi - lo), kind="stable")
    shown = [str((ticks or names)[i]) for i in order]
    names = [str(names[i]) for i in order]
    lo, hi = lo[order], hi[order]
    fig, ax = plt.subplots(figsize=(7.5, 0.35 * len(names) + 1.5))
    yy = np.arange(len(names))[::-1]
    ax.barh(yy, lo - b, left=b, color="C0", label="input lower")
    ax.barh(yy, hi - b, left=b, color="C1", label="input higher")
    ax.axvline(b, color="black", linewidth=1)
    ax.set_yticks(yy, shown)
    ax.set_xlabel(unit)
    ax.set_title(title)
    ax.legend(fontsize=8, loc="lower right")
    return Plot("tornado", save(fig, path),
                {"names": names, "low": lo.tolist(), "high": hi.tolist(), "base": b}, unit)


def roofline(ops: Mapping[str, tuple[float, float]], peak: float, bandwidth: float, path, *,
             achieved: Mapping[str, float] | None = None, roofs: Mapping[str, tuple] = (),
             title: str = "Roofline (per GPU)") -> Plot:
    """Operators placed by arithmetic intensity (FLOP/byte) on the roofline of one GPU:
    ``ops`` name -> (FLOPs, bytes); ``peak`` FLOP/s and ``bandwidth`` byte/s draw the roof,
    ``roofs`` name -> (FLOP/s, byte/s) extra (achievable) roofs. Each operator sits at its
    attainable rate min(peak, bandwidth x intensity), or at ``achieved[name]`` FLOP/s."""
    plt = _plt()
    achieved = dict(achieved or {})
    names = [n for n, (f, b) in ops.items() if f > 0 and b > 0]
    ai = np.asarray([ops[n][0] / ops[n][1] for n in names], dtype=float)
    att = np.minimum(peak, bandwidth * ai)
    y = np.asarray([achieved.get(n, a) for n, a in zip(names, att)], dtype=float)
    lo = min([peak / bandwidth / 100] + list(ai / 3))
    hi = max([peak / bandwidth * 100] + list(ai * 3))
    xs = np.logspace(math.log10(lo), math.log10(hi), 200)
    fig, ax = plt.subplots(figsize=(7.5, 5))
    ax.loglog(xs, np.minimum(peak, bandwidth * xs) / 1e12, color="black",
              label=f"peak {peak / 1e12:.4g} TFLOP/s, {bandwidth / 1e12:.3g} TB/s")
    for i, (k, (p2, b2)) in enumerate(dict(roofs).items()):
        ax.loglog(xs, np.minimum(p2, b2 * xs) / 1e12, linestyle="--", color=f"C{i + 5}",
                  label=k)
    for i, n in enumerate(names):
        ax.scatter([ai[i]], [y[i] / 1e12], color=f"C{i % 10}", zorder=3, label=n)
    ax.axvline(peak / bandwidth, color="0.7", linewidth=0.8)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7, loc="lower right")
    data = {"names": names, "intensity": ai.tolist(), "flops": [ops[n][0] for n in names],
            "bytes": [ops[n][1] for n in names], "attainable": att.tolist(),
            "plotted": y.tolist(), "peak": peak, "bandwidth": bandwidth,
            "ridge": peak / bandwidth}
    return Plot("roofline", save(fig, path), data, "FLOP/s")


# ------------------------------------------------------- from an evaluated scenario
def _scalar(v, i: int | None = None) -> float:
    a = np.asarray(v, dtype=float)
    if i is None or a.ndim == 0:
        return float(a if a.ndim == 0 else a.reshape(-1)[0])
    return float(a.reshape(-1)[i])


def n_configs(values: Mapping[str, Any]) -> int:
    shapes = [np.shape(v) for v in values.values()]
    return int(np.prod(np.broadcast_shapes(*shapes))) if shapes else 1


def full_grid(values: Mapping[str, Any]) -> dict[str, Any]:
    """Every combination of the inputs given as lists (a product, not a zip)."""
    swept = [k for k, v in values.items() if np.ndim(v)]
    if len(swept) < 2:
        return dict(values)
    mesh = np.meshgrid(*[np.asarray(values[k]).reshape(-1) for k in swept], indexing="ij")
    out = dict(values)
    for k, m in zip(swept, mesh):
        out[k] = m.reshape(-1)
    return out


def config_labels(values: Mapping[str, Any], n: int) -> list[str]:
    """``tp=8 pp=4`` per configuration of a grid (the inputs that vary)."""
    swept = [k for k, v in values.items() if np.ndim(v)]
    if n == 1 or not swept:
        return ["scenario"] if n == 1 else [f"#{i}" for i in range(n)]
    out = []
    for i in range(n):
        out.append(" ".join(f"{k}={_short(np.broadcast_to(values[k], (n,))[i])}" for k in swept))
    return out


def _short(v) -> str:
    x = float(v)
    return str(int(x)) if x.is_integer() else f"{x:.3g}"


def breakdown_from_result(lib, res, values, name: str, path, *, depth: int = 1,
                          capacity: str | None = None, title: str | None = None) -> Plot:
    """Stacked bars of ``name``'s parts (its formula's sum), one bar per configuration."""
    from flopsheet.fmt import pick_unit
    from .breakdown import breakdown
    n = n_configs(values)
    labels = config_labels(values, n)
    per = []
    for i in range(n):
        view = {k: _scalar(v, i) for k, v in res.values.items()}
        per.append(breakdown(lib, _View(view, res.overridden), name, depth=depth))
    keys: list[str] = []
    for p in per:
        keys += [k for k in p if k not in keys]
    parts = {k: [p.get(k, 0.0) for p in per] for k in keys}
    item = lib.item(name)
    total = max(abs(_scalar(res[name], i)) for i in range(n))
    unit, factor = pick_unit(total, item.dim, item.display)
    cap = None
    if capacity and capacity in lib:
        cap = _scalar(res[capacity])
    plot = stacked_bars(labels, parts, path, unit=unit, factor=factor,
                        title=title or f"{name} breakdown", capacity=cap,
                        capacity_label=capacity or "", kind="memory" if capacity else "breakdown")
    plot.data["name"] = name
    return plot


class _View(dict):
    def __init__(self, values, overridden):
        super().__init__(values)
        self.overridden = overridden


_OP = re.compile(r"^(?P<op>[a-z0-9_]+?)_flops(?P<suf>(_[a-z0-9]+)?)$")


def operators(lib) -> dict[str, tuple[str, str, str | None]]:
    """Operators the library names as ``<op>_flops<suffix>`` with a matching
    ``<op>_bytes<suffix>`` (and optionally ``<op>_time<suffix>``): label -> node names."""
    from flopsheet import units
    flop, byte = units.parse_unit("FLOP")[0], units.parse_unit("byte")[0]
    out = {}
    for n in lib.order:
        m = _OP.match(n)
        if not m or lib.nodes[n].dim != flop:
            continue
        b = f"{m['op']}_bytes{m['suf']}"
        if b in lib.nodes and lib.nodes[b].dim == byte:
            t = f"{m['op']}_time{m['suf']}"
            out[f"{m['op']}{m['suf']}"] = (n, b, t if t in lib.nodes else None)
    return out


def roofline_from_result(lib, res, path, *, peak: str = "peak_flops_per_gpu",
                         bandwidth: str = "hbm_bandwidth") -> Plot:
    """Every operator of the library on the roofline of one GPU of this scenario."""
    ops, achieved = {}, {}
    for label, (f, b, t) in operators(lib).items():
        fv, bv = _scalar(res[f]), _scalar(res[b])
        ops[label] = (fv, bv)
        if t is not None and _scalar(res[t]) > 0 and fv > 0:
            achieved[label] = fv / _scalar(res[t])
    roofs = {}
    for rate, mem, what in (("gemm_flops_rate", "memory_rate", "achievable (GEMM, memory "
                                                                 "efficiency)"),):
        if rate in lib and mem in lib:
            roofs[what] = (_scalar(res[rate]), _scalar(res[mem]))
    return roofline(ops, _scalar(res[peak]), _scalar(res[bandwidth]), path,
                    achieved=achieved, roofs=roofs)


def tornado_from_impacts(lib, out: str, value: float, ranked, path, top: int = 15) -> Plot:
    """Tornado of the first-order output at each input's value -/+ its typical change
    (:mod:`flopsheet.impact`)."""
    from flopsheet.audit import show
    from flopsheet.fmt import pick_unit
    rows = [i for i in ranked if math.isfinite(i.effect)][:top]
    item = lib.item(out)
    unit, factor = pick_unit(value, item.dim, item.display)
    p = tornado([i.name for i in rows], [value - i.effect for i in rows],
                [value + i.effect for i in rows], path, base=value, unit=unit or item.unit,
                factor=factor, title=f"{out}: effect of a typical change of each input",
                ticks=[f"{i.name} ±{show(lib, i.name, i.change)}" for i in rows])
    p.data["effect"] = [i.effect / factor for i in rows]
    return p


__all__ = ["Plot", "stacked_bars", "line_plot", "pareto_plot", "pareto_front", "tornado",
           "roofline", "breakdown_from_result", "roofline_from_result", "tornado_from_impacts",
           "operators", "config_labels", "save", "KINDS"]
