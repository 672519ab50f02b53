"""benchmarks/carry_attribution.py: the leave-one-GPU-out error with constants taken from the own fit."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from accuracy import DEFAULT_CSVS, load_all  # noqa: E402
from carry_attribution import differing_constants, figures, in_sample  # noqa: E402

pytestmark = pytest.mark.skipif(not all(p.is_file() for p in DEFAULT_CSVS), reason="reference measurements absent")


@pytest.fixture(scope="module")
def trtllm_cases():
    cases, _ = load_all(DEFAULT_CSVS, "trtllm")
    by_gpu = {}
    for case in cases:
        if case.mode == "agg":
            by_gpu.setdefault(case.gpu, []).append(case)
    return [c for rows in by_gpu.values() for c in rows[::40]]  # a dozen rows per GPU


def test_carried_constants_count_as_differing():
    names = differing_constants("trtllm")
    assert "request_overhead_ms" in names and "closed_loop_rounds" in names
    # Hopper carries Blackwell's MLA launch term, equal in the two files, but leave-one-GPU-out resets it
    assert "eager_mla_layer_launch_us" in names
    assert not {"name", "source", "generation", "carried_constants"} & set(names)


def test_every_differing_constant_from_the_own_fit_is_the_in_sample_prediction(trtllm_cases):
    swapped = figures(trtllm_cases, {"trtllm": tuple(differing_constants("trtllm"))})
    own, carried = in_sample(trtllm_cases), figures(trtllm_cases, {})
    assert set(swapped) == {"B200", "H100-SXM"}
    for gpu in swapped:
        assert np.allclose(swapped[gpu], own[gpu])
    assert any(not np.allclose(carried[gpu], own[gpu]) for gpu in carried)
