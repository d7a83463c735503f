"""The collective-communication library (formulas/network): closed forms, placement, `auto`.

Every number here is checked by hand in the comments. Latencies are zeroed where a test is about
bytes, so time * bandwidth gives the bytes each rank moves.
"""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from flopsheet.evaluate import Model
from flopsheet.library import load_library
from flopsheet.scenario import load_scenario, resolve

from conftest import evaluate_outputs

LIB = load_library()
MODEL = Model(LIB)

GiB, MiB, KiB = 2**30, 2**20, 2**10

NO_LATENCY = dict(collective_launch_latency=0.0, collective_call_overhead=0.0, scaleup_hop_latency=0.0,
                  scaleup_simple_hop_latency=0.0, scaleout_hop_latency=0.0,
                  scaleout_simple_hop_latency=0.0, nvls_latency=0.0, scaleout_switch_latency=0.0)


def ev(outputs, scenario=None, **values):
    """Evaluate `outputs` on a scenario (or the defaults) with extra values (raw, any unit text)."""
    return evaluate_outputs(MODEL, outputs, scenario, **values)


def test_library_has_the_network_topics():
    topics = {f.topic for f in LIB.files}
    assert {"network/tiers", "network/topology", "network/collectives", "network/groups"} <= topics


# ------------------------------------------------------------------ closed forms
@pytest.mark.parametrize("p", [2, 3, 8, 16, 64])
def test_ring_allreduce_moves_2_p_minus_1_over_p_n_bytes_per_rank(p):
    n = 3 * GiB
    r = ev(["coll_allreduce_ring_simple_time", "coll_ring_bw", "coll_allreduce_ring_busbw",
            "coll_allreduce_ring_time"],
           scaleup_domain_size=128, coll_group_size=p, coll_msg_bytes=n, **NO_LATENCY)
    moved = r["coll_allreduce_ring_simple_time"] * r["coll_ring_bw"]
    assert moved == pytest.approx(2 * (p - 1) / p * n, rel=1e-12)
    # with no latency, nccl-tests' bus bandwidth of a ring is exactly the link rate
    assert r["coll_allreduce_ring_busbw"] == pytest.approx(r["coll_ring_bw"], rel=1e-12)
    # by hand for p = 8 on NVLink 4: 1.75 * 3 GiB / (450 GB/s * 0.817)
    if p == 8:
        assert r["coll_allreduce_ring_simple_time"] == pytest.approx(1.75 * 3 * GiB / 367.65e9, rel=1e-9)


def test_ring_latency_counts_2_p_minus_1_steps():
    # zero bytes: 8 GPUs, 14 Simple steps of 3.4 us plus the launch latency of 28.7 us = 76.3 us
    r = ev(["coll_allreduce_ring_simple_time", "coll_allreduce_ring_ll_time"],
           coll_group_size=8, coll_msg_bytes=0)
    assert r["coll_allreduce_ring_simple_time"] == pytest.approx(28.7e-6 + 14 * 3.4e-6, rel=1e-12)
    assert r["coll_allreduce_ring_ll_time"] == pytest.approx(28.7e-6 + 14 * 0.6e-6, rel=1e-12)


@pytest.mark.parametrize("p", [2, 4, 5, 16])
@pytest.mark.parametrize("n", [0, 1 * MiB, 1 * GiB])
def test_torus_reduces_to_ring_in_one_dimension(p, n):
    r = ev(["coll_allreduce_torus_time", "coll_allreduce_ring_simple_time", "coll_torus_usable",
            "coll_allgather_torus_time", "coll_allgather_ring_time"],
           scaleup_topology="torus", torus_dim_x=p, torus_dim_y=1, torus_dim_z=1,
           scaleup_domain_size=p, coll_group_size=p, coll_msg_bytes=n,
           scaleup_ll_busbw_cap="1 B/s", scaleup_hop_latency="3.4 us",  # LL never wins: ring = Simple ring
           scaleup_ll128_enabled=0)  # nor LL128 (NCCL's NVLink-only protocol; a torus runs XLA's collectives)
    assert r["coll_torus_usable"] == 1
    assert r["coll_allreduce_torus_time"] == pytest.approx(r["coll_allreduce_ring_simple_time"], rel=1e-12)
    assert r["coll_allgather_torus_time"] == pytest.approx(r["coll_allgather_ring_time"], rel=1e-12)


