"""TPU v6e (Trillium): the MaxText recipe family (templates/validation/maxtext-v6e.yaml), the preset's gemm_efficiency
fitted on it, and the two settings its rows need - the splash kernel's query block (flash_query_block_rows) and the
rematerialisation of an MLP's up projections only (recompute_mlp up_proj) - as hand-checked worked examples.

The logs give three independent columns per row (seconds, TFLOP/s/device, Tokens/s/device); the transcribed settings
must reproduce the relations between them before any prediction is compared.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from conftest import evaluate_point, expected_value, family_points, fit_errors, point_runner

FAMILY = "maxtext-v6e"
P8 = "train-maxtext-v6e-llama3.1-8b-v6e-8"      # Llama 3.1 8B, 3 x 8,192 tokens per chip, FSDP 8
run8 = point_runner(P8)


@pytest.fixture(scope="module")
def points():
    return family_points(FAMILY)


def test_family_rows_are_supported(points):
    assert len(points) == 13
    assert all(p.supported for p in points)
    assert sum("llama3.1-8b" in p.id for p in points) == 6 and sum("llama3.1-70b" in p.id for p in points) == 4


def test_each_log_line_holds_batch_times_sequence_tokens_per_chip(validator, points):
    """Tokens/s/device x seconds (both read off the log line quoted in the source) = per-device batch x sequence
    length as the point sets them - the transcription check for batch and sequence."""
    for p in points:
        seconds = float(re.search(r"seconds: ([\d.]+)", p.source).group(1))
        r = evaluate_point(validator, p, ["micro_batch", "seq_len"])
        tokens = expected_value(p, "tokens_per_sec_per_gpu") * seconds
        assert tokens == pytest.approx(r["micro_batch"] * r["seq_len"], rel=2e-3), p.id


def test_library_flops_per_token_are_maxtexts(validator, points):
    """MaxText's TFLOP/s/device over its Tokens/s/device is the library's model FLOPs per token (full attention matrix,
    logits included) to the logs' 3-decimal rounding: 57.91 GFLOP for 8B, 481.4 for 70B."""
    for p in points:
        r = evaluate_point(validator, p, ["model_tflops_per_gpu", "tokens_per_second_per_gpu"])
        library = r["model_tflops_per_gpu"] / r["tokens_per_second_per_gpu"]
        logged = expected_value(p, "model_tflops_per_gpu") * 1e12 / expected_value(p, "tokens_per_sec_per_gpu")
        assert library == pytest.approx(logged, rel=1e-5), p.id
    r = evaluate_point(validator, next(p for p in points if p.id == P8), ["model_tflops_per_gpu", "tokens_per_second_per_gpu"])
    assert r["model_tflops_per_gpu"] / r["tokens_per_second_per_gpu"] == pytest.approx(57.91e9, rel=1e-4)


def test_shipped_gemm_efficiency_is_the_fit_optimum(validator, points):
    """0.62 (the fit's 0.620) sits at the least-squares minimum of log(predicted / measured) over the 13 rows: 3 %
    either way is worse; the family then reads the figures its doc quotes (median 2.9 %, worst +8.8 %)."""
    def cost(g):
        e = fit_errors(validator, points, gemm_efficiency=g)
        return float(np.sum(np.log1p(e) ** 2)), e
    c0, _ = cost(0.620)
    assert c0 < cost(0.620 * 0.97)[0] and c0 < cost(0.620 * 1.03)[0]
    shipped = fit_errors(validator, points)
    assert float(np.median(np.abs(shipped))) < 0.03 and float(np.max(np.abs(shipped))) < 0.09


