"""The command line: tables for people, JSON for scripts, one clear line and exit 2 on bad input."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from flopsheet.cli import main

from conftest import SMALL


def cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_run_default_scenario(capsys):
    code, out, err = cli(capsys, "run")
    assert code == 0 and not err
    assert "gpt3-175b-sc21" in out
    assert "34.73 d" in out  # time_to_train, engineering notation
    assert "step_time" in out and "31.47 s" in out


def test_run_json_and_outputs(capsys):
    code, out, _ = cli(capsys, "run", "gpt3-175b-sc21", "--json", "--outputs", "step_time,n_gpus")
    data = json.loads(out)
    assert code == 0 and list(data["outputs"]) == ["step_time", "n_gpus"]
    assert data["outputs"]["n_gpus"]["value"] == 1024
    assert data["outputs"]["step_time"]["unit"] == "s"


def test_run_set_overrides_and_sweeps(capsys):
    code, out, _ = cli(capsys, "run", "--set", "achieved_flops_per_gpu=280 TFLOP/s", "--json",
                       "--outputs", "step_time")
    half = json.loads(out)["outputs"]["step_time"]["value"]
    code, out, _ = cli(capsys, "run", "--json", "--outputs", "step_time")
    assert half == pytest.approx(json.loads(out)["outputs"]["step_time"]["value"] / 2)
    code, out, _ = cli(capsys, "run", "--set", "dp=8,16,32", "--json", "--outputs", "step_time")
    times = json.loads(out)["outputs"]["step_time"]["value"]
    assert len(times) == 3 and times[0] == pytest.approx(2 * times[1]) == pytest.approx(4 * times[2])
    code, out, _ = cli(capsys, "run", "--set", "dp=8,16,32", "--outputs", "step_time")
    assert "#2" in out and "dp" in out


def test_explain_shows_formula_values_and_origins(capsys):
    code, out, _ = cli(capsys, "explain", "step_time", "gpt3-175b-sc21", "--set", "cp=2", "--depth", "0")
    assert code == 0
    assert "formula  hardware_flops_per_step/(n_gpus*achieved_flops_per_gpu)" in out
    assert "from     templates/scenarios/gpt3-175b-sc21.yaml:11" in out  # achieved_flops_per_gpu
    assert "from     --set" in out  # cp
    assert "from     default (formulas/constants.yaml:" in out
    assert "layers = 96" in out and "templates/models/gpt3-175b.yaml:4" in out
    code, out, _ = cli(capsys, "explain", "hfu", "--depth", "0")
    assert out.count("hardware_flops_per_step = ") == 2 and "shown above" in out  # expanded once


def test_explain_marks_overrides(capsys):
    code, out, _ = cli(capsys, "explain", "step_time", "--set", "hardware_flops_per_step=1e21")
    assert "overridden node" in out and "replaces hardware_flops_per_token*tokens_per_step" in out


def test_sensitivity_table(capsys):
    code, out, _ = cli(capsys, "sensitivity", "--of", "step_time", "--top", "3")
    lines = out.splitlines()
    assert code == 0 and lines[3].split() == ["input", "elasticity", "value", "derivative"]
    assert all(len(row.split()) >= 4 for row in lines[5:8])
    assert lines[8].startswith("(") and "more; --top 0 for all" in lines[8]
    assert "more; --top 0 for all" in out
    code, out, _ = cli(capsys, "sensitivity", "--of", "step_time", "--json")
    data = json.loads(out)
    assert data["elasticities"]["achieved_flops_per_gpu"] == pytest.approx(-1)


def test_check_and_list(capsys, write_lib):
    code, out, _ = cli(capsys, "check")
    assert code == 0 and "0 problems" in out
    code, out, _ = cli(capsys, "list", "inputs")
    assert "seq_len" in out and "none|selective|full" in out
    code, out, _ = cli(capsys, "list", "templates", "--json")
    assert "scenarios/gpt3-175b-sc21" in json.loads(out)
    root = write_lib({"net.yaml": SMALL.replace("    source: test\n", "", 1)})
    code, out, _ = cli(capsys, "check", "--formulas", str(root))
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
    (["run", "--set", "achieved_flops_per_gpu=0"], "step_time: evaluates to inf"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, fragment):
    code, out, err = cli(capsys, *argv)
    assert code == 2 and not out
    assert err.count("\n") == 1 and err.startswith("flopsheet: error: ")
    assert fragment in err


def test_bad_formula_file_names_file_and_line(capsys, write_lib):
    root = write_lib({"net.yaml": SMALL.replace("bytes_moved/link_bw\n", "bytes_moved.x/link_bw\n", 1)})
    code, out, err = cli(capsys, "check", "--formulas", str(root))
    assert code == 2 and "net.yaml:29: ring_time: attribute access is not allowed" in err


@pytest.mark.skipif(shutil.which("flopsheet") is None, reason="console script not installed")
def test_console_script_entry_point():
    p = subprocess.run(["flopsheet", "run", "--json", "--outputs", "n_gpus"], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0 and json.loads(p.stdout)["outputs"]["n_gpus"]["value"] == 1024
    p = subprocess.run([sys.executable, "-m", "flopsheet.cli", "run", "nope"], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 2 and p.stderr.startswith("flopsheet: error:")
