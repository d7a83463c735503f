"""Units and dimensions.

Convention: every value inside the graph is held in *coherent base units*:
second, byte, FLOP, token, USD, meter, joule, coulomb (and products of them, such as
byte/s, FLOP/s, W = J/s, USD/h is *not* coherent but USD/s is). A formula file
therefore declares coherent units only (``byte``, not ``GiB``), and a formula
never needs a conversion constant. Values typed by people (defaults, presets,
``--set``) may carry any unit of the right dimension, as text: ``"80 GiB"``,
``"3.35 TB/s"``, ``"989 TFLOP/s"``; they are converted once, on the way in.
Output is shown in engineering notation (see :mod:`flopsheet.fmt`).

Units are parsed by pint with the project's own definitions below, where
byte, FLOP, token and USD are base dimensions of their own (stock pint makes
bit/byte dimensionless, which would let byte-vs-count mix-ups pass). The
dimension of each formula is derived by walking its checked syntax tree once.
"""
from __future__ import annotations

import ast
import io
import math
import re
from fractions import Fraction
from functools import lru_cache
from typing import Mapping

from .errors import UnitError
from .unittext import check_unit_text

_DEFINITIONS = """
# base dimensions (coherent base units)
second = [time] = s = sec
byte = [information] = B
FLOP = [compute] = flop
token = [token] = tok
USD = [currency] = dollar = usd
meter = [length] = m
joule = [energy] = J
coulomb = [charge] = C

# decimal and binary prefixes
yocto- = 1e-24 = y-
zepto- = 1e-21 = z-
atto- = 1e-18 = a-
femto- = 1e-15 = f-
pico- = 1e-12 = p-
nano- = 1e-9 = n-
micro- = 1e-6 = u- = µ- = μ-
milli- = 1e-3 = m-
centi- = 1e-2 = c-
kilo- = 1e3 = k-
mega- = 1e6 = M-
giga- = 1e9 = G-
tera- = 1e12 = T-
peta- = 1e15 = P-
exa- = 1e18 = E-
zetta- = 1e21 = Z-
yotta- = 1e24 = Y-
kibi- = 2**10 = Ki-
mebi- = 2**20 = Mi-
gibi- = 2**30 = Gi-
tebi- = 2**40 = Ti-
pebi- = 2**50 = Pi-
exbi- = 2**60 = Ei-

# derived units
bit = byte / 8 = b
minute = 60 * second = min
hour = 60 * minute = h = hr
day = 24 * hour = d
week = 7 * day
year = 365.25 * day = yr
hertz = 1 / second = Hz
watt = joule / second = W
volt = joule / coulomb = V
watt_hour = watt * hour = Wh
cent = USD / 100
inch = 0.0254 * meter = in
percent = 0.01 = %
billion = 1e9
"""

class Dim:
    """A dimension: base dimension -> exponent (``[information]: 1, [time]: -1`` is byte/s).

    Immutable and hashable; multiplies, divides and takes powers like pint's
    UnitsContainer, without importing pint (a cold ``flopsheet run`` does not need it).
    """

    __slots__ = ("_d", "_h")

    def __init__(self, items=()):
        d = dict(items)
        self._d = {k: v for k, v in sorted(d.items()) if v != 0}
        self._h = hash(tuple(self._d.items()))

    def items(self):
        return self._d.items()

    def __iter__(self):
        return iter(self._d)

    def __len__(self):
        return len(self._d)

    def __getitem__(self, k):
        return self._d[k]

    def __eq__(self, other):
        if isinstance(other, Dim):
            return self._d == other._d
        if isinstance(other, str):
            return False
        try:
            return self._d == {k: v for k, v in dict(other.items()).items() if v != 0}
        except AttributeError:
            return NotImplemented

    def __hash__(self):
        return self._h

    def __mul__(self, other):
        d = dict(self._d)
        for k, v in other.items():
            d[k] = d.get(k, 0) + v
        return Dim(d)

    def __truediv__(self, other):
        d = dict(self._d)
        for k, v in other.items():
            d[k] = d.get(k, 0) - v
        return Dim(d)

    def __pow__(self, p):
        return Dim({k: v * p for k, v in self._d.items()})

    def __repr__(self):
        return f"Dim({self._d!r})"

    def __str__(self):
        return " * ".join(f"{k} ** {v}" if v != 1 else k for k, v in self._d.items()) \
            or "dimensionless"


BOOL = "bool"  #: the declared unit of a condition node
DIMENSIONLESS = Dim()
_DIMLESS_NAMES = {"1", "", "count", "dimensionless"}

#: Coherent unit name per base dimension, used to print dimensions.
_BASE_NAMES = {"[time]": "s", "[information]": "byte", "[compute]": "FLOP", "[token]": "token",
               "[currency]": "USD", "[length]": "m", "[energy]": "J",
               "[charge]": "C"}


