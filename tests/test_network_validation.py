"""nccl-tests all-reduce points of validation/published.yaml (category `collective`), predicted.

Each point: scenario, message size, measured value with its source, and the tolerance of its
family. Families are (system, regime): latency-bound (<= 1 MiB), mid-size (8-128 MiB) and
bandwidth-bound (>= 1 GiB). Tolerances were set from the errors measured when the library was
written (listed per point below), with a small margin - tight enough that a change to a formula or
a calibration constant shows up. Calibration constants are global per hardware generation
(templates/systems/*.yaml) and were fitted on sweep points that are NOT in this list.

Error convention: signed error of the predicted bus bandwidth, predicted/measured - 1 (for the
8-byte A3 Mega point, whose busbw rounds to 0, of 1/time, which is the same thing).
"""
from __future__ import annotations

import numpy as np
import pytest

from flopsheet.evaluate import Model
from flopsheet.library import load_library
from flopsheet.scenario import load_scenario, resolve

LIB = load_library()
MODEL = Model(LIB)

KiB, MiB, GiB = 2**10, 2**20, 2**30

A100 = "allreduce-nccl-tests-a100-8gpu"   # stas00/ml-engineering network/README.md, all_reduce_perf -g 8
H200 = "allreduce-nvls-h200-8gpu"         # stas00/ml-engineering all-reduce-8xH200.md, NCCL 2.27.7
A3 = "allreduce-a3mega-16gpu"             # lessizzmore/create-a3mega-ztan-fork ztan-NCCL-test-result
B200 = "allreduce-p6-b200-8gpu"           # stas00/ml-engineering network/README.md, 1x P6-B200, NCCL 2.27.7
NVL72 = "allreduce-gb200-nvl72-72gpu"     # coreweave/nccl-tests PR 43, full NVL72 rack all_reduce_perf
EFA4 = "allreduce-p6-b200-32gpu"          # stas00/ml-engineering network/README.md, 4x P6-B200 (EFA v4)
EFA3 = "allreduce-p5en-32gpu"             # stas00/ml-engineering network/README.md, 4x p5en (EFA v3)

#: family -> tolerance on |error| (fraction)
TOLERANCE = {
    ("a100", "latency"): 0.17, ("a100", "mid"): 0.25, ("a100", "bandwidth"): 0.03,
    ("h200", "latency"): 0.10, ("h200", "mid"): 0.19, ("h200", "bandwidth"): 0.03,
    ("a3", "latency"): 0.12, ("a3", "mid"): 0.11, ("a3", "bandwidth"): 0.03,
    # NVLink 5 (issue 11): the B200 mid-size plateau (63-76 GB/s at 2-4 MiB) and NCCL's jump to 839-846 GB/s
    # from 8 GiB, and the NVL72 run's slow approach to its NVLS plateau, are not reproduced - wide on purpose
    ("b200", "latency"): 0.10, ("b200", "mid"): 0.45, ("b200", "bandwidth"): 0.15,
    ("nvl72", "bandwidth"): 0.40,
    # AWS EFA (issue 11): 32-256 MiB over 4 nodes sit 15-30 % below the model
    ("efa", "latency"): 0.10, ("efa", "mid"): 0.30, ("efa", "bandwidth"): 0.05,
}

