"""Benchmark of the flopsheet engine on a synthetic formula library.

    python benchmarks/bench_engine.py            # 2,000 nodes, 200 inputs, 1,000,000 configurations
    python benchmarks/bench_engine.py --quick    # 400 nodes, 60 inputs, 100,000 configurations
    python benchmarks/bench_engine.py --profile  # also print cProfile tops of each phase

The library comes from ``synth_library.generate`` (deterministic, fixed seed) and
goes through the real loader path, ``flopsheet.library.build_library(raw)``.
Phases measured (time.perf_counter, medians of repeats):

1. library build (YAML + whitelisted parse + unit check + DAG), with a per-phase
   breakdown; the sympy cache is cleared before each repeat so repeats do not
   reuse sympy objects built by the previous repeat;
2. compile, ``flopsheet.evaluate.Model(lib)``;
3. one configuration (scalars, defaults), ``model.evaluate()``;
4. many configurations with numpy arrays (every input random within its bounds):
   chunks of 1k/10k/100k and one call with N-long arrays. Each variant runs in
   a forked child so its peak RSS (``wait4`` rusage) is its own; the child has
   an address-space limit so a too-large run fails with MemoryError instead of
   waking the OOM killer;
5. full gradient, ``Differentiator(model).gradient(result, output)`` for the
   deep headline node: the first call (differentiates and compiles the partial
   derivatives it needs) and later calls (median), checked against central
   finite differences.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pickle
import platform
import pstats
import random
import resource
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import sympy as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))
import synth_library  # noqa: E402

from flopsheet import library as fl_library, parser as fl_parser, units as fl_units  # noqa: E402
from flopsheet.evaluate import Model  # noqa: E402
from flopsheet.library import build_library  # noqa: E402
from flopsheet.sensitivity import Differentiator  # noqa: E402
from flopsheet.yamlio import read_mapping  # noqa: E402


# ----------------------------------------------------------------- helpers
def median_time(fn, repeats, setup=None):
    """(median wall time, wall times, last result); median CPU time in ``median_time.cpu``."""
    ts, cpu = [], []
    out = None
    for _ in range(repeats):
        if setup:
            setup()
        c = time.process_time()
        t = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    median_time.cpu = statistics.median(cpu)
    return statistics.median(ts), ts, out


def fmt_t(s: float) -> str:
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    return f"{s * 1e6:.0f} us"


def fmt_b(b: float) -> str:
    return f"{b / 2**30:.2f} GiB" if b >= 2**30 else f"{b / 2**20:.0f} MiB"


def meminfo(key="MemAvailable") -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return 0


def proc_status(key) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return 0


def in_child(fn, as_limit: int | None):
    """Run fn() in a forked child; return (outcome, payload, peak_rss_bytes).

    Peak RSS is the child's ru_maxrss (from wait4), so it includes the pages the child
    inherited and touched; the payload reports the child's RSS at its start too.
    """
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(r)
        try:
            if as_limit:
                resource.setrlimit(resource.RLIMIT_AS, (as_limit, resource.RLIM_INFINITY))
            start = proc_status("VmRSS")
            payload = ("ok", start, fn())
        except MemoryError as e:
            payload = ("MemoryError", 0, repr(e)[:200])
        except BaseException as e:  # report, never propagate out of the child
            payload = ("error", 0, f"{type(e).__name__}: {e}"[:400])
        data = pickle.dumps(payload)
        with os.fdopen(w, "wb") as f:
            f.write(data)
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    _, status, ru = os.wait4(pid, 0)
    peak = ru.ru_maxrss * 1024
    if not data:
        return ("killed", f"wait status {status}", peak)
    outcome, start, res = pickle.loads(data)
    return (outcome, (start, res), peak)


def profile_top(fn, title, n=14):
    pr = cProfile.Profile()
    pr.enable()
    fn()
    pr.disable()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(n)
    print(f"\n--- cProfile: {title} (top {n} by cumulative time) ---")
    text = s.getvalue()
    start = text.find("   ncalls")
    print(text[start:].rstrip())


def node_time_by_template(model, info, vals, reps=3):
    """Time of each compiled node function on 10k configs, summed per formula template."""
    env = model.evaluate(vals).values
    acc, cnt = {}, {}
    for name in model.lib.order:
        node = model.lib.nodes[name]
        fn, args = model._fns[name], [env[d] for d in node.deps]
        t = time.perf_counter()
        for _ in range(reps):
            fn(*args)
        kind = info.quantities[name].kind
        acc[kind] = acc.get(kind, 0.0) + (time.perf_counter() - t) / reps
        cnt[kind] = cnt.get(kind, 0) + 1
    total = sum(acc.values())
    print(f"\n--- node functions on 10k configs, by template (sum {fmt_t(total)}; the rest of "
          f"evaluate() is allocation, finiteness checks and the Python loop) ---")
    for kind in sorted(acc, key=acc.get, reverse=True):
        print(f"  {kind:14s} {cnt[kind]:5d} nodes {fmt_t(acc[kind]):>9s} "
              f"({acc[kind] / total * 100:4.1f} %)  {acc[kind] / cnt[kind] * 1e6:6.1f} us/node")


# ------------------------------------------------------------- phases
def mp_derivatives(model, out, names, res, dps=50):
    """d out / d name by central differences of the graph evaluated in mpmath at ``dps`` digits.

    Each node in the output's scope is lambdified for mpmath (ceil/floor keep the engine's
    spreadsheet semantics: argument rounded to 15 significant digits first).
    """
    import mpmath
    from sympy.printing.pycode import MpmathPrinter

    from flopsheet.parser import symbol

    class Printer(MpmathPrinter):
        def _print_ceiling(self, e):
            return f"_mp_ceil({self._print(e.args[0])})"

        def _print_floor(self, e):
            return f"_mp_floor({self._print(e.args[0])})"

    def r15(x):
        return x if x == 0 else mpmath.mpf(mpmath.nstr(x, 15))

    ns = {"mpmath": mpmath, "_mp_ceil": lambda x: mpmath.ceil(r15(x)),
          "_mp_floor": lambda x: mpmath.floor(r15(x))}
    lib = model.lib
    scope = lib.ancestors(out) | {out}
    order = [n for n in lib.order if n in scope]
    fns = {n: sp.lambdify([symbol(d) for d in lib.nodes[n].deps], lib.nodes[n].expr,
                          modules=[ns, "mpmath"], printer=Printer, docstring_limit=0)
           for n in order}
    choice = {n for n, i in lib.inputs.items() if i.is_choice}
    old = mpmath.mp.dps
    mpmath.mp.dps = dps
    try:
        base = {n: (int(res[n]) if n in choice else mpmath.mpf(float(res[n])))
                for n in lib.inputs}

        def run(env):
            for n in order:
                env[n] = fns[n](*[env[d] for d in lib.nodes[n].deps])
            return env[out]

        out_d = {}
        for name in names:
            x = base[name]
            h = abs(x) * mpmath.mpf(10) ** -20
            hi = run({**base, name: x + h})
            lo = run({**base, name: x - h})
            out_d[name] = float((hi - lo) / (2 * h))
        return out_d
    finally:
        mpmath.mp.dps = old


def build_breakdown(raw, lib):
    """Time each loader phase separately (same work build_library does)."""
    sp.core.cache.clear_cache()
    t0 = time.perf_counter()
    for shown, _topic, text in raw:
        read_mapping(text, shown, "formula file")
    t1 = time.perf_counter()
    choices = {n: i.choices for n, i in lib.inputs.items() if i.is_choice}
    bools = frozenset(n for n, i in lib.nodes.items() if i.is_bool)
    for node in lib.nodes.values():
        fl_parser.parse(node.expr_text, file=node.file, line=node.line, node=node.name,
                        choices=choices, bool_names=bools)
    t2 = time.perf_counter()
    fl_library._check_cycles(lib.nodes)
    t3 = time.perf_counter()
    dims = {n: i.dim for n, i in lib.inputs.items()}
    dims.update({n: i.dim for n, i in lib.nodes.items()})
    for node in lib.nodes.values():
        fl_units.infer(node.parsed.tree, dims, node.parsed.text)
    t4 = time.perf_counter()
    fl_library.Library(lib.files, lib.inputs, lib.nodes, lib.digest, lib.root)
    t5 = time.perf_counter()
    return {"YAML read (CSafeLoader + line map)": t1 - t0, "parse formulas -> sympy": t2 - t1,
            "cycle check (networkx find_cycle)": t3 - t2, "unit inference (pint walk)": t4 - t3,
            "DAG + topological order (networkx)": t5 - t4}


def sweep(model, info, n_configs, chunk, keep, seed=7):
    """Evaluate n_configs random configurations in chunks; keep a few outputs (intermediate
    arrays are freed after their last use)."""
    t_in = time.perf_counter()
    values = synth_library.sample_configs(info, n_configs, seed=seed)
    t_in = time.perf_counter() - t_in
    rss_inputs = proc_status("VmRSS")
    out = {k: np.empty(n_configs) for k in keep}
    c = time.process_time()
    t = time.perf_counter()
    for lo in range(0, n_configs, chunk):
        hi = min(lo + chunk, n_configs)
        part = {k: v[lo:hi] for k, v in values.items()}
        res = model.evaluate(part, outputs=keep, keep_intermediates=False)
        for k in keep:
            out[k][lo:hi] = res[k]
        del res
    dt = time.perf_counter() - t
    cpu = time.process_time() - c
    checksum = float(sum(np.sum(v) for v in out.values()))
    return {"seconds": dt, "cpu": cpu, "inputs_seconds": t_in, "rss_after_inputs": rss_inputs,
            "checksum": checksum}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="400 nodes, 60 inputs, 100k configs")
    ap.add_argument("--nodes", type=int)
    ap.add_argument("--inputs", type=int)
    ap.add_argument("--levels", type=int)
    ap.add_argument("--files", type=int, default=20)
    ap.add_argument("--seed", type=int, default=20240611)
    ap.add_argument("--configs", type=int, help="configurations for the array runs")
    ap.add_argument("--single-n", type=int,
                    help="size of the one-call run (default: --configs if it fits in memory)")
    ap.add_argument("--mem-fraction", type=float, default=0.8,
                    help="largest share of MemAvailable a one-call run may be estimated to use")
    ap.add_argument("--profile", action="store_true", help="print cProfile tops of each phase")
    args = ap.parse_args()
    q = args.quick
    n_nodes = args.nodes or (400 if q else 2000)
    n_inputs = args.inputs or (60 if q else 200)
    levels = args.levels or (10 if q else 20)
    n_files = min(args.files, 8) if q and args.files == 20 else args.files
    n_cfg = args.configs or (100_000 if q else 1_000_000)
    t_script = time.perf_counter()

    commit = synth_library.describe_commit()
    print(f"flopsheet engine benchmark (flopsheet commit {commit})")
    print(f"machine: nproc={os.cpu_count()}  python {platform.python_version()}  "
          f"{platform.machine()}  MemTotal={fmt_b(meminfo('MemTotal'))}  "
          f"MemAvailable={fmt_b(meminfo())}  loadavg(1m)={os.getloadavg()[0]:.2f} at start")
    import networkx
    import pint
    import yaml
    print(f"versions: numpy {np.__version__}, sympy {sp.__version__}, pint {pint.__version__}, "
          f"networkx {networkx.__version__}, PyYAML {yaml.__version__} "
          f"(CSafeLoader={'yes' if hasattr(yaml, 'CSafeLoader') else 'no'})")

    t = time.perf_counter()
    raw, info = synth_library.generate(n_nodes, n_inputs, n_files, levels, args.seed)
    t_gen = time.perf_counter() - t
    rows = []

    # ------------------------------------------------------------ 1. build
    reps = 3
    t_build, ts, lib = median_time(lambda: build_library(raw), reps,
                                   setup=sp.core.cache.clear_cache)
    g = lib.graph
    import networkx as nx
    depth = nx.dag_longest_path_length(g)
    n_bool = sum(1 for n in lib.nodes.values() if n.is_bool)
    n_dimmed = sum(1 for n in lib.nodes.values() if not n.is_bool
                   and n.dim != fl_units.DIMENSIONLESS)
    print(f"\nlibrary: {len(raw)} files, {len(lib.inputs)} inputs "
          f"({sum(1 for i in lib.inputs.values() if i.is_choice)} categorical), "
          f"{len(lib.nodes)} nodes ({n_bool} conditions, {n_dimmed} with a dimension), "
          f"{g.number_of_edges()} edges, longest path {depth}, "
          f"{sum(len(t) for _, _, t in raw) / 1e3:.0f} kB of YAML (generated in {fmt_t(t_gen)})")
    rows.append(("library build (parse + units + DAG)", t_build, median_time.cpu,
                 f"median of {reps}, sympy cache cleared; runs " + ", ".join(fmt_t(x) for x in ts)))
    bd = build_breakdown(raw, lib)

    # ---------------------------------------------------------- 2. compile
    def fresh():  # Model(lib) may be memoised on the library; time a real compile each repeat
        sp.core.cache.clear_cache()
        lib.__dict__.pop("_model", None)

    t_comp, ts, model = median_time(lambda: Model(lib), reps, setup=fresh)
    rows.append(("compile Model(lib)", t_comp, median_time.cpu,
                 f"median of {reps}, {len(lib.nodes)} lambdified node functions; runs "
                 + ", ".join(fmt_t(x) for x in ts)))

    # ------------------------------------------------------- 3. one config
    model.evaluate()
    reps1 = 30
    t_one, _, res = median_time(lambda: model.evaluate(), reps1)
    c_one = median_time.cpu
    t_one_nc, _, _ = median_time(lambda: model.evaluate(check=False), reps1)
    out = info.headline
    t_one_out, _, _ = median_time(lambda: model.evaluate(outputs=[out]), reps1)
    rows.append(("one configuration, model.evaluate()", t_one, c_one,
                 f"median of {reps1}; check=False: {fmt_t(t_one_nc)}; "
                 f"outputs=[{out}]: {fmt_t(t_one_out)}"))

    # ----------------------------------------------------- 4. many configs
    keep = [out] + info.top_level[:4]
    avail = meminfo()
    as_limit = proc_status("VmSize") + int(0.9 * avail)
    n_array_names = len(lib.inputs) + sum(1 for n in lib.nodes.values() if not n.is_bool)
    per_cfg = 8 * n_array_names + 1 * n_bool + 8 * len(keep)
    single_n = args.single_n
    if single_n is None:
        single_n = n_cfg
        while single_n * per_cfg > args.mem_fraction * avail and single_n > 10_000:
            single_n //= 2
    variants = [(f"chunks of {c:,}", min(n_cfg, 100 * c) if c < 10_000 else n_cfg, c)
                for c in (1_000, 10_000, 100_000) if c < n_cfg]
    variants.append((f"one call, {single_n:,}-long arrays", single_n, single_n))
    print(f"\narray runs: every input random within its bounds; each run in a forked child; "
          f"estimated memory if every value is kept: {per_cfg} bytes/config "
          f"({fmt_b(per_cfg * n_cfg)} for {n_cfg:,})")
    sweep_rows = []
    for label, n, chunk in variants:
        outcome, payload, peak = in_child(lambda: sweep(model, info, n, chunk, keep), as_limit)
        if outcome != "ok":
            sweep_rows.append((label, n, None, None, None, peak, None, f"{outcome}: {payload}"))
            print(f"  {label}: {outcome} {payload}")
            continue
        start, r = payload
        rate = n / r["seconds"]
        sweep_rows.append((label, n, r["seconds"], r["cpu"], rate, peak,
                           peak - r["rss_after_inputs"],
                           f"inputs generated in {fmt_t(r['inputs_seconds'])} "
                           f"({fmt_b(r['rss_after_inputs'] - start)})"))
        print(f"  {label}: {n:,} configs in {fmt_t(r['seconds'])} (CPU {fmt_t(r['cpu'])}) = "
              f"{rate:,.0f} configs/s, "
              f"peak RSS {fmt_b(peak)} (child start {fmt_b(start)}, after inputs "
              f"{fmt_b(r['rss_after_inputs'])}), checksum {r['checksum']:.6e}")

    # --------------------------------------------------------- 5. gradient
    diff = Differentiator(model)
    res = model.evaluate()
    c = time.process_time()
    t = time.perf_counter()
    sens = diff.gradient(res, out)
    t_first = time.perf_counter() - t
    c_first = time.process_time() - c
    n_partials = len(diff._partials)
    reps_g = 15
    t_grad, _, sens = median_time(lambda: diff.gradient(res, out), reps_g)
    scope = lib.ancestors(out)
    n_scope_edges = sum(len(lib.nodes[n].deps) for n in scope | {out} if n in lib.nodes)
    rows.append(("gradient, first call (compiles partials)", t_first, c_first,
                 f"{n_partials} edge partials differentiated + lambdified "
                 f"(of {n_scope_edges} edges under `{out}`; zero adjoints are skipped), "
                 f"plus non-smooth probes"))
    rows.append(("gradient, later calls", t_grad, median_time.cpu,
                 f"median of {reps_g}; {len(sens.derivatives)} input derivatives, "
                 f"{len(scope)} ancestors, {len(sens.nonsmooth)} non-smooth notes"))

    # finite-difference check: the largest elasticities, a few random nonzero ones and two
    # inputs whose derivative is exactly 0 (their influence is on inactive branches)
    nz = [n for n, d in sens.derivatives.items() if d != 0.0]
    ranked = [n for n, _, _ in sens.ranked() if n in nz]
    rng = random.Random(1)
    rest = [n for n in nz if n not in ranked[:4]]
    zeros = sorted(n for n, d in sens.derivatives.items() if d == 0.0)
    check = ranked[:4] + rng.sample(rest, min(6, len(rest))) + rng.sample(zeros, min(2, len(zeros)))
    base = res.scalar(out)
    t = time.perf_counter()
    ref = mp_derivatives(model, out, check, res)
    t_ref = time.perf_counter() - t
    worst = worst64 = 0.0
    fd_lines = []
    for name in check:
        x = float(res[name])
        h = 1e-6 * abs(x)
        fp = model.evaluate({name: x + h}, outputs=[out]).scalar(out)
        fm = model.evaluate({name: x - h}, outputs=[out]).scalar(out)
        fd64 = (fp - fm) / (2 * h)
        g_, r_ = sens.derivatives[name], ref[name]
        rel = abs(g_ - r_) / max(abs(g_), abs(r_)) if (g_ or r_) else 0.0
        rel64 = abs(g_ - fd64) / max(abs(g_), abs(fd64)) if (g_ or fd64) else 0.0
        worst, worst64 = max(worst, rel), max(worst64, rel64)
        fd_lines.append(f"    {name:20s} engine {g_: .12e}   50-digit FD {r_: .12e}  rel err "
                        f"{rel:.1e}   | float64 FD {fd64: .6e} rel err {rel64:.1e}")
    n_zero = len(zeros)

    # ------------------------------------------------------------- report
    print("\nbuild breakdown (one pass, sympy cache cleared):")
    for k, v in bd.items():
        print(f"  {k:40s} {fmt_t(v):>10s}  ({v / sum(bd.values()) * 100:4.1f} %)")
    gg = nx.DiGraph((d, n) for n, node in lib.nodes.items() for d in node.deps if d in lib.nodes)
    t_dag, _, _ = median_time(lambda: nx.is_directed_acyclic_graph(gg), 5)
    print(f"  (for comparison, nx.is_directed_acyclic_graph on the same node graph: {fmt_t(t_dag)})")
    print(f"\ngradient check at the defaults, output `{out}` = {base:.6g}: engine derivative vs "
          f"central finite differences of the same graph evaluated with mpmath at 50 digits "
          f"(h = 1e-20*|x|; reference took {fmt_t(t_ref)}), and vs float64 central FD "
          f"(h = 1e-6*|x|):")
    print("\n".join(fd_lines))
    print(f"  max relative error over {len(check)} inputs: {worst:.1e} vs 50-digit FD, "
          f"{worst64:.1e} vs float64 FD (float64 FD loses digits to cancellation when "
          f"x*dy/dx << y); {n_zero} of {len(sens.derivatives)} inputs in scope have derivative "
          f"exactly 0 on the active branches")

    vals = synth_library.sample_configs(info, 10_000)
    t10k, _, _ = median_time(lambda: model.evaluate(vals), 5)
    print(f"\nevaluate() on one 10k chunk, warm, in this process: {fmt_t(t10k)} (median of 5)")
    node_time_by_template(model, info, vals)
    del vals

    print("\n" + "=" * 100)
    print(f"{'phase':44s} {'wall':>10s} {'CPU':>10s}  notes")
    print("-" * 100)
    for name, tt, cc, note in rows:
        print(f"{name:44s} {fmt_t(tt):>10s} {fmt_t(cc):>10s}  {note}")
    print("-" * 100)
    print(f"{'array evaluation':36s} {'configs':>10s} {'wall':>9s} {'CPU':>9s} {'configs/s':>10s} "
          f"{'peak RSS':>10s} {'peak-inputs':>11s}")
    for label, n, tt, cc, rate, peak, extra, note in sweep_rows:
        if tt is None:
            print(f"{label:36s} {n:>10,} {'failed':>9s} {'':>9s} {'':>10s} {fmt_b(peak):>10s}  "
                  f"{note}")
        else:
            print(f"{label:36s} {n:>10,} {fmt_t(tt):>9s} {fmt_t(cc):>9s} {rate:>10,.0f} "
                  f"{fmt_b(peak):>10s} {fmt_b(extra):>11s}")
    if single_n < n_cfg:
        print(f"  (one call with {n_cfg:,}-long arrays not run: estimated "
              f"{fmt_b(per_cfg * n_cfg)} > {args.mem_fraction:.0%} of MemAvailable "
              f"{fmt_b(avail)}; use --single-n {n_cfg} to force, the child has an "
              f"address-space limit)")
    print("=" * 100)
    print(f"total script time {fmt_t(time.perf_counter() - t_script)}; loadavg(1m) "
          f"{os.getloadavg()[0]:.2f} at the end (other processes on the machine skew figures)")

    if args.profile:
        profile_top(lambda: build_library(raw), "build_library")
        lib.__dict__.pop("_model", None)
        profile_top(lambda: Model(lib), "Model(lib)")
        vals = synth_library.sample_configs(info, 10_000)
        model.evaluate(vals)
        profile_top(lambda: model.evaluate(vals), "evaluate, 10k configs", n=8)
        profile_top(lambda: Differentiator(model).gradient(res, out), "gradient, first call")


if __name__ == "__main__":
    main()
