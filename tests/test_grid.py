"""Grids: range arithmetic, crossed vs zipped sizes, row order, limits, bad input, outputs."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from flopsheet.cli import main
from flopsheet.grid import Axis, Grid, GridError, axis_values, expand_range
from flopsheet.sweeps import sweep

from conftest import run_scenario


def test_ranges_include_both_ends():
    assert expand_range("1..64:x2") == [1, 2, 4, 8, 16, 32, 64]
    assert expand_range("2048..32768:x2") == [2048, 4096, 8192, 16384, 32768]
    assert expand_range("512..4096:+512") == [512 * k for k in range(1, 9)]
    assert expand_range("1..5") == [1, 2, 3, 4, 5]
    assert expand_range("1..100:x3") == [1, 3, 9, 27, 81]  # the end need not be reached
    assert expand_range("0.5..1:+0.25") == [0.5, 0.75, 1.0]
    assert axis_values(["1..4:x2", 16]) == [1, 2, 4, 16]


@pytest.mark.parametrize("bad", ["8..2", "1..8:x1", "0..8:x2", "1..8:+0", "a..b", "1..1e9"])
def test_bad_ranges_are_refused(bad):
    with pytest.raises(GridError):
        expand_range(bad)


def test_size_is_the_product_of_groups_and_rows_are_row_major():
    a, b, c = Axis("tp", [1, 2, 4]), Axis("pp", [1, 2]), Axis("dp", [10, 20])
    for ax in (a, b, c):
        ax.encoded = np.asarray(ax.values, dtype=float)
    crossed = Grid([[a], [b], [c]])
    assert crossed.size == 12 and crossed.shape == (3, 2, 2)
    cols = crossed.columns(0, 12)
    assert list(cols["tp"]) == [1] * 4 + [2] * 4 + [4] * 4
    assert list(cols["dp"]) == [10, 20] * 6
    part = crossed.columns(5, 9)  # a chunk is the same rows as the slice of the whole
    assert all(np.array_equal(part[k], cols[k][5:9]) for k in cols)
    zipped = Grid([[b, c], [a]])
    assert zipped.size == 6
    z = zipped.columns(0, 6)
    assert list(zip(z["pp"], z["dp"])) == [(1, 10)] * 3 + [(2, 20)] * 3
    huge = Grid([[Axis("x", list(range(10**6)))]] * 3)
    assert huge.size == 10**18  # exact, no overflow, nothing allocated
    with pytest.raises(GridError, match=r"1,000,000,000,000,000,000 configurations"):
        huge.check_size(5_000_000)


def test_set_lists_cross_and_match_single_runs(model):
    df = sweep("gpt3-175b-sc21", {"tp": [2, 4, 8], "pp": [8, 16]}, ["step_time", "memory_per_gpu"])
    assert len(df) == 6
    assert list(zip(df.tp, df.pp)) == [(t, p) for t in (2, 4, 8) for p in (8, 16)]
    for _, r in df.iterrows():
        one = run_scenario(model, "gpt3-175b-sc21", tp=r.tp, pp=r.pp)
        assert r.step_time == pytest.approx(one.scalar("step_time"), rel=1e-12)
        assert r.memory_per_gpu == pytest.approx(one.scalar("memory_per_gpu"), rel=1e-12)
    z = sweep("gpt3-175b-sc21", {"tp": [2, 4], "pp": [8, 16]}, "step_time", zip=True)
    assert list(zip(z.tp, z.pp)) == [(2, 8), (4, 16)]


def test_cli_grid_table_and_outputs(tmp_path, capsys):
    out = tmp_path / "r.csv"
    rc = main(["run", "gpt3-175b-sc21", "--set", "tp=2,4,8", "--set", "pp=8,16", "--outputs",
               "step_time,memory_per_gpu", "--sort", "step_time", "-o", str(out)])
    text = capsys.readouterr().out
    assert rc == 0 and "6 configurations, 6 kept" in text
    df = pd.read_csv(out)
    assert len(df) == 6 and df.step_time.min() == pytest.approx(
        pd.read_csv(out).sort_values("step_time").step_time.iloc[0])
    first_row = [ln for ln in text.splitlines() if ln.strip().startswith("8  16")]
    assert first_row, "the fastest (tp 8, pp 16) is printed first when sorted by step_time"
    for ext in ("json", "parquet"):
        p = tmp_path / f"r.{ext}"
        assert main(["run", "gpt3-175b-sc21", "--set", "tp=2,4", "--outputs", "step_time",
                     "-o", str(p), "--quiet"]) == 0
        back = pd.read_parquet(p) if ext == "parquet" else pd.DataFrame(json.loads(p.read_text()))
        assert list(back.tp) == [2, 4]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # atomic: no leftovers


@pytest.mark.parametrize("args, message", [
    (["--set", "tpp=2,4"], "unknown axis `tpp` (did you mean tp"),
    (["--set", "tp=8..2"], "range `8..2` is empty"),
    (["--set", "step_time=1,2"], "axis `step_time` is a formula node"),
    (["--set", "tp=1,2", "--where", "memory_per_gpux < 1"], "names unknown `memory_per_gpux`"),
    (["--set", "seq_len=1..100000", "--set", "global_batch=1..100"],
     "the grid has 10,000,000 configurations"),
    (["--set", "tp=1,2,4", "--set", "pp=1,2", "--zip"], "zipped axes need equal lengths"),
])
def test_bad_grids_are_one_line_exit_2(args, message, capsys):
    rc = main(["run", "gpt3-175b-sc21", "--outputs", "step_time"] + args)
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and err.startswith("flopsheet: error:") and message in err


def test_node_axis_when_allowed_overrides_every_row():
    df = sweep("gpt3-175b-sc21", {"step_time": [10, 20]}, ["tokens_per_second"],
               allow_nodes=True)
    assert df.tokens_per_second.iloc[0] == pytest.approx(2 * df.tokens_per_second.iloc[1])


def test_sweep_file_axes_zip_sample_constraints(tmp_path, capsys):
    from flopsheet.scenario import bundled_templates
    from flopsheet.sweeps import load_sweep
    path = bundled_templates() / "sweeps" / "gpt3-175b-layouts.yaml"
    job, sc, settings = load_sweep(str(path))
    assert job.grid.size == 3 * 3 * 2 * 8 and settings["sort"] == "step_time"
    cols = job.grid.columns(0, job.size)
    pairs = set(zip(cols["seq_len"], cols["global_batch"]))
    assert pairs == {(2048.0, 1536.0), (4096.0, 768.0)}  # zipped, not crossed
    g = np.unique(cols["gemm_efficiency"])
    assert len(g) == 8 and 0.6 < g.min() and g.max() < 0.85
    # Latin hypercube: one sample in each eighth of the triangular(0.6, 0.75, 0.85) CDF
    a, c, b = 0.6, 0.75, 0.85
    cdf = np.where(g < c, (g - a) ** 2 / ((b - a) * (c - a)), 1 - (b - g) ** 2 / ((b - a) * (b - c)))
    assert sorted(np.floor(cdf * 8).astype(int)) == list(range(8))
    assert main(["sweep", str(path), "--quiet", "--top", "3"]) == 0
    assert "dropped        96  memory_per_gpu <= hbm_capacity" in capsys.readouterr().out


def test_sweep_file_bad_constraint_names_the_line(tmp_path, capsys):
    p = tmp_path / "s.yaml"
    p.write_text("doc: x\nscenario: gpt3-175b-sc21\naxes:\n  tp: [1, 2]\n"
                 "constraints: [\"memory_per_gpu <= hbm\"]\noutputs: [step_time]\n")
    assert main(["sweep", str(p)]) == 2
    err = capsys.readouterr().err
    assert f"{p}:5:" in err and "names unknown `hbm`" in err and err.count("\n") == 1
    p.write_text("doc: x\nscenario: gpt3-175b-sc21\naxes:\n  tp: {values: [1, 2], zip: a}\n"
                 "  pp: {values: [1, 2, 4], zip: a}\noutputs: [step_time]\n")
    assert main(["sweep", str(p)]) == 2
    assert "zipped axes need equal lengths: tp (2), pp (3)" in capsys.readouterr().err
