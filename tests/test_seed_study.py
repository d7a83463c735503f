"""The seed study (tools/seed_study.py): GPT-MoE-1.8T from A100 to GB200 NVL72, one change per step.

Checked: the step factors multiply to the total and the printed parts sum to each step time; the
chain's named steps are the bundled scenarios (two independent paths to the same number); each step
is bounded by the hardware ratio it changes; the model's ratios against NVIDIA's published ones,
pinned at the measured figures - the model disagrees with the published projections (it gives about
half), see PUBLISHED_GAP below for why - and against the Hopper -> Blackwell ratios NVIDIA measured
with one software release, which it reproduces within 8 % except on Llama 3 8B (+14 %, +21 %: Hopper's
FlashAttention-2 attention efficiency against the cuDNN attention of that release)."""
from __future__ import annotations

import math

import pytest

from conftest import load_tool, run_scenario


@pytest.fixture(scope="module")
def tool():
    return load_tool("seed_study")


@pytest.fixture(scope="module")
def rows(tool, model):
    return tool.run(model)


def test_step_factors_multiply_to_the_total(rows):
    assert math.prod(r["factor"] for r in rows) == pytest.approx(rows[-1]["cumulative"], rel=1e-12)
    for a, b in zip(rows, rows[1:]):
        assert b["factor"] == pytest.approx(a["step_time"] / b["step_time"], rel=1e-12)


def test_named_steps_are_the_bundled_scenarios(tool, rows, model):
    named = {r["endpoint"]: r for r in rows if r["endpoint"]}
    assert set(named) == {f"seed-gpt-moe-1.8t-{g}" for g in ("h100", "h200", "b200", "gb200-nvl72")}
    assert run_scenario(model, "seed-gpt-moe-1.8t-a100").scalar("step_time") == pytest.approx(
        rows[0]["step_time"], rel=1e-12)
    for name, r in named.items():
        assert run_scenario(model, name).scalar("step_time") == pytest.approx(r["step_time"], rel=1e-12)


def test_every_step_fits_is_valid_and_no_step_slows_down(rows):
    for r in rows:
        assert r["fits_in_memory"] == 1 and r["parallel_config_valid"] == 1, r["label"]
        assert r["factor"] >= 1 - 1e-12, r["label"]


def test_parts_sum_to_the_step_time(tool, rows):
    """The breakdown the table prints is the whole step: compute + bubble + TP + EP + PP + DP + CP +
    other = step_time on every step (hand-checked on step 5, HGX H100: 3.09 + 2.02 + 0.32 + 1.26 +
    0.01 + 0.31 (DP) = 7.00 s, rounded parts, against 7.00 s; the bubble is the 7 stages other than the last,
    which runs the output layer, 2.02 s until 2026-11-28; without dropout, the library default since
    2026-11-28, whose masks took 0.02 s of compute and 0.01 s of bubble; the MoE layers run only their attention block's TP collectives and the
    EP part holds the expert-TP 8 gather of every dispatch; compute includes the eager expert bias adds of
    moe_expert_bias_add, the model's assumed GPT-style biases)."""
    for r in rows:
        assert sum(r["parts"].values()) == pytest.approx(r["step_time"], rel=1e-9), r["label"]
    h100 = rows[5]["parts"]
    # 3.09 s compute and 2.02 s bubble before the SM contention of hidden traffic (0.05 s here) and Hopper's refit
    # to 0.61 x 0.88 of the peak (2026-11-28)
    assert [round(h100[p], 2) for p in ("compute", "bubble", "TP", "EP", "PP")] == \
        [2.92, 1.94, 0.32, 1.26, 0.01]


def test_bubble_is_seven_sixteenths_of_the_microbatch_time(tool, rows):
    """1F1B with p = 8 stages and m = 8192 / 512 = 16 microbatches idles (p - 1)/m = 7/16 of the
    per-microbatch time (compute, exposed TP/EP/PP communication and host-bound gaps, less the output
    layer, which only the slowest stage runs): the bubble over the rest of the step stays near 7/16 on every step, which is
    why each step's saving is split about 70/30 between the part it changes and the bubble."""
    for r in rows:
        p = r["parts"]
        rest = p["compute"] + p["TP"] + p["EP"] + p["PP"] + p["host"]
        assert p["bubble"] / rest == pytest.approx(7 / 16, rel=0.02), r["label"]  # A100: 0.432


