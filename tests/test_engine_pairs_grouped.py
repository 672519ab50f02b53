"""``incompatible_pairs`` and ``pairing_signatures`` check each pair of (TP, PP, GPU attention-backend
family) keys once; they list what checking every prefill-decode pair with ``check_pair`` lists, in the
same order."""

from __future__ import annotations

import random

import pytest

from layoutopt.engines import check_pair, engine_ref_of
from layoutopt.engines.pair_rules import pair_rule_key
from layoutopt.hardware_catalog.catalog import get_gpu
from layoutopt.model_catalog.catalog import get_model
from layoutopt.optimizer.engine_rules import incompatible_pairs, pairing_signatures
from layoutopt.optimizer.space import enumerate_proposals


@pytest.mark.parametrize("engine,model_name", [("vllm", "qwen3-32b"), ("vllm==0.13.0", "qwen3-32b"),
                                               ("sglang", "qwen3-32b"), ("sglang==0.5.3", "qwen3-32b"),
                                               ("vllm", "deepseek-v3"),   # MLA: PCP and DCP pools
                                               ("sglang", "deepseek-v3")])  # MLA: DCP decode pools
def test_grouped_pair_checks_equal_every_pair(engine, model_name):
    model, ref = get_model(model_name), engine_ref_of(engine)
    proposals = [p for p in enumerate_proposals(model, [get_gpu("H100"), get_gpu("B200")],
                                                ["prefill", "decode", "colocated"], "bf16")]
    sample = random.Random(0).sample(proposals, 300)
    expected = tuple((p.name, d.name) for p in sample if p.role == "prefill" for d in sample
                     if d.role == "decode" and check_pair(ref, model, p.layout, d.layout, p.gpu, d.gpu))
    assert expected and incompatible_pairs(ref, model, sample, {}) == expected
    signatures = pairing_signatures(ref, model, sample)
    partners = {pair_rule_key(d.layout, d.gpu): d
                for d in sample if d.role == "decode"}
    decode_keys = sorted(partners)
    for p in sample:
        if p.role == "prefill":
            assert signatures[p.name] == tuple(not check_pair(ref, model, p.layout, partners[k].layout, p.gpu,
                                                              partners[k].gpu) for k in decode_keys)
        elif p.role == "colocated":
            assert signatures[p.name] == ()


@pytest.mark.parametrize("engine", ["vllm", "vllm==0.13.0", "sglang", "sglang==0.5.3"])
def test_pair_rules_split_into_layout_and_gpu_parts(engine):
    """check_pair is check_pair_layouts then check_pair_gpus; the first reads pair_layout_key alone,
    the second the GPUs and weight precisions alone (what pairing_signatures caches each part by)."""
    from layoutopt.engines.pair_rules import check_pair_gpus, check_pair_layouts, pair_layout_key

    model, ref = get_model("deepseek-v3"), engine_ref_of(engine)
    proposals = list(enumerate_proposals(model, [get_gpu("H100"), get_gpu("H200"), get_gpu("B200")],
                                         ["prefill", "decode"], "auto"))
    rng = random.Random(1)
    prefills = rng.sample([p for p in proposals if p.role == "prefill"], 60)
    decodes = rng.sample([p for p in proposals if p.role == "decode"], 60)
    by_layout_key: dict = {}
    by_gpu_key: dict = {}
    for p in prefills:
        for d in decodes:
            layouts = check_pair_layouts(ref, model, p.layout, d.layout)
            gpus = check_pair_gpus(ref, model, p.layout, d.layout, p.gpu, d.gpu)
            assert check_pair(ref, model, p.layout, d.layout, p.gpu, d.gpu) == layouts + gpus
            layout_key = (pair_layout_key(p.layout), pair_layout_key(d.layout))
            assert by_layout_key.setdefault(layout_key, bool(layouts)) == bool(layouts)
            gpu_key = (p.gpu.name, p.layout.weight_precision, d.gpu.name, d.layout.weight_precision)
            assert by_gpu_key.setdefault(gpu_key, bool(gpus)) == bool(gpus)
    assert any(by_layout_key.values()) and not all(by_layout_key.values())
