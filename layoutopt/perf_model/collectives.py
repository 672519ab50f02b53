"""Time of the collectives an instance runs: all-reduce, all-gather, all-to-all, point-to-point.

Every function returns seconds and accepts a float or a numpy array of message sizes (bytes).
Cost model: ``fixed latency + bytes on the wire per GPU / achieved bandwidth``, where

- bytes on the wire per GPU follow the ring algorithms: all-reduce ``2 (n-1)/n x S``,
  all-gather and all-to-all ``(n-1)/n x S`` (seeds/003: "bytes moved scale like 2(n-1)/n");
- achieved bandwidth = link line rate x ``LINK_EFFICIENCY[kind]`` x a message-size saturation
  curve derived from measured H100 NCCL all-reduce bus bandwidth (43.7 GB/s at 1 MiB, 172 at 8 MiB,
  362 at 64 MiB, 438 at 512 MiB [AZ-H100]): small decode messages get a small fraction;
- fixed latency = the engine's per-collective cost plus one link hop inside an NVLink domain
  (NVSwitch kernels reach every peer directly) or one hop per ring step over PCIe or the network.
"""

from __future__ import annotations

import math

import numpy as np

from layoutopt.perf_model.calibration import (
    ALLREDUCE_LINK_EFFICIENCY,
    BANDWIDTH_SATURATION_FRACTION,
    BANDWIDTH_SATURATION_LOG_BYTES,
    LINK_EFFICIENCY,
)
from layoutopt.perf_model.links import Link

_LOGS = BANDWIDTH_SATURATION_LOG_BYTES
_FRACS = BANDWIDTH_SATURATION_FRACTION
_LOGS_ARRAY = np.asarray(_LOGS)
_FRACS_ARRAY = np.asarray(_FRACS)


def bandwidth_saturation_fraction(message_bytes):
    """Fraction (0, 1] of a link's asymptotic collective bandwidth a message of this size reaches."""
    if isinstance(message_bytes, np.ndarray):
        return np.interp(np.log(np.maximum(message_bytes, 1.0)), _LOGS_ARRAY, _FRACS_ARRAY)
    x = math.log(max(float(message_bytes), 1.0))
    if x <= _LOGS[0]:
        return _FRACS[0]
    for i in range(1, len(_LOGS)):
        if x <= _LOGS[i]:
            t = (x - _LOGS[i - 1]) / (_LOGS[i] - _LOGS[i - 1])
            return _FRACS[i - 1] + t * (_FRACS[i] - _FRACS[i - 1])
    return _FRACS[-1]


def achieved_bandwidth_gb_per_s(link: Link, message_bytes, allreduce: bool = False):
    """Bus bandwidth per GPU a collective of ``message_bytes`` reaches on ``link`` (GB/s)."""
    efficiency = (ALLREDUCE_LINK_EFFICIENCY if allreduce else LINK_EFFICIENCY)[link.kind]
    return link.bandwidth_gb_per_s * efficiency * bandwidth_saturation_fraction(message_bytes)


def _hops(link: Link, ring_steps: int) -> int:
    return 1 if link.kind == "nvlink" else ring_steps


def allreduce_time_s(message_bytes, num_gpus: int, link: Link, latency_us: float):
    """Ring all-reduce of ``message_bytes`` over ``num_gpus``: latency + 2(n-1)/n x S / bandwidth."""
    if num_gpus <= 1:
        return 0.0
    n = num_gpus
    wire_bytes = 2.0 * (n - 1) / n * message_bytes
    fixed_s = (latency_us + _hops(link, 2 * (n - 1)) * link.latency_us) * 1e-6
    return fixed_s + wire_bytes / (achieved_bandwidth_gb_per_s(link, message_bytes, allreduce=True) * 1e9)


def allgather_time_s(total_bytes, num_gpus: int, link: Link, latency_us: float):
    """All-gather whose result is ``total_bytes`` per GPU: latency + (n-1)/n x S / bandwidth."""
    if num_gpus <= 1:
        return 0.0
    n = num_gpus
    wire_bytes = (n - 1) / n * total_bytes
    fixed_s = (latency_us + _hops(link, n - 1) * link.latency_us) * 1e-6
    return fixed_s + wire_bytes / (achieved_bandwidth_gb_per_s(link, total_bytes) * 1e9)


def alltoall_time_s(bytes_per_gpu, num_gpus: int, link: Link, latency_us: float):
    """All-to-all where each GPU holds ``bytes_per_gpu`` spread evenly over all ranks.

    The (n-1)/n share that leaves the GPU crosses the link; peers are reached directly.
    """
    if num_gpus <= 1:
        return 0.0
    n = num_gpus
    wire_bytes = (n - 1) / n * bytes_per_gpu
    fixed_s = (latency_us + link.latency_us) * 1e-6
    return fixed_s + wire_bytes / (achieved_bandwidth_gb_per_s(link, bytes_per_gpu) * 1e9)


def p2p_time_s(message_bytes, link: Link):
    """Send ``message_bytes`` from one GPU to another (pipeline stage boundary)."""
    return link.latency_us * 1e-6 + message_bytes / (achieved_bandwidth_gb_per_s(link, message_bytes) * 1e9)


def ring_pass_time_s(chunk_bytes, num_gpus: int, link: Link, latency_us: float):
    """Ring attention: each GPU passes its ``chunk_bytes`` around the ring, n-1 steps."""
    if num_gpus <= 1:
        return 0.0
    steps = num_gpus - 1
    per_step_s = (latency_us + link.latency_us) * 1e-6 + chunk_bytes / (
        achieved_bandwidth_gb_per_s(link, chunk_bytes) * 1e9
    )
    return steps * per_step_s
