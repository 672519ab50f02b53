"""The plan records the EP exchange its numbers cost (Plan.ep_exchange, schema 2) and emit runs that one:
the DeepEP backend where a profile costs the all-to-all, the engine's default where that is the costed
one, and a refusal where the engine has no backend for it. Plans of schema 1 (no field) still load."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest
from test_report_helpers import fixture_plan
from test_report_matrix import check_emitted_files

from layoutopt.errors import InputError
from layoutopt.perf_model.calibration import EngineProfile
from layoutopt.plan import READABLE_SCHEMA_VERSIONS, SCHEMA_VERSION, EpExchange, Plan, load_plan
from layoutopt.report.emit import render
from layoutopt.report.node_launch import DEEPEP_FLAGS

FIXTURES = Path(__file__).resolve().parent / "fixtures"
BACKEND_FLAG = {"vllm": "--all2all-backend", "sglang": "--moe-a2a-backend"}
RELEASE = {"vllm": "0.33.0", "sglang": "0.5.23"}


def moe_plan(ep_exchange: str | None) -> Plan:
    """DeepSeek-style DEP pools (prefill DP8 x EP8 on H200, decode DP16 x EP16 on H100) costing ``ep_exchange``."""
    plan = fixture_plan("moe_ep_dp")
    return plan.model_copy(update={"ep_exchange": ep_exchange, "schema_version": SCHEMA_VERSION})


def engine_lines(files: dict, role: str) -> list[str]:
    """The engine command lines of the role's launch scripts, continuation lines joined."""
    lines = []
    for name, text in files.items():
        if name.startswith(f"launch/{role}-") and isinstance(text, str):
            lines += [line for line in text.replace(" \\\n", " ").splitlines()
                      if not line.lstrip().startswith("#") and ("vllm serve" in line or "launch_server" in line)]
    return lines


def test_the_plans_exchange_choices_are_the_perf_models():
    assert set(typing.get_args(EpExchange)) == set(typing.get_args(EngineProfile.model_fields["ep_exchange"].annotation))


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_an_alltoall_plan_selects_the_deepep_backend_per_role(engine):
    files = render(moe_plan("alltoall"), engine=engine, model_id=None, plots=False)
    check_emitted_files(files, engine, RELEASE[engine])
    for role in ("prefill", "decode"):
        lines = engine_lines(files, role)
        assert lines and all(DEEPEP_FLAGS[engine][role] in line for line in lines), (role, lines[:1])


@pytest.mark.parametrize(("engine", "default"), [("vllm", "allgather_reducescatter"), ("sglang", "dp_gather")])
def test_the_engines_default_exchange_adds_no_backend_flag(engine, default):
    for recorded in (default, None):   # None: a schema 1 plan, costed with the built-in profile
        files = render(moe_plan(recorded), engine=engine, model_id=None, plots=False)
        check_emitted_files(files, engine, RELEASE[engine])
        lines = engine_lines(files, "decode")
        assert lines and not any(BACKEND_FLAG[engine] in line for line in lines)


@pytest.mark.parametrize(("engine", "costed"), [("vllm", "dp_gather"), ("sglang", "allgather_reducescatter")])
def test_an_exchange_the_engine_has_no_backend_for_is_refused(engine, costed):
    with pytest.raises(InputError) as error:
        render(moe_plan(costed), engine=engine, model_id=None, plots=False)
    text = str(error.value)
    assert "plan.ep_exchange" in text and costed in text and "no backend" in text
    assert ("config/parallel.py:220" if engine == "vllm" else "exec_.py:836") in text
    # A dense plan (no EP with attention DP) runs no exchange: nothing to refuse.
    dense = fixture_plan("colocated").model_copy(update={"ep_exchange": costed})
    assert render(dense, engine=engine, model_id=None, plots=False)


def test_schema_1_plans_still_load_and_emit():
    assert SCHEMA_VERSION == 2 and READABLE_SCHEMA_VERSIONS == (1, 2)
    old = load_plan(FIXTURES / "plan_moe_ep_dp.json")
    assert old.schema_version == 1 and old.ep_exchange is None
    files = render(old, engine="vllm", model_id=None, plots=False)
    assert not any(BACKEND_FLAG["vllm"] in line for line in engine_lines(files, "decode"))
    with pytest.raises(InputError, match="schema_version"):
        render(old.model_copy(update={"schema_version": 3}), engine="vllm", model_id=None, plots=False)


def test_solve_records_the_exchange_of_its_profile():
    from layoutopt.calibrate.apply import with_ep_exchange
    from layoutopt.perf_model.calibration import get_engine_profile

    plan = fixture_plan("moe_ep_dp")
    assert with_ep_exchange(plan, "vllm").ep_exchange == "allgather_reducescatter"
    assert with_ep_exchange(plan, "sglang").ep_exchange == "dp_gather"
    deepep = get_engine_profile("vllm").model_copy(update={"ep_exchange": "alltoall"})
    assert with_ep_exchange(plan, deepep).ep_exchange == "alltoall"


def test_the_service_reads_both_schema_versions():
    from layoutopt.service.arguments import ServiceError, check_plan

    old = load_plan(FIXTURES / "plan_moe_ep_dp.json")
    for version in READABLE_SCHEMA_VERSIONS:
        check_plan(old.model_copy(update={"schema_version": version}))
    with pytest.raises(ServiceError):
        check_plan(old.model_copy(update={"schema_version": 3}))
