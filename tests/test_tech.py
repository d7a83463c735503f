"""Technology-node table and the derived accelerator (issue 13)."""
from __future__ import annotations

import pytest

from conftest import run_scenario
from flopsheet.library import load_library

NODES = ["n16", "n10", "n7", "n5", "n3", "n2", "a16", "a14", "a10"]


def ev(model, outputs, **values):
    return model.evaluate({k: model.encode(k, v) for k, v in values.items()}, outputs=outputs)


def test_every_node_row_is_sourced_with_kind_and_year():
    lib = load_library()
    for q in ("logic_density", "sram_density", "wafer_price", "defect_density", "energy_per_flop",
              "design_nre"):
        for n in NODES:
            item = lib.item(f"{q}_{n}")
            assert "[kind: " in item.source and "as_of: " in item.source, (q, n)
            if n in ("n2", "a16", "a14", "a10"):
                assert "projection" in item.source or "assumption" in item.source, (q, n)


def test_node_trends(model):
    rows = {n: ev(model, ["logic_density", "wafer_price", "energy_per_flop", "sram_density"],
                  process_node=n) for n in NODES}
    seq = [rows[n] for n in NODES]
    for a, b in zip(seq, seq[1:]):
        assert b.scalar("logic_density") > a.scalar("logic_density")
        assert b.scalar("wafer_price") >= a.scalar("wafer_price")
        assert b.scalar("energy_per_flop") < a.scalar("energy_per_flop")
        assert b.scalar("sram_density") >= a.scalar("sram_density")  # SRAM stalls at N3, never shrinks
    # cost per transistor still falls from 16 to 5 nm (wafer price over density)
    per_tr = [rows[n].scalar("wafer_price") / rows[n].scalar("logic_density") for n in NODES]
    assert per_tr[3] < per_tr[0]


def test_derived_accelerator_reproduces_h100_at_n5(model):
    # calibrated on H100 SXM: 814 mm^2 at n5, 700 W -> 989 TFLOP/s BF16 from both limits
    r = ev(model, ["derived_area_limited_flops", "derived_power_limited_flops",
                   "derived_peak_flops_per_gpu", "derived_hbm_bandwidth"],
           process_node="n5", compute_silicon_area="814 mm^2", gpu_tdp="700 W", compute_dtype="bf16",
           hbm_stacks=5, accelerator_source="derived")
    assert r.scalar("derived_power_limited_flops") == pytest.approx(989e12, rel=0.01)
    assert r.scalar("derived_area_limited_flops") == pytest.approx(989e12, rel=0.02)
    assert r.scalar("derived_hbm_bandwidth") == pytest.approx(5 * 819e9)


def test_derived_a100_held_out(model):
    # A100 (n7, 826 mm^2, 400 W) is not used in any calibration: BF16 peak 312 TFLOP/s
    r = ev(model, ["derived_peak_flops_per_gpu"], process_node="n7", compute_silicon_area="826 mm^2",
           gpu_tdp="400 W", compute_dtype="bf16")
    assert r.scalar("derived_peak_flops_per_gpu") == pytest.approx(312e12, rel=0.35)


def test_process_node_moves_step_time_and_cost(model):
    out = {}
    for n in ("n7", "n5", "n2"):
        r = run_scenario(model, "cost-gpt3-175b-h100", process_node=n, accelerator_source="derived")
        out[n] = (r.scalar("step_time"), r.scalar("cost_per_good_die"), r.scalar("peak_flops_per_gpu"))
    assert out["n7"][0] > out["n5"][0] > out["n2"][0]   # faster
    assert out["n7"][1] < out["n2"][1]                   # dearer silicon per die
    assert out["n2"][2] > out["n5"][2] > out["n7"][2]
    # the preset path ignores the node for performance
    a = run_scenario(model, "cost-gpt3-175b-h100", process_node="n2").scalar("step_time")
    b = run_scenario(model, "cost-gpt3-175b-h100", process_node="n7").scalar("step_time")
    assert a == b


def test_power_limit_binds_when_the_die_grows(model):
    r = ev(model, ["derived_area_limited_flops", "derived_power_limited_flops", "derived_peak_flops_bf16"],
           process_node="n2", compute_silicon_area="1600 mm^2", gpu_tdp="700 W")
    assert r.scalar("derived_area_limited_flops") > r.scalar("derived_power_limited_flops")
    assert r.scalar("derived_peak_flops_bf16") == r.scalar("derived_power_limited_flops")


