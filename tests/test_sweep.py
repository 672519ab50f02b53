"""Sweeps: grid expansion, cell ids, resume, failed cells, CSV/Parquet, and real small solves.

Most tests inject a fake solve function (``solve_fn``) and run cells in this process
(``workers=1``), so they test the sweep machinery in milliseconds; the last tests run real solves
of a small model on small budgets with short time limits.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from layoutopt.errors import InputError
from layoutopt.plan import Plan
from layoutopt.sweep import SweepSpec, expand_cells, load_sweep_spec, sweep
from layoutopt.sweep.results import TIMING_COLUMNS, read_csv_rows, read_journal

FIXTURE_PLAN = Path(__file__).parent / "fixtures" / "plan_colocated.json"
SLO = {"ttft_ms": {"p90": 1000}, "tpot_ms": {"p90": 30}}
USD_PER_GPU_HOUR = {"8xH100": 4.0, "8xH200": 5.0}


def fake_solve(**kwargs) -> Plan:
    """A Plan whose cost is one GPU per 2 req/s at the budget's price; model qwen3-32b fails."""
    if kwargs["model"] == "qwen3-32b":
        raise RuntimeError("solver exploded")
    plan = Plan.model_validate_json(FIXTURE_PLAN.read_text())
    rate = kwargs["rate_rps"] or 8.0
    gpus = max(1, round(rate / 2))
    cost = gpus * USD_PER_GPU_HOUR[kwargs["budget"]]
    pool = plan.pools[0].model_copy(update={"instances": gpus, "gpus_per_instance": 1, "cost_usd_per_hour": cost})
    totals = plan.totals.model_copy(update={"gpus": gpus, "cost_usd_per_hour": cost, "goodput_rps": rate,
                                            "requests_per_usd": rate * 3600 / cost})
    return plan.model_copy(update={"pools": [pool], "totals": totals, "objective": kwargs["objective"]})


def _spec(**overrides) -> SweepSpec:
    fields = {"name": "t", "models": ["qwen3-8b"], "budgets": ["8xH100", "8xH200"], "rates_rps": [2.0, 4.0],
              "workloads": ["chat"], "slos": [SLO], "objectives": ["min-cost"]}
    return SweepSpec.model_validate({**fields, **overrides})


def test_grid_expands_in_axis_order_with_stable_ids():
    spec = _spec(models=["qwen3-8b", "qwen3-32b"], workloads=["chat", {"preset": "rag"}],
                 objectives=["min-cost", "max-goodput"])
    cells = expand_cells(spec)
    assert len(cells) == 2 * 2 * 2 * 1 * 2 * 2
    assert [c.cell_index for c in cells] == list(range(32))
    first, second = cells[0], cells[1]
    assert (first.model, first.budget, first.workload_name, first.objective, first.rate_rps) == \
        ("qwen3-8b", "8xH100", "chat", "min-cost", 2.0)
    assert second.rate_rps == 4.0 and second.workload["arrival_rate_rps"] == 4.0  # rate is the innermost axis
    assert len({c.cell_id for c in cells}) == len(cells)
    assert [c.cell_id for c in expand_cells(spec)] == [c.cell_id for c in cells]  # stable across expansions


def test_gpu_types_become_budgets():
    spec = _spec(budgets=None, gpus=["H100", "B200"], max_gpus_per_type=16)
    assert spec.budget_texts == ["16xH100", "16xB200"]


@pytest.mark.parametrize(("overrides", "field"), [
    ({"budgets": None}, "sweep.budgets"),
    ({"gpus": ["H100"]}, "sweep.budgets"),
    ({"budgets": None, "gpus": ["H100"]}, "sweep.max_gpus_per_type"),
    ({"rates_rps": [None]}, "sweep.rates_rps"),
    ({"rates_rps": [-1.0]}, "sweep.rates_rps"),
    ({"models": []}, "sweep.models"),
    ({"objectives": ["cheapest"]}, "sweep.objectives"),
    ({"colour": "red"}, "sweep.colour"),
])
def test_bad_spec_names_the_field(tmp_path, overrides, field):
    from layoutopt.sweep.spec import sweep_spec_from_dict

    data = {**_spec().model_dump(mode="json", exclude_none=True), **overrides}
    data = {key: value for key, value in data.items() if value is not None}
    with pytest.raises(InputError) as error:
        sweep_spec_from_dict(data)
    assert error.value.field.startswith(field)


