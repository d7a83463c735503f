"""Non-smooth spots of a gradient: where a derivative is one-sided, reported not hidden.

A ``ceil``/``floor`` whose argument sits on an integer, a ``max``/``min`` whose leading
arguments tie, an ``abs`` at zero, a condition on its boundary. Steps and conditions on
whole-number or categorical inputs alone are not flagged: they sit on their jumps by
construction and a derivative there is formal.

Each probe is a few expressions of its node's inputs (the ceil argument, the max
arguments, ``lhs - rhs`` and ``|lhs| + |rhs|`` of a comparison). They are found with sympy
once per library, kept as expression trees in the disk cache, and evaluated together by
one generated function per scope (graph/codegen.py).
"""
from __future__ import annotations

import numpy as np

TIE = 1e-9


def _specs_for(lib, name: str) -> list:
    """[kind, text, [tree, ...]] for each non-smooth spot of a node's formula."""
    import sympy as sp
    from .compile import lower
    from .parser import symbol
    node = lib.nodes[name]
    deps = node.deps
    choice = {symbol(n) for n, i in lib.inputs.items() if i.is_choice}
    discrete = {symbol(n) for n, i in lib.inputs.items() if i.is_choice or i.integer}
    out = []
    for atom in sp.preorder_traversal(node.expr):
        if atom.free_symbols and atom.free_symbols <= discrete:
            continue
        if isinstance(atom, (sp.ceiling, sp.floor)):
            fn = "ceil" if isinstance(atom, sp.ceiling) else "floor"
            out.append(["step", f"{fn}({atom.args[0]})", [lower(atom.args[0], deps)]])
        elif isinstance(atom, (sp.Max, sp.Min)):
            out.append(["tie", "max" if isinstance(atom, sp.Max) else "min",
                        [lower(a, deps) for a in atom.args]])
        elif isinstance(atom, sp.Abs):
            out.append(["abs", f"abs() at 0 in {atom}", [lower(atom.args[0], deps)]])
        elif isinstance(atom, sp.core.relational.Relational) and not (atom.free_symbols & choice):
            out.append(["boundary", str(atom), [lower(atom.lhs - atom.rhs, deps),
                                                lower(sp.Abs(atom.lhs) + sp.Abs(atom.rhs), deps)]])
    return out


def _specs(model) -> dict:
    """node -> its probe specs, loaded from the disk cache or found on first need."""
    specs = model.__dict__.get("_probe_specs")
    if specs is None:
        from . import diskcache
        from .compile import check_tree
        lib = model.lib
        specs = {}
        saved = diskcache.load(diskcache.key("probes", lib.digest_full))
        if isinstance(saved, dict):
            try:
                for n, items in saved.items():
                    for kind, text, trees in items:
                        if kind not in ("step", "tie", "abs", "boundary") or not isinstance(text, str):
                            raise ValueError("bad probe")
                        for t in trees:
                            check_tree(t, len(lib.nodes[n].deps))
                    specs[n] = items
            except (ValueError, KeyError, TypeError, AttributeError):
                specs = {}
        model.__dict__["_probe_specs"] = specs
    return specs


def _program(model, names: tuple):
    """One generated function returning every probe expression of ``names``' formulas."""
    progs = model.__dict__.setdefault("_probe_programs", {})
    hit = progs.get(names)
    if hit is not None:
        return hit
    from . import diskcache
    lib = model.lib
    specs = _specs(model)
    new = [n for n in names if n not in specs]
    for n in new:
        specs[n] = _specs_for(lib, n)
    if new:
        diskcache.save(diskcache.key("probes", lib.digest_full), specs)
    prog, layout = probe_program(lib, names, specs, "probe-program")
    progs[names] = hit = (prog, layout)
    return hit


def probe_program(lib, names, specs, cache_kind: str):
    """One generated function returning every expression tree of ``specs[n]`` ([kind, text,
    trees] per probe) for ``n`` in ``names``, and its layout (node, kind, text, tree count)."""
    from . import codegen, diskcache
    trees, deps_of, layout = {}, {}, []
    for n in names:
        for i, (kind, text, ts) in enumerate(specs[n]):
            for j, t in enumerate(ts):
                k = f"{n}\0{i}\0{j}"
                trees[k], deps_of[k] = t, lib.nodes[n].deps
            layout.append((n, kind, text, len(ts)))
    order = list(trees)
    leaves = list(dict.fromkeys(x for k in order for x in deps_of[k]))
    ckey = diskcache.key(cache_kind, "\0".join([lib.digest_full, *order]))
    prog = codegen.cached(ckey, lambda: codegen.build(order, trees, deps_of, leaves, order,
                                                      frozenset(order)))
    return prog, layout


def notes(model, result, scope) -> list[str]:
    """The non-smooth spots at ``result`` of the nodes in ``scope`` (not overridden)."""
    lib = model.lib
    names = tuple(n for n in lib.order if n in scope and n not in result.overridden)
    prog, layout = _program(model, names)
    if not layout:
        return []
    args = [result.values[x] for x in prog.leaves]
    try:
        vals = [float(v) for v in prog.scalar([float(a) for a in args])]
    except (ArithmeticError, ValueError, TypeError):
        with np.errstate(all="ignore"):
            vals = [float(v) for v in prog.array([], [np.float64(a) for a in args])]
    out, k = [], 0
    for name, kind, text, n in layout:
        v, k = vals[k:k + n], k + n
        note = _judge(kind, text, v)
        if note:
            out.append((name, f"{name}: {note}"))
    # a node's spots come in the order its formula was walked when the probes were cached -
    # by whichever process did it - so sort them: the same notes in the same order everywhere
    rank = {n: i for i, n in enumerate(names)}
    return [note for _, note in sorted(out, key=lambda x: (rank[x[0]], x[1]))]


def _judge(kind, text, v) -> str | None:
    if kind == "step":
        x = v[0]
        if np.isfinite(x) and abs(x - round(x)) <= TIE * max(abs(x), 1.0):
            return f"{text} = {round(x)} sits on a step; the derivative is one-sided"
    elif kind == "tie":
        s = sorted(v, reverse=(text == "max"))
        if abs(s[0] - s[1]) <= TIE * max(abs(s[0]), abs(s[1]), 1e-300):
            return f"{text}() arguments tie at {s[0]:.6g}; the derivative is one-sided"
    elif kind == "abs":
        if v[0] == 0.0:
            return text
    elif abs(v[0]) <= TIE * max(v[1], 1e-300):
        return f"condition `{text}` is on its boundary; the derivative is one-sided"
    return None
