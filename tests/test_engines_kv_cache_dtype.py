"""A 16-bit KV cache stays 16-bit where vLLM's model hook would switch ``auto`` to FP8 (GLM-5 on SM100)."""

from __future__ import annotations

import pytest

from layoutopt.engines import load_engine_data
from layoutopt.engines.kv_cache_dtype import explicit_kv_cache_dtype
from layoutopt.hardware_catalog.catalog import get_gpu
from layoutopt.model_catalog.catalog import get_model
from layoutopt.plan import Pool
from layoutopt.report.node_launch import node_launch

GLM5, DEEPSEEK = get_model("glm-5"), get_model("deepseek-v3")


@pytest.mark.parametrize("engine,model,gpu,kv,expected", [
    ("vllm==0.33.0", GLM5, "B200", "bf16", "bfloat16"),   # config.py: auto -> fp8_e4m3 on SM10x
    ("vllm==0.33.0", GLM5, "H200", "bf16", None),         # Hopper keeps auto = the model dtype
    ("vllm==0.33.0", GLM5, "B200", "fp8", None),          # the launch names fp8 anyway
    ("vllm==0.33.0", DEEPSEEK, "B200", "bf16", None),     # no hook for DeepseekV3ForCausalLM
    ("vllm==0.33.0", GLM5, "MI355X", "bf16", None),
    ("vllm==0.13.0", GLM5, "B200", "bf16", None),         # no such hook in 0.13
    ("sglang==0.5.23", GLM5, "B200", "bf16", None),
])
def test_explicit_kv_cache_dtype(engine, model, gpu, kv, expected):
    assert explicit_kv_cache_dtype(engine, model, get_gpu(gpu), kv) == expected


def test_the_fact_names_glm5_on_blackwell():
    fact = load_engine_data("vllm", "0.33.0").fact("model_kv_cache_dtype_default")
    assert fact.value["GlmMoeDsaForCausalLM"] == {"compute_capability_major": 10, "dtype": "fp8_e4m3"}
    assert fact.source.file == "vllm/model_executor/models/config.py"
    assert load_engine_data("vllm", "0.13.0").fact("model_kv_cache_dtype_default") is None


def test_the_vllm_launch_names_it_and_the_flag_choice_exists():
    pool = Pool(role="colocated", gpu="B200", instances=1, gpus_per_instance=8, tp_size=8, pp_size=1, ep_size=1,
                dp_size=1, dcp_size=1, pcp_size=1, precision="bf16", kv_precision="bf16", max_batch_size=64,
                capacity_rps=1.0, cost_usd_per_hour=10.0)
    argv = list(node_launch("vllm", pool, kv_cache_dtype="bfloat16").argv)
    assert argv[argv.index("--kv-cache-dtype") + 1] == "bfloat16"
    assert "bfloat16" in load_engine_data("vllm", "0.33.0").flag("--kv-cache-dtype").choices
    assert "--kv-cache-dtype" not in node_launch("vllm", pool).argv
