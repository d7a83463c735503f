"""One configuration in-process, arrays of configurations, and the warm gradient: new vs old.

    python benchmarks/bench_eval.py                 # default scenario, old = commit before issue 10
    python benchmarks/bench_eval.py --old b1619cb --scenario gpt-1t-sc21

Runs the same timing code twice in child processes: once on this checkout, once on the
package at git revision ``--old`` (extracted by ``bench_startup.old_package``). Each phase
is warmed up first (compiling happens once per output set and is not what is timed), then
timed as the median of repeated batches:

- ``evaluate(values)``: one configuration, every node kept;
- ``evaluate(values, outputs=report)``: the scenario's report list;
- same with ``keep_intermediates=False``;
- 10,000 configurations (every numeric input scaled by a random factor in [1, 1.0001]);
- ``Differentiator(model).gradient(result, "step_time")`` with a new Differentiator each
  time (the partials stay cached per model in the new code, per Differentiator in the old).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_startup import OLD_DEFAULT, old_package  # noqa: E402

CHILD = r'''
import json, statistics, sys, timeit
import numpy as np
from flopsheet.library import load_library
from flopsheet.evaluate import Model
from flopsheet.scenario import load_scenario, resolve
from flopsheet.sensitivity import Differentiator
scenario = sys.argv[1]
lib = load_library(); m = Model(lib); sc = load_scenario(scenario); v = resolve(sc, m)
rep = list(sc.report) or ["step_time"]
def med(f, number):
    f()
    return statistics.median(t / number for t in timeit.repeat(f, number=number, repeat=9))
out = {}
out["one config, all nodes"] = med(lambda: m.evaluate(v), 100)
out["one config, report outputs"] = med(lambda: m.evaluate(v, outputs=rep), 100)
out["one config, report, keep_intermediates=False"] = med(
    lambda: m.evaluate(v, outputs=rep, keep_intermediates=False), 100)
rng = np.random.default_rng(0)
env = {**m.defaults(), **v}
arr = {k: (np.full(10_000, x) if k in lib.inputs and lib.inputs[k].is_choice else
           x * rng.uniform(1.0, 1.0001, 10_000)) if not (k in lib.inputs and lib.inputs[k].integer)
       else np.full(10_000, x) for k, x in env.items()}
out["10k configs, report outputs"] = med(
    lambda: m.evaluate(arr, outputs=rep, keep_intermediates=False), 3)
r = m.evaluate(v)
Differentiator(m).gradient(r, "step_time")
out["gradient of step_time, warm"] = med(lambda: Differentiator(m).gradient(r, "step_time"), 5)
print(json.dumps(out))
'''


def run(env, scenario) -> dict:
    p = subprocess.run([sys.executable, "-c", CHILD, scenario], env=env, capture_output=True,
                       text=True)
    if p.returncode:
        raise SystemExit(p.stderr[-2000:])
    return json.loads(p.stdout.splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", default=OLD_DEFAULT)
    ap.add_argument("--scenario", default="gpt3-175b-sc21")
    args = ap.parse_args()
    base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    with tempfile.TemporaryDirectory(prefix="bench-eval-") as tmp:
        old_env = dict(base, PYTHONPATH=str(old_package(args.old, Path(tmp))),
                       FLOPSHEET_CACHE_DIR="off")
        new = run(base, args.scenario)
        old = run(old_env, args.scenario)
    print(f"{args.scenario}: medians, new vs old ({args.old}); load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for k in new:
        unit, f = ("ms", 1e3)
        print(f"  {k:<48} new {new[k] * f:9.3f} {unit}   old {old[k] * f:9.3f} {unit}   "
              f"ratio {old[k] / new[k]:5.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
