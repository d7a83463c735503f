"""Mixture-of-experts training (issue 11): expert data parallelism, dispatch volumes, MoE memory, ZeRO-3
semantics - hand-checked worked examples on the DeepSeek-V3 Megatron-Bridge layout (1024 H100, tp 2, pp 8,
ep 64, etp 1, dp 64) and the Qwen3-235B one (EP 32 from the TP x DP ranks)."""
from __future__ import annotations

import pytest


from conftest import point_runner

DSV3 = "train-mbridge-25.09-dgx-h100-deepseekv3-1024gpu-fp8"
QWEN235 = "train-mbridge-25.11-dgx-h100-qwen3-235b-a22b-256gpu-fp8-cs"


@pytest.fixture(scope="module")
def point():
    return point_runner(DSV3)


# DeepSeek-V3 by hand (DeepSeek-AI 2024, Sec. 4.2): 58 MoE layers of 256 routed experts, SwiGLU width 2048
EXPERT = 3 * 7168 * 2048                      # 44,040,192 weights per expert
ROUTED = 58 * 256 * EXPERT                    # 653,908,770,816 routed-expert weights


def test_edp_and_expert_sharding_deepseek_v3(point):
    r = point(first_stage_layers=0, last_stage_layers=0)  # even split: 61/8 layers, the 3 dense ones among them
    assert r.scalar("edp") == 2 * 1 * 64 / (64 * 1) == 2
    assert r.scalar("dense_dp") == 64
    assert r.scalar("routed_expert_params") == ROUTED
    stage = (61 / 8 - 3) * 256 * EXPERT / (64 * 1)         # 4.625 MoE layers' experts over ep x etp: 8.15e8
    assert r.scalar("expert_params_per_gpu") == pytest.approx(stage, rel=1e-12)
    dense = r.scalar("dense_params_per_gpu")
    # distributed optimizer (ZeRO-1): dense states over dp x cp = 64, expert states over edp = 2
    assert r.scalar("optimizer_memory") == pytest.approx(12 * (dense / 64 + stage / 2), rel=1e-12)
    # the expert share dominates: ~4.9 GB of 12-byte states per GPU (~0.15 GB if sharded over dp x cp = 64)
    assert 12 * stage / 2 / 1e9 == pytest.approx(4.89, abs=0.01)


def test_qwen3_235b_ep_from_tp_and_dp_ranks(point):
    r = point(QWEN235)
    assert r.scalar("edp") == 1 and r.scalar("experts_divisible")
    assert r.scalar("ep_group_stride") == 1 and r.scalar("ep_domains") == 4  # 32 consecutive ranks: 4 DGX nodes


def test_ep_dispatch_is_each_tp_ranks_share(point):
    r = point()
    # b s / tp tokens x top_k copies x h x 2 bytes = 2048 x 8 x 7168 x 2
    assert r.scalar("ep_dispatch_bytes") == 2048 * 8 * 7168 * 2 == 234_881_024
    assert r.scalar("ep_alltoall_msg_bytes") == r.scalar("ep_dispatch_bytes")


def test_full_recompute_repeats_ep_and_cp_exchanges(point):
    none = point(recompute="none", cp=2, dp=32)
    full = point(recompute="full", cp=2, dp=32)
    assert full.scalar("ep_alltoalls_per_layer") == 6 and none.scalar("ep_alltoalls_per_layer") == 4
    assert full.scalar("ep_comm_time_per_layer") == pytest.approx(1.5 * none.scalar("ep_comm_time_per_layer"))
    assert full.scalar("cp_comm_time_per_layer") == pytest.approx(4 / 3 * none.scalar("cp_comm_time_per_layer"))


def test_distributed_optimizer_volume_is_reduce_scatter_plus_all_gather(point):
    r = point(dp_comm_overlap=0)
    dense, expert = r.scalar("dense_params_per_gpu"), r.scalar("expert_params_per_gpu")
    assert r.scalar("dp_reducescatter_msg_bytes") == pytest.approx(4 * dense)   # fp32 main grads
    emb = r.scalar("stage_embedding_output_params")  # the recipe gathers FP8 layer weights (fp8_param_gather)
    assert r.scalar("dp_allgather_msg_bytes") == pytest.approx(1 * (dense - emb) + 2 * emb)  # bf16 embedding
    assert r.scalar("edp_allgather_msg_bytes") == pytest.approx(1 * expert)
    assert r.scalar("edp_reducescatter_msg_bytes") == pytest.approx(4 * expert)
    assert r.scalar("dp_comm_time") == pytest.approx(
        r.scalar("dp_reducescatter_net_time") + r.scalar("dp_allgather_net_time")
        + r.scalar("edp_reducescatter_net_time") + r.scalar("edp_allgather_net_time"))
    z0 = point(dp_comm_overlap=0, zero_stage=0)
    assert z0.scalar("dp_comm_time") == pytest.approx(z0.scalar("dp_allreduce_net_time") + z0.scalar("edp_allreduce_net_time"))


