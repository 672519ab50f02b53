"""GPU generations scale Hopper-equivalent engine constants (data/generations.yaml)."""

from __future__ import annotations

import pytest

from layoutopt.hardware_catalog.catalog import get_gpu
from layoutopt.model_catalog.catalog import get_model
from layoutopt.perf_model.calibration import get_engine_profile, resolve_engine
from layoutopt.perf_model.coefficients import forward_coefficients
from layoutopt.perf_model.generations import (
    gemm_saturation,
    gemm_series,
    generation_scales,
    generation_spec,
    kernel_hbm_scale,
    memory_kernels,
    peak_rate_factor,
)
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
    fp4, fp8 = generation_scales(b200, "fp4"), generation_scales(b200, "fp8")
    # Measured NVFP4 GEMMs reach a smaller share of their peak than FP8 and need more rows for it.
    assert fp4.gemm < fp8.gemm and fp4.half_rows > 1.5 * fp8.half_rows
    vllm = get_engine_profile("vllm")
    c = forward_coefficients(MODEL, b200, Layout(tp_size=4, weight_precision="fp4"), vllm, None)
    assert c.gemm_flops_per_s == pytest.approx(9000e12 * vllm.gemm_efficiency * 0.682, rel=1e-6)
    assert c.gemm_half_rows == pytest.approx(vllm.gemm_half_efficiency_tokens * 1.88)
    # The experts' grouped GEMM pads to its own M tile: the dense NVFP4 small-M scale does not apply.
    moe = forward_coefficients(get_model("deepseek-r1"), b200, Layout(tp_size=8, weight_precision="fp4"), vllm, None)
    assert moe.expert_pad_rows == vllm.gemm_half_efficiency_tokens and moe.gemm_half_rows > 1.8 * moe.expert_pad_rows
    assert c.hbm_bytes_per_s == pytest.approx(b200.memory_bandwidth_gb_per_s * 1e9 * min(
        vllm.memory_efficiency * 0.814, 0.98))


def test_blackwell_fp4_scales_are_fp8_times_the_measured_fp4_over_fp8_ratios():
    series = gemm_series()
    fp4 = gemm_saturation(series["b200_nvfp4_cutlass_vllm"])
    fp8 = gemm_saturation(series["b200_fp8_cutlass_vllm"])
    # Off the launch floor (NVFP4 takes a flat ~11.3 us up to M = 512, FP8 ~5.9 us up to 128):
    # NVFP4 ~0.443 of 9 PF, half of it at ~377 rows, within 1.4 % of every fitted row; FP8 ~0.573
    # of 4.5 PF at ~204 rows, within 5 %. Hand check of NVFP4's slope: 8,192 -> 16,384 rows take
    # 109.1 -> 211.2 us, 12.46 ns a row = 2 x 6144 x 4096 / (0.449 x 9 PF).
    assert fp4.fitted_rows == (1024, 2048, 4096, 8192, 16384) and fp8.fitted_rows == (256, 512, 1024)
    assert fp4.asymptote_fraction == pytest.approx(0.443, abs=0.005)
    assert fp4.half_rows == pytest.approx(377, rel=0.03)
    assert fp8.asymptote_fraction == pytest.approx(0.573, abs=0.005)
    assert fp8.half_rows == pytest.approx(204, rel=0.03)
    assert fp4.max_error_fraction < 0.02 and fp8.max_error_fraction < 0.05
    b200 = get_gpu("B200")
    scaled_fp4, scaled_fp8 = generation_scales(b200, "fp4"), generation_scales(b200, "fp8")
    assert scaled_fp4.gemm == pytest.approx(
        scaled_fp8.gemm * fp4.asymptote_fraction / fp8.asymptote_fraction, rel=0.005)
    assert scaled_fp4.half_rows == pytest.approx(scaled_fp8.half_rows * fp4.half_rows / fp8.half_rows, rel=0.01)
    # CDNA4's MXFP4 estimate carries the same ratios over CDNA3's FP8.
    mi355x = generation_scales(get_gpu("MI355X"), "fp4")
    cdna_fp8 = generation_scales(get_gpu("MI355X"), "fp8")
    assert mi355x.gemm == pytest.approx(cdna_fp8.gemm * scaled_fp4.gemm / scaled_fp8.gemm, rel=0.005)
    assert mi355x.half_rows == pytest.approx(cdna_fp8.half_rows * scaled_fp4.half_rows / scaled_fp8.half_rows,
                                             rel=0.01)


