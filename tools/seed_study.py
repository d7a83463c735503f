"""The seed study: GPT-MoE-1.8T training from A100 to GB200 NVL72, one change at a time.

Kundu, Guo et al. 2024 ('Performance Modeling and Workload Analysis of Distributed Large Language
Model Training and Inference', arXiv 2407.14645) report in their abstract a ~35x training speed-up
'from A100 to B200' that closely follows NVIDIA's scaling trend; NVIDIA projects 3x (HGX B200) and
4x (GB200 NVL72) over HGX H100 for GPT-MoE-1.8T at 32,768 GPUs. This tool evaluates the chain with
the library: it starts from templates/scenarios/seed-gpt-moe-1.8t-a100.yaml (32,768 GPUs, fixed
layout and batch) and applies one change per step - a GPU's compute (peak FLOP/s and that
generation's calibrated efficiency), its HBM, the scale-up tier (NVLink generation, then the NVLink
domain 8 -> 72), the scale-out network, the precision - printing for each step its factor, the
largest hardware ratio it changes, which part of the step time fell, and where the time goes
(compute, pipeline bubble, TP, EP, PP, DP, CP). Then the published ratios beside the model's, with
how far each source could be checked (PUBLISHED), the measured Hopper -> Blackwell ratios of one
software release beside the model's on the same validation points (MEASURED_PAIRS), and the model's
ratios under other software assumptions held equal on every system (VARIANTS). The step factors
multiply to the total by construction; the named endpoints equal the bundled scenarios
seed-gpt-moe-1.8t-{h100,h200,b200,gb200-nvl72} (tests/test_seed_study.py checks both).

    python tools/seed_study.py              # the tables
    python tools/seed_study.py --markdown   # the same as Markdown tables
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
           "parallel_config_valid", "step_compute_time", "step_bubble_time", "step_tp_comm_time",
           "step_ep_comm_time", "step_pp_comm_time", "step_dp_comm_time", "step_cp_comm_time",
           "step_embedding_comm_time", "step_host_time", "optimizer_step_time", "step_overlap_contention_time",
           "peak_flops_per_gpu", "hbm_bandwidth",
           "scaleup_link_bw", "scaleup_links_per_gpu", "scaleup_domain_size", "scaleout_nic_bw"]


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
    Step("scale-out 400G -> 800G per GPU (GB200 footnote as recalled, not found)",
         values={"scaleout_nic_bw": "800 Gb/s"}, endpoint="seed-gpt-moe-1.8t-gb200-nvl72"),
    Step("precision FP8 -> NVFP4 (not in NVIDIA's training claims)",
         values={"compute_dtype": "fp4", "fp8_recipe": "nvfp4"}),
]

@dataclass
class Claim:
    """A published speed-up ratio between two steps of the chain, with how far its source was checked."""
    label: str
    a: int               # step of the slower system
    b: int               # step of the faster system
    ratio: float
    status: str          # "verified", "partly verified" or "recalled, not found"
    source: str


#: NVIDIA's and Kundu et al.'s published ratios. Checked with the search tool on 2026-11-23; what the
#: searchable public text confirms is said, the rest is labelled "recalled, not found".
PUBLISHED = [
    Claim("H100 FP8 / A100 BF16", 0, 5, 9.0, "partly verified",
          "NVIDIA H100 launch (GTC 2022): 'up to 9x faster AI training' than A100 - the headline is "
          "found only as repeated by secondary sources (e.g. gentic.news H100 glossary, which ties it "
          "to GPT-3 and BERT); its footnote conditions (a 395B-parameter MoE, Switch-XXL variant, 1T "
          "tokens; A100 on HDR IB vs H100 on NDR IB with the 256-GPU NVLink Switch System) are "
          "recalled, not found. Not GPT-MoE-1.8T and not an 8-GPU NVLink domain: a reference only"),
    Claim("HGX B200 / HGX H100", 5, 9, 3.0, "partly verified",
          "NVIDIA HGX / DGX B200 pages (2024): 3x training; GPT-MoE-1.8T on 4,096 HGX B200 vs 4,096 "
          "HGX H100 (= 32,768 GPUs each) as reproduced from NVIDIA's footnote figure by a technical "
          "blog (stored copy, Sec. 9.1); 'projected performance'; the 400G IB network of both "
          "clusters is recalled, not found"),
    Claim("GB200 NVL72 / HGX H100", 5, 12, 4.0, "partly verified",
          "NVIDIA technical blog 'NVIDIA GB200 NVL72 Delivers Trillion-Parameter LLM Training and "
          "Real-Time Inference' (2024) and the Blackwell Architecture Technical Brief (GB200 NVL72 "
          "section): a faster Transformer Engine with FP8 gives 4x faster training of GPT-MoE-1.8T "
          "than Hopper 'at 32,768 GPU scale' (found in a stored translation of the blog and a stored "
          "summary of the brief); GTC 2024 keynote: the same model in 90 days on 8,000 Hopper GPUs "
          "(15 MW) or 2,000 Blackwell GPUs (4 MW), i.e. 4x per GPU (secondary source). The footnote's "
          "networks (HGX H100 on 400G IB, 456 GB200 NVL72 racks on 800G IB) are recalled, not found"),
    Claim("B200 / A100 (Kundu et al.), vs HGX B200", 0, 9, 35.0, "verified",
          "Kundu, Guo et al. 2024 (arXiv 2407.14645), abstract: 'the massive performance gain from "
          "A100 to B200 (~35x speed-up closely following NVIDIA's scaling trend)'. The abstract does "
          "not say which B200 system (HGX or NVL72) or precision; the paper body and its factor "
          "split were not found, and the earlier reading '9x x 4x = 36x' is an interpretation"),
    Claim("B200 / A100 (Kundu et al.), vs GB200 NVL72", 0, 12, 35.0, "verified",
          "the same abstract compared with the GB200 NVL72 endpoint"),
]

#: Measured per-GPU training throughput of one software release on Hopper and Blackwell
#: (Megatron-Bridge 25.11, FP8 current scaling, each system on NVIDIA's own layout): validation
#: points whose ratio the library is asked to reproduce - (label, faster point, slower point).
MEASURED_PAIRS = [
    ("B200 / H100, Llama 3 8B, 8 GPUs", "train-mbridge-25.11-dgx-b200-llama3-8b-8gpu-fp8-cs",
     "train-mbridge-25.11-dgx-h100-llama3-8b-8gpu-fp8-cs"),
    ("GB200 / H100, Llama 3 8B, 8 GPUs", "train-mbridge-25.11-dgx-gb200-llama3-8b-8gpu-fp8-cs",
     "train-mbridge-25.11-dgx-h100-llama3-8b-8gpu-fp8-cs"),
    ("GB200 / H100, Llama 3 70B, 64 GPUs", "train-mbridge-25.11-dgx-gb200-llama3-70b-64gpu-fp8-cs",
     "train-mbridge-25.11-dgx-h100-llama3-70b-64gpu-fp8-cs"),
    ("B200 / H100, Llama 3.1 405B, 128 / 1,024 GPUs",
     "train-mbridge-25.11-dgx-b200-llama3.1-405b-128gpu-fp8-cs",
     "train-mbridge-25.11-dgx-h100-llama3.1-405b-1024gpu-fp8-cs"),
    ("GB200 / H100, Llama 3.1 405B, 256 / 1,024 GPUs",
     "train-mbridge-25.11-dgx-gb200-llama3.1-405b-256gpu-fp8-cs",
     "train-mbridge-25.11-dgx-h100-llama3.1-405b-1024gpu-fp8-cs"),
]
MEASURED_SOURCE = ("NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md, '25.11 NeMo "
                   "Container' (templates/validation/megatron-bridge*.yaml); metric tokens/s per GPU")

#: parts of step_time, in the order printed (they sum to step_time)
PARTS = [("compute", "step_compute_time"), ("bubble", "step_bubble_time"),
         ("TP", "step_tp_comm_time"), ("EP", "step_ep_comm_time"), ("PP", "step_pp_comm_time"),
         ("DP", "step_dp_comm_time"), ("CP", "step_cp_comm_time"), ("host", "step_host_time"),
         ("contention", "step_overlap_contention_time"), ("other", ("step_embedding_comm_time", "optimizer_step_time"))]

#: hardware numbers a step can change (the largest ratio bounds its factor)
HARDWARE = ["peak_flops_per_gpu", "hbm_bandwidth", "scaleup_link_bw", "scaleup_links_per_gpu",
            "scaleup_domain_size", "scaleout_nic_bw"]

#: software assumptions the chain holds equal on every system, varied together to show how far the
#: published ratios depend on them (the same values on all five systems; not calibration)
VARIANTS = [
    ("as bundled (1F1B, TP and EP comm exposed, DP bounded by its window)", {}),
    ("DP traffic fully hidden", {"dp_overlap_bound": "no"}),
    ("TP communication fully overlapped", {"tp_comm_overlap": 1}),
    ("EP all-to-all fully overlapped", {"ep_comm_overlap": 1}),
    ("interleaved 1F1B, 5 chunks per stage", {"vpp": 5}),
    ("all three overlaps + interleaving", {"tp_comm_overlap": 1, "ep_comm_overlap": 1, "vpp": 5}),
]
ENDPOINTS = {"a100": 0, "h100": 5, "h200": 6, "b200": 9, "gb200-nvl72": 12}


def step_scenario(k: int, templates=None, extra: dict | None = None):
    """The scenario of step k: the base plus every change of steps 1..k (then ``extra`` values)."""
    use, values = [BASE], {}
    for s in STEPS[1:k + 1]:
        use += s.use
        for name in s.release:
            values.pop(name, None)
        values.update(s.values)
    values.update(extra or {})
    near = (templates or bundled_templates()) / "scenarios"
    return compose(f"seed-step-{k}", f"<seed study step {k}>", use, values, near=near,
                   default_source="tools/seed_study.py step value")


def evaluate(model, sc, outputs=OUTPUTS) -> dict[str, float]:
    res = model.evaluate(resolve(sc, model), outputs=outputs)
    return {n: float(res[n]) for n in outputs}


def part_times(out: dict) -> dict[str, float]:
    """step_time split into PARTS (seconds)."""
    return {label: sum(out[n] for n in ((node,) if isinstance(node, str) else node))
            for label, node in PARTS}


def run(model=None) -> list[dict]:
    """One row per step: its outputs, parts, factor over the previous step and over the base, the
    largest ratio of the hardware numbers it changes, and the part whose time fell most."""
    model = model or Model(load_library())
    rows, base, prev = [], None, None
    for k, s in enumerate(STEPS):
        out = evaluate(model, step_scenario(k))
        t = out["step_time"]
        base = base if base is not None else t
        parts = part_times(out)
        row = {"step": k, "label": s.label, "endpoint": s.endpoint, **out, "parts": parts,
               "factor": (prev["step_time"] / t) if prev else 1.0, "cumulative": base / t,
               "hw_ratio": 1.0, "mover": ""}
        if prev:
            row["hw_ratio"] = max(1.0, *(out[n] / prev[n] for n in HARDWARE))
            drop = {p: prev["parts"][p] - parts[p] for p in parts}
            big = max(drop, key=drop.get)
            saved = prev["step_time"] - t
            row["mover"] = (f"{big} {100 * drop[big] / saved:.0f} %" if saved > 0 else "")
        rows.append(row)
        prev = row
    return rows


def published_rows(rows) -> list[dict]:
    out = []
    for c in PUBLISHED:
        model_ratio = rows[c.a]["step_time"] / rows[c.b]["step_time"]
        out.append({"label": c.label, "from": c.a, "to": c.b, "published": c.ratio,
                    "model": model_ratio, "error": model_ratio / c.ratio - 1, "status": c.status,
                    "source": c.source})
    return out


def measured_rows(validator=None) -> list[dict]:
    """Measured Blackwell / Hopper throughput ratios next to the library's on the same points."""
    from flopsheet.validate_points import load_points
    from flopsheet.validate_run import Validator
    validator = validator or Validator()
    points = {p.id: p for p in load_points()}
    cache: dict[str, tuple[float, float]] = {}

    def tokens(pid):
        if pid not in cache:
            row = next(r for r in validator.evaluate_point(points[pid])
                       if r.expect.metric == "tokens_per_sec_per_gpu")
            cache[pid] = (row.measured, row.predicted)
        return cache[pid]

    out = []
    for label, fast, slow in MEASURED_PAIRS:
        (mf, pf), (ms, ps) = tokens(fast), tokens(slow)
        out.append({"label": label, "measured": mf / ms, "model": pf / ps,
                    "error": (pf / ps) / (mf / ms) - 1})
    return out


