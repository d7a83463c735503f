"""``flopsheet check`` and ``flopsheet list``: lint the formula library and list what it holds."""
from __future__ import annotations

from pathlib import Path

from .audit import show
from .cli import HEADLINE, _print_json
from .errors import FlopsheetError
from .evaluate import Model
from .fmt import table
from .library import Library, load_library
from .scenario import bundled_templates, load_scenario, resolve
from .yamlio import read_mapping


def cmd_list(args) -> int:
    if args.what == "templates":
        root = bundled_templates()
        rows = []
        for p in sorted(root.rglob("*.yaml")):
            rel = p.relative_to(root).as_posix()[:-5]
            data, _ = read_mapping(p.read_text(encoding="utf-8"), rel, "template")
            rows.append([rel, str(data.get("doc") or "").strip()])
        if args.json:
            _print_json({r[0]: r[1] for r in rows})
        else:
            print(table(rows, ["template", "what"]))
        return 0
    lib = load_library(args.formulas)
    if args.what == "calibration":
        return _list_calibration(lib, args.json, _bundled_library_in(args))  # presets are written for it
    if args.what == "inputs":
        items = [lib.inputs[n] for n in lib.inputs]
        rows = [[i.name, ("|".join(i.choices) if i.is_choice else i.unit),
                 (i.default if i.is_choice else show(lib, i.name, i.default)), i.doc]
                for i in items]
        head = ["input", "unit", "default", "what"]
    else:
        rows = [[n, lib.nodes[n].unit, lib.nodes[n].file, lib.nodes[n].doc] for n in lib.order]
        head = ["node", "unit", "file", "what"]
    if args.json:
        _print_json([dict(zip(head, r)) for r in rows])
    else:
        print(table(rows, head))
    return 0


def _bundled_library_in(args) -> bool:
    """Whether the command's library includes the bundled one (no --formulas-only)."""
    from .libsource import BUNDLED
    return args.formulas is None or BUNDLED in args.formulas


def calibration_inputs(lib: Library) -> list[str]:
    """The inputs the library documents as calibration constants (doc begins "Calibration")."""
    return [n for n, i in lib.inputs.items() if (i.doc or "").lower().startswith("calibration")]


def calibration_rows(lib: Library, with_presets: bool = True) -> list[dict]:
    """Each calibration constant's library default, then every bundled hardware or system preset
    that sets it (itself or through its `use:` chain), with the value, where it is set and its source.
    Without the bundled library (`--formulas-only`) its presets do not apply: defaults only."""
    names = calibration_inputs(lib)
    rows = [{"constant": n, "preset": "(library default)", "value": show(lib, n, lib.inputs[n].default),
             "set_in": f"{lib.inputs[n].file}:{lib.inputs[n].line}", "source": lib.inputs[n].source}
            for n in names]
    if not with_presets:
        return rows
    model = Model(lib)
    root = bundled_templates()
    for kind in ("hardware", "systems"):
        for p in sorted((root / kind).glob("*.yaml")):
            ref = f"{kind}/{p.stem}"
            sc = load_scenario(ref)
            encoded = resolve(sc, model)
            rows += [{"constant": n, "preset": ref, "value": show(lib, n, encoded[n]),
                      "set_in": sc.values[n].origin, "source": sc.values[n].source}
                     for n in names if n in sc.values]
    order = {n: k for k, n in enumerate(names)}
    return sorted(rows, key=lambda r: (order[r["constant"]], r["preset"] != "(library default)", r["preset"]))


def _list_calibration(lib: Library, as_json: bool, with_presets: bool) -> int:
    rows = calibration_rows(lib, with_presets)
    if as_json:
        _print_json(rows)
        return 0
    width = 110  # the terminal table shows the start of each source; --json has it whole
    cells = [[r["constant"], r["preset"], r["value"], r["set_in"],
              r["source"] if len(r["source"]) <= width else r["source"][:width - 3] + "..."] for r in rows]
    print(table(cells, ["constant", "preset", "value", "set in", "source"]))
    return 0


def cmd_check(args) -> int:
    lib = load_library(args.formulas)  # parse, names, units, cycles: errors raise here
    bundled = _bundled_library_in(args)
    reported = _reported_names() if bundled else set()
    problems, warnings = lint(lib, reported)
    if bundled:
        problems += _check_templates(lib)
    for w in sorted(warnings):
        print(f"warning: {w}")
    for p in problems:
        print(f"problem: {p}")
    n_in, n_nodes = len(lib.inputs), len(lib.nodes)
    print(f"{len(lib.files)} files, {n_in} inputs, {n_nodes} nodes: "
          f"{len(problems)} problems, {len(warnings)} warnings")
    return 1 if problems else 0


def _reported_names() -> set[str]:
    """Names some bundled scenario prints (its `report:` list)."""
    names: set[str] = set()
    for p in sorted((bundled_templates() / "scenarios").glob("*.yaml")):
        data, _ = read_mapping(p.read_text(encoding="utf-8"), p.name, "scenario")
        names.update(r for r in data.get("report") or [] if isinstance(r, str))
    return names


def lint(lib: Library, reported: set[str] = frozenset()) -> tuple[list[str], list[str]]:
    """Problems (fail `check`) and warnings of a loaded library beyond what loading enforces.

    A node no formula uses is fine when it is a headline output or a scenario reports it.
    """
    problems, warnings = [], []
    for i in lib.inputs.values():
        if not i.source:
            problems.append(f"{i.file}:{i.line}: {i.name}: input has no `source:`")
        if lib.graph.out_degree(i.name) == 0:
            warnings.append(f"{i.file}:{i.line}: {i.name}: input is used by no formula")
    for n in lib.order:
        node = lib.nodes[n]
        if lib.graph.out_degree(n) == 0 and n not in HEADLINE and n not in reported:
            warnings.append(f"{node.file}:{node.line}: {n}: no formula, headline output or "
                            f"scenario report uses this node")
    return problems, warnings


def _check_templates(lib: Library) -> list[str]:
    """Every bundled scenario loads, resolves and evaluates."""
    model = Model(lib)
    problems = []
    root = bundled_templates()
    for p in sorted((root / "scenarios").glob("*.yaml")) if (root / "scenarios").is_dir() else []:
        try:
            sc = load_scenario(str(p))
            model.evaluate(resolve(sc, model))
            for n in sc.report:
                lib.item(n)
        except FlopsheetError as e:
            problems.append(f"scenario {Path(p).name}: {e.render()}")
    return problems
