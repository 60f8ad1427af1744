"""Source trees read statically (``ast``): what a dotted name is, and what a class has.

The provider resolves some names at run time: a connector class from its registry, a class path
such as ``worker_extension_cls="pkg.mod.Cls"``, a worker method named in
``collective_rpc("name")``. The audit resolves them the same way from the sources at a pin,
without importing anything: modules are files, names are the module's top-level bindings
(classes, functions, assignments, imports followed to what they import), and a class's members
are those of its body and its bases', in MRO order.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

_DEPTH = 12  # imports followed before giving up (re-export chains are short)


@dataclass(frozen=True)
class Binding:
    """A top-level name of a module: ``class``, ``def``, ``value`` or ``import`` (of `target`)."""

    kind: str
    line: int
    target: str | None = None
    node: ast.ClassDef | None = None


@dataclass(frozen=True)
class Symbol:
    """What a dotted name resolved to: a ``module``, ``class``, ``def`` or ``value``, named
    where it is defined (`dotted`: ``module.name``)."""

    dotted: str
    kind: str
    module: str
    path: Path
    line: int
    node: ast.ClassDef | None = None


def _statements(body: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    """Top-level statements, into ``if``/``try``/``with`` blocks (never into functions)."""
    for statement in body:
        yield statement
        if isinstance(statement, ast.If):
            yield from _statements(statement.body)
            yield from _statements(statement.orelse)
        elif isinstance(statement, ast.Try):
            for block in (statement.body, statement.orelse, statement.finalbody):
                yield from _statements(block)
            for handler in statement.handlers:
                yield from _statements(handler.body)
        elif isinstance(statement, ast.With):
            yield from _statements(statement.body)


def _targets(statement: ast.stmt) -> list[str]:
    if isinstance(statement, ast.Assign):
        return [t.id for t in statement.targets if isinstance(t, ast.Name)]
    if isinstance(statement, ast.AnnAssign) and statement.value is not None:
        return [statement.target.id] if isinstance(statement.target, ast.Name) else []
    return []


class StaticTree:
    """The modules of some top-level package directories, parsed on demand."""

    def __init__(self, package_dirs: Sequence[Path]) -> None:
        self.roots: dict[str, Path] = {}
        for directory in package_dirs:
            self.roots.setdefault(directory.name, directory)
        self._parsed: dict[str, ast.Module | None] = {}

    def file(self, module: str) -> Path | None:
        """The file of `module` (``a/b.py`` or ``a/b/__init__.py``), if the trees have it."""
        head, *rest = module.split(".")
        root = self.roots.get(head)
        if root is None or not all(part.isidentifier() for part in rest):
            return None
        base = root.joinpath(*rest)
        for candidate in (base.with_suffix(".py") if rest else None, base / "__init__.py"):
            if candidate is not None and candidate.is_file():
                return candidate
        return None

    def tree(self, module: str) -> ast.Module | None:
        if module not in self._parsed:
            path = self.file(module)
            try:
                text = path.read_text(encoding="utf-8") if path else None
                self._parsed[module] = ast.parse(text) if text is not None else None
            except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
                self._parsed[module] = None
        return self._parsed[module]

    def _package(self, module: str) -> str:
        path = self.file(module)
        is_package = path is not None and path.name == "__init__.py"
        return module if is_package else module.rpartition(".")[0]

    def bindings(self, module: str) -> dict[str, Binding]:
        """The module's top-level names (the last binding of a name wins, as at run time)."""
        tree = self.tree(module)
        out: dict[str, Binding] = {}
        if tree is None:
            return out
        for statement in _statements(tree.body):
            if isinstance(statement, ast.ClassDef):
                out[statement.name] = Binding("class", statement.lineno, node=statement)
            elif isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
                out[statement.name] = Binding("def", statement.lineno)
            elif isinstance(statement, ast.ImportFrom):
                source = statement.module or ""
                if statement.level:
                    package = self._package(module).split(".")
                    package = package[: len(package) - statement.level + 1]
                    source = ".".join(filter(None, [*package, source]))
                for alias in statement.names:
                    if alias.name != "*":
                        bound = Binding("import", statement.lineno, f"{source}.{alias.name}")
                        out[alias.asname or alias.name] = bound
            elif isinstance(statement, ast.Import):
                for alias in statement.names:
                    name = alias.asname or alias.name.split(".")[0]
                    target = alias.name if alias.asname else name
                    out[name] = Binding("import", statement.lineno, target)
            else:
                for name in _targets(statement):
                    out[name] = Binding("value", statement.lineno)
        return out

    def resolve(self, dotted: str, depth: int = 0) -> Symbol | None:
        """What `dotted` names (imports followed), or None when the trees do not define it."""
        parts = dotted.split(".")
        if depth > _DEPTH or not all(part.isidentifier() for part in parts):
            return None
        for end in range(len(parts), 0, -1):
            module = ".".join(parts[:end])
            path = self.file(module)
            if path is None:
                continue
            rest = parts[end:]
            if not rest:
                return Symbol(dotted, "module", module, path, 1)
            binding = self.bindings(module).get(rest[0])
            if binding is None:
                return None
            if binding.kind == "import" and binding.target:
                return self.resolve(".".join([binding.target, *rest[1:]]), depth + 1)
            if len(rest) == 1:
                canonical = f"{module}.{rest[0]}"
                return Symbol(canonical, binding.kind, module, path, binding.line, binding.node)
            return None  # a member of a class: see members()
        return None

    def _base_name(self, module: str, expr: ast.expr) -> str | None:
        """The dotted name a base-class expression refers to, in `module`'s namespace."""
        if isinstance(expr, ast.Subscript):
            expr = expr.value
        parts: list[str] = []
        while isinstance(expr, ast.Attribute):
            parts.insert(0, expr.attr)
            expr = expr.value
        if not isinstance(expr, ast.Name):
            return None
        binding = self.bindings(module).get(expr.id)
        if binding is None:
            return None
        imported = binding.kind == "import" and binding.target
        head = binding.target if imported and binding.target else f"{module}.{expr.id}"
        return ".".join([head, *parts])

    def mro(self, dotted: str) -> list[Symbol]:
        """The class and its bases the trees define, depth first, left to right."""
        out: list[Symbol] = []
        seen: set[str] = set()

        def visit(name: str, depth: int) -> None:
            symbol = self.resolve(name)
            if symbol is None or symbol.node is None or depth > _DEPTH:
                return
            key = f"{symbol.module}.{symbol.node.name}"
            if key in seen:
                return
            seen.add(key)
            out.append(symbol)
            for base in symbol.node.bases:
                base_name = self._base_name(symbol.module, base)
                if base_name is not None:
                    visit(base_name, depth + 1)

        visit(dotted, 0)
        return out

    def members(self, dotted: str) -> dict[str, tuple[Symbol, int]]:
        """Every name the class (and its bases the trees define) binds in a class body: the
        class that defines it first in the MRO, and the line. Annotations without a value are
        no class attributes and are left out."""
        out: dict[str, tuple[Symbol, int]] = {}
        for symbol in self.mro(dotted):
            assert symbol.node is not None
            for statement in _statements(symbol.node.body):
                if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    names = [statement.name]
                else:
                    names = _targets(statement)
                for name in names:
                    out.setdefault(name, (symbol, statement.lineno))
        return out

    @cached_property
    def files(self) -> list[Path]:
        return sorted(p for root in self.roots.values() for p in root.rglob("*.py"))