def variant_rows(model=None) -> list[dict]:
    """The published ratios' model counterparts under each VARIANTS assumption set."""
    model = model or Model(load_library())
    out = []
    for label, extra in VARIANTS:
        t = {s: evaluate(model, step_scenario(k, extra=extra), ["step_time", "step_compute_time"])
             for s, k in ENDPOINTS.items()}
        out.append({"label": label,
                    "b200/h100": t["h100"]["step_time"] / t["b200"]["step_time"],
                    "gb200/h100": t["h100"]["step_time"] / t["gb200-nvl72"]["step_time"],
                    "gb200/a100": t["a100"]["step_time"] / t["gb200-nvl72"]["step_time"]})
    t = {s: evaluate(model, step_scenario(k), ["step_compute_time"]) for s, k in ENDPOINTS.items()}
    c = {s: v["step_compute_time"] for s, v in t.items()}
    out.append({"label": "compute alone (no bubble, no communication)",
                "b200/h100": c["h100"] / c["b200"], "gb200/h100": c["h100"] / c["gb200-nvl72"],
                "gb200/a100": c["a100"] / c["gb200-nvl72"]})
    return out


def _render(head, body, markdown, left=(1,)):
    if markdown:
        return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
                         + ["| " + " | ".join(b) + " |" for b in body])
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    fmt = "  ".join(("{:<%d}" if i in left else "{:>%d}") % w for i, w in enumerate(widths))
    return "\n".join([fmt.format(*head), fmt.format(*("-" * w for w in widths))]
                     + [fmt.format(*b) for b in body])


