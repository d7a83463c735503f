"""NCCL's LL128 protocol in the network library: a worked example, the per-tier enable switches,
and the LL -> LL128 -> Simple protocol choice as an NVLink all-reduce grows.

Constants (NVIDIA/nccl src/graph/tuning.cc, stored commit b6475625): base latency of a ring
collective baseLat[Ring] = 6.6 us (LL), 14.0 us (LL128), 8.4 us (Simple); per-step latency
hwLat[NVLINK][Ring] = 0.6 / 1.9 / 3.4 us and hwLat[NET][Ring] = 2.7 / 4.0 / 14 us; Ring/LL128
bus bandwidth = 0.92 x Simple's; Ring/LL = min(llMaxBw, 0.5 x Simple's) with llMaxBw = 141 GB/s
on one Hopper node. The library charges LL and Simple one collective_launch_latency and LL128
7.4 us (= 14.0 - 6.6) more.
"""
from __future__ import annotations

import numpy as np
import pytest

from flopsheet.evaluate import Model
from flopsheet.library import load_library

from conftest import evaluate_outputs

MODEL = Model(load_library())
MiB, KiB = 2**20, 2**10
H100 = "allreduce-sweep-h100"   # one DGX H100 node on NDR InfiniBand (systems/dgx-h100-superpod)

# DGX H100 figures the hand computations use (systems/nvlink4-hgx8, systems/ib-ndr)
FIXED = 9.1e-6 + 19.6e-6                   # collective_launch_latency + collective_call_overhead
SCALEUP_BW = 18 * 25e9 * 0.817             # scaleup_ring_bw = 367.65 GB/s
SCALEOUT_BW = 400e9 / 8 * 0.9              # scaleout_ring_bw = 45 GB/s


def ev(outputs, scenario=H100, **values):
    """Evaluate `outputs` on a scenario (or the defaults) with extra values (raw, any unit text)."""
    return evaluate_outputs(MODEL, outputs, scenario, **values)


def test_worked_example_8mib_allreduce_on_one_dgx_h100():
    # 8 GPUs, 8 MiB, ring LL128: 28.7 us fixed + 7.4 us LL128 base + 14 steps x 1.9 us = 62.7 us,
    # plus 2*7/8 * 8 MiB = 14 680 064 B at 0.92 x 367.65 GB/s = 338.24 GB/s -> 43.40 us; 106.10 us in all
    r = ev(["coll_allreduce_ring_ll128_time", "coll_allreduce_ring_time", "coll_allreduce_ring_protocol"],
           coll_group_size=8, coll_msg_bytes="8 MiB")
    hand = FIXED + 7.4e-6 + 14 * 1.9e-6 + 14_680_064 / (0.92 * SCALEUP_BW)
    assert hand == pytest.approx(106.10e-6, abs=0.01e-6)
    assert r["coll_allreduce_ring_ll128_time"] == pytest.approx(hand, rel=1e-12)
    # and it is the ring's protocol at 8 MiB: LL takes 28.7 + 8.4 + 14 680 064 B / 141 GB/s = 141.2 us,
    # Simple 28.7 + 47.6 + 14 680 064 B / 367.65 GB/s = 116.2 us
    assert r["coll_allreduce_ring_protocol"] == 2
    assert r["coll_allreduce_ring_time"] == pytest.approx(hand, rel=1e-12)


def test_worked_example_across_two_dgx_h100_nodes():
    # 16 GPUs on 2 nodes (one leaf switch): 2*(16-2) NVLink steps x 1.9 us + 2*(2-1) network steps
    # x 4.0 us = 61.2 us, + 28.7 + 7.4 us; 2*15/16 * 8 MiB = 15 728 640 B at 0.92 x 45 GB/s -> 379.92 us
    r = ev(["coll_allreduce_ring_ll128_time", "coll_scaleout_hops", "coll_domains"],
           coll_group_size=16, coll_msg_bytes="8 MiB")
    assert r["coll_domains"] == 2 and r["coll_scaleout_hops"] == 1
    hand = FIXED + 7.4e-6 + 28 * 1.9e-6 + 2 * 4.0e-6 + 15_728_640 / (0.92 * SCALEOUT_BW)
    assert hand == pytest.approx(477.22e-6, abs=0.01e-6)
    assert r["coll_allreduce_ring_ll128_time"] == pytest.approx(hand, rel=1e-12)


