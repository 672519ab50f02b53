"""Read an engine wheel's Python sources without importing them (developer tooling).

A wheel is a zip file; :class:`Wheel` gives its text files, parsed syntax trees and line search.
:class:`Facts` collects facts with the file and line they were read from. The class-field reader
resolves dataclass fields and ``Literal[...]`` type aliases through the module's imports, so the
flag extractors can name each flag's type, default and choices as the engine's own argparse
setup derives them. Nothing here imports the engine: the wheels need GPUs and torch to import.
"""

from __future__ import annotations

import ast
import re
import zipfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any


class ProbeError(RuntimeError):
    """A fact the planner depends on was not where the extractor looked: the source changed."""


class Wheel:
    """Text, syntax trees and line search over the ``.py`` files of one wheel."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._zip = zipfile.ZipFile(path)
        self.names = [n for n in self._zip.namelist() if n.endswith(".py")]
        self._text: dict[str, str] = {}
        self._trees: dict[str, ast.Module] = {}

    def exists(self, rel: str) -> bool:
        return rel in self._zip.NameToInfo

    def text(self, rel: str) -> str:
        if rel not in self._text:
            if not self.exists(rel):
                raise ProbeError(f"{self.path.name} has no file {rel}")
            self._text[rel] = self._zip.read(rel).decode("utf-8")
        return self._text[rel]

    def lines(self, rel: str) -> list[str]:
        return self.text(rel).splitlines()

    def tree(self, rel: str) -> ast.Module:
        if rel not in self._trees:
            # A leading byte-order mark is valid in a Python source file (it reads as UTF-8-sig).
            self._trees[rel] = ast.parse(self.text(rel).removeprefix("\ufeff"), filename=rel)
        return self._trees[rel]

    def files_under(self, prefix: str) -> list[str]:
        return sorted(n for n in self.names if n.startswith(prefix))

    def find(self, rel: str, pattern: str, *, after: int = 0) -> int | None:
        """1-based line of the first match of regex ``pattern`` after line ``after``, or None."""
        regex = re.compile(pattern)
        for number, line in enumerate(self.lines(rel), start=1):
            if number > after and regex.search(line):
                return number
        return None

    def require(self, rel: str, pattern: str, *, after: int = 0) -> int:
        line = self.find(rel, pattern, after=after)
        if line is None:
            raise ProbeError(f"{self.path.name}: pattern {pattern!r} not found in {rel}")
        return line

    def line_text(self, rel: str, line: int) -> str:
        return self.lines(rel)[line - 1].strip()

    def module_file(self, module: str) -> str | None:
        """Wheel path of a dotted module name (package ``__init__`` or plain module)."""
        base = module.replace(".", "/")
        for rel in (f"{base}.py", f"{base}/__init__.py"):
            if self.exists(rel):
                return rel
        return None


@dataclass
class Facts:
    """Facts of one engine version, each with its source file, line and the line's text."""

    wheel: Wheel
    items: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add(self, name: str, value: Any, rel: str, line: int, note: str) -> None:
        self.items[name] = {
            "value": value,
            "source": {"file": rel, "line": line},
            "quote": self.wheel.line_text(rel, line)[:200],
            "note": " ".join(note.split()),
        }


# ----------------------------------------------------------------------------------------------
# Literal values and class fields, resolved through imports.

def literal(node: ast.AST | None) -> Any:
    """A Python literal's value, else the expression's source text prefixed with '=' (not a literal)."""
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return "=" + ast.unparse(node)


@dataclass(frozen=True)
class ClassField:
    name: str
    annotation: str
    default: Any
    choices: tuple[Any, ...] | None
    rel: str
    line: int


