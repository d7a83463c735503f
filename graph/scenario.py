"""Scenarios and presets: value files chained with ``use:``, then ``--set``.

A preset or scenario file::

    doc: GPT-3 175B on 1024 A100s (Narayanan et al. SC21, Sec. 5.1).
    source: default citation for the values below
    use: [models/gpt3-175b, hardware/a100-sxm4-80gb]   # applied first, in order
    values:
      tp: 8
      hbm_capacity: 80 GiB                # text with a unit is converted
      peak_flops_per_gpu: {value: 312 TFLOP/s, source: A100 datasheet}
    report: [step_time, mfu]               # scenarios only: what `run` prints

Later files override earlier ones, the file's own ``values`` override its
``use`` list, and ``--set name=value`` overrides everything. Every value keeps
its origin (file and line, or ``--set``) for the audit.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from .errors import FlopsheetError, ResourceLimitError, ScenarioError
from .names import suggest
from .yamlio import read_mapping, read_text

SCENARIO_KEYS = {"doc", "source", "use", "values", "report"}
SET_ORIGIN = "--set"
SPREAD_KEYS = {"range", "distribution", "sd"}  # read by graph/distributions.py
#: provenance kinds of a preset value (DESIGN.md, "Provenance of preset values")
KINDS = ("measured", "datasheet", "derived", "projection", "assumption")


@dataclass
class Value:
    raw: Any  # as written (number, text with unit, choice name, or a list for sweeps)
    origin: str  # "templates/models/gpt3-175b.yaml:4" or "--set"
    source: str = ""  # citation given with the value
    spread: dict | None = None  # {range, distribution, sd} for `flopsheet uncertainty`


@dataclass
class Scenario:
    name: str
    path: str
    doc: str
    values: dict[str, Value] = field(default_factory=dict)
    report: list[str] = field(default_factory=list)
    chain: list[str] = field(default_factory=list)  # files applied, in order
    uses: list[str] = field(default_factory=list)  # presets given with --use, after the file's


def bundled_templates() -> Path:
    return Path(str(resources.files("flopsheet.templates")))


def _shown(path: Path) -> str:
    """Paths inside the bundle are shown as ``templates/...``; others as given."""
    try:
        return "templates/" + path.resolve().relative_to(bundled_templates().resolve()).as_posix()
    except ValueError:
        return str(path)


def find_template(ref: str, *, near: Path | None = None) -> Path:
    """Resolve a scenario or preset reference to a file.

    ``ref`` is either an explicit path - it ends in ``.yaml``/``.yml`` or starts
    with ``/``, ``./``, ``../`` or ``~`` - read as given (relative to ``near``
    for a ``use:`` entry, else to the current folder), or a name such as
    ``models/gpt3-175b`` or ``gpt3-175b-sc21``. A name is looked up beside
    ``near`` and in its parent folder (the folder of the file whose ``use:``
    names it), then in the bundled templates and their ``scenarios/`` folder;
    never in the current folder, so a stray file there cannot change which
    bundled preset ``flopsheet run NAME`` loads.
    """
    b = bundled_templates()
    if len(ref) > MAX_REF or "\0" in ref:
        raise ScenarioError(f"scenario or preset name of {len(ref)} characters (the limit is "
                            f"{MAX_REF}) or with a NUL byte")
    if is_explicit_path(ref):
        p = Path(ref).expanduser()
        if not p.is_absolute() and near is not None:
            p = near / p
        if _is_file(p):
            return p
        raise ScenarioError(f"no scenario or preset file `{ref}`"
                            + (f" (looked in {near})" if near is not None and
                               not Path(ref).is_absolute() else ""))
    cand = [ref + ".yaml"]
    roots: list[Path] = []
    if near is not None:
        roots += [near, near.parent]
    roots += [b, b / "scenarios"]
    for root in roots:
        for c in cand:
            p = (root / c)
            if _is_file(p):
                return p
    known = sorted(p.relative_to(b).as_posix()[:-5] for p in b.rglob("*.yaml"))
    short = [k.split("/", 1)[1] if k.startswith("scenarios/") else k for k in known]
    raise ScenarioError(f"no scenario or preset `{ref}`" + suggest(ref, dict.fromkeys(short))
                        + " (see `flopsheet list templates`)")


MAX_REF = 1024  #: longest scenario/preset reference


def _is_file(p: Path) -> bool:
    """``Path.is_file`` that says no instead of raising (a name too long, a loop of links)."""
    try:
        return p.is_file()
    except (OSError, ValueError):
        return False


def is_explicit_path(ref: str) -> bool:
    """Whether a scenario reference names a file rather than a bundled template."""
    return ref.endswith((".yaml", ".yml")) or ref.startswith(("/", "./", "../", "~"))


def load_scenario(ref: str, sets: list[str] | None = None) -> Scenario:
    path = find_template(ref)
    sc = Scenario(name=path.stem, path=_shown(path), doc="")
    _apply(path, sc, stack=[])
    return _with_sets(sc, sets)


def scenario_of(scenario: str | Scenario, sets: list[str] | None = None) -> Scenario:
    """The scenario an analysis runs on: a name or path (:func:`load_scenario`), or a
    :class:`Scenario` the caller built - the command line's, with its ``--use`` presets
    applied - copied, so the analysis may change its values. ``sets`` apply last."""
    if not isinstance(scenario, Scenario):
        return load_scenario(scenario, sets)
    sc = Scenario(scenario.name, scenario.path, scenario.doc, dict(scenario.values),
                  list(scenario.report), list(scenario.chain), list(scenario.uses))
    return _with_sets(sc, sets)


def apply_presets(sc: Scenario, presets: list[str]) -> Scenario:
    """Apply presets named on the command line (``--use``) after the scenario's own chain,
    as a ``use:`` entry would, and remember them in ``sc.uses``."""
    here = Path("<command line>").resolve()
    for name in presets:
        _apply(find_template(name), sc, [here])
        sc.uses.append(name)
    return sc


def _with_sets(sc: Scenario, sets: list[str] | None) -> Scenario:
    for item in sets or []:
        name, val = parse_set(item)
        sc.values[name] = Value(val, SET_ORIGIN)
    check_configs(sc)
    return sc


#: Most values one list of a scenario may carry (`--set a=1,2,4`, a list in `values:`).
MAX_CONFIGS = 100_000


def check_configs(sc: Scenario) -> int:
    """Bound the lists of values (``--set a=1,2,4``) one scenario carries: at most
    :data:`MAX_CONFIGS` values each (grids cross them: graph/grid.py bounds the product).
    Returns the longest list's length."""
    n = 1
    for name, v in sc.values.items():
        if not isinstance(v.raw, (list, tuple)):
            continue
        k = len(v.raw)
        if k > MAX_CONFIGS:
            file, line = split_origin(v.origin)
            raise ResourceLimitError(f"{k:,} values; at most {MAX_CONFIGS:,} values a list "
                                     f"(use a sweep file)", file=file, line=line, node=name)
        n = max(n, k)
    return n


