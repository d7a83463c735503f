"""Formulas -> Excel formula text, with an explicit function table.

Two printers share one set of precedence rules:

* :func:`print_tree` prints a node's *parsed formula tree* (the checked Python
  ``ast`` of its YAML ``expr``), so the workbook reads like the YAML:
  ``ceil(layers/pp)`` becomes ``_xlfn.CEILING.MATH(layers/pp)``.
* :func:`print_sympy` prints a sympy expression (used for the derivatives of
  the live Sensitivity sheet, and to cross-check the tree printer).

Excel grammar differs from Python's, and every difference is handled here:

* unary minus binds tighter than ``^`` (``-x^2`` is ``(-x)^2``): a negated
  power, product or sum is printed ``-(x^2)``;
* ``^`` groups left to right: ``a**b**c`` is printed ``a^(b^c)``; a power's
  base and exponent are parenthesised unless they are atoms;
* same-precedence right operands are parenthesised, so ``a*(b*c)`` and
  ``a-(b-c)`` keep Python's evaluation order;
* ``log`` is ``LN`` (``LOG`` is base 10 in Excel), ``log2(x)`` is ``LOG(x,2)``,
  ``x % y`` is ``MOD(x,y)`` (both take the sign of the divisor);
* ``ceil``/``floor`` are ``CEILING.MATH``/``FLOOR.MATH``, stored with the
  ``_xlfn.`` prefix Excel needs for functions newer than Excel 2007 (without
  it Excel shows ``#NAME?``). With one argument they round toward +inf/-inf
  for every sign, exactly like ``math.ceil``/``math.floor`` (``CEILING(x,1)``
  and ``ROUNDUP`` do not for negatives);
* ``select(choice, a=..., b=..., otherwise=...)`` is an ``IF`` chain comparing
  the choice cell's *text*: ``IF(recompute="none",...,IF(...))``;
* comparisons chain into ``AND``: ``a < b < c`` is ``AND(a<b,b<c)``;
* numbers are printed exactly (shortest round-trip text; sympy rationals as
  ``(p/q)``).

Anything else raises :class:`ExcelPrintError` naming the node: a cell is never
silently wrong.
"""
from __future__ import annotations

import ast
import math
import re
from decimal import Decimal
from typing import Mapping, Sequence

import sympy as sp
from sympy.core.relational import Relational

from flopsheet.errors import FlopsheetError
from flopsheet.parser import SELECT_OTHERWISE, select_branches

#: Excel limits (Excel specifications and limits): formula text and function nesting.
MAX_FORMULA_CHARS = 8192
MAX_NESTING = 64

# precedence of printed pieces (Excel's, higher binds tighter)
CMP, ADD, MUL, POW, NEG, ATOM = 10, 20, 30, 40, 50, 100

#: The function table: formula-language function -> Excel function.
FUNCTIONS: dict[str, str] = {
    "min": "MIN",
    "max": "MAX",
    "ceil": "_xlfn.CEILING.MATH",
    "floor": "_xlfn.FLOOR.MATH",
    "log": "LN",
    "log2": "LOG",  # LOG(x,2)
    "exp": "EXP",
    "sqrt": "SQRT",
    "abs": "ABS",
    "if_": "IF",
    "select": "IF",  # an IF chain on the choice text
    "%": "MOD",
    "and": "AND",
    "or": "OR",
    "not": "NOT",
}

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

_CMP_TEXT = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "=",
             ast.NotEq: "<>"}
_REL_TEXT = {sp.StrictLessThan: "<", sp.LessThan: "<=", sp.StrictGreaterThan: ">",
             sp.GreaterThan: ">=", sp.Equality: "=", sp.Unequality: "<>"}


class ExcelPrintError(FlopsheetError):
    """A formula that cannot be written as an Excel formula."""


