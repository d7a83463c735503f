"""The inference model: hand-checked worked examples, properties, refusals (issue 12)."""
from __future__ import annotations

import numpy as np
import pytest

from flopsheet.errors import FlopsheetError
from flopsheet.scenario import load_scenario, resolve

from conftest import run_scenario as run

KIB = 1024


def run_file(model, tmp_path, use, **values):
    """Evaluate an ad-hoc scenario: presets in ``use`` plus ``values``."""
    body = "doc: test\nuse: [" + ", ".join(use) + "]\nvalues:\n" + "".join(
        f"  {k}: {v}\n" for k, v in values.items())
    path = tmp_path / "sc.yaml"
    path.write_text(body)
    sc = load_scenario(str(path), [])
    return model.evaluate(resolve(sc, model))


# --- KV cache -------------------------------------------------------------------------------
def test_kv_bytes_per_token_llama3_70b_gqa_bf16_is_320_kib(model):
    r = run(model, "serve-llama3-70b-h100-sla", kv_dtype="bf16")
    # 2 (K and V) x 8 KV heads x 128 x 80 layers x 2 bytes
    assert r.scalar("kv_cache_bytes_per_token") == 2 * 8 * 128 * 80 * 2 == 320 * KIB
    r = run(model, "serve-llama3-70b-h100-sla", kv_dtype="fp8")
    assert r.scalar("kv_cache_bytes_per_token") == 160 * KIB


def test_kv_bytes_per_token_deepseek_v3_mla(model):
    r = run(model, "serve-deepseek-v3-h100-dp-ep")
    assert r.scalar("kv_cache_bytes_per_token") == (512 + 64) * 61 * 2
    # the latent is replicated over tp, not split
    r8 = run(model, "serve-deepseek-v3-h100-dp-ep", tp=8, dp=4)
    assert r8.scalar("kv_bytes_per_token_per_gpu") == r.scalar("kv_bytes_per_token_per_gpu")


def test_kv_heads_replicate_when_tp_exceeds_them(model):
    r = run(model, "serve-llama3-70b-h100-sla", tp=16, kv_dtype="bf16")  # 8 KV heads over 16 GPUs
    assert r.scalar("kv_heads_per_gpu") == 1
    assert r.scalar("kv_bytes_per_token_per_gpu") == 2 * 128 * 80 * 2


def test_paged_blocks_and_capacity_worked_example(model):
    r = run(model, "serve-llama3-70b-h100-sla", kv_dtype="bf16", prompt_len=1000, output_len=30)
    # 1,030 tokens -> ceil(1030/16) = 65 blocks of 16 = 1,040 slots; per GPU (TP8): one KV head
    per_token_gpu = 2 * 1 * 128 * 80 * 2
    assert r.scalar("kv_blocks_per_sequence") == 65
    assert r.scalar("kv_cache_bytes_per_sequence") == 1040 * per_token_gpu
    assert r.scalar("kv_fragmentation") == pytest.approx(1040 / 1030 - 1)
    cap = (80e9 * 0.9 - r.scalar("serving_weight_memory") - r.scalar("serving_activation_memory")
           - 2 * 2**30)
    assert r.scalar("kv_cache_capacity") == pytest.approx(cap, rel=1e-12)
    assert r.scalar("max_concurrent_sequences") == np.floor(cap / (1040 * per_token_gpu))


# --- decode step ------------------------------------------------------------------------------
def llama2_7b_weight_elements():
    h, f, layers, v = 4096, 11008, 32, 32000
    return layers * (4 * h * h + 3 * h * f) + h * v  # layers + output layer (the embedding is a lookup)


def test_decode_step_llama2_7b_a100_batch1_is_weight_bytes_over_bandwidth(model):
    r = run(model, "boundedness-llama2-7b-a100", batch=1, prompt_len=5, output_len=2)
    weights = 2 * llama2_7b_weight_elements()
    effective_bw = 2039e9 * r.scalar("serving_memory_efficiency")
    overhead = 32 * r.scalar("kernels_per_layer") * r.scalar("serving_kernel_overhead")
    # everything else (activations, the 5-token KV cache, logits) is below 0.5 %
    assert r.scalar("decode_step_time") - overhead == pytest.approx(weights / effective_bw, rel=5e-3)
    assert r.scalar("decode_step_time") == pytest.approx(weights / effective_bw + overhead, rel=5e-3)


