"""Per-collective fixed cost split (issue 11): NCCL's own launch latency (~9 us, paid by every collective of a
training step) and the benchmark harness's host overhead per call (paid only by the probe collectives that the
published sweeps time) - the sum keeps the calibrated nccl-tests / all_reduce_bench.py intercepts."""
from __future__ import annotations

import pytest

from conftest import run_scenario as run

US = 1e-6


def test_launch_latency_from_the_back_to_back_h200_sweep():
    # stas00 8x H200, NCCL 2.30.7, nccl-tests back to back: 3.20 GB/s busbw at 32 KiB, 6.26 GB/s at 64 KiB
    for size, busbw in ((32768, 3.20e9), (65536, 6.26e9)):
        t = 2 * 7 / 8 * size / busbw
        ll = 14 * 0.6 * US + 2 * 7 / 8 * size / 141e9       # 14 LL ring steps, LL busbw cap 141 GB/s
        assert t - ll == pytest.approx(9.1 * US, abs=0.05 * US)
    # NCCL's own model brackets it: ring base latency 6.6 us (LL) .. 8.4 us (Simple), tuning.cc baseLat


@pytest.mark.parametrize("scenario, launch, total", [("allreduce-nvls-h200-8gpu", 9.1, 28.7),
                                                     ("allreduce-nccl-tests-a100-8gpu", 7.5, 33.7)])
def test_probe_pays_launch_plus_host_overhead_training_groups_only_launch(model, scenario, launch, total):
    r = run(model, scenario, coll_msg_bytes=0)
    assert r.scalar("collective_launch_latency") == pytest.approx(launch * US, rel=1e-12)
    assert r.scalar("coll_fixed_latency") == pytest.approx(total * US, rel=1e-12)   # the calibrated intercept
    # an empty 8-GPU ring all-reduce: probe = launch + overhead + 14 LL steps x 0.6 us
    assert r.scalar("coll_allreduce_ring_time") == pytest.approx((total + 14 * 0.6) * US, rel=1e-12)
    # the same ring as a training group (tp 8): launch only
    g = run(model, scenario, tp=8, tp_allreduce_msg_bytes=0)
    assert g.scalar("tp_allreduce_ring_time") == pytest.approx((launch + 14 * 0.6) * US, rel=1e-12)


def test_cp_alltoall_is_the_probe_alltoall(model):
    """The context-parallel all-to-all (Ulysses) is the probe's all-to-all on the cp group (launch only)."""
    for cp, stride_tp in ((4, 1), (16, 1), (16, 8)):
        n = 48 * 2**20
        g = run(model, "collectives-groups-dgx-h100-1024gpu", cp=cp, tp=stride_tp, dp=8)
        p = run(model, "collectives-groups-dgx-h100-1024gpu", coll_group_size=cp, coll_group_stride=stride_tp,
                coll_msg_bytes=n, collective_call_overhead=0)
        assert g.scalar("cp_alltoall_latency") + n * g.scalar("cp_alltoall_time_per_byte") == pytest.approx(
            p.scalar("coll_alltoall_time"), rel=1e-12)
