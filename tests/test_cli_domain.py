"""The CLI reads like the domain: %, names of categorical results, W/kWh/USD, sensitivity
ranked by the effect of a typical change, --formulas adding to the library, presets composed
on the command line, validation points as scenarios, --format."""
from __future__ import annotations

import csv
import io
import json
import textwrap

import pytest

from flopsheet import units
from flopsheet.cli import main
from flopsheet.evaluate import Model
from flopsheet.fmt import format_value
from flopsheet.library import load_library
from flopsheet.scenario import load_scenario, resolve


def cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def dim(u):
    return units.parse_unit(u)[0]


def test_domain_units():
    assert format_value(0.36575, dim("1"), "%") == "36.6 %"
    assert format_value(400.0, dim("W")) == "400 W"
    assert format_value(3.6e9 * 377.3, dim("J")) == "377.3 MWh"
    assert format_value(5.4e6, dim("J")) == "1.5 kWh"
    assert format_value(1234567.8, dim("USD")) == "1,234,568 USD"
    assert format_value(12.5, dim("USD")) == "12.50 USD"
    assert format_value(0.1265, dim("s")) == "126.5 ms"
    assert format_value(2, dim("1"), labels={1: "ring", 2: "tree"}) == "tree"


def test_run_prints_percent_and_algorithm_names(capsys):
    lib = load_library()
    model = Model(lib)
    res = model.evaluate(resolve(load_scenario("gpt3-175b-sc21"), model))
    code, out, _ = cli(capsys, "run", "--outputs", "mfu,tp_allreduce_auto_algorithm,"
                       "dp_allreduce_auto_algorithm,training_energy")
    rows = {line.split()[0]: line.split()[1:3] for line in out.splitlines()[5:] if line.strip()}
    assert rows["mfu"] == [f"{res.scalar('mfu') * 100:.1f}", "%"]
    labels = lib.nodes["tp_allreduce_auto_algorithm"].labels
    assert rows["tp_allreduce_auto_algorithm"][0] == labels[int(res.scalar(
        "tp_allreduce_auto_algorithm"))] == "ring"
    assert rows["dp_allreduce_auto_algorithm"][0] == "tree"
    assert rows["training_energy"][1] == "MWh"
    assert float(rows["training_energy"][0]) == pytest.approx(
        res.scalar("training_energy") / 3.6e9, rel=1e-3)


def test_labels_must_name_whole_numbers(write_lib, capsys):
    root = write_lib({"x.yaml": """
        doc: x
        inputs:
          a: {unit: "1", default: 1, doc: a, source: test}
        nodes:
          pick:
            expr: a
            unit: "1"
            labels: {one: ring}
            doc: d
            source: test
        """})
    code, _, err = cli(capsys, "check", "--formulas-only", "--formulas", str(root))
    assert code == 2 and "labels" in err and "pick" in err


def test_sensitivity_ranks_a_zero_valued_input(capsys):
    code, out, _ = cli(capsys, "sensitivity", "--of", "step_time", "--top", "0", "--json")
    data = json.loads(out)
    names = [i["name"] for i in data["inputs"]]
    tp = next(i for i in data["inputs"] if i["name"] == "tp_comm_overlap")
    assert tp["value"] == 0 and tp["elasticity"] is None
    # d step_time / d overlap x 10 % of the overlap's range [0, 1]
    assert tp["typical_change"] == pytest.approx(0.1)
    assert tp["effect"] == pytest.approx(tp["derivative"] * 0.1)
    assert tp["effect"] < 0
    # it outranks inputs whose elasticity is nonzero but whose typical effect is smaller
    smaller = [i for i in data["inputs"][names.index("tp_comm_overlap") + 1:]
               if i["elasticity"] not in (None, 0)]
    assert smaller and all(abs(i["effect"]) <= abs(tp["effect"]) for i in smaller)
    effects = [abs(i["effect"]) for i in data["inputs"]]
    assert effects == sorted(effects, reverse=True)


def test_formulas_adds_a_file_to_the_bundled_library(tmp_path, capsys):
    extra = tmp_path / "extra.yaml"
    extra.write_text(textwrap.dedent("""
        doc: A user's own quantity on top of the bundled library.
        nodes:
          step_time_per_layer:
            expr: step_time/layers
            unit: s
            doc: Step time per transformer layer.
            source: "derived: test"
        """))
    code, out, _ = cli(capsys, "run", "--formulas", str(extra), "--outputs",
                       "step_time,step_time_per_layer", "--format", "json")
    o = json.loads(out)["outputs"]
    assert code == 0
    assert o["step_time_per_layer"]["value"] == pytest.approx(o["step_time"]["value"] / 96)
    code, _, err = cli(capsys, "run", "--formulas-only", "--formulas", str(extra))
    assert code == 2 and err.startswith("flopsheet: error:") and "step_time" in err


def test_presets_compose_on_the_command_line(capsys):
    code, out, _ = cli(capsys, "run", "--use", "models/llama3-70b", "--use",
                       "hardware/h100-sxm5-80gb", "--use", "systems/dgx-h100-superpod",
                       "--set", "tp=8", "--format", "json", "--outputs", "tp,hbm_capacity,layers")
    data = json.loads(out)
    assert code == 0 and data["notes"] == []
    assert data["outputs"]["tp"]["value"] == 8 and data["outputs"]["layers"]["value"] == 80
    assert data["outputs"]["hbm_capacity"]["value"] == 80e9
    code, out, _ = cli(capsys, "run", "models/llama3-70b", "--outputs", "step_time")
    notes = [line for line in out.splitlines() if line.startswith("note")]
    assert len(notes) == 2 and "no hardware preset" in notes[0] and "peak_flops_bf16" in notes[0]
    assert "no systems preset" in notes[1]


def test_validation_point_runs_as_a_scenario(capsys):
    code, out, _ = cli(capsys, "run", "validation:train-korthikanti-22b-selective-sp")
    assert code == 0 and "published measurement" in out
    row = next(line for line in out.splitlines() if line.startswith("iteration_time"))
    assert "1.1 s" in row and "±10 %" in row
    code, _, err = cli(capsys, "run", "validation:no-such-point")
    assert code == 2 and "no validation point" in err
    # --outputs that leave out the measured node still compare it (was a KeyError)
    code, out, _ = cli(capsys, "run", "validation:train-korthikanti-22b-selective-sp", "--outputs", "tp")
    assert code == 0 and "published measurement" in out and "iteration_time" in out


def test_formats(capsys):
    code, out, _ = cli(capsys, "run", "--outputs", "step_time,mfu", "--format", "csv")
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == ["output", "value", "unit", "shown", "note"]
    assert rows[2][0] == "mfu" and rows[2][3].endswith(" %")
    code, out, _ = cli(capsys, "run", "--outputs", "step_time", "--format", "markdown")
    assert out.startswith("| output | value |") and "| step_time |" in out


def test_suggestions_are_not_repeated(capsys):
    code, _, err = cli(capsys, "run", "gpt3-175b-sc2")
    assert code == 2
    hint = err[err.index("did you mean"):]
    names = [n.strip(" ?)") for n in hint[len("did you mean"):].split(",")]
    assert len(names) == len(set(names))
