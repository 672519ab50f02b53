"""Measurement loading and the least-squares profile fit (layoutopt.perf_model.fit)."""

from __future__ import annotations

import csv
import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from layoutopt.errors import InputError
from layoutopt.perf_model.calibration import get_engine_profile
from layoutopt.perf_model.fit import MeasuredCase, fit_profile, load_cases, min_cases, predict, trial_profile
from layoutopt.plan import Layout

HEADER = ("id,backend,model,system,precision,mode,isl,osl,concurrency,gemm_quant_mode,moe_quant_mode,tp,pp,"
          "attention_dp,moe_tp,moe_ep,prefill_workers,prefill_tp,prefill_pp,prefill_attention_dp,prefill_moe_tp,"
          "prefill_moe_ep,prefill_batch,decode_workers,decode_tp,decode_pp,decode_attention_dp,decode_moe_tp,"
          "decode_moe_ep,decode_batch,ttft_ms,tpot_ms\n")


def _row(rid, system="h100_sxm", model="meta-llama/Llama-3.1-8B-Instruct", quant="fp8", tp="1", mode="agg",
         disagg="," * 13):
    agg = f"{tp},1,1,{tp},1" if mode == "agg" else ",,,,"
    return f"{rid},vllm,{model},{system},{quant},{mode},1024,128,8,{quant},{quant},{agg},{disagg},100.0,10.0\n"


