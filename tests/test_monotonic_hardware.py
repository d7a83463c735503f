"""Physical invariants of the training model, fuzzed over published validation points: better hardware (more peak
FLOP/s, GEMM efficiency, HBM or link bandwidth) never lengthens a step, and more work (a larger global batch or
longer sequences) never shortens one. Windows that hide communication or host launches shrink when the GPU gets
faster; a formula that lets the hidden part grow by more than the compute shrank breaks the first invariant (a
host-bound uneven pipeline did until 2026-11-29)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from conftest import point_runner

# one point per feature the step formula combines: host-bound token-drop MoE pipeline (PP 8, VP 2), dropless
# MoE with uneven stages, MTP and a per-layer host sync, dense PP with the distributed optimizer (FP8), FSDP with
# context parallelism, ZeRO-3 (llm-foundry FSDP), Megatron-DeepSpeed without overlaps (vTrain), LoRA, MoE with
# context parallelism and the TPU v5p
POINTS = [
    "train-mbridge-25.09-dgx-b200-qwen3-235b-a22b-64gpu-tokendrop",
    "train-mbridge-26.02-dgx-b200-deepseekv3-256gpu-mxfp8",
    "train-dgxc2502-h100-llama3.1-405b-512gpu-fp8",
    "train-torchtitan-llama3.1-405b-512gpu-4d-fsdp1-cp8-256k",
    "train-mpt-h100-70b-seq2048-64gpu-mb8",
    "train-vtrain-175b-512gpu-t8-p16-d4-mb4-gb1536",
    "train-dgxcft-h100-llama3-8b-lora-8gpu-bf16",
    "train-mzoo-h100-qwen3-235b-a22b-256gpu-bf16-64k-cp4",
    "train-maxtext-v5p-32b-1x-v5p-128",
]
# inputs that only make hardware better when raised; peak FLOP/s rises for every precision at once, as a faster chip
FASTER = [("peak_flops_bf16", "peak_flops_fp16", "peak_flops_fp8", "peak_flops_fp4"), ("gemm_efficiency",),
          ("hbm_bandwidth",), ("scaleup_link_bw",), ("scaleout_nic_bw",)]


def _raised(base, knobs, factor):
    """The knobs of an evaluated point times factor - an efficiency, a fraction of peak, raised towards 1 only."""
    return {k: min(1.0, factor * base.scalar(k)) if k.endswith("_efficiency") else factor * base.scalar(k)
            for k in knobs}


@pytest.fixture(scope="module")
def run():
    return point_runner(POINTS[0])


@settings(max_examples=40, deadline=None)
@given(pid=st.sampled_from(POINTS), knobs=st.sampled_from(FASTER), factor=st.floats(1.05, 4.0))
def test_better_hardware_never_lengthens_a_step(run, pid, knobs, factor):
    base = run(pid)
    assert run(pid, **_raised(base, knobs, factor)).scalar("step_time") <= base.scalar("step_time") * (1 + 1e-9)


@settings(max_examples=20, deadline=None)
@given(pid=st.sampled_from(POINTS), knob=st.sampled_from(["global_batch", "seq_len"]), factor=st.sampled_from([2, 4]))
def test_more_work_never_shortens_a_step(run, pid, knob, factor):
    base = run(pid)
    assert run(pid, **{knob: factor * base.scalar(knob)}).scalar("step_time") >= base.scalar("step_time")


def test_the_host_bound_pipeline_no_longer_slows_down_on_a_faster_gpu(run):
    # the case the fuzzing found: 25 % more peak left this host-bound step 0.05 % longer before 2026-11-29
    base = run(POINTS[0])
    faster = run(POINTS[0], peak_flops_bf16=1.25 * base.scalar("peak_flops_bf16"))
    assert base.scalar("host_exposed_per_microbatch") > 0
    assert faster.scalar("step_time") <= base.scalar("step_time")


SERVING = ["inf-gptfast-llama2-70b-a100-tp4-bf16", "inf-trtllm061-llama2-70b-h100-tp2-bs96-2048-128",
           "inf-trtllm061-llama2-7b-h100-tp1-bs48-2048-2048", "inf-trtllm05-ttft-llama2-70b-h100-tp4-isl2048"]


@settings(max_examples=30, deadline=None)
@given(pid=st.sampled_from(SERVING), knobs=st.sampled_from(FASTER), factor=st.floats(1.05, 4.0))
def test_better_hardware_never_slows_serving(run, pid, knobs, factor):
    # the same invariant for the serving model: first token and each next token no later, throughput no lower
    base = run(pid)
    faster = run(pid, **_raised(base, knobs, factor))
    for node in ("ttft", "tpot"):
        assert faster.scalar(node) <= base.scalar(node) * (1 + 1e-9)
    assert faster.scalar("output_tokens_per_second_per_gpu") >= base.scalar("output_tokens_per_second_per_gpu") * (1 - 1e-9)
