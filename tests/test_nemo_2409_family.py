"""NeMo 24.09's H100 table (validation/nemo-24.09, held out): the family file is what tools/nemo_2409_family.py writes
from its NeMo 24.07 twins, so a setting changed on a 24.07 point reaches its 24.09 re-measurement, and a row whose
layout or cell does not fit its twin is refused."""
from __future__ import annotations

import pytest

from conftest import load_tool


@pytest.fixture(scope="module")
def tool():
    return load_tool("nemo_2409_family")


def test_family_file_is_what_the_script_writes(tool):
    text = tool.render()
    assert tool.OUT.read_text(encoding="utf-8") == text
    assert text.count("  train-nemo2409-h100-") == 11


def test_each_row_takes_its_twins_settings(tool):
    import yaml
    twins = tool.twins()
    points = yaml.safe_load(tool.OUT.read_text(encoding="utf-8"))["points"]
    for pid, p in points.items():
        twin = twins[pid.replace("nemo2409", "nemo2407")]
        assert p["use"] == twin["use"] and p["values"] == twin["values"], pid


def test_a_row_off_its_twins_layout_or_equal_to_its_cell_is_refused(tool, monkeypatch):
    row = tool.ROWS[0]
    monkeypatch.setattr(tool, "ROWS", [(*row[:6], row[6] + 1, *row[7:])])      # TP 2 where the twin runs TP 1
    with pytest.raises(AssertionError, match="gpt3-5b"):
        tool.render()
    old = next(e["value"] for e in tool.twins()[row[1]]["expect"] if e["metric"] == "tokens_per_sec_per_gpu")
    monkeypatch.setattr(tool, "ROWS", [(*row[:10], old, row[11])])            # the 24.07 cell again
    with pytest.raises(AssertionError, match="restatement"):
        tool.render()
