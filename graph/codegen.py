"""Expression trees (graph/compile.py) -> one fused straight-line function per output set.

For the names an evaluation needs, in topological order, every node's tree is emitted into
one Python function (graph/emit.py writes the source). Variants come from the same trees:

- *scalar*: plain floats and the ``math`` module, ``if_``/``select`` as real branches (only
  the taken branch runs, as in a spreadsheet). Anything odd (a division by zero, overflow,
  a non-finite intermediate) raises, and the caller re-runs the array variant to report it.
- *array*: numpy, broadcasting, branches as ``numpy.where``; intermediates are deleted after
  their last use. Every place a non-finite intermediate could be swallowed into a finite
  result (an operand of min/max, a comparison, a divisor, a power, exp, MOD) and every
  node's value is checked; a failure is recorded with the rows where that place is live
  (inside a branch: only rows taking the branch), and the caller raises or masks.
- *fast*: the array variant without the checks (same values), for ``check=False``.

The source is generated from checked trees: file text never reaches it (names become
argument positions, numbers go through ``repr(float)``).
"""
from __future__ import annotations

import marshal
import math
import types
import numpy as np

from . import spreadsheet as S

VARIANTS = ("scalar", "array", "fast")
_F64 = np.dtype(np.float64)


class NonFinite(ArithmeticError):
    """Raised by scalar code at a non-finite value (the array variant then reports it)."""


def _record(bad_list, site, x, live):
    bad = ~np.isfinite(x)
    if live is not None:
        bad = bad & live
    if np.any(bad):
        bad_list.append((site, bad, x))


def _allfinite(x):
    return np.isfinite(x).all()


def _where(c, x, y):
    """``numpy.where(c, x, y)`` - the same values, shape and dtype - without the per-element
    pass when one branch is taken on every row (a condition on fixed inputs, or a grid
    chunk where it happens to hold everywhere): the taken float64 array is returned as is
    (registers are never written in place), a taken float64 number is filled in."""
    if type(c) is np.ndarray and c.ndim:
        if c.all():
            r, o = x, y
        elif c.any():
            return np.where(c, x, y)
        else:
            r, o = y, x
        shape = c.shape
    else:
        r, o = (x, y) if c else (y, x)
        shape = None
    if type(o) is np.ndarray:
        if o.dtype != _F64 or (o.ndim and o.shape != (shape or o.shape)):
            return np.where(c, x, y)
        shape = shape or o.shape
    elif type(o) is not float and type(o) is not np.float64:
        return np.where(c, x, y)
    if type(r) is np.ndarray:
        if r.dtype == _F64 and r.ndim and r.shape == (shape or r.shape):
            return r
    elif type(r) is float or type(r) is np.float64:
        return np.full(shape, r) if shape else np.asarray(r, dtype=_F64)
    return np.where(c, x, y)


_NS_SCALAR = {"_isf": math.isfinite, "_sum": sum, "_NF": NonFinite, "_sqrt": math.sqrt, "_exp": math.exp,
              "_log": math.log, "_s_ceil": S.s_ceil, "_s_floor": S.s_floor, "_s_mod": S.s_mod,
              "_s_eq": S.s_eq, "_s_ne": S.s_ne, "_s_lt": S.s_lt, "_s_le": S.s_le,
              "_s_gt": S.s_gt, "_s_ge": S.s_ge, "_nan": math.nan, "_inf": math.inf,
              "_s_sign": S.s_sign, "_s_winner": S.s_winner}
_NS_ARRAY = {"np": np, "_af": _allfinite, "_nf": _record, "_ss_ceil": S.ss_ceil,
             "_ss_floor": S.ss_floor, "_ss_mod": S.ss_mod, "_ss_eq": S.ss_eq, "_ss_ne": S.ss_ne,
             "_ss_lt": S.ss_lt, "_ss_le": S.ss_le, "_ss_gt": S.ss_gt, "_ss_ge": S.ss_ge,
             "_nan": np.nan, "_inf": np.inf, "_winner": S.winner,
             "_where": _where}


