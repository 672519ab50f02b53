"""Hostile and absurd inputs for every loader and every CLI command, as hypothesis strategies.

Shared by ``tests/test_inputs_properties.py`` (a few hundred cases) and
``benchmarks/bad_input_battery.py`` (thousands). A case is run in-process through the console
entry point's error handling (``run_guarded``) and classified by :func:`classify`: exit 0/1/2
with at most a one-line error is fine; exit 3 (an internal error), any other status or a
traceback is a bug.

``serve`` is left out: a valid combination of its options would start a server that never returns.
Output paths are always inside the scratch folder, never a system path.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import tempfile
from pathlib import Path

import yaml
from hypothesis import strategies as st

from layoutopt.cli import COMMAND_MODULES, cli
from layoutopt.cli.common import run_guarded
from layoutopt.errors import LayoutoptError

REPO = Path(__file__).resolve().parent.parent

NUMBERS = ["0", "1", "2", "8", "-1", "0.5", "1e-300", "5e-324", "inf", "-inf", "nan", "NaN", "1e400",
           "2147483648", str(2**63), str(10**30), "1e8", "abc", "", " 3 ", "0x10", "1_000", "٣"]
STRINGS = ["", "x", "qwen3-8b", "qwen3-32b", "H100", "h100", "B200", "é", "a\nb", "$(touch pwned)", "8xH100",
           f"{10**23}xH100", "$1e9/h", "$400/h", "0xH100", "-8xH100", "p90", "-" * 300, "../../etc/passwd",
           "/etc/passwd", "/dev/zero", "vllm", "\u202e", "8xH100+" * 50 + "8xH100"]
# time limits the solver may be given here: the solver's own cap is the optimizer's business,
# so these keep every case short
TIME_LIMITS = ["0", "-1", "nan", "0.5", "1"]


def _bad_files(root: Path) -> dict[str, Path]:
    """Broken and hostile input files, plus valid ones to mix in."""
    deep = "x: " + "[" * 500 + "]" * 500 + "\n"
    bomb = "a: &a [" + ",".join(["x"] * 30) + "]\n" + "".join(
        f"{c}: &{c} [" + ",".join([f"*{p}"] * 30) + "]\n" for p, c in zip("abcdef", "bcdefg"))
    bodies: dict[str, str | bytes] = {
        "dup.yaml": "ttft_ms: {p90: 1000}\ntpot_ms: {p90: 30}\nttft_ms: {p90: 5}\n",
        "pdup.yaml": "ttft_ms: {p90: 1000, P90: 500}\ntpot_ms: {p90: 30}\n",
        "boolslo.yaml": "ttft_ms: {p90: true}\ntpot_ms: {p90: 30}\n",
        "latin1.yaml": b"name: caf\xe9\nracks: []\n",
        "inf.yaml": "network: {oversubscription: .inf}\nracks: [{name: r, nodes: [{type: hgx-h100-8, count: 1}]}]\n",
        "infprice.yaml": "prices:\n  H100: .inf\n",
        "hugecount.yaml": f"racks: [{{name: r, nodes: [{{type: hgx-h100-8, count: {10**12}}}]}}]\n",
        "deep.yaml": deep,
        "deep.json": "[" * 5000 + "]" * 5000,
        "bomb.yaml": bomb,
        "empty.yaml": "",
        "scalar.yaml": "42\n",
        "list.yaml": "- 1\n- 2\n",
        "binary.bin": bytes(range(256)) * 4,
        "nan.json": '{"schema_version": 1, "x": NaN}',
        "dupkey.json": '{"schema_version": 1, "schema_version": 2}',
        "huge_int.json": '{"a": ' + "9" * 5000 + "}",
        "text.json": '"just a string"',
        "longisl.yaml": "input_tokens: {fixed: 2000000}\noutput_tokens: {fixed: 10}\n",
        "bigtoken.yaml": f"input_tokens: {{fixed: {2**63}}}\noutput_tokens: 10\n",
        "trace.yaml": "trace: nosuch.csv\n",
        "bad.csv": "isl,osl\n1,2\nx,y\n",
        "gpuinf.yaml": "gpus:\n  - name: H100-SXM\n    memory_gib: .inf\n",
        "sweep_bad.yaml": "models: [qwen3-8b]\ngpus: [H100]\nmax_gpus_per_type: 100000000000\n",
    }
    paths = {}
    for name, body in bodies.items():
        path = root / "in" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body.encode() if isinstance(body, str) else body)
        paths[name] = path
    valid = root / "in" / "valid"
    valid.mkdir(exist_ok=True)
    for source in ("slo.yaml", "workload-chat.yaml", "trace.csv", "workload-trace.yaml", "sweep.yaml"):
        shutil.copy(REPO / "examples" / source, valid / source)
    shutil.copy(REPO / "examples" / "clusters" / "hgx-h100-rack.yaml", valid / "cluster.yaml")
    from test_simulator_plan import make_plan, make_pool

    plan = make_plan([make_pool("prefill", 1), make_pool("decode", 1)], rate_rps=4.0)  # records its workload
    (valid / "plan.json").write_text(json.dumps(plan.model_dump(mode="json")))
    shutil.copy(REPO / "layoutopt" / "model_catalog" / "data" / "hf_configs" / "Qwen--Qwen3-8B.json",
                valid / "config.json")
    for name in sorted(os.listdir(valid)):
        paths[f"valid/{name}"] = valid / name
    return paths


class Scratch:
    """A scratch folder with the input files; commands run with it as the working directory."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="layoutopt-fuzz-"))
        self.files = _bad_files(self.root)
        self.inputs = [str(p) for p in self.files.values()] + ["/dev/zero", "/dev/null", "/nonexistent.yaml",
                                                                 str(self.root), ""]
        self.outputs = ["out", "out/x.json", "out/h.png", "out/h.txt", ".", "", "in/valid/plan.json", "a\nb",
                        "out/" + "x" * 300]

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def plan(self) -> str:
        return str(self.files["valid/plan.json"])


