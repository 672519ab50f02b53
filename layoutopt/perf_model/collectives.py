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

A group that spans ``N`` local domains with ``d = n / N`` of its GPUs in each (a ``SpanningGroup``)
is costed as NCCL runs it (hierarchically):

- all-reduce: reduce-scatter inside each domain (``(d-1)/d x S`` over the local fabric), all-reduce
  of each GPU's ``S/d`` shard across the domains, every GPU over its own NIC (``2 (N-1)/N x S/d``),
  then all-gather inside the domain (``(d-1)/d x S``). NCCL pipelines the stages chunk by chunk,
  so the bandwidth term is the slower of the local and the network stage, not their sum: this
  reproduces "ring busbw across nodes = the node's NIC bandwidth" [NCCL160], [NCCL252] and the
  ~350 GB/s busbw of 512 MB over 248 x 8 H200 [NCCL283] (a sum would give ~200);
- all-gather: the same without the reduce-scatter, ``(N-1)/N x S/d`` over each NIC; a reduce-scatter
  (the all-gather backwards) costs the same;
- all-to-all: of each GPU's ``S`` the ``(d-1)/n`` share for its own domain goes over the local
  fabric, the ``(n-d)/n`` share for other domains over its NIC, both at once;
- the local stages are reduce-scatters and all-gathers, which do not get NVLS's in-switch
  reduction: they run at ``LINK_EFFICIENCY`` (~370 of 450 GB/s on H100 [NCCL212]); the network
  stage at ``LINK_EFFICIENCY["network"]`` (46-48 GB/s per 400 Gb/s NIC [NCCL290]). On PCIe
  servers the NIC traffic crosses the GPU's PCIe link too, so there the stages add up;
- fixed latency: engines' custom one-shot kernels reach peers only inside one domain, so a
  spanning collective runs NCCL and costs at least ``NCCL_ALLREDUCE_LATENCY_US``; plus one local
  hop per local stage and ``min(N-1, ceil(log2 N))`` network hops per direction (NCCL's tree
  across nodes, ring for N <= 3: NCCL tuning.cc charges ``2 log2(nNodes)`` network latencies
  for a tree all-reduce).
"""

from __future__ import annotations

import math
from bisect import bisect_left

import numpy as np

from layoutopt.perf_model.calibration import (
    ALLREDUCE_LINK_EFFICIENCY,
    BANDWIDTH_SATURATION_FRACTION,
    BANDWIDTH_SATURATION_LOG_BYTES,
    LINK_EFFICIENCY,
    NCCL_ALLREDUCE_LATENCY_US,
)
from layoutopt.perf_model.links import GroupLink, Link, SpanningGroup
from layoutopt.perf_model.memo import identity_memo

_LOGS = BANDWIDTH_SATURATION_LOG_BYTES
_FRACS = BANDWIDTH_SATURATION_FRACTION
_LOGS_ARRAY = np.asarray(_LOGS)
_FRACS_ARRAY = np.asarray(_FRACS)


def bandwidth_saturation_fraction(message_bytes):
    """Fraction (0, 1] of a link's asymptotic collective bandwidth a message of this size reaches."""
    if isinstance(message_bytes, np.ndarray):
        return np.interp(np.log(np.maximum(message_bytes, 1.0)), _LOGS_ARRAY, _FRACS_ARRAY)
    x = math.log(max(float(message_bytes), 1.0))
    i = bisect_left(_LOGS, x)  # the first knot at or above x
    if i == 0:
        return _FRACS[0]
    if i == len(_LOGS):
        return _FRACS[-1]
    t = (x - _LOGS[i - 1]) / (_LOGS[i] - _LOGS[i - 1])
    return _FRACS[i - 1] + t * (_FRACS[i] - _FRACS[i - 1])


def link_efficiency(link: Link, allreduce: bool = False) -> float:
    """Large-message bus bandwidth / line rate of ``link``: its own figure (the GPU generation's,
    see links.nvlink) or the default of its kind."""
    if allreduce:
        return link.allreduce_efficiency or ALLREDUCE_LINK_EFFICIENCY[link.kind]
    return link.efficiency or LINK_EFFICIENCY[link.kind]


def line_rate_gb_per_s(link: Link, group_gpus: int | None = None) -> float:
    """Per-GPU line rate ``group_gpus`` GPUs talking over ``link`` reach: all of it through a
    switch; on a full mesh only the links to the other members, (g - 1) / peers of it."""
    if link.mesh_peers is None or group_gpus is None:
        return link.bandwidth_gb_per_s
    return link.bandwidth_gb_per_s * min(max(group_gpus - 1, 1), link.mesh_peers) / link.mesh_peers


