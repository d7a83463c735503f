"""FP8 attention (fp8_attention: TransformerEngine fp8_dpa, NeMo FP8_DPA=1) and the FP8 output layer
(fp8_output_layer: Megatron-Bridge fp8_output_proj): the attention core's two tile GEMMs move to the FP8 peak at
fp8_attention_efficiency_factor while its softmax keeps the FP32 rate; the vocabulary projection moves to the FP8
GEMM rate. Worked examples by hand, and each preset's factor checked against the kernel measurement it cites."""
from __future__ import annotations

import pytest

from conftest import point_runner

H100 = "train-mlperf-lora-nvidia-h100-8gpu-llama2-70b"        # Hopper, cuDNN attention (attention_efficiency 0.6)
B200 = "train-mlperf-lora-nvidia-b200-8gpu-llama2-70b"        # Blackwell
GB300 = "train-mlperf-lora-nvidia-gb300-72gpu-llama2-70b"     # Blackwell Ultra (doubled exponential rate)
DSV3 = "train-mbridge-25.09-dgx-h100-deepseekv3-1024gpu-fp8"


@pytest.fixture(scope="module")
def point():
    return point_runner(H100)


def test_attention_rate_by_hand(point):
    off, on = point(fp8_attention="no"), point(fp8_attention="yes")
    clock = on.scalar("clock_fraction")
    # H100: BF16 peak 989, FP8 peak 1,979 TFLOP/s; cuDNN attention at 0.6 of the peak; FP8 tiles at 0.9 of that
    assert off.scalar("attention_flops_rate") == pytest.approx(989e12 * clock * 0.6, rel=1e-12)
    assert on.scalar("attention_flops_rate") == pytest.approx(1979e12 * 0.9 * clock * 0.6, rel=1e-12)
    # the softmax and the HBM traffic of the kernel are untouched
    assert on.scalar("attention_softmax_rate") == off.scalar("attention_softmax_rate")
    assert on.scalar("attention_core_bytes_fwd") == off.scalar("attention_core_bytes_fwd")


def test_ignored_in_a_16_bit_run(point):
    off = point(compute_dtype="bf16", fp8_attention="no")
    on = point(compute_dtype="bf16", fp8_attention="yes")
    assert on.scalar("attention_flops_rate") == off.scalar("attention_flops_rate")
    assert on.scalar("step_time") == off.scalar("step_time")


def kernel_speedup(point, pid, seq_len):
    """BF16 over FP8 time of one attention-core forward at seq_len (the backward is a fixed multiple of it)."""
    off = point(pid, fp8_attention="no", seq_len=seq_len)
    on = point(pid, fp8_attention="yes", seq_len=seq_len)
    assert on.scalar("attention_bwd_factor") == off.scalar("attention_bwd_factor")
    return off.scalar("attention_core_time_fwd") / on.scalar("attention_core_time_fwd")


def test_hopper_factor_reproduces_flashattention3(point):
    # Shah et al. 2024: FP8 close to 1.2 PFLOP/s against 740 TFLOP/s in 16 bits; cuDNN 1,005 against 595 at head
    # dim 128 and 16K tokens - about 1.6x
    assert kernel_speedup(point, H100, 16384) == pytest.approx(1.6, rel=0.02)


def test_blackwell_factor_reproduces_the_cudnn_b200_benchmark(point):
    # cudnn-frontend sdpa benchmark, cuDNN 9.10.2 on one B200, Llama 3.1 405B attention at 32K tokens:
    # (24.543 + 73.210) ms in BF16 against (21.334 + 56.373) ms in FP8, forward and backward
    measured = (24.543 + 73.210) / (21.334 + 56.373)
    assert measured == pytest.approx(1.258, abs=5e-4)
    assert kernel_speedup(point, B200, 32768) == pytest.approx(measured, rel=0.01)


def test_blackwell_ultra_sits_in_the_simulated_range(point):
    # cudnn-frontend issue 786: DLSim on GB300 gives 1.43-1.74x for MXFP8 core attention; the preset takes the low end
    s = kernel_speedup(point, GB300, 32768)
    assert 1.43 * 0.99 <= s <= 1.74
    # the doubled exponential rate leaves the tile GEMMs a larger share than on B200, so FP8 gains more there
    assert s > kernel_speedup(point, B200, 32768)


def test_fp8_output_layer_by_hand(point):
    bf16_head, fp8_head = point(DSV3), point(DSV3, fp8_output_layer="yes")
    assert bf16_head.scalar("output_layer_gemm_rate") == pytest.approx(989e12 * 0.61, rel=1e-12)
    assert fp8_head.scalar("output_layer_gemm_rate") == fp8_head.scalar("gemm_flops_rate")
    assert fp8_head.scalar("gemm_flops_rate") == pytest.approx(1979e12 * 0.61 * 0.88, rel=1e-12)
    # torchao's routed-experts scope keeps the other GEMMs at the 16-bit rate whatever the output layer does
    r = point(DSV3, fp8_scope="routed_experts", fp8_output_layer="yes")
    assert r.scalar("non_expert_gemm_flops_rate") == pytest.approx(989e12 * 0.61, rel=1e-12)
    assert fp8_head.scalar("logits_time") < bf16_head.scalar("logits_time")


def test_serving_attention_follows_the_same_switch(point):
    pid = "inf-trtllm061-llama2-7b-h100-tp1-bs768-128-128"      # FP8 serving on H100
    off, on = point(pid), point(pid, fp8_attention="yes")
    eff = off.scalar("attention_efficiency")
    assert off.scalar("inference_attention_rate") == pytest.approx(eff * 989e12, rel=1e-12)
    assert on.scalar("inference_attention_rate") == pytest.approx(eff * 1979e12 * 0.9, rel=1e-12)
