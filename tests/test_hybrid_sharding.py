"""Hybrid sharding (dp_replicas): ZeRO/FSDP shards over one shard group of the data-parallel ranks and the
replicas all-reduce the gradient shards - a worked example on torchtitan's Llama 3.1 405B layout
(tp 8, pp 8, dp 8 on 512 H100 in DGX nodes of 8, FSDP2, validation/torchtitan-memory), cut into 2 replicas
of 4-way FSDP, and the MaxText two-slice points."""
from __future__ import annotations

import math

import pytest

from flopsheet.evaluate import Model
from flopsheet.exports.excel import export_workbook
from flopsheet.library import load_library
from flopsheet.scenario import load_scenario

from conftest import point_runner

TITAN = "mem-torchtitan-llama3.1-405b-512gpu-3d-1f1b"
MAXTEXT_1X, MAXTEXT_2X = "train-maxtext-v5p-128b-1x-v5p-512", "train-maxtext-v5p-128b-2x-v5p-512"
run = point_runner(TITAN)


def test_replica_allreduce_worked_example():
    r = run(dp_replicas=2)
    # shard group: 4 of the 8 dp ranks; tp is innermost, so dp members are 8 ranks (one DGX node) apart
    assert r.scalar("dp_shard_size") == 4 and r.scalar("dp_group_stride") == 8
    # replica group: 2 members 8 x 4 = 32 ranks apart, in different nodes -> the ring crosses InfiniBand
    assert r.scalar("dp_replica_group_stride") == 32 and not bool(r["dp_replica_in_domain"])
    # each GPU's ring edge leaves through its own 400 Gb/s NDR NIC at 0.9 efficiency: 45 GB/s
    assert r.scalar("dp_replica_ring_bw") == pytest.approx(400e9 / 8 * 0.9, rel=1e-12)
    # bf16 compute with fp32 gradients: the shard is a quarter of the stage's gradients
    shard = r.scalar("trainable_dense_params_per_gpu") * 4 / 4
    assert r.scalar("dp_replica_allreduce_msg_bytes") == pytest.approx(shard, rel=1e-12)
    # ring all-reduce over 2 members: launch + 2 Simple steps over the fabric + 2 (1/2) of the shard at 45 GB/s
    hand = r.scalar("collective_launch_latency") + 2 * r.scalar("scaleout_simple_hop_latency") + shard / 45e9
    assert r.scalar("dp_replica_allreduce_net_time") == pytest.approx(hand, rel=1e-12)
    assert r.scalar("dp_replica_allreduce_net_time") > 0.1  # ~1.6 GB of fp32 gradient shard per GPU


def test_shard_group_carries_the_gathers_and_the_state():
    base, hybrid = run(), run(dp_replicas=2)
    # no hybrid sharding: the replica all-reduce vanishes and nothing else moves
    assert base.scalar("dp_replica_allreduce_net_time") == 0 and base.scalar("dp_shard_size") == 8
    # the optimizer states and gradient shards double with half the shard group
    for name in ("optimizer_memory", "grad_memory"):
        assert hybrid.scalar(name) == pytest.approx(2 * base.scalar(name), rel=1e-12), name
    # the gathers run over 4 ranks instead of 8: the same bytes, fewer ring steps, 3/4 instead of 7/8 of them
    assert hybrid.scalar("dp_allgather_msg_bytes") == pytest.approx(base.scalar("dp_allgather_msg_bytes"), rel=1e-12)
    assert hybrid.scalar("dp_allgather_net_time") < base.scalar("dp_allgather_net_time")
    # FSDP2 under pipelining keeps each stage's weights gathered from the first microbatch's forward to the step's
    # last backward and syncs gradients once per step: one gather, one reduce-scatter, one replica all-reduce
    m = hybrid.scalar("microbatches")
    assert hybrid.scalar("zero3_allgathers_per_step") == 1 and m == 8
    once = hybrid.scalar("dp_reducescatter_net_time") + hybrid.scalar("dp_replica_allreduce_net_time")
    assert hybrid.scalar("dp_comm_time") == pytest.approx(hybrid.scalar("dp_allgather_net_time") + once, rel=1e-12)


