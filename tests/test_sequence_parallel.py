"""Sequence parallelism's backward re-gather (Korthikanti et al. 2022, Sec. 4.2.2; issue 11): the column-parallel
layers keep only their sequence shard of the norm output and all-gather it again in backward for the weight
gradient - hand-checked on the Korthikanti Table 5 GPT-3 175B run (A100, tp 8, s 2048, b 1, h 12288)."""
from __future__ import annotations

import pytest

from conftest import run_scenario as run

SC = "korthikanti-table5-175b-selective-sp"
US = 1e-6


def k_slowdown(k, k0=640.0, k_ref=4096.0):
    """A GEMM's time at reduction length k over its time at the reference length (formulas/compute/gemm.yaml)."""
    return (1 + k0 / k) / (1 + k0 / k_ref)


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
    """What-if: GEMMs 8.5x faster (2 PFLOP/s) - the QKV dgrad takes 114 us, the MLP-up dgrad 148 us."""
    r = run(model, SC, gemm_flops_rate=2e15)
    base = run(model, SC, gemm_flops_rate=2e15, sequence_parallel="yes", tp_sp_regather_hidden_per_layer=0)
    s = r.scalar
    ag = s("tp_allgather_net_time")
    # each input-gradient GEMM at its own reduction length (A100 gemm_k_overhead 640 against 4,096): QKV reduces
    # over its 3 x 12288 / 8 = 4,608 columns, the MLP up over 4 x 12288 / 8 = 6,144 - both compute-bound here
    qkv = s("qkv_gemm_flops_fwd") / 2e15 * k_slowdown(4608)
    mlp = s("mlp_up_gemm_flops_fwd") / 2e15 * k_slowdown(6144)
    assert qkv == pytest.approx(114.22 * US, abs=0.01 * US) and mlp == pytest.approx(147.65 * US, abs=0.01 * US)
    assert s("qkv_gemm_time_dgrad") == pytest.approx(qkv, rel=1e-12)
    assert s("mlp_up_gemm_time_dgrad") == pytest.approx(mlp, rel=1e-12)
    assert s("tp_sp_regather_hidden_per_layer") == pytest.approx(qkv + mlp, rel=1e-12)
    # exposed per layer = (218.8 - 114.2) + (218.8 - 147.7) us; per step x 12 layers x microbatches
    exposed = (ag - qkv) + (ag - mlp)
    assert exposed == pytest.approx(175.7 * US, abs=0.1 * US)
    assert base.scalar("step_tp_comm_time") - r.scalar("step_tp_comm_time") == pytest.approx(
        s("microbatches") * 12 * (qkv + mlp), rel=1e-9)


def test_fp8_runs_can_gather_their_sequence_parallel_inputs_in_fp8():
    # Llama 3.1 70B FP8 on H100 (DGX Cloud 25.02 layout: TP 4 with sequence parallelism, sequence 8192): TE writes
    # the FP8 norm output as uint8 and casts the gradient to FP8 before gathering, so each all-gather moves
    # 8192 x 8192 x 1 byte = 67.1 MB gathered; the reduce-scatters keep BF16 (134.2 MB)
    from conftest import point_runner
    base = point_runner("train-dgxc2502-h100-llama3.1-70b-256gpu-fp8")

    def run(**sets):
        return base(tp_allgather_quantized="yes", **sets)
    s = run().scalar
    # by default (the shipped calibration) the gathers move 16-bit activations
    assert base().scalar("tp_allgather_msg_bytes") == 2 * 8192 * 8192
    gathered = 8192 * 8192
    assert s("tp_allgather_element_bytes") == 1 and s("tp_allgather_msg_bytes") == gathered == 67_108_864
    assert s("tp_reducescatter_msg_bytes") == 2 * gathered
    # block-scaled recipes carry their scales: MXFP8 an E8M0 byte per 32 elements, blockwise an fp32 per 128
    assert run(fp8_recipe="mxfp8").scalar("tp_allgather_msg_bytes") == pytest.approx(gathered * 33 / 32, rel=1e-12)
    assert run(fp8_recipe="blockwise").scalar("tp_allgather_msg_bytes") == pytest.approx(gathered * 1.03125, rel=1e-12)
    # BF16 runs, and FP8 runs that keep the non-expert GEMMs in BF16, gather 2-byte activations
    for sets in ({"compute_dtype": "bf16"}, {"fp8_scope": "routed_experts"}):
        assert run(**sets).scalar("tp_allgather_msg_bytes") == 2 * gathered
    # the gather's bandwidth term halves: ring time less its fixed latencies
    bf16 = run(compute_dtype="bf16").scalar
    fixed = s("tp_allgather_net_time") - 3 / 4 * gathered / s("tp_ring_bw")
    assert bf16("tp_allgather_net_time") - fixed == pytest.approx(2 * (s("tp_allgather_net_time") - fixed), rel=1e-9)
