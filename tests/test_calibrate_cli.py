"""``layoutopt calibrate`` end to end, and a profile file used by estimate, solve and the service."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from layoutopt.calibrate.profile_file import load_profile, write_profile
from layoutopt.cli import cli
from layoutopt.cli.common import run_guarded

FIXTURES = Path(__file__).parent / "fixtures" / "calibrate"
CSV = str(FIXTURES / "h100_vllm_qwen3_32b_tp4.csv")
ESTIMATE = ["estimate", "--model", "qwen3-32b", "--gpu", "H100", "--tp", "4", "--isl", "1024", "--osl", "128",
            "--concurrency", "16", "--format", "json"]


def _run(args, capsys) -> tuple[int, str]:
    old = sys.argv
    sys.argv = ["layoutopt", *args]
    try:
        code = run_guarded(cli)
    finally:
        sys.argv = old
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.fixture(scope="module")
def profile_path(tmp_path_factory) -> Path:
    """One fit shared by the tests: memory efficiency and step overhead on 10 H100 rows, 2 folds."""
    path = tmp_path_factory.mktemp("calibrate") / "h100-vllm.yaml"
    sys.argv = ["layoutopt", "calibrate", CSV, "--engine", "vllm", "--gpu", "H100", "--parameters",
                "memory_efficiency,step_overhead_ms", "--folds", "2", "--output", str(path)]
    try:
        assert run_guarded(cli) == 0
    finally:
        sys.argv = sys.argv[:1]
    return path


def test_calibrate_writes_a_profile_with_errors_bands_and_rows(profile_path):
    profile = load_profile(profile_path)
    assert (profile.engine, profile.gpu_generation, profile.gpus) == ("vllm", "hopper", ["H100-SXM"])
    assert [c.name for c in profile.fitted] == ["memory_efficiency", "step_overhead_ms"]
    assert all(c.std_err is None or c.std_err >= 0 for c in profile.fitted)
    assert profile.provenance.num_rows == len(profile.rows) == 10
    assert profile.errors.folds == 2 and profile.errors.kfold is not None
    assert profile.errors.after.tpot.rows == 10
    # least squares never ends above where it started: the robust (soft_l1, f_scale 0.1) cost of the
    # log residuals is lower after the fit than under the base profile
    def cost(when: str) -> float:
        r = np.log([[getattr(row, f"{when}_{m}_ms") / getattr(row, f"measured_{m}_ms") for m in ("ttft", "tpot")]
                    for row in profile.rows]) / 0.1
        return float(np.sum(2 * (np.sqrt(1 + r**2) - 1)))

    assert cost("after") <= cost("before")
    (band,) = profile.bands
    assert (band.mode, band.num_rows) == ("colocated", 10) and band.tpot.ratio_p10 <= band.tpot.ratio_p90
    assert all(r.kfold_tpot_ms is not None and r.after_tpot_ms is not None for r in profile.rows)
    assert profile.engine_profile().memory_efficiency == pytest.approx(profile.fitted[0].value)


def test_calibrate_prints_before_after_and_kfold(profile_path, tmp_path, capsys):
    code, output = _run(["calibrate", CSV, "--engine", "vllm", "--gpu", "H100", "--parameters", "memory_efficiency",
                         "--folds", "2", "--output", str(tmp_path / "p.yaml")], capsys)
    assert code == 0, output
    for text in ("before (base profile)", "after (in-sample)", "2-fold held out", "MdAPE", "within 20 %",
                 "memory_efficiency", "error band: vllm hopper colocated"):
        assert text in output


def test_profile_round_trip(profile_path, tmp_path):
    profile = load_profile(profile_path)
    again = load_profile(write_profile(profile, tmp_path / "copy.yaml"))
    assert again == profile
    assert (tmp_path / "copy.yaml").read_text() == profile_path.read_text()


@pytest.mark.parametrize("args,expected", [
    # one run, four constants (the default): 8 rows needed, and what to do about it
    ([str(FIXTURES / "vllm_bench_c16.json")], ["1 usable rows", "needs at least 8 rows",
                                               "at least 2 measured runs per fitted constant", "add 7 more runs"]),
    ([str(FIXTURES / "vllm_bench_c16.json"), str(FIXTURES / "vllm_bench_appended.json")],
     ["3 usable rows", "needs at least 8 rows", "--parameters memory_efficiency"]),
    ([CSV, "--parameters", "gemm_efficency"], ["--parameters", "gemm_efficency", "gemm_efficiency"]),
    ([CSV, "--gpu", "B200"], ["0 usable rows", "needs at least 8 rows"]),
])
def test_calibrate_refuses_too_few_rows_or_bad_parameters(args, expected, tmp_path, capsys):
    gpu = [] if "--gpu" in args else ["--gpu", "H100"]
    code, output = _run(["calibrate", *args, "--engine", "vllm", *gpu, "--output", str(tmp_path / "p.yaml")], capsys)
    assert code == 2, output
    assert output.count("\n") == 1 and "Traceback" not in output
    for text in expected:
        assert text in output, output
    assert not (tmp_path / "p.yaml").exists()


def _profile_with(profile_path: Path, tmp_path: Path, **constants) -> Path:
    raw = yaml.safe_load(profile_path.read_text())
    raw["constants"].update(constants)
    raw["fitted"] = [f for f in raw["fitted"] if f["name"] not in constants]
    out = tmp_path / "changed.yaml"
    out.write_text(yaml.safe_dump(raw, sort_keys=False))
    return out


def test_calibrate_starts_from_a_base_profile(profile_path, tmp_path, capsys):
    """--base: the fit starts from that file's constants, and constants it does not fit keep them."""
    base = _profile_with(profile_path, tmp_path, layer_overhead_us=55.0, memory_efficiency=0.6)
    out = tmp_path / "refined.yaml"
    code, output = _run(["calibrate", CSV, "--engine", "vllm", "--gpu", "H100", "--parameters", "step_overhead_ms",
                         "--folds", "0", "--base", str(base), "--output", str(out)], capsys)
    assert code == 0, output
    refined = load_profile(out)
    assert refined.constants["layer_overhead_us"] == 55.0 and refined.constants["memory_efficiency"] == 0.6
    assert refined.fitted[0].before == load_profile(base).constants["step_overhead_ms"]
    assert refined.provenance.base_profile.startswith("vllm: profile file")


