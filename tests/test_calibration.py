"""Size-dependent GEMM efficiency (tile and wave quantization) and fitting calibration constants (validate --fit)."""
from __future__ import annotations

import json
import math

import pytest

from flopsheet.evaluate import Model
from flopsheet.library import load_library
from flopsheet.validate import Validator, fit, load_points


@pytest.fixture(scope="module")
def model():
    return Model(load_library())


def _quant(m, n, tile_m=128, tile_n=128, sms=108):
    tiles = math.ceil(m / tile_m) * math.ceil(n / tile_n)
    return m * n / (tile_m * tile_n * sms * math.ceil(tiles / sms))


def test_wave_quantization_worked_example(model):
    # GPT 3.6B (h 3072, 32 heads) at tp 16, micro batch 8, s 2048 on an A100 (108 SMs):
    # M = 16384 tokens -> 128 row tiles; QKV N = 3*3072/16 = 576 -> 5 column tiles (4.5 used);
    # 640 tiles = 5.93 waves -> 6 full waves: 16384*576 / (128*128*108*6) = 0.8889
    v = {"hidden": 3072, "heads": 32, "kv_heads": 32, "head_dim": 96, "tp": 16, "micro_batch": 8,
         "seq_len": 2048, "cp": 1, "sm_count": 108, "gemm_quantization": 1}
    res = model.evaluate(v, outputs=["qkv_gemm_quant_efficiency", "out_proj_gemm_quant_efficiency"])
    assert res.scalar("qkv_gemm_quant_efficiency") == pytest.approx(16384 * 576 / (128 * 128 * 108 * 6))
    assert res.scalar("qkv_gemm_quant_efficiency") == pytest.approx(0.8889, abs=1e-4)
    # output projection N = 3072: 128 x 24 = 3072 tiles = 28.44 waves -> 29: 0.9808
    assert res.scalar("out_proj_gemm_quant_efficiency") == pytest.approx(_quant(16384, 3072))
    assert res.scalar("out_proj_gemm_quant_efficiency") == pytest.approx(0.9808, abs=1e-4)


def test_quantization_is_one_for_whole_waves_of_whole_tiles(model):
    # 108 SMs x 128 x 128: M = 128*108, N = 128 fills exactly one wave
    v = {"hidden": 128, "heads": 1, "kv_heads": 1, "head_dim": 128, "tp": 3, "micro_batch": 1,
         "seq_len": 128 * 108, "cp": 1, "sm_count": 108, "gemm_quantization": 1}
    res = model.evaluate(v, outputs=["qkv_gemm_quant_efficiency"])
    assert res.scalar("qkv_gemm_quant_efficiency") == pytest.approx(1.0)


def test_small_shards_make_gemms_slower_per_flop(model):
    base = {"hidden": 3072, "heads": 32, "kv_heads": 32, "head_dim": 96, "micro_batch": 2,
            "seq_len": 2048, "ffn_hidden": 12288, "experts": 0}
    base["gemm_quantization"] = 1  # tiles
    wide = model.evaluate({**base, "tp": 1}, outputs=["layer_gemm_time_fwd", "layer_gemm_flops_fwd"])
    thin = model.evaluate({**base, "tp": 16}, outputs=["layer_gemm_time_fwd", "layer_gemm_flops_fwd"])
    rate = lambda r: r.scalar("layer_gemm_flops_fwd") / r.scalar("layer_gemm_time_fwd")  # noqa: E731
    assert rate(thin) < 0.95 * rate(wide)


def test_quantization_off_is_the_shipped_default(model):
    res = model.evaluate({}, outputs=["qkv_gemm_quant_efficiency"])
    assert res.scalar("qkv_gemm_quant_efficiency") == 1


