"""The ``flopsheet`` command line."""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from . import __version__, checks, units
from .audit import _plain, explain, render, show
from .errors import FlopsheetError, UnknownNameError
from .evaluate import Model
from .cli_scenario import add_arguments as _scenario_arguments
from .cli_scenario import default_notes, measured_rows, refuse_unsupported_dtype, scenario_from_args
from .fmt import FORMATS, csv_text, markdown, table
from .libsource import roots_from_args
from .library import Library, load_library
from .names import suggest
from .scenario import resolve
from .units import dim_str

DEFAULT_SCENARIO = "gpt3-175b-sc21"

#: Headline outputs (DESIGN.md), printed by `run` when a scenario names no `report:`.
HEADLINE = ["step_time", "tokens_per_second", "mfu", "hfu", "model_tflops_per_gpu",
            "memory_per_gpu", "fits_in_memory", "time_to_train", "ttft", "tpot", "die_yield",
            "package_cost"]

EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3  # a bug: anything that is not a FlopsheetError


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "cmd", None):
        parser.print_help()
        return EXIT_BAD_INPUT
    try:
        if hasattr(args, "formulas"):  # --formulas adds to the bundled library
            args.formulas = roots_from_args(args.formulas, getattr(args, "formulas_only", False))
        if getattr(args, "json", False) and hasattr(args, "format"):
            args.format = "json"
        if getattr(args, "format", None) == "json":  # the two spellings mean the same
            args.json = True
        return args.func(args) or 0
    except FlopsheetError as e:
        print(f"flopsheet: error: {e.render()}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # `flopsheet ... | head`
        return 0
    except KeyboardInterrupt:
        print("flopsheet: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - the guard: no stray traceback without --debug
        if args.debug:
            raise
        what = (str(e).splitlines() or [""])[0][:200]
        print(f"flopsheet: internal error: {type(e).__name__}: {what} (please report; "
              f"--debug shows the traceback)", file=sys.stderr)
        return EXIT_INTERNAL
    finally:
        units.save_table()  # unit strings parsed this run, for the next (disk cache)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="flopsheet", description=(
        "LLM training/inference performance and cost as an auditable calculation graph."))
    p.add_argument("--version", action="version", version=f"flopsheet {__version__}")
    p.add_argument("--debug", action="store_true",
                   help="show the Python traceback of an internal error")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")

    def common(sp, scenario=True, formats=FORMATS):
        sp.add_argument("--formulas", action="append", metavar="PATH",
                        help="a formula file or folder to add to the bundled library "
                             "(repeatable)")
        sp.add_argument("--formulas-only", action="store_true",
                        help="use only the --formulas paths, not the bundled library")
        if scenario:
            _scenario_arguments(sp)
            sp.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                            help="override an input or node (repeatable; `80 GiB` units allowed; "
                                 "a,b,c evaluates each)")
        if scenario and formats:  # only the formats the command prints
            sp.add_argument("--json", action="store_true", help="machine-readable output "
                            "(same as --format json)")
            sp.add_argument("--format", choices=list(formats),
                            default="table", help="output format (default: table)")

    r = sub.add_parser("run", help="evaluate a scenario and print its outputs")
    r.add_argument("scenario", nargs="?", default=None,
                   help=f"scenario name or file, or validation:<point id> (default: "
                        f"{DEFAULT_SCENARIO}, or only the --use presets)")
    r.add_argument("--outputs", metavar="A,B", help="names to print (default: the scenario's "
                   "report list, else the headline outputs)")
    r.add_argument("--all", action="store_true", help="print every node")
    r.add_argument("--strict", action="store_true", help="a broken divisibility or capacity "
                   "rule (parallel_config_valid, fits_in_memory) is an error, not a warning")
    common(r)
    r.set_defaults(func=cmd_run)

    e = sub.add_parser("explain", help="show how a value is computed, down to its inputs")
    e.add_argument("name", help="node or input to explain")
    e.add_argument("scenario", nargs="?", default=None)
    e.add_argument("--depth", type=int, default=3, help="levels to expand (0: all; default 3)")
    common(e, formats=("table", "json"))  # a tree: no csv or markdown form
    e.set_defaults(func=cmd_explain)

    s = sub.add_parser("sensitivity", help="elasticities of a node w.r.t. every input")
    s.add_argument("scenario", nargs="?", default=None)
    s.add_argument("--of", required=True, metavar="NODE", help="the output to differentiate")
    s.add_argument("--top", type=int, default=15, help="rows to print (default 15; 0: all)")
    common(s)
    s.set_defaults(func=cmd_sensitivity)

    c = sub.add_parser("check", help="lint the formula library and the bundled templates")
    common(c, scenario=False)
    c.set_defaults(func=_lazy("cmd_check"))

    li = sub.add_parser("list", help="list inputs, nodes, templates or calibration constants")
    li.add_argument("what", choices=["inputs", "nodes", "templates", "calibration"],
                    help="calibration: every calibration constant's library default and the bundled "
                         "hardware and system presets that set it, with value and source")
    common(li, scenario=False)
    li.add_argument("--json", action="store_true", help="machine-readable output")
    li.set_defaults(func=_lazy("cmd_list"))

    from .validate import register as _register_validate  # issue 6: logic in flopsheet.validate
    _register_validate(sub, common=common)

    # --- Excel exports (issue 3): run --xlsx, export, import-xlsx; logic in flopsheet.exports ---
    from .exports.cli_excel import register as _register_excel
    _register_excel(sub, run_parser=r, common=common, default_scenario=DEFAULT_SCENARIO)
    # --- end Excel exports ---
    from .cli_explore import register as _register_explore  # issue 14: grids, sweep, search
    _register_explore(sub, run_parser=r, common=common)
    from .exports.cli_plots import register as _register_plots  # plots (issue 15)
    _register_plots(sub, run_parser=r, sensitivity_parser=s, common=common)
    from .exports.cli_report import register as _register_report  # HTML audit report
    _register_report(sub, common=common, run_parser=r)
    from .exports.cli_docs import register as _register_docs  # formula reference
    _register_docs(sub, common=common)
    return p


