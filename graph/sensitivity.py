"""Exact sensitivities by reverse-mode differentiation over the DAG.

Each edge ``dep -> node`` gets the partial derivative d(node)/d(dep) from sympy
(compiled once, on first use). The adjoint of the output is 1; walking the
output's ancestors in reverse topological order accumulates
``adj[dep] += adj[node] * d(node)/d(dep)``, so one pass gives the derivative
of the output with respect to every input (and every intermediate node).
Nothing is ever substituted into one big expression.

Non-smooth spots are reported, not hidden: ``ceil``/``floor`` are steps whose
derivative is taken as 0 and which are flagged when their argument sits on a
jump; a ``max``/``min`` whose leading arguments tie, an ``abs`` at zero, or an
``if_`` condition on its boundary is flagged. Steps and conditions that involve
only whole-number or categorical inputs are not flagged: they sit on their
jumps by construction and a derivative there is formal.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import sympy as sp

from .errors import FlopsheetError
from .evaluate import Model, Result, compile_expr
from .parser import symbol

TIE = 1e-9


@dataclass
class Sensitivity:
    output: str
    value: float
    derivatives: dict[str, float]  # d(output)/d(name) for inputs and overridden nodes
    node_derivatives: dict[str, float]  # d(output)/d(node) for intermediate nodes
    elasticities: dict[str, float]  # (x / y) dy/dx
    nonsmooth: list[str] = field(default_factory=list)

    def ranked(self, top: int | None = None) -> list[tuple[str, float, float]]:
        """(name, elasticity, derivative), largest |elasticity| first."""
        rows = sorted(self.elasticities.items(), key=lambda kv: -abs(kv[1]))
        rows = [(n, e, self.derivatives[n]) for n, e in rows]
        return rows[:top] if top else rows


def _fold_constant_conditions(expr):
    """``if_(12 < 8, a, b)``: a comparison of two constants becomes true/false before
    differentiating (sympy re-evaluates Piecewise conditions in diff and raises TypeError
    on an unevaluated constant comparison)."""
    return expr.replace(
        lambda e: isinstance(e, sp.core.relational.Relational) and e.lhs.is_Number
        and e.rhs.is_Number,
        lambda e: sp.true if bool(e.func(e.lhs, e.rhs)) else sp.false)


class _Winner(sp.Function):
    """1 where argument ``i`` (0-based) is the first maximum of ``sign*args``, else 0."""


class _FirstMax(sp.Function):
    """max() whose derivative follows the first winning argument (one branch on a tie)."""

    def fdiff(self, argindex=1):
        return _Winner(sp.Integer(argindex - 1), sp.Integer(1), *self.args)


class _FirstMin(sp.Function):
    """min() whose derivative follows the first winning argument (one branch on a tie)."""

    def fdiff(self, argindex=1):
        return _Winner(sp.Integer(argindex - 1), sp.Integer(-1), *self.args)


def _argmax_form(e: sp.Basic) -> sp.Basic:
    """Replace Max/Min (and Mod) before differentiating.

    sympy differentiates Max/Min through Heaviside products, which on a tie (two candidates
    with the same value, common where an unavailable algorithm falls back to another's time)
    add the tied slopes up instead of taking one.
    """
    e = e.replace(sp.Mod, lambda a, b: a - b * sp.floor(a / b, evaluate=False))  # MOD = a - b INT(a/b)
    return e.replace(sp.Max, _FirstMax).replace(sp.Min, _FirstMin)


def _strip_step_derivatives(e: sp.Basic) -> sp.Basic:
    """d ceil(x)/dx and d floor(x)/dx are 0 almost everywhere; sympy leaves them unevaluated."""
    return e.replace(lambda a: isinstance(a, (sp.Derivative, sp.Subs))
                     and a.has(sp.ceiling, sp.floor), lambda a: sp.S.Zero)


class Differentiator:
    """Per-edge partial derivatives of a compiled model, compiled lazily and cached."""

    def __init__(self, model: Model):
        self.model = model
        self._partials: dict[tuple[str, str], object] = {}
        self._probes: dict[str, list] = {}

    def partial(self, node: str, dep: str):
        key = (node, dep)
        fn = self._partials.get(key)
        if fn is None:
            n = self.model.lib.nodes[node]
            try:  # sympy raises TypeError/ValueError/KeyError on some odd formulas
                d = _strip_step_derivatives(sp.diff(_argmax_form(_fold_constant_conditions(
                    n.expr)), symbol(dep)))
                d = d.replace(_FirstMax, sp.Max).replace(_FirstMin, sp.Min)
                fn = self._partials[key] = compile_expr(n.deps, d)
            except (TypeError, ValueError, KeyError, ArithmeticError, RecursionError) as e:
                raise FlopsheetError(f"cannot differentiate with respect to `{dep}` "
                                     f"({type(e).__name__}: {e})", file=n.file, line=n.line,
                                     node=node) from None
        return fn

    def gradient(self, result: Result, output: str) -> Sensitivity:
        lib = self.model.lib
        item = lib.item(output)
        if output in lib.inputs or getattr(item, "is_bool", False):
            raise FlopsheetError(f"`{output}` is not a numeric formula node; sensitivity needs one",
                                 node=output)
        vals = result.values
        for k in lib.inputs:
            if np.ndim(vals.get(k, 0)) != 0:
                raise FlopsheetError("sensitivity needs one configuration, not arrays of values",
                                     node=k)
        y = float(vals[output])
        adj: dict[str, float] = {output: 1.0}
        scope = self._scope(output, result.overridden)
        choice = {n for n, i in lib.inputs.items() if i.is_choice}
        for name in reversed(lib.order):
            if name not in scope or name in result.overridden or name not in adj:
                continue
            a = adj[name]
            if a == 0.0:
                continue
            node = lib.nodes[name]
            args = [vals[d] for d in node.deps]
            for dep in node.deps:
                if dep in choice:
                    continue
                with np.errstate(all="ignore"):
                    g = float(self.partial(name, dep)(*args))
                adj[dep] = adj.get(dep, 0.0) + a * g
        pinned = {n for n, i in lib.inputs.items()
                  if i.bounds[0] is not None and i.bounds[0] == i.bounds[1]}  # unit constants
        leaves = {n: adj.get(n, 0.0) for n in scope
                  if (n in lib.inputs and n not in choice and n not in pinned)
                  or n in result.overridden}
        inner = {n: v for n, v in adj.items() if n in lib.nodes and n not in result.overridden}
        el = {}
        for n, d in leaves.items():
            x = float(vals[n])
            el[n] = d * x / y if y != 0 else float("nan")
        return Sensitivity(output, y, leaves, inner, el, self.nonsmooth(result, scope))

    def _scope(self, output: str, overridden) -> set[str]:
        """The output and what it depends on, not looking through overridden nodes."""
        g = self.model.lib.graph
        seen, stack = {output}, [output]
        while stack:
            n = stack.pop()
            if n in overridden and n != output:
                continue
            for p in g.predecessors(n):
                if p not in seen:
                    seen.add(p)
                    stack.append(p)
        return seen

    # ----------------------------------------------------------- non-smooth
    def nonsmooth(self, result: Result, scope) -> list[str]:
        lib = self.model.lib
        notes = []
        for name in lib.order:
            if name not in scope or name in result.overridden:
                continue
            for kind, probe in self._probes_for(name):
                args = [result.values[d] for d in lib.nodes[name].deps]
                with np.errstate(all="ignore"):
                    note = probe(args)
                if note:
                    notes.append(f"{name}: {note}")
        return notes

    def _probes_for(self, name: str):
        if name in self._probes:
            return self._probes[name]
        node = self.model.lib.nodes[name]
        deps = node.deps
        inputs = self.model.lib.inputs
        choice = {n for n, i in inputs.items() if i.is_choice}
        # steps and conditions on whole-number inputs alone (layers, tp, experts) sit on their
        # jumps by construction; a derivative there is formal, so they are not flagged
        discrete = {symbol(n) for n, i in inputs.items() if i.is_choice or i.integer}
        probes = []
        for atom in sp.preorder_traversal(node.expr):
            if atom.free_symbols and atom.free_symbols <= discrete:
                continue
            if isinstance(atom, (sp.ceiling, sp.floor)):
                probes.append(("step", _step_probe(atom, compile_expr(deps, atom.args[0]))))
            elif isinstance(atom, (sp.Max, sp.Min)):
                fns = [compile_expr(deps, a) for a in atom.args]
                probes.append(("tie", _tie_probe(atom, fns)))
            elif isinstance(atom, sp.Abs):
                probes.append(("abs", _zero_probe(f"abs() at 0 in {atom}",
                                                  compile_expr(deps, atom.args[0]))))
            elif isinstance(atom, sp.core.relational.Relational) and not (
                    atom.free_symbols & {symbol(c) for c in choice}):
                diff_fn = compile_expr(deps, atom.lhs - atom.rhs)
                scale_fn = compile_expr(deps, sp.Abs(atom.lhs) + sp.Abs(atom.rhs))
                probes.append(("boundary", _boundary_probe(atom, diff_fn, scale_fn)))
        self._probes[name] = probes
        return probes


def _step_probe(atom, arg_fn):
    """Flag a ceil/floor whose argument sits on a jump (an integer); elsewhere d/dx = 0 exactly."""
    text = f"{'ceil' if isinstance(atom, sp.ceiling) else 'floor'}({atom.args[0]})"

    def probe(args):
        x = float(arg_fn(*args))
        if abs(x - round(x)) <= TIE * max(abs(x), 1.0):
            return f"{text} = {round(x)} sits on a step; the derivative is one-sided"
        return None
    return probe


def _tie_probe(atom, fns):
    kind = "max" if isinstance(atom, sp.Max) else "min"

    def probe(args):
        v = sorted((float(f(*args)) for f in fns), reverse=(kind == "max"))
        if abs(v[0] - v[1]) <= TIE * max(abs(v[0]), abs(v[1]), 1e-300):
            return f"{kind}() arguments tie at {v[0]:.6g}; the derivative is one-sided"
        return None
    return probe


def _zero_probe(text, fn):
    return lambda args: text if float(fn(*args)) == 0.0 else None


def _boundary_probe(atom, diff_fn, scale_fn):
    def probe(args):
        d, s = float(diff_fn(*args)), float(scale_fn(*args))
        if abs(d) <= TIE * max(s, 1e-300):
            return f"condition `{atom}` is on its boundary; the derivative is one-sided"
        return None
    return probe