def test_blackwell_hbm_scale_is_its_decode_kernels_fraction_over_hoppers_not_streams():
    kernels = memory_kernels()
    assert all(k.source.startswith("https://") for k in kernels.values())
    for generation in ("hopper", "blackwell"):
        assert sum(k.role == "reference" for k in kernels.values() if k.generation == generation) == 1
    b200 = get_gpu("B200")
    # trtllm-gen decode 5.83 of 8.0 TB/s over FlashMLA's 3.0 of 3.35 on H800: 0.729 / 0.896 = 0.814.
    assert generation_spec(b200).hbm_scale == pytest.approx(kernel_hbm_scale("blackwell"), abs=5e-4)
    assert kernel_hbm_scale("hopper") == 1.0 and kernel_hbm_scale("ampere") is None
    # Hopper's best kernel reaches its STREAM midpoint (0.895), which is why STREAM stands in for the
    # generations without kernel figures; Blackwell's reach at most ~0.8 of its STREAM 7.35 TB/s.
    assert kernels["h800_flashmla_dense_decode"].fraction == pytest.approx(0.895, abs=0.01)
    blackwell = [k for k in kernels.values() if k.generation == "blackwell"]
    assert all(k.fraction < 0.8 * 7.35 / 8.0 for k in blackwell)
    assert all(k.spec_tb_per_s * 1000 == b200.memory_bandwidth_gb_per_s for k in blackwell)


def test_every_gemm_series_names_its_source_and_a_square_one_has_no_half_saturation():
    series = gemm_series()
    assert all(s.source.startswith("https://") for s in series.values())
    with pytest.raises(ValueError, match="square"):
        gemm_saturation(series["b200_nvfp4_square_torchao"])


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


def test_the_peak_rate_split_solves_the_b200_tables_and_slows_blackwell_ultra_fp4():
    split = generation_spec(get_gpu("B200")).peak_rate_split
    series = gemm_series()
    fp4 = gemm_saturation(series["b200_nvfp4_cutlass_vllm"])
    fp8 = gemm_saturation(series["b200_fp8_cutlass_vllm"])
    # The two constants reproduce both B200 asymptotes (they are solved from them) ...
    assert split.fraction(9000) == pytest.approx(fp4.asymptote_fraction, rel=0.005)
    assert split.fraction(4500) == pytest.approx(fp8.asymptote_fraction, rel=0.005)
    # ... and put B200 BF16 within 10 % of the measured cuBLAS table they were not solved from.
    bf16 = gemm_saturation(series["b200_bf16_cublas_vllm"])
    assert split.fraction(2250) == pytest.approx(bf16.asymptote_fraction, rel=0.10)
    b200, b300 = get_gpu("B200"), get_gpu("B300")
    assert peak_rate_factor(b200, "fp4") == 1.0 and peak_rate_factor(b300, "fp8") == 1.0  # same peaks
    # B300: 14 PF FP4. Hand computation: 1/0.812 + 14000/8763 = 2.829 against 1/0.812 + 9000/8763 = 2.258.
    assert peak_rate_factor(b300, "fp4") == pytest.approx(2.258 / 2.829, rel=0.005)
    fp4_tflops = {g: get_gpu(g).fp4_tflops * generation_scales(get_gpu(g), "fp4").gemm for g in ("B200", "B300")}
    assert 1.2 < fp4_tflops["B300"] / fp4_tflops["B200"] < 1.3


def test_mxfp4_takes_the_fp4_tensor_cores_figure():
    for name in ("B200", "MI355X"):
        gpu = get_gpu(name)
        assert generation_scales(gpu, "mxfp4") == generation_scales(gpu, "fp4")
    assert generation_scales(get_gpu("B200"), "mxfp4").gemm < generation_scales(get_gpu("B200"), "bf16").gemm


def test_carried_constants_name_constants_and_leave_one_gpu_out_drops_them():
    from pydantic import ValidationError

    from layoutopt.perf_model.calibration import without_carried

    hopper = get_engine_profile("trtllm")
    # The Hopper profile takes the MLA launch term from the Blackwell fit: its rows cannot identify it.
    assert "eager_mla_layer_launch_us" in hopper.carried_constants
    assert hopper.eager_mla_layer_launch_us == get_engine_profile("trtllm", "blackwell").eager_mla_layer_launch_us
    own = without_carried(hopper)
    assert own.eager_mla_layer_launch_us == 0.0 and own.carried_constants == ()
    assert own.eager_layer_launch_us == hopper.eager_layer_launch_us  # fitted on Hopper rows: kept
    plain = get_engine_profile("vllm")
    assert without_carried(plain) is plain
    with pytest.raises(ValidationError, match="carried_constants"):
        hopper.model_validate(hopper.model_dump() | {"carried_constants": ("source",)})
    with pytest.raises(ValidationError, match="carried_constants"):
        hopper.model_validate(hopper.model_dump() | {"carried_constants": ("no_such_constant",)})
