"""Speed of design-space exploration on the bundled training graph.

    python benchmarks/bench_search.py           # everything (about a minute on a quiet 2-core box)
    python benchmarks/bench_search.py --quick   # throughput only

1. Throughput: the chunk function (graph/chunks.py) evaluating step_time and
   memory_per_gpu of GPT-3 175B, in one process (one core), median CPU time of
   repeats, configs/s. The rows vary what `flopsheet search` varies (tp, pp, dp, cp,
   vpp, micro_batch, recompute, zero_stage, sequence_parallel; the other inputs are the
   scenario's, the same in every row, so the generated code computes what depends on
   them once per chunk, as numbers): random rows in chunks of 10k / 25k / 100k, then
   the earlier figure (random tp, pp, dp, micro_batch only) and the real search grid of
   1,024 A100s in its own row order, both in 25k chunks. Also the same through
   `Model.evaluate` alone (no masks, no table), and an estimate of the limit:
   elementary operations per configuration on values that change from row to row (sympy
   count_ops over the evaluated nodes that depend on a varied input) at the measured
   per-element cost of one numpy multiply on a 25k array (a new array each time, as the
   generated code makes them).
2. Inference throughput: the same chunk function on the serving graph (Llama-3 70B
   on H100: output_tokens_per_second_per_gpu, tokens_per_second_per_user, ttft,
   tpot and the memory check) over random serving layouts, batches and dtypes.
3. End to end, cold: `flopsheet search` as a fresh process (import, load, compile,
   enumerate, evaluate, rank, print) for GPT-3 175B on 1,024 A100s and Llama 3.1
   405B on 16,384 H100s, and for serving (templates/search/inference.yaml) Llama-3
   70B on 8 H100s with an SLA Pareto front and DeepSeek-V3 on 64 H100s; wall time,
   CPU time and peak RSS of the child.

The machine is shared: CPU time (user+sys) is the steadier figure; wall time is
printed beside it.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent



def median_cpu(job, n: int, chunk: int, repeats: int) -> float:
    """Median CPU seconds of evaluating ``n`` rows of ``job`` in chunks of ``chunk`` (after one
    warm-up chunk: code generation and the first page faults are not counted)."""
    from flopsheet.chunks import run_chunk
    run_chunk(job, 0, min(chunk, n))
    ts = []
    for _ in range(repeats):
        t = time.process_time()
        for s in range(0, n, chunk):
            run_chunk(job, s, min(s + chunk, n))
        ts.append(time.process_time() - t)
    return statistics.median(ts)


SEARCH_AXES = {"tp": [1, 2, 4, 8], "pp": [1, 2, 4, 8, 16, 32], "dp": [1, 2, 4, 8, 16, 32, 64],
               "cp": [1, 2, 4], "vpp": [1, 2, 3, 4, 6, 8], "micro_batch": [1, 2, 4, 8],
               "recompute": ["none", "selective", "full"], "zero_stage": [0, 1, 2, 3],
               "sequence_parallel": ["no", "yes"]}
EARLIER_AXES = {"tp": [1, 2, 4, 8], "pp": [1, 2, 4, 8, 16, 32], "dp": [1, 2, 4, 8, 16, 32, 64],
                "micro_batch": [1, 2, 4]}


def _random_job(model, axes, n, outs):
    from flopsheet.chunks import Job
    from flopsheet.grid import Axis, Grid
    from flopsheet.scenario import load_scenario, resolve
    sc = load_scenario("gpt3-175b-sc21")
    for k in axes:
        sc.values.pop(k, None)
    rng = np.random.default_rng(0)
    cols = {k: [v[i] for i in rng.integers(0, len(v), n)] for k, v in axes.items()}
    grid = Grid([[Axis(k, v) for k, v in cols.items()]]).encode(model)
    return Job(None, resolve(sc, model), grid, outs), grid


def _search_job(model, gpus, outs):
    from flopsheet.chunks import Job
    from flopsheet.layout_search import build_grid, load_space
    from flopsheet.scenario import load_scenario, resolve
    grid = build_grid(load_space(), gpus, model.lib, {})
    sc = load_scenario("gpt3-175b-sc21")
    for k in grid.names:
        sc.values.pop(k, None)
    return Job(None, resolve(sc, model), grid.encode(model), outs)


def throughput(chunks=(10_000, 25_000, 100_000), n=200_000, repeats=3):
    from flopsheet.chunks import model_for
    model = model_for(None)
    outs = ["step_time", "memory_per_gpu"]
    job, grid = _random_job(model, SEARCH_AXES, n, outs)
    print(f"throughput: step_time + memory_per_gpu, GPT-3 175B, 1 process; {n:,} random rows "
          f"over the search's axes ({', '.join(SEARCH_AXES)}):")
    best = 0.0
    for c in chunks:
        rate = n / median_cpu(job, n, c, repeats)
        best = max(best, rate)
        print(f"  chunk {c:>7,}: {rate / 1e3:8.0f} k configs/s per core (median CPU time of "
              f"{repeats}: {n / rate:.3f} s)")
    early, _ = _random_job(model, EARLIER_AXES, n, outs)
    rate = n / median_cpu(early, n, 25_000, repeats)
    print(f"  earlier bench (random tp, pp, dp, micro_batch only), chunk 25,000: "
          f"{rate / 1e3:.0f} k configs/s per core")
    real = _search_job(model, 1024, outs)
    m = real.size
    rate = m / median_cpu(real, m, 25_000, repeats)
    print(f"  the search grid of 1,024 GPUs in its row order ({m:,} rows), chunk 25,000: "
          f"{rate / 1e3:.0f} k configs/s per core")
    vals = dict(job.base)
    vals.update(grid.columns(0, 25_000))
    ts = []
    for _ in range(repeats * 3):
        t = time.process_time()
        model.evaluate(vals, outputs=outs, keep_intermediates=False, check=False)
        ts.append(time.process_time() - t)
    print(f"  Model.evaluate alone, 25k rows: {25_000 / statistics.median(ts) / 1e3:.0f} "
          f"k configs/s per core")
    limit(model, outs, set(SEARCH_AXES), best)


def inference_throughput(n=200_000, chunk=25_000, repeats=3):
    from flopsheet.chunks import Check, Job, model_for
    from flopsheet.grid import Axis, Grid
    from flopsheet.scenario import load_scenario, resolve
    model = model_for(None)
    sc = load_scenario("serve-llama3-70b-h100-sla")
    names = ("tp", "pp", "batch", "weight_dtype", "kv_dtype", "dp_attention", "batching")
    for k in names:
        sc.values.pop(k, None)
    base = resolve(sc, model)
    rng = np.random.default_rng(0)
    cols = {"tp": rng.choice([1, 2, 4, 8], n), "pp": rng.choice([1, 2, 4], n),
            "batch": rng.choice([1, 4, 16, 64, 256, 1024], n),
            "weight_dtype": rng.choice(["bf16", "fp8", "int4"], n),
            "kv_dtype": rng.choice(["bf16", "fp8"], n), "dp_attention": rng.choice(["no"], n),
            "batching": rng.choice(["static", "continuous"], n)}
    grid = Grid([[Axis(k, list(v)) for k, v in cols.items()]]).encode(model)
    outs = ["output_tokens_per_second_per_gpu", "tokens_per_second_per_user", "ttft", "tpot"]
    job = Job(None, base, grid, outs, [Check("fits", "serving_fits_in_memory")])
    cpu = median_cpu(job, n, chunk, repeats)
    print(f"inference throughput: {', '.join(outs)} + serving_fits_in_memory, Llama-3 70B on "
          f"H100, {n:,} random serving configurations, chunk {chunk:,}, 1 process:")
    print(f"  {n / cpu / 1e3:8.0f} k configs/s per core (median CPU time of "
          f"{repeats}: {cpu:.3f} s)")


def limit(model, outs, varied, measured):
    """Elementary operations per configuration x the per-element cost of one ufunc."""
    import sympy as sp
    lib = model.lib
    need = set(outs)
    for o in outs:
        need |= lib.ancestors(o)
    nodes = [n for n in lib.order if n in need and n in lib.nodes]
    per_row = [n for n in nodes if (lib.ancestors(n) | {n}) & varied]
    count = {n: max(1, int(sp.count_ops(lib.nodes[n].expr))) for n in nodes}
    ops, row_ops = sum(count.values()), sum(count[n] for n in per_row)
    a, b = np.random.default_rng(1).random((2, 25_000)) + 1
    reps = 2000
    t = time.process_time()
    for _ in range(reps):
        np.multiply(a, b)
    per_elem = (time.process_time() - t) / reps / 25_000
    lim = 1 / (row_ops * per_elem)
    print(f"  limit estimate: {len(nodes)} nodes, {ops} elementary ops per configuration, of "
          f"which {row_ops} in the {len(per_row)} nodes that depend on a varied input (the "
          f"rest is computed once per chunk); one numpy multiply at {per_elem * 1e9:.2f} "
          f"ns/element -> {lim / 1e3:.0f} k configs/s per core for op-at-a-time numpy; "
          f"measured is {measured / lim:.0%} of that (where, log, ceil and comparisons cost "
          f"more than a multiply). A fused compiled kernel (no temporaries, SIMD) would be "
          f"bound by arithmetic instead: ~{row_ops} flops/config at ~4-8 flops/ns -> "
          f"{4e9 / row_ops / 1e6:.0f}-{8e9 / row_ops / 1e6:.0f} M configs/s per core.")


def cold(args, label):
    cmd = [str(Path(sys.executable).parent / "flopsheet"), "search"] + args + ["--quiet",
                                                                              "--top", "3"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if p.returncode:
        print(p.stderr)
        raise SystemExit(f"{label}: exit {p.returncode}")
    head = p.stdout.splitlines()[1]
    print(f"  {label}: {head}; wall {wall:.2f} s, CPU {cpu:.2f} s, peak RSS "
          f"{after.ru_maxrss / 1024:.0f} MiB")
    return wall, cpu


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args(argv)
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}")
    throughput(repeats=a.repeats)
    inference_throughput(repeats=a.repeats)
    if a.quick:
        return 0
    print("end to end, cold process (`flopsheet search ... --quiet`), median of "
          f"{a.repeats}:")
    for args, label in [(["gpt3-175b-sc21", "--gpus", "1024"], "GPT-3 175B / 1,024 A100"),
                        (["llama3-405b-h100-16k", "--gpus", "16384"],
                         "Llama 3.1 405B / 16,384 H100"),
                       (["serve-llama3-70b-h100-sla", "--gpus", "8", "--where",
                         "tpot <= tpot_slo", "--where", "ttft <= ttft_slo", "--pareto",
                         "tokens_per_second_per_user,output_tokens_per_second_per_gpu"],
                        "serving Llama-3 70B / 8 H100, SLA Pareto"),
                       (["serve-deepseek-v3-h100-dp-ep", "--gpus", "64"],
                        "serving DeepSeek-V3 / 64 H100")]:
        runs = [cold(args, label) for _ in range(a.repeats)]
        print(f"    median wall {statistics.median(r[0] for r in runs):.2f} s, median CPU "
              f"{statistics.median(r[1] for r in runs):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
