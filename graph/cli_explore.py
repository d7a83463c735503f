"""CLI of design-space exploration: `run` grids, `sweep FILE`, `search`, `uncertainty`.

Registered from graph/cli.py; the logic lives in grid/sweep/search/pareto/uncertainty.
"""
from __future__ import annotations

import json
import sys

from .fmt import FORMATS
from .grid import DEFAULT_MAX_CONFIGS


def register(sub, *, run_parser, common) -> None:
    def explore(p, pareto=True):
        p.add_argument("--top", type=int, default=10, help="rows to print (default 10)")
        p.add_argument("-o", "--output", metavar="F", help="write every row (with its reason "
                       "when dropped) to F: .csv, .parquet or .json")
        p.add_argument("--max-configs", type=int, default=DEFAULT_MAX_CONFIGS, metavar="N",
                       help=f"refuse grids above N configurations (default {DEFAULT_MAX_CONFIGS:,})")
        p.add_argument("--where", action="append", default=[], metavar="COND",
                       help="keep rows where COND holds (formula language; repeatable)")
        p.add_argument("--dask", nargs="?", const="local", metavar="ADDRESS",
                       help="evaluate chunks on Dask: a LocalCluster, or tcp://host:8786")
        p.add_argument("--quiet", action="store_true", help="no progress bar")
        if pareto:
            p.add_argument("--pareto", metavar="A,B[,C]", help="print the Pareto front of 2 or 3 "
                           "outputs (name:min or name:max)")
            p.add_argument("--pareto-output", metavar="F", help="write the front to F")

    # `run` with lists or ranges in --set evaluates a grid
    run_parser.add_argument("--zip", action="store_true", help="pair --set lists (equal "
                            "lengths) instead of crossing them")
    run_parser.add_argument("--sort", metavar="NAME", help="grids: sort rows by NAME (-NAME: "
                            "descending)")
    run_parser.add_argument("--override-nodes", action="store_true",
                            help="grids: allow an axis that is a formula node (its formula is "
                                 "replaced in every row)")
    explore(run_parser)

    s = sub.add_parser("sweep", help="evaluate a sweep file (axes, constraints, outputs)")
    s.add_argument("file", help="sweep YAML file")
    s.add_argument("--sort", metavar="NAME", help="sort rows by NAME (-NAME: descending)")
    s.add_argument("--json", action="store_true", help="machine-readable output "
                   "(same as --format json)")
    s.add_argument("--format", choices=FORMATS, default="table",
                   help="output format (default: table)")
    s.add_argument("--formulas", action="append", metavar="PATH",
                   help="formula file or folder added to the bundled library (repeatable)")
    s.add_argument("--formulas-only", action="store_true",
                   help="use only the --formulas paths, not the bundled library")
    explore(s)
    s.set_defaults(func=cmd_sweep)

    se = sub.add_parser("search", help="best parallel layout of a scenario on N GPUs")
    se.add_argument("scenario", help="scenario name or file")
    se.add_argument("--gpus", type=int, required=True, help="number of GPUs")
    se.add_argument("--objective", metavar="NAME[:min|max]", help="what to optimize (default "
                    "step_time; direction from the search space)")
    se.add_argument("--axis", action="append", default=[], metavar="NAME=V1,V2",
                    help="replace the values a search axis tries (repeatable; ranges allowed), "
                         "e.g. --axis recompute=full --axis zero_stage=0")
    se.add_argument("--space", metavar="FILE", help="search space YAML (default: picked by "
                    "the scenario - templates/search/inference.yaml for a serving scenario, "
                    "training.yaml otherwise)")
    common(se)
    explore(se)
    se.set_defaults(func=cmd_search)

    u = sub.add_parser("uncertainty", help="Monte Carlo of the inputs' spreads; Sobol indices")
    u.add_argument("scenario", help="scenario whose values carry range:/distribution:")
    u.add_argument("--of", required=True, metavar="A,B", help="outputs")
    u.add_argument("--samples", type=int, default=10_000, help="Monte Carlo samples")
    u.add_argument("--seed", type=int, default=0)
    u.add_argument("--method", choices=["lhs", "random"], default="lhs")
    u.add_argument("--sobol", type=int, default=1024, metavar="N",
                   help="Saltelli base size (power of 2; 0: skip Sobol)")
    u.add_argument("--dask", nargs="?", const="local", metavar="ADDRESS")
    u.add_argument("--quiet", action="store_true")
    common(u, formats=("table", "json"))
    u.set_defaults(func=cmd_uncertainty)


def _sort(df, key, lib):
    if not key:
        return df
    desc = key.startswith("-")
    name = key.lstrip("-")
    if name not in df.columns:
        from .errors import FlopsheetError
        from .names import suggest
        raise FlopsheetError(f"--sort `{name}` is not a column" + suggest(name, list(df.columns)))
    return df.sort_values(name, ascending=not desc, kind="stable")


