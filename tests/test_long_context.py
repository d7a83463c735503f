"""Long-context training (NeMo long-sequence table, Llama 2 7B FP8 on DGX-H100, 16K-1024K, CP up to 32):
FlashAttention's K/V traffic with L2 sharing, the attention time it leaves, the ring exchange at 1M tokens, and
the measured points - hand-checked worked examples."""
from __future__ import annotations

import math

import pytest

from conftest import point_runner

P1M = "train-nemo-longseq-h100-llama2-7b-1024k-1024gpu"   # seq 1,048,576, tp 8, cp 32, dp 4: 32,768 tokens per GPU
P16K = "train-nemo-longseq-h100-llama2-7b-16k-16gpu"      # seq 16,384, tp 2, cp 1
FAMILY = {  # point: measured model TFLOP/s per GPU (NVIDIA/NeMo performance_long_sequence.md, H100 table, with CP)
    P16K: 660, "train-nemo-longseq-h100-llama2-7b-32k-32gpu": 610, "train-nemo-longseq-h100-llama2-7b-64k-64gpu": 574,
    "train-nemo-longseq-h100-llama2-7b-128k-128gpu": 555, "train-nemo-longseq-h100-llama2-7b-256k-256gpu": 549,
    "train-nemo-longseq-h100-llama2-7b-512k-512gpu": 549, P1M: 536}


@pytest.fixture(scope="module")
def point():
    return point_runner(P1M)


def test_kv_streams_once_per_wave_of_query_tiles(point):
    r = point()
    # B_r = min(floor(228 KiB / (4 x 128 x 2 bytes)), 128) = min(228, 128) = 128 query rows per tile
    assert r.scalar("flash_block_rows") == 128
    # 32,768 local queries = 256 tiles per head; 132 SMs run them in ceil(256 / 132) = 2 waves
    assert r.scalar("flash_kv_passes") == math.ceil(32768 / 128 / 132) == 2
    # causal: wave 1 reads the first half of the keys, wave 2 all of them -> (2 + 1) / 2 = 1.5 passes
    assert r.scalar("flash_kv_stream_factor") == pytest.approx(1.5, rel=1e-12)
    # bf16 x mb 1 x d 128 x (Q and O: 2 x 4 heads x 32,768 + K and V: 2 x 4 KV heads x 1,048,576 x 1.5)
    bytes_ = 2 * 128 * (2 * 4 * 32768 + 2 * 4 * 1048576 * 1.5)
    assert bytes_ == 3_288_334_336                       # 3.06 GiB; 256 tiles per head would re-read 256 GiB
    assert r.scalar("attention_core_bytes_fwd") == pytest.approx(bytes_, rel=1e-12)


def test_attention_forward_at_1m_is_set_by_the_tile_gemms(point):
    r = point()
    # mb x heads/tp x local queries x keys x (causal half + the masked halves of the 128-row diagonal tiles)
    scores = 1 * (32 / 8) * 32768 * 1048576 * (0.5 + 128 / (2 * 1048576))
    assert scores == 68_727_865_344
    assert r.scalar("attention_scores_per_layer") == pytest.approx(scores, rel=1e-12)
    flops = 2 * scores * 2 * 128                         # Q K^T and P V: 2 x 128 MACs per score
    assert r.scalar("attention_core_flops_fwd") == pytest.approx(flops, rel=1e-12)
    rate = 989e12 * 0.35                                 # BF16 peak x FlashAttention-2's 35 % on H100
    assert r.scalar("attention_flops_rate") == pytest.approx(rate, rel=1e-12)
    # FlashAttention-2 on Hopper (flash_softmax_overlap 0): loads + tile GEMMs + softmax add up
    t = (3_288_334_336 / r.scalar("memory_rate") + flops / rate
         + 5 * scores / r.scalar("vector_flops_rate"))
    assert r.scalar("attention_core_time_fwd") == pytest.approx(t, rel=1e-12)
    assert flops / rate / t > 0.88                       # 101.6 ms of GEMMs, 10.3 ms softmax, 1.2 ms HBM
    assert t == pytest.approx(0.1131, rel=2e-3)


def test_fa3_class_kernel_is_not_capped_by_hbm():
    """FlashAttention-3 runs causal head_dim-128 attention at 600-740 TFLOP/s on H100 (Shah et al. 2024, Fig. 5):
    with its utilization (0.75) and full overlap the model must reach that; re-reading K/V per 128-row tile could
    not (128 FLOP/byte x 2.68 TB/s sustained = 343 TFLOP/s)."""
    run = point_runner(P16K)
    r = run(attention_efficiency=0.75, flash_softmax_overlap=1)
    assert r.scalar("flash_kv_reuse") == 1                              # wave (the family's setting)
    achieved = r.scalar("attention_core_flops_fwd") / r.scalar("attention_core_time_fwd")
    assert achieved == pytest.approx(0.75 * 989e12, rel=1e-9)           # the tile GEMMs set the time
    assert r.scalar("attention_core_bytes_fwd") / r.scalar("memory_rate") < 0.1 * r.scalar("attention_core_time_fwd")
    # the library default (tile) re-reads K/V per 128-row tile: 16,384 local queries = 128 tiles per head (one wave: 1 pass)
    t = run(attention_efficiency=0.75, flash_softmax_overlap=1, flash_kv_reuse="tile")
    assert t.scalar("flash_kv_passes") == 128 and t.scalar("flash_kv_stream_factor") == 64
    assert r.scalar("flash_kv_passes") == 1 and r.scalar("flash_kv_stream_factor") == 1
    capped = t.scalar("attention_core_flops_fwd") / t.scalar("attention_core_time_fwd")
    assert capped < 128 * t.scalar("memory_rate") * 1.01 and capped < 0.5 * achieved