# ----------------------------------------------------------------- helpers
def _lazy(name: str):
    """A command that lives in graph/cli_library.py (check, list), imported when run."""
    def run(args):
        from . import cli_library
        return getattr(cli_library, name)(args)
    return run


def _setup(args):
    lib = load_library(args.formulas)
    model = Model(lib)
    sc, args.measured = scenario_from_args(args, lib, DEFAULT_SCENARIO)
    values = resolve(sc, model)
    refuse_unsupported_dtype(lib, sc, values)
    return lib, model, sc, values


def _emit(fmt: str, headers: list[str], rows: list[list], right=frozenset()) -> None:
    if fmt == "csv":
        sys.stdout.write(csv_text(rows, headers))
    elif fmt == "markdown":
        print(markdown(rows, headers, right))
    else:
        print(table(rows, headers, right))


def _print_json(obj) -> None:
    print(json.dumps(obj, indent=2, sort_keys=False, default=_plain))


def _check_names(lib: Library, names: list[str], where: str) -> None:
    for n in names:
        if n not in lib:
            raise UnknownNameError(f"{where} names unknown `{n}`" + suggest(n, lib.names()),
                                   node=n)


def _outputs(args, lib: Library, sc) -> list[str]:
    if getattr(args, "all", False):
        return list(lib.order)
    if getattr(args, "outputs", None):
        names = [n.strip() for n in args.outputs.split(",") if n.strip()]
        _check_names(lib, names, "--outputs")
        return names
    if sc.report:
        _check_names(lib, sc.report, f"{sc.path} report:")
        return list(sc.report)
    return [n for n in HEADLINE if n in lib]


