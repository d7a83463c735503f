"""Numeric evaluation of a library: each node compiled once to a numpy function.

The same compiled model evaluates one configuration (scalars) or many
(numpy arrays, broadcast together). Values are in coherent base units; a
categorical input is carried as the index of its choice.

Spreadsheet semantics for ``ceil``/``floor``: the argument is first rounded to
15 significant digits, as Excel and LibreOffice do, so ``ceil(0.1*3/0.1)`` is
3 in all three places (IEEE arithmetic alone would give 4).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np
import sympy as sp
from sympy.printing.numpy import NumPyPrinter

from .errors import EvaluationError, InputValueError, UnknownNameError
from .library import Library, check_value, number_value
from .names import suggest
from .parser import symbol


def _round15(x):
    """x rounded to 15 significant digits, halves away from zero (as spreadsheets round)."""
    x = np.asarray(x, dtype=float)
    with np.errstate(all="ignore"):
        mag = np.floor(np.log10(np.abs(np.where(x == 0, 1.0, x))))
        scale = 10.0 ** (14 - mag)
        r = np.sign(x) * np.floor(np.abs(x) * scale + 0.5) / scale
    return np.where(np.isfinite(r), r, x)


#: LibreOffice treats two doubles as equal when they differ by less than 2^-48 of their size
#: (rtl::math::approxEqual); comparisons and MOD follow it so Python and the workbook branch alike.
_APPROX = 2.0 ** -48


def _approx_equal(a, b):
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    return (a == b) | (np.abs(a - b) < np.maximum(np.abs(a), np.abs(b)) * _APPROX)


def ss_eq(a, b):
    return _approx_equal(a, b)


def ss_ne(a, b):
    return ~_approx_equal(a, b)


def ss_lt(a, b):
    return (np.asarray(a) < np.asarray(b)) & ~_approx_equal(a, b)


def ss_le(a, b):
    return (np.asarray(a) <= np.asarray(b)) | _approx_equal(a, b)


def ss_gt(a, b):
    return ss_lt(b, a)


def ss_ge(a, b):
    return ss_le(b, a)


def ss_mod(a, b):
    """MOD with spreadsheet semantics: a - b*floor(a/b), a result within 2^-48 of a is 0."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    r = a - b * ss_floor(a / b)
    return np.where(np.abs(r) < np.abs(a) * _APPROX, 0.0, r)


def _near(x, below):
    """Where x lies within rounding distance (1e-13 relative) above ``below``."""
    return (x - below) <= 1e-13 * np.maximum(np.abs(x), 1.0)


def ss_ceil(x):
    """Ceiling with spreadsheet semantics (argument rounded to 15 significant digits).

    Only arguments a hair above an integer can round down onto it, so the exact rounding
    runs on those alone (a plain ceil elsewhere: ~20x faster on large arrays).
    """
    x = np.asarray(x, dtype=float)
    c = np.ceil(x)
    near = _near(x, c - 1)
    if not near.any():
        return c
    return np.where(near, np.ceil(_round15(x)), c)


def ss_floor(x):
    """Floor with spreadsheet semantics (argument rounded to 15 significant digits)."""
    x = np.asarray(x, dtype=float)
    f = np.floor(x)
    near = _near(-x, -(f + 1))  # a hair below the next integer
    if not near.any():
        return f
    return np.where(near, np.floor(_round15(x)), f)


