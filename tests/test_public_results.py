"""benchmarks/public_results.py: the published MLPerf rows parse, carry their source, and predict."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import public_results  # noqa: E402

ROWS = public_results.load_rows()
REPOSITORIES = {"ntuhpc/mlperf_inference_results_v5.0", "ntuhpc/inference_results_v5.1",
                "gbeezybez/inference_results_v6.0"}


def test_every_row_parses_and_names_its_source():
    assert len(ROWS) > 100
    for row in ROWS:
        assert row["repository"] in REPOSITORIES, row
        assert row["path"].startswith(f"closed/{row['submitter']}/results/{row['system']}/{row['benchmark']}/"
                                      f"{row['scenario']}/performance/run_1/"), row
        assert row["path"].endswith("mlperf_log_summary.txt"), row
        assert row["scenario"] in ("Offline", "Server", "Interactive"), row
        assert row["gpu"] in public_results.GENERATIONS, row
        assert int(row["num_gpus"]) >= 1, row
        assert float(row["metric_value"]) > 0 and float(row["samples_per_s"]) > 0, row
        assert row["metric_unit"] == "output tokens/s", row
        assert row["precision"] and row["engine"], row


def test_llama2_rows_ran_under_the_limits_the_benchmark_applies():
    # Each run's own log reports its TTFT/TPOT limits; they must be mlperf.conf's.
    checked = 0
    for row in ROWS:
        if row["benchmark"] in public_results.MODELS and row["scenario"] in public_results.LIMITS_MS:
            assert (float(row["ttft_limit_ms"]), float(row["tpot_limit_ms"])) == \
                public_results.LIMITS_MS[row["scenario"]], row
            checked += 1
    assert checked > 50


def test_output_tokens_per_sample_stays_inside_the_dataset_cap():
    # processorca.py keeps outputs shorter than 1,024 tokens; a wrong unit or column would break this.
    for row in ROWS:
        if row["benchmark"] in public_results.MODELS:
            assert 50 < public_results.output_tokens_per_sample(row) < 1024, row


def test_prediction_runs_on_one_row():
    row = next(r for r in ROWS if r["round"] == "v5.0" and r["scenario"] == "Offline")
    pred = public_results.predict(row)
    assert pred is not None
    assert math.isfinite(pred.predicted_tok_per_s) and pred.predicted_tok_per_s > 0
    assert pred.engine == "trtllm" and pred.layout.endswith(tuple(f"TP{t}" for t in public_results.TP_SIZES))
    assert any("fp8 assumed" in note for note in pred.notes)  # the v5.0 row names no precision


@pytest.mark.parametrize("benchmark", ["llama3.1-405b", "deepseek-r1"])
def test_benchmarks_without_a_modelled_workload_are_left_out(benchmark):
    row = next(r for r in ROWS if r["benchmark"] == benchmark)
    assert public_results.predict(row) is None
