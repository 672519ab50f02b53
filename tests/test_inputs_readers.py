"""The shared reader (layoutopt.io_safe) and every loader that reads through it.

Each loader gets the same bad files: duplicate keys, Latin-1 bytes, non-finite numbers, deep
nesting, alias bombs, oversized files. Every one must be one InputError naming the input.
"""

from __future__ import annotations

import json

import pytest

from layoutopt import io_safe
from layoutopt.errors import InputError
from layoutopt.hardware_catalog.catalog import load_catalog
from layoutopt.hardware_catalog.loaders import load_gpus, load_node_types
from layoutopt.hardware_catalog.prices import load_prices
from layoutopt.model_catalog.catalog import get_model
from layoutopt.plan import load_plan
from layoutopt.sweep.spec import load_sweep_spec
from layoutopt.topology import load_cluster
from layoutopt.workloads.loaders import load_slo, load_workload
from layoutopt.workloads.traces import load_trace

GOOD_SLO = "ttft_ms: {p90: 1000}\ntpot_ms: {p90: 30}\n"
GOOD_CLUSTER = "racks:\n  - name: r\n    nodes: [{type: hgx-h100-8, count: 1}]\n"
GOOD_PRICES = "prices:\n  H100: 2.5\n"
GOOD_GPUS = "gpus: []\n"

# (loader, a valid file body); each loader must refuse the same corruptions of it
YAML_LOADERS = {
    "slo": (load_slo, GOOD_SLO),
    "workload": (load_workload, "preset: chat\n"),
    "cluster": (load_cluster, GOOD_CLUSTER),
    "prices": (load_prices, GOOD_PRICES),
    "gpus": (load_gpus, GOOD_GPUS),
    "node_types": (load_node_types, "node_types: []\n"),
    "sweep": (load_sweep_spec, "base: {budget: 8xH100}\n"),
}


def _write(tmp_path, name: str, data: str | bytes):
    path = tmp_path / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


@pytest.mark.parametrize("name", sorted(YAML_LOADERS))
def test_every_yaml_loader_rejects_duplicate_keys_latin1_deep_nesting_and_alias_bombs(tmp_path, name):
    load, good = YAML_LOADERS[name]
    first_key = good.split(":")[0]
    bad_files = {
        "dup.yaml": (good + good.splitlines()[0] + "\n", f"key '{first_key}' appears twice"),
        "latin1.yaml": (b"# caf\xe9\n" + good.encode(), r"line 1, column 6: byte 0xe9 is not UTF-8"),
        "deep.yaml": ("x: " + "[" * 200 + "]" * 200 + "\n", "nesting deeper than 64 levels"),
        "bomb.yaml": ("a: &a [" + ",".join(["x"] * 20) + "]\n"
                      + "".join(f"{c}: &{c} [" + ",".join([f"*{p}"] * 20) + "]\n"
                                for p, c in zip("abcde", "bcdef")), "aliases"),
        "cycle.yaml": ("a: &a [*a]\n", "aliases"),
        "empty.yaml": ("# nothing\n", "the file is empty"),
        "broken.yaml": ("a: [\n", r"valid YAML \(line 2, column 1"),
    }
    for file_name, (body, expected) in bad_files.items():
        with pytest.raises(InputError, match=expected) as caught:
            load(_write(tmp_path, file_name, body))
        assert file_name in str(caught.value), (name, file_name)


@pytest.mark.parametrize("body, where", [
    ("network: {oversubscription: .inf}\n" + GOOD_CLUSTER, "line 1, column 29: '.inf' is not a finite number"),
    ("prices:\n  H100: .inf\n", "line 2, column 9: '.inf' is not a finite number"),
    ("prices:\n  H100: .nan\n", "'.nan' is not a finite number"),
    ("prices:\n  H100: 1.0e+400\n", r"'1\.0e\+400' is not a finite number"),
])
def test_non_finite_yaml_numbers_name_line_and_column(tmp_path, body, where):
    loader = load_cluster if body.startswith("network") else load_prices
    with pytest.raises(InputError, match=where):
        loader(_write(tmp_path, "f.yaml", body))


