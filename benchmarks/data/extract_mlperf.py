"""Regenerate mlperf_results.csv from local git mirrors of MLCommons inference result repositories.

Developer script (not run by tests or the benchmark): reads, per system of the chosen GPUs, the
``performance/run_1/mlperf_log_summary.txt`` of each LLM benchmark and scenario, the system file
``closed/<submitter>/systems/<system>.json`` (accelerator, count, software) and the submission's
measurements JSON (``weight_data_types``), and writes one CSV row per valid result with the
repository and path it came from.

    python benchmarks/data/extract_mlperf.py \\
        ntuhpc/inference_results_v5.1=v5.1=/path/to/mirror.git \\
        gbeezybez/inference_results_v6.0=v6.0=/path/to/mirror.git

Rows already in the CSV from repositories not given here (e.g. v5.0 rows read one by one) are
kept as they are.
"""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

OUT = Path(__file__).with_name("mlperf_results.csv")
COLUMNS = ["round", "submitter", "system", "gpu", "num_gpus", "benchmark", "scenario", "metric_value",
           "metric_unit", "samples_per_s", "ttft_limit_ms", "tpot_limit_ms", "precision", "precision_source",
           "engine", "software", "repository", "path"]
BENCHMARKS = ("llama2-70b-99", "llama2-70b-99.9", "mixtral-8x7b", "llama3.1-405b", "deepseek-r1", "gpt-oss-120b")
SCENARIOS = ("Offline", "Server", "Interactive")
# accelerator_model_name patterns -> catalog GPU; order matters (GB200 before B200, H200 NVL out).
GPU_PATTERNS = [
    (re.compile(r"\bGB300\b"), "GB300"), (re.compile(r"\bGB200\b"), "GB200"),
    (re.compile(r"\bB300\b"), "B300"), (re.compile(r"\bB200\b"), "B200"),
    (re.compile(r"H200.*NVL|H100.*NVL|H100.*PCIe", re.I), None),
    (re.compile(r"\bH200\b"), "H200-SXM"), (re.compile(r"\bH100\b"), "H100-SXM"),
    (re.compile(r"MI355X", re.I), "MI355X"), (re.compile(r"MI325X", re.I), "MI325X"),
    (re.compile(r"MI300X", re.I), "MI300X"),
]
MAX_GPUS = 72  # one NVL72 rack at most: larger multi-rack systems are left out


