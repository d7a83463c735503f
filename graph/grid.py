"""Grids of configurations: axes (value lists and ranges), crossed or zipped, sized up front.

An axis is one input with a list of values. Axes are arranged in *groups*: the
values of the axes inside one group are paired row by row (zip, equal lengths),
and the groups are crossed (cartesian product). ``--set tp=2,4 --set pp=8,16``
is two groups of one axis (4 rows); with ``--zip`` it is one group (2 rows).

Ranges are written ``A..B:xK`` (geometric), ``A..B:+K`` (arithmetic) or ``A..B``
(step 1), both ends included: ``tp=1..64:x2`` is 1, 2, 4, ..., 64.

The size is a Python integer computed before anything is evaluated, and a grid
above ``max_configs`` is refused. Rows are generated per chunk from their index
(``numpy.unravel_index``), so a grid of millions never exists as one table.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import FlopsheetError, UnknownNameError
from .names import suggest
from .scenario import split_origin

DEFAULT_MAX_CONFIGS = 5_000_000
MAX_AXIS_VALUES = 1_000_000  # one range may not expand to more values than this

_RANGE = re.compile(r"^\s*(?P<a>[-+0-9.eE]+)\s*\.\.\s*(?P<b>[-+0-9.eE]+)\s*"
                    r"(?::\s*(?P<op>[x*+])\s*(?P<k>[0-9.eE+-]+))?\s*$")


class GridError(FlopsheetError):
    """A grid is malformed (empty range, unequal zipped lengths) or too large."""


def _num(text: str):
    f = float(text)
    return int(f) if f.is_integer() and abs(f) < 2**53 and re.fullmatch(r"[-+]?\d+", text) else f


def is_range(raw: Any) -> bool:
    return isinstance(raw, str) and ".." in raw


def expand_range(text: str, *, name: str | None = None, file=None, line=None) -> list:
    """``A..B:xK`` / ``A..B:+K`` / ``A..B`` -> the list of values (both ends included)."""
    m = _RANGE.match(text)
    if not m:
        raise GridError(f"range `{text}`: expected A..B, A..B:xK or A..B:+K", file=file,
                        line=line, node=name)
    try:
        a, b = _num(m["a"]), _num(m["b"])
        op, k = m["op"] or "+", _num(m["k"]) if m["k"] else 1
    except ValueError:
        raise GridError(f"range `{text}`: the ends and the step must be numbers", file=file,
                        line=line, node=name) from None
    if not all(math.isfinite(v) for v in (a, b, k)):
        raise GridError(f"range `{text}` is not finite", file=file, line=line, node=name)
    if b < a:
        raise GridError(f"range `{text}` is empty (the end is below the start)", file=file,
                        line=line, node=name)
    if op in "x*":
        if k <= 1 or a <= 0:
            raise GridError(f"range `{text}`: a geometric step needs a start > 0 and a factor > 1",
                            file=file, line=line, node=name)
        count = int(math.floor(math.log(b / a, k) + 1e-9)) + 1
    else:
        if k <= 0:
            raise GridError(f"range `{text}`: the step must be > 0", file=file, line=line,
                            node=name)
        count = int(math.floor((b - a) / k + 1e-9)) + 1
    if count > MAX_AXIS_VALUES:
        raise GridError(f"range `{text}` has {count:,} values; the limit per axis is "
                        f"{MAX_AXIS_VALUES:,}", file=file, line=line, node=name)
    out = [a * k ** i if op in "x*" else a + k * i for i in range(count)]
    ints = all(isinstance(v, int) for v in (a, k))
    return [int(v) if ints else float(v) for v in out]


def axis_values(raw: Any, *, name: str | None = None, file=None, line=None) -> list:
    """A raw value (scalar, list, range text, list with ranges) -> a flat list of values."""
    items = raw if isinstance(raw, (list, tuple)) else [raw]
    out: list = []
    for it in items:
        out += expand_range(it, name=name, file=file, line=line) if is_range(it) else [it]
    if not out:
        raise GridError("empty list of values", file=file, line=line, node=name)
    return out


@dataclass
class Axis:
    name: str
    values: list  # as written (numbers, choice names, text with units)
    origin: str = "--set"  # where it was written, for messages
    encoded: Any = None  # numpy array in coherent units / choice indices

    def __len__(self) -> int:
        return len(self.values)


@dataclass
class Grid:
    """Groups of axes; axes inside a group are zipped, groups are crossed."""

    groups: list[list[Axis]] = field(default_factory=list)

    @property
    def axes(self) -> list[Axis]:
        return [a for g in self.groups for a in g]

    @property
    def names(self) -> list[str]:
        return [a.name for a in self.axes]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(g[0]) for g in self.groups)

    @property
    def size(self) -> int:
        return math.prod(self.shape)  # Python int: no overflow, computed before any work

    def check_size(self, max_configs: int) -> None:
        if self.size > max_configs:
            dims = " x ".join(f"{len(g[0])}" for g in self.groups)
            raise GridError(f"the grid has {self.size:,} configurations ({dims}); the limit is "
                            f"{max_configs:,} (raise it with --max-configs)")

    def encode(self, model, *, allow_nodes: bool = False) -> "Grid":
        """Check every axis names an input (or, if allowed, a node) and encode its values."""
        lib = model.lib
        seen: dict[str, str] = {}
        for a in self.axes:
            file, line = split_origin(a.origin)
            if a.name not in lib:
                raise UnknownNameError(f"unknown axis `{a.name}`" + suggest(a.name, lib.names()),
                                       file=file, line=line, node=a.name)
            if a.name in seen:
                raise GridError(f"axis `{a.name}` is given twice ({seen[a.name]} and {a.origin})",
                                file=file, line=line, node=a.name)
            seen[a.name] = a.origin
            if a.name in lib.nodes and not allow_nodes:
                raise GridError(f"axis `{a.name}` is a formula node, not an input: a grid over it "
                                f"would replace its formula in every row (pass --override-nodes "
                                f"to do that; `run --set {a.name}=v` overrides one value)",
                                file=file, line=line, node=a.name)
            a.encoded = np.asarray(model.encode(a.name, list(a.values), file=file, line=line))
        for g in self.groups:
            lens = {len(a) for a in g}
            if len(lens) > 1:
                desc = ", ".join(f"{a.name} ({len(a)})" for a in g)
                raise GridError(f"zipped axes need equal lengths: {desc}")
        return self

    def columns(self, start: int, stop: int) -> dict[str, np.ndarray]:
        """Encoded values of every axis for rows ``start .. stop-1`` (row-major order)."""
        rows = np.arange(start, stop, dtype=np.int64)
        idx = np.unravel_index(rows, self.shape) if self.groups else ()
        out = {}
        for g, ix in zip(self.groups, idx):
            for a in g:
                out[a.name] = a.encoded[ix]
        return out


def grid_from_sets(sc, *, zipped: bool = False) -> tuple[Grid, dict]:
    """Split a scenario's values into grid axes (lists and ranges) and fixed values.

    Returns the grid and the scenario values that stay scalar (raw, for ``resolve``).
    """
    groups: list[list[Axis]] = []
    for name, v in sc.values.items():
        if isinstance(v.raw, (list, tuple)) or is_range(v.raw):
            file, line = split_origin(v.origin)
            ax = Axis(name, axis_values(v.raw, name=name, file=file, line=line), v.origin)
            if zipped and groups:
                groups[0].append(ax)
            else:
                groups.append([ax])
    return Grid(groups), {n for g in groups for n in (a.name for a in g)}


__all__ = ["Axis", "Grid", "GridError", "expand_range", "axis_values", "grid_from_sets",
           "DEFAULT_MAX_CONFIGS"]
