"""Expert-parallel all-to-all overlap (Megatron-Core combined 1F1B) bounded by the compute it hides behind, and
the host launch model (per-op host time, CUDA-graph scopes, the device-host sync of dropless MoE) - worked examples
checked by hand from the node values the library computes for the published Megatron-Bridge points."""
from __future__ import annotations

import pytest


from conftest import point_runner

DSV3 = "train-mbridge-25.09-dgx-h100-deepseekv3-1024gpu-fp8"
QWEN30 = "train-mbridge-25.11-dgx-h100-qwen3-30b-a3b-16gpu-fp8-cs"
LLAMA8 = "train-mbridge-25.11-dgx-h100-llama3-8b-8gpu-fp8-cs"


@pytest.fixture(scope="module")
def point():
    return point_runner(DSV3)


def test_combined_1f1b_exposes_only_the_excess_and_the_sm_share(point):
    r = point(moe_a2a_overlap="yes", ep_comm_sm_fraction=0.18)
    a = r.scalar("ep_alltoall_net_time")
    fwd, bwd, rec = r.scalar("layer_time_fwd"), r.scalar("layer_time_bwd"), r.scalar("layer_time_recompute")
    core = r.scalar("attention_core_time_fwd")
    fa = r.scalar("ep_attn_block_time_fwd")
    assert r.scalar("ep_mlp_block_time_fwd") == pytest.approx(fwd - fa, rel=1e-12)
    ba = 2 * (fa - core) + 2.5 * core + rec             # backward GEMMs 2x, FlashAttention backward 2.5x
    assert r.scalar("ep_attn_block_time_bwd") == pytest.approx(ba, rel=1e-12)
    bm = bwd + rec - ba
    assert r.scalar("ep_mlp_block_time_bwd") == pytest.approx(bm, rel=1e-12)
    # combine-grad behind attention fwd, dispatch behind expert bwd, dispatch-grad behind expert fwd,
    # combine behind attention bwd; each costs at least 18 % of itself (the SMs the dispatch kernels hold)
    want = sum(max(a - c, 0.18 * a) for c in (fa, bm, fwd - fa, ba))
    assert r.scalar("ep_overlap_exposed_per_layer") == pytest.approx(want, rel=1e-12)
    # interleaved 1F1B, p = 8, v = 4, m = 8192 / 64 = 128: warm-up of 2 x 7 + 3 x 8 = 38 of 512 forward chunks
    assert r.scalar("microbatches") == 128
    assert r.scalar("ep_overlap_paired_fraction") == pytest.approx(1 - 38 / 512, rel=1e-12)
    f = 1 - 38 / 512
    stage = r.scalar("slowest_stage_layers") * 58 / 61
    assert r.scalar("ep_comm_exposed_per_microbatch") == pytest.approx(stage * (f * want + (1 - f) * 4 * a), rel=1e-12)
    assert r.scalar("step_ep_comm_time") == pytest.approx(128 * r.scalar("ep_comm_exposed_per_microbatch"), rel=1e-12)
    # hiding never makes the all-to-all cheaper than its SM share, nor dearer than not overlapping it
    assert 4 * 0.18 * a <= want <= 4 * a


