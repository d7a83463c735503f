"""Context parallelism (issue 11): ring / all-gather / Ulysses modes, the per-step ring overlap bound and causal
skipping at 128K - hand-checked worked examples on Llama 3 8B (NeMo 24.07 H100 point) and Llama 3.1 405B."""
from __future__ import annotations

import pytest


from conftest import run_scenario, point_runner

L8B = "train-nemo2407-h100-llama3-8b-8gpu"   # Llama 3 8B: 32 layers, h 4096, 32 heads, 8 KV heads of 128, cp 2
US = 1e-6


@pytest.fixture(scope="module")
def point():
    return point_runner(L8B)


def test_ring_is_the_default_and_hides_behind_attention_blocks(point):
    r = point()
    assert r.scalar("cp_mode") == 0  # ring
    # K and V of the local 4096 tokens: 2 x 2 bytes x 4096 x 1024
    assert r.scalar("cp_p2p_msg_bytes") == 2 * 2 * 4096 * 1024 == 16_777_216
    # each of the cp=2 steps carries half the GPU's causal attention
    assert r.scalar("cp_attention_block_time_fwd") == pytest.approx(r.scalar("attention_core_time_fwd") / 2, rel=1e-12)
    # one step's transfer (~58 us over NVLink) is shorter than one block (~456 us): nothing exposed
    assert r.scalar("cp_p2p_net_time") < r.scalar("cp_attention_block_time_fwd")
    assert r.scalar("cp_comm_exposed_per_microbatch") == 0 and r.scalar("step_cp_comm_time") == 0
    # before overlap: 3 x (cp - 1) transfers per layer, on all 32 layers of the one stage
    assert r.scalar("cp_comm_time_per_layer") == pytest.approx(3 * r.scalar("cp_p2p_net_time"), rel=1e-12)
    assert r.scalar("slowest_stage_layers") == 32


def test_ring_across_nodes_is_exposed_by_the_per_step_bound(point):
    """cp 16 over two DGX H100 nodes at 8K: each GPU holds 512 tokens, a step sends 2 MiB over NDR."""
    r = point(cp=16, dp=1)
    assert r.scalar("cp_domains") == 2 and r.scalar("cp_p2p_msg_bytes") == 2 * 2 * 512 * 1024 == 2_097_152
    # launch 9.1 us + Simple step 14 us + 2 MiB / (400 Gb/s x 0.9) = 9.1 + 14 + 46.603 = 69.703 us (LL: 2.7 + 93.2)
    p2p = 9.1 * US + 14 * US + 2_097_152 / 45e9
    assert r.scalar("cp_p2p_net_time") == pytest.approx(p2p, rel=1e-12)
    assert p2p == pytest.approx(69.703 * US, abs=0.001 * US)
    blk = r.scalar("cp_attention_block_time_fwd")            # ~7.9 us: 512 queries x 512 keys (H100 attention_efficiency 0.35)
    # 15 steps x (forward K/V exposed + backward K/V and dK/dV behind 2.5 blocks)
    exposed = 15 * ((p2p - blk) + (2 * p2p - 2.5 * blk))
    assert r.scalar("cp_ring_exposed_per_layer") == pytest.approx(exposed, rel=1e-12)
    assert exposed == pytest.approx(2721.1 * US, rel=1e-3)
    assert r.scalar("cp_comm_exposed_per_microbatch") == pytest.approx(32 * exposed, rel=1e-12)
    # selective recompute reruns the core attention and its forward ring; full recompute too
    sel = point(cp=16, dp=1, recompute="selective")
    assert sel.scalar("cp_ring_exposed_per_layer") == pytest.approx(15 * (2 * (p2p - blk) + (2 * p2p - 2.5 * blk)), rel=1e-12)


def test_allgather_mode_gathers_kv_twice_and_reduce_scatters_dkv(point):
    r = point(cp_mode="allgather", cp=16, dp=1, cp_comm_overlap=0)
    # gathered K/V of the whole 8K sequence: 16 x 2 MiB
    assert r.scalar("cp_allgather_msg_bytes") == 16 * 2_097_152
    ag = r.scalar("cp_allgather_net_time")
    assert r.scalar("cp_reducescatter_net_time") == ag
    assert r.scalar("cp_allgather_time_per_layer") == pytest.approx(3 * ag, rel=1e-12)  # fwd AG, bwd AG + RS
    assert r.scalar("cp_comm_exposed_per_microbatch") == pytest.approx(32 * 3 * ag, rel=1e-12)
    full = point(cp_mode="allgather", cp=16, dp=1, recompute="full")
    assert full.scalar("cp_allgather_time_per_layer") == pytest.approx(4 * ag, rel=1e-12)


def test_ulysses_all_to_all_volumes_and_head_check(point):
    r = point(cp_mode="ulysses")
    # Q (32 heads) + K, V (8 heads each) of 4096 local tokens, x 128 x 2 bytes; output 32 heads
    assert r.scalar("cp_ulysses_qkv_bytes") == 2 * 4096 * (4096 + 2 * 1024) == 50_331_648
    assert r.scalar("cp_ulysses_out_bytes") == 2 * 4096 * 4096 == 33_554_432
    # cp 2 inside one NVLink domain: half of each buffer leaves the GPU, over the ring bandwidth
    per_byte = (2 - 1) / 2 / r.scalar("scaleup_ring_bw")
    assert r.scalar("cp_alltoall_time_per_byte") == pytest.approx(per_byte, rel=1e-12)
    lat = r.scalar("collective_launch_latency") + r.scalar("scaleup_simple_hop_latency")
    one_pass = 2 * lat + (50_331_648 + 33_554_432) * per_byte
    assert r.scalar("cp_ulysses_time_per_layer") == pytest.approx(2 * one_pass, rel=1e-12)  # forward + backward
    assert r.scalar("parallel_config_valid")
    # 8 KV heads cannot split over cp 16: Ulysses is invalid there, the ring is not
    assert not point(cp_mode="ulysses", cp=16, dp=1).scalar("cp_heads_divisible")
    assert point(cp_mode="ring", cp=16, dp=1).scalar("cp_heads_divisible")


