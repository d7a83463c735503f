"""sympy expressions <-> nested lists, exact and never through eval: for the disk cache.

Each object is written as its class name (from an allow-list) and its arguments, numbers
as exact text (``["Q", "1", "3"]`` is 1/3), and rebuilt with ``evaluate=False``: the same
tree, so it prints the same (the Excel export prints derivatives from it). An object of a
class not on the list is not written (None); a list naming one is refused on reading.
"""
from __future__ import annotations

from .parser import sp, symbol

_FUNCS = ("Add", "Mul", "Pow", "Max", "Min", "Mod", "StrictLessThan", "LessThan",
          "StrictGreaterThan", "GreaterThan", "Equality", "Unequality", "And", "Or", "Not",
          "ceiling", "floor", "exp", "log", "Abs", "sign", "Heaviside")
_CONSTS = ("E", "pi", "oo", "zoo", "nan", "true", "false", "NegativeInfinity")
MAX_DEPTH = 200


class _Unsupported(Exception):
    pass


def dump(e):
    """The nested-list form of ``e``, or None if it holds a class not on the list."""
    try:
        return _dump(e, 0)
    except (_Unsupported, RecursionError):
        return None


def _dump(e, depth):
    if depth > MAX_DEPTH:
        raise _Unsupported
    if e is sp.true or e is sp.false:
        return ["C", "true" if e is sp.true else "false"]
    if e.is_Symbol:
        return ["S", e.name]
    if e.is_Integer:
        return ["I", str(e.p)]
    if e.is_Rational:
        return ["Q", str(e.p), str(e.q)]
    if e.is_Float:
        return ["F", str(e)]
    name = type(e).__name__
    if name in _CONSTS:
        return ["C", name]
    if isinstance(e, sp.Piecewise):
        return ["Piecewise"] + [[_dump(p.expr, depth + 1), _dump(p.cond, depth + 1)]
                                for p in e.args]
    if name in _FUNCS or name == "_Winner":
        return [name] + [_dump(a, depth + 1) for a in e.args]
    raise _Unsupported


def load(t):
    """The sympy expression of a nested-list form; ValueError if it is not one we write."""
    return _load(t, 0)


def _load(t, depth):
    if depth > MAX_DEPTH or not isinstance(t, list) or not t or not isinstance(t[0], str):
        raise ValueError("malformed expression")
    op, a = t[0], t[1:]
    if op == "S":
        return symbol(_text(a))
    if op == "I":
        return sp.Integer(int(_text(a)))
    if op == "Q":
        if len(a) != 2:
            raise ValueError("bad rational")
        return sp.Rational(int(_str(a[0])), int(_str(a[1])))
    if op == "F":
        return sp.Float(_text(a))
    if op == "C":
        c = _text(a)
        if c not in _CONSTS:
            raise ValueError("unknown constant")
        if c in ("true", "false"):
            return sp.true if c == "true" else sp.false
        return -sp.oo if c == "NegativeInfinity" else getattr(sp, c)
    if op == "Piecewise":
        pieces = []
        for p in a:
            if not isinstance(p, list) or len(p) != 2:
                raise ValueError("bad piece")
            pieces.append((_load(p[0], depth + 1), _load(p[1], depth + 1)))
        return sp.Piecewise(*pieces, evaluate=False)
    args = [_load(x, depth + 1) for x in a]
    if op == "_Winner":
        from .sensitivity import _sympy_classes
        return _sympy_classes()["_Winner"](*args)
    if op not in _FUNCS:
        raise ValueError(f"class `{op}` is not allowed")
    return getattr(sp, op)(*args, evaluate=False)


def _str(x) -> str:
    if not isinstance(x, str) or len(x) > 400:
        raise ValueError("bad text")
    return x


def _text(a) -> str:
    if len(a) != 1:
        raise ValueError("bad arity")
    return _str(a[0])
