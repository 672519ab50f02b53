"""Quantized-checkpoint availability as an engine rule: the search never proposes a weight precision
without a checkpoint of it or the engine version's online quantization, and says where that comes from."""

from __future__ import annotations

from functools import lru_cache

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from layoutopt import api
from layoutopt.engines import check_layout, load_engine_data
from layoutopt.engines.describe import rule_summaries
from layoutopt.engines.quantization import weight_source
from layoutopt.errors import InputError
from layoutopt.hardware_catalog.catalog import get_gpu
from layoutopt.model_catalog.catalog import get_model
from layoutopt.model_catalog.checkpoints import (
    available_checkpoints,
    checkpoint_for,
    parse_checkpoint_option,
    prequantized_checkpoints,
    with_user_checkpoints,
)
from layoutopt.optimizer.enumeration import build_candidate_table
from layoutopt.plan import Layout, load_plan
from layoutopt.workloads.presets import workload_from_lengths
from layoutopt.workloads.slo import SLO

ENGINES = ["vllm==0.33.0", "vllm==0.13.0", "sglang==0.5.23", "sglang==0.5.3"]
SLO_CHAT = SLO(ttft_ms={"p90": 2000}, tpot_ms={"p90": 50}, attainment=0.9)
B200, H100, A100 = (get_gpu(n) for n in ("B200", "H100-SXM", "A100-80GB-SXM"))
QWEN = get_model("qwen3-32b")  # BF16 release, an FP8 variant in the catalog, nvidia/Qwen3-32B-FP4
LLAMA = get_model("llama-3.1-70b")  # BF16 release only: no FP8 or FP4 checkpoint in the data


def _data(engine: str):
    return load_engine_data(*engine.split("=="))


@lru_cache(maxsize=None)
def _table(model: str, gpu: str, engine: str, precision: str, user_fp4: bool = False):
    spec = get_model(model)
    if user_fp4:
        spec = with_user_checkpoints(spec, ["fp4=me/" + model + "-nvfp4"])
    return spec, build_candidate_table(spec, [get_gpu(gpu)], workload_from_lengths(1000, 200), SLO_CHAT,
                                       gpu_limits={get_gpu(gpu).name: 8}, max_usd_per_hour=None, min_rate_rps=None,
                                       engine=engine, precision=precision)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(["qwen3-32b", "llama-3.1-8b", "qwen3-30b-a3b", "llama-3.1-70b"]),
       gpu=st.sampled_from(["B200", "H100-SXM", "A100-80GB-SXM"]), engine=st.sampled_from(ENGINES),
       precision=st.sampled_from(["auto", "fp8", "fp4"]))
def test_no_candidate_has_weights_without_a_checkpoint_or_online_path(model, gpu, engine, precision):
    spec, table = _table(model, gpu, engine, precision)
    for candidate in table.candidates:
        found = weight_source(_data(engine), spec, get_gpu(gpu), candidate.layout.weight_precision)
        assert found.available, (candidate.name, found.problem)
    if precision == "fp4" and checkpoint_for(spec, "fp4") is None:
        assert not table.candidates  # the structural filters or the rule dropped every layout


@pytest.mark.parametrize("engine", ENGINES)
def test_b200_auto_search_proposes_fp4_only_with_a_checkpoint(engine):
    _, plain = _table("qwen3-30b-a3b", "B200", engine, "auto")
    assert plain.candidates and {c.layout.weight_precision for c in plain.candidates} <= {"bf16", "fp8"}
    record = next(f for f in plain.filters if f.name == "engine_rule:checkpoint_unavailable")
    assert "fp4 weights: no fp4 checkpoint of qwen3-30b-a3b" in record.example
    _, own = _table("qwen3-30b-a3b", "B200", engine, "auto", user_fp4=True)
    assert "fp4" in {c.layout.weight_precision for c in own.candidates}
    _, qwen = _table("qwen3-32b", "B200", engine, "auto")  # nvidia/Qwen3-32B-FP4
    assert "fp4" in {c.layout.weight_precision for c in qwen.candidates}


