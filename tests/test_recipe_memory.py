"""Memory physics of the Megatron-Bridge / NeMo recipes behind measured runs that the model once said could not fit
(issue 11, tests/test_measured_runs_fit.py): FP8 copies of saved GEMM inputs, hand-checked on Llama 3.1 405B."""
from __future__ import annotations

import pytest


from conftest import point_runner

GB200_405B = "train-mbridge-25.11-dgx-gb200-llama3.1-405b-256gpu-fp8-cs"
# Llama 3.1 405B (Dubey et al. 2024, Table 3): h 16384, 128 heads, 8 KV heads of 128, SwiGLU FFN 53248
H, Q, KV, FFN = 16384, 16384, 8 * 128, 53248
TP, TOKENS = 4, 8192          # the point: tp 4 with sequence parallelism, micro-batch 1 of 8192 tokens, no dropout


@pytest.fixture(scope="module")
def point():
    return point_runner(GB200_405B)


def test_fp8_layers_keep_fp8_copies_of_their_inputs(point):
    # 16-bit: per token, attention = QKV input 2h/t + Q, K, V 2(q + 2kv)/t + projection input 2q/t = 25,600 bytes;
    # MLP = FC1 input 2h/t + three ffn-wide tensors 2*3*ffn/t = 88,064; norm inputs 2*2h/t = 16,384 -> 130,048
    bf16 = point(fp8_saved_inputs="high_precision")
    att16 = 2 * H / TP + 2 * (Q + 2 * KV) / TP + 2 * Q / TP
    mlp16 = 2 * H / TP + 2 * 3 * FFN / TP
    assert (att16, mlp16) == (25_600, 88_064)
    assert bf16.scalar("attention_block_activation_memory") == pytest.approx(TOKENS * att16, rel=1e-12)
    assert bf16.scalar("mlp_block_activation_memory") == pytest.approx(TOKENS * mlp16, rel=1e-12)
    assert bf16.scalar("activation_memory_per_layer") == pytest.approx(TOKENS * 130_048, rel=1e-12)
    # FP8 copies (TransformerEngine): QKV and FC1 inputs 1 byte (-h/t each), FC2 input (SwiGLU output) 1 byte
    # (-ffn/t), and the flash-attention output is kept in bf16 by the attention kernel *and* in FP8 by the output
    # projection (+q/t): attention 25,600 (unchanged), MLP 4,096 + (2*2 + 1)*53,248/4 = 70,656 -> 112,640 per token
    fp8 = point(fp8_saved_inputs="fp8")
    att8 = 1 * H / TP + 2 * (Q + 2 * KV) / TP + (2 + 1) * Q / TP
    mlp8 = 1 * H / TP + (2 * 2 + 1) * FFN / TP
    assert (att8, mlp8) == (25_600, 70_656)
    assert fp8.scalar("gemm_input_activation_bytes") == 1
    assert fp8.scalar("attention_block_activation_memory") == pytest.approx(TOKENS * att8, rel=1e-12)
    assert fp8.scalar("mlp_block_activation_memory") == pytest.approx(TOKENS * mlp8, rel=1e-12)
    assert fp8.scalar("activation_memory_per_layer") == pytest.approx(TOKENS * 112_640, rel=1e-12)   # -13.4 %
    # a bf16 run keeps 16-bit inputs whatever the setting says
    assert point(compute_dtype="bf16", fp8_saved_inputs="fp8").scalar("activation_memory_per_layer") == \
        pytest.approx(TOKENS * 130_048, rel=1e-12)


def test_pipeline_split_counting_embedding_and_loss(point):
    # Llama 3.1 405B on pp 16 x vp 4 with the embedding and the loss counted as layers (the recipe's
    # account_for_embedding/loss_in_pipeline_split): (126 + 2)/64 = 2 slots per chunk; the first stage holds
    # chunks 0, 16, 32, 48 = (embedding + 1) + 2 + 2 + 2 = 7 layers, the middle stages 8, the last 7 (+ loss)
    r = point()
    assert r.scalar("first_stage_layer_count") == 7 and r.scalar("last_stage_layer_count") == 7
    assert r.scalar("middle_stage_layer_count") == 8 and r.scalar("first_chunk_layer_count") == 1
    assert r.scalar("parallel_config_valid")            # 128 slots split evenly, 126 layers would not
    # interleaved 1F1B, first rank: warm-up (p - 1)*2 + (v - 1)*p = 30 + 48 chunk-microbatches, plus one more
    # forward = 79: chunk 0 sees 2p - 1 = 31 microbatches (1 layer each), chunks 1-3 see p = 16 (2 layers each)
    held = 31 * 1 + 16 * (2 + 2 + 2)
    assert held == 127
    assert 7 * r.scalar("inflight_microbatch_factor") + r.scalar("pipeline_first_chunk_inflight_adjustment") == \
        pytest.approx(held, rel=1e-12)
    assert r.scalar("layer_activation_memory") == pytest.approx(held * r.scalar("activation_memory_per_layer"),
                                                                rel=1e-12)
    # without it the 126 layers spread evenly (7.875 per stage) and Korthikanti's L(1 + (p-1)/(p v)) holds:
    # 126 * (1 + 15/64) = 155.53 layer-microbatches, and the layout breaks the divisibility rule
    even = point(pipeline_split_embedding_loss="no")
    assert even.scalar("pipeline_first_chunk_inflight_adjustment") == pytest.approx(0, abs=1e-12)
    assert even.scalar("layer_activation_memory") == pytest.approx(
        126 * (1 + 15 / 64) * even.scalar("activation_memory_per_layer"), rel=1e-12)
    assert not even.scalar("parallel_config_valid")