def test_torus_3d_uses_every_link_and_is_bisection_bound_for_alltoall():
    # 4x4x4 torus, 100 GB/s links, efficiency 0.817: all-reduce of 1 GiB over 6 links
    r = ev(["coll_allreduce_torus_time", "coll_alltoall_time", "torus_bisection_links", "torus_diameter"],
           scenario="allreduce-tpu-v5p-cube", coll_msg_bytes="1 GiB", **NO_LATENCY)
    assert r["coll_allreduce_torus_time"] == pytest.approx(2 * 63 / 64 * GiB / (6 * 81.7e9), rel=1e-9)
    assert r["torus_bisection_links"] == 32  # 2 * 64 / 4
    assert r["torus_diameter"] == 6          # 2 + 2 + 2
    # all-to-all: 64*64*n/(4*64) bytes cross 32 links each way -> 16 n / (32 * 81.7 GB/s)
    assert r["coll_alltoall_time"] == pytest.approx(16 * GiB / (32 * 81.7e9), rel=1e-9)


@pytest.mark.parametrize("p", [2, 4, 8])
@pytest.mark.parametrize("n", [0, 64 * KiB, 256 * MiB])
def test_hierarchical_equals_flat_when_the_group_fits_in_one_domain(p, n):
    r = ev(["coll_domains", "coll_allreduce_hierarchical_time", "coll_allreduce_ring_simple_time",
            "coll_allgather_hierarchical_time", "coll_reducescatter_hierarchical_time",
            "coll_allgather_ring_time", "coll_reducescatter_ring_time"],
           scenario="allreduce-sweep-h100", coll_group_size=p, coll_msg_bytes=n,
           scaleup_ll_busbw_cap="1 B/s", scaleup_hop_latency="3.4 us",  # LL never wins
           scaleup_ll128_enabled=0,  # nor LL128: the hierarchical forms are modelled with Simple only
           hierarchical_overlap=0.3)
    assert r["coll_domains"] == 1
    assert r["coll_allreduce_hierarchical_time"] == pytest.approx(r["coll_allreduce_ring_simple_time"], rel=1e-12)
    assert r["coll_allgather_hierarchical_time"] == pytest.approx(r["coll_allgather_ring_time"], rel=1e-12)
    assert r["coll_reducescatter_hierarchical_time"] == pytest.approx(r["coll_reducescatter_ring_time"], rel=1e-12)


def test_hierarchical_across_nodes_by_hand():
    # 4 DGX H100 nodes (32 GPUs), 1 GiB, no latency, fully pipelined:
    #   scale-up part 2*7/8 GiB / 367.65 GB/s = 5.11 ms; scale-out part 2*3/4 GiB/8 / 45 GB/s = 4.47 ms
    r = ev(["coll_allreduce_hierarchical_time", "coll_allreduce_scaleup_transfer_time",
            "coll_allreduce_scaleout_transfer_time"],
           scenario="allreduce-sweep-h100", coll_group_size=32, coll_msg_bytes="1 GiB", **NO_LATENCY)
    up = 2 * 7 / 8 * GiB / (450e9 * 0.817)
    out = 2 * 3 / 4 * GiB / 8 / (400e9 / 8 * 0.9)
    assert r["coll_allreduce_scaleup_transfer_time"] == pytest.approx(up, rel=1e-12)
    assert r["coll_allreduce_scaleout_transfer_time"] == pytest.approx(out, rel=1e-12)
    assert r["coll_allreduce_hierarchical_time"] == pytest.approx(max(up, out), rel=1e-12)
    r0 = ev(["coll_allreduce_hierarchical_time"], scenario="allreduce-sweep-h100", coll_group_size=32,
            coll_msg_bytes="1 GiB", hierarchical_overlap=0, **NO_LATENCY)
    assert r0["coll_allreduce_hierarchical_time"] == pytest.approx(up + out, rel=1e-12)