def test_decode_operators_memory_bound_at_batch1_gemms_compute_bound_at_large_batch(model):
    r = run(model, "boundedness-llama2-7b-h100", batch=1)
    for op in ("qkv", "attention", "out_proj", "mlp", "pointwise"):
        assert not r.scalar(f"decode_{op}_compute_bound"), op
    assert r.scalar("decode_mlp_intensity") == pytest.approx(1, rel=2e-3)  # 2 FLOPs per 2-byte weight
    r = run(model, "boundedness-llama2-7b-h100", batch=1024)
    assert r.scalar("decode_mlp_compute_bound") and r.scalar("decode_qkv_compute_bound")
    assert not r.scalar("decode_attention_compute_bound")  # each sequence reads its own KV cache
    assert r.scalar("prefill_mlp_compute_bound")


def test_gqa_decode_reads_kv_once_per_kv_head(model):
    a = run(model, "serve-llama3-70b-h100-sla", decode_kv_reads="per_kv_head")
    b = run(model, "serve-llama3-70b-h100-sla", decode_kv_reads="per_query_head")
    assert b.scalar("decode_kv_read_bytes_per_token_per_layer") == \
        8 * a.scalar("decode_kv_read_bytes_per_token_per_layer")  # 64 query heads share 8 KV heads


def test_more_batch_raises_tpot_and_throughput_until_compute_bound(model):
    batches = [1, 2, 4, 8, 16, 32, 64, 128, 256]
    r = run(model, "boundedness-llama2-7b-a100", batch=",".join(map(str, batches)))
    tpot = np.asarray(r["tpot"])
    thr = np.asarray(r["output_tokens_per_second_per_gpu"])
    assert np.all(np.diff(tpot) > 0)
    assert np.all(np.diff(thr) > 0)
    # memory-bound at batch 1: a second sequence costs under 5 % more TPOT (weights dominate)
    assert tpot[1] / tpot[0] < 1.05
    # compute-bound at large batch with long prompts: prefill dominates, throughput flattens
    r = run(model, "boundedness-llama2-7b-a100", batch="512,1024", prompt_len=2048)
    thr = np.asarray(r["output_tokens_per_second_per_gpu"])
    assert thr[1] / thr[0] < 1.1


def test_tp_allreduce_in_decode_is_latency_bound(model):
    r = run(model, "serve-llama3-70b-h100-sla", batch=1)
    t = r.scalar("serving_tp_allreduce_time_decode")
    alpha = r.scalar("serving_collective_latency") + 2 * 7 * r.scalar("scaleup_hop_latency")
    assert t == pytest.approx(alpha, rel=0.02)  # 16 KiB message: bandwidth term under 2 %


# --- precision --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype, group, scale, expected", [
    ("bf16", 128, 2, 2), ("fp8", 128, 2, 1), ("int8", 128, 2, 1),
    ("int4", 128, 2, 0.5 + 2 / 128),   # AWQ/GPTQ g128, fp16 scale: 0.515625
    ("fp4", 16, 1, 0.5 + 1 / 16),      # NVFP4: fp8 scale per 16 values
    ("fp4", 32, 1, 0.5 + 1 / 32),      # MXFP4: e8m0 scale per 32
])
def test_bytes_per_weight_with_group_scales(model, dtype, group, scale, expected):
    r = run(model, "boundedness-llama2-7b-b200", weight_dtype=dtype, quant_group_size=group,
            quant_scale_bytes=scale)
    assert r.scalar("bytes_per_weight") == pytest.approx(expected, rel=1e-15)


@pytest.mark.parametrize("scenario, dtype", [("boundedness-llama2-7b-a100", "fp8"),
                                             ("boundedness-llama2-7b-a100", "fp4"),
                                             ("boundedness-llama2-7b-h100", "fp4")])
def test_unsupported_compute_dtype_is_refused_by_name(model, scenario, dtype):
    with pytest.raises(FlopsheetError) as e:
        run(model, scenario, compute_dtype=dtype)
    msg = e.value.render()
    assert "seconds_per_flop_at_compute_dtype" in msg
    assert f"compute_dtype={dtype}" in msg and f"peak_flops_{dtype}=0" in msg
    assert not run(model, scenario, compute_dtype="bf16").scalar("compute_dtype_supported") is False


