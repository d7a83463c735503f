"""``flopsheet validate``: published measurements as a re-runnable accuracy report.

Every published data point (``../shared/validation/published.yaml``) lives in a
*family file* under ``templates/validation/`` (one per source family) as a
scenario - ``use:`` presets plus ``values:`` - and the numbers its source
reports::

    doc: Narayanan et al. SC21, Table 1.
    source: default citation of the points below
    category: training                 # default for the points
    tolerance: 0.10                    # default |error| a row is expected to stay within
    points:
      train-megatron-sc21-1.7b:        # the id in published.yaml
        description: GPT 1.7B on 32 A100
        source: ...                    # where the measured numbers come from
        use: [sc21-table1-1.7b, validation/assumptions/megatron-lm-2021]
        values: {micro_batch: 16}      # the point's own inputs, as in a scenario
        gpus: 32                       # checked against n_gpus
        expect:                        # what the source reports, each against one node
          - {metric: achieved_tflops_per_gpu, node: achieved_flops_per_gpu, value: 137, unit: TFLOP/s}
          - {metric: pct_of_peak, node: hfu, value: 44, unit: "%", counted: false}
        not_compared:                  # reported numbers left out, and why
          aggregate_pflops: per-system rescaling of achieved_tflops_per_gpu

An ``expect`` row may carry its own ``values:`` (a variant of the point, e.g.
another recompute setting), a ``tolerance`` and ``counted: false`` for a
number the source derived from another row of the same point (shown and
checked, but kept out of the statistics so one measurement is not counted
twice). A point the library cannot express yet carries ``unsupported:
<reason>`` instead of being dropped; it is listed and counted.

Statistics per category are over the counted rows of supported points: the
median and 90th percentile of |error| and the worst signed error, where
error = predicted / measured - 1. Rows of different points whose resolved
inputs are identical (the same layout in another release, a repeated run) get
one prediction; the report lists how far their measurements differ (repeat
measurements), scatter no model can follow. Assumptions a source leaves open live in
the points (or in ``templates/validation/assumptions/``, one preset per
family); calibration constants are global and never set here.
"""
from __future__ import annotations

import json
import sys

from .errors import ScenarioError
from .fmt import table
from .library import load_library
from .validate_points import (CATEGORIES, DEFAULT_TOLERANCE, EXPECT_KEYS,  # noqa: F401
                              FAMILY_KEYS, POINT_KEYS, Expect, Point, load_family, load_points,
                              validation_dir)
from .validate_report import (BY_KEYS, SUMMARY_HEAD, Report, Row, breakdown_tables,  # noqa: F401
                              markdown, print_text, rows_table, status, summary_rows, to_json,
                              unsupported_by_reason, write_xlsx, _pct, _num)
from .scenario import parse_set
from .validate_crossval import cross_validate
from .validate_fit import LOSSES, WEIGHTS, fit  # noqa: F401
from .validate_run import CHECKS, Validator, select  # noqa: F401

COMMAND = "flopsheet validate --markdown"