class Program:
    """One output set's fused functions; each variant is generated and compiled on first use.

    ``scalar(args)``, ``array(bad, args)`` and ``fast(bad, args)`` (``bad`` unused) take the
    leaf values in ``leaves`` order and return the values of ``names``. ``sites[i]`` is
    (node, None for its value, or the place in its formula) for the array variant's
    non-finite records ``(i, rows, value)``.
    """

    def __init__(self, leaves, names, spec=None, codes=None, sites=None, on_compile=None):
        self.leaves, self.names = list(leaves), list(names)
        self._spec = spec  # (order, trees, deps_of, bool_nodes), or None from the cache
        self.codes = dict(codes or {})  # variant (VARIANTS) -> code object
        self._sites = sites
        self._fns: dict[str, object] = {}
        self._on_compile = on_compile

    def _fn(self, variant: str):
        fn = self._fns.get(variant)
        if fn is None:
            from .emit import Gen
            array = variant != "scalar"
            code = self.codes.get(variant)
            if code is None:
                spec = self._spec() if callable(self._spec) else self._spec
                order, trees, deps_of, bool_nodes = spec
                g = Gen(array, deps_of, trees, checks=variant != "fast")
                src = g.program(order, self.leaves, self.names, bool_nodes)
                module = compile(src, f"<flopsheet fused {variant}>", "exec")
                code = self.codes[variant] = next(c for c in module.co_consts
                                                  if isinstance(c, types.CodeType))
                if variant == "array":
                    self._sites = g.sites
                if self._on_compile is not None:
                    self._on_compile(self)
            # the function's code was generated here from checked trees, never from file text
            fn = self._fns[variant] = types.FunctionType(code, dict(_NS_ARRAY if array
                                                                    else _NS_SCALAR))
        return fn

    @property
    def scalar(self):
        return self._fn("scalar")

    @property
    def array(self):
        return self._fn("array")

    @property
    def fast(self):
        """The array variant without non-finite checks: ``fast(None, args)``, same values."""
        return self._fn("fast")

    @property
    def sites(self) -> list[tuple[str, str | None]]:
        if self._sites is None:
            self._fn("array")
        return self._sites


def build(order, trees, deps_of, leaves, keep, bool_nodes, on_compile=None) -> Program:
    """The fused program computing ``order`` (topological) from ``leaves``; returns ``keep``.
    ``trees`` may be a mapping computed on demand (only read when a variant is generated)."""
    return Program(leaves, keep, (order, trees, deps_of, bool_nodes), on_compile=on_compile)


def cached(key: str, build, known=None) -> Program:
    """The program stored under ``key`` by an earlier run, else ``build()``; either way its
    variants are saved (marshalled code, HMAC-checked as our own) once compiled.
    ``known``: names the program's leaves and outputs must be among (None: any text)."""
    from . import diskcache
    prog = None
    body = diskcache.load_bytes(key)
    if body is not None:
        try:
            rec = marshal.loads(body)
            leaves, names, codes, sites = rec["leaves"], rec["names"], rec["codes"], rec["sites"]
            if (all(isinstance(n, str) and (known is None or n in known) for n in leaves + names)
                    and all(k in VARIANTS and isinstance(c, types.CodeType)
                            and c.co_name == "_f" for k, c in codes.items())
                    and (sites is None or all(isinstance(n, str) for n, _ in sites))):
                prog = Program(leaves, names, lambda: build()._spec, codes, sites)
        except (ValueError, EOFError, TypeError, KeyError):
            prog = None
    if prog is None:
        prog = build()

    def save(p):
        rec = {"leaves": p.leaves, "names": p.names, "codes": p.codes, "sites": p._sites}
        diskcache.save_bytes(key, marshal.dumps(rec))
    prog._on_compile = save
    return prog
