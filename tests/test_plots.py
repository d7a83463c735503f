"""Plots: the numbers drawn equal the evaluated values, and the files are valid images."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from flopsheet.cli import main
from flopsheet.evaluate import Model
from flopsheet.exports import plots as P
from flopsheet.library import load_library
from flopsheet.scenario import load_scenario, resolve

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def setup():
    lib = load_library()
    model = Model(lib)
    values = resolve(load_scenario("gpt3-175b-sc21"), model)
    return lib, model, values, model.evaluate(values)


def is_png(path):
    return path.read_bytes()[:8] == PNG


def is_svg(path):
    root = ET.parse(path).getroot()
    return root.tag.endswith("svg")


def test_step_time_breakdown_one_bar_per_configuration(setup, tmp_path):
    lib, model, values, _ = setup
    grid = dict(values, dp=np.array([4.0, 8.0, 16.0]))
    res = model.evaluate(grid)
    p = P.breakdown_from_result(lib, res, grid, "step_time", tmp_path / "b.png")
    assert is_png(p.path) and p.data["labels"] == ["dp=4", "dp=8", "dp=16"]
    terms = lib.nodes["step_time"].deps
    assert [k for k in p.data if k in terms] == terms  # every term, in formula order
    for i in range(3):
        assert p.data["total"][i] == pytest.approx(float(res["step_time"][i]), rel=1e-12)
        assert p.data["step_compute_time"][i] == pytest.approx(
            float(np.broadcast_to(res["step_compute_time"], (3,))[i]), rel=1e-12)
    assert p.unit == "s"


def test_memory_breakdown_against_hbm(setup, tmp_path):
    lib, model, values, res = setup
    p = P.breakdown_from_result(lib, res, values, "memory_per_gpu", tmp_path / "m.svg", depth=2,
                                capacity="hbm_capacity")
    assert is_svg(p.path) and p.unit == "GiB"
    assert p.data["total"][0] == pytest.approx(float(res["memory_per_gpu"]) / 2 ** 30)
    assert p.data["capacity"] == pytest.approx(float(res["hbm_capacity"]) / 2 ** 30)
    assert p.data["optimizer_memory"][0] == pytest.approx(float(res["optimizer_memory"]) / 2 ** 30)


def test_roofline_places_every_operator(setup, tmp_path):
    lib, model, values, res = setup
    p = P.roofline_from_result(lib, res, tmp_path / "r.png")
    assert is_png(p.path)
    ops = P.operators(lib)
    placed = set(p.data["names"])
    for label, (f, b, _) in ops.items():
        if float(res[f]) > 0 and float(res[b]) > 0:
            assert label in placed
    i = p.data["names"].index("qkv_gemm_fwd")
    assert p.data["intensity"][i] == pytest.approx(
        float(res["qkv_gemm_flops_fwd"]) / float(res["qkv_gemm_bytes_fwd"]))
    assert p.data["peak"] == float(res["peak_flops_per_gpu"])
    j = p.data["names"].index("attention_core_fwd")  # has a time: placed at its achieved rate
    assert p.data["plotted"][j] == pytest.approx(
        float(res["attention_core_flops_fwd"]) / float(res["attention_core_time_fwd"]))
    assert all(y <= p.data["peak"] * (1 + 1e-12) for y in p.data["plotted"])


def test_tornado_from_the_cli_matches_sensitivity(tmp_path, capsys):
    out = tmp_path / "t.png"
    assert main(["sensitivity", "--of", "step_time", "--top", "5", "--json",
                 "--plot", str(out)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert is_png(out)
    assert main(["plot", "tornado", "--of", "step_time", "--top", "5", "-o",
                 str(tmp_path / "t2.svg"), "--format", "json"]) == 0
    plot = json.loads(capsys.readouterr().out)
    assert plot["data"]["names"] == [i["name"] for i in data["inputs"]]
    for name, eff in zip(plot["data"]["names"], plot["data"]["effect"]):
        want = next(i["effect"] for i in data["inputs"] if i["name"] == name)
        assert eff == pytest.approx(want, rel=1e-12)  # step_time is shown in s (factor 1)
    assert is_svg(tmp_path / "t2.svg")


def test_sweep_and_pareto_from_the_cli(tmp_path, capsys, setup):
    lib, model, values, _ = setup
    assert main(["plot", "sweep", "--set", "dp=4,8,16", "--of", "step_time", "-o",
                 str(tmp_path / "s.png"), "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)["data"]
    res = model.evaluate(dict(values, dp=np.array([4.0, 8.0, 16.0])))
    assert d["x"] == [4.0, 8.0, 16.0]
    assert d["step_time (s)"] == pytest.approx(list(res["step_time"]), rel=1e-12)
    assert main(["plot", "pareto", "--set", "dp=4,8,16", "--set", "tp=4,8", "--of",
                 "step_time,memory_per_gpu", "-o", str(tmp_path / "p.svg"),
                 "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)["data"]
    assert len(d["x"]) == 6 and is_svg(tmp_path / "p.svg")
    front = d["front"]
    for i in range(6):  # nothing off the front beats a front point on both axes
        for f in front:
            assert not (d["x"][i] < d["x"][f] and d["y"][i] < d["y"][f])


def test_pareto_front_and_line_plot_take_plain_arrays(tmp_path):
    x = [1, 2, 3, 4, 5]
    y = [5, 3, 4, 1, 2]
    assert P.pareto_front(x, y).tolist() == [0, 1, 3]
    p = P.line_plot(["N7", "N5", "N3", "N2"], {"cost per die (USD)": [10, 12, 15, 21]},
                    tmp_path / "tech.png", kind="scaling")
    assert p.data["x"] == ["N7", "N5", "N3", "N2"] and p.data["cost per die (USD)"][3] == 21
    assert is_png(p.path)


def test_run_plot_and_bad_names(tmp_path, capsys):
    assert main(["run", "--set", "dp=8,16", "--plot", str(tmp_path / "g.png")]) == 0
    assert is_png(tmp_path / "g.png") and "2 bars" in capsys.readouterr().err
    assert main(["run", "--plot", str(tmp_path / "g.pdf")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("flopsheet: error:") and ".png or .svg" in err
    assert not list(tmp_path.glob(".g.pdf*"))  # no temporary file left behind