OUTPUT_OPTIONS = {"--emit", "--output", "--histogram", "--out", "out_dir"}
SKIPPED_COMMANDS = {"serve"}


def _commands() -> dict[str, object]:
    import click

    found = {}

    def walk(command, path):
        if isinstance(command, click.Group):
            # list_commands / get_command, not .commands: the top-level group loads its commands lazily
            # (cli.LazyGroup), so .commands is empty until a command has run.
            ctx = click.Context(command)
            for name in command.list_commands(ctx):
                walk(command.get_command(ctx, name), [*path, name])
        elif path[0] not in SKIPPED_COMMANDS:
            found[" ".join(path)] = command
    walk(cli, [])
    missing = set(COMMAND_MODULES) - SKIPPED_COMMANDS - {name.split()[0] for name in found}
    assert not missing, f"fuzzing would skip the commands {sorted(missing)}"
    return found


def _base_args(name: str, scratch: Scratch) -> list[str]:
    """Arguments that make each command run quickly; the fuzzed options come after and override them."""
    return {
        "solve": ["--model", "qwen3-8b", "--budget", "8xH100", "--isl", "500", "--osl", "100", "--time-limit", "1"],
        "estimate": ["--model", "qwen3-8b", "--gpu", "H100", "--isl", "500", "--osl", "100"],
        "simulate": [scratch.plan(), "--requests", "200"],
        "emit": [scratch.plan(), "out/emit"],
        "sweep": [str(scratch.files["sweep_bad.yaml"]), "--out", "out/sweep", "--no-progress", "--no-plots"],
        "calibrate": [str(scratch.files["bad.csv"]), "--engine", "vllm", "--gpu", "H100"],
        "catalog show": ["qwen3-8b"],
        "catalog engines": ["vllm"],
    }.get(name, [])


def _values_for(param, scratch: Scratch) -> st.SearchStrategy[str]:
    """Half plausible values (so cases get past validation and run), half hostile ones."""
    return st.one_of(_plausible_values(param, scratch), _hostile_values(param, scratch))


def _plausible_values(param, scratch: Scratch) -> st.SearchStrategy[str]:
    import click

    name = param.opts[0] if param.opts else param.name
    if name in OUTPUT_OPTIONS:
        return st.sampled_from(["out/a", "out/b.json", "out/h.png"])
    if name == "--time-limit":
        return st.just("1")
    if isinstance(param.type, click.Choice):
        return st.sampled_from(list(param.type.choices))
    if isinstance(param.type, click.Path):
        return st.sampled_from([str(p) for key, p in scratch.files.items() if key.startswith("valid/")])
    if isinstance(param.type, click.types.IntParamType):
        return st.sampled_from(["1", "2", "4", "8"])
    if isinstance(param.type, click.types.FloatParamType):
        return st.sampled_from(["0.5", "1", "2", "8"])
    return st.sampled_from(["qwen3-8b", "H100", "8xH100", "vllm", "x"])


def _hostile_values(param, scratch: Scratch) -> st.SearchStrategy[str]:
    import click

    name = param.opts[0] if param.opts else param.name
    if name in OUTPUT_OPTIONS:
        return st.sampled_from(scratch.outputs)
    if name == "--time-limit":
        return st.sampled_from(TIME_LIMITS)
    if isinstance(param.type, click.Choice):
        return st.sampled_from([*param.type.choices, "", "bogus", "VLLM"])
    if isinstance(param.type, click.Path):
        return st.sampled_from(scratch.inputs)
    if isinstance(param.type, (click.types.IntParamType, click.types.FloatParamType)):
        return st.sampled_from(NUMBERS)
    return st.sampled_from(STRINGS + scratch.inputs[:6])