def test_zero3_gathers_per_microbatch_and_holds_the_gathered_unit(point):
    yes = point(zero_stage=3, fsdp_reshard_after_forward="yes")
    no = point(zero_stage=3, fsdp_reshard_after_forward="no")
    m = yes.scalar("microbatches")
    assert m == 8192 / 64
    ag = yes.scalar("dp_allgather_net_time") + yes.scalar("edp_allgather_net_time")
    rs = yes.scalar("dp_reducescatter_net_time") + yes.scalar("edp_reducescatter_net_time")
    assert yes.scalar("dp_comm_time") == pytest.approx(m * (2 * ag + rs))
    assert no.scalar("dp_comm_time") == pytest.approx(m * (ag + rs))
    assert yes.scalar("fsdp_gathered_weight_memory") == pytest.approx(2 * 2 * yes.scalar("layer_params_per_gpu"))
    # without resharding, the stage's weights stay whole: shard + gathered = unsharded weights
    assert no.scalar("weight_memory") + no.scalar("fsdp_gathered_weight_memory") == pytest.approx(
        2 * no.scalar("params_per_gpu"))
    z1 = point(zero_stage=1)
    assert z1.scalar("fsdp_gathered_weight_memory") == 0


def test_moe_dispatch_buffers_in_activation_memory(point):
    r = point()
    assert r.scalar("gemm_input_activation_bytes") == 1   # the FP8 recipe keeps FP8 copies of GEMM inputs
    # Megatron-Core's weighted SwiGLU applies the router probabilities: only the fc1 input is kept,
    # (4096/2 tokens) x 8 copies x 7168 x 1 FP8 byte, on 58 of 61 layers
    assert r.scalar("moe_dispatch_activation_memory") == pytest.approx(2048 * 8 * 7168 * 1 * 58 / 61, rel=1e-12)
    # probabilities on the expert outputs: those outputs (bf16, 2 bytes) are kept as well
    out = point(moe_probs_applied="output")
    assert out.scalar("moe_dispatch_activation_memory") == pytest.approx(2048 * 8 * 7168 * (1 + 2) * 58 / 61, rel=1e-12)
    bf16 = point(compute_dtype="bf16")
    assert bf16.scalar("moe_dispatch_activation_memory") == pytest.approx(2048 * 8 * 7168 * 2 * 58 / 61, rel=1e-12)


def test_full_recompute_working_layer_keeps_scores_without_flash(point):
    kw = dict(attention_impl="standard")
    none = point(recompute="none", **kw)
    full = point(recompute="full", **kw)
    scores = full.scalar("attention_score_bytes_standard")
    assert scores == pytest.approx(1 * 128 * 4096 * 4096 * 2 / 2)  # b a s^2 x 2 bytes / tp, no dropout
    assert full.scalar("recompute_working_layer_memory") == pytest.approx(none.scalar("full_layer_activation_memory"))
    assert point(recompute="full").scalar("recompute_working_layer_memory") < full.scalar("recompute_working_layer_memory")


def test_capacity_and_load_imbalance(point):
    drop = point(moe_token_dropping="yes", capacity_factor=1.25, moe_load_imbalance=2)
    assert drop.scalar("moe_dropped_token_fraction") == pytest.approx(1 - 1.25 / 2)
    assert drop.scalar("moe_expert_token_factor") == 1.25
    base = point()
    hot = point(moe_load_imbalance=1.5)
    assert hot.scalar("moe_expert_token_factor") == 1.5 and hot.scalar("moe_dropped_token_fraction") == 0
    assert hot.scalar("ep_dispatch_bytes") == pytest.approx(1.5 * base.scalar("ep_dispatch_bytes"))
    assert hot.scalar("step_time") > base.scalar("step_time")


def test_permutation_bytes(point):
    t = 2048  # tokens each tp rank dispatches
    r = point(ep_dispatcher="alltoall")
    per_moe_layer = 2 * t * 7168 * (2 * (1 + 8) + 4 * 8)  # permute/unpermute + local sort (4 local experts)
    assert r.scalar("moe_permute_bytes_fwd") == pytest.approx(per_moe_layer * 58 / 61, rel=1e-12)
    # the recipe's DeepEP gathers and scatters inside its dispatch and combine kernels: only the received rows, one per
    # token and GPU (64 (1 - (63/64)^8) = 7.17 of 8 copies on EP 64), are permuted into the 8 expert copies and back
    deepep = point()
    rows = 64 * (1 - (63 / 64) ** 8)
    assert deepep.scalar("moe_permute_bytes_fwd") == pytest.approx(2 * t * 7168 * 2 * (rows + 8) * 58 / 61, rel=1e-12)


