"""Ingestion of measurement files into MeasuredCase: every format on small fixtures written with the
tools' real key names, and one clear error per bad file (field, value, what is allowed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from layoutopt.calibrate.ingest import FORMATS, ingest
from layoutopt.calibrate.run_context import RunContext
from layoutopt.errors import InputError
from layoutopt.model_catalog.catalog import get_model
from layoutopt.plan import Layout

FIXTURES = Path(__file__).parent / "fixtures" / "calibrate"
TP4 = RunContext(engine="vllm", gpu="H100", model="qwen3-32b", layout=Layout(tp_size=4))

# (file, context given on the command line, format, case fields expected)
CASES = [
    ("h100_vllm_qwen3_32b_tp4.csv", RunContext(), FORMATS[0],
     dict(num=10, row_id="qwen_qwen3_32b_qwen_qwen3_32b_h100_sxm_vllm_agg_1024x128_c8_tp4_epnone_2", isl=1024,
          osl=128, concurrency=8.0, ttft_ms=126.1, tpot_ms=11.7584, tp=4)),
    # the sidecar vllm_bench_c16.yaml gives gpu and layout; the model comes from model_id
    ("vllm_bench_c16.json", RunContext(engine="vllm"), FORMATS[1],
     dict(num=1, row_id="vllm_bench_c16", isl=1024, osl=128, concurrency=16.0, ttft_ms=149.362, tpot_ms=14.3469,
          tp=4)),
    # --append-result: one run per line; --metadata gpu=H100 tp_size=4 recorded in the file
    ("vllm_bench_appended.json", RunContext(engine="vllm"), FORMATS[1],
     dict(num=2, row_id="vllm_bench_appended#1", isl=1024, osl=128, concurrency=8.0, ttft_ms=126.1,
          tpot_ms=11.7584, tp=4)),
    ("profile_export_aiperf.json", RunContext(engine="vllm", gpu="H100", layout=Layout(tp_size=4)), FORMATS[2],
     dict(num=1, row_id="profile_export_aiperf", isl=1024, osl=128, concurrency=32.0, ttft_ms=182.076,
          tpot_ms=19.1804, tp=4)),
    ("profile_export_genai_perf.json", RunContext(engine="vllm", gpu="H100", layout=Layout(tp_size=4)), FORMATS[2],
     dict(num=1, row_id="profile_export_genai_perf", isl=1024, osl=128, concurrency=8.0, ttft_ms=126.1,
          tpot_ms=11.7584, tp=4)),
    ("profile_export_aiperf.csv", TP4.merged(RunContext(concurrency=16)), FORMATS[3],
     dict(num=1, row_id="profile_export_aiperf", isl=1024, osl=128, concurrency=16.0, ttft_ms=149.36,
          tpot_ms=14.35, tp=4)),
    ("profile_export_genai_perf.csv", TP4.merged(RunContext(concurrency=8)), FORMATS[3],
     dict(num=1, row_id="profile_export_genai_perf", isl=1024, osl=128, concurrency=8.0, ttft_ms=126.1,
          tpot_ms=11.76, tp=4)),
]


@pytest.mark.parametrize("name,context,fmt,expected", CASES, ids=[c[0] for c in CASES])
def test_each_format_becomes_cases(name, context, fmt, expected):
    read = ingest([FIXTURES / name], context, engine="vllm", gpu="H100")
    assert read.formats == {str(FIXTURES / name): fmt}
    assert len(read.cases) == expected["num"]
    case = next(c for c in read.cases if c.row_id == expected["row_id"])
    assert (case.engine, case.mode, case.gpu) == ("vllm", "agg", "H100-SXM")
    assert get_model(case.model_id).name == "qwen3-32b"
    assert (case.isl, case.osl, case.concurrency) == (expected["isl"], expected["osl"], expected["concurrency"])
    assert case.ttft_ms == pytest.approx(expected["ttft_ms"]) and case.tpot_ms == pytest.approx(expected["tpot_ms"])
    assert case.layout is not None and case.layout.tp_size == expected["tp"]


def test_sidecar_describes_a_disaggregated_run(tmp_path):
    result = tmp_path / "run.json"
    result.write_text((FIXTURES / "vllm_bench_c16.json").read_text())
    (tmp_path / "run.yaml").write_text("gpu: H100\nprefill: {instances: 2, layout: {tp_size: 2}}\n"
                                       "decode: {instances: 1, layout: {tp_size: 4}, max_batch_size: 64}\n")
    case = ingest([result], RunContext(engine="vllm")).cases[0]
    assert case.mode == "disagg" and case.layout is None
    assert (case.prefill_instances, case.prefill_layout.tp_size) == (2, 2)
    assert (case.decode_instances, case.decode_layout.tp_size, case.decode_batch) == (1, 4, 64)


def _vllm(tmp_path, **changes):
    data = json.loads((FIXTURES / "vllm_bench_c16.json").read_text())
    for key, value in changes.items():
        if value is None:
            data.pop(key)
        else:
            data[key] = value
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    return path


def _csv(tmp_path, text):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    return path


HEADER = (FIXTURES / "h100_vllm_qwen3_32b_tp4.csv").read_text().splitlines()[0]
ROW = (FIXTURES / "h100_vllm_qwen3_32b_tp4.csv").read_text().splitlines()[1]

# (file maker, context, what the one error message must name)
BAD = [
    (lambda p: _vllm(p, mean_tpot_ms=None), TP4, ["mean_tpot_ms", "None", "--percentile-metrics"]),
    (lambda p: _vllm(p, mean_ttft_ms="fast"), TP4, ["mean_ttft_ms", "'fast'", "number > 0"]),
    (lambda p: _vllm(p, request_rate=4.0), TP4, ["request_rate", "4.0", "closed loop"]),
    (lambda p: _vllm(p, max_concurrency=None), TP4.merged(RunContext(model="qwen3-32b")),
     ["concurrency", "--concurrency N"]),
    (lambda p: _vllm(p, model_id="acme/NoSuchModel-7B"), RunContext(engine="vllm", gpu="H100", layout=Layout()),
     ["model", "acme/NoSuchModel-7B", "known names"]),
    (lambda p: _vllm(p), RunContext(engine="vllm", gpu="H100", model="qwen3-32b"), ["layout", "--tp"]),
    (lambda p: _vllm(p), RunContext(engine="vllm", gpu="H999", model="qwen3-32b", layout=Layout()),
     ["gpu", "H999"]),
    (lambda p: _csv(p, HEADER + "\n" + ROW.replace(",agg,", ",aggregated,") + "\n"), RunContext(),
     ["line 2", "mode", "'aggregated'", "agg or disagg"]),
    (lambda p: _csv(p, HEADER + "\n" + ROW.replace(",126.100,", ",n/a,") + "\n"), RunContext(),
     ["line 2", "ttft_ms", "'n/a'", "number > 0"]),
    (lambda p: _csv(p, "id,backend,ttft_ms,tpot_ms\nx,vllm,1,1\n"), RunContext(), ["columns", "model", "missing"]),
    (lambda p: _csv(p, "a,b\n1,2\n"), RunContext(), ["header", "a,b", "Metric,avg"]),
    (lambda p: _csv(p, "Metric,avg\nTime to First Token (ms),12\n"), TP4.merged(RunContext(concurrency=4)),
     ["Inter Token Latency", "missing", "avg column"]),
    (lambda p: _csv(p, "Metric,avg\nTime to First Token (parsecs),12\nInter Token Latency (ms),3\n"
                       "Input Sequence Length (tokens),10\nOutput Sequence Length (tokens),10\n"),
     TP4.merged(RunContext(concurrency=4)), ["time_to_first_token.unit", "'parsecs'", "ms"]),
]


@pytest.mark.parametrize("make,context,named", BAD)
def test_bad_file_gets_one_clear_error(make, context, named, tmp_path):
    path = make(tmp_path)
    with pytest.raises(InputError) as raised:
        ingest([path], context)
    message = str(raised.value)
    assert "\n" not in message
    for part in named:
        assert part in message, message


def test_bad_sidecar_names_its_field(tmp_path):
    result = tmp_path / "run.json"
    result.write_text((FIXTURES / "vllm_bench_c16.json").read_text())
    (tmp_path / "run.yaml").write_text("gpu: H100\nlayout: {tp_size: four}\n")
    with pytest.raises(InputError, match=r"run.yaml: layout.tp_size: got 'four'"):
        ingest([result], RunContext(engine="vllm"))


def test_rows_of_other_gpus_and_engines_are_left_aside():
    assert ingest([FIXTURES / "h100_vllm_qwen3_32b_tp4.csv"], gpu="B200").cases == []
    assert ingest([FIXTURES / "h100_vllm_qwen3_32b_tp4.csv"], engine="sglang").cases == []


def test_a_csv_run_keeps_the_step_token_budget_it_was_launched_with(tmp_path):
    """A user's own CSV is not assumed to be launched the way the reference rows were."""
    from layoutopt.perf_model.measurements import benchmark_token_budget

    source = FIXTURES / "h100_vllm_qwen3_32b_tp4.csv"
    default = ingest([source], engine="vllm", gpu="H100").cases
    assert default and all(c.step_token_budget is None for c in default)
    ruled = ingest([source], engine="vllm", gpu="H100", aiconfigurator_launch=True).cases
    assert [c.step_token_budget for c in ruled] == [
        benchmark_token_budget("vllm", c.isl, c.concurrency, c.layout, c.prefill_layout) for c in ruled]
    assert all(c.step_token_budget for c in ruled)
    header, *rows = source.read_text().splitlines()
    pinned = tmp_path / "pinned.csv"
    pinned.write_text("\n".join([header + ",step_token_budget"] + [row + ",4096" for row in rows]) + "\n")
    assert {c.step_token_budget for c in ingest([pinned], engine="vllm", gpu="H100",
                                               aiconfigurator_launch=True).cases} == {4096}
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join([header + ",step_token_budget"] + [row + ",-3" for row in rows]) + "\n")
    with pytest.raises(InputError, match="step_token_budget"):
        ingest([bad], engine="vllm", gpu="H100")
