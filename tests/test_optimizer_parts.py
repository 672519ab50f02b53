"""Scaling to integers, latency mixing, the validator and the explanations, with hand-computed numbers."""

from __future__ import annotations

from fractions import Fraction

import pytest

from layoutopt.optimizer.candidates import CandidateTable
from layoutopt.optimizer.explain import bottleneck_label, ratio_check
from layoutopt.optimizer.latency import combine, fraction_within
from layoutopt.plan import Percentiles
from layoutopt.optimizer.ratio_bounds import cheapest_serving_cost_units, relaxed_ratio_bound
from layoutopt.optimizer.scaling import (
    MAX_SAFE_INT, RATE_SCALE_PER_RPS, cost_units, rate_units, rate_units_up, ratio_coefficients, to_integer_table,
)
from synthetic_candidates import make_candidate
from layoutopt.optimizer.validate import plan_violations
from layoutopt.workloads.slo import SLO


def test_scaling_rounds_conservatively():
    assert rate_units(0.02) == 200 and rate_units(1.23456) == 12345  # capacities round down
    assert rate_units_up(1.23451) == 12346  # a target rate rounds up
    assert cost_units(2.745) == 2745
    table = CandidateTable(candidates=(
        make_candidate("prefill", capacity_rps=2.5, kv_bytes_per_request=1500.4, nic_gb_per_s=1.0),
        make_candidate("decode", tp_size=2, capacity_rps=0.5)),
        gpu_limits={"H100-SXM": 5}, max_usd_per_hour=7.9999)
    integer = to_integer_table(table)
    prefill, decode = integer.candidates
    assert prefill.kv_kb_per_request == 2 and prefill.nic_kb_per_s == 1_000_000
    assert prefill.max_instances == 3  # $ cap 7.9999 / $2 per instance
    assert decode.max_instances == 1  # $ cap: one $4 instance... and 5 GPUs: two; the cap wins
    assert integer.max_cost_units == 7999
    assert integer.max_rate_units == min(3 * 25_000, 1 * 5_000)


def test_ratio_coefficients_exact_or_floor():
    assert ratio_coefficients(Fraction(7, 3), 10**6, 10**6) == (7, 3)
    huge = Fraction(10**12 + 7, 10**12 - 3)
    numerator, denominator = ratio_coefficients(huge, 10**9, 10**9)
    assert Fraction(numerator, denominator) <= huge
    assert denominator * 10**9 + numerator * 10**9 <= MAX_SAFE_INT
    assert float(Fraction(numerator, denominator)) == pytest.approx(float(huge), rel=1e-6)


def test_ratio_bounds_by_hand():
    table = CandidateTable(candidates=(
        make_candidate("colocated", capacity_rps=1.0),  # 1 req/s per $2
        make_candidate("prefill", capacity_rps=4.0),  # $0.5 per req/s
        make_candidate("decode", capacity_rps=1.0)),  # $2 per req/s
        gpu_limits={"H100-SXM": 8})
    integer = to_integer_table(table)
    # colocated: 10000 units / 2000 cost units = 5; disaggregated: 1 / (2000/40000 + 2000/10000) = 4
    assert relaxed_ratio_bound(integer) == Fraction(5)
    assert cheapest_serving_cost_units(integer) == 2000


def test_latency_mixture():
    one = Percentiles(p50=100, p90=200, p99=400)
    assert combine([(1.0, one)]) == one
    assert fraction_within([(1.0, one)], 200) == pytest.approx(0.9)
    assert fraction_within([(1.0, one)], 400) == pytest.approx(0.99)
    slow = Percentiles(p50=300, p90=600, p99=900)
    mixed = combine([(0.5, one), (0.5, slow)])
    assert one.p50 < mixed.p50 < slow.p50
    assert mixed.p99 <= slow.p99 + 1e-6
    # Half the requests on each pool: the mixture's p50 is where the two CDFs average to one half.
    assert fraction_within([(0.5, one), (0.5, slow)], mixed.p50) == pytest.approx(0.5, abs=1e-6)