def test_softmax_overlap_closes_the_gap_once_put_down_to_fsdp(validator, points):
    """Stated in the preset: fitted on the 10 Llama 3.1 rows alone gemm_efficiency is 0.638 and Llama 2 70B, GPT-3
    175B and Llama 3.1 405B then read +7..+12 %; with the splash softmax added to the tile matmuls (the library's
    FlashAttention-2 default) the same fit was 0.804 and left them at +22..+27 %. Their FSDP traffic is 33-63 % of
    their compute time, but hidden in both cases: what the softmax overlap removes is the attention time, a larger
    share of the 4K/8K-token Llama 3.1 rows than of the wide 70B-175B models."""
    fit = [p for p in points if "llama3.1-8b" in p.id or "llama3.1-70b" in p.id]
    held = [p for p in points if p not in fit]
    e = fit_errors(validator, held, gemm_efficiency=0.638)
    assert len(held) == 3 and all(0.06 < x < 0.13 for x in e), e
    before = fit_errors(validator, held, gemm_efficiency=0.804, flash_softmax_overlap=0)
    assert all(0.20 < x < 0.28 for x in before), before
    for p in held:
        r = evaluate_point(validator, p, ["dp_comm_time", "step_compute_time"])
        assert 0.3 < r["dp_comm_time"] / r["step_compute_time"] < 0.7, p.id


# --- worked examples -----------------------------------------------------------------------------------------

def test_splash_query_block_sets_the_kv_passes_and_diagonal_waste():
    """sa_block_q 2,048 at 8,192 tokens: 4 query blocks per head, K and V streamed over the causal half of them
    (2 passes), and the diagonal blocks computed in full (2,048 / (2 x 8,192) = 1/8 of the s x s matrix extra).
    Without the setting the FlashAttention tile would be min(128 MiB / (4 x 128 x 2), 128) = 128 rows: 64 blocks."""
    r, derived = run8(), run8(flash_query_block_rows=0)
    assert r.scalar("flash_block_rows") == 2048 and derived.scalar("flash_block_rows") == 128
    assert r.scalar("flash_kv_passes") == 4 and derived.scalar("flash_kv_passes") == 64
    assert r.scalar("flash_kv_stream_factor") == 2
    assert r.scalar("flash_causal_tile_waste") == pytest.approx(1 / 8, rel=1e-12)
    # bf16 x batch 3 x (Q and O: 2 x 4,096 x 8,192 + K and V: 2 x 1,024 x 8,192 x 2 passes) = 576 MiB
    assert r.scalar("attention_core_bytes_fwd") == 2 * 3 * (2 * 4096 * 8192 + 2 * 1024 * 8192 * 2) == 576 * 2**20
    assert derived.scalar("attention_core_bytes_fwd") == 2 * 3 * (2 * 4096 * 8192 + 2 * 1024 * 8192 * 32)
    # scores computed: batch 3 x 32 heads x 8,192^2 x (1/2 + 1/8)
    assert r.scalar("attention_scores_per_layer") == pytest.approx(3 * 32 * 8192**2 * 0.625, rel=1e-12)


def test_up_projection_rematerialisation_skips_the_down_projection():
    """recompute_mlp up_proj reruns the gate/up GEMMs and the activation - not the down projection, whose output the
    backward never reads - and frees the same activations as recomputing the whole MLP."""
    up, whole = run8(recompute_mlp="up_proj"), run8(recompute_mlp="yes")
    assert whole.scalar("recompute_modules_time_fwd") - up.scalar("recompute_modules_time_fwd") == pytest.approx(
        up.scalar("mlp_down_gemm_time_fwd"), rel=1e-9)
    # 32 layers x hidden 4,096 x ffn 14,336 multiply-accumulates per token fewer
    assert whole.scalar("recompute_modules_macs_per_token") - up.scalar("recompute_modules_macs_per_token") == \
        32 * 4096 * 14336
    assert up.scalar("recompute_modules_macs_per_token") == 32 * (2 * 4096 * 14336) + up.scalar(
        "attention_score_macs_per_token")
    assert up.scalar("recompute_modules_saved_memory_per_layer") == whole.scalar("recompute_modules_saved_memory_per_layer")
    assert up.scalar("activation_memory_per_layer") == whole.scalar("activation_memory_per_layer")
    assert up.scalar("step_time") < whole.scalar("step_time")