# ---------------------------------------------------------------------------------- CLI
def register(sub, *, common) -> None:
    """Add the ``validate`` subcommand to the ``flopsheet`` parser."""
    v = sub.add_parser("validate", help="compare the model with published measurements "
                       "(templates/validation)")
    v.add_argument("--category", choices=CATEGORIES, help="only this category")
    v.add_argument("--family", metavar="F[,G]", help="only these families (file names in "
                   "templates/validation, without .yaml)")
    v.add_argument("--json", action="store_true", help="machine-readable output")
    v.add_argument("--markdown", action="store_true",
                   help="print the per-category accuracy table as Markdown (the README section)")
    v.add_argument("--xlsx", metavar="F", help="also write the results to F (.xlsx)")
    v.add_argument("--by", choices=BY_KEYS, help="also break each category's statistics down by "
                   "validation family, by the hardware preset a point runs on, or by dense "
                   "against mixture-of-experts models, with each group's median bias (positive: "
                   "predictions rosier than measured) (text and --json reports)")
    v.add_argument("--fit", metavar="A[,B]", help="fit these global calibration inputs (e.g. "
                   "gemm_efficiency) on the --on families and report the error there and on the "
                   "held-out points that share the inputs' shipped values; nothing is written back")
    v.add_argument("--on", metavar="F[,G]", help="families (or point ids) to fit on, with --fit; "
                   "all for every family")
    v.add_argument("--only", action="append", default=[], metavar="S[,T]", help="with --fit: fit "
                   "only the --on points whose id contains one of these substrings (e.g. b200 for "
                   "one generation's rows of a mixed family); repeatable, a point must pass every "
                   "--only; the others are reported with the rest")
    v.add_argument("--set", action="append", default=[], metavar="NAME=NUMBER", help="with --fit: "
                   "hold a global input at this value for the fit and both reports (repeatable)")
    v.add_argument("--loss", choices=LOSSES, help="with --fit: least-squares "
                   "loss on log(predicted / measured) - linear (mean squared log error, the "
                   "default) or soft_l1 (scale 5 %%, robust to a family's few outlying rows)")
    v.add_argument("--weight", choices=WEIGHTS, help="with --fit: how the fit set's rows weigh - "
                   "row (each row once, the default) or family (each family once, its rows sharing "
                   "the weight, so a table of many rows does not set the constant alone)")
    v.add_argument("--dump", action="store_true", help="with --fit: list every fitted and held-out "
                   "row's error before and after")
    v.add_argument("--cross-validate", action="store_true", help="with --fit: leave each family "
                   "of the fit set out in turn, fit on the others and predict it; report those "
                   "errors beside the shipped values' (one fit per family)")
    common(v, scenario=False)
    v.set_defaults(func=cmd_validate)


def _held(items: list[str]) -> dict:
    """``--set name=value`` for a fit: one value per input (the scenario --set parser; no sweeps)."""
    out = {}
    for item in items:
        name, value = parse_set(item)
        if isinstance(value, list):
            raise ScenarioError(f"--set `{item}`: a fit holds one value, not a list")
        out[name] = value
    return out


def _fit_options(args, only: list[list[str]]) -> dict:
    """The keyword arguments --only, --set, --loss and --weight give a fit."""
    return dict(only=only, fixed=_held(args.set), loss=args.loss or "linear",
                weight=args.weight or "row")


def _ids(only: list[list[str]]) -> str:
    return "".join(f" (ids with {' or '.join(g)})" for g in only)


def _loss_words(out: dict) -> str:
    return f"{out['loss']} loss{', each family weighted once' if out['weight'] == 'family' else ''}"


def _stats_table(out: dict, labelled: list[tuple[str, str]]) -> str:
    """The error statistics ``out[key]`` of each (label, key) as a table, one row each."""
    rows = [[label, str(out[key]["compared"]), _pct(out[key]["median_abs_error"], False),
             _pct(out[key]["p90_abs_error"], False), _pct(out[key]["worst_error"])]
            for label, key in labelled]
    return table(rows, ["rows", "compared", "median |err|", "p90 |err|", "worst"],
                 right={1, 2, 3, 4})


def _families(n: int) -> str:
    return f"{n} {'family' if n == 1 else 'families'}"