def test_dispatch_kernels_hold_their_dispatchers_sms_of_the_gpus(point):
    """The SM share an overlapped all-to-all takes from compute: Megatron-Core's DeepEP budget (20 SMs) and
    HybridEP's (16) over the GPU's SMs, 24 for NCCL's all-to-all - on an H100 (132 SMs) and a GB300 (148)."""
    assert point(ep_dispatcher="deepep").scalar("ep_comm_sm_fraction") == pytest.approx(20 / 132, rel=1e-12)
    assert point(ep_dispatcher="hybridep").scalar("ep_comm_sm_fraction") == pytest.approx(16 / 132, rel=1e-12)
    assert point(ep_dispatcher="alltoall").scalar("ep_comm_sm_fraction") == pytest.approx(24 / 132, rel=1e-12)
    gb300 = point_runner("train-mbridge-26.08-dgx-gb300-deepseekv3-256gpu-mxfp8")
    r = gb300()
    assert r.scalar("ep_comm_sms") == 16 and r.scalar("ep_comm_sm_fraction") == pytest.approx(16 / 148, rel=1e-12)
    # HybridEP moves and permutes the tokens as DeepEP does: only the SM share, so only the overlapped
    # all-to-all's exposed floor, differs
    d = gb300(ep_dispatcher="deepep")
    for node in ("ep_alltoall_net_time", "moe_permute_bytes_fwd", "layer_time_fwd"):
        assert r.scalar(node) == pytest.approx(d.scalar(node), rel=1e-12), node
    assert r.scalar("step_ep_comm_time") < d.scalar("step_ep_comm_time")
    # a scenario's own budget overrides the default (DeepSeek-V3's report: 20 SMs)
    assert gb300(ep_comm_sms=20).scalar("ep_comm_sm_fraction") == pytest.approx(20 / 148, rel=1e-12)


def test_overlap_bound_numbers_by_hand():
    # one all-to-all A = 2.3 ms against blocks of 1.3 (attention fwd), 5.5 (experts bwd), 2.8 (experts fwd)
    # and 2.9 ms (attention bwd), f = 0.18: max(1.0, 0.414) + 3 x 0.414 = 2.242 ms
    a, f = 2.3, 0.18
    assert sum(max(a - c, f * a) for c in (1.3, 5.5, 2.8, 2.9)) == pytest.approx(1.0 + 3 * 0.414)


def test_without_combined_1f1b_the_flat_fraction_applies(point):
    r = point(moe_a2a_overlap="no", ep_comm_overlap=0.25)
    assert r.scalar("ep_comm_exposed_per_layer") == pytest.approx(0.75 * r.scalar("ep_comm_time_per_layer"), rel=1e-12)


def test_host_ops_of_a_dropless_fp8_moe_layer(point):
    r = point(QWEN30, cuda_graph_scope="none", host_time_per_op=10e-6)
    # Qwen3-30B-A3B: every layer MoE, 128 experts over ep 8 = 16 local experts, FP8 current scaling:
    # dense part 14 kernels + 4 GEMM inputs x 3 cast ops = 26; router and dispatcher 40;
    # 16 experts x 2 GEMMs x (1 GEMM + 3 cast ops) = 128  ->  194 ops
    assert r.scalar("moe_local_experts") == 16
    assert r.scalar("host_ops_fwd_per_layer") == pytest.approx(14 + 12 + 40 + 128)
    assert r.scalar("host_time_fwd_per_layer") == pytest.approx(194 * 10e-6)
    assert r.scalar("host_time_bwd_per_layer") == pytest.approx(2 * 194 * 10e-6)
    assert r.scalar("moe_host_sync") == 1
    # 1.94 ms of host time per forward is less than the 2.9 ms the H100 computes at micro-batch 2: no GPU idle time
    assert r.scalar("host_exposed_per_microbatch") == 0


def test_host_bound_when_the_gpu_work_per_layer_is_short(point):
    r = point(QWEN30, cuda_graph_scope="none", host_time_per_op=40e-6)
    hf, hb = 194 * 40e-6, 2 * 194 * 40e-6
    e = r.scalar("ep_comm_exposed_per_layer")
    gf = r.scalar("layer_time_fwd") + e / 2
    gb = r.scalar("layer_time_bwd") + r.scalar("layer_time_recompute") + e / 2
    assert hf > gf and hb > gb
    want = r.scalar("slowest_stage_layers") * ((hf - gf) + (hb - gb))
    assert r.scalar("host_exposed_per_microbatch") == pytest.approx(want, rel=1e-12)
    assert r.scalar("step_host_time") == pytest.approx(r.scalar("microbatches") * want, rel=1e-12)
    # the step breakdown still sums to the step time
    parts = ["step_compute_time", "step_bubble_time", "step_tp_comm_time", "step_cp_comm_time", "step_ep_comm_time",
             "step_pp_comm_time", "step_dp_comm_time", "step_embedding_comm_time", "step_host_time", "optimizer_step_time",
             "step_overlap_contention_time"]
    assert sum(r.scalar(p) for p in parts) == pytest.approx(r.scalar("step_time"), rel=1e-12)


