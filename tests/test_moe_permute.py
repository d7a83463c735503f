"""MoE token permutation at its calibrated share of peak HBM bandwidth (moe_permute_hbm_fraction) - worked examples
checked by hand on the Megatron-Bridge 25.09 DGX-B200 Qwen3-30B-A3B token-drop point, the cross-check against the
streaming rate, and the fit the default comes from, checked against the kernel measurements it must stay below."""
from __future__ import annotations

import pytest

from conftest import point_runner

B200 = "train-mbridge-25.09-dgx-b200-qwen3-30b-a3b-8gpu-tokendrop"
LLAMA8 = "train-mbridge-25.11-dgx-h100-llama3-8b-8gpu-fp8-cs"


@pytest.fixture(scope="module")
def point():
    return point_runner(B200)


def test_b200_qwen3_30b_permutation_by_hand(point):
    r = point(kernel_launch_overhead=4e-6)
    # 4096 tokens (s 4096 x mbs 1, tp 1), hidden 2048, top-8, 16 local experts (128 / ep 8), 2-byte activations:
    # permute + unpermute 2 (1 + 8) rows, local sort and its inverse 4 x 8 rows -> 50 rows of 4 KiB per token
    permute_bytes = 2 * 4096 * 2048 * (2 * (1 + 8) + 4 * 8)
    assert permute_bytes == 838_860_800
    assert r.scalar("moe_permute_bytes_fwd") == pytest.approx(permute_bytes, rel=1e-12)
    assert r.scalar("moe_permute_rate") == pytest.approx(0.13 * 8e12, rel=1e-12)     # 13 % of the 8 TB/s peak
    router_bytes = 4 * 4 * 4096 * 128                                                # four fp32 passes over 4096 x 128
    kernels = 40 + (16 - 1) * 2                                                      # router/dispatcher + 15 more expert GEMM pairs
    want = permute_bytes / 1.04e12 + router_bytes / 6.4e12 + kernels * 4e-6          # 806.6 + 1.3 + 280 us
    assert want == pytest.approx(1087.908e-6, rel=1e-5)
    assert r.scalar("moe_pointwise_time_fwd") == pytest.approx(want, rel=1e-12)
    # the backward moves the same 800 MiB once more (each permutation's transpose) and launches the 70 kernels
    # twice: 806.6 + 1.3 + 560 us = 1,367.9 us, not twice the forward (2,175.8 us)
    assert r.scalar("moe_launch_time_fwd") == pytest.approx(kernels * 4e-6, rel=1e-12)
    back = permute_bytes / 1.04e12 + router_bytes / 6.4e12 + 2 * kernels * 4e-6
    assert back == pytest.approx(1367.908e-6, rel=1e-5)
    assert r.scalar("moe_pointwise_time_bwd") == pytest.approx(back, rel=1e-12)


def test_at_the_streaming_share_it_runs_at_memory_rate(point):
    # with the permutation at the streaming calibration (memory_efficiency 0.8 of peak) the term is the plain
    # roofline over memory_rate again - the two paths agree
    r = point(moe_permute_hbm_fraction=0.8, kernel_launch_overhead=4e-6)
    mem = r.scalar("memory_rate")
    assert mem == pytest.approx(6.4e12, rel=1e-12)
    streaming = (r.scalar("moe_permute_bytes_fwd") + r.scalar("moe_router_pointwise_bytes_fwd")) / mem + 70 * 4e-6
    assert r.scalar("moe_pointwise_time_fwd") == pytest.approx(streaming, rel=1e-12)
    slow = point(kernel_launch_overhead=4e-6)
    assert slow.scalar("moe_pointwise_time_fwd") - r.scalar("moe_pointwise_time_fwd") == pytest.approx(
        r.scalar("moe_permute_bytes_fwd") / 1.04e12 - r.scalar("moe_permute_bytes_fwd") / 6.4e12, rel=1e-9)
    assert slow.scalar("step_time") > r.scalar("step_time")


def test_kernel_measurements_bound_the_default_from_above():
    # tile-ai/TileOPs PR 2125 (H200, bf16): vLLM's Triton moe_permute, 4096 tokens, top-8 of 128 experts,
    # hidden 7168 - 0.274944 ms for each token read once and written 8 times, against the 4.8 TB/s H200 peak
    moved = 4096 * 7168 * 2 * (1 + 8)
    share = moved / 0.274944e-3 / 4.8e12
    assert share == pytest.approx(0.40, abs=0.005)
    # the tuned kernel of the same table (0.220384 ms, 2.399 TB/s) reaches half the peak
    assert moved / 0.220384e-3 / 4.8e12 == pytest.approx(0.50, abs=0.005)
    # the calibrated end-to-end share of Megatron's permutation path sits below both kernels
    r = point_runner(B200)()
    assert r.scalar("moe_permute_rate") / 8e12 == pytest.approx(0.13, rel=1e-12)
    assert r.scalar("moe_permute_rate") / 8e12 < share


def test_default_is_the_megatron_bridge_fit_and_helps_the_held_out_moe_rows():
    """The shipped 0.13 is the fit on the 44 Megatron-Bridge points host_time_per_op is fitted on; on the 25
    held-out MoE rows it lowers the median error (0.40, the vLLM kernel's share, reads 12.5 %, 13.0 % before
    torchtitan's DistMoE rows ran the fused_experts dispatcher, which has no permutation pass, 13.8 % before
    Blackwell's attention efficiency 0.55; 0.13 reads 10.5 %, 12.3 % before MoE layers dropped the dense MLP's
    tensor-parallel collectives)."""
    from flopsheet.library import load_library
    from flopsheet.validate import Validator, fit, load_points
    validator = Validator(load_library())
    points = [p for p in load_points() if p.category == "training"]
    fit_families = "megatron-bridge-moe,megatron-bridge-26.02,megatron-bridge-gb300,megatron-bridge"
    out = fit(validator, points, ["moe_permute_hbm_fraction"], fit_families)
    assert out["fit_points"] == 44
    assert out["fitted"]["moe_permute_hbm_fraction"] == pytest.approx(0.13, abs=0.005)
    held_out = [p for p in points if p.family in {"megatron-core-moe-report", "megatron-dsv3-gb200",
                                                  "megatron-moe-recipes", "megatron-moe-modelzoo",
                                                  "torchtitan-dsv3-gb300"}]

    def median(overrides):
        rows = validator.run(held_out, overrides=overrides).rows
        errors = sorted(abs(r.error) for r in rows if r.expect.counted and r.error is not None)
        assert len(errors) == 25
        return errors[12]

    assert median({}) == pytest.approx(0.105, abs=0.003)
    assert median({"moe_permute_hbm_fraction": 0.4}) == pytest.approx(0.125, abs=0.003)


def test_dense_models_do_not_move(point):
    slow = point(LLAMA8)
    fast = point(LLAMA8, moe_permute_hbm_fraction=1.0)
    assert slow.scalar("moe_pointwise_time_fwd") == 0
    assert slow.scalar("step_time") == fast.scalar("step_time")