@pytest.mark.parametrize("cmd, scenario, dtype, preset, gpu", [
    ("run", "boundedness-llama2-7b-a100", "fp8", "templates/hardware/a100-sxm4-80gb.yaml:7",
     "NVIDIA A100-SXM4-80GB"),
    ("run", "boundedness-llama2-7b-a100", "fp4", "templates/hardware/a100-sxm4-80gb.yaml:8",
     "NVIDIA A100-SXM4-80GB"),
    ("explain", "boundedness-llama2-7b-h100", "fp4", "templates/hardware/h100-sxm5-80gb.yaml:",
     "NVIDIA H100 SXM5 80GB"),
])
def test_cli_refusal_names_the_preset_gpu_and_dtype(capsys, cmd, scenario, dtype, preset, gpu):
    from flopsheet.cli import main
    argv = [cmd] + (["tpot"] if cmd == "explain" else []) + [scenario, "--set",
                                                           f"compute_dtype={dtype}"]
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2 and not out and err.count("\n") == 1
    assert err.startswith(f"flopsheet: error: {preset}")
    assert f"peak_flops_{dtype} = 0" in err and f"compute_dtype {dtype} is not supported" in err
    assert gpu in err and f"gives no {dtype.upper()} peak" in err
    assert "fp8" not in err.split("supported here:")[1] or dtype == "fp4"  # A100 lists no fp8


