"""How the reference measurements were driven: the request lengths their client sent, and how often
SGLang's scheduler took new requests.

A row's ``isl`` and ``osl`` are what the run asked for, not what every request had. InferenceX's
single-node runs (the aggregated B200 rows, and H100's dated vLLM rows) draw each request's input and
output length uniformly from ``int(L * r)`` to ``L``: its client's ``sample_uniform``
(SemiAnalysisAI/InferenceX ``utils/bench_serving/benchmark_serving.py:112-116`` at 1cb92d21d, ported at
d053ae24e, 2026-01-21, from kimbochen/bench_serving, which the 2025 scripts cloned) with
``--random-range-ratio $RANDOM_RANGE_RATIO``, 0.8 in every sweep (``.github/workflows/full-sweep-tmpl.yml``
at ac1998a50, 2025-10-25; ``benchmark-tmpl.yml:53-56``'s default from 17d5e204f, 2025-11-03, on). So a 1k/1k row's requests
average 922 tokens in and out, not 1,024, and they finish at different steps. The other rows
(AIConfigurator's own collection, Dynamo's disaggregated recipes, whose client settings are not stored)
keep fixed lengths; a CSV's ``random_range_ratio`` column overrides.

InferenceX's SGLang B200 launches of DeepSeek-R1/V3 and Qwen3.5-397B pass ``--scheduler-recv-interval``
(:data:`INFERENCEX_SGLANG_RECV_INTERVAL`): the scheduler then takes new requests every 10 decode
iterations, 30 from 16 clients on (:func:`~layoutopt.perf_model.closed_loop.recv_wait_s`). A CSV's
``scheduler_recv_interval`` column overrides.
"""

from __future__ import annotations

import numpy as np

from typing import NamedTuple

from layoutopt.workloads.distributions import FixedLength, HistogramLength

# --random-range-ratio of InferenceX's sweeps (module doc).
INFERENCEX_RANGE_RATIO = 0.8
# Engine images of Dynamo's recipes and AIConfigurator's own collection (its "image" is a results file).
_NOT_INFERENCEX_IMAGE_MARKS = ("ai-dynamo", ".csv")
# Points of the uniform length distribution the replay passes to the model (evenly spaced: the draw's mean).
_LENGTH_POINTS = 41


def reference_range_ratio(row: dict) -> float:
    """The client's random range ratio of a reference row (1.0: every request at the row's lengths).

    InferenceX single-node runs: aggregated rows with a measured date and a container image that is not a
    Dynamo runtime or an AIConfigurator results file, and the ``*_gap_analysis_*`` listings of such runs.
    """
    if row.get("mode") != "agg":
        return 1.0
    image = (row.get("engine_image") or "").strip()
    if any(mark in image for mark in _NOT_INFERENCEX_IMAGE_MARKS):
        return 1.0
    if (row.get("measured_date") or "").strip() or "gap_analysis" in row.get("id", ""):
        return INFERENCEX_RANGE_RATIO
    return 1.0


def request_lengths(tokens: int, range_ratio: float) -> FixedLength | HistogramLength:
    """Lengths uniform on ``int(tokens * range_ratio)`` .. ``tokens`` (the client's draw), fixed at 1.0."""
    low = int(tokens * range_ratio)
    if range_ratio >= 1.0 or low >= tokens:
        return FixedLength(tokens=tokens)
    points = np.unique(np.linspace(max(low, 1), tokens, _LENGTH_POINTS).round().astype(int))
    return HistogramLength(tokens=tuple(int(t) for t in points), weights=(1.0,) * len(points))


class RecvIntervalLaunch(NamedTuple):
    """One InferenceX SGLang launch script's ``--scheduler-recv-interval``: ``high`` for CONC >= 16, ``low``
    below, for aggregated rows of ``models`` at one of ``precisions`` on ``gpu`` measured on or after
    ``since`` (ISO date; "": every version before the reference rows' first date, 2025-10-29); at TP
    ``fixed_tp`` from ``fixed_since`` on, ``low`` whatever the concurrency. ``source``: script, lines, commit."""

    gpu: str
    models: tuple[str, ...]
    precisions: tuple[str, ...]
    since: str
    low: int
    high: int
    source: str
    fixed_tp: int = 0
    fixed_since: str = ""


_DSR1 = ("deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3")
_QWEN35 = ("Qwen/Qwen3.5-397B-A17B",)
_IX = "SemiAnalysisAI/InferenceX benchmarks/"
# SCHEDULER_RECV_INTERVAL=30 if CONC >= 16 else 10, passed as --scheduler-recv-interval, in every version of
# these scripts from the one named on (read through 2026-04-25). Other SGLang scripts (GLM-5 FP8, the
# H100 ones) and AIConfigurator's own SGLang runs poll every iteration.
INFERENCEX_SGLANG_RECV_INTERVAL: tuple[RecvIntervalLaunch, ...] = (
    RecvIntervalLaunch("B200", _DSR1, ("fp4",), "", 10, 30,
                       _IX + "dsr1_fp4_b200_docker.sh:9-14,24 at 4b860b78e (2025-10-01) and d8fe8f73e; dsr1_fp4_b200.sh:31-35 "
                       "at b0c4ed21b; single_node/dsr1_fp4_b200.sh:26-31,42 at 1cb92d21d"),
    RecvIntervalLaunch("B200", _DSR1, ("fp8",), "", 10, 30,
                       _IX + "dsr1_fp8_b200_docker.sh:21-26,36 from 6be2c6997 (2025-09-23); from 1d29967c4 (2026-01-13) "
                       "30/10 at TP 8 and 10 at TP 4 (:28-59; single_node/dsr1_fp8_b200.sh:28-59 at 1cb92d21d)",
                       fixed_tp=4, fixed_since="2026-01-13"),
    RecvIntervalLaunch("B200", _QWEN35, ("bf16",), "2026-02-19", 10, 30,
                       _IX + "single_node/qwen3.5_bf16_b200.sh:31-36,57 from 9dc87a68c (2026-02-19; none in "
                       "qwen3.5_bf16_b200.sh at 521d19951, 2026-02-16)"),
    RecvIntervalLaunch("B200", _QWEN35, ("fp8",), "", 10, 30,
                       _IX + "single_node/qwen3.5_fp8_b200.sh:31-36,57 at efd49e50b (2026-03-03, its first version), "
                       ":70 at 626932a11"),
    RecvIntervalLaunch("B200", _QWEN35, ("fp4",), "", 10, 30,
                       _IX + "single_node/qwen3.5_fp4_b200.sh:32-35,71 at 48d35c480 (2026-04-08, its first version)"),
)


def reference_recv_interval(engine: str, mode: str, gpu: str, model_id: str, precision: str, date: str,
                            tp: int, concurrency: float) -> int:
    """``--scheduler-recv-interval`` of a reference row's launch (:data:`INFERENCEX_SGLANG_RECV_INTERVAL`),
    1 for rows of other launches. A blank ``date`` matches only entries whose ``since`` is blank."""
    if engine != "sglang" or mode != "agg":
        return 1
    for launch in INFERENCEX_SGLANG_RECV_INTERVAL:
        if (launch.gpu != gpu or model_id not in launch.models or precision not in launch.precisions
                or (launch.since and (not date or date < launch.since))):
            continue
        if launch.fixed_tp and tp == launch.fixed_tp and date and date >= launch.fixed_since:
            return launch.low
        return launch.high if concurrency >= 16 else launch.low
    return 1