def test_validator_catches_each_family():
    prefill = make_candidate("prefill", capacity_rps=2.0, kv_bytes_per_request=1e9, nic_gb_per_s=1.0)
    decode = make_candidate("decode", capacity_rps=2.0)
    coloc = make_candidate("colocated", capacity_rps=1.0)
    table = CandidateTable(candidates=(prefill, decode, coloc), gpu_limits={"H100-SXM": 3},
                           max_usd_per_hour=5.0, min_rate_rps=1.0, mode="auto")
    assert plan_violations(table, {prefill.name: 1, decode.name: 1}, 1.0, 0.0) == []
    problems = plan_violations(table, {prefill.name: 2, decode.name: 1, coloc.name: 1}, 2.5, 1.5)
    joined = " | ".join(problems)
    for expected in ("count 4 exceeds", "cost 8.00", "decode capacity", "colocated capacity", "KV traffic"):
        assert expected in joined
    assert plan_violations(table, {coloc.name: 1}, 0.0, 0.5) == ["rate 0.5000 req/s is below the target 1.0000 req/s"]
    colocated_only = table.model_copy(update={"mode": "colocated"})
    assert plan_violations(colocated_only, {prefill.name: 1, decode.name: 1}, 1.0, 0.0) == [
        "--mode colocated but the plan has prefill/decode pools"]


def test_ratio_check_by_hand():
    prefill = make_candidate("prefill", capacity_rps=2.0)  # 8000 prompt tok/s per GPU
    decode = make_candidate("decode", capacity_rps=4.0)  # 2000 output tok/s per GPU
    table = CandidateTable(candidates=(prefill, decode), gpu_limits={"H100-SXM": 8}, mean_input_tokens=4000,
                           mean_output_tokens=500)
    check = ratio_check(table, [(prefill, 2), (decode, 1)])
    # seeds/002 scenario A: (4000 / 8000) : (500 / 2000) = 2 : 1
    assert check.formula_prefill_to_decode == pytest.approx(2.0)
    assert check.plan_prefill_to_decode == pytest.approx(2.0)
    assert "follows the formula" in check.note
    skewed = ratio_check(table, [(prefill, 3), (decode, 1)])
    assert skewed.plan_prefill_to_decode == pytest.approx(3.0)
    assert ratio_check(table, [(make_candidate("colocated"), 2)]) is None


def test_ratio_check_takes_p_and_d_from_the_table_not_the_plan():
    fast = make_candidate("prefill", tp_size=1, capacity_rps=2.0, usd_per_gpu_hour=8.0)  # P = 8000 tok/s/GPU
    cheap = make_candidate("prefill", tp_size=2, capacity_rps=2.0, usd_per_gpu_hour=2.0)  # 4000 tok/s/GPU
    decode = make_candidate("decode", capacity_rps=4.0)  # D = 2000 tok/s/GPU
    table = CandidateTable(candidates=(fast, cheap, decode), gpu_limits={"H100-SXM": 16}, mean_input_tokens=4000,
                           mean_output_tokens=500)
    check = ratio_check(table, [(cheap, 2), (decode, 1)])
    assert check.prefill_tok_per_s_per_gpu == pytest.approx(8000) and check.best_prefill_candidate == fast.name
    assert check.formula_prefill_to_decode == pytest.approx(2.0)  # from P and D of the table
    assert check.plan_prefill_to_decode == pytest.approx(4.0)  # 4 GPUs of the cheaper layout : 1
    assert check.formula_at_plan_rates == pytest.approx(4.0)
    assert "not P" in check.note and "best per dollar" in check.note


def test_ratio_note_names_every_instance_size_of_a_role():
    # Two prefill layouts of 4 and 8 GPUs at the same 8000 tok/s/GPU, one 8-GPU decode at 2000: formula 2:1,
    # plan 12:8 because the pools come in whole instances; the note must not call every prefill 8 GPUs.
    small = make_candidate("prefill", tp_size=4, capacity_rps=8.0)
    large = make_candidate("prefill", tp_size=8, capacity_rps=16.0)
    decode = make_candidate("decode", tp_size=8, capacity_rps=32.0)
    table = CandidateTable(candidates=(small, large, decode), gpu_limits={"H100-SXM": 32}, mean_input_tokens=4000,
                           mean_output_tokens=500)
    check = ratio_check(table, [(small, 1), (large, 1), (decode, 1)])
    assert check.formula_prefill_to_decode == pytest.approx(2.0)
    assert check.plan_prefill_to_decode == pytest.approx(1.5)
    assert "whole instances (4 or 8 GPUs per prefill, 8 per decode instance)" in check.note


def test_bottleneck_labels():
    slo = SLO(ttft_ms={"p90": 1000}, tpot_ms={"p50": 20, "p99": 50})
    assert bottleneck_label(make_candidate("decode", bottleneck="kv_capacity"), slo) == "decode KV capacity"
    assert bottleneck_label(make_candidate("prefill", bottleneck="queueing"), slo) == "TTFT p90"
    assert bottleneck_label(make_candidate("decode", bottleneck="memory"), slo) == "TPOT p99 (memory-bound decode)"
    assert RATE_SCALE_PER_RPS == 10_000
