"""Chunked evaluation of a grid: the one function that runs in-process and on Dask workers.

A :class:`Job` is everything a worker needs, and it pickles small: the formula
folder (the library is loaded and compiled once per process), the scenario's
fixed values (encoded), the grid (its axes' encoded values, not its rows), the
outputs, and the checks - condition nodes or ``--where`` expressions, as text,
parsed by the project's whitelisted parser on each side.

:func:`run_chunk` evaluates rows ``start .. stop-1`` and returns columns plus a
``reason`` code per row: 0 when every check holds and every output is finite,
else 1 + the index of the first failing check in :meth:`Job.reasons` order. A
non-finite value masks its row only; the batch never fails.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .allocator import keep_freed_memory
from .errors import ExpressionError, UnknownNameError
from .grid import Grid
from .names import suggest

CHUNK_ROWS = 25_000  # ~25k rows was the fastest chunk size measured (issue 14)


@dataclass
class Check:
    label: str  # shown as the reason a row was dropped
    text: str  # a condition in the formula language (a condition node's name is one)


@dataclass
class Job:
    formulas: str | None
    base: dict[str, Any]  # encoded scenario values that are not axes
    grid: Grid
    outputs: list[str]
    checks: list[Check] = field(default_factory=list)

    @property
    def reasons(self) -> list[str]:
        return [c.label for c in self.checks] + [f"{o} not finite" for o in self.outputs]

    @property
    def size(self) -> int:
        return self.grid.size


_MODELS: dict[str | None, Any] = {}


def model_for(formulas: str | list | None):
    """The compiled model of a formula folder, once per process (workers reuse it)."""
    key = tuple(formulas) if isinstance(formulas, list) else formulas  # --formulas roots
    m = _MODELS.get(key)
    if m is None:
        from .evaluate import Model
        from .library import load_library
        m = _MODELS[key] = Model(load_library(formulas))
    return m


def parse_condition(lib, text: str, *, what: str = "--where", file=None, line=None):
    """Parse a condition with the whitelisted parser; every name must exist in ``lib``."""
    from .parser import parse
    choices = {n: i.choices for n, i in lib.inputs.items() if i.is_choice}
    bools = frozenset(n for n, nd in lib.nodes.items() if nd.is_bool)
    parsed = parse(text, file=file, line=line, node=what, choices=choices, bool_names=bools)
    for n in parsed.names:
        if n not in lib:
            raise UnknownNameError(f"`{text}` names unknown `{n}`" + suggest(n, lib.names()),
                                   file=file, line=line, node=what)
    if not parsed.is_bool:
        raise ExpressionError(f"`{text}` is not a condition (use a comparison such as "
                              f"`memory_per_gpu <= 70e9`)", file=file, line=line, node=what)
    return parsed


_COMPILED: dict[tuple, Any] = {}


def _compiled(formulas, lib, text):
    key = (formulas, text)
    fn = _COMPILED.get(key)
    if fn is None:
        from .evaluate import compile_expr
        p = parse_condition(lib, text)
        fn = _COMPILED[key] = (p.names, compile_expr(p.names, p.expr))
    return fn


def needed_names(job: Job) -> list[str]:
    """Outputs plus the nodes the checks read (inputs are always in the result)."""
    m = model_for(job.formulas)
    need = dict.fromkeys(job.outputs)
    for c in job.checks:
        names, _ = _compiled(job.formulas, m.lib, c.text)
        need.update(dict.fromkeys(n for n in names if n in m.lib.nodes))
    return list(need)


def run_chunk(job: Job, start: int, stop: int) -> dict[str, np.ndarray]:
    """Evaluate rows ``start .. stop-1`` of the job's grid: axis columns, outputs, reason."""
    keep_freed_memory()  # freed temporaries are reused, not page-faulted in again
    m = model_for(job.formulas)
    cols = job.grid.columns(start, stop)
    n = stop - start
    values = dict(job.base)
    values.update(cols)
    res = m.evaluate(values, outputs=needed_names(job), keep_intermediates=False, check=False)
    reason = np.zeros(n, dtype=np.int16)
    with np.errstate(all="ignore"):
        for i, c in enumerate(job.checks):
            names, fn = _compiled(job.formulas, m.lib, c.text)
            ok = np.broadcast_to(np.asarray(fn(*[res[x] for x in names]), dtype=bool), (n,))
            reason[(reason == 0) & ~ok] = i + 1
    out = {"row": np.arange(start, stop, dtype=np.int64)}
    out.update({k: np.asarray(v) for k, v in cols.items()})
    k = len(job.checks)
    for j, o in enumerate(job.outputs):
        v = np.broadcast_to(np.asarray(res[o], dtype=float), (n,)).copy()
        reason[(reason == 0) & ~np.isfinite(v)] = k + j + 1
        out[o] = v
    out["reason"] = reason
    return out


def spans(size: int, chunk: int = CHUNK_ROWS) -> list[tuple[int, int]]:
    return [(s, min(s + chunk, size)) for s in range(0, size, chunk)]


def concat(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    if not parts:
        return {}
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
