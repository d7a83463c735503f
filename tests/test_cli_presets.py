"""`--use PRESET` on the command line means the same on every command that takes it.

Each command runs three times: on a scenario, on that scenario with `--use hardware/b200`,
and on a scenario file whose own `use:` list names the same scenario and then the preset.
The second and third must agree number for number, and differ from the first - a command
that parsed `--use` and then dropped it (search, uncertainty and export did) reads the
scenario's own hardware and fails here.
"""
from __future__ import annotations

import argparse
import json

import pytest

from flopsheet.cli import _parser, main

SCENARIO = "sc21-table1-1.7b"
PRESET = "hardware/b200"
# a spread on a value the hardware preset leaves alone, so `uncertainty` has one to sample
SPREAD = "  pp_comm_overlap: {value: 0.5, range: [0, 1], source: test}\n"


def _json(capsys, argv: list[str]):
    assert main(argv) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _step_time_in_workbook(path) -> float:
    from openpyxl import load_workbook
    wb = load_workbook(path, data_only=True)  # the values the writer cached
    sheet, coord = next(iter(wb.defined_names["step_time"].destinations))
    return float(wb[sheet][coord.replace("$", "")].value)


def _search(capsys, scenario, extra):
    data = _json(capsys, ["search", scenario, "--gpus", "32", "--quiet", "--top", "3",
                          "--axis", "recompute=selective", "--axis", "zero_stage=1",
                          "--json", *extra])
    return [round(r["step_time"], 12) for r in data["best"]] + [data["feasible"]]


def _uncertainty(capsys, scenario, extra):
    data = _json(capsys, ["uncertainty", scenario, "--of", "step_time", "--samples", "64",
                          "--sobol", "0", "--quiet", "--format", "json", *extra])
    return [data[0]["nominal"], data[0]["mean"]]


def _export(capsys, scenario, extra, tmp_path):
    out = tmp_path / f"w{len(list(tmp_path.iterdir()))}.xlsx"
    _json(capsys, ["export", scenario, "-o", str(out), "--no-sensitivity", "--json", *extra])
    return [_step_time_in_workbook(out)]


def _run(capsys, scenario, extra, cmd):
    data = _json(capsys, [cmd, scenario, "--set", "dp=16,32", "--json", "--quiet", *extra])
    return data["outputs"]["step_time"]["value"]


def _explain(capsys, scenario, extra):
    return _json(capsys, ["explain", "step_time", scenario, "--json", *extra])["value"]


def _sensitivity(capsys, scenario, extra):
    data = _json(capsys, ["sensitivity", scenario, "--of", "step_time", "--top", "3",
                          "--json", *extra])
    return json.dumps(data, sort_keys=True)


def _plot(capsys, scenario, extra, tmp_path):
    out = tmp_path / f"p{len(list(tmp_path.iterdir()))}.png"
    return _json(capsys, ["plot", "breakdown", scenario, "-o", str(out), "--json",
                          *extra])["data"]


def _report(capsys, scenario, extra, tmp_path):
    out = tmp_path / f"r{len(list(tmp_path.iterdir()))}.html"
    assert main(["report", scenario, "-o", str(out), *extra]) == 0, capsys.readouterr().err
    capsys.readouterr()
    text = out.read_text()
    return "hardware/b200" in text  # the page lists the presets applied


COMMANDS = {
    "run": lambda c, s, e, t: _run(c, s, e, "run"),
    "explain": lambda c, s, e, t: _explain(c, s, e),
    "sensitivity": lambda c, s, e, t: _sensitivity(c, s, e),
    "search": lambda c, s, e, t: _search(c, s, e),
    "uncertainty": lambda c, s, e, t: _uncertainty(c, s, e),
    "export": _export,
    "plot": _plot,
    "report": _report,
}


def test_every_command_that_takes_use_is_checked_here():
    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    takes_use = {name for name, sp in sub.choices.items()
                 if any("--use" in a.option_strings for a in sp._actions)}
    assert takes_use == set(COMMANDS)


@pytest.mark.parametrize("cmd", sorted(COMMANDS))
def test_use_on_the_command_line_equals_use_in_the_file(cmd, capsys, tmp_path):
    spread = SPREAD if cmd == "uncertainty" else ""
    base = tmp_path / "base.yaml"
    base.write_text(f"doc: the scenario\nuse: [scenarios/{SCENARIO}]\nvalues:\n{spread or '  {}'}"
                    .replace("values:\n  {}", "values: {}"))
    chained = tmp_path / "chained.yaml"
    chained.write_text(f"doc: the scenario, then the preset\nuse: [{base}, {PRESET}]\n")
    work = tmp_path / "out"
    work.mkdir()
    run = COMMANDS[cmd]
    without = run(capsys, str(base), [], work)
    with_use = run(capsys, str(base), ["--use", PRESET], work)
    in_file = run(capsys, str(chained), [], work)
    assert with_use == in_file
    assert with_use != without


def test_format_json_and_csv_reach_grids_and_search(capsys):
    grid = _json(capsys, ["run", SCENARIO, "--set", "dp=16,32", "--quiet", "--format", "json"])
    assert len(grid["rows"]) == 2
    assert main(["search", SCENARIO, "--gpus", "32", "--quiet", "--top", "2", "--axis",
                 "recompute=selective", "--axis", "zero_stage=1", "--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines[0].split(",")
    assert len(lines) == 3 and "step_time" in header and "tp" in header
    row = dict(zip(header, lines[1].split(",")))
    assert int(row["tp"]) * int(row["pp"]) * int(row["dp"]) * int(row["cp"]) == 32
    assert float(row["step_time"]) > 0  # plain seconds, no unit text
    from flopsheet.scenario import bundled_templates
    sweep = bundled_templates() / "sweeps" / "gpt3-175b-layouts.yaml"
    assert main(["sweep", str(sweep), "--quiet", "--top", "2", "--format", "markdown"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert len(table) == 4 and table[0].startswith("|") and "step_time" in table[0]


@pytest.mark.parametrize("cmd", [["uncertainty", SCENARIO, "--of", "step_time"],
                                 ["export", SCENARIO, "-o"], ["plot", "breakdown", "-o"],
                                 ["explain", "step_time", SCENARIO]])
def test_a_format_a_command_cannot_print_is_refused(cmd, capsys, tmp_path):
    target = [str(tmp_path / "out.bin")] if cmd[-1] == "-o" else []
    with pytest.raises(SystemExit):
        main([*cmd, *target, "--format", "csv"])
    assert "invalid choice: 'csv'" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # refused before anything was written