def number(v) -> str:
    """A Python number as Excel formula text, exactly (shortest round-trip form)."""
    if isinstance(v, bool):
        raise TypeError("a boolean is not a number")
    if isinstance(v, int) and abs(v) < 10 ** 15:
        return str(v)
    v = float(v)  # larger integers are doubles in a spreadsheet (and in the engine)
    if not math.isfinite(v):
        raise ValueError(f"{v} is not a finite number")
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    s = repr(v)
    if "e" not in s and s.endswith(".0"):  # 3000000000000000.0 -> 3E+15
        s = str(Decimal(s).normalize())
    if "e" in s:
        mant, exp = s.split("e")
        if mant.endswith(".0"):
            mant = mant[:-2]
        sign = "-" if exp.startswith("-") else "+"
        s = f"{mant}E{sign}{exp.lstrip('+-').lstrip('0') or '0'}"
    return s


def _wrap(piece: tuple[str, int], need: int) -> str:
    text, prec = piece
    return text if prec >= need else f"({text})"


def _right(piece: tuple[str, int], need: int) -> str:
    """A right operand: parenthesised below ``need``, and when negated (``a*(-b)``)."""
    text, prec = piece
    return text if prec >= need and prec != NEG else f"({text})"


def _call(fn: str, args: Sequence[str]) -> tuple[str, int]:
    return f"{fn}({','.join(args)})", ATOM


def _neg(piece: tuple[str, int]) -> tuple[str, int]:
    # Excel's unary minus binds tighter than ^, * and +: negate atoms only.
    return "-" + _wrap(piece, ATOM), NEG


def _text_literal(s: str) -> str:
    return '"' + s.replace('"', '""') + '"'


def check_choices(choices: Mapping[str, Sequence[str]], *, node=None) -> None:
    """Excel compares text case-insensitively: choices differing only in case are refused."""
    for name, opts in choices.items():
        seen: dict[str, str] = {}
        for c in opts:
            k = c.lower()
            if k in seen:
                raise ExcelPrintError(
                    f"choices `{seen[k]}` and `{c}` of `{name}` differ only in case; Excel "
                    f"compares text case-insensitively, so the workbook could not tell them apart",
                    node=node or name)
            seen[k] = c


