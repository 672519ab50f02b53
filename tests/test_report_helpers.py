"""Shared by the report tests: the fixed hand-built plans and a parser for generated commands."""

from __future__ import annotations

import json
import re
import shlex
from functools import lru_cache
from pathlib import Path

import yaml

from layoutopt.plan import Plan

FIXTURES = Path(__file__).resolve().parent / "fixtures"
GOLDEN = Path(__file__).resolve().parent / "golden"
PLAN_NAMES = ("colocated", "disaggregated", "multinode_pp", "moe_ep_dp")
# HuggingFace ids given explicitly so the golden files do not depend on the model catalog.
MODEL_IDS = {"qwen3-32b": "Qwen/Qwen3-32B", "llama-3.1-70b": "meta-llama/Llama-3.1-70B",
             "llama-3.1-405b": "meta-llama/Llama-3.1-405B", "qwen3-235b-a22b": "Qwen/Qwen3-235B-A22B"}
ENGINE_HEADER = re.compile(r"engine: (vllm|sglang) (\d+\.\d+\.\d+)")
ENGINE_STARTS = (("vllm", "serve"), ("python3", "-m", "sglang.launch_server"))


@lru_cache(maxsize=None)
def fixture_plan(name: str) -> Plan:
    return Plan.model_validate(json.loads((FIXTURES / f"plan_{name}.json").read_text()))


def engine_named_in(text: str) -> tuple[str, str]:
    """(engine, version) from the '# ... engine: vllm 0.13.0' header of a generated file."""
    match = ENGINE_HEADER.search(text)
    assert match, "generated file does not name its engine version"
    return match.group(1), match.group(2)


def engine_commands(shell_text: str) -> list[list[str]]:
    """Every engine command line in a shell script or an sh -c string, as tokens."""
    return program_commands(shell_text, ENGINE_STARTS)


def program_commands(shell_text: str, starts) -> list[list[str]]:
    """Every command line starting with one of ``starts`` (argv prefixes) in a script, as tokens."""
    starts = [tuple(s) for s in starts]
    joined = shell_text.replace("\\\n", " ")
    commands = []
    for line in re.split(r"\n|&&", joined):
        if line.strip().startswith("#"):
            continue
        tokens = shlex.split(line, comments=False)
        if tokens and tokens[0] == "exec":
            tokens = tokens[1:]
        if any(tuple(tokens[:len(start)]) == start for start in starts):
            commands.append(tokens)
    return commands


def manifest_program_commands(text: str, program) -> list[list[str]]:
    """The argv of every container of a manifest that runs ``program`` (after an ``sh -c 'pip install'``)."""
    found = []
    for doc in yaml.safe_load_all(text):
        template = (doc.get("spec") or {}).get("template")
        for container in (template or {}).get("spec", {}).get("containers", []):
            argv = list(container.get("command", [])) + list(container.get("args", []))
            if argv[:2] == ["/bin/sh", "-c"]:
                argv = argv[3:]
            if tuple(argv[:len(program)]) == tuple(program):
                found.append(argv)
    return found


def test_engine_commands_parses_continuations_and_sh_c():
    script = "#!/usr/bin/env bash\n# vllm serve not-a-command\nexec vllm serve m \\\n  --port 8000 \\\n  --a '{\"x\":1}'\n"
    assert engine_commands(script) == [["vllm", "serve", "m", "--port", "8000", "--a", '{"x":1}']]
    inline = 'ray start --head && exec python3 -m sglang.launch_server --model-path m --node-rank "${I}"'
    assert engine_commands(inline) == [["python3", "-m", "sglang.launch_server", "--model-path", "m",
                                        "--node-rank", "${I}"]]


def test_engine_named_in_header():
    assert engine_named_in("# x\n# engine: sglang 0.5.3 (flags ...)\n") == ("sglang", "0.5.3")
