"""Vectorized evaluation speed of the inference graph against the training graph.

    python benchmarks/bench_inference.py            # 200,000 configurations per graph
    python benchmarks/bench_inference.py --n 20000  # quicker

Both use the bundled library, compiled once; each evaluates only the ancestors of
its headline outputs (inference: tpot, ttft, output tokens/s per GPU, SLA batch;
training: step_time, mfu, memory_per_gpu) on numpy arrays of N configurations in
chunks of 10k, varying batch/micro_batch, tp and the sequence lengths. Prints
configs/s (median of 3) and the number of nodes each evaluation touches.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from flopsheet.evaluate import Model
from flopsheet.library import load_library
from flopsheet.scenario import load_scenario, resolve

INFERENCE = ("serve-llama3-70b-h100-sla",
             ["tpot", "ttft", "output_tokens_per_second_per_gpu", "sla_batch", "serving_fits_in_memory"])
TRAINING = ("gpt3-175b-sc21", ["step_time", "mfu", "memory_per_gpu"])


def columns(kind: str, n: int, rng) -> dict:
    tp = rng.choice([1, 2, 4, 8], n).astype(float)
    if kind == "inference":
        return {"batch": rng.integers(1, 512, n).astype(float), "tp": tp,
                "prompt_len": rng.integers(16, 8192, n).astype(float),
                "output_len": rng.integers(16, 2048, n).astype(float)}
    return {"micro_batch": rng.choice([1, 2, 4], n).astype(float), "tp": tp,
            "seq_len": rng.choice([1024, 2048, 4096], n).astype(float)}


def bench(model, scenario, outputs, kind, n, chunk=10_000, repeats=3):
    base = resolve(load_scenario(scenario), model)
    rng = np.random.default_rng(0)
    cols = columns(kind, n, rng)
    touched = len(set().union(*(model.lib.ancestors(o) | {o} for o in outputs)))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for i in range(0, n, chunk):
            vals = dict(base)
            vals.update({k: v[i:i + chunk] for k, v in cols.items()})
            model.evaluate(vals, outputs=outputs, keep_intermediates=False, check=False)
        times.append(time.perf_counter() - t0)
    return n / statistics.median(times), touched


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200_000)
    args = ap.parse_args()
    model = Model(load_library())
    for kind, (scenario, outputs) in (("inference", INFERENCE), ("training", TRAINING)):
        rate, touched = bench(model, scenario, outputs, kind, args.n)
        print(f"{kind:9s}  {scenario:28s}  {touched:4d} nodes  {rate:12,.0f} configs/s  (N={args.n:,})")


if __name__ == "__main__":
    main()