def test_cuda_graphs_replace_the_static_parts(point):
    r = point(QWEN30, cuda_graph_scope="attn_moe_router")
    # attention graph + router/preprocess graph, the 16 experts' 128 ops stay eager
    assert r.scalar("host_ops_fwd_per_layer") == pytest.approx(1 + 1 + 128)
    full = point(QWEN30, cuda_graph_scope="full_iteration", moe_token_dropping="yes")
    assert full.scalar("host_ops_fwd_per_layer") == 0 and full.scalar("moe_host_sync") == 0


def test_token_dropping_removes_the_sync_and_dense_models_run_ahead(point):
    drop = point(QWEN30, moe_token_dropping="yes", host_time_per_op=40e-6)
    assert drop.scalar("moe_host_sync") == 0
    # without a sync the host runs ahead: idle only if a whole microbatch's host time exceeds the GPU's busy
    # time - its compute and its exposed all-to-all, which the per-layer (synced) bound counts as well
    h = drop.scalar("slowest_stage_layers") * 3 * drop.scalar("host_time_fwd_per_layer")
    g = drop.scalar("slowest_stage_compute_time_per_microbatch") + drop.scalar("ep_comm_exposed_per_microbatch")
    assert drop.scalar("ep_comm_exposed_per_microbatch") > 0 and h > g
    assert drop.scalar("host_exposed_per_microbatch") == pytest.approx(h - g, rel=1e-12)
    # removing the per-layer syncs can only shorten the wait: sum of max(0, h - g) >= max(0, sum h - sum g)
    synced = point(QWEN30, moe_token_dropping="no", host_time_per_op=40e-6)
    assert synced.scalar("moe_host_sync") == 1
    assert drop.scalar("host_exposed_per_microbatch") <= synced.scalar("host_exposed_per_microbatch")
    dense = point(LLAMA8)
    assert dense.scalar("moe_host_sync") == 0 and dense.scalar("host_exposed_per_microbatch") == 0


def test_grouped_gemm_pays_a_fixed_cost_per_local_expert(point):
    one = point(QWEN30, ep=16, dp=8, experts=16)        # one local expert: only the dense MLP's two GEMM kernels
    many = point(QWEN30)                                  # 16 local experts: 15 more experts x 2 GEMMs each
    assert one.scalar("moe_local_experts") == 1 and many.scalar("moe_local_experts") == 16
    k = many.scalar("kernel_launch_overhead")
    assert k == pytest.approx(4e-6)
    extra = many.scalar("moe_pointwise_time_fwd") - (
        many.scalar("moe_permute_bytes_fwd") / many.scalar("moe_permute_rate")
        + many.scalar("moe_router_pointwise_bytes_fwd") / many.scalar("memory_rate") + 40 * k)
    assert extra == pytest.approx(15 * 2 * 4e-6, rel=1e-9)   # 120 us per forward, twice that backward


def test_fp8_casts_every_routed_copy(point):
    q = point(QWEN30)
    # Qwen3-30B-A3B: 48 MoE layers, top-8, no shared expert, force-balanced: 8 rows per token enter the experts
    assert q.scalar("mlp_input_copies_per_token") == 8
    d = point(DSV3)
    # DeepSeek-V3: 3 dense layers (1 row) and 58 MoE layers (8 routed copies + the token for the shared expert)
    assert d.scalar("mlp_input_copies_per_token") == pytest.approx((3 + 58 * 9) / 61)
    t, h = q.scalar("tokens_per_microbatch_per_gpu"), 2048
    per_elem = q.scalar("fp8_cast_bytes_per_element") / q.scalar("memory_rate")
    # backward: QKV output grad (4096 + 2 x 512), out-proj grad (h), the experts' down grads (8 h), up grads (2 x 6144)
    assert q.scalar("fp8_cast_time_bwd") == pytest.approx(t * (5120 + h * 9 + 2 * 6144) * per_elem, rel=1e-12)
    assert point(LLAMA8).scalar("mlp_input_copies_per_token") == 1


