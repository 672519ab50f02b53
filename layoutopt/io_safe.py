"""The one reader of every user file (YAML and JSON) and the one JSON writer of every output.

Every loader of the package (workloads, SLOs, GPU/node/price catalog files, cluster files, plan
files, sweep specs, HuggingFace ``config.json``) reads through :func:`read_yaml` or
:func:`read_json`, so each file gets the same guarantees and the same wording of errors:

- at most ``max_bytes`` bytes (checked before reading: a huge file is refused, not parsed);
- UTF-8 text (a byte order mark is allowed); other bytes name the line and column;
- nesting at most ``MAX_NESTING_DEPTH`` levels, and YAML aliases may not expand the document
  beyond ``MAX_YAML_NODES`` nodes (a "billion laughs" file is refused);
- a key given twice in one mapping is an error, never "the last one wins";
- numbers are finite: ``.inf``/``.nan`` in YAML, ``NaN``/``Infinity``/``1e400`` in JSON are
  refused with the line (YAML) or the literal (JSON).

Every problem is one :class:`~layoutopt.errors.InputError` whose field is the input's name
(``slo``, ``--gpus``, ``plan``), whose value is the path and whose message says what is allowed.

:func:`dumps_json` is the writing side: JSON without ``NaN``/``Infinity`` (which standard
parsers reject); a non-finite number becomes ``null`` and its path is listed under
``non_finite_values`` with what it was. :func:`parse_json_text` and :func:`check_tree` work on
text and parsed values, for request bodies that never were files. :func:`load_package_yaml` reads
the package's own data files (engine facts, profiles, model catalog), written and tested here,
with libyaml's parser.

Only :mod:`layoutopt.errors` is imported from the package, so every layer may use this module.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import yaml

from layoutopt.errors import InputError

# libyaml's parser with PyYAML's safe constructors: the same documents as yaml.safe_load, several
# times faster (the engine data files hold 500+ flags; every CLI run reads the profiles and catalog).
_PACKAGE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

MiB = 1024 * 1024
# Input files people write by hand or tools export (slo, workload, catalogs, clusters, sweeps,
# config.json): the largest real one is a few kB, so 4 MiB leaves room and refuses junk fast.
MAX_CONFIG_BYTES = 4 * MiB
# Plan files embed their workload (a trace's pairs included), so they may be larger.
MAX_PLAN_BYTES = 64 * MiB
# Deepest nesting any input has is 5 (a cluster file); 64 leaves room and stays far from
# Python's recursion limit, which deeply nested files would otherwise hit.
MAX_NESTING_DEPTH = 64
# Nodes a YAML document may hold once its aliases are expanded (each use of an alias counts its
# whole subtree): blocks documents of a few bytes that expand to billions of values.
MAX_YAML_NODES = 1_000_000

NON_FINITE_KEY = "non_finite_values"


def _mib(num_bytes: int) -> str:
    return f"{num_bytes / MiB:g} MiB"


def read_text(path: str | Path, field: str, what: str, max_bytes: int = MAX_CONFIG_BYTES) -> str:
    """The UTF-8 text of the file at ``path``; ``what`` names the kind of file in errors ("YAML file").

    A missing file, a directory, an unreadable file, one larger than ``max_bytes`` and one that
    is not UTF-8 each raise one ``InputError`` naming ``field`` and the path.
    """
    path = Path(path)
    shown = str(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise InputError(field, shown, f"an existing {what}", "no such file") from None
    except OSError as error:
        raise InputError(field, shown, f"a readable {what}", error.strerror or type(error).__name__) from None
    if path.is_dir():
        raise InputError(field, shown, f"a {what}, not a directory")
    if size > max_bytes:
        raise InputError(field, shown, f"a {what} of at most {_mib(max_bytes)}",
                         f"the file has {size / MiB:.1f} MiB")
    try:
        with path.open("rb") as handle:
            data = handle.read(max_bytes + 1)  # a file that grew since stat() is still capped
    except OSError as error:
        raise InputError(field, shown, f"a readable {what}", error.strerror or type(error).__name__) from None
    if len(data) > max_bytes:
        raise InputError(field, shown, f"a {what} of at most {_mib(max_bytes)}")
    return decode_utf8(data, field, shown, what)


def decode_utf8(data: bytes, field: str, shown: str, what: str = "text file") -> str:
    """``data`` decoded as UTF-8 (an initial byte order mark dropped); other bytes are an ``InputError``."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        column = error.start - (data.rfind(b"\n", 0, error.start) + 1) + 1
        byte = data[error.start:error.start + 1].hex()
        raise InputError(field, shown, f"a {what} in UTF-8",
                         f"line {line}, column {column}: byte 0x{byte} is not UTF-8; save the file as UTF-8") from None


# ----- YAML