def test_fused_experts_dispatch_runs_no_permutation(point):
    # torchtitan's Dist-MoE (DeepSeek-V3 on 256 GB300, EP 64 in the NVL72 domain): one operation writes every routed
    # copy into its expert's rows on the target GPU - the all-to-all's NVLink bytes, none of its permutation passes
    pid = "train-torchtitan-dsv3-671b-256gpu-gb300-pp1"
    # the data-parallel traffic held hidden: bounded by its window, its exposed part would grow as the step shrinks
    fused, a2a = point(pid, dp_overlap_bound="no"), point(pid, ep_dispatcher="alltoall", dp_overlap_bound="no")
    assert fused.scalar("moe_permute_bytes_fwd") == 0
    t = 4096  # one 4,096-token sequence per microbatch, tp 1: (2 (1 + 8) + 4 x 8) rows of 7168 bf16 per MoE layer
    assert a2a.scalar("moe_permute_bytes_fwd") == pytest.approx(2 * t * 7168 * 50 * 58 / 61, rel=1e-12)
    assert fused.scalar("ep_rank_dedup_factor") == 1 == fused.scalar("ep_scaleout_dedup_factor")
    assert fused.scalar("ep_alltoall_net_time") == a2a.scalar("ep_alltoall_net_time")
    # the backward moves the same bytes as the forward (moe_pointwise_time_bwd): 2 passes x 16 microbatches x 61 layers
    saved = 2 * 16 * 61 * a2a.scalar("moe_permute_bytes_fwd") / a2a.scalar("moe_permute_rate")
    assert a2a.scalar("step_time") - fused.scalar("step_time") == pytest.approx(saved, rel=0.02)
    # without expert parallelism the tokens are still permuted locally, as by the all-to-all dispatcher
    assert point(pid, ep=1, dp=256).scalar("moe_permute_bytes_fwd") == point(
        pid, ep=1, dp=256, ep_dispatcher="alltoall").scalar("moe_permute_bytes_fwd")


def test_contiguous_routing_reaches_fewer_gpus(point):
    # NeMo AutoModel's fake balanced gate sends token t to experts 8t ... 8t + 7 (mod 128): on EP 8 each GPU holds 16
    # consecutive experts, so every token reaches one GPU, where random routing reaches 8 (1 - (7/8)^8) = 5.25
    qwen = "train-automodel-h100-qwen3-30b-a3b-8gpu"
    contiguous, random = point(qwen), point(qwen, moe_routing_pattern="random")
    assert contiguous.scalar("ep_gpus_per_token") == 1
    assert random.scalar("ep_gpus_per_token") == pytest.approx(8 * (1 - (7 / 8) ** 8))
    assert contiguous.scalar("ep_rank_dedup_factor") == 1 / 8
    fixed = contiguous.scalar("collective_launch_latency") + contiguous.scalar("scaleup_simple_hop_latency")
    assert contiguous.scalar("ep_alltoall_net_time") - fixed == pytest.approx(
        (random.scalar("ep_alltoall_net_time") - fixed) / (8 * (1 - (7 / 8) ** 8)), rel=1e-12)
    # DeepEP permutes the received rows (one per token and GPU) into the 8 expert copies and back: 2 (1/8 + 1) 8 rows
    t = 4 * 4096  # micro-batch 4 of 4,096 tokens, tp 1
    assert contiguous.scalar("moe_permute_bytes_fwd") == pytest.approx(2 * t * 2048 * 2 * (1 / 8 + 1) * 8, rel=1e-12)
    # DeepSeek-V3 on EP 64 (4 local experts): 8 consecutive experts span 1 + (8 - 4)/4 = 2 GPUs, all in one 8-GPU node
    dsv3 = point("train-automodel-h100-deepseek-v3-256gpu")
    assert dsv3.scalar("ep_gpus_per_token") == 2 and dsv3.scalar("ep_domains_per_token") == 1
    assert point("train-automodel-h100-deepseek-v3-256gpu", moe_routing_pattern="random").scalar(
        "ep_domains_per_token") == pytest.approx(8 * (1 - (7 / 8) ** 8))
    # top-8 of 128 on EP 32 (4 local experts): 2 GPUs; on EP 128 (1 local expert): 8
    assert point(qwen, ep=32, dp=32).scalar("ep_gpus_per_token") == 2
    assert point(qwen, ep=128, dp=128).scalar("ep_gpus_per_token") == 8


def test_dense_models_have_no_moe_cost(point):
    r = point("train-mbridge-25.11-dgx-h100-llama3-70b-64gpu-fp8-cs")
    for n in ("moe_permute_bytes_fwd", "moe_router_pointwise_bytes_fwd", "moe_pointwise_time_fwd",
              "moe_dispatch_activation_memory", "expert_params_per_gpu"):
        assert r.scalar(n) == 0, n


def test_deepep_sends_a_token_once_per_remote_node(point):
    # DeepSeek-V3 on EP 64 = 8 DGX nodes, node-limited to 4 (DeepSeek-AI 2024, Sec. 2.1.2): 4 x 7/8 = 3.5 remote
    # node copies per token instead of 8 x 56/64 = 7 routed copies - half the InfiniBand bytes
    a2a = point(moe_node_limit=4, ep_dispatcher="alltoall")   # the point itself runs DeepEP (its recipe)
    deepep = point(moe_node_limit=4, ep_dispatcher="deepep")
    assert a2a.scalar("ep_scaleout_dedup_factor") == 1
    assert deepep.scalar("ep_domains_per_token") == 4
    assert deepep.scalar("ep_scaleout_dedup_factor") == pytest.approx(0.5)
    free = point(ep_dispatcher="deepep", moe_node_limit=0)  # no node limit: 8 (1 - (7/8)^8) = 5.25 domains hit
    assert free.scalar("ep_domains_per_token") == pytest.approx(8 * (1 - (7 / 8) ** 8))
    assert deepep.scalar("ep_alltoall_net_time") < a2a.scalar("ep_alltoall_net_time")


