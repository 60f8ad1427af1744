"""The dependency graph walked from wheel metadata for a foreign destination."""

from __future__ import annotations

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from patchwheel.wheelhouse import closure
from patchwheel.wheelhouse.destination import Destination, Installed


def _metadata(name: str, *requires: str) -> bytes:
    lines = ["Metadata-Version: 2.1", f"Name: {name}", "Version: 1.0"]
    lines += [f"Requires-Dist: {r}" for r in requires]
    return ("\n".join(lines) + "\n\n").encode()


def test_closure_follows_markers_and_extras_and_checks_installed_versions() -> None:
    metadata = {
        "app": _metadata(
            "app",
            "web[fast]>=1",
            "torch==2.11.0",
            "numba==0.65.0",
            'winonly; sys_platform == "win32"',
            'tomli; python_version < "3.11"',
            'xgrammar; platform_machine == "x86_64"',
        ),
        "web": _metadata("web", "base", 'turbo; extra == "fast"', 'docs; extra == "docs"'),
        "base": _metadata("base"),
        "turbo": _metadata("turbo", "numpy<2.4"),
        "xgrammar": _metadata("xgrammar"),
    }
    carried = {canonicalize_name(n) for n in metadata}
    env = Destination("3.12", "manylinux_2_28_x86_64").marker_environment()
    graph = closure.walk([Requirement("app")], carried, lambda n: metadata[n], env)
    assert graph.parents(canonicalize_name("turbo")) == ["web"]
    assert graph.parents(canonicalize_name("xgrammar")) == ["app"]
    assert graph.parents(canonicalize_name("app")) == [closure.REQUESTED]
    for absent in ("winonly", "tomli", "docs"):
        assert canonicalize_name(absent) not in graph.required_by

    installed = Installed(
        "gpu.txt",
        "",
        {
            canonicalize_name("torch"): Version("2.11.0+cu130"),
            canonicalize_name("numba"): Version("0.68.0"),
            canonicalize_name("numpy"): Version("2.5.2"),
        },
    )
    found = {
        (m.name, m.required_by, m.requirement)
        for m in closure.installed_mismatches(graph, installed)
    }
    assert found == {("numba", "app", "numba==0.65.0"), ("numpy", "turbo", "numpy<2.4")}