def _report(args, lib, job, cols, *, title: str, sort=None, json_extra=None) -> int:
    from .runner import print_rows, to_frame, write_table
    df = to_frame(lib, job, cols)
    kept = df[df["reason"] == ""]
    kept = _sort(kept, sort, lib)
    if args.output:
        write_table(df, args.output)
    front = _pareto(args, lib, kept)
    if getattr(args, "json", False):
        out = {"configs": len(df), "kept": len(kept),
               "outputs": {o: {"value": [None if r else float(x) for x, r in
                                         zip(df[o], df["reason"] != "")],
                               "unit": lib.item(o).unit} for o in job.outputs},
               "dropped": df.loc[df["reason"] != "", "reason"].value_counts().to_dict(),
               "rows": json.loads(kept.head(args.top).to_json(orient="records"))}
        if front is not None:
            out["pareto"] = json.loads(front.to_json(orient="records"))
        out.update(json_extra or {})
        print(json.dumps(out, indent=2))
        return 0
    cols_shown = [c for c in df.columns if c not in ("row", "reason")]
    if args.format in ("csv", "markdown"):
        print_rows(lib, kept, cols_shown, top=args.top, fmt=args.format)
        return 0
    print(title)
    print(f"{len(df):,} configurations, {len(kept):,} kept")
    _print_dropped(df)
    print()
    print_rows(lib, kept, cols_shown, top=args.top)
    if len(kept) > args.top:
        print(f"({len(kept) - args.top:,} more rows" + (f"; written to {args.output})"
              if args.output else "; -o FILE writes them all)"))
    elif args.output:
        print(f"written to {args.output}")
    if front is not None:
        _print_front(args, lib, front, cols_shown)
    return 0


def _print_dropped(df):
    counts = df.loc[df["reason"] != "", "reason"].value_counts()
    for reason, k in counts.items():
        print(f"  dropped {k:>9,}  {reason}")


def _maximize(maximize):
    """Default --pareto directions: the search space's, else every bundled space's."""
    if maximize is None:
        from .layout_search import default_maximize
        return default_maximize()
    return maximize


def _pareto(args, lib, kept, maximize=None):
    if not getattr(args, "pareto", None):
        return None
    from .pareto import front, parse_pareto
    objs = parse_pareto(args.pareto, lib, _maximize(maximize))
    for n, _ in objs:
        if n not in kept.columns:
            from .errors import FlopsheetError
            raise FlopsheetError(f"--pareto `{n}` is not among the evaluated outputs")
    f = front(kept, objs)
    if args.pareto_output:
        from .runner import write_table
        write_table(f, args.pareto_output)
    return f


def _print_front(args, lib, f, cols_shown, maximize=None):
    from .pareto import parse_pareto
    from .runner import print_rows
    objs = parse_pareto(args.pareto, lib, _maximize(maximize))
    names = ", ".join(f"{n} ({'max' if m else 'min'})" for n, m in objs)
    print(f"\nPareto front of {names}: {len(f)} rows")
    shown = max(args.top, 10)
    print_rows(lib, f, cols_shown, top=shown)
    more = f"({len(f) - shown} more rows)" if len(f) > shown else ""
    if args.pareto_output:
        print(f"{more[:-1] + '; ' if more else '('}written to {args.pareto_output})")
    elif more:
        print(more[:-1] + "; --pareto-output F writes them)")


def run_grid(args) -> int:
    """`flopsheet run` with lists or ranges in --set: a crossed (or zipped) grid."""
    from .chunks import model_for
    from .grid import grid_from_sets
    from .runner import execute
    from .sweeps import make_job, where_checks
    from .cli import DEFAULT_SCENARIO, _outputs
    from .cli_scenario import scenario_from_args
    model = model_for(args.formulas)
    sc, _ = scenario_from_args(args, model.lib, DEFAULT_SCENARIO)
    grid, _ = grid_from_sets(sc, zipped=args.zip)
    outs = _outputs(args, model.lib, sc)
    job = make_job(sc, grid, outs, formulas=args.formulas, checks=where_checks(args.where),
                   max_configs=args.max_configs, allow_nodes=args.override_nodes)
    cols = execute(job, dask=args.dask, quiet=args.quiet)
    if getattr(args, "plot", None):  # one bar per configuration of the grid (issue 15)
        from .exports.cli_plots import run_plot
        values = dict(job.base)
        values.update(grid.columns(0, grid.size))
        run_plot(args, model.lib, model, sc, values, None)
    mode = "zipped" if args.zip else " x ".join(str(d) for d in grid.shape)
    return _report(args, model.lib, job, cols, sort=args.sort,
                   title=f"scenario  {sc.name}  ({sc.path})\ngrid      {mode}: "
                         + ", ".join(grid.names))


def cmd_sweep(args) -> int:
    from .chunks import model_for
    from .runner import execute
    from .sweeps import load_sweep, where_checks
    job, sc, settings = load_sweep(args.file, formulas=args.formulas,
                                   max_configs=args.max_configs)
    job.checks += where_checks(args.where)
    cols = execute(job, dask=args.dask, quiet=args.quiet, label="sweep")
    return _report(args, model_for(args.formulas).lib, job, cols,
                   sort=args.sort or settings.get("sort"),
                   title=f"sweep     {args.file}  (scenario {sc.name})")


