"""The seed study: GPT-MoE-1.8T training from A100 to GB200 NVL72, one change at a time.

Kundu, Guo et al. 2024 ('Performance Modeling and Workload Analysis of Distributed Large Language
Model Training and Inference', arXiv 2407.14645) dissect a ~35x training speed-up from A100 to
Blackwell systems for NVIDIA's GPT-MoE-1.8T and find it close to NVIDIA's published scaling. This
tool evaluates the same chain with the library: it starts from
templates/scenarios/seed-gpt-moe-1.8t-a100.yaml (32,768 GPUs, fixed layout and batch) and applies
one change per step - a GPU's compute (peak FLOP/s and that generation's calibrated efficiency),
its HBM, the scale-up tier (NVLink generation, then the NVLink domain 8 -> 72), the scale-out
network, the precision - printing each step's speed-up factor and the cumulative one beside
NVIDIA's published ratios. The step factors multiply to the total by construction; the named
endpoints equal the bundled scenarios seed-gpt-moe-1.8t-{h100,h200,b200,gb200-nvl72}
(tests/test_seed_study.py checks both).

    python tools/seed_study.py              # the factor table
    python tools/seed_study.py --markdown   # the same as a Markdown table
    python tools/seed_study.py --retune     # also: each system on its own best layout (~1 min)

The chain holds the layout (TP 8, PP 8, EP 16, ETP 8) fixed so that each factor is the hardware's
alone. NVIDIA's projections do not publish their layouts and presumably tune each system; --retune
searches the best layout of each named scenario on the same 32,768 GPUs and batch (flopsheet
search, restricted to EP <= 16 experts, ETP 1 or 8, micro batch 1-2, ZeRO-1) and prints those
ratios as well.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field

from flopsheet.library import load_library
from flopsheet.evaluate import Model
from flopsheet.scenario import bundled_templates, compose, resolve

BASE = "scenarios/seed-gpt-moe-1.8t-a100"
OUTPUTS = ["step_time", "tokens_per_second", "mfu", "memory_per_gpu", "fits_in_memory",
           "parallel_config_valid", "step_compute_time", "step_ep_comm_time", "step_tp_comm_time",
           "step_dp_comm_time", "step_pp_comm_time", "pipeline_bubble_time"]


@dataclass
class Step:
    label: str           # what changes in this step
    use: list[str] = field(default_factory=list)     # presets applied on top of the previous step
    values: dict = field(default_factory=dict)       # values set (held) from this step on
    release: list[str] = field(default_factory=list)  # held values dropped (the presets' apply again)
    endpoint: str = ""   # bundled scenario this step must equal (checked by the tests)


#: values of a GPU held while only its compute changes (the previous generation's HBM)
A100_HBM = {"hbm_bandwidth": "2039 GB/s", "hbm_capacity": "80 GB"}   # hardware/a100-sxm4-80gb
H200_HBM = {"hbm_bandwidth": "4.8 TB/s", "hbm_capacity": "141 GB"}   # hardware/h200-sxm-141gb

STEPS = [
    Step("A100 80GB, BF16, NVLink 3 x8, HDR 200G (base)"),
    Step("GPU compute A100 -> H100 (peak FLOP/s, Hopper efficiency; A100 HBM kept)",
         use=["hardware/h100-sxm5-80gb"], values=dict(A100_HBM)),
    Step("HBM 2.0 -> 3.35 TB/s (H100 HBM3)", release=list(A100_HBM)),
    Step("scale-up NVLink 3 -> NVLink 4 (8-GPU domain)", use=["systems/nvlink4-hgx8"]),
    Step("scale-out HDR 200G -> NDR 400G per GPU", use=["systems/dgx-h100-superpod"]),
    Step("precision BF16 -> FP8 (H100)", values={"compute_dtype": "fp8"},
         endpoint="seed-gpt-moe-1.8t-h100"),
    Step("HBM 3.35 TB/s, 80 GB -> 4.8 TB/s, 141 GB (H200)", use=["hardware/h200-sxm-141gb"],
         endpoint="seed-gpt-moe-1.8t-h200"),
    Step("GPU compute H200 -> B200 (peak FLOP/s; H200 HBM kept)",
         use=["hardware/b200"], values=dict(H200_HBM)),
    Step("HBM 4.8 -> 8 TB/s, 180 GB (B200 HBM3e)", release=list(H200_HBM)),
    Step("scale-up NVLink 4 -> NVLink 5 (8-GPU domain; HGX B200)", use=["systems/dgx-b200-superpod"],
         endpoint="seed-gpt-moe-1.8t-b200"),
    Step("GPU B200 -> GB200 (1,200 W part: 2.5 vs 2.25 PFLOP/s BF16, 186 GB)",
         use=["hardware/gb200"]),
    Step("NVLink domain 8 -> 72 GPUs (GB200 NVL72)", use=["systems/gb200-nvl72-superpod"]),
    Step("scale-out 400G -> 800G per GPU (NVIDIA's GB200 training footnote)",
         values={"scaleout_nic_bw": "800 Gb/s"}, endpoint="seed-gpt-moe-1.8t-gb200-nvl72"),
    Step("precision FP8 -> FP4 (not in NVIDIA's training claims)", values={"compute_dtype": "fp4"}),
]

#: NVIDIA's (and Kundu et al.'s) published ratios: (label, from step, to step, ratio, source)
PUBLISHED = [
    ("H100 FP8 / A100 BF16", 0, 5, 9.0,
     "NVIDIA H100 launch (GTC 2022) and H100 Tensor Core GPU Architecture whitepaper: 'up to 9x' "
     "faster training of a 395B-parameter MoE, A100 (HDR IB) vs H100 (NDR IB + NVLink Switch System); "
     "a different MoE and a 256-GPU NVLink network, so an upper reference only"),
    ("HGX B200 / HGX H100", 5, 9, 3.0,
     "NVIDIA HGX B200 / DGX B200 product pages (2024): 3x training, GPT-MoE-1.8T, 32,768 GPUs, "
     "4,096 eight-way HGX H100 vs 4,096 eight-way HGX B200, 400G IB"),
    ("GB200 NVL72 / HGX H100", 5, 12, 4.0,
     "NVIDIA GB200 NVL72 product page and technical blog 'NVIDIA GB200 NVL72 Delivers "
     "Trillion-Parameter LLM Training and Real-Time Inference' (2024): 4x faster training, "
     "GPT-MoE-1.8T, FP8, 32,768-GPU scale, HGX H100 on 400G IB vs GB200 NVL72 on 800G IB"),
    ("GB200 NVL72 / A100", 0, 12, 35.0,
     "Kundu, Guo et al. 2024 (arXiv 2407.14645), abstract: ~35x speed-up from A100 to B200 "
     "closely following NVIDIA's scaling trend (9x A100->H100 times 4x H100->GB200 = 36x)"),
]


def step_scenario(k: int, templates=None):
    """The scenario of step k: the base plus every change of steps 1..k."""
    use, values = [BASE], {}
    for s in STEPS[1:k + 1]:
        use += s.use
        for name in s.release:
            values.pop(name, None)
        values.update(s.values)
    near = (templates or bundled_templates()) / "scenarios"
    return compose(f"seed-step-{k}", f"<seed study step {k}>", use, values, near=near,
                   default_source="tools/seed_study.py step value")


def evaluate(model, sc) -> dict[str, float]:
    res = model.evaluate(resolve(sc, model), outputs=OUTPUTS)
    return {n: float(res[n]) for n in OUTPUTS}


def run(model=None) -> list[dict]:
    """One row per step: its outputs, its factor over the previous step and over the base."""
    model = model or Model(load_library())
    rows, base, prev = [], None, None
    for k, s in enumerate(STEPS):
        out = evaluate(model, step_scenario(k))
        t = out["step_time"]
        base = base if base is not None else t
        rows.append({"step": k, "label": s.label, "endpoint": s.endpoint, **out,
                     "factor": (prev / t) if prev else 1.0, "cumulative": base / t})
        prev = t
    return rows


def published_rows(rows) -> list[dict]:
    out = []
    for label, a, b, ratio, source in PUBLISHED:
        model_ratio = rows[a]["step_time"] / rows[b]["step_time"]
        out.append({"label": label, "from": a, "to": b, "published": ratio, "model": model_ratio,
                    "error": model_ratio / ratio - 1, "source": source})
    return out


def table(rows, markdown: bool = False) -> str:
    head = ["#", "change (one at a time)", "step time", "MFU", "mem/GPU", "EP a2a", "factor",
            "cumulative"]
    body = [[str(r["step"]), r["label"] + (f"  [= {r['endpoint']}]" if r["endpoint"] else ""),
             f"{r['step_time']:.2f} s", f"{100 * r['mfu']:.1f} %",
             f"{r['memory_per_gpu'] / 2**30:.0f} GiB" + ("" if r["fits_in_memory"] else " (!)"),
             f"{r['step_ep_comm_time']:.2f} s", f"{r['factor']:.2f}x", f"{r['cumulative']:.1f}x"]
            for r in rows]
    pub = published_rows(rows)
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(b) + " |" for b in body]
        lines += ["", "| published ratio | steps | published | model | model/published - 1 |",
                  "|---|---|---|---|---|"]
        lines += [f"| {p['label']} | {p['from']}->{p['to']} | {p['published']:.1f}x | "
                  f"{p['model']:.1f}x | {100 * p['error']:+.0f} % |" for p in pub]
        lines += [""] + [f"- {p['label']}: {p['source']}" for p in pub]
        return "\n".join(lines)
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    fmt = "  ".join("{:<%d}" % w if i == 1 else "{:>%d}" % w for i, w in enumerate(widths))
    lines = [fmt.format(*head), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*b) for b in body]
    lines += ["", "published ratio                  steps   published   model   model/published-1"]
    lines += [f"{p['label']:<32} {p['from']:>2}->{p['to']:<2}  {p['published']:>8.1f}x "
              f"{p['model']:>6.1f}x   {100 * p['error']:+6.0f} %" for p in pub]
    lines += [""] + [f"[{p['label']}] {p['source']}" for p in pub]
    return "\n".join(lines)


SYSTEMS = ["a100", "h100", "h200", "b200", "gb200-nvl72"]
RETUNE_AXES = {"etp": [1, 8], "zero_stage": [1], "micro_batch": [1, 2]}


def retune(gpus: int = 32768) -> dict[str, dict]:
    """The best layout of each named scenario on ``gpus`` GPUs (the library's layout search)."""
    from flopsheet.layout_search import search
    out = {}
    for s in SYSTEMS:
        df = search(f"seed-gpt-moe-1.8t-{s}", gpus, where="ep <= 16", axes=dict(RETUNE_AXES))
        best = df.iloc[0]
        out[s] = {"step_time": float(best["step_time"]),
                  "layout": ", ".join(f"{k} {best[k]}" for k in
                                      ["tp", "pp", "dp", "cp", "ep", "etp", "vpp", "micro_batch",
                                       "recompute"] if k in df.columns)}
    return out


def retune_table(best: dict[str, dict]) -> str:
    lines = ["", "each system on its own best layout (same GPUs and batch):"]
    for s, b in best.items():
        lines.append(f"  {s:<12} {b['step_time']:7.2f} s   {b['layout']}")
    pairs = [("H100 FP8 / A100 BF16", "a100", "h100", 9.0), ("HGX B200 / HGX H100", "h100", "b200", 3.0),
             ("GB200 NVL72 / HGX H100", "h100", "gb200-nvl72", 4.0),
             ("GB200 NVL72 / A100", "a100", "gb200-nvl72", 35.0)]
    for label, a, b, pub in pairs:
        r = best[a]["step_time"] / best[b]["step_time"]
        lines.append(f"  {label:<24} model {r:5.2f}x   published {pub:4.1f}x   {100 * (r / pub - 1):+4.0f} %")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markdown", action="store_true", help="print Markdown tables")
    ap.add_argument("--retune", action="store_true",
                    help="also search each system's best layout and compare those ratios")
    args = ap.parse_args(argv)
    print(table(run(), markdown=args.markdown))
    if args.retune:
        print(retune_table(retune()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