def test_deepep_sends_a_token_once_per_gpu_inside_the_domain(point):
    # Qwen3-235B on 256 GB200 (Model Zoo BF16 row): EP 8 inside one NVL72 domain, 8 of 128 experts per token.
    # DeepEP / HybridEP dispatch a token once to each GPU holding any of its experts: 8 (1 - (7/8)^8) = 5.25
    # GPUs hit out of 8 routed copies, so the NVLink bytes shrink to 0.656 of the plain all-to-all's
    pid = "train-mzoo-gb200-qwen3-235b-a22b-256gpu-bf16"
    deepep, a2a = point(pid), point(pid, ep_dispatcher="alltoall")
    assert deepep.scalar("ep_domains") == 1 and deepep.scalar("ep_rank_dedup_factor") == pytest.approx(1 - (7 / 8) ** 8)
    assert a2a.scalar("ep_rank_dedup_factor") == 1
    fixed = deepep.scalar("collective_launch_latency") + deepep.scalar("scaleup_simple_hop_latency")
    assert deepep.scalar("ep_alltoall_net_time") - fixed == pytest.approx(
        (a2a.scalar("ep_alltoall_net_time") - fixed) * (1 - (7 / 8) ** 8), rel=1e-12)
    # 4096 tokens x top-8 x hidden 4096 x 2 bytes, 7/8 of it to the other GPUs, 0.656 of that sent
    assert deepep.scalar("ep_alltoall_msg_bytes") == 4096 * 8 * 4096 * 2


# --- pipelines and MTP -----------------------------------------------------------------------------
def test_uneven_layout_and_mtp_on_the_last_stage(point):
    r = point()  # layout 'Et|(tt|)*30mL' on pp 8 x vpp 4: 7 / 8 x 6 / 6 + MTP + loss
    assert (r.scalar("first_stage_layer_count"), r.scalar("middle_stage_layer_count"),
            r.scalar("last_stage_layer_count")) == (7, 8, 6)
    lt = r.scalar("layer_compute_time_per_microbatch")
    assert r.scalar("last_stage_compute_time") == pytest.approx(6 * lt + r.scalar("logits_time") + r.scalar("mtp_time_per_microbatch"))
    assert r.scalar("stage_compute_time_per_microbatch") == pytest.approx(
        max(7 * lt, 8 * lt, r.scalar("last_stage_compute_time")))
    # MTP module of DeepSeek-V3: one MoE block + 2h x h projection + 2 norms; the report's 14B also counts
    # the checkpoint's copies of the shared embedding and head (2 x 129280 x 7168 = 1.85B)
    block = r.scalar("attention_params_per_layer") + 2 * 7168 + 256 * EXPERT + EXPERT + 7168 * 256
    assert r.scalar("mtp_params") == pytest.approx(block + 2 * 7168**2 + 2 * 7168)
    assert (r.scalar("mtp_params") + 2 * 129280 * 7168) / 1e9 == pytest.approx(13.5, abs=0.1)
    even = point(first_stage_layers=0, last_stage_layers=0)
    assert even.scalar("first_stage_layer_count") == 61 / 8


def test_mtp_flops_per_token(point):
    r, off = point(), point(mtp_depth=0)
    h, v = 7168, 129280
    macs = (r.scalar("attention_weights_per_layer") + 9 * EXPERT + h * 256 + 2 * h * h
            + 2 * 4096 * 128 * 96 / 2 + h * v)
    assert r.scalar("mtp_fwd_flops_per_token") == pytest.approx(2 * macs)
    assert r.scalar("model_flops_per_token") - off.scalar("model_flops_per_token") == pytest.approx(6 * macs)


@pytest.mark.parametrize("schedule, bubble_of", [
    ("one_f_one_b", None),                                        # interleaved, vpp 4: checked below
    ("zb_h1", lambda p, m, w, f: (p - 1) * (m - 2 * w)),          # (p-1)(F+B-W), m = F+B+W
    ("zb_h2", lambda p, m, w, f: (p - 1) * max(0, m - 3 * w)),    # (p-1)(F+B-2W)
    ("dualpipe", lambda p, m, w, f: (p / 2 - 1) * max(0, m + (m - f - w) - 3 * w)),
])
def test_pipeline_schedules(point, schedule, bubble_of):
    r = point(pipeline_schedule=schedule)
    m, w = r.scalar("microbatch_time"), r.scalar("stage_weight_grad_time_per_microbatch")
    f = r.scalar("stage_forward_time_per_microbatch")
    # the last stage paces (6 layers and the MTP block; under DualPipe the mean of the first's 7 and the last's 7)
    assert r.scalar("slowest_stage_layers") == 7
    assert w == pytest.approx(7 * r.scalar("layer_gemm_time_fwd"))
    if bubble_of is None:  # the 7 stages other than the slowest (the last: 6 layers, MTP, output layer), over v = 4
        first, middle, last = (r.scalar(f"{s}_stage_busy_time") for s in ("first", "middle", "last"))
        assert last > middle > first
        expected = (first + 6 * middle + 7 * (m - last)) / 4
    else:
        expected = bubble_of(8, m, w, f)
    assert r.scalar("step_bubble_time") == pytest.approx(expected)
    inflight = {"one_f_one_b": 8 * (1 + 7 / 32), "zb_h1": 8, "zb_h2": 15, "dualpipe": 9}[schedule]
    assert r.scalar("inflight_microbatch_factor") == pytest.approx(inflight)
    assert r.scalar("pipeline_param_copies") == (2 if schedule == "dualpipe" else 1)


