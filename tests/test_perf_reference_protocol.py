"""How the reference runs were driven (layoutopt.perf_model.reference_protocol): the client's request
lengths, SGLang's request polling, and what the replay and the closed loop do with them."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from layoutopt.errors import InputError
from layoutopt.perf_model.calibration import get_engine_profile
from layoutopt.perf_model.fit import load_cases, predict
from test_perf_fit import HEADER, _row


def test_inferencex_runs_replay_lengths_drawn_uniformly_below_the_nominal_ones(tmp_path):
    # InferenceX's client draws lengths on int(0.8 L) .. L (reference_protocol); rows of other launches,
    # disaggregated rows and rows whose random_range_ratio column says otherwise keep their own.
    from layoutopt.perf_model.fit import _requests
    from layoutopt.perf_model.reference_protocol import reference_range_ratio, request_lengths

    def row(rid, mode="agg", date="2026-03-25", image="vllm/vllm-openai:v0.17.0", ratio=""):
        layout = "2,1,1,2,1" + "," * 14 if mode == "agg" else ",,,," + ",1,2,1,1,2,1,,1,2,1,1,2,1,"
        return (f"{rid},vllm,meta-llama/Llama-3.1-70B,b200_sxm,fp8,{mode},1024,1024,8,fp8,fp8,{layout},"
                f"300.0,10.0,{date},{image},{ratio}\n")
    path = tmp_path / "rows.csv"
    path.write_text(HEADER.rstrip("\n") + ",measured_date,engine_image,random_range_ratio\n"
                    + row("ix") + row("aic", date="", image="") + row("dynamo", image="nvcr.io/nvidia/ai-dynamo/x:1")
                    + row("disagg", mode="disagg") + row("own", ratio="1") + row("half", date="", ratio="0.5"))
    cases, left = load_cases(path)
    assert not left
    ratios = {c.row_id: c.length_range_ratio for c in cases}
    assert ratios == {"ix": 0.8, "aic": 1.0, "dynamo": 1.0, "disagg": 1.0, "own": 1.0, "half": 0.5}
    assert reference_range_ratio({"mode": "agg", "id": "x_gap_analysis_y"}) == 0.8
    assert load_cases(path, aiconfigurator_launch=False)[0][0].length_range_ratio == 1.0  # a user's own runs
    drawn = _requests(cases[0])
    assert drawn.input_tokens.mean_tokens == pytest.approx((819 + 1024) / 2, abs=0.5)
    assert drawn.output_tokens.quantile_tokens(0.0) == 819 and drawn.output_tokens.quantile_tokens(1.0) == 1024
    assert _requests(cases[1]).input_tokens == request_lengths(1024, 1.0) and request_lengths(1024, 1.0).tokens == 1024
    # Shorter requests: the replay predicts a shorter TTFT than at the nominal lengths.
    assert predict(cases[0])[0] < predict(dataclasses.replace(cases[0], length_range_ratio=1.0))[0]


def test_reference_csv_refuses_a_range_ratio_above_one(tmp_path):
    from layoutopt.calibrate.reference_csv import reference_cases

    path = tmp_path / "rows.csv"
    path.write_text(HEADER.rstrip("\n") + ",random_range_ratio\n" + _row("r1").rstrip("\n") + ",1.5\n")
    with pytest.raises(InputError, match="random_range_ratio.*1.5.*between 0 and 1"):
        reference_cases(path)


def test_sglang_polling_of_the_reference_launches_and_its_wait():
    # InferenceX's SGLang B200 scripts poll every 10 decode iterations below 16 clients and every 30 from 16
    # on (DeepSeek FP8 at TP 4: 10 from 2026-01-13; Qwen3.5 BF16 from 2026-02-19); other rows every iteration.
    from layoutopt.perf_model.reference_protocol import reference_recv_interval as interval

    ds, qwen = "deepseek-ai/DeepSeek-R1", "Qwen/Qwen3.5-397B-A17B"
    assert interval("sglang", "agg", "B200", ds, "fp4", "2025-11-10", 8, 8) == 10
    assert interval("sglang", "agg", "B200", ds, "fp4", "2026-03-25", 8, 16) == 30
    assert interval("sglang", "agg", "B200", ds, "fp8", "2026-03-25", 4, 32) == 10
    assert interval("sglang", "agg", "B200", ds, "fp8", "2025-11-18", 4, 32) == 30
    assert interval("sglang", "agg", "B200", qwen, "bf16", "2026-02-16", 8, 32) == 1
    assert interval("sglang", "agg", "B200", qwen, "bf16", "2026-02-20", 8, 32) == 30
    assert interval("sglang", "agg", "B200", qwen, "bf16", "", 8, 32) == 1          # undated: not known
    assert interval("sglang", "disagg", "B200", ds, "fp4", "2026-03-25", 8, 8) == 1
    assert interval("sglang", "agg", "H100-SXM", ds, "fp8", "2026-03-25", 8, 8) == 1
    assert interval("vllm", "agg", "B200", ds, "fp4", "2026-03-25", 8, 8) == 1


def test_polling_wait_is_half_the_interval_in_decode_steps_when_requests_return_apart():
    from layoutopt.perf_model.closed_loop import recv_wait_s

    sglang = get_engine_profile("sglang")
    polled = sglang.model_copy(update={"scheduler_recv_interval": 10})
    spread = type("Costs", (), {"output_steps": np.array([800.0, 1000.0])})()
    assert float(recv_wait_s(spread, polled, 8.0, 0.02)) == pytest.approx(4.5 * 0.02)
    assert float(recv_wait_s(spread, sglang, 8.0, 0.02)) == 0.0          # SGLang's default: every iteration
    assert float(recv_wait_s(spread, polled, 1.0, 0.02)) == 0.0          # one client: an idle scheduler polls


def test_prefill_first_closed_loop_moves_as_a_wave_only_while_requests_return_together(monkeypatch):
    # One output length: SGLang's clients finish together and come back together (wave_closed_loop);
    # drawn lengths: they return apart and the steady state applies (with the polling wait).
    from layoutopt.perf_model import closed_loop
    from layoutopt.perf_model.closed_loop import returns_apart

    spread = type("Costs", (), {"output_steps": np.array([800.0, 1000.0])})()
    fixed = type("Costs", (), {"output_steps": np.array([1000.0])})()
    assert returns_apart(spread) and not returns_apart(fixed)
    taken = []
    monkeypatch.setattr(closed_loop, "wave_closed_loop", lambda costs, n: taken.append("wave") or "wave")
    monkeypatch.setattr(closed_loop, "rank_grouped", lambda costs, profile: taken.append("steady") or 1 / 0)
    sglang = get_engine_profile("sglang")
    assert sglang.prefill_first
    assert closed_loop.colocated_closed_loop(fixed, 8.0, sglang) == "wave"
    with pytest.raises(ZeroDivisionError):
        closed_loop.colocated_closed_loop(spread, 8.0, sglang)
    assert taken == ["wave", "steady"]


def test_load_cases_reads_the_polling_interval_and_predict_launches_with_it(tmp_path):
    row = ("{rid},sglang,deepseek-ai/DeepSeek-R1,b200_sxm,fp8,agg,1024,1024,8,fp8,fp8,8,1,1,8,1"
           + "," * 15 + "300.0,10.0,2026-03-25,lmsysorg/sglang:v0.5.9-cu130,{extra}\n")
    path = tmp_path / "rows.csv"
    path.write_text(HEADER.rstrip("\n") + ",measured_date,engine_image,scheduler_recv_interval\n"
                    + row.format(rid="ix", extra="") + row.format(rid="own", extra="1"))
    cases, left = load_cases(path)
    assert not left
    assert {c.row_id: c.scheduler_recv_interval for c in cases} == {"ix": 10, "own": 1}
    assert load_cases(path, aiconfigurator_launch=False)[0][0].scheduler_recv_interval == 1
    polled, unpolled = predict(cases[0]), predict(dataclasses.replace(cases[0], scheduler_recv_interval=1))
    assert polled[0] > unpolled[0] and polled[1] == pytest.approx(unpolled[1], rel=0.05)
