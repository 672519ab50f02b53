"""KV-cache transfer between a prefill and a decode instance (disaggregated serving).

T = KV bytes of the prompt / achieved bandwidth of the path + latency (seeds/002 section 5:
"T_transfer = KV_size / BW"; a 600 MB KV over 200 Gb/s InfiniBand is about 24 ms).
"""

from __future__ import annotations

from layoutopt.model_catalog.spec import ModelSpec
from layoutopt.perf_model.calibration import LINK_EFFICIENCY
from layoutopt.perf_model.links import Link


def kv_transfer_bytes(model: ModelSpec, kv_precision: str, prompt_tokens: float) -> float:
    """Bytes a prefill instance hands to decode for one prompt: full-attention KV, sliding-window KV
    (capped at the window) and the constant linear-attention state."""
    return model.sequence_state_bytes(prompt_tokens, kv_precision)


def kv_transfer_time_s(model: ModelSpec, kv_precision: str, prompt_tokens: float, link: Link) -> float:
    """Seconds to move one prompt's KV over ``link``: latency + bytes / (line rate x efficiency).

    ``link`` is the whole path between the two instances; a caller that stripes the transfer over
    several NICs passes their summed bandwidth.
    """
    bandwidth_bytes_per_s = link.bandwidth_gb_per_s * 1e9 * LINK_EFFICIENCY[link.kind]
    return link.latency_us * 1e-6 + kv_transfer_bytes(model, kv_precision, prompt_tokens) / bandwidth_bytes_per_s