def test_each_pipeline_flush_fills_and_drains(point):
    # NeMo AutoModel's DeepSeek-V3 on 1,024 H100: 32 microbatches per step run as 4 gradient-accumulation steps, each
    # its own interleaved schedule (PP 4 x VP 8) of 8: four bubbles of (p - 1)/v slots instead of one, the same work
    pid = "train-automodel-h100-deepseek-v3-1024gpu"
    four, one = point(pid), point(pid, pipeline_flushes=1)
    assert four.scalar("microbatches") == 32 and four.scalar("schedule_microbatches") == 8
    m = four.scalar("microbatch_time")
    # one schedule's bubble: the three stages other than the slowest, over v = 8
    busy = sorted(four.scalar(f"{s}_stage_busy_time") for s in ("first", "middle", "last"))
    slowest = four.scalar("slowest_stage_busy_time")
    assert slowest == busy[-1]
    assert one.scalar("step_bubble_time") == pytest.approx(
        (four.scalar("stage_busy_time_sum") - slowest + 3 * (m - slowest)) / 8)
    assert four.scalar("stage_busy_time_sum") == pytest.approx(
        sum(four.scalar(f"{s}_stage_busy_time") * n for s, n in (("first", 1), ("middle", 2), ("last", 1))))
    assert four.scalar("step_bubble_time") == pytest.approx(4 * one.scalar("step_bubble_time"))
    assert four.scalar("step_compute_time") == one.scalar("step_compute_time")
    # the first stage holds p (1 + (p-1)/(p v)) microbatches either way: 8 and 32 both exceed p = 4
    assert four.scalar("pipeline_inflight_microbatches") == one.scalar("pipeline_inflight_microbatches")
    # 2 microbatches per schedule cap it below p; the step's batch must split into whole schedules
    assert point(pid, pipeline_flushes=16).scalar("pipeline_inflight_microbatches") == \
        pytest.approx(2 * (1 + 3 / 32))
    assert not point(pid, pipeline_flushes=3).scalar("batch_divisible")


def test_dualpipe_pairs_the_mirrored_stages(point):
    # DualPipe (DeepSeek-V3 report, Sec. 3.2.1, Fig. 5): device i holds stage i of one model copy and stage
    # pp-1-i of the other, half the microbatches go each way, so the end device runs the mean of the first and
    # the last stage; 1F1B waits for the slower of the two. DeepSeek-V3 in the 25.09 layout (pp 8: 7 / 8 x 6 / 6
    # layers, the last stage with the output layer and the MTP module): 108.0 / 123.4 / 149.3 ms per microbatch,
    # so 1F1B is paced by 149.3 ms and DualPipe by max((108.0 + 149.3) / 2, 123.4) = 128.6 ms (135.0 ms before
    # Hopper's refit to 0.61 x 0.88 with the SM contention of hidden traffic, 2026-11-28)
    one, dual = point(), point(pipeline_schedule="dualpipe")
    first, last = one.scalar("first_stage_compute_time"), one.scalar("last_stage_compute_time")
    middle = one.scalar("middle_stage_compute_time")
    assert one.scalar("slowest_stage_compute_time_per_microbatch") == pytest.approx(max(first, middle, last))
    assert dual.scalar("first_stage_compute_time") == pytest.approx(first)  # the schedule moves no work
    assert dual.scalar("slowest_stage_compute_time_per_microbatch") == \
        pytest.approx(max((first + last) / 2, middle))
    assert dual.scalar("slowest_stage_compute_time_per_microbatch") == pytest.approx(0.12863, rel=1e-3)