def test_causal_skipping_at_128k(model):
    """Llama 3.1 405B at 131,072 tokens, tp 8, cp 16 (Dubey et al. 2024, Table 4 long-context row)."""
    r = run_scenario(model, "llama3-405b-h100-16k", cp=16, dp=8, seq_len=131072, global_batch=128)
    s, cp, tp = 131072, 16, 8
    # each GPU: 128/8 heads x s/cp queries x s keys x (1/2 (lower triangle) + 128/(2 s) (the masked halves of the
    # 128-row diagonal tiles)) = 8,589,934,592 x (1 + 1/1024) = 8,598,323,200 scores per layer
    assert r.scalar("flash_block_rows") == 128
    assert r.scalar("attention_scores_per_layer") == 16 * (s // cp) * s * (1 / 2 + 128 / (2 * s)) == 8_598_323_200
    # summed over the cp x tp GPUs of a layer: half of the full s x s score matrix of all 128 heads, plus the
    # s x 128 / 2 masked scores of the diagonal tiles per head
    assert r.scalar("attention_scores_per_layer") * cp * tp == 128 * (s * s / 2 + s * 128 / 2)
    # Q K^T and P V, 2 FLOP per MAC, head_dim 128: 4 x 8.598e9 x 128 = 4.402e12 FLOP per layer and GPU
    assert r.scalar("attention_core_flops_fwd") == pytest.approx(4 * 8_598_323_200 * 128, rel=1e-12)
    # the model-FLOPs count (causal convention) also takes half: s/2 keys per query on average
    full = run_scenario(model, "llama3-405b-h100-16k", cp=16, dp=8, seq_len=131072, global_batch=128,
                        attention_flops_mask="full")
    causal = run_scenario(model, "llama3-405b-h100-16k", cp=16, dp=8, seq_len=131072, global_batch=128,
                          attention_flops_mask="causal")
    assert causal.scalar("attention_score_macs_per_token") == pytest.approx(full.scalar("attention_score_macs_per_token") / 2, rel=1e-12)
    # load-balanced chunks: every ring step is 1/cp of the GPU's causal work
    assert r.scalar("cp_attention_block_time_fwd") == pytest.approx(r.scalar("attention_core_time_fwd") / cp, rel=1e-12)


def test_repeated_kv_heads_are_what_the_exchange_and_the_kernel_see(point):
    """torchtitan repeats each of Llama 3 8B's 8 KV heads for its 4 query heads before SDPA, so the
    context-parallel all-gather (and FlashAttention's K/V traffic) carries 32 heads, not 8."""
    gqa = point(cp_mode="allgather", cp_comm_overlap=0)
    rep = point(cp_mode="allgather", cp_comm_overlap=0, attention_kv_repeat="yes")
    # K and V of the local 4096 tokens: 2 x 2 bytes x 4096 x (32 x 128) against 8 x 128 without the repeat
    assert gqa.scalar("cp_kv_bytes") == 2 * 2 * 4096 * 1024 == 16_777_216
    assert rep.scalar("cp_kv_bytes") == 2 * 2 * 4096 * 4096 == 67_108_864
    assert rep.scalar("attention_k_tensor_width") == rep.scalar("attention_v_tensor_width") == 4096
    # the gathered buffer of the cp = 2 group is four times larger; the gather takes 3-4x as long (fixed
    # latency per step), and the exposed exchange of the step grows with it
    assert rep.scalar("cp_allgather_msg_bytes") == 2 * 67_108_864
    ratio = rep.scalar("cp_allgather_net_time") / gqa.scalar("cp_allgather_net_time")
    assert 3 < ratio < 4
    assert rep.scalar("step_cp_comm_time") == pytest.approx(ratio * gqa.scalar("step_cp_comm_time"), rel=1e-9)
    # queries and FLOPs do not change; the kernel streams 4x the K/V bytes
    assert rep.scalar("attention_core_flops_fwd") == gqa.scalar("attention_core_flops_fwd")
    assert rep.scalar("attention_core_bytes_fwd") > gqa.scalar("attention_core_bytes_fwd")
    # the repeat itself: read 8 and write 32 heads of K and of V, 2 x 4096 x 2 x (1024 + 4096) = 83,886,080 bytes,
    # once forward and once backward (the sum back over the copies)
    assert gqa.scalar("kv_repeat_time_fwd") == 0
    assert rep.scalar("kv_repeat_time_fwd") == pytest.approx(83_886_080 / rep.scalar("memory_rate"), rel=1e-12)
    for phase in ("layer_time_fwd", "layer_time_bwd"):
        assert rep.scalar(phase) - gqa.scalar(phase) == pytest.approx(
            rep.scalar("kv_repeat_time_fwd") + (rep.scalar("attention_core_time_fwd") - gqa.scalar("attention_core_time_fwd"))
            * (1 if phase == "layer_time_fwd" else rep.scalar("attention_bwd_factor")), rel=1e-9)
