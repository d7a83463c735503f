"""``flopsheet report [SCENARIO] -o report.html``: the HTML audit report
(:mod:`flopsheet.exports.report`)."""
from __future__ import annotations

import sys


def register(sub, *, common, run_parser=None) -> None:
    if run_parser is not None:
        run_parser.add_argument("--html", metavar="F", help="also write the HTML audit report "
                                "of the scenario to F")
    r = sub.add_parser("report", help="write a self-contained HTML audit report of a scenario")
    r.add_argument("scenario", nargs="?", default=None)
    r.add_argument("-o", "--output", metavar="F", help="the .html to write (default: "
                   "SCENARIO.html)")
    r.add_argument("--outputs", metavar="A,B", help="outputs to report (default: the "
                   "scenario's report list, else the headline outputs)")
    r.add_argument("--no-plots", action="store_true", help="leave out the plots")
    common(r, formats=())  # it writes a page; nothing to format
    r.set_defaults(func=cmd_report)


def cmd_report(args) -> int:
    import numpy as np
    from flopsheet.cli import DEFAULT_SCENARIO, _outputs
    from flopsheet.cli_scenario import scenario_from_args
    from flopsheet.errors import FlopsheetError
    from flopsheet.evaluate import Model
    from flopsheet.library import load_library
    from flopsheet.scenario import resolve
    from .report import write_report

    lib = load_library(args.formulas)
    model = Model(lib)
    sc, measured = scenario_from_args(args, lib, DEFAULT_SCENARIO)
    values = resolve(sc, model)
    for k, v in values.items():
        if np.ndim(v):
            raise FlopsheetError(f"a report shows one configuration; pick one with --set "
                                 f"{k}=VALUE", node=k)
    outs = _outputs(args, lib, sc)
    path = write_report(args.output or f"{sc.name}.html", lib, model, sc, values, outs,
                        plots=not args.no_plots, measured=measured)
    print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB)", file=sys.stderr)
    return 0


def run_html(args, lib, model, sc, values, outs) -> None:
    """The ``run --html F`` hook."""
    import numpy as np
    from flopsheet.errors import FlopsheetError
    from .report import write_report
    if any(np.ndim(v) for v in values.values()):
        raise FlopsheetError("--html: a report shows one configuration (no a,b,c lists in --set)")
    path = write_report(args.html, lib, model, sc, values, outs,
                        measured=getattr(args, "measured", None) or [])
    print(f"wrote {path}", file=sys.stderr)


__all__ = ["register", "cmd_report", "run_html"]
