"""Search: factorizations, masks with reasons checked against single evaluations, non-finite
rows masked, objectives and --where, and the published configurations of SC21 / Korthikanti."""
from __future__ import annotations

from math import comb

import numpy as np
import pytest

from flopsheet.cli import main
from flopsheet.layout_search import divisors, factorizations, load_space, run_search, search
from flopsheet.sweeps import sweep

from conftest import run_scenario

KNOBS = ["tp", "pp", "dp", "cp", "vpp", "micro_batch", "recompute", "zero_stage",
         "sequence_parallel"]


def test_factorizations_are_every_ordered_tuple():
    f = factorizations(1024, 4)
    assert len(f) == comb(10 + 3, 3)  # 2^10 into 4 ordered factors: stars and bars
    assert (f.prod(axis=1) == 1024).all() and len({tuple(r) for r in f}) == len(f)
    g = factorizations(1536, 4)  # 2^9 * 3: C(12,3) * C(4,3)
    assert len(g) == comb(12, 3) * comb(4, 3) and (g.prod(axis=1) == 1536).all()
    assert divisors(36) == [1, 2, 3, 4, 6, 9, 12, 18, 36]


@pytest.fixture(scope="module")
def korthikanti():
    return run_search("korthikanti-table5-175b-selective-sp", 64)


def test_every_row_is_kept_or_dropped_for_its_first_broken_rule(korthikanti, model):
    r = korthikanti
    df = r.frame
    space = load_space()
    labels = [c.label for c in space.checks]
    assert r.candidates == len(factorizations(64, 4)) * 6 * 4 * 3 * 4 * 2
    assert set(r.reasons) <= set(labels) and r.feasible == (df.reason == "").sum() > 0
    rng = np.random.default_rng(0)
    picks = [df[df.reason == ""].index[:3]]
    for reason in r.reasons:
        idx = df.index[df.reason == reason]
        picks.append(rng.choice(idx, size=min(2, len(idx)), replace=False))
    from flopsheet.chunks import _compiled
    for i in np.concatenate(picks):
        row = df.loc[i]
        one = run_scenario(model, "korthikanti-table5-175b-selective-sp",
                           **{k: row[k] for k in KNOBS})
        held = []
        for c in space.checks:
            names, fn = _compiled(None, model.lib, c.text)
            held.append(bool(fn(*[one[n] for n in names])))
        if row.reason == "":
            assert all(held)
            assert row.step_time == pytest.approx(one.scalar("step_time"), rel=1e-12)
        else:
            k = labels.index(row.reason)
            assert not held[k] and all(held[:k]), (row.reason, held)


def test_ranked_best_first_and_runner_up(korthikanti):
    ok = korthikanti.frame[korthikanti.frame.reason == ""]
    assert (np.diff(ok.step_time.to_numpy()) >= 0).all()


def test_non_finite_value_masks_its_row_only():
    df = sweep("gpt3-175b-sc21", {"step_time": [0, 10, 20]}, ["tokens_per_second"],
               allow_nodes=True, keep_masked=True)
    assert list(df.reason) == ["tokens_per_second not finite", "", ""]
    assert np.isfinite(df.tokens_per_second[1:]).all()


def test_objective_sense_and_where():
    df = search("korthikanti-table5-175b-selective-sp", 64, "mfu",
                where="memory_per_gpu <= 60e9")
    assert len(df) > 0 and (np.diff(df.mfu.to_numpy()) <= 0).all()  # mfu is maximized
    assert (df.memory_per_gpu <= 60e9).all()
    low = search("korthikanti-table5-175b-selective-sp", 64, "mfu:min")
    assert low.mfu.iloc[0] < df.mfu.iloc[0]


def test_sc21_table1_145b_paper_layout_is_near_the_best():
    # the knobs of 2021 Megatron-LM: full recompute, no sequence parallelism or ZeRO, no CP
    r = run_search("sc21-table1-145b", 1536, where=["cp == 1"],
                   axes={"recompute": ["full"], "zero_stage": [0], "sequence_parallel": ["no"]})
    ok = r.frame[r.frame.reason == ""]
    paper = ok[(ok.tp == 8) & (ok.pp == 8) & (ok.dp == 24) & (ok.vpp == 2) & (ok.micro_batch == 2)]
    assert len(paper) == 1  # feasible
    gap = paper.step_time.iloc[0] / ok.step_time.iloc[0] - 1
    assert 0 <= gap < 0.10  # the model ranks it within 10 % of its own best (6 % measured)


def test_korthikanti_table5_paper_layout_is_near_the_best():
    r = run_search("korthikanti-table5-175b-selective-sp", 64,
                   axes={"recompute": ["selective"], "zero_stage": [0],
                         "sequence_parallel": ["yes"]}, where=["cp == 1"])
    ok = r.frame[r.frame.reason == ""]
    paper = ok[(ok.tp == 8) & (ok.pp == 8) & (ok.vpp == 3) & (ok.micro_batch == 1)]
    assert len(paper) == 1
    assert paper.step_time.iloc[0] / ok.step_time.iloc[0] - 1 < 0.05  # 2.4 % measured


def test_cli_search_prints_best_and_why_the_runner_up_loses(capsys):
    rc = main(["search", "korthikanti-table5-175b-selective-sp", "--gpus", "64", "--top", "3",
               "--quiet", "--pareto", "step_time,memory_per_gpu"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "48,384 candidates" in out and "runner-up differs in" in out
    assert "Pareto front of step_time (min), memory_per_gpu (min)" in out


def test_cli_search_bad_objective_is_one_line(capsys):
    assert main(["search", "gpt3-175b-sc21", "--gpus", "64", "--objective", "step_tim"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did you mean step_time" in err


def test_cli_axis_restricts_the_space_and_set_lists_cross(capsys):
    rc = main(["search", "korthikanti-table5-175b-selective-sp", "--gpus", "64", "--quiet",
               "--axis", "recompute=full", "--axis", "zero_stage=0", "--set",
               "global_batch=64,128", "--json", "--top", "100000"])
    import json
    data = json.loads(capsys.readouterr().out)
    assert rc == 0 and data["candidates"] == len(factorizations(64, 4)) * 6 * 4 * 2 * 2
    assert {r["recompute"] for r in data["best"]} == {"full"}
    assert {r["global_batch"] for r in data["best"]} == {64, 128}
    assert main(["search", "gpt3-175b-sc21", "--gpus", "64", "--axis", "tp=8"]) == 2
    assert "comes from the factorizations of --gpus" in capsys.readouterr().err
