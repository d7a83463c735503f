"""The whitelisted expression parser: formula text -> sympy, with no eval.

Formula text is parsed by Python's ``ast`` in ``eval`` mode; every syntax node
is checked against an allow-list and translated into sympy objects directly.
Nothing from a file ever reaches ``eval``, ``exec``, ``sympify`` or
``parse_expr``.

The language: numbers (``12``, ``0.5``, ``1e12``), names, ``+ - * / ** %``,
unary minus, comparisons, ``and``/``or``/``not`` inside conditions, and the
functions in :data:`FUNCTIONS`. ``select(choice_input, a=..., b=...)`` picks a
branch by the value of a categorical input; ``if_(cond, a, b)`` by a condition.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Mapping, Sequence

from .errors import ExpressionError


class _LazySympy:
    """sympy, imported on first use (~0.4 s): a cold run from the cache never needs it."""

    def __getattr__(self, name):
        import sympy
        globals()["sp"] = sympy
        return getattr(sympy, name)


sp = _LazySympy()

#: Functions of the language, with their arity (min, max; None = unbounded).
FUNCTIONS: dict[str, tuple[int, int | None]] = {
    "min": (2, None),
    "max": (2, None),
    "ceil": (1, 1),
    "floor": (1, 1),
    "log": (1, 1),
    "log2": (1, 1),
    "exp": (1, 1),
    "sqrt": (1, 1),
    "abs": (1, 1),
    "if_": (3, 3),
    "select": (1, 1),  # plus keyword branches
}

#: Keyword of ``select`` that catches every choice not listed.
SELECT_OTHERWISE = "otherwise"

MAX_TEXT = 20_000
MAX_DEPTH = 60
MAX_CONST_EXPONENT = 64
MAX_LITERAL = 1e300
MAX_ARGS = 255  #: arguments of one call (min/max), as Python before 3.7 and Excel allow
MAX_CONST_BITS = 1000  #: numerator and denominator of a folded constant (float range: 1024)

_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")

_SYMBOLS: dict[str, sp.Symbol] = {}


def symbol(name: str) -> sp.Symbol:
    """The one sympy Symbol for a graph name (real-valued)."""
    s = _SYMBOLS.get(name)
    if s is None:
        s = _SYMBOLS[name] = sp.Symbol(name, real=True)
    return s


@dataclass
class Parsed:
    """A parsed formula: the checked syntax tree, its sympy form and the names it uses."""

    text: str
    tree: ast.expr
    expr: sp.Basic
    names: list[str] = field(default_factory=list)  # in order of first use
    is_bool: bool = False


class _Ctx:
    def __init__(self, text: str, file, line, node, choices: Mapping[str, Sequence[str]],
                 bool_names: frozenset[str]):
        self.text = text
        self.file = file
        self.line = line
        self.node = node
        self.choices = choices
        self.bool_names = bool_names
        self.names: dict[str, None] = {}

    def seg(self, n: ast.AST) -> str:
        s = ast.get_source_segment(self.text, n) or ast.dump(n)
        return s if len(s) <= 80 else s[:77] + "..."

    def fail(self, n: ast.AST | None, why: str) -> ExpressionError:
        where = f" in `{self.seg(n)}`" if n is not None else ""
        return ExpressionError(f"{why}{where}", file=self.file, line=self.line, node=self.node)


def parse(text: str, *, file: str | None = None, line: int | None = None,
          node: str | None = None, choices: Mapping[str, Sequence[str]] | None = None,
          bool_names: frozenset[str] = frozenset()) -> Parsed:
    """Parse one formula. ``choices`` maps each categorical input to its choices;
    ``bool_names`` are names whose values are conditions (usable in ``if_``)."""
    if not isinstance(text, str):
        if isinstance(text, bool) or not isinstance(text, (int, float)):
            raise ExpressionError(f"expr must be text or a number, not {type(text).__name__}",
                                  file=file, line=line, node=node)
        text = repr(text)
    if len(text) > MAX_TEXT:
        raise ExpressionError(f"formula is {len(text)} characters; the limit is {MAX_TEXT}",
                              file=file, line=line, node=node)
    src = " ".join(text.split())  # YAML block scalars span lines; runs of spaces are noise
    ctx = _Ctx(src, file, line, node, choices or {}, bool_names)
    try:
        tree = ast.parse(src, mode="eval")
    except SyntaxError as e:
        raise ExpressionError(f"syntax error at column {e.offset}: {e.msg}: `{src}`",
                              file=file, line=line, node=node) from None
    except (RecursionError, MemoryError, ValueError) as e:
        raise ExpressionError(f"formula cannot be parsed ({type(e).__name__})",
                              file=file, line=line, node=node) from None
    _check_depth(tree.body, ctx)
    try:
        expr = _build(tree.body, ctx)
    except (RecursionError, MemoryError, OverflowError) as e:
        raise ExpressionError(f"formula cannot be built ({type(e).__name__})",
                              file=file, line=line, node=node) from None
    except (TypeError, ValueError, AttributeError, KeyError, ArithmeticError) as e:
        # sympy evaluates parts of some odd formulas anyway (a condition on an if_ of
        # constants is folded and raises TypeError): refuse them with one line
        raise ExpressionError(f"sympy cannot build this formula ({type(e).__name__}: "
                              f"{str(e)[:100]})", file=file, line=line, node=node) from None
    if expr.has(sp.zoo, sp.nan, sp.oo, sp.S.NegativeInfinity, sp.I):
        # sympy folds e.g. 1/select(k, x=0, y=1) into a branch `zoo`: that branch divides by
        # zero (a spreadsheet shows #DIV/0! there), and no numeric code can be printed for it
        raise ExpressionError("a branch of this formula folds to a constant division by zero, "
                              "an infinity or a complex number", file=file, line=line, node=node)
    for c in expr.atoms(sp.Rational):
        if max(abs(c.p).bit_length(), c.q.bit_length()) > MAX_CONST_BITS:
            raise ExpressionError("a constant in this formula folds to a number beyond the "
                                  "range of a float (about 1e300)", file=file, line=line,
                                  node=node)
    return Parsed(text=src, tree=tree.body, expr=expr, names=list(ctx.names),
                  is_bool=_is_condition(tree.body, ctx))


def _check_depth(root: ast.AST, ctx: _Ctx) -> None:
    stack = [(root, 1)]
    while stack:
        n, d = stack.pop()
        if d > MAX_DEPTH:
            raise ctx.fail(None, f"formula nests deeper than {MAX_DEPTH} levels")
        stack.extend((c, d + 1) for c in ast.iter_child_nodes(n))


_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow, ast.Mod)
_CMPOPS = {ast.Lt: "StrictLessThan", ast.LtE: "LessThan", ast.Gt: "StrictGreaterThan",
           ast.GtE: "GreaterThan", ast.Eq: "Eq", ast.NotEq: "Ne"}


def _is_condition(n: ast.AST, ctx: _Ctx) -> bool:
    if isinstance(n, (ast.Compare, ast.BoolOp)):
        return True
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
        return True
    return isinstance(n, ast.Name) and n.id in ctx.bool_names


def _number(n: ast.Constant, ctx: _Ctx) -> sp.Rational:
    v = n.value
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        what = "text" if isinstance(v, str) else type(v).__name__
        raise ctx.fail(n, f"{what} literals are not allowed (choices are named only inside select)")
    if isinstance(v, float) and not (abs(v) <= MAX_LITERAL):
        raise ctx.fail(n, "number is out of range")
    if isinstance(v, int) and abs(v) > MAX_LITERAL:
        raise ctx.fail(n, "number is out of range")
    f = Fraction(v) if isinstance(v, int) else Fraction(repr(v))
    return sp.Rational(f.numerator, f.denominator)


def _build(n: ast.AST, ctx: _Ctx) -> sp.Basic:
    if isinstance(n, ast.Constant):
        return _number(n, ctx)
    if isinstance(n, ast.Name):
        name = n.id
        if not _NAME_RE.match(name):
            raise ctx.fail(n, f"name `{name}` is not allowed (names are lower snake_case)")
        if name in FUNCTIONS:
            raise ctx.fail(n, f"`{name}` is a function; call it with arguments")
        if name in ctx.choices:
            raise ctx.fail(n, f"categorical input `{name}` can only be the first argument of select()")
        ctx.names[name] = None
        return symbol(name)
    if isinstance(n, ast.BinOp) and isinstance(n.op, _BINOPS):
        a, b = _value(n.left, ctx), _value(n.right, ctx)
        op = n.op
        if isinstance(op, ast.Add):
            return a + b
        if isinstance(op, ast.Sub):
            return a - b
        if isinstance(op, ast.Mult):
            return a * b
        if isinstance(op, ast.Div):
            if b == 0:
                raise ctx.fail(n, "division by the constant zero")
            return a / b
        if isinstance(op, ast.Mod):
            if b == 0:
                raise ctx.fail(n, "modulo by the constant zero")
            return sp.Mod(a, b)
        # power: bound constant exponents so `9**9**9` cannot hang the loader
        if b.is_Number and abs(b) > MAX_CONST_EXPONENT:
            raise ctx.fail(n, f"constant exponent larger than {MAX_CONST_EXPONENT}")
        if a == 0 and b.is_Number and b < 0:
            raise ctx.fail(n, "zero raised to a negative power")
        if a.is_Number and a < 0 and b.is_Number and not b.is_integer:
            raise ctx.fail(n, "a negative constant raised to a fractional power is not real")
        if a.is_Rational and b.is_Number and a != 0 and \
                abs(float(b)) * max(abs(a.p).bit_length(), a.q.bit_length()) > 4 * MAX_CONST_BITS:
            raise ctx.fail(n, "constant power beyond the range of a float (about 1e300)")
        return a ** b
    if isinstance(n, ast.UnaryOp):
        if isinstance(n.op, ast.USub):
            return -_value(n.operand, ctx)
        if isinstance(n.op, ast.UAdd):
            return _value(n.operand, ctx)
        if isinstance(n.op, ast.Not):
            return sp.Not(_condition(n.operand, ctx))
    if isinstance(n, ast.BoolOp):
        parts = [_condition(v, ctx) for v in n.values]
        return sp.And(*parts) if isinstance(n.op, ast.And) else sp.Or(*parts)
    if isinstance(n, ast.Compare):
        terms = [_value(n.left, ctx)] + [_value(c, ctx) for c in n.comparators]
        rels = []
        for op, lhs, rhs in zip(n.ops, terms, terms[1:]):
            cls = _CMPOPS.get(type(op))
            if cls is None:
                raise ctx.fail(n, f"comparison `{type(op).__name__}` is not allowed")
            rels.append(getattr(sp, cls)(lhs, rhs, evaluate=False))
        return rels[0] if len(rels) == 1 else sp.And(*rels)
    if isinstance(n, ast.Call):
        return _call(n, ctx)
    raise ctx.fail(n, f"{_describe(n)} is not allowed in a formula")


def _describe(n: ast.AST) -> str:
    names = {ast.Attribute: "attribute access", ast.Subscript: "subscripting",
             ast.Lambda: "lambda", ast.ListComp: "a comprehension", ast.SetComp: "a comprehension",
             ast.DictComp: "a comprehension", ast.GeneratorExp: "a generator",
             ast.IfExp: "`a if c else b` (use if_(c, a, b))", ast.List: "a list",
             ast.Tuple: "a tuple", ast.Dict: "a dict", ast.Set: "a set",
             ast.Starred: "starred arguments", ast.JoinedStr: "an f-string",
             ast.NamedExpr: "assignment", ast.Await: "await", ast.Yield: "yield",
             ast.BinOp: "this operator", ast.Slice: "slicing"}
    return names.get(type(n), f"syntax `{type(n).__name__}`")


def _value(n: ast.AST, ctx: _Ctx) -> sp.Expr:
    """Build a numeric operand: conditions are not numbers."""
    if _is_condition(n, ctx):
        raise ctx.fail(n, "a condition is used as a number (use if_(condition, a, b))")
    return _build(n, ctx)


def _condition(n: ast.AST, ctx: _Ctx) -> sp.Basic:
    if not _is_condition(n, ctx):
        raise ctx.fail(n, "expected a condition (a comparison, and/or/not, or a condition node)")
    return _build(n, ctx)


def _call(n: ast.Call, ctx: _Ctx) -> sp.Basic:
    if not isinstance(n.func, ast.Name):
        raise ctx.fail(n, "only the listed functions can be called")
    fname = n.func.id
    if fname not in FUNCTIONS:
        allowed = ", ".join(sorted(FUNCTIONS))
        raise ctx.fail(n, f"function `{fname}` is not allowed (allowed: {allowed})")
    if any(isinstance(a, ast.Starred) for a in n.args):
        raise ctx.fail(n, "starred arguments are not allowed")
    if len(n.args) + len(n.keywords) > MAX_ARGS:
        raise ctx.fail(None, f"{fname}() has {len(n.args) + len(n.keywords)} arguments; the "
                             f"limit is {MAX_ARGS}")
    if fname == "select":
        return _select(n, ctx)
    if n.keywords:
        raise ctx.fail(n, f"{fname}() takes no keyword arguments")
    lo, hi = FUNCTIONS[fname]
    if len(n.args) < lo or (hi is not None and len(n.args) > hi):
        want = f"{lo}" if lo == hi else f"at least {lo}"
        raise ctx.fail(n, f"{fname}() takes {want} argument(s), got {len(n.args)}")
    if fname == "if_":
        cond = _condition(n.args[0], ctx)
        a, b = _value(n.args[1], ctx), _value(n.args[2], ctx)
        return sp.Piecewise((a, cond), (b, True), evaluate=False)
    args = [_value(a, ctx) for a in n.args]
    # evaluate=False: sympy's Max/Min simplification (pairwise comparisons of every
    # argument) took 60 % of loading the library and reorders what the author wrote
    if fname == "min":
        return sp.Min(*args, evaluate=False)
    if fname == "max":
        return sp.Max(*args, evaluate=False)
    x = args[0]
    # unevaluated: a constant argument must get spreadsheet rounding at evaluation, not be
    # folded exactly here (floor(2.9999999999999996) is 3 in a spreadsheet)
    if fname == "ceil":
        return sp.ceiling(x, evaluate=False)
    if fname == "floor":
        return sp.floor(x, evaluate=False)
    if fname in ("log", "log2", "sqrt") and x.is_Number and x <= 0:
        raise ctx.fail(n, f"{fname}() of a non-positive constant")
    if fname == "log":
        return sp.log(x)
    if fname == "log2":
        return sp.log(x, 2)
    if fname == "exp":
        return sp.exp(x)
    if fname == "sqrt":
        return sp.sqrt(x)
    return sp.Abs(x)  # abs


def _select(n: ast.Call, ctx: _Ctx) -> sp.Basic:
    if len(n.args) != 1 or not isinstance(n.args[0], ast.Name):
        raise ctx.fail(n, "select() takes one categorical input, then name=value branches")
    cname = n.args[0].id
    if cname not in ctx.choices:
        raise ctx.fail(n, f"`{cname}` is not a categorical input (declare it with `choices:`)")
    choices = list(ctx.choices[cname])
    ctx.names[cname] = None
    if not n.keywords:
        raise ctx.fail(n, "select() needs name=value branches")
    branches: list[tuple[str, ast.expr]] = []
    seen = set()
    for kw in n.keywords:
        if kw.arg is None:
            raise ctx.fail(n, "`**` is not allowed in select()")
        if kw.arg in seen:
            raise ctx.fail(n, f"branch `{kw.arg}` is given twice")
        seen.add(kw.arg)
        if kw.arg != SELECT_OTHERWISE and kw.arg not in choices:
            raise ctx.fail(n, f"`{kw.arg}` is not a choice of `{cname}` (choices: {', '.join(choices)})")
        branches.append((kw.arg, kw.value))
    otherwise = [b for b in branches if b[0] == SELECT_OTHERWISE]
    listed = [b for b in branches if b[0] != SELECT_OTHERWISE]
    missing = [c for c in choices if c not in seen]
    if missing and not otherwise:
        raise ctx.fail(n, f"select() on `{cname}` misses choice(s) {', '.join(missing)} "
                          f"(add them or `{SELECT_OTHERWISE}=`)")
    if otherwise and not missing:
        raise ctx.fail(n, f"`{SELECT_OTHERWISE}=` is unreachable: every choice is listed")
    sym = symbol(cname)
    pieces = []
    for i, (choice, vnode) in enumerate(listed):
        val = _value(vnode, ctx)
        last = i == len(listed) - 1 and not otherwise
        pieces.append((val, True if last else sp.Eq(sym, choices.index(choice))))
    if otherwise:
        pieces.append((_value(otherwise[0][1], ctx), True))
    return sp.Piecewise(*pieces, evaluate=False)


def select_branches(tree: ast.Call) -> list[tuple[str, ast.expr]]:
    """The (choice, value) branches of a parsed select() call, in written order."""
    return [(kw.arg, kw.value) for kw in tree.keywords]

