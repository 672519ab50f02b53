"""A GPU type added with --gpus (no node_types row names it) works in a plain budget."""

from __future__ import annotations

from pathlib import Path

from layoutopt.hardware_catalog.budget import parse_budget
from layoutopt.hardware_catalog.catalog import load_catalog
from layoutopt.optimizer.solve import solve

NEW_GPU = """\
gpus:
  - name: MI999
    vendor: amd
    bf16_tflops: 2500
    fp8_tflops: 5000
    fp4_tflops: null
    memory_gib: 256
    memory_bandwidth_gb_per_s: 8000
    scaleup_gb_per_s: 450
    scaleup_domain_gpus: 8
    pcie_gb_per_s: 64
    nic_gbit_per_s: 400
    tdp_w: 1000
    price: {typical_usd_per_hour: 3.0, low_usd_per_hour: 2.5, high_usd_per_hour: 3.5, as_of: "2026-05", source: q}
    source: a test row
"""


def test_new_gpu_gets_a_generic_node_and_solves(tmp_path: Path):
    path = tmp_path / "gpus.yaml"
    path.write_text(NEW_GPU)
    catalog = load_catalog(gpus_path=path)
    node = catalog.default_node_type("MI999")
    assert (node.name, node.gpus_per_node, node.nvlink_domain_gpus, node.nic_gbit_per_s_per_gpu) == (
        "generic-mi999-8", 8, 8, 400.0)
    assert "derived from the MI999 GPU row" in node.source
    assert parse_budget("16xMI999", catalog).gpu_counts == {"MI999": 16}
    plan = solve("qwen3-8b", "8xMI999", gpus_path=path, rate_rps=2, objective="min-cost", time_limit_s=5)
    assert plan.status == "optimal" and {p.gpu for p in plan.pools} == {"MI999"}
    assert plan.totals.cost_usd_per_hour == 3.0 * plan.totals.gpus
    # a built-in GPU keeps its own node type
    assert catalog.default_node_type("H100").name == "hgx-h100-8"
