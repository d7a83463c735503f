"""pint dimensionalities vs sympy.physics.units dimensions for flopsheet's unit check.

    python benchmarks/units_choice.py          # the 2,000-node synthetic library
    python benchmarks/units_choice.py --quick  # 400 nodes

The engine derives each formula's dimension by walking its checked syntax tree
with pint ``UnitsContainer`` dimensionalities (``flopsheet.units.infer``). This
script times that walk over every node of the synthetic library of
``bench_engine.py`` and compares it with three sympy.physics.units checkers:

A. engine   ``flopsheet.units.infer`` (pint ``UnitsContainer`` algebra, the
            project's rules: sums/min/max/select/if_ branches must agree,
            log/exp/ceil/floor arguments must be dimensionless, only literal 0
            fits any dimension, powers of dimensioned quantities need constant
            exponents).
B. sympy walk  the same AST walk and the same rules, but every dimension is a
            ``sympy.physics.units.Dimension`` in a custom ``DimensionSystem``
            with base dimensions time, information, compute, token, currency,
            length, energy; products/quotients/powers are Dimension
            arithmetic, comparisons are ``DimensionSystem.equivalent_dims``
            (sympy's own test, via ``get_dimensional_dependencies``). This is
            the faithful drop-in replacement of pint in the engine.
C. sympy check_dimensions  sympy's public checker
            ``sympy.physics.units.util.check_dimensions(expr, unit_system)`` on
            the parsed sympy formula, with each name replaced (``xreplace``) by
            a ``Quantity`` whose dimension is set (``set_global_dimension``) in
            a custom ``UnitSystem`` over that dimension system; the derived
            dimension for the declared-unit comparison comes from D.
D. sympy _collect_factor_and_dimension  the routine sympy uses to derive the
            dimension of a quantity expression (``UnitSystem.
            _collect_factor_and_dimension``), on the same substituted formula;
            it raises on mismatched addends, and its result is compared with the
            declared unit.

C and D are "use sympy's dimension checking as is": what you get when the
formulas are sympy expressions and one relies on sympy.physics.units.

Four planted errors (each in a small formula file with its own inputs, also
loaded through ``flopsheet.library.build_library`` to show the engine's message):
``log(bytes)``, ``max(USD, J)``, ``bytes + bytes/s``, ``count + tokens``.
A checker "catches" an error when it raises a dimension error or derives a
dimension different from the declared one; the table also says why, and how
many false alarms each checker raises on the clean library.
"""
from __future__ import annotations

import argparse
import ast
import collections
import os
import platform
import statistics
import sys
import time
from fractions import Fraction
from pathlib import Path

import sympy as sp
from sympy.physics.units import Dimension
from sympy.physics.units.dimensions import DimensionSystem
from sympy.physics.units.quantities import Quantity
from sympy.physics.units.unitsystem import UnitSystem
from sympy.physics.units.util import check_dimensions

sys.path.insert(0, str(Path(__file__).resolve().parent))
import synth_library  # noqa: E402

from flopsheet import units as fl_units  # noqa: E402
from flopsheet.errors import FlopsheetError  # noqa: E402
from flopsheet.library import build_library  # noqa: E402
from flopsheet.parser import parse  # noqa: E402

# ------------------------------------------------------------- sympy dimension system
_BASE = {"[time]": "time", "[information]": "information", "[compute]": "compute",
         "[token]": "token", "[currency]": "currency", "[length]": "length",
         "[energy]": "energy"}
BASE_DIMS = {k: Dimension(v) for k, v in _BASE.items()}
DIMSYS = DimensionSystem(list(BASE_DIMS.values()))
_UNIT_NAMES = {"[time]": "second", "[information]": "byte", "[compute]": "flop",
               "[token]": "token", "[currency]": "usd", "[length]": "meter", "[energy]": "joule"}
BASE_UNITS = {k: Quantity(f"fs_{v}") for k, v in _UNIT_NAMES.items()}
for _k, _q in BASE_UNITS.items():
    _q.set_global_dimension(BASE_DIMS[_k])
