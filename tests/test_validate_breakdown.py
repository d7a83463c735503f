"""``flopsheet validate --by``: each category's statistics per group - validation family,
hardware preset, dense or mixture-of-experts model - checked by hand on a small report of
made-up points, and on real points for the tags they get."""
from __future__ import annotations

import json

import pytest

from flopsheet.validate import load_family, load_points, select
from flopsheet.validate_report import LARGE_ERROR, breakdown_tables, optimism


def _point(pid: str, measured: float, use: str = "", values: str = "params_per_gpu: 1e9") -> str:
    """A memory point whose model state is 18 GB (1e9 parameters at 18 bytes, as in
    test_validate's broken-point example), measured at ``measured`` GB."""
    return (f"  {pid}:\n" + (f"    use: [{use}]\n" if use else "")
            + f"    values: {{{values}}}\n"
            f"    expect:\n      - {{metric: m, node: model_state_memory, value: {measured}, unit: GB}}\n")


@pytest.fixture(scope="module")
def small_report(validator, tmp_path_factory):
    """Five points, errors +50 %, -10 % and 0 on an H100 preset, +25 % on an A100 preset and
    -40 % on none (predicted 18 GB against 12, 20, 18, 14.4 and 30)."""
    text = ("category: memory\npoints:\n"
            + _point("h1", 12, "hardware/h100-sxm5-80gb") + _point("h2", 20, "hardware/h100-sxm5-80gb")
            + _point("h3", 18, "hardware/h100-sxm5-80gb")
            + _point("a1", 14.4, "hardware/a100-sxm4-80gb", "params_per_gpu: 1e9, experts: 8, top_k: 2")
            + _point("n1", 30))
    path = tmp_path_factory.mktemp("by") / "fam.yaml"
    path.write_text(text, encoding="utf-8")
    return validator.run(load_family(path))


def test_breakdown_by_hardware_is_hand_checked(small_report):
    groups = {g["group"]: g for g in small_report.breakdown("hardware", "memory")}
    assert list(groups) == ["h100-sxm5-80gb", "-", "a100-sxm4-80gb"]  # largest group first, then by name
    h100 = groups["h100-sxm5-80gb"]
    assert h100["compared"] == 3
    assert h100["median_abs_error"] == pytest.approx(0.10)
    # numpy's linear percentile of |err| = (0, 0.1, 0.5) at 90 %: 0.1 + 0.8 x (0.5 - 0.1)
    assert h100["p90_abs_error"] == pytest.approx(0.42)
    assert h100["worst_error"] == pytest.approx(0.5)
    assert h100["beyond_large_error"] == 1
    assert groups["a100-sxm4-80gb"]["median_abs_error"] == pytest.approx(0.25)
    assert groups["-"]["worst_error"] == pytest.approx(-0.4)
    assert sum(g["compared"] for g in groups.values()) == small_report.stats("memory")["compared"]
    # bias: memory is rosier when predicted smaller - measured / predicted - 1 per row, then the median
    assert h100["median_bias"] == pytest.approx(0.0)                    # -1/3, +1/9 and 0
    assert groups["a100-sxm4-80gb"]["median_bias"] == pytest.approx(14.4 / 18 - 1)  # -20 %
    assert groups["-"]["median_bias"] == pytest.approx(30 / 18 - 1)     # +66.7 %


def test_optimism_turns_each_error_toward_the_rosier_side():
    # a rate or a ratio is rosier when predicted higher; a time, memory or cost when predicted lower
    assert optimism(0.25, "token/s") == 0.25 and optimism(0.25, "TFLOP/s") == 0.25
    assert optimism(-0.1, "1") == -0.1
    assert optimism(0.25, "s") == pytest.approx(-0.2) and optimism(-0.2, "ms") == pytest.approx(0.25)
    assert optimism(0.25, "GiB") == pytest.approx(-0.2)
    assert optimism(0.25, "USD/h") == pytest.approx(-0.2) and optimism(0.25, "W") == pytest.approx(-0.2)
    assert optimism(-1.0, "s") is None and optimism(0.1, "no-such-unit") is None