def test_node_scaling_study(model):
    order = NODES
    res = {n: run_scenario(model, f"study-node-scaling-{n}") for n in order}
    steps = [res[n].scalar("step_time") for n in order]
    assert all(b <= a for a, b in zip(steps, steps[1:]))
    assert steps[0] / steps[-1] > 10  # 16 nm -> 1 nm class: over an order of magnitude
    # the cost of the same run falls from 16 nm to 2 nm
    assert res["n2"].scalar("cost_per_training_run") < res["n16"].scalar("cost_per_training_run")
    # the network's time against the logic's grows once logic outpaces the network of the era (n16 -> n5): a
    # layer's tensor-parallel collectives take 9 % of its compute at n16 and 30 % at n5 - hidden behind the GEMMs
    # (overlapped, the default since 2026-11-28), while the exposed pipeline and data-parallel traffic's share of
    # the step grows 0.7 -> 1.9 % (8 and 27 %, 1.0 -> 2.6 % before Hopper's refit to 0.61 with the SM contention of
    # hidden traffic, 2026-11-28)
    raw = {n: res[n].scalar("tp_comm_time_per_layer") / res[n].scalar("layer_compute_time_per_microbatch") for n in order}
    assert raw["n16"] == pytest.approx(0.090, abs=0.002) and raw["n5"] == pytest.approx(0.297, abs=0.002)
    exposed = {n: sum(res[n].scalar(f"step_{g}_comm_time") for g in ("tp", "pp", "dp")) / res[n].scalar("step_time")
               for n in order}
    assert exposed["n5"] > 2 * exposed["n16"]


def test_perf_per_dollar_study_has_a_pareto_front(model):
    import numpy as np
    r = run_scenario(model, "study-perf-per-dollar")
    times = np.asarray(r["time_to_train"])
    per_dollar = np.asarray(r["training_tokens_per_dollar"])
    assert times.shape == (6,)
    # same node: the 1,600 mm^2 4-chiplet design trains faster and buys more tokens per dollar than 800 mm^2
    for i in range(3):
        assert times[i + 3] < times[i] and per_dollar[i + 3] > per_dollar[i]
    # newer nodes: faster at every design size
    assert times[0] > times[1] > times[2] and times[3] > times[4] > times[5]


def test_derived_sram_matches_h100_calibration(model):
    r = ev(model, ["derived_sram_capacity"], process_node="n5", compute_silicon_area="814 mm^2")
    hand = 50e6 + 2 * 132 * 256 * 1024  # L2 + L1/shared + registers, bytes
    assert r.scalar("derived_sram_capacity") == pytest.approx(hand, rel=0.03)


# --- memory generation: one table drives serving, the derived accelerator and the HBM price ---
MEMORY_GENS = ["hbm2", "hbm2e", "hbm3", "hbm3e", "hbm4", "hbm4e", "hbm5"]


def run_with(model, tmp_path, use, **sets):
    """A scenario made of presets only (``use``), then ``--set`` values."""
    from flopsheet.scenario import load_scenario, resolve
    path = tmp_path / "sc.yaml"
    path.write_text("doc: test\nuse: [" + ", ".join(use) + "]\n")
    sc = load_scenario(str(path), [f"{k}={v}" for k, v in sets.items()])
    return model.evaluate(resolve(sc, model))


def test_every_memory_generation_is_priced_with_kind_and_year():
    from flopsheet.scenario import find_template
    from flopsheet.yamlio import read_mapping
    for g in MEMORY_GENS:
        p = find_template(f"tech/memory/{g}")
        data, _ = read_mapping(p.read_text(), p.name, "preset")
        price = data["values"]["hbm_price_per_gb"]
        assert price["value"].endswith("USD/GB") and "as_of: " in price["source"], g
        kind = price["source"].split("[kind: ")[1].split(";")[0]
        assert kind in (("projection", "assumption") if g in ("hbm4", "hbm4e", "hbm5")
                        else ("derived", "measured", "assumption")), g


def test_no_node_preset_repeats_the_memory_table():
    from flopsheet.scenario import bundled_templates
    for p in (bundled_templates() / "tech" / "nodes").glob("*.yaml"):
        text = p.read_text()
        assert "use: [tech/memory/" in text, p.name
        for dup in ("derived_hbm_stack_bandwidth", "derived_hbm_stack_capacity", "hbm_capacity:",
                    "memory_device_"):
            assert dup not in text, (p.name, dup)


def test_memory_generation_moves_decode_latency_and_package_cost_on_a_preset_gpu(model, tmp_path):
    """H100 serving Llama-3 70B with its five active stacks swapped HBM3 -> HBM3e -> HBM4:
    TPOT falls with bandwidth while the package's HBM bill rises with capacity and price."""
    r = {g: run_with(model, tmp_path, ["cost-serve-llama3-70b-h100", f"tech/memory/{g}"],
                     batch=64)
         for g in ("hbm3", "hbm3e", "hbm4")}
    assert r["hbm3"].scalar("tpot") > r["hbm3e"].scalar("tpot") > r["hbm4"].scalar("tpot")
    assert r["hbm3"].scalar("package_cost") < r["hbm3e"].scalar("package_cost") \
        < r["hbm4"].scalar("package_cost")
    # hand check: 6 stacks on the H100 package; HBM3 16 GB at 15 USD/GB, HBM3e 24 GB at 18 USD/GB
    assert r["hbm3"].scalar("hbm_stack_cost") == pytest.approx(16e9 * 15 / 1e9)
    assert r["hbm3e"].scalar("hbm_stack_cost") == pytest.approx(24e9 * 18 / 1e9)
    d = r["hbm3e"].scalar("package_dies_cost") - r["hbm3"].scalar("package_dies_cost")
    assert d == pytest.approx(6 * (24 * 18 - 16 * 15))
    assert r["hbm3e"].scalar("serving_hbm_bandwidth") == pytest.approx(5 * 1.2e12)
    # TP all-reduces and per-step overheads do not scale with bandwidth: TPOT falls by less than
    # the bandwidth ratio 1.465 (measured 1.073 at batch 64, 1.13 at batch 1)
    ratio = r["hbm3"].scalar("tpot") / r["hbm3e"].scalar("tpot")
    assert 1.05 < ratio < 1.2e12 / 819e9


