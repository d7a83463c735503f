"""Write an imported workbook back as an edit of the scenario it was exported from.

The workbook's About sheet names its scenario file. When that file can still be found, the
imported scenario keeps its ``doc``/``source``, its ``use:`` list, its ``values`` as written
(display units such as ``80 GiB``, per-value citations) and its ``report:``, and adds or
replaces only the values the workbook changed: an input whose value differs from what the
original scenario resolves to, or a node typed over. A changed value written with a unit in
the original keeps that unit (``96 GiB``, not 103079215104).
"""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from flopsheet import units
from flopsheet.errors import FlopsheetError
from flopsheet.scenario import (SET_ORIGIN, apply_presets, bundled_templates, find_template,
                                load_scenario, resolve, split_origin)
from flopsheet.yamlio import read_mapping

_NUM_UNIT = re.compile(r"^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*([^\d\s].*)$")


def find_original(about: dict[str, str]) -> Path | None:
    """The scenario file the workbook was exported from, if it still exists."""
    for ref in (about.get("scenario file", ""), about.get("scenario", "")):
        ref = ref.strip()
        if not ref or ref.startswith("("):
            continue
        for cand in (ref, ref[len("templates/"):] if ref.startswith("templates/") else None):
            if not cand:
                continue
            try:
                return find_template(cand)
            except FlopsheetError:
                continue
    return None


def _ref(ref: str, near: Path) -> str:
    """A ``use:`` reference that still resolves from anywhere: bundled names stay names,
    files beside the original become absolute paths."""
    p = find_template(ref, near=near)
    try:
        p.resolve().relative_to(bundled_templates().resolve())
        return ref
    except ValueError:
        return str(p.resolve())


def _in_unit_of(old_raw: Any, new_value: float, dim) -> Any:
    """``new_value`` (base units) written in the unit ``old_raw`` used, when it had one."""
    if isinstance(old_raw, str):
        m = _NUM_UNIT.match(old_raw)
        if m:
            unit = m.group(3).strip()
            try:
                udim, factor = units.parse_unit(unit)
            except (ValueError, FlopsheetError):
                udim = None
            if udim is not None and udim == dim:
                return f"{new_value / float(factor):.15g} {unit}"
    return new_value


def rebase(original: Path, imported_values: dict[str, Any], overrides: list[str], lib,
           model, encoded: dict[str, Any], presets: list[str] = (),
           sets: dict[str, Any] = None) -> tuple[dict, list[str]]:
    """The mapping to write: the original file with the workbook's changes. ``encoded``
    holds the workbook's value of every input and override (engine units); ``presets`` are
    those the export applied with ``--use``, which join the ``use:`` list (their values and
    citations stay theirs, not workbook edits); ``sets`` the ``--set`` values it was given,
    cited as such while the workbook still holds them. Returns the mapping and the names
    that changed."""
    data, _ = read_mapping(original.read_text(encoding="utf-8"), str(original), "scenario")
    sc = apply_presets(load_scenario(str(original)), list(presets))
    base = resolve(sc, model)
    defaults = model.defaults()
    out: dict[str, Any] = {}
    doc = str(data.get("doc") or "").strip()
    out["doc"] = doc
    if data.get("source"):
        out["source"] = data["source"]
    use = data.get("use") or []
    if isinstance(use, str):
        use = [use]
    use = [_ref(u, original.parent) for u in use] + list(presets)
    if use:
        out["use"] = use
    values = dict(data.get("values") or {})
    for name in list(values):  # a --use preset overrode the file's own value: carry the preset's
        v = sc.values.get(name)
        if v is not None and split_origin(v.origin)[0] not in (sc.path, SET_ORIGIN):
            values[name] = {"value": _plain(v.raw),
                            "source": v.source or f"{v.origin} (applied with --use)"}
    changed = []
    for name, enc in encoded.items():
        before = base.get(name, defaults.get(name))
        if before is not None and _same(enc, before):
            continue
        changed.append(name)
        item = lib.item(name)
        old = values.get(name)
        old_raw = old.get("value") if isinstance(old, dict) else old
        if old_raw is None and name in sc.values:
            old_raw = sc.values[name].raw
        raw = imported_values.get(name)
        if not isinstance(raw, str) and not getattr(item, "is_choice", False):
            raw = _in_unit_of(old_raw, float(np.asarray(enc)), item.dim)
        note = "edited in the exported workbook" + (" (typed over the formula)"
                                                    if name in overrides else "")
        if name in (sets or {}) and _same(enc, model.encode(name, sets[name])):
            note = "set on the command line of the export (--set)"
        values[name] = {"value": _plain(raw), "source": note}
    out["values"] = values
    if data.get("report"):
        out["report"] = data["report"]
    return out, changed


def _same(a, b) -> bool:
    a, b = float(np.asarray(a)), float(np.asarray(b))
    return a == b or math.isclose(a, b, rel_tol=1e-15, abs_tol=0.0)


def _plain(v):
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and v.is_integer() and abs(v) < 2 ** 53:
        return int(v)
    return v


__all__ = ["find_original", "rebase"]
