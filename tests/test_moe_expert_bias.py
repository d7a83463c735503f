"""Expert biases added outside the grouped GEMM (moe_expert_bias_add): Megatron-Core's TEGroupedMLP adds the down
projection's bias, scaled by each row's routing probability, with eager PyTorch ops after the GEMM (per local expert
t + b p in the probabilities' fp32, concatenated, cast back to bf16); NeMo AutoModel adds the up projection's bias the
same way. Worked by hand on Megatron-Bridge 26.08's GPT-OSS 120B on 64 GB300 (EP 16, 4 x 4,096-token microbatches),
whose measured step is 2,481 ms (Megatron-Bridge PR 5717)."""
import pytest

from conftest import point_runner

PID = "train-mbridge-26.08-dgx-gb300-gpt-oss-120b-64gpu-mxfp8"


@pytest.fixture(scope="module")
def point():
    return point_runner(PID)


def test_bytes_per_element_of_the_eager_ops(point):
    # forward: b p written (fp32, 4), t + b p reads t (bf16, 2) and b p (4) and writes 4, the concatenation reads and
    # writes 4 + 4, the cast back reads 4 and writes 2
    assert point().scalar("moe_scaled_bias_bytes_per_element_fwd") == 4 + (2 + 4 + 4) + (4 + 4) + (4 + 2)
    # backward: the gradient cast up (2 + 4) and back for t (4 + 2), gradient x p and its row sum for b (4 + 4 + 4),
    # gradient x b and its width sum for p (4 + 4 + 4), the split's backward concatenating bf16 slices (2 + 2)
    assert point().scalar("moe_scaled_bias_bytes_per_element_bwd") == 6 + 6 + 12 + 12 + 4
    # the row's router runs in bf16, but HybridEP (as DeepEP) dispatches the probabilities in fp32
    assert point().scalar("moe_router_score_bytes") == 2 and point().scalar("moe_dispatched_prob_bytes") == 4
    # through the all-to-all dispatcher the experts get the router's bf16 probabilities: no casts, every pass 2 bytes
    bf16 = point(ep_dispatcher="alltoall")
    assert bf16.scalar("moe_scaled_bias_bytes_per_element_fwd") == 2 + 6 + 4
    assert bf16.scalar("moe_scaled_bias_bytes_per_element_bwd") == 12 + 4
    assert point(ep_dispatcher="alltoall", moe_router_score_bytes=4).scalar("moe_scaled_bias_bytes_per_element_fwd") == 28
    # the unscaled up-projection bias of AutoModel: t + b and the concatenation forward, b's row sum and the split back
    assert point().scalar("moe_plain_bias_bytes_per_element_fwd") == 8
    assert point().scalar("moe_plain_bias_bytes_per_element_bwd") == 6


def test_the_down_projection_bias_by_hand(point):
    rows = 16384 * 4                       # 4 x 4,096 tokens per GPU, each routed to 4 experts, every layer MoE
    assert point().scalar("moe_expert_bias_rows") == rows
    assert point().scalar("moe_expert_bias_bytes_fwd") == rows * 2880 * 28
    assert point().scalar("moe_expert_bias_bytes_bwd") == rows * 2880 * 40
    # 128 experts over EP 16 = 8 local experts: 2 ops each, one concatenation and one cast; 5 each and 2 backward
    assert point().scalar("moe_expert_bias_kernels_fwd") == 2 * 8 + 2
    assert point().scalar("moe_expert_bias_kernels_bwd") == 5 * 8 + 2
    # at GB300's 6.4 TB/s streaming rate and 4 us a kernel: 0.90 ms forward, 1.35 ms backward per layer and microbatch
    assert point().scalar("moe_expert_bias_time_fwd") == pytest.approx(rows * 2880 * 28 / 6.4e12 + 18 * 4e-6, rel=1e-12)
    assert point().scalar("moe_expert_bias_time_bwd") == pytest.approx(rows * 2880 * 40 / 6.4e12 + 42 * 4e-6, rel=1e-12)


def test_the_bias_adds_join_the_moe_layers_time(point):
    base, fused = point(), point(moe_expert_bias_add="fused")
    assert fused.scalar("moe_expert_bias_time_fwd") == 0
    assert base.scalar("moe_pointwise_time_fwd") - fused.scalar("moe_pointwise_time_fwd") \
        == pytest.approx(base.scalar("moe_expert_bias_time_fwd"), rel=1e-9)
    assert base.scalar("moe_pointwise_time_bwd") - fused.scalar("moe_pointwise_time_bwd") \
        == pytest.approx(base.scalar("moe_expert_bias_time_bwd"), rel=1e-9)
    # 36 layers x 5 microbatches of forward and backward, nothing overlapped: about 400 ms of the 2.48 s step
    added = base.scalar("step_time") - fused.scalar("step_time")
    assert added == pytest.approx(36 * 5 * (base.scalar("moe_expert_bias_time_fwd")
                                            + base.scalar("moe_expert_bias_time_bwd")), rel=1e-6)


def test_automodel_adds_both_biases_eagerly():
    run = point_runner("train-automodel-h100-gpt-oss-120b-64gpu")
    both, fc2 = run(), run(moe_expert_bias_add="fc2_eager")
    assert both.scalar("moe_expert_bias_bytes_fwd") - fc2.scalar("moe_expert_bias_bytes_fwd") \
        == pytest.approx(both.scalar("moe_expert_bias_rows") * 2 * 2880 * 8, rel=1e-12)
    assert both.scalar("moe_expert_bias_bytes_bwd") - fc2.scalar("moe_expert_bias_bytes_bwd") \
        == pytest.approx(both.scalar("moe_expert_bias_rows") * 2 * 2880 * 6, rel=1e-12)


def test_models_without_biases_are_untouched():
    run = point_runner("train-mbridge-26.08-dgx-gb300-deepseekv3-256gpu-mxfp8")
    assert run().scalar("moe_expert_bias_time_bwd") == 0
    assert run().scalar("step_time") == run(moe_expert_bias_add="fused").scalar("step_time")


def test_the_gpt_oss_rows_move_towards_their_measurements():
    """Every Megatron-Bridge GPT-OSS 120B row reads fast with the biases fused (+13 to +62 % on the rows before 26.04); with Megatron-Core's
    eager down-projection bias each reads closer, the 26.08 GB300 step within 8 % of its 2,481 ms."""
    from flopsheet.scenario import resolve
    from flopsheet.validate import Validator, load_points
    v = Validator()
    rows = [p for p in load_points() if "gpt-oss-120b" in p.id and p.id.startswith("train-mbridge")]
    assert len(rows) == 18     # the 25.11, 26.02, 26.04, 26.06 and 26.08 releases
    for p in rows:
        expect = [e for e in p.expects if e.counted][0]

        def error(**sets):
            result = v.model.evaluate(resolve(v.scenario(p, sets), v.model))
            return float(result[expect.node]) / float(expect.value) - 1
        assert 0 < error() < error(moe_expert_bias_add="fused"), p.id
    gb300 = point_runner(PID)()
    assert gb300.scalar("step_time") == pytest.approx(2.481, rel=0.08)