def cmd_search(args) -> int:
    from .chunks import model_for
    from .cli_scenario import scenario_from_args
    from .layout_search import run_search, runner_up_note
    from .runner import print_rows, write_table
    pareto_names = [p.split(":")[0] for p in (args.pareto or "").split(",") if p]
    lib = model_for(args.formulas).lib
    sc, _ = scenario_from_args(args, lib)  # with its --use presets and --set values
    r = run_search(sc, args.gpus, objective=args.objective, where=args.where,
                   space=args.space, formulas=args.formulas,
                   max_configs=args.max_configs, dask=args.dask, quiet=args.quiet,
                   extra_outputs=pareto_names, axes=_axes(args.axis))
    df = r.frame
    kept = df[df["reason"] == ""]
    if args.output:
        write_table(df, args.output)
    front = _pareto(args, lib, kept, r.space.maximize)
    sense = "max" if r.maximize else "min"
    if args.json:
        out = {"scenario": r.scenario.name, "gpus": args.gpus, "objective": r.objective,
               "sense": sense, "candidates": r.candidates, "feasible": r.feasible,
               "dropped": r.reasons, "best": json.loads(kept.head(args.top).to_json(
                   orient="records")), "runner_up": runner_up_note(r, lib)}
        if front is not None:
            out["pareto"] = json.loads(front.to_json(orient="records"))
        print(json.dumps(out, indent=2))
        return 0
    # a one-value axis is a setting, not a choice
    axes = [a.name for a in r.job.grid.axes if len(a) > 1]
    shown = list(dict.fromkeys(axes + [c for c in [r.objective] + r.space.show
                                       if c in df.columns and c not in axes]))
    if args.format in ("csv", "markdown"):
        print_rows(lib, kept, shown, top=args.top, fmt=args.format)
        return 0 if len(kept) else 1
    print(f"search    {r.scenario.name} on {args.gpus:,} GPUs, {sense} {r.objective}  "
          f"(space {r.space.path})")
    print(f"{r.candidates:,} candidates, {r.feasible:,} feasible")
    _print_dropped(df)
    if not len(kept):
        print("no feasible configuration")
        return 1
    print()
    print_rows(lib, kept, shown, top=args.top)
    best = kept.iloc[0]
    from .audit import show
    print("\nbest: " + ", ".join(f"{n} {show(lib, n, float(best[n]))}" for n in r.space.breakdown
                                 if n in kept.columns and float(best[n]) != 0))
    for line in runner_up_note(r, lib):
        print(line)
    if args.output:
        print(f"written to {args.output}")
    if front is not None:
        _print_front(args, lib, front, list(dict.fromkeys(shown + pareto_names)),
                     r.space.maximize)
    return 0


def _axes(items):
    from .grid import axis_values
    from .scenario import parse_set
    out = {}
    for it in items:
        name, raw = parse_set(it)
        out[name] = axis_values(raw, name=name, file="--axis")
    return out


def cmd_uncertainty(args) -> int:
    from .audit import show
    from .chunks import model_for
    from .fmt import table
    from .cli_scenario import scenario_from_args
    from .uncertainty import propagate
    outs = [o.strip() for o in args.of.split(",") if o.strip()]
    lib = model_for(args.formulas).lib
    sc, _ = scenario_from_args(args, lib)  # with its --use presets and --set values
    stats = propagate(sc, outs, n=args.samples, seed=args.seed, method=args.method,
                      formulas=args.formulas, sobol_n=args.sobol, dask=args.dask,
                      quiet=args.quiet)
    if args.json:
        print(json.dumps([s.__dict__ for s in stats], indent=2, default=str))
        return 0
    print(f"uncertainty  {args.scenario}: {args.samples:,} samples ({args.method}, seed "
          f"{args.seed})")
    for s in stats:
        pc = "  ".join(f"p{p:g} {show(lib, s.name, v)}" for p, v in s.percentiles.items())
        print(f"\n{s.name}: nominal {show(lib, s.name, s.nominal)}, mean "
              f"{show(lib, s.name, s.mean)}, sd {show(lib, s.name, s.sd)}")
        print(f"  {pc}" + (f"  ({s.masked} samples not finite)" if s.masked else ""))
        names = sorted(s.sobol or s.elasticity, key=lambda n: -(s.sobol[n][2] if s.sobol
                                                                 else abs(s.elasticity[n])))
        rows = []
        for n in names:
            row = [n]
            if s.sobol:
                s1, c1, st, ct = s.sobol[n]
                row += [f"{s1:.3f} ± {c1:.3f}", f"{st:.3f} ± {ct:.3f}"]
            row.append(f"{s.elasticity.get(n, float('nan')):+.4f}")
            rows.append(row)
        head = ["input"] + (["Sobol first", "Sobol total"] if s.sobol else []) + \
            ["elasticity (local)"]
        print(table(rows, head, right=set(range(1, len(head)))))
    sys.stdout.flush()
    return 0
