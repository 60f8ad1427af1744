"""The audit's parts that need no type checker: trees, pins, comments, signatures, messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchwheel.audit.engine import Param, neutral_text
from patchwheel.audit.findings import normalize
from patchwheel.audit.layout import consumer_modules, declared_pin, project_name, top_level_packages
from patchwheel.audit.signatures import ProviderSide, Signature, changes
from patchwheel.errors import AuditError
from tests.audit._sample import write_tree


def test_declared_pin_from_an_sdist_pkg_info(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "PKG-INFO": """
                Metadata-Version: 2.4
                Name: speculators
                Version: 0.3.0
                Requires-Dist: torch
                Requires-Dist: vllm==0.11.0; extra == "datagen"
                """
        },
    )
    assert declared_pin(tmp_path, "vllm") == "vllm==0.11.0"
    assert declared_pin(tmp_path, "VLLM") == "VLLM==0.11.0"
    assert project_name(tmp_path) == "speculators"


def test_declared_pin_from_pyproject_extras(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "pyproject.toml": """
                [project]
                name = "cons"
                dependencies = ["torch"]
                [project.optional-dependencies]
                datagen = ["vllm==0.16.0"]
                """
        },
    )
    assert declared_pin(tmp_path, "vllm") == "vllm==0.16.0"


def test_a_range_is_not_a_baseline(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {"pyproject.toml": '[project]\nname = "cons"\ndependencies = ["vllm>=0.12,<=0.16"]\n'},
    )
    with pytest.raises(AuditError, match=r"vllm>=0.12,<=0.16.*--baseline vllm==X.Y.Z"):
        declared_pin(tmp_path, "vllm")


def test_packages_in_src_and_flat_layouts(tmp_path: Path) -> None:
    src = write_tree(
        tmp_path / "src-layout",
        {
            "pyproject.toml": '[project]\nname = "my-cons"\n',
            "src/my_cons/__init__.py": "",
            "src/my_cons/sub/mod.py": "",
            "src/my_cons/tests/test_x.py": "",
            "src/my_cons/not-a-module.py": "",
        },
    )
    (package,) = top_level_packages(src)
    assert package == src / "src" / "my_cons"
    modules = {m.module for m in consumer_modules([package])}
    assert modules == {"my_cons", "my_cons.sub.mod"}

    flat = write_tree(
        tmp_path / "flat",
        {"vllm.egg-info/top_level.txt": "vllm\n", "vllm/__init__.py": "", "tests/__init__.py": ""},
    )
    assert top_level_packages(flat) == (flat / "vllm",)
    with pytest.raises(AuditError, match="no Python package nothere"):
        top_level_packages(flat, ["nothere"])


def test_neutral_text_blanks_consumer_ignores_in_place(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text(
        "# mypy: ignore-errors\n"
        "x = f(a=1)  # type: ignore[call-arg]\n"
        's = "# type: ignore is text here"  # a plain comment\n'
    )
    text = neutral_text(path)
    lines = text.splitlines()
    assert lines[0].strip() == ""
    assert lines[1].rstrip() == "x = f(a=1)"
    assert len(lines[1]) == len("x = f(a=1)  # type: ignore[call-arg]")
    assert lines[2] == 's = "# type: ignore is text here"  # a plain comment'


def test_signature_rendering() -> None:
    sig = Signature(
        "f",
        (
            Param("a", "positional-only", "int"),
            Param("b", "positional-or-keyword", "str", "'x'"),
            Param("c", "keyword-only", "bool"),
            Param("kw", "var-keyword", "object"),
        ),
        "None",
    )
    assert sig.render() == "f(a: int, /, b: str = 'x', *, c: bool, **kw: object) -> None"
    assert sig.render(keep=set()) == "f(a: int, /, …, *, c: bool, …) -> None"
    assert Signature("eos_token_id", annotation="int | None").render() == "eos_token_id: int | None"


def test_changes_between_signatures() -> None:
    old = ProviderSide(
        "m.Scheduler",
        True,
        signature=Signature(
            "Scheduler",
            (
                Param("config", "positional-or-keyword", "C"),
                Param("specs", "positional-or-keyword", "dict"),
                Param("memory", "positional-or-keyword", "int", "0"),
            ),
        ),
    )
    new = ProviderSide(
        "m.Scheduler",
        True,
        signature=Signature(
            "Scheduler",
            (
                Param("config", "positional-or-keyword", "C"),
                Param("memory", "keyword-only", "int"),
                Param("block_size", "positional-or-keyword", "int"),
                Param("log", "keyword-only", "bool", "False"),
                Param("hash", "keyword-only", "bool", "False"),
            ),
        ),
    )
    assert changes(old, new) == (
        "parameter specs removed",
        "parameter memory became keyword-only",
        "parameter memory lost its default",
        "new required parameter block_size",
        "new optional parameters log, hash",
    )
    gone = ProviderSide("m.Scheduler", False)
    assert changes(old, gone) == ("Scheduler was removed (or moved)",)


def test_normalize_drops_provider_dependent_suggestions() -> None:
    assert normalize('Module "vllm.x" has no attribute "Foo"; maybe "Fo"?') == (
        'Module "vllm.x" has no attribute "Foo"'
    )
    assert normalize('"Req" has no attribute  "eos"  (possible typo?)') == (
        '"Req" has no attribute "eos"'
    )
