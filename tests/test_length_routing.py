"""Routing by prompt length: conditional workloads, the choice over thresholds against brute force, the
no-split outcome when a split does not pay, and the emitted front proxy."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from layoutopt.optimizer.length_routing import solve_length_routed, solve_options
from layoutopt.workloads.length_split import candidate_thresholds, split_by_input_length
from layoutopt.workloads.loaders import workload_from_dict
from layoutopt.workloads.presets import preset_workload
from layoutopt.workloads.slo import SLO
from test_optimizer_fleet import _joint_plans
from test_optimizer_solver import PROPERTY, brute_force_plans, small_tables

SLO_CHAT = SLO(ttft_ms={"p90": 1000}, tpot_ms={"p90": 40}, attainment=0.9)


# --- conditional workloads ------------------------------------------------------------------------------

def test_histogram_split_is_exact():
    w = workload_from_dict({"input_tokens": {"histogram": {"tokens": [100, 200, 5000], "weights": [2, 1, 1]}},
                            "output_tokens": 50})
    split = split_by_input_length(w, 200)
    assert split.short_fraction == pytest.approx(0.75)
    assert split.short.mean_input_tokens == pytest.approx((2 * 100 + 200) / 3)
    assert split.long.mean_input_tokens == 5000 and split.long.output_tokens == w.output_tokens
    assert split_by_input_length(w, 5000) is None and split_by_input_length(w, 99) is None


def test_trace_split_keeps_the_pairs():
    pairs = [(100, 10), (300, 30), (5000, 500), (8000, 800)]
    split = split_by_input_length(workload_from_dict({"trace_pairs": pairs}), 300)
    assert split.short_fraction == 0.5
    assert list(split.short.trace_pairs) == pairs[:2] and list(split.long.trace_pairs) == pairs[2:]


@pytest.mark.parametrize("preset", ["chat", "rag", "agent"])
def test_lognormal_classes_recompose_the_distribution(preset):
    w = preset_workload(preset)
    thresholds = candidate_thresholds(w, (0.5, 0.75, 0.9))
    assert [q for q, _ in thresholds] == [0.5, 0.75, 0.9]
    for q, t in thresholds:
        split = split_by_input_length(w, t)
        assert split.short_fraction == pytest.approx(q, abs=0.01)
        assert split.short.input_tokens.quantile_tokens(1.0) <= t < split.long.input_tokens.quantile_tokens(0.0)
        mixed = split.short_fraction * split.short.mean_input_tokens + (1 - split.short_fraction) * \
            split.long.mean_input_tokens
        assert mixed == pytest.approx(w.mean_input_tokens, rel=0.01)


@pytest.mark.parametrize("short_fraction", [0.25, 0.5, 0.75, 0.9])
@pytest.mark.parametrize("shift", [0.05, 0.1, 0.2])
def test_class_slos_mix_back_to_the_slo(short_fraction, shift):
    from layoutopt.workloads.length_split import class_slos

    slo = SLO(ttft_ms={"p90": 1000, "p99": 3000}, tpot_ms={"p50": 20, "p90": 30}, attainment=0.9)
    short, long = class_slos(slo, short_fraction, shift)
    assert class_slos(slo, short_fraction, 0.0) == (slo, slo)

    def share_meeting(side: SLO, metric: str, ms: float) -> float:
        """The largest share of a class's requests its targets promise within ``ms``."""
        targets = getattr(side, metric)
        return max((SLO.percentile_fraction(k) for k, v in targets.items() if v <= ms), default=0.0)

    for metric in ("ttft_ms", "tpot_ms"):
        for key, ms in getattr(slo, metric).items():
            whole = short_fraction * share_meeting(short, metric, ms) + (1 - short_fraction) * \
                share_meeting(long, metric, ms)
            assert whole >= SLO.percentile_fraction(key) - 1e-9, (metric, key, short, long)
        assert all(SLO.percentile_fraction(k) <= 0.999 + 1e-9 for k in getattr(short, metric))
    assert short_fraction * short.attainment + (1 - short_fraction) * long.attainment >= slo.attainment - 1e-9
    assert long.attainment < slo.attainment < short.attainment <= 1.0


def test_fixed_lengths_have_no_threshold():
    w = workload_from_dict({"input_tokens": 1000, "output_tokens": 100})
    assert candidate_thresholds(w, (0.5, 0.9)) == []


# --- the choice over thresholds ------------------------------------------------------------------------

