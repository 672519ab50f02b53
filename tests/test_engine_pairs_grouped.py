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