UNIT_SYSTEM = UnitSystem(base_units=tuple(BASE_UNITS.values()), name="flopsheet_bench",
                         dimension_system=DIMSYS)
ONE = Dimension(1)


def sympy_dim(pint_dim):
    """pint UnitsContainer (or "bool") -> sympy Dimension (or "bool")."""
    if pint_dim == fl_units.BOOL:
        return fl_units.BOOL
    expr = sp.S.One
    for k, v in pint_dim.items():
        e = sp.Rational(Fraction(v).limit_denominator(1000))
        expr *= BASE_DIMS[k].name ** e
    return Dimension(expr)


def sdim_str(d) -> str:
    if isinstance(d, str):
        return d
    deps = DIMSYS.get_dimensional_dependencies(d)
    name = lambda k: str(getattr(k, "name", k))  # noqa: E731
    return "1" if not deps else "*".join(f"{name(k)}^{v}" if v != 1 else name(k)
                                         for k, v in deps.items())


# ------------------------------------------------------- B: the same walk on sympy dimensions
class _Zero:
    pass


_ZERO = _Zero()


def infer_sympy(tree: ast.expr, dims, text: str):
    """flopsheet.units.infer, line for line, with sympy Dimension algebra."""

    def eq(a, b):
        if isinstance(a, str) or isinstance(b, str):
            return a == b
        return DIMSYS.equivalent_dims(a, b)

    def fail(n, why):
        seg = ast.get_source_segment(text, n) or ""
        return fl_units.UnitError(f"{why} in `{seg[:80]}`")

    def same(n, parts):
        real = [(p, d) for p, d in parts if d is not _ZERO]
        if not real:
            return _ZERO
        first_node, first = real[0]
        for p, d in real[1:]:
            if not eq(d, first):
                raise fail(n, f"mismatched units: `{ast.get_source_segment(text, first_node)}` is "
                              f"{sdim_str(first)} but `{ast.get_source_segment(text, p)}` is "
                              f"{sdim_str(d)}")
        return first

    def need(n, d, want, what):
        if d is _ZERO:
            return
        if not eq(d, want):
            raise fail(n, f"{what} must be {sdim_str(want)}, found {sdim_str(d)}")

    def is_one(d):
        return not isinstance(d, str) and DIMSYS.is_dimensionless(d)

    def const(n):
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
            return _ZERO if n.value == 0 else ONE
        if isinstance(n, ast.Name):
            return dims[n.id]
        if isinstance(n, ast.UnaryOp):
            d = walk(n.operand)
            if isinstance(n.op, ast.Not):
                need(n, d, fl_units.BOOL, "the operand of `not`")
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
            base, ex = walk(n.left), walk(n.right)
            need(n.right, ex, ONE, "an exponent")
            if base is _ZERO or is_one(base):
                return base
            c = const(n.right)
            if c is None:
                raise fail(n, f"a quantity in {sdim_str(base)} needs a constant exponent")
            return base ** sp.Rational(c.numerator, c.denominator)
        if isinstance(n, ast.Compare):
            same(n, [(n.left, walk(n.left))] + [(c, walk(c)) for c in n.comparators])
            return fl_units.BOOL
        if isinstance(n, ast.BoolOp):
            for v in n.values:
                need(v, walk(v), fl_units.BOOL, "each operand of and/or")
            return fl_units.BOOL
        if isinstance(n, ast.Call):
            f = n.func.id
            if f == "select":
                return same(n, [(kw.value, walk(kw.value)) for kw in n.keywords])
            if f == "if_":
                need(n.args[0], walk(n.args[0]), fl_units.BOOL, "the condition of if_")
                return same(n, [(a, walk(a)) for a in n.args[1:]])
            args = [(a, walk(a)) for a in n.args]
            if f in ("min", "max"):
                return same(n, args)
            if f == "abs":
                return args[0][1]
            if f == "sqrt":
                d = args[0][1]
                return d if d is _ZERO else d ** sp.Rational(1, 2)
            need(n, args[0][1], ONE, f"the argument of {f}()")
            return ONE
        raise fail(n, "cannot derive a unit for this syntax")

    d = walk(tree)
    return ONE if d is _ZERO else d