@identity_memo
def _asymptotic_gb_per_s(link: Link, group_gpus: int | None, allreduce: bool) -> float:
    """Line rate x efficiency (GB/s) of ``link`` for a group of ``group_gpus``: the same few frozen
    links recur in every step (memoized by identity)."""
    return line_rate_gb_per_s(link, group_gpus) * link_efficiency(link, allreduce)


@identity_memo
def _flat_terms(link: Link, n: int, latency_us: float, kind: str) -> tuple[float, float, float]:
    """A collective over ``n`` GPUs on one link: fixed latency (s), the share of the message that
    crosses the wire (ring: all-reduce 2(n-1)/n, all-gather and all-to-all (n-1)/n) and the link's
    asymptotic bus bandwidth (GB/s) for that kind (memoized by identity: the same few groups recur
    in every step)."""
    if kind == "allreduce":
        share, hops = 2.0 * (n - 1) / n, _hops(link, 2 * (n - 1))
    else:
        share, hops = (n - 1) / n, 1 if kind == "alltoall" else _hops(link, n - 1)
    return (latency_us + hops * link.latency_us) * 1e-6, share, _asymptotic_gb_per_s(link, n, kind == "allreduce")


def achieved_bandwidth_gb_per_s(link: Link, message_bytes, allreduce: bool = False, group_gpus: int | None = None):
    """Bus bandwidth per GPU a collective of ``message_bytes`` among ``group_gpus`` GPUs reaches on
    ``link`` (GB/s); ``group_gpus`` None: the link's whole line rate."""
    return _asymptotic_gb_per_s(link, group_gpus, allreduce) * bandwidth_saturation_fraction(message_bytes)


def _hops(link: Link, ring_steps: int) -> int:
    return 1 if link.kind == "nvlink" else ring_steps