class SourceIndex:
    """Classes and module-level names of a wheel, with the imports that bring names in."""

    def __init__(self, wheel: Wheel) -> None:
        self.wheel = wheel

    @lru_cache(maxsize=None)
    def imports(self, rel: str) -> dict[str, tuple[str, str]]:
        """name -> (module, original name) for every ``from X import Y`` in the file (any depth)."""
        found: dict[str, tuple[str, str]] = {}
        package = rel.rsplit("/", 1)[0].replace("/", ".")
        for node in ast.walk(self.wheel.tree(rel)):
            if isinstance(node, ast.ImportFrom) and node.module is not None or (
                    isinstance(node, ast.ImportFrom) and node.level):
                module = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parts = parts[: len(parts) - node.level + 1]
                    module = ".".join(parts + ([module] if module else []))
                for alias in node.names:
                    found[alias.asname or alias.name] = (module, alias.name)
        return found

    def _module_assignment(self, rel: str, name: str) -> ast.AST | None:
        return module_assignment(self.wheel.tree(rel), name)

    def resolve_name(self, rel: str, name: str, depth: int = 0) -> tuple[str, ast.AST] | None:
        """The expression a module-level name stands for, following imports."""
        if depth > 6:
            return None
        value = self._module_assignment(rel, name)
        if value is not None:
            return rel, value
        target = self.imports(rel).get(name)
        if target is None:
            return None
        module_rel = self.wheel.module_file(target[0])
        if module_rel is None:
            return None
        return self.resolve_name(module_rel, target[1], depth + 1)

    def literal_choices(self, rel: str, node: ast.AST, depth: int = 0) -> list[Any] | None:
        """Values of every ``Literal[...]`` in a type expression (through aliases), or None."""
        if depth > 6 or node is None:
            return None
        if isinstance(node, ast.Subscript) and _name_of(node.value) == "Literal":
            items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            values = [literal(item) for item in items]
            return [v for v in values if not (isinstance(v, str) and v.startswith("="))]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            left = self.literal_choices(rel, node.left, depth + 1)
            right = self.literal_choices(rel, node.right, depth + 1)
            if left is None and right is None:
                return None
            return (left or []) + [v for v in (right or []) if v not in (left or [])]
        if isinstance(node, ast.Subscript) and _name_of(node.value) in ("Optional", "Annotated", "Union"):
            items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if _name_of(node.value) == "Annotated":
                items = items[:1]
            merged: list[Any] | None = None
            for item in items:
                values = self.literal_choices(rel, item, depth + 1)
                if values is not None:
                    merged = (merged or []) + [v for v in values if v not in (merged or [])]
            return merged
        if isinstance(node, ast.Name):
            resolved = self.resolve_name(rel, node.id)
            if resolved is not None:
                return self.literal_choices(resolved[0], resolved[1], depth + 1)
        return None

    @lru_cache(maxsize=None)
    def find_class(self, name: str, near: str) -> tuple[str, ast.ClassDef] | None:
        """A class by name: imported into ``near``, defined in ``near``, else anywhere in the wheel."""
        candidates = [near]
        target = self.imports(near).get(name)
        if target is not None:
            module_rel = self.wheel.module_file(target[0])
            if module_rel is not None:
                candidates.insert(0, module_rel)
                # a package __init__ that re-exports: follow one more import
                nested = self.imports(module_rel).get(target[1])
                if nested is not None and self.wheel.module_file(nested[0]):
                    candidates.insert(0, self.wheel.module_file(nested[0]))
        for rel in candidates:
            for node in ast.walk(self.wheel.tree(rel)):
                if isinstance(node, ast.ClassDef) and node.name == name:
                    return rel, node
        return None

    def class_fields(self, name: str, near: str) -> dict[str, ClassField]:
        """Annotated class-level fields of a (data)class and its bases, base fields first."""
        found = self.find_class(name, near)
        if found is None:
            raise ProbeError(f"class {name} (used in {near}) not found in {self.wheel.path.name}")
        rel, node = found
        fields: dict[str, ClassField] = {}
        for base in node.bases:
            base_name = _name_of(base)
            if base_name and base_name not in ("object", "Generic", "BaseModel") and self.find_class(base_name, rel):
                fields.update(self.class_fields(base_name, rel))
        for stmt in node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                annotation = ast.unparse(stmt.annotation)
                if annotation.startswith("ClassVar") or stmt.target.id.startswith("_"):
                    continue
                choices = self.literal_choices(rel, stmt.annotation)
                fields[stmt.target.id] = ClassField(
                    name=stmt.target.id, annotation=annotation, default=_field_default(stmt.value),
                    choices=tuple(choices) if choices else None, rel=rel, line=stmt.lineno)
        return fields


def _name_of(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):
        return _name_of(node.value)
    return None


def _field_default(value: ast.AST | None) -> Any:
    """The default of ``x: T = default`` / ``field(default=...)`` / ``Field(default=...)``."""
    if value is None:
        return None
    if isinstance(value, ast.Call) and _name_of(value.func) in ("field", "Field"):
        for keyword in value.keywords:
            if keyword.arg == "default":
                return literal(keyword.value)
            if keyword.arg == "default_factory":
                return "=" + ast.unparse(keyword.value) + "()"
        if value.args:
            return literal(value.args[0])
        return None
    return literal(value)


def module_assignment(tree: ast.Module, name: str) -> ast.AST | None:
    """The value a module assigns to ``name`` at its top level (``NAME = ...`` or ``NAME: T = ...``)."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return node.value
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            return node.value
    return None


def call_name(node: ast.Call) -> str | None:
    return _name_of(node.func)


def functions_named(tree: ast.AST, name: str) -> list[ast.FunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name]


def class_attribute(node: ast.ClassDef, name: str) -> tuple[Any, int] | None:
    """(value, line) of a class-level ``name = ...`` / ``name: T = ...``."""
    for stmt in node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == name:
            return literal(stmt.value), stmt.lineno
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
            return literal(stmt.value), stmt.lineno
    return None


def method_return(node: ast.ClassDef, method: str) -> tuple[Any, int] | None:
    """(value, line) of the first literal ``return`` of a method defined on the class."""
    for stmt in node.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == method:
            for inner in ast.walk(stmt):
                if isinstance(inner, ast.Return) and inner.value is not None:
                    value = literal(inner.value)
                    if not (isinstance(value, str) and value.startswith("=")):
                        return value, inner.lineno
    return None
