"""Fit per-engine calibration constants on measured latencies and write them back.

For each engine: fit DEFAULT_PARAMETERS (GEMM/HBM/attention efficiency, step and per-layer
overhead, all-reduce latency, per-request overhead, the closed-loop rounds; the MoE constants where
MoE rows exist, the eager launch floor where the profile has one) with
:func:`layoutopt.perf_model.fit.fit_profile` (``scipy.optimize.least_squares``, soft-L1 loss on
the log ratios of TTFT and TPOT) on all rows but one held-out model and report the held-out error;
then fit on every row of the engine and write the result, with provenance and standard errors,
into ``layoutopt/perf_model/data/engine_profiles.yaml``, the one home of the calibration constants.

    python benchmarks/fit_calibration.py [CSV] [--engine trtllm] [--generation blackwell] [--parameters a,b]
                                         [--start a=1,b=2] [--dry-run [--exclude-model DeepSeek]]

``--start`` begins the (local) robust fit from other values than the profile's own;
``--exclude-model TEXT --dry-run`` fits without the rows of models whose id contains TEXT and prints
the constants the remaining rows ask for (a what-if; written profiles are always fitted on every row).
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from accuracy import measurements_dir  # noqa: E402

from layoutopt.perf_model.fit import (  # noqa: E402
    DEFAULT_PARAMETERS,
    FIT_PARAMETERS,
    error_summary,
    fit_cases,
    fit_profile,
    load_cases,
    predict_all,
)

DATA = REPO / "layoutopt" / "perf_model" / "data"


def _scores(cases, engine) -> str:
    ttft, tpot, _ = predict_all(cases, engine)
    t = error_summary(ttft, np.array([c.ttft_ms for c in cases]))
    p = error_summary(tpot, np.array([c.tpot_ms for c in cases]))
    return (f"rows {t['rows']}: TTFT MdAPE {t['mdape']:.1f}% (signed {t['median_signed']:+.1f}%), "
            f"TPOT MdAPE {p['mdape']:.1f}% (signed {p['median_signed']:+.1f}%)")


def _held_out_model(cases) -> str | None:
    """The smallest model with >= 10 rows, when at least two models have that many."""
    counts: dict[str, int] = {}
    for c in cases:
        counts[c.model_id] = counts.get(c.model_id, 0) + 1
    big = sorted((n, m) for m, n in counts.items() if n >= 10)
    return big[0][1] if len(big) >= 2 else None


def _replace_block(text: str, engine: str, values: dict[str, float], source: str) -> str:
    """Rewrite ``engine``'s numeric keys and its source in a profiles YAML, keeping everything else."""
    start = re.search(rf"^{re.escape(engine)}:\s*$", text, re.M)
    if start is None:
        raise SystemExit(f"engine {engine} not found in profiles file")
    nxt = re.search(r"^\S", text[start.end():], re.M)
    end = start.end() + (nxt.start() if nxt else len(text) - start.end())
    block = text[start.end():end]
    for key, value in values.items():
        block = re.sub(rf"^(  {key}:).*$", lambda m: f"{m.group(1)} {value:.4g}", block, flags=re.M)
    old = re.search(r"^  source:(.*\n(?:    .*\n)*)", block, re.M)
    previous = " ".join(old.group(1).replace(">-", " ").split()) if old else ""
    earlier, _, first_principles = previous.rpartition(_BEFORE)
    earlier, first_principles = earlier.strip(), (first_principles if earlier else previous).strip()
    # A fit of some constants keeps the provenance of the earlier fit of the others; the first-principles
    # provenance of the fields no fit moves is kept either way.
    earlier = earlier.split(_EARLIER, 1)[-1].strip()
    refit_all = all(name in values for name in re.findall(r"([a-z_]+) [-0-9.e+]+ \+-", earlier))
    text_source = source + (f" {_EARLIER} {earlier}" if earlier and not refit_all else "")
    text_source += f" {_BEFORE} {first_principles}" if first_principles else ""
    block = re.sub(r"^  source:(?:.*\n)(?:    .*\n)*", lambda _: "  source: >-\n" + _wrap(text_source), block,
                   flags=re.M)
    # One blank line between engines, however often the file is rewritten.
    return re.sub(r"\n{3,}", "\n\n", text[:start.end()] + block + text[end:])


