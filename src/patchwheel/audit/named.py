"""Classes and methods a consumer names by string, for the provider to resolve at run time.

vLLM resolves some of a plugin's names itself: a KV connector from ``"kv_connector": "Name"``
(its registry, ``KVConnectorFactory.register_connector(name, module, class)`` calls, unless
``"kv_connector_module_path"`` names the module), a class path such as
``worker_extension_cls="pkg.mod.Cls"`` (and the extension's names must not clash with the
worker's), a worker method from ``collective_rpc("name", args=…)``. The consumer's sources are
scanned for those sites (:func:`scan`); each literal is resolved statically against the
provider's registry and modules at a pin (:class:`Resolver`). A site whose name is not a
literal cannot be resolved: it is listed as a blind spot, never dropped.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from patchwheel.audit.engine import ConsumerModule
from patchwheel.audit.static import StaticTree, Symbol


@dataclass(frozen=True)
class NamingRules:
    """Where a provider resolves names given as strings (defaults: vLLM's)."""

    connector_keys: tuple[str, ...] = ("kv_connector",)
    module_keys: tuple[str, ...] = ("kv_connector_module_path",)
    class_keys: tuple[str, ...] = ("worker_extension_cls", "worker_cls")
    extension_keys: tuple[str, ...] = ("worker_extension_cls",)
    rpc_calls: tuple[str, ...] = ("collective_rpc",)
    registry_modules: tuple[str, ...] = ("vllm.distributed.kv_transfer.kv_connector.factory",)
    register_call: str = "register_connector"
    worker_classes: tuple[str, ...] = (
        "vllm.v1.worker.gpu_worker.Worker",
        "vllm.v1.worker.cpu_worker.CPUWorker",
    )
    rpc_wrappers: tuple[str, ...] = ("vllm.v1.worker.worker_base.WorkerWrapperBase",)


VLLM = NamingRules()
#: A provider whose string conventions the audit does not know: nothing is scanned.
NO_NAMES = NamingRules((), (), (), (), (), (), "", (), ())


def rules_for(packages: Sequence[str]) -> NamingRules:
    """The naming rules of a provider, by its top-level packages (vLLM's, or none)."""
    return VLLM if "vllm" in packages else NO_NAMES


@dataclass(frozen=True)
class Site:
    """One string a consumer hands the provider to resolve.

    `role`: ``connector`` (a registry name, or a class in `module`), ``module``, ``class``
    (a dotted class path) or ``rpc`` (a worker method); `value` None when the string is built
    at run time. For ``rpc``: `args`, the number of positional arguments passed (None when not
    a literal tuple) and `kwargs`, the keyword names (None when not a literal dict).
    """

    path: Path
    line: int
    column: int
    role: str
    key: str
    value: str | None
    module: str | None = None
    args: int | None = 0
    kwargs: tuple[str, ...] | None = ()

    @property
    def written(self) -> str:
        return f"{self.key}={self.value!r}" if self.value is not None else f"{self.key}=…"


def _literal(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


class _Scanner:
    def __init__(self, path: Path, rules: NamingRules, functions: set[str]) -> None:
        self.path = path
        self.rules = rules
        self.functions = functions
        self.keys = {
            **dict.fromkeys(rules.connector_keys, "connector"),
            **dict.fromkeys(rules.module_keys, "module"),
            **dict.fromkeys(rules.class_keys, "class"),
        }

    def pairs(self, pairs: list[tuple[str, ast.expr]], at: ast.AST) -> Iterator[Site]:
        """Sites of one mapping (a dict display, a call's keywords or a JSON string)."""
        given = dict(pairs)
        module = next((_literal(given[k]) for k in self.rules.module_keys if k in given), None)
        for key, value in pairs:
            role = self.keys.get(key)
            if role is None:
                continue
            node = value if hasattr(value, "lineno") else at
            yield Site(
                self.path,
                getattr(node, "lineno", 1),
                getattr(node, "col_offset", 0),
                role,
                key,
                _literal(value),
                module if role == "connector" else None,
            )

    def rpc(self, call: ast.Call) -> Site | None:
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name not in self.rules.rpc_calls:
            return None
        given = {k.arg: k.value for k in call.keywords if k.arg}
        method = call.args[0] if call.args else given.get("method")
        if method is None or isinstance(method, ast.Lambda):
            return None  # a callable, not a name
        if isinstance(method, ast.Name) and method.id in self.functions:
            return None
        args = given.get("args", call.args[1] if len(call.args) > 1 else None)
        kwargs = given.get("kwargs", call.args[3] if len(call.args) > 3 else None)
        count = (
            0
            if args is None
            else len(args.elts)
            if isinstance(args, ast.Tuple | ast.List)
            and not any(isinstance(e, ast.Starred) for e in args.elts)
            else None
        )
        names = (
            ()
            if kwargs is None
            else tuple(k for k in map(_literal, kwargs.keys) if k is not None)
            if isinstance(kwargs, ast.Dict) and all(_literal(k) for k in kwargs.keys)
            else None
        )
        return Site(
            self.path, method.lineno, method.col_offset, "rpc", name, _literal(method), None,
            count, names,
        )  # fmt: skip

    def scan(self, tree: ast.Module) -> Iterator[Site]:
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict):
                keyed = [(_literal(k), v) for k, v in zip(node.keys, node.values, strict=True)]
                yield from self.pairs([(k, v) for k, v in keyed if k is not None], node)
            elif isinstance(node, ast.Call):
                yield from self.pairs([(k.arg, k.value) for k in node.keywords if k.arg], node)
                site = self.rpc(node)
                if site is not None:
                    yield site
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                yield from self.json(node)

    def json(self, node: ast.Constant) -> Iterator[Site]:
        """A ``--kv-transfer-config``-style JSON string literal."""
        text = node.value
        if not isinstance(text, str):
            return
        if not (text.lstrip().startswith("{") and any(k in text for k in self.keys)):
            return
        try:
            data = json.loads(text)
        except ValueError:
            return
        if isinstance(data, dict):
            pairs: list[tuple[str, ast.expr]] = [
                (str(k), ast.Constant(v if isinstance(v, str) else None)) for k, v in data.items()
            ]
            for site in self.pairs(pairs, node):
                yield Site(
                    site.path, node.lineno, node.col_offset, site.role, site.key, site.value,
                    site.module,
                )  # fmt: skip


def scan(modules: Sequence[ConsumerModule], rules: NamingRules = VLLM) -> list[Site]:
    """Every site of the consumer's modules that names something for the provider to resolve."""
    out: list[Site] = []
    for module in modules:
        try:
            tree = ast.parse(module.path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
            continue
        functions = {
            n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        }
        out += _Scanner(module.path, rules, functions).scan(tree)
    return sorted(set(out), key=lambda s: (str(s.path), s.line, s.column, s.role, s.key))


@dataclass(frozen=True)
class Resolution:
    """A site at one pin: what it resolved to (`symbol` None: unresolved, `reason` says why).

    `owner`: whether the symbol is the provider's or the consumer's; `conflicts`: for a worker
    extension, ``(name, worker class, line)`` of each name a worker class already has.
    """

    symbol: Symbol | None
    reason: str = ""
    owner: str = ""  # provider | consumer
    conflicts: tuple[tuple[str, Symbol, int], ...] = ()


class Resolver:
    """Resolves sites against one provider tree (and the consumer's own packages)."""

    def __init__(
        self,
        consumer_dirs: Sequence[Path],
        provider_dirs: Sequence[Path],
        sites: Sequence[Site],
        rules: NamingRules = VLLM,
    ) -> None:
        self.consumer = {d.name for d in consumer_dirs}
        self.consumer_tree = StaticTree(consumer_dirs)
        self.tree = StaticTree([*consumer_dirs, *provider_dirs])
        self.provider = StaticTree(provider_dirs)
        self.rules = rules
        self.extensions = [
            s.value for s in sites if s.key in rules.extension_keys and s.value is not None
        ]
        self._registry: dict[str, str] | None = None
        self._resolved: dict[Site, Resolution] = {}

    def owner(self, symbol: Symbol) -> str:
        return "consumer" if symbol.module.split(".")[0] in self.consumer else "provider"

    def registry(self) -> dict[str, str]:
        """Connector name -> ``module.Class``, from the provider's registration calls, and the
        consumer's own (a plugin may register its connectors under a name)."""
        if self._registry is None:
            needle = f"{self.rules.register_call}("
            files = [p for p in map(self.provider.file, self.rules.registry_modules) if p]
            if not files:  # the registry moved: find it
                files = [p for p in self.provider.files if needle in _text(p)]
            files += [p for p in self.consumer_tree.files if needle in _text(p)]
            self._registry = {}
            for path in files:
                self._registry.update(_registrations(path, self.rules.register_call))
        return self._registry

    def _class(self, dotted: str, what: str) -> Resolution:
        symbol = self.tree.resolve(dotted)
        if symbol is None or symbol.kind not in ("class", "value", "def"):
            module, _, name = dotted.rpartition(".")
            there = self.tree.resolve(module) if module else None
            reason = (
                f"{what} {dotted}: no module {module}"
                if there is None
                else f"{what} {dotted}: {module} has no {name}"
            )
            return Resolution(None, reason)
        return Resolution(symbol, owner=self.owner(symbol))

    def resolve(self, site: Site) -> Resolution:
        """What the literal of `site` names at this pin (resolved once per site)."""
        if site not in self._resolved:
            self._resolved[site] = self._resolve(site)
        return self._resolved[site]

    def _resolve(self, site: Site) -> Resolution:
        assert site.value is not None
        if site.role == "module":
            symbol = self.tree.resolve(site.value)
            if symbol is None or symbol.kind != "module":
                return Resolution(None, f"no module {site.value}")
            return Resolution(symbol, owner=self.owner(symbol))
        if site.role == "class":
            found = self._class(site.value, "class path")
            if site.key in self.rules.extension_keys and found.symbol is not None:
                return Resolution(found.symbol, owner=found.owner, conflicts=self._clashes(site))
            return found
        if site.role == "connector":
            if site.module is not None:
                return self._class(f"{site.module}.{site.value}", "connector")
            target = self.registry().get(site.value)
            if target is None:
                return Resolution(None, f"connector {site.value!r} is not registered")
            found = self._class(target, f"connector {site.value!r}, registered as")
            return found
        return self._method(site)

    def _clashes(self, site: Site) -> tuple[tuple[str, Symbol, int], ...]:
        """Names of the extension the worker classes already have (vLLM refuses them)."""
        assert site.value is not None
        mine = self.tree.members(site.value)
        out = []
        for worker in self.rules.worker_classes:
            theirs = self.provider.members(worker)
            for name in sorted(mine):
                if not name.startswith("__") and name in theirs:
                    out.append((name, *theirs[name]))
        return tuple(dict.fromkeys(out))

    def _method(self, site: Site) -> Resolution:
        """A worker method named in ``collective_rpc``: on the wrapper, the worker, or an
        extension the consumer names."""
        assert site.value is not None
        owners = [*self.rules.rpc_wrappers, *self.rules.worker_classes]
        found = [c for c in owners if self.provider.resolve(c) is not None]
        if not found:
            return Resolution(None, "no worker class at this pin: " + ", ".join(owners))
        for owner in (*found, *self.extensions):
            members = (self.provider if owner in found else self.tree).members(owner)
            if site.value in members:
                cls, line = members[site.value]
                symbol = Symbol(f"{cls.dotted}.{site.value}", "def", cls.module, cls.path, line)
                return Resolution(symbol, owner=self.owner(cls))
        return Resolution(None, f"no worker method {site.value} ({', '.join(found)})")


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _registrations(path: Path, call: str) -> dict[str, str]:
    """``X.register_connector("name", "module", "Class")`` calls of one file."""
    try:
        tree = ast.parse(_text(path))
    except (SyntaxError, ValueError):
        return {}
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr == call):
            continue
        values = [_literal(a) for a in node.args[:3]]
        if len(values) == 3 and all(values):
            name, module, cls = values
            out[str(name)] = f"{module}.{cls}"
    return out
