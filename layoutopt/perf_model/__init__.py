"""Performance model: pure functions from (model, GPU, layout, lengths) to step times and memory.

Per-step physics (roofline per op group, collectives, memory, KV transfer) live in the modules
re-exported here; calibration constants live in ``calibration`` with their sources.
"""

from layoutopt.perf_model.calibration import EngineProfile, get_engine_profile, list_engines
from layoutopt.perf_model.kv_transfer import kv_transfer_bytes, kv_transfer_time_s
from layoutopt.plan import Layout
from layoutopt.perf_model.links import Link, inter_node_link, intra_instance_link
from layoutopt.perf_model.memory import (
    MemoryBreakdown,
    check_fits,
    check_layout,
    max_batch_size,
    memory_breakdown,
)
from layoutopt.perf_model.step import (
    StepTime,
    decode_step_time,
    decode_step_time_array,
    mixed_step_time,
    pipeline_bubble_fraction,
    prefill_time,
)

__all__ = [
    "EngineProfile",
    "Layout",
    "Link",
    "MemoryBreakdown",
    "StepTime",
    "check_fits",
    "check_layout",
    "decode_step_time",
    "decode_step_time_array",
    "get_engine_profile",
    "inter_node_link",
    "intra_instance_link",
    "kv_transfer_bytes",
    "kv_transfer_time_s",
    "list_engines",
    "max_batch_size",
    "memory_breakdown",
    "mixed_step_time",
    "pipeline_bubble_fraction",
    "prefill_time",
]