def test_calibrate_refuses_a_base_profile_of_another_engine(profile_path, tmp_path, capsys):
    raw = yaml.safe_load(profile_path.read_text())
    raw["engine"] = "sglang"
    for band in raw["bands"]:
        band["engine"] = "sglang"
    other = tmp_path / "sglang.yaml"
    other.write_text(yaml.safe_dump(raw, sort_keys=False))
    out = tmp_path / "p.yaml"
    code, output = _run(["calibrate", CSV, "--engine", "vllm", "--gpu", "H100", "--base", str(other),
                         "--output", str(out)], capsys)
    assert code != 0 and "--base" in output and "sglang" in output and "Traceback" not in output, output
    assert not out.exists()


def test_profile_changes_the_estimate_in_the_expected_direction(profile_path, tmp_path, capsys):
    code, output = _run(ESTIMATE, capsys)
    assert code == 0, output
    builtin = json.loads(output)
    slow = _profile_with(profile_path, tmp_path, memory_efficiency=0.5)
    code, output = _run(ESTIMATE + ["--profile", str(slow)], capsys)
    assert code == 0, output
    with_profile = json.loads(output)
    # half the HBM efficiency: decode steps read the weights and KV slower
    assert with_profile["tpot_ms"]["mean"] > 1.2 * builtin["tpot_ms"]["mean"]
    assert builtin["error_band"]["basis"].startswith("built-in vllm profile")
    assert with_profile["error_band"]["basis"].startswith("2-fold held-out")


def test_estimate_shows_the_band_and_refuses_another_generation(profile_path, capsys):
    code, output = _run([a for a in ESTIMATE if a not in ("--format", "json")], capsys)
    assert code == 0 and "expected error: vllm hopper colocated" in output
    code, output = _run(ESTIMATE[:4] + ["B200"] + ESTIMATE[5:] + ["--profile", str(profile_path)], capsys)
    assert code == 2 and "B200 is blackwell" in output
    code, output = _run(ESTIMATE + ["--engine", "sglang", "--profile", str(profile_path)], capsys)
    assert code == 2 and "--engine: got 'sglang'" in output


@pytest.mark.parametrize("change,expected", [
    ({"constants": {"memory_efficiency": 1.7}}, "constants.memory_efficiency"),
    ({"engine": "tgi"}, "engine: got 'tgi'"),
    ({"schema_version": 7}, "schema_version: got 7"),
    ({"surprise": 1}, "surprise"),
])
def test_bad_profile_gets_one_clear_error(change, expected, profile_path, tmp_path, capsys):
    raw = yaml.safe_load(profile_path.read_text())
    for key, value in change.items():
        if isinstance(value, dict):
            raw[key].update(value)
        else:
            raw[key] = value
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(raw))
    code, output = _run(ESTIMATE + ["--profile", str(bad)], capsys)
    assert code == 2 and "Traceback" not in output
    assert expected in output and str(bad) in output, output


