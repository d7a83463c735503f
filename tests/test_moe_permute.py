"""MoE token permutation at its calibrated share of peak HBM bandwidth (moe_permute_hbm_fraction) - worked examples
checked by hand on the Megatron-Bridge 25.09 DGX-B200 Qwen3-30B-A3B token-drop point, the cross-check against the
streaming rate, and the fit the default comes from, checked against the kernel measurements it must stay below."""
from __future__ import annotations

import pytest

from conftest import point_runner

B200 = "train-mbridge-25.09-dgx-b200-qwen3-30b-a3b-8gpu-tokendrop"
LLAMA8 = "train-mbridge-25.11-dgx-h100-llama3-8b-8gpu-fp8-cs"


@pytest.fixture(scope="module")
def point():
    return point_runner(B200)


def test_b200_qwen3_30b_permutation_by_hand(point):
    r = point(kernel_launch_overhead=4e-6)
    # 4096 tokens (s 4096 x mbs 1, tp 1), hidden 2048, top-8, 16 local experts (128 / ep 8), 2-byte activations:
    # permute + unpermute 2 (1 + 8) rows, local sort and its inverse 4 x 8 rows -> 50 rows of 4 KiB per token
    permute_bytes = 2 * 4096 * 2048 * (2 * (1 + 8) + 4 * 8)
    assert permute_bytes == 838_860_800
    assert r.scalar("moe_permute_bytes_fwd") == pytest.approx(permute_bytes, rel=1e-12)
    assert r.scalar("moe_permute_rate") == pytest.approx(0.17 * 8e12, rel=1e-12)     # 17 % of the 8 TB/s peak
    router_bytes = 4 * 4 * 4096 * 128                                                # four fp32 passes over 4096 x 128
    kernels = 40 + (16 - 1) * 2                                                      # router/dispatcher + 15 more expert GEMM pairs
    want = permute_bytes / 1.36e12 + router_bytes / 6.4e12 + kernels * 4e-6          # 616.8 + 1.3 + 280 us
    assert want == pytest.approx(898.120e-6, rel=1e-5)
    assert r.scalar("moe_pointwise_time_fwd") == pytest.approx(want, rel=1e-12)
    # the backward moves the same 800 MiB once more (each permutation's transpose) and launches the 70 kernels
    # twice: 616.8 + 1.3 + 560 us = 1,178.1 us, not twice the forward (1,796.2 us)
    assert r.scalar("moe_launch_time_fwd") == pytest.approx(kernels * 4e-6, rel=1e-12)
    back = permute_bytes / 1.36e12 + router_bytes / 6.4e12 + 2 * kernels * 4e-6
    assert back == pytest.approx(1178.120e-6, rel=1e-5)
    assert r.scalar("moe_pointwise_time_bwd") == pytest.approx(back, rel=1e-12)


def test_at_the_streaming_share_it_runs_at_memory_rate(point):
    # with the permutation at the streaming calibration (memory_efficiency 0.8 of peak) the term is the plain
    # roofline over memory_rate again - the two paths agree
    r = point(moe_permute_hbm_fraction=0.8, kernel_launch_overhead=4e-6)
    mem = r.scalar("memory_rate")
    assert mem == pytest.approx(6.4e12, rel=1e-12)
    streaming = (r.scalar("moe_permute_bytes_fwd") + r.scalar("moe_router_pointwise_bytes_fwd")) / mem + 70 * 4e-6
    assert r.scalar("moe_pointwise_time_fwd") == pytest.approx(streaming, rel=1e-12)
    slow = point(kernel_launch_overhead=4e-6)
    assert slow.scalar("moe_pointwise_time_fwd") - r.scalar("moe_pointwise_time_fwd") == pytest.approx(
        r.scalar("moe_permute_bytes_fwd") / 1.36e12 - r.scalar("moe_permute_bytes_fwd") / 6.4e12, rel=1e-9)
    assert slow.scalar("step_time") > r.scalar("step_time")


def test_kernel_measurements_bound_the_default_from_above():
    # tile-ai/TileOPs PR 2125 (H200, bf16): vLLM's Triton moe_permute, 4096 tokens, top-8 of 128 experts,
    # hidden 7168 - 0.274944 ms for each token read once and written 8 times, against the 4.8 TB/s H200 peak
    moved = 4096 * 7168 * 2 * (1 + 8)
    share = moved / 0.274944e-3 / 4.8e12
    assert share == pytest.approx(0.40, abs=0.005)
    # the tuned kernel of the same table (0.220384 ms, 2.399 TB/s) reaches half the peak
    assert moved / 0.220384e-3 / 4.8e12 == pytest.approx(0.50, abs=0.005)
    # the calibrated end-to-end share of Megatron's permutation path sits below both kernels
    r = point_runner(B200)()
    assert r.scalar("moe_permute_rate") / 8e12 == pytest.approx(0.17, rel=1e-12)
    assert r.scalar("moe_permute_rate") / 8e12 < share


