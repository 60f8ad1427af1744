"""The type-checking engine behind the audit: a small interface and its mypy implementation.

An engine checks consumer modules against one provider source tree and answers with plain
data: the diagnostics it raised, the consumer expressions it resolved to provider symbols
(calls, attribute reads, imports), and the consumer classes deriving from provider classes
(each method they define, with the provider definition it overrides). Everything
provider-specific (which errors matter, the differential, the report) lives above this
interface.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import threading
import tokenize
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from io import StringIO
from pathlib import Path
from typing import Any, Protocol

from mypy.version import __version__ as mypy_version

from patchwheel.errors import AuditError
from patchwheel.upstream.cache import default_root

#: Packages of the auditing environment that mypy may read while checking a provider: without
#: them, a provider's pydantic dataclasses lose their constructors and every call looks wrong.
TYPING_PACKAGES = ("pydantic", "pydantic_core", "annotated_types", "typing_inspection")

DEFAULT_PYTHON_VERSION = "3.12"


@dataclass(frozen=True)
class ConsumerModule:
    """One consumer source file to check, and the module name it is imported as."""

    path: Path
    module: str


@dataclass(frozen=True)
class CheckRequest:
    """Check `modules` against the provider whose top-level packages are `provider_dirs`."""

    modules: tuple[ConsumerModule, ...]
    provider_dirs: tuple[Path, ...]
    python_version: str = DEFAULT_PYTHON_VERSION

    @property
    def provider_packages(self) -> tuple[str, ...]:
        return tuple(directory.name for directory in self.provider_dirs)


@dataclass(frozen=True)
class Diagnostic:
    """An error the engine raised in a consumer file (`column` is 0-based)."""

    path: Path
    line: int
    column: int
    code: str
    message: str
    hint: str | None = None


@dataclass(frozen=True)
class Param:
    """One parameter of a provider callable, as an engine or griffe sees it."""

    name: str
    kind: str  # positional-only | positional-or-keyword | var-positional | keyword-only | ...
    annotation: str | None = None
    default: str | None = None

    @property
    def required(self) -> bool:
        return self.default is None and not self.kind.startswith("var-")


@dataclass(frozen=True)
class EngineSignature:
    """The engine's view of a callable (synthesized constructors included)."""

    params: tuple[Param, ...]
    returns: str | None = None


@dataclass(frozen=True)
class Reference:
    """A consumer expression the engine resolved to a provider symbol.

    `role` is ``call``, ``attribute`` (of a provider class or instance), ``module-attribute``
    or ``import``; `name` the name written at the site; `symbol` the qualified provider name
    (the defining class for inherited members). `found` is False where the provider lacks it
    (then `def_*` point at the owner), `checked` False where the engine cannot judge the
    site (a class with an unresolved base accepts any attribute; a call through ``Any``).
    """

    path: Path
    line: int
    column: int
    role: str
    name: str
    symbol: str
    found: bool
    checked: bool = True
    def_module: str | None = None
    def_path: Path | None = None
    def_line: int | None = None
    signature: EngineSignature | None = None
    annotation: str | None = None
    owner: str | None = None  # attributes: the class the access was made on


@dataclass(frozen=True)
class Member:
    """A method (or attribute) of a class as the engine sees it, and where it is defined.

    `binding` is ``instance``, ``class``, ``static``, ``property`` or ``attribute``; `params`
    are the parameters a caller passes (``self``/``cls`` aside).
    """

    symbol: str
    binding: str
    params: tuple[Param, ...] = ()
    def_module: str | None = None
    def_path: Path | None = None
    def_line: int | None = None
    abstract: bool = False

    @property
    def name(self) -> str:
        return self.symbol.rsplit(".", 1)[-1]


@dataclass(frozen=True)
class Method:
    """A method a consumer class defines, and the provider definition it overrides (if any)."""

    line: int
    column: int
    own: Member
    base: Member | None  # the nearest provider class's definition of the same name

    @property
    def name(self) -> str:
        return self.own.name


@dataclass(frozen=True)
class ClassRecord:
    """A consumer class deriving (directly or not) from provider classes.

    `provider_members` names every method the provider classes of its MRO define, with its
    parameter names (to tell a renamed hook); `missing_abstract` the provider's abstract
    methods nothing in the MRO implements; `abstract` whether the class declares abstract
    methods itself (then it is a base for other consumer classes, and its unimplemented ones
    are not its fault).
    """

    path: Path
    line: int
    symbol: str
    provider_bases: tuple[str, ...]
    provider_members: tuple[tuple[str, tuple[str, ...]], ...]
    methods: tuple[Method, ...]
    missing_abstract: tuple[Member, ...] = ()
    abstract: bool = False

    @property
    def name(self) -> str:
        return self.symbol.rsplit(".", 1)[-1]


