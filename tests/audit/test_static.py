"""Names read statically (`audit/static.py`): modules, re-exports, class members through bases,
and strings that name nothing (or try to name a path) resolve to nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchwheel.audit.engine import ConsumerModule
from patchwheel.audit.named import VLLM, scan
from patchwheel.audit.static import StaticTree
from tests.audit._sample import write_tree


@pytest.fixture
def tree(tmp_path: Path) -> StaticTree:
    root = write_tree(
        tmp_path,
        {
            "pkg/__init__.py": "from .workers.gpu import Worker as Worker\n",
            "pkg/workers/__init__.py": "",
            "pkg/workers/base.py": """
                class WorkerBase:
                    kind = "base"
                    label: str

                    def get_spec(self) -> dict[str, int]:
                        return {}
                """,
            "pkg/workers/gpu.py": """
                from typing import Generic, TypeVar

                from . import base
                from ..mixins import Sleeping

                T = TypeVar("T")


                class Worker(base.WorkerBase, Sleeping, Generic[T]):
                    def load_model(self) -> None: ...

                    if True:
                        def conditional(self) -> None: ...
                """,
            "pkg/mixins.py": """
                class Sleeping:
                    def sleep(self) -> None: ...

                    def get_spec(self) -> dict[str, int]:
                        return {"shadowed": 1}
                """,
        },
    )
    return StaticTree([root / "pkg"])


def test_re_exports_and_relative_imports_resolve_to_the_definition(tree: StaticTree) -> None:
    symbol = tree.resolve("pkg.Worker")
    assert symbol is not None
    assert (symbol.dotted, symbol.kind, symbol.module) == (
        "pkg.workers.gpu.Worker",
        "class",
        "pkg.workers.gpu",
    )
    assert [s.dotted for s in tree.mro("pkg.Worker")] == [
        "pkg.workers.gpu.Worker",
        "pkg.workers.base.WorkerBase",
        "pkg.mixins.Sleeping",
    ]
    members = tree.members("pkg.workers.gpu.Worker")
    # First in the MRO wins; an annotation without a value is no class attribute.
    assert members["get_spec"][0].dotted == "pkg.workers.base.WorkerBase"
    assert {"load_model", "conditional", "sleep", "kind", "get_spec"} <= set(members)
    assert "label" not in members
    assert tree.resolve("pkg.workers") is not None
    assert tree.resolve("pkg.workers.gpu.Missing") is None


@pytest.mark.parametrize(
    "hostile", ["pkg..Worker", "../pkg", "pkg.workers/../x", "pkg.\u00e9t\u00e9/x", "", "os.path"]
)
def test_a_string_that_names_no_module_of_the_trees_resolves_to_nothing(
    tree: StaticTree, hostile: str
) -> None:
    assert tree.resolve(hostile) is None
    assert tree.file(hostile) is None
    assert tree.members(hostile) == {}


def test_sites_are_scanned_from_literals_keywords_and_json(tmp_path: Path) -> None:
    path = tmp_path / "plugin.py"
    path.write_text(
        """
import json

A = {"kv_connector": "X", "kv_connector_module_path": "plug.mod"}
B = dict(worker_extension_cls="plug.ext.Extension")
C = '{"kv_connector": "Shared", "kv_role": "kv_both"}'


def go(llm, name, fn):
    llm.collective_rpc("m", args=(1, 2), kwargs={"k": 3})
    llm.collective_rpc(method=name)
    llm.collective_rpc(go)
    llm.collective_rpc(lambda w: w)
    return {"kv_connector": name}
""",
        encoding="utf-8",
    )
    sites = scan([ConsumerModule(path, "plugin")], VLLM)
    seen = [(s.line, s.role, s.key, s.value, s.module, s.args, s.kwargs) for s in sites]
    assert seen == [
        (4, "connector", "kv_connector", "X", "plug.mod", 0, ()),
        (4, "module", "kv_connector_module_path", "plug.mod", None, 0, ()),
        (5, "class", "worker_extension_cls", "plug.ext.Extension", None, 0, ()),
        (6, "connector", "kv_connector", "Shared", None, 0, ()),
        (10, "rpc", "collective_rpc", "m", None, 2, ("k",)),
        (11, "rpc", "collective_rpc", None, None, 0, ()),  # named at run time: a blind spot
        (14, "connector", "kv_connector", None, None, 0, ()),
    ]