def test_cli_refusal_without_hardware_preset_names_the_library_default(capsys):
    from flopsheet.cli import main
    assert main(["run", "--use", "models/llama2-7b", "--set", "compute_dtype=fp8"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("flopsheet: error: formulas/compute/hardware.yaml:")
    assert "library default" in err and "compute_dtype fp8 is not supported" in err


def test_cli_does_not_refuse_fp8_on_a_derived_accelerator_or_an_fp8_gpu(capsys):
    from flopsheet.cli import main
    assert main(["run", "study-node-scaling-n7", "--set", "compute_dtype=fp8", "--json"]) == 0
    assert main(["run", "boundedness-llama2-7b-h100", "--set", "compute_dtype=fp8",
                 "--json"]) == 0


def test_fp8_weights_halve_batch1_decode_on_h100(model):
    a = run(model, "boundedness-llama2-7b-h100", batch=1, compute_dtype="bf16", weight_dtype="bf16")
    b = run(model, "boundedness-llama2-7b-h100", batch=1, compute_dtype="fp8", weight_dtype="fp8")
    ratio = b.scalar("decode_mlp_time") / a.scalar("decode_mlp_time")
    assert ratio == pytest.approx(0.5, rel=0.01)


# --- MoE, speculation, MLA --------------------------------------------------------------------
def test_moe_decode_reads_expected_distinct_experts(model, tmp_path):
    use = ["models/mixtral-8x7b", "hardware/h100-sxm5-80gb", "systems/dgx-h100-superpod"]
    for batch, expected in [(1, 2), (4, 8 * (1 - 0.75**4)), (64, 8 * (1 - 0.75**64))]:
        r = run_file(model, tmp_path, use, batch=batch, tp=2)
        assert r.scalar("moe_distinct_experts_decode") == pytest.approx(expected, rel=1e-12)



def test_moe_serving_experts_spread_over_the_replica_tp_ranks(model, tmp_path):
    """Mixtral 8x7B on TP8: whole experts over ep=8 or each expert sliced 8 ways (ep=1) put the
    same expert bytes on each GPU and read the same per step - memory and decode agree."""
    use = ["models/mixtral-8x7b", "hardware/h100-sxm5-80gb", "systems/dgx-h100-superpod"]
    sliced = run_file(model, tmp_path, use, batch=1, tp=8, ep=1)
    whole = run_file(model, tmp_path, use, batch=1, tp=8, ep=8)
    s = sliced.scalar
    expert_weights = 3 * 4096 * 14336
    assert s("serve_expert_shards") == whole.scalar("serve_expert_shards") == 8
    # weights: with pp = 1 one GPU holds 1/8 of everything (layers, 32 x 8 experts of
    # 3 x 4096 x 14336, embedding and output layer), bf16
    assert s("routed_expert_params") == 32 * 8 * expert_weights
    expected = 2 * s("total_params") / 8
    assert s("serving_weight_memory") == pytest.approx(expected, rel=1e-12)
    assert whole.scalar("serving_weight_memory") == pytest.approx(expected, rel=1e-12)
    # one token activates top_k = 2 experts; each GPU reads 2/8 of an expert's bytes and does
    # 2 x 2 x W / 8 FLOPs of expert work per layer
    for r in (sliced, whole):
        assert r.scalar("moe_distinct_experts_decode") == pytest.approx(2)
        assert r.scalar("decode_mlp_flops") == pytest.approx(
            2 * (2 * expert_weights / 8 + 4096 * 8), rel=1e-12)

def test_speculative_decoding_expected_tokens(model):
    r = run(model, "serve-llama3-70b-h100-sla", spec_draft_len=3, spec_accept_rate=0.8)
    assert r.scalar("spec_tokens_per_step") == pytest.approx((1 - 0.8**4) / 0.2)  # 2.952
    r0 = run(model, "serve-llama3-70b-h100-sla", spec_draft_len=0)
    assert r0.scalar("spec_tokens_per_step") == 1
    assert r.scalar("tpot") < r0.scalar("tpot")


def test_mla_parameter_count_deepseek_v3(model):
    r = run(model, "serve-deepseek-v3-h100-dp-ep")
    # W_DQ 7168x1536, W_UQ 1536x128x192, W_DKV+W_KR 7168x576, W_UKV 512x128x256, W_O 16384x7168
    assert r.scalar("mla_attention_weights_per_layer") == 187_105_280
    assert r.scalar("attention_params_per_layer") == 187_105_280 + 1536 + 512  # + latent norms
    assert r.scalar("total_params") == pytest.approx(671e9, rel=0.005)
    assert r.scalar("active_params") == pytest.approx(37e9, rel=0.02)


def test_non_mla_models_keep_their_counts(model):
    r = run(model, "boundedness-llama2-7b-a100")
    assert r.scalar("total_params") == 6_738_415_616  # meta-llama/Llama-2-7b-hf safetensors total


# --- serving ----------------------------------------------------------------------------------
def test_static_throughput_is_outputs_over_total_time(model):
    r = run(model, "serve-llama2-70b-trtllm-h100")
    total = r.scalar("prefill_time") + 127 * r.scalar("tpot")
    assert r.scalar("e2e_latency") == pytest.approx(total, rel=1e-12)
    assert r.scalar("output_tokens_per_second_per_gpu") == pytest.approx(1024 * 128 / total / 2)


def test_sla_operating_point_meets_the_objectives(model):
    r = run(model, "serve-llama3-70b-h100-sla")
    b = r.scalar("sla_batch")
    assert 0 < b <= r.scalar("max_concurrent_sequences")
    assert r.scalar("sla_tpot") <= r.scalar("tpot_slo")
    one_more = r.scalar("sla_fixed_step_time") + (b + 1) * r.scalar("sla_per_sequence_step_time")
    assert one_more > r.scalar("tpot_slo") or b == r.scalar("max_concurrent_sequences")
    # the linear bound is an upper bound of the roofline TPOT at the same batch
    at = run(model, "serve-llama3-70b-h100-sla", batch=int(b))
    assert at.scalar("tpot") <= r.scalar("sla_tpot") * (1 + 1e-12)
    assert at.scalar("tpot") > 0.6 * r.scalar("sla_tpot")  # and not a loose one


def test_continuous_batching_ttft_has_queue_and_overload_is_refused(model):
    r = run(model, "serve-llama3-70b-h100-sla")
    rho = 0.5 * r.scalar("prefill_time")
    assert r.scalar("queue_delay") == pytest.approx(rho * r.scalar("prefill_time") / (2 * (1 - rho)))
    with pytest.raises(FlopsheetError):
        run(model, "serve-llama3-70b-h100-sla", request_rate=100)


def test_memory_generation_changes_decode_latency(model):
    r = run(model, "decode-vs-memory-generation",
            memory_device_bandwidth="410e9,819e9,1.2e12,2.048e12")
    tpot = np.asarray(r["tpot"])
    assert np.all(np.diff(tpot) < 0)
    # memory-bound decode: past the fixed kernel and all-reduce costs, TPOT scales as 1/bandwidth
    fixed = 80 * (r.scalar("kernels_per_layer") * r.scalar("serving_kernel_overhead")
                  + 2 * r.scalar("serving_tp_allreduce_time_decode"))
    assert (tpot[0] - fixed) / (tpot[-1] - fixed) == pytest.approx(2.048e12 / 410e9, rel=0.02)


def test_disaggregated_kv_transfer_and_balanced_pools(model):
    r = run(model, "serve-llama3-70b-h100-sla")
    kv = 2048 * 2 * 8 * 128 * 80 * 1  # 2,048 prompt tokens of fp8 K and V
    assert r.scalar("kv_transfer_bytes_per_request") == kv
    nic = r.scalar("scaleout_nic_bw") * r.scalar("scaleout_efficiency")
    assert r.scalar("kv_transfer_time") == pytest.approx(
        r.scalar("scaleout_hop_latency") + kv / (8 * nic), rel=1e-12)
    f = r.scalar("disagg_prefill_gpu_fraction")
    p, d = (r.scalar("prefill_pool_requests_per_second_per_gpu"),
            r.scalar("decode_pool_requests_per_second_per_gpu"))
    assert f * p == pytest.approx((1 - f) * d)  # balanced pools complete requests at one rate
    assert r.scalar("disagg_tpot") < r.scalar("tpot")  # no prefill interference in the decode pool


def test_split_kv_decode_attention_fills_the_gpu_at_long_context(model):
    r = run(model, "boundedness-llama2-7b-h100", batch=1, prompt_len=32000,
            decode_attention_split="none,split_kv")
    occ = np.asarray(r["decode_attention_occupancy"])
    assert occ[0] == pytest.approx(32 / 132)  # one block per head on 132 SMs
    assert occ[1] == 1
    t = np.asarray(r["decode_attention_time"])
    assert t[0] / t[1] == pytest.approx(132 / 32)


def test_sliding_window_layers_cache_and_read_only_their_window(model, tmp_path):
    """gpt-oss-120b: half of the 36 layers see 128 keys plus one sink. At 8,064 + 128 tokens a
    global layer holds 512 blocks of 16, a local one ceil(129/16) = 9 (vLLM frees the rest)."""
    use = ["models/gpt-oss-120b", "hardware/h100-sxm5-80gb", "systems/dgx-h100-superpod"]
    values = dict(tp=8, batch=8, prompt_len=8064, output_len=128, kv_block_size=16)
    r = run_file(model, tmp_path, use, **values)
    full = run_file(model, tmp_path, use, sliding_window=0, **values)
    per_token = r.scalar("kv_bytes_per_token_per_gpu")
    assert per_token == 2 * 1 * 64 * 36 * 2  # one of 8 KV heads of width 64 per GPU, bf16
    assert r.scalar("kv_cache_bytes_per_sequence") == (0.5 * 512 + 0.5 * 9) * 16 * per_token
    assert full.scalar("kv_cache_bytes_per_sequence") == 512 * 16 * per_token
    # decode attends to 8,064 + 64 keys on average in global layers, 129 in local ones
    assert r.scalar("decode_attended_len") == 0.5 * (8064 + 64) + 0.5 * 129
    assert r.scalar("decode_attention_flops") / full.scalar("decode_attention_flops") == \
        pytest.approx((0.5 * 8128 + 0.5 * 129) / 8128, rel=1e-12)
    # prefill: a local layer computes the band 1 - (1 - 129/8064)^2 of the causal triangle;
    # both runs add the diagonal tiles, 64-row tiles at head_dim 64: 64 / (2 x 8,064)
    band = 1 - (1 - 129 / 8064) ** 2
    diagonal = 64 / (2 * 8064)
    assert r.scalar("prefill_causal_tile_waste") == pytest.approx(diagonal, rel=1e-12)
    assert r.scalar("prefill_attention_flops") / full.scalar("prefill_attention_flops") == \
        pytest.approx((0.5 * (0.5 + 0.5 * band) + diagonal) / (0.5 + diagonal), rel=1e-12)


def test_causal_prefill_computes_the_diagonal_tiles_in_full(model, tmp_path):
    """Llama 2 7B (head_dim 128, so 128-row FlashAttention tiles on H100): a 512-token prompt
    runs 4 diagonal tiles of 128 x 128 in full, 512 x 128 / 2 masked scores beyond the causal
    half - 0.5 + 0.125 of the square, where standard attention computes all of it. A 64-token
    prompt is one tile: its whole square is computed."""
    use = ["models/llama2-7b", "hardware/h100-sxm5-80gb", "systems/dgx-h100-superpod"]
    flash = run_file(model, tmp_path, use, tp=1, batch=1, prompt_len=512, output_len=16)
    plain = run_file(model, tmp_path, use, tp=1, batch=1, prompt_len=512, output_len=16,
                     attention_impl="standard")
    assert flash.scalar("flash_block_rows") == 128
    assert flash.scalar("prefill_causal_tile_waste") == pytest.approx(128 / (2 * 512), rel=1e-12)
    # 2 FLOPs x 512^2 scores x (128 + 128) MACs per score per head x 32 heads
    assert plain.scalar("prefill_attention_flops") == pytest.approx(2 * 512**2 * 256 * 32, rel=1e-12)
    assert flash.scalar("prefill_attention_flops") / plain.scalar("prefill_attention_flops") == \
        pytest.approx(0.625, rel=1e-12)
    tiny = run_file(model, tmp_path, use, tp=1, batch=1, prompt_len=64, output_len=16)
    assert tiny.scalar("prefill_causal_tile_waste") == 0.5
