"""Non-finite intermediates are refused where a spreadsheet shows an error, never swallowed.

Each case below returned a finite number before the fused evaluator (min(inf, 5) is 5,
a comparison with NaN is False, 1/inf and exp(-inf) are 0); LibreOffice shows #DIV/0!,
#NUM! or Err:502 for all of them. Branches of if_ that are not taken are not evaluated,
as in a spreadsheet, so a non-finite value there is fine.
"""
from __future__ import annotations

import numpy as np
import pytest

from flopsheet.errors import EvaluationError
from flopsheet.evaluate import Model

from conftest import lib_from

LIB = """
doc: Non-finite cases.
inputs:
  x: {unit: 1, default: 1, doc: d, source: test}
  z: {unit: 1, default: 0, doc: d, source: test}
  path_kind: {choices: [plain, guarded], default: plain, doc: d, source: test}
nodes:
  capped_inverse: {expr: "min(1/x, 5)", unit: 1, doc: d, source: s}
  root_test: {expr: "if_(sqrt(x - 5) > 1, 2, 3)", unit: 1, doc: d, source: s}
  log_test: {expr: "if_(log(x) < 0, 1, 2)", unit: 1, doc: d, source: s}
  exp_inverse: {expr: "exp(-1/x)", unit: 1, doc: d, source: s}
  overflow_inverse: {expr: "1/(exp(x) + 1)", unit: 1, doc: d, source: s}
  power_capped: {expr: "min(x**40, 1)", unit: 1, doc: d, source: s}
  zero_times: {expr: "z*log(x)", unit: 1, doc: d, source: s}
  guarded: {expr: "if_(x > 0, min(1/x, 5), 0)", unit: 1, doc: d, source: s}
  chosen: {expr: "select(path_kind, plain = min(1/x, 5), guarded = 0)", unit: 1, doc: d, source: s}
"""


@pytest.fixture(scope="module")
def model():
    return Model(lib_from({"nf": LIB}))


@pytest.mark.parametrize("node, x, inner", [
    ("capped_inverse", 0.0, "1/x"),
    ("root_test", 1.0, "sqrt(x"),
    ("log_test", 0.0, "log(x)"),
    ("exp_inverse", 0.0, "1/x"),
    ("overflow_inverse", 1000.0, "exp(x)"),
    ("power_capped", 1e10, "x**40"),
])
def test_swallowed_intermediate_is_refused(model, node, x, inner):
    with pytest.raises(EvaluationError) as ei:
        model.evaluate({"x": x}, outputs=[node])
    e = ei.value
    assert e.node == node and e.file == "nf.yaml" and inner in e.detail
    assert f"x={x:.6g}" in e.detail and "spreadsheet" in e.detail


def test_zero_times_infinity_is_refused(model):
    with pytest.raises(EvaluationError, match="zero_times: evaluates to nan"):
        model.evaluate({"x": 0.0, "z": 0.0}, outputs=["zero_times"])


def test_finite_cases_still_evaluate(model):
    r = model.evaluate({"x": 4.0}, outputs=["capped_inverse", "log_test", "exp_inverse",
                                            "power_capped"])
    assert r.scalar("capped_inverse") == 0.25
    assert r.scalar("log_test") == 2.0 and r.scalar("exp_inverse") == pytest.approx(np.exp(-0.25))
    assert r.scalar("power_capped") == 1.0
    assert model.evaluate({"x": 30.0}, outputs=["root_test"]).scalar("root_test") == 2.0


def test_branch_not_taken_is_not_evaluated(model):
    assert model.evaluate({"x": 0.0}, outputs=["guarded"]).scalar("guarded") == 0.0
    r = model.evaluate({"x": np.array([0.0, 2.0, -1.0])}, outputs=["guarded"])
    assert r["guarded"].tolist() == [0.0, 0.5, 0.0]
    assert model.evaluate({"x": 0.0, "path_kind": 1}, outputs=["chosen"]).scalar("chosen") == 0.0
    with pytest.raises(EvaluationError, match="chosen"):
        model.evaluate({"x": 0.0, "path_kind": 0}, outputs=["chosen"])


def test_arrays_name_the_rows(model):
    with pytest.raises(EvaluationError) as ei:
        model.evaluate({"x": np.array([1.0, 0.0, 2.0, 0.0])}, outputs=["capped_inverse"])
    assert "configuration #1" in ei.value.detail and "2 of 4 rows: #1, #3" in ei.value.detail
    # a branch taken only on some rows is checked on those rows only
    with pytest.raises(EvaluationError, match="configuration #1"):
        model.evaluate({"x": np.array([0.0, 0.0]), "path_kind": np.array([1, 0])},
                       outputs=["chosen"])


def test_mask_mode_returns_validity_and_reasons(model):
    x = np.array([1.0, 0.0, 2.0, 0.0, 1000.0])
    r = model.evaluate({"x": x}, outputs=["capped_inverse", "overflow_inverse"],
                       on_nonfinite="mask")
    assert r.valid.tolist() == [True, False, True, False, False]
    assert r.reasons[1].startswith("capped_inverse: `1/x`")
    assert r.reasons[4].startswith("overflow_inverse: `exp(x) + 1`")
    assert r.reasons[0] == "" and r["capped_inverse"][[0, 2]].tolist() == [1.0, 0.5]
    one = model.evaluate({"x": 0.0}, outputs=["capped_inverse"], on_nonfinite="mask")
    assert not bool(one.valid) and "1/x" in str(one.reasons)
    ok = model.evaluate({"x": 2.0}, outputs=["capped_inverse"], on_nonfinite="mask")
    assert bool(ok.valid) and ok.scalar("capped_inverse") == 0.5


def test_check_false_returns_the_raw_numbers(model):
    r = model.evaluate({"x": 0.0}, outputs=["capped_inverse"], check=False)
    assert r.scalar("capped_inverse") == 5.0  # what numpy computes; no check asked for