def table(rows, markdown: bool = False, measured=None, variants=None) -> str:
    """The step table, where the time goes, and the published (and measured) ratios beside the model's."""
    head = ["#", "change (one at a time)", "step time", "MFU", "mem/GPU", "hw ratio", "factor",
            "cumulative", "main saving"]
    body = [[str(r["step"]), r["label"] + (f"  [= {r['endpoint']}]" if r["endpoint"] else ""),
             f"{r['step_time']:.2f} s", f"{100 * r['mfu']:.1f} %",
             f"{r['memory_per_gpu'] / 2**30:.0f} GiB" + ("" if r["fits_in_memory"] else " (!)"),
             f"{r['hw_ratio']:.2f}x" if r["step"] else "", f"{r['factor']:.2f}x",
             f"{r['cumulative']:.1f}x", r["mover"]] for r in rows]
    out = [_render(head, body, markdown),
           "hw ratio: largest ratio of the hardware numbers the step changes (peak FLOP/s at the "
           "precision used, HBM bandwidth, NVLink bandwidth or domain, NIC bandwidth); main saving: "
           "the part of the step time that fell most, and its share of the saving (about 70 %: the "
           "1F1B bubble, (p - 1)/m = 7/16 of the per-microbatch time, carries the rest of every "
           "saving). No per-step factor is published: Kundu et al.'s dissection beyond the abstract "
           "was not found.", ""]
    head = ["#"] + [p for p, _ in PARTS] + ["step time"]
    body = [[str(r["step"])] + [f"{r['parts'][p]:.2f}" for p, _ in PARTS] + [f"{r['step_time']:.2f}"]
            for r in rows]
    out += ["where the time goes (seconds per step; the parts sum to the step time):",
            _render(head, body, markdown, left=()), ""]
    head = ["published ratio", "steps", "published", "model", "model/published - 1", "source checked"]
    pub = published_rows(rows)
    body = [[p["label"], f"{p['from']}->{p['to']}", f"{p['published']:.1f}x", f"{p['model']:.2f}x",
             f"{100 * p['error']:+.0f} %", p["status"]] for p in pub]
    out += [_render(head, body, markdown, left=(0, 5)), ""]
    out += [("- " if markdown else "") + f"[{p['label']}] {p['source']}" for p in pub]
    if measured:
        head = ["measured ratio (same software, own layouts)", "measured", "model", "model/measured - 1"]
        body = [[m["label"], f"{m['measured']:.2f}x", f"{m['model']:.2f}x", f"{100 * m['error']:+.0f} %"]
                for m in measured]
        out += ["", _render(head, body, markdown, left=(0,)), f"source: {MEASURED_SOURCE}"]
    if variants:
        head = ["software assumptions (same on every system)", "HGX B200/H100", "GB200/H100",
                "GB200/A100"]
        body = [[v["label"], f"{v['b200/h100']:.2f}x", f"{v['gb200/h100']:.2f}x", f"{v['gb200/a100']:.1f}x"]
                for v in variants]
        out += ["", _render(head, body, markdown, left=(0,)),
                "published: 3x, 4x, ~35x (projections, not measurements)"]
        alone = variants[-1]
        h = rows[ENDPOINTS["h100"]]
        outside = 1 - h["parts"]["compute"] / h["step_time"]
        out += [f"to reach 4x with the compute-alone GB200/H100 ratio {alone['gb200/h100']:.2f}x, "
                f"{100 * (1 - alone['gb200/h100'] / 4):.0f} % of the H100 step would have to be time "
                f"GB200 removes entirely (3x over HGX B200: {100 * (1 - alone['b200/h100'] / 3):.0f} %); "
                f"the bundled H100 step spends {100 * outside:.0f} % outside compute, and the bubble, "
                "the largest part of it, shrinks only in proportion to the microbatch time."]
    return "\n".join(out)