_BEFORE = "Before fitting:"
# Introduces an earlier fit's statement that a fit of fewer constants keeps.
_EARLIER = "The other constants are from an earlier fit:"


def _wrap(text: str, width: int = 96) -> str:
    words, lines, line = text.split(), [], "   "
    for word in words:
        if len(line) + len(word) + 1 > width:
            lines.append(line)
            line = "   "
        line += " " + word
    lines.append(line)
    return "\n".join(lines) + "\n\n"


MOE_PARAMETERS = ("moe_imbalance", "moe_kernel_overhead_us", "alltoall_latency_us", "grouped_gemm_efficiency")


def _ensure_block(text: str, block: str, engine: str) -> str:
    """A profiles YAML with a ``block`` entry: a copy of the engine's Hopper entry when missing."""
    if re.search(rf"^{re.escape(block)}:\s*$", text, re.M):
        return text
    start = re.search(rf"^{re.escape(engine)}:\s*$", text, re.M)
    nxt = re.search(r"^\S", text[start.end():], re.M)
    end = start.end() + (nxt.start() if nxt else len(text) - start.end())
    body = text[start.end():end].rstrip("\n")
    return text.rstrip("\n") + f"\n\n{block}:" + body + "\n"


def _with_keys(text: str, block: str, values: dict[str, float]) -> str:
    """Add keys the block lacks (new profile fields) just above its ``source``."""
    start = re.search(rf"^{re.escape(block)}:\s*$", text, re.M)
    nxt = re.search(r"^\S", text[start.end():], re.M)
    end = start.end() + (nxt.start() if nxt else len(text) - start.end())
    body = text[start.end():end]
    for key, value in values.items():
        if not re.search(rf"^  {key}:", body, re.M):
            body = body.replace("  source:", f"  {key}: {value:.4g}\n  source:", 1)
    return text[:start.end()] + body + text[end:]


def main() -> None:
    from layoutopt.hardware_catalog.catalog import get_gpu
    from layoutopt.perf_model.calibration import get_engine_profile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", nargs="*", help="measurement CSVs (default: H100 and B200); one profile per "
                        "engine and GPU generation in them")
    parser.add_argument("--engine", action="append", help="engines to fit (default: all in the CSV)")
    parser.add_argument("--loss", default="soft_l1", help="least_squares loss (soft_l1, huber, linear, ...)")
    parser.add_argument("--max-nfev", type=int, default=12, help="least_squares iterations (function evaluations)")
    parser.add_argument("--held-out", action="store_true", help="also fit without one model and score it")
    parser.add_argument("--parameters", help="comma-separated constants to fit (default: DEFAULT_PARAMETERS, plus "
                        "the MoE ones where MoE rows exist)")
    parser.add_argument("--generation", help="only rows of this GPU generation")
    parser.add_argument("--start", help="comma-separated key=value starting values (default: the profile's own); "
                        "a robust fit is local, so a start away from a compromise it settled in can find another")
    parser.add_argument("--exclude-model", action="append", default=[], metavar="TEXT",
                        help="leave out rows whose model id contains TEXT (with --dry-run only: a what-if that "
                        "shows which constants the other models' rows ask for; the built-in profiles are fitted "
                        "on every row)")
    parser.add_argument("--dry-run", action="store_true", help="report only; do not write the profiles")
    args = parser.parse_args()
    if args.exclude_model and not args.dry_run:
        parser.error("--exclude-model needs --dry-run (the written profiles are fitted on every row)")
    paths = [Path(p) for p in args.csv] or [measurements_dir() / "h100_sxm.csv", measurements_dir() / "b200_sxm.csv"]
    for path in paths:
        if not path.is_file():
            parser.error(f"measurement CSV not found: {path} (pass its path as an argument)")
    today = datetime.date.today().isoformat()
    for path in paths:
        cases, _ = load_cases(path)
        for generation in sorted({get_gpu(c.gpu).generation or "hopper" for c in cases}):
            if args.generation and generation != args.generation:
                continue
            on_gen = [c for c in cases if (get_gpu(c.gpu).generation or "hopper") == generation]
            for engine in args.engine or sorted({c.engine for c in on_gen}):
                _fit_one(path, generation, engine, [c for c in on_gen if c.engine == engine], args, today,
                         get_engine_profile(engine, generation))