def _max(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.maximum(a, b)
    return max(a, b)


def _network_steps(num_domains: int) -> int:
    """Network latencies one direction of a collective across ``num_domains`` domains pays:
    a ring for few domains, a tree (log2) beyond."""
    return min(num_domains - 1, math.ceil(math.log2(num_domains)))


def _split(group: SpanningGroup, num_gpus: int) -> tuple[int, float]:
    """(domains N, GPUs per domain d) of a spanning group of ``num_gpus``."""
    num_domains = min(group.num_domains, num_gpus)
    return num_domains, num_gpus / num_domains


def _spanning_fixed_s(latency_us: float, group: SpanningGroup, local_hops: float, network_hops: float) -> float:
    """NCCL's fixed cost (at least ``NCCL_ALLREDUCE_LATENCY_US``) plus the hops' latencies, in seconds."""
    base_us = max(latency_us, NCCL_ALLREDUCE_LATENCY_US)
    return (base_us + local_hops * group.local.latency_us + network_hops * group.network.latency_us) * 1e-6


def _local_and_network_s(local_bytes, network_bytes, group: SpanningGroup, message_bytes, local_gpus: float):
    """Bandwidth time of a spanning collective: local and network stages pipelined, the slower one;
    their sum when the local fabric is PCIe, which the NIC traffic crosses too."""
    fraction = bandwidth_saturation_fraction(message_bytes)
    local_rate = line_rate_gb_per_s(group.local, math.ceil(local_gpus))
    local_s = local_bytes / (local_rate * link_efficiency(group.local) * 1e9)
    network_s = network_bytes / (group.network.bandwidth_gb_per_s * link_efficiency(group.network) * 1e9)
    if group.local.kind == "pcie":
        return (local_s + network_s) / fraction
    return _max(local_s, network_s) / fraction


def allreduce_time_s(message_bytes, num_gpus: int, link: GroupLink, latency_us: float, times: int = 1):
    """All-reduce of ``message_bytes`` over ``num_gpus``: latency + 2(n-1)/n x S / bandwidth on one
    link, hierarchical (see the module docstring) on a ``SpanningGroup``; ``times`` of them in a row."""
    if num_gpus <= 1:
        return 0.0
    n = num_gpus
    if isinstance(link, SpanningGroup):
        if times != 1:
            return times * allreduce_time_s(message_bytes, num_gpus, link, latency_us)
        num_domains, d = _split(link, n)
        local_bytes = 2.0 * (d - 1.0) / d * message_bytes          # reduce-scatter + all-gather in the domain
        network_bytes = 2.0 * (num_domains - 1) / num_domains * message_bytes / d  # S/d shard, own NIC
        local_hops = 2 * _hops(link.local, math.ceil(d) - 1) if d > 1 else 0
        fixed_s = _spanning_fixed_s(latency_us, link, local_hops, 2 * _network_steps(num_domains))
        return fixed_s + _local_and_network_s(local_bytes, network_bytes, link, message_bytes, d)
    fixed_s, share, rate = _flat_terms(link, n, latency_us, "allreduce")
    return times * fixed_s + (times * share / (rate * 1e9)) * message_bytes / bandwidth_saturation_fraction(
        message_bytes)


def allgather_time_s(total_bytes, num_gpus: int, link: GroupLink, latency_us: float):
    """All-gather whose result is ``total_bytes`` per GPU: latency + (n-1)/n x S / bandwidth
    (hierarchical on a ``SpanningGroup``: across domains on every NIC, then inside each domain)."""
    if num_gpus <= 1:
        return 0.0
    n = num_gpus
    if isinstance(link, SpanningGroup):
        num_domains, d = _split(link, n)
        local_bytes = (d - 1.0) / d * total_bytes
        network_bytes = (num_domains - 1) / num_domains * total_bytes / d
        local_hops = _hops(link.local, math.ceil(d) - 1) if d > 1 else 0
        fixed_s = _spanning_fixed_s(latency_us, link, local_hops, _network_steps(num_domains))
        return fixed_s + _local_and_network_s(local_bytes, network_bytes, link, total_bytes, d)
    fixed_s, share, rate = _flat_terms(link, n, latency_us, "allgather")
    return fixed_s + share * total_bytes / (rate * bandwidth_saturation_fraction(total_bytes) * 1e9)


def reducescatter_time_s(total_bytes, num_gpus: int, link: GroupLink, latency_us: float):
    """Reduce-scatter of a ``total_bytes`` input per GPU into ``num_gpus`` summed shards.

    NCCL's ring reduce-scatter is the all-gather run backwards: each GPU sends and receives
    (n-1)/n x S, adding every chunk as it arrives; across domains it reduces over the NICs first and
    inside each domain after, the hierarchical all-gather's stages in reverse order. So it costs
    what ``allgather_time_s`` costs for the same total.
    """
    return allgather_time_s(total_bytes, num_gpus, link, latency_us)


def alltoall_time_s(bytes_per_gpu, num_gpus: int, link: GroupLink, latency_us: float):
    """All-to-all where each GPU holds ``bytes_per_gpu`` spread evenly over all ranks.

    The (n-1)/n share that leaves the GPU crosses the link; peers are reached directly. On a
    ``SpanningGroup`` the (n-d)/n share bound for other domains leaves through the GPU's own NIC
    while the (d-1)/n share for its domain crosses the local fabric.
    """
    if num_gpus <= 1:
        return 0.0
    n = num_gpus
    if isinstance(link, SpanningGroup):
        _, d = _split(link, n)
        local_bytes = (d - 1.0) / n * bytes_per_gpu
        network_bytes = (n - d) / n * bytes_per_gpu
        fixed_s = _spanning_fixed_s(latency_us, link, 0, 1)  # direct sends; the local ones overlap
        return fixed_s + _local_and_network_s(local_bytes, network_bytes, link, bytes_per_gpu, d)
    fixed_s, share, rate = _flat_terms(link, n, latency_us, "alltoall")
    return fixed_s + share * bytes_per_gpu / (rate * bandwidth_saturation_fraction(bytes_per_gpu) * 1e9)


def p2p_time_s(message_bytes, link: Link):
    """Send ``message_bytes`` from one GPU to another (pipeline stage boundary)."""
    return link.latency_us * 1e-6 + (1.0 / (_asymptotic_gb_per_s(link, 2, False) * 1e9)) * message_bytes / (
        bandwidth_saturation_fraction(message_bytes))


def ring_pass_time_s(chunk_bytes, num_gpus: int, link: GroupLink, latency_us: float):
    """Ring attention: each GPU passes its ``chunk_bytes`` around the ring, n-1 steps.

    Every step waits for the ring's slowest edge, so a ring across domains runs at the NIC's pace.
    """
    if num_gpus <= 1:
        return 0.0
    if isinstance(link, SpanningGroup):
        link = link.network
    steps = num_gpus - 1
    per_step_s = (latency_us + link.latency_us) * 1e-6 + chunk_bytes / (
        achieved_bandwidth_gb_per_s(link, chunk_bytes, group_gpus=2) * 1e9
    )
    return steps * per_step_s
