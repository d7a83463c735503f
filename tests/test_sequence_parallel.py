"""Sequence parallelism's backward re-gather (Korthikanti et al. 2022, Sec. 4.2.2; issue 11): the column-parallel
layers keep only their sequence shard of the norm output and all-gather it again in backward for the weight
gradient - hand-checked on the Korthikanti Table 5 GPT-3 175B run (A100, tp 8, s 2048, b 1, h 12288)."""
from __future__ import annotations

import pytest

from conftest import run_scenario as run

SC = "korthikanti-table5-175b-selective-sp"
US = 1e-6


def test_extra_all_gather_in_backward_counted_and_hidden_by_dgrad(model):
    r = run(model, SC)
    s = r.scalar
    assert s("tp_sp_regathers_per_layer") == 2                       # QKV and MLP-up inputs (dense model)
    assert s("tp_allreduce_bytes") == 2 * 2048 * 12288 == 50_331_648  # gathered layer input, bf16
    # Simple ring on NVLink 3: launch 7.5 us + 7 steps x 3.4 us + 7/8 x 50.3 MB / (300 GB/s x 0.783)
    ag = 7.5 * US + 7 * 3.4 * US + 7 / 8 * 50_331_648 / (300e9 * 0.783)
    assert s("tp_allgather_net_time") == pytest.approx(ag, rel=1e-12)
    assert ag == pytest.approx(218.79 * US, abs=0.01 * US)
    # before overlap: 4 all-gather + reduce-scatter pairs + 2 re-gathers per layer
    assert s("tp_comm_time_per_layer") == pytest.approx(4 * s("tp_collective_time") + 2 * ag, rel=1e-12)
    assert s("slowest_stage_layers") == 12
    # the QKV input-gradient GEMM (2 x 2048 x 12288 x 36864 / 8 = 231.9 GFLOP, ~0.99 ms) outlasts the gather: all hidden
    assert s("qkv_gemm_flops_fwd") == 2 * 2048 * 12288 * 3 * 12288 / 8
    assert s("tp_sp_regather_hidden_per_layer") == pytest.approx(2 * ag, rel=1e-12)
    off = run(model, SC, sequence_parallel="no")
    assert off.scalar("tp_sp_regathers_per_layer") == 0 and off.scalar("tp_sp_regather_hidden_per_layer") == 0


def test_regather_exposed_when_the_dgrad_gemm_is_shorter(model):
    """What-if: GEMMs 8.5x faster (2 PFLOP/s) - the QKV dgrad takes 116 us, the MLP-up dgrad 155 us."""
    r = run(model, SC, gemm_flops_rate=2e15)
    base = run(model, SC, gemm_flops_rate=2e15, sequence_parallel="yes", tp_sp_regather_hidden_per_layer=0)
    s = r.scalar
    ag = s("tp_allgather_net_time")
    qkv, mlp = s("qkv_gemm_flops_fwd") / 2e15, s("mlp_up_gemm_flops_fwd") / 2e15
    assert qkv == pytest.approx(115.96 * US, abs=0.01 * US) and mlp == pytest.approx(154.62 * US, abs=0.01 * US)
    assert s("tp_sp_regather_hidden_per_layer") == pytest.approx(qkv + mlp, rel=1e-12)
    # exposed per layer = (218.8 - 116.0) + (218.8 - 154.6) us; per step x 12 layers x microbatches
    exposed = (ag - qkv) + (ag - mlp)
    assert exposed == pytest.approx(167.0 * US, abs=0.1 * US)
    assert base.scalar("step_tp_comm_time") - r.scalar("step_tp_comm_time") == pytest.approx(
        s("microbatches") * 12 * (qkv + mlp), rel=1e-9)