def test_nvls_sends_q_plus_1_over_q_per_direction():
    # 8 GPUs, 1 GiB, no latency: (9/8) GiB at 450 GB/s * 0.686
    r = ev(["coll_allreduce_nvls_time"], scenario="allreduce-sweep-h100", coll_msg_bytes="1 GiB",
           **NO_LATENCY)
    assert r["coll_allreduce_nvls_time"] == pytest.approx(9 / 8 * GiB / (450e9 * 0.686), rel=1e-12)


def test_in_network_reduction_halves_the_scale_out_volume_for_many_nodes():
    base = dict(scenario="allreduce-sweep-h100", coll_group_size=8 * 64, coll_msg_bytes="4 GiB",
                scaleout_in_network_reduction=1, scaleup_switch_reduction=0, **NO_LATENCY)
    r = ev(["coll_allreduce_in_network_time", "coll_allreduce_hierarchical_time", "coll_allreduce_auto_algorithm"],
           **base, scaleout_nic_bw="100 Gb/s")  # make the network the bottleneck
    # hierarchical 2*(63/64)*n/8 vs in-network n/8 through each NIC
    assert r["coll_allreduce_hierarchical_time"] / r["coll_allreduce_in_network_time"] == pytest.approx(2 * 63 / 64, rel=1e-9)
    assert r["coll_allreduce_auto_algorithm"] == 5


def test_alltoall_on_a_switch_and_through_an_oversubscribed_fabric():
    # 8 GPUs in one node: each sends 7/8 of 1 GiB over NVLink at 367.65 GB/s
    r = ev(["coll_alltoall_time", "coll_alltoall_busbw"], scenario="allreduce-sweep-h100",
           coll_msg_bytes="1 GiB", **NO_LATENCY)
    assert r["coll_alltoall_time"] == pytest.approx(7 / 8 * GiB / (450e9 * 0.817), rel=1e-12)
    # 64 GPUs on 8 nodes, 2:1 oversubscribed: 56/64 of the buffer leaves the node at 45/2 GB/s
    r2 = ev(["coll_alltoall_time"], scenario="allreduce-sweep-h100", coll_group_size=64,
            coll_msg_bytes="1 GiB", scaleout_topology="fat_tree", fat_tree_oversubscription=2, **NO_LATENCY)
    assert r2["coll_alltoall_time"] == pytest.approx(56 / 64 * GiB / (50e9 * 0.9 / 2), rel=1e-12)


def test_allgather_and_reducescatter_are_bandwidth_optimal_rings():
    r = ev(["coll_allgather_time", "coll_reducescatter_time", "coll_allgather_busbw", "coll_ring_bw"],
           scenario="allreduce-sweep-h100", coll_msg_bytes="4 GiB", **NO_LATENCY)
    assert r["coll_allgather_time"] == pytest.approx(7 / 8 * 4 * GiB / (450e9 * 0.817), rel=1e-12)
    assert r["coll_reducescatter_time"] == pytest.approx(r["coll_allgather_time"], rel=1e-12)
    assert r["coll_allgather_busbw"] == pytest.approx(r["coll_ring_bw"], rel=1e-12)


def test_rhd_has_log_latency_and_ring_volume():
    r = ev(["coll_allreduce_rhd_time", "coll_allreduce_ring_simple_time"], scenario="allreduce-sweep-h100",
           coll_msg_bytes=0, collective_launch_latency=0, collective_call_overhead=0)
    assert r["coll_allreduce_rhd_time"] == pytest.approx(2 * 3 * 3.4e-6, rel=1e-12)  # 2 log2(8) steps
    assert r["coll_allreduce_ring_simple_time"] == pytest.approx(14 * 3.4e-6, rel=1e-12)
    big = ev(["coll_allreduce_rhd_time", "coll_allreduce_ring_simple_time"], scenario="allreduce-sweep-h100",
             coll_msg_bytes="1 GiB", **NO_LATENCY)
    assert big["coll_allreduce_rhd_time"] == pytest.approx(big["coll_allreduce_ring_simple_time"], rel=1e-12)


