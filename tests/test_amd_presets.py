"""AMD presets: the MI325X is the MI300X compute die on a 1,000 W board, and AMD's own max-achievable-FLOPs
measurements (ROCm blog 'Measuring Max-Achievable FLOPs - Part 2', 2025, Table 1) put its sustained dense GEMM at
1.19x the MI300X's in both BF16 and FP8 - which the MI325X preset's clock_fraction carries over the constants it
takes from the MI300X."""
from __future__ import annotations

import pytest

from conftest import point_runner

MI300X = "train-mlperf-lora-amd-mi300x-8gpu-llama2-70b"
MI325X = "train-mlperf-lora-amd-mi325x-8gpu-llama2-70b"


def test_mi325x_gemm_rate_over_mi300x_matches_amds_measured_ratio():
    run = point_runner(MI300X)
    mi300x, mi325x = run(MI300X), run(MI325X)
    ratio = mi325x.scalar("gemm_flops_rate") / mi300x.scalar("gemm_flops_rate")
    assert ratio == pytest.approx(843 / 708, rel=0.01)        # BF16 MAF, 1,447 against 1,207 MHz
    assert ratio == pytest.approx(1519 / 1273, rel=0.01)      # FP8 MAF, 1,464 against 1,230 MHz
    # the same die and datasheet peak: the clock, not the peak, differs
    assert mi325x.scalar("peak_flops_bf16") == mi300x.scalar("peak_flops_bf16")
    # the MFU denominator stays the datasheet peak
    assert mi325x.scalar("peak_flops_per_gpu") == mi300x.scalar("peak_flops_per_gpu")
