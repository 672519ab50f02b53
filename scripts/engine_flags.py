"""Extract an engine version's command-line flags from its wheel, the way its argparse setup adds them.

vLLM: ``EngineArgs.add_cli_args`` (``vllm/engine/arg_utils.py``) adds each flag with
``**<group>_kwargs["field"]`` where ``<group>_kwargs = get_kwargs(SomeConfig)``: the type, default
and choices come from the config dataclass field (``Literal[...]`` types become choices, booleans
become ``--x/--no-x``). The server's own flags (``--host``, ``--port``, ``--headless``...) come
from the frontend dataclass and ``make_arg_parser``.

SGLang 0.5.3 adds flags with explicit ``parser.add_argument`` calls in ``ServerArgs.add_cli_args``;
SGLang 0.5.2x declares them as ``A[T, Arg(...)]`` fields of the namespaces under
``sglang/srt/arg_groups/fields/`` and adds a few by hand in ``add_cli_args``.
"""

from __future__ import annotations

import ast
from typing import Any

from engine_source import ClassField, SourceIndex, Wheel, call_name, functions_named, literal


def _flag(names: list[str], rel: str, line: int, **spec: Any) -> dict[str, Any]:
    choices = spec.get("choices")
    if isinstance(choices, (set, frozenset, tuple)):
        choices = sorted(choices, key=str)
    return {
        "name": names[0], "aliases": names[1:], "type": spec.get("type"), "default": _plain(spec.get("default")),
        "choices": [_plain(c) for c in choices] if isinstance(choices, list) else None,
        "action": spec.get("action"), "boolean_optional": bool(spec.get("boolean_optional", False)),
        "source": {"file": rel, "line": line},
    }


