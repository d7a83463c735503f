"""How a calibration fit weighs its rows (flopsheet validate --fit --weight): each row once, or each family once.
Checked against scipy's own losses and against a hand-solved fit of one constant on two families."""
from __future__ import annotations

import numpy as np
import pytest

from flopsheet.validate_fit import Rows, row_weights, weighted_loss

scipy_optimize = pytest.importorskip("scipy.optimize")


def rows_of(families):
    return Rows([], ["step_time"] * len(families), np.ones(len(families)), [f"p{i}" for i in range(len(families))],
                list(families))


def test_family_weights_give_each_family_one_vote():
    rows = rows_of(["big"] * 9 + ["small"])
    assert row_weights(rows, "row").tolist() == [1.0] * 10
    w = row_weights(rows, "family")
    # the nine rows share one vote, the single row has the other; scaled to average 1 (sum 10)
    assert w[:9] == pytest.approx([10 / 18] * 9) and w[9] == pytest.approx(10 / 2)
    assert w.sum() == pytest.approx(10) and w[:9].sum() == pytest.approx(w[9])


@pytest.mark.parametrize("loss", ["linear", "soft_l1"])
def test_unit_weights_are_scipys_own_loss(loss):
    """With every weight 1 the weighted loss is scipy's: the same solution on a problem with an outlier."""
    x = np.linspace(0, 1, 12)
    y = 0.3 + 0.7 * x
    y[3] += 0.5                                          # one outlying measurement
    resid = lambda p: p[0] + p[1] * x - y                 # noqa: E731
    ours = scipy_optimize.least_squares(resid, [0, 0], loss=weighted_loss(loss, np.ones(12)), f_scale=0.05)
    theirs = scipy_optimize.least_squares(resid, [0, 0], loss=loss, f_scale=0.05)
    assert ours.x == pytest.approx(theirs.x, rel=1e-6)


def test_family_weighted_fit_of_one_constant_is_the_mean_of_the_family_means():
    """Fitting one additive constant c to log-errors e_i with the linear loss: row-weighted c is the mean of all
    e_i, family-weighted the mean of the families' means. 9 rows at +0.10 and one at -0.10: -0.08 and 0."""
    e = np.array([0.10] * 9 + [-0.10])
    rows = rows_of(["big"] * 9 + ["small"])
    for weight, want in [("row", 0.08), ("family", 0.0)]:
        sol = scipy_optimize.least_squares(lambda c: e - c[0], [0.5], f_scale=0.05,
                                           loss=weighted_loss("linear", row_weights(rows, weight)))
        assert sol.x[0] == pytest.approx(want, abs=1e-9)


def test_command_line_reports_the_weighting(capsys):
    from flopsheet.cli import main
    args = ["validate", "--category", "training", "--fit", "gemm_efficiency", "--on",
            "megatron-core-h100,nemo-24.07", "--only", "h100", "--set", "fp8_gemm_efficiency_factor=0.9",
            "--loss", "soft_l1"]
    assert main(args + ["--weight", "family"]) == 0
    family = capsys.readouterr().out
    assert "(16 points, 16 rows, soft_l1 loss, each family weighted once)" in family
    assert main(args) == 0
    row = capsys.readouterr().out
    assert "each family" not in row
    # 9 Megatron-Core rows against 7 NeMo ones: weighting each family once moves the constant
    fitted = lambda out: float(out.split("gemm_efficiency: 0.61 -> ")[1].split()[0])  # noqa: E731
    assert fitted(family) != pytest.approx(fitted(row), abs=1e-4)
    assert main(["validate", "--weight", "family"]) == 2
    assert "--weight goes with --fit" in capsys.readouterr().err