class _SafeLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys, non-finite numbers and nesting beyond the cap."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):  # type: ignore[no-untyped-def]
        self._depth += 1
        try:
            if self._depth > MAX_NESTING_DEPTH:
                mark = self.peek_event().start_mark
                raise yaml.constructor.ConstructorError(
                    None, None, f"nesting deeper than {MAX_NESTING_DEPTH} levels", mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        if isinstance(node, yaml.MappingNode):
            self.flatten_mapping(node)
        seen: set = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                hash(key)
            except TypeError:
                continue  # SafeLoader itself reports unhashable keys
            if key in seen:  # True and 1 count as one key, as they do in the dict built next
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} appears twice", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:
        value = super().construct_yaml_float(node)
        if not math.isfinite(value):
            raise yaml.constructor.ConstructorError(
                None, None, f"{node.value!r} is not a finite number; numbers must be finite", node.start_mark)
        return value


    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        try:
            return super().construct_yaml_int(node)
        except ValueError:  # more digits than Python converts (4300)
            raise yaml.constructor.ConstructorError(
                None, None, f"integer of {len(node.value):,} characters is too long", node.start_mark) from None


_SafeLoader.add_constructor("tag:yaml.org,2002:float", _SafeLoader.construct_yaml_float)
_SafeLoader.add_constructor("tag:yaml.org,2002:int", _SafeLoader.construct_yaml_int)


def _expanded_nodes(root: yaml.Node) -> int:
    """Nodes of the document with every alias expanded (shared subtrees counted once per use).

    Returns ``MAX_YAML_NODES + 1`` for a node that contains itself (an alias inside its anchor).
    """
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    # iterative post-order walk over the node graph (aliases make it a DAG, or a cycle)
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        if not children_done and id(node) in open_nodes:
            return MAX_YAML_NODES + 1  # everything above it on the stack is its own subtree
        if isinstance(node, yaml.ScalarNode):
            sizes[id(node)] = 1
            continue
        children = [child for pair in node.value for child in pair] if isinstance(node, yaml.MappingNode) \
            else list(node.value)
        if children_done:
            sizes[id(node)] = min(MAX_YAML_NODES + 1, 1 + sum(sizes[id(c)] for c in children))
            continue
        open_nodes.add(id(node))
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in sizes)
    return sizes[id(root)]


def parse_yaml_text(text: str, field: str, shown: str) -> Any:
    """Parse YAML ``text`` (one document) with the guarantees of this module; ``shown`` names its source."""
    loader = None
    try:
        loader = _SafeLoader(text)  # its reader refuses control characters right away
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_nodes(node) > MAX_YAML_NODES:
            raise InputError(field, shown, f"YAML of at most {MAX_YAML_NODES:,} values once aliases are expanded",
                             "the file's anchors and aliases (*name) expand it beyond that")
        return loader.construct_document(node)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error)
        raise InputError(field, shown, "valid YAML", f"{where}{problem}") from None
    except RecursionError:
        raise InputError(field, shown, "valid YAML", f"nesting deeper than {MAX_NESTING_DEPTH} levels") from None
    finally:
        if loader is not None:
            loader.dispose()


def read_yaml(path: str | Path, field: str, max_bytes: int = MAX_CONFIG_BYTES) -> Any:
    """Parse the YAML file at ``path``; an empty file is an error. ``field`` names the input in errors."""
    shown = str(path)
    data = parse_yaml_text(read_text(path, field, "YAML file", max_bytes), field, shown)
    if data is None:
        raise InputError(field, shown, "a YAML mapping", "the file is empty")
    return data


# ----- JSON


class _JsonProblem(ValueError):
    pass


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _JsonProblem(f"key {key!r} appears twice in one object")
        result[key] = value
    return result


def _no_constant(name: str) -> float:
    raise _JsonProblem(f"{name} is not a JSON number; numbers must be finite")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _JsonProblem(f"{text} is too large to be a finite number")
    return value