def test_default_is_the_megatron_bridge_fit_and_helps_the_held_out_moe_rows():
    """The shipped 0.17 is the robust (soft-L1) fit on all 76 Megatron-Bridge points of the 25.09-26.08 releases (0.172
    when fitted; 0.174 since the gpt-oss rows price Megatron-Core's eager expert bias adds, moe_expert_bias_add - the
    fit set's median 7.3 % either way; 0.1705 since the slowest pipeline stage counts its own communication, 0.170
    since the pipeline sends overlap by default, 0.166 since hidden traffic's SMs are priced with the 2026-11-28 refits;
    held out there: 7.6 against 8.9 %, 13 against 10 rows worse than 20 % on 81 rows since Kimi K2 (2026-11-29), 7.5 against 8.8 % and 12 against 10 on 80 before). On the 80 MoE rows of the other frameworks and reports, held out, it
    reads 7.1 % median against 9.6 % at the previous 0.13 (7.5 against 9.8 % before the overlapped sends, 7.1 against
    9.5 % before that stage fix) (the linear-loss fit on the 44 points of the 25.09-26.02 releases), with
    11 rows worse than 20 % either way, since the 64-wide heads of gpt-oss and OLMoE run at their kernel's head-width
    rate (flash_head_dim_rate_factor); before that 7.4 against 9.7 %, and 12 against 11 rows worse than 20 % - the
    independent OLMoE-style sweep (megatron-olmoe-h100, nine rows that read fast where many experts are local) prefers
    the slower permutation. The held-out set grew: 53 rows (6.6 -> 6.2 %, 4 -> 3 worse than 20 %) before that sweep and
    DGX Cloud's 25.05 Grok-1 and DeepSeek-V3 rows, 75 (8.6 -> 7.7 %) before the five MoE rows of Megatron-Bridge's
    model-verification runs (megatron-bridge-verification)."""
    from flopsheet.library import load_library
    from flopsheet.scenario import resolve
    from flopsheet.validate import Validator, fit, load_points
    validator = Validator(load_library())
    points = [p for p in load_points() if p.category == "training"]
    bridge = ["megatron-bridge", "megatron-bridge-26.02", "megatron-bridge-26.02-deepseek", "megatron-bridge-26.06",
              "megatron-bridge-26.08", "megatron-bridge-gb300", "megatron-bridge-moe", "megatron-bridge-moe-extra"]
    out = fit(validator, points, ["moe_permute_hbm_fraction"], ",".join(bridge), loss="soft_l1")
    assert out["fit_points"] == 76
    assert out["fitted"]["moe_permute_hbm_fraction"] == pytest.approx(0.166, abs=0.002)
    assert out["fitted"]["moe_permute_hbm_fraction"] == pytest.approx(0.17, abs=0.01)   # the shipped value
    # the old value: the squared-log-error fit on the 25.09-26.02 points, which the fast gpt-oss rows pull down (0.133
    # before the expert bias adds slowed them; 0.141 since, 0.145 since the 64-wide heads run at their kernel's rate,
    # 0.141 again since the slowest stage counts its own communication, 0.140 with the sends overlapped, 0.131 with
    # hidden traffic's SMs priced, 0.142 since gpt-oss's eager activation clamp slows its rows, glu_clamp)
    old = fit(validator, points, ["moe_permute_hbm_fraction"],
              "megatron-bridge-moe,megatron-bridge-26.02,megatron-bridge-gb300,megatron-bridge")
    assert old["fit_points"] == 44
    assert old["fitted"]["moe_permute_hbm_fraction"] == pytest.approx(0.142, abs=0.003)
    # the other frameworks' and reports' rows of mixture-of-experts models (Megatron-Bridge 26.04, outside the fit
    # too, is not among them)
    held_out = [p for p in points if p.family not in bridge + ["megatron-bridge-26.04"] and p.supported
                and resolve(validator.scenario(p), validator.model)["experts"] > 0]

    def errors(overrides):
        rows = validator.run(held_out, overrides=overrides).rows
        errs = sorted(abs(r.error) for r in rows if r.expect.counted and r.error is not None)
        assert len(errs) == 91
        return errs[45], sum(e > 0.2 for e in errs)

    shipped, previous = errors({}), errors({"moe_permute_hbm_fraction": 0.13})
    assert shipped[0] == pytest.approx(0.080, abs=0.003) and previous[0] == pytest.approx(0.089, abs=0.003)
    # 91 rows with the 8 MoE rows of MaxText on TPU7x (2026-11-29; 83 before: 7.6 against 8.9 %, 13 against 10 worse
    # than 20 % - its two gpt-oss rows, +39 / +41 % either way, add two to both counts)
    # 83 rows with the Mixtral 8x7B rows of NeMo's 25.02 B200 and 25.04 GB200 tables (2026-11-29, +12.1 / +2.9 %)
    # rows worse than 20 %: 12 and 10 on 80 rows before Kimi K2 (+21.7 %, 2026-11-29), 11 and 11 before the SM contention
    assert (shipped[1], previous[1]) == (15, 12)


def test_dense_models_do_not_move(point):
    slow = point(LLAMA8)
    fast = point(LLAMA8, moe_permute_hbm_fraction=1.0)
    assert slow.scalar("moe_pointwise_time_fwd") == 0
    assert slow.scalar("step_time") == fast.scalar("step_time")
