"""Uncertainty: Monte Carlo percentiles of linear nodes against the analytic answer, Sobol
indices of an additive model against theory, spreads in scenarios, bad spreads."""
from __future__ import annotations

import pytest
from scipy.stats import norm

from flopsheet.cli import main
from flopsheet.errors import FlopsheetError
from flopsheet.scenario import load_scenario
from flopsheet.uncertainty import propagate

LIB = """
doc: Two inputs and linear nodes.
inputs:
  x:
    unit: "1"
    default: 1
    doc: An input.
    source: test
  y:
    unit: "1"
    default: 1
    doc: Another input.
    source: test
nodes:
  lin:
    expr: 2*x + 1
    unit: "1"
    doc: Linear in x.
    source: test
  both:
    expr: x + 2*y
    unit: "1"
    doc: Additive in x and y.
    source: test
"""


@pytest.fixture
def setup(write_lib, tmp_path):
    root = write_lib({"lin.yaml": LIB})

    def scenario(values: str):
        p = tmp_path / "sc.yaml"
        p.write_text("doc: test\nvalues:\n" + values)
        return str(p)
    return str(root), scenario


def test_uniform_percentiles_of_a_linear_node(setup):
    root, scenario = setup
    sc = scenario("  x: {value: 1.5, range: [1, 3], source: test}\n")
    (st,) = propagate(sc, "lin", n=20_000, formulas=root, seed=1, sobol_n=0)
    for p, v in st.percentiles.items():  # x uniform on [1, 3]: p-quantile 1 + 2p; lin = 2x + 1
        assert v == pytest.approx(2 * (1 + 2 * p / 100) + 1, abs=2e-3)
    assert st.nominal == pytest.approx(4.0) and st.mean == pytest.approx(5.0, abs=1e-3)
    assert st.elasticity["x"] == pytest.approx(2 * 1.5 / 4.0)  # (x / lin) dlin/dx at nominal


def test_normal_and_triangular_percentiles(setup):
    root, scenario = setup
    sc = scenario("  x: {value: 2, distribution: normal, sd: 0.5}\n")
    (st,) = propagate(sc, "lin", n=40_000, formulas=root, seed=2, percentiles=(5, 50, 95),
                      sobol_n=0, local=False)
    for p, v in st.percentiles.items():
        assert v == pytest.approx(2 * (2 + 0.5 * norm.ppf(p / 100)) + 1, abs=0.02)
    sc = scenario("  x: {value: 1, distribution: triangular, range: [0, 4]}\n")
    (st,) = propagate(sc, "lin", n=40_000, formulas=root, seed=3, percentiles=(50,),
                      sobol_n=0, local=False)
    # triangular(0, 1, 4): F(m) = 1/2 above the mode: 1 - (4-m)^2 / 12 = 1/2 -> m = 4 - sqrt(6)
    assert st.percentiles[50] == pytest.approx(2 * (4 - 6 ** 0.5) + 1, abs=0.02)


def test_same_seed_same_numbers(setup):
    root, scenario = setup
    sc = scenario("  x: {value: 2, range: [1, 3]}\n")
    a = propagate(sc, "lin", n=1000, formulas=root, seed=5, sobol_n=0, local=False)
    b = propagate(sc, "lin", n=1000, formulas=root, seed=5, sobol_n=0, local=False)
    assert a[0].percentiles == b[0].percentiles


def test_sobol_of_an_additive_model(setup):
    root, scenario = setup
    # both = x + 2y, x and y uniform on [0, 1]: Var = 1/12 + 4/12; S_x = 1/5, S_y = 4/5
    sc = scenario("  x: {value: 0.5, range: [0, 1]}\n  y: {value: 0.5, range: [0, 1]}\n")
    (st,) = propagate(sc, "both", n=1000, formulas=root, sobol_n=2048, seed=0)
    assert st.sobol["x"][0] == pytest.approx(0.2, abs=0.03)
    assert st.sobol["y"][0] == pytest.approx(0.8, abs=0.03)
    assert st.sobol["y"][2] == pytest.approx(0.8, abs=0.03)  # no interactions: total = first


def test_bundled_scenario_keys_and_cli(tmp_path, capsys):
    p = tmp_path / "u.yaml"
    p.write_text("doc: test\nuse: [scenarios/gpt3-175b-sc21]\nvalues:\n"
                 "  gemm_efficiency: {value: 0.75, range: [0.6, 0.85], source: assumption}\n")
    sc = load_scenario(str(p))
    assert sc.values["gemm_efficiency"].spread == {"range": [0.6, 0.85]}
    rc = main(["uncertainty", str(p), "--of", "step_time", "--samples", "2000", "--sobol", "256",
               "--quiet"])
    out = capsys.readouterr().out
    assert rc == 0 and "Sobol first" in out and "gemm_efficiency" in out


@pytest.mark.parametrize("spec, msg", [
    ("{value: 1, range: [3, 1]}", "is empty"),
    ("{value: 1, distribution: normal}", "needs `value` (the mean) and `sd`"),
    ("{value: 1, distribution: cauchy, range: [0, 2]}", "is not one of"),
    ("{value: 9, distribution: triangular, range: [0, 2]}", "mode"),
])
def test_bad_spreads(setup, spec, msg):
    root, scenario = setup
    with pytest.raises(FlopsheetError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        propagate(scenario(f"  x: {spec}\n"), "lin", n=10, formulas=root, sobol_n=0)