def test_spec_file_resolves_paths_relative_to_it(tmp_path):
    (tmp_path / "slo.yaml").write_text("ttft_ms: {p90: 800}\ntpot_ms: {p90: 25}\n")
    (tmp_path / "w.yaml").write_text("preset: code\nname: ide\n")
    (tmp_path / "sweep.yaml").write_text(
        "models: [qwen3-8b]\nbudgets: [8xH100]\nrates_rps: [1]\nworkloads: [w.yaml, chat]\nslos: [slo.yaml]\n")
    spec = load_sweep_spec(tmp_path / "sweep.yaml")
    cells = expand_cells(spec, tmp_path)
    assert [c.workload_name for c in cells] == ["ide", "chat"]
    assert cells[0].slo == {"ttft_ms": {"p90": 800.0}, "tpot_ms": {"p90": 25.0}, "attainment": 0.9}
    assert cells[0].slo_name == "slo"


@pytest.mark.parametrize(("overrides", "field", "text"), [
    ({"models": ["qwen3-8b", "qwen3-33b"]}, "sweep.models[1]", "did you mean qwen3-32b"),
    ({"budgets": ["8xH100", "8xH1000"]}, "sweep.budgets[1]", "unknown GPU 'H1000'"),
    ({"workloads": ["chat", "chatty"]}, "sweep.workloads[1].preset", "did you mean chat"),
    ({"workloads": [{"preset": "chat", "prefix_cache_hit_fraction": 2}]},
     "sweep.workloads[0].prefix_cache_hit_fraction", "less than 1"),
    ({"slos": ["missing-slo.yaml"]}, "sweep.slos[0]", "no such file"),
])
def test_bad_names_stop_the_sweep_before_any_cell(tmp_path, overrides, field, text):
    with pytest.raises(InputError) as error:
        sweep(_spec(**overrides), tmp_path, workers=1, solve_fn=fake_solve)
    assert error.value.field == field and text in str(error.value)
    assert not (tmp_path / "cells.jsonl").exists()


def test_model_config_file_is_keyed_by_contents(tmp_path):
    from layoutopt.model_catalog.catalog import catalog_entries

    shipped = Path(__file__).parents[1] / "layoutopt" / "model_catalog" / "data" / "hf_configs"
    entry = next(e for e in catalog_entries() if e.name == "qwen3-8b")
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "config.json").write_text((shipped / entry.config).read_text())
    first = expand_cells(_spec(models=["a/config.json"]), tmp_path)
    moved = expand_cells(_spec(models=["b"]), tmp_path)
    assert first[0].model == str(tmp_path / "a" / "config.json")
    assert [c.cell_id for c in first] == [c.cell_id for c in moved]


def test_identical_cells_are_rejected():
    with pytest.raises(InputError, match="repeated cells"):
        expand_cells(_spec(slos=[SLO, dict(SLO)]))


def test_sweep_writes_rows_tables_and_summary(tmp_path):
    result = sweep(_spec(), tmp_path, workers=1, solve_fn=fake_solve, plots=False)
    assert (result.num_cells, result.num_run, result.num_skipped, result.num_errors) == (4, 4, 0, 0)
    rows = read_csv_rows(tmp_path / "results.csv")
    assert [r["budget"] for r in rows] == ["8xH100", "8xH100", "8xH200", "8xH200"]
    assert [float(r["cost_usd_per_hour"]) for r in rows] == [4.0, 8.0, 5.0, 10.0]
    assert rows[0]["layout"] == "1 x colocated H100-SXM tp2-fp8"
    assert float(rows[0]["requests_per_usd_at_capacity"]) == pytest.approx(2 * 3600 / 4.0)
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "results.parquet")
    assert table.num_rows == 4 and table.schema.field("cost_usd_per_hour").type == "double"
    assert table.column("cell_id").to_pylist() == [r["cell_id"] for r in rows]
    assert (tmp_path / "plans" / f"{rows[0]['cell_id']}.json").exists()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [f["best"]["budget"] for f in summary["cheapest_fleets"]] == ["8xH100", "8xH100"]


