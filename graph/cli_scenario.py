"""How the command line names a scenario: a file or bundled name, presets composed with
``--use``, a published validation point (``validation:<id>``), then ``--set``.

``flopsheet run --use models/llama3-70b --use hardware/h100-sxm5-80gb --use
systems/dgx-h100-superpod --set tp=8`` builds the scenario from presets alone; with a
scenario given too, the ``--use`` presets apply after its values and before ``--set``.
A chain without a hardware or system preset runs on the library's defaults for those
inputs; :func:`default_notes` says which.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .errors import FlopsheetError, InputValueError, ScenarioError
from .names import suggest
from .scenario import (SET_ORIGIN, Scenario, Value, split_origin, apply_presets,
                       bundled_templates, load_scenario, parse_set)
from .yamlio import read_mapping

VALIDATION = "validation:"
#: Preset folders whose absence a run reports (their inputs then keep library defaults).
PRESET_KINDS = ("hardware", "systems")


@dataclass
class Measured:
    """A published measurement of a validation point, shown beside the prediction."""
    metric: str
    node: str
    value: float
    unit: str
    tolerance: float
    source: str
    at: dict = field(default_factory=dict)  # extra values the measurement was taken at


def add_arguments(sp) -> None:
    sp.add_argument("--use", action="append", default=[], metavar="PRESET",
                    help="apply a preset (models/..., hardware/..., systems/...); repeatable, "
                         "applied in order after the scenario, before --set")


def scenario_from_args(args, lib=None, default: str | None = None):
    """The scenario the command line names, and the published measurements when it is a
    validation point (else an empty list)."""
    ref = getattr(args, "scenario", None)
    uses = list(getattr(args, "use", None) or [])
    sets = list(getattr(args, "set", None) or [])
    measured: list[Measured] = []
    if ref and ref.startswith(VALIDATION):
        sc, measured = validation_scenario(ref[len(VALIDATION):], lib)
    elif ref is None and uses:
        sc = Scenario(name="presets", path="--use", doc="Presets given on the command line: "
                      + ", ".join(uses) + ".")
    else:
        sc = load_scenario(ref or default)
    apply_presets(sc, uses)  # like `use:` entries of the scenario, after its own
    for item in sets:
        name, val = parse_set(item)
        sc.values[name] = Value(val, SET_ORIGIN)
    return sc, measured


def validation_scenario(pid: str, lib=None):
    """A published validation point as a scenario, reporting the nodes it is measured on."""
    from .validate import Validator, load_points
    points = load_points()
    by_id = {p.id: p for p in points}
    p = by_id.get(pid)
    if p is None:
        raise ScenarioError(f"no validation point `{pid}`" + suggest(pid, by_id)
                            + " (see `flopsheet validate`)")
    if p.unsupported:
        raise ScenarioError(f"validation point `{pid}` is not modelled: {p.unsupported}",
                            file=p.file, line=p.line)
    sc = Validator(lib).scenario(p)
    nodes = []
    for e in p.expects:
        if e.node and e.node not in nodes:
            nodes.append(e.node)
    sc.report = nodes
    measured = [Measured(e.metric, e.node, float(e.value), e.unit, e.tolerance, p.source,
                         dict(e.values)) for e in p.expects if e.node]
    return sc, measured


def default_notes(lib, sc: Scenario, show) -> list[str]:
    """One line per preset kind missing from the chain, naming the inputs such presets set
    that this run takes from the library defaults (``show(name)`` formats a default)."""
    notes = []
    root = bundled_templates()
    chain = " ".join(sc.chain)
    for kind in PRESET_KINDS:
        if f"/{kind}/" in chain or f"{kind}/" in " ".join(sc.chain[:1]):
            continue
        keys: list[str] = []
        for p in sorted((root / kind).glob("*.yaml")):
            data, _ = read_mapping(p.read_text(encoding="utf-8"), p.name, "preset")
            for k in (data.get("values") or {}):
                if k in lib.inputs and k not in keys and k not in sc.values:
                    keys.append(k)
        if not keys:
            continue
        shown = ", ".join(f"{k} = {show(k)}" for k in keys[:6])
        more = f" and {len(keys) - 6} more" if len(keys) > 6 else ""
        notes.append(f"no {kind} preset: {len(keys)} inputs keep the library defaults "
                     f"({shown}{more}); add --use {kind}/NAME (flopsheet list templates)")
    return notes


def measured_rows(measured: list[Measured], lib, res) -> list[list[str]]:
    """Rows metric | predicted | measured | error for a validation point's measurements."""
    from .units import parse_unit
    rows = []
    for m in measured:
        if m.node not in lib:
            continue
        _, factor = parse_unit(m.unit)
        pred = float(np.asarray(res[m.node])) / float(factor)
        err = (pred - m.value) / m.value * 100 if m.value else float("nan")
        at = (" at " + ", ".join(f"{k}={v}" for k, v in m.at.items())) if m.at else ""
        rows.append([m.metric + at, f"{pred:.4g} {m.unit}", f"{m.value:.4g} {m.unit}",
                     f"{err:+.1f} %" if not at else "(other settings)",
                     f"±{m.tolerance * 100:.0f} %"])
    return rows


