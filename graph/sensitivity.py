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

from .compile import compile_expr
from .errors import FlopsheetError
from .evaluate import Model, Result
from .nonsmooth import TIE  # noqa: F401 - the tie tolerance, public here as before
from .parser import sp, symbol  # sp: sympy, imported on first use


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


_CLASSES: dict = {}


def _sympy_classes() -> dict:
    """The sympy functions max/min are differentiated through (made on first use, so that
    importing this module does not import sympy)."""
    if not _CLASSES:
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

        _CLASSES.update(_Winner=_Winner, _FirstMax=_FirstMax, _FirstMin=_FirstMin)
    return _CLASSES


def __getattr__(name):  # sensitivity._Winner etc., as before
    if name in ("_Winner", "_FirstMax", "_FirstMin"):
        return _sympy_classes()[name]
    raise AttributeError(name)


def _argmax_form(e: sp.Basic) -> sp.Basic:
    """Replace Max/Min (and Mod) before differentiating.

    sympy differentiates Max/Min through Heaviside products, which on a tie (two candidates
    with the same value, common where an unavailable algorithm falls back to another's time)
    add the tied slopes up instead of taking one.
    """
    e = e.replace(sp.Mod, lambda a, b: a - b * sp.floor(a / b, evaluate=False))  # MOD = a - b INT(a/b)
    c = _sympy_classes()
    return e.replace(sp.Max, c["_FirstMax"]).replace(sp.Min, c["_FirstMin"])


def _strip_step_derivatives(e: sp.Basic) -> sp.Basic:
    """d ceil(x)/dx and d floor(x)/dx are 0 almost everywhere; sympy leaves them unevaluated."""
    return e.replace(lambda a: isinstance(a, (sp.Derivative, sp.Subs))
                     and a.has(sp.ceiling, sp.floor), lambda a: sp.S.Zero)


def _fold_constant_conditions(expr):
    """``if_(12 < 8, a, b)``: a comparison of two constants becomes true/false before
    differentiating (sympy re-evaluates Piecewise conditions in diff and raises TypeError
    on an unevaluated constant comparison)."""
    return expr.replace(
        lambda e: isinstance(e, sp.core.relational.Relational) and e.lhs.is_Number
        and e.rhs.is_Number,
        lambda e: sp.true if bool(e.func(e.lhs, e.rhs)) else sp.false)


def partial_expr(lib, node: str, dep: str) -> sp.Basic:
    """d(node)/d(dep) as a sympy expression: ceil/floor steps as 0, max/min through the first
    winning argument. Cached per library and shared by every user (the gradient here, the
    Partials sheet of the Excel export), so each edge is differentiated once per process."""
    cache = lib.__dict__.setdefault("_partial_exprs", {})
    d = cache.get((node, dep))
    if d is None:
        d = cache[(node, dep)] = _saved_partial(lib, node, dep)
    if d is None:
        n = lib.nodes[node]
        forms = lib.__dict__.setdefault("_diff_forms", {})
        try:  # sympy raises TypeError/ValueError/KeyError on some odd formulas
            form = forms.get(node)
            if form is None:
                form = forms[node] = _argmax_form(_fold_constant_conditions(n.expr))
            d = _strip_step_derivatives(sp.diff(form, symbol(dep)))
            c = _sympy_classes()
            d = d.replace(c["_FirstMax"], sp.Max).replace(c["_FirstMin"], sp.Min)
            # Subs(0, x, ...) left behind when step derivatives are zeroed -> its value
            d = d.replace(lambda a: isinstance(a, sp.Subs) and a.expr.is_Number, lambda a: a.expr)
        except (TypeError, ValueError, KeyError, ArithmeticError, RecursionError) as e:
            raise FlopsheetError(f"cannot differentiate with respect to `{dep}` "
                                 f"({type(e).__name__}: {e})", file=n.file, line=n.line,
                                 node=node) from None
        cache[(node, dep)] = d
        _remember_partial(lib, node, dep, d)
    return d


# symbolic partials kept on disk (graph/symtree.py: exact, rebuilt without eval)
_DIRTY: dict[int, object] = {}


def _saved(lib) -> dict:
    saved = lib.__dict__.get("_partials_saved")
    if saved is None:
        from . import diskcache
        saved = diskcache.load(diskcache.key("partial-exprs", lib.digest_full))
        saved = lib.__dict__["_partials_saved"] = saved if isinstance(saved, dict) else {}
    return saved


def _saved_partial(lib, node: str, dep: str):
    t = _saved(lib).get(f"{node}\0{dep}")
    if t is None:
        return None
    from . import symtree
    try:
        e = symtree.load(t)
    except (ValueError, TypeError, AttributeError):
        return None
    allowed = {symbol(x) for x in lib.nodes[node].deps}
    return e if e.free_symbols <= allowed else None


def _remember_partial(lib, node: str, dep: str, d) -> None:
    from . import symtree
    t = symtree.dump(d)
    if t is None:
        return
    _saved(lib)[f"{node}\0{dep}"] = t
    if not _DIRTY:
        import atexit
        atexit.register(flush)
    _DIRTY[id(lib)] = lib


def flush() -> None:
    """Write the symbolic partials derived in this process to the disk cache."""
    from . import diskcache
    for lib in list(_DIRTY.values()):
        diskcache.save(diskcache.key("partial-exprs", lib.digest_full), _saved(lib))
    _DIRTY.clear()