# ------------------------------------------------------------------ the `auto` choice
def test_auto_picks_ring_for_small_and_nvls_for_large_messages_on_h200():
    # NCCL 2.27.7 on 8x H200: Ring/LL up to 1 MiB, NVLS/Simple from 2 MiB
    # (stas00/ml-engineering network/benchmarks/results/all-reduce-8xH200.md)
    sizes = [32 * KiB, 256 * KiB, 1 * MiB, 2 * MiB, 16 * MiB, 1 * GiB, 16 * GiB]
    r = ev(["coll_allreduce_auto_algorithm", "coll_allreduce_auto_time", "coll_allreduce_ring_ll_time"],
           scenario="allreduce-nvls-h200-8gpu", coll_msg_bytes=sizes)
    assert list(r["coll_allreduce_auto_algorithm"]) == [1, 1, 1, 4, 4, 4, 4]
    assert np.all(r["coll_allreduce_auto_time"][:3] == r["coll_allreduce_ring_ll_time"][:3])


def test_auto_switches_protocol_between_16_and_32_mib_on_a3_mega():
    # the measured A3 Mega sweep jumps from LL-like to Simple behaviour between 16 MiB (977.6 us)
    # and 32 MiB (1059.9 us): a doubling of the size adds only 8% time
    sizes = [8, 1 * MiB, 16 * MiB, 32 * MiB, 1 * GiB]
    r = ev(["coll_allreduce_auto_time", "coll_allreduce_tree_ll_time", "coll_allreduce_ring_ll_time",
            "coll_allreduce_auto_algorithm"], scenario="allreduce-a3mega-16gpu", coll_msg_bytes=sizes)
    ll = np.minimum(r["coll_allreduce_tree_ll_time"], r["coll_allreduce_ring_ll_time"])
    assert list(r["coll_allreduce_auto_time"][:3] == ll[:3]) == [True] * 3
    assert list(r["coll_allreduce_auto_time"][3:] < ll[3:]) == [True] * 2
    # above 16 MiB the hierarchical time equals the tree time to the last digit (the same
    # two-tier transfer); like the spreadsheet, the tie goes to the lower number, tree
    assert list(r["coll_allreduce_auto_algorithm"]) == [2, 2, 2, 2, 2]


def test_auto_never_picks_what_the_hardware_lacks():
    # A100: no NVLS; NCCL offers no recursive halving-doubling
    r = ev(["coll_allreduce_auto_algorithm", "coll_nvls_usable"], scenario="allreduce-nccl-tests-a100-8gpu")
    assert r["coll_nvls_usable"] == 0
    assert np.all(r["coll_allreduce_auto_algorithm"] == 1)
    # forcing NVLS evaluates it anyway, as a what-if
    forced = ev(["coll_allreduce_time"], scenario="allreduce-nccl-tests-a100-8gpu", allreduce_algorithm="nvls")
    what_if = ev(["coll_allreduce_nvls_time"], scenario="allreduce-nccl-tests-a100-8gpu")
    assert np.all(forced["coll_allreduce_time"] == what_if["coll_allreduce_nvls_time"])
    on = ev(["coll_allreduce_auto_algorithm"], scenario="allreduce-sweep-h100", coll_msg_bytes="1 MiB",
            rhd_enabled=1, scaleup_switch_reduction=0)
    assert on["coll_allreduce_auto_algorithm"] == 1  # at 1 MiB the LL ring still beats RHD's Simple steps
    on = ev(["coll_allreduce_auto_algorithm"], scenario="allreduce-sweep-h100", coll_msg_bytes="8 MiB",
            rhd_enabled=1, scaleup_switch_reduction=0)
    assert on["coll_allreduce_auto_algorithm"] == 6  # 6 Simple steps instead of 14


def test_torus_wins_on_the_tpu_cube_for_large_messages():
    r = ev(["coll_allreduce_auto_algorithm"], scenario="allreduce-tpu-v5p-cube")
    assert list(r["coll_allreduce_auto_algorithm"]) == [7, 7, 7]


# ------------------------------------------------------------------ placement of the parallel groups
def place(**degrees):
    names = [f"{g}_{k}" for g in ("tp", "cp", "ep", "pp", "dp")
             for k in ("group_stride", "gpus_per_domain", "domains", "crosses_scaleup", "domain_span")]
    return ev(names, scenario="allreduce-sweep-h100", **degrees)