class _Printer(NumPyPrinter):
    def _print_ceiling(self, e):
        return f"_ss_ceil({self._print(e.args[0])})"

    def _print_floor(self, e):
        return f"_ss_floor({self._print(e.args[0])})"

    def _print_Relational(self, e):
        fn = {"==": "_ss_eq", "!=": "_ss_ne", "<": "_ss_lt", "<=": "_ss_le", ">": "_ss_gt",
              ">=": "_ss_ge"}[e.rel_op]
        return f"{fn}({self._print(e.lhs)}, {self._print(e.rhs)})"

    def _print_Mod(self, e):
        return f"_ss_mod({self._print(e.args[0])}, {self._print(e.args[1])})"

    def _print_Integer(self, e):  # beyond 2**53 numpy would see a Python object, not a float
        return super()._print_Integer(e) if abs(e.p) < 2**53 else repr(float(e.p))

    def _print_Rational(self, e):
        if abs(e.p) < 2**53 and abs(e.q) < 2**53:
            return super()._print_Rational(e)
        return repr(float(e.p) / float(e.q)) if abs(e.q) < 2**1000 else repr(float(e))

    def _print_Piecewise(self, e):
        """Nested numpy.where: ~5x faster than numpy.select for two or three branches."""
        out = self._print(e.args[-1].expr) if e.args[-1].cond == sp.true else "numpy.nan"
        pieces = e.args[:-1] if e.args[-1].cond == sp.true else e.args
        for piece in reversed(pieces):
            out = f"numpy.where({self._print(piece.cond)}, {self._print(piece.expr)}, {out})"
        return out

    def _print_Max(self, e):
        return self._nested("numpy.maximum", e.args)

    def _print_Min(self, e):
        return self._nested("numpy.minimum", e.args)

    def _nested(self, fn, args):
        out = self._print(args[-1])
        for a in reversed(args[:-1]):
            out = f"{fn}({self._print(a)}, {out})"
        return out

    # numpy.logical_and.reduce((a, b)), sympy's default, does not broadcast a scalar with an array
    def _print_And(self, e):
        return self._nested("numpy.logical_and", e.args)

    def _print_Or(self, e):
        return self._nested("numpy.logical_or", e.args)

    def _print__Winner(self, e):  # derivative of max/min (graph/sensitivity.py)
        return f"_winner({', '.join(self._print(a) for a in e.args)})"


def _winner(i, sign, *args):
    """1.0 where args[i] is the first maximum of sign*args (broadcast), else 0.0."""
    stacked = np.stack(np.broadcast_arrays(*[sign * np.asarray(a, dtype=float) for a in args]))
    return (np.argmax(stacked, axis=0) == int(i)).astype(float)


_NAMESPACE = {"_ss_ceil": ss_ceil, "_ss_floor": ss_floor, "_winner": _winner, "_ss_mod": ss_mod,
              "_ss_eq": ss_eq, "_ss_ne": ss_ne, "_ss_lt": ss_lt, "_ss_le": ss_le,
              "_ss_gt": ss_gt, "_ss_ge": ss_ge}


def compile_expr(args: list[str], expr: sp.Basic):
    """A numpy function of the named arguments (sympy's lambdify on our printer)."""
    syms = [symbol(a) for a in args]
    return sp.lambdify(syms, expr, modules=[_NAMESPACE, "numpy"], printer=_Printer,
                       dummify=False, cse=False, docstring_limit=0)


@dataclass
class Result:
    """Values of every evaluated name (inputs, overrides and nodes)."""

    values: dict[str, Any]
    overridden: frozenset[str]

    def __getitem__(self, name):
        return self.values[name]

    def scalar(self, name) -> float:
        return float(np.asarray(self.values[name]))