def test_gpu_rows_with_infinite_or_absurd_numbers_are_input_errors(tmp_path):
    row = ("gpus:\n  - name: X9\n    vendor: nvidia\n    bf16_tflops: 100\n    memory_gib: {memory}\n"
           "    memory_bandwidth_gb_per_s: 1000\n    scaleup_gb_per_s: 100\n    scaleup_domain_gpus: 8\n"
           "    pcie_gb_per_s: 64\n    nic_gbit_per_s: 400\n    tdp_w: 700\n    source: test\n")
    with pytest.raises(InputError, match="'.inf' is not a finite number"):
        load_gpus(_write(tmp_path, "inf.yaml", row.format(memory=".inf")))
    with pytest.raises(InputError, match=r"memory_gib.*less than or equal to 100000"):
        load_gpus(_write(tmp_path, "huge.yaml", row.format(memory="1.0e+30")))
    assert load_gpus(_write(tmp_path, "ok.yaml", row.format(memory="80")))[-1].name == "X9"


def test_infinite_or_absurd_price_is_refused(tmp_path):
    with pytest.raises(InputError, match=r"prices\.H100.*less than or equal to 10000"):
        load_prices(_write(tmp_path, "p.yaml", "prices:\n  H100: 1.0e+300\n"))


def test_oversized_file_is_refused_before_parsing(tmp_path, monkeypatch):
    monkeypatch.setattr(io_safe, "MAX_CONFIG_BYTES", 1000)
    path = _write(tmp_path, "slo.yaml", GOOD_SLO + "#" * 2000 + "\n")
    with pytest.raises(InputError, match=r"slo: got '.*slo\.yaml'; a YAML file of at most"):
        io_safe.read_yaml(path, "slo", max_bytes=io_safe.MAX_CONFIG_BYTES)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load_slo(tmp_path / "absent.yaml")
    with pytest.raises(InputError, match="not a directory"):
        load_slo(tmp_path)


# ----- JSON: plan files and config.json


@pytest.mark.parametrize("body, expected", [
    ('{"schema_version": 1, "schema_version": 2}', "key 'schema_version' appears twice"),
    ('{"a": NaN}', "NaN is not a JSON number"),
    ('{"a": Infinity}', "Infinity is not a JSON number"),
    ('{"a": -Infinity}', "-Infinity is not a JSON number"),
    ('{"a": 1e999}', "1e999 is too large to be a finite number"),
    ('[' * 3000 + ']' * 3000, "nesting deeper than 64 levels"),
    ('{"a": ' * 100 + '1' + '}' * 100, "nesting deeper than 64 levels"),
    ('{"a": 1', r"line 1, column 8"),
    ('{"a": ' + "9" * 5000 + '}', "digits"),
])
def test_plan_and_config_json_are_read_strictly(tmp_path, body, expected):
    with pytest.raises(InputError, match=expected) as caught:
        load_plan(_write(tmp_path, "plan.json", body))
    assert caught.value.field == "plan"
    with pytest.raises(InputError, match=expected) as caught:
        get_model(str(_write(tmp_path, "config.json", body)))
    assert caught.value.field == "model"


def test_latin1_json_names_line_and_column(tmp_path):
    with pytest.raises(InputError, match=r"line 2, column 15: byte 0xe9 is not UTF-8"):
        load_plan(_write(tmp_path, "plan.json", b'{\n "model": "caf\xe9"}'))


def test_config_json_integers_are_bounded(tmp_path):
    config = json.loads(json.dumps({
        "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
        "max_position_embeddings": 10**30,
    }))
    with pytest.raises(InputError, match=r"max_position_embeddings: got 10{30}; an integer in 0\.\.2,147,483,647"):
        get_model(str(_write(tmp_path, "config.json", json.dumps(config))))
    config["max_position_embeddings"] = 8192
    config["text_config"] = [1, 2]
    with pytest.raises(InputError, match="text_config: got 'list'; a JSON object"):
        get_model(str(_write(tmp_path, "config.json", json.dumps(config))))