def _print_cross_validation(validator, points, args, only) -> int:
    """``--fit ... --cross-validate``: leave-one-family-out errors beside the shipped values'."""
    names = [n.strip() for n in args.fit.split(",")]

    def tick(i, n, family):
        print(f"cross-validating {i}/{n}: leaving out {family}", file=sys.stderr, flush=True)

    out = cross_validate(validator, points, names, args.on, tick=tick, **_fit_options(args, only))
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"{', '.join(names)} cross-validated over the {len(out['families'])} families of "
          f"--on {args.on}{_ids(only)} ({_loss_words(out)}): each family predicted by a fit on "
          "the others (nothing written back)")
    for n, x in out["fixed"].items():
        print(f"  {n} = {x} (set)")
    rows = [[f["family"], str(f["rows"]),
             ", ".join(f"{v:.4g}" for v in f["fitted"].values()),
             _pct(f["shipped_median_abs_error"], False), _pct(f["crossed_median_abs_error"], False)]
            for f in out["families"]]
    print(table(rows, ["left out", "rows", "fit on the others", "shipped median |err|",
                       "cross-validated"], right={1, 3, 4}))
    print(_stats_table(out, [("all rows, shipped", "shipped"),
                             ("all rows, cross-validated", "crossed")]))
    print(f"median of the families' median |err|: {_pct(out['family_median_shipped'], False)} "
          f"shipped, {_pct(out['family_median_crossed'], False)} cross-validated; "
          f"{_families(out['families_better'])} predicted better, {out['families_worse']} worse")
    return 0


def cmd_validate(args) -> int:
    lib = load_library(getattr(args, "formulas", None))
    validator = Validator(lib)
    points = select(load_points(), args.category, args.family)
    categories = [args.category] if args.category else CATEGORIES
    stray = [flag for flag, given in [("--on", args.on), ("--only", args.only), ("--set", args.set),
                                      ("--loss", args.loss), ("--weight", args.weight),
                                      ("--dump", args.dump),
                                      ("--cross-validate", args.cross_validate)] if given]
    if stray and not args.fit:
        raise ScenarioError(f"{stray[0]} goes with --fit NAME[,NAME] (the inputs to fit)")
    if args.by and (args.fit or args.markdown):
        raise ScenarioError("--by breaks down the text or --json report, not --fit or --markdown")
    if args.fit:
        if not args.on:
            raise ScenarioError("--fit needs --on FAMILY[,FAMILY] (the points to fit on)")
        only = [[s.strip() for s in group.split(",") if s.strip()] for group in args.only]
        if args.cross_validate:
            return _print_cross_validation(validator, points, args, only)
        out = fit(validator, points, [n.strip() for n in args.fit.split(",")], args.on,
                  **_fit_options(args, only))
        if args.json:
            print(json.dumps(out, indent=2))
            return 0
        print(f"fitted on {', '.join(out['fit_on'])}{_ids(only)} ({out['fit_points']} points, "
              f"{out['fit_after']['compared']} rows, {_loss_words(out)}); held out: the "
              f"{out['held_points']} other points with the same shipped values (nothing written "
              "back)")
        for n, x in out["fixed"].items():
            print(f"  {n} = {x} (set)")
        for n in out["names"]:
            was = "/".join(f"{x:.4g}" for x in out["shipped"][n])
            print(f"  {n}: {was} -> {out['fitted'][n]:.4g}")
        if args.dump:
            for label, key in [("fitted", "fit_rows"), ("held out", "held_rows")]:
                print(f"  {label}:")
                for r in sorted(out[key], key=lambda r: r["after"]):
                    print(f"    {r['after']:+7.1%}  (was {r['before']:+7.1%})  {r['point']}")
        print(_stats_table(out, [("fit set, shipped", "fit_before"),
                                 ("fit set, fitted", "fit_after"),
                                 ("held out, shipped", "held_before"),
                                 ("held out, fitted", "held_after")]))
        return 0
    report = validator.run(points)
    if args.xlsx:
        write_xlsx(report, categories, args.xlsx)
    if args.json:
        print(json.dumps(to_json(report, categories, args.by), indent=2))
    elif args.markdown:
        print(markdown(report, categories))
    else:
        print_text(report, categories)
        for t in breakdown_tables(report, args.by, categories) if args.by else []:
            print()
            print(t)
    return 1 if report.problems else 0


__all__ = ["Point", "Expect", "Row", "Report", "Validator", "load_points", "load_family",
           "select", "markdown", "register", "cmd_validate", "CATEGORIES"]
