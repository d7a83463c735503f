"""llm-foundry's H100 BF16 and A100 80GB MPT tables (validation/mpt-llm-foundry-h100 and -a100, held out): the
family files are what tools/mpt_family.py writes from the committed table rows, every row's model dimensions
reproduce the table's own parameter count, and a row the dimensions do not match is refused."""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import load_tool

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ROOT / "templates" / "validation"


@pytest.fixture(scope="module")
def tool():
    return load_tool("mpt_family")


@pytest.mark.parametrize("index, rows, points", [(0, 52, 52), (1, 61, 56)])
def test_family_files_are_what_the_script_writes(tool, index, rows, points):
    table = tool.TABLES[index]
    read = tool.read_rows(tool.DATA / table.data)
    assert len(read) == rows
    text = tool.render(table, read)
    assert (FAMILIES / f"{table.family}.yaml").read_text(encoding="utf-8") == text
    assert text.count(f"  train-mpt-{table.gpu}-") == points    # the A100 table's 5 published rows are left out


def test_mpt_parameter_count_by_hand(tool):
    # MPT-7B at 2,048 tokens: 32 layers x (12 x 4096^2 + 13 x 4096) + 50368 x 4096 + 2048 x 4096 + 2 x 4096
    assert 32 * (12 * 4096 ** 2 + 13 * 4096) + 50368 * 4096 + 2048 * 4096 + 2 * 4096 == 6_658_859_008
    assert tool.mpt_params(32, 4096, 2048) == 6_658_859_008        # the table's NumParams for that row


def test_a_row_whose_dimensions_disagree_is_refused(tool):
    table = tool.TABLES[0]
    row = next(r for r in tool.read_rows(tool.DATA / table.data) if r[0] == "7b" and r[1] == "2048")
    bad = list(row)
    bad[19] = str(int(row[19]) + 1)
    with pytest.raises(SystemExit, match="parameters, the table"):
        tool.render(table, [bad])


def test_gradient_dtype_follows_the_mixed_precision_mode(tool):
    text = tool.render(tool.TABLES[1], tool.read_rows(tool.DATA / tool.TABLES[1].data))
    block = text.split("  train-mpt-a100-70b-seq2048-32gpu-mb2:")[1].split("\n  train-")[0]
    assert "grad_bytes: {value: 2" in block                      # 70B rows: bf16 PURE
    block = text.split("  train-mpt-a100-7b-seq4096-8gpu-mb16:")[1].split("\n  train-")[0]
    assert "grad_bytes: {value: 4" in block                      # amp_bf16 DEFAULT: fp32 reduction