def test_the_slowest_stage_counts_its_own_communication():
    # DeepSeek-V3 on 256 B200 (Megatron-Bridge 26.02, PP 16): 4 layers on each of the first 15 stages, the last
    # holds 1 layer, the MTP module's block and the output head. Per layer 14.28 ms of compute and 1.44 ms of
    # exposed EP/TP communication: a 4-layer stage is busy 4 x (14.28 + 1.44) = 62.9 ms, the last stage
    # 14.28 + 19.74 (logits) + 35.17 (MTP) + 2 x 1.44 = 72.1 ms (14.57, 64.1 and 74.1 ms before Blackwell's refit to
    # 0.54 with the SM contention of hidden traffic, 2026-11-28). The last stage paces the pipeline with the
    # communication of its 2 blocks - not with the 4 blocks of the stage with the most layers.
    run = point_runner("train-mbridge-26.02-dgx-b200-deepseekv3-256gpu-mxfp8")
    s = run().scalar
    lc, c = s("layer_compute_time_per_microbatch"), s("layer_comm_exposed_time")
    assert (s("first_stage_layer_count"), s("middle_stage_layer_count"), s("last_stage_layer_count")) == (4, 4, 1)
    assert lc == pytest.approx(14.28e-3, rel=1e-3) and c == pytest.approx(1.443e-3, rel=1e-3)
    first = 4 * (lc + c)
    last = lc + s("logits_time") + s("mtp_time_per_microbatch") + 2 * c
    assert first == pytest.approx(62.87e-3, rel=1e-3) and last == pytest.approx(72.07e-3, rel=1e-3)
    # Dropless MoE syncs the host every layer: each block leaves the GPU waiting 0.47 + 2.62 ms for the host, so
    # a 4-layer stage waits 12.35 ms per microbatch and the last stage, with 2 blocks, 6.18 ms - each stage its own.
    block_wait = s("host_exposed_fwd_per_layer") + s("host_exposed_bwd_per_layer")
    assert block_wait == pytest.approx(3.088e-3, rel=1e-3)
    assert s("first_stage_busy_time") == pytest.approx(first + 4 * block_wait, rel=1e-12)
    assert s("slowest_stage_busy_time") == pytest.approx(last + 2 * block_wait, rel=1e-12)
    assert s("slowest_stage_layers") == 2
    assert s("host_exposed_per_microbatch") == pytest.approx(2 * block_wait, rel=1e-12)
    assert s("slowest_stage_compute_time_per_microbatch") == pytest.approx(last - 2 * c, rel=1e-12)
    assert s("stage_comm_exposed_per_microbatch") == pytest.approx(2 * c + s("pp_comm_exposed_per_microbatch"), rel=1e-12)
    assert s("microbatch_time") == pytest.approx(s("slowest_stage_busy_time") + s("pp_comm_exposed_per_microbatch"),
                                                 rel=1e-12)
    # a stage holding layers with less to do can still pace the pipeline: with the output head and MTP on the
    # stage free of cost, the 4-layer stages do
    light = run(mtp_depth=0, last_stage_layers=4, first_stage_layers=1)
    assert light.scalar("slowest_stage_layers") == 4


def test_zero_bubble_orders_the_bubbles(point):
    b = {s: point(pipeline_schedule=s).scalar("step_bubble_time") for s in ("zb_h1", "zb_h2", "dualpipe")}
    assert b["zb_h2"] < b["zb_h1"]
    # DualPipe's end device holds the first stage and the mirrored copy's last stage (DeepSeek-V3 report, Fig. 5)
    one = point()
    ends = one.scalar("params_per_gpu") + one.scalar("last_stage_dense_params_per_gpu") \
        + one.scalar("last_stage_expert_params_per_gpu")
    assert point(pipeline_schedule="dualpipe").scalar("params_per_gpu") == pytest.approx(ends)


# --- fine-tuning with frozen base weights (LoRA) ---------------------------------------------------
LLAMA70 = "train-mbridge-25.11-dgx-h100-llama3-70b-64gpu-fp8-cs"


def test_lora_parameters_and_trainable_state(point):
    full = point(LLAMA70)
    r = point(LLAMA70, lora_rank=16)
    h, q, kv, f = 8192, 8192, 1024, 28672  # Llama 3 70B: 64 heads x 128, 8 KV heads, SwiGLU 28672
    per_layer = 16 * ((h + q) + 2 * (h + kv) + (q + h)) + 16 * 3 * (h + f)
    assert r.scalar("lora_params") == 80 * per_layer  # 80 layers: 207,093,760
    assert r.scalar("lora_params") == 207_093_760
    tp, pp = r.scalar("tp"), r.scalar("pp")
    assert r.scalar("lora_params_per_gpu") == pytest.approx(80 * per_layer / (tp * pp))
    # gradients and optimizer states only for the adapters; weights = frozen base + adapters
    assert r.scalar("optimizer_memory") == pytest.approx(12 * r.scalar("lora_params_per_gpu") / r.scalar("zero_shards"))
    assert r.scalar("grad_memory") == pytest.approx(2 * r.scalar("lora_params_per_gpu"))  # bf16 grads (the recipe)
    assert r.scalar("weight_memory") == pytest.approx(full.scalar("weight_memory") + 2 * r.scalar("lora_params_per_gpu"))
    assert r.scalar("dp_grad_bytes") == pytest.approx(2 * r.scalar("lora_params_per_gpu"))


