"""bench/bench.sh and `layoutopt check-bench`: the plan's traffic through the router, then predicted
against measured per SLO target, with result files shaped as the engines' benchmarks write them."""

from __future__ import annotations

import json
import shlex

import numpy as np
import pytest

from layoutopt.cli import cli
from layoutopt.cli.common import run_guarded
from layoutopt.report.bench import sglang_range, vllm_range
from layoutopt.report.bench_check import compare
from layoutopt.report.emit import render
from test_report_helpers import FIXTURES, MODEL_IDS, fixture_plan


def _bench(name, engine="vllm"):
    plan = fixture_plan(name)
    text = render(plan, engine=engine, model_id=MODEL_IDS[plan.model], plots=False)["bench/bench.sh"]
    return [shlex.split(line) for line in text.split('cd "$(dirname "$0")"\n')[1].replace("\\\n", " ").splitlines()
            if line.strip() and not line.startswith("#")]


def _value(argv, flag):
    return argv[argv.index(flag) + 1]


def test_vllm_bench_targets_the_router_at_the_planned_rate_and_slo():
    (argv,) = _bench("disaggregated")
    assert argv[:3] == ["vllm", "bench", "serve"]
    assert _value(argv, "--base-url") == "http://${ROUTER_HOST}:30000"
    assert float(_value(argv, "--request-rate")) == 6.0
    assert (_value(argv, "--random-input-len"), _value(argv, "--random-output-len")) == ("2000", "400")
    assert argv[argv.index("--goodput") + 1:argv.index("--goodput") + 3] == ["ttft:1000", "tpot:40"]
    assert "--save-detailed" in argv and _value(argv, "--result-filename") == "result-router.json"


@pytest.mark.parametrize(("engine", "module"), [("sglang", "sglang.benchmark.serving"),
                                                ("sglang==0.5.3", "sglang.bench_serving")])
def test_sglang_bench_uses_the_versions_module(engine, module):
    (argv,) = _bench("disaggregated", engine)
    assert argv[:3] == ["python3", "-m", module] and "--pd-separated" in argv and "--output-details" in argv
    assert ("--goodput" in argv) == (engine == "sglang")


@pytest.mark.parametrize(("mean", "p90"), [(1000, 1000), (1000, 1500), (2000, 2600)])
def test_length_ranges_match_the_mean_and_p90(mean, p90):
    length, ratio = vllm_range(mean, p90)
    assert length == pytest.approx(mean) and length * (1 + 0.8 * ratio) == pytest.approx(p90, rel=0.01)
    length, ratio = sglang_range(mean, p90)
    assert length * (1 + ratio) / 2 == pytest.approx(mean, rel=0.01)
    assert length * (ratio + 0.9 * (1 - ratio)) == pytest.approx(p90, rel=0.01)


def _result(ttft_s, itl_s, duration_s=100.0, errors=None):
    n = len(ttft_s)
    return {"duration": duration_s, "completed": n, "request_rate": 6.0, "ttfts": list(ttft_s),
            "itls": [[x] * 10 for x in itl_s], "output_lens": [11] * n, "errors": errors or [""] * n}


def test_compare_computes_percentiles_attainment_and_goodput():
    plan = fixture_plan("disaggregated")  # SLO TTFT p90 <= 1000 ms, TPOT p90 <= 40 ms
    rng = np.random.default_rng(0)
    ttft = rng.uniform(0.1, 0.9, 600)  # every TTFT within 1 s
    itl = np.where(np.arange(600) < 30, 0.05, 0.02)  # 5 % of requests over the TPOT target
    result = compare(plan, _result(ttft, itl))
    by = {c.metric: c for c in result.checks}
    assert by["TTFT p90 (ms)"].measured == pytest.approx(np.percentile(ttft * 1000, 90))
    assert by["TPOT p90 (ms)"].measured == pytest.approx(20.0) and by["TPOT p90 (ms)"].passed
    assert by["SLO attainment"].measured == pytest.approx(0.95)
    assert by["goodput (req/s)"].measured == pytest.approx(570 / 100.0)
    assert result.passed


def test_compare_fails_when_a_target_is_missed_and_counts_errors():
    plan = fixture_plan("disaggregated")
    errors = ["timeout"] * 100 + [""] * 500
    result = compare(plan, _result([1.5] * 600, [0.02] * 600, errors=errors))
    assert not result.passed and result.num_failed == 100
    assert {c.metric: c.passed for c in result.checks}["TTFT p90 (ms)"] is False


def test_compare_reads_summary_keys_without_details():
    plan = fixture_plan("disaggregated")
    vllm_summary = {"duration": 100, "completed": 600, "request_throughput": 6.0, "request_goodput": 5.7,
                    "p90_ttft_ms": 420.0, "p90_tpot_ms": 25.0}
    result = compare(plan, vllm_summary)
    assert {c.metric: c.measured for c in result.checks}["SLO attainment"] == pytest.approx(0.95)
    sglang_summary = {"duration": 100, "completed": 600, "p90_ttft_ms": 1200.0, "p90_tpot_ms": 25.0,
                      "slo_attainment": 0.8, "request_goodput": 4.8}
    assert not compare(plan, sglang_summary).passed


def _run(args, monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["layoutopt", *args])
    status = run_guarded(cli)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize(("content", "status", "expected"), [
    (json.dumps(_result([0.2] * 100, [0.02] * 100)), 0, "every SLO target holds"),
    (json.dumps(_result([2.0] * 100, [0.02] * 100)), 1, "FAIL"),
    ("{not json", 2, "not JSON"),
    ('{"p90_ttft_ms": NaN}', 2, "not JSON"),
    ("[1, 2]", 2, "no JSON object"),
    ('{"duration": 5}', 2, "latency metrics"),
    # SGLang writes JSON lines: the last line is the latest run.
    ("\n".join([json.dumps({"p90_ttft_ms": 5000.0}), json.dumps(_result([0.2] * 50, [0.02] * 50))]), 0, "pass"),
])
def test_check_bench_command(content, status, expected, tmp_path, monkeypatch, capsys):
    (tmp_path / "result.json").write_text(content)
    got, out, err = _run(["check-bench", str(FIXTURES / "plan_disaggregated.json"), str(tmp_path / "result.json")],
                         monkeypatch, capsys)
    assert got == status, err
    assert expected in (out if status < 2 else err)
    assert "Traceback" not in err


def test_check_bench_json_output(tmp_path, monkeypatch, capsys):
    (tmp_path / "r.json").write_text(json.dumps(_result([0.2] * 100, [0.02] * 100)))
    status, out, _ = _run(["check-bench", str(FIXTURES / "plan_disaggregated.json"), str(tmp_path / "r.json"),
                           "--format", "json"], monkeypatch, capsys)
    data = json.loads(out)
    assert status == 0 and data["passed"] and data["num_requests"] == 100


def test_check_bench_missing_file(tmp_path, monkeypatch, capsys):
    status, _, err = _run(["check-bench", str(FIXTURES / "plan_disaggregated.json"), str(tmp_path / "none.json")],
                          monkeypatch, capsys)
    assert status == 2 and "no such file" in err


def test_a_mixed_plan_benchmarks_both_front_doors_at_once():
    from test_report_matrix import _plan

    text = render(_plan("dense-mixed"), engine="vllm", plots=False)["bench/bench.sh"]
    assert text.count("vllm bench serve") == 2 and text.rstrip().endswith("wait")
    rates = [float(line.split()[1]) for line in text.splitlines() if line.strip().startswith("--request-rate")]
    assert sum(rates) == pytest.approx(6.0, rel=0.01)
