"""Search over serving layouts (templates/search/inference.yaml): the space is picked by the
scenario and carries its own rules and directions; the best row, every row's reason and the
SLA-bounded Pareto front agree with a brute force over the same candidates evaluated by
Model.evaluate, with the rules re-stated here in Python."""
from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from flopsheet.cli import main
from flopsheet.layout_search import load_space, run_search, space_for
from flopsheet.pareto import front, parse_pareto
from flopsheet.scenario import load_scenario, resolve

SCEN = "serve-llama3-70b-h100-sla"  # Llama-3 70B (64 heads, 8 KV heads, 80 layers), H100
GPUS = 12  # 2^2 * 3: tp or pp of 3, 6 or 12 break the head and layer rules
AXES = {"batch": [6, 24, 64, 128, 256], "weight_dtype": ["bf16", "fp8", "fp4"],
        "kv_dtype": ["bf16", "fp8"], "compute_dtype": ["bf16", "fp8"],
        "dp_attention": ["no", "yes"], "batching": ["continuous", "static"]}
SLA = ["ttft <= ttft_slo", "tpot <= tpot_slo"]
OUTS = ["output_tokens_per_second_per_gpu", "tokens_per_second_per_user", "ttft", "tpot",
        "serving_memory_per_gpu", "serving_fits_in_memory", "ttft_slo", "tpot_slo"]
KEY = ["tp", "pp", "dp", "ep"] + list(AXES)


def test_space_is_picked_by_the_scenario_and_carries_its_own_rules():
    inf = space_for(load_scenario(SCEN))
    assert inf.path.endswith("inference.yaml") and inf.objective == \
        "output_tokens_per_second_per_gpu"
    assert space_for(load_scenario("cost-serve-llama3-70b-h100")).path == inf.path
    assert space_for(load_scenario("gpt3-175b-sc21")).path.endswith("training.yaml")
    labels = {c.label for c in inf.checks}
    assert "serving_fits_in_memory" in labels and "fits_in_memory" not in labels
    assert "batch_divisible" not in labels  # training's global-batch rule is not applied
    assert "tokens_per_second_per_user" in inf.maximize and "ttft" not in inf.maximize
    assert inf.axes["batch"][:6] == [1, 2, 4, 8, 16, 32] and 3 in inf.axes["batch"]


def brute_force(model):
    """Every candidate in Python's own order, evaluated in one Model.evaluate call."""
    rows = [dict(zip(["tp", "pp", "dp"], f), ep=1) for f in itertools.product(
        range(1, GPUS + 1), repeat=3) if np.prod(f) == GPUS]
    rows = [dict(r, **dict(zip(AXES, v))) for r in rows for v in itertools.product(*AXES.values())]
    values = resolve(load_scenario(SCEN), model)
    for k in KEY:
        values[k] = np.array([model.encode(k, r[k]) for r in rows])
    res = model.evaluate(values, outputs=OUTS + ["heads", "kv_heads", "layers",
                                                 "peak_flops_fp4", "experts"])
    out = [dict(r, **{o: float(np.broadcast_to(res[o], (len(rows),))[i]) for o in OUTS})
           for i, r in enumerate(rows)]
    heads, kvh, layers = (int(res[n]) for n in ("heads", "kv_heads", "layers"))
    assert (heads, kvh, layers, float(res["peak_flops_fp4"]), float(res["experts"])) == \
        (64, 8, 80, 0.0, 0.0)
    width = {"bf16": 2, "fp8": 1}
    wbytes = {"bf16": 2, "fp8": 1, "fp4": 0.5 + 2 / 128}
    for r in out:  # the space's rules, in its order, re-stated by hand
        rules = [heads % r["tp"] == 0 and (kvh % r["tp"] == 0 or r["tp"] % kvh == 0),
                 layers % r["pp"] == 0,
                 True,  # experts_divisible: a dense model, ep 1
                 r["batch"] % r["pp"] == 0,
                 r["dp_attention"] == "yes" or r["tp"] % r["ep"] == 0,
                 r["dp_attention"] == "no" or r["ep"] > 1,
                 True,  # bf16 and fp8 tensor cores on H100
                 wbytes[r["weight_dtype"]] <= width[r["compute_dtype"]],
                 r["weight_dtype"] != "fp4",  # H100 has no fp4 tensor cores
                 r["serving_fits_in_memory"] > 0,
                 r["ttft"] <= r["ttft_slo"], r["tpot"] <= r["tpot_slo"]]
        r["broken"] = next((i for i, ok in enumerate(rules) if not ok), None)
    return out