def test_load_cases_reads_the_gpu_of_each_row_and_says_why_rows_are_left_out(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text(HEADER + _row("a") + _row("b", system="b200_sxm", quant="nvfp4")
                    + _row("c", model="nobody/unknown-model") + _row("d", system="tpu_v9")
                    + _row("e", tp="6") + _row("f", quant="int2"))
    cases, left = load_cases(path)
    assert [(c.row_id, c.gpu, c.layout.weight_precision) for c in cases] == [("a", "H100-SXM", "fp8"),
                                                                              ("b", "B200", "fp4")]
    reasons = {x.row_id: x.reason for x in left}
    assert reasons["c"] == "model not in catalog"
    assert "tpu_v9" in reasons["d"]
    assert "power of two" in reasons["e"]
    assert "int2" in reasons["f"]
    assert len(cases) + len(left) == 6


def test_load_cases_unfolds_expert_parallel_workers_written_with_ep_times_their_degrees(tmp_path):
    # The B200 export writes a TP8 EP8 worker as tp 64 / moe_tp 8 / moe_ep 8 and DEP8 as attention_dp 64:
    # such rows replay on the 8 GPUs their twins (the same run, described) ran on; a real TP4 x DP2 EP8
    # worker, a TP8 EP8 one and a TP4 one with MoE TP2 x EP2 (within one HGX node) keep their columns.
    def moe_row(rid, tp, dp, moe_tp, ep):
        return (f"{rid},trtllm,deepseek-ai/DeepSeek-R1,b200_sxm,fp4,agg,1024,1024,64,nvfp4,nvfp4,"
                f"{tp},1,{dp},{moe_tp},{ep},{',' * 13},300.0,12.0\n")
    path = tmp_path / "rows.csv"
    path.write_text(HEADER + moe_row("tep", 64, 1, 8, 8) + moe_row("dep", 1, 64, 8, 8) + moe_row("tep4", 16, 1, 4, 4)
                    + moe_row("plain_dep", 1, 8, 1, 8) + moe_row("mixed", 4, 2, 1, 8) + moe_row("wide", 8, 1, 1, 8)
                    + moe_row("moe_tp", 4, 1, 2, 2))
    cases, left = load_cases(path)
    assert not left
    got = {c.row_id: (c.layout.tp_size, c.layout.dp_size, c.layout.ep_size, c.layout.moe_tp_size) for c in cases}
    assert got == {"tep": (8, 1, 8, 1), "dep": (1, 8, 8, 1), "tep4": (4, 1, 4, 1), "plain_dep": (1, 8, 8, 1),
                   "mixed": (4, 2, 8, 1), "wide": (8, 1, 8, 1), "moe_tp": (4, 1, 2, 2)}


def test_load_cases_unfolds_vllm_expert_parallel_rows_written_as_tp_times_dp(tmp_path):
    # The export writes vLLM's `--tensor-parallel-size 4 --enable-expert-parallel` (4 GPUs, EP 4) as
    # tp 4 x attention_dp 4 with moe_ep 16: it replays as TP4 EP4 on 4 GPUs. A real vLLM DEP8 (tp 1 x
    # dp 8, EP 8), the same columns under TensorRT-LLM, and a vLLM TP4 x DP2 EP8 keep their columns.
    def moe_row(rid, engine, tp, dp, moe_tp, ep):
        return (f"{rid},{engine},deepseek-ai/DeepSeek-R1,b200_sxm,fp4,agg,1024,1024,64,nvfp4,nvfp4,"
                f"{tp},1,{dp},{moe_tp},{ep},{',' * 13},300.0,12.0\n")
    path = tmp_path / "rows.csv"
    path.write_text(HEADER + moe_row("tep4", "vllm", 4, 4, 1, 16) + moe_row("tep2", "vllm", 2, 2, 1, 4)
                    + moe_row("dep8", "vllm", 1, 8, 1, 8) + moe_row("trt", "trtllm", 4, 4, 1, 16)
                    + moe_row("mixed", "vllm", 4, 2, 1, 8))
    cases, left = load_cases(path)
    assert not left
    got = {c.row_id: (c.layout.tp_size, c.layout.dp_size, c.layout.ep_size, c.layout.gpus_per_instance) for c in cases}
    assert got == {"tep4": (4, 1, 4, 4), "tep2": (2, 1, 2, 2), "dep8": (1, 8, 8, 8), "trt": (4, 4, 16, 16),
                   "mixed": (4, 2, 8, 8)}


def test_load_cases_leaves_out_runs_of_speculative_decoding_images(tmp_path):
    # InferenceX served TensorRT-LLM 1.2.0rc6.post3 only with MTP (measurements.SPECULATIVE_DECODING_IMAGES):
    # such rows are left out with the reason, under either spelling of the registry path; other images stay.
    header = HEADER.rstrip("\n") + ",engine_image\n"
    image_rows = [("mtp_hash", "nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc6.post3"),
                  ("mtp_slash", "nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6.post3"),
                  ("plain", "nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6.post2"), ("none", "")]
    path = tmp_path / "rows.csv"
    path.write_text(header + "".join(_row(rid).rstrip("\n") + f",{image}\n" for rid, image in image_rows))
    cases, left = load_cases(path)
    assert sorted(c.row_id for c in cases) == ["none", "plain"]
    assert {x.row_id: x.reason for x in left} == {"mtp_hash": "speculative decoding (MTP) run: not modelled",
                                                  "mtp_slash": "speculative decoding (MTP) run: not modelled"}


def test_load_cases_carries_the_attention_dp_balancing_of_the_reference_launches(tmp_path):
    # InferenceX's TensorRT-LLM scripts set attention_dp_config enable_balance (DeepSeek: timeout_iters 60,
    # batching_wait_iters 0; gpt-oss: TensorRT-LLM's defaults 50 and 10) on attention-DP workers; rows of
    # other engines, without attention DP, or outside the reference launches keep balancing off, and
    # a row's own columns win. predict launches the profile with it.
    from layoutopt.perf_model.fit import _with_budget

    def moe_row(rid, engine, model, dp, extra=""):
        return (f"{rid},{engine},{model},b200_sxm,fp4,agg,1024,1024,64,nvfp4,nvfp4,"
                f"1,1,{dp},1,{dp},{',' * 13},300.0,12.0{extra}\n")
    path = tmp_path / "rows.csv"
    path.write_text(HEADER.rstrip("\n") + ",attention_dp_balance_timeout_iters,attention_dp_batching_wait_iters\n"
                    + moe_row("ds", "trtllm", "deepseek-ai/DeepSeek-R1", 8, ",,")
                    + moe_row("oss", "trtllm", "openai/gpt-oss-120b", 4, ",,")
                    + moe_row("tep", "trtllm", "deepseek-ai/DeepSeek-R1", 1, ",,")
                    + moe_row("vllm", "vllm", "deepseek-ai/DeepSeek-R1", 8, ",,")
                    + moe_row("own", "trtllm", "deepseek-ai/DeepSeek-R1", 8, ",20,3"))
    cases, left = load_cases(path)
    assert not left
    got = {c.row_id: (c.attention_dp_balance_timeout_iters, c.attention_dp_batching_wait_iters) for c in cases}
    assert got == {"ds": (60, 0), "oss": (50, 10), "tep": (None, 10), "vllm": (None, 10), "own": (20, 3)}
    elsewhere, _ = load_cases(path, aiconfigurator_launch=False)
    assert [c.attention_dp_balance_timeout_iters for c in elsewhere] == [None, None, None, None, 20]
    trtllm = get_engine_profile("trtllm")
    assert trtllm.attention_dp_balance_timeout_iters is None
    launched = _with_budget(trtllm, cases[0])
    assert (launched.attention_dp_balance_timeout_iters, launched.attention_dp_batching_wait_iters) == (60, 0)


def test_load_cases_reads_trtllm_batch_waiting_columns(tmp_path):
    # batch_wait_timeout_iters / batch_wait_max_tokens_ratio columns (the ratio clipped to [0, 1]); a row
    # without them gets its reference launch's (InferenceX's Llama-3.1-70B 1k/1k launches below TP 8 waited,
    # reference_protocol.INFERENCEX_TRTLLM_BATCH_WAIT) or none outside the reference launches. predict
    # launches the profile with it.
    from layoutopt.perf_model.fit import _with_budget

    def row(rid, extra):
        return (f"{rid},trtllm,meta-llama/Llama-3.1-70B,b200_sxm,fp8,agg,1024,1024,8,fp8,fp8,"
                f"2,1,1,2,1,{',' * 13},300.0,10.0{extra}\n")
    path = tmp_path / "rows.csv"
    path.write_text(HEADER.rstrip("\n") + ",batch_wait_timeout_iters,batch_wait_max_tokens_ratio\n"
                    + row("set", ",20,0.9") + row("big", ",5,3") + row("none", ",,"))
    cases, left = load_cases(path)
    assert not left
    got = {c.row_id: (c.batch_wait_timeout_iters, c.batch_wait_max_tokens_ratio) for c in cases}
    assert got == {"set": (20, 0.9), "big": (5, 1.0), "none": (20, 0.9)}
    outside, _ = load_cases(path, aiconfigurator_launch=False)
    assert [(c.batch_wait_timeout_iters, c.batch_wait_max_tokens_ratio) for c in outside][2] == (0, 0.0)
    trtllm = get_engine_profile("trtllm")
    assert trtllm.batch_wait_timeout_iters == 0
    launched = _with_budget(trtllm, cases[0])
    assert (launched.batch_wait_timeout_iters, launched.batch_wait_max_tokens_ratio) == (20, 0.9)
    assert _with_budget(trtllm, outside[2]).batch_wait_timeout_iters == 0


def test_load_cases_replays_the_kv_cache_dtype_of_the_reference_launches(tmp_path):
    # InferenceX's launch scripts ran an FP8 KV cache on every TensorRT-LLM B200 launch, SGLang DeepSeek,
    # vLLM gpt-oss on B200 from 2025-12-05 and MiniMax-M2.5 FP8 from 2026-04-03 (reference_kv.INFERENCEX_KV_CACHE_FP8);
    # rows of scripts that never set it, dated before the script did, disaggregated rows, and the default-launch
    # reading keep BF16; a kv_cache_dtype column wins.
    def row(rid, engine, model, quant, date, kv="", mode="agg"):
        layout = "1,1,1,1,1," + "," * 13 if mode == "agg" else ",,,,,1,1,1,1,1,1,,1,1,1,1,1,1,"
        return (f"{rid},{engine},{model},b200_sxm,{quant},{mode},1024,1024,8,{quant},{quant},{layout},"
                f"300.0,12.0,{date},{kv}\n")
    path = tmp_path / "rows.csv"
    path.write_text(HEADER.rstrip("\n") + ",measured_date,kv_cache_dtype\n"
                    + row("trt", "trtllm", "openai/gpt-oss-120b", "nvfp4", "")
                    + row("sgl", "sglang", "deepseek-ai/DeepSeek-R1", "nvfp4", "2025-11-10")
                    + row("oss_old", "vllm", "openai/gpt-oss-120b", "nvfp4", "2025-11-02")
                    + row("oss_new", "vllm", "openai/gpt-oss-120b", "nvfp4", "2026-02-25")
                    + row("mm_old", "vllm", "MiniMaxAI/MiniMax-M2.5", "fp8", "2026-03-28")
                    + row("mm_new", "vllm", "MiniMaxAI/MiniMax-M2.5", "fp8", "2026-04-03")
                    + row("mm_undated", "vllm", "MiniMaxAI/MiniMax-M2.5", "fp8", "")
                    + row("disagg", "trtllm", "deepseek-ai/DeepSeek-R1", "nvfp4", "2026-01-29", mode="disagg")
                    + row("own", "vllm", "openai/gpt-oss-120b", "nvfp4", "2025-11-02", kv="fp8_e4m3")
                    + row("own_auto", "trtllm", "openai/gpt-oss-120b", "nvfp4", "", kv="auto")
                    + row("bad", "vllm", "openai/gpt-oss-120b", "nvfp4", "", kv="int3"))
    cases, left = load_cases(path)
    got = {c.row_id: (c.layout or c.decode_layout).kv_precision for c in cases}
    assert got == {"trt": "fp8", "sgl": "fp8", "oss_old": "bf16", "oss_new": "fp8", "mm_old": "bf16", "mm_new": "fp8",
                   "mm_undated": "bf16", "disagg": "bf16", "own": "fp8", "own_auto": "bf16"}
    assert [(x.row_id, "kv_cache_dtype 'int3'" in x.reason) for x in left] == [("bad", True)]
    disagg = next(c for c in cases if c.row_id == "disagg")
    assert disagg.prefill_layout.kv_precision == "bf16"
    elsewhere, _ = load_cases(path, aiconfigurator_launch=False)
    assert {c.row_id for c in elsewhere if (c.layout or c.decode_layout).kv_precision == "fp8"} == {"own"}


def test_reference_kv_table_names_catalog_models_and_dates_and_reaches_memory_and_decode():
    # Every launch of INFERENCEX_KV_CACHE_FP8 names models as the reference CSVs write them (GLM-5's rows are not
    # replayed yet: its id is not in the catalog), a served precision, an ISO date or "",
    # and a source; an FP8 KV cache halves the KV bytes a long-context decode step reads (lower TPOT) and
    # admits a larger batch.
    import datetime

    from layoutopt.hardware_catalog.catalog import get_gpu
    from layoutopt.model_catalog.catalog import get_model
    from layoutopt.perf_model.memory import memory_breakdown
    from layoutopt.perf_model.reference_kv import INFERENCEX_KV_CACHE_FP8

    found = [p / "shared" / "reference" / "measurements" for p in Path(__file__).resolve().parents
             if (p / "shared" / "reference" / "measurements").is_dir()]
    if not found:
        pytest.skip("reference measurements not next to the repository")
    reference = found[0]
    REFERENCE_MODELS = {row["model"] for name in ("h100_sxm.csv", "b200_sxm.csv")
                        for row in csv.DictReader(open(reference / name, newline=""))}
    for launch in INFERENCEX_KV_CACHE_FP8:
        assert launch.engine in ("vllm", "sglang", "trtllm") and get_gpu(launch.gpu).name == launch.gpu
        assert set(launch.models) <= REFERENCE_MODELS and set(launch.precisions) <= {"fp4", "fp8", "bf16", "int4"}
        assert not launch.since or datetime.date.fromisoformat(launch.since)
        assert "InferenceX" in launch.source
    bf16 = MeasuredCase("r", "vllm", "agg", "meta-llama/Llama-3.1-70B", 8192, 1024, 16.0,
                        Layout(tp_size=4, weight_precision="fp8"), None, 1, None, 1, None, 500.0, 20.0, gpu="B200")
    fp8 = dataclasses.replace(bf16, layout=bf16.layout.model_copy(update={"kv_precision": "fp8"}))
    assert predict(fp8)[1] < predict(bf16)[1]
    model, gpu = get_model(bf16.model_id), get_gpu("B200")
    assert (memory_breakdown(model, gpu, fp8.layout, context_tokens=9216).max_batch_size
            > 1.5 * memory_breakdown(model, gpu, bf16.layout, context_tokens=9216).max_batch_size)


def test_load_cases_names_missing_columns(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("id,backend\nx,vllm\n")
    with pytest.raises(InputError, match="ttft_ms"):
        load_cases(path)


def test_one_run_listed_under_two_names_of_one_architecture_counts_once():
    from layoutopt.perf_model.measurements import fit_cases, split_repeats

    def case(rid, model, ttft=120.0, conc=16.0):
        return MeasuredCase(rid, "sglang", "agg", model, 1024, 128, conc, Layout(tp_size=8, weight_precision="fp8"),
                            None, 1, None, 1, None, ttft, 10.0, gpu="B200")

    r1 = case("2026_04_06_deepseek_r1_x", "deepseek-ai/DeepSeek-R1")
    v3 = case("dsr1_b200_x", "deepseek-ai/DeepSeek-V3")              # the same run, the sibling name
    other_run = case("dsr1_b200_y", "deepseek-ai/DeepSeek-V3", ttft=121.0)
    other_model = case("k", "meta-llama/Llama-3.1-70B")           # same numbers, another architecture
    unknown = case("u", "acme/unlisted")                           # outside the catalog: by its id
    first, repeats = split_repeats([r1, v3, other_run, other_model, unknown, case("u2", "acme/unlisted")])
    assert [c.row_id for c in first] == [r1.row_id, other_run.row_id, "k", "u"]
    assert [c.row_id for c in repeats] == [v3.row_id, "u2"]
    assumed = dataclasses.replace(case("g", "meta-llama/Llama-3.1-70B", ttft=99.0), worker_counts_assumed=True)
    assert [c.row_id for c in fit_cases([r1, v3, assumed])] == [r1.row_id]

def test_a_run_listed_again_rounded_to_hundredths_counts_once():
    from layoutopt.perf_model.measurements import split_repeats

    def case(rid, ttft, tpot):
        return MeasuredCase(rid, "vllm", "agg", "moonshotai/Kimi-K2.5", 1024, 1024, 4.0,
                            Layout(tp_size=8, weight_precision="fp4"), None, 1, None, 1, None, ttft, tpot, gpu="B200")

    # b200_sxm.csv: 2026_04_06_kimi_k2_5_..._c4_tp8_ep1_1297 (163.725, 7.4233) and its gap-analysis
    # listing rounded to 0.01 ms (163.730, 7.4200).
    precise, rounded = case("1297", 163.725, 7.4233), case("gap_1", 163.73, 7.42)
    another = case("other", 163.74, 7.4233)  # a hundredth apart: another run
    first, repeats = split_repeats([precise, rounded, another])
    assert [c.row_id for c in first] == ["1297", "other"]
    assert [c.row_id for c in repeats] == ["gap_1"]


def _synthetic_cases(truth) -> list[MeasuredCase]:
    """Cases whose 'measurements' are the model's own predictions under ``truth``."""
    cases = []
    for i, (isl, osl, conc, tp) in enumerate([(128, 512, 1, 1), (4096, 256, 8, 1), (1024, 1024, 64, 2),
                                              (8192, 128, 4, 2), (512, 2048, 128, 4), (2048, 512, 32, 1),
                                              (16384, 64, 2, 4), (256, 256, 256, 2)]):
        case = MeasuredCase(f"s{i}", "vllm", "agg", "meta-llama/Llama-3.1-8B-Instruct", isl, osl, float(conc),
                            Layout(tp_size=tp, weight_precision="fp8"), None, 1, None, 1, None, 1.0, 1.0,
                            gpu="H100-SXM")
        ttft, tpot = predict(case, truth)
        cases.append(dataclasses.replace(case, ttft_ms=ttft, tpot_ms=tpot))
    return cases


def test_fit_profile_recovers_constants_that_generated_the_measurements():
    base = get_engine_profile("vllm")
    truth = trial_profile(base, {"gemm_efficiency": 0.45, "memory_efficiency": 0.70})
    cases = _synthetic_cases(truth)
    result = fit_profile(cases, base, ["gemm_efficiency", "memory_efficiency"])
    assert result.values["gemm_efficiency"] == pytest.approx(0.45, rel=0.03)
    assert result.values["memory_efficiency"] == pytest.approx(0.70, rel=0.03)
    assert result.profile.gemm_efficiency == result.values["gemm_efficiency"]
    # Before the fit the base profile is off; after it every case is within 2 %.
    assert np.nanmax(np.abs(result.residuals_before)) > 0.05
    assert np.nanmax(np.abs(result.residuals_after)) < 0.02
    assert result.residuals_after.shape == (len(cases), 2)
    assert all(math.isfinite(s) and s < 0.05 for s in result.standard_errors.values())
    assert result.summary()["tpot"]["mdape"] < result.summary(after=False)["tpot"]["mdape"]


def test_fit_profile_says_how_many_cases_it_needs_and_which_parameters_exist():
    cases = _synthetic_cases(get_engine_profile("vllm"))[:2]
    params = ["gemm_efficiency", "memory_efficiency", "step_overhead_ms"]
    assert min_cases(params) == 5
    with pytest.raises(InputError, match="at least 5 measured cases"):
        fit_profile(cases, "vllm", params)
    with pytest.raises(InputError, match="parameters"):
        fit_profile(cases, "vllm", ["warp_speed"])
    with pytest.raises(InputError, match="loss"):
        fit_profile(cases * 3, "vllm", ["gemm_efficiency"], loss="quartic")


def test_accuracy_breakdown_splits_errors_by_concurrency_kind_and_precision():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from accuracy import breakdown, render_breakdown

    def case(rid, model, conc, precision, ttft):
        return MeasuredCase(rid, "vllm", "agg", model, 1024, 128, float(conc), Layout(weight_precision=precision),
                            None, 1, None, 1, None, ttft, 10.0, gpu="H100-SXM")

    cases = [case("a", "meta-llama/Llama-3.1-8B-Instruct", 4, "fp8", 100.0),
             case("b", "meta-llama/Llama-3.1-8B-Instruct", 128, "bf16", 100.0),
             case("c", "Qwen/Qwen3-30B-A3B", 128, "fp8", 100.0)]
    # Predicted TTFT 10 % high, 50 % low, 30 % low; TPOT exact.
    tables = breakdown(cases, np.array([110.0, 50.0, 70.0]), np.array([10.0, 10.0, 10.0]))
    conc = tables["concurrency"]
    assert list(conc) == ["H100-SXM/N 2-4", "H100-SXM/N 65-256"]
    assert conc["H100-SXM/N 2-4"]["ttft"]["median_signed"] == pytest.approx(10.0)
    assert conc["H100-SXM/N 65-256"]["rows"] == 2
    assert conc["H100-SXM/N 65-256"]["ttft"]["mdape"] == pytest.approx(40.0)
    assert tables["kind"]["H100-SXM/moe"]["ttft"]["median_signed"] == pytest.approx(-30.0)
    assert tables["precision"]["H100-SXM/bf16"]["ttft"]["mdape"] == pytest.approx(50.0)
    assert tables["precision"]["H100-SXM/fp8"]["tpot"]["mdape"] == pytest.approx(0.0)
    assert "-- by concurrency" in render_breakdown(tables)


def test_accuracy_labels_rows_by_their_expert_parallel_kind():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from accuracy import BREAKDOWNS

    label = BREAKDOWNS["engine x expert parallel"]
    dep, tep = Layout(dp_size=4, ep_size=4), Layout(tp_size=4, ep_size=4)
    agg = MeasuredCase("a", "vllm", "agg", "m", 1024, 128, 8.0, dep, None, 1, None, 1, None, 1.0, 1.0)
    disagg = MeasuredCase("d", "sglang", "disagg", "m", 1024, 128, 8.0, None, Layout(), 1, tep, 1, 8, 1.0, 1.0)
    assert label(agg) == "vllm/DEP"
    assert label(disagg) == "sglang/P no EP + D EP in TP"


def test_accuracy_residuals_correlate_the_error_with_row_features():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from accuracy import residual_correlations, render_residuals

    def case(rid, conc, tp):
        return MeasuredCase(rid, "vllm", "agg", "meta-llama/Llama-3.1-8B-Instruct", 1024, 128, float(conc),
                            Layout(tp_size=tp, weight_precision="fp8"), None, 1, None, 1, None, 100.0, 10.0,
                            gpu="H100-SXM")

    cases = [case("a", 4, 1), case("b", 16, 4), case("c", 64, 2), case("d", 256, 8)]
    # TTFT over-predicted more the higher the concurrency; TPOT error falls with it.
    ttft = np.array([101.0, 110.0, 130.0, 190.0])
    tpot = np.array([12.0, 11.0, 10.5, 10.0])
    table = residual_correlations(cases, ttft, tpot)
    entry = table["H100-SXM/vllm"]
    assert entry["rows"] == 4
    assert entry["ttft"]["concurrency"] == pytest.approx(1.0)
    assert entry["tpot"]["concurrency"] == pytest.approx(-1.0)
    # TP order 1, 4, 2, 8 against errors rising with rows a..d: rho = 0.8.
    assert entry["ttft"]["tp"] == pytest.approx(0.8)
    assert math.isnan(entry["ttft"]["isl"])  # constant over the group
    assert math.isnan(entry["ttft"]["moe"])
    text = render_residuals(table, "title")
    assert "+1.00*" in text and "-1.00*" in text
    # Rows the model could not replay (NaN) are left out of the correlation.
    table = residual_correlations(cases, np.array([101.0, 110.0, np.nan, 190.0]), tpot)
    assert table["H100-SXM/vllm"]["rows"] == 3


def test_benchmark_token_budget_follows_the_generator_rules(tmp_path):
    """The rows' launches size the step budget to about one prompt (AIConfigurator 0.12.0 rules):
    TensorRT-LLM bs + isl + 500 in 32-token blocks (prefill workers isl + 500), vLLM 512 + isl + 1500
    below 512 sequences (prefill isl + 1500), SGLang max_prefill_tokens isl + 1500 per rank; the
    reference CSV's cases carry it and predict launches the profile with it."""
    from layoutopt.perf_model.fit import _with_budget, benchmark_token_budget

    dep8 = Layout(tp_size=1, dp_size=8, ep_size=8)
    # 64 clients over 8 ranks: 8 per rank; 1024 + 500 + 8 = 1532 -> 1536.
    assert benchmark_token_budget("trtllm", 1024, 64, dep8, None) == 1536
    assert benchmark_token_budget("trtllm", 8192, 4, None, Layout()) == 8704
    assert benchmark_token_budget("vllm", 1024, 64, Layout(), None) == 512 + 1024 + 1500
    assert benchmark_token_budget("vllm", 1024, 1024, Layout(), None) == 2048 + 1024 + 1500
    assert benchmark_token_budget("vllm", 8192, 4, None, Layout()) == 8192 + 1500
    assert benchmark_token_budget("sglang", 1024, 64, Layout(), None) == 2524
    assert benchmark_token_budget("other", 1024, 64, Layout(), None) is None
    path = tmp_path / "rows.csv"
    path.write_text(HEADER + _row("a"))
    (case,), _ = load_cases(path)
    assert case.step_token_budget == 512 + 1024 + 1500
    assert _with_budget(get_engine_profile("vllm"), case).max_num_batched_tokens == 3036
    # SGLang's profile budget is the instance's chunk split over its ranks: min(chunk, 2524 x dp).
    dep2 = dataclasses.replace(case, engine="sglang", layout=Layout(tp_size=2, dp_size=2, ep_size=4),
                               step_token_budget=2524)
    sglang = get_engine_profile("sglang")
    assert _with_budget(sglang, dep2).max_num_batched_tokens == min(sglang.max_num_batched_tokens, 5048)
    # Rows from elsewhere (no launch rule) keep the engine's default.
    assert _with_budget(sglang, dataclasses.replace(dep2, step_token_budget=None)) is sglang


def test_accuracy_ttft_remainder_subtracts_the_gpu_prefill_at_the_lowest_concurrency():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from ttft_remainder import render_remainders, ttft_remainders

    def case(rid, model, isl, conc, ttft, tp=1, mode="agg"):
        layout = Layout(tp_size=tp, weight_precision="fp8")
        return MeasuredCase(rid, "trtllm", mode, model, isl, 128, float(conc), layout if mode == "agg" else None,
                            None if mode == "agg" else layout, 1, None if mode == "agg" else layout, 1, None, ttft,
                            10.0, gpu="H100-SXM")

    small, big = "meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-32B"
    cases = [case("a", small, 1024, 4, 50.0), case("b", small, 1024, 4, 70.0),  # lowest N: median 60
             case("c", small, 1024, 16, 500.0),                                  # queued: not the lowest N
             case("d", small, 8192, 2, 130.0),
             case("e", big, 1024, 4, 230.0, tp=2),
             case("f", big, 1024, 64, 900.0, tp=4),                              # above the concurrency cap
             case("g", big, 1024, 4, 999.0, mode="disagg")]                      # no colocated layout
    table = ttft_remainders(cases, prefill_ms=lambda c: c.isl / 100.0)         # 10.24 ms at 1024 tokens
    assert sorted(table) == ["H100-SXM/trtllm/Llama-3.1-8B-Instruct", "H100-SXM/trtllm/Qwen3-32B"]
    entry = table["H100-SXM/trtllm/Llama-3.1-8B-Instruct"]
    assert entry["rows"] == 3
    assert entry["by_isl"][1024] == pytest.approx(60.0 - 10.24)
    assert entry["by_isl"][8192] == pytest.approx(130.0 - 81.92)
    assert entry["overhead_ms"] == get_engine_profile("trtllm").request_overhead_ms
    assert table["H100-SXM/trtllm/Qwen3-32B"]["remainder_ms"] == [pytest.approx(230.0 - 10.24)]
    assert "TTFT remainder" in render_remainders(table)
    # Split by the engine build: the same model's rows measured by two builds become two groups.
    split = ttft_remainders(cases, prefill_ms=lambda c: c.isl / 100.0, versions={"a": "1.0", "b": "1.2", "d": "1.2"})
    assert sorted(split) == ["H100-SXM/trtllm==1.0/Llama-3.1-8B-Instruct", "H100-SXM/trtllm==1.2/Llama-3.1-8B-Instruct",
                             "H100-SXM/trtllm==?/Qwen3-32B"]
    assert split["H100-SXM/trtllm==1.0/Llama-3.1-8B-Instruct"]["by_isl"][1024] == pytest.approx(50.0 - 10.24)
    assert split["H100-SXM/trtllm==1.2/Llama-3.1-8B-Instruct"]["by_isl"] == {
        1024: pytest.approx(70.0 - 10.24), 8192: pytest.approx(130.0 - 81.92)}
    assert split["H100-SXM/trtllm==?/Qwen3-32B"]["overhead_ms"] == get_engine_profile("trtllm").request_overhead_ms
    assert "trtllm==1.0/Llama-3.1-8B-Instruct" in render_remainders(split)


def test_accuracy_engine_versions_read_the_build_of_every_row(tmp_path):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from ttft_remainder import engine_versions

    path = tmp_path / "rows.csv"
    path.write_text("id,backend,backend_version,model\nr1,vllm,0.19.0,m\nr2,vllm,,m\n")
    assert engine_versions([path]) == {"r1": "0.19.0", "r2": "?"}


def test_fit_calibration_start_values_name_what_is_wrong():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from fit_calibration import _start_values

    assert _start_values(None) == {}
    assert _start_values("request_overhead_ms=30, gemm_efficiency=0.6") == {
        "request_overhead_ms": 30.0, "gemm_efficiency": 0.6}
    with pytest.raises(SystemExit, match="'gemm_efficiency' is not key=number"):
        _start_values("gemm_efficiency")
    with pytest.raises(SystemExit, match="'gemm_efficiency=fast' is not key=number"):
        _start_values("gemm_efficiency=fast")
    with pytest.raises(SystemExit, match="'max_num_batched_tokens' is not a fitted constant"):
        _start_values("max_num_batched_tokens=4096")


def test_fit_calibration_keeps_the_earlier_fit_of_constants_a_partial_refit_does_not_move():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from fit_calibration import _replace_block

    text = ("vllm:\n  gemm_efficiency: 0.8\n  request_overhead_ms: 37\n  source: >-\n"
            "    Fitted in June. Fitted (+- one standard error): gemm_efficiency 0.8 +- 0.1, request_overhead_ms\n"
            "    37 +- 5. Before fitting: GEMM 0.65 from cuBLASLt [AZ-H100].\n\nsglang:\n  source: x\n")
    partial = _replace_block(text, "vllm", {"request_overhead_ms": 30.0},
                             "Fitted today: request_overhead_ms 30 +- 4.")
    block = partial.split("sglang:")[0]
    assert "request_overhead_ms: 30" in block and "gemm_efficiency: 0.8" in block
    # the constants not refit keep their provenance; the first-principles part stays last
    assert "from an earlier fit: Fitted in June." in " ".join(block.split())
    assert " ".join(block.split()).endswith("Before fitting: GEMM 0.65 from cuBLASLt [AZ-H100].")
    full = _replace_block(text, "vllm", {"request_overhead_ms": 30.0, "gemm_efficiency": 0.7},
                          "Fitted today: gemm_efficiency 0.7 +- 0.1, request_overhead_ms 30 +- 4.")
    full = " ".join(full.split())
    assert "earlier fit" not in full and "Fitted in June" not in full and "Before fitting: GEMM 0.65" in full
    # a second partial refit does not nest the earlier statements
    again = _replace_block(partial, "vllm", {"request_overhead_ms": 29.0}, "Fitted later: request_overhead_ms 29 +- 4.")
    assert " ".join(again.split()).count("from an earlier fit") == 1