def test_lora_backward_skips_base_weight_gradients(point):
    full, r = point(LLAMA70), point(LLAMA70, lora_rank=16)
    assert r.scalar("layer_bwd_gemm_factor") == 1 and full.scalar("layer_bwd_gemm_factor") == 2
    saved = full.scalar("layer_gemm_time_fwd")
    assert full.scalar("layer_time_bwd") - r.scalar("layer_time_bwd") == pytest.approx(
        saved - r.scalar("lora_time_per_layer_microbatch"))
    # hardware FLOPs: 6N + 2 s-terms ... minus one GEMM pass over the base weights, plus 3x the adapters
    d = r.scalar("hardware_flops_per_token") - full.scalar("hardware_flops_per_token")
    assert d == pytest.approx(2 * (3 * r.scalar("lora_macs_per_token") - r.scalar("layer_gemm_macs_per_token")))
    assert r.scalar("step_time") < full.scalar("step_time")
    # executed_mfu drops the skipped weight gradients from mfu's 6N-style numerator
    executed = r.scalar("model_flops_per_token") + 2 * (3 * r.scalar("lora_macs_per_token") - r.scalar("layer_gemm_macs_per_token"))
    assert r.scalar("executed_model_flops_per_token") == pytest.approx(executed, rel=1e-12)
    assert r.scalar("executed_mfu") / r.scalar("mfu") == pytest.approx(executed / r.scalar("model_flops_per_token"), rel=1e-12)
    assert 2 / 3 < r.scalar("executed_mfu") / r.scalar("mfu") < 0.8
    assert full.scalar("executed_mfu") == full.scalar("mfu")


def test_lora_weight_gradient_pass_holds_only_the_adapters(point):
    # zero-bubble schedules fill the bubble with the W pass: frozen base weights have none to defer
    full = point(LLAMA70, pipeline_schedule="zb_h1")
    r = point(LLAMA70, pipeline_schedule="zb_h1", lora_rank=16)
    layers = r.scalar("slowest_stage_layers")
    assert full.scalar("stage_weight_grad_time_per_microbatch") == pytest.approx(layers * full.scalar("layer_gemm_time_fwd"))
    adapters_w = layers * r.scalar("lora_time_per_layer_microbatch") / 3
    assert r.scalar("stage_weight_grad_time_per_microbatch") == pytest.approx(adapters_w)
    assert 0 < adapters_w < 0.05 * full.scalar("stage_weight_grad_time_per_microbatch")
    # so ZB-H1's bubble, (p - 1)(m - 2W), is nearly 1F1B's (p - 1) m for a frozen base
    p, m = r.scalar("pp"), r.scalar("microbatch_time")
    assert r.scalar("step_bubble_time") == pytest.approx((p - 1) * (m - 2 * adapters_w))


def test_lora_backward_collectives_hide_behind_input_gradients_only(point):
    # a frozen base runs no weight-gradient GEMMs, so the backward TP collectives have one GEMM pass to hide behind
    sets = dict(tp_comm_overlap=1, recompute="none")
    full, r = point(LLAMA70, **sets), point(LLAMA70, lora_rank=16, **sets)
    for x, factor in ((full, 2), (r, 1)):
        t, a, m = (x.scalar(n) for n in ("tp_collective_time", "tp_attention_overlap_window", "tp_mlp_overlap_window"))
        share = x.scalar("tp_mlp_collective_share")
        fwd = max(0, t - a) + share * max(0, t - m)
        bwd = max(0, t - factor * a) + share * max(0, t - factor * m)
        regather = x.scalar("tp_sp_regathers_per_layer") * x.scalar("tp_allgather_net_time") - x.scalar("tp_sp_regather_hidden_per_layer")
        assert x.scalar("tp_overlapped_exposed_per_layer") == pytest.approx(fwd + bwd + regather)
    # Megatron's async input-gradient all-reduce (no sequence parallelism) waits on the weight-gradient GEMM it hides behind
    plain = dict(tp_comm_overlap=0, sequence_parallel="no", tp_async_grad_allreduce="yes")
    assert point(LLAMA70, **plain).scalar("tp_bwd_allreduce_hidden_per_layer") > 0
    assert point(LLAMA70, lora_rank=16, **plain).scalar("tp_bwd_allreduce_hidden_per_layer") == 0


# --- torchtitan per-op selective activation checkpointing --------------------------------------------
def test_per_op_sac_memory_and_recompute(point):
    sel = point(LLAMA70, recompute="selective_op")
    none = point(LLAMA70, recompute="none")
    tp = sel.scalar("tp")
    sp = tp  # sequence parallelism on in the family
    h, q, kv, f = 8192, 8192, 1024, 28672
    saved = 2 * h / sp + (2 * q + kv) / tp + f / tp  # input + w2 out, Q + SDPA out + V, w1 out
    tokens = sel.scalar("tokens_per_microbatch_per_gpu")
    assert sel.scalar("activation_memory_per_layer") == pytest.approx(2 * tokens * saved)
    assert sel.scalar("activation_memory_per_layer") < none.scalar("activation_memory_per_layer")
    # recomputed matmuls wk, wo, w3: h kv + q h + h f MACs per token and layer
    assert sel.scalar("recompute_flops_per_token") == pytest.approx(2 * 80 * (h * kv + q * h + h * f))
    assert 0 < sel.scalar("layer_time_recompute") < sel.scalar("layer_time_fwd")


# --- tensor parallelism inside MoE layers -------------------------------------------------------------
GROK = "train-dgxc-h100-grok1-314b-512gpu-bf16"   # TP 4 = ETP 4, PP 8, CP 2, EP 8, top-2 of 8, capacity 1


