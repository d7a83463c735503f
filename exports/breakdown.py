"""Breakdowns of a quantity into its parts, read from the formulas themselves.

A node whose formula is a plain sum of other quantities (``step_time =
step_compute_time + step_bubble_time + ...``) is broken down into those
terms; a term that is itself a plain sum is expanded once more when asked
(``model_state_memory`` -> weights, gradients, optimizer states). Terms that are
not a single name (a ``select``) are summed into ``other``, so the parts
always add up to the whole. Works for any formula library: nothing here
names a training quantity.
"""
from __future__ import annotations

import weakref

import numpy as np

from flopsheet.library import Library

OTHER = "other"

_TERMS: "weakref.WeakKeyDictionary[Library, dict]" = weakref.WeakKeyDictionary()


def _terms_of(node) -> list[str] | None:
    """The names a formula adds up (sympy: the terms of its Add that are single names)."""
    import sympy as sp
    from flopsheet.parser import symbol
    expr = node.expr
    if not isinstance(expr, sp.Add):
        return None
    args = set(expr.args)
    names = [d for d in node.deps if symbol(d) in args]  # in the order the formula names them
    return names if len(names) >= 2 else None


def _memo(lib: Library) -> dict:
    """node -> its sum terms, kept in the disk cache (a warm export parses no formula)."""
    memo = _TERMS.get(lib)
    if memo is None:
        from flopsheet import diskcache
        memo = {}
        saved = diskcache.load(diskcache.key("sum-terms", lib.digest_full))
        if isinstance(saved, dict):
            for n, t in saved.items():
                node = lib.nodes.get(n)
                if node is not None and (t is None or (
                        isinstance(t, list) and len(t) >= 2
                        and all(isinstance(x, str) and x in node.deps for x in t))):
                    memo[n] = t
        _TERMS[lib] = memo
    return memo


def sum_terms(lib: Library, name: str) -> list[str] | None:
    """The quantities ``name``'s formula adds up, or None when it is not a sum of names."""
    node = lib.nodes.get(name)
    if node is None or node.is_bool:
        return None
    memo = _memo(lib)
    if name not in memo:
        memo[name] = _terms_of(node)
        from flopsheet import diskcache
        diskcache.save(diskcache.key("sum-terms", lib.digest_full), memo)
    terms = memo[name]
    return list(terms) if terms is not None else None


def breakdown(lib: Library, values, name: str, depth: int = 1) -> dict[str, float]:
    """``{part: value}`` of quantity ``name`` (``values``: a Result or a mapping of evaluated
    values); parts that are sums themselves expand ``depth - 1`` more levels. Parts add up to
    the whole (an ``other`` part takes whatever the formula adds that is not a name)."""
    total = float(np.asarray(values[name]))
    terms = sum_terms(lib, name)
    if not terms:
        return {name: total}
    out: dict[str, float] = {}
    for t in terms:
        if depth > 1 and sum_terms(lib, t) and t not in getattr(values, "overridden", ()):
            sub = breakdown(lib, values, t, depth - 1)
            sub.pop(OTHER, None)  # what a part adds beyond its names is counted once, below
            out.update(sub)
        else:
            out[t] = float(np.asarray(values[t]))
    rest = total - sum(out.values())
    if abs(rest) > 1e-12 * max(abs(total), 1e-300):
        out[OTHER] = rest
    return out


__all__ = ["sum_terms", "breakdown", "OTHER"]