@st.composite
def cli_case(draw, scratch: Scratch, command_name: str | None = None) -> list[str]:
    """One command line: a command, its quick base arguments, then 1-3 options set to hostile values."""
    import click

    commands = _commands()
    name = command_name or draw(st.sampled_from(sorted(commands)))
    command = commands[name]
    args = name.split() + _base_args(name, scratch)
    options = [p for p in command.params if isinstance(p, click.Option) and p.opts[0] not in ("--help",)]
    arguments = [p for p in command.params if isinstance(p, click.Argument)]
    if arguments and draw(st.booleans()):
        # replace one positional argument
        position = draw(st.integers(0, len(arguments) - 1))
        value = draw(_values_for(arguments[position], scratch))
        base_positionals = [a for a in args[len(name.split()):] if not a.startswith("--")][:len(arguments)]
        if position < len(base_positionals):
            args[args.index(base_positionals[position], len(name.split()))] = value
        else:
            args.append(value)
    for option in draw(st.lists(st.sampled_from(options), min_size=1, max_size=3, unique_by=lambda p: p.name)) \
            if options else []:
        if option.is_flag:
            args.append(option.opts[0])
        else:
            args += [option.opts[0], draw(_values_for(option, scratch))]
    return args


def run_case(args: list[str], scratch: Scratch) -> tuple[int, str]:
    """(exit status, stderr) of one command line, run in-process in the scratch folder."""
    err, out = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    os.chdir(scratch.root)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            status = run_guarded(cli, list(args))
    finally:
        os.chdir(cwd)
    return status, err.getvalue()


def classify(status: int, stderr: str) -> str:
    """'plan' (0), 'infeasible' (1), 'bad input' (2), or a bug: 'internal error', 'traceback', 'exit N'."""
    if "Traceback" in stderr:
        return "traceback"
    if status == 3 or "internal error" in stderr:
        return "internal error"
    return {0: "plan", 1: "infeasible", 2: "bad input"}.get(status, f"exit {status}")


BUGS = {"internal error", "traceback"}


# ----- loaders


def json_values(max_leaves: int = 12) -> st.SearchStrategy[object]:
    """Nested values of the shapes YAML and JSON hold, with the numbers and strings that break things."""
    scalars = st.one_of(
        st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0, 1, -1, 2**31, 2**63, 10**23]),
        st.text(max_size=12), st.sampled_from(["p90", "P90", "H100", "hgx-h100-8", "fixed", "lognormal", "chat"]),
    )
    keys = st.one_of(st.text(max_size=10), st.sampled_from(
        ["ttft_ms", "tpot_ms", "attainment", "p90", "P90", "input_tokens", "output_tokens", "preset", "racks",
         "nodes", "count", "type", "name", "prices", "gpus", "node_types", "network", "oversubscription",
         "schema_version", "pools", "model", "model_type", "hidden_size", "trace", "models", "budgets"]))
    return st.recursive(scalars, lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(keys, children, max_size=4)), max_leaves=max_leaves)


def loaders() -> dict[str, tuple[object, str]]:
    """name -> (function of a path, file suffix)."""
    from layoutopt.hardware_catalog.loaders import load_gpus, load_node_types
    from layoutopt.hardware_catalog.prices import load_prices
    from layoutopt.model_catalog.catalog import model_from_config_file
    from layoutopt.plan import load_plan
    from layoutopt.sweep.spec import load_sweep_spec
    from layoutopt.topology import load_cluster
    from layoutopt.workloads.loaders import load_slo, load_workload
    from layoutopt.workloads.traces import load_trace

    return {
        "slo": (load_slo, ".yaml"), "workload": (load_workload, ".yaml"), "cluster": (load_cluster, ".yaml"),
        "prices": (load_prices, ".yaml"), "gpus": (load_gpus, ".yaml"), "node_types": (load_node_types, ".yaml"),
        "sweep": (load_sweep_spec, ".yaml"), "plan": (load_plan, ".json"), "config.json": (model_from_config_file, ".json"),
        "trace.jsonl": (load_trace, ".jsonl"), "trace.csv": (load_trace, ".csv"),
    }


def serialize(value: object, suffix: str) -> bytes:
    """``value`` as the bytes of a file of that kind (YAML keeps .inf/.nan; JSON writes NaN/Infinity)."""
    if suffix == ".yaml":
        return yaml.safe_dump(value, allow_unicode=True).encode()
    if suffix == ".csv":
        rows = value if isinstance(value, list) else [value]
        return ("input_tokens,output_tokens\n" + "\n".join(
            ",".join(str(c) for c in (r if isinstance(r, list) else [r])) for r in rows)).encode()
    if suffix == ".jsonl":
        rows = value if isinstance(value, list) else [value]
        return "\n".join(json.dumps(r) for r in rows).encode()
    return json.dumps(value).encode()


def run_loader(load, path: Path) -> str:
    """'loaded', 'bad input', or the name of the unexpected exception."""
    try:
        load(path)
    except LayoutoptError:
        return "bad input"
    except Exception as error:  # noqa: BLE001 - what the property test looks for
        return f"{type(error).__name__}: {error}"[:300]
    return "loaded"