#: (id in published.yaml, system, scenario, size in bytes, metric, measured, error when written)
POINTS = [
    ("coll-a100-8gpu-allreduce-32kib", "a100", A100, 32 * KiB, "busbw", 1.31e9, -0.016),
    ("coll-a100-8gpu-allreduce-1mib", "a100", A100, 1 * MiB, "busbw", 18.0e9, +0.144),
    ("coll-a100-8gpu-allreduce-8mib", "a100", A100, 8 * MiB, "busbw", 109.93e9, -0.071),
    ("coll-a100-8gpu-allreduce-128mib", "a100", A100, 128 * MiB, "busbw", 176.92e9, +0.228),
    ("coll-a100-8gpu-allreduce-1gib", "a100", A100, 1 * GiB, "busbw", 229.04e9, +0.015),
    ("coll-a100-8gpu-allreduce-16gib", "a100", A100, 16 * GiB, "busbw", 234.89e9, -0.001),
    ("coll-h200-8gpu-allreduce-nvls-32kib", "h200", H200, 32 * KiB, "busbw", 1.44e9, +0.062),
    ("coll-h200-8gpu-allreduce-nvls-1mib", "h200", H200, 1 * MiB, "busbw", 39.93e9, -0.083),
    ("coll-h200-8gpu-allreduce-nvls-16mib", "h200", H200, 16 * MiB, "busbw", 219.89e9, +0.163),
    ("coll-h200-8gpu-allreduce-nvls-128mib", "h200", H200, 128 * MiB, "busbw", 401.93e9, +0.077),
    ("coll-h200-8gpu-allreduce-nvls-1gib", "h200", H200, 1 * GiB, "busbw", 463.58e9, +0.022),
    ("coll-h200-8gpu-allreduce-nvls-16gib", "h200", H200, 16 * GiB, "busbw", 482.26e9, -0.005),
    ("coll-gcp-a3mega-16gpu-allreduce-8", "a3", A3, 8, "time", 135.8e-6, +0.103),
    ("coll-gcp-a3mega-16gpu-allreduce-8388608", "a3", A3, 8 * MiB, "busbw", 27.5e9, +0.087),
    ("coll-gcp-a3mega-16gpu-allreduce-134217728", "a3", A3, 128 * MiB, "busbw", 152.32e9, +0.024),
    ("coll-gcp-a3mega-16gpu-allreduce-1073741824", "a3", A3, 1 * GiB, "busbw", 297.86e9, -0.003),
    ("coll-gcp-a3mega-16gpu-allreduce-8589934592", "a3", A3, 8 * GiB, "busbw", 338.82e9, -0.011),
    ("coll-b200-8gpu-allreduce-32kib", "b200", B200, 32 * KiB, "busbw", 1.20e9, +0.025),
    ("coll-b200-8gpu-allreduce-1mib", "b200", B200, 1 * MiB, "busbw", 36.06e9, -0.038),
    ("coll-b200-8gpu-allreduce-8mib", "b200", B200, 8 * MiB, "busbw", 126.49e9, +0.396),
    ("coll-b200-8gpu-allreduce-128mib", "b200", B200, 128 * MiB, "busbw", 568.38e9, +0.072),
    ("coll-b200-8gpu-allreduce-1gib", "b200", B200, 1 * GiB, "busbw", 723.34e9, -0.016),
    ("coll-b200-8gpu-allreduce-16gib", "b200", B200, 16 * GiB, "busbw", 845.67e9, -0.132),
    ("coll-gb200-nvl72-72gpu-allreduce-512mib", "nvl72", NVL72, 512 * MiB, "busbw", 586.06e9, +0.360),
    ("coll-gb200-nvl72-72gpu-allreduce-1gib", "nvl72", NVL72, 1 * GiB, "busbw", 681.17e9, +0.199),
    ("coll-gb200-nvl72-72gpu-allreduce-2gib", "nvl72", NVL72, 2 * GiB, "busbw", 757.78e9, +0.091),
    ("coll-gb200-nvl72-72gpu-allreduce-4gib", "nvl72", NVL72, 4 * GiB, "busbw", 839.16e9, -0.009),
    ("coll-b200-32gpu-efa-allreduce-1mib", "efa", EFA4, 1 * MiB, "busbw", 5.37e9, -0.022),
    ("coll-b200-32gpu-efa-allreduce-8mib", "efa", EFA4, 8 * MiB, "busbw", 35.12e9, +0.091),
    ("coll-b200-32gpu-efa-allreduce-128mib", "efa", EFA4, 128 * MiB, "busbw", 197.94e9, +0.237),
    ("coll-b200-32gpu-efa-allreduce-1gib", "efa", EFA4, 1 * GiB, "busbw", 361.99e9, -0.013),
    ("coll-b200-32gpu-efa-allreduce-16gib", "efa", EFA4, 16 * GiB, "busbw", 381.80e9, -0.003),
    ("coll-h200-32gpu-efa-allreduce-4gib", "efa", EFA3, 4 * GiB, "busbw", 364.87e9, +0.023),
]