# ---------------------------------------------------------- C/D: sympy's own checkers
_QUANTITIES: dict[str, Quantity] = {}


def quantity_for(name, sdim):
    q = _QUANTITIES.get(name)
    if q is None:
        q = _QUANTITIES[name] = Quantity(f"q_{name}")
        q.set_global_dimension(sdim)
    return q


def to_quantities(expr, sdims, keep=frozenset()):
    """Names -> Quantities; condition nodes and categorical inputs (``keep``) stay symbols."""
    return expr.xreplace({s: quantity_for(s.name, sdims[s.name]) for s in expr.free_symbols
                          if s.name not in keep})


def native_collect(qexpr):
    """D: (derived Dimension or None, error text or None)."""
    try:
        r = UNIT_SYSTEM._collect_factor_and_dimension(qexpr)
    except Exception as e:  # noqa: BLE001 - we report what sympy does
        return None, f"{type(e).__name__}: {str(e)[:90]}"
    if not (isinstance(r, tuple) and len(r) == 2):
        return None, (f"returned a {len(r)}-tuple (Function branch returns one dimension per "
                      f"argument)")
    return r[1], None


def native_check(qexpr):
    """C: error text or None."""
    try:
        check_dimensions(qexpr, UNIT_SYSTEM)
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {str(e)[:90]}"
    return None


# --------------------------------------------------------------------------- driver
def median_time(fn, repeats):
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts), ts


def fmt_t(s):
    return f"{s:.2f} s" if s >= 1 else f"{s * 1e3:.1f} ms"


PLANTED_INPUTS = {
    "planted_buffer_bytes": "byte",
    "planted_price_usd": "USD",
    "planted_energy_joules": "J",
    "planted_link_bandwidth": "byte/s",
    "planted_prompt_tokens": "token",
    "planted_request_count": "1",
}
PLANTED = [  # (label, node name, formula, declared unit)
    ("log of bytes", "planted_log_buffer", "log(planted_buffer_bytes)", "1"),
    ("max(USD, J)", "planted_max_cost", "max(planted_price_usd, planted_energy_joules)", "USD"),
    ("byte + byte/s", "planted_bytes_plus_bw", "planted_buffer_bytes + planted_link_bandwidth",
     "byte"),
    ("count + tokens", "planted_tokens_plus_count",
     "planted_prompt_tokens + planted_request_count", "token"),
]


