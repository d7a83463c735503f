"""AWS EFA presets (issue 11): per-GPU bandwidth of P5 / P5en / P6-B200 from their specifications, and the
4-node P6-B200 all-reduce worked by hand through the double-binary-tree formula."""
from __future__ import annotations

import pytest

from flopsheet.scenario import bundled_templates, compose, resolve

from conftest import run_scenario as run

US, GiB = 1e-6, 2**30


@pytest.mark.parametrize("system, nics, nic_gbps", [("aws-p5", 4, 100), ("aws-p5en", 2, 200), ("aws-p6-b200", 1, 400)])
def test_every_generation_gives_3200_gbps_per_node(model, system, nics, nic_gbps):
    """P5: 32 x 100 Gb/s EFA v2; P5en: 16 x 200 Gb/s EFA v3; P6-B200: 8 x 400 Gb/s EFA v4 - 8 GPUs each."""
    sc = compose(system, system, ["hardware/b200", f"systems/{system}"], {"coll_group_size": 32}, near=bundled_templates())
    r = model.evaluate(resolve(sc, model))
    assert r.scalar("scaleout_nics_per_gpu") == nics
    assert r.scalar("scaleout_nic_bw") * 8 == pytest.approx(nic_gbps * 1e9, rel=1e-12)
    assert r.scalar("scaleout_bw_per_gpu") * 8 * 8 == pytest.approx(3200e9, rel=1e-12)   # per node, in bits
    assert r.scalar("scaleout_ring_bw") == pytest.approx(50e9 * 0.74, rel=1e-12)         # 50 GB/s x 0.74
    assert r.scalar("scaleout_simple_hop_latency") == pytest.approx(74 * US, rel=1e-12)
    assert r.scalar("scaleout_nvls_tree_support") == 0 and r.scalar("scaleout_in_network_reduction") == 0
    assert r.scalar("coll_domains") == 4


def test_4x_p6_b200_16gib_by_hand(model):
    r = run(model, "allreduce-p6-b200-32gpu", coll_msg_bytes="16 GiB")
    n = 16 * GiB
    # double binary tree: NVLink chain 2 n / (900 GB/s x 0.817) = 46.7 ms, overlapped with the EFA part
    # 2 (4-1)/4 x n / 8 GPUs / (50 GB/s x 0.74) = 87.07 ms, plus launch 9.1 + harness 28.9 + 2 (7 x 3.4 + 2 x 74) us
    nvl = 2 * n / (900e9 * 0.817)
    efa = 2 * 3 / 4 * n / 8 / (50e9 * 0.74)
    t = (9.1 + 28.9) * US + 2 * (7 * 3.4 + 2 * 74) * US + max(nvl, efa)
    assert efa == pytest.approx(87.07e-3, rel=1e-3) and nvl < efa
    assert r.scalar("coll_allreduce_tree_simple_time") == pytest.approx(t, rel=1e-12)
    assert r.scalar("coll_allreduce_time") == pytest.approx(t, rel=1e-12)
    busbw = 2 * 31 / 32 * n / t
    assert busbw == pytest.approx(380.7e9, rel=1e-3)            # measured 381.80 GB/s (-0.3 %)
    assert r.scalar("coll_allreduce_busbw") == pytest.approx(busbw, rel=1e-12)