def depth_of(value: Any, limit: int = MAX_NESTING_DEPTH) -> int:
    """Nesting depth of lists and dicts in ``value`` (a scalar is 0), counted up to ``limit + 1``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list, tuple)):
            depth += 1
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
            stack.extend((child, depth) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def parse_json_text(text: str | bytes, field: str, shown: str, max_depth: int = MAX_NESTING_DEPTH) -> Any:
    """Parse JSON ``text`` with the guarantees of this module (bytes must be UTF-8); ``shown`` names its source."""
    if isinstance(text, (bytes, bytearray)):
        text = decode_utf8(bytes(text), field, shown, "JSON text")
    try:
        data = json.loads(text, object_pairs_hook=_unique_pairs, parse_constant=_no_constant,
                          parse_float=_finite_float)
    except json.JSONDecodeError as error:
        raise InputError(field, shown, "valid JSON", f"line {error.lineno}, column {error.colno}: {error.msg}") from None
    except _JsonProblem as error:
        raise InputError(field, shown, "valid JSON", str(error)) from None
    except RecursionError:
        raise InputError(field, shown, "valid JSON", f"nesting deeper than {max_depth} levels") from None
    except ValueError as error:  # e.g. an integer literal with more digits than Python converts
        raise InputError(field, shown, "valid JSON", str(error).split(";")[0]) from None
    if depth_of(data, max_depth) > max_depth:
        raise InputError(field, shown, "valid JSON", f"nesting deeper than {max_depth} levels")
    return data


def read_json(path: str | Path, field: str, max_bytes: int = MAX_CONFIG_BYTES) -> Any:
    """Parse the JSON file at ``path``. ``field`` names the input in errors."""
    return parse_json_text(read_text(path, field, "JSON file", max_bytes), field, str(path))


def check_tree(value: Any, field: str, max_depth: int = MAX_NESTING_DEPTH) -> None:
    """Refuse parsed data (a request body) nested beyond ``max_depth`` or holding a non-finite float."""
    if depth_of(value, max_depth) > max_depth:
        raise InputError(field, "...", f"data nested at most {max_depth} levels deep")
    path = _first_non_finite(value)
    if path is not None:
        where, number = path
        raise InputError(f"{field}{where}", number, "a finite number (NaN and infinity are not allowed)")


def _first_non_finite(value: Any, where: str = "") -> tuple[str, float] | None:
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack:
        item, at = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return at, item
        if isinstance(item, dict):
            stack.extend((v, f"{at}.{k}") for k, v in item.items())
        elif isinstance(item, (list, tuple)):
            stack.extend((v, f"{at}[{i}]") for i, v in enumerate(item))
    return None


# ----- JSON out


def _pointer_part(key: object) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")


def finite_json(value: Any) -> tuple[Any, dict[str, str]]:
    """(``value`` with every non-finite float replaced by None, {JSON pointer: 'inf' | '-inf' | 'nan'}).

    Paths are JSON pointers (RFC 6901): ``/predicted/ttft_ms/p99``, ``/pools/0/capacity_rps``.
    """
    replaced: dict[str, str] = {}

    def walk(item: Any, at: str) -> Any:
        if isinstance(item, float) and not math.isfinite(item):
            replaced[at] = "nan" if math.isnan(item) else ("inf" if item > 0 else "-inf")
            return None
        if isinstance(item, dict):
            return {k: walk(v, f"{at}/{_pointer_part(k)}") for k, v in item.items()}
        if isinstance(item, (list, tuple)):
            return [walk(v, f"{at}/{i}") for i, v in enumerate(item)]
        return item

    return walk(value, ""), replaced


def dumps_json(value: Any, indent: int | None = 2) -> str:
    """Standard JSON text of plain data (dicts, lists, numbers, strings): never ``NaN`` or ``Infinity``.

    A non-finite float is written as ``null``; when ``value`` is an object, the key
    ``non_finite_values`` then maps the JSON pointer of each to what it was
    (``"/predicted/ttft_ms/p99": "inf"``: the model predicts no finite value, e.g. for an
    overloaded deployment whose queue grows without end). :func:`restore_non_finite` undoes it.
    """
    clean, replaced = finite_json(value)
    if replaced and isinstance(clean, dict):
        clean = {**clean, NON_FINITE_KEY: replaced}
    return json.dumps(clean, indent=indent, allow_nan=False)


_NON_FINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


def restore_non_finite(data: Any, field: str, shown: str) -> Any:
    """``data`` (parsed from :func:`dumps_json` output) with its ``non_finite_values`` put back in place."""
    if not isinstance(data, dict) or NON_FINITE_KEY not in data:
        return data
    data = dict(data)
    replaced = data.pop(NON_FINITE_KEY)
    if not isinstance(replaced, dict):
        raise InputError(f"{field}.{NON_FINITE_KEY}", shown, "a mapping of JSON pointer -> 'inf', '-inf' or 'nan'")
    for pointer, word in replaced.items():
        parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]] if pointer else []
        parent: Any = data
        try:
            for part in parts[:-1]:
                parent = parent[int(part)] if isinstance(parent, list) else parent[part]
            last = parts[-1]
            index: Any = int(last) if isinstance(parent, list) else last
            if word not in _NON_FINITE or parent[index] is not None:
                raise ValueError
            parent[index] = _NON_FINITE[word]
        except (KeyError, IndexError, ValueError, TypeError):
            raise InputError(f"{field}.{NON_FINITE_KEY}", f"{pointer}: {word}",
                             "the pointer of a null value and one of 'inf', '-inf', 'nan'") from None
    return data


def load_package_yaml(text: str) -> Any:
    """A YAML document of the package's own data (``yaml.safe_load``'s result, parsed by libyaml)."""
    return yaml.load(text, Loader=_PACKAGE_LOADER)
