"""Naming rules: one name serves as YAML key, sympy symbol and Excel defined name."""
from __future__ import annotations

import difflib
import keyword
import re

from .errors import NameRuleError
from .parser import FUNCTIONS

SNAKE = re.compile(r"^[a-z][a-z0-9_]*$")
# Excel reads these as cell references: A1 style (1-3 letters then digits) and R1C1 style.
_A1 = re.compile(r"^[a-z]{1,3}[0-9]+$")
_R1C1 = re.compile(r"^(r[0-9]*c[0-9]*|r[0-9]+|c[0-9]+|r|c)$")

#: Excel worksheet functions (lower case). A defined name equal to one of them is refused.
EXCEL_FUNCTIONS = frozenset("""
abs accrint acos acosh acot address and areas asin asinh atan atan2 atanh average averagea
averageif averageifs base beta binom bitand bitor bitxor ceiling cell char chisq choose
clean code column columns combin concat concatenate confidence convert correl cos cosh cot
count counta countblank countif countifs covar date datedif datevalue day days db dde
ddb decimal degrees delta dget dmax dmin dollar dsum edate effect eomonth erf erfc error
even exact exp expon fact false filter find fisher fixed floor forecast frequency fv gamma
gcd geomean getpivotdata growth harmean hex2dec hlookup hour hyperlink if ifs iferror ifna
index indirect info int intercept ipmt irr isblank iserr iserror iseven islogical isna
isnontext isnumber isodd isref istext kurt large lcm left len let linest ln log log10
logest lookup lower match max maxa maxifs median mid min mina minifs minute mod mode month
mround n na networkdays not now npv odd offset or pi pmt power ppmt price product proper pv
quotient radians rand randbetween rank rate replace rept right round rounddown roundup row
rows rsq search second sequence sign sin sinh skew sln slope small sort sqrt stdev stdeva
stdevp substitute subtotal sum sumif sumifs sumproduct sumsq switch t tan tanh text time
timevalue today transpose trend trim true trunc type unique upper value var vara varp
vlookup weekday weeknum workday xlookup xor year yield
""".split())

#: Names the engine itself uses; a graph name may not shadow them.
RESERVED = frozenset({"nan", "inf", "e", "pi", "numpy", "math", "builtins", "true", "false",
                      "none", "otherwise"})


def check_name(name, *, file=None, line=None) -> None:
    """Raise :class:`NameRuleError` (with a suggested fix) if ``name`` is not allowed."""
    def bad(why, fix=None):
        hint = f"; try `{fix}`" if fix else ""
        return NameRuleError(f"name `{name}` {why}{hint}", file=file, line=line, node=str(name))

    if not isinstance(name, str):
        raise bad("is not text")
    if not SNAKE.match(name):
        fix = re.sub(r"[^a-z0-9_]+", "_", name.lower()).strip("_")
        if fix and not fix[0].isalpha():
            fix = "x_" + fix
        raise bad("is not lower snake_case (a-z, 0-9, _; starting with a letter)", fix or None)
    if len(name) > 200:
        raise bad("is longer than 200 characters")
    if _A1.match(name) or _R1C1.match(name):
        raise bad("looks like a spreadsheet cell reference", f"{name}_value")
    if name in EXCEL_FUNCTIONS:
        raise bad("is the name of an Excel function", f"{name}_value")
    if name in FUNCTIONS or keyword.iskeyword(name) or name in RESERVED:
        raise bad("is reserved by the formula language", f"{name}_value")


def suggest(name: str, known) -> str:
    """`` (did you mean a, b?)`` for close matches, or empty text."""
    close = difflib.get_close_matches(name, list(dict.fromkeys(known)), n=3, cutoff=0.6)
    return f" (did you mean {', '.join(close)}?)" if close else ""