def test_breakdown_by_moe_and_family(small_report):
    groups = {g["group"]: g["compared"] for g in small_report.breakdown("moe", "memory")}
    assert groups == {"dense": 4, "moe": 1}
    (fam,) = small_report.breakdown("family", "memory")
    assert fam["group"] == "fam" and fam["compared"] == 5
    assert fam["median_abs_error"] == pytest.approx(small_report.stats("memory")["median_abs_error"])
    assert LARGE_ERROR == 0.20 and fam["beyond_large_error"] == 3  # +50, +25 and -40 %; not -10 % or 0
    with pytest.raises(ValueError, match="--by takes one of"):
        small_report.breakdown("vendor")


def test_breakdown_table_names_the_groups(small_report):
    (text,) = breakdown_tables(small_report, "hardware", ["training", "memory"])  # no training rows
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["memory", "by", "hardware"]
    assert lines[2].split() == ["h100-sxm5-80gb", "3", "10.0%", "42.0%", "1", "+50.0%", "+0.0%"]


def test_real_points_are_tagged_with_their_hardware_preset_and_model_kind(validator):
    rep = validator.run(select(load_points(), "training", "megatron-bridge-26.04,vtrain-multi"))
    tags = {r.point.id: r.tags for r in rep.rows}
    assert tags["train-mbridge-26.04-dgx-gb200-llama3-70b-64gpu-fp8"] == {"hardware": "gb200", "moe": "dense"}
    assert tags["train-mbridge-26.04-dgx-h100-qwen3-235b-a22b-256gpu-fp8"] == {
        "hardware": "h100-sxm5-80gb", "moe": "moe"}
    assert tags["train-mbridge-26.04-dgx-b300-deepseekv3-256gpu-mxfp8"]["hardware"] == "b300"
    # vTrain's points reach their A100 preset through the family's assumptions file
    assert {tuple(t.values()) for p, t in tags.items() if "vtrain" in p} == {("a100-sxm4-80gb", "dense")}


def test_cli_breaks_down_text_and_json(capsys):
    from flopsheet.cli import main
    assert main(["validate", "--category", "training", "--family", "megatron-bridge-26.04",
                 "--by", "moe", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    groups = {g["group"]: g for g in out["by"]["categories"]["training"]}
    assert out["by"]["key"] == "moe" and set(groups) == {"dense", "moe"}
    assert sum(g["compared"] for g in groups.values()) == out["categories"]["training"]["compared"]
    assert {r["moe"] for r in out["rows"]} == {"dense", "moe"}  # the tags ride on every row
    assert main(["validate", "--category", "training", "--family", "megatron-bridge-26.04",
                 "--by", "hardware"]) == 0
    text = capsys.readouterr().out
    assert "training by hardware" in text and "\ngb300 " in text


def test_by_is_refused_where_it_does_nothing(capsys):
    from flopsheet.cli import main
    assert main(["validate", "--category", "memory", "--by", "family", "--markdown"]) != 0
    assert "--by breaks down the text or --json report" in capsys.readouterr().err


def test_markdown_lists_training_rows_per_hardware_preset(validator):
    from flopsheet.validate_report import markdown
    rep = validator.run(select(load_points(), "training", "megatron-bridge-26.04"))
    text = markdown(rep, ["training"])
    rows = [line for line in text.splitlines() if line.startswith("| gb")]
    groups = {g["group"]: g for g in rep.breakdown("hardware", "training")}
    assert {r.split(" | ")[0][2:] for r in rows} == {k for k in groups if k.startswith("gb")}
    gb200 = next(r for r in rows if r.startswith("| gb200 |")).split(" | ")
    assert gb200[1] == str(groups["gb200"]["compared"])
    assert gb200[4] == str(groups["gb200"]["beyond_large_error"])