def test_memory_generation_drives_the_derived_accelerator(model, tmp_path):
    """One per-stack figure feeds serving, training's memory rate, capacity and HBM cost."""
    base = ["models/llama3-70b", "hardware/h100-sxm5-80gb", "systems/dgx-h100-superpod",
            "cost/h100-package", "cost/datacenter-2024", "tech/nodes/n5"]
    r3 = run_with(model, tmp_path, base, tp=8, batch=32, prompt_len=1024, output_len=256)
    r3e = run_with(model, tmp_path, base + ["tech/memory/hbm3e"], tp=8, batch=32, prompt_len=1024,
                   output_len=256)
    for r, bw, cap in ((r3, 819e9, 16e9), (r3e, 1.2e12, 24e9)):
        assert r.scalar("derived_hbm_stack_bandwidth") == pytest.approx(bw)
        assert r.scalar("derived_hbm_bandwidth") == pytest.approx(5 * bw)
        assert r.scalar("serving_hbm_bandwidth") == r.scalar("derived_hbm_bandwidth")
        assert r.scalar("accelerator_hbm_capacity") == pytest.approx(5 * cap)
        assert r.scalar("serving_hbm_capacity") == r.scalar("accelerator_hbm_capacity")
        assert r.scalar("hbm_stack_capacity") == pytest.approx(cap)
    assert r3e.scalar("tpot") < r3.scalar("tpot")
    assert r3e.scalar("memory_rate") / r3.scalar("memory_rate") == pytest.approx(1.2e12 / 819e9)
    assert r3e.scalar("package_cost") - r3.scalar("package_cost") > 5 * (24 * 18 - 16 * 15)


# --- frequency / voltage trend of the node table ----------------------------------------------
def test_voltage_and_frequency_rows_are_sourced_and_trend():
    lib = load_library()
    for q in ("supply_voltage", "relative_frequency"):
        for n in NODES:
            src = lib.item(f"{q}_{n}").source
            assert "[kind: " in src and "as_of: " in src, (q, n)
            if n in ("n2", "a16", "a14", "a10"):
                assert "projection" in src, (q, n)
    assert lib.item("supply_voltage").unit == "V"


def test_frequency_scales_the_area_limit_and_voltage_explains_part_of_the_energy(model):
    rows = {n: ev(model, ["relative_frequency", "supply_voltage", "voltage_energy_factor",
                          "switched_capacitance_factor", "derived_area_limited_flops",
                          "energy_per_flop"],
                  process_node=n, compute_silicon_area="814 mm^2") for n in NODES}
    f = [rows[n].scalar("relative_frequency") for n in NODES]
    v = [rows[n].scalar("supply_voltage") for n in NODES]
    assert all(b > a for a, b in zip(f, f[1:]))          # faster at the same power, node to node
    assert all(b <= a for a, b in zip(v, v[1:]))         # Vdd never rises; it stalls at 0.75 V
    assert rows["n5"].scalar("relative_frequency") == 1  # the calibration node
    # hand check: N7 = 1/1.15 of N5's clock; its area limit is density ratio x clock ratio
    n5, n7 = rows["n5"], rows["n7"]
    assert n7.scalar("derived_area_limited_flops") / n5.scalar("derived_area_limited_flops") == \
        pytest.approx(91.2 / 171.3 * 0.870, rel=1e-12)
    # C V^2: a10 at 0.6 V against N5's 0.75 V keeps 0.64 of the switching energy per transition
    assert rows["a10"].scalar("voltage_energy_factor") == pytest.approx((0.6 / 0.75) ** 2)
    for n in NODES:
        r = rows[n]
        assert r.scalar("switched_capacitance_factor") * r.scalar("voltage_energy_factor") == \
            pytest.approx(r.scalar("energy_per_flop") / n5.scalar("energy_per_flop"))
    # the capacitance left after V^2 shrinks from N10 on (measured: 3.02 at n10 to 0.40 at a10);
    # 16FF+ -> N10 is flat (2.98 -> 3.02): the N10 energy row is derived from N7, not measured
    c = [rows[n].scalar("switched_capacitance_factor") for n in NODES]
    assert all(b < a for a, b in zip(c[1:], c[2:]))
    assert c[1] == pytest.approx(c[0], rel=0.02)
