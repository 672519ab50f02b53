"""The graph-free routes of placement agree with the networkx graph's paths on every example cluster."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from layoutopt.topology import load_cluster
from layoutopt.topology.placement.routes import route

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "clusters"


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.stem)
def test_routes_match_the_graph(path):
    cluster = load_cluster(path)
    gpus = [g for d in cluster.domains.values() for g in d.gpus]
    rng = random.Random(3)
    pairs = [(rng.choice(gpus), rng.choice(gpus)) for _ in range(300)]
    # Same node, same domain and the neighbours in index order, whatever the sample drew.
    pairs += list(zip(gpus, gpus[1:]))[:200]
    kinds = set()
    for a, b in pairs:
        if a == b:
            continue
        path = cluster.path(a, b)
        found = route(cluster, a, b)
        if not path:
            assert found is None
            continue
        kind, bandwidth, latency_us = found
        kinds.add(kind)
        assert bandwidth == cluster.path_bandwidth_gb_per_s(a, b)
        assert latency_us == pytest.approx(cluster.path_latency_us(a, b), rel=1e-12)
        expected = "nvlink" if path[1].startswith("nvswitch:") else "pcie" if path[1].startswith("node:") else "network"
        assert kind == expected and not math.isinf(bandwidth)
    assert kinds, "no pair with a route was checked"
