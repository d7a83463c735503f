"""The bundled SC21 formula set reproduces Narayanan et al. SC21 (arXiv 2104.04473)."""
from __future__ import annotations

import pytest

from conftest import run_scenario as run

# Narayanan et al. SC21, Table 1 (as published in NVIDIA/Megatron-LM README image
# images/cases_april2021.png, commit 2120e319a6; copied into ../shared/validation/published.yaml):
# (parameters in billions as printed, layers, hidden size, heads). V = 51,200, s = 2,048, ffn = 4h.
TABLE1 = [(1.7, 24, 2304, 24), (3.6, 30, 3072, 32), (7.5, 36, 4096, 32), (18.4, 40, 6144, 48),
          (39.1, 48, 8192, 64), (76.1, 60, 10240, 80), (145.6, 80, 12288, 96),
          (310.1, 96, 16384, 128), (529.6, 105, 20480, 128), (1008.0, 128, 25600, 160)]


@pytest.mark.parametrize("billions, layers, hidden, heads", TABLE1)
def test_table1_parameter_counts(model, billions, layers, hidden, heads):
    r = run(model, "gpt3-175b-sc21", layers=layers, hidden=hidden, ffn_hidden=4 * hidden,
            heads=heads, kv_heads=heads, head_dim=hidden // heads)
    assert round(r.scalar("total_params") / 1e9, 1) == billions


def test_gpt3_175b_parameter_count_hand_checked(model):
    l, h, V, s = 96, 12288, 51200, 2048
    p = 12 * l * h**2 * (1 + 13 / (12 * h) + (V + s) / (12 * l * h))  # SC21 Eq. 2
    r = run(model, "gpt3-175b-sc21")
    assert r.scalar("total_params") == pytest.approx(p + 2 * h, rel=1e-14)  # + final layer norm
    assert r.scalar("total_params") == pytest.approx(175e9, rel=0.003)  # "175B"


def test_eq3_hardware_flops_with_full_recompute(model):
    B, s, l, h, V = 1536, 2048, 96, 12288, 51200
    eq3 = 96 * B * s * l * h**2 * (1 + s / (6 * h) + V / (16 * l * h))
    r = run(model, "gpt3-175b-sc21")
    assert r.scalar("hardware_flops_per_step") == pytest.approx(eq3, rel=1e-14)
    model_flops = 72 * B * s * l * h**2 * (1 + s / (6 * h) + V / (12 * l * h))  # Korthikanti Sec. 6.1
    assert r.scalar("model_flops_per_step") == pytest.approx(model_flops, rel=1e-14)
    r0 = run(model, "gpt3-175b-sc21", recompute="none")
    assert r0.scalar("hardware_flops_per_step") == pytest.approx(model_flops, rel=1e-14)


def test_eq4_training_time_gpt3_175b(model):
    """Sec. 5.1: 300B tokens on 1024 A100s at 140 TFLOP/s take 'about 34 days'."""
    r = run(model, "gpt3-175b-sc21", achieved_flops_per_gpu="140 TFLOP/s")
    days = r.scalar("time_to_train") / 86400
    assert days == pytest.approx(34, rel=0.03)
    # Eq. 4, 8TP/(nX), approximates Eq. 3 per token, 96 l h^2 (1 + s/6h + V/16lh), by 8P
    l, h, V, s = 96, 12288, 51200, 2048
    p = 12 * l * h**2 * (1 + 13 / (12 * h) + (V + s) / (12 * l * h))
    eq4 = 8 * 300e9 * p / (1024 * 140e12) / 86400
    exact_over_eq4 = 96 * l * h**2 * (1 + s / (6 * h) + V / (16 * l * h)) / (8 * p)
    assert days / eq4 == pytest.approx(exact_over_eq4, rel=1e-12)


def test_eq4_training_time_1t(model):
    """Sec. 5.1: the 1T model on 3072 A100s at 163 TFLOP/s, 450B tokens: 'about 84 days'."""
    r = run(model, "gpt-1t-sc21", achieved_flops_per_gpu="163 TFLOP/s")
    assert r.scalar("time_to_train") / 86400 == pytest.approx(84, rel=0.03)


def test_table1_1t_utilisation(model):
    """Table 1 last row: 163 TFLOP/s per GPU is 52 % of the 312 TFLOP/s peak (hardware FLOPs)."""
    r = run(model, "gpt-1t-sc21", achieved_flops_per_gpu="163 TFLOP/s")
    assert round(100 * r.scalar("hfu")) == 52
