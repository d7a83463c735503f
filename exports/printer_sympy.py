"""Excel formula text from a sympy expression (the partial derivatives of the Sensitivity
sheet's Partials helper), with the same function table and precedence as the formula-tree
printer in printer.py."""
from __future__ import annotations

import re
from typing import Mapping, Sequence

import sympy as sp
from sympy.core.relational import Relational

from .printer import (ADD, ATOM, CMP, ExcelPrintError, FUNCTIONS, MUL, NEG, POW, _call, _neg,
                      _right, _text_literal, _wrap, check_formula, number)

#: sympy class -> Excel function, for :func:`print_sympy`.
SYMPY_FUNCTIONS: dict[type, str] = {
    sp.Max: "MAX",
    sp.Min: "MIN",
    sp.ceiling: "_xlfn.CEILING.MATH",
    sp.floor: "_xlfn.FLOOR.MATH",
    sp.log: "LN",
    sp.exp: "EXP",
    sp.Abs: "ABS",
    sp.sign: "SIGN",
    sp.Mod: "MOD",
}

_REL_TEXT = {sp.StrictLessThan: "<", sp.LessThan: "<=", sp.StrictGreaterThan: ">",
             sp.GreaterThan: ">=", sp.Equality: "=", sp.Unequality: "<>"}