def test_ring_allgather_and_broadcast_ll128_arms_by_hand():
    # all-gather of an 8 MiB output over 8 GPUs, 7 steps, 7/8 * 8 MiB = 7 340 032 B per GPU:
    # LL 28.7 + 4.2 + 52.06 = 84.96 us, LL128 28.7 + 7.4 + 13.3 + 21.70 = 71.10 us, Simple 28.7 + 23.8 + 19.96 = 72.46 us
    r = ev(["coll_allgather_ring_time", "coll_broadcast_time", "coll_reducescatter_ring_time"],
           coll_group_size=8, coll_msg_bytes="8 MiB")
    n = 8 * MiB
    ll = FIXED + 7 * 0.6e-6 + 7 / 8 * n / min(0.5 * SCALEUP_BW, 141e9)
    ll128 = FIXED + 7.4e-6 + 7 * 1.9e-6 + 7 / 8 * n / (0.92 * SCALEUP_BW)
    simple = FIXED + 7 * 3.4e-6 + 7 / 8 * n / SCALEUP_BW
    assert (ll * 1e6, ll128 * 1e6, simple * 1e6) == pytest.approx((84.96, 71.10, 72.46), abs=0.01)
    assert r["coll_allgather_ring_time"] == pytest.approx(ll128, rel=1e-12)
    assert r["coll_reducescatter_ring_time"] == pytest.approx(ll128, rel=1e-12)
    # broadcast: a pipelined chain, 7 steps, n bytes through each link
    b128 = FIXED + 7.4e-6 + 7 * 1.9e-6 + n / (0.92 * SCALEUP_BW)
    bsimple = FIXED + 7 * 3.4e-6 + n / SCALEUP_BW
    bll = FIXED + 7 * 0.6e-6 + n / (0.5 * SCALEUP_BW)
    assert r["coll_broadcast_time"] == pytest.approx(min(b128, bsimple, bll), rel=1e-12)


def test_protocol_switches_ll_ll128_simple_as_the_message_grows_on_nvlink():
    sizes = [32 * KiB, 256 * KiB, 1 * MiB, 2 * MiB, 8 * MiB, 16 * MiB, 64 * MiB, 1024 * MiB]
    r = ev(["coll_allreduce_ring_protocol"], coll_group_size=8, coll_msg_bytes=sizes)
    assert list(r["coll_allreduce_ring_protocol"]) == [1, 1, 1, 1, 2, 2, 3, 3]


def _nccl_model_crossovers(bus_bw):
    """LL->LL128 and LL128->Simple crossovers (bytes) of NCCL's own tuning model for a ring all-reduce
    on one 8-GPU NVLink node: time = lat + size/algBw, algBw = busBw * nRanks/nSteps."""
    steps, ratio = 14, 8 / 14
    lat = {"ll": 6.6e-6 + steps * 0.6e-6, "ll128": 14.0e-6 + steps * 1.9e-6, "simple": 8.4e-6 + steps * 3.4e-6}
    bw = {"ll": min(141e9, 0.5 * bus_bw) * ratio, "ll128": 0.92 * bus_bw * ratio, "simple": bus_bw * ratio}

    def cross(a, b):
        return (lat[b] - lat[a]) / (1 / bw[a] - 1 / bw[b])
    return cross("ll", "ll128"), cross("ll128", "simple")


def test_crossovers_agree_with_nccls_tuning_model():
    # The library's crossovers, solved by hand from its closed forms (the fixed cost cancels):
    # LL -> LL128: 7.4 + 14 x (1.9 - 0.6) us = 25.6 us = 1.75 n (1/141 - 1/338.24) GB/s^-1 -> n = 3.537 MB
    # LL128 -> Simple: 14 x (3.4 - 1.9) - 7.4 = 13.6 us = 1.75 n (1/338.24 - 1/367.65) -> n = 32.9 MB
    x1 = 25.6e-6 / (1.75 * (1 / 141e9 - 1 / (0.92 * SCALEUP_BW)))
    x2 = 13.6e-6 / (1.75 * (1 / (0.92 * SCALEUP_BW) - 1 / SCALEUP_BW))
    assert x1 == pytest.approx(3.537e6, rel=1e-3) and x2 == pytest.approx(32.86e6, rel=1e-3)
    r = ev(["coll_allreduce_ring_protocol"], coll_group_size=8,
           coll_msg_bytes=[0.99 * x1, 1.01 * x1, 0.99 * x2, 1.01 * x2])
    assert list(r["coll_allreduce_ring_protocol"]) == [1, 2, 2, 3]
    # NCCL's own model on the same bus bandwidth: 3.54 MB and 37.2 MB (its LL128 base is 5.6 us above
    # Simple's, the library's 7.4 us) - LL for small, LL128 for mid-size, Simple for large, as NCCL
    n1, n2 = _nccl_model_crossovers(SCALEUP_BW)
    assert n1 == pytest.approx(3.54e6, rel=0.01) and n2 == pytest.approx(37.2e6, rel=0.01)
    assert x1 == pytest.approx(n1, rel=0.01)
    assert x2 == pytest.approx(n2, rel=0.15)


