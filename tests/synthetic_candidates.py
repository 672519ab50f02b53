"""Hand-made candidates for tests of the solver core (no performance model).

``make_candidate`` builds a ``Candidate`` from the few numbers the solver reads; latency fields
get plausible placeholders so a plan can be rendered from it.
"""

from __future__ import annotations

from layoutopt.optimizer.candidates import Candidate
from layoutopt.plan import Percentiles
from layoutopt.plan import Layout, Role


def make_candidate(role: Role, gpu: str = "H100-SXM", tp_size: int = 1, capacity_rps: float = 1.0,
                   usd_per_gpu_hour: float = 2.0, kv_bytes_per_request: float = 0.0,
                   nic_gb_per_s: float = 50.0, precision: str = "fp8", pp_size: int = 1,
                   dp_size: int = 1, name: str | None = None, bottleneck: str = "") -> Candidate:
    """A candidate with the given capacity and a price of ``usd_per_gpu_hour`` per GPU."""
    layout = Layout(tp_size=tp_size, pp_size=pp_size, dp_size=dp_size, weight_precision=precision,
                    kv_precision="bf16")
    ttft = Percentiles(p50=200.0, p90=400.0, p99=700.0) if role != "decode" else None
    tpot = Percentiles(p50=15.0, p90=20.0, p99=25.0) if role != "prefill" else None
    return Candidate(
        name=name or f"{role}-{gpu}-{layout.short_name()}", role=role, gpu=gpu, layout=layout,
        cost_usd_per_hour=usd_per_gpu_hour * layout.gpus_per_instance, capacity_rps=capacity_rps,
        max_batch_size=64, kv_bytes_per_request=kv_bytes_per_request if role == "prefill" else 0.0,
        nic_gb_per_s=nic_gb_per_s * layout.gpus_per_instance, ttft_ms=ttft, tpot_ms=tpot,
        unloaded_ttft_ms=100.0 if ttft else None, unloaded_tpot_ms=10.0 if tpot else None,
        prefill_tok_per_s=capacity_rps * 1000.0 if role != "decode" else 0.0,
        decode_tok_per_s=capacity_rps * 500.0 if role != "prefill" else 0.0, bottleneck=bottleneck,
    )