# ------------------------------------------------------------------ tree printer
class _TreePrinter:
    def __init__(self, choices: Mapping[str, Sequence[str]], where: dict):
        self.choices = choices
        self.where = where

    def fail(self, why: str) -> ExcelPrintError:
        return ExcelPrintError(f"cannot write this formula for Excel: {why}", **self.where)

    def p(self, n: ast.AST) -> tuple[str, int]:
        if isinstance(n, ast.Constant):
            v = n.value
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise self.fail(f"literal {v!r}")
            if v < 0:
                return _neg((number(-v), ATOM))
            return number(v), ATOM
        if isinstance(n, ast.Name):
            if n.id in self.choices:
                raise self.fail(f"categorical input `{n.id}` outside select()")
            return n.id, ATOM
        if isinstance(n, ast.UnaryOp):
            if isinstance(n.op, ast.UAdd):
                return self.p(n.operand)
            if isinstance(n.op, ast.USub):
                return _neg(self.p(n.operand))
            if isinstance(n.op, ast.Not):
                return _call(FUNCTIONS["not"], [self.top(n.operand)])
        if isinstance(n, ast.BinOp):
            return self.binop(n)
        if isinstance(n, ast.BoolOp):
            fn = FUNCTIONS["and"] if isinstance(n.op, ast.And) else FUNCTIONS["or"]
            return _call(fn, [self.top(v) for v in n.values])
        if isinstance(n, ast.Compare):
            terms = [n.left] + list(n.comparators)
            rels = []
            for op, a, b in zip(n.ops, terms, terms[1:]):
                sym = _CMP_TEXT.get(type(op))
                if sym is None:
                    raise self.fail(f"comparison {type(op).__name__}")
                rels.append(f"{_wrap(self.p(a), ADD)}{sym}{_wrap(self.p(b), ADD)}")
            if len(rels) == 1:
                return rels[0], CMP
            return _call(FUNCTIONS["and"], rels)
        if isinstance(n, ast.Call):
            return self.call(n)
        raise self.fail(f"syntax {type(n).__name__}")

    def top(self, n: ast.AST) -> str:
        return self.p(n)[0]

    def binop(self, n: ast.BinOp) -> tuple[str, int]:
        op = n.op
        if isinstance(op, ast.Mod):
            return _call(FUNCTIONS["%"], [self.top(n.left), self.top(n.right)])
        a, b = self.p(n.left), self.p(n.right)
        if isinstance(op, ast.Pow):
            return f"{_wrap(a, ATOM)}^{_wrap(b, ATOM)}", POW
        if isinstance(op, (ast.Mult, ast.Div)):
            sym = "*" if isinstance(op, ast.Mult) else "/"
            return f"{_wrap(a, MUL)}{sym}{_right(b, POW)}", MUL
        if isinstance(op, (ast.Add, ast.Sub)):
            sym = "+" if isinstance(op, ast.Add) else "-"
            return f"{_wrap(a, ADD)}{sym}{_right(b, MUL)}", ADD
        raise self.fail(f"operator {type(op).__name__}")

    def call(self, n: ast.Call) -> tuple[str, int]:
        if not isinstance(n.func, ast.Name):
            raise self.fail("call of something that is not a function name")
        f = n.func.id
        if f == "select":
            return self.select(n)
        if n.keywords:
            raise self.fail(f"{f}() with keyword arguments")
        args = [self.top(a) for a in n.args]
        if f in ("min", "max", "if_") or (f in FUNCTIONS and len(args) == 1 and f != "log2"):
            if f not in ("min", "max", "if_", "ceil", "floor", "log", "exp", "sqrt", "abs"):
                raise self.fail(f"function {f}()")
            return _call(FUNCTIONS[f], args)
        if f == "log2" and len(args) == 1:
            return _call(FUNCTIONS["log2"], [args[0], "2"])
        raise self.fail(f"function {f}() with {len(args)} argument(s)")

    def select(self, n: ast.Call) -> tuple[str, int]:
        if len(n.args) != 1 or not isinstance(n.args[0], ast.Name):
            raise self.fail("select() needs one categorical input")
        cname = n.args[0].id
        if cname not in self.choices:
            raise self.fail(f"`{cname}` is not a categorical input")
        branches = select_branches(n)
        listed = [(c, v) for c, v in branches if c != SELECT_OTHERWISE]
        other = [v for c, v in branches if c == SELECT_OTHERWISE]
        for c, _ in listed:
            if c not in self.choices[cname]:
                raise self.fail(f"`{c}` is not a choice of `{cname}`")
        if other:
            text = self.top(other[0])
            conds = listed
        else:
            text = self.top(listed[-1][1])
            conds = listed[:-1]
        for c, v in reversed(conds):
            text = f'{FUNCTIONS["select"]}({cname}={_text_literal(c)},{self.top(v)},{text})'
        return text, ATOM


def print_tree(tree: ast.AST, *, choices: Mapping[str, Sequence[str]] | None = None,
               node: str | None = None, file: str | None = None,
               line: int | None = None) -> str:
    """Excel formula text (without the leading ``=``) of a parsed formula tree."""
    where = {"node": node, "file": file, "line": line}
    text = _TreePrinter(choices or {}, where).top(tree)
    check_formula(text, **where)
    return text


# ----------------------------------------------------------------- sympy printer
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


def nesting(text: str) -> int:
    """Deepest function-call nesting of formula text (string literals skipped)."""
    stack: list[bool] = []
    best = 0
    in_str = False
    prev = ""
    for ch in text:
        if in_str:
            if ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch == "(":
            stack.append(prev != "" and (prev.isalnum() or prev in "._"))
            best = max(best, sum(stack))
        elif ch == ")" and stack:
            stack.pop()
        prev = ch
    return best


def check_formula(text: str, *, node=None, file=None, line=None) -> None:
    """Excel's limits: 8,192 characters per formula, 64 levels of nested functions."""
    if len(text) + 1 > MAX_FORMULA_CHARS:
        raise ExcelPrintError(f"the Excel formula would be {len(text) + 1} characters; Excel "
                              f"allows {MAX_FORMULA_CHARS}", node=node, file=file, line=line)
    n = nesting(text)
    if n > MAX_NESTING:
        raise ExcelPrintError(f"the Excel formula nests functions {n} deep; Excel allows "
                              f"{MAX_NESTING}", node=node, file=file, line=line)


__all__ = ["print_tree", "print_sympy", "number", "check_formula", "check_choices",
           "ExcelPrintError", "FUNCTIONS", "SYMPY_FUNCTIONS"]
