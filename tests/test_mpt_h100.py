"""llm-foundry's H100 BF16 MPT table (validation/mpt-llm-foundry-h100, held out): the family file is what
tools/mpt_h100_family.py writes from the committed table rows, every row's model dimensions reproduce the table's
own parameter count, and a row the dimensions do not match is refused."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "mpt_h100_family.py"
FAMILY = ROOT / "templates" / "validation" / "mpt-llm-foundry-h100.yaml"


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("mpt_h100_family", TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_family_file_is_what_the_script_writes(tool):
    rows = tool.read_rows()
    assert len(rows) == 52
    assert FAMILY.read_text(encoding="utf-8") == tool.render(rows)


def test_mpt_parameter_count_by_hand(tool):
    # MPT-7B at 2,048 tokens: 32 layers x (12 x 4096^2 + 13 x 4096) + 50368 x 4096 + 2048 x 4096 + 2 x 4096
    assert 32 * (12 * 4096 ** 2 + 13 * 4096) + 50368 * 4096 + 2048 * 4096 + 2 * 4096 == 6_658_859_008
    assert tool.mpt_params(32, 4096, 2048) == 6_658_859_008        # the table's NumParams for that row


def test_a_row_whose_dimensions_disagree_is_refused(tool):
    row = next(r for r in tool.read_rows() if r[0] == "7b" and r[1] == "2048")
    bad = list(row)
    bad[19] = str(int(row[19]) + 1)
    with pytest.raises(SystemExit, match="parameters, the table"):
        tool.render([bad])