@st.composite
def options(draw):
    """No split (one table) and one split (two tables) on one shared budget."""
    whole = draw(small_tables())
    share = dict(gpu_limits=whole.gpu_limits, max_cost_units=whole.max_cost_units)
    short = draw(small_tables()).model_copy(update=share)
    long = draw(small_tables()).model_copy(update=share)
    return [[whole], [short, long]]


def _brute_cost(tables):
    if len(tables) == 1:
        costs = [cost for _, _, cost in brute_force_plans(tables[0])]
    else:
        costs = [cost for _, cost in _joint_plans(tables)]
    return min(costs) if costs else None


@PROPERTY
@given(options())
def test_cheapest_option_matches_brute_force(option_tables):
    costs = [_brute_cost(t) for t in option_tables]
    gpu_limits, cap = option_tables[0][0].gpu_limits, option_tables[0][0].max_cost_units
    solved = solve_options(option_tables, gpu_limits, cap, time_limit_s=5, tolerance_fraction=0.0)
    if all(c is None for c in costs):
        assert solved["status"] == "infeasible" and solved["best"] is None
        return
    best = min(c for c in costs if c is not None)
    assert solved["status"] == "optimal" and solved["gap"] == 0
    chosen = solved["results"][solved["best"]]
    assert sum(m["cost"] for m in chosen["members"]) == best
    assert costs[solved["best"]] == best
    if costs[0] == best:
        assert solved["best"] == 0  # a tie keeps no split: routing by length must pay to be chosen


def test_no_split_when_splitting_does_not_pay():
    # qwen3-8b chat at 20 req/s: one H100 serves it all; every split needs a GPU more.
    routed = solve_length_routed("qwen3-8b", "8xH100+8xL40S", SLO_CHAT, preset_workload("chat"), 20,
                                 time_limit_s=5)
    assert routed.status == "optimal" and routed.threshold_tokens is None
    assert [c.name for c in routed.classes] == ["all"] and routed.saving_usd_per_hour == 0
    assert len(routed.options) == 7 and routed.options[0].threshold_tokens is None  # 3 thresholds x 2 SLO shifts
    assert all(o.status == "optimal" and o.cost_usd_per_hour >= routed.cost_usd_per_hour for o in routed.options)
    assert "over the thresholds tried" in routed.solver.proof and "not covered" in routed.solver.proof
    assert routed.cost_usd_per_hour == routed.no_split_cost_usd_per_hour
    # "No split" is the one-member fleet model: it must cost what a plain min-cost solve costs.
    from layoutopt import api

    plain = api.solve("qwen3-8b", "8xH100+8xL40S", SLO_CHAT, preset_workload("chat"), rate_rps=20,
                      objective="min-cost", time_limit_s=5)
    assert plain.status == "optimal" and plain.totals.cost_usd_per_hour == pytest.approx(routed.cost_usd_per_hour)


@pytest.mark.parametrize(("kwargs", "field"), [({"rate_rps": None}, "--rate"), ({"rate_rps": float("nan")}, "--rate"),
                                               ({"rate_rps": 2, "quantiles": (1.5,)}, "quantiles"),
                                               ({"rate_rps": 2, "time_limit_s": 0}, "--time-limit")])
def test_bad_arguments_are_input_errors(kwargs, field):
    from layoutopt.errors import InputError

    with pytest.raises(InputError) as error:
        solve_length_routed("qwen3-8b", "8xH100", SLO_CHAT, preset_workload("chat"), **kwargs)
    assert error.value.field == field


# --- the emitted front proxy ---------------------------------------------------------------------------

MIXED = {"input_tokens": {"histogram": {"tokens": [1000, 60000], "weights": [3, 1]}}, "output_tokens": 300}


def _split_plan():
    """The README's example: three 1k-token prompts for every 60k one, where a split pays."""
    routed = solve_length_routed("llama-3.1-70b", "32xH100+32xH200",
                                 SLO(ttft_ms={"p90": 10000}, tpot_ms={"p90": 50}), workload_from_dict(MIXED), 4,
                                 time_limit_s=5)
    assert routed.status == "optimal" and routed.threshold_tokens == 1000
    assert routed.saving_usd_per_hour > 0 and routed.cost_usd_per_hour < routed.no_split_cost_usd_per_hour
    assert [c.name for c in routed.classes] == ["short", "long"]
    assert sum(c.rate_share_fraction for c in routed.classes) == pytest.approx(1.0)
    return routed


