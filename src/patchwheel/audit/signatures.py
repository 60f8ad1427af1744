"""Explain a finding: the provider symbol's old and new signature, read statically with griffe.

The engine says *where* a symbol is defined (module, file, line); griffe reads the source there
and gives the signature as written (annotations and defaults as source text). Constructors the
provider never wrote (dataclass-style ``__init__``) fall back to the engine's own view.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import griffe

from patchwheel.audit.engine import EngineSignature, Member, Param, Reference

_KIND = {
    griffe.ParameterKind.positional_only: "positional-only",
    griffe.ParameterKind.positional_or_keyword: "positional-or-keyword",
    griffe.ParameterKind.var_positional: "var-positional",
    griffe.ParameterKind.keyword_only: "keyword-only",
    griffe.ParameterKind.var_keyword: "var-keyword",
}


@dataclass(frozen=True)
class Signature:
    """What a provider symbol looks like at one version."""

    name: str
    params: tuple[Param, ...] | None = None  # None: not callable (attribute, module)
    returns: str | None = None
    annotation: str | None = None  # attributes

    def render(self, keep: Collection[str] | None = None) -> str:
        """``name(params) -> returns``; with `keep`, optional parameters not in it are elided."""
        if self.params is None:
            return f"{self.name}: {self.annotation}" if self.annotation else self.name
        parts: list[str] = []
        for param, text in _render_params(self.params):
            if keep is None or param is None or param.required or param.name in keep:
                parts.append(text)
            elif not parts or parts[-1] != "…":
                parts.append("…")
        text = f"{self.name}({', '.join(parts)})"
        return f"{text} -> {self.returns}" if self.returns else text


def _render_params(params: Sequence[Param]) -> list[tuple[Param | None, str]]:
    """Each parameter as source text, with the ``/`` and ``*`` markers (param None) between."""
    out: list[tuple[Param | None, str]] = []
    star_written = any(p.kind == "var-positional" for p in params)
    slash_due = False
    for param in params:
        if param.kind == "positional-only":
            slash_due = True
        elif slash_due:
            out.append((None, "/"))
            slash_due = False
        if param.kind == "keyword-only" and not star_written:
            out.append((None, "*"))
            star_written = True
        prefix = {"var-positional": "*", "var-keyword": "**"}.get(param.kind, "")
        text = f"{prefix}{param.name}"
        if param.annotation:
            text += f": {param.annotation}"
        if param.default is not None:
            text += f" = {param.default}" if param.annotation else f"={param.default}"
        out.append((param, text))
    if slash_due:
        out.append((None, "/"))
    return out


@dataclass(frozen=True)
class ProviderSide:
    """One side (baseline or new) of a finding's provider symbol."""

    symbol: str
    exists: bool
    location: str | None = None  # provider path (relative to its tree) and line
    signature: Signature | None = None

    def render(self, keep: Collection[str] | None = None) -> str:
        if not self.exists:
            return f"{self.symbol} (absent)"
        return self.signature.render(keep) if self.signature else self.symbol


