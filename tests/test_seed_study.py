"""The seed study (tools/seed_study.py): GPT-MoE-1.8T from A100 to GB200 NVL72, one change per step.

Checked: the step factors multiply to the total; the chain's named steps are the bundled scenarios
(two independent paths to the same number); each step is bounded by the hardware ratio it changes;
and the model's ratios against NVIDIA's published ones, pinned at the measured figures - the model
disagrees with the published ratios (it gives about half), see PUBLISHED_GAP below for why."""
from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

from conftest import run_scenario

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("seed_study", ROOT / "tools" / "seed_study.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def rows(tool, model):
    return tool.run(model)


def test_step_factors_multiply_to_the_total(rows):
    assert math.prod(r["factor"] for r in rows) == pytest.approx(rows[-1]["cumulative"], rel=1e-12)
    for a, b in zip(rows, rows[1:]):
        assert b["factor"] == pytest.approx(a["step_time"] / b["step_time"], rel=1e-12)


def test_named_steps_are_the_bundled_scenarios(tool, rows, model):
    named = {r["endpoint"]: r for r in rows if r["endpoint"]}
    assert set(named) == {f"seed-gpt-moe-1.8t-{g}" for g in ("h100", "h200", "b200", "gb200-nvl72")}
    assert run_scenario(model, "seed-gpt-moe-1.8t-a100").scalar("step_time") == pytest.approx(
        rows[0]["step_time"], rel=1e-12)
    for name, r in named.items():
        assert run_scenario(model, name).scalar("step_time") == pytest.approx(r["step_time"], rel=1e-12)


def test_every_step_fits_is_valid_and_no_step_slows_down(rows):
    for r in rows:
        assert r["fits_in_memory"] == 1 and r["parallel_config_valid"] == 1, r["label"]
        assert r["factor"] >= 1 - 1e-12, r["label"]


BOUND = ["peak_flops_per_gpu", "hbm_bandwidth", "scaleup_link_bw", "scaleup_links_per_gpu",
         "scaleup_domain_size", "scaleout_nic_bw"]


def test_each_step_is_bounded_by_the_hardware_ratio_it_changes(tool, model):
    """A step cannot speed the job up more than the largest ratio of the numbers it changes
    (peak FLOP/s at the precision used, HBM bandwidth, NVLink bandwidth or domain, NIC bandwidth),
    and not at all when it changes none of them."""
    from flopsheet.scenario import resolve
    hw = []
    for k in range(len(tool.STEPS)):
        res = model.evaluate(resolve(tool.step_scenario(k), model), outputs=["step_time"] + BOUND)
        hw.append({n: float(res[n]) for n in ["step_time"] + BOUND})
    for k in range(1, len(hw)):
        ratio = max(hw[k][n] / hw[k - 1][n] for n in BOUND)
        factor = hw[k - 1]["step_time"] / hw[k]["step_time"]
        assert factor <= max(ratio, 1) * (1 + 1e-12), tool.STEPS[k].label


# Measured with `python tools/seed_study.py` (the model's ratio, then NVIDIA's / Kundu et al.'s).
# H100 FP8 / A100 BF16: 2.92x vs "up to 9x"; HGX B200 / HGX H100: 1.78x vs 3x;
# GB200 NVL72 / HGX H100: 2.36x vs 4x; GB200 NVL72 / A100: 6.89x vs ~35x
# (collective launch latency 9.1 us on Hopper/Blackwell, 7.5 us on A100, host overhead not charged in training).
MEASURED = {"H100 FP8 / A100 BF16": 2.92, "HGX B200 / HGX H100": 1.78,
            "GB200 NVL72 / HGX H100": 2.36, "GB200 NVL72 / A100": 6.89}
#: Why the model gives about half of the published ratios (stated, not fitted away):
#: (1) calibration - the library's sustained GEMM rate is 0.75 of peak on A100 but 0.59 x 0.83 = 0.49
#:     of the FP8 peak on Hopper/Blackwell (fitted on Megatron-Core/NeMo measurements), so
#:     A100 BF16 -> GB200 FP8 GEMMs gain 10.4x for a 16x peak ratio; (2) attention stays in BF16 and
#:     pointwise work scales with HBM only; (3) the layout is the same on every system (TP 8, PP 8,
#:     EP 16), whereas NVIDIA's projections re-tune each system and are not published with layouts.
PUBLISHED_GAP = (0.15, 0.65)


@pytest.mark.parametrize("label", list(MEASURED))
def test_ratios_against_published(tool, rows, label):
    p = {q["label"]: q for q in tool.published_rows(rows)}[label]
    assert p["model"] == pytest.approx(MEASURED[label], rel=0.02)
    assert PUBLISHED_GAP[0] <= p["model"] / p["published"] <= PUBLISHED_GAP[1]


def test_retuned_layouts_are_never_slower_and_close_part_of_the_gap(tool, rows):
    """--retune searches each system's layout (the fixed one is among the candidates, so it can only
    be as fast or faster). Measured: GB200 NVL72 / HGX H100 3.22x (published 4x), HGX B200 / HGX H100
    2.24x (3x), GB200 NVL72 / A100 9.1x (~35x)."""
    best = tool.retune()
    fixed = {r["endpoint"]: r["step_time"] for r in rows if r["endpoint"]}
    fixed["seed-gpt-moe-1.8t-a100"] = rows[0]["step_time"]
    for s, b in best.items():
        assert b["step_time"] <= fixed[f"seed-gpt-moe-1.8t-{s}"] * (1 + 1e-9), s
    ratio = {k: best[a]["step_time"] / best[b]["step_time"] for k, a, b in
             [("b200", "h100", "b200"), ("gb200", "h100", "gb200-nvl72"), ("a100", "a100", "gb200-nvl72")]}
    assert ratio["b200"] == pytest.approx(2.24, rel=0.02)
    assert ratio["gb200"] == pytest.approx(3.22, rel=0.02)
    assert ratio["a100"] == pytest.approx(9.12, rel=0.02)


def test_gpt_moe_1_8t_parameter_count(model):
    """120 layers x (16 experts x 2 x 15360 x 30720 + 4 x 15360^2) + untied 51,200-token embedding
    and output layer = 1.9268e12 weights (biases and norms add 0.01 %): the stated assumption gives
    1.93 T, within 7 % of NVIDIA's 1.8 T; 341 B are active per token (top-2)."""
    r = run_scenario(model, "seed-gpt-moe-1.8t-a100")
    hand = 120 * (16 * 2 * 15360 * 30720 + 4 * 15360**2) + 2 * 51200 * 15360
    assert r.scalar("total_params") == pytest.approx(hand, rel=2e-4)
    assert r.scalar("total_params") / 1.8e12 - 1 == pytest.approx(0.07, abs=0.005)