@lru_cache(maxsize=1)
def registry():
    import pint  # ~0.4 s to import: only when a unit string is seen for the first time
    ureg = pint.UnitRegistry(None, cache_folder=None)
    ureg.load_definitions(io.StringIO(_DEFINITIONS).readlines())
    return ureg


def dim_str(dim) -> str:
    """A dimension in coherent units, e.g. ``byte/s``; ``1`` when dimensionless."""
    if dim == BOOL:
        return BOOL
    num = [(_BASE_NAMES.get(k, k), v) for k, v in sorted(dim.items()) if v > 0]
    den = [(_BASE_NAMES.get(k, k), -v) for k, v in sorted(dim.items()) if v < 0]

    def part(items):
        return "*".join(n if e == 1 else f"{n}^{_fmt_exp(e)}" for n, e in items)

    if not num and not den:
        return "1"
    s = part(num) if num else "1"
    if den:
        s += "/" + (part(den) if len(den) == 1 else f"({part(den)})")
    return s


def _fmt_exp(e) -> str:
    f = Fraction(e).limit_denominator(12)
    return str(f.numerator) if f.denominator == 1 else f"({f})"


_TABLE: dict | None = None  # unit text -> (dim, factor): what pint said, kept across runs
_TABLE_DIRTY = False


def _table() -> dict:
    global _TABLE
    if _TABLE is None:
        _TABLE = {}
        from . import diskcache
        saved = diskcache.load(diskcache.key("units", ""))
        if isinstance(saved, dict):
            try:
                for t, (items, factor) in saved.items():
                    if not (isinstance(t, str) and isinstance(factor, float)
                            and all(isinstance(k, str) and isinstance(v, (int, float))
                                    for k, v in items)):
                        raise ValueError
                    _TABLE[t] = (Dim(items), factor)
            except (TypeError, ValueError):
                _TABLE = {}  # not what we wrote: ask pint again
    return _TABLE


def save_table() -> None:
    """Keep the unit strings parsed in this run for the next (the disk cache; optional)."""
    global _TABLE_DIRTY
    if _TABLE_DIRTY and _TABLE is not None:
        from . import diskcache
        diskcache.save(diskcache.key("units", ""),
                       {t: [list(d.items()), f] for t, (d, f) in _TABLE.items()})
        _TABLE_DIRTY = False


def parse_unit(text: str):
    """(dimension, factor to coherent base units) of a unit string. Raises ValueError."""
    global _TABLE_DIRTY
    t = str(text).strip()
    if t in _DIMLESS_NAMES:
        return DIMENSIONLESS, 1.0
    if t == BOOL:
        return BOOL, 1.0
    table = _table()
    hit = table.get(t)
    if hit is not None:
        return hit
    check_unit_text(t)
    ureg = registry()
    try:
        u = ureg.parse_units(t.replace("^", "**"))
    except Exception as e:  # pint raises several kinds; all mean "not a unit here"
        raise ValueError(f"unknown unit `{t}` ({type(e).__name__})") from None
    try:
        factor = float((1.0 * u).to_base_units().magnitude)
    except (OverflowError, ZeroDivisionError, ArithmeticError) as e:
        raise ValueError(f"unit `{t}` is out of range ({type(e).__name__})") from None
    if not (factor > 0 and math.isfinite(factor)):
        raise ValueError(f"unit `{t}` is out of range (its factor is {factor:g})")
    dim = Dim(ureg.get_dimensionality(u).items())
    table[t] = out = (dim, factor)
    _TABLE_DIRTY = True
    return out


def declared_dim(unit: str, *, file=None, line=None, node=None):
    """The dimension of a declared (coherent) unit; errors name the place."""
    try:
        dim, factor = parse_unit(unit)
    except ValueError as e:
        raise UnitError(str(e), file=file, line=line, node=node) from None
    if abs(factor - 1.0) > 1e-12:
        raise UnitError(
            f"unit `{unit}` is not a coherent base unit (1 {unit} = {factor:g} {dim_str(dim)}): "
            f"declare `{dim_str(dim)}` and write scaled values with their unit, e.g. '80 {unit}'",
            file=file, line=line, node=node)
    return dim


_VALUE_RE = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(.*?)\s*$")


def convert_value(text: str, dim, *, file=None, line=None, node=None) -> float:
    """Read ``"80 GiB"`` (or ``"0.5"``) as a number in coherent units of ``dim``."""
    m = _VALUE_RE.match(text)
    if not m:
        raise UnitError(f"`{text}` is not a number with an optional unit", file=file, line=line,
                        node=node)
    number, unit = float(m.group(1)), m.group(2)
    if not unit:
        return number
    try:
        udim, factor = parse_unit(unit)
    except ValueError as e:
        raise UnitError(str(e), file=file, line=line, node=node) from None
    if udim != dim:
        raise UnitError(f"`{text}` has dimension {dim_str(udim)}, expected {dim_str(dim)}",
                        file=file, line=line, node=node)
    return number * factor