def test_each_step_is_bounded_by_the_hardware_ratio_it_changes(tool, model, rows):
    """A step cannot speed the job up more than the largest ratio of the numbers it changes
    (peak FLOP/s at the precision used, HBM bandwidth, NVLink bandwidth or domain, NIC bandwidth),
    and not at all when it changes none of them; the table's hw ratio column is that ratio."""
    from flopsheet.scenario import resolve
    hw = []
    for k in range(len(tool.STEPS)):
        res = model.evaluate(resolve(tool.step_scenario(k), model), outputs=["step_time"] + tool.HARDWARE)
        hw.append({n: float(res[n]) for n in ["step_time"] + tool.HARDWARE})
    for k in range(1, len(hw)):
        ratio = max(hw[k][n] / hw[k - 1][n] for n in tool.HARDWARE)
        factor = hw[k - 1]["step_time"] / hw[k]["step_time"]
        assert factor <= max(ratio, 1) * (1 + 1e-12), tool.STEPS[k].label
        assert rows[k]["hw_ratio"] == pytest.approx(max(ratio, 1), rel=1e-12)
    # hand-checked: A100 -> H100 BF16 peak 989 / 312 = 3.17; NVL72 domain 72 / 8 = 9
    assert rows[1]["hw_ratio"] == pytest.approx(989 / 312, rel=1e-3)
    assert rows[11]["hw_ratio"] == pytest.approx(9.0, rel=1e-12)


# Measured with `python tools/seed_study.py` (the model's ratio; NVIDIA's / Kundu et al.'s in brackets).
#: 2.79 / 1.78 / 2.31 / 4.95 / 6.44 while the data-parallel traffic counted as fully hidden (before 2026-11-28; now it
#: is exposed beyond one microbatch's compute, formulas/training/step.yaml dp_overlap_bound, which slows HGX B200 most).
#: The A100 ratios were 2.98 / 5.23 / 6.96 before A100 streamed FlashAttention's K/V once per wave (2026-11-27),
#: 2.89 / 1.75 / 2.34 / 5.07 / 6.75 before the token permutation ran at its Megatron-Bridge fit (0.13 of peak HBM),
#: 2.87 / 1.76 / 2.34 / 5.06 / 6.70 before the MoE layers dropped the dense MLP's TP collectives and gathered their
#: routed rows over expert TP 8 (formulas/parallel/comm.yaml tp_mlp_collective_share, etp_token_collective_time).
#: 2.71 / 1.67 / 2.37 / 4.54 / 6.43 before the SM contention of hidden traffic and the 2026-11-28 refits.
MEASURED = {"H100 FP8 / A100 BF16": 2.79,                        # ("up to 9x", another model)
            "HGX B200 / HGX H100": 1.65,                         # (3x)
            "GB200 NVL72 / HGX H100": 2.33,                      # (4x)
            "B200 / A100 (Kundu et al.), vs HGX B200": 4.60,     # (~35x)
            "B200 / A100 (Kundu et al.), vs GB200 NVL72": 6.50}  # (~35x)
#: Why the model gives about half of the published ratios (stated, not fitted away):
#: (1) calibration - the library's sustained GEMM rate is 0.75 of peak on A100 but 0.61 x 0.88 = 0.54
#:     of the FP8 peak on Hopper (fitted on Megatron-Core H100 and NeMo 24.07 H100 FP8 points) and
#:     0.54 x 0.90 = 0.49 on Blackwell (fitted on the Megatron-Bridge 25.11 B200/GB200 FP8 points), so
#:     A100 BF16 -> GB200 FP8 GEMMs gain 10.0x for a 16x peak ratio;
#: (2) attention stays in BF16 and pointwise work scales with HBM only; (3) the layout is the same on
#:     every system (TP 8, PP 8, EP 16); with every overlap and interleaving switched on together the
#:     ratios move by at most 0.3x (VARIANTS), and compute alone gives GB200/H100 2.20x: no equal
#:     software assumption reaches 4x. (4) NVIDIA's ratios are projections; its own measured
#:     Megatron-Bridge 25.11 ratios on dense Llama are 2.1-2.8x (test_measured_generation_ratios).
PUBLISHED_GAP = (0.1, 0.65)