def planted_file(node, expr, unit):
    lines = ["doc: Planted unit error.", "inputs:"]
    for n, u in PLANTED_INPUTS.items():
        lines += [f"  {n}:", f'    unit: "{u}"', "    default: 2", f"    doc: Planted input {n}."]
    lines += ["nodes:", f"  {node}:", f'    expr: "{expr}"', f'    unit: "{unit}"',
              "    doc: Planted error.", '    source: "derived: planted"']
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seed", type=int, default=20240611)
    args = ap.parse_args()
    n_nodes, n_inputs, levels, n_files = ((400, 60, 10, 8) if args.quick else (2000, 200, 20, 20))
    t_script = time.perf_counter()
    import pint
    commit = synth_library.describe_commit()
    print("units: pint dimensionalities vs sympy.physics.units dimensions")
    print(f"machine: nproc={os.cpu_count()}  python {platform.python_version()}  "
          f"sympy {sp.__version__}  pint {pint.__version__}  flopsheet commit {commit}  "
          f"loadavg(1m) {os.getloadavg()[0]:.2f}")

    raw, info = synth_library.generate(n_nodes, n_inputs, n_files, levels, args.seed)
    lib = build_library(raw)
    nodes = list(lib.nodes.values())
    pdims = {n: i.dim for n, i in lib.inputs.items()}
    pdims.update({n: i.dim for n, i in lib.nodes.items()})
    t = time.perf_counter()
    sdims = {n: sympy_dim(d) for n, d in pdims.items()}
    t_conv = time.perf_counter() - t
    print(f"library: {len(lib.inputs)} inputs, {len(nodes)} nodes "
          f"({sum(1 for n in nodes if not n.is_bool and n.dim != fl_units.DIMENSIONLESS)} with a "
          f"dimension, {sum(1 for n in nodes if n.is_bool)} conditions)")

    # --- A: engine walk
    def walk_pint():
        bad = 0
        for node in nodes:
            if fl_units.infer(node.parsed.tree, pdims, node.parsed.text) != node.dim:
                bad += 1
        return bad

    # --- B: sympy walk
    def walk_sympy():
        bad = 0
        for node in nodes:
            try:
                found = infer_sympy(node.parsed.tree, sdims, node.parsed.text)
            except fl_units.UnitError:
                bad += 1
                continue
            want = sdims[node.name]
            if isinstance(found, str) or isinstance(want, str):
                bad += found != want
            elif not DIMSYS.equivalent_dims(found, want):
                bad += 1
        return bad

    bad_a, bad_b = walk_pint(), walk_sympy()
    reps = 5
    t_a, ts_a = median_time(walk_pint, reps)
    t_b, ts_b = median_time(walk_sympy, reps)

    # --- C/D: sympy's own checkers on the substituted sympy formulas
    numeric = [n for n in nodes if not n.is_bool]
    t = time.perf_counter()
    keep = frozenset([n for n, i in lib.inputs.items() if i.is_choice]
                     + [n.name for n in nodes if n.is_bool])
    qexprs = {n.name: to_quantities(n.expr, sdims, keep) for n in numeric}
    t_sub = time.perf_counter() - t

    def run_native():
        c_bad, d_bad = collections.Counter(), collections.Counter()
        for n in numeric:
            q = qexprs[n.name]
            err = native_check(q)
            if err:
                c_bad[(info.quantities[n.name].kind, err.split(":")[0])] += 1
            dim, err = native_collect(q)
            if err:
                d_bad[(info.quantities[n.name].kind, err.split(":")[0])] += 1
            elif not DIMSYS.equivalent_dims(dim, sdims[n.name]):
                d_bad[(info.quantities[n.name].kind, "derived dim != declared")] += 1
        return c_bad, d_bad

    c_bad, d_bad = run_native()

    def time_c():
        for n in numeric:
            native_check(qexprs[n.name])

    def time_d():
        for n in numeric:
            native_collect(qexprs[n.name])

    t_c, _ = median_time(time_c, 3)
    t_d, _ = median_time(time_d, 3)

    # --- planted errors
    pl_dims_p = {n: fl_units.declared_dim(u) for n, u in PLANTED_INPUTS.items()}
    pl_dims_s = {n: sympy_dim(d) for n, d in pl_dims_p.items()}
    table = []
    for label, node, expr, unit in PLANTED:
        text = planted_file(node, expr, unit)
        try:
            build_library([(f"planted/{node}.yaml", f"planted/{node}", text)])
            loader = "accepted"
        except FlopsheetError as e:
            loader = f"{type(e).__name__}: {e.detail}"
        parsed = parse(expr)
        declared_p = fl_units.declared_dim(unit)
        declared_s = sympy_dim(declared_p)
        # A
        try:
            found = fl_units.infer(parsed.tree, pl_dims_p, parsed.text)
            a = ("caught", f"derived {fl_units.dim_str(found)} != declared {unit}") \
                if found != declared_p else ("MISSED", f"derived {fl_units.dim_str(found)}")
        except fl_units.UnitError as e:
            a = ("caught", e.detail)
        # B
        try:
            found = infer_sympy(parsed.tree, pl_dims_s, parsed.text)
            b = ("caught", f"derived {sdim_str(found)} != declared {unit}") \
                if not DIMSYS.equivalent_dims(found, declared_s) \
                else ("MISSED", f"derived {sdim_str(found)}")
        except fl_units.UnitError as e:
            b = ("caught", str(e))
        # C, D
        q = to_quantities(parsed.expr, pl_dims_s)
        err = native_check(q)
        c = ("caught", err) if err else ("MISSED", "no error (only sums are checked)")
        dim, err = native_collect(q)
        if err:
            d = ("caught", err)
        elif not DIMSYS.equivalent_dims(dim, declared_s):
            d = ("flagged", f"derived {sdim_str(dim)} != declared {unit} (derived dim is wrong)")
        else:
            d = ("MISSED", f"derived {sdim_str(dim)}")
        table.append((label, f"{expr}  [declared {unit}]", loader, a, b, c, d))

    # ------------------------------------------------------------------- report
    n = len(nodes)
    print(f"\ntime to derive and check the dimension of all {n} nodes (median of {reps}):")
    print(f"  A engine walk, pint UnitsContainer          {fmt_t(t_a):>10s}  "
          f"({t_a / n * 1e6:6.1f} us/node)  false alarms on the clean library: {bad_a}")
    print(f"  B same walk, sympy Dimension + DimensionSystem {fmt_t(t_b):>7s}  "
          f"({t_b / n * 1e6:6.1f} us/node)  false alarms: {bad_b}   "
          f"-> {t_b / t_a:.0f}x the pint walk")
    print(f"  C sympy check_dimensions on Quantity exprs  {fmt_t(t_c):>10s}  "
          f"({t_c / len(numeric) * 1e6:6.1f} us/node, {len(numeric)} numeric nodes; "
          f"plus {fmt_t(t_sub)} once to create Quantities and xreplace them into the formulas)")
    print(f"  D sympy _collect_factor_and_dimension       {fmt_t(t_d):>10s}  "
          f"({t_d / len(numeric) * 1e6:6.1f} us/node)")
    print(f"  (converting {len(sdims)} pint dimensions to sympy Dimensions: {fmt_t(t_conv)})")

    def show(counter, title):
        total = sum(counter.values())
        print(f"\n{title}: {total} of {len(numeric)} numeric nodes")
        for (kind, why), k in counter.most_common(12):
            print(f"    {k:5d}  template {kind:13s} {why}")

    show(c_bad, "false alarms of C (sympy check_dimensions) on the clean library")
    show(d_bad, "false alarms of D (sympy _collect_factor_and_dimension) on the clean library")

    print("\nplanted errors (each also loaded through build_library: the engine's message):")
    for label, expr, loader, *_ in table:
        print(f"  {label:15s} {expr}\n      build_library -> {loader}")
    print("\n" + "=" * 104)
    heads = ["A engine (pint)", "B sympy walk", "C check_dimensions", "D _collect_factor..."]
    print(f"{'planted error':16s}" + "".join(f"{h:>22s}" for h in heads))
    print("-" * 104)
    for label, _expr, _loader, *cells in table:
        print(f"{label:16s}" + "".join(f"{c[0]:>22s}" for c in cells))
    print(f"{'false alarms':16s}" + "".join(f"{x:>22s}" for x in (
        f"{bad_a}/{n}", f"{bad_b}/{n}", f"{sum(c_bad.values())}/{len(numeric)}",
        f"{sum(d_bad.values())}/{len(numeric)}")))
    print(f"{'time, all nodes':16s}" + "".join(f"{fmt_t(x):>22s}" for x in (t_a, t_b, t_c, t_d)))
    print("=" * 104)
    print("why:")
    for label, _expr, _loader, *cells in table:
        for h, c in zip("ABCD", cells):
            print(f"  {label:15s} {h}: {c[0]:7s} {c[1][:150]}")
    print(f"\ntotal script time {fmt_t(time.perf_counter() - t_script)}")


if __name__ == "__main__":
    main()
