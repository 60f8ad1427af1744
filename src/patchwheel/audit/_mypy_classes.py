"""The plugin contract as mypy sees it: consumer classes deriving from provider classes.

Part of the mypy worker (``_mypy_worker``): for every class of a consumer module whose MRO holds
a provider class, each method the class body defines with the nearest provider definition of
the same name (the method the provider calls), and the provider's abstract methods that nothing
in the MRO implements. Plain JSON out, like the rest of the worker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from mypy.nodes import (
    ARG_NAMED,
    ARG_NAMED_OPT,
    ARG_OPT,
    ARG_POS,
    ARG_STAR,
    ARG_STAR2,
    IS_ABSTRACT,
    Block,
    ClassDef,
    Decorator,
    FuncDef,
    IfStmt,
    MypyFile,
    OverloadedFuncDef,
    Statement,
    SymbolNode,
    TryStmt,
    TypeInfo,
    Var,
    WithStmt,
)

Json = dict[str, Any]

_KINDS = {
    ARG_POS: ("positional-or-keyword", True),
    ARG_OPT: ("positional-or-keyword", False),
    ARG_STAR: ("var-positional", False),
    ARG_NAMED: ("keyword-only", True),
    ARG_NAMED_OPT: ("keyword-only", False),
    ARG_STAR2: ("var-keyword", False),
}


def class_defs(statements: list[Statement]) -> Iterator[ClassDef]:
    """Every class statement of a module body, nested classes and conditional ones included
    (never those inside functions: they are not part of an importable API)."""
    for statement in statements:
        if isinstance(statement, ClassDef):
            yield statement
            yield from class_defs(statement.defs.body)
        elif isinstance(statement, Block):
            yield from class_defs(statement.body)
        elif isinstance(statement, IfStmt):
            for block in (*statement.body, statement.else_body):
                if block is not None:
                    yield from class_defs(block.body)
        elif isinstance(statement, TryStmt):
            blocks = [statement.body, *statement.handlers, statement.else_body]
            for block in (*blocks, statement.finally_body):
                if block is not None:
                    yield from class_defs(block.body)
        elif isinstance(statement, WithStmt):
            yield from class_defs(statement.body.body)


def _function(node: SymbolNode | None) -> tuple[FuncDef, bool] | None:
    """The function that describes a class member, and whether it is a property."""
    if isinstance(node, Decorator):
        return node.func, node.func.is_property or node.var.is_property
    if isinstance(node, OverloadedFuncDef):
        item = node.impl or (node.items[0] if node.items else None)
        func = item.func if isinstance(item, Decorator) else item
        return (func, node.is_property) if isinstance(func, FuncDef) else None
    if isinstance(node, FuncDef):
        return node, node.is_property
    return None


def _member(info: TypeInfo, name: str, node: SymbolNode | None) -> Json | None:
    """A member record (binding, caller-side parameters); None for what is not a method or
    attribute (a nested class, a type alias)."""
    symbol = f"{info.fullname}.{name}"
    if isinstance(node, Var):
        binding = "property" if node.is_property else "attribute"
        return {"symbol": symbol, "binding": binding, "params": []}
    found = _function(node)
    if found is None:
        return None
    func, is_property = found
    binding = (
        "property"
        if is_property
        else "static"
        if func.is_static
        else "class"
        if func.is_class
        else "instance"
    )
    names, kinds = list(func.arg_names), list(func.arg_kinds)
    if binding != "static" and names:
        names, kinds = names[1:], kinds[1:]  # self / cls
    params = []
    for arg_name, kind in zip(names, kinds, strict=True):
        label, required = _KINDS[kind]
        if arg_name is None and kind in (ARG_POS, ARG_OPT):
            label = "positional-only"
        params.append(
            {
                "name": arg_name or "",
                "kind": label,
                "default": None if required or kind in (ARG_STAR, ARG_STAR2) else "...",
            }
        )
    return {
        "symbol": symbol,
        "binding": binding,
        "params": [] if is_property else params,
        "abstract": func.abstract_status == IS_ABSTRACT,
    }


class ClassCollector:
    """Class records of one build; `is_provider` tells provider names from consumer ones and
    `definition` turns a provider symbol into where it is defined."""

    def __init__(
        self, is_provider: Callable[[str], bool], definition: Callable[[str, Any], Json]
    ) -> None:
        self.is_provider = is_provider
        self.definition = definition

    def records(self, tree: MypyFile) -> Iterator[Json]:
        for classdef in class_defs(tree.defs):
            record = self.record(classdef)
            if record is not None:
                yield record

    def record(self, classdef: ClassDef) -> Json | None:
        info = classdef.info
        providers = [base for base in info.mro[1:] if self.is_provider(base.fullname)]
        if not providers or self.is_provider(info.fullname):
            return None
        methods = []
        for name, table in info.names.items():
            if table.plugin_generated:
                continue
            own = _member(info, name, table.node)
            if own is None or own["binding"] == "attribute":
                continue
            node = table.node
            found = _function(node)
            at = found[0] if found else node  # the `def` line, not a decorator's
            line = getattr(at, "line", classdef.line)
            methods.append(
                {
                    "line": line if line > 0 else classdef.line,
                    "column": max(getattr(at, "column", 0), 0),
                    "own": {**own, **self.definition(own["symbol"], node)},
                    "base": self.base(providers, name),
                }
            )
        return {
            "line": classdef.line,
            "symbol": info.fullname,
            "provider_bases": [base.fullname for base in providers],
            "provider_members": self.members(providers),
            "methods": methods,
            "missing_abstract": list(self.missing_abstract(info)),
            "abstract": any(
                not self.is_provider(self.declarer(info, name).fullname)
                for name, _ in info.abstract_attributes
            ),
        }

    @staticmethod
    def members(providers: list[TypeInfo]) -> list[tuple[str, list[str]]]:
        """Every method of the provider classes, nearest first, with its parameter names."""
        out: dict[str, list[str]] = {}
        for base in providers:
            for name, table in base.names.items():
                if name not in out and _function(table.node) is not None:
                    member = _member(base, name, table.node)
                    out[name] = [p["name"] for p in member["params"]] if member else []
        return sorted(out.items())

    def base(self, providers: list[TypeInfo], name: str) -> Json | None:
        """The nearest provider class's definition of `name` (consumer classes between are
        passed over: the provider calls what its own class declares)."""
        for base in providers:
            table = base.names.get(name)
            if table is None:
                continue
            member = _member(base, name, table.node)
            if member is not None:
                return {**member, **self.definition(member["symbol"], table.node)}
        return None

    @staticmethod
    def declarer(info: TypeInfo, name: str) -> TypeInfo:
        return next((base for base in info.mro if name in base.names), info)

    def missing_abstract(self, info: TypeInfo) -> Iterator[Json]:
        for name, status in info.abstract_attributes:
            declarer = self.declarer(info, name)
            if status != IS_ABSTRACT or not self.is_provider(declarer.fullname):
                continue
            table = declarer.names.get(name)
            member = _member(declarer, name, table.node) if table is not None else None
            if table is not None and member is not None:
                yield {**member, **self.definition(member["symbol"], table.node)}
