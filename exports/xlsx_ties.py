"""Near-ties: comparisons and MOD that a spreadsheet rounding differently from LibreOffice
could decide the other way, flagged in the workbook."""
from __future__ import annotations

import math
import re
import weakref

import numpy as np
import sympy as sp

from flopsheet.evaluate import Result
from flopsheet.library import Library
from flopsheet.parser import symbol


#: Closeness under which spreadsheets and Python may disagree: LibreOffice treats numbers
#: within 2**-48 (3.6e-15) relative as equal in comparisons and snaps near-integer quotients
#: in MOD; Excel compares to 15 significant digits. Flag a margin above that.
NEAR_TIE = 1e-13

_TIE_PROBES: "weakref.WeakKeyDictionary[Library, dict]" = weakref.WeakKeyDictionary()


#: Formula text that may hold a comparison or MOD (select's `name=value` is a single `=`).
_COMPARES = re.compile(r"[<>%]|==|!=")


def near_ties(lib: Library, result: Result) -> dict[str, str]:
    """Nodes whose formula, at these values, compares two nearly equal numbers (``==``,
    ``<`` ... on a near-tie) or takes ``%`` of a near-integer quotient. flopsheet decides these
    as LibreOffice does (equal within 2^-48, graph/evaluate.py); another spreadsheet program
    may round differently and take the other branch. Returns node -> explanation."""
    from flopsheet.evaluate import compile_expr
    probes = _TIE_PROBES.setdefault(lib, {})
    choice_syms = {symbol(n) for n, i in lib.inputs.items() if i.is_choice}
    out: dict[str, str] = {}
    for name in lib.order:
        if name in result.overridden:
            continue
        node = lib.nodes[name]
        if name not in probes and not _COMPARES.search(node.expr_text):
            probes[name] = []  # no comparison and no %: nothing to probe, no parse needed
        if name not in probes:
            found = []
            for atom in sp.preorder_traversal(node.expr):
                if isinstance(atom, sp.core.relational.Relational) and not (
                        atom.free_symbols & choice_syms):
                    found.append(("cmp", str(atom), compile_expr(node.deps, atom.lhs),
                                  compile_expr(node.deps, atom.rhs)))
                elif isinstance(atom, sp.Mod):
                    found.append(("mod", str(atom), compile_expr(node.deps, atom.args[0]),
                                  compile_expr(node.deps, atom.args[1])))
            probes[name] = found
        if not probes[name]:
            continue
        args = [result.values[d] for d in node.deps]
        for kind, text, fa, fb in probes[name]:
            with np.errstate(all="ignore"):
                a, b = float(np.asarray(fa(*args))), float(np.asarray(fb(*args)))
            if not (math.isfinite(a) and math.isfinite(b)):
                continue
            if kind == "cmp":
                if a != b and abs(a - b) <= NEAR_TIE * max(abs(a), abs(b)):
                    out[name] = (f"`{text}` compares {a!r} with {b!r}, equal to 13 digits")
                    break
            elif b != 0:
                q = a / b
                if q != round(q) and abs(q - round(q)) <= NEAR_TIE * max(1.0, abs(q)):
                    out[name] = f"`{text}` divides to {q!r}, an integer to 13 digits"
                    break
    return out


def _diff_form(expr):
    """The form the engine differentiates (max/min replaced by first-winner functions)."""
    from flopsheet import sensitivity as S
    argmax = getattr(S, "_argmax_form", None)
    return argmax(expr) if argmax else expr


def _partial_expr(form, dep: str):
    """d expr / d dep exactly as the engine's Differentiator forms it (graph/sensitivity.py):
    ceil/floor steps as 0, max/min through the first winning argument. ``form`` is
    :func:`_diff_form` of the expression."""
    from flopsheet import sensitivity as S
    d = S._strip_step_derivatives(sp.diff(form, symbol(dep)))
    for name, back in (("_FirstMax", sp.Max), ("_FirstMin", sp.Min)):
        cls = getattr(S, name, None)
        if cls is not None:
            d = d.replace(cls, back)
    return _clean(d)


def _clean(expr):
    """``Subs(0, x, ...)`` left behind when step derivatives are zeroed -> its value."""
    return expr.replace(lambda a: isinstance(a, sp.Subs) and a.expr.is_Number,
                        lambda a: a.expr)


# ----------------------------------------------------------------------- export