def test_plan_json_carries_error_bands(profile_path, capsys):
    solve = ["solve", "--model", "qwen3-8b", "--budget", "8xH100", "--rate", "2", "--objective", "min-cost",
             "--time-limit", "5", "--format", "json"]
    code, output = _run(solve, capsys)
    assert code == 0, output
    plan = json.loads(output)
    assert plan["error_bands"] and {b["gpu_generation"] for b in plan["error_bands"]} == {"hopper"}
    assert all(b["engine"] == "vllm" and b["basis"].startswith("built-in") for b in plan["error_bands"])
    code, output = _run(solve + ["--profile", str(profile_path)], capsys)
    assert code == 0, output
    bands = json.loads(output)["error_bands"]
    colocated = [b for b in bands if b["mode"] == "colocated"]
    assert not colocated or colocated[0]["basis"].startswith("2-fold held-out")
    code, output = _run(solve[:4] + ["8xB200"] + solve[5:] + ["--profile", str(profile_path)], capsys)
    assert code == 2 and "B200 is blackwell" in output


def test_python_api_takes_a_profile(profile_path):
    from layoutopt import api
    from layoutopt.plan import Layout

    kwargs = dict(isl=1024, osl=128, layout=Layout(tp_size=4), concurrency=16)
    builtin = api.estimate("qwen3-32b", "H100", **kwargs)
    tuned = api.estimate("qwen3-32b", "H100", profile=api.load_profile(profile_path), **kwargs)
    assert builtin.error_band.basis.startswith("built-in") and tuned.error_band.basis.startswith("2-fold")
    assert tuned.error_band.num_rows == 10


def test_verify_with_a_profile_is_refused(profile_path, capsys):
    code, output = _run(["solve", "--model", "qwen3-8b", "--budget", "8xH100", "--verify", "--profile",
                         str(profile_path)], capsys)
    assert code == 2 and "--verify or --profile, not both" in output


def test_a_gpu_of_no_known_generation_gets_an_unknown_band():
    from layoutopt.calibrate.apply import error_band

    band = error_band("vllm==0.33.0", "MyGPU-9000", "colocated")
    assert (band.engine, band.gpu_generation, band.num_rows, band.ttft) == ("vllm", "unknown", 0, None)
    assert "error unknown" in band.shown()



def test_a_generation_without_reference_rows_gets_the_carried_band():
    """MI300X (CDNA3) has no reference rows: its band is the leave-one-GPU-out one, wider than the
    in-sample band of the GPUs the profiles were fitted on, not Hopper's band passed off as its own."""
    from layoutopt.calibrate.apply import error_band

    carried, hopper = error_band("vllm", "MI300X", "colocated"), error_band("vllm", "H100-SXM", "colocated")
    assert (carried.gpu_generation, hopper.gpu_generation) == ("cdna3", "hopper")
    assert carried.num_rows > hopper.num_rows > 0
    assert "leave-one-GPU-out" in carried.basis and "cdna3 colocated has no reference rows" in carried.basis
    assert carried.ttft.mdape_pct > hopper.ttft.mdape_pct and carried.tpot.mdape_pct > hopper.tpot.mdape_pct
    assert "leave-one-GPU-out" not in hopper.basis


def test_too_few_rows_of_a_generation_fall_back_to_the_carried_band_and_none_stays_unknown():
    from layoutopt.calibrate.apply import error_band
    from layoutopt.calibrate.bands import CARRIED, builtin_bands

    stored = {(b.engine, b.gpu_generation, b.mode): b for b in builtin_bands()}
    assert stored["sglang", "hopper", "disaggregated"].ttft is None  # 4 rows: no spread of its own
    band = error_band("sglang", "H100-SXM", "disaggregated")
    assert band.ttft == stored["sglang", CARRIED, "disaggregated"].ttft and band.gpu_generation == "hopper"
    assert "has 4 reference rows, too few for a band" in band.basis
    # vLLM has no disaggregated B200 rows and too few carried ones (H100's 3): the error stays unknown
    unknown = error_band("vllm", "B200", "disaggregated")
    assert unknown.ttft is None and "error unknown" in unknown.shown()

def test_solve_plans_with_the_profile(profile_path, tmp_path):
    from layoutopt import api

    slow = _profile_with(profile_path, tmp_path, memory_efficiency=0.4, step_overhead_ms=6.0)
    args = dict(model="qwen3-8b", budget="8xH100", objective="max-goodput", time_limit_s=5)
    builtin, tuned = api.solve(**args), api.solve(**args, profile=slow)
    assert builtin.pools and tuned.pools
    # a slower engine serves less on the same GPUs
    assert tuned.totals.goodput_rps < 0.9 * builtin.totals.goodput_rps
    assert tuned.engine == builtin.engine
    # the plan records the EP exchange its numbers cost, so emit runs that one (test_report_ep_exchange)
    assert builtin.ep_exchange == tuned.ep_exchange == "allgather_reducescatter"


def test_a_profile_costing_the_all_to_all_is_recorded_in_the_plan(profile_path, tmp_path):
    from layoutopt import api

    deepep = _profile_with(profile_path, tmp_path, ep_exchange="alltoall")
    plan = api.solve("qwen3-30b-a3b", "8xH100", objective="max-goodput", time_limit_s=5, profile=deepep)
    assert plan.pools and plan.ep_exchange == "alltoall" and plan.schema_version == 2