def test_tiles_on_fit_megatron_core_h100():
    """With tiles on, gemm_efficiency 0.637 fits megatron-core-h100 (0.614 without, the shipped 0.61; both with the
    Hopper preset's flash_kv_reuse wave and attention_efficiency 0.35, and the SM contention of hidden traffic - 0.5715
    and 0.551 before it, 2026-11-28)."""
    from flopsheet.validate_fit import collect, predict
    v = Validator(load_library())
    rows = collect(v, [p for p in load_points() if p.family == "megatron-core-h100"])
    err = predict(v, rows, {"gemm_efficiency": 0.637, "gemm_quantization": 1}) / rows.measured - 1
    assert len(rows) == 9
    assert abs(float(sorted(abs(err))[len(err) // 2])) < 0.05  # median |err| 4.9 % at the fit


def test_fit_rows_evaluate_as_the_report_does(validator):
    """validate --fit evaluates every counted row in a few vectorized batches (an input a row leaves unset is filled
    with the default the graph would take), and each row reads exactly what `flopsheet validate` reports for it, one
    point at a time - the vectorized path against the scalar one, on every category."""
    from flopsheet.validate import load_points
    from flopsheet.validate_fit import collect, predict
    points = load_points()
    rows = collect(validator, points)
    assert len(rows) > 900 and len(rows.batches) < 20
    err = predict(validator, rows, {}) / rows.measured - 1
    reported = {}
    for r in validator.run(points).rows:
        if r.expect.counted and r.error is not None:
            reported.setdefault(r.point.id, []).append(r.error)
    for pid, e in zip(rows.ids, err):
        assert min(abs(e - x) for x in reported[pid]) < 1e-12, pid


def test_validate_fit_reproduces_the_blackwell_fit():
    """templates/hardware/b200's command: gemm_efficiency and attention_efficiency fitted together on the 18 dense
    B200/GB200 rows (two --only filters: B200 or GB200 ids, and Llama ones) give 0.537 and 0.556 - the presets
    ship 0.54 and 0.56 (0.523 and 0.554 before the SM contention of hidden traffic, 2026-11-28)."""
    pytest.importorskip("scipy")
    v = Validator(load_library())
    out = fit(v, [p for p in load_points() if p.category == "training"], ["gemm_efficiency", "attention_efficiency"],
              "megatron-bridge-blackwell,nemo-long-sequence,megatron-bridge-26.02,megatron-bridge-26.06",
              only=[["b200"], ["llama"]], fixed={"fp8_gemm_efficiency_factor": 0.90}, loss="soft_l1")
    ids = [r["point"] for r in out["fit_rows"]]
    assert out["fit_points"] == len(ids) == 18 and all("b200" in i and "llama" in i for i in ids)
    assert out["shipped"] == {"gemm_efficiency": [0.54], "attention_efficiency": [0.56]}
    assert out["fitted"]["gemm_efficiency"] == pytest.approx(0.537, abs=0.003)
    assert out["fitted"]["attention_efficiency"] == pytest.approx(0.556, abs=0.003)
    # the shipped rounded pair is the "before": both read about 2 % (4.6 % with attention at 0.6)
    assert out["fit_after"]["median_abs_error"] < 0.025 and out["fit_before"]["median_abs_error"] < 0.025
    # held out: the other points on Blackwell's 0.54 / 0.56 (B200, GB200 and B300 MoE rows, B300 dense), not the
    # Hopper, A100 or GB300 ones, whose constants the fit does not touch
    assert out["rest_points"] == len([p for p in load_points() if p.category == "training" and p.supported]) - 18
    held = {r["point"] for r in out["held_rows"]}
    # 124 with the 14 rows of NeMo 25.02's B200 and 25.04's GB200 tables (2026-11-29); 110 with Dell's 8xB300 MLPerf
    # v5.1 LoRA row (2026-11-28); 109 with the 27 GB200 rows of dgxc-benchmarking-25.05 (2026-11-28), 82 with the ten 8xB200 NeMo rows of nemo-perf-nvfp4-b200, 72 with the 17 B200, GB200 and B300 rows of Megatron-Bridge 26.04, 55 with the three GB200 NVFP4 rows and 52 with the four Megatron-Bridge 26.08 GB200 MoE rows (2026-11-28); 48 with
    # the thirteen MLPerf B200/GB200 rows (v4.1 GPT-3 and LoRA, v5.0 Llama 3.1 405B, v5.1 Llama 3.1 8B, v5.0 and v5.1
    # Llama 2 70B LoRA), 35 before
    assert out["held_points"] == len(held) == 124 and out["held_before"]["compared"] == 124
    assert all(("b200" in i or "b300" in i) and "gb300" not in i for i in held)
    assert not held & set(ids)


def test_validate_fit_command_line(capsys):
    """The command line prints the held inputs, each shipped -> fitted value and every fitted row with --dump; the
    robust loss gives the Hopper preset's 0.614, the linear (mean squared log error) one 0.612 without the hold (0.553 and
    0.561 before the SM contention of hidden traffic, 2026-11-28)."""
    pytest.importorskip("scipy")
    from flopsheet.cli import main
    args = ["validate", "--category", "training", "--fit", "gemm_efficiency", "--on", "megatron-core-h100",
            "--set", "attention_efficiency=0.35", "--loss", "soft_l1", "--dump"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "(9 points, 9 rows, soft_l1 loss)" in out and "attention_efficiency = 0.35 (set)" in out
    assert "gemm_efficiency: 0.61 -> 0.6142" in out
    fitted_part = out.split("  held out:")[0]
    assert sum("train-mcore-h100-weak-" in line and "(was" in line for line in fitted_part.splitlines()) == 9
    assert main(["validate", "--fit", "gemm_efficiency", "--on", "megatron-core-h100", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["loss"] == "linear" and got["fitted"]["gemm_efficiency"] == pytest.approx(0.612, abs=0.002)
    # a held choice input is encoded as the scenario's, and rows sharing its default count as held out
    assert main(["validate", "--category", "training", "--fit", "gemm_efficiency", "--on", "megatron-core-h100",
                 "--set", "gemm_quantization=tiles", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["fixed"] == {"gemm_quantization": "tiles"} and got["held_points"] > 100
    assert main(["validate", "--fit", "gemm_efficiency", "--on", "megatron-core-h100",
                 "--set", "attention_efficiency=0.3,0.4"]) == 2
    assert "holds one value" in capsys.readouterr().err
    # the fit's options without --fit are a mistake, not silently ignored
    assert main(["validate", "--category", "cost", "--only", "b200"]) == 2
    assert "--only goes with --fit" in capsys.readouterr().err


def test_validate_fit_rejects_what_it_cannot_fit():
    from flopsheet.errors import FlopsheetError
    v = Validator(load_library())
    pts = load_points()
    with pytest.raises(FlopsheetError, match="both fitted"):
        fit(v, pts, ["host_time_per_op"], "megatron-bridge", fixed={"host_time_per_op": "5 us"})
    with pytest.raises(FlopsheetError, match="not a numeric input"):
        fit(v, pts, ["gemm_quantization"], "megatron-core-h100")
    with pytest.raises(FlopsheetError, match="not a choice"):
        fit(v, pts, ["gemm_efficiency"], "megatron-core-h100", fixed={"gemm_quantization": "tile"})
    with pytest.raises(FlopsheetError, match="selects no supported point"):
        fit(v, pts, ["gemm_efficiency"], "megatron-core-h100", only=[["no-such-id"]])


def _step(model, **v):
    outs = ["step_time", "step_tp_comm_time", "tp_comm_time_per_layer", "microbatches",
            "first_stage_layer_count", "tp_collective_time", "qkv_gemm_flops_fwd", "mlp_up_gemm_flops_fwd",
            "gemm_flops_rate", "step_bubble_time", "microbatch_time", "logits_time"]
    return model.evaluate(v, outputs=outs)


def test_async_tp_allreduce_hides_at_most_the_wgrad_window(model):
    base = {"hidden": 3072, "heads": 32, "kv_heads": 32, "head_dim": 96, "ffn_hidden": 12288,
            "experts": 0, "layers": 30, "seq_len": 2048, "micro_batch": 8, "global_batch": 512,
            "tp": 8, "pp": 1, "dp": 8, "recompute": 2, "sequence_parallel": 0, "tp_comm_overlap": 0}
    off = _step(model, **base, tp_async_grad_allreduce=0)
    on = _step(model, **base, tp_async_grad_allreduce=1)
    s = on.scalar
    window = (min(s("tp_collective_time"), s("qkv_gemm_flops_fwd") / s("gemm_flops_rate"))
              + min(s("tp_collective_time"), s("mlp_up_gemm_flops_fwd") / s("gemm_flops_rate")))
    hidden = s("microbatches") * s("first_stage_layer_count") * window
    assert off.scalar("step_tp_comm_time") - on.scalar("step_tp_comm_time") == pytest.approx(hidden)
    # the hidden all-reduces still hold their SMs (formulas/training/contention.yaml)
    extra = on.scalar("step_overlap_contention_time") - off.scalar("step_overlap_contention_time")
    assert extra == pytest.approx(s("comm_sm_fraction") * hidden)
    assert off.scalar("step_time") - on.scalar("step_time") == pytest.approx((1 - s("comm_sm_fraction")) * hidden)
    # 6 all-reduces per layer (full recompute), at most the 2 backward ones hide
    assert hidden <= s("microbatches") * s("first_stage_layer_count") * s("tp_comm_time_per_layer") * 2 / 6 + 1e-12
    # a slow (inter-node, tp 16) all-reduce hides only the wgrad GEMM time, not all of itself
    slow = _step(model, **{**base, "tp": 16, "dp": 4}, tp_async_grad_allreduce=1)
    q = slow.scalar("qkv_gemm_flops_fwd") / slow.scalar("gemm_flops_rate")
    assert slow.scalar("tp_collective_time") > q


def test_bubble_is_the_other_stages_time(model):
    # 1F1B over 16 stages of 3 layers, the last with the output layer: the last stage paces the m microbatches and
    # the first microbatch's forward and the last one's backward cross the 15 others - 15 layer-only stage times
    base = {"hidden": 8192, "heads": 64, "kv_heads": 64, "head_dim": 128, "ffn_hidden": 32768,
            "experts": 0, "layers": 48, "seq_len": 2048, "micro_batch": 24, "global_batch": 1536,
            "tp": 8, "pp": 16, "dp": 4}
    r = _step(model, **base)
    expected = 15 * (r.scalar("microbatch_time") - r.scalar("logits_time"))
    assert r.scalar("step_bubble_time") == pytest.approx(expected)
    assert r.scalar("step_bubble_time") < 15 * r.scalar("microbatch_time")


def test_flash_kv_traffic_is_per_kv_head(model):
    # Llama-3-8B-like layer: 32 query heads, 8 KV heads, d 128, s 8192, b 1, tp 1, flash, causal.
    # bytes = 2 * b * d * (2 * 32 * s + 2 * 8 * s * ceil(s / B_r) / 2) with B_r = 128 (H100 SRAM)
    v = {"heads": 32, "kv_heads": 8, "head_dim": 128, "hidden": 4096, "seq_len": 8192,
         "micro_batch": 1, "tp": 1, "cp": 1, "attention_impl": 1, "sram_per_sm": 228 * 1024}
    r = model.evaluate(v, outputs=["attention_core_bytes_fwd", "flash_block_rows"])
    assert r.scalar("flash_block_rows") == 128
    s = 8192
    assert r.scalar("attention_core_bytes_fwd") == pytest.approx(
        2 * 128 * (2 * 32 * s + 2 * 8 * s * (s // 128) / 2))


def test_fa3_overlap_takes_the_slowest_part(model):
    v = {"heads": 32, "kv_heads": 8, "head_dim": 128, "hidden": 4096, "seq_len": 8192,
         "micro_batch": 1, "tp": 1, "cp": 1, "attention_impl": 1}
    outs = ["attention_core_time_fwd", "attention_core_bytes_fwd", "attention_core_flops_fwd",
            "attention_scores_per_layer", "memory_rate", "attention_flops_rate", "vector_flops_rate"]
    fa2 = model.evaluate({**v, "flash_softmax_overlap": 0}, outputs=outs)
    fa3 = model.evaluate({**v, "flash_softmax_overlap": 1}, outputs=outs)
    s = fa2.scalar
    parts = [s("attention_core_bytes_fwd") / s("memory_rate"),
             s("attention_core_flops_fwd") / s("attention_flops_rate"),
             5 * s("attention_scores_per_layer") / s("vector_flops_rate")]
    assert fa2.scalar("attention_core_time_fwd") == pytest.approx(sum(parts))
    assert fa3.scalar("attention_core_time_fwd") == pytest.approx(max(parts))


def test_blackwell_ultra_halves_only_the_softmax_part(model):
    """softmax_exp_speedup 2 (Blackwell Ultra's doubled MUFU.EX2 rate) halves the softmax term of the
    attention core and leaves its loads and tile GEMMs alone: Llama 3 8B attention at 8K on GB300."""
    from flopsheet.scenario import load_scenario, resolve
    v = resolve(load_scenario("hardware/gb300", ["heads=32", "kv_heads=8", "head_dim=128", "hidden=4096",
                                                 "seq_len=8192", "micro_batch=1", "tp=1", "cp=1",
                                                 "attention_impl=flash"]), model)
    outs = ["attention_core_time_fwd", "attention_scores_per_layer", "vector_flops_rate", "attention_softmax_rate"]
    ultra = model.evaluate(v, outputs=outs)
    plain = model.evaluate({**v, "softmax_exp_speedup": 1}, outputs=outs)
    assert ultra.scalar("attention_softmax_rate") == 2 * ultra.scalar("vector_flops_rate")
    softmax = 5 * plain.scalar("attention_scores_per_layer") / plain.scalar("vector_flops_rate")
    assert plain.scalar("attention_core_time_fwd") - ultra.scalar("attention_core_time_fwd") == pytest.approx(softmax / 2)
    # 32 heads x 8192 queries x 8192 keys, causal half and the masked halves of the 128-row diagonal tiles:
    # 1.09e9 scores; 5 FP32 ops each at GB300's vector rate
    assert plain.scalar("attention_scores_per_layer") == 32 * (8192 * 8192 / 2 + 8192 * 128 / 2)


def test_fp8_casts_worked_example(model):
    # one layer, 4096 tokens, h 4096, MHA (q = kv = 4096), ffn 16384, GeLU, tp 1, 8 microbatches,
    # cached weights: fwd bytes = 4 * (4096 * (2*4096 + 4096 + 16384) + weights / 8)
    v = {"hidden": 4096, "heads": 32, "kv_heads": 32, "head_dim": 128, "ffn_hidden": 16384,
         "gated_mlp": 0, "experts": 0, "seq_len": 4096, "micro_batch": 1, "tp": 1, "dp": 1,
         "global_batch": 8, "compute_dtype": 3, "hbm_bandwidth": 1e12, "memory_efficiency": 1}
    r = model.evaluate(v, outputs=["fp8_cast_time_fwd", "fp8_cast_time_bwd", "mlp_matrices",
                                   "microbatches"])
    assert r.scalar("mlp_matrices") == 2 and r.scalar("microbatches") == 8
    weights = 4096 * 3 * 4096 + 4096 * 4096 + 2 * 4096 * 16384
    assert r.scalar("fp8_cast_time_fwd") == pytest.approx(
        4 * (4096 * (2 * 4096 + 4096 + 16384) + weights / 8) / 1e12)
    assert r.scalar("fp8_cast_time_bwd") == pytest.approx(4 * 4096 * (3 * 4096 + 2 * 4096 + 16384) / 1e12)
    bf16 = model.evaluate({**v, "compute_dtype": 1}, outputs=["fp8_cast_time_fwd"])
    assert bf16.scalar("fp8_cast_time_fwd") == 0


def test_mfu_conventions_and_power_limited_clock(model):
    v = {"hidden": 4096, "heads": 32, "kv_heads": 8, "head_dim": 128, "ffn_hidden": 14336,
         "gated_mlp": 1, "experts": 0, "layers": 32, "seq_len": 8192, "micro_batch": 1, "tp": 1,
         "dp": 8, "global_batch": 128, "peak_flops_bf16": 989e12, "peak_flops_fp8": 1979e12}
    outs = ["mfu", "mfu_bf16", "step_time", "model_tflops_per_gpu"]
    bf16 = model.evaluate({**v, "compute_dtype": 1}, outputs=outs)
    fp8 = model.evaluate({**v, "compute_dtype": 3}, outputs=outs)
    assert bf16.scalar("mfu") == pytest.approx(bf16.scalar("mfu_bf16"))
    assert fp8.scalar("mfu_bf16") == pytest.approx(fp8.scalar("mfu") * 1979 / 989)
    capped = model.evaluate({**v, "compute_dtype": 1, "clock_fraction": 0.8}, outputs=outs)
    # compute-bound GEMMs slow down by 1/0.8; the MFU denominator (datasheet peak) stays
    assert capped.scalar("step_time") > 1.1 * bf16.scalar("step_time")
    assert capped.scalar("step_time") < 1.25 * bf16.scalar("step_time")
    assert capped.scalar("mfu") / bf16.scalar("mfu") == pytest.approx(
        bf16.scalar("step_time") / capped.scalar("step_time"))


def test_dp_overlap_bounded_by_its_window(model):
    v = {"hidden": 8192, "heads": 64, "kv_heads": 8, "head_dim": 128, "ffn_hidden": 28672,
         "gated_mlp": 1, "experts": 0, "layers": 80, "seq_len": 4096, "micro_batch": 1, "tp": 8,
         "pp": 1, "dp": 16, "global_batch": 64, "zero_stage": 1, "dp_comm_overlap": 1}
    outs = ["step_dp_comm_time", "dp_comm_time", "dp_param_gather_time", "dp_grad_overlap_window",
            "dp_gather_overlap_window", "first_stage_layer_count", "layer_time_bwd", "layer_time_recompute", "layer_time_fwd"]
    free = model.evaluate({**v, "dp_overlap_bound": 0}, outputs=outs)
    bound = model.evaluate({**v, "dp_overlap_bound": 1}, outputs=outs)
    s = bound.scalar
    assert free.scalar("step_dp_comm_time") == 0
    assert s("dp_grad_overlap_window") == pytest.approx(
        s("first_stage_layer_count") * (s("layer_time_bwd") + s("layer_time_recompute")))
    assert s("dp_gather_overlap_window") == pytest.approx(s("first_stage_layer_count") * s("layer_time_fwd"))
    grads = s("dp_comm_time") - s("dp_param_gather_time")
    assert s("step_dp_comm_time") == pytest.approx(max(0.0, grads - s("dp_grad_overlap_window"))
                                                   + max(0.0, s("dp_param_gather_time") - s("dp_gather_overlap_window")))
    half = model.evaluate({**v, "dp_overlap_bound": 1, "dp_comm_overlap": 0.5}, outputs=outs)
    assert half.scalar("step_dp_comm_time") == pytest.approx(
        0.5 * s("dp_comm_time") + 0.5 * s("step_dp_comm_time"))


def test_tied_embedding_allreduce_between_first_and_last_stage(model):
    v = {"hidden": 12288, "heads": 96, "kv_heads": 96, "head_dim": 128, "ffn_hidden": 49152,
         "layers": 96, "vocab": 51200, "tp": 8, "pp": 8, "dp": 16, "global_batch": 1536,
         "grad_bytes": 2, "experts": 0}
    outs = ["step_embedding_comm_time", "tied_embedding_grad_bytes", "pp_domains", "step_time"]
    r = model.evaluate({**v, "tied_embeddings": 1}, outputs=outs)
    assert r.scalar("tied_embedding_grad_bytes") == 51200 * 12288 / 8 * 2  # 157 MB per GPU
    assert r.scalar("pp_domains") > 1
    # ~157 MB over one GPU's share of the scale-out fabric: milliseconds, once per step
    assert 1e-3 < r.scalar("step_embedding_comm_time") < 0.1
    untied = model.evaluate({**v, "tied_embeddings": 0}, outputs=outs)
    assert untied.scalar("step_embedding_comm_time") == 0
    assert r.scalar("step_time") - untied.scalar("step_time") == pytest.approx(
        r.scalar("step_embedding_comm_time"), rel=0.05)  # untying also grows the last stage a little
    flat = model.evaluate({**v, "tied_embeddings": 1, "pp": 1, "dp": 128}, outputs=outs)
    assert flat.scalar("step_embedding_comm_time") == 0


def _quoted_fit_commands():
    """Every `flopsheet validate ... --fit ...` command a preset or formula quotes as a constant's source."""
    import re
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    found = set()
    for path in sorted((root / "templates").rglob("*.yaml")) + sorted((root / "formulas").rglob("*.yaml")):
        for cmd in re.findall(r"`(flopsheet validate [^`]*--fit [^`]*)`", path.read_text(encoding="utf-8")):
            found.add((path.relative_to(root).as_posix(), cmd))
    return sorted(found)


QUOTED_FITS = _quoted_fit_commands()


def test_presets_quote_their_fit_commands():
    # the constants fitted on validation rows: Hopper (GEMM, FP8, attention, serving), Blackwell (GEMM and
    # attention), GB300, TPU v5p, the vTrain fabric, MI300X's Infinity Fabric, the MoE and host constants
    assert len(QUOTED_FITS) >= 14


@pytest.mark.parametrize("where,command", QUOTED_FITS, ids=[f"{w}:{i}" for i, (w, _) in enumerate(QUOTED_FITS)])
def test_quoted_fit_command_runs(where, command, capsys):
    """A source that quotes a fit command must be a command that runs today: its families, ids (--only) and inputs
    still exist and select rows. (The fitted number may move with the model; the presets record re-checks.)"""
    import shlex
    pytest.importorskip("scipy")
    from flopsheet.cli import main
    args = shlex.split(command)[1:]
    assert main(args) == 0, (where, command)
    out = capsys.readouterr().out
    if "--cross-validate" in args:  # a leave-one-family-out re-check of a constant
        assert "cross-validated over" in out and "all rows, cross-validated" in out, (where, out[-500:])
    else:
        assert "fitted on" in out and " -> " in out, (where, out[-500:])