def test_ll128_off_on_a_tier_falls_back_to_ll_and_simple():
    # one node: LL128 needs only the scale-up switch
    one = ev(["coll_allreduce_ring_time", "coll_allreduce_ring_ll_time", "coll_allreduce_ring_simple_time",
              "coll_allreduce_ring_ll128_time", "coll_allreduce_ring_protocol"],
             coll_group_size=8, coll_msg_bytes="8 MiB", scaleout_ll128_enabled=0)
    assert one["coll_allreduce_ring_protocol"] == 2
    assert one["coll_allreduce_ring_time"] == pytest.approx(one["coll_allreduce_ring_ll128_time"], rel=1e-12)
    # two nodes: the network tier without LL128 turns it off for the whole communicator
    for sw in ("scaleout_ll128_enabled", "scaleup_ll128_enabled"):
        two = ev(["coll_allreduce_ring_time", "coll_allreduce_ring_ll_time", "coll_allreduce_ring_simple_time",
                  "coll_allreduce_ring_ll128_time", "coll_allreduce_tree_time", "coll_allreduce_tree_ll_time",
                  "coll_allreduce_tree_simple_time", "coll_allreduce_tree_ll128_time", "coll_ll128_enabled"],
                 coll_group_size=16, coll_msg_bytes="8 MiB", **{sw: 0})
        assert two["coll_ll128_enabled"] == 0
        assert two["coll_allreduce_ring_ll128_time"] < two["coll_allreduce_ring_simple_time"]  # would have won
        assert two["coll_allreduce_ring_time"] == pytest.approx(
            min(two["coll_allreduce_ring_ll_time"], two["coll_allreduce_ring_simple_time"]), rel=1e-12)
        assert two["coll_allreduce_tree_time"] == pytest.approx(
            min(two["coll_allreduce_tree_ll_time"], two["coll_allreduce_tree_simple_time"]), rel=1e-12)


def test_presets_where_nccl_or_the_plugin_keeps_ll128_off():
    # EFA (aws-ofi-nccl NCCL_PROTO=simple), TCPXO (calibrated LL step already is LL128), RCCL on MI300X,
    # TPU: the enable switches are 0 and the bundled nccl-tests scenarios run LL/Simple only there
    for scenario, group in [("allreduce-p6-b200-32gpu", "coll_ll128_enabled"),
                            ("allreduce-a3mega-16gpu", "coll_ll128_enabled"),
                            ("allreduce-rccl-tests-mi300x-8gpu", "coll_ll128_enabled")]:
        r = ev([group], scenario=scenario)
        assert np.all(r[group] == 0), scenario
    r = ev(["coll_ll128_enabled"], scenario="allreduce-p6-b200-8gpu")
    assert np.all(r["coll_ll128_enabled"] == 1)     # NVLink 5 inside one node: on (NCCL case 100)


def test_training_groups_take_ll128_where_it_is_fastest():
    # tp = 8 inside one DGX H100 node, a 4 MiB all-reduce: the tensor-parallel ring runs LL128
    r = ev(["tp_allreduce_ring_time", "tp_allreduce_ring_ll128_time", "tp_allreduce_ring_ll_time",
            "tp_allreduce_ring_simple_time"], scenario=None,
           tp=8, tp_allreduce_msg_bytes="4 MiB")
    hand = 9.1e-6 + 7.4e-6 + 14 * 1.9e-6 + 1.75 * 4 * MiB / (0.92 * SCALEUP_BW)
    assert r["tp_allreduce_ring_ll128_time"] == pytest.approx(hand, rel=1e-12)
    assert r["tp_allreduce_ring_time"] == pytest.approx(hand, rel=1e-12)
    assert hand < min(r["tp_allreduce_ring_ll_time"], r["tp_allreduce_ring_simple_time"])