# ---------------------------------------------------------------- commands
def cmd_run(args) -> int:
    if any("," in s or ".." in s for s in args.set):  # lists or ranges: a grid (issue 14)
        from .cli_explore import run_grid
        return run_grid(args)
    lib, model, sc, values = _setup(args)
    outs = checks.with_world_size(lib, _outputs(args, lib, sc))
    measured_nodes = [m.node for m in args.measured if m.node in lib and m.node not in outs]
    res = model.evaluate(values, outputs=outs + checks.constraint_nodes(lib, outs) + measured_nodes)
    n_cfg = _n_configs(res, values)
    warnings = checks.broken(lib, res, lambda n, v: show(lib, n, v))
    if warnings and args.strict:
        raise checks.ConstraintError(warnings[0] + (f" (and {len(warnings) - 1} more)"
                                                    if len(warnings) > 1 else ""))
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    if getattr(args, "xlsx", None):  # --- Excel export (issue 3) ---
        from .exports.cli_excel import run_xlsx
        run_xlsx(args, lib, model, sc, values, outputs=outs)
    if getattr(args, "html", None):
        from .exports.cli_report import run_html
        run_html(args, lib, model, sc, values, outs)
    if getattr(args, "plot", None):
        from .exports.cli_plots import run_plot
        run_plot(args, lib, model, sc, values, res)
    defaults = model.defaults()
    notes = default_notes(lib, sc, lambda k: show(lib, k, defaults[k]))
    measured = measured_rows(args.measured, lib, res) if n_cfg == 1 else []
    if args.format == "json":
        _print_json({"scenario": sc.name, "file": sc.path, "doc": sc.doc, "configs": n_cfg,
                     "presets": sc.chain,
                     "set": {k: v.raw for k, v in sc.values.items() if v.origin == "--set"},
                     "overridden": sorted(res.overridden), "notes": notes, "warnings": warnings,
                     "outputs": {n: {"value": _plain(res[n]), "unit": lib.item(n).unit,
                                     "shown": show(lib, n, res[n]) if n_cfg == 1 else None}
                                 for n in outs},
                     "measured": [dict(zip(["metric", "predicted", "measured", "error",
                                            "tolerance"], r)) for r in measured]})
        return 0
    if args.format in ("csv", "markdown"):
        if n_cfg == 1:
            rows = [[n, _plain(res[n]), lib.item(n).unit, show(lib, n, res[n]),
                     "overridden" if n in res.overridden else ""] for n in outs]
            headers = ["output", "value", "unit", "shown", "note"]
        else:
            headers = ["config"] + outs
            rows = [[i] + [_plain(np.broadcast_to(res[n], (n_cfg,))[i]) for n in outs]
                    for i in range(n_cfg)]
        _emit(args.format, headers, rows, right={1})
        return 0
    print(f"scenario  {sc.name}  ({sc.path})")
    if sc.doc:
        print(f"          {sc.doc}")
    print(f"presets   {' <- '.join(reversed(sc.chain))}")
    sets = [f"{k}={v.raw}" for k, v in sc.values.items() if v.origin == "--set"]
    if sets:
        print(f"--set     {', '.join(sets)}")
    for note in notes:
        print(f"note      {note}")
    print()
    if n_cfg == 1:
        rows = [[n, show(lib, n, res[n]), ("overridden" if n in res.overridden else ""),
                 lib.item(n).doc] for n in outs]
        print(table(rows, ["output", "value", "", "what"], right={1}))
    else:
        swept = [k for k, v in values.items() if np.ndim(v)]
        header = ["output"] + [f"#{i}" for i in range(min(n_cfg, 12))]
        rows = [[k] + [show(lib, k, x) for x in np.broadcast_to(values[k], (n_cfg,))[:12]]
                for k in swept]
        rows += [[n] + [show(lib, n, x) for x in np.broadcast_to(res[n], (n_cfg,))[:12]]
                 for n in outs]
        print(table(rows, header, right=set(range(1, len(header)))))
        if n_cfg > 12:
            print(f"({n_cfg - 12} more configurations; use --json for all)")
    if measured:
        print("\npublished measurement (validation point; `flopsheet explain NODE` shows why)")
        print(table(measured, ["metric", "predicted", "measured", "error", "tolerance"],
                    right={1, 2, 3}))
    return 0


