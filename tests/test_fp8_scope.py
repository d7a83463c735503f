"""FP8 confined to the routed experts (fp8_scope: routed_experts, torchao's MoE recipe): the attention projections,
dense MLPs, shared experts and router keep the BF16 rate and casts, the routed experts take the FP8 rate and their
own casts - worked examples checked by hand on the DeepSeek-V3 H100 point, and cross-checks against the all-BF16 and
all-FP8 runs of the same point."""
from __future__ import annotations

import pytest

from conftest import point_runner

DSV3 = "train-mbridge-25.09-dgx-h100-deepseekv3-1024gpu-fp8"
LLAMA8 = "train-mbridge-25.11-dgx-h100-llama3-8b-8gpu-fp8-cs"


@pytest.fixture(scope="module")
def point():
    return point_runner(DSV3)


def test_routed_share_of_the_mlp_gemms_by_hand(point):
    r = point(fp8_scope="routed_experts", moe_load_imbalance=1)
    # DeepSeek-V3: 3 dense layers of ffn 18432, 58 MoE layers of 8 routed + 1 shared expert of width 2048
    routed = 58 * 8 * 2048 / 61
    total = (3 * 18432 + 58 * 9 * 2048) / 61
    assert r.scalar("routed_ffn_width") == pytest.approx(routed, rel=1e-12)
    assert r.scalar("routed_expert_ffn_share") == pytest.approx(routed / total, rel=1e-12)
    assert r.scalar("routed_expert_ffn_share") == pytest.approx(950272 / 1124352, rel=1e-12)   # 0.8452
    fp8, bf16 = r.scalar("gemm_flops_rate"), r.scalar("output_layer_gemm_rate")
    assert fp8 == pytest.approx(1979e12 * 0.61 * 0.88, rel=1e-12)     # H100 FP8 peak x gemm_efficiency x FP8 factor
    assert bf16 == pytest.approx(989e12 * 0.61, rel=1e-12)            # H100 BF16 peak x gemm_efficiency
    assert r.scalar("non_expert_gemm_flops_rate") == pytest.approx(bf16, rel=1e-12)
    s = routed / total
    assert r.scalar("mlp_gemm_flops_rate") == pytest.approx(1 / (s / fp8 + (1 - s) / bf16), rel=1e-12)


def test_scope_all_leaves_every_rate_at_the_fp8_rate(point):
    r = point()
    assert r.scalar("non_expert_gemm_flops_rate") == r.scalar("gemm_flops_rate")
    assert r.scalar("mlp_gemm_flops_rate") == pytest.approx(r.scalar("gemm_flops_rate"), rel=1e-14)


def test_routed_casts_by_hand(point):
    r = point(fp8_scope="routed_experts", moe_load_imbalance=1, fp8_weight_cache="no")
    t = r.scalar("tokens_per_microbatch_per_gpu")
    tp, h, k, f = r.scalar("tp"), 7168, 8, 2048
    local = 256 / r.scalar("ep")
    per_elem = r.scalar("fp8_cast_bytes_per_element") / r.scalar("memory_rate")
    # forward: the routed copies' up inputs (8 h) and down inputs (8 x 2048), and the local experts' three matrices,
    # whole at expert TP 1 (tensor parallelism does not split the routed experts)
    assert r.scalar("etp") == 1
    fwd = (t * (k * h + k * f / tp) + local * 3 * h * f) * 58 / 61
    assert r.scalar("fp8_cast_time_fwd") == pytest.approx(fwd * per_elem, rel=1e-12)
    # backward: the down projections' output gradients (8 h) and the gate/up outputs' gradients (2 x 8 x 2048)
    bwd = t * (k * h + 2 * k * f / tp) * 58 / 61
    assert r.scalar("fp8_cast_time_bwd") == pytest.approx(bwd * per_elem, rel=1e-12)


def test_routed_scope_sits_between_bf16_and_all_fp8(point):
    bf16, mixed, fp8 = (point(compute_dtype="bf16"), point(fp8_scope="routed_experts"), point())
    # attention projections at the BF16 rate, no casts outside the experts
    for node in ("qkv_gemm_time_fwd", "out_proj_gemm_time_fwd"):
        assert mixed.scalar(node) == pytest.approx(bf16.scalar(node), rel=1e-12)
    assert bf16.scalar("layer_gemm_time_fwd") > mixed.scalar("layer_gemm_time_fwd") > fp8.scalar("layer_gemm_time_fwd")
    assert bf16.scalar("step_time") > mixed.scalar("step_time") > fp8.scalar("step_time")
    assert 0 < mixed.scalar("fp8_cast_time_fwd") < fp8.scalar("fp8_cast_time_fwd")


def test_dense_model_with_routed_scope_computes_in_bf16(point):
    bf16 = point(LLAMA8, compute_dtype="bf16")
    mixed = point(LLAMA8, fp8_scope="routed_experts")
    assert mixed.scalar("routed_expert_ffn_share") == 0
    assert mixed.scalar("fp8_cast_time_fwd") == 0 and mixed.scalar("fp8_cast_time_bwd") == 0
    for node in ("layer_time_fwd", "layer_time_bwd", "logits_time"):
        assert mixed.scalar(node) == pytest.approx(bf16.scalar(node), rel=1e-12)


def test_memory_keeps_fp8_copies_only_for_the_routed_experts(point):
    sets = dict(fp8_saved_inputs="fp8", fp8_param_storage="yes", fp8_param_bytes=1)
    bf16 = point(compute_dtype="bf16", **sets)
    mixed = point(fp8_scope="routed_experts", **sets)
    fp8 = point(**sets)
    # the attention block and the dense MLP keep 16-bit inputs, the dispatched tokens their FP8 copy
    for node in ("attention_block_activation_memory", "dense_mlp_intermediate_memory"):
        assert mixed.scalar(node) == pytest.approx(bf16.scalar(node), rel=1e-12)
    assert mixed.scalar("moe_layer_dispatch_memory") == pytest.approx(fp8.scalar("moe_layer_dispatch_memory"), rel=1e-12)
    # weights: the dense layers in 16 bits, the routed experts in FP8 (fp8_param_bytes)
    dense_bytes = mixed.scalar("dense_params_per_gpu") * 2 / mixed.scalar("zero_shards") if mixed.scalar("zero_stage") >= 3 \
        else mixed.scalar("dense_params_per_gpu") * 2
    expert_bytes = mixed.scalar("expert_params_per_gpu") * mixed.scalar("fp8_param_bytes")
    if mixed.scalar("zero_stage") >= 3:
        expert_bytes /= mixed.scalar("expert_zero_shards")
    assert mixed.scalar("weight_memory") == pytest.approx(dense_bytes + expert_bytes, rel=1e-12)
    assert bf16.scalar("weight_memory") > mixed.scalar("weight_memory") > fp8.scalar("weight_memory")