def test_placement_default_order_tp_cp_dp_pp():
    r = place(tp=8, cp=2, dp=4, ep=4, pp=2)  # 128 GPUs, 16 DGX nodes
    assert (r["tp_group_stride"], r["tp_gpus_per_domain"], r["tp_domains"]) == (1, 8, 1)
    assert not r["tp_crosses_scaleup"]
    assert (r["cp_group_stride"], r["cp_gpus_per_domain"], r["cp_domains"]) == (8, 1, 2)
    # the data-parallel group includes the cp ranks: dp x cp = 8 members, stride tp (cp and dp are adjacent)
    assert (r["dp_group_stride"], r["dp_gpus_per_domain"], r["dp_domains"]) == (8, 1, 8)
    # experts are laid out etp-ep-edp: with etp = 1 the ep group is 4 consecutive ranks of one node
    assert (r["ep_group_stride"], r["ep_domains"]) == (1, 1)
    assert (r["pp_group_stride"], r["pp_domains"], r["pp_domain_span"]) == (64, 2, 9)
    assert r["dp_crosses_scaleup"] and r["pp_crosses_scaleup"]


def test_placement_small_groups_share_a_domain():
    r = place(tp=2, cp=2, dp=4, pp=2)  # tp*cp = 4: two cp groups side by side in a node
    assert (r["tp_gpus_per_domain"], r["tp_domains"]) == (2, 1)
    assert (r["cp_gpus_per_domain"], r["cp_domains"]) == (2, 1)
    assert (r["dp_group_stride"], r["dp_gpus_per_domain"], r["dp_domains"]) == (2, 4, 2)  # dp x cp = 8, stride tp
    assert r["dp_crosses_scaleup"] and not r["cp_crosses_scaleup"]


def test_placement_other_orders():
    r = place(tp=4, cp=2, dp=8, pp=4, parallel_group_order="tp_cp_pp_dp")
    assert (r["pp_group_stride"], r["dp_group_stride"]) == (8, 4)  # cp ranks first: stride tp (approximation)
    r1 = place(tp=4, cp=1, dp=8, pp=4, parallel_group_order="tp_cp_pp_dp")
    assert r1["dp_group_stride"] == 16
    assert (r["pp_gpus_per_domain"], r["pp_domains"]) == (1, 4)
    r = place(tp=4, cp=2, dp=8, pp=2, parallel_group_order="tp_pp_cp_dp")
    assert (r["pp_group_stride"], r["cp_group_stride"], r["dp_group_stride"]) == (4, 8, 8)
    assert (r["pp_gpus_per_domain"], r["pp_domains"]) == (2, 1)


def test_tp_beyond_the_domain_takes_the_hierarchical_form_and_nvl72_keeps_it_inside():
    dgx = ev(["tp_crosses_scaleup", "tp_allreduce_auto_algorithm"], scenario="allreduce-sweep-h100",
             tp=16, tp_allreduce_msg_bytes="64 MiB")
    assert dgx["tp_crosses_scaleup"]
    assert dgx["tp_allreduce_auto_algorithm"] in (2, 3, 4)  # tree, hierarchical or NVLSTree - not a flat ring
    nvl = ev(["tp_crosses_scaleup", "tp_allreduce_auto_algorithm"], scenario="collectives-gb200-nvl72",
             tp=16, tp_allreduce_msg_bytes="64 MiB")
    assert not nvl["tp_crosses_scaleup"] and nvl["tp_allreduce_auto_algorithm"] == 4


def test_groups_of_one_cost_nothing():
    r = ev(["tp_allreduce_net_time", "dp_allgather_net_time", "ep_alltoall_net_time", "pp_p2p_net_time",
            "cp_p2p_net_time", "tp_allreduce_auto_algorithm"],
           tp_allreduce_msg_bytes="1 GiB", dp_allgather_msg_bytes="1 GiB", ep_alltoall_msg_bytes="1 GiB",
           pp_p2p_msg_bytes="1 GiB", cp_p2p_msg_bytes="1 GiB")
    assert all(float(v) == 0 for v in r.values())


