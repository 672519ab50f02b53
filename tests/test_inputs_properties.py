"""Property tests: no input makes a loader or a CLI command raise anything but an input error.

Loaders: arbitrary nested values (with NaN, infinities, huge integers, booleans, unicode)
written as YAML/JSON/CSV, and arbitrary bytes. CLI: every command's options set to hostile
values (inputs/fuzz strategies in ``input_fuzz``). Each must end in exit 0, 1 or 2 with at
most one error line; never exit 3 (internal error) or a traceback. Thousands more cases:
``python benchmarks/bad_input_battery.py``.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import input_fuzz
from input_fuzz import BUGS, Scratch, classify, cli_case, json_values, loaders, run_case, run_loader, serialize

LOADERS = loaders()
def fast(max_examples: int) -> settings:
    return settings(max_examples=max_examples, deadline=None, suppress_health_check=list(HealthCheck),
                    derandomize=True, database=None, phases=[Phase.explicit, Phase.generate])

SCRATCH = Scratch()


def teardown_module() -> None:
    SCRATCH.close()


@pytest.mark.parametrize("name", sorted(LOADERS))
@fast(25)
@given(value=json_values())
def test_loaders_turn_any_document_into_a_value_or_an_input_error(name, value):
    load, suffix = LOADERS[name]
    path = SCRATCH.root / f"doc{suffix}"
    path.write_bytes(serialize(value, suffix))
    assert run_loader(load, path) in ("loaded", "bad input")


@pytest.mark.parametrize("name", sorted(LOADERS))
@fast(8)
@given(data=st.binary(max_size=200))
def test_loaders_turn_any_bytes_into_a_value_or_an_input_error(name, data):
    load, suffix = LOADERS[name]
    path = SCRATCH.root / f"bytes{suffix}"
    path.write_bytes(data)
    assert run_loader(load, path) in ("loaded", "bad input")


# cases per command: the slow ones (a solve, a simulation) get fewer
CASES_PER_COMMAND = {"solve": 30, "estimate": 40, "simulate": 30, "emit": 5, "sweep": 6, "calibrate": 15}


@pytest.mark.parametrize("command", sorted(input_fuzz._commands()))
def test_cli_options_end_in_status_0_1_or_2_with_one_line(command):
    outcomes: dict[str, int] = {}

    @fast(CASES_PER_COMMAND.get(command, 10))
    @given(args=cli_case(SCRATCH, command))
    def check(args):
        status, err = run_case(args, SCRATCH)
        outcome = classify(status, err)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        assert outcome not in BUGS and not outcome.startswith("exit"), (args, err)
        if status == 2:
            lines = [line for line in err.strip().splitlines() if line]
            assert len(lines) == 1 and lines[0].startswith("error:"), (args, err)
            assert ".tmp" not in err, (args, err)  # never a temporary file's name

    check()
    assert sum(outcomes.values()) > 0