@pytest.mark.parametrize("label", list(MEASURED))
def test_ratios_against_published(tool, rows, label):
    p = {q["label"]: q for q in tool.published_rows(rows)}[label]
    claim = next(c for c in tool.PUBLISHED if c.label == label)
    assert p["model"] == pytest.approx(rows[claim.a]["step_time"] / rows[claim.b]["step_time"], rel=1e-12)
    assert p["error"] == pytest.approx(p["model"] / claim.ratio - 1, rel=1e-12)
    assert p["model"] == pytest.approx(MEASURED[label], rel=0.02)
    assert PUBLISHED_GAP[0] <= p["model"] / p["published"] <= PUBLISHED_GAP[1]


def test_every_claim_says_how_far_its_source_was_checked(tool):
    for c in tool.PUBLISHED:
        assert c.status in ("verified", "partly verified", "recalled, not found"), c.label
        if c.status != "verified":
            assert "not found" in c.source, c.label  # what could not be checked is named


@pytest.fixture(scope="module")
def measured(tool):
    return {m["label"]: m for m in tool.measured_rows()}


def test_measured_generation_ratios(tool, measured):
    """Hopper -> Blackwell per-GPU throughput of one software release (Megatron-Bridge 25.11, FP8-CS,
    each system on NVIDIA's own layout) against the library on the same validation points.
    Hand-checked measured ratios: 30,624 / 14,451 = 2.12 (B200 / H100, Llama 3 8B), 31,508 / 14,451
    = 2.18, 4,312 / 1,602 = 2.69, 661 / 292 = 2.26, 813 / 292 = 2.78. The model's (pinned at the
    figures of `python tools/seed_study.py`) are within 12 % on every row: -1 / +6 % on the 8B rows (+1 / +8 % before the SM contention of hidden
    traffic and the 2026-11-28 refits; 70B +5 %, 405B -4 / -11 % then)
    (+14 / +21 % while the 2025 H100 rows ran the 2024 containers' 35 % attention; Megatron-Bridge 25.11
    runs TransformerEngine's cuDNN attention on H100, at 0.6 in its assumptions), +3 % on 70B (-0 % before the
    FP8 runs' output layer ran at the BF16 rate) and
    -4 / -10 % on 405B. NVIDIA's 3x / 4x projections still sit above its own
    measurements on dense models."""
    hand = {"B200 / H100, Llama 3 8B, 8 GPUs": 30624 / 14451,
            "GB200 / H100, Llama 3 8B, 8 GPUs": 31508 / 14451,
            "GB200 / H100, Llama 3 70B, 64 GPUs": 4312 / 1602,
            "B200 / H100, Llama 3.1 405B, 128 / 1,024 GPUs": 661 / 292,
            "GB200 / H100, Llama 3.1 405B, 256 / 1,024 GPUs": 813 / 292}
    model = {"B200 / H100, Llama 3 8B, 8 GPUs": 2.11, "GB200 / H100, Llama 3 8B, 8 GPUs": 2.31,
             "GB200 / H100, Llama 3 70B, 64 GPUs": 2.76,
             "B200 / H100, Llama 3.1 405B, 128 / 1,024 GPUs": 2.18,
             "GB200 / H100, Llama 3.1 405B, 256 / 1,024 GPUs": 2.51}
    assert set(measured) == set(hand)
    for label, m in measured.items():
        assert m["measured"] == pytest.approx(hand[label], rel=1e-9), label
        assert m["model"] == pytest.approx(model[label], rel=0.02), label
        assert abs(m["error"]) <= 0.12, label
        assert m["measured"] < 3.0  # below both projections


