"""Collectives, links and KV transfer: hand-computed times against the formulas and measurements."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layoutopt.hardware_catalog.catalog import get_gpu
from layoutopt.model_catalog import get_model
from layoutopt.perf_model import collectives as coll
from layoutopt.perf_model.calibration import (
    H100_ALLREDUCE_BUSBW_GB_PER_S,
    LINK_EFFICIENCY,
    NCCL_ALLREDUCE_LATENCY_US,
)
from layoutopt.perf_model.kv_transfer import kv_transfer_bytes, kv_transfer_time_s
from layoutopt.perf_model.links import (
    Link,
    SpanningGroup,
    collective_group_link,
    inter_node_link,
    intra_instance_link,
    nvlink,
)

MIB = 2.0**20
H100 = get_gpu("H100")
NVLINK = intra_instance_link(H100, 8)


def test_links_follow_the_scaleup_domain():
    assert NVLINK == Link(kind="nvlink", bandwidth_gb_per_s=450.0, latency_us=1.0, efficiency=0.82,
                          allreduce_efficiency=1.0642222)
    assert intra_instance_link(H100, 16).kind == "network"
    assert inter_node_link(H100).bandwidth_gb_per_s == pytest.approx(50.0)  # 400 Gb/s / 8
    l40s = get_gpu("L40S")
    assert intra_instance_link(l40s, 4).kind == "pcie"
    assert intra_instance_link(l40s, 16).kind == "network"
    assert intra_instance_link(get_gpu("GB200"), 16).kind == "nvlink"


def test_saturation_curve_is_bounded_and_monotone():
    sizes = np.geomspace(1e3, 1e11, 50)
    fractions = coll.bandwidth_saturation_fraction(sizes)
    assert np.all(np.diff(fractions) >= 0)
    assert 0 < fractions[0] and fractions[-1] == pytest.approx(1.0)
    # The scalar path agrees with the array path.
    for size, fraction in zip(sizes[::7], fractions[::7]):
        assert coll.bandwidth_saturation_fraction(float(size)) == pytest.approx(fraction)


def test_allreduce_hand_calculation():
    # 64 MiB over 8 H100 with 10 us engine latency. Saturation at 64 MiB from the H100 table:
    # t_meas = 64 MiB x 1.75 / 362 GB/s = 324.4 us; minus 20 us NCCL latency -> 385.8 GB/s;
    # at 8 GiB: 8 GiB x 1.75 / 478.9 = 31,389 us - 20 -> 479.2 GB/s; fraction 0.8051.
    message = 64 * MIB
    fraction = (message * 1.75 / (message * 1.75 / 362e9 - 20e-6)) / (
        8 * 2**30 * 1.75 / (8 * 2**30 * 1.75 / 478.9e9 - 20e-6))
    assert fraction == pytest.approx(0.8051, abs=1e-3)
    bandwidth = 450e9 * (478.9 / 450) * fraction
    expected_s = 10e-6 + 1e-6 + 1.75 * message / bandwidth  # engine + one NVSwitch hop + ring bytes
    assert coll.allreduce_time_s(message, 8, NVLINK, 10.0) == pytest.approx(expected_s, rel=1e-6)
    assert expected_s == pytest.approx(313.4e-6, rel=0.01)


@pytest.mark.parametrize("message_bytes,busbw_gb_per_s", H100_ALLREDUCE_BUSBW_GB_PER_S)
def test_allreduce_reproduces_measured_h100_nccl(message_bytes, busbw_gb_per_s):
    measured_s = message_bytes * 1.75 / (busbw_gb_per_s * 1e9)
    modelled_s = coll.allreduce_time_s(message_bytes, 8, NVLINK, NCCL_ALLREDUCE_LATENCY_US)
    assert modelled_s == pytest.approx(measured_s, rel=0.05)


def test_decode_allreduce_is_latency_bound():
    # Batch 8 x hidden 4,096 x 2 B = 64 KiB: the fixed latency dominates.
    t = coll.allreduce_time_s(8 * 4096 * 2.0, 8, NVLINK, 10.0)
    assert 11e-6 <= t <= 14e-6
    assert coll.allreduce_time_s(8 * 4096 * 2.0, 1, NVLINK, 10.0) == 0.0


def test_single_network_link_allreduce_costs_ring_hops_and_nic_bandwidth():
    # A plain network Link (a ``link=`` override) is still a flat ring over the NIC.
    nic = inter_node_link(H100)
    message = 512 * MIB
    t = coll.allreduce_time_s(message, 16, nic, 10.0)
    bandwidth = 50e9 * LINK_EFFICIENCY["network"] * coll.bandwidth_saturation_fraction(message)
    assert t == pytest.approx(10e-6 + 30 * 5e-6 + 2 * 15 / 16 * message / bandwidth, rel=1e-6)
    assert t > 5 * coll.allreduce_time_s(message, 8, NVLINK, 10.0)


def test_collective_groups_span_domains_in_rank_order():
    assert collective_group_link(H100, 8) == NVLINK
    tp16 = collective_group_link(H100, 16)
    assert tp16 == SpanningGroup(local=NVLINK, network=inter_node_link(H100), num_domains=2)
    assert collective_group_link(H100, 4, stride_gpus=4) == tp16  # EP4 over moe_tp 4: 16 GPUs, 2 nodes
    assert collective_group_link(H100, 2, stride_gpus=8).num_domains == 2  # one GPU per node
    assert collective_group_link(H100, 64).num_domains == 8
    assert collective_group_link(get_gpu("GB200"), 64) == nvlink(get_gpu("GB200"))
    l40s = collective_group_link(get_gpu("L40S"), 16)  # two PCIe servers; NIC capped at PCIe Gen4
    assert l40s.local.kind == "pcie" and l40s.num_domains == 2
    assert l40s.network.bandwidth_gb_per_s == pytest.approx(32.0)


def test_hierarchical_allreduce_hand_calculation_2x8_h100():
    # 64 MiB over TP16 = 2 HGX nodes x 8 H100, engine latency 10 us. Saturation at 64 MiB: 0.8051.
    # Local stages (reduce-scatter + all-gather over NVLink, ring efficiency 0.82):
    #   2 x 7/8 x 67.11 MB = 117.4 MB / (450 x 0.82 x 0.8051 = 297.1 GB/s) = 395.3 us.
    # Network stage (all-reduce of each GPU's 1/8 shard across 2 nodes, one NIC per GPU):
    #   2 x 1/2 x 67.11 MB / 8 = 8.39 MB / (50 x 0.94 x 0.8051 = 37.84 GB/s) = 221.7 us.
    # Pipelined: the slower stage, 395.3 us. Fixed: NCCL 20 us (> engine 10) + 2 NVLink hops
    # (1 us) + 2 network hops (5 us, one per direction across 2 nodes) = 32 us. Total 427.3 us.
    group = collective_group_link(H100, 16)
    message = 64 * MIB
    assert coll.allreduce_time_s(message, 16, group, 10.0) == pytest.approx(427.3e-6, rel=1e-3)
    # The flat ring it replaces: 10 + 30 x 5 us + 1.875 x 67.11 MB / 37.84 GB/s = 3,486 us.
    assert coll.allreduce_time_s(message, 16, inter_node_link(H100), 10.0) == pytest.approx(3486e-6, rel=1e-3)
    # A decode all-reduce (batch 1 x DeepSeek hidden 7,168 x 2 B) is latency-bound: 32 us plus
    # 14,336 B x 1.75 / (297.1 / 0.8051 x 0.1741 GB/s) = 0.39 us, against 156 us as a flat ring.
    assert coll.allreduce_time_s(7168 * 2.0, 16, group, 3.04) == pytest.approx(32.39e-6, rel=1e-3)


def test_spanning_allreduce_matches_measured_nic_bandwidth():
    # One GPU per node over 2 nodes, 8 GiB: all bytes cross the NIC, busbw = S / t = 47 GB/s,
    # inside NCCL's 46-48 GB/s per NDR NIC [NCCL290].
    pair = SpanningGroup(local=NVLINK, network=inter_node_link(H100), num_domains=2)
    message = 8 * 2.0**30
    assert 46e9 <= message / coll.allreduce_time_s(message, 2, pair, 0.0) <= 48e9
    # 248 nodes x 8 GPUs, 512 MiB: busbw ~350 GB/s typical [NCCL283]. Network-bound:
    # 2 x 247/248 x S/8 / (47 GB/s x 0.9226) plus 102 us of latency -> 337 GB/s.
    cluster = SpanningGroup(local=NVLINK, network=inter_node_link(H100), num_domains=248)
    n, message = 248 * 8, 512 * MIB
    busbw = 2 * (n - 1) / n * message / coll.allreduce_time_s(message, n, cluster, 0.0)
    assert busbw == pytest.approx(337e9, rel=0.01)
    assert busbw == pytest.approx(350e9, rel=0.05)


def test_inter_node_alltoall_hand_calculation():
    # EP16 dispatch over 2 x 8 H100: 64 tokens x 8 experts x 7,168 x 2 B = 7 MiB per GPU.
    # Saturation at 7 MiB: 0.4499. 8/16 of it (3.67 MB) leaves the node through the GPU's NIC:
    # 3.67 MB / (47 GB/s x 0.4499) = 173.6 us; the 7/16 for its own node crosses NVLink at once
    # (3.21 MB / (369 GB/s x 0.4499) = 19.3 us). Fixed: engine 25 us + one network hop 5 us.
    payload = 64 * 8 * 7168 * 2.0
    fraction = coll.bandwidth_saturation_fraction(payload)
    assert fraction == pytest.approx(0.4499, abs=1e-4)
    expected_s = 30e-6 + 0.5 * payload / (47e9 * fraction)
    assert expected_s == pytest.approx(203.6e-6, rel=1e-3)
    assert coll.alltoall_time_s(payload, 16, collective_group_link(H100, 16), 25.0) == pytest.approx(expected_s)


SPANNABLE_GPUS = ["A100-80GB-SXM", "H100", "H200", "B200", "B300", "GB200", "GB300", "MI300X", "MI355X"]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(SPANNABLE_GPUS), st.sampled_from([2, 4, 8, 16, 32, 64]), st.floats(1e2, 1e10),
       st.floats(0.0, 40.0))
def test_a_group_inside_one_domain_costs_no_more_than_spanning_two(gpu_name, num_gpus, message_bytes, latency_us):
    gpu = get_gpu(gpu_name)
    if num_gpus > gpu.scaleup_domain_gpus:
        return
    inside = nvlink(gpu)
    if inside.mesh_peers and num_gpus == 2:
        # On a switchless mesh (xGMI) two GPUs share one 64 GB/s link (~45-48 GB/s usable), no
        # faster than a 400 Gb/s NIC (~47): either can win by a few per cent.
        return
    spanning = SpanningGroup(local=inside, network=collective_group_link(gpu, 2, gpu.scaleup_domain_gpus).network,
                             num_domains=2)
    collectives = [coll.allreduce_time_s, coll.alltoall_time_s]
    if num_gpus <= 8:
        # All-gather only up to an HGX node: split over two NVL72 racks, a 16+ GPU all-gather moves
        # (N-1)/n of its bytes over the NICs instead of NVLink and can legitimately gain up to
        # 1 - (n-2)/(n-1) (<= 7 %) on large messages; the all-reduce's local stages lose NVLS instead.
        collectives.append(coll.allgather_time_s)
    for fn in collectives:
        assert fn(message_bytes, num_gpus, inside, latency_us) <= fn(message_bytes, num_gpus, spanning, latency_us)


def test_alltoall_and_p2p():
    payload = 8 * MIB
    bandwidth = 450e9 * LINK_EFFICIENCY["nvlink"] * coll.bandwidth_saturation_fraction(payload)
    assert coll.alltoall_time_s(payload, 8, NVLINK, 20.0) == pytest.approx(21e-6 + 7 / 8 * payload / bandwidth)
    assert coll.p2p_time_s(payload, NVLINK) == pytest.approx(1e-6 + payload / bandwidth)
    assert coll.ring_pass_time_s(payload, 4, NVLINK, 10.0) == pytest.approx(3 * (11e-6 + payload / bandwidth))


@given(st.floats(1e2, 1e10), st.floats(1.0, 10.0), st.sampled_from([2, 4, 8, 16, 32]))
def test_collective_time_grows_with_message_size(message_bytes, factor, num_gpus):
    for link in (NVLINK, collective_group_link(H100, num_gpus), collective_group_link(get_gpu("L40S"), num_gpus)):
        for fn in (coll.allreduce_time_s, coll.allgather_time_s, coll.alltoall_time_s):
            # Growth, up to the last bit: a factor of 1 + 2**-52 may round the time down by one ulp.
            assert fn(message_bytes * factor, num_gpus, link, 10.0) >= fn(message_bytes, num_gpus, link, 10.0) * (1 - 1e-12)


def test_kv_transfer_seed_example():
    # seeds/002: ~600 MB of KV over 200 Gb/s InfiniBand is about 24 ms. Llama-3.1-70B holds
    # 320 KiB per token in BF16, so 1,831 tokens are 600 MB.
    llama70 = get_model("llama-3.1-70b")
    assert kv_transfer_bytes(llama70, "bf16", 1831) == pytest.approx(600e6, rel=0.001)
    ib_200g = Link(kind="network", bandwidth_gb_per_s=200 / 8, latency_us=5.0)
    assert kv_transfer_time_s(llama70, "bf16", 1831, ib_200g) == pytest.approx(0.024, rel=0.10)
    # FP8 KV halves the bytes and (nearly) the time.
    assert kv_transfer_bytes(llama70, "fp8", 1831) == pytest.approx(300e6, rel=0.001)


def test_kv_transfer_includes_linear_attention_state():
    hybrid = get_model("qwen3.5-397b-a17b")
    state = hybrid.linear_state_bytes_per_sequence
    assert kv_transfer_bytes(hybrid, "bf16", 0) == pytest.approx(state)
    per_token = hybrid.kv_cache_bytes_per_token("bf16")
    assert kv_transfer_bytes(hybrid, "bf16", 1000) == pytest.approx(state + 1000 * per_token)
    assert math.isfinite(kv_transfer_time_s(hybrid, "bf16", 1000, NVLINK))


def test_in_switch_all_reduce_only_on_nvswitch_generations_that_have_it():
    # 8 GB all-reduce over 8 GPUs: 2 x 7/8 x 8 GB on the wire at line rate x efficiency x the
    # saturation of an 8 GB message (1.0 at the top of the measured curve).
    message = 8 * 2.0**30
    wire = 2 * 7 / 8 * message

    def bandwidth_only_s(gpu: str) -> float:
        return coll.allreduce_time_s(message, 8, nvlink(get_gpu(gpu)), 0.0) - 1e-6

    # H100 NVLS: 478.9 of 450 GB/s busbw [AZ-H100]; A100 ring 231.6 of 300 [AZ-A100];
    # MI300X RCCL ring over xGMI 316.8 of 448 [AZ-MI300X]; B200 NVLink5 with NVLS (900 GB/s).
    assert bandwidth_only_s("H100") == pytest.approx(wire / (450e9 * 478.9 / 450), rel=1e-4)
    assert bandwidth_only_s("A100-80GB-SXM") == pytest.approx(wire / (300e9 * 0.772), rel=1e-4)
    assert bandwidth_only_s("MI300X") == pytest.approx(wire / (448e9 * 0.707), rel=1e-4)
    assert bandwidth_only_s("B200") == pytest.approx(wire / (900e9 * 1.0642222), rel=1e-4)


def test_cross_domain_groups_name_the_groups_a_cross_node_layout_spans():
    from layoutopt.perf_model.links import cross_domain_groups
    from layoutopt.plan import Layout

    assert cross_domain_groups(H100, Layout(tp_size=8)) == {}
    tp16 = cross_domain_groups(H100, Layout(tp_size=16))
    assert set(tp16) == {"tp", "moe_tp"} and tp16["tp"].num_domains == 2
    dep32 = cross_domain_groups(H100, Layout(tp_size=1, dp_size=32, ep_size=32))
    assert set(dep32) == {"ep"} and dep32["ep"].num_domains == 4  # attention DP + EP over 4 nodes


def _saturation_by_scan(message_bytes: float) -> float:
    """The scalar saturation curve as a linear scan over the knots (what the bisection replaced)."""
    logs, fracs = coll._LOGS, coll._FRACS
    x = math.log(max(float(message_bytes), 1.0))
    if x <= logs[0]:
        return fracs[0]
    for i in range(1, len(logs)):
        if x <= logs[i]:
            t = (x - logs[i - 1]) / (logs[i] - logs[i - 1])
            return fracs[i - 1] + t * (fracs[i] - fracs[i - 1])
    return fracs[-1]


@settings(max_examples=300, deadline=None)
@given(st.floats(min_value=-10.0, max_value=60.0))
def test_scalar_saturation_fraction_equals_the_knot_scan(log_bytes):
    for message in (math.exp(log_bytes), *(math.exp(v) for v in coll._LOGS)):
        assert coll.bandwidth_saturation_fraction(message) == _saturation_by_scan(message)