def test_resume_skips_cells_already_done(tmp_path):
    calls: list[tuple] = []

    def counting_solve(**kwargs):
        calls.append((kwargs["budget"], kwargs["rate_rps"]))
        return fake_solve(**kwargs)

    sweep(_spec(rates_rps=[2.0]), tmp_path, workers=1, solve_fn=counting_solve, plots=False)
    assert len(calls) == 2
    grown = sweep(_spec(rates_rps=[2.0, 4.0]), tmp_path, workers=1, solve_fn=counting_solve, plots=False)
    assert len(calls) == 4 and sorted(calls[2:]) == [("8xH100", 4.0), ("8xH200", 4.0)]
    assert (grown.num_run, grown.num_skipped) == (2, 2)
    assert [r.cell_index for r in grown.rows] == [0, 1, 2, 3]
    again = sweep(_spec(rates_rps=[2.0, 4.0]), tmp_path, workers=1, solve_fn=counting_solve, plots=False)
    assert len(calls) == 4 and again.num_skipped == 4


def test_cut_journal_line_runs_that_cell_again(tmp_path):
    sweep(_spec(), tmp_path, workers=1, solve_fn=fake_solve, plots=False)
    journal = tmp_path / "cells.jsonl"
    journal.write_text(journal.read_text().rstrip()[:-20])  # a crash mid-write cuts the last row
    assert len(read_journal(tmp_path)) == 3
    result = sweep(_spec(), tmp_path, workers=1, solve_fn=fake_solve, plots=False)
    assert (result.num_run, result.num_skipped) == (1, 3)
    assert len(read_journal(tmp_path)) == 4


def test_failed_cell_is_recorded_and_the_sweep_goes_on(tmp_path):
    result = sweep(_spec(models=["qwen3-32b", "qwen3-8b"]), tmp_path, workers=1, solve_fn=fake_solve, plots=False)
    statuses = [row.status for row in result.rows]
    assert statuses == ["error"] * 4 + ["optimal"] * 4
    assert result.num_errors == 4
    assert "RuntimeError: solver exploded" in result.rows[0].error
    csv_rows = read_csv_rows(tmp_path / "results.csv")
    assert csv_rows[0]["error"] == "RuntimeError: solver exploded" and csv_rows[0]["cost_usd_per_hour"] == ""
    # failed cells count as done on resume, unless asked to retry them
    assert sweep(_spec(models=["qwen3-32b", "qwen3-8b"]), tmp_path, workers=1, solve_fn=fake_solve,
                 plots=False).num_run == 0
    retried = sweep(_spec(models=["qwen3-32b", "qwen3-8b"]), tmp_path, workers=1, solve_fn=fake_solve, plots=False,
                    retry_errors=True)
    assert retried.num_run == 4


def test_local_processes_match_in_process(tmp_path):
    serial = sweep(_spec(), tmp_path / "serial", workers=1, solve_fn=fake_solve, plots=False)
    parallel = sweep(_spec(), tmp_path / "parallel", workers=2, solve_fn=fake_solve, plots=False)

    def answer(rows):
        return [row.model_dump(exclude=set(TIMING_COLUMNS)) for row in rows]

    assert answer(parallel.rows) == answer(serial.rows)


def test_bad_executor_and_workers(tmp_path):
    with pytest.raises(InputError, match="executor"):
        sweep(_spec(), tmp_path, executor="slurm", solve_fn=fake_solve)
    with pytest.raises(InputError, match="workers"):
        sweep(_spec(), tmp_path, workers=0, solve_fn=fake_solve)


def test_real_solves_on_small_budgets(tmp_path):
    spec = _spec(rates_rps=[1.0, 20.0], budgets=["8xH100", "8xA100"], solver={"time_limit_s": 5})
    result = sweep(spec, tmp_path, workers=1)
    assert result.num_errors == 0
    assert all(row.status == "optimal" for row in result.rows)
    by_cell = {(row.budget, row.rate_rps): row for row in result.rows}
    for row in result.rows:
        assert row.goodput_rps >= row.rate_rps  # min-cost plans serve the rate asked for
        assert row.requests_per_usd_at_capacity == pytest.approx(row.goodput_rps * 3600 / row.cost_usd_per_hour)
        assert row.requests_per_usd_at_demand == pytest.approx(row.rate_rps * 3600 / row.cost_usd_per_hour)
    assert by_cell[("8xH100", 20.0)].cost_usd_per_hour >= by_cell[("8xH100", 1.0)].cost_usd_per_hour
    assert (tmp_path / "summary.md").read_text().startswith("# Sweep t: procurement summary")
    assert result.summary.plots and all((tmp_path / plot).stat().st_size > 0 for plot in result.summary.plots)
