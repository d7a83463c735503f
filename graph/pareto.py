"""Pareto fronts of two or three outputs (each minimized or maximized).

A row is on the front when no other row is at least as good in every objective
and strictly better in one. Rows are sorted lexicographically (after turning
maxima into minima); a row can then only be dominated by rows before it, so one
pass in blocks checks each block against the front so far and against the
earlier rows of its own block (dominance is transitive, so that suffices).
Equal rows do not dominate each other: all of them stay.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .errors import FlopsheetError

BLOCK = 512


def pareto_mask(values: np.ndarray, maximize: Sequence[bool]) -> np.ndarray:
    """Boolean mask of the non-dominated rows of ``values`` (n x k); NaN rows are off."""
    v = np.asarray(values, dtype=float)
    if v.ndim != 2 or v.shape[1] != len(maximize):
        raise ValueError("values must be n x k with one sense per column")
    n = len(v)
    mask = np.zeros(n, dtype=bool)
    ok = np.flatnonzero(np.isfinite(v).all(axis=1))
    if not len(ok):
        return mask
    w = v[ok] * np.where(np.asarray(maximize), -1.0, 1.0)
    order = np.lexsort(w.T[::-1])  # by column 0, then 1, ...
    w = w[order]
    front = np.empty((0, w.shape[1]))
    keep = np.zeros(len(w), dtype=bool)
    for s in range(0, len(w), BLOCK):
        blk = w[s:s + BLOCK]
        dom = _dominated_by(blk, front)
        # earlier rows of the same block: pair (i, j) with j < i
        le = (blk[None, :, :] <= blk[:, None, :]).all(axis=2)
        lt = (blk[None, :, :] < blk[:, None, :]).any(axis=2)
        earlier = np.tril(np.ones((len(blk), len(blk)), dtype=bool), k=-1)
        dom |= (le & lt & earlier).any(axis=1)
        keep[s:s + len(blk)] = ~dom
        front = np.concatenate([front, blk[~dom]])
    mask[ok[order[keep]]] = True
    return mask


def _dominated_by(blk: np.ndarray, front: np.ndarray) -> np.ndarray:
    if not len(front):
        return np.zeros(len(blk), dtype=bool)
    out = np.zeros(len(blk), dtype=bool)
    for s in range(0, len(front), BLOCK):  # bounded memory: BLOCK x BLOCK x k at a time
        f = front[s:s + BLOCK]
        le = (f[None, :, :] <= blk[:, None, :]).all(axis=2)
        lt = (f[None, :, :] < blk[:, None, :]).any(axis=2)
        out |= (le & lt).any(axis=1)
    return out


def parse_pareto(spec: str, lib, maximize_names=frozenset()) -> list[tuple[str, bool]]:
    """``a,b`` or ``a:min,b:max`` (2 or 3 names) -> [(name, maximize)]."""
    from .names import suggest
    out = []
    for part in spec.split(","):
        name, _, sense = part.strip().partition(":")
        if name not in lib:
            raise FlopsheetError(f"--pareto names unknown `{name}`" + suggest(name, lib.names()),
                                 node=name)
        if sense not in ("", "min", "max"):
            raise FlopsheetError(f"--pareto `{part}`: the sense is min or max", node=name)
        out.append((name, sense == "max" if sense else name in maximize_names))
    if not 2 <= len(out) <= 3:
        raise FlopsheetError(f"--pareto takes 2 or 3 outputs, got {len(out)}")
    return out


def front(df, objectives: list[tuple[str, bool]]):
    """The rows of ``df`` on the Pareto front, sorted by the first objective."""
    names = [n for n, _ in objectives]
    mask = pareto_mask(df[names].to_numpy(dtype=float), [m for _, m in objectives])
    first, up = objectives[0]
    return df[mask].sort_values(first, ascending=not up, kind="stable").reset_index(drop=True)
