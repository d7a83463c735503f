"""Write the DGX Cloud Benchmarking validation family from NVIDIA's H100 step-time tables.

Input: tools/data/dgxc_h100_step_times.md - the 'Expected Performance' tables of seven NeMo pre-training recipes of
NVIDIA/dgxc-benchmarking (Llama 3.1 8B, 70B and 405B, Nemotron-4 15B and 340B, GPT-3 175B, Grok-1 314B; BF16 and
FP8; 8 to 2,304 H100), each table's heading and its layout, step-time and throughput rows copied verbatim, and the
per-scale layout table of a recipe whose README states it apart (Grok-1: first header cell 'GPUs').

Each table cell becomes one point against its measured seconds per step. The layout comes from the heading
(TP/PP/CP/VP/MBS) unless a per-column row (Layers, GBS, PP, VP), the column header's GBS or the recipe's layout
table (sequence, layers, TP, PP, CP, EP, VP, MBS, GBS per GPU count) gives it; the writer checks every step time
against the table's own throughput row (sequence x global batch / step) and refuses a cell that disagrees by more
than 1 %, and a layout row whose parallel degrees do not multiply to its GPU count. What the tables leave open is in
templates/validation/assumptions/dgxc-nemo-24.09-h100.yaml.

    python tools/dgxc_family.py            # rewrite the family file
    python tools/dgxc_family.py --check    # exit 1 if the committed file is stale
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))      # family_file.py, beside this script
from family_file import write_or_check  # noqa: E402
DATA = ROOT / "tools" / "data" / "dgxc_h100_step_times.md"
OUT = ROOT / "templates" / "validation" / "dgxc-benchmarking-h100.yaml"


@dataclass(frozen=True)
class Recipe:
    name: str                     # model as the point descriptions name it
    stem: str                     # point ids: train-dgxc-h100-<stem>-<gpus>gpu-<dtype>
    preset: str                   # templates/models/<preset>
    seq: int                      # sequence length the recipe trains at (a layout table may set it per scale)
    layers: int                   # the full model's depth; a scale that runs fewer layers runs a proxy config
    values: tuple[str, ...] = ()  # extra value lines every point of the recipe sets


#: the attention backend each recipe's configure.sh picks for TransformerEngine: cuDNN fused attention at the rate
#: calibrated for it on Hopper, or FlashAttention-2 at the H100 preset's
CUDNN_ATTENTION = (
    "TransformerEngine then runs cuDNN fused attention - attention_efficiency 0.6, the Hopper cuDNN rate"
    " (validation/assumptions/megatron-bridge-h100; 0.54-0.62 of peak in Shah et al. 2024, arXiv 2407.08608, Sec. 4.1)")
FLASH_ATTENTION = "TransformerEngine runs FlashAttention-2 - the H100 preset's 0.35"
FP8_PARAMS = (
    '      fp8_param_storage: {value: "yes", source: "%s: +model.fp8_params follows the run\'s FP8 switch - FP8'
    ' runs keep the linear weights in FP8 (TransformerEngine fp8_model_init) and all-gather them in FP8; no effect'
    ' on BF16 rows"}',
    '      fp8_param_bytes: {value: 2, source: "Hopper FP8 GEMMs take only the TN layout, so each FP8 weight also keeps'
    ' its FP8 transpose (TransformerEngine is_non_tn_fp8_gemm_supported is false on compute capability 9.0)"}',
)


def _attention(script: str, setting: str, value: float, why: str) -> str:
    return (f'      attention_efficiency: {{value: {value}, source: "NVIDIA/dgxc-benchmarking {script}: {setting};'
            f' {why}"}}')


LLAMA = (
    _attention("llama3.1/configure.sh (stored commit 143b90dd)", "NVTE_FLASH_ATTN=0, NVTE_FUSED_ATTN=1", 0.6,
               CUDNN_ATTENTION),
    FP8_PARAMS[0] % "llama3.1/configure.sh", FP8_PARAMS[1],
)

#: README file -> what the tables do not say themselves
RECIPES = {
    "llama3.1/README_8b.md": Recipe("Llama 3.1 8B", "llama3.1-8b", "llama3-8b", 8192, 32, LLAMA),
    "llama3.1/README_70b.md": Recipe("Llama 3.1 70B", "llama3.1-70b", "llama3-70b", 8192, 80, LLAMA),
    "llama3.1/README_405b.md": Recipe("Llama 3.1 405B", "llama3.1-405b", "llama3-405b", 8192, 126, (
        '      vocab: {value: 51200, source: "README_405b.md Prepare Dataset: the 405B recipe uses the GPT2BPETokenizer'
        ' as a proxy (50,257 tokens), padded by NeMo to a multiple of 128 x TP 8 (make_vocab_size_divisible_by 128)"}',
        *LLAMA)),
    "nemotron/README_15b.md": Recipe("Nemotron-4 15B", "nemotron4-15b", "nemotron4-15b", 4096, 32, (
        _attention("nemotron/configure.sh (stored commit 35a9aecc)", "NVTE_FUSED_ATTN=1 for 15b with FlashAttention"
                   " left enabled, and TransformerEngine's get_attention_backend prefers FusedAttention on Hopper"
                   " ('Disabling FlashAttention to give FusedAttention preference on Hopper+')", 0.6, CUDNN_ATTENTION),
        FP8_PARAMS[0] % "nemotron/configure.sh", FP8_PARAMS[1])),
    "nemotron/README_340b.md": Recipe("Nemotron-4 340B", "nemotron4-340b", "nemotron4-340b", 4096, 96, (
        _attention("nemotron/configure.sh (stored commit 35a9aecc)", "NVTE_FUSED_ATTN=0 for 340b", 0.35,
                   FLASH_ATTENTION),
        FP8_PARAMS[0] % "nemotron/configure.sh", FP8_PARAMS[1])),
    "nemo_megatron/README_175b.md": Recipe("GPT-3 175B", "gpt3-175b", "gpt3-175b", 2048, 96, (
        _attention("nemo_megatron/configure.sh (stored commit 143b90dd)", "NVTE_FUSED_ATTN=0", 0.35,
                   FLASH_ATTENTION),)),
    "grok1/README_314b.md": Recipe("Grok-1 314B", "grok1-314b", "grok-1-314b", 8192, 64, (
        _attention("grok1/configure.sh (stored commit 143b90dd)", "NVTE_FUSED_ATTN=0", 0.35, FLASH_ATTENTION),
        FP8_PARAMS[0] % "grok1/configure.sh", FP8_PARAMS[1],
        '      vocab: {value: 128512, source: "grok1/grok1_314b.yaml (stored commit 35a9aecc): Llama 3 tokenizer'
        ' (128,256 tokens) padded by NeMo to a multiple of make_vocab_size_divisible_by 128 x TP 4 = 512"}',
        '      moe_token_dropping: {value: "yes", source: "grok1/grok1_314b.yaml: moe_expert_capacity_factor 1.0 with'
        ' moe_pad_expert_input_to_capacity true - every expert computes its capacity, overflow dropped"}',
        '      capacity_factor: {value: 1.0, source: "grok1/grok1_314b.yaml: moe_expert_capacity_factor 1.0"}',
        '      ep_dispatcher: {value: alltoall, source: "grok1/grok1_314b.yaml: moe_token_dispatcher_type alltoall"}',
        '      etp: {value: 4, source: "grok1/grok1_314b.yaml sets no expert tensor parallelism, and Megatron-Core'
        ' defaults it to the tensor-parallel size (parallel_state.initialize_model_parallel:'
        ' expert_tensor_parallel_size default = tp_size; before that option the experts split over TP like the'
        ' dense layers) - TP 4 in every layout, so the expert-parallel group steps over 4 ranks and EP 8 spans'
        ' 4 nodes"}')),
}

DOC = """\
  DGX Cloud Benchmarking (NVIDIA/dgxc-benchmarking) NeMo pre-training on H100: the measured step times of the
  Llama 3.1 8B, 70B and 405B, Nemotron-4 15B and 340B, GPT-3 175B and Grok-1 314B recipes, BF16 and FP8, each
  weak-scaled over 8-128 to 128-2,304 GPUs at a fixed layout (the 405B recipe below 576 GPUs runs proxy models of 7,
  21 and 42 layers, the Grok-1 recipe below 512 proxies of 2 to 32 layers, EP 2-8 and 4K sequences below 64 GPUs).
  Each table cell is one point; the metric is seconds per training step. Held out: nothing was fitted to these rows.
  The recipes' settings beyond the layout are taken as for the NeMo 24.07 DGX-H100 points
  (validation/assumptions/dgxc-nemo-24.09-h100), except what each recipe's configure.sh sets: the attention backend
  (the Llama 3.1 and Nemotron-4 15B scripts run TransformerEngine's cuDNN fused attention, the Nemotron-4 340B and
  GPT-3 175B ones disable it and run FlashAttention-2) and FP8 weights (+model.fp8_params on the Llama and Nemotron
  recipes). What the rows show (flopsheet validate --family dgxc-benchmarking-h100, 2026-11-29): median |error| 2.4 %, p90
  8.9 %, worst -16.2 % (Grok-1 FP8 on 8 GPUs); most rows read fast, FP8 more than BF16 - Llama 3.1 8B BF16
  -1.1..+0.4 %, FP8 -3.6..-2.0 %, 70B BF16 -3.5..-2.0 %, FP8 -11.7..-8.1 %, Nemotron-4 15B -2.9..+1.4 % (on entry,
  2026-11-28: median 3.1 %, Llama 3.1 8B BF16 +6.6..+8.3 %).
  The measured step grows with the data-parallel degree at a fixed per-GPU load - Nemotron-4 340B FP8 3.16 -> 3.49 s
  and BF16 4.61 -> 4.84 s from 128 to 2,048 GPUs, Llama 3.1 405B FP8 11.31 -> 12.35 s from 1,152 to 2,304 - where the
  model would stay flat if it hid all data-parallel traffic behind compute (the rule until 2026-11-28: Nemotron-4
  340B -13.8..-1.1 %). With the traffic exposed beyond one microbatch's stage compute (dp_overlap_bound yes, the
  default since; formulas/training/step.yaml) the Nemotron rows read -7.1..+2.4 % and the exposed time grows with the
  data-parallel degree as the measured steps do; the 405B jump at 2,304 GPUs (-6.9 %) stays unexplained. On Llama 3.1 70B, GPT-3 175B and Nemotron-4 340B the FP8 rows read faster than their BF16 twins: the measured FP8
  speed-up is below the model's (Llama 3.1 70B 1.34x against 1.44x at 64 GPUs with cuDNN attention, GPT-3 175B 1.48x
  against 1.53x at 128; 2026-11-29), while Llama 3.1 8B, 405B and Nemotron-4 15B FP8 rows sit within -7.4..+2.4 %.
  The Hopper gemm_efficiency (fitted on BF16 Megatron-Core rows) and fp8_gemm_efficiency_factor (fitted on NeMo 24.07
  FP8 rows) are fitted apart; templates/hardware/h100-sxm5-80gb holds their values. At 0.55 and 0.90 a joint fit on the first 44 of these rows, megatron-core-h100 and nemo-24.07 gave 0.570 and 0.844 -
  not applied: it puts 4 more training rows beyond 20 % and the all-training median 5.4 -> 5.5 %.
  Grok-1 314B (8 experts, top-2, every layer MoE; added 2026-11-27 by the family's rule - every H100 table of the
  stored READMEs - after one BF16 cell was probed) is the family's one mixture-of-experts recipe, from the NeMo
  launcher config its configure.sh loads (grok1/grok1_314b.yaml: all-to-all dispatcher, capacity factor 1 with
  padding, FlashAttention-2 with NVTE_FUSED_ATTN=0, FP8 weights in FP8 runs, expert tensor parallelism left at
  Megatron-Core's default, the TP size 4). BF16 reads -9.1..-1.3 %, FP8 -16.2..-5.8 % (2026-11-29; -0.8..+6.0 and -10.4..-0.9 % on 2026-11-27): the measured FP8 speed-up is 1.21-1.28x where the model's is 1.31-1.34x, the dense rows' FP8 gap widened by expert GEMMs that are most of the
  step. First written with expert tensor parallelism 1 (the library default, Megatron-Bridge's recipes' value) the
  rows read BF16 -4.6..-7.4 % and FP8 -15.1..-21.0 %: with ETP 1 the expert-parallel group sits inside one node,
  with Megatron-Core's ETP = TP it steps over 4 ranks and its all-to-all crosses nodes (BF16 -4.6..+1.5 %, FP8
  -15.1..-6.4 %); the all-to-all dispatcher then also gathers the received rows over the 4 expert-TP ranks after
  each dispatch and reduce-scatters them before each combine (formulas/parallel/comm.yaml etp_token_collective_time),
  which gives the figures above. Not taken: the recipe's
  later README (grok1/README.md, NeMo 25.04: 512 H100 at 15.93 s BF16 against 20.83 s here, and GB200 rows), whose
  NeMo 2 performance-script settings are not in a stored file of that release."""


@dataclass(frozen=True)
class Table:
    file: str                     # data file name, for messages and sources
    readme: str                   # recipe README path in the repository
    commit: str                   # stored commit (short)
    heading: str                  # the table's first header cell
    line: int                     # line of the heading in the data file
    columns: list[str]            # the other header cells, one per GPU count
    rows: dict[str, list[str]]    # row label -> cells


def read_tables(path: Path) -> list[Table]:
    tables, readme, commit, current = [], "", "", None
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.startswith("## "):
            readme, _, commit = (part.strip() for part in line[3:].partition("@"))
            current = None
        elif line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if all(set(c) <= set("-:") for c in cells):
                continue                  # a markdown header separator
            if current is None:
                current = Table(path.name, readme, commit[:8], cells[0], n, cells[1:], {})
                tables.append(current)
            elif len(cells) - 1 != len(current.columns):
                raise SystemExit(f"{path}:{n}: {len(cells) - 1} cells under {len(current.columns)} columns")
            else:
                current.rows[cells[0]] = cells[1:]
        elif not line.strip():
            current = None
    return tables


def layout(heading: str) -> dict[str, int]:
    """TP/PP/CP/VP/MBS of a table heading such as '... BF16 (TP=4,PP=8, MBS=1, VP=12, SEQ=2048)'."""
    found = {k.lower(): int(v) for k, v in re.findall(r"\b(TP|PP|CP|VP|MBS)=(\d+)", heading)}
    return {"tp": 1, "pp": 1, "cp": 1, "vp": 1, "mbs": 1, **found}


def cell_layout(t: Table, i: int, gpus: int, recipe: Recipe, scales: Table | None) -> dict[str, int]:
    """Layout of one column: the heading's, overridden by the table's per-column rows (Layers, GBS, PP, VP) or, for a
    recipe whose README states its layout per scale in a table of its own (first header cell 'GPUs'), by that row."""
    base = layout(t.heading)
    if scales is not None:
        row = dict(zip(scales.columns, scales.rows[str(gpus)]))
        lay = {k.lower(): (1 if v == "NA" else int(v))
               for k, v in row.items() if k in ("TP", "PP", "CP", "EP", "VP", "MBS")}
        lay.update(layers=int(row["Layers"]), gbs=int(row["GBS"]), seq=int(row["SeqLen"]))
        # the README's DP column counts GPUs / (TP x PP x CP x EP); the point's dp is GPUs / (TP x PP x CP)
        if lay["tp"] * lay["pp"] * lay["cp"] * lay["ep"] * int(row["DP"]) != gpus:
            raise SystemExit(f"{scales.file}:{scales.line}: {gpus} GPUs: TP x PP x CP x EP x DP is not the GPU count")
        return {**base, **lay}
    per = {k: t.rows[label][i] for k, label in (("layers", "Layers"), ("gbs", "GBS"), ("pp", "PP"), ("vp", "VP"))
           if label in t.rows}
    lay = {"layers": int(per.get("layers", recipe.layers)),
           "gbs": int(per.get("gbs") or re.search(r"GBS=(\d+)", t.columns[i]).group(1)),
           "pp": int(per.get("pp", base["pp"])), "seq": recipe.seq, "ep": 1,
           "vp": base["vp"] if "vp" not in per else 1 if per["vp"] == "n/a" else int(per["vp"])}
    return {**base, **lay}


def render(tables: list[Table]) -> str:
    out = [
        f"# Generated by tools/dgxc_family.py from tools/data/{DATA.name}; do not edit by hand.",
        "doc: >-", DOC,
        'source: "NVIDIA/dgxc-benchmarking llama3.1/README_8b.md, README_70b.md and README_405b.md,'
        " nemotron/README_340b.md and grok1/README_314b.md (stored commit 143b90dd), nemotron/README_15b.md and"
        " nemo_megatron/README_175b.md (stored commit 0b71cfda), section 'Expected Performance' (and the Grok-1"
        " README's layout table); each recipe's configure.sh for its attention backend, grok1/grok1_314b.yaml"
        " (stored commit 35a9aecc) for Grok-1's model and MoE settings\"",
        "category: training",
        "tolerance: 0.3",
        "points:",
    ]
    scale_tables = {t.readme: t for t in tables if t.heading == "GPUs"}
    for t in tables:
        if t.heading == "GPUs":
            continue
        recipe = RECIPES[t.readme]
        scales = scale_tables.get(t.readme)   # the recipe's per-scale layout table, if its README has one
        where = f"{t.file}:{t.line}"
        dtype = "fp8" if " FP8 " in f" {t.heading} " else "bf16" if " BF16 " in f" {t.heading} " else None
        if dtype is None:
            raise SystemExit(f"{where}: heading names neither BF16 nor FP8: {t.heading}")
        for i, col in enumerate(t.columns):
            gpus = int(re.search(r"(\d+)x? H100", col).group(1))
            lay = cell_layout(t, i, gpus, recipe, scales)
            gbs, pp, vp, tp, cp, ep, seq, mbs = (lay[k] for k in ("gbs", "pp", "vp", "tp", "cp", "ep", "seq", "mbs"))
            dp = gpus // (tp * pp * cp)
            if dp * tp * pp * cp != gpus or gbs % (dp * mbs):
                raise SystemExit(f"{where}: {gpus} GPUs do not divide into TP {tp} x PP {pp} x CP {cp} x DP and GBS {gbs}")
            # '8.7  5' in the 405B BF16 table: the stray spaces go; the throughput check below confirms 8.75
            step = float(t.rows["Training step time (seconds per step)"][i].replace(" ", ""))
            tokens = float(t.rows["Throughput in tokens per second"][i])
            if abs(seq * gbs / step / tokens - 1) > 0.01:
                raise SystemExit(f"{where}: {gpus} GPUs: {step} s per step gives {seq * gbs / step:.0f} token/s,"
                                 f" the table {tokens:.0f}")
            proxy = lay["layers"] < recipe.layers
            proxy_text = f" proxy ({lay['layers']} layers)" if proxy else ""
            vp_text = vp if vp > 1 else "n/a"
            ep_text = f" EP {ep}" if ep > 1 else ""
            layout_source = (f"layout table row {gpus} GPUs ({scales.file}:{scales.line})" if scales is not None
                             else "table row Layers")
            out += [
                f"  train-dgxc-h100-{recipe.stem}-{gpus}gpu-{dtype}:",
                f'    description: "DGX Cloud Benchmarking: {recipe.name}{proxy_text},'
                f' {gpus} H100, {dtype.upper()}, TP {tp} PP {pp} CP {cp}{ep_text} VP {vp_text}, MBS {mbs}, GBS {gbs},'
                f' sequence {seq}: {step:g} s per step"',
                f"    source: \"NVIDIA/dgxc-benchmarking {t.readme} (stored commit {t.commit}), table '{t.heading}',"
                f' column {gpus}x H100 ({where})"',
                f"    use: [models/{recipe.preset}, validation/assumptions/dgxc-nemo-24.09-h100]",
                "    values:",
                *recipe.values,
                *([f'      layers: {{value: {lay["layers"]}, source: "{layout_source}: proxy config for {gpus} GPUs"}}']
                  if proxy else []),
                f'      compute_dtype: {{value: {dtype}, source: "table heading: {dtype.upper()}"}}',
                f"      tp: {tp}",
                f"      pp: {pp}",
                f"      cp: {cp}",
                f'      dp: {{value: {dp}, source: "GPUs / (TP x PP x CP) = {gpus} / ({tp} x {pp} x {cp})"}}',
                f"      vpp: {vp}",
                *([f'      ep: {{value: {ep}, source: "{layout_source}: EP {ep}"}}'] if ep > 1 else []),
                f"      micro_batch: {mbs}",
                f'      global_batch: {{value: {gbs}, source: "table: GBS {gbs} at {gpus} GPUs (gradient accumulation'
                f' {gbs // (dp * mbs)})"}}',
                f"      seq_len: {seq}",
                f"    gpus: {gpus}",
                "    expect:",
                f'      - {{metric: "iteration_time", node: "step_time", value: {step:g}, unit: "s"}}',
            ]
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    return write_or_check(OUT, render(read_tables(DATA)), argv, "dgxc_family.py", "train-dgxc-h100-")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