@pytest.fixture(scope="module")
def both(model):
    r = run_search(SCEN, GPUS, where=SLA, axes=AXES, extra_outputs=OUTS)
    return r, brute_force(model)


def _key(row):  # a dense model's search has no ep column (ep stays 1)
    return tuple(int(row.get(k, 1)) if k in ("tp", "pp", "dp", "ep", "batch") else str(row[k])
                 for k in KEY)


def test_every_row_is_kept_or_dropped_for_its_first_broken_rule(both):
    r, brute = both
    df = r.frame
    assert r.candidates == len(brute) == 18 * 5 * 3 * 2 * 2 * 2 * 2
    labels = [c.label for c in r.space.checks] + [f"where {w}" for w in SLA]
    got = {_key(row): row["reason"] for _, row in df.iterrows()}
    want = {_key(b): "" if b["broken"] is None else labels[b["broken"]] for b in brute}
    assert got == want
    # every rule but the two that cannot break here (dense model, H100) drops rows
    assert set(r.reasons) == set(labels) - {labels[2], labels[4], labels[6]}
    assert 0 < r.feasible < 200


def test_best_is_the_brute_force_best(both):
    r, brute = both
    ok = [b for b in brute if b["broken"] is None]
    best = max(b["output_tokens_per_second_per_gpu"] for b in ok)
    top = r.frame.iloc[0]
    assert top.reason == "" and top.output_tokens_per_second_per_gpu == \
        pytest.approx(best, rel=1e-12)
    assert _key(top) in {_key(b) for b in ok if b["output_tokens_per_second_per_gpu"] == best}
    kept = r.frame[r.frame.reason == ""]
    assert (np.diff(kept.output_tokens_per_second_per_gpu.to_numpy()) <= 0).all()
    for _, row in kept.iterrows():  # and each kept value is the one Model.evaluate gives
        b = next(x for x in ok if _key(x) == _key(row))
        assert row.tpot == pytest.approx(b["tpot"], rel=1e-12)


def brute_pareto(rows, a, b):
    return {_key(x) for x in rows if not any(
        y[a] >= x[a] and y[b] >= x[b] and (y[a] > x[a] or y[b] > x[b]) for y in rows)}


def test_sla_pareto_front_matches_brute_force(both, model):
    r, brute = both
    ok = [b for b in brute if b["broken"] is None]
    objs = parse_pareto("tokens_per_second_per_user,output_tokens_per_second_per_gpu",
                        model.lib, r.space.maximize)
    assert objs == [("tokens_per_second_per_user", True),
                    ("output_tokens_per_second_per_gpu", True)]  # from the inference space
    f = front(r.frame[r.frame.reason == ""], objs)
    want = brute_pareto(ok, "tokens_per_second_per_user", "output_tokens_per_second_per_gpu")
    assert {_key(row) for _, row in f.iterrows()} == want and len(want) >= 3
    assert (f.tpot <= 0.05).all() and (f.ttft <= 2).all()