def _start_values(text: str | None) -> dict[str, float]:
    """``--start`` as {key: value}; a malformed entry or a value that is not a number stops with its name."""
    out: dict[str, float] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        try:
            out[key.strip()] = float(value)
        except ValueError:
            raise SystemExit(f"--start: {item.strip()!r} is not key=number") from None
        if not sep:
            raise SystemExit(f"--start: {item.strip()!r} is not key=number")
        if key.strip() not in FIT_PARAMETERS:
            raise SystemExit(f"--start: {key.strip()!r} is not a fitted constant; one of {', '.join(FIT_PARAMETERS)}")
    return out


def _fit_one(path, generation, engine, every, args, today, base) -> None:
    from layoutopt.model_catalog.catalog import get_model
    from layoutopt.perf_model.fit import trial_profile

    block = engine if generation == "hopper" else f"{engine}@{generation}"
    mine = fit_cases([c for c in every if not any(text in c.model_id for text in args.exclude_model)])
    if not mine:
        return
    params = DEFAULT_PARAMETERS
    if any(get_model(c.model_id).is_moe for c in mine):
        params = params + MOE_PARAMETERS
    if base.eager_layer_launch_us:
        # An engine that runs its prompt steps without CUDA graphs (TensorRT-LLM) refits that floor too;
        # for the others it stays 0 (a fit starting at 0 would not see it: the floor is inactive there).
        params = params + ("eager_layer_launch_us",)
        if base.eager_mla_layer_launch_us and any(get_model(c.model_id).attention_kind == "mla" for c in mine):
            # ... and what an MLA layer adds to it, where MLA rows can see it.
            params = params + ("eager_mla_layer_launch_us",)
    if args.parameters:
        params = tuple(p.strip() for p in args.parameters.split(",") if p.strip())
    start = _start_values(args.start)
    profile_start = trial_profile(base, start) if start else base
    print(f"== {block}: {len(every)} rows, {len(mine)} fitted (each measurement once, none with guessed worker "
          f"counts); before: {_scores(mine, base)}", flush=True)
    held, held_scores = (_held_out_model(mine) if args.held_out else None), ""
    if held:
        train = [c for c in mine if c.model_id != held]
        test = [c for c in mine if c.model_id == held]
        trained = fit_profile(train, profile_start, params, loss=args.loss, max_nfev=args.max_nfev)
        held_scores = _scores(test, trained.profile)
        print(f"   held out {held} ({len(test)} rows): held-out {held_scores}", flush=True)
    result = fit_profile(mine, profile_start, params, loss=args.loss, max_nfev=args.max_nfev)
    print(f"   fitted rows: cost {result.cost:.3f} after {result.num_evaluations} evaluations "
          f"({result.message}); {_scores(mine, result.profile)}")
    print("   fitted: " + ", ".join(f"{k}={v:.4g} +- {result.standard_errors[k]:.2g}"
                                   for k, v in result.values.items()), flush=True)
    if args.dry_run:
        return
    provenance = (f"Fitted on {path.name} ({len(mine)} {engine} measurements on {generation}, agg and disagg; "
                  f"repeated runs once, disagg rows without worker counts left out), {today}, by "
                  f"benchmarks/fit_calibration.py: scipy least_squares, {args.loss} loss on the log ratios of "
                  "TTFT and TPOT over all rows of the engine on this GPU generation (one constant set per engine "
                  "and generation; no per-model terms)"
                  + (f", started from {', '.join(f'{k} {v:g}' for k, v in start.items())}" if start else "")
                  + (f"; held-out model {held}: {held_scores}" if held else "") + ". Fitted (+- one "
                  "standard error): " + ", ".join(f"{k} {v:.4g} +- {result.standard_errors[k]:.2g}"
                                                  for k, v in sorted(result.values.items())) + ".")
    file = DATA / "engine_profiles.yaml"
    text = _with_keys(_ensure_block(file.read_text(), block, engine), block, result.values)
    file.write_text(_replace_block(text, block, result.values, provenance))
    print(f"   wrote {', '.join(sorted(result.values))} for {block}", flush=True)


if __name__ == "__main__":
    main()
