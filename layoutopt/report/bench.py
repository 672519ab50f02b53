"""``bench/bench.sh``: the engine's own serving benchmark through the router, at the plan's rate and lengths.

vLLM: ``vllm bench serve`` (vllm 0.33.0 benchmarks/serve.py: ``--backend`` l.1648, ``--base-url``
l.1655, ``--endpoint`` l.1664, ``--request-rate`` l.1746 with Poisson arrivals at the default
``--burstiness`` 1 (l.1755), ``--save-result`` l.1792, ``--save-detailed`` l.1797 (keeps the
per-request ``ttfts``/``itls``/``output_lens``, l.1329-1337), ``--result-filename`` l.1823,
``--percentile-metrics`` l.1848, ``--metric-percentiles`` l.1859, ``--goodput`` l.1868; the random
dataset's ``--random-input-len``/``--random-output-len``/``--random-range-ratio``
(benchmarks/datasets/datasets.py:1888-1918: lengths uniform in [len (1 - r), len (1 + r)], a JSON
``{"input": r, "output": r}`` on 0.33, datasets.py:2040-2049).

SGLang: ``python -m sglang.benchmark.serving`` on 0.5.23 (``sglang.bench_serving`` is its deprecated
alias, sglang/bench_serving.py:1-21), ``python -m sglang.bench_serving`` on 0.5.3; the random
dataset draws lengths uniform in [len x r, len] (benchmark/datasets/common.py:56-61);
``--output-file`` (JSONL), ``--output-details`` (per-request arrays, serving.py:1947-1962),
``--pd-separated`` for a PD router, ``--goodput`` on 0.5.23 only (serving.py:2495).

The uniform ranges are fitted to the plan's mean and p90 lengths; a fixed length is exact.
"""

from __future__ import annotations

import math

from layoutopt.plan import Plan
from layoutopt.report.deployment import PoolDeployment
from layoutopt.report.engine_flags import EngineRelease, load_bench_flags
from layoutopt.report.launch import InstanceSpec, command_lines
from layoutopt.report.plan_inputs import plan_rate_rps, plan_slo, plan_workload
from layoutopt.report.router import plan_routers

# Enough requests for a stable p99 and for the queues to reach steady state: five minutes of
# traffic, at least 1,000 and at most 50,000 requests.
BENCH_DURATION_S = 300
MIN_PROMPTS = 1000
MAX_PROMPTS = 50_000


def vllm_range(mean: float, p90: float) -> tuple[int, float]:
    """(length, ratio) for vLLM's uniform [len (1 - r), len (1 + r)]: mean = len, p90 = len (1 + 0.8 r)."""
    ratio = min(max((p90 / mean - 1.0) / 0.8, 0.0), 0.99)
    return max(1, round(mean)), round(ratio, 3)


def sglang_range(mean: float, p90: float) -> tuple[int, float]:
    """(length, ratio) for SGLang's uniform [len r, len]: mean = len (1 + r) / 2, p90 = len (0.9 + 0.1 r)."""
    q = p90 / mean
    ratio = 1.0 if q <= 1.0 else min(max((1.8 - q) / (q - 0.2), 0.0), 1.0)
    return max(1, round(2 * mean / (1 + ratio))), round(ratio, 3)


def _targets(plan: Plan) -> list[str]:
    slo = plan_slo(plan)
    if slo is None:
        return []
    # goodput counts a request whose TTFT and TPOT are within the tightest target of each.
    return [f"ttft:{min(slo.ttft_ms.values()):g}", f"tpot:{min(slo.tpot_ms.values()):g}"]


def _percentiles(plan: Plan) -> str:
    slo = plan_slo(plan)
    keys = {50.0, 90.0, 99.0}
    if slo is not None:
        keys |= {slo.percentile_fraction(k) * 100 for k in (*slo.ttft_ms, *slo.tpot_ms)}
    return ",".join(f"{p:g}" for p in sorted(keys))