@pytest.mark.parametrize(("engine", "source", "words"), [
    ("vllm==0.33.0", "vllm/config/quantization.py:224", "only MoE experts to fp4"),
    ("vllm==0.13.0", "vllm/model_executor/layers/quantization/fp8.py:565", "only to fp8 (--quantization fp8)"),
    ("sglang==0.5.23", "sglang/srt/layers/quantization/fp8.py:1150", "only to fp8 (--quantization fp8)"),
])
def test_the_rule_fires_with_its_source(engine, source, words):
    [violation] = check_layout(engine, LLAMA, B200, Layout(tp_size=2, weight_precision="fp4"), "colocated")
    assert violation.rule == "checkpoint_unavailable" and str(violation.source) == source
    assert words in violation.message and "--checkpoint fp4=ORG/NAME" in violation.message
    assert violation.values == {"precision": "fp4", "model": "llama-3.1-70b"}


def test_online_fp8_needs_the_engine_s_load_time_quantization():
    llama = LLAMA  # BF16 only: FP8 comes from online quantization
    found = weight_source(_data("vllm==0.33.0"), llama, H100, "fp8")
    assert (found.online_method, str(found.source)) == ("fp8_per_tensor", "vllm/config/quantization.py:196")
    assert weight_source(_data("vllm==0.13.0"), llama, H100, "fp8").online_method == "fp8"
    # A checkpoint of the precision wins over the online path (the catalog's FP8 variant of qwen3-32b).
    variant = weight_source(_data("vllm==0.33.0"), QWEN, H100, "fp8")
    assert (variant.online_method, variant.checkpoint.hf_id) == (None, "Qwen/Qwen3-32B-FP8")


def test_online_quantization_below_its_minimum_capability_is_refused():
    turing = A100.model_copy(update={"name": "T4-like", "compute_capability": 7.0})
    found = weight_source(_data("vllm==0.33.0"), get_model("llama-3.1-70b"), turing, "fp8")
    assert not found.available and "needs compute capability 7.5" in found.problem
    assert str(found.source) == "vllm/model_executor/layers/quantization/online/base.py:212"


def test_engines_do_not_dequantize_to_bf16():
    deepseek = get_model("deepseek-v3")  # FP8 release
    [violation] = check_layout("vllm==0.33.0", deepseek, H100, Layout(tp_size=8, ep_size=8, dp_size=1,
                                                                      weight_precision="bf16"), "colocated")
    assert violation.rule == "checkpoint_unavailable" and "do not dequantize" in violation.message
    assert check_layout("vllm==0.33.0", deepseek, H100, Layout(tp_size=8, ep_size=8, weight_precision="fp8"),
                        "colocated") == []


def test_user_checkpoints_make_a_precision_available():
    spec = with_user_checkpoints(QWEN, ["fp4=me/Qwen3-32B-NVFP4", "FP8=me/other"])
    assert spec.user_checkpoints == (("fp4", "me/Qwen3-32B-NVFP4"), ("fp8", "me/other"))
    assert checkpoint_for(QWEN, "fp4").hf_id == "nvidia/Qwen3-32B-FP4"
    assert checkpoint_for(spec, "fp4").origin == "user"
    assert checkpoint_for(spec, "fp8").hf_id == "me/other"  # the user's id comes before the catalog's
    assert check_layout("vllm==0.33.0", with_user_checkpoints(LLAMA, ["fp4=me/L70-FP4"]), B200,
                        Layout(tp_size=2, weight_precision="fp4"), "colocated") == []


@pytest.mark.parametrize("text", ["fp4", "fp16=a/b", "fp4=", "fp4=a//b", "fp4=a/b c"])
def test_bad_checkpoint_options_name_the_field(text):
    with pytest.raises(InputError) as error:
        parse_checkpoint_option(text)
    assert error.value.field == "--checkpoint"


