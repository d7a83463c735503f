"""Validity of a configuration made visible: which constraint a run breaks, and why.

A number computed for a configuration that cannot run (tp = 3 with 64 heads, a
model that does not fit in HBM for training, or a served model whose weights and
KV cache do not) is still printed, so an architect can see how
far off it is, but never silently: ``run`` adds a warning line per broken
constraint naming the rule and the values behind it, and ``--strict`` turns
the warnings into an error (exit 2).
"""
from __future__ import annotations

import numpy as np

from .errors import FlopsheetError

#: Condition nodes a training or serving run is checked against (each a `unit: bool` node); when one
#: is false, its false condition inputs (the individual rules) are named too. The second
#: item limits a check to runs whose outputs are or depend on one of the names given
#: (memory does not matter to a scenario that prints only collective times).
CONSTRAINTS = ("parallel_config_valid", "fits_in_memory", "serving_fits_in_memory")
_WHEN = {"fits_in_memory": ("memory_per_gpu", "step_time"),
         "serving_fits_in_memory": ("serving_memory_per_gpu", "decode_step_time", "prefill_time")}
#: The node that says a scenario is a training job; `run` always reports it.
WORLD_SIZE = "n_gpus"


class ConstraintError(FlopsheetError):
    """A configuration breaks a divisibility or capacity rule (with --strict)."""


def is_training(lib, outputs) -> bool:
    """Whether the outputs describe a training job (they depend on the parallel degrees)."""
    if WORLD_SIZE not in lib.nodes:
        return False
    degrees = lib.ancestors(WORLD_SIZE) | {WORLD_SIZE}  # tp, pp, dp, cp
    return any(o in degrees or not degrees.isdisjoint(lib.ancestors(o)) for o in outputs)


def with_world_size(lib, outputs: list[str]) -> list[str]:
    """``outputs`` plus ``n_gpus`` for a training job (always reported)."""
    if WORLD_SIZE in outputs or not is_training(lib, outputs):
        return list(outputs)
    return list(outputs) + [WORLD_SIZE]


def constraint_nodes(lib, outputs) -> list[str]:
    """The constraints, and their rules, to evaluate alongside ``outputs``."""
    if not is_training(lib, outputs):
        return []
    names = []
    near = set(outputs).union(*(lib.ancestors(o) for o in outputs))
    for c in CONSTRAINTS:
        when = _WHEN.get(c)
        if when is not None and c not in near and near.isdisjoint(when):
            continue
        if c in lib.nodes and lib.nodes[c].is_bool:
            names.append(c)
            names += _rules(lib, c)
    return list(dict.fromkeys(names))


def _rules(lib, c) -> list[str]:
    return [d for d in lib.nodes[c].deps if d in lib.nodes and lib.nodes[d].is_bool]


def broken(lib, res, show) -> list[str]:
    """One line per broken rule of each constraint: the rule, its doc, its formula and the
    values it compares (for arrays: which configurations, values of the first one).

    ``show(name, value)`` formats a value (engineering notation with its unit).
    """
    env = res.values
    lines = []
    for c in CONSTRAINTS:
        if c not in env or c not in lib.nodes:
            continue
        ok = np.asarray(env[c], dtype=bool)
        if ok.all():
            continue
        rows = np.flatnonzero(~ok.ravel())
        which = "" if ok.ndim == 0 else f" (configurations {_rows(rows)})"
        i = int(rows[0])
        failing = [r for r in _rules(lib, c) if r in env and not _at(env[r], i)]
        for rule in failing or [c]:
            node = lib.nodes[rule]
            vals = ", ".join(f"{d} = {show(d, _at(env[d], i))}" for d in node.deps
                             if d in env and not (d in lib.nodes and lib.nodes[d].is_bool))
            lines.append(f"{c} is false{which}: {rule}: {node.doc.rstrip('.')} "
                         f"[{node.parsed.text}]" + (f" with {vals}" if vals else ""))
    return lines


def _at(v, i):
    a = np.asarray(v)
    return a.item() if a.ndim == 0 else a.ravel()[i]


def _rows(rows) -> str:
    shown = ", ".join(f"#{int(r)}" for r in rows[:8])
    return shown + (f" and {len(rows) - 8} more" if len(rows) > 8 else "")


__all__ = ["CONSTRAINTS", "ConstraintError", "is_training", "with_world_size",
           "constraint_nodes", "broken"]