# ----- traces


def test_trace_caps_rows_and_token_counts(tmp_path, monkeypatch):
    from layoutopt.workloads import traces

    monkeypatch.setattr(traces, "MAX_TRACE_REQUESTS", 5)
    path = _write(tmp_path, "t.csv", "input_tokens,output_tokens\n" + "10,5\n" * 6)
    with pytest.raises(InputError, match="a trace of at most 5 requests"):
        load_trace(path)
    assert len(load_trace(_write(tmp_path, "ok.csv", "input_tokens,output_tokens\n" + "10,5\n" * 5))) == 5
    with pytest.raises(InputError, match=r"1\.\.2,147,483,647"):
        load_trace(_write(tmp_path, "big.csv", "isl,osl\n9223372036854775808,5\n"))
    with pytest.raises(InputError, match=r"line 2.*Infinity is not a JSON number"):
        load_trace(_write(tmp_path, "t.jsonl", '{"isl": 1, "osl": 1}\n{"isl": Infinity, "osl": 1}\n'))
    with pytest.raises(InputError, match="byte 0xe9 is not UTF-8"):
        load_trace(_write(tmp_path, "l.csv", b"isl,osl\n# caf\xe9\n1,1\n"))


def test_trace_file_size_is_capped_before_reading(tmp_path, monkeypatch):
    from layoutopt.workloads import traces

    monkeypatch.setattr(traces, "MAX_TRACE_BYTES", 100)
    with pytest.raises(InputError, match="a trace file of at most"):
        load_trace(_write(tmp_path, "t.csv", "isl,osl\n" + "1000,1000\n" * 20))


# ----- what stays accepted


def test_valid_files_still_load(tmp_path):
    assert load_slo(_write(tmp_path, "slo.yaml", GOOD_SLO)).ttft_ms == {"p90": 1000}
    assert load_cluster(_write(tmp_path, "c.yaml", GOOD_CLUSTER)).num_gpus == 8
    shared = "defaults: &d {typical_usd_per_hour: 2.0}\n"  # a small alias is fine
    assert io_safe.parse_yaml_text(shared + "x: *d\n", "f", "f")["x"]["typical_usd_per_hour"] == 2.0
    assert load_catalog(prices_path=_write(tmp_path, "p.yaml", GOOD_PRICES)).gpu("H100").price.typical_usd_per_hour == 2.5


def test_yaml_control_characters_and_endless_integers_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="special characters are not allowed"):
        load_slo(_write(tmp_path, "ctl.yaml", "\x08ttft_ms: {p90: 1}\n"))
    with pytest.raises(InputError, match="integer of 5,000 characters is too long"):
        load_slo(_write(tmp_path, "long.yaml", "ttft_ms: {p90: " + "9" * 5000 + "}\n"))


def test_profile_and_calibration_files_use_the_shared_reader(tmp_path):
    from layoutopt.calibrate.profile_file import load_profile

    with pytest.raises(InputError, match="nesting deeper than 64 levels"):
        load_profile(_write(tmp_path, "deep.yaml", "x: " + "[" * 500 + "]" * 500 + "\n"))
    with pytest.raises(InputError, match="key 'engine' appears twice"):
        load_profile(_write(tmp_path, "dup.yaml", "engine: vllm\nengine: sglang\n"))


def test_calibration_measurements_are_checked_for_utf8_first(tmp_path):
    from layoutopt.calibrate.ingest import ingest

    with pytest.raises(InputError, match=r"MEASUREMENTS: got .*b\.bin'; a measurement file in UTF-8"):
        ingest([_write(tmp_path, "b.bin", bytes(range(256)))])