def bench_argv(plan: Plan, release: EngineRelease, model: str, url: str, rate_rps: float, pd: bool,
               result: str) -> tuple[str, ...]:
    workload = plan_workload(plan)
    mean_in, p90_in = workload.input_tokens.mean_tokens, workload.input_tokens.quantile_tokens(0.9)
    mean_out, p90_out = workload.output_tokens.mean_tokens, workload.output_tokens.quantile_tokens(0.9)
    prompts = int(min(max(rate_rps * BENCH_DURATION_S, MIN_PROMPTS), MAX_PROMPTS))
    goodput = _targets(plan)
    if release.engine == "vllm":
        (in_len, in_r), (out_len, out_r) = vllm_range(mean_in, p90_in), vllm_range(mean_out, p90_out)
        ratio = (f'{{"input":{in_r:g},"output":{out_r:g}}}' if release.at_least("0.33.0") else f"{max(in_r, out_r):g}")
        argv = [*load_bench_flags(release.engine, release.version)[0], "--backend", "openai", "--base-url", url, "--endpoint", "/v1/completions",
                "--model", model, "--dataset-name", "random", "--random-input-len", str(in_len),
                "--random-output-len", str(out_len), "--random-range-ratio", ratio, "--ignore-eos",
                "--request-rate", f"{rate_rps:.4g}", "--num-prompts", str(prompts), "--seed", "0",
                "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", _percentiles(plan),
                "--save-result", "--save-detailed", "--result-filename", result]
        if goodput:
            argv += ["--goodput", *goodput]
        return tuple(argv)
    (in_len, in_r), (out_len, out_r) = sglang_range(mean_in, p90_in), sglang_range(mean_out, p90_out)
    # sglang.benchmark.serving in 0.5.23 (sglang.bench_serving is its deprecated alias), sglang.bench_serving in 0.5.3.
    argv = [*load_bench_flags(release.engine, release.version)[0], "--backend", "sglang", "--base-url", url, "--model", model,
            "--dataset-name", "random", "--random-input-len", str(in_len), "--random-output-len", str(out_len),
            "--random-range-ratio", f"{min(in_r, out_r):g}", "--request-rate", f"{rate_rps:.4g}",
            "--num-prompts", str(prompts), "--seed", "0", "--output-file", result, "--output-details"]
    if pd:
        argv.append("--pd-separated")
    if goodput and release.at_least("0.5.23"):
        argv += ["--goodput", *goodput]
    return tuple(argv)


def bench_script(plan: Plan, instances: list[InstanceSpec], release: EngineRelease,
                 deployments: list[PoolDeployment]) -> str | None:
    workload = plan_workload(plan)
    rate = plan_rate_rps(plan)
    if workload is None or not rate:
        return None
    model = deployments[0].served.hf_id
    routers = plan_routers(plan, instances)
    targets = [(r.name, r.port, r.share_fraction, r.mode == "pd") for r in routers]
    if not targets:
        first = instances[0]
        targets = [(first.instance_id, first.port, 1.0, False)]
    host_default = "localhost"
    lines = [
        "#!/usr/bin/env bash",
        f"# layoutopt benchmark; engine: {release.engine} {release.version}",
        f"# Replays the plan's traffic ({rate:.4g} req/s Poisson, input mean {workload.input_tokens.mean_tokens:.0f} / "
        f"p90 {workload.input_tokens.quantile_tokens(0.9):.0f} tokens, output mean "
        f"{workload.output_tokens.mean_tokens:.0f} / p90 {workload.output_tokens.quantile_tokens(0.9):.0f}) through "
        "the router, then compares with the prediction:",
        "#   layoutopt check-bench plan.json bench/result-<router>.json (.jsonl for SGLang)",
        "# ROUTER_HOST: where the router listens (default localhost; in Kubernetes, port-forward svc/<router>).",
        "set -euo pipefail",
        f'ROUTER_HOST="${{ROUTER_HOST:-{host_default}}}"',
        'cd "$(dirname "$0")"',
    ]
    for name, port, share, pd in targets:
        result = f"result-{name}.json" if release.engine == "vllm" else f"result-{name}.jsonl"
        url = f"http://${{ROUTER_HOST}}:{port}"
        argv = bench_argv(plan, release, model, url, rate * share, pd, result)
        lines.append(f"# {name}: {share:.0%} of the planned traffic")
        lines += command_lines(argv, "")
        if len(targets) > 1:
            # Each front door gets its share at the same time, as in production.
            lines[-1] += " &"
    if len(targets) > 1:
        lines.append("wait")
    return "\n".join(lines) + "\n"


def bench_files(plan: Plan, instances: list[InstanceSpec], release: EngineRelease,
                deployments: list[PoolDeployment]) -> dict[str, str]:
    script = bench_script(plan, instances, release, deployments)
    return {"bench/bench.sh": script} if script else {}
