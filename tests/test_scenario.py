"""Scenarios and presets: use-chains, override order, provenance and their errors."""
from __future__ import annotations

import textwrap

import pytest

from flopsheet.errors import DuplicateNameError, ScenarioError, UnknownNameError, UnitError
from flopsheet.evaluate import Model
from flopsheet.library import load_library
from flopsheet.scenario import load_scenario, parse_set, resolve


@pytest.fixture(scope="module")
def model():
    return Model(load_library())


def write(tmp_path, files):
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    return tmp_path


def test_bundled_chain_and_origins():
    sc = load_scenario("gpt3-175b-sc21")
    assert sc.chain == ["templates/models/gpt3-175b.yaml", "templates/hardware/a100-sxm4-80gb.yaml",
                        "templates/systems/nvlink3-hgx8.yaml", "templates/systems/ib-hdr.yaml",
                        "templates/systems/dgx-a100-superpod.yaml",
                        "templates/scenarios/gpt3-175b-sc21.yaml"]
    assert sc.values["layers"].origin == "templates/models/gpt3-175b.yaml:4"
    assert sc.values["vocab"].source.startswith("Narayanan et al. SC21")
    assert sc.values["layers"].source.startswith("Brown et al. 2020")  # the file's default citation


def test_later_files_and_set_override(tmp_path, model):
    root = write(tmp_path, {
        "models/base.yaml": "doc: base\nvalues:\n  layers: 10\n  hidden: 1024\n",
        "models/deeper.yaml": "doc: deeper\nuse: [models/base]\nvalues:\n  layers: 20\n",
        "scenarios/mine.yaml": "doc: mine\nuse: [models/deeper]\nvalues:\n  hidden: 2048\n"
                               "  peak_flops_per_gpu: 989 TFLOP/s\n",
    })
    sc = load_scenario(str(root / "scenarios/mine.yaml"), ["layers=30", "recompute=selective"])
    assert sc.values["layers"].raw == 30 and sc.values["layers"].origin == "--set"
    assert sc.values["hidden"].raw == 2048 and sc.values["hidden"].origin.endswith("mine.yaml:4")
    vals = resolve(sc, model)
    assert vals["peak_flops_per_gpu"] == pytest.approx(989e12)
    assert vals["recompute"] == 1


def test_use_loop_is_reported(tmp_path):
    root = write(tmp_path, {"a.yaml": "doc: a\nuse: [b]\n", "b.yaml": "doc: b\nuse: [a]\n"})
    with pytest.raises(ScenarioError, match="loops"):
        load_scenario(str(root / "a.yaml"))


def test_missing_preset_suggests(tmp_path):
    root = write(tmp_path, {"s.yaml": "doc: s\nuse: [models/gpt3-175]\n"})
    with pytest.raises(ScenarioError) as ei:
        load_scenario(str(root / "s.yaml"))
    assert ei.value.line == 2 and "models/gpt3-175b" in ei.value.detail
    with pytest.raises(ScenarioError, match="did you mean"):
        load_scenario("gpt3-175b-sc2")


def test_unknown_value_name_points_at_the_line(tmp_path, model):
    root = write(tmp_path, {"s.yaml": "doc: s\nvalues:\n  layers: 2\n  hiden: 3\n"})
    sc = load_scenario(str(root / "s.yaml"))
    with pytest.raises(UnknownNameError) as ei:
        resolve(sc, model)
    assert ei.value.line == 4 and "hidden" in ei.value.detail


def test_bad_values(tmp_path, model):
    root = write(tmp_path, {"s.yaml": "doc: s\nvalues:\n  peak_flops_per_gpu: 80 GiB\n"})
    with pytest.raises(UnitError) as ei:
        resolve(load_scenario(str(root / "s.yaml")), model)
    assert ei.value.line == 3
    root = write(tmp_path, {"d.yaml": "doc: s\nvalues:\n  tp: 2\n  tp: 4\n"})
    with pytest.raises(DuplicateNameError):
        load_scenario(str(root / "d.yaml"))
    root = write(tmp_path, {"k.yaml": "doc: s\nvalue:\n  tp: 2\n"})
    with pytest.raises(ScenarioError, match="did you mean values"):
        load_scenario(str(root / "k.yaml"))


def test_parse_set():
    assert parse_set("tp=8") == ("tp", 8)
    assert parse_set("x=0.5") == ("x", 0.5)
    assert parse_set("hbm= 80 GiB") == ("hbm", "80 GiB")
    assert parse_set("tp=1,2,4") == ("tp", [1, 2, 4])
    for bad in ["tp", "=3", "tp="]:
        with pytest.raises(ScenarioError):
            parse_set(bad)


def test_overriding_a_node_from_a_scenario(model):
    sc = load_scenario("gpt3-175b-sc21", ["step_time=20"])
    r = model.evaluate(resolve(sc, model))
    assert "step_time" in r.overridden
    assert r.scalar("tokens_per_second") == pytest.approx(1536 * 2048 / 20)