def parse_set(item: str) -> tuple[str, Any]:
    """``name=value`` from the command line; ``a=1,2,4`` gives a list (a sweep)."""
    if "=" not in item:
        raise ScenarioError(f"--set `{item}`: expected name=value")
    name, _, text = item.partition("=")
    name, text = name.strip(), text.strip()
    if not name or not text:
        raise ScenarioError(f"--set `{item}`: expected name=value")
    parts = [p.strip() for p in text.split(",")]
    vals = [_scalar(p) for p in parts]
    return name, vals if len(vals) > 1 else vals[0]


_FLOAT_MAX_INT = 2 ** 1024


def _in_range(v):
    """An integer beyond the float range becomes inf (refused as not finite, with its place)
    instead of an OverflowError deep in the evaluation."""
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= _FLOAT_MAX_INT:
        return float("inf") if v > 0 else float("-inf")
    if isinstance(v, list):
        return [_in_range(x) for x in v]
    return v


def _scalar(text: str):
    try:
        return _in_range(int(text))
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text  # a choice name or a number with a unit


#: Deepest `use:` chain, and most preset files one scenario applies (a diamond of `use:`
#: lists applies the shared files again on every path: 2^depth applications).
MAX_USE_DEPTH = 32
MAX_USE_APPLIED = 1000


class _Loads:
    """One scenario's file reads: each file parsed once, applications counted."""

    def __init__(self):
        self.parsed: dict[Path, tuple[dict, dict]] = {}
        self.applied = 0

    def read(self, path: Path, shown: str):
        key = path.resolve()
        if key not in self.parsed:
            self.parsed[key] = read_mapping(read_text(path, shown), shown, "scenario or preset")
        return self.parsed[key]


