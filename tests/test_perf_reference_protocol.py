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


def test_inferencex_trtllm_launches_step_budget_and_batch_waiting():
    # max_num_tokens of InferenceX's B200 TensorRT-LLM scripts: Llama 16384, gpt-oss 20000, DeepSeek
    # ceil64(CONC + ISL + 64), at least 8192 from 2026-01-22; other GPUs and disaggregated rows: none known.
    from layoutopt.perf_model.reference_protocol import reference_batch_wait, reference_trtllm_max_num_tokens
    from layoutopt.plan import Layout

    budget = reference_trtllm_max_num_tokens
    assert budget("B200", "agg", "meta-llama/Llama-3.1-70B", 1024, 8, "") == 16384
    assert budget("B200", "agg", "openai/gpt-oss-120b", 8192, 64, "2025-11-02") == 20000
    assert budget("B200", "agg", "deepseek-ai/DeepSeek-R1", 1024, 8, "2026-01-14") == 1152  # 1096 up to 64s
    assert budget("B200", "agg", "deepseek-ai/DeepSeek-V3", 1024, 8, "2026-02-03") == 8192
    assert budget("B200", "agg", "deepseek-ai/DeepSeek-R1", 8192, 256, "2026-02-03") == 8512
    assert budget("H100-SXM", "agg", "meta-llama/Llama-3.1-70B", 1024, 8, "") is None
    assert budget("B200", "disagg", "meta-llama/Llama-3.1-70B", 1024, 8, "") is None
    # Batch waiting: Llama-3.1-70B at 1k/1k below TP 8 only (70b_fp*_b200_trt_slurm.sh:27-31).
    wait = reference_batch_wait
    llama = "meta-llama/Llama-3.1-70B"
    assert wait("trtllm", "B200", "agg", llama, 1024, 1024, Layout(tp_size=4)) == (20, 0.9)
    assert wait("trtllm", "B200", "agg", llama, 1024, 1024, Layout(tp_size=8)) == (0, 0.0)
    assert wait("trtllm", "B200", "agg", llama, 8192, 1024, Layout(tp_size=4)) == (0, 0.0)
    assert wait("trtllm", "B200", "agg", "openai/gpt-oss-120b", 1024, 1024, Layout(tp_size=4)) == (0, 0.0)
    assert wait("vllm", "B200", "agg", llama, 1024, 1024, Layout(tp_size=4)) == (0, 0.0)


def test_batch_waiting_of_the_replayed_llama_launch_shows_in_its_ttft(tmp_path):
    # The 1k/1k TP 4 row waits ~20 decode steps for a fuller batch; the TP 8 one (no waiting) does not.
    def row(rid, tp):
        return (f"{rid},trtllm,meta-llama/Llama-3.1-70B,b200_sxm,fp8,agg,1024,1024,4,fp8,fp8,"
                f"{tp},1,1,{tp},1,{',' * 13},300.0,10.0\n")
    path = tmp_path / "rows.csv"
    path.write_text(HEADER + row("tp4", 4) + row("tp8", 8))
    cases, _ = load_cases(path)
    by_id = {c.row_id: c for c in cases}
    waited = predict(by_id["tp4"])
    plain = predict(dataclasses.replace(by_id["tp4"], batch_wait_timeout_iters=0, batch_wait_max_tokens_ratio=0.0))
    assert waited[0] > plain[0] + 10 * waited[1]
    assert by_id["tp8"].batch_wait_timeout_iters == 0 and by_id["tp4"].step_token_budget == 16384


