"""Near-ties: comparisons and MOD that a spreadsheet rounding differently from LibreOffice
could decide the other way, flagged in the workbook.

The probes (both sides of each comparison, both operands of each ``%``) are found with sympy
once per formula library and kept as expression trees in the disk cache, like the engine's
non-smooth probes (graph/nonsmooth.py); one generated function per set of nodes evaluates
them all, so a warm export parses no formula.
"""
from __future__ import annotations

import math
import re
import weakref

import numpy as np

from flopsheet.evaluate import Result
from flopsheet.library import Library

#: Closeness under which spreadsheets and Python may disagree: LibreOffice treats numbers
#: within 2**-48 (3.6e-15) relative as equal in comparisons and snaps near-integer quotients
#: in MOD; Excel compares to 15 significant digits. Flag a margin above that.
NEAR_TIE = 1e-13

#: Formula text that may hold a comparison or MOD (select's `name=value` is a single `=`).
_COMPARES = re.compile(r"[<>%]|==|!=")

_KINDS = ("cmp", "mod")
_STATE: "weakref.WeakKeyDictionary[Library, dict]" = weakref.WeakKeyDictionary()


def _probe_atoms(lib: Library, name: str):
    """(kind, text, side_a, side_b) of each comparison (not on a choice) and each ``%`` in a
    node's formula, as sympy expressions."""
    import sympy as sp
    from flopsheet.parser import symbol
    node = lib.nodes[name]
    choice_syms = {symbol(n) for n, i in lib.inputs.items() if i.is_choice}
    for atom in sp.preorder_traversal(node.expr):
        if isinstance(atom, sp.core.relational.Relational) and not (
                atom.free_symbols & choice_syms):
            yield "cmp", str(atom), atom.lhs, atom.rhs
        elif isinstance(atom, sp.Mod):
            yield "mod", str(atom), atom.args[0], atom.args[1]


def _specs_for(lib: Library, name: str) -> list | None:
    """[kind, text, [tree_a, tree_b]] for each probe of a node's formula; None when a side has
    no expression tree (then it is probed through sympy, uncached)."""
    from flopsheet.compile import LowerError, lower
    deps = lib.nodes[name].deps
    try:
        return [[kind, text, [lower(a, deps), lower(b, deps)]]
                for kind, text, a, b in _probe_atoms(lib, name)]
    except (LowerError, KeyError):
        return None


def _specs(lib: Library) -> dict:
    """node -> its probe specs (only nodes whose formula has a comparison or %), from the
    disk cache, each entry checked; nodes not found there are probed on first need."""
    state = _STATE.setdefault(lib, {})
    specs = state.get("specs")
    if specs is None:
        from flopsheet import diskcache
        from flopsheet.compile import check_tree
        specs = {}
        saved = diskcache.load(diskcache.key("tie-probes", lib.digest_full))
        if isinstance(saved, dict):
            try:
                for n, items in saved.items():
                    if items is not None:
                        for kind, text, trees in items:
                            if kind not in _KINDS or not isinstance(text, str) \
                                    or len(trees) != 2:
                                raise ValueError("bad probe")
                            for t in trees:
                                check_tree(t, len(lib.nodes[n].deps))
                    specs[n] = items
            except (ValueError, KeyError, TypeError, AttributeError):
                specs = {}  # not what we wrote: probe again
        state["specs"] = specs
    new = [n for n in lib.order if n not in specs and _COMPARES.search(lib.nodes[n].expr_text)]
    if new:
        for n in new:
            specs[n] = _specs_for(lib, n)
        from flopsheet import diskcache
        diskcache.save(diskcache.key("tie-probes", lib.digest_full), specs)
    return specs


def _program(lib: Library, names: tuple):
    """One generated function returning both sides of every probe of ``names``."""
    progs = _STATE.setdefault(lib, {}).setdefault("programs", {})
    hit = progs.get(names)
    if hit is None:
        from flopsheet.nonsmooth import probe_program
        progs[names] = hit = probe_program(lib, names, _specs(lib), "tie-program")
    return hit


def _sympy_probes(lib: Library, name: str) -> list:
    """(kind, text, a, b) of a node whose probes have no tree: evaluated through sympy."""
    from flopsheet.compile import compile_expr
    deps = lib.nodes[name].deps
    return [(kind, text, compile_expr(deps, a), compile_expr(deps, b))
            for kind, text, a, b in _probe_atoms(lib, name)]


def _judge(kind: str, text: str, a: float, b: float) -> str | None:
    if not (math.isfinite(a) and math.isfinite(b)):
        return None
    if kind == "cmp":
        if a != b and abs(a - b) <= NEAR_TIE * max(abs(a), abs(b)):
            return f"`{text}` compares {a!r} with {b!r}, equal to 13 digits"
    elif b != 0:
        q = a / b
        if q != round(q) and abs(q - round(q)) <= NEAR_TIE * max(1.0, abs(q)):
            return f"`{text}` divides to {q!r}, an integer to 13 digits"
    return None


def near_ties(lib: Library, result: Result) -> dict[str, str]:
    """Nodes whose formula, at these values, compares two nearly equal numbers (``==``,
    ``<`` ... on a near-tie) or takes ``%`` of a near-integer quotient. flopsheet decides these
    as LibreOffice does (equal within 2^-48, graph/evaluate.py); another spreadsheet program
    may round differently and take the other branch. Returns node -> explanation (the first
    near-tie of each node's formula)."""
    specs = _specs(lib)
    probed = [n for n in lib.order if n not in result.overridden and specs.get(n, []) != []]
    found: dict[str, str] = {}
    names = tuple(n for n in probed if specs[n] is not None)
    if names:
        prog, layout = _program(lib, names)
        args = [result.values[x] for x in prog.leaves]
        with np.errstate(all="ignore"):
            vals = [float(np.asarray(v)) for v in prog.array([], args)]
        for k, (n, kind, text, _) in enumerate(layout):
            if n not in found:
                note = _judge(kind, text, vals[2 * k], vals[2 * k + 1])
                if note:
                    found[n] = note
    for n in probed:
        if specs[n] is None:
            args = [result.values[d] for d in lib.nodes[n].deps]
            for kind, text, fa, fb in _sympy_probes(lib, n):
                with np.errstate(all="ignore"):
                    a, b = float(np.asarray(fa(*args))), float(np.asarray(fb(*args)))
                note = _judge(kind, text, a, b)
                if note:
                    found[n] = note
                    break
    return {n: found[n] for n in lib.order if n in found}


__all__ = ["near_ties", "NEAR_TIE"]
