"""Numeric evaluation: hand-checked values, bounds, overrides, vectorization, non-finite errors."""
from __future__ import annotations

import math

import numpy as np
import pytest

from flopsheet.errors import EvaluationError, InputValueError, UnknownNameError
from flopsheet.evaluate import Model, ss_ceil, ss_floor

from conftest import SMALL, lib_from


@pytest.fixture(scope="module")
def model():
    return Model(lib_from({"net/small": SMALL}))


def test_hand_checked_values(model):
    r = model.evaluate()
    n, bw = 2**30, 100e9
    assert r.scalar("ring_time") == pytest.approx(2 * 7 / 8 * n / bw, rel=1e-15)
    assert r.scalar("tree_time") == pytest.approx(2 * 3 * n / bw / 4, rel=1e-15)
    assert r.scalar("chosen_time") == r.scalar("ring_time")  # default algo = ring
    assert r.scalar("best_time") == min(r.scalar("ring_time"), r.scalar("tree_time"))


def test_choice_selects_branch(model):
    r = model.evaluate({"algo": model.encode("algo", "tree")})
    assert r.scalar("chosen_time") == r.scalar("tree_time")
    with pytest.raises(InputValueError, match="`star` is not a choice of `algo`"):
        model.encode("algo", "star")


def test_units_in_values(model):
    r = model.evaluate({"bytes_moved": model.encode("bytes_moved", "8 GiB"),
                        "link_bw": model.encode("link_bw", "400 Gbit/s")})
    assert r.scalar("ring_time") == pytest.approx(2 * 7 / 8 * 8 * 2**30 / 50e9)


@pytest.mark.parametrize("name, value, fragment", [
    ("ranks", 0, "outside the bounds [1, 1024]"),
    ("ranks", 4096, "outside the bounds"),
    ("ranks", 2.5, "whole number"),
    ("link_bw", -1, "outside the bounds [0, inf]"),
    ("link_bw", "1 GiB", "dimension byte, expected byte/s"),
    ("ranks", [1, 2, 0], "value #2 0 is outside"),
])
def test_bounds_and_types(model, name, value, fragment):
    with pytest.raises(InputValueError if "dimension" not in fragment else Exception) as ei:
        model.encode(name, value, file="s.yaml", line=3)
    assert fragment in str(ei.value)
    assert ei.value.file == "s.yaml" and ei.value.line == 3 and ei.value.node == name


def test_unknown_name(model):
    with pytest.raises(UnknownNameError, match="did you mean ranks"):
        model.encode("rank", 3)
    with pytest.raises(UnknownNameError):
        model.evaluate({"rank": 3})


def test_override_replaces_a_formula(model):
    r = model.evaluate({"ring_time": 1.0})
    assert "ring_time" in r.overridden
    assert r.scalar("ring_time") == 1.0
    assert r.scalar("best_time") == min(1.0, r.scalar("tree_time"))
    assert r.scalar("chosen_time") == 1.0


def test_outputs_limit_the_work(model):
    r = model.evaluate(outputs=["ring_time"])
    assert "ring_time" in r.values and "tree_time" not in r.values


def test_vectorized_equals_scalar(model):
    rng = np.random.default_rng(7)
    k = 2000
    values = {"bytes_moved": rng.uniform(1, 1e10, k), "link_bw": rng.uniform(1e9, 1e12, k),
              "ranks": rng.integers(1, 1025, k).astype(float),
              "algo": rng.integers(0, 2, k)}
    vec = model.evaluate({n: model.encode(n, v) for n, v in values.items()})
    for i in range(0, k, 97):
        one = model.evaluate({n: (v[i].item()) for n, v in values.items()})
        for name in ["ring_time", "tree_time", "chosen_time", "best_time", "steps"]:
            assert vec[name][i] == one.scalar(name), (name, i)


def test_million_configs_in_one_call(model):
    k = 1_000_000
    r = model.evaluate({"bytes_moved": np.linspace(1, 1e9, k)}, outputs=["best_time"],
                       keep_intermediates=False)
    assert r["best_time"].shape == (k,)
    assert "ring_time" not in r.values and "tree_time" not in r.values  # freed after last use
    assert r["best_time"][-1] == pytest.approx(min(2 * 7 / 8, 2 * 3 / 4) * 1e9 / 100e9)


