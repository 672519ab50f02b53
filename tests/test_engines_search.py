"""The engine rules inside the search: no solved layout breaks one, and the P/D pairing constraint binds."""

from __future__ import annotations

from functools import lru_cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from layoutopt import api
from layoutopt.engines import check_layout, check_pair
from layoutopt.hardware_catalog.catalog import get_gpu
from layoutopt.model_catalog.catalog import get_model
from layoutopt.optimizer.enumeration import build_candidate_table
from layoutopt.optimizer.scaling import rate_rps, to_integer_table
from layoutopt.optimizer.search import search
from layoutopt.optimizer.solve import DEFAULT_SLO
from layoutopt.workloads.presets import default_workload, workload_from_lengths
from layoutopt.workloads.slo import SLO

SLO_CHAT = SLO(ttft_ms={"p90": 2000}, tpot_ms={"p90": 50}, attainment=0.9)
ENGINES = ["vllm==0.33.0", "vllm==0.13.0", "sglang==0.5.23", "sglang==0.5.3"]


@lru_cache(maxsize=None)
def _table(model: str, gpu: str, num_gpus: int, engine: str, isl: int | None, mode: str, default_slo: bool = False):
    slo = DEFAULT_SLO if default_slo else SLO_CHAT
    workload = default_workload() if isl is None else workload_from_lengths(isl, 200)
    return build_candidate_table(get_model(model), [get_gpu(gpu)], workload, slo,
                                 gpu_limits={get_gpu(gpu).name: num_gpus}, max_usd_per_hour=None,
                                 min_rate_rps=None, mode=mode, engine=engine)


def _violations(table, counts, model, gpu, engine):
    used = [c for c in table.candidates if counts.get(c.name)]
    found = [v for c in used for v in check_layout(engine, model, gpu, c.layout, c.role)]
    prefills = [c for c in used if c.role == "prefill"]
    decodes = [c for c in used if c.role == "decode"]
    found += [v for p in prefills for d in decodes for v in check_pair(engine, model, p.layout, d.layout)]
    return found


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(["qwen3-32b", "llama-3.1-8b", "qwen3-30b-a3b", "qwen3.5-27b"]),
       gpu=st.sampled_from(["H100-SXM", "A100-80GB-SXM", "L40S", "B200"]),
       num_gpus=st.sampled_from([8, 16]), engine=st.sampled_from(ENGINES),
       isl=st.sampled_from([1000, 24000]), mode=st.sampled_from(["auto", "disaggregated"]))
def test_no_solved_layout_breaks_an_engine_rule(model, gpu, num_gpus, engine, isl, mode):
    table = _table(model, gpu, num_gpus, engine, isl, mode)
    found = search(to_integer_table(table), "goodput-per-dollar", 2.0)
    if found.best.has_plan:
        assert _violations(table, found.best.counts, get_model(model), get_gpu(gpu), engine) == []


def test_every_engine_rule_drop_is_counted_with_its_name():
    table = _table("qwen3-32b", "H100-SXM", 16, "vllm==0.33.0", 24000, "auto")
    assert table.dropped_by("engine_rule:pcp_unsupported") > 0  # long prompts propose PCP; GQA cannot run it
    record = next(f for f in table.filters if f.name == "engine_rule:pcp_unsupported")
    assert "vllm/v1/attention/backend.py:1038" in record.example
    assert not any(c.layout.pcp_size > 1 for c in table.candidates)