def _git(gitdir: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", gitdir, *args], check=True, capture_output=True, text=True).stdout


def _gpu_of(name: str) -> str | None:
    """The one catalog GPU a system's accelerator name names; None for others and mixed systems.

    Mixed systems ("AMD Instinct MI300X ... (x32), AMD Instinct MI325X ... (x16)") are left out:
    one prediction per row assumes one GPU type.
    """
    found = set()
    for pattern, gpu in GPU_PATTERNS:
        if pattern.search(name):
            if gpu is None and not found:
                return None  # an NVL/PCIe card the catalog does not hold
            found.add(gpu)
            name = pattern.sub(" ", name)
    found.discard(None)
    return found.pop() if len(found) == 1 else None


def _engine(system: dict) -> str:
    text = " ".join(str(system.get(k, "")) for k in ("framework", "other_software_stack", "sw_notes")).lower()
    # A system file may list several stacks (NVIDIA's v6.0 files name vLLM for a multimodal
    # benchmark next to TensorRT-LLM): TensorRT-LLM named explicitly wins, then SGLang, vLLM, and a
    # bare TensorRT (NVIDIA's LLM harness builds TensorRT-LLM engines: closed/NVIDIA/configs/*/llama2-70b.py).
    for needle, engine in (("tensorrt-llm", "TensorRT-LLM"), ("sglang", "SGLang"), ("vllm", "vLLM"),
                           ("tensorrt", "TensorRT-LLM")):
        if needle in text:
            return engine
    return "unknown"


_FLOAT = r"[\d.]+(?:[eE][+-]?\d+)?"  # loadgen prints large rates as 1.12685e+06


def _number(pattern: str, text: str) -> float | None:
    match = re.search(pattern, text)
    return float(match.group(1)) if match else None


def _summary(text: str, scenario: str) -> dict | None:
    if "Result is : VALID" not in text:
        return None
    if scenario == "Offline":
        tokens, samples = _number(rf"Tokens per second:\s*({_FLOAT})", text), _number(rf"Samples per second:\s*({_FLOAT})", text)
    else:
        tokens = _number(rf"Completed tokens per second:\s*({_FLOAT})", text)
        samples = _number(rf"Completed samples per second\s*:\s*({_FLOAT})", text)
    if tokens is None:
        return None
    ttft, tpot = _number(r"ttft_latency \(ns\):\s*(\d+)", text), _number(r"tpot_latency \(ns\):\s*(\d+)", text)
    return {"metric_value": tokens, "samples_per_s": samples,
            "ttft_limit_ms": ttft / 1e6 if ttft else "", "tpot_limit_ms": tpot / 1e6 if tpot else ""}


def _precision(gitdir: str, files: set[str], submitter: str, system: str, bench: str, scenario: str) -> tuple[str, str]:
    folder = f"closed/{submitter}/measurements/{system}/{bench}/{scenario}/"
    candidates = [f"closed/{submitter}/results/{system}/{bench}/{scenario}/measurements.json"] + sorted(
        f for f in files if f.startswith(folder) and f.endswith(".json") and "/" not in f[len(folder):])
    for path in candidates:
        if path in files:
            try:
                return json.loads(_git(gitdir, "show", f"HEAD:{path}")).get("weight_data_types", "unknown"), path
            except (json.JSONDecodeError, subprocess.CalledProcessError):
                continue
    return "unknown", ""


def rows_of(repo: str, round_name: str, gitdir: str) -> list[dict]:
    files = set(_git(gitdir, "ls-tree", "-r", "--name-only", "HEAD").splitlines())
    pattern = re.compile(r"^closed/([^/]+)/results/([^/]+)/([^/]+)/([^/]+)/performance/run_1/mlperf_log_summary\.txt$")
    rows = []
    for path in sorted(files):
        match = pattern.match(path)
        if not match:
            continue
        submitter, system, bench, scenario = match.groups()
        if bench not in BENCHMARKS or scenario not in SCENARIOS:
            continue
        system_path = f"closed/{submitter}/systems/{system}.json"
        if system_path not in files:
            continue
        spec = json.loads(_git(gitdir, "show", f"HEAD:{system_path}"))
        gpu = _gpu_of(str(spec.get("accelerator_model_name", "")))
        if gpu is None:
            continue
        num_gpus = int(spec.get("accelerators_per_node") or 0) * int(spec.get("number_of_nodes") or 1)
        if not 0 < num_gpus <= MAX_GPUS:
            continue
        summary = _summary(_git(gitdir, "show", f"HEAD:{path}"), scenario)
        if summary is None:
            continue
        precision, precision_path = _precision(gitdir, files, submitter, system, bench, scenario)
        rows.append({"round": round_name, "submitter": submitter, "system": system, "gpu": gpu,
                     "num_gpus": num_gpus, "benchmark": bench, "scenario": scenario,
                     "metric_unit": "output tokens/s", "precision": precision, "precision_source": precision_path,
                     "engine": _engine(spec),
                     "software": " | ".join(str(spec.get(k, "")) for k in ("framework", "other_software_stack")
                                            if spec.get(k)),
                     "repository": repo, "path": path, **summary})
    return rows


def main(argv: list[str]) -> None:
    given = [arg.split("=", 2) for arg in argv]
    repos = {repo for repo, _, _ in given}
    kept = []
    if OUT.exists():
        with OUT.open(newline="") as handle:
            kept = [row for row in csv.DictReader(handle) if row["repository"] not in repos]
    rows = kept + [row for repo, round_name, gitdir in given for row in rows_of(repo, round_name, gitdir)]
    rows.sort(key=lambda r: (r["round"], r["gpu"], r["benchmark"], r["scenario"], r["submitter"], r["system"]))
    with OUT.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    print(f"{len(rows)} rows -> {OUT}")


if __name__ == "__main__":
    main(sys.argv[1:])