def test_nonfinite_names_node_and_inputs():
    lib = lib_from({"a": """
    doc: x
    inputs:
      size: {unit: byte, default: 1, doc: d}
      speed: {unit: byte/s, default: 0, doc: d}
    nodes:
      duration: {expr: size/speed, unit: s, doc: d, source: s}
    """})
    m = Model(lib)
    with pytest.raises(EvaluationError) as ei:
        m.evaluate()
    e = ei.value
    assert e.node == "duration" and e.file == "a.yaml" and "size=1" in e.detail and "speed=0" in e.detail
    with pytest.raises(EvaluationError, match="configuration #2"):
        m.evaluate({"speed": np.array([1.0, 2.0, 0.0])})


@pytest.mark.parametrize("x", [0.1 * 3 / 0.1, 2.0000000000000004, -2.9999999999999996, 7.0, -7.0,
                               0.0, 1e20, 1e-20, 3.5, -3.5])
def test_ceil_floor_have_spreadsheet_semantics(x):
    r15 = float(f"{x:.15g}")
    assert ss_ceil(x) == math.ceil(r15)
    assert ss_floor(x) == math.floor(r15)


def test_ceil_of_formula_matches_libreoffice_convention():
    lib = lib_from({"a": """
    doc: x
    inputs:
      tenth: {unit: "1", default: 0.1, doc: d}
    nodes:
      chunks: {expr: ceil(tenth*3/tenth), unit: "1", doc: d, source: s}
    """})
    assert Model(lib).evaluate().scalar("chunks") == 3  # IEEE alone gives 4


def test_conditions_broadcast_scalars_with_arrays():
    lib = lib_from({"a": """
    doc: x
    inputs:
      width: {unit: "1", default: 2, doc: d}
      depth: {unit: "1", default: 3, doc: d}
      span: {unit: "1", default: 4, doc: d}
    nodes:
      both: {expr: width > 1 and depth > 1 and span > 1, unit: bool, doc: d, source: s}
      either: {expr: "if_(width > 5 or depth > 5 or span > 5, 1, 0)", unit: "1", doc: d, source: s}
    """})
    r = Model(lib).evaluate({"depth": np.array([0.0, 2.0, 9.0])})
    assert r["both"].tolist() == [False, True, True]
    assert r["either"].tolist() == [0, 0, 1]


def test_spreadsheet_semantics_of_comparisons_mod_and_constants():
    """Where IEEE and a spreadsheet differ, the engine follows the spreadsheet (LibreOffice)."""
    lib = lib_from({"a": """
    doc: x
    inputs:
      tenth: {unit: "1", default: 0.1, doc: d}
      third: {unit: "1", default: 0.3, doc: d}
    nodes:
      sum_is_third: {expr: "if_(tenth + 2*tenth == third, 1, 0)", unit: "1", doc: d, source: s}
      strictly_less: {expr: "if_(third < 3*tenth, 1, 0)", unit: "1", doc: d, source: s}
      remainder: {expr: third % tenth, unit: "1", doc: d, source: s}
      folded_floor: {expr: floor(2.9999999999999996), unit: "1", doc: d, source: s}
      constant_branch: {expr: "if_(12 < 8, 1, 2)", unit: "1", doc: d, source: s}
      huge_log: {expr: log(1e300), unit: "1", doc: d, source: s}
    """})
    r = Model(lib).evaluate()
    assert 0.1 + 0.2 != 0.3 and r.scalar("sum_is_third") == 1  # equal to 15 digits
    assert 0.3 < 3 * 0.1 and r.scalar("strictly_less") == 0  # 0.30000000000000004 is not more
    assert 0.3 % 0.1 == pytest.approx(0.1) and r.scalar("remainder") == 0  # MOD(0.3, 0.1) = 0
    assert r.scalar("folded_floor") == 3
    assert r.scalar("constant_branch") == 2
    assert r.scalar("huge_log") == pytest.approx(300 * math.log(10))


def test_spreadsheet_addition_snaps_cancelling_operands_to_zero():
    # LibreOffice's approxAdd: a sum whose operands cancel to within 2^-48 is exactly 0, so the
    # workbook's cached Adjoints values equal what LibreOffice recalculates
    from flopsheet.spreadsheet import s_add
    a = 4.7e6
    b = -(a + a * 2.0 ** -50)  # differs from -a by a residue far below 2^-48 of a
    assert a + b != 0 and s_add(a, b) == 0.0
    assert s_add(1.0, 2.0) == 3.0 and s_add(1.0, -0.5) == 0.5
    assert s_add(a, -a * (1 - 2.0 ** -40)) != 0.0  # a real difference stays