def _module(module: str, path: Path) -> griffe.Module | None:
    """The module as griffe reads it (parsed once per file version)."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return _parse(module, path, stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=256)
def _parse(module: str, path: Path, mtime_ns: int, size: int) -> griffe.Module | None:
    del mtime_ns, size  # part of the cache key only
    try:
        return griffe.visit(module, filepath=path, code=path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None


def _lookup(
    module: str | None, path: Path | None, qualname: str
) -> griffe.Object | griffe.Alias | None:
    """The griffe object `qualname` in `module` (read from `path`), without following imports."""
    if module is None or path is None or path.suffix != ".py":
        return None
    obj: griffe.Object | griffe.Alias | None = _module(module, path)
    for part in filter(None, qualname.split(".")):
        if obj is None or obj.is_alias:
            return None
        obj = obj.members.get(part)
    return obj


def _qualname(symbol: str, module: str | None) -> str:
    if module is None or symbol == module:
        return ""
    return symbol[len(module) + 1 :] if symbol.startswith(f"{module}.") else symbol


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _griffe_params(function: griffe.Function) -> tuple[Param, ...]:
    params = [
        Param(p.name, _KIND[p.kind], _text(p.annotation), _text(p.default))
        for p in function.parameters
    ]
    bound = function.parent is not None and function.parent.is_class
    if bound and "staticmethod" not in function.labels and params:
        params = params[1:]  # self / cls
    return tuple(params)


def signature_at(module: str | None, path: Path | None, qualname: str) -> Signature | None:
    """The signature `qualname` has in `module` (read from `path`), as its source writes it:
    a function's, a class's constructor's, an attribute's annotation."""
    short = qualname.rsplit(".", 1)[-1]
    obj = _lookup(module, path, qualname)
    if isinstance(obj, griffe.Function) and not obj.is_alias:
        return Signature(short, _griffe_params(obj), _text(obj.returns))
    if isinstance(obj, griffe.Class) and not obj.is_alias:
        init = obj.members.get("__init__")
        if isinstance(init, griffe.Function):
            return Signature(short, _griffe_params(init))
    if isinstance(obj, griffe.Attribute) and not obj.is_alias and obj.annotation is not None:
        return Signature(short, annotation=_text(obj.annotation))
    return None


def signature_of(ref: Reference) -> Signature | None:
    """The signature of the symbol `ref` resolved to, from its source (or the engine)."""
    short = ref.symbol.rsplit(".", 1)[-1]
    obj = _lookup(ref.def_module, ref.def_path, _qualname(ref.symbol, ref.def_module))
    if obj is not None and obj.is_alias:
        obj = None
    if isinstance(obj, griffe.Function | griffe.Class):
        found = signature_at(ref.def_module, ref.def_path, _qualname(ref.symbol, ref.def_module))
        if found is not None:
            return found
    if isinstance(obj, griffe.Attribute):
        return Signature(short, annotation=_text(obj.annotation) or ref.annotation)
    if ref.signature is not None:
        return Signature(short, ref.signature.params, ref.signature.returns)
    if ref.annotation is not None and ref.annotation != "method":
        return Signature(short, annotation=ref.annotation)
    return None


def _line(ref: Reference, symbol: str) -> int | None:
    """The definition line, read from the source (engine caches do not keep lines)."""
    obj = _lookup(ref.def_module, ref.def_path, _qualname(symbol, ref.def_module))
    if obj is not None and not obj.is_alias and obj.lineno:
        return obj.lineno
    return ref.def_line if ref.def_line and ref.def_line > 0 else None


def describe(ref: Reference | None, symbol: str, provider_root: Path) -> ProviderSide:
    """One side of a finding: where the symbol is (or its owner, when it is gone) and its shape."""
    if ref is None:
        return ProviderSide(symbol, exists=False)
    location = None
    if ref.def_path is not None:
        try:
            relative = ref.def_path.relative_to(provider_root.resolve())
        except ValueError:
            relative = ref.def_path
        anchor = ref.symbol if ref.found else ref.symbol.rsplit(".", 1)[0]
        line = _line(ref, anchor) if ref.def_module != anchor else None
        location = f"{relative.as_posix()}:{line}" if line else relative.as_posix()
    if not ref.found:
        return ProviderSide(symbol, exists=False, location=location)
    return ProviderSide(ref.symbol, exists=True, location=location, signature=signature_of(ref))


def member_reference(member: Member) -> Reference:
    """A class member as a resolved reference (what :func:`describe` reads)."""
    return Reference(
        path=member.def_path or Path(),
        line=0,
        column=0,
        role="member",
        name=member.name,
        symbol=member.symbol,
        found=True,
        def_module=member.def_module,
        def_path=member.def_path,
        def_line=member.def_line,
        signature=EngineSignature(member.params),
    )


def describe_member(member: Member | None, symbol: str, root: Path) -> ProviderSide:
    """:func:`describe` for a class member (a provider base method, or the consumer's own)."""
    return describe(member_reference(member) if member else None, symbol, root)


def _param_diff(old: ProviderSide | None, new: ProviderSide) -> list[tuple[str, str]]:
    """(parameter name, what changed) between the two sides' signatures."""
    before = old.signature.params if old is not None and old.signature else None
    after = new.signature.params if new.signature else None
    if before is None or after is None:
        return []
    old_by_name = {p.name: p for p in before if not p.kind.startswith("var-")}
    new_by_name = {p.name: p for p in after if not p.kind.startswith("var-")}
    diff = [(n, f"parameter {n} removed") for n in old_by_name if n not in new_by_name]
    for name, param in new_by_name.items():
        previous = old_by_name.get(name)
        if previous is None:
            need = "required" if param.required else "optional"
            diff.append((name, f"new {need} parameter {name}"))
            continue
        if previous.kind != param.kind:
            diff.append((name, f"parameter {name} became {param.kind}"))
        if param.required and not previous.required:
            diff.append((name, f"parameter {name} lost its default"))
    return diff


def changed_names(old: ProviderSide | None, new: ProviderSide) -> set[str]:
    """Parameters whose presence, kind or requiredness changed (new optional ones aside)."""
    return {name for name, note in _param_diff(old, new) if "new optional" not in note}


def changes(old: ProviderSide | None, new: ProviderSide) -> tuple[str, ...]:
    """What changed between the two sides, in words (parameters by name)."""
    if old is None or not old.exists:
        return ()
    if not new.exists:
        return (f"{old.symbol.rsplit('.', 1)[-1]} was removed (or moved)",)
    diff = _param_diff(old, new)
    notes = [note for _, note in diff if "new optional" not in note]
    optional = [name for name, note in diff if "new optional" in note]
    if optional:
        plural = "s" if len(optional) > 1 else ""
        notes.append(f"new optional parameter{plural} {', '.join(optional)}")
    return tuple(notes)


_DEF = r"^[ \t]*(?:async[ \t]+def|def|class)[ \t]+{name}\b|^{name}[ \t]*(?::|=[^=])"


def relocations(names: Iterable[str], package_dirs: Sequence[Path], root: Path) -> tuple[str, ...]:
    """Where the new provider defines `names` now (a moved module or name), as path:line."""
    wanted = [n for n in names if n.isidentifier()]
    if not wanted:
        return ()
    patterns = [(n, re.compile(_DEF.format(name=re.escape(n)), re.MULTILINE)) for n in wanted]
    hits: list[str] = []
    for package in package_dirs:
        for path in sorted(package.rglob("*.py")):
            text = path.read_text(encoding="utf-8", errors="replace")
            for name, pattern in patterns:
                if name not in text:
                    continue
                found = pattern.search(text)
                if found:
                    line = text.count("\n", 0, found.start()) + 1
                    where = path.resolve().relative_to(root.resolve()).as_posix()
                    hits.append(f"{name}: {where}:{line}")
    return tuple(hits[:5])