def test_mla_attention_core_uses_its_own_head_widths(point):
    d = point(DSV3)
    # DeepSeek-V3 trains MLA non-absorbed: Q K^T over 128 + 64 = 192 per head, scores x V over 128
    assert d.scalar("attention_core_macs_per_score") == 192 + 128
    assert d.scalar("attention_core_flops_fwd") == pytest.approx(2 * d.scalar("attention_scores_per_layer") * 320, rel=1e-12)
    # the GQA stand-in widths (head_dim 96) would give 2 x 96 = 192: MLA's core is 320/192 = 1.67x
    g = point(DSV3, attention_kind="gqa")
    assert d.scalar("attention_core_flops_fwd") / g.scalar("attention_core_flops_fwd") == pytest.approx(320 / 192)
    assert point(LLAMA8).scalar("attention_core_macs_per_score") == 2 * 128


def test_mla_attention_tensors_use_their_per_head_widths(point):
    """Megatron-Core's non-absorbed MLA hands the attention kernel one query and one key per head at 128 + 64 = 192
    (the shared RoPE key broadcast to every head) and one value per head at 128: what the attention block keeps for
    its backward, what the kernel streams from HBM and what context parallelism moves - not the GQA stand-in widths
    (128 x 96 queries, 8 x 96 keys and values) that reproduce MLA's parameter count."""
    d = point(DSV3)
    q, k, v, o = 128 * 192, 128 * 192, 128 * 128, 128 * 128
    assert [d.scalar(f"attention_{n}_tensor_width") for n in ("q", "k", "v", "out")] == [q, k, v, o]
    tp, t, h = d.scalar("tp"), d.scalar("tokens_per_microbatch_per_gpu"), 7168
    b, g8 = d.scalar("activation_bytes"), d.scalar("gemm_input_activation_bytes")
    flash_out = b + d.scalar("fp8_gemm_input_copy_bytes")
    expected = t * ((g8 + d.scalar("dropout_mask_bytes")) * h / d.scalar("sp_divisor") + b * (q + k + v) / tp + flash_out * o / tp)
    assert d.scalar("attention_block_activation_memory") == pytest.approx(expected, rel=1e-12)
    assert d.scalar("cp_kv_bytes") == pytest.approx(b * t * (k + v) / tp, rel=1e-12)
    # a GQA model keeps its own widths: Llama 3 8B, 32 x 128 queries and 8 x 128 keys and values
    l8 = point(LLAMA8)
    assert [l8.scalar(f"attention_{n}_tensor_width") for n in ("q", "k", "v", "out")] == [4096, 1024, 1024, 4096]


def test_quantize_host_ops_follow_the_fp8_recipe(point):
    cur = point(QWEN30)                                   # FP8 current scaling, no CUDA graphs
    assert cur.scalar("fp8_quantize_host_ops") == 3       # amax, scale, cast
    assert point(QWEN30, fp8_recipe="mxfp8").scalar("fp8_quantize_host_ops") == 3   # quantize + 2 scale swizzles
    delayed = point(QWEN30, fp8_recipe="delayed")
    assert delayed.scalar("fp8_quantize_host_ops") == 1
    assert point(QWEN30, fp8_recipe="blockwise").scalar("fp8_quantize_host_ops") == 1
    # Qwen3-30B-A3B, all 48 layers MoE, 16 local experts x 2 grouped-GEMM slices: each quantized input saves 2 ops
    inputs = 4 + 16 * cur.scalar("moe_gemms_per_expert")
    assert cur.scalar("host_ops_fwd_per_layer") - delayed.scalar("host_ops_fwd_per_layer") == pytest.approx(2 * inputs)
    # FP8 only in the routed experts: the dense layer's four inputs are not quantized
    routed = point(QWEN30, fp8_scope="routed_experts")
    assert cur.scalar("host_ops_fwd_per_layer") - routed.scalar("host_ops_fwd_per_layer") == pytest.approx(4 * 3)