def test_expert_tensor_parallel_gather_follows_each_dispatch(point):
    r = point(GROK)
    # Grok-1 by hand: 8192 tokens / CP 2 = 4096 per GPU, / TP 4 (sequence parallel) = 1024 dispatched,
    # x top-2 x capacity 1 x hidden 6144 x 2 bytes = 25,165,824 bytes; gathered over ETP 4 = 100,663,296
    assert r.scalar("ep_dispatch_bytes") == 1024 * 2 * 6144 * 2 == 25_165_824
    assert r.scalar("etp_token_gather_bytes") == 4 * 25_165_824
    # a ring over 4 consecutive ranks of one DGX: launch + 3 hops + 3/4 of the gathered bytes over NVLink
    ring = (r.scalar("collective_launch_latency") + 3 * r.scalar("scaleup_simple_hop_latency")
            + 3 / 4 * 100_663_296 / r.scalar("scaleup_ring_bw"))
    assert r.scalar("etp_token_collective_time") == pytest.approx(ring, rel=1e-12)
    assert r.scalar("ep_exchange_time") == pytest.approx(r.scalar("ep_alltoall_net_time") + ring, rel=1e-12)
    # every all-to-all (4 per layer and microbatch without recompute) carries its gather or reduce-scatter
    assert r.scalar("ep_comm_time_per_layer") == pytest.approx(
        4 * (r.scalar("ep_alltoall_net_time") + ring), rel=1e-12)
    # an expert-TP group larger than the 8-GPU domain runs its ring at the scale-out pace
    wide = point(GROK, tp=16, etp=16, dp=2)
    assert wide.scalar("etp_token_collective_time") == pytest.approx(
        wide.scalar("collective_launch_latency") + 15 * wide.scalar("scaleout_simple_hop_latency")
        + 15 / 16 * wide.scalar("etp_token_gather_bytes")
        / min(wide.scalar("scaleup_ring_bw"), wide.scalar("scaleout_ring_bw")), rel=1e-12)
    # without expert tensor parallelism, or with DeepEP sending to the whole ETP x EP group, nothing is gathered
    assert point(GROK, etp=1).scalar("etp_token_collective_time") == 0
    assert point(GROK, ep_dispatcher="deepep").scalar("etp_token_collective_time") == 0


def test_moe_layers_without_shared_experts_run_only_the_attention_blocks_tp_collectives(point):
    # Qwen3-235B (no shared expert): 2 per layer (attention forward and backward), 3 with full recompute;
    # DeepSeek-V3's shared expert is a tensor-parallel dense MLP, so its MoE layers keep the MLP block's 2
    qwen = point(QWEN235)
    assert qwen.scalar("tp_mlp_collective_share") == 0 and qwen.scalar("tp_collectives_per_layer") == 2
    assert point(QWEN235, recompute="full").scalar("tp_collectives_per_layer") == 3
    dsv3 = point()
    assert dsv3.scalar("tp_mlp_collective_share") == 1 and dsv3.scalar("tp_collectives_per_layer") == 4
    # the backward re-gathers of sequence parallelism follow the same blocks: QKV, plus a dense or shared-expert fc1
    assert qwen.scalar("tp_sp_regathers_per_layer") == 1 and dsv3.scalar("tp_sp_regathers_per_layer") == 2
    dense = point("train-dgxc-h100-nemotron4-340b-128gpu-bf16")
    assert dense.scalar("tp_collectives_per_layer") == 4
    assert point("train-dgxc-h100-nemotron4-340b-128gpu-bf16", recompute="full").scalar("tp_collectives_per_layer") == 6


def test_routed_expert_weights_and_gathered_inputs_split_by_etp(point):
    # Qwen3-235B on 256 H100 (tp 2, etp 1, ep 32): each GPU holds 128/32 = 4 whole experts of
    # 3 x 4096 x 1536 = 18,874,368 weights - the tensor-parallel degree does not split them
    qwen = point(QWEN235)
    assert qwen.scalar("mlp_weight_elements") == 4 * 3 * 4096 * 1536 == 75_497_472
    assert qwen.scalar("routed_weight_elements") == 75_497_472
    # DeepSeek-V3 (tp 2, etp 1, ep 64): 4 routed experts whole, the shared expert split over tp, on 58 of 61 layers,
    # the 3 dense layers' 3 x 7168 x 18432 MLP split over tp
    dsv3 = point()
    assert dsv3.scalar("mlp_weight_elements") == pytest.approx(
        (3 * 3 * 7168 * 18432 + 58 * 1 * EXPERT) / 61 / 2 + 58 * 4 * EXPERT / 61, rel=1e-12)
    # Grok-1 (ETP 4): the grouped GEMM's saved input is the ETP-gathered rows, 4 x the 1,024 x top-2 rows the GPU
    # dispatched, x 6144 x 2 bytes, on every layer
    grok = point(GROK)
    assert grok.scalar("moe_dispatch_activation_memory") == pytest.approx(4 * 1024 * 2 * 6144 * 2, rel=1e-12)
    assert point(GROK, etp=1).scalar("moe_dispatch_activation_memory") == pytest.approx(1024 * 2 * 6144 * 2, rel=1e-12)
    # Grok-1's 8 experts over ep 8 at etp 4: one expert, a quarter of its 3 x 6144 x 32768 weights
    assert grok.scalar("mlp_weight_elements") == pytest.approx(3 * 6144 * 32768 / 4, rel=1e-12)
