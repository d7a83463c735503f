"""Formulas (sympy) -> a small expression tree the code generator reads (no sympy needed there).

:func:`lower` turns one node's sympy expression into nested lists of plain values (JSON
friendly, so a compiled library can be cached on disk without pickle). The operators:

    ["n", 2.5]                 number           ["a", k]              k-th name the formula uses
    ["+", x, y, ...]           sum              ["*", x, y, ...]      product
    ["/", x, y]                quotient         ["^", x, y]           power
    [f, x] for f in sqrt exp log abs ceil floor                     ["mod", x, y]
    ["min", x, ...] ["max", x, ...]             ["cmp", op, x, y]     op: == != < <= > >=
    ["and", ...] ["or", ...] ["not", x] ["true"] ["false"]
    ["pw", [value, condition], ...]             first true condition wins (if_, select)
    ["sign", x]  ["winner", i, s, x, ...]       in derivatives only (of abs, of max/min)

:func:`compile_expr` is the older per-expression path (sympy's lambdify with spreadsheet
functions), kept for the sensitivity engine and the exports, which compile derivatives.
"""
from __future__ import annotations

from . import spreadsheet as S

UNARY = ("sqrt", "exp", "log", "abs", "ceil", "floor", "sign")
CMP_OPS = ("==", "!=", "<", "<=", ">", ">=")


class LowerError(ValueError):
    """A sympy object the code generator has no form for."""


def _num(v) -> list:
    return ["n", float(v)]


def lower(expr, deps: list[str]) -> list:
    """The expression tree of ``expr`` whose symbols are the names in ``deps``."""
    import sympy as sp
    index = {d: i for i, d in enumerate(deps)}

    def num(e) -> list:
        if e.is_Integer:
            return _num(e.p) if abs(e.p) < 2**53 else _num(float(e.p))
        if e.is_Rational:
            if abs(e.p) < 2**53 and abs(e.q) < 2**53:
                return _num(e.p / e.q)
            return _num(float(e.p) / float(e.q)) if abs(e.q) < 2**1000 else _num(float(e))
        return _num(float(e))

    def pw(e) -> list:
        return ["pw"] + [[go(p.expr), go(p.cond)] for p in e.args]

    def go(e) -> list:
        if e is sp.true:
            return ["true"]
        if e is sp.false:
            return ["false"]
        if e.is_Symbol:
            return ["a", index[e.name]]
        if e.is_Number or isinstance(e, sp.NumberSymbol):
            return num(e)
        if e.is_Add:
            return ["+"] + [go(a) for a in _ordered(e)]
        if e.is_Mul:
            top, bottom = [], []
            for a in _ordered(e):
                if a.is_Pow and a.exp.is_Number and a.exp.is_negative:
                    bottom.append(a.base if a.exp == -1 else sp.Pow(a.base, -a.exp, evaluate=False))
                elif a.is_Rational and not a.is_Integer:  # 3*x/4, as sympy prints it
                    if a.p != 1:
                        top.append(sp.Integer(a.p))
                    bottom.append(sp.Integer(a.q))
                else:
                    top.append(a)
            n = ["*"] + [go(a) for a in top] if len(top) > 1 else (go(top[0]) if top else _num(1))
            if not bottom:
                return n
            d = ["*"] + [go(a) for a in bottom] if len(bottom) > 1 else go(bottom[0])
            return ["/", n, d]
        if e.is_Pow:
            b, x = e.base, e.exp
            if x == sp.S.Half:
                return ["sqrt", go(b)]
            if x == -sp.S.Half:
                return ["/", _num(1), ["sqrt", go(b)]]
            if x.is_Number and x.is_negative:
                inner = go(b) if x == -1 else ["^", go(b), num(-x)]
                return ["/", _num(1), inner]
            return ["^", go(b), go(x)]
        if isinstance(e, sp.exp):
            return ["exp", go(e.args[0])]
        if isinstance(e, sp.log):
            return ["log", go(e.args[0])]
        if isinstance(e, sp.Abs):
            return ["abs", go(e.args[0])]
        if isinstance(e, sp.ceiling):
            return ["ceil", go(e.args[0])]
        if isinstance(e, sp.floor):
            return ["floor", go(e.args[0])]
        if isinstance(e, sp.Mod):
            return ["mod", go(e.args[0]), go(e.args[1])]
        if isinstance(e, sp.Max):
            return ["max"] + [go(a) for a in e.args]
        if isinstance(e, sp.Min):
            return ["min"] + [go(a) for a in e.args]
        if isinstance(e, sp.core.relational.Relational):
            return ["cmp", e.rel_op, go(e.lhs), go(e.rhs)]
        if isinstance(e, sp.And):
            return ["and"] + [go(a) for a in e.args]
        if isinstance(e, sp.Or):
            return ["or"] + [go(a) for a in e.args]
        if isinstance(e, sp.Not):
            return ["not", go(e.args[0])]
        if isinstance(e, sp.Piecewise):
            return pw(e)
        if isinstance(e, sp.sign):  # derivative of abs()
            return ["sign", go(e.args[0])]
        if type(e).__name__ == "_Winner":  # derivative of max/min (graph/sensitivity.py)
            return ["winner"] + [go(a) for a in e.args]
        raise LowerError(f"no numeric form for `{type(e).__name__}` in `{e}`")

    return go(expr)


def _ordered(e):
    """Arguments in the order sympy prints them (so sums and products round as before)."""
    try:
        return e.as_ordered_terms() if e.is_Add else e.as_ordered_factors()
    except Exception:  # noqa: BLE001 - any order is correct; this one only matches rounding
        return list(e.args)