SYSTEMS = list(ENDPOINTS)
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


RETUNE_PAIRS = [("H100 FP8 / A100 BF16", "a100", "h100", 9.0),
                ("HGX B200 / HGX H100", "h100", "b200", 3.0),
                ("GB200 NVL72 / HGX H100", "h100", "gb200-nvl72", 4.0),
                ("B200 / A100 vs HGX B200", "a100", "b200", 35.0),
                ("B200 / A100 vs GB200 NVL72", "a100", "gb200-nvl72", 35.0)]


def retune_table(best: dict[str, dict]) -> str:
    lines = ["", "each system on its own best layout (same GPUs and batch):"]
    for s, b in best.items():
        lines.append(f"  {s:<12} {b['step_time']:7.2f} s   {b['layout']}")
    for label, a, b, pub in RETUNE_PAIRS:
        r = best[a]["step_time"] / best[b]["step_time"]
        lines.append(f"  {label:<28} model {r:5.2f}x   published {pub:4.1f}x   {100 * (r / pub - 1):+4.0f} %")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markdown", action="store_true", help="print Markdown tables")
    ap.add_argument("--retune", action="store_true",
                    help="also search each system's best layout and compare those ratios")
    args = ap.parse_args(argv)
    model = Model(load_library())
    print(table(run(model), markdown=args.markdown, measured=measured_rows(),
                variants=variant_rows(model)))
    if args.retune:
        print(retune_table(retune()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