QWEN235_DROP = "train-mbridge-25.09-dgx-b200-qwen3-235b-a22b-64gpu-tokendrop"


def test_a_host_bound_pipeline_is_paced_by_the_stage_with_the_most_blocks(point):
    # Qwen3-235B token-drop FP8 on 64 B200, PP 8 VP 2 with embedding and loss counted in the split: the first and
    # last stages hold 11 blocks, the six middle ones 12. The host issues 194 ops of 20 us per block forward and
    # twice that backward, 11.64 ms per block, more than the GPU's 7.74 ms: every stage is host-bound, so the
    # middle stage (12 x 11.64 = 139.7 ms) paces the pipeline - not the last one, whose output layer makes its GPU
    # work the longest (98.9 ms) but whose host work is 11 blocks (128.0 ms).
    run = point(QWEN235_DROP)
    s = run.scalar
    block_host = s("host_time_fwd_per_layer") + s("host_time_bwd_per_layer")
    assert block_host == pytest.approx(3 * 194 * 20e-6, rel=1e-12)
    assert s("moe_host_sync") == 0 and s("layer_compute_time_per_microbatch") == pytest.approx(7.745e-3, rel=1e-3)
    ep = s("ep_comm_exposed_per_layer")
    for stage, blocks in (("first", 11), ("middle", 12), ("last", 11)):
        compute = s(f"{stage}_stage_compute_time")
        assert s(f"{stage}_stage_host_exposed") == pytest.approx(blocks * (block_host - ep) - compute, rel=1e-12)
    assert s("last_stage_compute_time") > s("middle_stage_compute_time")
    assert s("slowest_stage_index") == 1
    assert s("slowest_stage_busy_time") == pytest.approx(12 * block_host, rel=1e-9)
    assert s("host_exposed_per_microbatch") == pytest.approx(s("middle_stage_host_exposed"), rel=1e-12)
    # a faster GPU leaves a host-bound pipeline exactly as slow - it never lengthens the step (until 2026-11-29 the
    # other stages were charged the pacing stage's wait, and 25 % more BF16 peak added 0.05 % to this step)
    faster = point(QWEN235_DROP, peak_flops_bf16=1.25 * s("peak_flops_bf16"), peak_flops_fp8=1.25 * s("peak_flops_fp8"))
    assert faster.scalar("step_time") <= s("step_time") * (1 + 1e-12)


def test_data_parallel_traffic_hides_behind_the_host_bound_wall_time(point):
    # a host-bound backward lasts its GPU work plus its wait for the host, and the gradient reduction on its own
    # stream runs through both: the window is the first stage's blocks' backward, recompute and host wait
    for pid, synced in ((QWEN235_DROP, False), ("train-mbridge-26.02-dgx-b200-deepseekv3-256gpu-mxfp8", True)):
        s = point(pid).scalar
        assert s("moe_host_sync") == synced and s("zero_stage") < 3
        blocks = s("first_stage_comm_layers")
        if synced:  # per block, as the sync bounds it
            wait_bwd, wait_fwd = s("host_exposed_bwd_per_layer"), s("host_exposed_fwd_per_layer")
        else:  # the stage's wait spread over its blocks by their backward share of host work
            share = s("host_time_bwd_per_layer") / (s("host_time_fwd_per_layer") + s("host_time_bwd_per_layer"))
            wait_bwd = s("first_stage_host_exposed") / blocks * share
            wait_fwd = s("first_stage_host_exposed") / blocks * (1 - share)
        assert wait_bwd > 0 and s("host_wait_bwd_per_block") == pytest.approx(wait_bwd, rel=1e-12)
        assert s("host_wait_fwd_per_block") == pytest.approx(wait_fwd, rel=1e-12)
        window = s("first_device_layer_count") * (s("layer_time_bwd") + s("layer_time_recompute") + wait_bwd)
        assert s("dp_grad_overlap_window") == pytest.approx(window, rel=1e-12)