def test_software_assumptions_do_not_reach_the_projections(tool, model):
    """Overlaps and interleaving applied equally to every system move the fixed-layout ratios by at
    most 0.33x (pinned at the figures of `python tools/seed_study.py`); the compute-alone ratio
    (no bubble, no communication) is 2.03x for HGX B200 / H100 and 2.20x for GB200 / H100 (2.10x and 2.28x before
    the SM contention of hidden traffic and the 2026-11-28 refits)."""
    v = {r["label"]: r for r in tool.variant_rows(model)}
    base = v[tool.VARIANTS[0][0]]
    assert base["gb200/h100"] == pytest.approx(MEASURED["GB200 NVL72 / HGX H100"], rel=0.02)
    assert base["b200/h100"] == pytest.approx(MEASURED["HGX B200 / HGX H100"], rel=0.02)
    alone = v["compute alone (no bubble, no communication)"]
    assert alone["b200/h100"] == pytest.approx(2.03, rel=0.02)
    assert alone["gb200/h100"] == pytest.approx(2.20, rel=0.02)
    assert v["all three overlaps + interleaving"]["b200/h100"] == pytest.approx(1.74, rel=0.02)  # 1.80 before the contention
    for r in v.values():
        assert r["b200/h100"] < 3.0 and r["gb200/h100"] < 4.0 and r["gb200/a100"] < 35, r["label"]
        assert abs(r["gb200/h100"] - base["gb200/h100"]) <= 0.33, r["label"]


def test_retuned_layouts_are_never_slower_and_close_part_of_the_gap(tool, rows):
    """--retune searches each system's layout (the fixed one is among the candidates, so it can only
    be as fast or faster). Measured: GB200 NVL72 / HGX H100 3.23x (published 4x), HGX B200 / HGX H100
    1.83x (3x), GB200 NVL72 / A100 8.50x (~35x) with the data-parallel traffic exposed beyond one
    microbatch's compute (2026-11-28, with the SM contention of hidden traffic: HGX H100 5.97 s, HGX B200 3.26 s, GB200 NVL72 1.85 s; 3.29x,
    1.86x and 8.44x, 6.04 s, 3.25 s and 1.84 s before it; each on DP 256-512
    over 400G or 800G NICs); 3.41x, 2.62x and 8.88x with it fully hidden - the 80 GB GPUs keep expert TP 8, so they also hold its
    gathered expert inputs (8 x the dispatched rows) and settle on CP 2 and 4 stages of 6 chunks (HGX H100
    5.23 -> 5.62 s); 3.19x, 2.45x and 8.65x before that buffer was counted; with the expert-TP gathers
    modelled HGX H100 keeps expert TP 8 and pays them (4.90 -> 5.23 s), GB200 NVL72 moves from expert TP 8
    to 1 as HGX B200 had; 3.01x, 2.25x and 8.43x before those gathers were modelled, 3.10x and
    8.9x before the token permutation ran at its Megatron-Bridge fit (0.13 of peak HBM)."""
    best = tool.retune()
    fixed = {r["endpoint"]: r["step_time"] for r in rows if r["endpoint"]}
    fixed["seed-gpt-moe-1.8t-a100"] = rows[0]["step_time"]
    for s, b in best.items():
        assert b["step_time"] <= fixed[f"seed-gpt-moe-1.8t-{s}"] * (1 + 1e-9), s
    ratio = {k: best[a]["step_time"] / best[b]["step_time"] for k, a, b in
             [("b200", "h100", "b200"), ("gb200", "h100", "gb200-nvl72"), ("a100", "a100", "gb200-nvl72")]}
    assert ratio["b200"] == pytest.approx(1.83, rel=0.02)
    assert ratio["gb200"] == pytest.approx(3.23, rel=0.02)
    assert ratio["a100"] == pytest.approx(8.50, rel=0.02)


def test_gpt_moe_1_8t_parameter_count(model):
    """120 layers x (16 experts x 2 x 15360 x 30720 + 4 x 15360^2) + untied 51,200-token embedding
    and output layer = 1.9268e12 weights (biases and norms add 0.01 %): the stated assumption gives
    1.93 T, within 7 % of NVIDIA's 1.8 T; 341 B are active per token (top-2)."""
    r = run_scenario(model, "seed-gpt-moe-1.8t-a100")
    hand = 120 * (16 * 2 * 15360 * 30720 + 4 * 15360**2) + 2 * 51200 * 15360
    assert r.scalar("total_params") == pytest.approx(hand, rel=2e-4)
    assert r.scalar("total_params") / 1.8e12 - 1 == pytest.approx(0.07, abs=0.005)
