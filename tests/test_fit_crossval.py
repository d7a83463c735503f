"""Leave-one-family-out cross-validation of a calibration fit (flopsheet validate --fit --cross-validate) and
`--on all`. Checked against independent paths: each left-out family's prediction is what a plain fit on the
other families predicts for it, and the shipped errors are the validation report's own."""
from __future__ import annotations

import json

import pytest

from flopsheet.errors import ScenarioError
from flopsheet.validate_crossval import cross_validate
from flopsheet.validate_fit import fit, fit_points
from flopsheet.validate_points import load_points

pytest.importorskip("scipy.optimize")

FAMILIES = ["megatron-core-h100", "nemo-24.07", "nemo-24.07-extra"]
SETTINGS = dict(only=[["h100"]], fixed={"fp8_gemm_efficiency_factor": 0.88}, loss="soft_l1")


@pytest.fixture(scope="module")
def points():
    return load_points()


@pytest.fixture(scope="module")
def crossed(validator, points):
    return cross_validate(validator, points, ["gemm_efficiency"], ",".join(FAMILIES), **SETTINGS)


def test_each_family_is_predicted_by_a_fit_on_the_others(validator, points, crossed):
    by_family = {f["family"]: f for f in crossed["families"]}
    assert sorted(by_family) == FAMILIES
    for left_out in ["nemo-24.07", "megatron-core-h100"]:
        others = ",".join(f for f in FAMILIES if f != left_out)
        plain = fit(validator, points, ["gemm_efficiency"], others, **SETTINGS)
        assert by_family[left_out]["fitted"]["gemm_efficiency"] == pytest.approx(
            plain["fitted"]["gemm_efficiency"], rel=1e-6)
        # the plain fit's held-out rows include the left-out family (same shipped Hopper values)
        held = {r["point"]: r["after"] for r in plain["held_rows"]}
        mine = [r for r in crossed["rows"] if r["family"] == left_out]
        assert len(mine) == by_family[left_out]["rows"] > 1
        for r in mine:
            assert r["crossed"] == pytest.approx(held[r["point"]], rel=1e-6, abs=1e-9)


def test_shipped_errors_are_the_validation_reports(validator, points, crossed):
    chosen = [p for p in points if p.family in FAMILIES]
    report = {(r.point.id, r.point.family): r.error for r in validator.run(chosen).rows
              if r.expect.counted and r.error is not None}
    assert len(crossed["rows"]) == 21   # 9 Megatron-Core, 7 NeMo 24.07, 5 NeMo extra rows
    for r in crossed["rows"]:
        assert r["shipped"] == pytest.approx(report[(r["point"], r["family"])], rel=1e-9, abs=1e-12)
    medians = sorted(f["shipped_median_abs_error"] for f in crossed["families"])
    assert crossed["family_median_shipped"] == pytest.approx(medians[1])
    assert crossed["families_better"] + crossed["families_worse"] <= 3


def test_on_all_is_every_family(points):
    every = fit_points(points, "all")
    assert {p.id for p in every} == {p.id for p in points if p.supported}
    hopper = fit_points(points, "all", [["h100", "h200"]])
    assert hopper and all("h100" in p.id or "h200" in p.id for p in hopper)
    assert len({p.family for p in hopper}) > 10


def test_one_family_cannot_be_cross_validated(validator, points):
    with pytest.raises(ScenarioError, match="two families or more"):
        cross_validate(validator, points, ["gemm_efficiency"], "megatron-core-h100", **SETTINGS)


def test_command_line(capsys):
    from flopsheet.cli import main
    args = ["validate", "--category", "training", "--fit", "gemm_efficiency", "--on", ",".join(FAMILIES),
            "--only", "h100", "--set", "fp8_gemm_efficiency_factor=0.9", "--loss", "soft_l1", "--cross-validate"]
    assert main(args) == 0
    out, err = capsys.readouterr()
    assert "cross-validated over the 3 families" in out and "all rows, cross-validated" in out
    assert "cross-validating 3/3: leaving out nemo-24.07-extra" in err
    assert main(args + ["--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["crossed"]["compared"] == 21 and len(data["families"]) == 3
    assert main(["validate", "--cross-validate"]) == 2
    assert "--cross-validate goes with --fit" in capsys.readouterr().err