def regime(size):
    return "latency" if size <= 1 * MiB else ("mid" if size <= 128 * MiB else "bandwidth")


def predict(scenario, sizes):
    sc = load_scenario(scenario)
    values = resolve(sc, MODEL)
    values["coll_msg_bytes"] = MODEL.encode("coll_msg_bytes", [float(s) for s in sizes])
    res = MODEL.evaluate(values, outputs=["coll_allreduce_busbw", "coll_allreduce_time",
                                          "coll_allreduce_auto_algorithm"])
    return {k: np.asarray(res[k], dtype=float) for k in ("coll_allreduce_busbw", "coll_allreduce_time",
                                                            "coll_allreduce_auto_algorithm")}


def signed_error(point, pred, i):
    _, _, _, _, metric, measured, _ = point
    if metric == "busbw":
        return pred["coll_allreduce_busbw"][i] / measured - 1
    return measured / pred["coll_allreduce_time"][i] - 1  # error of 1/time, i.e. of busbw


def all_errors():
    out = []
    for scenario in (A100, H200, A3, B200, NVL72, EFA4, EFA3):
        pts = [p for p in POINTS if p[2] == scenario]
        pred = predict(scenario, [p[3] for p in pts])
        for i, p in enumerate(pts):
            out.append((p, signed_error(p, pred, i), pred["coll_allreduce_auto_algorithm"][i],
                        pred["coll_allreduce_busbw"][i], pred["coll_allreduce_time"][i]))
    return out


def test_the_points_are_the_published_ones():
    import yaml
    from pathlib import Path
    path = Path(__file__).resolve().parents[2] / "shared" / "validation" / "published.yaml"
    if not path.exists():
        pytest.skip("validation/published.yaml is not beside this checkout")
    items = {it["id"]: it for it in yaml.safe_load(path.read_text()) if it["category"] == "collective"}
    assert set(items) <= {p[0] for p in POINTS}  # the NVLink 5 points (issue 11) came from other sources
    for pid, _, _, size, metric, measured, _ in (p for p in POINTS if p[0] in items):
        m = {x["metric"]: x for x in items[pid]["measured"]}
        if metric == "busbw":
            assert m["busbw"]["value"] * 1e9 == pytest.approx(measured)
        else:
            assert m["out_of_place_time"]["value"] * 1e-6 == pytest.approx(measured)


@pytest.mark.parametrize("point", POINTS, ids=[p[0] for p in POINTS])
def test_nccl_tests_point_within_its_family_tolerance(point):
    pid, system, scenario, size, *_ , written = point
    pred = predict(scenario, [size])
    err = signed_error(point, pred, 0)
    tol = TOLERANCE[(system, regime(size))]
    assert abs(err) <= tol, f"{pid}: error {err:+.1%} beyond {tol:.0%}"
    assert err == pytest.approx(written, abs=0.002), f"{pid}: error {err:+.2%} moved from {written:+.1%}"


def test_h200_auto_matches_nccls_logged_choice():
    # NCCL 2.27.7 logged Ring/LL up to 1 MiB and NVLS/Simple from 2 MiB (all-reduce-8xH200.md)
    pred = predict(H200, [32 * KiB, 1 * MiB, 2 * MiB, 16 * MiB, 128 * MiB, 1 * GiB, 16 * GiB])
    assert list(pred["coll_allreduce_auto_algorithm"]) == [1, 1, 4, 4, 4, 4, 4]


def test_print_table(capsys):
    rows = all_errors()
    with capsys.disabled():
        print("\n{:<45} {:>12} {:>12} {:>8} {:>5}".format("point", "measured", "predicted", "error", "algo"))
        for p, err, alg, busbw, time in rows:
            meas = f"{p[5] / 1e9:.2f} GB/s" if p[4] == "busbw" else f"{p[5] * 1e6:.1f} us"
            prd = f"{busbw / 1e9:.2f} GB/s" if p[4] == "busbw" else f"{time * 1e6:.1f} us"
            print(f"{p[0]:<45} {meas:>12} {prd:>12} {err:>+8.1%} {int(alg):>5}")
    assert len(rows) == 33