def test_ring_at_1m_tokens_hides_behind_the_attention_blocks(point):
    r = point()
    # K and V of 32,768 local tokens, 4 KV heads x 128 per TP rank, bf16: 2 x 2 x 32768 x 512 = 64 MiB
    assert r.scalar("cp_p2p_msg_bytes") == 2 * 2 * 32768 * 512 == 67_108_864
    assert r.scalar("cp_domains") == 32                  # TP 8 fills a DGX: every CP neighbour is another node
    blk = r.scalar("cp_attention_block_time_fwd")
    assert blk == pytest.approx(r.scalar("attention_core_time_fwd") / 32, rel=1e-12)   # ~3.5 ms per ring step
    assert 2 * r.scalar("cp_p2p_net_time") < 2.5 * blk and r.scalar("cp_p2p_net_time") < blk
    assert r.scalar("cp_ring_exposed_per_layer") == 0 and r.scalar("step_cp_comm_time") == 0
    assert r.scalar("fits_in_memory")


def test_long_sequence_points_match_the_nemo_table():
    run = point_runner(P1M)
    errs = {pid: run(pid).scalar("model_tflops_per_gpu") / 1e12 / measured - 1 for pid, measured in FAMILY.items()}
    # measured -21 % (16K) to -35 % (512K) before the K/V traffic fix; within 3 % after, flat from 16K to 1024K
    # (512K: -2.5 %, of which 0.7 points are tensor-parallel collectives outlasting their GEMM windows); within 4 %
    # since the SMs that hidden traffic holds are priced with Hopper's refit to 0.61 (2026-11-28: 512K -4.0 %, the
    # rest -1.8..+1.3 %)
    assert all(abs(e) < 0.04 for e in errs.values()), errs
    # the library default attention efficiency (0.6, FlashAttention-2 on A100) would over-predict every point
    fast = run(P1M, attention_efficiency=0.6).scalar("model_tflops_per_gpu") / 1e12 / FAMILY[P1M] - 1
    assert fast > 0.3


B200 = {  # point: measured TFLOP/s per GPU (same page, Llama 3 8B FP8 on DGX-B200, NeMo 25.04.rc2)
    "train-nemo-longseq-b200-llama3-8b-16k-4gpu": 1717, "train-nemo-longseq-b200-llama3-8b-32k-8gpu": 1624,
    "train-nemo-longseq-b200-llama3-8b-64k-16gpu": 1600, "train-nemo-longseq-b200-llama3-8b-128k-32gpu": 1588,
    "train-nemo-longseq-b200-llama3-8b-256k-64gpu": 1590, "train-nemo-longseq-b200-llama3-8b-512k-128gpu": 1619,
    "train-nemo-longseq-b200-llama3-8b-1024k-256gpu": 1608}


def test_b200_rows_pin_blackwell_attention_and_are_flat_in_length():
    """The B200 rows fit Blackwell's attention efficiency (0.55, jointly with gemm_efficiency on the 18 dense
    B200/GB200 rows, templates/hardware/b200; it was 0.6, cuDNN's published rate, not fitted; 0.56 with the SM
    contention of hidden traffic, 2026-11-28): they sit -3.1 % (16K) to +2.4 % with K/V streamed per wave; with the
    per-tile count the error falls with length (-12 % at 16K to -22 % at 1024K; -14 and -22 % before)."""
    run = point_runner(P1M)
    errs = [run(pid).scalar("model_tflops_per_gpu") / 1e12 / m - 1 for pid, m in B200.items()]
    assert all(abs(e) < 0.06 for e in errs), errs          # -2.9..+6.5 % at attention 0.6; 0 < e < 0.10 with Hopper's constants
    # the GEMM-heavier 16K row (TP 1, attention a smaller share, the BF16 output layer's logits the largest share
    # there) reads slowest: spread 6.2 points (-5.2 to +1.0 %); 9.4 at attention 0.6, 7.5 before the BF16 output layer
    assert max(errs) - min(errs) < 0.07
    tile = [run(pid, flash_kv_reuse="tile").scalar("model_tflops_per_gpu") / 1e12 / m - 1
            for pid, m in (list(B200.items())[0], list(B200.items())[-1])]
    assert tile[0] == pytest.approx(-0.124, abs=0.005) and tile[1] == pytest.approx(-0.215, abs=0.005)