def test_catalog_rows_are_unique_and_sourced():
    rows = [(r.model, r.precision) for r in prequantized_checkpoints()]
    assert len(rows) == len(set(rows))
    # The release and its catalog row are one checkpoint; qwen3-32b's FP8 variant is listed once too.
    assert [c.origin for c in available_checkpoints(get_model("deepseek-r1"))] == ["release", "prequantized"]
    assert [(c.precision, c.origin) for c in available_checkpoints(QWEN)] == [
        ("bf16", "release"), ("fp8", "catalog"), ("fp4", "prequantized")]


@pytest.mark.parametrize("engine", ENGINES)
def test_catalog_engines_lists_the_rule(engine):
    rows = [r for r in rule_summaries(engine) if r.rule == "checkpoint_unavailable"]
    assert any(r.source is not None and "--quantization" in r.summary for r in rows)
    assert any(r.data_file == "layoutopt/model_catalog/data/checkpoints.yaml" for r in rows)


def test_solve_and_emit_take_the_user_checkpoint(tmp_path):
    from layoutopt.cli import cli

    out = tmp_path / "plan"
    result = CliRunner().invoke(cli, ["solve", "--model", "qwen3-30b-a3b", "--budget", "8xB200", "--isl", "1000",
                                      "--osl", "200", "--precision", "fp4", "--checkpoint", "fp4=me/Qwen3-30B-NVFP4",
                                      "--time-limit", "5", "--emit", str(out), "--output", str(tmp_path / "p.json")])
    assert result.exit_code == 0, result.output
    scripts = "".join(p.read_text() for p in (out / "launch").glob("*.sh"))
    assert "me/Qwen3-30B-NVFP4" in scripts and "--quantization" not in scripts
    # Without the id the plan's FP4 pools have no checkpoint: emit refuses and names the option.
    with pytest.raises(InputError, match="--checkpoint fp4="):
        api.emit(load_plan(tmp_path / "p.json"), tmp_path / "again", engine="vllm")
    written = api.emit(load_plan(tmp_path / "p.json"), tmp_path / "again", engine="vllm",
                       checkpoints=("fp4=me/Qwen3-30B-NVFP4",))
    assert written
    refused = CliRunner().invoke(cli, ["solve", "--model", "qwen3-30b-a3b", "--budget", "8xB200", "--isl", "1000",
                                       "--osl", "200", "--precision", "fp4", "--time-limit", "5"])
    assert refused.exit_code == 1 and "checkpoint_unavailable" in refused.output


def test_estimate_still_evaluates_and_names_the_rule_and_its_source():
    result = api.estimate(LLAMA, B200, engine="vllm==0.33.0", isl=1000, osl=200,
                          layout=Layout(tp_size=2, weight_precision="fp4"))
    [violation] = [v for v in result.rule_violations if v.rule == "checkpoint_unavailable"]
    assert str(violation.source) == "vllm/config/quantization.py:224" and result.request_throughput_rps > 0
    own = api.estimate(with_user_checkpoints(LLAMA, ["fp4=me/L70-FP4"]), B200, engine="vllm==0.33.0", isl=1000,
                       osl=200, layout=Layout(tp_size=2, weight_precision="fp4"))
    assert not [v for v in own.rule_violations if v.rule == "checkpoint_unavailable"]


def test_catalog_show_lists_the_known_checkpoints():
    from layoutopt.model_catalog.summary import model_summary

    rows = model_summary(get_model("qwen3-8b"))["checkpoints"]
    assert [(r["precision"], r["hf_id"], r["origin"]) for r in rows] == [
        ("bf16", "Qwen/Qwen3-8B", "release"), ("fp4", "nvidia/Qwen3-8B-FP4", "prequantized"),
        ("fp8", "nvidia/Qwen3-8B-FP8", "prequantized")]
