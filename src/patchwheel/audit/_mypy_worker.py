"""The mypy side of `MypyEngine`, run as ``python -m patchwheel.audit._mypy_worker``.

Reads one JSON request on stdin, type-checks the consumer modules against the provider with
mypy's build API, and writes the diagnostics plus every consumer expression that refers to a
provider symbol (with the symbol's qualified name, definition and mypy's view of its signature)
as JSON on stdout. It then hard-exits: freeing mypy's in-memory graph takes seconds.

This module and `_mypy_classes` (the consumer's classes deriving from provider classes) are the
only ones that touch mypy's internals (build, nodes, types); the rest of the audit sees plain
JSON.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from mypy import build
from mypy.errors import CompileError
from mypy.main import process_options
from mypy.messages import format_type_bare
from mypy.modulefinder import BuildSource
from mypy.nodes import (
    ARG_NAMED,
    ARG_NAMED_OPT,
    ARG_OPT,
    ARG_POS,
    ARG_STAR,
    ARG_STAR2,
    CallExpr,
    Decorator,
    Expression,
    FuncDef,
    Import,
    ImportBase,
    ImportFrom,
    MemberExpr,
    MypyFile,
    NameExpr,
    OverloadedFuncDef,
    RefExpr,
    SuperExpr,
    SymbolNode,
    TypeInfo,
    Var,
)
from mypy.options import Options
from mypy.server.subexpr import get_subexpressions
from mypy.types import (
    AnyType,
    CallableType,
    Instance,
    Overloaded,
    ProperType,
    Type,
    TypeType,
    UnionType,
    get_proper_type,
)

from patchwheel.audit._mypy_classes import ClassCollector

Json = dict[str, Any]

_KINDS = {
    ARG_POS: ("positional-or-keyword", True),
    ARG_OPT: ("positional-or-keyword", False),
    ARG_STAR: ("var-positional", False),
    ARG_NAMED: ("keyword-only", True),
    ARG_NAMED_OPT: ("keyword-only", False),
    ARG_STAR2: ("var-keyword", False),
}


def _config(request: Json) -> str:
    """The mypy configuration of one audit: the documented flags, written as an ini file."""
    lines = [
        "[mypy]",
        f"python_version = {request['python_version']}",
        "follow_imports = silent",
        "ignore_missing_imports = True",
        "check_untyped_defs = True",
        "no_site_packages = True",
        "show_absolute_path = True",
        "incremental = True",
        f"cache_dir = {request['cache_dir']}",
        f"mypy_path = {os.pathsep.join(request['mypy_path'])}",
    ]
    for package in request["provider_packages"]:
        lines += [f"[mypy-{package}.*]", "ignore_missing_imports = False"]
    return "\n".join(lines) + "\n"


def _options(request: Json, config_file: Path) -> Options:
    _, options = process_options(
        ["--config-file", str(config_file), "--output", "json"], require_targets=False
    )
    # Keep the consumer's trees and types for symbol resolution; everything else (provider,
    # typing helpers) is checked the fast way, bodies skipped, as follow_imports=silent does.
    options.export_types = True
    options.preserve_asts = True
    for package in (*request["provider_packages"], *request["quiet_packages"]):
        options.per_module_options.setdefault(f"{package}.*", {})["preserve_asts"] = False
    return options


def _proper(types: Mapping[Expression, Type], expr: Expression) -> ProperType | None:
    typ = types.get(expr)
    return get_proper_type(typ) if typ is not None else None


class _Resolver:
    """Turns mypy nodes and types of one build into reference records."""

    def __init__(self, result: build.BuildResult, options: Options, providers: set[str]) -> None:
        self.files = result.files
        self.types = result.types
        self.options = options
        self.providers = providers

    def is_provider(self, fullname: str) -> bool:
        return fullname.split(".", 1)[0] in self.providers

    def module_of(self, fullname: str) -> str | None:
        """The longest prefix of `fullname` that is a module of this build."""
        parts = fullname.split(".")
        for end in range(len(parts), 0, -1):
            candidate = ".".join(parts[:end])
            if candidate in self.files:
                return candidate
        return None

    def definition(self, fullname: str, node: SymbolNode | None) -> Json:
        module = self.module_of(fullname)
        line = 1 if isinstance(node, MypyFile) else (node.line if node is not None else None)
        path = self.files[module].path if module is not None else None
        return {"def_module": module, "def_path": path, "def_line": line}

    def fmt(self, typ: Type) -> str:
        return format_type_bare(typ, self.options)

    def signature(self, typ: ProperType | None) -> Json | None:
        if isinstance(typ, Overloaded):
            typ = typ.items[0]
        if not isinstance(typ, CallableType):
            return None
        params = []
        for name, kind, arg_type in zip(typ.arg_names, typ.arg_kinds, typ.arg_types, strict=True):
            label, required = _KINDS[kind]
            if name is None and kind in (ARG_POS, ARG_OPT):
                label = "positional-only"
            params.append(
                {
                    "name": name or "",
                    "kind": label,
                    "annotation": self.fmt(arg_type),
                    "default": None if required or kind in (ARG_STAR, ARG_STAR2) else "...",
                }
            )
        return {"params": params, "returns": self.fmt(typ.ret_type)}

    def ref(
        self,
        site: Expression | ImportBase,
        role: str,
        name: str,
        symbol: str,
        node: SymbolNode | None,
    ) -> Json:
        """A reference record: the consumer site, the provider symbol and its definition."""
        return {
            "line": site.line,
            "column": site.column,
            "role": role,
            "name": name,
            "symbol": symbol,
            "found": node is not None,
            "checked": True,
            **self.definition(symbol, node),
        }

    # -- calls -----------------------------------------------------------------------------

    def call(self, call: CallExpr) -> Iterator[Json]:
        callee = call.callee
        callee_type = _proper(self.types, callee)
        name = callee.name if isinstance(callee, NameExpr | MemberExpr | SuperExpr) else ""
        target: SymbolNode | None = None
        if isinstance(callee, RefExpr) and isinstance(callee.node, TypeInfo):
            target = callee.node
        elif isinstance(callee_type, CallableType | Overloaded):
            items = callee_type.items if isinstance(callee_type, Overloaded) else [callee_type]
            target = items[0].definition
            if isinstance(target, FuncDef) and target.info and target.name == "__init__":
                target = target.info
        elif isinstance(callee_type, TypeType) and isinstance(callee_type.item, Instance):
            target = callee_type.item.type
        if target is not None and self.is_provider(target.fullname):
            record = self.ref(call, "call", name, target.fullname, target)
            record["signature"] = self.signature(callee_type)
            yield record
        elif (
            isinstance(callee_type, AnyType)
            and isinstance(callee, RefExpr)
            and self.is_provider(callee.fullname or "")
        ):
            record = self.ref(call, "call", name, callee.fullname, callee.node)
            record["checked"] = False
            yield record

    # -- attributes ------------------------------------------------------------------------

    def owners(self, typ: ProperType | None) -> list[TypeInfo]:
        """The classes an attribute access reads from (of an instance, a class, a union)."""
        if isinstance(typ, Instance):
            return [typ.type]
        if isinstance(typ, TypeType) and isinstance(typ.item, Instance):
            return [typ.item.type]
        if isinstance(typ, CallableType) and typ.is_type_obj():
            return [typ.type_object()]
        if isinstance(typ, UnionType):
            return [info for item in typ.items for info in self.owners(get_proper_type(item))]
        return []

    def provider_class(self, info: TypeInfo) -> TypeInfo | None:
        """The first provider class in `info`'s MRO (itself included)."""
        return next((base for base in info.mro if self.is_provider(base.fullname)), None)

    def member(self, expr: MemberExpr) -> Iterator[Json]:
        receiver = expr.expr
        if isinstance(receiver, RefExpr) and isinstance(receiver.node, MypyFile):
            module = receiver.node
            if self.is_provider(module.fullname):
                table = module.names.get(expr.name)
                node = table.node if table is not None else None
                symbol = node.fullname if node is not None else f"{module.fullname}.{expr.name}"
                yield self.ref(expr, "module-attribute", expr.name, symbol, node)
            return
        for info in self.owners(_proper(self.types, receiver)):
            provider = self.provider_class(info)
            if provider is None:
                continue
            table = info.get(expr.name)
            owner = info.get_containing_type_info(expr.name)
            if table is not None and owner is not None:
                if not self.is_provider(owner.fullname):
                    continue
                symbol = f"{owner.fullname}.{expr.name}"
                record = self.ref(expr, "attribute", expr.name, symbol, table.node)
                record["annotation"] = self.attribute_type(table.node)
            else:
                symbol = f"{provider.fullname}.{expr.name}"
                record = self.ref(expr, "attribute", expr.name, symbol, None)
                record.update(self.definition(provider.fullname, provider))
                record["checked"] = not info.fallback_to_any
            record["owner"] = info.fullname
            yield record

    def attribute_type(self, node: SymbolNode | None) -> str | None:
        if isinstance(node, Var) and node.type is not None:
            return self.fmt(node.type)
        if isinstance(node, FuncDef | OverloadedFuncDef | Decorator):
            return "method"
        return None

    # -- imports ---------------------------------------------------------------------------

    def imports(self, tree: MypyFile) -> Iterator[Json]:
        for imp in tree.imports:
            if isinstance(imp, Import):
                for module, _ in imp.ids:
                    if self.is_provider(module):
                        yield self.ref(imp, "import", module, module, self.files.get(module))
            elif isinstance(imp, ImportFrom) and imp.relative == 0 and self.is_provider(imp.id):
                for name, _ in imp.names:
                    yield self.imported(imp, imp.id, name)

    def imported(self, imp: ImportFrom, module: str, name: str) -> Json:
        """``from module import name``: the name's definition (through re-exports)."""
        tree = self.files.get(module)
        table = tree.names.get(name) if tree is not None else None
        node = self.files.get(f"{module}.{name}") if table is None else table.node
        symbol = node.fullname if node is not None else f"{module}.{name}"
        return self.ref(imp, "import", name, symbol, node)

    def references(self, tree: MypyFile) -> Iterator[Json]:
        yield from self.imports(tree)
        for expr in get_subexpressions(tree):
            if isinstance(expr, CallExpr):
                yield from self.call(expr)
            elif isinstance(expr, MemberExpr):
                yield from self.member(expr)


