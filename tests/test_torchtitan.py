"""torchtitan's measured throughput (docs/performance.md, Dec 2024; validation/torchtitan): the one value fitted on
it - torch AsyncTP hiding 33 % of the tensor-parallel traffic - reproduces Table 4's own 2D -> AsyncTP gain, and the
405B AsyncTP rows of Tables 5-6, held out from that fit, land within a few percent."""
from __future__ import annotations

import pytest

from conftest import point_runner

TPS = "tokens_per_second_per_gpu"


@pytest.fixture(scope="module")
def point():
    return point_runner("train-torchtitan-llama3.1-70b-256gpu-2d")


def test_asynctp_fraction_reproduces_the_measured_gain(point):
    plain = point().scalar(TPS)
    asynctp = point("train-torchtitan-llama3.1-70b-256gpu-2d-asynctp")
    assert asynctp.scalar("tp_comm_overlap") == 0.33   # 0.26 before the SM contention of hidden traffic
    assert asynctp.scalar(TPS) / plain == pytest.approx(876 / 829, abs=0.002)         # Table 4: +5.7 %
    # full overlap would promise +20 %, over three times what torch's micro-pipelined matmuls delivered (+25 % before
    # the SM contention of hidden traffic)
    full = point("train-torchtitan-llama3.1-70b-256gpu-2d-asynctp", tp_comm_overlap=1).scalar(TPS)
    assert full / plain == pytest.approx(1.196, abs=0.005)


@pytest.mark.parametrize("pid, measured", [
    ("train-torchtitan-llama3.1-405b-512gpu-3d-1f1b", 100),              # Table 5
    ("train-torchtitan-llama3.1-405b-512gpu-3d-interleaved", 128),       # Table 5
    ("train-torchtitan-llama3.1-405b-512gpu-4d-fsdp8-cp1-32k", 76),      # Table 6, CP 1
])
def test_held_out_405b_asynctp_rows(point, pid, measured):
    # +4.6 / +6.0 / +4.8 % since the pipelined stage's weights stay gathered across its microbatches - one FSDP
    # all-gather per step, fsdp_reshard_after_backward no (2026-11-29); +3.8 / +4.9 / +4.2 % with one per microbatch,
    # within 3 % before the SM contention of hidden traffic (2026-11-28)
    assert point(pid).scalar(TPS) == pytest.approx(measured, rel=0.065)
