"""Length distributions, workloads, presets, traces and workload.yaml loading."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from layoutopt.errors import InputError
from layoutopt.workloads.distributions import (
    MAX_LOGNORMAL_P90_OVER_MEAN,
    EmpiricalLength,
    FixedLength,
    HistogramLength,
    LognormalLength,
)
from layoutopt.workloads.loaders import load_workload, workload_from_dict
from layoutopt.workloads.presets import PRESETS, default_workload, preset_workload, workload_from_lengths
from layoutopt.workloads.traces import load_trace
from layoutopt.workloads.workload import Workload

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


# --- distributions -----------------------------------------------------------------------------


def test_fixed():
    dist = FixedLength(tokens=512)
    assert dist.mean_tokens == 512 and dist.quantile_tokens(0.99) == 512
    assert (dist.sample_tokens(rng(), 5) == 512).all()


def test_histogram_mean_and_quantiles():
    # P(100) = 0.25, P(300) = 0.75 -> mean 250; cumulative 0.25 at 100, 1.0 at 300
    dist = HistogramLength(tokens=[300, 100], weights=[3, 1])
    assert dist.mean_tokens == pytest.approx(250)
    assert dist.quantile_tokens(0.25) == 100
    assert dist.quantile_tokens(0.26) == 300
    samples = dist.sample_tokens(rng(), 40_000)
    assert (samples == 100).mean() == pytest.approx(0.25, abs=0.01)


def test_histogram_zero_weight_never_drawn_nor_quantile():
    dist = HistogramLength(tokens=[1, 50, 99], weights=[0, 1, 1])
    assert dist.quantile_tokens(0.0) == 50
    assert 1 not in dist.sample_tokens(rng(), 1000)


@pytest.mark.parametrize(
    ("kwargs", "loc"),
    [
        ({"tokens": [1, 2], "weights": [1]}, ("weights",)),
        ({"tokens": [1, 0], "weights": [1, 1]}, ("tokens", 1)),
        ({"tokens": [1], "weights": [0]}, ("weights",)),
        ({"tokens": [1], "weights": [-1]}, ("weights", 0)),
    ],
)
def test_histogram_rejects(kwargs, loc):
    with pytest.raises(ValidationError) as caught:
        HistogramLength(**kwargs)
    assert caught.value.errors()[0]["loc"] == loc


def test_empirical_quantiles_are_inverted_cdf():
    dist = EmpiricalLength(tokens=[10, 1, 9, 2, 8, 3, 7, 4, 6, 5])
    assert dist.mean_tokens == pytest.approx(5.5)
    assert [dist.quantile_tokens(q) for q in (0.0, 0.1, 0.5, 0.9, 0.95, 1.0)] == [1, 1, 5, 9, 10, 10]
    samples = dist.sample_tokens(rng(), 50_000)
    assert set(np.unique(samples)) == set(range(1, 11))
    assert samples.mean() == pytest.approx(5.5, rel=0.02)


@pytest.mark.parametrize(("mean", "p90"), [(2000, 4000), (250, 550), (28, 63), (1000, 1001), (100, 227)])
def test_lognormal_p90_round_trip(mean, p90):
    dist = LognormalLength(mean=mean, p90=p90)
    assert dist.mean_tokens == mean
    assert dist.quantile_tokens(0.9) == pytest.approx(p90, rel=1e-9)
    mu, sigma = dist._params()
    assert math.exp(mu + sigma**2 / 2) == pytest.approx(mean, rel=1e-12)


def test_lognormal_sampling_statistics():
    dist = LognormalLength(mean=2000, p90=4000)
    samples = dist.sample_tokens(rng(), 200_000)
    assert samples.mean() == pytest.approx(2000, rel=0.02)
    assert np.quantile(samples, 0.9) == pytest.approx(4000, rel=0.02)
    assert np.median(samples) == pytest.approx(dist.quantile_tokens(0.5), rel=0.02)


def test_lognormal_clip_lowers_mean_like_samples():
    dist = LognormalLength(mean=2000, p90=4000, max_tokens=3000)
    samples = dist.sample_tokens(rng(), 200_000)
    assert samples.max() == 3000
    assert dist.mean_tokens < 2000
    assert samples.mean() == pytest.approx(dist.mean_tokens, rel=0.01)
    assert dist.quantile_tokens(0.99) == 3000


def test_lognormal_from_median():
    dist = LognormalLength.from_median_p90(1500, 6000)
    assert dist.quantile_tokens(0.5) == pytest.approx(1500, rel=1e-9)
    assert dist.quantile_tokens(0.9) == pytest.approx(6000, rel=1e-9)
    with pytest.raises(ValueError, match="at most"):
        LognormalLength.from_median_p90(10, 1000)


def test_lognormal_p90_limit_is_explained():
    assert MAX_LOGNORMAL_P90_OVER_MEAN == pytest.approx(2.2732, abs=1e-4)
    with pytest.raises(ValidationError, match="at most 2.27x its mean") as caught:
        LognormalLength(mean=2000, p90=6000)
    assert caught.value.errors()[0]["loc"] == ("p90",)
    with pytest.raises(ValidationError, match="must exceed the mean"):
        LognormalLength(mean=2000, p90=2000)


@pytest.mark.parametrize("q", [-0.1, 1.5])
def test_quantile_outside_unit_interval_rejected(q):
    with pytest.raises(ValueError):
        LognormalLength(mean=10, p90=20).quantile_tokens(q)


DISTRIBUTIONS = st.one_of(
    st.builds(FixedLength, tokens=st.integers(1, 10**6)),
    st.builds(
        lambda mean, ratio, cap: LognormalLength(mean=mean, p90=mean * ratio, max_tokens=cap),
        st.floats(1, 1e5),
        st.floats(1.01, MAX_LOGNORMAL_P90_OVER_MEAN - 1e-6),
        st.none() | st.integers(1, 10**6),
    ),
    st.lists(st.tuples(st.integers(1, 10**5), st.floats(0.01, 10)), min_size=1, max_size=20).map(
        lambda rows: HistogramLength(tokens=[r[0] for r in rows], weights=[r[1] for r in rows])
    ),
    st.builds(EmpiricalLength, tokens=st.lists(st.integers(1, 10**5), min_size=1, max_size=50)),
)


@settings(max_examples=200, deadline=None)
@given(dist=DISTRIBUTIONS, q1=st.floats(0, 1), q2=st.floats(0, 1))
def test_quantile_monotone_in_q(dist, q1, q2):
    low, high = sorted((q1, q2))
    assert dist.quantile_tokens(low) <= dist.quantile_tokens(high)
    assert dist.quantile_tokens(low) >= 1


@settings(max_examples=50, deadline=None)
@given(dist=DISTRIBUTIONS)
def test_samples_are_whole_tokens_at_least_one(dist):
    samples = dist.sample_tokens(rng(), 100)
    assert samples.dtype.kind == "i" and (samples >= 1).all()


# --- workload ----------------------------------------------------------------------------------

PAIRS = [(100, 10), (200, 20), (4000, 5), (300, 400)]


def test_trace_workload_marginals_and_joint_sampling():
    workload = Workload(trace_pairs=PAIRS)
    assert isinstance(workload.input_tokens, EmpiricalLength)
    assert workload.mean_input_tokens == pytest.approx(1150)
    assert workload.mean_output_tokens == pytest.approx(108.75)
    inputs, outputs = workload.sample_requests(rng(), 1000)
    assert set(zip(inputs.tolist(), outputs.tolist())) == set(PAIRS)  # pairs stay joined
    assert workload.num_trace_requests == 4


def test_trace_workload_round_trip_and_equality():
    workload = Workload(trace_pairs=PAIRS, arrival_rate_rps=3)
    assert Workload.model_validate(workload.model_dump()) == workload
    assert Workload.model_validate_json(workload.model_dump_json()) == workload
    assert workload.with_arrival_rate(7).arrival_rate_rps == 7


def test_trace_workload_rejects_conflicting_lengths():
    with pytest.raises(ValidationError, match="must be the trace's marginal"):
        Workload(trace_pairs=PAIRS, input_tokens=FixedLength(tokens=5))


def test_trace_pairs_must_be_positive():
    with pytest.raises(ValidationError, match=r"pair 1 is \(0, 3\)"):
        Workload(trace_pairs=[(1, 1), (0, 3)])


def test_independent_sampling_without_trace():
    workload = workload_from_lengths(1024, 128, arrival_rate_rps=2)
    inputs, outputs = workload.sample_requests(rng(), 10)
    assert (inputs == 1024).all() and (outputs == 128).all()
    assert workload.mean_uncached_input_tokens == 1024
    assert workload.arrival_rate_rps == 2


# --- presets -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["chat", "rag", "agent", "summarization", "code"])
def test_presets_valid(name):
    workload = preset_workload(name)
    assert workload.name == name
    assert workload.arrival_rate_rps is None
    assert Workload.model_validate(workload.model_dump()) == workload
    assert workload.input_tokens.quantile_tokens(0.9) > workload.mean_input_tokens
    assert 0 <= workload.prefix_cache_hit_fraction < 1


def test_presets_have_expected_shapes():
    assert preset_workload("rag").mean_input_tokens > 10 * preset_workload("rag").mean_output_tokens
    assert preset_workload("code").mean_output_tokens < 50
    assert preset_workload("agent").prefix_cache_hit_fraction >= 0.8
    assert set(PRESETS) == {"chat", "rag", "agent", "summarization", "code"}


def test_default_workload_is_chat():
    assert default_workload() == preset_workload("CHAT")
    assert default_workload().mean_input_tokens == 1400 and default_workload().mean_output_tokens == 250


def test_unknown_preset_suggests():
    with pytest.raises(InputError, match="did you mean chat") as caught:
        preset_workload("chta")
    assert caught.value.field == "workload.preset"


# --- traces ------------------------------------------------------------------------------------


def test_example_trace_csv():
    pairs = load_trace(EXAMPLES / "trace.csv")
    assert len(pairs) == 40 and pairs[0] == (573, 70)


@pytest.mark.parametrize(
    ("header", "suffix"),
    [("isl,osl", ".csv"), ("prompt_tokens,completion_tokens", ".csv"),
     ("TIMESTAMP,ContextTokens,GeneratedTokens", ".csv"), ("Request tokens,Response tokens", ".csv")],
)
def test_csv_aliases(tmp_path, header, suffix):
    columns = header.split(",")
    rows = [",".join(["0"] * (len(columns) - 2) + [str(i), str(o)]) for i, o in PAIRS]
    path = tmp_path / f"t{suffix}"
    path.write_text("\n".join([header, *rows]) + "\n")
    assert load_trace(path) == PAIRS


def test_jsonl_trace(tmp_path):
    path = tmp_path / "t.jsonl"
    lines = [json.dumps({"timestamp": k, "input_length": i, "output_length": o, "hash_ids": [1]})
             for k, (i, o) in enumerate(PAIRS)]
    path.write_text("\n".join(lines[:2] + [""] + lines[2:]) + "\n")
    assert load_trace(path) == PAIRS


def test_json_array_trace(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps([{"input_tokens": i, "output_tokens": float(o)} for i, o in PAIRS]))
    assert load_trace(path) == PAIRS


@pytest.mark.parametrize(
    ("name", "text", "match"),
    [
        ("t.csv", "input_tokens,output_tokens\n5,3\n7,0\n", r"t\.csv:3\]\.output_tokens: got '0'; a whole number"),
        ("t.csv", "input_tokens,output_tokens\n5,abc\n", r"t\.csv:2\]\.output_tokens: got 'abc'"),
        ("t.csv", "prompt,output_tokens\n5,3\n", r"no column for input_tokens; found columns \['prompt'"),
        ("t.csv", "isl,input_tokens,osl\n5,5,3\n", r"several columns \(isl, input_tokens\)"),
        ("t.csv", "input_tokens,output_tokens\n", "at least one request"),
        ("t.jsonl", '{"isl": 5, "osl": 3}\n{"isl": 5, "osl": \n', r"one JSON object per line \(line 2"),
        ("t.jsonl", '{"isl": 5, "osl": 3}\n{"isl": -5, "osl": 3}\n', r"t\.jsonl:2\]\.isl: got -5"),
        ("t.txt", "x", "a trace file ending in .csv"),
    ],
)
def test_bad_traces(tmp_path, name, text, match):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InputError, match=match):
        load_trace(path, field="workload.trace")


def test_missing_trace(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load_trace(tmp_path / "gone.csv")


# --- workload.yaml -----------------------------------------------------------------------------


def test_example_workloads():
    chat = load_workload(EXAMPLES / "workload-chat.yaml")
    assert chat.name == "support-chat" and chat.arrival_rate_rps == 5
    assert chat.prefix_cache_hit_fraction == 0.3
    assert chat.input_tokens == preset_workload("chat").input_tokens
    rag = load_workload(EXAMPLES / "workload-rag.yaml")
    assert isinstance(rag.output_tokens, HistogramLength) and rag.input_tokens.max_tokens == 32768
    trace = load_workload(EXAMPLES / "workload-trace.yaml")
    assert trace.num_trace_requests == 40 and trace.trace_source == "trace.csv"


def test_trace_relative_to_workload_file(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "t.csv").write_text("isl,osl\n10,2\n20,4\n")
    (tmp_path / "w.yaml").write_text("trace: sub/t.csv\nprefix_cache_hit_fraction: 0.5\n")
    workload = load_workload(tmp_path / "w.yaml")
    assert workload.trace_pairs == ((10, 2), (20, 4)) and workload.name == "w"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (1024, FixedLength(tokens=1024)),
        ({"fixed": 1024}, FixedLength(tokens=1024)),
        ({"lognormal": {"mean": 2000, "p90": 4000}}, LognormalLength(mean=2000, p90=4000)),
        ({"histogram": {"tokens": [1, 2], "weights": [1, 1]}}, HistogramLength(tokens=[1, 2], weights=[1, 1])),
        ({"empirical": [3, 1, 2]}, EmpiricalLength(tokens=[3, 1, 2])),
        ({"kind": "fixed", "tokens": 7}, FixedLength(tokens=7)),
    ],
)
def test_length_shapes(spec, expected):
    workload = workload_from_dict({"input_tokens": spec, "output_tokens": 10})
    assert workload.input_tokens == expected


def test_lognormal_median_shape():
    workload = workload_from_dict({"input_tokens": {"lognormal": {"median": 1500, "p90": 6000}}, "output_tokens": 1})
    assert workload.input_tokens.quantile_tokens(0.5) == pytest.approx(1500)


@pytest.mark.parametrize("workload", [*PRESETS.values(), Workload(trace_pairs=PAIRS, name="t")])
def test_workload_dict_round_trip(workload):
    assert workload_from_dict(workload.model_dump()) == workload
    assert workload_from_dict(json.loads(workload.model_dump_json())) == workload


def test_preset_with_overrides():
    workload = workload_from_dict({"preset": "rag", "output_tokens": {"fixed": 64}, "arrival_rate_rps": 9})
    assert workload.name == "rag" and workload.output_tokens == FixedLength(tokens=64)
    assert workload.input_tokens == preset_workload("rag").input_tokens and workload.arrival_rate_rps == 9


GOOD = {"input_tokens": {"lognormal": {"mean": 2000, "p90": 4000}}, "output_tokens": {"fixed": 100}}


@pytest.mark.parametrize(
    ("change", "field", "value_text", "allowed_text"),
    [
        ({"input_tokens": {"lognormal": {"mean": 2000, "p90": 6000}}}, "workload.input_tokens.lognormal.p90",
         "6000", "at most 2.27x its mean"),
        ({"input_tokens": {"lognormal": {"mean": -3, "p90": 10}}}, "workload.input_tokens.lognormal.mean",
         "-3", "greater than 0"),
        ({"input_tokens": {"lognormal": {"mean": 2000, "p99": 6000}}}, "workload.input_tokens.lognormal.p99",
         "'p99'", "unknown key"),
        ({"input_tokens": {"lognormal": {"median": 100, "p90": 90}}}, "workload.input_tokens.lognormal.p90",
         "90", "median < p90"),
        ({"input_tokens": {"lognormall": {"mean": 1, "p90": 2}}}, "workload.input_tokens.lognormall",
         "'lognormall'", "unknown key"),
        ({"input_tokens": {"fixed": 0}}, "workload.input_tokens.fixed.tokens", "0", "greater than or equal to 1"),
        ({"input_tokens": -5}, "workload.input_tokens.fixed.tokens", "-5", "greater than or equal to 1"),
        ({"output_tokens": {"histogram": {"tokens": [5, -1], "weights": [1, 1]}}},
         "workload.output_tokens.histogram.tokens[1]", "-1", "greater than or equal to 1"),
        ({"output_tokens": "long"}, "workload.output_tokens", "'long'", "a mapping"),
        ({"prefix_cache_hit_fraction": 1.2}, "workload.prefix_cache_hit_fraction", "1.2", "less than 1"),
        ({"arrival_rate_rps": 0}, "workload.arrival_rate_rps", "0", "greater than 0"),
        ({"arival_rate_rps": 3}, "workload.arival_rate_rps", "'arival_rate_rps'", "unknown key"),
        ({"preset": "chta"}, "workload.preset", "'chta'", "known names"),
        ({"trace": "t.csv"}, "workload.input_tokens", None, "omit it when trace is given"),
    ],
)
def test_bad_workload_names_field_value_and_rule(change, field, value_text, allowed_text):
    with pytest.raises(InputError) as caught:
        workload_from_dict({**GOOD, **change})
    message = str(caught.value)
    assert caught.value.field == field
    if value_text is not None:
        assert message.startswith(f"{field}: got {value_text};")
    assert allowed_text in message


def test_unknown_key_suggests_closest():
    with pytest.raises(InputError, match="did you mean arrival_rate_rps"):
        workload_from_dict({**GOOD, "arival_rate_rps": 3})
    with pytest.raises(InputError, match="did you mean lognormal"):
        workload_from_dict({**GOOD, "input_tokens": {"lognormall": {"mean": 1, "p90": 2}}})


def test_missing_lengths():
    with pytest.raises(InputError, match=r"^workload\.output_tokens: got nothing; required unless preset"):
        workload_from_dict({"input_tokens": 5})


def test_missing_trace_file_named_in_error(tmp_path):
    (tmp_path / "w.yaml").write_text("trace: missing.csv\n")
    with pytest.raises(InputError, match="no such file") as caught:
        load_workload(tmp_path / "w.yaml")
    assert caught.value.field == "workload.trace"


def test_missing_workload_file(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load_workload(tmp_path / "absent.yaml")


def test_malformed_workload_yaml(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text("input_tokens: {fixed: 5}\noutput_tokens: [1, 2\n")
    with pytest.raises(InputError, match=r"^workload: got '.*w\.yaml'; valid YAML \(line \d"):
        load_workload(path)


def test_lognormal_agrees_with_scipy_stats():
    dist = LognormalLength(mean=1400, p90=2900, max_tokens=4000)
    frozen = dist.frozen()
    assert frozen.mean() == pytest.approx(1400, rel=1e-12) and frozen.ppf(0.9) == pytest.approx(2900, rel=1e-12)
    assert dist.quantile_tokens(0.5) == pytest.approx(frozen.median(), rel=1e-12)
    # the clipped mean by numerical integration of E[min(X, 4000)]
    assert dist.mean_tokens == pytest.approx(frozen.expect(lambda x: np.minimum(x, 4000.0)), rel=1e-6)


def test_csv_trace_comments_blank_rows_crlf_and_line_numbers(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(b"# exported 2026-05\r\nisl,osl\r\n5,3\r\n,\r\n\r\n# a note\r\n7,2.0\r\n")
    assert load_trace(path) == [(5, 3), (7, 2)]
    path.write_text("isl,osl\n5,3\n# a note\n\n7,x\n")
    with pytest.raises(InputError, match=r"t\.csv:5\]\.osl: got 'x'"):  # the file's own line number
        load_trace(path)
    path.write_text("# nothing but a header\nisl,osl\n")
    with pytest.raises(InputError, match="at least one request"):
        load_trace(path)
    path.write_text("isl,osl\n5,3\n7\n")
    with pytest.raises(InputError, match="a well-formed CSV file"):
        load_trace(path)
