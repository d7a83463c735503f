"""NVIDIA's DGX Cloud Benchmarking H100 step times (validation/dgxc-benchmarking-h100, held out): the family file is
what tools/dgxc_family.py writes from the committed tables, each step time agrees with its table's own throughput
row, and a cell that does not is refused."""
from __future__ import annotations

import pytest

from conftest import load_tool


@pytest.fixture(scope="module")
def tool():
    return load_tool("dgxc_family")


def test_family_file_is_what_the_script_writes(tool):
    tables = tool.read_tables(tool.DATA)
    assert len(tables) == 15                                  # 7 recipes x BF16 / FP8 and Grok-1's layout table
    text = tool.render(tables)
    assert tool.OUT.read_text(encoding="utf-8") == text
    assert text.count("  train-dgxc-h100-") == 88


def test_layout_from_the_headings(tool):
    assert tool.layout("NeMo Megatron FP8 (TP=4,PP=8, MBS=1, VP=12, SEQ=2048)") == \
        {"tp": 4, "pp": 8, "cp": 1, "vp": 12, "mbs": 1}
    assert tool.layout("Llama 3.1 70b 24.09 BF16 (TP=4, PP=4, CP=2, VP=5, MBS=1, GA=64)") == \
        {"tp": 4, "pp": 4, "cp": 2, "vp": 5, "mbs": 1}


def test_the_405b_proxy_columns_take_their_own_layout(tool):
    text = tool.render(tool.read_tables(tool.DATA))
    point = text.split("  train-dgxc-h100-llama3.1-405b-96gpu-bf16:")[1].split("\n  train-")[0]
    # 96 GPUs = TP 8 x PP 3 x CP 2 x DP 2; GBS 126 over DP 2 = 63 microbatches; '8.7  5' read as 8.75
    # (8192 x 126 / 8.75 = 117,965 token/s, the table's throughput)
    for line in ("layers: {value: 21,", "pp: 3", "vpp: 7", "dp: {value: 2,", "global_batch: {value: 126,",
                 "gradient accumulation 63", "value: 8.75, unit"):
        assert line in point, line
    assert 8192 * 126 / 8.75 == pytest.approx(117965, rel=1e-4)


def test_the_grok1_columns_take_their_row_of_the_layout_table(tool):
    text = tool.render(tool.read_tables(tool.DATA))

    def point(pid):
        return text.split(f"  {pid}:")[1].split("\n  train-")[0]

    # 8 GPUs: the 2-layer proxy at 4K, TP 4 x EP 2 (DP 2), GBS 1024 = 512 microbatches; 4096 x 1024 / 24.03 = 174,544
    p8 = point("train-dgxc-h100-grok1-314b-8gpu-bf16")
    for line in ("layers: {value: 2,", "tp: 4", "pp: 1", "cp: 1", "dp: {value: 2,", "ep: {value: 2,", "seq_len: 4096",
                 "gradient accumulation 512", "value: 24.03, unit", "models/grok-1-314b", "moe_token_dropping",
                 "attention_efficiency: {value: 0.35,"):
        assert line in p8, line
    assert 4096 * 1024 / 24.03 == pytest.approx(174544, rel=1e-4)
    # 512 GPUs: the whole 64-layer model (no layers override), TP 4 x PP 8 (VP 8) x CP 2 x DP 8, EP 8, 8K
    p512 = point("train-dgxc-h100-grok1-314b-512gpu-fp8")
    assert "layers:" not in p512
    for line in ("pp: 8", "vpp: 8", "cp: 2", "dp: {value: 8,", "ep: {value: 8,", "seq_len: 8192", "value: 16.69, unit",
                 "fp8_param_storage", "etp: {value: 4,"):
        assert line in p512, line


def test_a_layout_row_whose_degrees_miss_its_gpu_count_is_refused(tool, tmp_path):
    bad = tmp_path / "tables.md"
    bad.write_text(tool.DATA.read_text(encoding="utf-8").replace(
        "| 512  | 8192   | 64     | 4   | 8   | 2   | 8   | 1   |", "| 512  | 8192   | 64     | 4   | 8   | 2   | 4   | 1   |"),
        encoding="utf-8")
    with pytest.raises(SystemExit, match=r"tables\.md:\d+: 512 GPUs: TP x PP x CP x EP x DP is not the GPU count"):
        tool.render(tool.read_tables(bad))


def test_a_step_time_its_throughput_row_contradicts_is_refused(tool, tmp_path):
    bad = tmp_path / "tables.md"
    bad.write_text(tool.DATA.read_text(encoding="utf-8").replace("| 3.16 | 3.21 |", "| 3.61 | 3.21 |"),
                   encoding="utf-8")
    with pytest.raises(SystemExit, match=r"tables\.md:40: 128 GPUs: 3\.61 s per step gives 36308 token/s, the table 41478"):
        tool.render(tool.read_tables(bad))


def test_each_recipe_takes_the_attention_backend_its_configure_script_picks(tool):
    text = tool.render(tool.read_tables(tool.DATA))

    def point(pid):
        return text.split(f"  {pid}:")[1].split("\n  train-")[0]

    # llama3.1/configure.sh: NVTE_FLASH_ATTN=0, NVTE_FUSED_ATTN=1; nemotron/configure.sh: fused for 15b only;
    # nemo_megatron/configure.sh: NVTE_FUSED_ATTN=0
    for pid, rate in (("train-dgxc-h100-llama3.1-8b-8gpu-bf16", 0.6), ("train-dgxc-h100-llama3.1-405b-32gpu-fp8", 0.6),
                      ("train-dgxc-h100-nemotron4-15b-16gpu-fp8", 0.6),
                      ("train-dgxc-h100-nemotron4-340b-128gpu-bf16", 0.35), ("train-dgxc-h100-gpt3-175b-128gpu-fp8", 0.35)):
        assert f"attention_efficiency: {{value: {rate}," in point(pid), pid
    # Nemotron-4 15B at 16 GPUs: TP 4 x DP 4, micro batch 4, GBS 64 = 4 accumulation steps (the heading's GA=4)
    p = point("train-dgxc-h100-nemotron4-15b-16gpu-bf16")
    for line in ("tp: 4", "dp: {value: 4,", "micro_batch: 4", "global_batch: {value: 64,", "gradient accumulation 4)",
                 "value: 2.812, unit", "models/nemotron4-15b"):
        assert line in p, line
