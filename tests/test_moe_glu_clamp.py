"""The clamp of gpt-oss's gated expert activation (glu_clamp, moe_glu_clamp_impl): Megatron-Core's weighted
quick-GeGLU clamps the up projection's output with two torch clamps and a concatenation before its fused kernel
(megatron/core/fusions/fused_bias_geglu.py weighted_bias_quick_geglu_impl). Worked by hand on Megatron-Bridge
26.02's GPT-OSS 120B on 64 H100 (TP 1, PP 4, DP 16, EP 8, one 4,096-token sequence per microbatch, moe_act
recompute), measured at 5,993 tokens/s per GPU."""
import pytest

from conftest import point_runner

PID = "train-mbridge-26.02-dgx-h100-gpt-oss-120b-64gpu-bf16"
ROWS = 4096 * 4                 # the GPU's 4,096 tokens, each routed to 4 experts, every layer MoE
ELEMENTS = ROWS * 2 * 2880      # the up projection's output: gate and linear halves, 2,880 wide each, etp 1


@pytest.fixture(scope="module")
def point():
    return point_runner(PID)


def test_the_eager_clamp_by_hand(point):
    r = point()
    assert r.scalar("moe_glu_clamp_elements") == ELEMENTS
    # bf16: each half read and written by its clamp, both read and written by the concatenation
    assert r.scalar("moe_glu_clamp_bytes_fwd") == 4 * 2 * ELEMENTS == 754_974_720
    # backward: two masked gradients (saved input, gradient in, gradient out) and the chunk's concatenation
    assert r.scalar("moe_glu_clamp_bytes_bwd") == 5 * 2 * ELEMENTS
    assert r.scalar("moe_glu_clamp_kernels_fwd") == 3 and r.scalar("moe_glu_clamp_kernels_bwd") == 3
    assert r.scalar("moe_glu_clamp_host_ops_fwd") == 4   # and the linear offset's device scalar
    # at H100's 2.68 TB/s streaming rate and 4 us a kernel: 0.294 ms forward, 0.364 ms backward
    assert r.scalar("memory_rate") == 2.68e12 and r.scalar("kernel_launch_overhead") == 4e-6
    assert r.scalar("moe_glu_clamp_time_fwd") == pytest.approx(754_974_720 / 2.68e12 + 12e-6, rel=1e-12)
    assert r.scalar("moe_glu_clamp_time_fwd") == pytest.approx(0.2937e-3, rel=1e-3)
    assert r.scalar("moe_glu_clamp_time_bwd") == pytest.approx(943_718_400 / 2.68e12 + 12e-6, rel=1e-12)


def test_the_step_pays_it_in_forward_backward_and_the_recomputed_forward(point):
    clamped, plain = point(), point(glu_clamp="no")
    assert plain.scalar("moe_glu_clamp_time_fwd") == 0 and plain.scalar("moe_glu_clamp_saved_memory") == 0
    # 9 layers a stage, 80 microbatches, each layer's clamp forward, backward and (moe_act) forward again,
    # stretched by the 1F1B bubble (pp - 1)/m = 3/80
    by_hand = 9 * 80 * (2 * clamped.scalar("moe_glu_clamp_time_fwd") + clamped.scalar("moe_glu_clamp_time_bwd"))
    grown = clamped.scalar("step_time") - plain.scalar("step_time")
    assert by_hand == pytest.approx(0.685, rel=2e-3)
    assert grown == pytest.approx(by_hand * (1 + 3 / 80), rel=0.02)


def test_the_clamped_copy_is_kept_unless_moe_act_recompute_drops_it(point):
    copy = 4096 * 4 * 2 * 2880 * 2        # one bf16 copy of the up projection's output per routed row
    assert point().scalar("moe_glu_clamp_saved_memory") == copy
    kept = point(recompute_moe_act="no")
    assert kept.scalar("moe_intermediate_memory") - point(recompute_moe_act="no", glu_clamp="no").scalar(
        "moe_intermediate_memory") == copy
    # with moe_act recompute only the layer in its backward holds it (the recomputed activation's saved tensors)
    assert point().scalar("peak_stage_memory_per_gpu") - point(glu_clamp="no").scalar(
        "peak_stage_memory_per_gpu") == pytest.approx(copy, rel=1e-9)


@pytest.mark.parametrize("pid, sets", [
    (PID, {"moe_glu_clamp_impl": "fused"}),
    (PID, {"moe_fused_grouped_mlp": "yes"}),                 # the activation runs in the GEMM epilogue
    ("train-automodel-h100-gpt-oss-120b-64gpu", {}),          # AutoModel's torch.compile'd quick_geglu_deepep
    ("train-mbridge-26.08-dgx-gb300-gpt-oss-120b-64gpu-mxfp8", {}),  # fused grouped MLP in its recipe
    ("train-mlperf60-gb300-72gpu-gpt-oss-20b", {}),
])
def test_no_eager_clamp_where_the_activation_kernel_clamps(point, pid, sets):
    r = point(pid, **sets)
    assert r.scalar("glu_clamp") == 1    # the model still clamps ("yes" encodes as 1)
    assert r.scalar("moe_glu_clamp_eager") == 0
    assert r.scalar("moe_glu_clamp_time_fwd") == r.scalar("moe_glu_clamp_saved_memory") == 0