def _diagnostic(line: str) -> Json:
    raw = json.loads(line)
    return {
        "path": raw["file"],
        "line": raw["line"],
        "column": max(raw["column"], 0),
        "code": raw.get("code") or "",
        "severity": raw["severity"],
        "message": raw["message"],
        "hint": raw.get("hint"),
    }


def check(request: Json) -> Json:
    """Type-check `request['sources']` and describe every provider reference they make."""
    cache_dir = Path(request["cache_dir"])
    cache_dir.mkdir(parents=True, exist_ok=True)
    with (cache_dir / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build per cache at a time
        config = cache_dir / "mypy.ini"
        config.write_text(_config(request))
        options = _options(request, config)
        sources = [
            BuildSource(item["path"], item["module"], item["text"]) for item in request["sources"]
        ]
        try:
            result = build.build(sources, options)
        except CompileError as error:
            return {"error": "\n".join(error.messages)}
    resolver = _Resolver(result, options, set(request["provider_packages"]))
    collector = ClassCollector(resolver.is_provider, resolver.definition)
    references, classes = [], []
    for item in request["sources"]:
        tree = result.files.get(item["module"])
        if tree is None:
            continue
        for record in resolver.references(tree):
            references.append({"path": item["path"], **record})
        for record in collector.records(tree):
            classes.append({"path": item["path"], **record})
    return {
        "diagnostics": [_diagnostic(line) for line in result.errors],
        "references": references,
        "classes": classes,
    }


def main() -> None:
    request = json.load(sys.stdin)
    try:
        answer = check(request)
    except Exception as error:  # reported to the parent as data
        answer = {"error": f"{type(error).__name__}: {error}"}
    # Write atomically to the file the parent named, then leave without tearing mypy down.
    out = Path(request["answer"])
    with tempfile.NamedTemporaryFile("w", dir=out.parent, delete=False) as handle:
        json.dump(answer, handle)
    Path(handle.name).replace(out)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