@dataclass(frozen=True)
class CheckResult:
    diagnostics: tuple[Diagnostic, ...]
    references: tuple[Reference, ...]
    classes: tuple[ClassRecord, ...] = ()


class Engine(Protocol):
    """A static checker the audit can drive."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> str: ...

    def check(self, requests: Sequence[CheckRequest]) -> list[CheckResult]:
        """Check each request (concurrently where possible); one result per request, in order."""
        ...


def default_cache_dir() -> Path:
    """Where the audit keeps its engine caches: ``audit/`` in patchwheel's cache."""
    return default_root() / "audit"


def neutral_text(path: Path) -> str:
    """The file's text with ``# type: ignore`` and ``# mypy:`` comments blanked.

    Those comments were written for the consumer's own checks (where the provider is usually
    ``Any``); left in, they would hide provider drift on their lines. Blanking keeps every
    line and column in place.
    """
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    try:
        tokens = list(tokenize.generate_tokens(StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return text
    for token in tokens:
        body = token.string.lstrip("#").strip()
        if token.type == tokenize.COMMENT and body.startswith(("type:", "mypy:")):
            row, col = token.start
            line = lines[row - 1]
            end = col + len(token.string)
            lines[row - 1] = line[:col] + " " * (end - col) + line[end:]
    return "".join(lines)


@dataclass
class MypyEngine:
    """mypy as the engine: ``follow_imports=silent``, the provider on ``mypy_path``.

    Missing imports are ignored except inside the provider's packages, so the consumer's
    torch/transformers become ``Any`` while a vanished provider module is an error. Each
    provider tree gets its own incremental cache under `cache_dir` (a warm audit re-checks only
    the consumer) and each request runs in its own process, so a baseline and a new provider
    are checked in parallel.
    """

    cache_dir: Path = field(default_factory=default_cache_dir)
    typing_packages: tuple[str, ...] = TYPING_PACKAGES
    timeout_s: float = 900.0
    name: str = "mypy"

    @property
    def version(self) -> str:
        return mypy_version

    def check(self, requests: Sequence[CheckRequest]) -> list[CheckResult]:
        unique = list(dict.fromkeys(requests))
        with ThreadPoolExecutor(max_workers=max(1, len(unique))) as pool:
            results = dict(zip(unique, pool.map(self._check_one, unique), strict=True))
        return [results[request] for request in requests]

    # -- one request -----------------------------------------------------------------------

    def _typing_dirs(self) -> list[Path]:
        dirs = []
        for package in self.typing_packages:
            spec = importlib.util.find_spec(package)
            if spec is not None and spec.submodule_search_locations:
                dirs.append(Path(next(iter(spec.submodule_search_locations))))
        return dirs

    def _view(self, request: CheckRequest, typing_dirs: list[Path]) -> tuple[Path, Path]:
        """A directory of links to the provider's (and typing helpers') packages, and a cache.

        mypy sees only these packages, never the provider's tests or setup scripts, nor the
        auditing environment's site-packages. Both paths are stable per provider tree, so
        the incremental cache stays warm between audits.
        """
        targets = sorted({*(p.resolve() for p in request.provider_dirs), *typing_dirs})
        key = hashlib.sha256(
            "\n".join([self.version, request.python_version, *map(str, targets)]).encode()
        ).hexdigest()[:16]
        base = self.cache_dir / "mypy" / key
        view = base / "view"
        view.mkdir(parents=True, exist_ok=True)
        for target in targets:
            link = view / target.name
            if link.is_symlink() and link.resolve() == target:
                continue
            partial = view / f".{target.name}.{os.getpid()}.{threading.get_ident()}"
            partial.symlink_to(target, target_is_directory=True)
            partial.replace(link)  # atomic: a concurrent audit sees the old link or the new one
        return view, base / "cache"

    def _check_one(self, request: CheckRequest) -> CheckResult:
        for directory in request.provider_dirs:
            if not (directory / "__init__.py").is_file():
                raise AuditError(
                    f"provider package {directory} has no __init__.py: point the audit at the "
                    "provider's source tree (the directory holding its top-level package)"
                )
        typing_dirs = [d for d in self._typing_dirs() if d.name not in request.provider_packages]
        view, cache = self._view(request, typing_dirs)
        payload: dict[str, Any] = {
            "sources": [
                {"path": str(m.path), "module": m.module, "text": neutral_text(m.path)}
                for m in request.modules
            ],
            "mypy_path": [str(view)],
            "cache_dir": str(cache),
            "python_version": request.python_version,
            "provider_packages": list(request.provider_packages),
            "quiet_packages": [d.name for d in typing_dirs],
        }
        answer = self._run_worker(payload, view.parent)
        if "error" in answer:
            providers = ", ".join(map(str, request.provider_dirs))
            raise AuditError(
                f"mypy could not check the consumer against {providers}: {answer['error']}"
            )
        errors = [d for d in answer["diagnostics"] if d["severity"] == "error"]
        return CheckResult(
            diagnostics=tuple(_diagnostic(d) for d in errors),
            references=tuple(_reference(r, view) for r in answer["references"]),
            classes=tuple(_class_record(c, view) for c in answer.get("classes", [])),
        )

    def _run_worker(self, payload: dict[str, Any], workdir: Path) -> dict[str, Any]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MYPY")}
        package_root = Path(__file__).resolve().parents[2]
        paths = [str(package_root), env.get("PYTHONPATH", "")]
        env["PYTHONPATH"] = os.pathsep.join(filter(None, paths))
        with tempfile.TemporaryDirectory(dir=workdir) as scratch:
            payload["answer"] = str(Path(scratch) / "answer.json")
            try:
                completed = subprocess.run(
                    [sys.executable, "-m", "patchwheel.audit._mypy_worker"],
                    input=json.dumps(payload),
                    capture_output=True,
                    text=True,
                    cwd=scratch,
                    env=env,
                    check=False,
                    timeout=self.timeout_s,
                )
            except subprocess.TimeoutExpired as exc:
                raise AuditError(
                    f"mypy did not finish within {self.timeout_s:.0f} s (engine cache "
                    f"{workdir}): retry, or remove that directory if a run left it broken"
                ) from exc
            answer_path = Path(payload["answer"])
            if not answer_path.is_file():
                raise AuditError(
                    f"the mypy worker stopped (exit status {completed.returncode}) without an "
                    f"answer:\n{completed.stderr.strip()[-2000:]}"
                )
            answer: dict[str, Any] = json.loads(answer_path.read_text())
        return answer


def _diagnostic(raw: dict[str, Any]) -> Diagnostic:
    return Diagnostic(
        path=Path(raw["path"]),
        line=raw["line"],
        column=raw["column"],
        code=raw["code"],
        message=raw["message"],
        hint=raw.get("hint"),
    )


def _real_path(path: str | None, view: Path) -> Path | None:
    """Map a path mypy saw through the view back to the provider's own file."""
    if path is None:
        return None
    candidate = Path(path)
    if not candidate.is_absolute():
        candidate = view / candidate
    return candidate.resolve()


def _reference(raw: dict[str, Any], view: Path) -> Reference:
    signature = raw.get("signature")
    return Reference(
        path=Path(raw["path"]),
        line=raw["line"],
        column=raw["column"],
        role=raw["role"],
        name=raw["name"],
        symbol=raw["symbol"],
        found=raw["found"],
        checked=raw.get("checked", True),
        def_module=raw.get("def_module"),
        def_path=_real_path(raw.get("def_path"), view),
        def_line=raw.get("def_line"),
        signature=(
            EngineSignature(
                params=tuple(Param(**p) for p in signature["params"]),
                returns=signature.get("returns"),
            )
            if signature
            else None
        ),
        annotation=raw.get("annotation"),
        owner=raw.get("owner"),
    )


def _member(raw: dict[str, Any], view: Path) -> Member:
    return Member(
        symbol=raw["symbol"],
        binding=raw["binding"],
        params=tuple(Param(**p) for p in raw.get("params", [])),
        def_module=raw.get("def_module"),
        def_path=_real_path(raw.get("def_path"), view),
        def_line=raw.get("def_line"),
        abstract=raw.get("abstract", False),
    )


def _class_record(raw: dict[str, Any], view: Path) -> ClassRecord:
    return ClassRecord(
        path=Path(raw["path"]),
        line=raw["line"],
        symbol=raw["symbol"],
        provider_bases=tuple(raw["provider_bases"]),
        provider_members=tuple((name, tuple(params)) for name, params in raw["provider_members"]),
        methods=tuple(
            Method(
                line=m["line"],
                column=m["column"],
                own=_member(m["own"], view),
                base=_member(m["base"], view) if m.get("base") else None,
            )
            for m in raw["methods"]
        ),
        missing_abstract=tuple(_member(m, view) for m in raw.get("missing_abstract", [])),
        abstract=raw.get("abstract", False),
    )
