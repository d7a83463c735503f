"""Dask: a 2-worker LocalCluster evaluates the same chunks to the same table, row for row."""
from __future__ import annotations

import numpy as np
import pytest

from flopsheet.chunks import Check
from flopsheet.grid import grid_from_sets
from flopsheet.runner import execute
from flopsheet.scenario import Value, load_scenario
from flopsheet.sweeps import make_job

distributed = pytest.importorskip("dask.distributed")


def test_two_worker_cluster_matches_in_process(tmp_path):
    sc = load_scenario("gpt3-175b-sc21")
    for k, v in {"tp": [1, 2, 4, 8], "pp": [4, 8, 16], "micro_batch": [1, 2],
                 "recompute": ["none", "selective", "full"]}.items():
        sc.values[k] = Value(v, "test")
    grid, _ = grid_from_sets(sc)
    job = make_job(sc, grid, ["step_time", "memory_per_gpu", "mfu"],
                   checks=[Check("fits_in_memory", "fits_in_memory")])
    local = execute(job, chunk=10, quiet=True)
    assert len(local["row"]) == 72 and 0 < (local["reason"] == 0).sum() < 72
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  local_directory=str(tmp_path),
                                  dashboard_address=None) as cluster:
        remote = execute(job, chunk=10, quiet=True, dask=cluster.scheduler_address)
    assert remote.keys() == local.keys()
    for k in local:
        assert np.array_equal(local[k], remote[k]), k  # bit for bit, row for row
