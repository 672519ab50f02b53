"""What the vLLM and SGLang fact probes share: finding the first file that states something, and
facts read off the flag table (facts_vllm.py, facts_sglang.py; engine_facts.py is the entry point)."""

from __future__ import annotations

import ast
from typing import Any

from engine_source import Facts, Wheel, method_return


def first(wheel: Wheel, files: list[str], pattern: str) -> tuple[str, int] | None:
    """(file, line) of the first of ``files`` with a line matching ``pattern``."""
    for rel in files:
        line = wheel.find(rel, pattern)
        if line is not None:
            return rel, line
    return None


def _flag_source(flags: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(f["source"] for f in flags if f["name"] == name)


def _choices(flags: list[dict[str, Any]], name: str) -> list[str]:
    return list(next(f for f in flags if f["name"] == name)["choices"] or [])


def flag_facts(facts: Facts, flags: list[dict[str, Any]], groups: dict[str, list[str]]) -> None:
    """Record which of a group's flags this version has (each flag's own line is in the flag table)."""
    names = {f["name"]: f for f in flags}
    for alias_owner in flags:
        for alias in alias_owner["aliases"]:
            names.setdefault(alias, alias_owner)
    for key, wanted in groups.items():
        present = [w for w in wanted if w in names]
        if not present:
            continue
        source = names[present[0]]["source"]
        facts.add(key, present, source["file"], source["line"],
                  "Flags of this group the version accepts (missing: "
                  + (", ".join(w for w in wanted if w not in names) or "none") + ").")


def with_choices(rows: list[dict[str, Any]], flags: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per --quantization choice: the config class's minimum capability where it has one."""
    by_method = {r["method"]: r for r in rows}
    source = _flag_source(flags, "--quantization")
    return [by_method.get(m) or {"method": m, "min_capability": None, "source": source}
            for m in _choices(flags, "--quantization")]


def quantization_methods(wheel: Wheel, directory: str) -> list[dict[str, Any]]:
    """Every QuantizationConfig class under ``directory`` with its method name and minimum compute capability."""
    rows = []
    for rel in wheel.files_under(directory):
        for node in ast.walk(wheel.tree(rel)):
            if not isinstance(node, ast.ClassDef):
                continue
            name = method_return(node, "get_name")
            capability = method_return(node, "get_min_capability")
            if name is None or capability is None or not isinstance(name[0], str):
                continue
            rows.append({"method": name[0], "min_capability": int(capability[0]),
                         "source": {"file": rel, "line": capability[1]}})
    return sorted({r["method"]: r for r in rows}.values(), key=lambda r: r["method"])
