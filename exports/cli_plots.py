"""Command-line glue for plots: ``run --plot F``, ``sensitivity --plot F`` and
``flopsheet plot KIND [SCENARIO] -o F``; the drawing is in :mod:`flopsheet.exports.plots`."""
from __future__ import annotations

import json
import sys

import numpy as np


def register(sub, *, run_parser, sensitivity_parser, common) -> None:
    run_parser.add_argument("--plot", metavar="F", help="also draw the breakdown of the main "
                            "output (step time for training; one bar per configuration of a "
                            "grid) to F (.png or .svg)")
    sensitivity_parser.add_argument("--plot", metavar="F", help="also draw a tornado of the "
                                    "effects to F (.png or .svg)")
    p = sub.add_parser("plot", help="draw a plot of a scenario (breakdown, memory, roofline, "
                       "tornado, sweep, pareto)")
    p.add_argument("kind", choices=["breakdown", "memory", "roofline", "tornado", "sweep",
                                    "pareto"])
    p.add_argument("scenario", nargs="?", default=None)
    p.add_argument("-o", "--output", required=True, metavar="F", help="image to write "
                   "(.png or .svg)")
    p.add_argument("--of", metavar="A,B", help="quantities: breakdown/tornado: the output "
                   "(default step_time); sweep: the lines; pareto: X,Y (lower is better)")
    p.add_argument("--top", type=int, default=15, help="tornado rows (default 15)")
    common(p, formats=("table", "json"))
    p.set_defaults(func=cmd_plot)


def _names(text):
    return [n.strip() for n in (text or "").split(",") if n.strip()]


def main_output(lib, res, outs) -> str | None:
    """The quantity ``run --plot`` breaks down: the first output that is a sum of parts."""
    from .xlsx_charts import chartable
    scalar = _Scalar(res)
    names = chartable(lib, scalar, list(outs))
    return names[0] if names else None


class _Scalar:
    """The first configuration of a result, for choosing what to plot."""
    def __init__(self, res):
        self.overridden = res.overridden
        self._res = res

    def __getitem__(self, k):
        return float(np.asarray(self._res[k], dtype=float).reshape(-1)[0])


def run_plot(args, lib, model, sc, values, res) -> None:
    from .plots import breakdown_from_result
    from flopsheet.errors import FlopsheetError
    full = model.evaluate(values)
    name = main_output(lib, full, sc.report or [])
    if name is None:
        raise FlopsheetError("--plot: no output of this scenario is a sum of parts to break "
                             "down; see `flopsheet plot --help`")
    p = breakdown_from_result(lib, full, values, name, args.plot)
    print(f"wrote {p.path} ({name} breakdown, {len(p.data['labels'])} bars)", file=sys.stderr)


def sensitivity_plot(args, lib, res, sens, ranked) -> None:
    from .plots import tornado_from_impacts
    p = tornado_from_impacts(lib, args.of, sens.value, ranked, args.plot,
                             top=getattr(args, "top", 15) or 15)
    print(f"wrote {p.path} (tornado of {len(p.data['names'])} inputs)", file=sys.stderr)


def cmd_plot(args) -> int:
    from flopsheet.cli import DEFAULT_SCENARIO
    from flopsheet.cli_scenario import scenario_from_args
    from flopsheet.errors import FlopsheetError
    from flopsheet.evaluate import Model
    from flopsheet.library import load_library
    from flopsheet.scenario import resolve
    from . import plots as P

    lib = load_library(args.formulas)
    model = Model(lib)
    sc, _ = scenario_from_args(args, lib, DEFAULT_SCENARIO)
    values = resolve(sc, model)
    if args.kind == "pareto":  # every combination of the --set lists
        values = P.full_grid(values)
    res = model.evaluate(values)
    n = P.n_configs(values)
    names = _names(args.of)
    for x in names:
        lib.item(x)
    if args.kind in ("breakdown", "memory"):
        if args.kind == "memory":
            name = names[0] if names else "memory_per_gpu"
            p = P.breakdown_from_result(lib, res, values, name, args.output, depth=2,
                                        capacity="hbm_capacity",
                                        title=f"{name} vs HBM capacity")
        else:
            name = names[0] if names else (main_output(lib, res, sc.report) or "step_time")
            p = P.breakdown_from_result(lib, res, values, name, args.output)
    elif args.kind == "roofline":
        _one(n, "roofline")
        p = P.roofline_from_result(lib, res, args.output)
    elif args.kind == "tornado":
        _one(n, "tornado")
        from flopsheet.impact import impacts
        from flopsheet.sensitivity import Differentiator
        out = names[0] if names else "step_time"
        sens = Differentiator(model).gradient(res, out)
        p = P.tornado_from_impacts(lib, out, sens.value, impacts(lib, res, sens), args.output,
                                   top=args.top)
    else:
        swept = [k for k, v in values.items() if np.ndim(v)]
        if not swept:
            raise FlopsheetError(f"plot {args.kind}: give values to sweep, e.g. "
                                 f"--set dp=8,16,32")
        if args.kind == "sweep":
            from flopsheet.fmt import pick_unit
            x = swept[0]
            outs = names or ["step_time"]
            xs = np.broadcast_to(values[x], (n,))
            ys = {}
            ylabel = []
            for o in outs:
                y = np.broadcast_to(np.asarray(res[o], dtype=float), (n,))
                unit, f = pick_unit(float(np.max(np.abs(y))), lib.item(o).dim,
                                    lib.item(o).display)
                ys[f"{o} ({unit})" if unit else o] = y / f
                ylabel.append(f"{o} ({unit})" if unit else o)
            p = P.line_plot([float(v) for v in xs], ys, args.output, xlabel=x,
                            ylabel=", ".join(ylabel), title=f"sweep of {x}")
        else:
            if len(names) != 2:
                raise FlopsheetError("plot pareto: --of X,Y names the two quantities "
                                     "(lower is better on both)")
            xs = np.broadcast_to(np.asarray(res[names[0]], dtype=float), (n,))
            ys = np.broadcast_to(np.asarray(res[names[1]], dtype=float), (n,))
            p = P.pareto_plot(xs, ys, args.output, xlabel=names[0], ylabel=names[1],
                              labels=P.config_labels(values, n))
    if args.format == "json":
        print(json.dumps({"kind": p.kind, "path": str(p.path), "data": p.data}, indent=2))
    else:
        print(f"wrote {p.path} ({p.kind})")
    return 0


def _one(n: int, kind: str) -> None:
    from flopsheet.errors import FlopsheetError
    if n != 1:
        raise FlopsheetError(f"plot {kind} takes one configuration (no a,b,c lists in --set)")


__all__ = ["register", "run_plot", "sensitivity_plot", "cmd_plot"]