class _SympyPrinter:
    def __init__(self, choices: Mapping[str, Sequence[str]], where: dict):
        self.choices = choices
        self.where = where

    def fail(self, why: str) -> ExcelPrintError:
        return ExcelPrintError(f"cannot write this expression for Excel: {why}", **self.where)

    def p(self, e) -> tuple[str, int]:
        if isinstance(e, sp.Symbol):
            if e.name in self.choices:
                raise self.fail(f"categorical input `{e.name}` outside a comparison")
            if isinstance(e, sp.Dummy) or not re.match(r"^[a-z][a-z0-9_]*$", e.name):
                raise self.fail(f"symbol `{e}` is not a defined name")
            return e.name, ATOM
        if e is sp.true or e is sp.S.true:
            return "TRUE", ATOM
        if e is sp.false or e is sp.S.false:
            return "FALSE", ATOM
        if isinstance(e, sp.Number):
            return self.num(e)
        if e is sp.E:
            return "EXP(1)", ATOM
        if e is sp.pi:
            return "PI()", ATOM
        if isinstance(e, sp.Add):
            return self.add(e)
        if isinstance(e, sp.Mul):
            return self.mul(e)
        if isinstance(e, sp.Pow):
            return self.pow(e)
        if isinstance(e, sp.Piecewise):
            return self.piecewise(e)
        if isinstance(e, Relational):
            return self.rel(e)
        if isinstance(e, sp.And):
            return _call(FUNCTIONS["and"], [self.top(a) for a in e.args])
        if isinstance(e, sp.Or):
            return _call(FUNCTIONS["or"], [self.top(a) for a in e.args])
        if isinstance(e, sp.Not):
            return _call(FUNCTIONS["not"], [self.top(e.args[0])])
        if type(e).__name__ == "_Winner":
            return self.winner(e)
        if isinstance(e, sp.Heaviside):
            # numpy.heaviside(x, 0.5) as the engine evaluates it: 0, 1/2 at 0, 1
            return f"(SIGN({self.top(e.args[0])})+1)/2", MUL
        if isinstance(e, sp.log) and len(e.args) == 1:
            return _call("LN", [self.top(e.args[0])])
        for cls, fn in SYMPY_FUNCTIONS.items():
            if type(e) is cls:
                return _call(fn, [self.top(a) for a in e.args])
        raise self.fail(f"{type(e).__name__} ({str(e)[:80]})")

    def top(self, e) -> str:
        return self.p(e)[0]

    def num(self, e) -> tuple[str, int]:
        if e is sp.nan or e in (sp.oo, -sp.oo, sp.zoo):
            raise self.fail(f"non-finite number {e}")
        if isinstance(e, sp.Integer):
            v = int(e)
            return _neg((number(-v), ATOM)) if v < 0 else (number(v), ATOM)
        if isinstance(e, sp.Rational) and max(abs(int(e.p)), int(e.q)) < 10 ** 15:
            p, q = int(e.p), int(e.q)
            body = f"{number(abs(p))}/{number(q)}"
            return ("-(" + body + ")", NEG) if p < 0 else (f"({body})", ATOM)
        v = float(e)
        return _neg((number(-v), ATOM)) if v < 0 else (number(v), ATOM)

    def add(self, e) -> tuple[str, int]:
        terms = e.as_ordered_terms()
        out = self.p(terms[0])
        text = out[0] if out[1] >= ADD or out[1] == NEG else f"({out[0]})"
        for t in terms[1:]:
            if t.could_extract_minus_sign():
                text += "-" + _wrap(self.p(-t), MUL)
            else:
                text += "+" + _wrap(self.p(t), MUL)
        return text, ADD

    def mul(self, e) -> tuple[str, int]:
        coeff, rest = e.as_coeff_Mul()
        if coeff.is_negative:
            inner = self.mul_pos(-coeff, rest)
            if inner[1] == MUL and inner[0][:1].isdigit():
                return "-" + inner[0], MUL  # `-2*x^2`: the minus applies to the literal only
            return _neg(inner)
        return self.mul_pos(coeff, rest)

    def mul_pos(self, coeff, rest) -> tuple[str, int]:
        num: list[tuple[str, int]] = []
        den: list[str] = []
        if isinstance(coeff, sp.Rational) and not isinstance(coeff, sp.Integer):
            if coeff.p != 1:
                num.append((number(int(coeff.p)), ATOM))
            den.append(number(int(coeff.q)))
        elif coeff != 1:
            num.append(self.p(coeff))
        factors = rest.as_ordered_factors() if isinstance(rest, sp.Mul) else [rest]
        for f in factors:
            if f == 1:
                continue
            if isinstance(f, sp.Pow) and f.exp.is_Number and f.exp.is_negative:
                den.append(_wrap(self.p(sp.Pow(f.base, -f.exp)), POW))
            else:
                num.append(self.p(f))
        if not den and len(num) == 1:
            return num[0]
        top = "*".join(_right(x, POW) for x in num) if num else "1"
        return top + "".join("/" + d for d in den), MUL

    def pow(self, e) -> tuple[str, int]:
        b, x = e.base, e.exp
        if x == sp.Rational(1, 2):
            return _call("SQRT", [self.top(b)])
        if x.is_Number and x.is_negative:
            return "1/" + _wrap(self.p(sp.Pow(b, -x)), POW), MUL
        if b is sp.E:
            return _call("EXP", [self.top(x)])
        return f"{_wrap(self.p(b), ATOM)}^{_wrap(self.p(x), ATOM)}", POW

    def winner(self, e) -> tuple[str, int]:
        """The engine's derivative of max/min (graph/sensitivity.py): 1 where argument ``i``
        is the *first* maximum of ``sign*args``, else 0: one branch on a tie."""
        i, sign, vals = e.args[0], e.args[1], e.args[2:]
        if not (isinstance(i, sp.Integer) and sign in (1, -1) and 0 <= int(i) < len(vals)):
            raise self.fail(f"winner index {i} / sign {sign}")
        i = int(i)
        me = _wrap(self.p(vals[i]), ADD)
        before, after = ("<", "<=") if sign == 1 else (">", ">=")
        conds = [f"{_wrap(self.p(v), ADD)}{before if j < i else after}{me}"
                 for j, v in enumerate(vals) if j != i]
        return f"IF(AND({','.join(conds)}),1,0)", ATOM

    def rel(self, e) -> tuple[str, int]:
        sym = _REL_TEXT.get(type(e))
        if sym is None:
            raise self.fail(f"relation {type(e).__name__}")
        lhs, rhs = e.lhs, e.rhs
        chosen = [s for s in (lhs, rhs) if isinstance(s, sp.Symbol) and s.name in self.choices]
        if chosen:
            if sym not in ("=", "<>"):
                raise self.fail(f"ordering comparison of categorical input `{chosen[0]}`")
            sym_, idx = (lhs, rhs) if lhs is chosen[0] else (rhs, lhs)
            opts = self.choices[sym_.name]
            if not (isinstance(idx, sp.Integer) and 0 <= int(idx) < len(opts)):
                raise self.fail(f"`{sym_}` compared with {idx}, which is not a choice index")
            return f"{sym_.name}{sym}{_text_literal(opts[int(idx)])}", CMP
        return f"{_wrap(self.p(lhs), ADD)}{sym}{_wrap(self.p(rhs), ADD)}", CMP

    def piecewise(self, e) -> tuple[str, int]:
        pieces = list(e.args)
        if pieces[-1].cond is sp.true:
            text = self.top(pieces[-1].expr)
            pieces = pieces[:-1]
        else:
            text = "NA()"  # no branch applies: the engine gives nan
        for pc in reversed(pieces):
            text = f"IF({self.top(pc.cond)},{self.top(pc.expr)},{text})"
        return text, ATOM


def print_sympy(expr, *, choices: Mapping[str, Sequence[str]] | None = None,
                node: str | None = None, file: str | None = None,
                line: int | None = None) -> str:
    """Excel formula text (without the leading ``=``) of a sympy expression."""
    where = {"node": node, "file": file, "line": line}
    if isinstance(expr, bool):
        expr = sp.true if expr else sp.false
    elif isinstance(expr, int):
        expr = sp.Integer(expr)
    elif isinstance(expr, float):
        expr = sp.Float(expr)
    text = _SympyPrinter(choices or {}, where).top(expr)
    check_formula(text, **where)
    return text