def _n_configs(res, values) -> int:
    shapes = [np.shape(v) for v in values.values()]
    return int(np.prod(np.broadcast_shapes(*shapes))) if shapes else 1


def cmd_explain(args) -> int:
    lib, model, sc, values = _setup(args)
    lib.item(args.name)
    res = model.evaluate(values, outputs=[args.name])
    if _n_configs(res, values) != 1:
        raise FlopsheetError("explain takes one configuration (no a,b,c lists in --set)")
    rec = explain(lib, res, sc, args.name, depth=None if args.depth <= 0 else args.depth)
    if args.format == "json":
        _print_json({**rec, "scenario": sc.name, "scenario_file": sc.path, "presets": sc.chain})
    else:  # which file the scenario name resolved to, then the presets it applied
        print(f"scenario  {sc.name}  ({sc.path})")
        print(f"presets   {' <- '.join(reversed(sc.chain))}\n")
        print(render(rec))
    return 0


def cmd_sensitivity(args) -> int:
    from .impact import impacts
    from .sensitivity import Differentiator
    lib, model, sc, values = _setup(args)
    lib.item(args.of)
    res = model.evaluate(values)
    sens = Differentiator(model).gradient(res, args.of)
    ranked = impacts(lib, res, sens)
    out_item = lib.item(args.of)
    rows = ranked[: args.top] if args.top else ranked
    if getattr(args, "plot", None):
        from .exports.cli_plots import sensitivity_plot
        sensitivity_plot(args, lib, res, sens, ranked)
    if args.format == "json":
        _print_json({"output": args.of, "value": sens.value, "unit": lib.item(args.of).unit,
                     "ranked_by": "|d output / d input| x typical change",
                     "inputs": [{"name": i.name, "value": i.value, "typical_change": i.change,
                                 "change_rule": i.why, "effect": i.effect,
                                 "relative_effect": i.relative, "derivative": i.derivative,
                                 "elasticity": i.elasticity} for i in rows],
                     "elasticities": {i.name: sens.elasticities.get(i.name) for i in rows},
                     "derivatives": {i.name: i.derivative for i in rows},
                     "nonsmooth": sens.nonsmooth})
        return 0
    body = []
    for i in rows:
        eff = (f"{i.effect * 100:.2f} pp" if out_item.display == "%"  # percentage points
               else show(lib, args.of, i.effect))
        rel = f" ({i.relative * 100:+.2f} %)" if i.relative is not None else ""
        body.append([i.name, show(lib, i.name, i.value), "±" + show(lib, i.name, i.change),
                     ("+" if i.effect >= 0 else "") + eff + rel,
                     f"{i.elasticity:+.4f}" if i.elasticity is not None else "-",
                     f"{i.derivative:.4g} {_per_unit(lib, args.of, i.name)}"])
    headers = ["input", "value", "typical change", f"effect on {args.of}", "elasticity",
               "derivative"]
    if args.format in ("csv", "markdown"):
        _emit(args.format, headers, body, right={3, 4})
        return 0
    print(f"{args.of} = {show(lib, args.of, sens.value)}  ({sc.name}; {out_item.unit})")
    print("ranked by the effect of a typical change of each input (10 % of its value; for a "
          "zero value 10 % of its range, one step, or 10 % of its default);\nelasticity: % "
          "change of the output per 1 % change of the input ('-' where the input is 0)\n")
    print(table(body, headers, right={3, 4}))
    hidden = len(ranked) - len(rows)
    if hidden > 0:
        print(f"({hidden} more; --top 0 for all)")
    if sens.nonsmooth:
        print("\nnon-smooth here:")
        for note in dict.fromkeys(sens.nonsmooth):  # one line per distinct point
            print(f"  - {note}")
    return 0


def _per_unit(lib, out, inp) -> str:
    o, i = dim_str(lib.item(out).dim), dim_str(lib.item(inp).dim)
    if i == "1":
        return "" if o == "1" else o
    return f"per {i}" if o == "1" else f"{o} per {i}"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