# every per-group node is the probe's formula on that group: compare them numerically
PROBE_SUFFIXES = {
    "allreduce": ["ring_ll_time", "ring_simple_time", "ring_time", "tree_time", "hierarchical_time", "nvls_time",
                  "in_network_time", "rhd_time", "torus_time", "auto_time", "auto_algorithm"],
    "allgather": ["ring_time", "hierarchical_time", "auto_time", "auto_algorithm"],
    "reducescatter": ["ring_time", "hierarchical_time", "auto_time", "auto_algorithm"],
    "alltoall": [], "p2p": [],
}
GROUP_COLLECTIVES = {"tp": ["allreduce", "allgather", "reducescatter"], "cp": ["allgather", "p2p"],
                     "ep": ["alltoall"], "pp": ["p2p"], "dp": ["allreduce", "allgather", "reducescatter"],
                     "edp": ["allreduce", "allgather", "reducescatter"]}


@pytest.mark.parametrize("group", list(GROUP_COLLECTIVES))
@pytest.mark.parametrize("scenario", ["allreduce-sweep-h100", "allreduce-a3mega-16gpu", "collectives-gb200-nvl72"])
def test_group_formulas_equal_the_probe(group, scenario):
    degrees = dict(tp=4, cp=2, dp=8, ep=4, pp=4, etp=2)
    sizes = [0, 100 * KiB, 8 * MiB, 3 * GiB]
    extra = {f"{group}_{c}_msg_bytes": sizes for c in GROUP_COLLECTIVES[group]}
    stride = ev([f"{group}_group_stride"], scenario=scenario, **degrees)[f"{group}_group_stride"]
    size = {"dp": 8 * 2, "edp": 4 * 2 * 8 // (4 * 2)}.get(group) or degrees[group]  # dp x cp; tp cp dp/(ep etp)
    probe_names, group_names = [], []
    for c in GROUP_COLLECTIVES[group]:
        final = "time"
        for suf in PROBE_SUFFIXES[c] + [final]:
            probe_names.append(f"coll_{c}_{suf}")
            group_names.append(f"{group}_{c}_{'net_time' if suf == 'time' else suf}")
    g = ev(group_names, scenario=scenario, **degrees, **extra)
    p = ev(probe_names, scenario=scenario, **degrees, coll_group_size=size, coll_group_stride=int(stride), collective_call_overhead=0,
           coll_msg_bytes=sizes)
    for pn, gn in zip(probe_names, group_names):
        np.testing.assert_allclose(g[gn], p[pn], rtol=1e-13, err_msg=f"{gn} vs {pn}")


# ------------------------------------------------------------------ vectorized sweeps and the CLI
def test_a_sweep_over_message_sizes_is_one_vectorized_call():
    sizes = np.logspace(0, 34, 1000, base=2.0)
    outs = ["coll_allreduce_auto_time", "coll_allreduce_auto_algorithm", "coll_allreduce_busbw"]
    vec = ev(outs, scenario="allreduce-sweep-h100", coll_msg_bytes=sizes)
    assert vec["coll_allreduce_auto_time"].shape == (1000,)
    for i in (0, 400, 999):
        one = ev(outs, scenario="allreduce-sweep-h100", coll_msg_bytes=float(sizes[i]))
        for o in outs:
            assert vec[o][i] == pytest.approx(float(one[o]), rel=1e-12)
    assert np.all(np.diff(vec["coll_allreduce_auto_time"]) >= 0)  # time grows with size


def test_cli_runs_the_sweep_scenario():
    out = subprocess.run([sys.executable, "-m", "flopsheet.cli", "run", "allreduce-sweep-h100"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    for name in ("coll_allreduce_ring_busbw", "coll_allreduce_nvls_busbw", "coll_allreduce_auto_algorithm",
                 "16 GiB"):
        assert name in out.stdout


@pytest.mark.parametrize("scenario", ["allreduce-sweep-h100", "allreduce-nccl-tests-a100-8gpu",
                                      "allreduce-nvls-h200-8gpu", "allreduce-a3mega-16gpu",
                                      "collectives-gb200-nvl72", "allreduce-tpu-v5p-cube"])
def test_collective_scenarios_evaluate(scenario):
    sc = load_scenario(scenario)
    res = MODEL.evaluate(resolve(sc, MODEL), outputs=sc.report)
    for n in sc.report:
        assert np.all(np.isfinite(np.asarray(res[n], dtype=float))), n
