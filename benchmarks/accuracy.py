"""Performance-model accuracy against measured serving latencies (H100 SXM and B200, three engines).

Replays every row of the measurement CSVs through layoutopt's closed-loop estimate on the row's
GPU and prints, per GPU, engine and mode: rows, rows predicted, rows left out with the reasons,
median and mean absolute % error of TTFT and TPOT, share within 20 % and median signed error.
Disaggregated rows whose worker counts the CSV leaves blank cannot be replayed exactly (the
measurements README); they are left out of the figures and counted as such, as are rows that list
a run another row already lists (``measurements.split_repeats``: the same results under another id
or another name of one architecture), so each run weighs once.

    python benchmarks/accuracy.py [CSV ...] [--engine vllm] [--leave-one-gpu-out] [--breakdown] [--residuals]
                                  [--ttft-remainder] [--json] [--ep-exchange alltoall]

``--breakdown`` adds, per GPU, the TTFT and TPOT error by mode, dense/MoE, precision and client
concurrency (every row of the CSVs is a closed-loop run, so there is no open-loop split).
``--ep-exchange KIND`` is a what-if: every attention-DP + EP exchange costed as KIND (``alltoall``:
DeepEP-style, which no emitted launch selects) instead of the engine default, with the error by EP kind.
``--residuals`` adds, per GPU and engine, the Spearman rank correlation of each row's log error
(predicted / measured) with the row's features (concurrency, lengths, parallel degrees, model size,
precision, the predicted latency itself): the residual analysis a new model term starts from (a
term that removes a correlation should move the figures; |rho| >= 0.3 is flagged). With
``--leave-one-gpu-out`` the same table is printed for the carried-over predictions.
``--ttft-remainder`` prints, per GPU, engine and model, the measured TTFT of the least concurrent
rows minus the model's GPU prefill alone: the share of TTFT the per-request overhead must explain.

Without CSVs: ``reference/measurements/h100_sxm.csv`` and ``b200_sxm.csv``.
Targets: TPOT MdAPE <= 10 %, TTFT MdAPE <= 20 %, >= 95 % of replayable rows predicted; leave
one GPU out (each GPU's rows predicted with the profile fitted on the other generation, carried
over by data/generations.yaml): TPOT <= 15 %, TTFT <= 30 %.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from layoutopt.perf_model.fit import error_summary, load_cases, predict_all  # noqa: E402
from layoutopt.perf_model.measurements import split_repeats  # noqa: E402
from ttft_remainder import engine_versions, render_remainders, ttft_remainders  # noqa: E402


def measurements_dir() -> Path:
    """``shared/reference/measurements`` next to the repository (or a worktree of it)."""
    for parent in REPO.parents:
        candidate = parent / "shared" / "reference" / "measurements"
        if candidate.is_dir():
            return candidate
    return REPO.parent / "shared" / "reference" / "measurements"


DEFAULT_CSVS = [measurements_dir() / "h100_sxm.csv", measurements_dir() / "b200_sxm.csv"]
GUESSED = "disagg worker counts not in the CSV"
REPEAT = "a run another row already lists (same results under another id or model name, or rounded coarser)"


def load_all(paths: list[Path], engine: str | None = None):
    """(replayable cases, left-out rows as (gpu, engine, mode, reason))."""
    cases, left = [], []
    for path in paths:
        c, lo = load_cases(path)
        cases += c
        left += [(x.gpu, x.engine, x.mode, x.reason) for x in lo]
    if engine:
        cases = [c for c in cases if c.engine == engine]
        left = [x for x in left if x[1] == engine]
    cases, repeats = split_repeats(cases)
    left += [(c.gpu, c.engine, c.mode, REPEAT) for c in repeats]
    left += [(c.gpu, c.engine, c.mode, GUESSED) for c in cases if c.worker_counts_assumed]
    return [c for c in cases if not c.worker_counts_assumed], left


def evaluate_cases(cases, left, profiles=None) -> dict:
    """Per (gpu, engine, mode) statistics; ``profiles(case)`` picks a profile (default: the case's)."""
    if profiles is None:
        ttft, tpot, reasons = predict_all(cases)
    else:
        ttft, tpot, reasons = np.full(len(cases), np.nan), np.full(len(cases), np.nan), []
        for i, case in enumerate(cases):
            t, p, r = predict_all([case], profiles(case))
            ttft[i], tpot[i] = t[0], p[0]
            reasons += r
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, case in enumerate(cases):
        groups[(case.gpu, case.engine, case.mode)].append(i)
    skipped: dict[tuple, Counter] = defaultdict(Counter)
    for gpu, eng, mode, reason in left:
        skipped[(gpu, eng, mode)][reason] += 1
    for i, reason in enumerate(reasons):
        if reason:
            skipped[(cases[i].gpu, cases[i].engine, cases[i].mode)][reason] += 1
    report = {}
    keys = sorted(set(groups) | set(skipped))
    for gpu in sorted({k[0] for k in keys}):
        keys.append((gpu, "all", "all"))
    for key in keys:
        if key[1] == "all":
            idx = np.array([i for k, v in groups.items() if k[0] == key[0] for i in v], dtype=int)
            skip = sum((v for k, v in skipped.items() if k[0] == key[0]), Counter())
        else:
            idx = np.array(groups.get(key, []), dtype=int)
            skip = skipped.get(key, Counter())
        meas_ttft = np.array([cases[i].ttft_ms for i in idx])
        meas_tpot = np.array([cases[i].tpot_ms for i in idx])
        predicted = int(np.isfinite(ttft[idx]).sum()) if len(idx) else 0
        replayable = len(idx)
        report["/".join(key)] = {
            "rows": len(idx) + sum(1 for x in left if x[0] == key[0] and (key[1] == "all" or x[1:3] == key[1:])),
            "replayable": replayable, "predicted": predicted,
            "supported_pct": 100.0 * predicted / replayable if replayable else float("nan"),
            "left_out": dict(skip),
            "ttft": error_summary(ttft[idx], meas_ttft) if len(idx) else {},
            "tpot": error_summary(tpot[idx], meas_tpot) if len(idx) else {},
        }
    return report


CONCURRENCY_BINS = ((1, 1), (2, 4), (5, 16), (17, 64), (65, 256), (257, 10**9))


def _concurrency_bin(concurrency: float) -> str:
    for low, high in CONCURRENCY_BINS:
        if concurrency <= high:
            return f"N {low}-{high}" if high < 10**9 else f"N >={low}"
    return "N ?"


def _is_moe(model_id: str) -> bool:
    from layoutopt.model_catalog.catalog import get_model

    return get_model(model_id).is_moe


def _ep_kind(layout) -> str:
    """How a layout splits its experts: 'no EP', 'EP in TP' (no attention DP), 'DEP' (attention DP + EP)."""
    if layout is None or layout.ep_size <= 1:
        return "no EP"
    return "DEP" if layout.dp_size > 1 else "EP in TP"


def _expert_parallel(case) -> str:
    """The EP kind of an aggregated row, or 'prefill kind + decode kind' of a disaggregated one."""
    if case.layout is not None:
        return f"{case.engine}/{_ep_kind(case.layout)}"
    return f"{case.engine}/P {_ep_kind(case.prefill_layout)} + D {_ep_kind(case.decode_layout)}"


BREAKDOWNS = {
    "mode": lambda c: c.mode,
    "kind": lambda c: "moe" if _is_moe(c.model_id) else "dense",
    "precision": lambda c: (c.layout or c.decode_layout).weight_precision,
    "concurrency": lambda c: _concurrency_bin(c.concurrency),
    "engine x mode x kind": lambda c: f"{c.engine}/{c.mode}/{'moe' if _is_moe(c.model_id) else 'dense'}",
    "engine x expert parallel": _expert_parallel,
}


def breakdown(cases, ttft: np.ndarray, tpot: np.ndarray) -> dict[str, dict[str, dict]]:
    """{dimension: {"GPU/value": {"rows", "ttft", "tpot"}}}: the error of the predicted rows split
    by each of BREAKDOWNS, per GPU."""
    out: dict[str, dict[str, dict]] = {}
    for name, key in BREAKDOWNS.items():
        groups: dict[str, list[int]] = defaultdict(list)
        for i, case in enumerate(cases):
            groups[f"{case.gpu}/{key(case)}"].append(i)
        out[name] = {}
        for label in sorted(groups, key=_label_order):
            idx = np.array(groups[label], dtype=int)
            meas_ttft = np.array([cases[i].ttft_ms for i in idx])
            meas_tpot = np.array([cases[i].tpot_ms for i in idx])
            out[name][label] = {"rows": len(idx), "ttft": error_summary(ttft[idx], meas_ttft),
                                "tpot": error_summary(tpot[idx], meas_tpot)}
    return out


def _feature_rows(case) -> dict[str, float]:
    """Row features the residuals are correlated with (logs of sizes, so rank order is what counts)."""
    from layoutopt.model_catalog.catalog import get_model
    from layoutopt.model_catalog.spec import BYTES_PER_VALUE

    model = get_model(case.model_id)
    layout = case.layout or case.decode_layout
    prefill = case.layout or case.prefill_layout
    return {
        "concurrency": math.log(max(case.concurrency, 1.0)),
        "isl": math.log(case.isl),
        "osl": math.log(case.osl),
        "tp": math.log(layout.tp_size),
        "ep": math.log(layout.ep_size),
        "attention_dp": math.log(layout.dp_size),
        "gpus": math.log(layout.gpus_per_instance),
        "prefill_gpus": math.log(prefill.gpus_per_instance),
        "active_params": math.log(model.active_params),
        "moe": float(model.is_moe),
        "weight_bytes": BYTES_PER_VALUE[layout.weight_precision],
    }


# The keys of _feature_rows, in table order.
FEATURES = (
    "concurrency", "isl", "osl", "tp", "ep", "attention_dp", "gpus", "prefill_gpus", "active_params", "moe",
    "weight_bytes")
# |Spearman rho| from which a correlation is flagged in the rendered table.
FLAG_RHO = 0.3


def residual_correlations(cases, ttft: np.ndarray, tpot: np.ndarray) -> dict[str, dict]:
    """{"GPU/engine": {"rows": n, "ttft": {feature: rho}, "tpot": {feature: rho}}}: Spearman rank
    correlation of log(predicted / measured) with each row feature (and with the log of the predicted
    latency, ``predicted``: residuals against fitted values; the measured latency would correlate by
    construction, through its own noise) over the predicted rows; NaN where a feature is constant in the
    group."""
    from scipy.stats import spearmanr

    groups: dict[str, list[int]] = defaultdict(list)
    for i, case in enumerate(cases):
        if np.isfinite(ttft[i]) and np.isfinite(tpot[i]) and ttft[i] > 0 and tpot[i] > 0:
            groups[f"{case.gpu}/{case.engine}"].append(i)
    out: dict[str, dict] = {}
    for label in sorted(groups):
        idx = groups[label]
        features = [_feature_rows(cases[i]) for i in idx]
        entry: dict = {"rows": len(idx)}
        for metric, predicted in (("ttft", ttft), ("tpot", tpot)):
            measured = np.array([getattr(cases[i], f"{metric}_ms") for i in idx])
            error = np.log(predicted[idx] / measured)
            columns = {name: np.array([f[name] for f in features]) for name in FEATURES}
            columns["predicted"] = np.log(predicted[idx])
            entry[metric] = {name: _spearman(spearmanr, error, values) for name, values in columns.items()}
        out[label] = entry
    return out


def _spearman(spearmanr, error: np.ndarray, values: np.ndarray) -> float:
    if len(error) < 3 or np.ptp(values) == 0 or np.ptp(error) == 0:
        return float("nan")
    return float(spearmanr(error, values).statistic)


def render_residuals(table: dict[str, dict], title: str) -> str:
    names = (*FEATURES, "predicted")
    short = {"concurrency": "conc", "attention_dp": "adp", "prefill_gpus": "pgpus", "active_params": "active",
             "weight_bytes": "wbytes", "predicted": "pred"}
    lines = [title, f"{'gpu/engine':<18}{'rows':>5} {'':<5}" + "".join(f"{short.get(n, n):>8}" for n in names)]
    for label, entry in table.items():
        for metric in ("ttft", "tpot"):
            cells = []
            for name in names:
                rho = entry[metric][name]
                cells.append(f"{'-':>8}" if not math.isfinite(rho) else
                             f"{rho:>+7.2f}{'*' if abs(rho) >= FLAG_RHO else ' '}")
            head = f"{label:<18}{entry['rows']:>5}" if metric == "ttft" else f"{'':<23}"
            lines.append(f"{head} {metric:<5}" + "".join(cells))
    lines.append(f"(Spearman rho of log(predicted / measured) with each feature; + over-predicted the more, - under-"
                 f"predicted the more the feature grows; * |rho| >= {FLAG_RHO:g}: a missing or mis-scaled term)")
    return "\n".join(lines)


def _label_order(label: str) -> tuple:
    """GPU, then concurrency bins in numeric order, other values alphabetically."""
    gpu, _, value = label.partition("/")
    if value.startswith("N "):
        return gpu, int("".join(ch for ch in value.split("-")[0] if ch.isdigit()) or 0), value
    return gpu, 0, value


def render_breakdown(tables: dict[str, dict[str, dict]]) -> str:
    lines = []
    for name, table in tables.items():
        lines.append(f"-- by {name}")
        lines.append(f"{'gpu/' + name:<28}{'rows':>6}  {'TTFT MdAPE':>10}{'MAPE':>8}{'<=20%':>7}{'signed':>8}"
                     f"  {'TPOT MdAPE':>10}{'MAPE':>8}{'<=20%':>7}{'signed':>8}")
        for label, r in table.items():
            lines.append(f"{label:<28}{r['rows']:>6}  {_cols(r['ttft'])}  {_cols(r['tpot'])}")
    return "\n".join(lines)


def _cols(s: dict) -> str:
    if not s or not s.get("rows"):
        return f"{'-':>10}{'-':>8}{'-':>7}{'-':>8}"
    return f"{s['mdape']:>9.1f}%{s['mape']:>7.0f}%{s['within_20']:>6.0f}%{s['median_signed']:>+7.1f}%"


def render(report: dict, title: str = "") -> str:
    lines = [title] if title else []
    lines.append(f"{'gpu/engine/mode':<24}{'rows':>6}{'repl':>6}{'pred':>6}  {'TTFT MdAPE':>10}{'MAPE':>8}"
                 f"{'<=20%':>7}{'signed':>8}  {'TPOT MdAPE':>10}{'MAPE':>8}{'<=20%':>7}{'signed':>8}")

    cols = _cols
    for key, r in report.items():
        lines.append(f"{key:<24}{r['rows']:>6}{r['replayable']:>6}{r['predicted']:>6}  {cols(r['ttft'])}  "
                     f"{cols(r['tpot'])}")
        for reason, count in sorted(r["left_out"].items(), key=lambda kv: -kv[1]):
            lines.append(f"{'':<26}left out x{count}: {reason}")
    return "\n".join(lines)


def other_generation_profile(case):
    """Leave-one-GPU-out: the engine's profile fitted on the *other* GPU generation (H100 rows get
    the Blackwell profile, B200 rows the Hopper one), carried over by the generation scales. Constants
    that profile took from the case's own generation (``carried_constants``) are reset to their defaults,
    so no constant fitted on the predicted GPU's rows reaches its prediction."""
    from layoutopt.hardware_catalog.catalog import get_gpu
    from layoutopt.perf_model.calibration import get_engine_profile, without_carried

    mine = get_gpu(case.gpu).generation or "hopper"
    return without_carried(get_engine_profile(case.engine, "hopper" if mine != "hopper" else "blackwell"))


def _check(name: str, value: float, limit: float) -> str:
    return f"{name} MdAPE {value:.1f}% (<= {limit:g}%: {'ok' if value <= limit else 'MISSED'})"


def targets(report: dict, tpot: float, ttft: float, supported: float | None) -> str:
    lines = []
    for key, r in report.items():
        if not key.endswith("/all/all") or not r["tpot"]:
            continue
        checks = [_check("TPOT", r["tpot"]["mdape"], tpot),
                  _check("TTFT", r["ttft"]["mdape"], ttft)]
        if supported is not None:
            ok = r["supported_pct"] >= supported
            checks.append(f"supported {r['supported_pct']:.1f}% of replayable (>= {supported:g}%: "
                          f"{'ok' if ok else 'MISSED'})")
        lines.append(f"  {key.split('/')[0]}: " + "; ".join(checks))
    return "\n".join(lines)


def _predictions(cases, profiles) -> tuple[np.ndarray, np.ndarray]:
    """(TTFT, TPOT) of every case under ``profiles(case)``."""
    ttft, tpot = np.full(len(cases), np.nan), np.full(len(cases), np.nan)
    for i, case in enumerate(cases):
        t, p, _ = predict_all([case], profiles(case))
        ttft[i], tpot[i] = t[0], p[0]
    return ttft, tpot


def _logo_predictions(cases) -> tuple[np.ndarray, np.ndarray]:
    return _predictions(cases, other_generation_profile)


def exchange_profile(kind: str):
    """``profiles(case)``: the case's own profile with its EP exchange costed as ``kind`` (a what-if:
    'alltoall' is what DeepEP backends would run)."""
    from layoutopt.hardware_catalog.catalog import get_gpu
    from layoutopt.perf_model.calibration import get_engine_profile

    def profile(case):
        own = get_engine_profile(case.engine, get_gpu(case.gpu).generation or "hopper")
        return own.model_copy(update={"ep_exchange": kind})

    return profile


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", nargs="*", help="measurement CSVs (default: H100 and B200)")
    parser.add_argument("--engine", help="only this engine (vllm, sglang, trtllm)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--breakdown", action="store_true",
                        help="also split the errors by mode, dense/MoE, precision and concurrency")
    parser.add_argument("--residuals", action="store_true",
                        help="also correlate each row's error with its features (Spearman, per GPU and engine)")
    parser.add_argument("--ttft-remainder", action="store_true",
                        help="also print, per model, the measured TTFT at the lowest concurrency minus the model's "
                        "GPU prefill alone: what the per-request overhead has to explain")
    parser.add_argument("--by-engine-version", action="store_true",
                        help="with --ttft-remainder: split its groups by the engine build that measured the rows "
                        "(the CSV's backend_version)")
    parser.add_argument("--leave-one-gpu-out", action="store_true",
                        help="also predict each GPU's rows with the profile fitted on the other generation")
    parser.add_argument("--ep-exchange", choices=("allgather_reducescatter", "dp_gather", "alltoall"),
                        help="what-if: cost every engine's attention-DP + EP exchange as this kind (alltoall: "
                        "DeepEP-style) instead of its launch default, and print the error by EP kind")
    args = parser.parse_args()
    paths = [Path(p) for p in args.csv] or DEFAULT_CSVS
    for path in paths:
        if not path.is_file():
            parser.error(f"measurement CSV not found: {path} (pass its path as an argument)")
    if args.by_engine_version and not args.ttft_remainder:
        parser.error("--by-engine-version splits the --ttft-remainder table; pass --ttft-remainder too")
    cases, left = load_all(paths, args.engine)
    if args.ep_exchange:
        profiles = exchange_profile(args.ep_exchange)
        print(render(evaluate_cases(cases, left, profiles), f"== EP exchange costed as {args.ep_exchange}"))
        split = breakdown(cases, *_predictions(cases, profiles))
        print(render_breakdown({"engine x expert parallel": split["engine x expert parallel"]}))
        return
    report = evaluate_cases(cases, left)
    split = residuals = logo_residuals = None
    if args.breakdown or args.residuals:
        ttft, tpot, _ = predict_all(cases)
        split = breakdown(cases, ttft, tpot) if args.breakdown else None
        residuals = residual_correlations(cases, ttft, tpot) if args.residuals else None
    logo = evaluate_cases(cases, left, other_generation_profile) if args.leave_one_gpu_out else None
    if args.residuals and args.leave_one_gpu_out:
        logo_residuals = residual_correlations(cases, *_logo_predictions(cases))
    if args.json:
        out = {"in_sample": report}
        for key, value in (("leave_one_gpu_out", logo), ("breakdown", split), ("residuals", residuals),
                           ("leave_one_gpu_out_residuals", logo_residuals)):
            if value is not None:
                out[key] = value
        print(json.dumps(out if len(out) > 1 else report, indent=2))
        return
    print(render(report, "== each GPU with its own generation's profile"))
    print("targets:\n" + targets(report, 10.0, 20.0, 95.0))
    if split is not None:
        print()
        print(render_breakdown(split))
    if residuals is not None:
        print()
        print(render_residuals(residuals, "-- residual correlations, each GPU with its own generation's profile"))
    if logo:
        print()
        print(render(logo, "== leave-one-GPU-out: H100 rows with the profile fitted on B200, B200 rows with "
                           "the one fitted on H100"))
        print("targets:\n" + targets(logo, 15.0, 30.0, None))
    if logo_residuals is not None:
        print()
        print(render_residuals(logo_residuals, "-- residual correlations, leave-one-GPU-out"))
    if args.ttft_remainder:
        print()
        versions = engine_versions(paths) if args.by_engine_version else None
        print(render_remainders(ttft_remainders(cases, versions=versions)))


if __name__ == "__main__":
    main()
