"""Command-line glue for the Excel exports (``run --xlsx``, ``export``, ``import-xlsx``).

``flopsheet.cli`` registers these with one call to :func:`register` and one
hook in ``run``; everything else lives here.
"""
from __future__ import annotations

import json
import sys

from flopsheet.atomic import check_target


def register(sub, *, run_parser, common, default_scenario: str) -> None:
    """Add ``--xlsx`` to ``run`` and the ``export`` and ``import-xlsx`` subcommands."""
    run_parser.add_argument("--xlsx", metavar="F", help="also write the scenario to F as an "
                            "Excel workbook with live formulas")

    x = sub.add_parser("export", help="write a scenario as an Excel workbook with live formulas")
    x.add_argument("scenario", nargs="?", default=default_scenario,
                   help=f"scenario name or file (default: {default_scenario})")
    x.add_argument("-o", "--output", metavar="F", help="the .xlsx to write (default: "
                   "SCENARIO.xlsx in the current folder)")
    x.add_argument("--outputs", metavar="A,B", help="quantities of the Outputs sheet (default: "
                   "the scenario's report list, else the headline outputs)")
    x.add_argument("--no-sensitivity", action="store_true",
                   help="leave out the Sensitivity, Partials and Adjoints sheets")
    common(x, formats=("table", "json"))
    x.set_defaults(func=cmd_export)

    i = sub.add_parser("import-xlsx", help="read an edited workbook's inputs (and numbers typed "
                       "over formulas) back into a scenario file")
    i.add_argument("workbook", help="a workbook written by `flopsheet export` or `run --xlsx`")
    i.add_argument("-o", "--output", metavar="F", help="write the scenario YAML to F "
                   "(default: print it)")
    common(i, scenario=False)
    i.set_defaults(func=cmd_import_xlsx)


def _names(text: str | None) -> list[str] | None:
    if not text:
        return None
    return [n.strip() for n in text.split(",") if n.strip()]


def write(path, lib, model, sc, values, outputs=None, sensitivity=True, quiet_json=False):
    from .excel import export_workbook
    info = export_workbook(path, lib, sc, model=model, values=values, outputs=outputs,
                           sensitivity=sensitivity)
    size = info.path.stat().st_size
    msg = (f"wrote {info.path} ({len(info.sheets)} sheets, {info.formulas} formulas, "
           f"{size / 1024:.0f} KiB)")
    print(msg, file=sys.stderr if quiet_json else sys.stdout)
    for s in info.snapshots:
        print(f"warning: derivative not written as a live formula: {s}", file=sys.stderr)
    return info


def run_xlsx(args, lib, model, sc, values, outputs=None) -> None:
    """The ``run --xlsx F`` hook (messages on stderr, so ``--json`` output stays clean)."""
    write(args.xlsx, lib, model, sc, values, outputs=outputs, quiet_json=True)


def cmd_export(args) -> int:
    from flopsheet.evaluate import Model
    from flopsheet.library import load_library
    from flopsheet.cli_scenario import scenario_from_args
    from flopsheet.scenario import resolve

    lib = load_library(args.formulas)
    model = Model(lib)
    sc, _ = scenario_from_args(args, lib)  # with its --use presets and --set values
    values = resolve(sc, model)
    out = args.output or f"{sc.name}.xlsx"
    info = write(out, lib, model, sc, values, outputs=_names(args.outputs),
                 sensitivity=not args.no_sensitivity, quiet_json=args.json)
    if args.json:
        print(json.dumps({"path": str(info.path), "sheets": info.sheets,
                          "formulas": info.formulas, "bytes": info.path.stat().st_size,
                          "outputs": info.outputs, "snapshots": info.snapshots}, indent=2))
    return 0


def cmd_import_xlsx(args) -> int:
    from flopsheet.evaluate import Model
    from flopsheet.library import load_library
    from .xlsx_import import read_workbook

    if args.output:
        check_target(args.output)  # an odd -o path fails before reading anything
    lib = load_library(args.formulas)
    imp = read_workbook(args.workbook, lib, Model(lib))
    for w in imp.warnings:
        print(f"warning: {w}", file=sys.stderr)
    text = imp.yaml()
    if args.output:
        from .atomic import write_text
        write_text(args.output, text)
        what = (f"based on {imp.based_on}, {len(imp.changed)} changed: "
                f"{', '.join(imp.changed) or 'nothing'}" if imp.base is not None else
                f"{len(imp.values)} values, {len(imp.overrides)} overridden nodes")
        print(f"wrote {args.output} ({what}); run it with: flopsheet run {args.output}",
              file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


__all__ = ["register", "run_xlsx", "cmd_export", "cmd_import_xlsx"]
