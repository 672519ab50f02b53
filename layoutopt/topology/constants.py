"""Latencies of the cluster graph's hops, with their provenance.

Edge latencies add up along a path: a GPU pair inside one NVLink domain crosses two
GPU-NVSwitch hops, a same-rack pair GPU-NIC-leaf-NIC-GPU, a cross-rack pair adds two leaf-spine
hops. The per-hop values are chosen so those sums equal the perf model's one-hop link latencies
(``perf_model.calibration.LINK_LATENCY_US``: NVLink 1 us, PCIe 2 us, network 5 us).
"""

from __future__ import annotations

from layoutopt.perf_model.calibration import LINK_LATENCY_US
from layoutopt.topology.spec import DEFAULT_LEAF_LATENCY_US

# GPU -> NVSwitch (or xGMI peer): half of a GPU-to-GPU NVLink transfer's latency.
NVSWITCH_HOP_LATENCY_US = LINK_LATENCY_US["nvlink"] / 2
# GPU -> host PCIe root (PCIe-only servers talk through it): half of a GPU-to-GPU PCIe latency.
PCIE_HOP_LATENCY_US = LINK_LATENCY_US["pcie"] / 2
# GPU -> its NIC through the PCIe switch (GPUDirect RDMA): what is left of the 5 us network
# latency once two NIC-leaf hops at the default leaf latency are counted [estimate].
GPU_NIC_HOP_LATENCY_US = max(0.0, (LINK_LATENCY_US["network"] - 2 * DEFAULT_LEAF_LATENCY_US) / 2)

# Graph vertex kinds (the ``kind`` attribute of every vertex of ``Cluster.graph``).
VERTEX_KINDS = ("gpu", "node", "nvswitch", "nic", "rack", "spine")
SPINE_VERTEX = "spine"
