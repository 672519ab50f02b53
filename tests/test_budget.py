"""Budget strings: accepted forms and the messages of rejected ones."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from layoutopt.errors import InputError
from layoutopt.hardware_catalog import Budget, parse_budget


@pytest.mark.parametrize(
    ("text", "counts", "cap_usd_per_hour"),
    [
        ("32xH100", {"H100-SXM": 32}, None),
        ("32 x h100", {"H100-SXM": 32}, None),
        ("32X H100 SXM5", {"H100-SXM": 32}, None),
        ("8*B200", {"B200": 8}, None),
        ("8×MI300X", {"MI300X": 8}, None),
        ("16xH100+16xH200", {"H100-SXM": 16, "H200-SXM": 16}, None),
        ("64xH100,32xB200", {"H100-SXM": 64, "B200": 32}, None),
        ("16xH100 + 16xh100_sxm", {"H100-SXM": 32}, None),
        ("$400/h", {}, 400.0),
        ("$400/hr", {}, 400.0),
        ("$ 400.5 / hour", {}, 400.5),
        ("400usd/h", {}, 400.0),
        ("400 USD/hr", {}, 400.0),
        ("64xH100+$300/h", {"H100-SXM": 64}, 300.0),
        ("$300/h, 8xL40S", {"L40S": 8}, 300.0),
        ("H100", {"H100-SXM": 8}, None),
        ("a100", {"A100-80GB-SXM": 8}, None),
        ("GB200", {"GB200": 4}, None),
        ("h100+8xB200", {"H100-SXM": 8, "B200": 8}, None),
    ],
)
def test_parse_budget(text, counts, cap_usd_per_hour):
    budget = parse_budget(text)
    assert budget.gpu_counts == counts
    assert list(budget.gpu_types) == list(counts)
    assert budget.max_usd_per_hour == cap_usd_per_hour
    assert budget.text == text


@pytest.mark.parametrize(
    ("text", "message_parts"),
    [
        ("32xH10", ["term '32xH10'", "unknown GPU 'H10'", "did you mean H100-SXM"]),
        ("0xH100", ["term '0xH100'", "positive integer, got 0"]),
        ("-4xH100", ["positive integer, got -4"]),
        ("1.5xH100", ["positive integer, got 1.5"]),
        ("32H100", ["term '32H100'", "write COUNTxGPU"]),
        ("$400", ["term '$400'", "per hour, e.g. $400/h"]),
        ("$0/h", ["dollar cap must be positive"]),
        ("$-5/h", ["term '$-5/h'"]),
        ("$1/h+$2/h", ["term '$2/h'", "second dollar cap"]),
        ("32xH100++8xB200", ["empty term"]),
        ("32xH100,", ["empty term"]),
        ("", ["expected terms joined by '+' or ','"]),
        ("   ", ["expected terms"]),
    ],
)
def test_bad_budgets(text, message_parts):
    with pytest.raises(InputError) as caught:
        parse_budget(text)
    error = caught.value
    assert error.field == "budget" and error.value == text
    for part in message_parts:
        assert part in str(error), str(error)


def test_format_errors_list_the_expected_forms():
    with pytest.raises(InputError, match=r"COUNTxGPU \(32xH100\).*\$400/h"):
        parse_budget("32H100")


def test_describe_and_totals():
    budget = parse_budget("16xH100+16xH200+$300/h")
    assert budget.describe() == "16 x H100-SXM + 16 x H200-SXM, at most $300.00/h"
    assert budget.num_gpus == 32
    assert parse_budget("$1200/h").describe() == "any catalog GPUs, at most $1,200.00/h"
    assert parse_budget("$1200/h").gpu_types == ()


def test_budget_model_is_frozen_and_validated():
    budget = parse_budget("8xH100")
    with pytest.raises(ValidationError):
        budget.max_usd_per_hour = 5.0
    with pytest.raises(ValidationError, match=r"whole numbers in 1\.\.1,000,000"):
        Budget(gpu_counts={"H100-SXM": 0})
    with pytest.raises(ValidationError, match="GPU counts, a dollar cap, or both"):
        Budget()
    with pytest.raises(ValidationError):
        Budget(gpu_counts={"H100-SXM": 8}, colour="red")
