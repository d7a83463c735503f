"""Full recompute of a share of the layers (recompute_layer_fraction: Megatron's --recompute-method block
--recompute-num-layers N, N of a stage's layers): the covered layers keep only their input and rerun their forward,
the others keep everything. Worked example on AMD's MLPerf Llama 2 70B LoRA run (ACL 21 of 80 layers), and the two
ends of the fraction checked against recompute none and recompute full on a model with every collective in play."""
from __future__ import annotations

import pytest

from conftest import point_runner

MI300X = "train-mlperf-lora-amd-mi300x-8gpu-llama2-70b"
DSV3 = "train-mbridge-25.09-dgx-h100-deepseekv3-1024gpu-fp8"   # TP, PP, EP and MoE dispatch together


@pytest.fixture(scope="module")
def point():
    return point_runner(MI300X)


def test_block_recompute_by_hand(point):
    none = point(recompute="none")
    part = point(recompute="full", recompute_layer_fraction=21 / 80)
    f = 21 / 80
    # memory: the 21 covered layers keep their 16-bit input (8,192 tokens x 8,192 hidden x 2 bytes), the 59 others
    # everything they keep without recompute
    layer_input = 2 * 8192 * 8192
    assert part.scalar("activation_memory_per_layer") == pytest.approx(
        f * layer_input + (1 - f) * none.scalar("activation_memory_per_layer"), rel=1e-12)
    # time: a covered layer reruns its forward before its backward
    assert part.scalar("layer_time_recompute") == pytest.approx(f * none.scalar("layer_time_fwd"), rel=1e-12)
    assert part.scalar("recompute_flops_per_token") == pytest.approx(
        f * part.scalar("fwd_layer_flops_per_token"), rel=1e-12)
    # the run was measured on 192 GB: without the recompute it would not fit, with it it does
    assert none.scalar("memory_per_gpu") > none.scalar("hbm_capacity")
    assert part.scalar("memory_per_gpu") < part.scalar("hbm_capacity")


NODES = ("step_time", "memory_per_gpu", "hardware_flops_per_token", "tp_collectives_per_layer",
         "ep_alltoalls_per_layer", "cp_recompute_passes")


@pytest.mark.parametrize("pid", [MI300X, DSV3])
def test_fraction_zero_is_no_recompute(point, pid):
    none, zero = point(pid, recompute="none"), point(pid, recompute="full", recompute_layer_fraction=0)
    for node in NODES:
        assert zero.scalar(node) == pytest.approx(none.scalar(node), rel=1e-12), node


def test_fraction_one_is_the_default_full_recompute(point):
    full = point(DSV3, recompute="full")
    one = point(DSV3, recompute="full", recompute_layer_fraction=1)
    assert full.scalar("recompute_layer_fraction") == 1
    for node in NODES:
        assert one.scalar(node) == full.scalar(node), node
    assert full.scalar("ep_alltoalls_per_layer") == 6      # dispatch and combine, forward, backward and recompute


def test_step_and_memory_move_monotonically_with_the_fraction(point):
    runs = [point(DSV3, recompute="full", recompute_layer_fraction=f) for f in (0, 0.25, 0.5, 1)]
    steps = [r.scalar("step_time") for r in runs]
    mems = [r.scalar("memory_per_gpu") for r in runs]
    assert steps == sorted(steps) and len(set(steps)) == 4
    assert mems == sorted(mems, reverse=True) and len(set(mems)) == 4
