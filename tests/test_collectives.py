"""Collectives, links and KV transfer: hand-computed times against the formulas and measurements."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
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
from layoutopt.perf_model.links import Link, inter_node_link, intra_instance_link

MIB = 2.0**20
H100 = get_gpu("H100")
NVLINK = intra_instance_link(H100, 8)


def test_links_follow_the_scaleup_domain():
    assert NVLINK == Link(kind="nvlink", bandwidth_gb_per_s=450.0, latency_us=1.0)
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


def test_network_allreduce_costs_ring_hops_and_nic_bandwidth():
    nic = inter_node_link(H100)
    message = 512 * MIB
    t = coll.allreduce_time_s(message, 16, nic, 10.0)
    bandwidth = 50e9 * LINK_EFFICIENCY["network"] * coll.bandwidth_saturation_fraction(message)
    assert t == pytest.approx(10e-6 + 30 * 5e-6 + 2 * 15 / 16 * message / bandwidth, rel=1e-6)
    assert t > 5 * coll.allreduce_time_s(message, 8, NVLINK, 10.0)


def test_alltoall_and_p2p():
    payload = 8 * MIB
    bandwidth = 450e9 * LINK_EFFICIENCY["nvlink"] * coll.bandwidth_saturation_fraction(payload)
    assert coll.alltoall_time_s(payload, 8, NVLINK, 20.0) == pytest.approx(21e-6 + 7 / 8 * payload / bandwidth)
    assert coll.p2p_time_s(payload, NVLINK) == pytest.approx(1e-6 + payload / bandwidth)
    assert coll.ring_pass_time_s(payload, 4, NVLINK, 10.0) == pytest.approx(3 * (11e-6 + payload / bandwidth))


@given(st.floats(1e2, 1e10), st.floats(1.0, 10.0), st.sampled_from([2, 4, 8, 16]))
def test_collective_time_grows_with_message_size(message_bytes, factor, num_gpus):
    for fn in (coll.allreduce_time_s, coll.allgather_time_s, coll.alltoall_time_s):
        assert fn(message_bytes * factor, num_gpus, NVLINK, 10.0) >= fn(message_bytes, num_gpus, NVLINK, 10.0)


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
