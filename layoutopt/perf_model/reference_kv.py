"""The KV cache precision the reference measurements' launches ran.

The B200 rows (and H100's Llama-3.1-70B vLLM rows) of ``reference/measurements`` are InferenceX runs, and
InferenceX's launch scripts chose the KV cache dtype per engine, model family, precision and GPU, some from a
date on. :func:`reference_kv_precision` gives a row's from that table; :mod:`~layoutopt.perf_model.measurements`
reads a CSV's own ``kv_cache_dtype`` column first.
"""

from __future__ import annotations

from typing import NamedTuple


class KvCacheLaunch(NamedTuple):
    """One InferenceX launch script's KV cache: FP8 for rows of ``engine`` on ``gpu`` serving one of
    ``models`` at one of ``precisions`` measured on or after ``since`` (ISO date; "": every version of the script
    from before the reference rows' first date, 2025-10-29, set it), ``source`` the script, line and
    commit that say so."""

    engine: str
    gpu: str
    models: tuple[str, ...]
    precisions: tuple[str, ...]
    since: str
    source: str


_DSR1 = ("deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3")
_IX = "SemiAnalysisAI/InferenceX benchmarks/"
# The KV cache dtype of InferenceX's single-node launch scripts (one script per engine, model family,
# precision and GPU), read in every version of each script up to the reference rows' last date: FP8
# where the script passes --kv-cache-dtype fp8 / fp8_e4m3 (vLLM, SGLang) or kv_cache_config dtype: fp8
# (TensorRT-LLM), else the engine's default ``auto``, the checkpoint's BF16. Scripts never setting it:
# kimik2.5_int4_b200, qwen3.5_bf16_b200, gptoss_fp4_h100, minimaxm2.5_fp8_h100 (through April 2026).
# Rows from other launches (AIConfigurator's own collection, Dynamo disaggregated recipes, whose
# srt-slurm configs are not stored) keep the default; a CSV's ``kv_cache_dtype`` column overrides.
INFERENCEX_KV_CACHE_FP8: tuple[KvCacheLaunch, ...] = (
    KvCacheLaunch("trtllm", "B200", _DSR1, ("fp4", "fp8"), "",
                  _IX + "dsr1_fp4_b200_trt_slurm.sh:24-25 at 8357b21ed (2025-09-15), dsr1_fp8_b200_trt_slurm.sh:31-32 "
                  "at 425f74d51 (2025-09-12); single_node/dsr1_fp4_b200_trt.sh:53-54, dsr1_fp8_b200_trt.sh:61-62 at 626932a11"),
    KvCacheLaunch("trtllm", "B200", ("openai/gpt-oss-120b",), ("fp4",), "",
                  _IX + "gptoss_fp4_b200_trt_slurm.sh:52-53 at ad4f6a4a1 (2025-10-29; none in the versions up to "
                  "28e5a01ea, 2025-09-19), 44-45 at 97f253b51, single_node/gptoss_fp4_b200_trt.sh:43-44 at 626932a11"),
    KvCacheLaunch("trtllm", "B200", ("meta-llama/Llama-3.1-70B",), ("fp4", "fp8"), "",
                  _IX + "70b_fp4_b200_trt_slurm.sh and 70b_fp8_b200_trt_slurm.sh:35-36,45-46 at 9596d23d7 (2025-10-29, "
                  "their last version)"),
    KvCacheLaunch("vllm", "B200", ("meta-llama/Llama-3.1-70B",), ("fp4", "fp8"), "",
                  _IX + "70b_fp4_b200_docker.sh:33, 70b_fp8_b200_docker.sh:27 at 9596d23d7 (2025-10-29)"),
    KvCacheLaunch("vllm", "H100-SXM", ("meta-llama/Llama-3.1-70B",), ("fp8",), "",
                  _IX + "70b_fp8_h100_docker.sh:15, 70b_fp8_h100_slurm.sh:20 at 9596d23d7 (2025-10-29)"),
    KvCacheLaunch("vllm", "B200", ("openai/gpt-oss-120b",), ("fp4",), "2025-12-05",
                  _IX + "gptoss_fp4_b200_docker.sh:32 from 25506e87c (2025-12-05, vLLM v0.11.2; none at d22bf9ca9), "
                  "single_node/gptoss_fp4_b200.sh:33 at d2c2acb19 (v0.15.1)"),
    KvCacheLaunch("vllm", "B200", ("MiniMaxAI/MiniMax-M2.5",), ("fp8",), "2026-04-03",
                  _IX + "single_node/minimaxm2.5_fp8_b200.sh:49 from bddbf4031 (2026-04-03, vLLM v0.19.0; none at "
                  "f342df18e..626932a11, v0.17.0)"),
    KvCacheLaunch("vllm", "B200", ("MiniMaxAI/MiniMax-M2.5",), ("fp4",), "",
                  _IX + "single_node/minimaxm2.5_fp4_b200.sh:48 at 79bd988e9 (2026-04-08, the first version)"),
    KvCacheLaunch("vllm", "B200", ("moonshotai/Kimi-K2.5",), ("fp4",), "2026-04-20",
                  _IX + "single_node/kimik2.5_fp4_b200.sh:45 from 6c3acebfa (2026-04-20; none at a58dedd5a..626932a11)"),
    KvCacheLaunch("sglang", "B200", _DSR1, ("fp4", "fp8"), "",
                  _IX + "dsr1_fp4_b200_slurm.sh:25 at b8857e738 (2025-09-19), dsr1_fp8_b200_slurm.sh:14 at 425f74d51 "
                  "(2025-09-12); single_node/dsr1_fp4_b200.sh:45, dsr1_fp8_b200.sh:78 at 626932a11"),
    KvCacheLaunch("sglang", "B200", ("Qwen/Qwen3.5-397B-A17B",), ("fp8", "fp4"), "",
                  _IX + "single_node/qwen3.5_fp8_b200.sh:51 at efd49e50b (2026-03-03) and qwen3.5_fp4_b200.sh:65 at "
                  "48d35c480 (2026-04-08), each its first version"),
    KvCacheLaunch("sglang", "B200", ("zhipuai/GLM-5",), ("fp8",), "",
                  _IX + "single_node/glm5_fp8_b200.sh:43 at 13930ca61 (2026-03-20, the first version)"),
    KvCacheLaunch("sglang", "B200", ("zhipuai/GLM-5",), ("fp4",), "2026-04-09",
                  _IX + "single_node/glm5_fp4_b200.sh:43 from 475cc1dbc (2026-04-09; none in glm5_nvfp4_b200.sh at "
                  "d43805fc3, 2026-03-28)"),
)
# A ``kv_cache_dtype`` column's values, as the engines spell them.
KV_CACHE_DTYPES: dict[str, str] = {"fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "auto": "bf16",
                                   "bf16": "bf16", "bfloat16": "bf16", "fp16": "bf16", "float16": "bf16"}


def reference_kv_precision(engine: str, mode: str, gpu: str, model_id: str, precision: str, date: str) -> str:
    """The KV cache precision a reference row's launch ran (:data:`INFERENCEX_KV_CACHE_FP8`): "fp8" for an
    aggregated row of a launch script that set it on the row's ``date`` (ISO; a blank date matches only
    rules that held for every version), else "bf16"."""
    if mode != "agg":
        return "bf16"
    for launch in INFERENCEX_KV_CACHE_FP8:
        if (launch.engine == engine and launch.gpu == gpu and model_id in launch.models
                and precision in launch.precisions and (not launch.since or (date and date >= launch.since))):
            return "fp8"
    return "bf16"