def _partial_trees(model) -> dict:
    """Expression trees of the partials (graph/compile.py), kept on disk between runs."""
    trees = model.__dict__.get("_partial_trees")
    if trees is None:
        from . import diskcache
        from .compile import check_tree
        lib = model.lib
        saved = diskcache.load(diskcache.key("partials", lib.digest_full))
        trees = {}
        if isinstance(saved, dict):
            try:
                for k, t in saved.items():
                    n, _, d = k.partition("\0")
                    if t is not None:
                        check_tree(t, len(lib.nodes[n].deps))
                    if d not in lib.nodes[n].deps:
                        raise ValueError("not an edge")
                    trees[k] = t
            except (ValueError, KeyError, TypeError, AttributeError):
                trees = {}  # not what we wrote: derive again
        model.__dict__["_partial_trees"] = trees
    return trees


def _save_partial_trees(model) -> None:
    from . import diskcache
    diskcache.save(diskcache.key("partials", model.lib.digest_full), model._partial_trees)


class Differentiator:
    """Per-edge partial derivatives of a compiled model, compiled lazily and cached on the
    model (a new Differentiator of the same model reuses them)."""

    def __init__(self, model: Model):
        self.model = model
        self._partials: dict[tuple[str, str], object] = model.__dict__.setdefault(
            "_partial_fns", {})

    def partial(self, node: str, dep: str):
        key = (node, dep)
        fn = self._partials.get(key)
        if fn is None:
            d = partial_expr(self.model.lib, node, dep)
            fn = self._partials[key] = compile_expr(self.model.lib.nodes[node].deps, d)
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
        partials = self._partial_values(output, result, scope, choice)
        with np.errstate(all="ignore"):
            for name in reversed(lib.order):
                if name not in scope or name in result.overridden or name not in adj:
                    continue
                a = adj[name]
                if a == 0.0:
                    continue
                node = lib.nodes[name]
                for dep in node.deps:
                    if dep in choice:
                        continue
                    g = partials.get((name, dep))
                    if g is None:  # a derivative the code generator has no form for
                        g = float(self.partial(name, dep)(*[vals[d] for d in node.deps]))
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
        # a kink in a node the output does not move with (adjoint 0: a branch not taken, a
        # group this layout does not use) cannot make the output's derivative one-sided
        moving = {n for n in scope if adj.get(n, 0.0) != 0.0}
        return Sensitivity(output, y, leaves, inner, el, self.nonsmooth(result, moving))

    def _partial_values(self, output, result, scope, choice) -> dict[tuple[str, str], float]:
        """Every partial the gradient may need, from one generated function per scope.
        ``output`` names the scope (an output, or a tuple of them for the workbook's union)."""
        key = (output, result.overridden)
        progs = self.model.__dict__.setdefault("_gradient_programs", {})
        hit = progs.get(key)
        if hit is None:
            hit = progs[key] = self._edge_program(scope, result.overridden, choice)
        prog, edges = hit
        vals = result.values
        args = [vals[x] for x in prog.leaves]
        try:
            out = prog.scalar([float(a) for a in args])
        except (ArithmeticError, ValueError, TypeError):  # e.g. 1/0: numpy gives inf instead
            with np.errstate(all="ignore"):
                out = [float(v) for v in prog.array([], [np.float64(a) for a in args])]
        return dict(zip(edges, out))

    def _edge_program(self, scope, overridden, choice):
        from . import codegen, diskcache
        from .compile import LowerError, lower
        lib = self.model.lib
        trees = _partial_trees(self.model)
        edges, names, deps_of, todo = [], {}, {}, False
        for n in lib.order:
            if n not in scope or n in overridden or lib.nodes[n].is_bool:
                continue
            for d in lib.nodes[n].deps:
                if d in choice:
                    continue
                k = f"{n}\0{d}"
                if k not in trees:
                    try:
                        trees[k] = lower(partial_expr(lib, n, d), lib.nodes[n].deps)
                    except LowerError:
                        trees[k] = None
                    todo = True
                if trees[k] is not None:
                    edges.append((n, d))
                    names[k] = trees[k]
                    deps_of[k] = lib.nodes[n].deps
        if todo:
            _save_partial_trees(self.model)
        order = list(names)
        leaves = list(dict.fromkeys(x for k in order for x in deps_of[k]))
        ckey = diskcache.key("gradient", "\0".join([lib.digest_full, *order]))
        prog = codegen.cached(ckey, lambda: codegen.build(order, names, deps_of, leaves, order,
                                                          frozenset(order)))
        return prog, edges

    def _scope(self, output: str, overridden) -> set[str]:
        """The output and what it depends on, not looking through overridden nodes."""
        nodes = self.model.lib.nodes
        seen, stack = {output}, [output]
        while stack:
            n = stack.pop()
            if (n in overridden and n != output) or n not in nodes:
                continue
            for p in nodes[n].deps:
                if p not in seen:
                    seen.add(p)
                    stack.append(p)
        return seen

    # ----------------------------------------------------------- non-smooth
    def nonsmooth(self, result: Result, scope) -> list[str]:
        """Where the derivative is one-sided at ``result`` (graph/nonsmooth.py)."""
        from .nonsmooth import notes
        return notes(self.model, result, scope)
