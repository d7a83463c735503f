"""Writes templates/validation/nemo-24.09.yaml: the NeMo 24.09 performance page's FP8 pre-training rows on H100, each
at the layout of its NeMo 24.07 twin (validation/nemo-24.07 and nemo-24.07-extra) and with that twin's settings, so a
change to a 24.07 point reaches its 24.09 re-measurement (tests/test_nemo_2409_family.py checks the file is current).
Run: python tools/nemo_2409_family.py [--check]"""
from __future__ import annotations

import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))      # family_file.py, beside this script
from family_file import write_or_check  # noqa: E402

V = ROOT / "templates" / "validation"
OUT = V / "nemo-24.09.yaml"
PAGE = ("NVIDIA NeMo Framework User Guide 24.09, Performance Summary for Large Language Models "
        "(docs.nvidia.com/nemo-framework/user-guide/24.09/performance/performance_summary.html, stored copy), section 'Pretraining', FP8")
DOC = [
    "  NeMo Framework 24.09 performance summary: FP8 pre-training throughput, tokens per second per GPU, of GPT-3 5B /",
    "  175B, Llama 2 7B / 13B / 70B, Nemotron 8B / 22B / 340B and Llama 3 8B / 70B on DGX-H100 (the same models, GPU counts",
    "  and layouts as the NeMo 24.07 table of validation/nemo-24.07 and nemo-24.07-extra, re-measured on the 24.09",
    "  container; H100 as in 24.07 - the page names no system, and its GPT-3 175B rate, 716 tokens/s on 128 GPUs, is the",
    "  24.07 H100 one within 1.4 %). Each point takes its 24.07 twin's settings (validation/assumptions/nemo-24.07-h100 and",
    "  the point's own values), assumed unchanged between the two releases; tools/nemo_2409_family.py writes the file from",
    "  the twins. Not taken: the GPT-3 20B row, which repeats the 24.07 cell to the token (5,851 tokens/s, 750 TFLOP/s) - a",
    "  restatement rather than a second measurement. Held out: nothing was fitted to these rows."]
TFLOP_NOTE = "tokens/s/GPU times NeMo's FLOPs per token; its error differs from the tokens/s row only by the FLOP-counting convention"
# name, 24.07 point id, GPUs, GBS, MBS, sequence, TP, PP, CP, VP, tokens/s/GPU, model TFLOP/s per GPU
ROWS = [("GPT3-5B", "train-nemo2407-h100-gpt3-5b-64gpu", 64, 2048, 4, 2048, 1, 1, 1, 1, 23406, 765),
        ("GPT3-175B", "train-nemo2407-h100-gpt3-175b-128gpu", 128, 256, 1, 2048, 4, 8, 1, 6, 716, 771),
        ("GPT3-175B", "train-nemo2407-h100-gpt3-175b-512gpu", 512, 2048, 2, 2048, 4, 8, 1, 6, 825, 888),
        ("LLAMA2-7B", "train-nemo2407-h100-llama2-7b-8gpu", 8, 128, 1, 4096, 1, 1, 1, 1, 16934, 780),
        ("LLAMA2-13B", "train-nemo2407-h100-llama2-13b-16gpu", 16, 128, 1, 4096, 1, 4, 1, 10, 8715, 760),
        ("LLAMA2-70B", "train-nemo2407-h100-llama2-70b-64gpu", 64, 128, 1, 4096, 4, 4, 1, 20, 1728, 768),
        ("Nemotron-8B", "train-nemo2407-h100-nemotron-8b-64gpu", 64, 256, 4, 4096, 2, 1, 1, 1, 12507, 643),
        ("Nemotron-22B", "train-nemo2407-h100-nemotron-22b-64gpu", 64, 256, 2, 4096, 2, 4, 1, 10, 4312, 562),
        ("Nemotron-340B", "train-nemo2407-h100-nemotron-340b-128gpu", 128, 32, 1, 4096, 8, 8, 1, 12, 326, 686),
        ("LLAMA3-8B", "train-nemo2407-h100-llama3-8b-8gpu", 8, 128, 1, 8192, 1, 1, 2, 1, 12273, 711),
        ("LLAMA3-70B", "train-nemo2407-h100-llama3-70b-64gpu", 64, 128, 1, 8192, 4, 4, 2, 5, 1524, 734)]


def _value(v):
    return v["value"] if isinstance(v, dict) else v


def _flow(v) -> str:
    """One YAML value on one line, keys in their order."""
    return yaml.safe_dump(v, default_flow_style=True, width=10**6, allow_unicode=True, sort_keys=False) \
        .strip().removesuffix("...").strip()


def twins() -> dict:
    """The NeMo 24.07 points by id."""
    pts = {}
    for f in ["nemo-24.07.yaml", "nemo-24.07-extra.yaml"]:
        pts.update(yaml.safe_load((V / f).read_text(encoding="utf-8"))["points"])
    return pts


def render() -> str:
    """The family file: each 24.09 row at its 24.07 twin's layout (checked) and settings (copied)."""
    pts = twins()
    out = ["doc: >-", *DOC, f'source: "{PAGE}"', "category: training", "tolerance: 0.2", "points:"]
    for name, twin, gpus, gbs, mbs, seq, tp, pp, cp, vp, tok, tfl in ROWS:
        t = pts[twin]
        v = t["values"]
        layout = (t["gpus"], *(_value(v[k]) for k in ("global_batch", "micro_batch", "seq_len", "tp", "pp", "cp", "vpp")))
        assert layout == (gpus, gbs, mbs, seq, tp, pp, cp, vp), (twin, layout)
        old = next(e["value"] for e in t["expect"] if e["metric"] == "tokens_per_sec_per_gpu")
        assert tok != old, f"{twin}: a cell equal to 24.07's is a restatement, not a measurement"
        out += [f"  {twin.replace('nemo2407', 'nemo2409')}:",
                f'    description: "NeMo 24.09 pre-training {name} on {gpus} H100 (FP8, TP {tp} PP {pp} CP {cp} VP {vp}, '
                f'MBS {mbs}, GBS {gbs}, sequence {seq}): {tok:,} tokens/s/GPU ({old:,} in 24.07)"',
                f'    source: "{PAGE}, row {name} ({gpus} GPUs); settings: validation/nemo-24.07 point {twin}"',
                f"    use: {_flow(t['use'])}",
                "    values:",
                *(f"      {k}: {_flow(x)}" for k, x in v.items()),
                f"    gpus: {gpus}",
                "    expect:",
                f'      - {{metric: "tokens_per_sec_per_gpu", node: "tokens_per_second_per_gpu", value: {tok}, unit: "token/s"}}',
                f'      - {{metric: "model_tflops_per_gpu", node: "model_tflops_per_gpu", value: {tfl}, unit: "TFLOP/s", '
                f'counted: false, note: "{TFLOP_NOTE}"}}']
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    return write_or_check(OUT, render(), argv, "nemo_2409_family.py", "train-nemo2409-")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
