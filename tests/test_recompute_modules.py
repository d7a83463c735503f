"""Megatron-Core fine-grained selective recompute (formulas/training/recompute_modules.yaml): worked examples on
the Qwen3-235B-A22B layout of Megatron-Bridge (tp 2 with sequence parallelism, pp 8, ep 32, micro-batch 1 of
4096 tokens) and on DeepSeek-V3's MLA, checked by hand from the model's dimensions."""
from __future__ import annotations

import pytest

from conftest import point_runner

QWEN = "train-mbridge-25.11-dgx-h100-qwen3-235b-a22b-256gpu-fp8-cs"
DSV3 = "train-mbridge-25.09-dgx-h100-deepseekv3-1024gpu-fp8"
run = point_runner(QWEN)
MODULES = ("core_attn", "layernorm", "moe_act", "mla_up_proj", "mlp", "moe")


def modules(*on, **sets):
    flags = {f"recompute_{m}": ("yes" if m in on else "no") for m in MODULES}
    return {"recompute": "selective", **flags, **sets}


def test_default_selective_is_the_attention_core():
    r = run(recompute="selective")
    assert r.scalar("layer_time_recompute") == r.scalar("attention_core_time_fwd")
    assert r.scalar("recompute_flops_per_token") == pytest.approx(
        2 * r.scalar("attention_score_macs_per_token"), rel=1e-12)
    assert r.scalar("recompute_modules_saved_memory_per_layer") == 0
    assert r.scalar("ep_alltoalls_per_layer") == 4


def test_layernorm_and_moe_act_worked_example():
    # bf16: every saved GEMM input is 2 bytes; Qwen3-235B hidden 4096, 128 experts of width 1536, top-8, 94 MoE layers
    r = run(**modules("layernorm", "moe_act", compute_dtype="bf16"))
    none = run(recompute="none", compute_dtype="bf16")
    tokens = 1 * 4096  # micro-batch 1 x 4096, cp 1
    assert r.scalar("tokens_per_microbatch_per_gpu") == tokens
    norms = tokens * 2 * 2 * 4096 / 2  # two norm outputs, 2 bytes, sequence-parallel over tp 2: 32 MiB
    fc2_input = tokens * 2 * 8 * 1536 / 2  # the experts' down-projection input, top-8 copies over tp 2: 48 MiB
    assert norms + fc2_input == 80 * 2**20
    assert r.scalar("recompute_modules_saved_memory_per_layer") == pytest.approx(norms + fc2_input, rel=1e-12)
    assert r.scalar("activation_memory_per_layer") == pytest.approx(
        none.scalar("activation_memory_per_layer") - norms - fc2_input, rel=1e-12)
    # recompute time: the two norms' pointwise bytes plus the experts' SwiGLU (reads 2, writes 1 ffn-wide tensor)
    rate = r.scalar("memory_rate")
    act = 2 * tokens * 3 * 8 * r.scalar("moe_expert_token_factor") * 1536 / 2
    hand = (4 * 2 * tokens * 4096 / 2 + act) / rate
    assert r.scalar("layer_time_recompute") == pytest.approx(hand, rel=1e-12)
    # pointwise recompute adds no matmul FLOPs and no all-to-all
    assert r.scalar("recompute_flops_per_token") == 0
    assert r.scalar("ep_alltoalls_per_layer") == 4
    assert r.scalar("attention_score_memory") == 0  # flash attention keeps no scores either way


def test_moe_block_recompute_repeats_its_all_to_alls_and_expert_gemms():
    r = run(**modules("moe", compute_dtype="bf16"))
    assert r.scalar("ep_alltoalls_per_layer") == 6
    macs = 94 * (8 * 3 * 4096 * 1536 + 4096 * 128)  # routed expert GEMMs plus the router, per token
    assert r.scalar("recompute_modules_macs_per_token") == macs
    assert r.scalar("recompute_flops_per_token") == pytest.approx(2 * macs, rel=1e-12)
    # the MoE block keeps only its input: its intermediates and the dispatched tokens go
    assert r.scalar("recompute_modules_saved_memory_per_layer") > r.scalar("moe_dispatch_activation_memory") > 0
    assert r.scalar("activation_memory_per_layer") < run(recompute="none", compute_dtype="bf16").scalar(
        "activation_memory_per_layer")


def test_mla_up_projection_share_of_deepseek_v3():
    r = run(DSV3, **modules("mla_up_proj"))
    # W_UQ 1536 x 128 x 192 and W_UK/W_UV 512 x 128 x (128 + 128) of the Q/K/V projections without W_O
    up = 1536 * 128 * 192 + 512 * 128 * 256
    down = 7168 * 1536 + 7168 * (512 + 64)
    assert r.scalar("mla_up_proj_share") == pytest.approx(up / (up + down), rel=1e-12)
    assert r.scalar("recompute_modules_macs_per_token") == pytest.approx(61 * up, rel=1e-12)
    assert r.scalar("layer_time_recompute") == pytest.approx(
        r.scalar("mla_up_proj_share") * r.scalar("qkv_gemm_time_fwd"), rel=1e-12)
    # a GQA model has no MLA up projection: the flag does nothing there
    assert run(**modules("mla_up_proj")).scalar("layer_time_recompute") == 0


def test_dense_mlp_recompute_on_deepseek_v3_dense_layers():
    r = run(DSV3, **modules("mlp"))
    assert r.scalar("dense_mlp_share") == pytest.approx(
        3 * 18432 / (3 * 18432 + 58 * (8 * r.scalar("moe_expert_token_factor") + 1) * 2048), rel=1e-12)
    assert r.scalar("recompute_modules_macs_per_token") == 3 * 3 * 7168 * 18432


def test_moe_block_recompute_already_covers_its_activation():
    # listing moe_act beside moe (Megatron accepts both) neither reruns the activation twice nor frees its output twice
    both, moe = run(**modules("moe", "moe_act", compute_dtype="bf16")), run(**modules("moe", compute_dtype="bf16"))
    for name in ("layer_time_recompute", "recompute_modules_saved_memory_per_layer", "activation_memory"):
        assert both.scalar(name) == moe.scalar(name), name


@pytest.mark.parametrize("strategy", ["none", "full", "selective_op"])
def test_module_flags_act_only_under_selective(strategy):
    base, flagged = run(recompute=strategy), run(**{**modules(*MODULES), "recompute": strategy})
    for name in ("layer_time_recompute", "activation_memory", "hardware_flops_per_token", "ep_alltoalls_per_layer",
                 "step_time"):
        assert flagged.scalar(name) == base.scalar(name), name
