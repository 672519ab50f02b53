"""KV-cache transfer between a prefill and a decode instance (disaggregated serving).

T = KV bytes of the prompt / achieved bandwidth of the path + latency (seeds/002 section 5:
"T_transfer = KV_size / BW"; a 600 MB KV over 200 Gb/s InfiniBand is about 24 ms).

No per-request connector handshake is added: vLLM's NIXL pull connector handshakes once per
remote prefill engine and caches the agent (``_read_blocks_for_req`` starts the read at once
when the engine is in ``_remote_agents``, else runs ``_background_nixl_handshake`` first;
vllm/distributed/kv_transfer/kv_connector/v1/nixl/pull_worker.py:152-155 in vLLM 0.33.0), so
the handshake falls in a benchmark's warm-up. What each request does pay after the transfer is
decode admission: the finished read is picked up at the decode scheduler's next step and the
request's first step follows (``load_rows.decode_rows``: half a step on average, then a step).
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
