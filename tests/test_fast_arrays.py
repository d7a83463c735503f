"""The fast array paths (issue 14) compute exactly what the general ones compute.

Comparing an array with one number is a threshold test against the number's tie band
(graph/spreadsheet.py); here it is held, bit for bit, to the general formula (``==`` or
``|a-b| < max(|a|,|b|)*2^-48``) on the doubles at and around every band edge, on signed
zeros, subnormals, huge values, NaN and infinities.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from flopsheet import spreadsheet as S


def _general(op, a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    eq = (a == b) | (np.abs(a - b) < np.maximum(np.abs(a), np.abs(b)) * S.APPROX)
    return {"eq": eq, "ne": ~eq, "lt": (a < b) & ~eq, "le": (a <= b) | eq,
            "gt": (a > b) & ~eq, "ge": (a >= b) | eq}[op]


FNS = {"eq": S.ss_eq, "ne": S.ss_ne, "lt": S.ss_lt, "le": S.ss_le, "gt": S.ss_gt, "ge": S.ss_ge}
CONSTANTS = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 3.0, 1e-300, 5e-324, -5e-324, 2.2250738585072014e-308,
             1.7976931348623157e308, -1e308, 0.1, 0.3, 8.0, 1024.0, 12288.0, 4.5e15, 2.0**53,
             1.0 - 2.0**-53, 2.0 + 2.0**-51]


def _around(c, k=80):
    """c, the k doubles either side of c and of its band edges, and the odd values."""
    pts = [c]
    for start in [c] + list(S.tie_band(c) or ()):
        for toward in (-math.inf, math.inf):
            x = start
            for _ in range(k):
                x = math.nextafter(x, toward)
                pts.append(x)
    pts += [0.0, -0.0, math.nan, math.inf, -math.inf, 2 * c, c / 2, -c, 1.0, -1.0]
    return np.array(pts, dtype=float)


RANDOM = ([float(x) for x in np.random.default_rng(7).standard_normal(20) * 1e3]
          + [float(s * 10.0 ** e) for s, e in zip(np.random.default_rng(8).choice([-1, 1], 20),
                                                  np.random.default_rng(9).uniform(-300, 300, 20))])


@pytest.mark.parametrize("c", CONSTANTS + RANDOM)
@np.errstate(all="ignore")
def test_threshold_comparison_equals_the_general_formula_bit_for_bit(c):
    a = _around(c)
    for op, fn in FNS.items():
        want = _general(op, a, c)
        assert np.array_equal(fn(a, c), want), (op, c)
        assert np.array_equal(fn(a, np.float64(c)), want), (op, c)
        assert np.array_equal(fn(a, np.array(c)), want), (op, c)  # a 0-d array is a number
        want_swapped = _general(op, c, a)
        assert np.array_equal(fn(c, a), want_swapped), (op, c, "swapped")


def test_tie_band_is_about_two_to_the_minus_48_wide():
    lo, hi = S.tie_band(1.0)
    assert lo < 1.0 < hi
    assert (hi - 1.0) == pytest.approx(2.0**-48, rel=0.1)
    assert (1.0 - lo) == pytest.approx(2.0**-48, rel=0.1)
    assert S.tie_band(0.0) == (0.0, 0.0)  # zero equals only (signed) zero
    assert S.tie_band(math.nan) is None and S.tie_band(math.inf) is None
    # the band holds what the general test calls equal, and nothing beyond
    assert _general("eq", np.array([lo, hi]), 1.0).all()
    assert not _general("eq", np.array([math.nextafter(lo, 0), math.nextafter(hi, 2)]), 1.0).any()


@np.errstate(all="ignore")
def test_general_path_still_used_for_arrays_on_both_sides_and_non_float_arrays():
    a = np.array([1.0, 2.0, 3.0])
    b = np.array([1.0 + 2.0**-50, 2.5, 2.0])
    assert S.ss_eq(a, b).tolist() == [True, False, False]
    assert S.ss_lt(np.array([1, 2, 3]), 2.0).tolist() == [True, False, False]  # int64 array
    assert S.ss_ge(a, math.nan).tolist() == [False, False, False]
    assert S.ss_ne(a, math.inf).tolist() == [True, True, True]
    assert S.ss_gt(np.float64(3.0), 2.0) and not S.ss_gt(2.0, 3.0)



@np.errstate(all="ignore")
def test_numbers_on_both_sides_compare_as_the_general_formula():
    vals = [0.0, -0.0, 1.0, 1.0 + 2.0**-50, 1.0 - 2.0**-47, -3.5, 1e308, math.inf, -math.inf,
            math.nan, 5e-324]
    for op, fn in FNS.items():
        for a in vals:
            for b in vals:
                for x, y in [(a, b), (np.float64(a), b), (np.array(a), np.float64(b))]:
                    got = fn(x, y)
                    assert type(got) is np.bool_ and got == _general(op, a, b), (op, a, b)


def _ceil_floor_reference(x, up):
    """ss_ceil / ss_floor as they were before the reductions pre-test (the exact path)."""
    x = np.asarray(x, dtype=float)
    if up:
        c = np.ceil(x)
        near = S._near(x, c - 1)
        return np.where(near, np.ceil(S._round15(x)), c) if near.any() else c
    f = np.floor(x)
    near = S._near(-x, -(f + 1))
    return np.where(near, np.floor(S._round15(x)), f) if near.any() else f


@np.errstate(all="ignore")
def test_ceil_floor_pre_test_never_skips_a_near_integer():
    rng = np.random.default_rng(3)
    ints = np.concatenate([np.arange(-50.0, 51.0), 2.0 ** np.arange(0, 60), [1e15, 1e16, 2**53 + 2]])
    near = [ints * (1 + k * 2.0**-52) for k in (-300, -40, -3, -1, 1, 3, 40, 300)]
    near += [ints + d for d in (1e-14, -1e-14, 1e-12, -1e-12, 0.1 * 3 / 0.1 - 3)]
    pools = [ints, rng.uniform(-1e3, 1e3, 500), rng.uniform(0, 1, 500) * 10.0 ** rng.integers(-20, 20, 500),
             0.1 * np.arange(1, 200) * 3 / 0.1] + near
    for pool in pools:
        for extra in ([], [math.nan], [math.inf, -math.inf], [12345678901234567.0]):
            x = np.concatenate([pool, extra])
            for up, fn in ((True, S.ss_ceil), (False, S.ss_floor)):
                got, want = fn(x), _ceil_floor_reference(x, up)
                assert np.array_equal(got, want, equal_nan=True), (up, x[~((got == want) | np.isnan(want))][:5])
                # the pre-test depends on the whole array; each element alone agrees with it
                one = np.array([fn(np.array([v]))[0] for v in x[:60]])
                assert np.array_equal(one, want[:60], equal_nan=True)
    assert S.ss_ceil(np.array([0.1 * 3 / 0.1]))[0] == 3.0  # IEEE alone: 4
    assert S.ss_floor(np.array([2.9999999999999996]))[0] == 3.0


@np.errstate(all="ignore")
def test_where_helper_equals_numpy_where():
    from flopsheet.codegen import _where
    n = 7
    arr, arr2 = np.linspace(-3, 3, n), np.arange(n, dtype=float)
    conds = [True, False, np.bool_(True), np.array(False), np.ones(n, bool), np.zeros(n, bool),
             np.arange(n) % 2 == 0]
    branches = [arr, arr2, 2.5, -0.0, np.float64(math.nan), np.array(4.0), np.arange(n),
                np.ones(n, bool), True, np.ones((1, n)), np.ones((2, 1))]
    for c in conds:
        for x in branches:
            for y in branches:
                try:
                    want = np.where(c, x, y)
                except ValueError:
                    continue
                got = _where(c, x, y)
                assert type(got) is type(want) and got.dtype == want.dtype, (c, x, y)
                assert got.shape == want.shape and np.array_equal(got, want, equal_nan=True)
                assert np.array_equal(np.signbit(got), np.signbit(want))

# ------------------------------------------------------------- the training graph, row by row
SEARCH_AXES = {"tp": [1, 2, 4, 8], "pp": [1, 2, 3, 4, 8, 16], "dp": [1, 2, 4, 8, 16, 64],
               "cp": [1, 2, 4], "vpp": [1, 2, 3, 4, 6, 8], "micro_batch": [1, 2, 4, 8],
               "recompute": ["none", "selective", "full"], "zero_stage": [0, 1, 2, 3],
               "sequence_parallel": ["no", "yes"]}


def _random_rows(model, scenario, n, seed, axes=SEARCH_AXES):
    from flopsheet.scenario import load_scenario, resolve
    sc = load_scenario(scenario)
    for k in axes:
        sc.values.pop(k, None)
    base = resolve(sc, model)
    rng = np.random.default_rng(seed)
    raw = {k: [v[i] for i in rng.integers(0, len(v), n)] for k, v in axes.items()}
    return base, raw, {k: model.encode(k, v) for k, v in raw.items()}


def _same(x, y):
    x, y = np.asarray(x), np.asarray(y)
    return x.shape == y.shape and np.array_equal(x, y, equal_nan=x.dtype.kind == "f")


@pytest.mark.parametrize("scenario", ["gpt3-175b-sc21", "mixtral-8x7b-h100-ep8"])
def test_unchecked_variant_equals_checked_on_every_node(scenario):
    """check=False runs the variant without non-finite checks: every node bit for bit."""
    from flopsheet.chunks import model_for
    model = model_for(None)
    base, _, enc = _random_rows(model, scenario, 400, 1)
    vals = {**base, **enc}
    with np.errstate(all="ignore"):
        checked = model.evaluate(vals, check=True, on_nonfinite="mask")
        fast = model.evaluate(vals, check=False)
    assert set(checked.values) == set(fast.values)
    bad = [n for n in model.lib.nodes if not _same(checked[n], fast[n])]
    assert not bad, bad[:5]


@pytest.mark.parametrize("scenario", ["gpt3-175b-sc21", "mixtral-8x7b-h100-ep8"])
def test_chunk_rows_equal_one_configuration_at_a_time(scenario):
    """run_chunk (arrays, fast variant, thresholds) == the scalar path, row by row."""
    from flopsheet.chunks import Job, model_for, run_chunk
    from flopsheet.grid import Axis, Grid
    model = model_for(None)
    base, raw, _ = _random_rows(model, scenario, 300, 2)
    grid = Grid([[Axis(k, list(v)) for k, v in raw.items()]]).encode(model)
    outs = ["step_time", "memory_per_gpu", "mfu", "step_bubble_time", "fits_in_memory"]
    job = Job(None, base, grid, outs)
    cols = run_chunk(job, 0, 300)
    checked = 0
    for i in range(0, 300, 7):
        one = model.evaluate({**base, **{k: model.encode(k, v[i]) for k, v in raw.items()}},
                             outputs=outs, check=False)
        for o in outs:
            assert _same(cols[o][i], float(one[o])), (o, i, cols[o][i], one[o])
        checked += 1
    assert checked == 43


def test_chunk_runner_keeps_freed_memory_unless_turned_off():
    import subprocess
    import sys
    code = ("from flopsheet.allocator import keep_freed_memory as k\n"
            "import ctypes\n"
            "glibc = hasattr(ctypes.CDLL(None), 'gnu_get_libc_version')\n"
            "print(k(), k(), glibc)")
    on = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    off = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"FLOPSHEET_MALLOC_TUNE": "0", "PATH": "/usr/bin:/bin"})
    done, again, glibc = on.stdout.split()
    assert done == again == glibc  # set once where glibc's mallopt exists, a no-op elsewhere
    assert off.stdout.split()[:2] == ["False", "False"]


def test_generated_array_code_never_writes_a_register_in_place():
    """_where returns a taken branch itself (no copy): sound only while the generated array
    code never writes into an array it holds (no augmented assignment, no out=)."""
    import re
    from flopsheet.chunks import model_for
    from flopsheet.emit import Gen
    model = model_for(None)
    prog = model.program(["step_time", "memory_per_gpu", "mfu"], frozenset(), False)
    order, trees, deps_of, bool_nodes = prog._spec() if callable(prog._spec) else prog._spec
    for checks in (True, False):
        src = Gen(True, deps_of, trees, checks=checks).program(order, prog.leaves, prog.names,
                                                               bool_nodes)
        assert "_where(" in src and len(src.splitlines()) > 1000
        assert not re.search(r"[-+*/%&|^]=[^=]|out=", src)