@pytest.mark.parametrize("after_forward, after_backward, gathers", [
    ("no", "no", 1),        # torch.distributed.pipelining: gathered once, kept to the step's last backward
    ("yes", "no", 8 + 1),   # each forward reshards, each backward re-gathers; the first forward gathers too
    ("no", "yes", 8),       # FSDP2's default resharding after backward: one gather per microbatch
    ("yes", "yes", 2 * 8),  # and again for each backward when resharding after forward as well
])
def test_fsdp_gathers_per_step(after_forward, after_backward, gathers):
    r = run(dp_replicas=2, fsdp_reshard_after_forward=after_forward, fsdp_reshard_after_backward=after_backward)
    assert r.scalar("zero3_allgathers_per_step") == gathers
    once = r.scalar("dp_reducescatter_net_time") + r.scalar("dp_replica_allreduce_net_time")
    assert r.scalar("dp_comm_time") == pytest.approx(gathers * r.scalar("dp_allgather_net_time") + once, rel=1e-12)
    # whenever one of the two keeps them, every FSDP unit of the stage is gathered at the peak
    whole = r.scalar("fsdp_gathered_weight_memory") > 4 * r.scalar("fsdp_unit_weight_memory")
    assert whole == (after_forward == "no" or after_backward == "no")


def test_distributed_optimizer_instances_and_the_rules():
    # Megatron's distributed optimizer split into instances: reduce-scatter, replica all-reduce, all-gather
    z1 = run(zero_stage=1, dp_replicas=2)
    assert z1.scalar("dp_comm_time") == pytest.approx(
        z1.scalar("dp_reducescatter_net_time") + z1.scalar("dp_replica_allreduce_net_time")
        + z1.scalar("dp_allgather_net_time"), rel=1e-12)
    assert bool(z1["parallel_config_valid"])
    for bad in (dict(dp_replicas=3), dict(dp_replicas=2, zero_stage=0)):
        assert not bool(run(**bad)["replicas_divisible"]), bad


def test_maxtext_two_slices_hold_one_slice_of_state():
    """Each slice of the two-slice runs holds a full replica, sharded over its own chips: the same memory per
    chip as the one-slice run of the same slice size, and 128B parameters x 4 B of fp32 gradients / 256 chips
    all-reduced over the 50 Gb/s DCN (0.9 efficiency) - 2 GB in 0.36 s."""
    maxtext = point_runner(MAXTEXT_1X)
    one, two = maxtext(MAXTEXT_1X), maxtext(MAXTEXT_2X)
    assert two.scalar("dp_replicas") == 2 and two.scalar("dp_shard_size") == one.scalar("dp_shard_size") == 32
    assert two.scalar("peak_stage_memory_per_gpu") == pytest.approx(one.scalar("peak_stage_memory_per_gpu"), rel=1e-12)
    msg = two.scalar("dp_replica_allreduce_msg_bytes")
    assert msg == pytest.approx(two.scalar("trainable_dense_params_per_gpu") * 4 / 32, rel=1e-12)
    assert msg / (50e9 / 8 * 0.9) == pytest.approx(0.347, abs=0.002)
    assert two.scalar("dp_replica_allreduce_net_time") == pytest.approx(0.347, abs=0.002)


def test_hybrid_sharding_recalculates_in_libreoffice(lo, tmp_path):
    """The exported workbook computes the hybrid-sharding nodes with live formulas that LibreOffice recalculates
    to Python's numbers (GPT-3 175B on 1024 GPUs, dp 8 cut into 2 replicas of a 4-way distributed optimizer)."""
    lib = load_library()
    sc = load_scenario("gpt3-175b-sc21", ["dp_replicas=2", "zero_stage=1"])
    info = export_workbook(tmp_path / "hybrid.xlsx", lib, sc, model=Model(lib), sensitivity=False)
    cells = lo.recalculate(info.path)
    py = info.result.values
    assert float(py["dp_replica_allreduce_net_time"]) > 0 and float(py["dp_shard_size"]) == 4
    for name in ("dp_shard_size", "dp_replica_group_stride", "dp_replica_in_domain", "dp_replica_allreduce_net_time",
                 "zero_shards", "optimizer_memory", "dp_comm_time", "step_time"):
        assert cells[name].value is not None, name
        assert math.isclose(cells[name].value, float(py[name]), rel_tol=1e-9), (name, cells[name].value, py[name])
