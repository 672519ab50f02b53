"""Flags of the programs emit writes besides the engines' servers: the routers and the serving benchmarks.

- vllm-router / sglang-router: ``RouterArgs.add_cli_args`` in ``<package>/router_args.py``, as the
  standalone launcher calls it (``use_router_prefix=False``: ``f"--{prefix}policy"`` is ``--policy``).
- ``vllm bench serve``: ``add_cli_args`` of ``vllm/benchmarks/serve.py``, which first calls
  ``add_dataset_parser`` (``vllm/benchmarks/datasets/datasets.py`` in 0.33, ``vllm/benchmarks/datasets.py``
  in 0.13).
- SGLang's serving benchmark: ``cli_main`` of ``sglang/benchmark/serving.py`` (0.5.23; ``sglang.bench_serving``
  is its deprecated alias) or the ``__main__`` block of ``sglang/bench_serving.py`` (0.5.3).

Every flag records the file and line of its ``add_argument`` call.
"""

from __future__ import annotations

import ast
from typing import Any

from engine_flags import _argparse_calls, _dedupe, _flag, _keyword_spec
from engine_source import ProbeError, SourceIndex, Wheel, functions_named

ROUTER_PACKAGES = {"vllm-router": "vllm_router", "sglang-router": "sglang_router"}
# How emit starts each program (the console script or module the package's launcher defines).
ROUTER_PROGRAMS = {"vllm-router": ["vllm-router"], "sglang-router": ["python3", "-m", "sglang_router.launch_router"]}


def _names(call: ast.Call, prefixes: dict[str, str]) -> list[str]:
    """The option strings of an ``add_argument`` call; f-strings take ``prefixes``' values for their names."""
    names = []
    for arg in call.args:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            text = arg.value
        elif isinstance(arg, ast.JoinedStr):
            parts = []
            for value in arg.values:
                if isinstance(value, ast.Constant):
                    parts.append(str(value.value))
                elif isinstance(value, ast.FormattedValue) and isinstance(value.value, ast.Name) \
                        and value.value.id in prefixes:
                    parts.append(prefixes[value.value.id])
                else:
                    raise ProbeError(f"option name {ast.unparse(arg)} has an unknown part")
            text = "".join(parts)
        else:
            continue
        if text.startswith("-"):
            names.append(text)
    return names


def _with_helpers(tree: ast.Module, scopes: list[ast.AST]) -> list[ast.AST]:
    """``scopes`` plus the module's own functions they call, transitively (``add_random_dataset_base_args``)."""
    local = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    found, todo = list(scopes), list(scopes)
    while todo:
        for node in ast.walk(todo.pop()):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in local \
                    and local[node.func.id] not in found:
                found.append(local[node.func.id])
                todo.append(local[node.func.id])
    return found


def _flags_of(index: SourceIndex, rel: str, scopes: list[ast.AST], owner: str | None = None,
              prefixes: dict[str, str] | None = None) -> list[dict[str, Any]]:
    fields = index.class_fields(owner, rel) if owner else None
    flags = []
    for scope in _with_helpers(index.wheel.tree(rel), scopes):
        for call in _argparse_calls(scope):
            names = _names(call, prefixes or {})
            if names:
                flags.append(_flag(names, rel, call.lineno, **_keyword_spec(index, rel, call, fields)))
    return flags


def router_flags(wheel: Wheel, package: str) -> tuple[list[str], list[dict[str, Any]]]:
    """(program argv, flags) of a router package's standalone launcher."""
    module = ROUTER_PACKAGES[package]
    rel = f"{module}/router_args.py"
    scopes = list(functions_named(wheel.tree(rel), "add_cli_args"))
    if not scopes:
        raise ProbeError(f"{wheel.path.name}: no add_cli_args in {rel}")
    launcher = f"{module}/launch_router.py"
    wheel.require(launcher, r"add_cli_args\(parser, use_router_prefix=False\)")
    flags = _flags_of(SourceIndex(wheel), rel, scopes, "RouterArgs", {"prefix": ""})
    return ROUTER_PROGRAMS[package], _dedupe(flags)


def vllm_bench_flags(wheel: Wheel) -> dict[str, Any]:
    """``vllm bench serve``: its flags and where they are added."""
    index = SourceIndex(wheel)
    serve = "vllm/benchmarks/serve.py"
    datasets = next(r for r in ("vllm/benchmarks/datasets/datasets.py", "vllm/benchmarks/datasets.py")
                    if wheel.exists(r))
    scopes = list(functions_named(wheel.tree(serve), "add_cli_args"))
    if not scopes or not wheel.find(serve, r"^    add_dataset_parser\(parser\)"):
        raise ProbeError(f"{wheel.path.name}: vllm bench serve's add_cli_args changed")
    flags = _flags_of(index, datasets, list(functions_named(wheel.tree(datasets), "add_dataset_parser")))
    flags += _flags_of(index, serve, scopes)
    return {"program": ["vllm", "bench", "serve"], "flags": _dedupe(flags)}


def sglang_bench_flags(wheel: Wheel) -> dict[str, Any]:
    """SGLang's serving benchmark: its module, flags and where they are added."""
    index = SourceIndex(wheel)
    rel = "sglang/benchmark/serving.py"
    if wheel.exists(rel):
        scopes = list(functions_named(wheel.tree(rel), "cli_main"))
        module = "sglang.benchmark.serving"
    else:
        rel, module = "sglang/bench_serving.py", "sglang.bench_serving"
        scopes = [node for node in wheel.tree(rel).body if isinstance(node, ast.If)
                  and "__main__" in ast.unparse(node.test)]
    if not scopes:
        raise ProbeError(f"{wheel.path.name}: no argument parser found in {rel}")
    return {"program": ["python3", "-m", module], "flags": _dedupe(_flags_of(index, rel, scopes))}