def test_the_pairing_constraint_is_what_keeps_0_13_plans_valid():
    """vLLM 0.13 on the headline case (64 H100): without the constraint the solver adds a prefill TP2
    next to decode TP1, a pair 0.13 cannot hand KV between."""
    table = _table("qwen3-32b", "H100-SXM", 64, "vllm==0.13.0", None, "disaggregated", default_slo=True)
    # The single-node layouts only: with TP16 over two nodes in the table the free optimum falls on
    # an equally good TP1 + TP1 plan (within the 2 % tolerance), which pairs anyway.
    # One checkpoint (fp8 weights): plans mixing checkpoints cannot pair (pd_checkpoint) and keep
    # other, equally good, candidates in the table.
    kept = tuple(c for c in table.candidates if c.layout.gpus_per_stage <= 8 and c.layout.weight_precision == "fp8")
    names = {c.name for c in kept}
    table = table.model_copy(update={"candidates": kept, "incompatible_pairs": tuple(
        pair for pair in table.incompatible_pairs if set(pair) <= names)})
    assert table.incompatible_pairs
    # Without pool gains (n x one instance): with them the free optimum is TP1 + TP1, which pairs anyway.
    integer = to_integer_table(table)
    integer = integer.model_copy(update={"candidates": tuple(
        c.model_copy(update={"pool_rate_units": ()}) for c in integer.candidates)})
    model, gpu = get_model("qwen3-32b"), get_gpu("H100-SXM")
    free = search(integer.model_copy(update={"incompatible_pairs": ()}), "goodput-per-dollar", 5.0)
    assert _violations(table, free.best.counts, model, gpu, "vllm==0.13.0")
    constrained = search(integer, "goodput-per-dollar", 5.0)
    assert constrained.best.has_plan
    assert _violations(table, constrained.best.counts, model, gpu, "vllm==0.13.0") == []
    # the solver-independent validator holds both to the problem statement
    from layoutopt.optimizer.validate import plan_violations

    def pairing_problems(outcome):
        rates = (outcome.disaggregated_rate_units, outcome.colocated_rate_units)
        found = plan_violations(table, outcome.counts, *(rate_rps(r) for r in rates))
        return [p for p in found if "cannot hand KV" in p]

    assert pairing_problems(free.best) and pairing_problems(constrained.best) == []


def test_solve_records_the_engine_version_and_honours_its_rules():
    plan = api.solve("qwen3-32b", "32xH100", isl=1400, osl=250, engine="vllm==0.13.0", mode="disaggregated",
                     time_limit_s=5)
    assert plan.engine == "vllm==0.13.0"
    prefill_tps = {p.tp_size for p in plan.pools if p.role == "prefill"}
    decode_tps = {p.tp_size for p in plan.pools if p.role == "decode"}
    assert prefill_tps and decode_tps and all(d % p == 0 for p in prefill_tps for d in decode_tps)


def test_solve_defaults_to_the_current_release():
    assert api.solve("llama-3.1-8b", "8xH100", isl=1000, osl=200, time_limit_s=5).engine == "vllm==0.33.0"


@pytest.mark.parametrize("engine,field", [("vllm==0.1.0", "--engine"), ("tensorrt", "--engine")])
def test_solve_rejects_unknown_engines(engine, field):
    from layoutopt.errors import InputError

    with pytest.raises(InputError) as error:
        api.solve("llama-3.1-8b", "8xH100", engine=engine)
    assert error.value.field == field


def test_infeasible_plans_never_suggest_pcp_the_engine_cannot_run():
    """A 100k-token prompt on 8xH100 misses TTFT; vLLM 0.33 has no PCP for GQA, so none is suggested.

    llama-3.1-70b (GQA, 131,072 tokens of context) holds the prompt; qwen3-32b's 40,960 would not."""
    tight = SLO(ttft_ms={"p90": 1500}, tpot_ms={"p90": 100}, attainment=0.9)
    plan = api.solve("llama-3.1-70b", "8xH100", slo=tight, isl=100_000, osl=100, time_limit_s=5)
    assert plan.status == "infeasible"
    assert plan.explanation.suggestions and not any("context parallelism" in s for s in plan.explanation.suggestions)


def test_the_mode_note_compares_a_pair_the_engine_can_connect():
    import re

    from layoutopt.optimizer.explain import mode_note

    table = _table("qwen3-32b", "H100-SXM", 32, "vllm==0.13.0", None, "auto", default_slo=True)
    assert table.incompatible_pairs
    prefill_tp, decode_tp = map(int, re.search(r"prefill tp(\d+)\S* \+ decode tp(\d+)", mode_note(table, [])).groups())
    assert decode_tp % prefill_tp == 0