def _plain(value: Any) -> Any:
    """YAML-safe value: containers become lists/dicts, anything exotic its text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)


def _from_field(field: ClassField) -> dict[str, Any]:
    annotation = field.annotation
    spec: dict[str, Any] = {"default": field.default, "choices": list(field.choices) if field.choices else None}
    base = annotation.split("|")[0].strip()
    if base == "bool":
        spec.update(type="bool", boolean_optional=True)
    else:
        spec["type"] = annotation
    return spec


def _keyword_spec(index: SourceIndex, rel: str, call: ast.Call, owner_fields) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    for keyword in call.keywords:
        if keyword.arg is None:
            continue
        if keyword.arg in ("choices",):
            values = literal(keyword.value)
            if isinstance(values, str) and values.startswith("="):
                resolved = _resolve_expr_values(index, rel, keyword.value)
                values = resolved
            # A set's order changes between runs (string hashing): sort it so the files are reproducible.
            spec["choices"] = (sorted(values, key=str) if isinstance(values, (set, frozenset)) else
                               list(values) if isinstance(values, (list, tuple)) else None)
        elif keyword.arg == "type":
            spec["type"] = ast.unparse(keyword.value)
        elif keyword.arg == "action":
            value = literal(keyword.value)
            spec["action"] = value if not (isinstance(value, str) and value.startswith("=")) else value[1:]
            if spec["action"] in ("store_true", "store_false"):
                spec["type"] = "bool"
            if "BooleanOptionalAction" in str(spec["action"]):
                spec.update(type="bool", boolean_optional=True)
        elif keyword.arg == "default":
            value = literal(keyword.value)
            if isinstance(value, str) and value.startswith("=") and "." in value:
                attribute = value[1:].rsplit(".", 1)[-1]
                if owner_fields is not None and attribute in owner_fields:
                    value = owner_fields[attribute].default
            spec["default"] = value
    return spec


def _resolve_expr_values(index: SourceIndex, rel: str, node: ast.AST) -> list[Any] | None:
    """Values of a name or ``list(NAME)`` / ``NAME.keys()`` used as choices, when the name is a literal."""
    if isinstance(node, ast.Call) and node.args and call_name(node) in ("list", "sorted", "set", "tuple"):
        return _resolve_expr_values(index, rel, node.args[0])
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "keys":
        return _resolve_expr_values(index, rel, node.func.value)
    if isinstance(node, ast.Name):
        resolved = index.resolve_name(rel, node.id)
        if resolved is None:
            return None
        value = literal(resolved[1])
        if isinstance(value, dict):
            return list(value)
        if isinstance(value, (set, frozenset)):
            return sorted(value, key=str)
        if isinstance(value, (list, tuple)):
            return list(value)
        choices = index.literal_choices(resolved[0], resolved[1])
        if choices:
            return choices
        return _resolve_expr_values(index, resolved[0], resolved[1])
    return None


def _string_names(call: ast.Call) -> list[str]:
    return [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
            and a.value.startswith("-")]


def _argparse_calls(function: ast.AST) -> list[ast.Call]:
    return [n for n in ast.walk(function) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr == "add_argument"]


def _kwargs_bindings(index: SourceIndex, rel: str, function: ast.AST) -> dict[str, tuple[str, str | None]]:
    """``x_kwargs = get_kwargs(Cls)`` -> {x_kwargs: (Cls, None)}; ``get_kwargs(Cls)["f"]`` -> (Cls, f)."""
    bindings: dict[str, tuple[str, str | None]] = {}
    for node in ast.walk(function):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        value, field = node.value, None
        if isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Constant):
            field, value = value.slice.value, value.value
        if isinstance(value, ast.Call) and call_name(value) == "get_kwargs" and value.args:
            class_name = ast.unparse(value.args[0])
            if class_name == "cls":
                continue
            bindings[node.targets[0].id] = (class_name, field)
    return bindings


def vllm_flags(wheel: Wheel) -> list[dict[str, Any]]:
    index = SourceIndex(wheel)
    rel = "vllm/engine/arg_utils.py"
    flags: list[dict[str, Any]] = []
    engine_fields = index.class_fields("EngineArgs", rel)
    for function in functions_named(wheel.tree(rel), "add_cli_args"):
        bindings = _kwargs_bindings(index, rel, function)
        for call in _argparse_calls(function):
            names = _string_names(call)
            if not names:
                continue
            spec: dict[str, Any] = {}
            for keyword in call.keywords:
                if keyword.arg is not None:
                    continue
                target = keyword.value
                if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and isinstance(
                        target.slice, ast.Constant) and target.value.id in bindings:
                    class_name, _ = bindings[target.value.id]
                    spec.update(_from_field(index.class_fields(class_name, rel)[target.slice.value]))
                elif isinstance(target, ast.Name) and target.id in bindings and bindings[target.id][1]:
                    class_name, field_name = bindings[target.id]
                    spec.update(_from_field(index.class_fields(class_name, rel)[field_name]))
            spec.update(_keyword_spec(index, rel, call, engine_fields))
            flags.append(_flag(names, rel, call.lineno, **spec))
    flags += _vllm_frontend_flags(wheel, index)
    return _dedupe(flags)


def _vllm_frontend_flags(wheel: Wheel, index: SourceIndex) -> list[dict[str, Any]]:
    """``vllm serve``'s server flags: every field of FrontendArgs plus ``make_arg_parser``'s own."""
    rel = next(r for r in ("vllm/entrypoints/common/cli_args.py", "vllm/entrypoints/openai/cli_args.py")
               if wheel.exists(r))
    flags = []
    for name, field in index.class_fields("FrontendArgs", rel).items():
        flags.append(_flag(["--" + name.replace("_", "-")], field.rel, field.line, **_from_field(field)))
    frontend_fields = index.class_fields("FrontendArgs", rel)
    for function in functions_named(wheel.tree(rel), "make_arg_parser"):
        for call in _argparse_calls(function):
            names = _string_names(call)
            if names:
                flags.append(_flag(names, rel, call.lineno, **_keyword_spec(index, rel, call, frontend_fields)))
    return flags


def sglang_flags(wheel: Wheel) -> list[dict[str, Any]]:
    index = SourceIndex(wheel)
    rel = "sglang/srt/server_args.py"
    flags: list[dict[str, Any]] = []
    fields_dir = "sglang/srt/arg_groups/fields/"
    if wheel.files_under(fields_dir):
        for field_rel in wheel.files_under(fields_dir):
            flags += _sglang_annotated_flags(index, field_rel)
    server_fields = index.class_fields("ServerArgs", rel)
    for function in functions_named(wheel.tree(rel), "add_cli_args"):
        for call in _argparse_calls(function):
            names = _string_names(call)
            if names:
                flags.append(_flag(names, rel, call.lineno, **_keyword_spec(index, rel, call, server_fields)))
    return _dedupe(flags)


def _sglang_annotated_flags(index: SourceIndex, rel: str) -> list[dict[str, Any]]:
    """Flags of ``name: A[T, "help"]`` / ``A[T, Arg(...)]`` fields (``add_cli_args_from_dataclass``)."""
    flags = []
    for node in ast.walk(index.wheel.tree(rel)):
        if not isinstance(node, ast.ClassDef):
            continue
        for stmt in node.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                    and isinstance(stmt.annotation, ast.Subscript) and ast.unparse(stmt.annotation.value) == "A"):
                continue
            items = stmt.annotation.slice.elts if isinstance(stmt.annotation.slice, ast.Tuple) else []
            if len(items) < 2:
                continue
            type_node, meta = items[0], items[1]
            arg: dict[str, Any] = {}
            if isinstance(meta, ast.Call) and call_name(meta) == "Arg":
                arg = {k.arg: k.value for k in meta.keywords if k.arg}
            elif not (isinstance(meta, ast.Constant) and isinstance(meta.value, str)):
                continue
            if "no_cli" in arg and literal(arg["no_cli"]) is True:
                continue
            name = stmt.target.id
            cli_name = literal(arg["cli_name"]) if "cli_name" in arg else "--" + name.replace("_", "-")
            aliases = literal(arg["aliases"]) if "aliases" in arg else []
            type_text = ast.unparse(type_node)
            choices = None
            if "choices" in arg:
                choices = literal(arg["choices"])
                if isinstance(choices, str) and choices.startswith("="):
                    choices = _resolve_expr_values(index, rel, arg["choices"])
            if choices is None:
                choices = index.literal_choices(rel, type_node)
            spec: dict[str, Any] = {"type": type_text, "default": literal(stmt.value), "choices": choices}
            if "action" in arg:
                action = literal(arg["action"])
                spec["action"] = action[1:] if isinstance(action, str) and action.startswith("=") else action
            if type_text == "bool" and "action" not in arg:
                spec.update(type="bool", action="store_true")
            flags.append(_flag([cli_name] + list(aliases or []), rel, stmt.lineno, **spec))
    return flags


def _dedupe(flags: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per flag name (the first registration wins, as argparse would refuse a second)."""
    seen: dict[str, dict[str, Any]] = {}
    for flag in flags:
        seen.setdefault(flag["name"], flag)
    return sorted(seen.values(), key=lambda f: f["name"])