GB200_70B = "train-mbridge-25.11-dgx-gb200-llama3-70b-64gpu-fp8-cs"


def test_cpu_activation_offloading_of_40_of_80_layers(point):
    # Llama 3 70B on GB200, tp 1 pp 1 (Megatron-FSDP 64), micro-batch 2 x 8192 tokens, FP8 copies of GEMM inputs:
    # per token and layer, attention 1*8192 + 2*(8192 + 2*1024) + (2 + 1)*8192 = 53,248, MLP 8192 + (2*2 + 1)*28672
    # = 151,552, norm inputs 2*2*8192 = 32,768 -> 237,568 bytes; times 16,384 tokens = 3,892,314,112 per layer
    r = point(GB200_70B)
    per_layer = (53_248 + 151_552 + 32_768) * 2 * 8192
    assert per_layer == 3_892_314_112
    assert r.scalar("activation_memory_per_layer") == pytest.approx(per_layer, rel=1e-12)
    # the recipe offloads 40 of the 80 layers to host memory: 40 layers stay in HBM (145.0 GiB), 40 leave
    assert r.scalar("offloaded_activation_memory") == pytest.approx(40 * per_layer, rel=1e-12)
    assert r.scalar("layer_activation_memory") == pytest.approx(40 * per_layer, rel=1e-12)
    assert r.scalar("layer_activation_memory") / 2 ** 30 == pytest.approx(145.00, abs=0.01)
    # no offloading: all 80 layers stay; offloading more layers than the stage has leaves nothing
    assert point(GB200_70B, cpu_offload_layers=0).scalar("layer_activation_memory") == \
        pytest.approx(80 * per_layer, rel=1e-12)
    assert point(GB200_70B, cpu_offload_layers=100).scalar("layer_activation_memory") == pytest.approx(0, abs=1)


def test_fp8_weights_of_the_fp8_param_gather_recipe(point):
    # Llama 3 70B on GB200 (Blackwell, FP8 weights need no transpose copy): the layers' linear weights are 1 byte,
    # the embedding and the untied output layer (128256 x 8192 each, pp = 1) stay bf16; Megatron-FSDP shards all
    # of it over 64 ranks and gathers one layer (plus the prefetched next) in FP8
    r = point(GB200_70B)
    emb = 128256 * 8192
    assert r.scalar("stage_embedding_output_params") == 2 * emb == 2_101_346_304
    p = r.scalar("params_per_gpu")
    assert r.scalar("layer_weight_bytes") == 1
    assert r.scalar("weight_memory") == pytest.approx(((p - 2 * emb) * 1 + 2 * emb * 2) / 64, rel=1e-12)
    assert r.scalar("fsdp_gathered_weight_memory") == pytest.approx(2 * r.scalar("layer_params_per_gpu") * 1,
                                                                    rel=1e-12)
    # bf16 weights: 2 bytes everywhere, as before
    b = point(GB200_70B, fp8_param_storage="no")
    assert b.scalar("weight_memory") == pytest.approx(p * 2 / 64, rel=1e-12)
    # Hopper keeps an FP8 transpose beside each FP8 weight: 2 bytes, no saving (the H100 family's value)
    assert point(GB200_70B, fp8_param_bytes=2).scalar("weight_memory") == pytest.approx(p * 2 / 64, rel=1e-12)


def test_fp8_parameters_are_all_gathered_in_fp8(point):
    """With fp8_param_gather the distributed optimizer all-gathers the layers' FP8 bytes (1 per weight); the
    embedding and output layer stay bf16 (2). GB200 405B (pp 16): the first stage's dense weights, of which the
    embedding is 128,256 x 16,384 / tp 4."""
    r = point()
    dense, emb = r.scalar("dense_params_per_gpu"), r.scalar("stage_embedding_output_params")
    assert emb == pytest.approx(128256 * 16384 / 4, rel=1e-12)
    assert r.scalar("gathered_layer_weight_bytes") == 1
    assert r.scalar("dp_allgather_msg_bytes") == pytest.approx((dense - emb) * 1 + emb * 2, rel=1e-12)
    bf16 = point(fp8_param_storage="no")
    assert bf16.scalar("dp_allgather_msg_bytes") == pytest.approx(dense * 2, rel=1e-12)