class Model:
    """A library compiled for evaluation (compiled once per library and reused)."""

    def __new__(cls, lib: Library):
        cached = getattr(lib, "_model", None)
        if isinstance(cached, cls):
            return cached
        model = super().__new__(cls)
        lib._model = model
        return model

    def __init__(self, lib: Library):
        if getattr(self, "_fns", None) is not None:
            return  # already compiled
        self.lib = lib
        self._fns: dict[str, Any] = {}
        for name in lib.order:
            node = lib.nodes[name]
            self._fns[name] = compile_expr(node.deps, node.expr)

    # ------------------------------------------------------------------ values
    def encode(self, name: str, value, *, file=None, line=None) -> Any:
        """One user value -> its numeric form (coherent units, choice index); checks it."""
        lib = self.lib
        if name not in lib:
            raise UnknownNameError(f"unknown name `{name}`" + suggest(name, lib.names()),
                                   file=file, line=line, node=name)
        item = lib.item(name)
        many = isinstance(value, (list, tuple, np.ndarray))
        vals = list(np.asarray(value).ravel()) if many else [value]
        if name in lib.inputs and lib.inputs[name].is_choice:
            choices = lib.inputs[name].choices
            codes = []
            for v in vals:
                if isinstance(v, (np.integer, int)) and not isinstance(v, bool) and many \
                        and 0 <= v < len(choices):
                    codes.append(int(v))  # already encoded (arrays from sweeps)
                    continue
                if not isinstance(v, str) or v not in choices:
                    raise InputValueError(f"`{v}` is not a choice of `{name}` "
                                          f"(choices: {', '.join(choices)})", file=file,
                                          line=line, node=name)
                codes.append(choices.index(v))
            return np.asarray(codes, dtype=np.int64).reshape(np.shape(value)) if many else codes[0]
        if name in lib.nodes and item.is_bool:
            raise InputValueError(f"`{name}` is a condition and cannot be overridden", file=file,
                                  line=line, node=name)
        if many:
            arr = np.asarray([number_value(v, item.dim, file=file, line=line, node=name)
                              if not isinstance(v, (float, int, np.floating, np.integer))
                              else float(v) for v in vals], dtype=float)
            arr = arr.reshape(np.shape(value))
            bad = ~np.isfinite(arr)
            if bad.any():
                i = int(np.flatnonzero(bad.ravel())[0])
                raise InputValueError(f"value #{i} is not finite", file=file, line=line, node=name)
            if name in lib.inputs:
                self._check_array(lib.inputs[name], arr, file, line)
            return arr
        x = number_value(value, item.dim, file=file, line=line, node=name)
        if name in lib.inputs:
            check_value(lib.inputs[name], x, file=file, line=line)
        return x

    def _check_array(self, inp, arr, file, line):
        lo, hi = inp.bounds
        bad = np.zeros(arr.shape, dtype=bool)
        if lo is not None:
            bad |= arr < lo
        if hi is not None:
            bad |= arr > hi
        if inp.integer:
            bad |= arr != np.round(arr)
        if bad.any():
            i = int(np.flatnonzero(bad.ravel())[0])
            check_value(inp, float(arr.ravel()[i]), file=file, line=line, what=f"value #{i}")

    def defaults(self) -> dict[str, Any]:
        return {n: (i.choices.index(i.default) if i.is_choice else i.default)
                for n, i in self.lib.inputs.items()}

    # ------------------------------------------------------------- evaluation
    def evaluate(self, values: Mapping[str, Any] | None = None, *,
                 outputs: Iterable[str] | None = None, check: bool = True,
                 keep_intermediates: bool = True) -> Result:
        """Evaluate with ``values`` (already encoded; missing inputs take defaults).

        A value given for a node overrides its formula. With ``outputs``, only
        what those names need is evaluated; with ``keep_intermediates=False`` as
        well, each intermediate array is freed after its last use (a million
        configurations then hold a few arrays at a time, not one per node).
        """
        lib = self.lib
        env: dict[str, Any] = self.defaults()
        overridden = set()
        for k, v in (values or {}).items():
            if k in lib.nodes:
                overridden.add(k)
            elif k not in lib.inputs:
                raise UnknownNameError(f"unknown name `{k}`" + suggest(k, lib.names()), node=k)
            env[k] = v
        for k, v in env.items():  # numpy scalars: x/0 gives inf (reported below), not an exception
            if isinstance(v, (int, float)):
                env[k] = np.float64(v)
        order = lib.order
        if outputs is not None:
            need = set()
            for o in outputs:
                lib.item(o)
                need.add(o)
                need |= lib.ancestors(o)
            order = [n for n in order if n in need]
        free = not keep_intermediates and outputs is not None
        if free:
            keep = set(outputs)
            uses = {n: 0 for n in order}
            for n in order:
                for d in lib.nodes[n].deps:
                    if d in uses:
                        uses[d] += 1
        with np.errstate(all="ignore"):
            for name in order:
                if name in overridden:
                    continue
                node = lib.nodes[name]
                val = self._fns[name](*[env[d] for d in node.deps])
                if check and not node.is_bool:
                    self._check_finite(name, val, env)
                env[name] = val
                if free:
                    for d in node.deps:
                        if d in uses:
                            uses[d] -= 1
                            if uses[d] == 0 and d not in keep:
                                del env[d]
        return Result(env, frozenset(overridden))

    def _check_finite(self, name, val, env):
        arr = np.asarray(val)
        if arr.dtype == bool:
            return
        ok = np.isfinite(arr)
        if ok.all():
            return
        node = self.lib.nodes[name]
        i = int(np.flatnonzero(~ok.ravel())[0]) if arr.ndim else None
        shown = []
        for d in node.deps:
            v = np.asarray(env[d])
            if v.ndim and i is not None:
                v = np.broadcast_to(v, arr.shape).ravel()[i]
            shown.append(f"{d}={format_plain(self.lib, d, v)}")
        which = f" (configuration #{i})" if i is not None else ""
        bad = arr.ravel()[i] if i is not None else arr
        raise EvaluationError(f"evaluates to {bad}{which} from `{node.parsed.text}` with "
                              + ", ".join(shown), file=node.file, line=node.line, node=name)


def format_plain(lib: Library, name: str, v) -> str:
    """A value as text for messages: the choice name for categorical inputs."""
    if name in lib.inputs and lib.inputs[name].is_choice:
        return lib.inputs[name].choices[int(v)]
    return f"{float(v):.6g}"