def test_disaggregated_path_overhead_adds_to_ttft_of_disaggregated_deployments_only():
    from layoutopt.perf_model.estimate import estimate
    from layoutopt.plan import Layout

    base = get_engine_profile("trtllm", "blackwell").model_copy(update={"disagg_overhead_ms": 0.0})
    slow = base.model_copy(update={"disagg_overhead_ms": 100.0})
    assert (base.request_overhead_s("prefill"), base.request_overhead_s("decode")) == (
        base.request_overhead_ms * 1e-3, 0.0)
    assert slow.request_overhead_s("prefill") == pytest.approx((base.request_overhead_ms + 100.0) * 1e-3)
    assert slow.request_overhead_s("colocated") == base.request_overhead_s("colocated")
    layout = Layout(tp_size=2)

    def ttft(profile, **pools):
        return estimate("llama-3.1-8b", "B200", engine=profile, isl=1024, osl=128, concurrency=8, **pools).ttft_ms.mean

    split = {"prefill_layout": layout, "prefill_instances": 1, "decode_layout": layout, "decode_instances": 1}
    assert ttft(slow, **split) - ttft(base, **split) == pytest.approx(100.0, rel=0.05)
    assert ttft(slow, layout=layout) == ttft(base, layout=layout)


def test_inferencex_vllm_launches_graph_prompt_steps_as_their_scripts_set():
    from layoutopt.perf_model.reference_protocol import reference_vllm_graphed_prompt_tokens as graphed

    assert graphed("vllm", "agg", "B200", "meta-llama/Llama-3.1-70B", 8, "") == 0  # FULL_DECODE_ONLY
    assert graphed("vllm", "agg", "B200", "openai/gpt-oss-120b", 8, "2026-02-25") == 2048
    assert graphed("vllm", "agg", "B200", "MiniMaxAI/MiniMax-M2.5", 8, "2026-03-11") == 512
    assert graphed("vllm", "agg", "B200", "MiniMaxAI/MiniMax-M2.5", 8, "2026-04-08") == 2048
    assert graphed("vllm", "agg", "B200", "moonshotai/Kimi-K2.5", 4, "2026-03-24") == 8  # 2 x --max-num-seqs
    assert graphed("vllm", "agg", "B200", "moonshotai/Kimi-K2.5", 512, "2026-03-24") == 512
    assert graphed("vllm", "agg", "H100-SXM", "meta-llama/Llama-3.1-70B", 8, "") is None
    assert graphed("trtllm", "agg", "B200", "meta-llama/Llama-3.1-70B", 8, "") is None


def test_eager_launch_floor_applies_only_to_prompt_steps_beyond_the_graphs():
    # A prompt-carrying step of at most graphed_prompt_tokens replays a graph (no floor); a larger one, or any
    # with graphed_prompt_tokens 0, lasts at least layers x eager_layer_launch_us.
    from layoutopt.hardware_catalog.catalog import get_gpu
    from layoutopt.model_catalog import get_model
    from layoutopt.perf_model.step import mixed_step_time, mixed_step_time_array
    from layoutopt.plan import Layout

    model, gpu, layout = get_model("llama-3.1-8b"), get_gpu("B200"), Layout(tp_size=1)
    base = get_engine_profile("vllm", "blackwell").model_copy(update={"eager_layer_launch_us": 2000.0})
    floor_s = model.num_layers * 2000.0 * 1e-6

    def step_s(profile, chunk):
        return mixed_step_time(model, gpu, layout, chunk, 0, 4, 512, profile).total_s

    graphed = base.model_copy(update={"graphed_prompt_tokens": 1024})
    never = base.model_copy(update={"graphed_prompt_tokens": 0})
    assert step_s(graphed, 256) < 0.5 * floor_s          # 260 tokens: graphed, a few ms of GPU work
    assert step_s(graphed, 2048) >= floor_s               # 2052 tokens: eager
    assert step_s(never, 256) >= floor_s
    chunks = np.array([256.0, 2048.0])
    vector = mixed_step_time_array(model, gpu, layout, chunks, np.zeros(2), np.full(2, 4.0), 512, graphed)
    assert np.allclose(vector, [step_s(graphed, 256), step_s(graphed, 2048)], rtol=1e-12)