# --------------------------------------------------------------------------- inference
class _Zero:
    """The literal 0: fits any dimension (``max(0, t)``)."""


_ZERO = _Zero()


def infer(tree: ast.expr, dims: Mapping[str, object], text: str, *, file=None, line=None,
          node=None):
    """Derive the dimension of a parsed formula tree. ``dims`` maps names to dimensions."""

    def fail(n, why):
        seg = ast.get_source_segment(text, n) or ""
        seg = seg if len(seg) <= 80 else seg[:77] + "..."
        return UnitError(f"{why} in `{seg}`", file=file, line=line, node=node)

    def same(n, parts):
        real = [(p, d) for p, d in parts if d is not _ZERO]
        if not real:
            return _ZERO
        first_node, first = real[0]
        for p, d in real[1:]:
            if d != first:
                a = ast.get_source_segment(text, first_node)
                b = ast.get_source_segment(text, p)
                raise fail(n, f"mismatched units: `{a}` is {dim_str(first)} but `{b}` is "
                              f"{dim_str(d)}")
        return first

    def need(n, d, want, what):
        if d is _ZERO:
            return
        if d != want:
            raise fail(n, f"{what} must be {dim_str(want)}, found {dim_str(d)}")

    def const(n) -> Fraction | None:
        if isinstance(n, ast.Constant) and isinstance(n.value, (int, float)):
            return Fraction(repr(n.value)) if isinstance(n.value, float) else Fraction(n.value)
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.USub, ast.UAdd)):
            c = const(n.operand)
            return None if c is None else (-c if isinstance(n.op, ast.USub) else c)
        if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Div, ast.Mult, ast.Add, ast.Sub)):
            a, b = const(n.left), const(n.right)
            if a is None or b is None:
                return None
            if isinstance(n.op, ast.Div):
                return a / b if b else None
            return a * b if isinstance(n.op, ast.Mult) else (a + b if isinstance(n.op, ast.Add)
                                                             else a - b)
        return None

    def walk(n):
        if isinstance(n, ast.Constant):
            return _ZERO if n.value == 0 else DIMENSIONLESS
        if isinstance(n, ast.Name):
            return dims[n.id]
        if isinstance(n, ast.UnaryOp):
            d = walk(n.operand)
            if isinstance(n.op, ast.Not):
                need(n, d, BOOL, "the operand of `not`")
            return d
        if isinstance(n, ast.BinOp):
            op = n.op
            if isinstance(op, (ast.Add, ast.Sub, ast.Mod)):
                return same(n, [(n.left, walk(n.left)), (n.right, walk(n.right))])
            if isinstance(op, (ast.Mult, ast.Div)):
                a, b = walk(n.left), walk(n.right)
                if a is _ZERO or b is _ZERO:
                    return _ZERO
                return a * b if isinstance(op, ast.Mult) else a / b
            # power
            base, ex = walk(n.left), walk(n.right)
            need(n.right, ex, DIMENSIONLESS, "an exponent")
            if base is _ZERO or base == DIMENSIONLESS:
                return base
            c = const(n.right)
            if c is None:
                raise fail(n, f"a quantity in {dim_str(base)} needs a constant exponent")
            return base ** (float(c) if c.denominator != 1 else int(c))
        if isinstance(n, ast.Compare):
            same(n, [(n.left, walk(n.left))] + [(c, walk(c)) for c in n.comparators])
            return BOOL
        if isinstance(n, ast.BoolOp):
            for v in n.values:
                need(v, walk(v), BOOL, "each operand of and/or")
            return BOOL
        if isinstance(n, ast.Call):
            f = n.func.id
            if f == "select":
                return same(n, [(kw.value, walk(kw.value)) for kw in n.keywords])
            if f == "if_":
                need(n.args[0], walk(n.args[0]), BOOL, "the condition of if_")
                return same(n, [(a, walk(a)) for a in n.args[1:]])
            args = [(a, walk(a)) for a in n.args]
            if f in ("min", "max"):
                return same(n, args)
            if f == "abs":
                return args[0][1]
            if f == "sqrt":
                d = args[0][1]
                return d if d is _ZERO else d ** 0.5
            need(n, args[0][1], DIMENSIONLESS, f"the argument of {f}()")
            return DIMENSIONLESS
        raise fail(n, "cannot derive a unit for this syntax")  # parser rejects these first

    d = walk(tree)
    return DIMENSIONLESS if d is _ZERO else d
