"""Each pipeline stage's own mix of dense and MoE layers in its parameters and activations (issue 11,
formulas/memory/layer_mix.yaml): a hand-checked worked example on DeepSeek-V3's Megatron-Bridge layout, whose
first stage holds the three dense layers, and a cross-check of the per-kind nodes against the model-average
ones under every recompute strategy."""
from __future__ import annotations

import pytest

from conftest import point_runner

DSV3 = "train-mbridge-25.09-dgx-h100-deepseekv3-1024gpu-fp8"   # tp 2 (sequence parallel), pp 8, 7 layers on stage 1
TABLE3 = "mem-mcore-moe-report-deepseek-v3-256gpu-bf16"


@pytest.fixture(scope="module")
def point():
    return point_runner(DSV3)


def test_first_stage_counts_its_own_moe_layers(point):
    r = point()
    assert r.scalar("first_stage_layer_count") == 7
    assert r.scalar("first_stage_moe_layer_count") == 4            # layers 4-7 of 1-7; 1-3 are dense
    assert r.scalar("second_stage_moe_layer_count") == r.scalar("middle_stage_layer_count")
    # routed experts of 4 MoE layers: 256 experts x 3 x 7168 x 2048 weights each, over ep 64 x etp 1
    assert r.scalar("expert_params_per_gpu") == pytest.approx(4 * 256 * 3 * 7168 * 2048 / 64, rel=1e-12)
    assert point(pp=1, dp=512).scalar("first_stage_moe_layer_count") == 58


def test_first_stage_activations_worked_example(point):
    r = point(recompute="none", compute_dtype="bf16")
    tokens = 4096                                    # micro-batch 1 of 4,096 tokens, cp 1
    dense = tokens * 18432 * (2 * 2 + 2) / 2         # gate, up (2 B each) and the down projection's input, / tp
    moe = tokens * (9 * 2048 * (2 * 2 + 2) + 256 * 2) / 2   # 8 routed + 1 shared expert, router scores
    dispatch = tokens / 2 * 8 * 7168 * 2             # sequence-parallel share x top-8 copies x h x 2 B
    assert r.scalar("dense_mlp_intermediate_memory") == pytest.approx(dense, rel=1e-12)
    assert r.scalar("moe_intermediate_memory") == pytest.approx(moe, rel=1e-12)
    assert r.scalar("moe_layer_dispatch_memory") == pytest.approx(dispatch, rel=1e-12)
    excess = moe + dispatch - dense                  # 235,929,600 bytes: the dispatched tokens, almost all
    assert r.scalar("moe_layer_activation_excess") == pytest.approx(excess, rel=1e-12)
    average = r.scalar("activation_memory_per_layer")
    assert r.scalar("first_stage_activation_memory_per_layer") == pytest.approx(
        average + (4 / 7 - 58 / 61) * excess, rel=1e-12)
    assert r.scalar("last_stage_activation_memory_per_layer") == pytest.approx(
        average + (1 - 58 / 61) * excess, rel=1e-12)     # the last stage's 6 layers are all MoE
    # the first stage's activations: its layers and in-flight microbatches at its own per-layer value
    held = r.scalar("first_stage_layer_count") * r.scalar("inflight_microbatch_factor") + r.scalar(
        "pipeline_first_chunk_inflight_adjustment")
    assert r.scalar("layer_activation_memory") == pytest.approx(
        held * r.scalar("first_stage_activation_memory_per_layer"), rel=1e-12)


@pytest.mark.parametrize("sets", [
    dict(recompute="none"),
    dict(recompute="full"),
    dict(recompute="selective_op"),
    dict(recompute="selective", recompute_moe_act="yes", recompute_mlp="no"),
    dict(recompute="selective", recompute_moe="yes", recompute_mlp="yes"),
    dict(recompute="selective", recompute_layernorm="yes", recompute_mlp="no", moe_probs_applied="output"),
])
def test_per_kind_nodes_agree_with_the_model_average(point, sets):
    """activation_memory_per_layer (the model-average formulas) is linear in the MoE share; its slope must be
    moe_layer_activation_excess (the per-kind formulas) under every strategy - two independent paths."""
    a = point(dense_layers=3, **sets)
    b = point(dense_layers=13, **sets)
    share = (a.scalar("moe_layers") - b.scalar("moe_layers")) / 61
    assert share == pytest.approx(10 / 61)
    assert a.scalar("moe_layer_activation_excess") == pytest.approx(b.scalar("moe_layer_activation_excess"), rel=1e-12)
    slope = (a.scalar("activation_memory_per_layer") - b.scalar("activation_memory_per_layer")) / share
    assert slope == pytest.approx(a.scalar("moe_layer_activation_excess"), rel=1e-9)


def test_deepseek_v3_table3_first_stage():
    """The Megatron-Core MoE report's Table 3 point (199.5 GB): its first rank holds 16 layers, 13 of them MoE."""
    r = point_runner(TABLE3)()
    assert r.scalar("first_stage_moe_layer_count") == 13
    assert r.scalar("first_stage_activation_memory_per_layer") < r.scalar("activation_memory_per_layer")
    assert r.scalar("peak_stage_memory_per_gpu") / 1e9 == pytest.approx(199.5, rel=0.03)