def _envoy_pick(routes, headers):
    """The route action Envoy takes for ``headers``: the first route whose header matchers all hold."""
    def holds(matcher):
        value = headers.get(matcher["name"])
        if value is None:
            return False
        if "string_match" in matcher:
            return value == matcher["string_match"]["exact"]
        if not value.lstrip("+-").isdigit():
            return False  # range_match needs the whole value to be a base-10 integer
        return matcher["range_match"]["start"] <= int(value) < matcher["range_match"]["end"]

    for route in routes:
        if all(holds(m) for m in route["match"].get("headers", [])):
            return route["route"]
    return None


def test_emitted_envoy_config_routes_each_class_to_its_own_router(tmp_path):
    from layoutopt.report.length_router import CLASS_HEADER, class_of, emit_length_routed, short_body_bytes

    routed = _split_plan()
    written = emit_length_routed(routed, tmp_path, namespace="serving")
    assert (tmp_path / "short" / "plan.json").exists() and (tmp_path / "long" / "plan.json").exists()
    config = yaml.safe_load((tmp_path / "length-routing" / "envoy.yaml").read_text())
    assert tmp_path / "length-routing" / "envoy.yaml" in written
    listener = config["static_resources"]["listeners"][0]
    manager = listener["filter_chains"][0]["filters"][0]["typed_config"]
    routes = manager["route_config"]["virtual_hosts"][0]["routes"]
    clusters = {c["name"]: c for c in config["static_resources"]["clusters"]}
    by_header = {r["match"]["headers"][0]["string_match"]["exact"]: r["route"] for r in routes
                 if "headers" in r["match"] and "string_match" in r["match"]["headers"][0]}
    assert set(by_header) == {"short", "long"} and routes[-1]["route"] == by_header["long"]  # no header: long
    t = routed.threshold_tokens
    limit = short_body_bytes(t)
    # Envoy's order: the first route whose matchers all hold (string_match exact; range_match [start, end)).
    cases = [({CLASS_HEADER: "short", "content-length": "999999"}, "short"),
             ({CLASS_HEADER: "long", "content-length": "10"}, "long"),
             ({"content-length": str(limit)}, "short"), ({"content-length": str(limit + 1)}, "long"),
             ({}, "long"), ({"content-length": "junk"}, "long")]
    for headers, expected in cases:
        assert _envoy_pick(routes, headers) == by_header[expected], (headers, expected)
    for name, route in by_header.items():
        targets = ([route["cluster"]] if "cluster" in route
                   else [w["name"] for w in route["weighted_clusters"]["clusters"]])
        for target in targets:
            address = clusters[target]["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]
            assert address["socket_address"]["address"].endswith(f".serving-{name}.svc.cluster.local")
    assert routes[0]["match"]["headers"][0]["name"] == CLASS_HEADER
    assert (class_of(t, t), class_of(t + 1, t)) == ("short", "long")
    readme = (tmp_path / "length-routing" / "README.md").read_text()
    assert f"at most {t:,} tokens" in readme and "llm-d.ai/context-length-range" in readme
    # The class plans' namespaces keep their manifests apart.
    short_k8s = "\n".join(p.read_text() for p in (tmp_path / "short" / "k8s").glob("*.yaml"))
    assert "namespace: serving-short" in short_k8s and "namespace: serving-long" not in short_k8s


def test_cli_route_by_length(tmp_path, capsys):
    from layoutopt.cli import cli
    from layoutopt.cli.common import run_guarded

    workload = tmp_path / "w.yaml"
    workload.write_text("preset: chat\n")
    result = CliRunner().invoke(cli, ["solve", "--model", "qwen3-8b", "--budget", "8xH100+8xL40S", "--rate", "20",
                                      "--objective", "min-cost", "--workload", str(workload), "--route-by-length",
                                      "--time-limit", "5", "--format", "json"])
    assert result.exit_code == 0, result.output
    routed = json.loads(result.output)
    assert routed["kind"] == "length-routed" and routed["threshold_tokens"] is None
    assert routed["classes"][0]["plan"]["pools"]
    table = CliRunner().invoke(cli, ["solve", "--model", "qwen3-8b", "--budget", "8xH100+8xL40S", "--rate", "20",
                                     "--objective", "min-cost", "--workload", str(workload), "--route-by-length",
                                     "--time-limit", "5", "--verify", "--verify-requests", "500"])
    assert table.exit_code == 0, table.output
    assert "no split" in table.output and "simulated: SLO attainment" in table.output
    assert run_guarded(cli, ["solve", "--model", "qwen3-8b", "--budget", "8xH100", "--rate", "2",
                             "--route-by-length"]) == 2
    err = capsys.readouterr().err
    assert "--objective" in err and "min-cost" in err and "Traceback" not in err