def refuse_unsupported_dtype(lib, sc: Scenario, values: dict) -> None:
    """Refuse a ``compute_dtype`` whose datasheet peak is 0 on a preset GPU, in one line that
    names the preset file (and line) the zero came from, the GPU and the dtype (issue 12).

    Without this the run fails later at the first node dividing by that peak, naming only the
    node and the inputs. Derived accelerators (``accelerator_source=derived``) have their own
    peaks and are not checked; sweeps over ``compute_dtype`` mask such rows instead.
    """
    if "compute_dtype" not in lib.inputs or np.ndim(values.get("compute_dtype", 0)):
        return
    choices = lib.inputs["compute_dtype"].choices
    dtype = choices[int(values.get("compute_dtype", choices.index(
        lib.inputs["compute_dtype"].default)))]
    peak = f"peak_flops_{dtype}"
    if peak not in lib.inputs:
        return
    src = lib.inputs.get("accelerator_source")
    if src is not None and np.ndim(values.get("accelerator_source", 0)) == 0:
        code = values.get("accelerator_source", src.choices.index(src.default))
        if src.choices[int(code)] != "preset":
            return
    x = values.get(peak, lib.inputs[peak].default)
    if np.ndim(x) or float(x) != 0:
        return
    v = sc.values.get(peak)
    if v is None:
        file, line = lib.inputs[peak].file, lib.inputs[peak].line
        gpu, whence = "the library's default GPU", " (library default; no hardware preset sets it)"
    else:
        file, line = split_origin(v.origin)
        gpu, whence = _preset_gpu(file) or "this GPU", ""
    ok = [c for c in choices if f"peak_flops_{c}" in lib.inputs and
          float(np.max(values.get(f"peak_flops_{c}", lib.inputs[f"peak_flops_{c}"].default))) > 0]
    raise InputValueError(
        f"gives no {dtype.upper()} peak ({peak} = 0){whence}: compute_dtype {dtype} is not "
        f"supported on {gpu} (supported here: " + (", ".join(ok) or "none") + "; or pick a GPU "
        f"with {dtype.upper()} tensor cores)", file=file, line=line, node=peak)


def _preset_gpu(file: str) -> str:
    """The GPU a hardware preset describes: its ``doc`` up to the first parenthesis."""
    path = (bundled_templates() / file[len("templates/"):] if file.startswith("templates/")
            else Path(file))
    try:
        data, _ = read_mapping(path.read_text(encoding="utf-8"), path.name, "preset")
    except (OSError, FlopsheetError):
        return ""
    doc = str(data.get("doc") or "").split(" (")[0].strip().rstrip(".")
    return doc if 0 < len(doc) <= 80 else ""


def plain(v: Any):
    a = np.asarray(v)
    return a.tolist() if a.ndim else (bool(a) if a.dtype == bool else float(a))


__all__ = ["add_arguments", "scenario_from_args", "validation_scenario", "default_notes",
           "measured_rows", "refuse_unsupported_dtype", "VALIDATION"]