def check_tree(t, n_deps: int, depth: int = 0) -> None:
    """Raise ValueError unless ``t`` is a well-formed tree (cache entries are checked)."""
    if depth > 400 or not isinstance(t, list) or not t or not isinstance(t[0], str):
        raise ValueError("malformed tree")
    op, args = t[0], t[1:]
    if op == "n":
        if len(args) != 1 or not isinstance(args[0], float):
            raise ValueError("bad number")
    elif op == "a":
        if len(args) != 1 or type(args[0]) is not int or not 0 <= args[0] < n_deps:
            raise ValueError("bad name index")
    elif op in ("true", "false"):
        if args:
            raise ValueError("bad constant")
    elif op == "cmp":
        if len(args) != 3 or args[0] not in CMP_OPS:
            raise ValueError("bad comparison")
        check_tree(args[1], n_deps, depth + 1)
        check_tree(args[2], n_deps, depth + 1)
    elif op == "pw":
        if not args:
            raise ValueError("empty piecewise")
        for piece in args:
            if not isinstance(piece, list) or len(piece) != 2:
                raise ValueError("bad piece")
            check_tree(piece[0], n_deps, depth + 1)
            check_tree(piece[1], n_deps, depth + 1)
    else:
        arity = {"/": 2, "^": 2, "mod": 2, "not": 1, **{u: 1 for u in UNARY}}.get(op)
        if arity is None and op not in ("+", "*", "min", "max", "and", "or", "winner"):
            raise ValueError(f"unknown operator {op!r}")
        if (arity is not None and len(args) != arity) or (arity is None and not args):
            raise ValueError(f"bad arity for {op!r}")
        for a in args:
            check_tree(a, n_deps, depth + 1)


def text(t, deps: list[str]) -> str:
    """A tree as formula text, for messages."""
    op, a = t[0], t[1:]
    if op == "n":
        return f"{a[0]:g}"
    if op == "a":
        return deps[a[0]]
    if op in ("true", "false"):
        return op
    if op in ("+", "*", "/", "^"):
        sep = {"+": " + ", "*": "*", "/": "/", "^": "**"}[op]
        return sep.join(_paren(x, deps) for x in a).replace("+ -", "- ")
    if op == "cmp":
        return f"{text(a[1], deps)} {a[0]} {text(a[2], deps)}"
    if op in ("and", "or"):
        return f" {op} ".join(f"({text(x, deps)})" for x in a)
    if op == "pw":
        return "if_(" + ", ".join(f"{text(c, deps)}: {text(v, deps)}" for v, c in a) + ")"
    return f"{op}({', '.join(text(x, deps) for x in a)})"


def _paren(t, deps):
    s = text(t, deps)
    return s if t[0] in ("n", "a") or t[0] not in ("+", "*", "/", "^", "cmp") else f"({s})"


# --------------------------------------------------- per-expression compile (sympy lambdify)
_PRINTER = None


def _printer_class():
    global _PRINTER
    if _PRINTER is not None:
        return _PRINTER
    import sympy as sp
    from sympy.printing.numpy import NumPyPrinter

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

        # numpy.logical_and.reduce((a, b)), sympy's default, does not broadcast a scalar
        def _print_And(self, e):
            return self._nested("numpy.logical_and", e.args)

        def _print_Or(self, e):
            return self._nested("numpy.logical_or", e.args)

        def _print__Winner(self, e):  # derivative of max/min (graph/sensitivity.py)
            return f"_winner({', '.join(self._print(a) for a in e.args)})"

    _PRINTER = _Printer
    return _Printer


def _winner(i, sign, *args):
    """1.0 where args[i] is the first maximum of sign*args (broadcast), else 0.0."""
    import numpy as np
    if all(np.ndim(a) == 0 for a in args):  # one configuration (the gradient): no stacking
        vals = [sign * float(a) for a in args]
        return float(vals.index(max(vals)) == int(i))
    stacked = np.stack(np.broadcast_arrays(*[sign * np.asarray(a, dtype=float) for a in args]))
    return (np.argmax(stacked, axis=0) == int(i)).astype(float)


_NAMESPACE = {"_ss_ceil": S.ss_ceil, "_ss_floor": S.ss_floor, "_winner": _winner,
              "_ss_mod": S.ss_mod, "_ss_eq": S.ss_eq, "_ss_ne": S.ss_ne, "_ss_lt": S.ss_lt,
              "_ss_le": S.ss_le, "_ss_gt": S.ss_gt, "_ss_ge": S.ss_ge}


def compile_expr(args: list[str], expr):
    """A numpy function of the named arguments (spreadsheet semantics, broadcasting).

    Generated by graph/codegen.py from the expression's tree (~20x faster to make than
    sympy's lambdify); an expression the tree has no form for goes through lambdify with
    the same spreadsheet functions.
    """
    try:
        tree = lower(expr, list(args))
    except (LowerError, KeyError):  # KeyError: a symbol not among args
        return _lambdify(args, expr)
    from . import codegen
    prog = codegen.build(["_"], {"_": tree}, {"_": list(args)}, list(args), ["_"],
                         frozenset(["_"]))
    fn = prog.array

    def f(*values):
        return fn([], values)[0]
    return f


def _lambdify(args: list[str], expr):
    import sympy as sp
    from .parser import symbol
    syms = [symbol(a) for a in args]
    return sp.lambdify(syms, expr, modules=[_NAMESPACE, "numpy"], printer=_printer_class(),
                       dummify=False, cse=False, docstring_limit=0)
