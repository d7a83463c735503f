"""The command line: tables for people, JSON for scripts, one clear line and exit 2 on bad input."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from flopsheet.audit import show
from flopsheet.cli import main
from flopsheet.evaluate import Model
from flopsheet.library import load_library
from flopsheet.scenario import bundled_templates, load_scenario, resolve

from conftest import SMALL


def cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _python_values(scenario, *names, sets=()):
    lib = load_library()
    model = Model(lib)
    res = model.evaluate(resolve(load_scenario(scenario, list(sets)), model))
    return lib, {n: res.scalar(n) for n in names}


def test_run_default_scenario(capsys):
    code, out, err = cli(capsys, "run")
    assert code == 0 and not err
    assert "gpt3-175b-sc21" in out
    lib, v = _python_values("gpt3-175b-sc21", "time_to_train", "step_time")
    for name in v:  # the table shows the Python values in engineering notation
        row = next(line for line in out.splitlines() if line.startswith(name + " "))
        assert show(lib, name, v[name]) in row
    assert v["time_to_train"] > 86400 and " d " in out  # days


def test_run_json_and_outputs(capsys):
    code, out, _ = cli(capsys, "run", "gpt3-175b-sc21", "--json", "--outputs", "step_time,n_gpus")
    data = json.loads(out)
    assert code == 0 and list(data["outputs"]) == ["step_time", "n_gpus"]
    assert data["outputs"]["n_gpus"]["value"] == 1024
    assert data["outputs"]["step_time"]["unit"] == "s"


def test_run_set_overrides_and_sweeps(capsys):
    code, out, _ = cli(capsys, "run", "--set", "achieved_flops_per_gpu=280 TFLOP/s", "--json",
                       "--outputs", "time_to_train")
    half = json.loads(out)["outputs"]["time_to_train"]["value"]
    code, out, _ = cli(capsys, "run", "--set", "achieved_flops_per_gpu=140 TFLOP/s", "--json",
                       "--outputs", "time_to_train")
    assert half == pytest.approx(json.loads(out)["outputs"]["time_to_train"]["value"] / 2)
    code, out, _ = cli(capsys, "run", "--set", "dp=8,16,32", "--json", "--outputs", "n_gpus,step_time")
    data = json.loads(out)["outputs"]
    assert data["n_gpus"]["value"] == [1024, 2048, 4096]  # tp 8 x pp 16 x dp and len(data["step_time"]["value"]) == 3
    _, v = _python_values("gpt3-175b-sc21", "step_time", sets=["dp=32"])
    assert data["step_time"]["value"][2] == pytest.approx(v["step_time"], rel=1e-12)
    code, out, _ = cli(capsys, "run", "--set", "dp=8,16,32", "--outputs", "step_time")
    assert "3 configurations, 3 kept" in out and "dp" in out  # a grid table (issue 14)


def test_explain_shows_formula_values_and_origins(capsys):
    code, out, _ = cli(capsys, "explain", "achieved_flops_per_gpu", "gpt3-175b-sc21", "--set", "cp=2",
                       "--depth", "0")
    assert code == 0
    assert "formula  hardware_flops_per_step/(n_gpus*step_time)" in out
    assert "from     templates/scenarios/gpt3-175b-sc21.yaml:" in out
    assert "from     --set" in out  # cp
    assert "from     default (formulas/constants.yaml:" in out
    assert "layers = 96" in out and "templates/models/gpt3-175b.yaml:4" in out
    code, out, _ = cli(capsys, "explain", "mfu", "--depth", "0")
    assert "inputs   shown above" in out  # a node used twice is expanded once


def test_explain_marks_overrides(capsys):
    code, out, _ = cli(capsys, "explain", "achieved_flops_per_gpu", "--set", "hardware_flops_per_step=1e21")
    assert "overridden node" in out and "replaces hardware_flops_per_token*tokens_per_step" in out


def test_sensitivity_table(capsys):
    code, out, _ = cli(capsys, "sensitivity", "--of", "step_time", "--top", "3")
    lines = out.splitlines()
    assert code == 0 and lines[4].split() == ["input", "value", "typical", "change", "effect",
                                              "on", "step_time", "elasticity", "derivative"]
    assert all(len(row.split()) >= 6 for row in lines[6:9])
    assert lines[9].startswith("(") and "more; --top 0 for all" in lines[9]
    assert "more; --top 0 for all" in out
    code, out, _ = cli(capsys, "sensitivity", "--of", "time_to_train", "--json", "--top", "0")
    data = json.loads(out)
    assert data["elasticities"]["train_tokens"] == pytest.approx(1)


def test_check_and_list(capsys, write_lib):
    code, out, _ = cli(capsys, "check")
    assert code == 0 and "0 problems" in out
    code, out, _ = cli(capsys, "list", "inputs")
    assert "seq_len" in out and "none|selective|full" in out
    code, out, _ = cli(capsys, "list", "templates", "--json")
    assert "scenarios/gpt3-175b-sc21" in json.loads(out)
    root = write_lib({"net.yaml": SMALL.replace("    source: test\n", "", 1)})
    code, out, _ = cli(capsys, "check", "--formulas-only", "--formulas", str(root))
    assert code == 1 and "bytes_moved: input has no `source:`" in out
    assert "warning:" in out and "chosen_time" in out


@pytest.mark.parametrize("argv, fragment", [
    (["run", "no-such-scenario"], "no scenario or preset `no-such-scenario`"),
    (["run", "--set", "tp=0"], "--set: tp: value 0 is outside the bounds"),
    (["run", "--set", "recompute=half"], "`half` is not a choice of `recompute`"),
    (["run", "--set", "tpp=2"], "did you mean tp"),
    (["run", "--outputs", "stepp_time"], "did you mean step_time"),
    (["explain", "nothing_here"], "no input or node named `nothing_here`"),
    (["sensitivity", "--of", "recompute"], "not a numeric formula node"),
    (["run", "--set", "dp=2.5"], "--set: dp: value 2.5 must be a whole number"),
    (["run", "--set", "hbm_bandwidth=0"], "memory_rate=0"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, fragment):
    code, out, err = cli(capsys, *argv)
    assert code == 2 and not out
    assert err.count("\n") == 1 and err.startswith("flopsheet: error: ")
    assert fragment in err


def test_bad_formula_file_names_file_and_line(capsys, write_lib):
    root = write_lib({"net.yaml": SMALL.replace("bytes_moved/link_bw\n", "bytes_moved.x/link_bw\n", 1)})
    code, out, err = cli(capsys, "check", "--formulas-only", "--formulas", str(root))
    assert code == 2 and "net.yaml:29: ring_time: attribute access is not allowed" in err


@pytest.mark.skipif(shutil.which("flopsheet") is None, reason="console script not installed")
def test_console_script_entry_point():
    p = subprocess.run(["flopsheet", "run", "--json", "--outputs", "n_gpus"], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0 and json.loads(p.stdout)["outputs"]["n_gpus"]["value"] == 1024
    p = subprocess.run([sys.executable, "-m", "flopsheet.cli", "run", "nope"], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 2 and p.stderr.startswith("flopsheet: error:")


def test_list_calibration_names_each_constant_per_preset_with_its_origin(capsys):
    code, out, _ = cli(capsys, "list", "calibration", "--json")
    assert code == 0
    rows = json.loads(out)
    by = {(r["constant"], r["preset"]): r for r in rows}
    assert by[("gemm_efficiency", "(library default)")]["value"] == "0.75"
    assert by[("gemm_efficiency", "hardware/b200")]["value"] == "0.54"
    # a preset that takes the constant through `use:` names the file that set it
    assert by[("gemm_efficiency", "hardware/gb200")]["set_in"].startswith("templates/hardware/b200.yaml:")
    assert by[("kernel_launch_overhead", "(library default)")]["value"] == "4 µs"
    assert by[("scaleout_efficiency", "systems/gcp-tcpxo")]["value"] == "0.91"
    hardware = {p.stem for p in (bundled_templates() / "hardware").glob("*.yaml")}
    for constant in ("gemm_efficiency", "attention_efficiency"):
        assert {r["preset"] for r in rows if r["constant"] == constant} >= {f"hardware/{h}" for h in hardware}
    long_source = max(rows, key=lambda r: len(r["source"]))["source"]
    assert len(long_source) > 200  # --json keeps the whole source
    code, out, _ = cli(capsys, "list", "calibration")
    assert code == 0 and "hardware/mi355x" in out and "..." in out and long_source not in out


def test_list_calibration_of_a_library_of_ones_own_gives_its_defaults(capsys, write_lib):
    """The bundled presets are written for the bundled library; a --formulas-only library lists its own defaults."""
    root = write_lib({"net.yaml": SMALL.replace("doc: Link bandwidth", "doc: Calibration - link bandwidth", 1)})
    code, out, err = cli(capsys, "list", "calibration", "--json", "--formulas-only", "--formulas", str(root))
    assert code == 0, err
    rows = json.loads(out)
    assert [r["preset"] for r in rows] == ["(library default)"] * len(rows) and rows