def test_cli_pareto_under_sla(capsys, both):
    r, brute = both
    args = ["search", SCEN, "--gpus", str(GPUS), "--quiet", "--pareto",
            "tokens_per_second_per_user,output_tokens_per_second_per_gpu"]
    for k, v in AXES.items():
        args += ["--axis", f"{k}={','.join(map(str, v))}"]
    for w in SLA:
        args += ["--where", w]
    assert main(args + ["--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    ok = [b for b in brute if b["broken"] is None]
    assert {_key(x) for x in data["pareto"]} == brute_pareto(
        ok, "tokens_per_second_per_user", "output_tokens_per_second_per_gpu")
    assert data["sense"] == "max" and data["objective"] == "output_tokens_per_second_per_gpu"
    assert main(args + ["--top", "1"]) == 0
    out = capsys.readouterr().out
    assert "(space templates/search/inference.yaml)" in out
    assert "Pareto front of tokens_per_second_per_user (max), " \
           "output_tokens_per_second_per_gpu (max)" in out


def test_moe_tries_every_ep_dividing_tp_dp_and_masks_ep_outside_the_replica():
    r = run_search("serve-deepseek-v3-h100-dp-ep", 8, axes={
        "batch": [64], "weight_dtype": ["fp8"], "kv_dtype": ["bf16"], "compute_dtype": ["fp8"],
        "dp_attention": ["no", "yes"], "batching": ["continuous"]})
    df = r.frame
    want = {(tp, pp, dp, ep) for tp, pp, dp in itertools.product([1, 2, 4, 8], repeat=3)
            if tp * pp * dp == 8 for ep in [1, 2, 4, 8] if (tp * dp) % ep == 0}
    got = {(int(a), int(b), int(c), int(d)) for a, b, c, d in
           df[["tp", "pp", "dp", "ep"]].drop_duplicates().itertuples(index=False)}
    assert got == want and len(df) == 2 * len(want)
    inside = "without DP attention the expert group lies inside the replica (tp % ep == 0)"
    bad = df[(df.dp_attention == "no") & (df.tp % df.ep != 0) & (df.pp == 1)]
    assert len(bad) and (bad.reason == inside).all()  # layers 61: pp 1 passes layers_divisible
    assert (df[(df.dp_attention == "yes") & (df.ep == 1)].reason.isin(
        [inside, "redundant: DP attention needs ep > 1", "layers_divisible"])).all()


def test_a_space_file_given_with_space_is_self_contained(tmp_path):
    p = tmp_path / "tiny.yaml"
    p.write_text("doc: tiny\nfactorize: [tp, pp]\naxes:\n  batch: ['16..64:x2']\n"
                 "checks:\n  - {label: one stage, expr: 'pp == 1'}\n"
                 "maximize: [tpot]\nobjective: tpot\n")
    sp = load_space(str(p))
    assert sp.maximize == {"tpot"} and [c.label for c in sp.checks] == ["one stage"]
    r = run_search(SCEN, 8, space=str(p))
    assert r.candidates == 4 * 3 and r.maximize and r.reasons == {"one stage": 9}
    kept = r.frame[r.frame.reason == ""]
    assert list(kept.tp) == [8, 8, 8] and list(kept.batch) == [64, 32, 16]  # largest tpot first


def test_disaggregated_space_splits_the_replicas_into_two_pools():
    few = {"batch": [64], "weight_dtype": ["fp8"], "kv_dtype": ["fp8"], "compute_dtype": ["fp8"],
           "dp_attention": ["no"]}
    r = run_search(SCEN, 16, space="disaggregated", axes=few)
    df = r.frame
    want = {(tp, pp, dp, k * tp * pp, (dp - k) * tp * pp)
            for tp, pp, dp in itertools.product([1, 2, 4, 8, 16], repeat=3) if tp * pp * dp == 16
            for k in range(1, dp)}
    got = {tuple(int(x) for x in t) for t in
           df[["tp", "pp", "dp", "prefill_gpus", "decode_gpus"]].itertuples(index=False)}
    assert got == want and len(df) == len(want)  # a single replica cannot be split: no rows
    assert r.objective == "disagg_output_tokens_per_second_per_gpu" and r.maximize
    ok = df[df.reason == ""]
    assert len(ok) and (np.diff(ok.disagg_output_tokens_per_second_per_gpu.to_numpy()) <= 0).all()