def _apply(path: Path, sc: Scenario, stack: list[Path], loads: _Loads | None = None) -> None:
    shown = _shown(path)
    if path.resolve() in stack:
        loop = " -> ".join(_shown(p) for p in stack + [path.resolve()])
        raise ScenarioError(f"`use:` chain loops: {loop}", file=shown)
    if len(stack) >= MAX_USE_DEPTH:
        raise ResourceLimitError(f"`use:` chain is deeper than {MAX_USE_DEPTH} files",
                                 file=shown)
    loads = loads if loads is not None else _Loads()
    loads.applied += 1
    if loads.applied > MAX_USE_APPLIED:
        raise ResourceLimitError(f"`use:` lists apply more than {MAX_USE_APPLIED} preset files "
                                 f"(a file reached by many paths is applied once per path)",
                                 file=shown)
    data, lines = loads.read(path, shown)
    for k in data:
        if k not in SCENARIO_KEYS:
            raise ScenarioError(f"unknown key `{k}`" + suggest(str(k), SCENARIO_KEYS)
                                + f" (allowed: {', '.join(sorted(SCENARIO_KEYS))})",
                                file=shown, line=lines.get((k,)))
    use = data.get("use") or []
    if isinstance(use, str):
        use = [use]
    if not isinstance(use, list) or not all(isinstance(u, str) for u in use):
        raise ScenarioError("`use:` must be a list of preset names", file=shown,
                            line=lines.get(("use",)))
    for ref in use:
        try:
            sub = find_template(ref, near=path.parent)
        except ScenarioError as e:
            raise ScenarioError(e.detail, file=shown, line=lines.get(("use",))) from None
        _apply(sub, sc, stack + [path.resolve()], loads)
    sc.chain.append(shown)
    if not stack:  # the top file names the scenario
        sc.doc = str(data.get("doc") or "").strip()
        rep = data.get("report") or []
        if not isinstance(rep, list) or not all(isinstance(r, str) for r in rep):
            raise ScenarioError("`report:` must be a list of names", file=shown,
                                line=lines.get(("report",)))
        sc.report = rep
    default_source = str(data.get("source") or "").strip()
    add_values(sc, data.get("values") or {}, shown, default_source,
               line_of=lambda name: lines.get(("values", name)), line=lines.get(("values",)))


def add_values(sc: Scenario, values, shown: str, default_source: str = "", *,
               line_of=lambda name: None, line: int | None = None) -> None:
    """Apply a ``values:`` mapping (plain values or ``{value, source}``) to ``sc``, in order."""
    if not isinstance(values, dict):
        raise ScenarioError("`values:` must be a mapping of name -> value", file=shown, line=line)
    for name, v in values.items():
        vline = line_of(name) or line
        source = default_source
        spread = None
        if isinstance(v, dict):
            extra = set(v) - {"value", "source", "as_of", "kind"} - SPREAD_KEYS
            if "value" not in v or extra:
                raise ScenarioError("a value with a citation is {value: ..., source: ..., as_of: "
                                    "year, kind: measured|datasheet|derived|projection|assumption} (plus range:, "
                                    "distribution:, sd: for its uncertainty)",
                                    file=shown, line=vline, node=str(name))
            kind = v.get("kind")
            if kind is not None and kind not in KINDS:
                raise ScenarioError(f"kind `{kind}` is not one of {', '.join(KINDS)}",
                                    file=shown, line=vline, node=str(name))
            source = str(v.get("source") or default_source)
            tags = ([f"kind: {kind}"] if kind is not None else []) + (
                [f"as_of: {v['as_of']}"] if "as_of" in v else [])
            if tags:  # provenance travels with the citation (explain and the workbook show it)
                source += f" [{'; '.join(tags)}]"
            spread = {k: v[k] for k in SPREAD_KEYS if k in v} or None
            v = v["value"]
        sc.values[str(name)] = Value(_in_range(v), f"{shown}:{vline}" if vline else shown, source,
                                     spread)


def compose(name: str, shown: str, use: list[str], values: dict, *, near: Path,
            default_source: str = "", line: int | None = None, doc: str = "") -> Scenario:
    """A scenario built in memory rather than read from one file (e.g. a validation point).

    ``use`` presets are applied in order exactly as a file's ``use:`` list (references are
    looked up beside ``near``), then ``values`` override them, as a file's ``values:`` would.
    """
    sc = Scenario(name=name, path=shown, doc=doc)
    if isinstance(use, str):
        use = [use]
    if not isinstance(use, list) or not all(isinstance(u, str) for u in use):
        raise ScenarioError("`use:` must be a list of preset names", file=shown, line=line)
    here = (near / f"{name}.point").resolve()  # stands for the caller in `use:` loop messages
    loads = _Loads()
    for ref in use:
        try:
            sub = find_template(ref, near=near)
        except ScenarioError as e:
            raise ScenarioError(e.detail, file=shown, line=line) from None
        _apply(sub, sc, [here], loads)
    sc.chain.append(shown)
    add_values(sc, values or {}, shown, default_source, line=line)
    return sc


def resolve(sc: Scenario, model) -> dict[str, Any]:
    """Encode every scenario value for ``model`` (units converted, choices checked)."""
    out = {}
    for name, v in sc.values.items():
        file, line = split_origin(v.origin)
        out[name] = model.encode(name, v.raw, file=file, line=line)
    return out


def split_origin(origin: str):
    """A value's origin as (file, line): ``("templates/x.yaml", 4)``, or ``(origin, None)``
    for ``--set`` and origins without a line."""
    if origin == SET_ORIGIN:
        return SET_ORIGIN, None
    file, _, line = origin.rpartition(":")
    if file and line.isdigit():
        return file, int(line)
    return origin, None


__all__ = ["Scenario", "Value", "load_scenario", "find_template", "resolve", "parse_set",
           "compose", "add_values", "check_configs",
           "bundled_templates", "FlopsheetError"]
