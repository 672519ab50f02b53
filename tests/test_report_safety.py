"""Hostile or invalid plan fields never reach a script: they are rejected, and what is written parses."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from layoutopt.errors import InputError
from layoutopt.report.emit import render
from layoutopt.report.names import shell_word
from test_report_helpers import FIXTURES, MODEL_IDS, PLAN_NAMES, fixture_plan

HOSTILE = ["x\nrm -rf ~", "$(touch /tmp/pwned)", "a'b", 'a"b', "`id`", "a;b", "a b", "../../etc/passwd", ""]


def _with_pool(plan, **changes):
    pools = [plan.pools[0].model_copy(update=changes), *plan.pools[1:]]
    return plan.model_copy(update={"pools": pools})


def _with_placed(plan, **changes):
    placement = [plan.placement[0].model_copy(update=changes), *plan.placement[1:]]
    return plan.model_copy(update={"placement": placement})


@pytest.mark.parametrize("value", HOSTILE)
@pytest.mark.parametrize("where", ["model", "gpu", "node", "instance_id", "model_id", "namespace", "image"])
def test_hostile_values_are_rejected_naming_the_field(value, where):
    plan = fixture_plan("disaggregated")
    kwargs = {"model_id": MODEL_IDS[plan.model], "plots": False}
    if where == "model":
        plan = plan.model_copy(update={"model": value})
    elif where == "gpu":
        plan = _with_pool(plan, gpu=value)
    elif where in ("node", "instance_id"):
        plan = _with_placed(plan, **({"node": value, "nodes": [value]} if where == "node" else {where: value}))
    else:
        kwargs[where] = value
    with pytest.raises(InputError) as caught:
        render(plan, **kwargs)
    assert caught.value.field and (where in caught.value.field or where == "model_id" or "model" in caught.value.field)


@pytest.mark.parametrize(("change", "field"), [
    (lambda p: p.model_copy(update={"schema_version": 99}), "schema_version"),
    (lambda p: p.model_copy(update={"model": "no-such-model"}), "plan.model"),
    (lambda p: p.model_copy(update={"engine": "trtllm"}), "plan.engine"),
    (lambda p: _with_pool(p, gpu="H999"), "gpu"),
    (lambda p: _with_pool(p, tp_size=3, gpus_per_instance=6), "plan.pools[0]"),
    (lambda p: _with_pool(p, gpus_per_instance=7), "gpus_per_instance"),
    (lambda p: _with_placed(p, instance_id=p.placement[1].instance_id), "instance_id"),
])
def test_emit_rejects_what_simulate_rejects(change, field):
    plan = change(fixture_plan("disaggregated"))
    with pytest.raises(InputError) as caught:
        render(plan, model_id=MODEL_IDS["llama-3.1-70b"], plots=False)
    assert field in caught.value.field


def test_a_config_json_model_needs_a_model_id():
    config = FIXTURES.parent.parent / "layoutopt" / "model_catalog" / "data" / "hf_configs" / "Qwen--Qwen3-32B.json"
    plan = fixture_plan("colocated").model_copy(update={"model": str(config)})
    with pytest.raises(InputError, match="--model-id"):
        render(plan, plots=False)
    files = render(plan, model_id="Qwen/Qwen3-32B-FP8", plots=False)
    script = next(t for p, t in files.items() if p.startswith("launch/"))
    assert "vllm serve Qwen/Qwen3-32B-FP8" in script and str(config) not in script.split("set -euo")[1]


def test_shell_word_expands_only_layoutopt_variables():
    assert shell_word("${NODE_IP:-gpu-a}") == '"${NODE_IP:-gpu-a}"'
    assert shell_word("$((LWS_WORKER_INDEX * 8))") == '"$((LWS_WORKER_INDEX * 8))"'
    assert shell_word("$(rm -rf /)") == "'$(rm -rf /)'"
    assert shell_word("${HOME}") == "'${HOME}'"
    assert shell_word("${NODE_IP:-a}$(id)") == "'${NODE_IP:-a}$(id)'"


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("name", PLAN_NAMES)
@pytest.mark.parametrize("engine", ["vllm", "sglang", "vllm==0.13.0", "sglang==0.5.3"])
def test_every_script_parses_with_bash_n(name, engine):
    plan = fixture_plan(name)
    files = render(plan, engine=engine, model_id=MODEL_IDS[plan.model], plots=False)
    scripts = {p: t for p, t in files.items() if p.endswith(".sh")}
    assert scripts
    for path, text in scripts.items():
        result = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
        assert result.returncode == 0, f"{path}: {result.stderr}"


def test_a_layout_the_engine_cannot_run_is_refused_with_the_rule_source():
    plan = _with_pool(fixture_plan("disaggregated"), tp_size=2, pcp_size=2, gpus_per_instance=4)
    with pytest.raises(InputError) as caught:
        render(plan, model_id=MODEL_IDS[plan.model], plots=False)
    assert "pcp_unsupported" in str(caught.value) and "vllm/v1/attention/backend.py" in str(caught.value)
    # vLLM 0.13 needs decode TP to be a multiple of prefill TP (kv_connector/utils.py).
    plan = _with_pool(fixture_plan("disaggregated"), tp_size=8, gpus_per_instance=8)
    plan = plan.model_copy(update={"pools": [plan.pools[0], plan.pools[1].model_copy(
        update={"tp_size": 4, "gpus_per_instance": 4})]})
    with pytest.raises(InputError, match="pd_tp_divisibility"):
        render(plan, engine="vllm==0.13.0", model_id=MODEL_IDS[plan.model], plots=False)
    render(plan, engine="vllm", model_id=MODEL_IDS[plan.model], plots=False)  # 0.33: either TP may be larger
