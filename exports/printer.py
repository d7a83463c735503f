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
from decimal import Decimal
from typing import Mapping, Sequence

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

_CMP_TEXT = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "=",
             ast.NotEq: "<>"}


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


def print_sympy(expr, **where) -> str:
    """Excel formula text (without the leading ``=``) of a sympy expression: the printer in
    printer_sympy.py, imported on first use so that a workbook whose derivatives all come
    from the disk cache never imports sympy."""
    from .printer_sympy import print_sympy as _print
    return _print(expr, **where)


def __getattr__(name):  # printer.SYMPY_FUNCTIONS, as before (it lives with the sympy printer)
    if name == "SYMPY_FUNCTIONS":
        from .printer_sympy import SYMPY_FUNCTIONS
        return SYMPY_FUNCTIONS
    raise AttributeError(name)


__all__ = ["print_tree", "print_sympy", "number", "check_formula", "check_choices",
           "ExcelPrintError", "FUNCTIONS", "SYMPY_FUNCTIONS"]
