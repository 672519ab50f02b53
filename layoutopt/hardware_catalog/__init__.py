"""Hardware catalog: GPU and node-type rows with sources, prices, and budget strings.

    from layoutopt.hardware_catalog import get_gpu, parse_budget
    get_gpu("h100").bf16_tflops          # 989.0 (dense TFLOPS)
    parse_budget("16xH100+$300/h")       # Budget(gpu_counts={'H100-SXM': 16}, max_usd_per_hour=300.0)

Importing this package reads no files; the built-in data is loaded on first use.
"""

from layoutopt.hardware_catalog.budget import Budget, parse_budget
from layoutopt.hardware_catalog.catalog import (
    HardwareCatalog,
    default_node_type,
    get_gpu,
    get_node_type,
    list_gpus,
    list_node_types,
    load_catalog,
)
from layoutopt.hardware_catalog.loaders import normalize_name
from layoutopt.hardware_catalog.prices import load_prices, with_prices
from layoutopt.hardware_catalog.schemas import PRECISIONS, GpuPrice, GpuSpec, NodeType, Precision

__all__ = [
    "PRECISIONS",
    "Budget",
    "GpuPrice",
    "GpuSpec",
    "HardwareCatalog",
    "NodeType",
    "Precision",
    "default_node_type",
    "get_gpu",
    "get_node_type",
    "list_gpus",
    "list_node_types",
    "load_catalog",
    "load_prices",
    "normalize_name",
    "parse_budget",
    "with_prices",
]
