"""GPU generations scale Hopper-equivalent engine constants (data/generations.yaml)."""

from __future__ import annotations

import pytest

from layoutopt.hardware_catalog.catalog import get_gpu
from layoutopt.model_catalog.catalog import get_model
from layoutopt.perf_model.calibration import get_engine_profile, resolve_engine
from layoutopt.perf_model.compute import forward_coefficients
from layoutopt.perf_model.generations import generation_scales
from layoutopt.plan import Layout

MODEL = get_model("llama-3.1-70b")


def test_every_catalog_gpu_has_a_generation_with_scales():
    for name in ("A100-80GB-SXM", "H100-SXM", "H200-SXM", "B200", "GB300", "L40S", "MI300X", "MI355X"):
        gpu = get_gpu(name)
        assert gpu.generation is not None
        assert generation_scales(gpu, "bf16").gemm > 0


def test_hopper_is_the_reference_and_blackwell_fp4_needs_more_rows():
    h100, b200 = get_gpu("H100"), get_gpu("B200")
    assert generation_scales(h100, "fp8").gemm == 1.0
    fp4 = generation_scales(b200, "fp4")
    # GB200 FP4 8192^3 7,535.6 of 10,000 TFLOPS over H100 FP8 1,290.1 of 1,979: 0.7536 / 0.6519.
    assert fp4.gemm == pytest.approx(0.7536 / 0.6519, rel=0.01)
    assert fp4.half_rows == pytest.approx(2.14)
    vllm = get_engine_profile("vllm")
    c = forward_coefficients(MODEL, b200, Layout(tp_size=4, weight_precision="fp4"), vllm, None)
    assert c.gemm_flops_per_s == pytest.approx(9000e12 * vllm.gemm_efficiency * 1.157, rel=1e-6)
    assert c.gemm_half_rows == pytest.approx(vllm.gemm_half_efficiency_tokens * 2.14)
    assert c.hbm_bytes_per_s == pytest.approx(b200.memory_bandwidth_gb_per_s * 1e9 * min(
        vllm.memory_efficiency * 1.028, 0.98))


def test_amd_scales_are_marked_estimates_and_lower_hbm_efficiency():
    mi300x = get_gpu("MI300X")
    vllm = get_engine_profile("vllm")
    c = forward_coefficients(MODEL, mi300x, Layout(tp_size=8, weight_precision="fp8"), vllm, None)
    # STREAM 3.87-4.26 of 5.3 TB/s on MI300X vs 0.895 on Hopper.
    assert c.hbm_bytes_per_s == pytest.approx(5300e9 * vllm.memory_efficiency * 0.855, rel=1e-3)
    assert c.gemm_flops_per_s == pytest.approx(mi300x.fp8_tflops * 1e12 * vllm.gemm_efficiency * 0.68, rel=1e-3)


def test_a_profile_by_name_follows_the_gpu_generation_and_falls_back_to_hopper():
    hopper = get_engine_profile("vllm")
    assert hopper.generation == "hopper"
    assert resolve_engine("vllm", get_gpu("MI300X")) == hopper  # no AMD-fitted profile
    trial = hopper.model_copy(update={"name": "mine"})
    assert resolve_engine(trial, get_gpu("B200")) is trial


def test_engines_have_a_profile_fitted_on_blackwell_and_list_once():
    from layoutopt.perf_model.calibration import list_engines

    for engine in ("vllm", "sglang", "trtllm"):
        blackwell = get_engine_profile(engine, "blackwell")
        assert blackwell.generation == "blackwell" and blackwell.name == engine
        assert resolve_engine(engine, get_gpu("B200")) == blackwell
        assert resolve_engine(engine, get_gpu("GB300")) == blackwell  # same generation, no rows of its own
    assert list_engines() == ["sglang", "trtllm", "vllm"]
